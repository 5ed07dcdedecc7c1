/* SPDX-License-Identifier: GPL-2.0 */
#ifndef BL_WEAK_H
#define BL_WEAK_H
void bl_weak_hook(void);
#endif
