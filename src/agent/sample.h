/*
 * sample.h — the sampler (sample.c): which allocations are recorded,
 * and what a sampled one stands for. Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_SAMPLE_H
#define HEAPTRAIL_AGENT_SAMPLE_H

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"

/* Sampling mode only: the countdown has run out (or was never set). */
bool agent_sample_slow(size_t n);
/* What agent_sampled does once the countdown has run out: always true in
 * exact mode (where the countdown stays at zero), without a call. */
static inline bool agent_sample_due(size_t n)
{
	return agent_sampling.period <= 1 || agent_sample_slow(n);
}
/* Says whether to record an allocation of n bytes: always in exact mode;
 * else when it crosses the thread's byte countdown. In sampling mode an
 * allocation passed over costs one subtraction and one compare, and is
 * not counted one by one: the totals are estimated from the samples. In
 * exact mode every allocation is counted as it is tracked (note_alloc),
 * and the few that are not tracked are counted apart. Hook-safe. */
static inline bool agent_sampled(size_t n)
{
	if (AGENT_LIKELY((uint64_t)n < (uint64_t)agent_tls.sample_left)) {
		agent_tls.sample_left -= (int64_t)n;
		return false;
	}
	return agent_sample_due(n);
}
/* --guard RATE (guard.c): whether a recorded allocation of n bytes is
 * one of those placed on a guarded page, about one every rate bytes
 * allocated: in exact mode by a countdown of the thread's own
 * (agent_tls.guard_left; guard.h's agent_guard_due counts it down and
 * asks here once it runs out), sampled with the chance that makes the
 * sampler's pick and this one together one of rate. Hook-safe. */
bool agent_sample_guard_pick(size_t n, uint64_t rate);
/* A tracked block of n bytes appears (sign +1) or goes (-1): updates the
 * estimates, and now and then checks the triggers. Hook-safe. While the
 * thread drains its deferred calls (agent_tls.draining) the slow work a
 * note may start (a raise of S, the time triggers, the interval and peak
 * check: each can write files and take every table lock) is only noted
 * as due, and agent_sample_run_due does it once, after the batch. */
void agent_sample_note(struct agent_counts *c, size_t n, int sign);
#define AGENT_DUE_RAISE 1   /* sample=auto asked for a higher S */
#define AGENT_DUE_TIME 2    /* the thread's turn to look at the clock */
#define AGENT_DUE_CHECK 4   /* the interval and peak triggers' look */
/* Does the work noted as due (agent_tls.due), with no table lock held.
 * Hook-safe. */
void agent_sample_run_due(void);
/* A time trigger (timeline, `every`) is on: the recorded events look at
 * the clock (triggers.c), each thread when agent_time_tsc_gate TSC ticks
 * have passed since its last look (about a millisecond: the first event
 * after an idle stretch always looks, so a dump due while the program
 * slept is taken before that event changes the heap), or, where the TSC
 * is not usable, at every agent_time_gate-th event of the thread. */
extern atomic_bool agent_time_on;
extern int agent_time_gate;
extern uint64_t agent_time_tsc_gate;   /* 0: count events instead */
/* ... and at every block of 64 KiB or more, whose allocation costs far
 * more than a clock read */
#define AGENT_TIME_BIG (64u << 10)
static inline uint64_t agent_rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}
/* Whether this event is the thread's turn to look at the clock. A TSC
 * that differs between CPUs only makes a thread that moved look early
 * (the difference is unsigned). */
static inline bool agent_time_turn(size_t n)
{
	if (n >= AGENT_TIME_BIG)
		return true;
	if (AGENT_LIKELY(agent_time_tsc_gate))
		return agent_rdtsc() - agent_tls.time_tsc >= agent_time_tsc_gate;
	return --agent_tls.time_left <= 0;
}
/* sample=auto's cost rule (sample.c) counts the time a sample costs a
 * thread: its allocation's side (from the decision to its note) and its
 * free's (a free the filter sends to the table). agent_auto_clock is the
 * TSC when the rule is on, else 0; agent_auto_charge(t0) adds the time
 * since t0 (at most AGENT_SAMPLE_COST_MAX ticks: a longer one was
 * preempted) to the thread's account. Hook-safe. */
#define AGENT_SAMPLE_COST_MAX 20000u
static inline uint64_t agent_auto_clock(void)
{
	return AGENT_UNLIKELY(agent_sampling.automatic) ? agent_rdtsc() : 0;
}
static inline void agent_auto_charge(uint64_t t0)
{
	if (!t0)
		return;
	uint64_t took = agent_rdtsc() - t0;
	agent_tls.auto_cost += took < AGENT_SAMPLE_COST_MAX ? took : AGENT_SAMPLE_COST_MAX;
}
/* The thread's turn to look at the clock: calls the time triggers'
 * check (set by agent_sample_on_time), or while draining notes it as
 * due. */
void agent_time_due(size_t n, int sign);
/* The same, without a call in exact mode with no byte-driven trigger:
 * then there is nothing to note (the estimates are the tracked counts). */
static inline void agent_sample_note_maybe(struct agent_counts *c, size_t n, int sign)
{
	if (agent_sampling.notes)
		agent_sample_note(c, n, sign);
	else if (AGENT_UNLIKELY(atomic_load_explicit(&agent_time_on, memory_order_relaxed)) &&
		 AGENT_UNLIKELY(agent_time_turn(n)))
		agent_time_due(n, sign);
}
/* What a sampled block of n bytes stands for, in bytes and in blocks
 * scaled by 1024. */
void agent_sample_weight(size_t n, uint64_t *bytes, uint64_t *blocks_x1024);

/* The interval and peak triggers' check, called now and then by
 * agent_sample_note (set by triggers.c: the sampler sits below them). */
void agent_sample_on_check(void (*fn)(void));
/* The time triggers' check for a recorded event (n bytes, sign +1 or -1;
 * counted: already in the totals), set by triggers.c. */
void agent_sample_on_time(void (*fn)(size_t n, int sign, bool counted));
/* agent_sampling as the options ask (config.h), at start-up and at each
 * attach. */
void agent_sampling_start(void);
/* Switches to sampling every `sample` bytes, forgetting every block
 * recorded so far (jemalloc's prof.reset with lg_sample; an attach after
 * a detach) unless it is the period in force; automatic: whether
 * sample=auto may raise it from there. */
void agent_resample(uint64_t sample, bool automatic);

/* sample=auto (sample.c): raises S to s_new (> S, sampling mode), with
 * every table lock taken here, thinning the recorded blocks and the
 * per-stack allocated-so-far counts so that they are distributed as if
 * sampled at s_new all along. A no-op unless s_new > S > 1. Not with a
 * table lock held. */
void agent_sample_raise(uint64_t s_new);
/* In a forked child: a raise under way in another thread of the parent
 * is not under way here. */
void agent_sample_forked(void);
/* The probability with which a block of n bytes sampled at s_old is
 * kept when S rises to s_new: (1 - exp(-n/s_new)) / (1 - exp(-n/s_old)). */
double agent_sample_keep_p(size_t n, uint64_t s_old, uint64_t s_new);
/* The S the heap rule wants at S = s with live_samples blocks recorded
 * (s when it is content). */
uint64_t agent_sample_auto_target(uint64_t s, size_t live_samples);

#endif
