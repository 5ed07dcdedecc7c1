/* plan.h - bootlink module plan: parsing and validation.
 *
 * The plan is written by the host tool but is never trusted: every line is
 * checked, names are validated, duplicates, unknown dependencies and
 * dependency cycles are rejected with a "FILE:LINE: message" error.
 */
#ifndef BL_PLAN_H
#define BL_PLAN_H

#include <stddef.h>

/* The kernel's MODULE_NAME_LEN is 64 - sizeof(unsigned long); keep the
 * portable (64-bit) bound so a plan is valid on every architecture. */
#define BL_NAME_MAX 55

struct bl_mod {
	char *name;    /* as written in the plan */
	char *key;     /* normalized: '-' replaced by '_' (the kernel's form) */
	char *path;    /* absolute path of the .ko[.xz|.zst|.gz] */
	char *params;  /* module parameter string, "" when none */
	int line;      /* line number in the plan file */
	int ndeps;     /* dependencies that are part of the plan */
	int *deps;     /* their indices into bl_plan.mods */
	int nxdeps;    /* dependencies satisfied outside the plan (live) */
	char **xdeps;  /* their names as written */
};

struct bl_plan {
	int n;
	struct bl_mod *mods;
};

/* Answers whether a module (normalized name) is already live or built in.
 * Used for dependencies that are not part of the plan. */
typedef int (*bl_live_fn)(const char *key, void *ctx);

/* Parse and validate a plan held in memory. On error returns -1 and writes
 * "FNAME:LINE: message" (no trailing newline) into err. */
int plan_parse(const char *fname, const char *buf, size_t len,
	       bl_live_fn live, void *ctx, struct bl_plan *out,
	       char *err, size_t errlen);

/* Read FNAME and parse it. */
int plan_load(const char *fname, bl_live_fn live, void *ctx,
	      struct bl_plan *out, char *err, size_t errlen);

void plan_free(struct bl_plan *p);

/* Normalize a module name into dst ('-' -> '_'). dst must hold
 * strlen(src) + 1 bytes. */
void plan_normalize(char *dst, const char *src);

/* 1 if s is a valid module name ([A-Za-z0-9_-], 1..BL_NAME_MAX chars). */
int plan_valid_name(const char *s, size_t len);

/* Index of the module whose normalized name is key, or -1. */
int plan_find(const struct bl_plan *p, const char *key);

#endif
