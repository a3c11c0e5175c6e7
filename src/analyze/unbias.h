/*
 * unbias — sampled counts turned into estimates of the true ones: the
 * reader's half of the agent's sampling (src/agent/sample.c is the
 * writer's half). A block of size a is sampled with probability
 * 1 - exp(-a/S) when the agent samples every S bytes on average (an
 * exponential countdown, as jemalloc, tcmalloc and Go do), so a stack's
 * sampled count and bytes, of mean block size a = bytes/count, are each
 * multiplied by 1 / (1 - exp(-a/S)). pprof and jeprof unbias heap_v2
 * dumps the same way. The one copy of the formula on the CLI side.
 */
#ifndef HEAPTRAIL_ANALYZE_UNBIAS_H
#define HEAPTRAIL_ANALYZE_UNBIAS_H

#include <stdint.h>

/* The factor for a stack of count blocks totalling bytes, sampled every
 * sample bytes on average: 1 when sample <= 1 (every allocation was
 * recorded) or when count or bytes is 0. */
double prof_unbias_scale(uint64_t sample, uint64_t count, uint64_t bytes);

/* A heap dump's stack values unbiased as pprof does (each product
 * truncated to an integer; 0 when count or bytes is 0), saturated at
 * 2^62 so that hostile input (a huge count of tiny blocks) cannot
 * overflow. */
void prof_unbias_counts(uint64_t sample, uint64_t count, uint64_t bytes,
			int64_t *out_count, int64_t *out_bytes);

#endif
