/*
 * kind_thread_stack — blocks kept only in locals of frames that are
 * still live at exit: one in a thread that waits on a condition
 * variable nobody signals (the local is in a frame below the wait), one
 * in main's own frame, which calls exit().  The stack above each
 * thread's stack pointer is scanned: both are still reachable.  A block
 * whose last pointer was in a frame that has returned is definitely lost
 * (the dead frame is scrubbed, see kinds.h).
 *
 * The live thread holds a DTV too (see kind_thread_tls): possibly lost.
 * No stdio, for the reason given there.
 *
 *   hold_while_waiting  222/1  a volatile local of the waiting thread
 *   main                 99/1  a volatile local of main
 *   drop_in_thread       44/1  a local of a returned frame: definitely
 *   pthread_create      DTV 272/1 possibly lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable 321/2, definitely lost 44/1, possibly lost 272/1
 *   in use at exit: 637 bytes in 4 blocks
 *
 * @proc 0 exit=0 in_use=637/4
 * @kinds 0 definitely_lost=44/1 possibly_lost=272/1 still_reachable=321/2
 * @leak 0 hold_while_waiting 222/1 still_reachable
 * @leak 0 drop_in_thread 44/1 definitely_lost
 * @leak 0 allocate_dtv 272/1 possibly_lost
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "kinds.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;

NOINLINE void *block(size_t n, int fill)
{
	void *p = malloc(n); /* @site block */

	memset(p, fill, n);
	return p;
}

NOINLINE void drop_in_thread(void)
{
	void *volatile p = block(44, 'd');

	KEEP(p);
}

/* Blocks for good with the only pointer to a block in this frame. */
NOINLINE void hold_while_waiting(void)
{
	void *volatile held = block(222, 'h');

	scrub_stack();
	pthread_mutex_lock(&lock);
	ready = 1;
	pthread_cond_signal(&ready_cond);
	for (;;)                /* until exit() */
		pthread_cond_wait(&never, &lock);
	KEEP(held);
}

NOINLINE void *thread_main(void *arg)
{
	drop_in_thread();
	scrub_stack();
	hold_while_waiting();
	return arg;
}

static void say(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		abort();
}

int main(void)
{
	pthread_t t;
	void *volatile in_main;

	if (pthread_create(&t, NULL, thread_main, NULL))
		return 1;
	pthread_mutex_lock(&lock);
	while (!ready)
		pthread_cond_wait(&ready_cond, &lock);
	pthread_mutex_unlock(&lock);
	in_main = block(99, 'm');
	scrub_stack();
	say("exiting with a thread waiting on a condition variable\n");
	KEEP(in_main);
	exit(0);
}
