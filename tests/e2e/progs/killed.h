/*
 * killed.h — for the killed_* programs: a process that dies of a fatal
 * signal still gets a leak report, as under valgrind, written before the
 * signal takes its default action; the wrapper must die of the same
 * signal as the bare run.  Each program leaks 128 bytes (definitely
 * lost), keeps 64 in a global (still reachable), says so with write(2)
 * (no stdio buffer: what libc keeps at a fatal signal is not freed, by
 * valgrind or heaptrail) and dies in its own way.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost 128/1, still reachable 64/1
 *   in use at exit: 192 bytes in 2 blocks
 */
#ifndef HEAPTRAIL_E2E_KILLED_H
#define HEAPTRAIL_E2E_KILLED_H

#include <stdlib.h>
#include <unistd.h>

#include "kinds.h"

void *g_kept;

NOINLINE void leak_before_death(void)
{
	char *p = malloc(128); /* @site leak_before_death */

	memset(p, 'k', 128);
	KEEP(p);
}

NOINLINE void keep_before_death(void)
{
	STORE(g_kept, malloc(64)); /* @site keep_before_death */
}

static void prepare_to_die(const char *how)
{
	leak_before_death();
	keep_before_death();
	scrub_stack();
	if (write(1, how, strlen(how)) < 0)
		exit(9);
}

#endif
