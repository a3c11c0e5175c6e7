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
 * The random state is seeded with constants: the same draws every run.
 *
 * Prints "ok - ..." / "not ok - ..." per check and exits 1 when one failed.
 */
#include "agent/agent.h"
#include "agent/config.h"
#include "agent/sample.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* hooks.c's and dump.c's, which this test does not link */
__thread struct agent_tls agent_tls;

void agent_triggers_check(void)
{
}

static int failures;

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s - ", ok ? "ok" : "not ok");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	if (!ok)
		failures++;
}

static void weight(uint64_t sample, size_t n, uint64_t want_bytes, uint64_t want_blocks)
{
	uint64_t bytes = 0, blocks = 0;
	agent_config.sample = sample;
	agent_sample_weight(n, &bytes, &blocks);
	check(bytes == want_bytes && blocks == want_blocks,
	      "weight of %zu bytes at sample=%llu: %llu bytes, %llu blocks x1024 "
	      "(expected %llu, %llu)", n, (unsigned long long)sample,
	      (unsigned long long)bytes, (unsigned long long)blocks,
	      (unsigned long long)want_bytes, (unsigned long long)want_blocks);
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
	agent_config.sample = s;
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
	agent_config.sample = 65536;
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
	return failures ? 1 : 0;
}
