// build: agent
/*
 * test_sample_auto — sample=auto's raise of S (src/agent/sample.c,
 * agent_sample_raise): the live samples and the per-stack allocated
 * counts thinned so that they read as if sampled at the new S.
 *
 *  - the keep probability q(n) = (1 - exp(-n/S_new)) / (1 - exp(-n/S_old))
 *    against closed forms (S_new = 2 S_old):
 *      n = S_old:  (1 - e^-1/2) / (1 - e^-1) = 0.3934693 / 0.6321206
 *                  = 0.62245933...
 *      n -> 0:     S_old / S_new = 0.5 (the limit; n = 0 itself)
 *      n = 40 S_old: (1 - e^-20) / (1 - e^-40) = 1 - 2.06e-9
 *    and q = 1 when S does not rise;
 *  - end to end through the real tables: a stream of allocations of four
 *    sizes (one stack each), sampled by agent_sampled at S = 4 KiB and
 *    entered in the live table as the hooks do, half of them then freed;
 *    S raised to 64 KiB. Then, for each size n:
 *      - the live blocks still recorded number about L p(n) at 64 KiB
 *        (L: the true live count), within 4 standard deviations of that
 *        binomial count plus the earlier sampling's spread;
 *      - those blocks, weighted at 64 KiB, estimate the true live bytes
 *        within 4 standard errors of that estimate;
 *      - the stack's allocated-so-far counts, unbiased at 64 KiB the way
 *        jeprof and pprof do (by the mean size), estimate the true bytes
 *        allocated within 4 standard errors;
 *    and the agent's own live estimate (agent_counters_sum) equals the
 *    weights of the kept blocks at 64 KiB, summed here;
 *  - the countdown drawn at 4 KiB is thinned: the distances between
 *    points after the raise have mean 64 KiB (within 2 %).
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

/* startup.c's and triggers.c's, which this test does not link */
__thread struct agent_tls agent_tls;
char agent_boot_buf[AGENT_BOOT_SIZE];

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

static void keep_p(size_t n, uint64_t s_old, uint64_t s_new, double want, double tol)
{
	double q = agent_sample_keep_p(n, s_old, s_new);
	check(fabs(q - want) <= tol, "keep probability of %zu bytes from S=%llu to S=%llu: %.10f "
	      "(expected %.10f)", n, (unsigned long long)s_old, (unsigned long long)s_new, q, want);
}

#define NSIZES 4
static const size_t sizes[NSIZES] = { 64, 3000, 20000, 200000 };

static double p_at(double n, double s)
{
	return 1 - exp(-n / s);
}

int main(void)
{
	keep_p(4096, 4096, 8192, 0.6224593312, 1e-9);
	keep_p(0, 4096, 8192, 0.5, 1e-12);
	keep_p(1, 4096, 8192, 0.5, 1e-4);
	keep_p(40 * 4096, 4096, 8192, 1 - 2.06e-9, 1e-10);
	keep_p(100, 8192, 8192, 1.0, 0);

	const uint64_t s_old = 4096, s_new = 65536;
	agent_config.sample = s_old;
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
			size_t burst = sizes[NSIZES - 1] / sizes[k];
			for (size_t j = 0; j < burst && all_b[k] < (64u << 20); j++) {
				more = true;
				size_t n = sizes[k];
				uintptr_t a = (uintptr_t)(addr += (n + 4095) & ~(size_t)4095);
				bool freed = (round + j) & 1;
				all_b[k] += n;
				if (!freed) {
					live_n[k]++;
					live_b[k] += n;
				}
				if (!agent_sampled(n))
					continue;
				struct agent_stack *st = agent_stack_get(stack[k]);
				if (!agent_live_insert(a, n, stack[k]))
					continue;
				atomic_fetch_add(&st->total_bytes, n);
				atomic_fetch_add(&st->total_blocks, 1);
				agent_sample_note(c, n, +1);
				if (freed) {
					size_t sz;
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
	check(agent_config.sample == s_new, "S raised to %llu (asked %llu)",
	      (unsigned long long)agent_config.sample, (unsigned long long)s_new);

	/* what is left, per size */
	struct agent_kinds *per = calloc(NSIZES + 2, sizeof *per);
	agent_tables_lock_all();
	agent_live_per_stack_locked(per, NSIZES + 1);
	agent_tables_unlock_all();
	double weights = 0;
	for (int k = 0; k < NSIZES; k++) {
		double n = (double)sizes[k], pn = p_at(n, (double)s_new);
		double kept = (double)per[stack[k]].blocks[FMT_KIND_IN_USE];
		/* kept ~ Binomial(L, p_new(n)) in law */
		double mean = (double)live_n[k] * pn, sd = sqrt(mean * (1 - pn));
		check(fabs(kept - mean) <= 4 * sd + 1,
		      "%zu-byte blocks: %.0f recorded after the raise, expected %.1f +- %.1f (4 sd)",
		      sizes[k], kept, mean, 4 * sd);
		double est = kept * n / pn, se = sqrt(mean * (1 - pn)) * n / pn;
		check(fabs(est - (double)live_b[k]) <= 4 * se,
		      "%zu-byte blocks: live bytes estimated %.0f at S=%llu, truly %llu (4 se: %.0f)",
		      sizes[k], est, (unsigned long long)s_new, (unsigned long long)live_b[k], 4 * se);
		weights += est;

		/* the cumulative counts, read as jeprof and pprof read them */
		struct agent_stack *st = agent_stack_get(stack[k]);
		double kb = (double)atomic_load(&st->total_blocks), bb = (double)atomic_load(&st->total_bytes);
		double all_n = (double)all_b[k] / n, m = kb ? bb / kb : n;
		double est_all = bb / p_at(m, (double)s_new);
		double se_all = sqrt(all_n * pn * (1 - pn)) * n / pn;
		check(kb > 0 && fabs(m - n) < 1 && fabs(est_all - (double)all_b[k]) <= 4 * se_all + n,
		      "%zu-byte blocks: allocated so far estimated %.0f from %.0f samples of mean "
		      "size %.1f, truly %llu (4 se: %.0f)", sizes[k], est_all, kb, m,
		      (unsigned long long)all_b[k], 4 * se_all);
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
	return failures ? 1 : 0;
}
