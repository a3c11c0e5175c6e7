/*
 * small_stack_exit — the agent's work must fit on any stack the program
 * runs on: a thread with a 16 KiB stack asks for a leak check, then a
 * SIGUSR1 handler running on an 8 KiB sigaltstack calls exit(3), so the
 * exit report is written from there.  A report or check that runs on the
 * program's stack overflows it (SIGSEGV); heaptrail must end the same as
 * the bare run: the two lines, exit status 3, and the report.
 *
 *   leak_before  100/1: definitely lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost 100/1
 *   in use at exit: 100 bytes in 1 block
 *
 * @proc 0 exit=3 in_use=100/1
 * @kinds 0 definitely_lost=100/1
 * @leak 0 leak_before 100/1 definitely_lost
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "kinds.h"

int heaptrail_leak_check(int flags) __attribute__((weak));

static char g_altstack[8192] __attribute__((aligned(16)));

NOINLINE void leak_before(void)
{
	char *p = malloc(100); /* @site leak_before */

	memset(p, 'l', 100);
	KEEP(p);
}

static void *check_on_small_stack(void *arg)
{
	if (heaptrail_leak_check)
		heaptrail_leak_check(0);
	return arg;
}

static void exit_from_handler(int sig)
{
	(void)sig;
	exit(3);
}

int main(void)
{
	pthread_attr_t attr;
	pthread_t t;
	stack_t ss;
	struct sigaction sa;

	leak_before();
	scrub_stack();
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 16384);
	if (pthread_create(&t, &attr, check_on_small_stack, NULL) || pthread_join(t, NULL))
		return 9;
	printf("checked from a thread with a 16 KiB stack\n");
	memset(&ss, 0, sizeof(ss));
	ss.ss_sp = g_altstack;
	ss.ss_size = sizeof(g_altstack);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = exit_from_handler;
	sa.sa_flags = SA_ONSTACK;
	if (sigaltstack(&ss, NULL) || sigaction(SIGUSR1, &sa, NULL))
		return 9;
	printf("exit(3) from a handler on an 8 KiB sigaltstack\n");
	fflush(stdout);
	raise(SIGUSR1);
	return 1;
}
