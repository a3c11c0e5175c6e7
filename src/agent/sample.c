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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/sample.h"
#include "agent/pool.h"
#include "agent/quarantine.h"
#include "agent/table.h"
#include "agent/banned.h"

/* The agent needs no libm: an attach loads it into images that may have
 * none (a container's minimal root, src/control/inject.c), and these two are
 * all the sampling maths takes, within a few units in the last place of
 * libm's (checked against libm over 2 million arguments when written; the
 * weights and draws of tests/unit/test_sample.c go through them). */
/* ln(x), x > 0 and finite: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * ln m = 2 atanh(t) with t = (m - 1) / (m + 1), |t| < 0.172, whose odd
 * series is summed to t^27 (the next term is below 2^-70). */
static double agent_ln(double x)
{
	union { double d; uint64_t u; } v = { x };
	int e = 0;
	if (!(v.u >> 52))  /* subnormal: scale into the normal range */
		v.d *= 0x1p54, e = -54;
	e += (int)(v.u >> 52) - 1023;
	v.u = (v.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m = v.d;
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	double t = (m - 1) / (m + 1), t2 = t * t, sum = 0;
	for (int k = 27; k >= 1; k -= 2)
		sum = sum * t2 + 1.0 / k;
	return (double)e * 0x1.62e42feep-1 + ((double)e * 0x1.a39ef35793c76p-33 + 2 * t * sum);
}

/* exp(x) - 1, accurate near 0 too: the Taylor series where |x| < 1/2;
 * elsewhere exp(x) = 2^k exp(r), x = k ln 2 + r, |r| <= ln 2 / 2. */
static double agent_expm1(double x)
{
	double term = x, sum = x;
	if (x > -0.5 && x < 0.5) {
		for (int k = 2; k <= 20; k++) {
			term *= x / k;
			sum += term;
		}
		return sum;
	}
	if (x < -750)
		return -1;
	if (x > 709.7)
		return 1.0 / 0.0;
	double kd = x * 1.4426950408889634 + (x < 0 ? -0.5 : 0.5);
	int k = (int)kd;
	double r = (x - k * 0x1.62e42feep-1) - k * 0x1.a39ef35793c76p-33;
	term = sum = 1;
	for (int i = 1; i <= 20; i++) {
		term *= r / i;
		sum += term;
	}
	/* times 2^k, in two steps so that 2^k itself is always a normal double */
	int k1 = k / 2, k2 = k - k1;
	union { double d; uint64_t u; } s1 = { .u = (uint64_t)(k1 + 1023) << 52 },
					s2 = { .u = (uint64_t)(k2 + 1023) << 52 };
	return sum * s1.d * s2.d - 1;
}

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

/* Uniform on (0, 1]. */
static double uniform(void)
{
	return (double)((next_random() >> 11) + 1) * 0x1.0p-53;
}

/* Bytes to the next sample point: Exp(S), at least 1. */
static int64_t draw(void)
{
	double d = -agent_ln(uniform()) * (double)agent_sampling.period;
	agent_tls.sample_s = agent_sampling.period;
	return d >= 9e18 ? INT64_MAX : (int64_t)d + 1;
}

static void auto_look(void);

/*
 * A point that the countdown reaches was placed at the rate of the S it
 * was drawn at (agent_tls.sample_s). When S has risen since (sample=auto,
 * another thread's doing), the point is kept with probability
 * S_old / S_new, and when it is not, the next one is Exp(S_new) further:
 * a Poisson process of rate 1/S_old thinned so is one of rate 1/S_new,
 * so the allocation in flight is sampled exactly as at the new S.
 */
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
	if (AGENT_UNLIKELY(agent_tls.sample_s < agent_sampling.period)) {
		double keep = (double)agent_tls.sample_s / (double)agent_sampling.period;
		if (uniform() > keep) {
			int64_t at = agent_tls.sample_left, d = draw();
			at = at > INT64_MAX - d ? INT64_MAX : at + d;
			if ((uint64_t)n < (uint64_t)at) {
				agent_tls.sample_left = at - (int64_t)n;
				return false;
			}
		}
	}
	agent_tls.sample_left = draw();
	if (AGENT_UNLIKELY(agent_sampling.automatic)) {
		auto_look();
		agent_tls.sample_tsc = agent_rdtsc();  /* its cost: up to its note */
	}
	return true;
}

/* The chance that a block of n bytes is sampled at S: p(n) = 1 - exp(-n/S). */
static double sampled_p(double n, double s)
{
	return -agent_expm1(-n / s);
}

bool agent_sample_guard_pick(size_t n, uint64_t rate)
{
	if (AGENT_UNLIKELY(!agent_tls.rng))
		seed();
	if (agent_sampling.period <= 1) {
		/* exact: a countdown of its own, as the sampler's, run out
		 * (agent_guard_due) or never drawn */
		bool first = !agent_tls.guard_left;
		double d = -agent_ln(uniform()) * (double)rate;
		agent_tls.guard_left = d >= 9e18 ? INT64_MAX : (int64_t)d + 1;
		return !first || uniform() < sampled_p((double)n, (double)rate);
	}
	/* sampled at S: this allocation was picked with chance p(n, S);
	 * guarded with p(n, R) / p(n, S) of that, it is picked with p(n, R)
	 * in all (every one, when R is finer than S) */
	double s = (double)agent_sampling.period;
	return uniform() * sampled_p((double)n, s) < sampled_p((double)n, (double)rate);
}

static void weight_at(size_t n, uint64_t sample, uint64_t *bytes, uint64_t *blocks_x1024)
{
	if (sample <= 1) {
		*bytes = n;
		*blocks_x1024 = 1024;
		return;
	}
	double p = sampled_p((double)n, (double)sample);
	if (p < 1e-12)
		p = 1e-12;
	*bytes = (uint64_t)((double)n / p + 0.5);
	*blocks_x1024 = (uint64_t)(1024.0 / p + 0.5);
}

void agent_sample_weight(size_t n, uint64_t *bytes, uint64_t *blocks_x1024)
{
	weight_at(n, agent_sampling.period, bytes, blocks_x1024);
}

/* How much estimated allocation passes between two looks at the interval
 * and peak triggers: a look sums every thread's counters. An interval
 * below that is looked at after each of its own steps, so a small
 * program's --interval 4k writes its dumps too. */
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
	if (AGENT_UNLIKELY(agent_tls.draining))
		__atomic_fetch_or(&agent_tls.due, AGENT_DUE_TIME, __ATOMIC_RELAXED);
	else if (on_time)
		on_time(n, sign, agent_sampling.period <= 1);
}

/* The interval and peak triggers (triggers.c), set when they start. */
static void (*on_check)(void);

void agent_sample_on_check(void (*fn)(void))
{
	on_check = fn;
}

static _Atomic uint64_t auto_want;   /* S a thread's look asked for */
static AGENT_NOINLINE void auto_raise_asked(void);

void agent_sample_note(struct agent_counts *c, size_t n, int sign)
{
	uint64_t bytes = n, blocks = 1024;
	/* a raise asked for by auto_look is made here, where a dump could
	 * be written too (a new block: out of every table lock) */
	if (AGENT_UNLIKELY(atomic_load_explicit(&auto_want, memory_order_relaxed) > agent_sampling.period) &&
	    sign > 0) {
		if (AGENT_UNLIKELY(agent_tls.draining))
			__atomic_fetch_or(&agent_tls.due, AGENT_DUE_RAISE, __ATOMIC_RELAXED);
		else
			auto_raise_asked();
	}
	/* the time triggers look before this event is estimated (in exact
	 * mode it is already counted), so a row can show just before it;
	 * when agent_time_turn says it is the thread's turn */
	if (atomic_load_explicit(&agent_time_on, memory_order_relaxed) && agent_time_turn(n))
		agent_time_due(n, sign);
	/* exact mode keeps no estimates: they are the tracked counts, which
	 * agent_counters_sum turns into them */
	if (agent_sampling.period > 1) {
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
	if (sign > 0 && agent_tls.sample_tsc) {
		agent_auto_charge(agent_tls.sample_tsc);
		agent_tls.sample_tsc = 0;
	}
	if (sign > 0 && (agent_config.interval || agent_config.peak)) {
		agent_tls.since_check += bytes;
		if ((agent_tls.since_check >= CHECK_BYTES ||
		     (agent_config.interval && agent_tls.since_check >= agent_config.interval)) &&
		    on_check) {
			agent_tls.since_check = 0;
			if (AGENT_UNLIKELY(agent_tls.draining))
				__atomic_fetch_or(&agent_tls.due, AGENT_DUE_CHECK, __ATOMIC_RELAXED);
			else
				on_check();
		}
	}
}

void agent_sample_run_due(void)
{
	/* one instruction: a handler's note lands before it or after it */
	int due = __atomic_exchange_n(&agent_tls.due, 0, __ATOMIC_RELAXED);
	if (due & AGENT_DUE_RAISE)
		auto_raise_asked();
	/* nothing is being noted now: the row "just before" is the row of now */
	if ((due & AGENT_DUE_TIME) && on_time)
		on_time(0, +1, false);
	if ((due & AGENT_DUE_CHECK) && on_check)
		on_check();
}

/* agent_sampling.notes, after period or the options changed. */
static void notes_update(void)
{
	agent_sampling.notes = agent_sampling.period > 1 || agent_config.interval ||
			       agent_config.peak;
}

void agent_sampling_start(void)
{
	agent_sampling.period = agent_config.sample;
	notes_update();
	agent_sampling.automatic = agent_config.sample_auto;
	/* classifying needs every block: only in exact mode */
	agent_sampling.leak_kinds = agent_config.leak_kinds && agent_config.sample <= 1;
}

/* jemalloc's prof.reset with a new lg_sample: every sample so far was
 * drawn at the old rate, so all of them are forgotten, as jemalloc does. */
void agent_resample(uint64_t sample, bool automatic)
{
	agent_sampling.automatic = automatic;
	notes_update();  /* the options may be new (an attach) */
	if (sample == agent_sampling.period)
		return;
	agent_tables_lock_all();
	agent_live_clear_locked();
	agent_pool_clear_locked();
	if (agent_filter)  /* saturated slots (the bootstrap buffer's) stay */
		for (size_t i = 0; i < (1u << 20); i++)
			if (atomic_load_explicit(&agent_filter[i], memory_order_relaxed) != 0xffff)
				atomic_store_explicit(&agent_filter[i], 0, memory_order_relaxed);
	if (agent_filter)  /* the quarantine's blocks stay counted */
		agent_quarantine_refilter();
	agent_sampling.period = sample;
	notes_update();
	atomic_store(&auto_want, 0);  /* asked for at the old S */
	if (sample > 1 && !agent_filter)
		agent_filter_init();
	agent_sampling.leak_kinds = false;  /* the blocks before now are gone */
	agent_tables_unlock_all();
	agent_reset_cumulative();
	agent_tls.sample_left = 0;
	agent_tls.rng = 0;
}


/*
 * sample=auto — S follows the heap.
 *
 * S starts at AGENT_SAMPLE_AUTO_MIN (8 KiB) and only ever rises, by
 * powers of two, up to AGENT_SAMPLE_AUTO_MAX (512 KiB, the fixed default:
 * auto never samples more coarsely than it). Two rules raise it, looked at
 * by each thread every AUTO_WINDOW samples it takes:
 *
 *  - the heap: once the live table holds 4 N samples (N = AUTO_SAMPLES,
 *    2,000), S doubles until it would hold fewer than 4 N, so the live
 *    heap keeps between 2 N and 4 N samples once it is big enough (at 8
 *    KiB, N samples are 16 MB; a smaller heap has fewer, at the finest S).
 *    Why not finer than 8 KiB: readers unbias a stack by its mean block
 *    size (jeprof, pprof, heaptrail: the text format has one line per
 *    stack), which is exact when the stack's blocks are all much smaller
 *    or all much larger than S and biased low when their sizes spread
 *    around S (a cache of 1 to 7 KiB blocks: -0.7 % at 4 KiB, -0.24 % at
 *    8 KiB); at 4 KiB that bias was a third of the test server's 90 %
 *    interval, and its intervals held the truth in 85 % of dumps, not 90.
 *    N = 2,000 puts the 90 % interval of the live heap within about
 *    ±1.645/sqrt(2,000) = ±3.7 % (less with big blocks), and a leak of
 *    a hundredth of the heap's rate still brings tens of samples a run;
 *  - the cost, in time: a thread that spends more than 1/AUTO_SHARE
 *    (1 %) of its time taking samples, beyond a burst of AUTO_BURST_NS
 *    (10 ms: a program filling a cache at start-up, a one-time cost),
 *    raises S at once to where its last window's share would fit (at
 *    least doubling it). A sample's time is measured (the TSC from the
 *    decision to sample to the block's note: the allocator's call, the
 *    stack, the table), not assumed: a stack the thread's walk memo
 *    already knows costs a few hundred instructions, a new walk about
 *    1,800 on Debian's sqlite3 (callgrind, bench/RESULTS.md), so a
 *    thread churning through a few stacks can afford ten times the
 *    samples of one whose every stack is new. The free's side counts too
 *    (hooks.c, free_slow: a free the filter sends to the table, its
 *    entry's cache miss included): on churn, whose frees are of random
 *    old blocks, it costs several times the allocation's side (perf:
 *    note_free 3 % of the run at auto, note_alloc 0.6 %). A sample's
 *    time is capped at AGENT_SAMPLE_COST_MAX ticks (5 to 10 us: a sample
 *    walks at most a few thousand instructions; one that took longer
 *    was preempted, which a loaded machine does often). (The budget used to count
 *    samples, 2,000 a second: a churning thread then lifted S to 512
 *    KiB within milliseconds, and a 10 MB heap kept about 20 samples.)
 *    The heap rule cannot make sampling dear (it only raises S), and a
 *    fine S costs little while the allocation rate is low, which this
 *    rule checks.
 *
 * Raising S from S_old to S_new while sampled blocks are live: each live
 * sampled block of n bytes is kept with probability
 *     q(n) = p_new(n) / p_old(n) = (1 - exp(-n/S_new)) / (1 - exp(-n/S_old))
 * and forgotten otherwise (it stays in the program's heap; its free is
 * then a free of an untracked block, as for any unsampled one). A block
 * is then recorded with probability p_old(n) q(n) = p_new(n): the set is
 * distributed exactly as if it had been sampled at S_new all along, and
 * the next dump, with S_new in its header, is unbiased by jeprof, pprof
 * and heaptrail alike. One dump has one S: the thinning is made with
 * every table lock held, as a dump's snapshot is taken.
 *
 * The cumulative columns (allocated so far per stack: raw sampled counts
 * k blocks and b bytes) are thinned the same way: the samples still live
 * exactly as above (kept or not with the block), the k_f freed ones, of
 * b_f bytes, whose sizes are gone, with their mean size m = b_f / k_f
 * standing for each one's (exact when a stack allocates one size, as
 * most do): k_f' ~ Binomial(k_f, q(m)), b_f' = k_f' m. Readers scale a
 * stack by its mean size too (jeprof, pprof), so the columns keep
 * estimating what was allocated since the start, and never fall below
 * what is in use. (Above 256 blocks the binomial is replaced by k_f q
 * rounded at random: the same mean, a little less spread.) The agent's own estimates (the timeline, the peak, the
 * exit report's totals) were weighted when each block was sampled; the
 * live part is recomputed at S_new over the kept blocks.
 *
 * Which blocks are kept is decided by a hash of the address and a salt
 * drawn per raise, not by a draw per visit: the thinning may see a block
 * twice (table.h), and must decide the same way.
 */
#define AUTO_SAMPLES 2000
#define AUTO_WINDOW 128
#define AUTO_SHARE 100
#define AUTO_BURST_NS 10000000.0

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t agent_sample_auto_target(uint64_t s, size_t live_samples)
{
	uint64_t want = s;
	while (want < AGENT_SAMPLE_AUTO_MAX && (double)live_samples * (double)s / (double)want >= 4.0 * AUTO_SAMPLES)
		want *= 2;
	return want;
}

/* Every AUTO_WINDOW samples of this thread: may ask for a raise (made by
 * the next agent_sample_note, which may take locks; this may not). */
static AGENT_NOINLINE void auto_look_slow(void)
{
	agent_tls.auto_n = 0;
	uint64_t s = agent_sampling.period, t = now_ns(), tsc = agent_rdtsc(), want;
	double share = 0;  /* of this window's time, spent taking samples */
	if (agent_tls.auto_ns && t > agent_tls.auto_ns && tsc > agent_tls.auto_tsc) {
		/* time over the budget, carried over windows: a burst
		 * (filling a cache) is forgiven, a steady excess is not */
		double span = (double)(t - agent_tls.auto_ns);
		share = (double)agent_tls.auto_cost / (double)(tsc - agent_tls.auto_tsc);
		double debt = (double)agent_tls.auto_debt + share * span - span / AUTO_SHARE;
		agent_tls.auto_debt = debt < 0 ? 0 : debt > 4e9 ? 4000000000u : (uint32_t)debt;
	}
	agent_tls.auto_ns = t;
	agent_tls.auto_tsc = tsc;
	agent_tls.auto_cost = 0;
	want = agent_sample_auto_target(s, agent_live_count_racy());
	if (agent_tls.auto_debt > AUTO_BURST_NS) {
		/* over budget: at once to an S at which this window's share
		 * would fit it (samples are as many as S is fine) */
		agent_tls.auto_debt = 0;
		uint64_t cost = s * 2;
		while (cost < AGENT_SAMPLE_AUTO_MAX && share * (double)s / (double)cost > 1.0 / AUTO_SHARE)
			cost *= 2;
		if (cost > AGENT_SAMPLE_AUTO_MAX)
			cost = AGENT_SAMPLE_AUTO_MAX;
		if (cost > want)
			want = cost;
	}
	uint64_t cur = atomic_load_explicit(&auto_want, memory_order_relaxed);
	while (want > s && want > cur &&
	       !atomic_compare_exchange_weak_explicit(&auto_want, &cur, want, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static void auto_look(void)
{
	if (++agent_tls.auto_n >= AUTO_WINDOW)
		auto_look_slow();
}

double agent_sample_keep_p(size_t n, uint64_t s_old, uint64_t s_new)
{
	if (s_new <= s_old)
		return 1.0;
	if (s_old <= 1)
		return sampled_p((double)n, (double)s_new);
	if (n == 0)  /* the limit of q(n) as n -> 0 */
		return (double)s_old / (double)s_new;
	return sampled_p((double)n, (double)s_new) / sampled_p((double)n, (double)s_old);
}

/* A stack's recorded blocks at a raise: live, and live and kept. */
struct thin_stack {
	uint64_t n, bytes, kept_n, kept_bytes;
};

struct thin {
	uint64_t s_old, s_new, salt;
	int64_t est_bytes, est_blocks;   /* the live estimates' change */
	struct thin_stack *per;          /* [1..nstacks], or NULL (no memory) */
	uint32_t nstacks;
};

/* splitmix64's finalizer: the block's own uniform draw for this raise */
static double block_u(uintptr_t addr, uint64_t salt)
{
	uint64_t z = (uint64_t)addr ^ salt;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)((z >> 11) + 1) * 0x1.0p-53;
}

static bool thin_keep(uintptr_t addr, size_t size, void *arg)
{
	const struct thin *t = arg;
	return block_u(addr, t->salt) <= agent_sample_keep_p(size, t->s_old, t->s_new);
}

static bool thin_per_stack(uintptr_t addr, size_t size, uint32_t stack, struct thin *t)
{
	bool keep = thin_keep(addr, size, t);
	if (t->per && stack && stack <= t->nstacks) {
		struct thin_stack *p = &t->per[stack];
		p->n++;
		p->bytes += size;
		p->kept_n += keep;
		p->kept_bytes += keep ? size : 0;
	}
	return keep;
}

/* A live block of the live table: the estimates' change, and its stack's
 * counts. */
static void thin_count(uintptr_t addr, size_t size, uint32_t stack, void *arg)
{
	struct thin *t = arg;
	uint64_t b, k;
	weight_at(size, t->s_old, &b, &k);
	t->est_bytes -= (int64_t)b;
	t->est_blocks -= (int64_t)k;
	if (thin_per_stack(addr, size, stack, t)) {
		weight_at(size, t->s_new, &b, &k);
		t->est_bytes += (int64_t)b;
		t->est_blocks += (int64_t)k;
	}
}

/* A pool's chunk: in no estimate, in its stack's counts. */
static void thin_count_chunk(uintptr_t addr, size_t size, uint32_t stack, void *arg)
{
	thin_per_stack(addr, size, stack, arg);
}

/* Binomial(k, q): one draw per block up to 256, then k q rounded at
 * random (see above). */
static uint64_t thin_count_of(uint64_t k, double q)
{
	if (k <= 256) {
		uint64_t kept = 0;
		for (uint64_t i = 0; i < k; i++)
			kept += uniform() <= q;
		return kept;
	}
	double x = (double)k * q;
	uint64_t kept = (uint64_t)x;
	return kept + (uniform() <= x - (double)kept);
}

/* A stack's allocated-so-far samples are its live ones, thinned block
 * by block above, and the freed ones, thinned here by their mean size:
 * so "allocated" never falls below "in use". */
static void thin_cumulative(const struct thin *t)
{
	uint32_t n = agent_stack_count();
	for (uint32_t id = 1; id <= n; id++) {
		struct agent_stack *st = agent_stack_get(id);
		uint64_t k = atomic_load(&st->total_blocks), b = atomic_load(&st->total_bytes);
		struct thin_stack live = t->per && id <= t->nstacks ? t->per[id] : (struct thin_stack){ 0 };
		if (!k)
			continue;
		/* a block entered but not yet counted (its thread is between
		 * the two) counts as freed: at most one per thread */
		if (live.n > k || live.bytes > b)
			live = (struct thin_stack){ 0 };
		uint64_t fk = k - live.n, fb = b - live.bytes, kept = 0, kept_b = 0;
		if (fk) {
			double m = (double)fb / (double)fk;
			kept = thin_count_of(fk, agent_sample_keep_p((size_t)(m + 0.5), t->s_old, t->s_new));
			kept_b = kept == fk ? fb : (uint64_t)((double)kept * m + 0.5);
			if (kept_b > fb)
				kept_b = fb;
		}
		uint64_t gone = k - live.kept_n - kept, gone_b = b - live.kept_bytes - kept_b;
		/* sub, not store: a sample being counted now is not lost */
		atomic_fetch_sub(&st->total_blocks, gone);
		atomic_fetch_sub(&st->total_bytes, gone_b);
	}
}

void agent_sample_raise(uint64_t s_new)
{
	int saved = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	/* mapped before the locks; a stack interned meanwhile (above
	 * nstacks) has its cumulative counts thinned as if freed */
	uint32_t nstacks = agent_stack_count();
	size_t perlen = ((size_t)nstacks + 1) * sizeof(struct thin_stack);
	struct thin_stack *per = agent_mmap(perlen);
	agent_tables_lock_all();
	uint64_t s_old = agent_sampling.period;
	if (s_old > 1 && s_new > s_old) {
		if (!agent_tls.rng)
			seed();
		struct thin t = { .s_old = s_old, .s_new = s_new, .salt = next_random(),
				  .per = per, .nstacks = nstacks };
		agent_live_each_locked(thin_count, &t);
		agent_pool_each_locked(thin_count_chunk, &t);
		agent_live_thin_locked(thin_keep, &t);
		agent_pool_thin_locked(thin_keep, &t);
		thin_cumulative(&t);
		agent_sampling.period = s_new;
		notes_update();
		struct agent_counts *c = agent_my_counts();
		agent_count(&c->est_bytes, (uint64_t)t.est_bytes);
		agent_count(&c->est_blocks_x1024, (uint64_t)t.est_blocks);
	}
	agent_tables_unlock_all();
	if (per)
		agent_munmap(per, perlen);
	agent_tls.busy = saved;
}

static atomic_bool raising;

void agent_sample_forked(void)
{
	atomic_store(&raising, false);  /* the raiser was another thread */
}

static AGENT_NOINLINE void auto_raise_asked(void)
{
	if (agent_tls.tables_locked || agent_tls.busy == AGENT_BUSY_LOCKED ||
	    atomic_exchange(&raising, true))
		return;
	uint64_t want = atomic_load(&auto_want);
	if (agent_sampling.automatic && want > agent_sampling.period)
		agent_sample_raise(want);
	else if (!agent_sampling.automatic)
		atomic_store(&auto_want, 0);  /* the program fixed S since */
	atomic_store(&raising, false);
}
