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
	return agent_config.sample <= 1 || agent_sample_slow(n);
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
/* A tracked block of n bytes appears (sign +1) or goes (-1): updates the
 * estimates, and now and then checks the triggers. Hook-safe. */
void agent_sample_note(struct agent_counts *c, size_t n, int sign);
/* The same, without a call in exact mode with no byte-driven trigger:
 * then there is nothing to note (the estimates are the tracked counts). */
static inline void agent_sample_note_maybe(struct agent_counts *c, size_t n, int sign)
{
	if (agent_config.sample > 1 || agent_config.interval || agent_config.peak)
		agent_sample_note(c, n, sign);
}
/* What a sampled block of n bytes stands for, in bytes and in blocks
 * scaled by 1024. */
void agent_sample_weight(size_t n, uint64_t *bytes, uint64_t *blocks_x1024);

/* The interval and peak triggers' check, called now and then by
 * agent_sample_note (set by triggers.c: the sampler sits below them). */
void agent_sample_on_check(void (*fn)(void));
/* Switches to sampling every `sample` bytes, forgetting every block
 * recorded so far (jemalloc's prof.reset with lg_sample). */
void agent_resample(uint64_t sample);

#endif
