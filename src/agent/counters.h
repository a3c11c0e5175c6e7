/*
 * counters.h — per-thread counters of allocations, frees and bytes
 * (counters.c): one cache line per thread, summed when a report needs
 * them. Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_COUNTERS_H
#define HEAPTRAIL_AGENT_COUNTERS_H

#include "agent/agent.h"
#include "format/vocab.h"

struct agent_writer;

struct agent_counts {
	/* every allocation seen; in exact mode only those not tracked, the
	 * tracked ones are added when the counters are summed */
	_Atomic uint64_t allocs, bytes_allocated;
	_Atomic uint64_t frees;                    /* filled in by agent_counters_sum */
	_Atomic uint64_t tracked, tracked_bytes;   /* entered in the live table */
	_Atomic uint64_t tracked_frees, freed_bytes; /* tracked blocks released */
	_Atomic uint64_t dropped;                  /* could not be tracked */
	/* exact mode: frees of blocks the agent never saw (attached: blocks
	 * allocated before the attach) */
	_Atomic uint64_t untracked_frees;
	/* What the tracked blocks stand for (each sampled block weighted as
	 * in sample.c; in exact mode, the blocks themselves): signed sums. */
	_Atomic uint64_t est_bytes, est_blocks_x1024;
	/* Sampling mode: what the samples stand for, ever allocated. */
	_Atomic uint64_t est_allocated, est_allocs_x1024;
};
struct agent_counters {
	struct agent_counts c;
	_Atomic pid_t owner;     /* thread writing it; 0 = free */
	bool shared;             /* the overflow slot: atomic adds */
	struct walk_memos *memo; /* the owner's last walks (walk_memo.h); mapped on demand */
	struct agent_free_ring *frees; /* the owner's last frees (heaperrors.h); mapped
					* on demand, exact mode only */
	/* How the thread's recorded allocations went (agent_count_shape_*),
	 * written only in exact mode: its last allocation, the allocations
	 * it freed before allocating anything else, and its allocations by
	 * size class (FMT_HEAP_SHAPE). Read by agent_counters_put_shape.
	 * last_alloc holds the address inverted: a leak check reads the
	 * agent's own data as the program's, and must not find in it a
	 * pointer to the block (it would be reachable through it). */
	_Atomic uintptr_t last_alloc;
	_Atomic uint64_t temporary;
	_Atomic uint64_t sizes[FMT_SHAPE_BUCKETS];
} __attribute__((aligned(64)));


_Static_assert(__builtin_offsetof(struct agent_counters, c) == 0,
	       "agent_count_shape_* find the slot from its counts");

/* A slot for the calling thread. Hook-safe (a system call or two, once). */
struct agent_counters *agent_counters_claim(void);
/* Every slot, for what is read across threads: from _first, then _next
 * until NULL. Hook-safe. */
struct agent_counters *agent_counters_first(void);
struct agent_counters *agent_counters_next(struct agent_counters *s);
/* In a forked child: the surviving thread keeps its slot under its new id. */
void agent_counters_forked(void);
/* Sums every thread's counters. Signal-safe. */
void agent_counters_sum(struct agent_counts *out);
/* In exact mode, key (FMT_HEAP_SHAPE, FMT_LEAKS_SHAPE) and the shape of
 * every thread's allocations summed, as a line of w; nothing when
 * sampling (the counts are of the samples alone). Signal-safe. */
void agent_counters_put_shape(struct agent_writer *w, const char *key);

static inline void agent_count(_Atomic uint64_t *field, uint64_t n)
{
	if (AGENT_UNLIKELY(agent_tls.ctr->shared))
		atomic_fetch_add_explicit(field, n, memory_order_relaxed);
	else  /* the only writer: no locked instruction needed */
		atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + n,
				      memory_order_relaxed);
}

/* Two counts at once: one look at whether the slot is shared. */
static inline void agent_count2(_Atomic uint64_t *a, uint64_t na, _Atomic uint64_t *b, uint64_t nb)
{
	if (AGENT_UNLIKELY(agent_tls.ctr->shared)) {
		atomic_fetch_add_explicit(a, na, memory_order_relaxed);
		atomic_fetch_add_explicit(b, nb, memory_order_relaxed);
	} else {
		atomic_store_explicit(a, atomic_load_explicit(a, memory_order_relaxed) + na,
				      memory_order_relaxed);
		atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + nb,
				      memory_order_relaxed);
	}
}

/* floor(log2(n)): n's size class, 0 for 0 and 1, the last open-ended */
static inline unsigned agent_size_class(size_t n)
{
	unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)n | 1);
	return k < FMT_SHAPE_BUCKETS - 1 ? k : FMT_SHAPE_BUCKETS - 1;
}

/* Adds 1 to a field of slot s (agent_count, with the slot at hand). */
static inline void agent_count_in(struct agent_counters *s, _Atomic uint64_t *field)
{
	if (AGENT_UNLIKELY(s->shared))
		atomic_fetch_add_explicit(field, 1, memory_order_relaxed);
	else
		atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + 1,
				      memory_order_relaxed);
}

/* An allocation of n bytes at p recorded by this thread, c its counts
 * (agent_my_counts): its size class counted, and p is the thread's last
 * allocation. Hook-safe. */
static inline void agent_count_shape_alloc(struct agent_counts *c, void *p, size_t n)
{
	struct agent_counters *s = (struct agent_counters *)c;  /* c is its first member */
	atomic_store_explicit(&s->last_alloc, ~(uintptr_t)p, memory_order_relaxed);
	agent_count_in(s, &s->sizes[agent_size_class(n)]);
}

/* This thread frees p, c its counts: a temporary allocation when p is
 * the last one it made (heaptrack's definition, per thread). Hook-safe. */
static inline void agent_count_shape_free(struct agent_counts *c, void *p)
{
	struct agent_counters *s = (struct agent_counters *)c;
	if (atomic_load_explicit(&s->last_alloc, memory_order_relaxed) == ~(uintptr_t)p) {
		atomic_store_explicit(&s->last_alloc, 0, memory_order_relaxed);
		agent_count_in(s, &s->temporary);
	}
}

static inline struct agent_counts *agent_my_counts(void)
{
	if (AGENT_UNLIKELY(!agent_tls.ctr))
		agent_tls.ctr = agent_counters_claim();
	return &agent_tls.ctr->c;
}

#endif
