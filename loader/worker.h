/* worker.h - forked load workers: pipes, finit_module, user-space fallback. */
#ifndef BL_WORKER_H
#define BL_WORKER_H

#include <stdint.h>
#include <sys/types.h>

#include "plan.h"

enum bl_decomp {
	DECOMP_NONE = 0,  /* plain .ko, or nothing was loaded */
	DECOMP_KERNEL,    /* finit_module(MODULE_INIT_COMPRESSED_FILE) */
	DECOMP_USER,      /* decompressed here, then init_module */
};

/* parent -> worker: one module index per message */
struct worker_cmd {
	int32_t idx;
};

/* worker -> parent: one message per finished load (< PIPE_BUF: atomic) */
struct worker_res {
	int32_t idx;
	int32_t err;      /* 0 on success, else positive errno (EEXIST kept) */
	int32_t decomp;   /* enum bl_decomp */
	int32_t pad;
	int64_t start_us; /* CLOCK_MONOTONIC */
	int64_t end_us;
};

/* --decompress: who decompresses a compressed module */
enum bl_decomp_mode {
	DMODE_AUTO = 0,   /* the kernel; user space when it cannot */
	DMODE_KERNEL,     /* the kernel only: its refusal is the result */
	DMODE_USER,       /* user space only: finit_module is not asked */
};

struct worker_ctx {
	const struct bl_plan *plan;
	int decomp_mode;       /* enum bl_decomp_mode */
	const char *kmsg_path; /* NULL: no kmsg markers; reopened per marker
				* because /dev/kmsg rate-limits each open file */
	int trace_fd;  /* -1: no trace_marker */
};

struct worker {
	pid_t pid;     /* 0: slot empty */
	int cmd_fd;    /* parent's write end */
	int res_fd;    /* parent's read end */
	int busy;      /* module index being loaded, -1 idle */
	int64_t start_us;
	int64_t deadline_us;
};

int64_t bl_now_us(void);

/* Fork worker number `index`. All fds in close_fds (the other workers'
 * parent-side ends) are closed in the child. Returns 0 or -errno. */
int worker_spawn(struct worker *w, int index, const struct worker_ctx *ctx,
		 const int *close_fds, int nclose);

/* Load one module in the calling process (what a worker does per command).
 * Fills res; never exits. */
void worker_load(const struct bl_mod *m, int index,
		 const struct worker_ctx *ctx, struct worker_res *res);

/* Run "TOOL -dc" with fd as stdin, collect stdout. Returns 0 or an errno. */
int worker_decompress(int fd, const char *tool, char **out, size_t *outlen);

/* Which user-space tool decompresses path ("xz", "zstd", "gzip"), or NULL
 * for an uncompressed module. */
const char *worker_decompressor(const char *path);

const char *decomp_name(int d);

#endif
