/*
 * unbias — sampled counts turned into estimates of the true ones: the
 * reader's half of the agent's sampling (src/agent/sample.c is the
 * writer's half). A block of size a is sampled with probability
 * 1 - exp(-a/S) when the agent samples every S bytes on average (an
 * exponential countdown, as jemalloc, tcmalloc and Go do), so a stack's
 * sampled count and bytes, of mean block size a = bytes/count, are each
 * multiplied by 1 / (1 - exp(-a/S)). pprof and jeprof unbias heap_v2
 * dumps the same way. The one copy of the formula on the CLI side.
 *
 * It also says how far to trust an estimate: the variance of each
 * stack's estimate (prof_unbias_var) and a 90 % interval for a sum of
 * them (prof_interval90); unbias.c has the maths.
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

/* The estimated variance of the unbiased count and bytes of a stack of
 * count sampled blocks totalling bytes (0 when exact or empty). Variances
 * of different stacks add: they are independent. */
void prof_unbias_var(uint64_t sample, uint64_t count, uint64_t bytes,
		     double *var_count, double *var_bytes);

/* The 90 % interval [*lo, *hi] around an estimate est >= 0 of variance
 * var (a sum of prof_unbias_var()s); [est, est] when var is 0. For a
 * signed difference of two estimates (diff), prof_interval90_delta. */
void prof_interval90(double est, double var, double *lo, double *hi);
void prof_interval90_delta(double est, double var, double *lo, double *hi);

/* The z of a two-sided 90 % normal interval. */
#define PROF_Z90 1.6448536269514722

#endif
