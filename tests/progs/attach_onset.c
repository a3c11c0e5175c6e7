/*
 * attach_onset.c — a service with a slow leak from the start and a fast
 * one that starts mid-run (issue 32; tests/agent/test_estimates.py,
 * estimates:onset), besides some churn:
 *
 *   lose_connection  512 bytes every 20 ms from the start (25.6 KB/s)
 *   cache_result     4 KiB every 4 ms from FAST seconds on, 1,024,000
 *                    B/s (a fast leak that starts late)
 *   serve            churn: 1 to 16 KiB buffers allocated and freed
 *
 * Usage: attach_onset SECONDS FAST. Prints "ready", then at the end
 * "done" and exits 0. The leaks run on absolute deadlines.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

static atomic_int stop;
void *volatile sink;

static void add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

NOINLINE void lose_connection(void)
{
	char *p = malloc(512);
	p[0] = 1;
	sink = p;
}

NOINLINE void cache_result(void)
{
	char *p = malloc(4096);
	p[0] = 1;
	sink = p;
}

NOINLINE void serve(unsigned *seed)
{
	size_t n = 1024 * (1 + rand_r(seed) % 16);
	char *p = malloc(n);
	p[0] = 1;
	sink = p;
	free(p);
}

static void *slow(void *arg)
{
	struct timespec t;
	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &t);
	while (!atomic_load(&stop)) {
		lose_connection();
		add_ns(&t, 20000000L);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
	}
	return NULL;
}

static int fast_after;

static void *fast(void *arg)
{
	struct timespec t;
	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += fast_after;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
	while (!atomic_load(&stop)) {
		cache_result();
		add_ns(&t, 4000000L);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
	}
	return NULL;
}

static void *churn(void *arg)
{
	unsigned seed = 3;
	struct timespec t;
	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &t);
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 50; i++)
			serve(&seed);
		add_ns(&t, 1000000L);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int seconds = atoi(argv[1]);
	fast_after = atoi(argv[2]);
	pthread_t th[3];
	pthread_create(&th[0], NULL, slow, NULL);
	pthread_create(&th[1], NULL, fast, NULL);
	pthread_create(&th[2], NULL, churn, NULL);
	printf("ready\n");
	fflush(stdout);
	struct timespec t = { seconds, 0 };
	nanosleep(&t, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	printf("done\n");
	return 0;
}
