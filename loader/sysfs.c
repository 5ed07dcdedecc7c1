/* sysfs.c - module initstate lookup. */
#define _GNU_SOURCE
#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum sysfs_state sysfs_module_state(const char *sysfs, const char *key)
{
	char path[PATH_MAX], buf[32];
	struct stat st;
	ssize_t r;
	int fd;

	if (snprintf(path, sizeof(path), "%s/module/%s/initstate", sysfs, key) >=
	    (int)sizeof(path))
		return SYSFS_ABSENT;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			return SYSFS_ABSENT;
		/* no initstate: built in if the module directory exists */
		path[strlen(path) - strlen("/initstate")] = 0;
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return SYSFS_BUILTIN;
		return SYSFS_ABSENT;
	}
	do
		r = read(fd, buf, sizeof(buf) - 1);
	while (r < 0 && errno == EINTR);
	close(fd);
	if (r <= 0)
		return SYSFS_ABSENT;
	buf[r] = 0;
	if (strncmp(buf, "live", 4) == 0 && (buf[4] == 0 || buf[4] == '\n'))
		return SYSFS_LIVE;
	if (strncmp(buf, "coming", 6) == 0 && (buf[6] == 0 || buf[6] == '\n'))
		return SYSFS_COMING;
	/* "going" or garbage: the module is not usable; let the kernel decide */
	return SYSFS_ABSENT;
}

const char *sysfs_state_name(enum sysfs_state st)
{
	switch (st) {
	case SYSFS_LIVE: return "live";
	case SYSFS_COMING: return "coming";
	case SYSFS_BUILTIN: return "builtin";
	default: return "absent";
	}
}
