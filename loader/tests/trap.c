/* trap.c - LD_PRELOAD test trap for bl-modload.
 *
 * Overrides libc's syscall(). finit_module and init_module never reach the
 * kernel: the module is looked up in $BL_TRAP_CONF, lines
 *     NAME [rc=ERRNO] [delay_ms=MS] [nocompress=1] [nofinit=1]
 * (default: success after 0 ms). nocompress=1: finit_module with
 * MODULE_INIT_COMPRESSED_FILE fails with EOPNOTSUPP; nofinit=1: every
 * finit_module fails with ENOSYS (a kernel without it). On entry the trap writes its pid to
 * $BL_TRAP_DIR/NAME.pid and appends "BEGIN name pid start_us flags" to
 * $BL_TRAP_LOG; after the delay it appends
 *     CALL name pid start_us end_us flags rc kind [len=N head=HEX] params=P
 * and on success creates $BL_SYSFS/module/NAME/initstate = "live".
 * Every other syscall is forwarded to the real syscall().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct behave {
	int rc;
	int delay_ms;
	int nocompress;
	int nofinit;
};

static char last_name[256]; /* name of the last finit_module in this process */

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void norm(char *s)
{
	for (; *s; s++)
		if (*s == '-')
			*s = '_';
}

static int errno_of(const char *v)
{
	static const struct { const char *n; int e; } tab[] = {
		{ "EEXIST", EEXIST }, { "EINVAL", EINVAL }, { "ENOEXEC", ENOEXEC },
		{ "ENOENT", ENOENT }, { "EPERM", EPERM }, { "ENOMEM", ENOMEM },
		{ "EBUSY", EBUSY }, { "EOPNOTSUPP", EOPNOTSUPP }, { "ENODEV", ENODEV },
		{ "EKEYREJECTED", EKEYREJECTED },
	};
	size_t i;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (strcmp(v, tab[i].n) == 0)
			return tab[i].e;
	return atoi(v);
}

static void lookup(const char *name, struct behave *b)
{
	const char *conf = getenv("BL_TRAP_CONF");
	char line[512];
	FILE *f;

	memset(b, 0, sizeof(*b));
	if (!conf || !(f = fopen(conf, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok = strtok_r(line, " \t\n", &save);
		if (!tok || tok[0] == '#')
			continue;
		norm(tok);
		if (strcmp(tok, name) != 0)
			continue;
		while ((tok = strtok_r(NULL, " \t\n", &save))) {
			if (strncmp(tok, "rc=", 3) == 0)
				b->rc = errno_of(tok + 3);
			else if (strncmp(tok, "delay_ms=", 9) == 0)
				b->delay_ms = atoi(tok + 9);
			else if (strncmp(tok, "nocompress=", 11) == 0)
				b->nocompress = atoi(tok + 11);
			else if (strncmp(tok, "nofinit=", 8) == 0)
				b->nofinit = atoi(tok + 8);
		}
		break;
	}
	fclose(f);
}

static void append(const char *path, const char *text)
{
	int fd;

	if (!path)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0) { /* single write: atomic append */
	}
	close(fd);
}

static void write_pid(const char *name)
{
	const char *dir = getenv("BL_TRAP_DIR");
	char path[PATH_MAX], tmp[PATH_MAX], buf[32];
	int fd;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s.pid", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.pid.%d", dir, name, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, strlen(buf)) < 0) {
	}
	close(fd);
	rename(tmp, path); /* the test never sees a half-written file */
}

static void make_live(const char *name)
{
	const char *sys = getenv("BL_SYSFS");
	char path[PATH_MAX];
	int fd;

	if (!sys)
		return;
	snprintf(path, sizeof(path), "%s/module", sys);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/module/%s", sys, name);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/module/%s/initstate", sys, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, "live\n", 5) < 0) {
	}
	close(fd);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static long fake_load(const char *name, long flags, const char *params,
		      const char *kind, const char *extra)
{
	const char *log = getenv("BL_TRAP_LOG");
	struct behave b;
	char line[1024];
	long long start, end;
	int rc;

	lookup(name, &b);
	start = now_us();
	write_pid(name);
	snprintf(line, sizeof(line), "BEGIN %s %d %lld %ld\n", name, (int)getpid(),
		 start, flags);
	append(log, line);
	if (b.nofinit && strcmp(kind, "finit") == 0) {
		rc = ENOSYS;
	} else if (b.nocompress && (flags & 4)) {
		rc = EOPNOTSUPP;
	} else {
		if (b.delay_ms > 0)
			sleep_ms(b.delay_ms);
		rc = b.rc;
	}
	if (rc == 0)
		make_live(name);
	end = now_us();
	snprintf(line, sizeof(line), "CALL %s %d %lld %lld %ld %d %s%s params=%s\n",
		 name, (int)getpid(), start, end, flags, rc, kind, extra,
		 params ? params : "(null)");
	append(log, line);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}

static long trap_finit(long fd, const char *params, long flags)
{
	char link[64], target[PATH_MAX], *base, *dot;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", (int)fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0) {
		errno = EBADF;
		return -1;
	}
	target[n] = 0;
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	dot = strstr(base, ".ko");
	if (dot)
		*dot = 0;
	n = (ssize_t)strlen(base);
	if (n >= (ssize_t)sizeof(last_name))
		n = sizeof(last_name) - 1;
	memcpy(last_name, base, (size_t)n);
	last_name[n] = 0;
	norm(last_name);
	return fake_load(last_name, flags, params, "finit", "");
}

static long trap_init(const unsigned char *img, unsigned long len,
		      const char *params)
{
	char extra[64];

	snprintf(extra, sizeof(extra), " len=%lu head=%02x%02x%02x%02x", len,
		 len > 0 ? img[0] : 0, len > 1 ? img[1] : 0, len > 2 ? img[2] : 0,
		 len > 3 ? img[3] : 0);
	return fake_load(last_name[0] ? last_name : "unknown", 0, params, "init",
			 extra);
}

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	va_list ap;
	long a[6];
	int i;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_finit_module)
		return trap_finit(a[0], (const char *)a[1], a[2]);
	if (nr == SYS_init_module)
		return trap_init((const unsigned char *)a[0], (unsigned long)a[1],
				 (const char *)a[2]);
	if (!real) {
		*(void **)&real = dlsym(RTLD_NEXT, "syscall");
		if (!real) {
			errno = ENOSYS;
			return -1;
		}
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
