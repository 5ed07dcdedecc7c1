/* worker.c - forked load workers.
 *
 * A worker is a child process that reads module indices from its command
 * pipe, loads each module with finit_module (or init_module after user-space
 * decompression) and writes one result record back on its result pipe. The
 * kernel calls always go through libc's syscall() so a test preload can
 * intercept them.
 */
#define _GNU_SOURCE
#include "worker.h"
#include "readall.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MODULE_INIT_COMPRESSED_FILE
#define MODULE_INIT_COMPRESSED_FILE 4
#endif
#ifndef SYS_finit_module
#error "SYS_finit_module is not defined by this libc's headers"
#endif

#define DECOMP_MAX_BYTES (1024u << 20)

int64_t bl_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

const char *decomp_name(int d)
{
	return d == DECOMP_KERNEL ? "kernel" : d == DECOMP_USER ? "user" : "none";
}

static int ends_with(const char *s, const char *sfx)
{
	size_t a = strlen(s), b = strlen(sfx);

	return a >= b && strcmp(s + a - b, sfx) == 0;
}

const char *worker_decompressor(const char *path)
{
	if (ends_with(path, ".xz"))
		return "xz";
	if (ends_with(path, ".zst"))
		return "zstd";
	if (ends_with(path, ".gz"))
		return "gzip";
	return NULL;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* markers are best effort */
		buf += w;
		len -= (size_t)w;
	}
}

static void marker(int fd, const char *fmt, const char *name, int a, int b)
{
	char line[160];
	int n;

	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), fmt, name, a, b);
	if (n > 0 && n < (int)sizeof(line))
		write_all(fd, line, (size_t)n); /* one write() = one record */
}

/* /dev/kmsg applies its rate limit (10 records per 5 s) per open file, so
 * every marker gets a fresh open. */
static void kmsg_marker(const char *path, const char *fmt, const char *name,
			int a, int b)
{
	int fd;

	if (!path)
		return;
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	marker(fd, fmt, name, a, b);
	close(fd);
}

/* Read a whole file from offset 0 (the fallback when finit_module is
 * missing). Returns 0 or an errno. */
static int read_whole(int fd, char **out, size_t *outlen)
{
	if (lseek(fd, 0, SEEK_SET) < 0)
		return errno;
	return bl_read_all(fd, DECOMP_MAX_BYTES, out, outlen);
}

int worker_decompress(int fd, const char *tool, char **out, size_t *outlen)
{
	int p[2], status, e = 0;
	pid_t pid;
	char *buf = NULL;
	size_t len = 0;

	status = 0;
	*out = NULL;
	*outlen = 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return errno;
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (pid == 0) {
		char *argv[3];
		argv[0] = (char *)tool;
		argv[1] = (char *)"-dc";
		argv[2] = NULL;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGPIPE, SIG_DFL);
		if (lseek(fd, 0, SEEK_SET) < 0 || dup2(fd, 0) < 0 || dup2(p[1], 1) < 0)
			_exit(126);
		execvp(tool, argv);
		_exit(127);
	}
	close(p[1]);
	e = bl_read_all(p[0], DECOMP_MAX_BYTES, &buf, &len);
	if (e)
		kill(pid, SIGKILL);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			e = e ? e : ECHILD;
			break;
		}
	}
	if (!e) {
		if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
			e = ENOENT; /* tool not found */
		else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			e = EIO;    /* corrupt input or tool failure */
		else if (len == 0)
			e = ENOEXEC;
	}
	if (e) {
		free(buf);
		return e;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

void worker_load(const struct bl_mod *m, int index,
		 const struct worker_ctx *ctx, struct worker_res *res)
{
	const char *tool = worker_decompressor(m->path);
	int fd, e = 0;
	long rc;

	memset(res, 0, sizeof(*res));
	res->decomp = DECOMP_NONE;
	kmsg_marker(ctx->kmsg_path, "bootlink: insmod %s\n", m->name, 0, 0);
	res->start_us = bl_now_us();
	fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		goto out;
	}
	marker(ctx->trace_fd, "bootlink begin %s\n", m->name, 0, 0);
	if (tool && ctx->decomp_mode == DMODE_USER) {
		e = EOPNOTSUPP; /* as if the kernel could not: user space does it */
	} else {
		res->decomp = tool ? DECOMP_KERNEL : DECOMP_NONE;
		rc = syscall(SYS_finit_module, fd, m->params,
			     tool ? MODULE_INIT_COMPRESSED_FILE : 0);
		e = rc == 0 ? 0 : errno;
	}
	/* --decompress kernel: the kernel's refusal is the result */
	if ((tool && ctx->decomp_mode != DMODE_KERNEL &&
	     (e == EOPNOTSUPP || e == EINVAL)) || e == ENOSYS) {
		/* kernel cannot decompress (or lacks finit_module): prepare the
		 * image here and hand over the bytes with init_module */
		char *img;
		size_t len;
		if (tool) {
			res->decomp = DECOMP_USER;
			e = worker_decompress(fd, tool, &img, &len);
		} else {
			e = read_whole(fd, &img, &len);
		}
		if (!e) {
			rc = syscall(SYS_init_module, img, (unsigned long)len, m->params);
			e = rc == 0 ? 0 : errno;
			free(img);
		}
	}
	close(fd);
out:
	res->end_us = bl_now_us();
	res->err = e;
	kmsg_marker(ctx->kmsg_path, "bootlink: insmod-done %s %d worker %d\n", m->name,
	       e, index);
}

static void worker_main(int cmd_fd, int res_fd, int index,
			const struct worker_ctx *ctx)
{
	for (;;) {
		struct worker_cmd cmd;
		struct worker_res res;
		ssize_t r;
		size_t got = 0;

		while (got < sizeof(cmd)) {
			r = read(cmd_fd, (char *)&cmd + got, sizeof(cmd) - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				_exit(0); /* parent closed the pipe: done */
			got += (size_t)r;
		}
		if (cmd.idx < 0 || cmd.idx >= ctx->plan->n)
			_exit(3);
		worker_load(&ctx->plan->mods[cmd.idx], index, ctx, &res);
		res.idx = cmd.idx;
		do
			r = write(res_fd, &res, sizeof(res));
		while (r < 0 && errno == EINTR);
		if (r != (ssize_t)sizeof(res))
			_exit(4);
	}
}

int worker_spawn(struct worker *w, int index, const struct worker_ctx *ctx,
		 const int *close_fds, int nclose)
{
	int cmd[2], res[2], i, e;
	pid_t pid;

	if (pipe2(cmd, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(res, O_CLOEXEC) < 0) {
		e = errno;
		close(cmd[0]);
		close(cmd[1]);
		return -e;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(cmd[0]);
		close(cmd[1]);
		close(res[0]);
		close(res[1]);
		return -e;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		for (i = 0; i < nclose; i++)
			if (close_fds[i] >= 0)
				close(close_fds[i]);
		close(cmd[1]);
		close(res[0]);
		worker_main(cmd[0], res[1], index, ctx);
		_exit(0);
	}
	close(cmd[0]);
	close(res[1]);
	w->pid = pid;
	w->cmd_fd = cmd[1];
	w->res_fd = res[0];
	w->busy = -1;
	w->start_us = 0;
	w->deadline_us = 0;
	return 0;
}
