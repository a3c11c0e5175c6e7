/*
 * guard.h — guarded allocations, GWP-ASan's idea for an unmodified
 * program (guard.c): with the option guard=RATE, about one recorded
 * allocation every RATE bytes is placed at the end of a page of its own
 * with an inaccessible page after it, and its page is made inaccessible
 * at its free and kept so until its slot is needed again (oldest first).
 * A read or write past its end or after its free faults; the fault is a
 * heap error (heaperrors.h: overflow, use_after_free) with the block's
 * allocation and free stacks and the faulting access's, and the program
 * then dies of its SIGSEGV as it would have (or, with guard_continue,
 * the page is opened and it goes on). The bytes between a block's end
 * and its page's (the slack, when its size is no multiple of 16) are
 * checked at its free and at leak reports: a changed one is an overflow
 * found there, without the access's stack. Layer 2.
 */
#ifndef HEAPTRAIL_AGENT_GUARD_H
#define HEAPTRAIL_AGENT_GUARD_H

#include "agent/agent.h"
#include "agent/config.h"

/* The guarded pages: [agent_guard_lo, agent_guard_lo + agent_guard_len),
 * both 0 when guard is off. Set once, before any guarded allocation. */
extern uintptr_t agent_guard_lo, agent_guard_len;
static inline bool agent_guard_owns(const void *p)
{
	return (uintptr_t)p - agent_guard_lo < agent_guard_len;
}

/* Guard is on and a recorded allocation of n bytes may be guarded: in
 * exact mode when the thread's countdown runs out (a few instructions
 * otherwise, inline), sampled always (agent_guard_alloc decides). */
static inline bool agent_guard_due(size_t n)
{
	if (AGENT_LIKELY(!agent_guard_len))
		return false;
	if (agent_sampling.period <= 1 && (uint64_t)n < (uint64_t)agent_tls.guard_left) {
		agent_tls.guard_left -= (int64_t)n;
		return false;
	}
	return true;
}

/* From the constructor or an attach, when guard=RATE was given: maps
 * the slots and takes SIGSEGV (signals.h: the program's own handler
 * still gets every fault that is not the guard's). Says on stderr when
 * it cannot. At an attach only once the allocator's free and realloc
 * are hooked for good (attach.c): a guarded block must never reach the
 * allocator. */
void agent_guard_init(void);

/* A block of n bytes aligned to align (at least malloc's 16) on
 * a guarded page, when agent_guard_due said so, n fits, the sampler
 * picks it and a slot is free; else NULL. Its memory reads as zero. Hook-safe. */
void *agent_guard_alloc(size_t n, size_t align);
/* After the block's record (hooks.c): stack is its allocation stack's id;
 * 0 when it was not recorded, and then the block is given back at once
 * (a guarded block must stay known to the table, so its free reaches the
 * agent and never the allocator) and NULL returned: the caller allocates
 * the ordinary way. Returns p otherwise. Hook-safe. */
void *agent_guard_recorded(void *p, uint32_t stack);
/* Gives guarded block p back (its free, delete or realloc, d: enum
 * agent_dealloc): its page becomes inaccessible, and the free's stack is
 * taken when stack says it may be (not from inside the agent, which may
 * hold the stack table's lock). Anything else in the guard's pages (a
 * double free, an address inside a block) is left alone. Hook-safe. */
void agent_guard_free(void *p, int d, bool stack);
/* A free or realloc (d) of p, which the table does not hold: when p is a
 * guarded block already freed whose slot was not taken again, a double
 * free, counted with the first free's whole stack (heaperrors.h), and
 * true: p must go nowhere (realloc returns NULL). Hook-safe, from an
 * entry point (it takes this free's stack). */
bool agent_guard_freed_again(const void *p, int d);
/* Checks the slack after each live guarded block (guard.c): a changed
 * byte is counted as an overflow found at this report (heaperrors.h,
 * agent_error_slack), once a block. Reads through the kernel, so a block
 * freed meanwhile costs nothing. Hook-safe (from a leak report, before
 * its errors are copied). */
void agent_guard_check_live(void);
/* A detach (attach.c): no block is guarded from now on, and every
 * guarded page is opened, so the program runs after it as it would
 * have without the agent; a block still live keeps its slot until its
 * free. Returns how many are live (a call placing one counts as one):
 * their free and realloc must still reach the agent. Not hook-safe. */
int agent_guard_retire(void);
/* An attach again with guard on, after agent_guard_retire: the pages
 * that are no live block's are made inaccessible again, and blocks are
 * guarded again. Not hook-safe. */
void agent_guard_resume(void);
/* false when guard is off; else the blocks placed on guarded pages so
 * far, and those picked while every slot held a live block. */
bool agent_guard_counts(uint64_t *guarded, uint64_t *full);
/* The usable size of guarded block p. */
size_t agent_guard_usable(const void *p);

#endif
