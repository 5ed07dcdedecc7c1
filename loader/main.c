/* main.c - bl-modload: command line, the parent's event loop, output.
 *
 * The parent owns all decisions: it claims each ready module exactly once,
 * checks sysfs, hands it to an idle worker, collects the result, enforces
 * the timeout and replaces dead or killed workers. Workers only load.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan.h"
#include "sched.h"
#include "sysfs.h"
#include "worker.h"

#define PROG "bl-modload"
#define MAX_WORKERS 64
#define MAX_HANDOUT_TRIES 3
#define COMING_POLL_MS 10

enum result {
	R_NONE = 0,
	R_LOADED,
	R_EXISTS,
	R_ALREADY_LIVE,
	R_BUILTIN,
	R_FAILED,
	R_DEP_FAILED,
	R_TIMEOUT,
	R_WORKER_DIED,
	R__COUNT
};

static const char *const result_name[R__COUNT] = {
	"none", "loaded", "exists", "already-live", "builtin",
	"failed", "dep-failed", "timeout", "worker-died",
};

struct outcome {
	int result;
	int err;
	int worker;
	int decomp;
	int cause;
	int tries;
	int64_t start_us, end_us;
};

/* a module whose sysfs initstate is "coming": wait until it turns live */
struct waitent {
	int idx;
	int after_death; /* 0: found at claim time; 1: its worker died */
	int worker;
	int64_t start_us;
	int64_t deadline_us;
};

struct opts {
	int jobs;
	double timeout_s;
	int kmsg;
	const char *kmsg_file;
	const char *trace_marker;
	const char *sysfs;
	int decomp_mode;
	int dry_run;
	int quiet;
	const char *plan;
};

static struct {
	struct opts o;
	struct bl_plan plan;
	struct sched sched;
	struct outcome *out;
	struct worker_ctx ctx;
	struct worker w[MAX_WORKERS];
	int *loadq;       /* circular FIFO of modules that need a worker */
	int lq_head, lq_len;
	struct waitent *waits;
	int nwaits;
	pid_t *reap;      /* killed/dead workers not yet reaped */
	int nreap, reap_cap;
	int *depfailed;   /* scratch for sched_complete */
	int64_t timeout_us;
	int count[R__COUNT];
} G;

static void note(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-j N] [-t SECONDS] [--kmsg] [--trace-marker FILE]\n"
		"                  [--sysfs DIR] [--decompress auto|kernel|user]\n"
		"                  [-n|--dry-run] [-q] PLAN\n");
}

/* ---------------------------------------------------------------- output */

static void print_load(int idx)
{
	const struct outcome *o = &G.out[idx];

	if (G.o.quiet)
		return;
	printf("LOAD name=%s worker=%d start_us=%lld end_us=%lld result=%s errno=%d decompress=%s",
	       G.plan.mods[idx].name, o->worker, (long long)o->start_us,
	       (long long)o->end_us, result_name[o->result], o->err,
	       decomp_name(o->decomp));
	if (o->result == R_DEP_FAILED && o->cause >= 0)
		printf(" cause=%s", G.plan.mods[o->cause].name);
	putchar('\n');
	fflush(stdout);
}

/* Record the final outcome of a claimed module and propagate it. */
static void finish(int idx, int result, int err, int worker, int64_t start,
		   int64_t end, int decomp)
{
	struct outcome *o = &G.out[idx];
	int ok = result == R_LOADED || result == R_EXISTS ||
		 result == R_ALREADY_LIVE || result == R_BUILTIN;
	int nd, k;

	o->result = result;
	o->err = err;
	o->worker = worker;
	o->start_us = start;
	o->end_us = end;
	o->decomp = decomp;
	G.count[result]++;
	nd = sched_complete(&G.sched, idx, ok, G.depfailed);
	if (nd < 0) {
		note("internal error: module %s completed twice", G.plan.mods[idx].name);
		return;
	}
	print_load(idx);
	for (k = 0; k < nd; k++) {
		int d = G.depfailed[k];
		int64_t now = bl_now_us();
		struct outcome *od = &G.out[d];
		od->result = R_DEP_FAILED;
		od->err = 0;
		od->worker = -1;
		od->start_us = od->end_us = now;
		od->decomp = DECOMP_NONE;
		od->cause = idx;
		G.count[R_DEP_FAILED]++;
		print_load(d);
	}
}

/* ------------------------------------------------------------ queues */

static void loadq_push(int idx, int front)
{
	int n = G.plan.n;

	if (front) {
		G.lq_head = (G.lq_head + n - 1) % n;
		G.loadq[G.lq_head] = idx;
	} else {
		G.loadq[(G.lq_head + G.lq_len) % n] = idx;
	}
	G.lq_len++;
}

static int loadq_pop(void)
{
	int idx = G.loadq[G.lq_head];

	G.lq_head = (G.lq_head + 1) % G.plan.n;
	G.lq_len--;
	return idx;
}

static void wait_add(int idx, int after_death, int worker, int64_t start)
{
	struct waitent *e = &G.waits[G.nwaits++];

	e->idx = idx;
	e->after_death = after_death;
	e->worker = worker;
	e->start_us = start;
	e->deadline_us = bl_now_us() + G.timeout_us;
}

static void reap_add(pid_t pid)
{
	if (G.nreap == G.reap_cap) {
		int nc = G.reap_cap ? G.reap_cap * 2 : 16;
		pid_t *np = realloc(G.reap, (size_t)nc * sizeof(*np));
		if (!np)
			return; /* it stays a zombie until we exit */
		G.reap = np;
		G.reap_cap = nc;
	}
	G.reap[G.nreap++] = pid;
}

static void reap_some(void)
{
	int i = 0;

	while (i < G.nreap) {
		pid_t r = waitpid(G.reap[i], NULL, WNOHANG);
		if (r == G.reap[i] || (r < 0 && errno == ECHILD))
			G.reap[i] = G.reap[--G.nreap];
		else
			i++;
	}
}

/* ------------------------------------------------------------ decisions */

/* Look at sysfs for a module about to be handed out. Returns 1 when its
 * outcome is decided (or it now waits for "coming"), 0 when it must be
 * loaded. */
static int precheck(int idx)
{
	const struct bl_mod *m = &G.plan.mods[idx];
	int64_t now = bl_now_us();

	switch (sysfs_module_state(G.o.sysfs, m->key)) {
	case SYSFS_LIVE:
		finish(idx, R_ALREADY_LIVE, 0, -1, now, now, DECOMP_NONE);
		return 1;
	case SYSFS_BUILTIN:
		finish(idx, R_BUILTIN, 0, -1, now, now, DECOMP_NONE);
		return 1;
	case SYSFS_COMING:
		wait_add(idx, 0, -1, now);
		return 1;
	default:
		return 0;
	}
}

static void claim_ready(void)
{
	int idx;

	while ((idx = sched_claim(&G.sched)) >= 0)
		if (!precheck(idx))
			loadq_push(idx, 0);
}

static void worker_drop(struct worker *w, int killit)
{
	pid_t r;

	if (killit)
		kill(w->pid, SIGKILL);
	close(w->cmd_fd);
	close(w->res_fd);
	r = waitpid(w->pid, NULL, WNOHANG);
	if (r != w->pid)
		reap_add(w->pid);
	w->pid = 0;
	w->busy = -1;
}

static int spawn_slot(int k)
{
	int fds[2 * MAX_WORKERS], nf = 0, j, rc;

	for (j = 0; j < G.o.jobs; j++) {
		if (j == k || G.w[j].pid == 0)
			continue;
		fds[nf++] = G.w[j].cmd_fd;
		fds[nf++] = G.w[j].res_fd;
	}
	rc = worker_spawn(&G.w[k], k, &G.ctx, fds, nf);
	if (rc < 0)
		note("cannot start worker %d: %s", k, strerror(-rc));
	return rc;
}

static int nbusy(void)
{
	int k, n = 0;

	for (k = 0; k < G.o.jobs; k++)
		n += G.w[k].pid && G.w[k].busy >= 0;
	return n;
}

/* Hand queued modules to idle workers (starting workers on demand).
 * Returns 1 if it had to stop because a worker could not be started. */
static int dispatch(void)
{
	while (G.lq_len > 0) {
		int k, slot = -1, idx;
		struct worker_cmd cmd;
		ssize_t wr;

		for (k = 0; k < G.o.jobs; k++)
			if (G.w[k].pid && G.w[k].busy < 0) {
				slot = k;
				break;
			}
		if (slot < 0) {
			for (k = 0; k < G.o.jobs; k++)
				if (!G.w[k].pid)
					break;
			if (k == G.o.jobs)
				return 0; /* all busy */
			int src = spawn_slot(k);
			if (src < 0) {
				if (nbusy() == 0) {
					int64_t now = bl_now_us();
					int e = -src;
					idx = loadq_pop();
					finish(idx, R_FAILED, e, -1, now, now, DECOMP_NONE);
					continue;
				}
				return 1;
			}
			slot = k;
		}
		idx = loadq_pop();
		/* re-check: it may have become live while queued */
		if (precheck(idx))
			continue;
		cmd.idx = idx;
		do
			wr = write(G.w[slot].cmd_fd, &cmd, sizeof(cmd));
		while (wr < 0 && errno == EINTR);
		if (wr != (ssize_t)sizeof(cmd)) {
			/* worker already gone; it never saw the command */
			worker_drop(&G.w[slot], 1);
			if (++G.out[idx].tries >= MAX_HANDOUT_TRIES) {
				int64_t now = bl_now_us();
				finish(idx, R_FAILED, EPIPE, -1, now, now, DECOMP_NONE);
			} else {
				loadq_push(idx, 1);
			}
			continue;
		}
		G.w[slot].busy = idx;
		G.w[slot].start_us = bl_now_us();
		G.w[slot].deadline_us = G.w[slot].start_us + G.timeout_us;
	}
	return 0;
}

static void check_waits(void)
{
	int i = 0;

	while (i < G.nwaits) {
		struct waitent e = G.waits[i];
		enum sysfs_state st = sysfs_module_state(G.o.sysfs, G.plan.mods[e.idx].key);
		int64_t now = bl_now_us();

		if (st == SYSFS_COMING && now < e.deadline_us) {
			i++;
			continue;
		}
		G.waits[i] = G.waits[--G.nwaits];
		if (st == SYSFS_LIVE || st == SYSFS_BUILTIN) {
			if (e.after_death)
				finish(e.idx, R_LOADED, 0, e.worker, e.start_us, now, DECOMP_NONE);
			else
				finish(e.idx, R_ALREADY_LIVE, 0, -1, e.start_us, now, DECOMP_NONE);
		} else if (st == SYSFS_COMING) {
			if (e.after_death)
				finish(e.idx, R_WORKER_DIED, ETIMEDOUT, e.worker, e.start_us, now, DECOMP_NONE);
			else
				finish(e.idx, R_TIMEOUT, ETIMEDOUT, -1, e.start_us, now, DECOMP_NONE);
		} else if (e.after_death) {
			finish(e.idx, R_WORKER_DIED, 0, e.worker, e.start_us, now, DECOMP_NONE);
		} else {
			/* the other loader's attempt vanished: load it ourselves */
			loadq_push(e.idx, 1);
		}
	}
}

/* A worker's result pipe hit EOF (or garbage): it died. */
static void worker_died(int k)
{
	struct worker *w = &G.w[k];
	int idx = w->busy;
	int64_t start = w->start_us, now;

	worker_drop(w, 1);
	if (idx < 0)
		return;
	note("worker %d died while loading %s", k, G.plan.mods[idx].name);
	now = bl_now_us();
	switch (sysfs_module_state(G.o.sysfs, G.plan.mods[idx].key)) {
	case SYSFS_LIVE:
	case SYSFS_BUILTIN:
		finish(idx, R_LOADED, 0, k, start, now, DECOMP_NONE);
		break;
	case SYSFS_COMING:
		wait_add(idx, 1, k, start);
		break;
	default:
		finish(idx, R_WORKER_DIED, 0, k, start, now, DECOMP_NONE);
		break;
	}
}

static void worker_readable(int k)
{
	struct worker *w = &G.w[k];
	struct worker_res res;
	ssize_t r;

	do
		r = read(w->res_fd, &res, sizeof(res));
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(res) || res.idx != w->busy) {
		if (r > 0)
			note("worker %d: protocol error", k);
		worker_died(k);
		return;
	}
	w->busy = -1;
	if (res.err == 0)
		finish(res.idx, R_LOADED, 0, k, res.start_us, res.end_us, res.decomp);
	else if (res.err == EEXIST)
		finish(res.idx, R_EXISTS, EEXIST, k, res.start_us, res.end_us, res.decomp);
	else
		finish(res.idx, R_FAILED, res.err, k, res.start_us, res.end_us, res.decomp);
}

static void check_timeouts(void)
{
	int k;
	int64_t now = bl_now_us();

	for (k = 0; k < G.o.jobs; k++) {
		struct worker *w = &G.w[k];
		int idx = w->busy;
		int64_t start = w->start_us;
		if (!w->pid || idx < 0 || now < w->deadline_us)
			continue;
		note("%s: still loading after %.3g s, killing worker %d",
		     G.plan.mods[idx].name, G.o.timeout_s, k);
		worker_drop(w, 1);
		finish(idx, R_TIMEOUT, ETIMEDOUT, k, start, now, DECOMP_NONE);
	}
}

static int run_loop(void)
{
	struct pollfd pfd[MAX_WORKERS];
	int slot_of[MAX_WORKERS];

	for (;;) {
		int np = 0, k, timeout_ms, spawn_blocked;
		int64_t now, next;

		claim_ready();
		spawn_blocked = dispatch();
		claim_ready(); /* prechecks in dispatch may have freed dependents */
		if (sched_finished(&G.sched))
			break;
		if (G.lq_len > 0 && !spawn_blocked) {
			spawn_blocked = dispatch();
			if (sched_finished(&G.sched))
				break;
		}
		if (sched_nready(&G.sched) > 0)
			continue;

		now = bl_now_us();
		next = now + 1000000; /* wake at least once a second */
		for (k = 0; k < G.o.jobs; k++) {
			if (!G.w[k].pid)
				continue;
			pfd[np].fd = G.w[k].res_fd;
			pfd[np].events = POLLIN;
			pfd[np].revents = 0;
			slot_of[np++] = k;
			if (G.w[k].busy >= 0 && G.w[k].deadline_us < next)
				next = G.w[k].deadline_us;
		}
		if (G.nwaits > 0 || spawn_blocked)
			if (now + COMING_POLL_MS * 1000 < next)
				next = now + COMING_POLL_MS * 1000;
		if (np == 0 && G.nwaits == 0 && G.lq_len == 0) {
			note("internal error: scheduler stalled");
			return -1;
		}
		timeout_ms = next > now ? (int)((next - now + 999) / 1000) : 0;
		if (poll(pfd, (nfds_t)np, timeout_ms) < 0 && errno != EINTR) {
			note("poll: %s", strerror(errno));
			return -1;
		}
		for (k = 0; k < np; k++)
			if (pfd[k].revents && G.w[slot_of[k]].pid &&
			    G.w[slot_of[k]].res_fd == pfd[k].fd)
				worker_readable(slot_of[k]);
		check_timeouts();
		check_waits();
		reap_some();
	}
	return 0;
}

static void shutdown_workers(void)
{
	int k;

	for (k = 0; k < G.o.jobs; k++) {
		struct worker *w = &G.w[k];
		if (!w->pid)
			continue;
		close(w->cmd_fd); /* idle worker reads EOF and exits */
		close(w->res_fd);
		while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
			;
		w->pid = 0;
	}
	reap_some(); /* never block on killed workers stuck in the kernel */
}

/* ------------------------------------------------------------ dry run */

static void dry_run(void)
{
	int order = 0, idx, j, *dummy;

	dummy = malloc((size_t)(G.plan.n + 1) * sizeof(int));
	while ((idx = sched_claim(&G.sched)) >= 0) {
		const struct bl_mod *m = &G.plan.mods[idx];
		printf("PLAN order=%d name=%s sysfs=%s deps=", order++, m->name,
		       sysfs_state_name(sysfs_module_state(G.o.sysfs, m->key)));
		if (m->ndeps + m->nxdeps == 0)
			putchar('-');
		for (j = 0; j < m->ndeps; j++)
			printf("%s%s", j ? "," : "", G.plan.mods[m->deps[j]].name);
		for (j = 0; j < m->nxdeps; j++)
			printf("%s%s", j || m->ndeps ? "," : "", m->xdeps[j]);
		printf(" path=%s", m->path);
		if (m->params[0])
			printf(" params=%s", m->params);
		putchar('\n');
		sched_complete(&G.sched, idx, 1, dummy);
	}
	printf("DRYRUN modules=%d workers=%d\n", G.plan.n, G.o.jobs);
	free(dummy);
}

/* ------------------------------------------------------------ main */

static int live_in_sysfs(const char *key, void *ctx)
{
	enum sysfs_state st = sysfs_module_state((const char *)ctx, key);

	return st == SYSFS_LIVE || st == SYSFS_BUILTIN;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "jobs", required_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "kmsg", no_argument, NULL, 'K' },
		{ "kmsg-file", required_argument, NULL, 'F' },
		{ "trace-marker", required_argument, NULL, 'M' },
		{ "sysfs", required_argument, NULL, 'S' },
		{ "decompress", required_argument, NULL, 'D' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	o->jobs = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
	o->timeout_s = 60;
	o->sysfs = "/sys";
	opterr = 0;
	while ((c = getopt_long(argc, argv, "j:t:nqh", lo, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'j': {
			long v;
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 || v > MAX_WORKERS) {
				note("-j: expected a number of workers in 1..%d, got '%s'",
				     MAX_WORKERS, optarg);
				return -1;
			}
			o->jobs = (int)v;
			break;
		}
		case 't':
			errno = 0;
			o->timeout_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->timeout_s > 0) ||
			    o->timeout_s > 86400) {
				note("-t: expected seconds in (0, 86400], got '%s'", optarg);
				return -1;
			}
			break;
		case 'K': o->kmsg = 1; break;
		case 'F': o->kmsg_file = optarg; break;
		case 'M': o->trace_marker = optarg; break;
		case 'S': o->sysfs = optarg; break;
		case 'D':
			if (strcmp(optarg, "auto") == 0)
				o->decomp_mode = DMODE_AUTO;
			else if (strcmp(optarg, "kernel") == 0)
				o->decomp_mode = DMODE_KERNEL;
			else if (strcmp(optarg, "user") == 0)
				o->decomp_mode = DMODE_USER;
			else {
				note("--decompress: expected auto, kernel or user, got '%s'",
				     optarg);
				return -1;
			}
			break;
		case 'n': o->dry_run = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (optopt)
				note("option -%c: unknown or missing its argument", optopt);
			else
				note("unknown option '%s'", argv[optind - 1]);
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc - 1) {
		note(optind == argc ? "missing PLAN argument" : "too many arguments");
		usage(stderr);
		return -1;
	}
	o->plan = argv[optind];
	return 0;
}

int main(int argc, char **argv)
{
	char err[1024];
	int64_t t0 = bl_now_us();
	int failed;

	if (parse_args(argc, argv, &G.o))
		return 2;
	if (plan_load(G.o.plan, live_in_sysfs, (void *)G.o.sysfs, &G.plan, err,
		      sizeof(err))) {
		note("%s", err);
		return 2;
	}
	G.timeout_us = (int64_t)(G.o.timeout_s * 1e6);
	if (G.timeout_us < 1000)
		G.timeout_us = 1000;
	G.out = calloc((size_t)G.plan.n + 1, sizeof(*G.out));
	G.loadq = calloc((size_t)G.plan.n + 1, sizeof(int));
	G.waits = calloc((size_t)G.plan.n + 1, sizeof(*G.waits));
	G.depfailed = calloc((size_t)G.plan.n + 1, sizeof(int));
	if (!G.out || !G.loadq || !G.waits || !G.depfailed ||
	    sched_init(&G.sched, &G.plan)) {
		note("out of memory");
		return 2;
	}
	for (int i = 0; i < G.plan.n; i++)
		G.out[i].cause = -1;

	if (G.o.dry_run) {
		dry_run();
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL); /* we reap our workers ourselves */
	G.ctx.plan = &G.plan;
	G.ctx.decomp_mode = G.o.decomp_mode;
	G.ctx.kmsg_path = NULL;
	G.ctx.trace_fd = -1;
	if (G.o.kmsg_file || G.o.kmsg) {
		/* checked once here; workers reopen it for every marker */
		const char *path = G.o.kmsg_file ? G.o.kmsg_file : "/dev/kmsg";
		int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC |
				    (G.o.kmsg_file ? O_CREAT : 0), 0644);
		if (fd < 0) {
			note("cannot open %s: %s (no kmsg markers)", path, strerror(errno));
		} else {
			close(fd);
			G.ctx.kmsg_path = path;
		}
	}
	if (G.o.trace_marker) {
		G.ctx.trace_fd = open(G.o.trace_marker, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (G.ctx.trace_fd < 0)
			note("cannot open %s: %s (no trace markers)", G.o.trace_marker,
			     strerror(errno));
	}

	failed = run_loop() < 0;
	shutdown_workers();

	failed |= G.count[R_FAILED] + G.count[R_DEP_FAILED] + G.count[R_TIMEOUT] +
		  G.count[R_WORKER_DIED] > 0;
	failed |= !sched_finished(&G.sched);
	printf("SUMMARY modules=%d loaded=%d exists=%d already-live=%d builtin=%d failed=%d dep-failed=%d timeout=%d worker-died=%d workers=%d wall_us=%lld\n",
	       G.plan.n, G.count[R_LOADED], G.count[R_EXISTS],
	       G.count[R_ALREADY_LIVE], G.count[R_BUILTIN], G.count[R_FAILED],
	       G.count[R_DEP_FAILED], G.count[R_TIMEOUT], G.count[R_WORKER_DIED],
	       G.o.jobs, (long long)(bl_now_us() - t0));
	fflush(stdout);
	return failed ? 1 : 0;
}
