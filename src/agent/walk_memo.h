/*
 * walk_memo.h — a thread's last stack walks, so that the next walk from
 * the same place is checked instead of redone (a replay), and a new walk
 * that reaches a frame a recorded one went through copies the rest (a
 * join).
 *
 * The unwinder (unwind.c) is the only writer of these structures: it
 * records walks into them and finishes walks from them. Everyone else
 * (hooks.c, counters.c, the tests) goes through the functions at the end
 * of this header: agent_memo_find to look for a replay, the accessors to
 * read an entry's pcs and to attach the stack id the caller interned
 * them as, agent_memo_forget_all when a thread's memo changes owner.
 *
 * A walk_memos belongs to one thread (its counters slot) and is never
 * touched by another; every function here is hook-safe and signal-safe
 * for the owning thread.
 */
#ifndef HEAPTRAIL_AGENT_WALK_MEMO_H
#define HEAPTRAIL_AGENT_WALK_MEMO_H

#include <emmintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"

/* A thread's last walks, so the next one from the same place can be
 * checked instead of redone (unwind.c, replay). Owned by one thread. */
#define MEMO_FRAMES 72
#define MEMO_WAYS 32
struct walk_memo {
	uintptr_t pc0, sp0, bp0;       /* the starting registers */
	uint32_t gen;                  /* the rule cache's generation */
	int max, nframes, npcs;
	bool valid;
	uint32_t stack_id;             /* what hooks.c interned these pcs as */
	int fn;
	bool any_bp;                   /* some bp_need is set */
	bool need_bp0;                 /* tail_bp[0], here on the header's line */
	uint8_t succ;                  /* the entry found right after this one,
					* last time (a guess for the next walk) */
	struct {
		uintptr_t at, ra;      /* where a return address was read, and it */
	} fr[MEMO_FRAMES];
	uintptr_t bp_at[MEMO_FRAMES], bp[MEMO_FRAMES];
	bool bp_need[MEMO_FRAMES];     /* a later frame's CFA came from this bp */
	int8_t rbp_src[MEMO_FRAMES];   /* a CFA from rbp: the record whose read gave
					* rbp (-1: bp0); -2: CFA from rsp */
	bool tail_bp[MEMO_FRAMES + 1]; /* the records from here on need the rbp
					* they start with */
	uint8_t n_after[MEMO_FRAMES];  /* pcs found after this record's step */
	bool ended;                    /* the walk reached the outermost frame */
	uintptr_t pcs[MEMO_FRAMES];
} __attribute__((aligned(64)));  /* the header, then the words to check, from a line's start */
/* Frames of the recorded walks by their stack pointer, so a new walk that
 * reaches a frame a recorded one went through (same sp, same pc, the rest
 * of the stack unchanged) can copy the rest instead of walking it: the
 * outer part of a thread's stack (main, an event loop, an interpreter)
 * is shared by most of its allocations. */
#define MEMO_JOIN_SLOTS 256
#define MEMO_SCAN_MISSES 64
#define MEMO_SCAN_HIT 32
#define MEMO_WINDOW 64
#define MEMO_L1_SLOTS 1024
#define MEMO_SPARSE_MAX 8
#define MEMO_L1_SLOW ((uint64_t)1 << 62)
#define MEMO_L1_BP ((uint64_t)1 << 61)
struct walk_join {
	uintptr_t sp, ra;              /* the frame's, as in fr[frame] of entry way */
	uint8_t way, frame;            /* record `frame` of entry `way` led to sp */
};
struct walk_memos {
	struct walk_memo e[MEMO_WAYS];
	uintptr_t sp0[MEMO_WAYS + 1];  /* each entry's e[i].sp0, and a 0 that no sp
				        * matches (pred MEMO_WAYS); a replay is tried
					* only where the starting sp matches */
	uint32_t sp0_lo[MEMO_WAYS] __attribute__((aligned(16)));
				       /* their low halves, compared four at a time */
	unsigned next;                 /* the entry the next new walk replaces */
	unsigned last;                 /* the entry last replayed or recorded */
	unsigned pred;                 /* e[last].succ: the entry tried first;
					* MEMO_WAYS (none) while quiet */
	struct walk_join join[MEMO_JOIN_SLOTS];
	unsigned long joins;           /* walks finished by a join (for tests) */
	unsigned scan_misses;          /* scans that found nothing, less
					* MEMO_SCAN_HIT per one that did */
	unsigned scan_tick;
	bool quiet;                    /* agent_memo_quiet_update */
	/* Whether the memo pays (unwind.c, memo_account): pcs found by
	 * replays and joins against pcs walked while recording, over windows
	 * of MEMO_WINDOW recorded walks. When it does not, only one walk in
	 * 2^sparse is recorded (sparse 0: every walk), which costs less than
	 * it saves: one in 8 after the first window that does not pay, half
	 * as many after each window more, down to one in 256 (a recorded
	 * walk, with its tries to join, costs about 11,000 instructions on
	 * paths-65536: 180 an allocation at one in 64). */
	uint64_t win_saved, win_walked;
	unsigned win_n, sparse_tick, sparse;
	/* The thread's own copy of the rules it used last (unwind.c,
	 * walk_plain), read without the shared cache's sequence checks:
	 * direct-mapped by return address; emptied when the generation
	 * changes. fast: k for the commonest rule, CFA = rsp + k with rbp
	 * unchanged and k checked once (8 <= k < 2^24), else MEMO_L1_SLOW,
	 * which takes any stack pointer past any stack's top; with
	 * MEMO_L1_BP and d << 24 added when rbp is saved at CFA - d, d
	 * checked once (8 <= d <= k). */
	uint32_t l1_gen;
	struct { uint64_t pc, w0, w1, fast; } l1[MEMO_L1_SLOTS];
};

/* Bumped whenever cached rules are forgotten: a memo of an older
 * generation is never replayed. */
extern _Atomic uint32_t agent_unwind_gen;

/* Whether a new walk from (pc, sp, bp) would be m's: same starting
 * registers (rbp only when the walk used it: code without frame pointers
 * keeps anything in rbp, the allocation's size say, which must not defeat
 * the memo), same rules (no flush since), and every stack word the
 * recorded walk read still holds the value it read. A walk is a function
 * of exactly those. The words read are all above sp, on the stack the
 * walk was recorded on, and are read innermost first, stopping at the
 * first that differs, so each read is the next frame's, above a frame
 * that held: on another stack mapped at the same sp (a fiber library)
 * the check stops where the two call chains part, not past the frames
 * the current stack really has. Hook-safe; m belongs to the calling
 * thread. */
static inline bool agent_memo_holds(const struct walk_memo *m, uintptr_t pc, uintptr_t sp,
				    uintptr_t bp, int max, uint32_t gen)
{
	if (!m->valid || m->pc0 != pc || m->sp0 != sp || m->max != max || m->gen != gen ||
	    (m->need_bp0 && m->bp0 != bp))
		return false;
	/* innermost first, and no further than the first word that differs:
	 * each word read is then next to one that held, on this thread's
	 * stack as it was when the walk was recorded */
	for (int k = 0; k < m->nframes; k++)
		if (*(const uintptr_t *)m->fr[k].at != m->fr[k].ra)
			return false;
	if (AGENT_UNLIKELY(m->any_bp))
		for (int k = 0; k < m->nframes; k++)
			if (m->bp_need[k] && *(const uintptr_t *)m->bp_at[k] != m->bp[k])
				return false;
	return true;
}

/* Whether ms is quiet (see agent_memo_find): its memo does not pay and its
 * scans keep finding nothing. Called whenever either changes. */
static inline void agent_memo_quiet_update(struct walk_memos *ms)
{
	bool quiet = ms->sparse && ms->scan_misses >= MEMO_SCAN_MISSES;
	if (!quiet && ms->quiet)
		ms->pred = ms->e[ms->last % MEMO_WAYS].succ % MEMO_WAYS;
	ms->quiet = quiet;
}

/* The entries whose starting sp may be sp, as a bit mask: SSE2, which
 * every x86-64 has, compares four low halves at once. */
_Static_assert(MEMO_WAYS == 32, "agent_memo_candidates makes a 32-bit mask");
static inline uint32_t agent_memo_candidates(const struct walk_memos *ms, uintptr_t sp)
{
	__m128i want = _mm_set1_epi32((int)(uint32_t)sp);
	uint32_t mask = 0;
	for (int i = 0; i < MEMO_WAYS; i += 4) {
		__m128i lo = _mm_load_si128((const __m128i *)&ms->sp0_lo[i]);
		mask |= (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lo, want))) << i;
	}
	return mask;
}

/* agent_memo_find's bookkeeping once entry hit is found: hit follows
 * last; the guess next time is what followed hit last time. */
static inline struct walk_memo *agent_memo_found(struct walk_memos *ms, unsigned hit)
{
	ms->win_saved += (uint64_t)ms->e[hit].npcs;
	ms->last = hit;
	ms->pred = ms->e[hit].succ;
	return &ms->e[hit];
}

/* Checks the entries of cand (a mask) for a replay; for agent_memo_find.
 * Always inline: a call here makes GCC spill around the replay path of
 * the hooks (deep and churn: 6 instructions an allocation more). */
static inline __attribute__((always_inline)) struct walk_memo *
agent_memo_scan(struct walk_memos *ms, uint32_t cand, uintptr_t pc, uintptr_t sp, uintptr_t bp,
		int max, uint32_t gen, unsigned last)
{
	while (cand) {
		unsigned hit = (unsigned)__builtin_ctz(cand);
		cand &= cand - 1;
		if (ms->sp0[hit] == sp && agent_memo_holds(&ms->e[hit], pc, sp, bp, max, gen)) {
			ms->scan_misses = ms->scan_misses > MEMO_SCAN_HIT ?
						  ms->scan_misses - MEMO_SCAN_HIT : 0;
			if (AGENT_UNLIKELY(ms->quiet))  /* fewer misses: quiet at most */
				agent_memo_quiet_update(ms);
			ms->e[last].succ = (uint8_t)hit;
			return agent_memo_found(ms, hit);
		}
	}
	if (ms->scan_misses < 4 * MEMO_SCAN_MISSES)
		ms->scan_misses++;
	agent_memo_quiet_update(ms);
	return NULL;
}

/* A thread whose memo does not pay and whose scans keep finding nothing
 * (quiet) has more stacks than entries: a guess then fails too, after
 * checking the frames its stack shares with the current one (about 190
 * instructions a call on paths-65536). It has no guess (pred
 * MEMO_WAYS: agent_memo_find's guess fails at once, and its replays
 * pay nothing for this), guesses here one call in 16 and scans one in
 * 256, enough to notice (memo_account) when its stacks repeat again. */
static AGENT_NOINLINE struct walk_memo *agent_memo_find_quiet(struct walk_memos *ms, uintptr_t pc,
							      uintptr_t sp, uintptr_t bp, int max,
							      uint32_t gen, unsigned last)
{
	ms->pred = MEMO_WAYS;
	if (ms->scan_tick++ & 15)
		return NULL;
	unsigned next = ms->e[last].succ % MEMO_WAYS;
	if (ms->sp0[next] == sp && agent_memo_holds(&ms->e[next], pc, sp, bp, max, gen))
		return agent_memo_found(ms, next);
	if ((ms->scan_tick - 1) & 255)
		return NULL;
	return agent_memo_scan(ms, agent_memo_candidates(ms, sp) & ~(1u << next), pc, sp, bp, max,
			       gen, last);
}

/* The entry of ms a walk from (pc, sp, bp) would repeat
 * (agent_memo_holds), or NULL. Tried first: the entry that followed the
 * last one replayed or recorded last time (itself, for a loop allocating
 * from one place); then the others with the same starting sp. Inline, so an allocation that repeats a walk costs no
 * call. Hook-safe; ms belongs to the calling thread. */
static inline struct walk_memo *agent_memo_find(struct walk_memos *ms, uintptr_t pc, uintptr_t sp, uintptr_t bp,
				  int max)
{
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, memory_order_relaxed);
	unsigned last = ms->last % MEMO_WAYS, pred = ms->pred, next = pred % MEMO_WAYS;
	/* a program that takes turns between a few places: what came after
	 * the last walk last time (none while quiet: sp0[MEMO_WAYS]) */
	if (ms->sp0[pred] == sp && agent_memo_holds(&ms->e[next], pc, sp, bp, max, gen))
		return agent_memo_found(ms, next);
	if (AGENT_UNLIKELY(ms->quiet))
		return agent_memo_find_quiet(ms, pc, sp, bp, max, gen, last);
	uint32_t cand = agent_memo_candidates(ms, sp) & ~(1u << next);
	if (!cand)
		return NULL;
	/* A scan costs a check of every entry from here; a scan that finds a
	 * walk to replay saves a walk, which costs tens of checks, so scans
	 * pay unless fewer than about one in 33 find one. A thread with more
	 * distinct stacks than entries finds none: it then scans one call in
	 * 16 only, to notice when its stacks repeat again. Skipping a scan
	 * only costs a walk, which finds the same stack. */
	if (AGENT_UNLIKELY(ms->scan_misses >= MEMO_SCAN_MISSES) && (ms->scan_tick++ & 15))
		return NULL;
	return agent_memo_scan(ms, cand, pc, sp, bp, max, gen, last);
}


/* The pcs of entry m (a replay leaves the caller's array alone), and how
 * many there are. Valid until the owning thread's next walk. */
static inline const uintptr_t *agent_memo_pcs(const struct walk_memo *m)
{
	return m->pcs;
}

static inline int agent_memo_npcs(const struct walk_memo *m)
{
	return m->npcs;
}

/* The stack id the caller interned m's pcs as for allocator fn, or 0 when
 * it has not (or did for another allocator). */
static inline uint32_t agent_memo_stack_id(const struct walk_memo *m, int fn)
{
	return m->fn == fn ? m->stack_id : 0;
}

static inline void agent_memo_set_stack_id(struct walk_memo *m, int fn, uint32_t id)
{
	m->fn = fn;
	m->stack_id = id;
}

/* Forgets every walk of ms (a slot whose thread died, taken by another). */
static inline void agent_memo_forget_all(struct walk_memos *ms)
{
	for (int w = 0; w < MEMO_WAYS; w++)
		ms->e[w].valid = false;
}

/* How many walks were finished by a join so far (for tests). */
static inline unsigned long agent_memo_joins(const struct walk_memos *ms)
{
	return ms->joins;
}

#endif
