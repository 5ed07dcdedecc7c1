// SPDX-License-Identifier: GPL-2.0
/* Reading a file descriptor to its end: the plan, a decompressor's output. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "readall.h"

int bl_read_all(int fd, size_t max, char **out, size_t *outlen)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;

	for (;;) {
		ssize_t r;
		if (len == cap) {
			char *nb;
			if (cap >= max) {
				free(buf);
				return EFBIG;
			}
			cap = cap ? cap * 2 : 65536;
			if (cap > max)
				cap = max;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return ENOMEM;
			}
			buf = nb;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			return e;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	*out = buf;
	*outlen = len;
	return 0;
}
