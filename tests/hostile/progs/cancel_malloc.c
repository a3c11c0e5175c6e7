/*
 * cancel_malloc — pthread_cancel of threads that are inside malloc/free:
 * 8 threads allocate and free in a loop with deferred cancellation
 * (pthread_testcancel between allocations) and are cancelled while they
 * allocate, 5 times over; the main thread then keeps allocating from new
 * threads and itself.  A heap dump every 4 MiB allocated (@env) is
 * written from inside malloc, so an agent that calls a cancellation point
 * (write, open, nanosleep...) with a lock held is cancelled holding it
 * and the next allocation hangs.  (Asynchronous cancellation inside
 * malloc is undefined bare too: glibc's arena lock stays held.)
 *
 * Leaks 800 bytes in 1 block, but what a cancelled thread held in flight
 * is lost too and varies from run to run, so no figures are checked:
 * the test is that nothing hangs and the output is unchanged.
 *
 * @env HEAPTRAIL_OPTIONS=interval=4m
 * @leaks-calls
 */
#include <pthread.h>

#include "hostile.h"

static void *churn(void *arg)
{
	unsigned s = (unsigned)(long)arg;
	for (;;) {
		s = s * 1103515245u + 12345u;
		void *p = malloc(32 + (s >> 16) % 256);
		KEEP(p);
		free(p);
		pthread_testcancel();
	}
	return NULL;
}

static void *after(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++) {
		void *p = malloc(64);
		KEEP(p);
		free(p);
	}
	return NULL;
}

int main(void)
{
	for (int round = 0; round < 5; round++) {
		pthread_t t[8];
		for (long i = 0; i < 8; i++)
			pthread_create(&t[i], NULL, churn, (void *)i);
		nap_ms(30);
		for (int i = 0; i < 8; i++)
			pthread_cancel(t[i]);
		for (int i = 0; i < 8; i++) {
			void *res;
			pthread_join(t[i], &res);
			if (res != PTHREAD_CANCELED)
				die("thread not cancelled");
		}
		pthread_t a[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&a[i], NULL, after, NULL);
		after(NULL);
		for (int i = 0; i < 2; i++)
			pthread_join(a[i], NULL);
	}
	leak_bytes(800);
	scrub_stack();
	printf("cancel_malloc: 40 threads cancelled while allocating, done\n");
	return 0;
}
