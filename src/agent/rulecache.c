/*
 * rulecache.c — the unwinder's pc -> rule cache (rulecache.h): the table,
 * mapped at the first store, and the store. Layer 1.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/rulecache.h"
#include "agent/banned.h"

#define RELAXED memory_order_relaxed

struct agent_rule_slot *_Atomic agent_rule_cache;
/* Starts at 1 so that a zeroed slot never matches. */
_Atomic uint32_t agent_unwind_gen = 1;

static struct agent_rule_slot *rule_table(void)
{
	struct agent_rule_slot *c = atomic_load_explicit(&agent_rule_cache, memory_order_acquire);
	if (c)
		return c;
	struct agent_rule_slot *fresh = agent_mmap(AGENT_RULE_SLOTS * sizeof *fresh);
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(&agent_rule_cache, &c, fresh))
		return fresh;
	agent_munmap(fresh, AGENT_RULE_SLOTS * sizeof *fresh);
	return c;
}

void agent_rule_put(uint64_t key, uint32_t gen, struct agent_rule r)
{
	struct agent_rule_slot *c = rule_table();
	if (!c)
		return;
	struct agent_rule_slot *s = agent_rule_set(c, key);
	int victim = (key >> 4) & 1;
	for (int i = 0; i < 2; i++) {
		uint64_t t = atomic_load_explicit(&s[i].tag, RELAXED);
		if ((uint32_t)(t >> 32) != gen || atomic_load_explicit(&s[i].key, RELAXED) == key) {
			victim = i;
			break;
		}
	}
	s += victim;
	uint64_t t = atomic_load_explicit(&s->tag, RELAXED);
	if (t & 1)
		return;
	uint32_t seq = (uint32_t)t;
	uint64_t busy = (uint64_t)gen << 32 | (uint32_t)(seq + 1);
	if (!atomic_compare_exchange_strong(&s->tag, &t, busy))
		return;
	/* Orders the odd tag before the data (a seqlock writer's fence; free
	 * on x86): a reader that sees new data then sees the tag moved. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s->key, key, RELAXED);
	atomic_store_explicit(&s->w0, r.w0, RELAXED);
	atomic_store_explicit(&s->w1, r.w1, RELAXED);
	atomic_store_explicit(&s->tag, (uint64_t)gen << 32 | (uint32_t)(seq + 2),
			      memory_order_release);
}
