/*
 * unwind.h — stack capture (unwind_cfi.c): the DWARF unwinder and the
 * walk memo; hooks.c interns what it returns. Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_UNWIND_H
#define HEAPTRAIL_AGENT_UNWIND_H

#include <emmintrin.h>
#include "agent/agent.h"

/* The DWARF unwinder behind agent_unwind (unwind_cfi.c): lock-free, with a
 * per-pc rule cache. agent_unwind_cfi_flush forgets every cached rule; the
 * dlclose hook calls it once a library is gone. */
int agent_unwind_cfi(uintptr_t *pcs, int max);
void agent_unwind_cfi_flush(void);

/* A thread's last walks, so the next one from the same place can be
 * checked instead of redone (unwind_cfi.c, replay). Owned by one thread. */
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
struct walk_join {
	uintptr_t sp;
	uint8_t way, frame;            /* record `frame` of entry `way` led to sp */
};
struct walk_memos {
	struct walk_memo e[MEMO_WAYS];
	uintptr_t sp0[MEMO_WAYS];      /* each entry's e[i].sp0: a replay is tried
					* only where the starting sp matches */
	uint32_t sp0_lo[MEMO_WAYS] __attribute__((aligned(16)));
				       /* their low halves, compared four at a time */
	unsigned next;                 /* the entry the next new walk replaces */
	unsigned last;                 /* the entry last replayed or recorded */
	unsigned pred;                 /* e[last].succ: the entry tried first */
	struct walk_join join[MEMO_JOIN_SLOTS];
	unsigned long joins;           /* walks finished by a join (for tests) */
};
/* agent_unwind_cfi with memos (ms may be NULL). *replayed is the index of
 * the entry whose walk this was, or -1-i when the walk was new and
 * recorded into entry i (valid if it could be recorded). Untouched when
 * ms is NULL. On a replay pcs is left alone: the count returned is of
 * ms->e[*replayed].pcs. */
int agent_unwind_cfi_memo(uintptr_t *pcs, int max, struct walk_memos *ms, int *replayed);

/* The registers of the frame this is written in: pc an address inside it
 * (its CFI row is looked up as is, not as a return address), sp and bp
 * their values there. For agent_unwind_cfi_at, from the same frame. */
#define AGENT_FRAME_REGS(pc, sp, bp)                                              \
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"     \
			 : "=r"(pc), "=r"(sp), "=r"(bp))
/* A new walk from a frame the caller names (AGENT_FRAME_REGS in a frame
 * that is still live), recorded into ms (may be NULL) as
 * agent_unwind_cfi_memo does; no replay: the caller has looked for one
 * with agent_memo_find. Hook-safe. */
int agent_unwind_cfi_at(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *pcs, int max,
			struct walk_memos *ms, int *replayed);

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

/* The entry of ms a walk from (pc, sp, bp) would repeat
 * (agent_memo_holds), or -1. Tried first: the entry that followed the
 * last one replayed or recorded last time (itself, for a loop allocating
 * from one place); then the others with the same starting sp. Inline, so an allocation that repeats a walk costs no
 * call. Hook-safe; ms belongs to the calling thread. */
static inline int agent_memo_find(struct walk_memos *ms, uintptr_t pc, uintptr_t sp, uintptr_t bp,
				  int max)
{
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, memory_order_relaxed);
	unsigned last = ms->last % MEMO_WAYS, next = ms->pred % MEMO_WAYS;
	int hit;
	/* a program that takes turns between a few places: what came after
	 * the last walk last time */
	if (ms->sp0[next] == sp && agent_memo_holds(&ms->e[next], pc, sp, bp, max, gen)) {
		hit = (int)next;
		goto found;
	}
	uint32_t cand = agent_memo_candidates(ms, sp) & ~(1u << next);
	while (cand) {
		hit = __builtin_ctz(cand);
		cand &= cand - 1;
		if (ms->sp0[hit] == sp && agent_memo_holds(&ms->e[hit], pc, sp, bp, max, gen))
			goto learned;
	}
	return -1;
learned:
	ms->e[last].succ = (uint8_t)hit;
found:
	ms->last = (unsigned)hit;
	ms->pred = ms->e[hit].succ;
	return hit;
}

#endif
