/* For attach:timeout: the main thread sleeps 2 s in nanosleep (a
 * relative timeout, which a restart after a borrow would start again
 * whole), another thread waits in read on stdin. Prints "ready", then
 * after the sleep "slept MS" (the milliseconds the sleep took), and
 * exits 0 at end of input. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static void *reader(void *arg)
{
	char b[64];
	while (read(0, b, sizeof b) > 0)
		;
	return arg;
}

int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	struct timespec a, b, d = { 2, 0 };
	printf("ready\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &a);
	nanosleep(&d, NULL);  /* no remaining time kept in the program's memory */
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("slept %ld\n", (long)(b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000);
	fflush(stdout);
	pthread_join(t, NULL);
	return 0;
}
