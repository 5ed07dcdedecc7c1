/*
 * bl-bootclock: the time from machine reset to now, on the kernel's log.
 *
 * Under QEMU's -icount the guest's cycle counter is QEMU's virtual clock,
 * which starts at zero when the machine does and runs through firmware,
 * the boot loader and the kernel's decompressor alike: on x86-64 the TSC
 * advances one tick per nanosecond; on arm64 the generic timer's virtual
 * counter ticks at CNTFRQ_EL0. The kernel's own clock (printk times)
 * starts partway into the kernel and is not on this time base, so what
 * came before it is invisible to dmesg. Run as /init's first command,
 * this program writes one line to /dev/kmsg:
 *
 *   bootlink: boot clock counter=N hz=F
 *
 * N/F seconds from reset to /init. Outside -icount the counter means
 * nothing of the sort: the host tool reads the line only from
 * deterministic boots.
 *
 * Exit status: 0, or 1 with a message on stderr when /dev/kmsg cannot be
 * written.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
static uint64_t counter(void)
{
	uint32_t lo, hi;
	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* QEMU's TSC under -icount: one tick per virtual nanosecond. */
static uint64_t counter_hz(void)
{
	return 1000000000u;
}
#elif defined(__aarch64__)
static uint64_t counter(void)
{
	uint64_t v;
	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
}

static uint64_t counter_hz(void)
{
	uint64_t f;
	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(f));
	return f;
}
#else
#error "bl-bootclock: no cycle counter known for this architecture"
#endif

int main(void)
{
	char line[96];
	int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		perror("bl-bootclock: /dev/kmsg");
		return 1;
	}
	int n = snprintf(line, sizeof(line), "bootlink: boot clock counter=%llu hz=%llu\n",
			 (unsigned long long)counter(), (unsigned long long)counter_hz());
	if (write(fd, line, (size_t)n) != n) {
		perror("bl-bootclock: writing /dev/kmsg");
		return 1;
	}
	close(fd);
	return 0;
}
