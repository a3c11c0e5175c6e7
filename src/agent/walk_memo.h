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
#include <stddef.h>
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
	struct memo_record {
		uintptr_t at, ra;      /* where a return address was read, and it */
	} fr[MEMO_FRAMES + 1];         /* and after the last, the end mark
					* (agent_memo_mark_end) */
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
#define MEMO_SCAN_DEBT 4096
#define MEMO_SCAN_DEBT_MAX (MEMO_SCAN_DEBT + MEMO_SCAN_DEBT / 4)
#define MEMO_CHECK_COST 8
#define MEMO_PC_GAIN 4
#define MEMO_WINDOW 64
#define MEMO_L1_SLOTS 1024
#define MEMO_SPARSE_MAX 10
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
	unsigned long refuted;         /* entries a scan's facts rejected (for tests) */
	const struct memo_record *guess_miss; /* where agent_memo_find's guess
					* failed (NULL: not at a return address),
					* set by each guess that fails, for the
					* facts of agent_memo_search */
	unsigned scan_debt;            /* what scans cost, less what their
					* replays saved (agent_memo_scan) */
	unsigned scan_tick;
	bool quiet;                    /* agent_memo_quiet_update */
	/* Whether the memo pays (unwind.c, memo_account): pcs found by
	 * replays and joins against pcs walked while recording, over windows
	 * of MEMO_WINDOW recorded walks. When it does not, only one walk in
	 * 2^sparse is recorded (sparse 0: every walk), which costs less than
	 * it saves: one in 8 after the first window that does not pay, half
	 * as many after each window more, down to one in 1,024 (a recorded
	 * walk, with its tries to join, costs about 12,000 instructions on
	 * paths-65536: 180 an allocation at one in 64, 47 at one in 256). */
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
	/* The stack pointers of the thread's last walk (unwind.c,
	 * l1_run_frames): trail[n] is where pcs[n] was read, plus 8. Only a
	 * guess of where the next walk's frames lie, checked against the
	 * rules before use, so never invalid: a walk that goes elsewhere
	 * (another depth, another stack, a signal handler's walk in between)
	 * only finds its guesses wrong. */
	uintptr_t trail[AGENT_MAX_DEPTH];
};

/* Bumped whenever cached rules are forgotten: a memo of an older
 * generation is never replayed. */
extern _Atomic uint32_t agent_unwind_gen;

/* A record that never holds, after m's last (fr[nframes]), set whenever
 * a walk is recorded: a check's loop stops at the first record that does
 * not hold, so it needs no test of the end (5 instructions a record, 7
 * with one), and tells the end mark by where it stopped. It reads a word
 * of the agent's own, which is 0. */
extern const uintptr_t agent_memo_end_word;
static inline void agent_memo_mark_end(struct walk_memo *m)
{
	m->fr[m->nframes].at = (uintptr_t)&agent_memo_end_word;
	m->fr[m->nframes].ra = 1;
}

/* agent_memo_holds's test of m's starting registers and generation. */
static inline bool agent_memo_starts(const struct walk_memo *m, uintptr_t pc, uintptr_t sp,
				     uintptr_t bp, int max, uint32_t gen)
{
	return m->valid && m->pc0 == pc && m->sp0 == sp && m->max == max && m->gen == gen &&
	       (!m->need_bp0 || m->bp0 == bp);
}

/* The first record of m whose return address is no longer on the stack,
 * with the word found there in *w; -1 when every one is. Innermost first,
 * and no further than the first word that differs: each word read is then
 * next to one that held, on this thread's stack as it was when the walk
 * was recorded. */
static inline int agent_memo_differs(const struct walk_memo *m, uintptr_t *w)
{
	/* a pointer, not an index: the index is needed only at the end */
	const struct memo_record *r = m->fr;
	uintptr_t v;
	while ((v = *(const uintptr_t *)r->at) == r->ra)
		r++;
	if (r == m->fr + m->nframes)  /* the end mark */
		return -1;
	*w = v;
	return (int)(r - m->fr);
}

/* Whether the saved rbp values m's walk used still hold; read only once
 * every return address held (agent_memo_differs). */
static inline bool agent_memo_bp_holds(const struct walk_memo *m)
{
	if (AGENT_UNLIKELY(m->any_bp))
		for (int k = 0; k < m->nframes; k++)
			if (m->bp_need[k] && *(const uintptr_t *)m->bp_at[k] != m->bp[k])
				return false;
	return true;
}

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
 * thread. agent_memo_holds_at also sets *miss, when the check fails at a
 * return address, to that record (untouched otherwise). */
static inline bool agent_memo_holds_at(const struct walk_memo *m, uintptr_t pc, uintptr_t sp,
				       uintptr_t bp, int max, uint32_t gen,
				       const struct memo_record **miss)
{
	if (!agent_memo_starts(m, pc, sp, bp, max, gen))
		return false;
	/* agent_memo_differs without the word: this loop is the replay's;
	 * by pointer, with no index to keep, to the first record that does
	 * not hold: the end mark, when every one of m's does */
	const struct memo_record *r = m->fr;
	while (*(const uintptr_t *)r->at == r->ra)
		r++;
	if (r != m->fr + m->nframes) {
		*miss = r;
		return false;
	}
	return agent_memo_bp_holds(m);
}

static inline bool agent_memo_holds(const struct walk_memo *m, uintptr_t pc, uintptr_t sp,
				    uintptr_t bp, int max, uint32_t gen)
{
	const struct memo_record *miss;
	return agent_memo_holds_at(m, pc, sp, bp, max, gen, &miss);
}

/* Whether ms is quiet (see agent_memo_find): neither recording walks nor
 * scanning for them pays. Called whenever either changes. */
static inline void agent_memo_quiet_update(struct walk_memos *ms)
{
	bool quiet = ms->sparse && ms->scan_debt >= MEMO_SCAN_DEBT;
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
	/* unrolled: the loop's count, compare and branch were 3 of its 8
	 * instructions a step, paid by every scan (a third of sqlite3's
	 * allocations scan) */
#pragma GCC unroll 8
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

/* What a failed check saw (agent_memo_scan): record f of a walk is read
 * at `at`, and the word there was w, not the walk's return address.
 * Another walk whose record f is read at the same place and holds any
 * other word there cannot hold either, and is rejected without reading the
 * stack. Walks that share their inner frames read the same words: on
 * paths-64 the 32 entries of a scan share their 10 innermost frames and
 * part in a binary tree of 6 levels, so a few facts reject most of them;
 * a scan rarely leaves more than MEMO_FACTS, and one that does checks the
 * rest in full. */
#define MEMO_FACTS 8
struct memo_fact {
	uintptr_t at, w;
	size_t off;                    /* of record f in an entry, in bytes */
	int f;
};

static inline struct memo_fact agent_memo_fact(uintptr_t at, uintptr_t w, int f)
{
	return (struct memo_fact){ at, w, offsetof(struct walk_memo, fr) + (size_t)f *
					  sizeof(struct memo_record), f };
}

/* Whether one of facts[0..n) shows that m cannot hold. Reads no stack
 * word: only m and the facts. m's records past its nframes are an older
 * walk's: tested last, only for a fact that would reject. */
static inline bool agent_memo_refuted(const struct walk_memo *m, const struct memo_fact *facts,
				      const struct memo_fact *end)
{
	for (const struct memo_fact *x = facts; x < end; x++) {
		const struct memo_record *r = (const void *)((const char *)m + x->off);
		if (r->at == x->at && r->ra != x->w && x->f < m->nframes)
			return true;
	}
	return false;
}

/* The fact the failed guess of agent_memo_find, of entry g, left, into
 * *fact: whether there is one. The word is read again: the guess read it,
 * after the records inside it held. */
static inline bool agent_memo_guess_fact(const struct walk_memos *ms, const struct walk_memo *g,
					 struct memo_fact *fact)
{
	const struct memo_record *r = ms->guess_miss;
	if (!r || r < g->fr || r >= g->fr + g->nframes)
		return false;
	*fact = agent_memo_fact(r->at, *(const uintptr_t *)r->at, (int)(r - g->fr));
	return true;
}

/* What a scan cost, in records read (one was 7 instructions when these
 * weights were set, 5 since the end mark: scans are a little cheaper
 * than they count themselves): each
 * entry checked, its records and MEMO_CHECK_COST for the check itself
 * (its loop ends where the stacks part, a branch mispredicted), each
 * entry the facts rejected one. A replay saves a walk and the interning
 * of its pcs: MEMO_PC_GAIN records a pc (16 instructions a frame along
 * the trail, about 10 to hash and compare it). Scans pay while their
 * replays save more than they cost: on paths-8 (8 stacks, every scan
 * finds one) a scan costs about 90 and saves 180; on paths-64 (half of
 * them find one) it costs about 140 and saves 90, and turning scans off
 * there took 3,650 instructions an allocation to 1,980. */
static inline void agent_memo_scan_cost(struct walk_memos *ms, unsigned cost, unsigned saved)
{
	unsigned d = ms->scan_debt + cost;
	d = d > saved ? d - saved : 0;
	/* a quarter over the bound at most: a few replays turn scans on again */
	ms->scan_debt = d < MEMO_SCAN_DEBT_MAX ? d : MEMO_SCAN_DEBT_MAX;
}

/* Checks the entries of cand (a mask) for a replay; for agent_memo_search.
 * Each check that fails at a return address leaves a fact (above) that
 * the later entries are tried against first: that only rejects, an entry
 * that passes them is checked in full, so the words read are a subset of
 * those read without them, in the same order. facts (room for
 * MEMO_FACTS) holds nfacts already, from the guess before. Always
 * inline: as a call of its own it cost sqlite3, whose scans mostly find
 * the first entry they check, 4 instructions an allocation. */
static inline __attribute__((always_inline)) struct walk_memo *
agent_memo_scan(struct walk_memos *ms, uint32_t cand, uintptr_t pc, uintptr_t sp, uintptr_t bp,
		int max, uint32_t gen, unsigned last, struct memo_fact *facts, int nfacts)
{
	struct memo_fact *known = facts + nfacts;
	unsigned cost = 0;
	while (cand) {
		size_t hit = (unsigned)__builtin_ctz(cand);  /* one address for m, not two */
		cand &= cand - 1;
		const struct walk_memo *m = &ms->e[hit];
		/* before the header (whose sp is the one cand's low half may
		 * have matched by chance): on paths-64 most entries are rejected
		 * here, and rejecting one that would fail anyway costs nothing */
		if (agent_memo_refuted(m, facts, known)) {
			ms->refuted++;
			cost++;
			continue;
		}
		if (!agent_memo_starts(m, pc, sp, bp, max, gen))
			continue;
		uintptr_t w;
		int f = agent_memo_differs(m, &w);
		if (f >= 0) {
			cost += (unsigned)f + 1 + MEMO_CHECK_COST;
			if (known < facts + MEMO_FACTS)
				*known++ = agent_memo_fact(m->fr[f].at, w, f);
			continue;
		}
		cost += (unsigned)m->nframes + MEMO_CHECK_COST;
		if (!agent_memo_bp_holds(m))  /* not a fact about record f */
			continue;
		agent_memo_scan_cost(ms, cost, (unsigned)m->npcs * MEMO_PC_GAIN);
		if (AGENT_UNLIKELY(ms->quiet))  /* less debt: quiet at most */
			agent_memo_quiet_update(ms);
		ms->e[last].succ = (uint8_t)hit;
		return agent_memo_found(ms, (unsigned)hit);
	}
	agent_memo_scan_cost(ms, cost, 0);
	agent_memo_quiet_update(ms);
	return NULL;
}

/* A thread whose memo does not pay and whose scans cost more than they
 * save (quiet) has more stacks than entries, or picks among many at
 * random: a guess then mostly fails too, after
 * checking the frames its stack shares with the current one (about 190
 * instructions a call on paths-65536). It has no guess (pred
 * MEMO_WAYS: agent_memo_find's guess fails at once, and its replays
 * pay nothing for this), guesses one call in 16 (agent_memo_find calls
 * this then, through agent_memo_search) and scans one in 256, enough to
 * notice (memo_account, agent_memo_scan_cost) when its stacks repeat
 * again. */
static AGENT_NOINLINE struct walk_memo *agent_memo_find_quiet(struct walk_memos *ms, uintptr_t pc,
							      uintptr_t sp, uintptr_t bp, int max,
							      uint32_t gen, unsigned last)
{
	unsigned next = ms->e[last].succ % MEMO_WAYS;
	if (ms->sp0[next] == sp && agent_memo_holds(&ms->e[next], pc, sp, bp, max, gen))
		return agent_memo_found(ms, next);
	if ((ms->scan_tick - 1) & 255)
		return NULL;
	struct memo_fact facts[MEMO_FACTS];
	return agent_memo_scan(ms, agent_memo_candidates(ms, sp) & ~(1u << next), pc, sp, bp, max,
			       gen, last, facts, 0);
}

/* agent_memo_find once its guess failed: the other entries with the same
 * starting sp. Not inline: the scan's loop, with its facts, inline in the
 * hooks made GCC spill around their replay path (deep and churn: 7
 * instructions an allocation more; with only the first entry's check
 * inline and a call for the rest, 3 to 4). */
static AGENT_NOINLINE struct walk_memo *
agent_memo_search(struct walk_memos *ms, uintptr_t pc, uintptr_t sp, uintptr_t bp, int max)
{
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, memory_order_relaxed);
	unsigned last = ms->last % MEMO_WAYS, next = ms->pred % MEMO_WAYS;
	if (AGENT_UNLIKELY(ms->quiet))  /* one call in 16: agent_memo_find */
		return agent_memo_find_quiet(ms, pc, sp, bp, max, gen, last);
	uint32_t cand = agent_memo_candidates(ms, sp) & ~(1u << next);
	if (!cand)
		return NULL;
	/* Scans whose replays do not save what they cost (a thread with
	 * more distinct stacks than entries, or that picks among many at
	 * random) happen one call in 16 only, to notice when its stacks
	 * repeat again. Skipping a scan only costs a walk, which finds the
	 * same stack. */
	if (AGENT_UNLIKELY(ms->scan_debt >= MEMO_SCAN_DEBT) && (ms->scan_tick++ & 15))
		return NULL;
	struct memo_fact facts[MEMO_FACTS];
	int nfacts = agent_memo_guess_fact(ms, &ms->e[next], &facts[0]);
	return agent_memo_scan(ms, cand, pc, sp, bp, max, gen, last, facts, nfacts);
}

/* agent_memo_find's guess: the entry that followed the last one replayed
 * or recorded last time (itself, for a loop allocating from one place),
 * if it holds; NULL otherwise, with where its check failed left for
 * agent_memo_search. */
static inline struct walk_memo *agent_memo_guess(struct walk_memos *ms, uintptr_t pc, uintptr_t sp,
						 uintptr_t bp, int max)
{
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, memory_order_relaxed);
	unsigned pred = ms->pred, next = pred % MEMO_WAYS;
	const struct memo_record *miss = NULL;
	/* a program that takes turns between a few places: what came after
	 * the last walk last time (none while quiet: sp0[MEMO_WAYS]) */
	if (ms->sp0[pred] == sp && agent_memo_holds_at(&ms->e[next], pc, sp, bp, max, gen, &miss))
		return agent_memo_found(ms, next);
	ms->guess_miss = miss;
	return NULL;
}

/* The entry of ms a walk from (pc, sp, bp) would repeat
 * (agent_memo_holds), or NULL. Tried first: a guess (agent_memo_guess);
 * then the others with the same starting sp (agent_memo_search). Inline,
 * so an allocation that repeats a walk costs no call. Hook-safe; ms
 * belongs to the calling thread. */
static inline struct walk_memo *agent_memo_find(struct walk_memos *ms, uintptr_t pc, uintptr_t sp,
						uintptr_t bp, int max)
{
	struct walk_memo *m = agent_memo_guess(ms, pc, sp, bp, max);
	if (m)
		return m;
	/* quiet: no guess (pred MEMO_WAYS) and no call before the walk, 15
	 * times in 16 */
	if (AGENT_UNLIKELY(ms->quiet)) {
		ms->pred = MEMO_WAYS;
		if (ms->scan_tick++ & 15)
			return NULL;
	}
	return agent_memo_search(ms, pc, sp, bp, max);
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

/* How many entries scans rejected by their facts so far (for tests). */
static inline unsigned long agent_memo_refuted_count(const struct walk_memos *ms)
{
	return ms->refuted;
}

#endif
