/*
 * attach_ptrs.c — a program that calls the allocator through pointers it
 * took before any attach, as libffi (Python's ctypes), zlib's zalloc,
 * Lua's lua_Alloc and libxml2's xmlMalloc keep them, and through the PLT
 * (tests/control/test_attach_ptrs.py). The pointers are taken in main,
 * before "ready": a slot redirected later does not change them.
 *
 * attach_ptrs leak: one thread, every millisecond: leak_ptr() allocates
 *     4096 bytes through the saved malloc and leak_plt() 1024 through the
 *     PLT, both dropped (leaked) at once.
 * attach_ptrs swap: one thread keeps a ring of 2048 blocks: each step
 *     allocates through the PLT (swap_plt), or every 8th step reallocs a
 *     block through the saved realloc (swap_realloc), every 16th through
 *     the saved aligned_alloc (swap_aligned), and frees the block it
 *     replaces through the saved free; every block carries its size and
 *     a pattern checked before it is freed or grown. The live heap is
 *     flat: 2048 blocks at most. The steps are a fixed sequence that
 *     restarts from an empty ring every 20,000 steps; the checksum of the
 *     values read in each round is the same every round.
 *
 * stdin: "count" -> "ok PTR PLT" (bytes leaked so far through each; for
 * swap "ok LIVE STEPS ROUNDS": blocks in the ring, steps and whole rounds
 * so far), "pause" (the thread stops at its next step: the same answer,
 * exact then), "resume" -> "ok", "quit" -> waits for one whole
 * round (swap), prints "done errors=N sum=HEX" (leak: "done"), exit 3.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *(*volatile my_malloc)(size_t);
static void (*volatile my_free)(void *);
static void *(*volatile my_realloc)(void *, size_t);
static void *(*volatile my_aligned_alloc)(size_t, size_t);

static atomic_ulong by_ptr, by_plt;
static atomic_int paused, stopped;
static atomic_int rounds;
static unsigned long errors;
static uint64_t round_sum;

static void nap_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000 };
	nanosleep(&ts, NULL);
}

/* at the pause: parked until resumed */
static void maybe_pause(void)
{
	while (atomic_load(&paused)) {
		atomic_store(&stopped, 1);
		nap_ms(1);
	}
	atomic_store(&stopped, 0);
}

__attribute__((noinline)) static void leak_ptr(void)
{
	char *p = my_malloc(4096);
	p[0] = 1;
	__asm__ volatile("" : : "r"(p) : "memory");
	atomic_fetch_add(&by_ptr, 4096);
}

__attribute__((noinline)) static void leak_plt(void)
{
	char *p = malloc(1024);
	p[0] = 1;
	__asm__ volatile("" : : "r"(p) : "memory");
	atomic_fetch_add(&by_plt, 1024);
}

static void *leaker(void *arg)
{
	for (;;) {
		maybe_pause();
		leak_ptr();
		leak_plt();
		nap_ms(1);
	}
	return NULL;
}

#define RING 2048
#define ROUND 20000
static unsigned char *volatile ring[RING];

static uint64_t xs(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	return *s = x;
}

/* A block: its size (8 bytes), then bytes pattern(i) = tag + i. */
static void fill(unsigned char *p, size_t n, unsigned char tag, size_t from)
{
	memcpy(p, &n, sizeof n);
	for (size_t i = from < 8 ? 8 : from; i < n; i++)
		p[i] = (unsigned char)(tag + i);
}

/* The block's checksum, or errors++ when its pattern is wrong. */
static uint64_t check(const unsigned char *p)
{
	size_t n;
	memcpy(&n, p, sizeof n);
	if (n < 16 || n > 4096) {
		errors++;
		return 0;
	}
	unsigned char tag = (unsigned char)(p[8] - 8);
	uint64_t sum = n * 31 + tag;
	for (size_t i = 8; i < n; i++)
		if (p[i] != (unsigned char)(tag + i)) {
			errors++;
			break;
		}
	return sum;
}

__attribute__((noinline)) static unsigned char *swap_plt(size_t n)
{
	return malloc(n);
}

__attribute__((noinline)) static unsigned char *swap_realloc(unsigned char *p, size_t n)
{
	return my_realloc(p, n);
}

__attribute__((noinline)) static unsigned char *swap_aligned(size_t n)
{
	return my_aligned_alloc(16, (n + 15) & ~(size_t)15);
}

static void *swapper(void *arg)
{
	uint64_t rng = 0, sum = 0;
	for (unsigned long step = 0;; step++) {
		unsigned k = step % ROUND;
		if (k == 0) {
			if (step) {
				if (!atomic_load(&rounds))
					round_sum = sum;
				else if (sum != round_sum)
					errors++;
				atomic_fetch_add(&rounds, 1);
			}
			rng = 0x9E3779B97F4A7C15ull, sum = 0;
			for (unsigned i = 0; i < RING; i++) {   /* each round from empty */
				if (ring[i]) {
					check(ring[i]);
					my_free(ring[i]);
				}
				ring[i] = NULL;
			}
		}
		if (k % 16 == 0) {
			maybe_pause();
			nap_ms(1);
		}
		uint64_t r = xs(&rng);
		unsigned s = (unsigned)(r % RING);
		size_t n = 16 + (r >> 20) % 1000;
		unsigned char tag = (unsigned char)(r >> 40);
		unsigned char *old = ring[s];
		if (old && k % 8 == 3) {   /* grown or shrunk in place of a new one */
			size_t had;
			sum += check(old);
			memcpy(&had, old, sizeof had);
			unsigned char *p = swap_realloc(old, n);
			if (!p)
				abort();
			unsigned char was = (unsigned char)(p[8] - 8);
			fill(p, n, was, had < n ? had : n);
			ring[s] = p;
		} else {
			unsigned char *p = k % 16 == 5 ? swap_aligned(n) : swap_plt(n);
			if (!p)
				abort();
			fill(p, n, tag, 0);
			if (old) {
				sum += check(old);
				my_free(old);
			}
			ring[s] = p;
		}
		sum = sum * 1099511628211ull + s;
		atomic_fetch_add(&by_plt, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	my_malloc = malloc;
	my_free = free;
	my_realloc = realloc;
	my_aligned_alloc = aligned_alloc;
	int swap = argc > 1 && !strcmp(argv[1], "swap");
	pthread_t t;
	pthread_create(&t, NULL, swap ? swapper : leaker, NULL);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "pause", 5)) {
			atomic_store(&paused, 1);
			while (!atomic_load(&stopped))
				nap_ms(1);
		} else if (!strncmp(line, "resume", 6)) {
			atomic_store(&paused, 0);
			printf("ok\n");
			fflush(stdout);
			continue;
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
		if (swap) {
			unsigned live = 0;
			for (unsigned i = 0; i < RING; i++)
				live += ring[i] != NULL;
			printf("ok %u %lu %d\n", live, atomic_load(&by_plt), atomic_load(&rounds));
		} else {
			printf("ok %lu %lu\n", atomic_load(&by_ptr), atomic_load(&by_plt));
		}
		fflush(stdout);
	}
	atomic_store(&paused, 0);
	if (swap) {
		int r = atomic_load(&rounds);
		while (atomic_load(&rounds) < (r ? r + 1 : 2))
			nap_ms(5);
		printf("done errors=%lu sum=%016llx\n", errors, (unsigned long long)round_sum);
	} else {
		printf("done\n");
	}
	fflush(stdout);
	_exit(3);
}
