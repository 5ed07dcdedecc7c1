/* bl-trace: record each function's first call, in order, for bootlink order.
 *
 * Link it into a program compiled with -finstrument-functions (static or
 * dynamic; it is itself compiled without instrumentation). The compiler
 * calls __cyg_profile_func_enter on every function entry; the first entry
 * of each function is appended to an in-memory list (an open-addressing
 * set of addresses keeps the repeats out, so a hot loop costs one probe per
 * call). The list is written at exit, or when the signal BL_TRACE_SIGNAL
 * (default SIGUSR2) arrives, to $BL_TRACE_FILE (default bl-trace.<pid>):
 *
 *   bl-trace 1
 *   object <load bias hex> <path>          one per loaded object with code
 *   fn <runtime address hex>               first calls, in call order
 *   end <number of fn lines> <calls seen>
 *
 * A trace that lacks its end line was cut short. Runtime addresses minus
 * the load bias of the object that contains them are link-time addresses
 * (bootlink maps them to names with the binary's symbol table).
 *
 * Portable C99 + POSIX + dl_iterate_phdr; no allocation after start-up
 * (fixed tables from mmap), so it works in any program and before main. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINST __attribute__((no_instrument_function))

#ifndef BL_TRACE_MAX
#define BL_TRACE_MAX (1u << 20) /* distinct functions recorded */
#endif
#define SET_SLOTS (2u * BL_TRACE_MAX) /* power of two, half full at most */

static uintptr_t *order;      /* first calls, in order */
static uintptr_t *set;        /* open addressing, 0 = empty */
static unsigned long norder;
static volatile unsigned long ncalls;
static volatile int lock;     /* the hooks may run in several threads */
static int ready, written, overflow;

NOINST static void *table(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

NOINST static void start(void)
{
	order = table(BL_TRACE_MAX * sizeof *order);
	set = table(SET_SLOTS * sizeof *set);
	ready = order != NULL && set != NULL;
}

NOINST void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	if (!ready)
		return;
	uintptr_t a = (uintptr_t)fn;
	uintptr_t h = (a >> 4) * 0x9e3779b97f4a7c15u;
	while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
		;
	ncalls++;
	for (unsigned long i = h & (SET_SLOTS - 1);; i = (i + 1) & (SET_SLOTS - 1)) {
		if (set[i] == a)
			break;
		if (set[i] == 0) {
			if (norder == BL_TRACE_MAX) {
				overflow = 1;
				break;
			}
			set[i] = a;
			order[norder] = a;
			__atomic_store_n(&norder, norder + 1, __ATOMIC_RELEASE);
			break;
		}
	}
	__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

NOINST void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn;
	(void)site;
}

/* Buffered writes with no stdio (safe in a signal handler). */
static char buf[1 << 16];
static size_t blen;
static int out_fd = -1;

NOINST static void flush(void)
{
	size_t off = 0;
	while (off < blen) {
		ssize_t n = write(out_fd, buf + off, blen - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	blen = 0;
}

NOINST static void put(const char *s)
{
	while (*s) {
		if (blen == sizeof buf)
			flush();
		buf[blen++] = *s++;
	}
}

NOINST static void put_hex(uintptr_t v)
{
	char t[2 * sizeof v + 1];
	int i = (int)sizeof t - 1;
	t[i] = '\0';
	do {
		t[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	put(t + i);
}

NOINST static void put_dec(unsigned long v)
{
	char t[24];
	int i = (int)sizeof t - 1;
	t[i] = '\0';
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(t + i);
}

NOINST static int object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	int code = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X))
			code = 1;
	if (!code)
		return 0;
	const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "-";
	put("object ");
	put_hex((uintptr_t)info->dlpi_addr);
	put(" ");
	put(name);
	put("\n");
	return 0;
}

NOINST static void write_trace(void)
{
	if (!ready || written)
		return;
	written = 1;
	char path[4096];
	const char *p = getenv("BL_TRACE_FILE");
	if (p == NULL || p[0] == '\0') {
		snprintf(path, sizeof path, "bl-trace.%ld", (long)getpid());
		p = path;
	}
	out_fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out_fd < 0)
		return;
	/* No lock: a signal may arrive while this thread holds it. Entries
	   below norder are complete (release store after each one). */
	ready = 0;
	unsigned long n = __atomic_load_n(&norder, __ATOMIC_ACQUIRE);
	put("bl-trace 1\n");
	dl_iterate_phdr(object, NULL);
	for (unsigned long i = 0; i < n; i++) {
		put("fn ");
		put_hex(order[i]);
		put("\n");
	}
	if (overflow)
		put("overflow\n");
	put("end ");
	put_dec(n);
	put(" ");
	put_dec(ncalls);
	put("\n");
	flush();
	close(out_fd);
}

NOINST static void on_signal(int sig)
{
	(void)sig;
	write_trace();
}

__attribute__((constructor(101))) NOINST static void bl_trace_init(void)
{
	start();
	atexit(write_trace);
	int sig = SIGUSR2;
	const char *s = getenv("BL_TRACE_SIGNAL");
	if (s != NULL && s[0] != '\0')
		sig = atoi(s);
	if (sig > 0)
		signal(sig, on_signal);
}
