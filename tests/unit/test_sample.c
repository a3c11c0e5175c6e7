// build: agent
/*
 * test_sample — the agent's sampling (src/agent/sample.c):
 *  - the weights (agent_sample_weight): exact mode counts a block as
 *    itself; at S = 512 KiB a block of n bytes, sampled with probability
 *    p = 1 - exp(-n/S), stands for n/p bytes and 1/p blocks (x1024). The
 *    expected values are worked out from closed forms, not from the code:
 *      n = S:   1/p = e/(e-1) = 1.5819767068693265...
 *               -> 829411.40 bytes (829411), 1619.94 blocks x1024 (1620)
 *      n = 4S:  1/p = 1/(1 - e^-4) = 1.0186573...
 *               -> 2136279.3 bytes (2136279), 1043.1 blocks x1024 (1043)
 *      n = 1:   1/p = 1/(1 - e^(-1/S)) = S + 1/2 + 1/(12 S) - ...
 *               -> 524288.5 bytes (524289 rounded half up),
 *                  1024 (S + 1/2) = 536871424 blocks x1024
 *  - the Poisson countdown (agent_sampled, agent_sample_slow): the
 *    distances drawn between sample points have mean S (within 1.5 %,
 *    about 7 standard errors over 200 000 draws) and an exponential
 *    shape (a share e^-1 = 0.3679 of them over S, e^-3 = 0.0498 over
 *    3S, within 0.005);
 *  - unbiasing end to end: a stream of allocations of mixed sizes through
 *    agent_sampled, the sampled ones weighted as above, estimates the
 *    true bytes and blocks of each size within 6 % (small blocks: about
 *    4000 samples each, 1.6 % standard error).
 *  - sample=auto's raise of S (agent_sample_raise): the live samples and
 *    the per-stack allocated counts thinned so that they read as if
 *    sampled at the new S. The keep probability
 *    q(n) = (1 - exp(-n/S_new)) / (1 - exp(-n/S_old)) against closed
 *    forms (S_new = 2 S_old):
 *      n = S_old:  (1 - e^-1/2) / (1 - e^-1) = 0.3934693 / 0.6321206
 *                  = 0.62245933...
 *      n -> 0:     S_old / S_new = 0.5 (the limit; n = 0 itself)
 *      n = 40 S_old: (1 - e^-20) / (1 - e^-40) = 1 - 2.06e-9
 *    and q = 1 when S does not rise;
 *  - end to end through the real tables: a stream of allocations of four
 *    sizes (one stack each), sampled by agent_sampled at S = 4 KiB and
 *    entered in the live table as the hooks do, half of them then freed
 *    (none of the largest: all its samples are live, so its allocated
 *    column must thin exactly as its live blocks do);
 *    S raised to 64 KiB. Then, for each size n:
 *      - the live blocks still recorded number about L p(n) at 64 KiB
 *        (L: the true live count): sampled at 4 KiB then thinned, each
 *        is kept with probability p_new(n), so the count is
 *        Binomial(L, p_new(n)): within 4 of its standard deviations;
 *      - those blocks, weighted at 64 KiB, estimate the true live bytes
 *        within 4 standard errors of that estimate;
 *      - the stack's allocated-so-far counts, unbiased at 64 KiB the way
 *        jeprof and pprof do (by the mean size), estimate the true bytes
 *        allocated within 4 standard errors, and are no fewer than the
 *        blocks still recorded in use;
 *    and the agent's own live estimate (agent_counters_sum) equals the
 *    weights of the kept blocks at 64 KiB, summed here;
 *  - after the raise the sample points come at the new rate: the
 *    distances between them have mean 64 KiB (within 2 %).
 * The random state is seeded with constants: the same draws every run.
 *
 * Prints "ok - ..." / "not ok - ..." per check and exits 1 when one failed.
 */
#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/sample.h"
#include "agent/startup.h"
#include "agent/table.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "check.h"

/* hooks.c's, dump.c's and startup.c's, which this test does not link */
__thread struct agent_tls agent_tls;
char agent_boot_buf[AGENT_BOOT_SIZE];

void agent_triggers_check(void)
{
}

static void weight(uint64_t sample, size_t n, uint64_t want_bytes, uint64_t want_blocks)
{
	uint64_t bytes = 0, blocks = 0;
	agent_sampling.period = sample;
	agent_sample_weight(n, &bytes, &blocks);
	check(bytes == want_bytes && blocks == want_blocks,
	      "weight of %zu bytes at sample=%llu: %llu bytes, %llu blocks x1024 "
	      "(expected %llu, %llu)", n, (unsigned long long)sample,
	      (unsigned long long)bytes, (unsigned long long)blocks,
	      (unsigned long long)want_bytes, (unsigned long long)want_blocks);
}

static void keep_p(size_t n, uint64_t s_old, uint64_t s_new, double want, double tol)
{
	double q = agent_sample_keep_p(n, s_old, s_new);
	check(fabs(q - want) <= tol, "keep probability of %zu bytes from S=%llu to S=%llu: %.10f "
	      "(expected %.10f)", n, (unsigned long long)s_old, (unsigned long long)s_new, q, want);
}

#define NSIZES 4
static const size_t raise_sizes[NSIZES] = { 64, 3000, 20000, 200000 };

static double p_at(double n, double s)
{
	return 1 - exp(-n / s);
}

/* sample=auto's raise, end to end (see the top) */
static void test_raise(void)
{
	keep_p(4096, 4096, 8192, 0.6224593312, 1e-9);
	keep_p(0, 4096, 8192, 0.5, 1e-12);
	keep_p(1, 4096, 8192, 0.5, 1e-4);
	keep_p(40 * 4096, 4096, 8192, 1 - 2.06e-9, 1e-10);
	keep_p(100, 8192, 8192, 1.0, 0);

	const uint64_t s_old = 4096, s_new = 65536;
	agent_sampling.period = s_old;
	agent_filter_init();
	agent_tls.rng = 0x9e3779b97f4a7c15ull;
	agent_tls.sample_left = 0;

	uint32_t stack[NSIZES];
	for (int k = 0; k < NSIZES; k++) {
		uintptr_t pcs[2] = { 0x401000 + (uintptr_t)k * 16, 0x402000 };
		stack[k] = agent_stack_intern(0, pcs, 2);
	}
	/* 64 MiB of each size, interleaved; block i lives at a made-up
	 * address; odd-numbered blocks are freed again */
	uint64_t live_n[NSIZES] = { 0 }, live_b[NSIZES] = { 0 }, all_b[NSIZES] = { 0 };
	uint64_t addr = 0x10000000;
	struct agent_counts *c = agent_my_counts();
	for (uint64_t round = 0;; round++) {
		bool more = false;
		for (int k = 0; k < NSIZES; k++) {
			size_t burst = raise_sizes[NSIZES - 1] / raise_sizes[k];
			for (size_t j = 0; j < burst && all_b[k] < (64u << 20); j++) {
				more = true;
				size_t n = raise_sizes[k];
				uintptr_t a = (uintptr_t)(addr += (n + 4095) & ~(size_t)4095);
				bool freed = ((round + j) & 1) && k != NSIZES - 1;
				all_b[k] += n;
				if (!freed) {
					live_n[k]++;
					live_b[k] += n;
				}
				if (!agent_sampled(n))
					continue;
				struct agent_stack *st = agent_stack_get(stack[k]);
				if (!agent_live_insert(a, n, stack[k], AGENT_LIVE_MALLOC))
					continue;
				atomic_fetch_add(&st->total_bytes, n);
				atomic_fetch_add(&st->total_blocks, 1);
				agent_sample_note(c, n, +1);
				if (freed) {
					size_t sz = 0;
					uint32_t id;
					agent_live_remove(a, &sz, &id);
					agent_sample_note(c, sz, -1);
				}
			}
		}
		if (!more)
			break;
	}
	agent_sample_raise(s_new);
	check(agent_sampling.period == s_new, "S raised to %llu (asked %llu)",
	      (unsigned long long)agent_sampling.period, (unsigned long long)s_new);

	/* what is left, per size */
	struct agent_kinds *per = calloc(NSIZES + 2, sizeof *per);
	agent_tables_lock_all();
	agent_live_per_stack_locked(per, NSIZES + 1);
	agent_tables_unlock_all();
	double weights = 0;
	for (int k = 0; k < NSIZES; k++) {
		double n = (double)raise_sizes[k], pn = p_at(n, (double)s_new);
		double kept = (double)per[stack[k]].blocks[FMT_KIND_IN_USE];
		/* kept ~ Binomial(L, p_new(n)) in law */
		double mean = (double)live_n[k] * pn, sd = sqrt(mean * (1 - pn));
		check(fabs(kept - mean) <= 4 * sd + 1,
		      "%zu-byte blocks: %.0f recorded after the raise, expected %.1f +- %.1f (4 sd)",
		      raise_sizes[k], kept, mean, 4 * sd);
		double est = kept * n / pn, se = sqrt(mean * (1 - pn)) * n / pn;
		check(fabs(est - (double)live_b[k]) <= 4 * se,
		      "%zu-byte blocks: live bytes estimated %.0f at S=%llu, truly %llu (4 se: %.0f)",
		      raise_sizes[k], est, (unsigned long long)s_new, (unsigned long long)live_b[k], 4 * se);
		weights += est;

		/* the cumulative counts, read as jeprof and pprof read them */
		struct agent_stack *st = agent_stack_get(stack[k]);
		double kb = (double)atomic_load(&st->total_blocks), bb = (double)atomic_load(&st->total_bytes);
		double all_n = (double)all_b[k] / n, m = kb ? bb / kb : n;
		double est_all = bb / p_at(m, (double)s_new);
		double se_all = sqrt(all_n * pn * (1 - pn)) * n / pn;
		check(kb > 0 && fabs(m - n) < 1 && fabs(est_all - (double)all_b[k]) <= 4 * se_all + n,
		      "%zu-byte blocks: allocated so far estimated %.0f from %.0f samples of mean "
		      "size %.1f, truly %llu (4 se: %.0f)", raise_sizes[k], est_all, kb, m,
		      (unsigned long long)all_b[k], 4 * se_all);
		check(kb >= kept && bb >= kept * n,
		      "%zu-byte blocks: allocated so far (%.0f samples, %.0f bytes) holds what is "
		      "in use (%.0f, %.0f)", raise_sizes[k], kb, bb, kept, kept * n);
	}
	struct agent_counts t;
	agent_counters_sum(&t);
	check(fabs((double)(int64_t)t.est_bytes - weights) <= 1.0 * NSIZES * 1000,
	      "the agent's live estimate %lld equals the kept blocks' weights at S=%llu, %.0f",
	      (long long)(int64_t)t.est_bytes, (unsigned long long)s_new, weights);

	/* the countdown drawn at 4 KiB: after the raise the points come
	 * every 64 KiB on average */
	double sum = 0;
	int points = 0;
	uint64_t since = 0;
	for (uint64_t i = 0; points < 20000; i++) {
		since += 64;
		if (agent_sampled(64)) {
			if (i)
				sum += (double)since;
			points++;
			since = 0;
		}
	}
	double mean = sum / (points - 1);
	check(fabs(mean / (double)s_new - 1) < 0.02,
	      "mean distance between sampled 64-byte blocks after the raise: %.0f bytes "
	      "(expected %llu within 2 %%)", mean, (unsigned long long)s_new);
	free(per);
}

int main(void)
{
	const uint64_t S = 512 * 1024;

	weight(1, 1000, 1000, 1024);
	weight(1, 1, 1, 1024);
	weight(S, S, 829411, 1620);
	weight(S, 4 * S, 2136279, 1043);
	weight(S, 1, 524289, 536871424);

	/* the distances between sample points: after a sampled allocation,
	 * sample_left is the next distance drawn */
	const uint64_t s = 4096;
	agent_sampling.period = s;
	/* a fixed seed: the same draws every run (seed() is not called while
	 * the state is not 0), so a statistical bound cannot fail by chance
	 * once it passed */
	agent_tls.rng = 0x9e3779b97f4a7c15ull;
	agent_tls.sample_left = 0;
	const int draws = 200000;
	double sum = 0;
	int over1 = 0, over3 = 0;
	for (int i = 0; i < draws; i++) {
		if (!agent_sample_slow(1)) {
			i--;
			continue;
		}
		double d = (double)agent_tls.sample_left;
		sum += d;
		over1 += d > (double)s;
		over3 += d > 3.0 * (double)s;
	}
	double mean = sum / draws;
	check(fabs(mean / (double)s - 1) < 0.015, "mean distance %.1f bytes at sample=%llu "
	      "(expected %llu within 1.5 %%)", mean, (unsigned long long)s, (unsigned long long)s);
	check(fabs((double)over1 / draws - 0.36788) < 0.005,
	      "share of distances over S: %.4f (expected e^-1 = 0.3679)", (double)over1 / draws);
	check(fabs((double)over3 / draws - 0.04979) < 0.005,
	      "share of distances over 3S: %.4f (expected e^-3 = 0.0498)", (double)over3 / draws);

	/* unbiasing: each size's estimated bytes and blocks against the truth */
	static const size_t sizes[] = { 16, 1000, 65536, 1 << 20 };
	enum { NS = sizeof sizes / sizeof sizes[0] };
	double est_bytes[NS] = { 0 }, est_blocks[NS] = { 0 };
	uint64_t true_bytes[NS] = { 0 }, true_blocks[NS] = { 0 };
	agent_sampling.period = 65536;
	agent_tls.rng = 0x2545f4914f6cdd1dull;
	agent_tls.sample_left = 0;
	/* 256 MiB of each size, interleaved */
	const uint64_t per_size = 256ull << 20;
	uint64_t step = 0;
	for (;;) {
		bool more = false;
		for (int k = 0; k < NS; k++) {
			/* a burst of small blocks per big one keeps the sizes mixed */
			size_t burst = (size_t)(sizes[NS - 1] / sizes[k]) / 64;
			for (size_t j = 0; j < (burst ? burst : 1); j++) {
				if (true_bytes[k] >= per_size)
					break;
				more = true;
				true_bytes[k] += sizes[k];
				true_blocks[k]++;
				if (agent_sampled(sizes[k])) {
					uint64_t b, n;
					agent_sample_weight(sizes[k], &b, &n);
					est_bytes[k] += (double)b;
					est_blocks[k] += (double)n / 1024.0;
				}
			}
		}
		if (!more)
			break;
		step++;
	}
	for (int k = 0; k < NS; k++) {
		double rb = est_bytes[k] / (double)true_bytes[k];
		double rn = est_blocks[k] / (double)true_blocks[k];
		check(fabs(rb - 1) < 0.06 && fabs(rn - 1) < 0.06,
		      "blocks of %zu bytes at sample=65536: estimated %.0f bytes in %.0f blocks, "
		      "truly %llu in %llu (ratios %.4f, %.4f; expected 1 within 6 %%)", sizes[k],
		      est_bytes[k], est_blocks[k], (unsigned long long)true_bytes[k],
		      (unsigned long long)true_blocks[k], rb, rn);
	}
	test_raise();
	return failures ? 1 : 0;
}
