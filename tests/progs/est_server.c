/*
 * est_server — a small server's heap, for the sampled estimates and the
 * growth verdict of issue 17 (tests/agent/test_estimates.py):
 *
 *   cache_put       a warm cache of about 10 MB (2,560 entries of 1 to 7
 *                   KiB), filled before the first dump; 2 % of it is
 *                   replaced every 100 ms (an entry freed, a new one of
 *                   the same size put in): flat, but its blocks change
 *   handle_request  churn: 4 worker threads, each serving about 100
 *                   requests a second that allocate 2 to 9 buffers of 64 B
 *                   to 32 KiB, hold them a few ms and free them
 *   burst_buffer    churn in bursts: every 700 ms a 1.5 MiB buffer held
 *                   for 150 ms
 *   leak_session    the big leak: 1,500 bytes every 10 ms, 150 KB/s
 *   leak_token      the small leak: 240 bytes every 10 ms, 24 KB/s
 *
 *   churn_fast      with "busy": one more thread allocating and freeing
 *                   16 B to 4 KiB blocks, 100 every millisecond (about
 *                   100,000 a second, 200 MB/s; issue 32: a busy heap)
 *
 * Usage: est_server SECONDS ACCOUNTING_FILE [busy]. Under heaptrail the main
 * thread dumps the heap (heaptrail_dump) every second, and around each
 * dump writes to ACCOUNTING_FILE a line "SEQ BEFORE AFTER": the bytes the
 * program itself holds (what it asked malloc for and has not freed,
 * counted by the program) just before and just after the dump, so the
 * test can check each dump's estimate against the exact figure. The leaks
 * run on absolute deadlines, so their rates hold whatever the load.
 * Everything is freed at exit. Memory is touched lightly (one byte a
 * block), so RSS stays near the heap.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail.h"

#define NOINLINE __attribute__((noinline))
#define KIB 1024
#define CACHE_ENTRIES 2560
#define WORKERS 4

static _Atomic int64_t live;            /* bytes the program holds */
static _Atomic int stop;
static void *cache[CACHE_ENTRIES];
static size_t cache_size[CACHE_ENTRIES];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
void *volatile sink;

struct leak_list {
	void **v;               /* made once, never grown */
	size_t n, cap;
	pthread_mutex_t lock;
};
static struct leak_list sessions = { .lock = PTHREAD_MUTEX_INITIALIZER };
static struct leak_list tokens = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* malloc, counted: a macro, not a function, so that the function using
 * it is the allocation site (an inlined helper would show as a frame of
 * its own) */
#define take(n) ({ \
	size_t n_ = (n); \
	char *p_ = malloc(n_); \
	if (!p_) \
		abort(); \
	p_[0] = 1; \
	atomic_fetch_add(&live, (int64_t)n_); \
	(void *)p_; \
})

static inline __attribute__((always_inline)) void give(void *p, size_t n)
{
	if (!p)
		return;
	atomic_fetch_sub(&live, (int64_t)n);
	free(p);
}

static unsigned next_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

NOINLINE void cache_put(size_t i, size_t size)
{
	cache[i] = take(size);
	cache_size[i] = size;
}

NOINLINE void handle_request(unsigned *seed)
{
	void *buf[9];
	size_t sz[9];
	int n = 2 + (int)(next_rand(seed) % 8);
	for (int i = 0; i < n; i++) {
		sz[i] = 64 + next_rand(seed) % (32 * KIB - 64);
		buf[i] = take(sz[i]);
	}
	sleep_ms(1 + (long)(next_rand(seed) % 4));
	for (int i = 0; i < n; i++)
		give(buf[i], sz[i]);
}

NOINLINE void *burst_buffer(void)
{
	return take(1536 * KIB);
}

/* the lists are made big enough before the first dump (list_init): a
 * list that grew by realloc would be a third growing site */
static void keep(struct leak_list *l, void *p)
{
	pthread_mutex_lock(&l->lock);
	if (l->n < l->cap)
		l->v[l->n++] = p;
	pthread_mutex_unlock(&l->lock);
}

static void list_init(struct leak_list *l, size_t cap)
{
	l->v = take(cap * sizeof *l->v);
	l->cap = cap;
}

NOINLINE void leak_session(void)
{
	keep(&sessions, take(1500));
}

NOINLINE void leak_token(void)
{
	keep(&tokens, take(240));
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 17u;
	while (!atomic_load(&stop)) {
		handle_request(&seed);
		sleep_ms(5 + (long)(next_rand(&seed) % 6));
	}
	return NULL;
}

static void *leaker(void *arg)
{
	(void)arg;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	while (!atomic_load(&stop)) {
		add_ns(&t, 10 * 1000000L);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		leak_session();
		leak_token();
	}
	return NULL;
}

static void *housekeeper(void *arg)
{
	unsigned seed = 4242;
	long tick = 0;
	void *burst = NULL;
	(void)arg;
	while (!atomic_load(&stop)) {
		sleep_ms(50);
		tick++;
		if (tick % 2 == 0) {
			/* replace 2 % of the cache */
			pthread_mutex_lock(&cache_lock);
			for (int k = 0; k < CACHE_ENTRIES / 50; k++) {
				size_t i = next_rand(&seed) % CACHE_ENTRIES;
				size_t size = cache_size[i];
				give(cache[i], size);
				cache_put(i, size);
			}
			pthread_mutex_unlock(&cache_lock);
		}
		if (tick % 14 == 0)
			burst = burst_buffer();
		if (tick % 14 == 3) {
			give(burst, 1536 * KIB);
			burst = NULL;
		}
	}
	give(burst, 1536 * KIB);
	return NULL;
}

static void free_list(struct leak_list *l, size_t size)
{
	for (size_t i = 0; i < l->n; i++)
		give(l->v[i], size);
	give(l->v, l->cap * sizeof *l->v);
}

NOINLINE void churn_fast(unsigned *seed)
{
	size_t n = 16 + next_rand(seed) % 4081;
	void *p = take(n);
	give(p, n);
}

static void *churner(void *arg)
{
	unsigned seed = 7;
	(void)arg;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < 100; i++)
			churn_fast(&seed);
		add_ns(&t, 1000000L);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "busy"))) {
		fprintf(stderr, "usage: est_server SECONDS ACCOUNTING_FILE [busy]\n");
		return 2;
	}
	int busy = argc == 4;
	int seconds = atoi(argv[1]);
	int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(argv[2]);
		return 2;
	}
	list_init(&sessions, (size_t)seconds * 100 + 1000);
	list_init(&tokens, (size_t)seconds * 100 + 1000);
	unsigned seed = 99;
	for (size_t i = 0; i < CACHE_ENTRIES; i++)
		cache_put(i, (1 + next_rand(&seed) % 7) * KIB);
	pthread_t th[WORKERS + 3];
	for (uintptr_t i = 0; i < WORKERS; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	pthread_create(&th[WORKERS], NULL, leaker, NULL);
	pthread_create(&th[WORKERS + 1], NULL, housekeeper, NULL);
	if (busy)
		pthread_create(&th[WORKERS + 2], NULL, churner, NULL);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (int s = 0; s < seconds; s++) {
		add_ns(&t, 1000000000L);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		if (!heaptrail_loaded())
			continue;
		int64_t before = atomic_load(&live);
		heaptrail_dump(NULL);
		int64_t after = atomic_load(&live);
		char line[96];
		int n = snprintf(line, sizeof line, "%d %lld %lld\n", s, (long long)before,
				 (long long)after);
		if (write(fd, line, (size_t)n) != n)
			return 3;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < WORKERS + 2 + busy; i++)
		pthread_join(th[i], NULL);
	close(fd);
	for (size_t i = 0; i < CACHE_ENTRIES; i++)
		give(cache[i], cache_size[i]);
	free_list(&sessions, 1500);
	free_list(&tokens, 240);
	return 0;
}
