/*
 * blocked_signals — every signal blocked in every thread (as xz's workers
 * and many thread pools do): 4 threads, created with everything blocked,
 * allocate, keep a block on their stack and wait on a condition variable
 * that is never signalled; the main thread (also blocking everything)
 * calls heaptrail_leak_check() and exits with the threads still running.
 * Every exit once waited 2 s for threads that could not be stopped and
 * printed a warning: @max-extra bounds the time above bare.  `heaptrail
 * leaks` calls cannot be delivered (the signal stays pending): they may
 * fail, but must answer, and the program must not notice.
 *
 * Expected (valgrind): 4 blocks of 128 bytes still reachable (each on a
 * live thread's stack), 2,000 bytes in 1 block definitely lost, plus
 * glibc's per-thread blocks (each live thread's DTV, possibly lost).
 *
 * @kinds 0 definitely_lost=2000/1 still_reachable=512/4
 * @vg
 * @max-extra 1.5
 */
#include <pthread.h>
#include <signal.h>

#include "hostile.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t ready;

static void *waiter(void *arg)
{
	char *volatile mine = malloc(128);
	memset(mine, 1, 128);
	(void)arg;
	pthread_barrier_wait(&ready);
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&never, &mu);
	return NULL;
}

int main(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_barrier_init(&ready, NULL, 5);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, waiter, NULL))
			die("pthread_create");
	pthread_barrier_wait(&ready);
	maybe_leak_check();
	nap_ms(800);
	leak_bytes(2000);
	scrub_stack();
	say("blocked_signals: exiting with 4 threads blocking everything\n");
	exit(0);
}
