/*
 * rulecache.h — the pc -> rule cache of the unwinder (unwind.c), shared
 * by every thread: what a frame needs (where the CFA is, where rbp was
 * saved), worked out once per pc from the call-frame information and
 * kept in a global, lock-free table (2-way set-associative, in mmap'd
 * memory; each slot guarded by its own sequence number, so readers never
 * wait and writers never block: a reader that races a writer just
 * misses). Rules are packed as two words. The lookup is here, inline (it
 * is on every frame's path); the store, on a miss, is rulecache.c. Every
 * cached rule is dropped at once by bumping agent_unwind_gen
 * (agent_unwind_cfi_flush). Hook-safe and signal-safe. Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_RULECACHE_H
#define HEAPTRAIL_AGENT_RULECACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/cfi.h"

/* Packed as two words for the cache: kind/how in the low byte, offset or
 * pointer in the other 56 bits (user-space pointers fit). */
static inline uint64_t agent_rule_pack(uint8_t tag, int64_t off, const uint8_t *p)
{
	uint64_t v = p ? (uint64_t)(uintptr_t)p : (uint64_t)off;
	return (v << 8) | tag;
}

static inline bool agent_rule_fits56(int64_t v)
{
	return v >= -((int64_t)1 << 55) && v < ((int64_t)1 << 55);
}

static inline uint8_t agent_rule_kind(uint64_t w) { return (uint8_t)w; }
static inline int64_t agent_rule_off(uint64_t w) { return (int64_t)w >> 8; }
static inline const uint8_t *agent_rule_expr(uint64_t w)
{
	return (const uint8_t *)(uintptr_t)(w >> 8);
}

/* tag = generation << 32 | sequence; the sequence is odd while a writer
 * fills the slot. Slot 0 of a set and slot 1 share a cache line. */
struct agent_rule_slot {
	_Atomic uint64_t tag;
	_Atomic uint64_t key;
	_Atomic uint64_t w0, w1;
};

#define AGENT_RULE_BITS 15              /* 32768 slots, 1 MiB reserved */
#define AGENT_RULE_SLOTS (1u << AGENT_RULE_BITS)

/* Slots are keyed by the frame's pc, with bit 63 set when the pc is not a
 * return address (after a signal frame: its rule is the one at pc, not at
 * pc - 1). The set is chosen by the pc alone. */
static inline uint64_t agent_rule_key(uintptr_t pc, bool exact)
{
	return (uint64_t)pc | (uint64_t)exact << 63;
}

static inline struct agent_rule_slot *agent_rule_set(struct agent_rule_slot *c, uint64_t key)
{
	/* Shift and xor rather than a multiply: this sits on the chain of
	 * dependent loads every frame waits for. Return addresses differ in
	 * their low bits; the high ones tell objects apart. */
	uint64_t h = key ^ (key >> AGENT_RULE_BITS) ^ (key >> 29);
	return &c[h & (AGENT_RULE_SLOTS - 2)];
}

/* A packed rule: kind (or bp_how) in the low byte of each word. */
struct agent_rule {
	uint64_t w0, w1;
};

/* The packed rule for key, or one of kind CFI_K_NONE when the cache does not
 * have it for this generation. */
static inline struct agent_rule agent_rule_get(struct agent_rule_slot *c, uint64_t key,
					       uint32_t gen)
{
	struct agent_rule_slot *s = agent_rule_set(c, key);
	uint64_t want = (uint64_t)gen << 32;
	for (int i = 0; i < 2; i++, s++) {
		uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
		if (((t ^ want) & 0xffffffff00000001ull) ||
		    atomic_load_explicit(&s->key, memory_order_relaxed) != key)
			continue;
		struct agent_rule r = { atomic_load_explicit(&s->w0, memory_order_relaxed),
				    atomic_load_explicit(&s->w1, memory_order_relaxed) };
		atomic_thread_fence(memory_order_acquire);
		if (AGENT_LIKELY(atomic_load_explicit(&s->tag, memory_order_relaxed) == t))
			return r;
	}
	return (struct agent_rule){ CFI_K_NONE, 0 };
}

/* The table (mapped at the first store; NULL before), and the
 * generation its rules must carry (rulecache.c). */
extern struct agent_rule_slot *_Atomic agent_rule_cache;
extern _Atomic uint32_t agent_unwind_gen;

/* Stores a packed rule unless the slot is busy: the cache is only ever an
 * optimisation. */
void agent_rule_put(uint64_t key, uint32_t gen, struct agent_rule r);

#endif
