/* SPDX-License-Identifier: GPL-2.0 */
#ifndef BL_PLAIN_H
#define BL_PLAIN_H

#include <linux/types.h>

/* Exported by bl_plain.ko (EXPORT_SYMBOL), used by bl_user.ko. */
size_t bl_plain_hello(const char *who);

#endif
