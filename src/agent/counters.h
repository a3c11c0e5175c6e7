/*
 * counters.h — per-thread counters of allocations, frees and bytes
 * (counters.c): one cache line per thread, summed when a report needs
 * them. Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_COUNTERS_H
#define HEAPTRAIL_AGENT_COUNTERS_H

#include "agent/agent.h"

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
} __attribute__((aligned(64)));


/* A slot for the calling thread. Hook-safe (a system call or two, once). */
struct agent_counters *agent_counters_claim(void);
/* In a forked child: the surviving thread keeps its slot under its new id. */
void agent_counters_forked(void);
/* Sums every thread's counters. Signal-safe. */
void agent_counters_sum(struct agent_counts *out);

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

static inline struct agent_counts *agent_my_counts(void)
{
	if (AGENT_UNLIKELY(!agent_tls.ctr))
		agent_tls.ctr = agent_counters_claim();
	return &agent_tls.ctr->c;
}

#endif
