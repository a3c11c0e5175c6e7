/* unbias.c — see unbias.h.
 *
 * The uncertainty of a sampled figure.
 *
 * Sampling puts points on each thread's line of allocated bytes as a
 * Poisson process of rate 1/S, so the blocks are sampled independently
 * of each other (disjoint stretches of a Poisson process are), a block
 * of size s with probability p(s) = 1 - exp(-s/S). The estimate of a sum
 * over blocks (bytes or count in use at one site, or in the whole heap)
 * is the Horvitz-Thompson one,
 *     X = sum over sampled blocks of x_i / p_i     (x_i = s_i, or 1),
 * which is unbiased, and whose variance is
 *     Var X = sum over all blocks of x_i^2 (1 - p_i) / p_i,
 * estimated without bias from the sample alone by
 *     V = sum over sampled blocks of x_i^2 (1 - p_i) / p_i^2.
 * A dump keeps, per stack, only the number k of sampled blocks and their
 * bytes, so every block of a stack is taken at the stack's mean size a
 * (what the unbiasing does too): for a stack,
 *     V_bytes = k a^2 (1 - p) / p^2,   V_count = k (1 - p) / p^2,
 * p = p(a). Small blocks (a << S): each sample stands for about S bytes,
 * X ~ k S and V ~ k S^2, the Poisson variance of k; big blocks (a >> S)
 * are always sampled, p ~ 1, V ~ 0: they are exact. Stacks and sites are
 * independent, so the V of a site, a function's flat or cum, or the whole
 * heap is the sum of its stacks' V.
 *
 * The 90 % interval. n = X^2 / V is the effective number of samples (k
 * for small blocks of one size; more when big blocks carry part of X).
 * The number of samples is Poisson, and with the few samples a site
 * often has (a 10 MB heap at S = 512 KiB holds about 20) the usual
 * X +- 1.645 sqrt(V) is poor: it goes below zero and, since V grows with
 * the samples seen, it is too narrow exactly when too few were drawn.
 * So the interval is the score interval of a Poisson mean given n:
 * the lambdas with |n - lambda| <= z sqrt(lambda),
 *     lambda = n + z^2/2 -+ z sqrt(n + z^2/4),   z = 1.645,
 * scaled by X/n. It is never negative, is asymmetric for small n (n = 4:
 * 0.45 X to 2.2 X) and tends to X +- z sqrt(V) for large n. Its
 * coverage of the true value is about 90 % from n of a few upwards
 * (tests/agent/test_estimates.py measures it on a running server).
 *
 * A difference of two dumps (diff, growth's changes) is a difference of
 * two estimates with their variances added (the samples of one block in
 * two dumps are the same sample, so this overstates the noise of a block
 * that is in both: the safe side); its interval is the normal
 * X +- z sqrt(V).
 */
#include <math.h>

#include "analyze/unbias.h"

double prof_unbias_scale(uint64_t sample, uint64_t count, uint64_t bytes)
{
	if (sample <= 1 || !count || !bytes)
		return 1.0;
	double avg = (double)bytes / (double)count;
	/* -expm1(-x) is 1 - exp(-x) without the cancellation for small x
	 * (tiny blocks, a large S) */
	return 1.0 / -expm1(-avg / (double)sample);
}

void prof_unbias_counts(uint64_t sample, uint64_t count, uint64_t bytes,
			int64_t *out_count, int64_t *out_bytes)
{
	if (!count || !bytes) {
		*out_count = *out_bytes = 0;
		return;
	}
	if (sample <= 1) {
		*out_count = (int64_t)count;
		*out_bytes = (int64_t)bytes;
		return;
	}
	double scale = prof_unbias_scale(sample, count, bytes);
	double c = (double)count * scale, b = (double)bytes * scale;
	*out_count = c < 0x1p62 ? (int64_t)c : INT64_C(1) << 62;
	*out_bytes = b < 0x1p62 ? (int64_t)b : INT64_C(1) << 62;
}

void prof_unbias_var(uint64_t sample, uint64_t count, uint64_t bytes,
		     double *var_count, double *var_bytes)
{
	*var_count = *var_bytes = 0;
	if (sample <= 1 || !count || !bytes)
		return;
	double a = (double)bytes / (double)count, x = a / (double)sample;
	double p = -expm1(-x);
	/* (1 - p) / p^2 = exp(-x) / p^2 */
	double f = exp(-x) / (p * p);
	*var_count = (double)count * f;
	*var_bytes = (double)count * a * a * f;
	if (!isfinite(*var_count) || *var_count > 0x1p120)
		*var_count = 0x1p120;
	if (!isfinite(*var_bytes) || *var_bytes > 0x1p120)
		*var_bytes = 0x1p120;
}

void prof_interval90(double est, double var, double *lo, double *hi)
{
	*lo = *hi = est;
	if (!(var > 0) || !(est > 0))
		return;
	double z = PROF_Z90, n = est * est / var, unit = est / n;
	double c = n + z * z / 2, h = z * sqrt(n + z * z / 4);
	*lo = c - h > 0 ? (c - h) * unit : 0;
	*hi = (c + h) * unit;
}

void prof_interval90_delta(double est, double var, double *lo, double *hi)
{
	double h = var > 0 ? PROF_Z90 * sqrt(var) : 0;
	*lo = est - h;
	*hi = est + h;
}
