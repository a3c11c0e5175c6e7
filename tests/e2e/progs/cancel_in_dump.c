/*
 * cancel_in_dump — a thread with a cancellation request pending takes the
 * dump signal: the agent's handler writes the heap dump on that thread,
 * and its open/write/close are cancellation points. The dump must finish
 * (cancellation acts after it, at the thread's pthread_testcancel), so
 * the program's second signal and its exit still get their dumps; before,
 * the thread vanished inside the dump and every later dump was refused
 * as "busy". Run by cli:cancel-in-dump with --signal USR1 --final (bare,
 * SIGUSR1 would end it).
 *
 * @cli-only
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static void *victim(void *arg)
{
	char *p = malloc(100);
	KEEP(p);
	pthread_cancel(pthread_self());  /* pending: deferred cancellation */
	raise(SIGUSR1);                  /* the dump runs here */
	pthread_testcancel();
	return arg;
}

int main(void)
{
	pthread_t t;
	void *res;

	pthread_create(&t, NULL, victim, NULL);
	pthread_join(t, &res);
	printf("thread %s\n", res == PTHREAD_CANCELED ? "cancelled" : "returned");
	raise(SIGUSR1);
	printf("done\n");
	return 0;
}
