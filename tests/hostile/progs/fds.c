/*
 * fds — close_range() and dup2() over every descriptor: the program
 * prints the number its first open() gets (3 bare), then dup2()s
 * /dev/null over every fd from 3 to 1023, close_range()s them all, and
 * writes a file of its own through the fds it gets next while the
 * agent's timer (timeline, every) runs; whatever it reads back must be
 * what it wrote.  An agent that keeps a plain fd (the timeline) writes
 * its rows into the program's file.
 *
 * Expected: 256 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=256/1
 * @vg
 * @leaks-calls
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "hostile.h"

int main(void)
{
	int fd = open("/dev/null", O_RDONLY);
	printf("fds: first open() returned %d\n", fd);
	close(fd);
	int null = open("/dev/null", O_RDWR);
	for (int i = 3; i < 1024; i++)
		if (i != null)
			dup2(null, i);
	if (syscall(SYS_close_range, 3, ~0U, 0))
		die("close_range");
	char path[] = "fds-data-XXXXXX";
	int f = mkstemp(path);
	if (f < 0)
		die("mkstemp");
	unlink(path);
	printf("fds: data file fd %d\n", f);
	const char line[] = "program data\n";
	for (int i = 0; i < 40; i++) {
		if (write(f, line, sizeof line - 1) != sizeof line - 1)
			die("write");
		maybe_leak_check();
		nap_ms(25);
	}
	char buf[4096];
	ssize_t n = pread(f, buf, sizeof buf, 0);
	int same = n == 40 * (ssize_t)(sizeof line - 1);
	for (ssize_t i = 0; same && i < n; i++)
		same = buf[i] == line[i % (sizeof line - 1)];
	printf("fds: read back %zd bytes, %s\n", n, same ? "all mine" : "NOT what I wrote");
	leak_bytes(256);
	scrub_stack();
	return 0;
}
