/*
 * signal_exit — leaks, then dies of SIGTERM (default action): heaptrail
 * run must end the same way (killed by signal 15, not exit 143), with the
 * program's stdout intact.  Used by cli:signal-status only.  It sets
 * SIGTERM's disposition itself (to the default), which replaces the
 * agent's handler: no report, and the wrapper says so (the killed_*
 * programs leave the disposition alone and get one).
 *
 * For the record (valgrind memcheck, Debian 12): on a fatal signal
 * __libc_freeres does not run, so stdout's 4,096-byte buffer is in use
 * too: in use at exit: 4,224 bytes in 2 blocks (128 leaked + 4096).
 *
 * @cli-only
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void leak_before_signal(void)
{
	char *p = malloc(128); /* @site leak_before_signal */
	memset(p, 'k', 128);
	KEEP(p);
}

int main(void)
{
	leak_before_signal();
	printf("raising SIGTERM\n");
	fflush(stdout);
	signal(SIGTERM, SIG_DFL);
	raise(SIGTERM);
	return 0;
}
