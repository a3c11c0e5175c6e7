/*
 * quarantine.c — see quarantine.h.
 *
 * The kept blocks are a ring in the order of their frees (the oldest
 * goes first) under one lock: a block enters at a sampled free, and the
 * ring is searched only by a free that the sampling filter sent to the
 * slow path and that the hint below does not rule out (a double free, or
 * a block that shares a kept block's hint slot: about 1 free in 64 of
 * those on a kept block's page), never by an unsampled block's free
 * elsewhere; 64 entries are a short scan. As the exact-mode ring of last
 * frees (heaperrors.h), addresses are kept inverted: the leak scan must
 * find no pointer to a block in the agent's memory.
 */
#include <time.h>

#include "agent/agent.h"
#include "agent/quarantine.h"
#include "agent/table.h"
#include "agent/banned.h"

#define N AGENT_QUARANTINE_BLOCKS

struct kept {
	uint64_t key;            /* ~address; 0: none */
	uint64_t meta;           /* size in the low 40 bits, the block's stack above */
	uintptr_t ra;            /* the return address of the first free's caller */
	int d;                   /* how it was given back: enum agent_dealloc */
};

static agent_lock_t lock;
static struct kept ring[N];
static uint32_t oldest, held;          /* ring[oldest] is the oldest of held */
static uint64_t bytes;
static bool drained;                   /* detached (drain, keep): keep nothing */
_Atomic uint32_t agent_quarantine_count;
uint32_t agent_quarantine_rate = AGENT_QUARANTINE_RATE;

/* How many kept blocks hash to each slot, written under the lock and
 * read without it: a free whose slot holds none is no kept block's, and
 * asks nothing more. Most frees that reach find are a sampled page's
 * other blocks, and the lock they would all take is shared by every
 * thread (with 64 kept blocks, 1 in 64 of them would take it). */
#define HINT 4096
static _Atomic uint16_t hint[HINT];

static inline uint32_t hint_slot(uintptr_t a)
{
	return (uint32_t)((((uint64_t)a >> 4) * 0xff51afd7ed558ccdull) >> 52) & (HINT - 1);
}

static inline void hint_add(uintptr_t a, int d)
{
	_Atomic uint16_t *h = &hint[hint_slot(a)];
	atomic_store_explicit(h, (uint16_t)(atomic_load_explicit(h, memory_order_relaxed) + d),
			      memory_order_relaxed);
}

static inline uintptr_t addr_of(uint32_t slot)
{
	return (uintptr_t)~ring[slot].key;
}

/* The ring slot of kept block a, or -1. Locked. */
static int find_locked(uintptr_t a)
{
	for (uint32_t k = 0; k < held; k++)
		if (addr_of((oldest + k) % N) == a)
			return (int)((oldest + k) % N);
	return -1;
}

/* Takes the oldest block out; returns its address. Locked, held > 0. */
static uintptr_t evict_locked(void)
{
	uint32_t slot = oldest;
	uintptr_t a = addr_of(slot);
	bytes -= ring[slot].meta & ((1ull << 40) - 1);
	ring[slot].key = 0;
	hint_add(a, -1);
	oldest = (oldest + 1) % N;
	held--;
	agent_filter_count(a, -AGENT_FILTER_KEPT);
	return a;
}

/* Whether one more block may be kept now: a bucket of
 * agent_quarantine_rate tokens a second, AGENT_QUARANTINE_BLOCKS at most.
 * The clock is read only when the bucket is empty (a sampled free's
 * table work costs ten times that read). Locked. */
static bool token_locked(void)
{
	static uint64_t last_ns;
	static uint32_t tokens = N;
	if (!agent_quarantine_rate)
		return true;
	if (!tokens) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		uint64_t add = last_ns ? (t - last_ns) / (1000000000u / agent_quarantine_rate) : 0;
		if (!last_ns)
			last_ns = t;  /* the first time it ran dry: the bucket began full */
		if (!add)
			return false;
		tokens = add >= N ? N : (uint32_t)add;
		last_ns = t;
	}
	tokens--;
	return true;
}

bool agent_quarantine_put(void *p, size_t size, uint32_t alloc_stack, int d, uintptr_t ra,
			  void (*free_fn)(void *))
{
	if (size > AGENT_QUARANTINE_BYTES / 4 || size <= AGENT_QUARANTINE_MIN || !p)
		return false;
	for (bool first = true;; first = false) {
		agent_lock(&lock);
		if (drained || (first && !token_locked())) {
			agent_unlock(&lock);
			return false;
		}
		if (held && (held == N || bytes + size > AGENT_QUARANTINE_BYTES)) {
			/* one at a time, the allocator's call out of the lock
			 * (it takes its own) */
			uintptr_t a = evict_locked();
			atomic_store_explicit(&agent_quarantine_count, held, memory_order_relaxed);
			agent_unlock(&lock);
			free_fn((void *)a);
			continue;
		}
		uint32_t slot = (oldest + held) % N;
		ring[slot] = (struct kept){ .key = ~(uint64_t)(uintptr_t)p,
					    .meta = (uint64_t)size | (uint64_t)alloc_stack << 40,
					    .ra = ra, .d = d };
		hint_add((uintptr_t)p, +1);
		held++;
		bytes += size;
		/* counted before the lock goes: a second free from now on asks */
		agent_filter_count((uintptr_t)p, +AGENT_FILTER_KEPT);
		atomic_store_explicit(&agent_quarantine_count, held, memory_order_relaxed);
		agent_unlock(&lock);
		return true;
	}
}

bool agent_quarantine_may_hold(const void *p)
{
	return atomic_load_explicit(&hint[hint_slot((uintptr_t)p)], memory_order_relaxed) != 0;
}

bool agent_quarantine_find(const void *p, size_t *size, uint32_t *alloc_stack, int *first_d,
			   uintptr_t *ra)
{
	if (!agent_quarantine_may_hold(p))
		return false;
	agent_lock(&lock);
	int at = find_locked((uintptr_t)p);
	if (at >= 0) {
		const struct kept *k = &ring[at];
		*size = (size_t)(k->meta & ((1ull << 40) - 1));
		*alloc_stack = (uint32_t)(k->meta >> 40);
		*first_d = k->d;
		*ra = k->ra;
	}
	agent_unlock(&lock);
	return at >= 0;
}

uint64_t agent_quarantine_bytes(void)
{
	agent_lock(&lock);
	uint64_t b = bytes;
	agent_unlock(&lock);
	return b;
}

void agent_quarantine_drain(void (*free_fn)(void *))
{
	for (;;) {
		agent_lock(&lock);
		drained = true;
		if (!held) {
			agent_unlock(&lock);
			return;
		}
		uintptr_t a = evict_locked();
		atomic_store_explicit(&agent_quarantine_count, held, memory_order_relaxed);
		agent_unlock(&lock);
		free_fn((void *)a);
	}
}

void agent_quarantine_keep(void)
{
	agent_lock(&lock);
	drained = false;
	agent_unlock(&lock);
}

void agent_quarantine_refilter(void)
{
	agent_lock(&lock);
	for (uint32_t k = 0; k < held; k++)
		agent_filter_count(addr_of((oldest + k) % N), +AGENT_FILTER_KEPT);
	agent_unlock(&lock);
}

void agent_quarantine_lock(void)
{
	agent_lock(&lock);
}

void agent_quarantine_unlock(void)
{
	agent_unlock(&lock);
}
