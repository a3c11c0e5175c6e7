/*
 * fault_segv — dies of a real SIGSEGV (a write through a null pointer).
 * With the dump signal set to SIGSEGV the agent's handler used to return
 * into the faulting store, which faulted again: a dump loop for ever
 * instead of a crash. cli:fault-signal checks that such a signal is
 * refused and the program dies as it does bare.
 *
 * @cli-only
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int main(int argc, char **argv)
{
	char *p = malloc(32);
	KEEP(p);
	printf("about to fault\n");
	fflush(stdout);
	volatile int *bad = (volatile int *)(argc > 5 ? (void *)argv : NULL);
	*bad = 1;
	return 0;
}
