/* A program whose threads never enter the kernel while they work: main
 * and one worker compute rounds of a checksum over blocks they allocate
 * (cpu_site), reading the clock through the vDSO only, for argv[1]
 * seconds (default 5). Every round gives the same checksum by
 * construction (integer and floating-point state both feed it); a round
 * that differs, as when a stop did not put a register back, prints
 * "mismatch". Prints "ready", then "done CHECKSUM" and exits 0. One block
 * in 4096 rounds is leaked (still reachable through `kept`). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCKS 16

static atomic_int stop;
static atomic_int bad;
static void *kept[4096];
static atomic_int nkept;

__attribute__((noinline)) static uint64_t *cpu_site(size_t words)
{
	return malloc(words * sizeof(uint64_t));
}

static uint64_t round_sum(void)
{
	uint64_t *b[BLOCKS];
	uint64_t h = 1469598103934665603ull;
	double f = 1.0;
	for (int i = 0; i < BLOCKS; i++) {
		size_t n = 8 + (size_t)i * 5;
		b[i] = cpu_site(n);
		if (!b[i])
			abort();
		for (size_t k = 0; k < n; k++)
			b[i][k] = h ^ (k * 0x9e3779b97f4a7c15ull);
		for (size_t k = 0; k < n; k++) {
			h = (h ^ b[i][k]) * 1099511628211ull;
			f = f * 1.0000001 + (double)(b[i][k] & 0xff) / 256.0;
		}
	}
	for (int i = 0; i < BLOCKS; i++)
		free(b[i]);
	return h ^ (uint64_t)(f * 1e6);
}

static uint64_t work(double secs)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t first = round_sum();
	for (unsigned long r = 1;; r++) {
		if (round_sum() != first)
			atomic_store(&bad, 1);
		if (r % 4096 == 0) {
			int k = atomic_fetch_add(&nkept, 1);
			if (k < 4096)
				kept[k] = cpu_site(32);
		}
		if (r % 256 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 > secs ||
			    atomic_load_explicit(&stop, memory_order_relaxed))
				return first;
		}
	}
}

static double secs = 5;

static void *worker(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)work(secs + 1);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		secs = atof(argv[1]);
	printf("ready\n");
	fflush(stdout);
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	uint64_t mine = work(secs);
	atomic_store(&stop, 1);
	void *theirs;
	pthread_join(t, &theirs);
	if (atomic_load(&bad) || (uint64_t)(uintptr_t)theirs != mine)
		printf("mismatch\n");
	printf("done %016llx\n", (unsigned long long)mine);
	return 0;
}
