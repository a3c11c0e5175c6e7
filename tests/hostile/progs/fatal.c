/*
 * fatal — dies of a fatal signal after leaking: argument segv (a NULL
 * write), abort, term (raise SIGTERM), bus (a read past the end of a
 * mapped empty file), fpe (integer division by zero).  Under heaptrail
 * the program must die of the same signal, and a leak report must still
 * be written, marked as killed by that signal (valgrind writes one).
 *
 * Expected: 4,444 bytes in 1 block definitely lost, then death.
 *
 * @case segv segv
 * @case abort abort
 * @case term term
 * @case bus bus
 * @case fpe fpe
 * @kinds 0 definitely_lost=4444/1
 * @vg
 * @killed
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

#include "hostile.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		die("usage: fatal segv|abort|term|bus|fpe");
	leak_bytes(4444);
	scrub_stack();
	/* no stdio: its buffer would stay allocated (no exit, no freeres) */
	say("fatal: dying of ");
	say(argv[1]);
	say("\n");
	if (!strcmp(argv[1], "segv"))
		*(volatile int *)(uintptr_t)8 = 1;
	else if (!strcmp(argv[1], "abort"))
		abort();
	else if (!strcmp(argv[1], "term"))
		raise(SIGTERM);
	else if (!strcmp(argv[1], "bus")) {
		char path[] = "/tmp/hostile-bus-XXXXXX";
		int fd = mkstemp(path);
		unlink(path);
		volatile char *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
		return m[0];
	} else if (!strcmp(argv[1], "fpe")) {
		volatile int one = 1, zero = 0;
		volatile int r = one / zero;
		return r;
	}
	return 0;
}
