/* sysfs.h - read a module's state from SYSFS/module/NAME. */
#ifndef BL_SYSFS_H
#define BL_SYSFS_H

enum sysfs_state {
	SYSFS_ABSENT = 0, /* no SYSFS/module/NAME directory (or "going") */
	SYSFS_LIVE,       /* initstate = live */
	SYSFS_COMING,     /* initstate = coming: init running right now */
	SYSFS_BUILTIN,    /* directory present, no initstate file */
};

/* key is the normalized module name ('_' form, as in sysfs). */
enum sysfs_state sysfs_module_state(const char *sysfs, const char *key);

const char *sysfs_state_name(enum sysfs_state st);

#endif
