/*
 * leaks_pid_hostile — a target for `heaptrail leaks PID` that the check
 * must survive: a thread with a 16 KiB stack waits (too small for the
 * CLI to borrow; it is stopped for the scan, and the leak check signal,
 * which the main thread blocks, would run a check there), and a live
 * block has a PROT_NONE page in its middle (a guard page).  The main thread reads
 * stdin to its end, then says "done" and exits 0.  Used by cli:leaks-pid
 * only: the check must report the 100-byte leak as definitely lost and
 * the program must end as it does bare.
 *
 * @cli-only
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kinds.h"

#define PAGE_SIZE 4096

static char *g_guarded;

NOINLINE void leak_hundred(void)
{
	char *p = malloc(100); /* @site leak_hundred */

	memset(p, 'h', 100);
	KEEP(p);
}

static void *wait_on_small_stack(void *arg)
{
	for (;;)
		pause();
	return arg;
}

int main(void)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t check;
	char buf[256];

	leak_hundred();
	STORE(g_guarded, aligned_alloc(PAGE_SIZE, 16 * PAGE_SIZE));
	memset(g_guarded, 0, 16 * PAGE_SIZE);
	if (mprotect(g_guarded + 4 * PAGE_SIZE, PAGE_SIZE, PROT_NONE))
		return 9;
	scrub_stack();
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 16384);
	if (pthread_create(&t, &attr, wait_on_small_stack, NULL))
		return 9;
	sigemptyset(&check);
	sigaddset(&check, SIGRTMAX - 2);  /* the agent's leak_check_signal */
	pthread_sigmask(SIG_BLOCK, &check, NULL);
	while (fread(buf, 1, sizeof(buf), stdin) > 0)
		;
	printf("done\n");
	return 0;
}
