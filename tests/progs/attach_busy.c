/* A program no thread of which waits in a plain system call: two threads
 * allocate and free without a pause, main waits in pthread_join. After
 * `secs` seconds (argv[1], default 5) it prints "done" and exits 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static atomic_int stop;

__attribute__((noinline)) static void *busy_site(size_t n)
{
	return malloc(n);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *slots[32] = { 0 };
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int i = (int)(rand_r(&seed) % 32);
		free(slots[i]);
		slots[i] = busy_site(16 + rand_r(&seed) % 512);
	}
	for (int i = 0; i < 32; i++)
		free(slots[i]);
	return NULL;
}

static void *timer(void *arg)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do  /* no sleep: this thread spins too */
		clock_gettime(CLOCK_MONOTONIC, &now);
	while (now.tv_sec - t0.tv_sec < (long)(intptr_t)arg);
	atomic_store(&stop, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	printf("ready\n");
	fflush(stdout);
	pthread_create(&t[0], NULL, worker, (void *)1);
	pthread_create(&t[1], NULL, worker, (void *)2);
	pthread_create(&t[2], NULL, timer, (void *)(intptr_t)(argc > 1 ? atoi(argv[1]) : 5));
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("done\n");
	return 0;
}
