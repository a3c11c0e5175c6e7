/*
 * prof_accuracy — three allocation sites whose true live bytes are known:
 * site_large holds 60 %, site_medium 30 % and site_small 10 % of 4 GiB,
 * each in blocks of mixed sizes (1 KiB to 256 KiB plus a few bytes, the
 * same log-uniform mix at every site, from a fixed-seed generator, the
 * sites interleaved).  The memory is never touched, so the run costs
 * little RSS: glibc maps big blocks lazily, small ones cost a header.
 *
 * Along the way a fourth site, scratch, allocates a quarter as much again
 * in the same mix and frees each block at once: it is in the dump's
 * allocated-so-far columns and not in use.
 *
 * With every block allocated the program asks for a heap dump
 * (heaptrail_dump(NULL) under heaptrail; under jemalloc's profiler,
 * mallctl("prof.dump"), which the runner uses as a reference; nothing in
 * a bare run), then frees everything, so an exact-mode exit has nothing
 * left to scan.  It prints the true bytes and blocks of each site, which
 * the prof:accuracy tests compare the dump's estimates with:
 *
 *   site_large 1288383360 bytes in 20772 blocks
 *   site_medium ...
 *   site_small ...
 *   total 2147510960 bytes in 34528 blocks
 *   scratch 534974936 bytes in 8632 blocks, freed
 *
 * (~35,000 blocks; at the default mean sample interval of 512 KiB about
 * 3,500 of them are sampled; the total's standard error is about 1.5 %.)
 *
 * @prof
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int heaptrail_dump(const char *path) __attribute__((weak));
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
	    size_t newlen) __attribute__((weak));

#define TOTAL (4ull << 30)  /* 4 GiB: ~8000 samples, so 5 % on the total is 6 sigma */
#define MAX_BLOCKS 65536

static void *blocks[MAX_BLOCKS];   /* static: no heap block holds them */
static size_t nblocks;

NOINLINE void *site_large(size_t n)
{
	void *p = malloc(n); /* @site site_large */
	KEEP(p);
	return p;
}

NOINLINE void *site_medium(size_t n)
{
	void *p = malloc(n); /* @site site_medium */
	KEEP(p);
	return p;
}

NOINLINE void *site_small(size_t n)
{
	void *p = malloc(n); /* @site site_small */
	KEEP(p);
	return p;
}

NOINLINE void scratch(size_t n)
{
	void *p = malloc(n); /* @site scratch */
	KEEP(p);
	free(p);
}

static const struct site {
	const char *name;
	void *(*alloc)(size_t);
	unsigned percent;
} sites[] = {
	{ "site_large", site_large, 60 },
	{ "site_medium", site_medium, 30 },
	{ "site_small", site_small, 10 },
};
#define NSITES (sizeof sites / sizeof sites[0])

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static unsigned long long next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(void)
{
	unsigned long long bytes[NSITES] = { 0 }, count[NSITES] = { 0 };
	unsigned long long done = 0, scratch_bytes = 0, scratch_n = 0;

	while (done < TOTAL && nblocks < MAX_BLOCKS) {
		/* The site furthest below its share gets the next block. */
		size_t s = 0;
		double worst = 2;
		for (size_t i = 0; i < NSITES; i++) {
			double share = (double)bytes[i] / (TOTAL * sites[i].percent / 100);
			if (share < worst) {
				worst = share;
				s = i;
			}
		}
		unsigned long long r = next_random();
		size_t n = ((size_t)1024 << (r % 9)) + (size_t)((r >> 8) % 1024) * 8;
		void *p = sites[s].alloc(n);
		if (!p) {
			fprintf(stderr, "out of memory after %llu bytes\n", done);
			return 1;
		}
		blocks[nblocks++] = p;
		bytes[s] += n;
		count[s]++;
		done += n;
		if (nblocks % 4 == 0) {
			r = next_random();
			n = ((size_t)1024 << (r % 9)) + (size_t)((r >> 8) % 1024) * 8;
			scratch(n);
			scratch_bytes += n;
			scratch_n++;
		}
	}

	if (heaptrail_dump)
		heaptrail_dump(NULL);
	else if (mallctl)
		mallctl("prof.dump", NULL, NULL, NULL, 0);

	unsigned long long total = 0, total_n = 0;
	for (size_t i = 0; i < NSITES; i++) {
		printf("%s %llu bytes in %llu blocks\n", sites[i].name, bytes[i], count[i]);
		total += bytes[i];
		total_n += count[i];
	}
	printf("total %llu bytes in %llu blocks\n", total, total_n);
	printf("scratch %llu bytes in %llu blocks, freed\n", scratch_bytes, scratch_n);
	for (size_t i = 0; i < nblocks; i++)
		free(blocks[i]);
	return 0;
}
