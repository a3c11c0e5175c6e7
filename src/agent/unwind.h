/*
 * unwind.h — the agent's stack unwinder (unwind.c): DWARF call-frame
 * information (cfi.c) with a lock-free per-pc rule cache, and a
 * per-thread memo of recent walks (walk_memo.h). Every function is
 * hook-safe and async-signal-safe, takes no lock and needs nothing at
 * fork().
 */
#ifndef HEAPTRAIL_AGENT_UNWIND_H
#define HEAPTRAIL_AGENT_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/walk_memo.h"

/* The return addresses of the current thread, the caller of the allocator
 * first (leading frames inside [agent_self_lo, agent_self_hi) are
 * dropped), at most max of them; returns how many. */
int agent_unwind_cfi(uintptr_t *pcs, int max);

/* Forgets every cached rule (and so every memo): the dlclose hook calls
 * it once a library is gone. */
void agent_unwind_cfi_flush(void);

/* What a walk through a memo was. */
struct agent_walk {
	struct walk_memo *memo; /* the entry this walk is: the one replayed, or
				 * the one it was recorded into; NULL when no
				 * memo was given or the walk could not be
				 * recorded */
	int npcs;               /* pcs found */
	bool replayed;          /* a replay of memo: the caller's array was
				 * left alone, the pcs are agent_memo_pcs(memo) */
};

/* agent_unwind_cfi through the memo ms (may be NULL): a replay when one
 * holds, otherwise a new walk recorded into ms. */
struct agent_walk agent_unwind_cfi_memo(uintptr_t *pcs, int max, struct walk_memos *ms);

/* The registers of the frame this is written in: pc an address inside it
 * (its CFI row is looked up as is, not as a return address), sp and bp
 * their values there. For agent_unwind_cfi_at, from the same frame. */
#define AGENT_FRAME_REGS(pc, sp, bp)                                              \
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"     \
			 : "=r"(pc), "=r"(sp), "=r"(bp))

/* A new walk from a frame the caller names (AGENT_FRAME_REGS in a frame
 * that is still live), recorded into ms (may be NULL) as
 * agent_unwind_cfi_memo does; never a replay: the caller has looked for
 * one with agent_memo_find. */
struct agent_walk agent_unwind_cfi_at(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *pcs,
				      int max, struct walk_memos *ms);

/* Every frame above the caller's, outermost last, agent frames included:
 * each frame's pc (a return address) in pcs and its stack pointer (the
 * CFA of the frame below) in sps, at most max; returns how many. For the
 * exit-time report, which needs stack addresses, not only pcs. */
int agent_unwind_frames(uintptr_t *pcs, uintptr_t *sps, int max);

#endif
