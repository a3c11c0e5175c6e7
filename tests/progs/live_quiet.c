/* live_quiet.c — a program for live:quiet (test_live.py): a thread that
 * sleeps and a thread that runs. The main thread sleeps 150 times 20 ms
 * with nanosleep and counts the sleeps a signal cut short (EINTR); a
 * worker thread computes without pause (and allocates a little, so the
 * profile is not empty). Prints "ready" at start and "eintr N" at the
 * end. A request sent to the running thread leaves N at 0. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static atomic_int stop;
void *volatile kept;

static void *worker(void *arg)
{
	(void)arg;
	unsigned long x = 1;
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 1000000; i++)
			x = x * 6364136223846793005ul + 1;
		free(kept);
		kept = malloc(64 + (x & 255));
	}
	return NULL;
}

int main(void)
{
	pthread_t t;
	kept = malloc(100);
	pthread_create(&t, NULL, worker, NULL);
	printf("ready\n");
	fflush(stdout);
	int eintr = 0;
	for (int i = 0; i < 150; i++) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		if (nanosleep(&ts, NULL) && errno == EINTR)
			eintr++;
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("eintr %d\n", eintr);
	return 0;
}
