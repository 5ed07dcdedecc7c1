/* SPDX-License-Identifier: GPL-2.0 */
#ifndef BL_READALL_H
#define BL_READALL_H

#include <stddef.h>

/* Read fd to its end into a new buffer (*out, *outlen; free it). Returns 0,
 * EFBIG past max bytes, or another errno; on error nothing is returned. */
int bl_read_all(int fd, size_t max, char **out, size_t *outlen);

#endif
