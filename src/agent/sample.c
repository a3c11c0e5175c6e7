/*
 * sample.c — Poisson sampling of allocations, jemalloc's and Go's method.
 *
 * Think of every byte ever allocated as a point on a line, and put sample
 * points on that line at exponentially distributed distances of mean S
 * (the `sample` option). An allocation is sampled when it covers a sample
 * point. Each thread keeps the distance to its next point as a countdown
 * of bytes (agent_tls.sample_left): an allocation shorter than the
 * countdown just subtracts its size; one that reaches it is sampled, and a
 * new distance is drawn — the exponential distribution has no memory, so
 * what the sampled allocation overshot does not matter.
 *
 * A block of n bytes is therefore sampled with probability
 *     p(n) = 1 - exp(-n/S),
 * and weighting each sampled block by 1/p(n) — it stands for n/p(n) bytes
 * and 1/p(n) blocks — gives unbiased estimates of the whole heap. That is
 * exactly how jeprof and pprof read a `heap_v2/S` profile, so dumps carry
 * the raw sampled counts and S. For n much smaller than S a sample stands
 * for about S bytes; for n much larger, for itself. S = 1 is exact mode:
 * every allocation is recorded (p = 1).
 */
#include <math.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/sample.h"
#include "agent/pool.h"
#include "agent/table.h"
#include "agent/banned.h"

/* xorshift64*: small, fast, and good enough to draw distances. */
static uint64_t next_random(void)
{
	uint64_t x = agent_tls.rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	agent_tls.rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void seed(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
		     ((uint64_t)agent_gettid() << 32) ^ (uint64_t)(uintptr_t)&agent_tls;
	agent_tls.rng = s ? s : 1;
}

/* Bytes to the next sample point: Exp(S), at least 1. */
static int64_t draw(void)
{
	double u = (double)((next_random() >> 11) + 1) * 0x1.0p-53;  /* (0, 1] */
	double d = -log(u) * (double)agent_config.sample;
	return d >= 9e18 ? INT64_MAX : (int64_t)d + 1;
}

bool agent_sample_slow(size_t n)
{
	if (AGENT_UNLIKELY(!agent_tls.rng)) {
		/* a thread's first allocation: place its first point */
		seed();
		agent_tls.sample_left = draw();
		if ((uint64_t)n < (uint64_t)agent_tls.sample_left) {
			agent_tls.sample_left -= (int64_t)n;
			return false;
		}
	}
	agent_tls.sample_left = draw();
	return true;
}

void agent_sample_weight(size_t n, uint64_t *bytes, uint64_t *blocks_x1024)
{
	if (agent_config.sample <= 1) {
		*bytes = n;
		*blocks_x1024 = 1024;
		return;
	}
	double p = -expm1(-(double)n / (double)agent_config.sample);
	if (p < 1e-12)
		p = 1e-12;
	*bytes = (uint64_t)((double)n / p + 0.5);
	*blocks_x1024 = (uint64_t)(1024.0 / p + 0.5);
}

/* How much estimated allocation passes between two looks at the interval
 * and peak triggers: a look sums every thread's counters. */
#define CHECK_BYTES (1u << 20)

/* The time triggers (triggers.c sets them when they start): on, and how
 * often a thread looks (see sample.h). */
atomic_bool agent_time_on;
int agent_time_gate = 1;
uint64_t agent_time_tsc_gate;
static void (*on_time)(size_t n, int sign, bool counted);

void agent_sample_on_time(void (*fn)(size_t n, int sign, bool counted))
{
	on_time = fn;
}

void agent_time_due(size_t n, int sign)
{
	agent_tls.time_left = agent_time_gate;
	if (agent_time_tsc_gate)
		agent_tls.time_tsc = agent_rdtsc();
	if (on_time)
		on_time(n, sign, agent_config.sample <= 1);
}

/* The interval and peak triggers (triggers.c), set when they start. */
static void (*on_check)(void);

void agent_sample_on_check(void (*fn)(void))
{
	on_check = fn;
}

void agent_sample_note(struct agent_counts *c, size_t n, int sign)
{
	uint64_t bytes = n, blocks = 1024;
	/* the time triggers look before this event is estimated (in exact
	 * mode it is already counted), so a row can show just before it;
	 * when agent_time_turn says it is the thread's turn */
	if (atomic_load_explicit(&agent_time_on, memory_order_relaxed) && agent_time_turn(n))
		agent_time_due(n, sign);
	/* exact mode keeps no estimates: they are the tracked counts, which
	 * agent_counters_sum turns into them */
	if (agent_config.sample > 1) {
		agent_sample_weight(n, &bytes, &blocks);
		uint64_t b = sign < 0 ? (uint64_t)-bytes : bytes;
		uint64_t k = sign < 0 ? (uint64_t)-blocks : blocks;
		agent_count(&c->est_bytes, b);
		agent_count(&c->est_blocks_x1024, k);
		if (sign > 0) {
			agent_count(&c->est_allocated, bytes);
			agent_count(&c->est_allocs_x1024, blocks);
		}
	}
	if (sign > 0 && (agent_config.interval || agent_config.peak)) {
		agent_tls.since_check += bytes;
		if (agent_tls.since_check >= CHECK_BYTES && on_check) {
			agent_tls.since_check = 0;
			on_check();
		}
	}
}
/* jemalloc's prof.reset with a new lg_sample: every sample so far was
 * drawn at the old rate, so all of them are forgotten, as jemalloc does. */
void agent_resample(uint64_t sample)
{
	if (sample == agent_config.sample)
		return;
	agent_tables_lock_all();
	agent_live_clear_locked();
	agent_pool_clear_locked();
	if (agent_filter)  /* saturated slots (the bootstrap buffer's) stay */
		for (size_t i = 0; i < (1u << 20); i++)
			if (atomic_load_explicit(&agent_filter[i], memory_order_relaxed) != 0xffff)
				atomic_store_explicit(&agent_filter[i], 0, memory_order_relaxed);
	agent_config.sample = sample;
	if (sample > 1 && !agent_filter)
		agent_filter_init();
	agent_config.leak_kinds = false;  /* the blocks before now are gone */
	agent_tables_unlock_all();
	agent_reset_cumulative();
	agent_tls.sample_left = 0;
	agent_tls.rng = 0;
}

