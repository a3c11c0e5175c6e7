/*
 * quarantine.h — sampled blocks held back from the allocator after their
 * free (quarantine.c), so that a second free of one is known for a double
 * free (issue 31, sampled mode). A sampled block given back by free or
 * delete is kept, not freed: while it is kept the allocator cannot hand
 * its address out again, so another free of that address is certainly a
 * double free (hooks.c reports it as exact mode does, heaperrors.h, and
 * does not pass it on), and a realloc of it an invalid realloc. At most
 * AGENT_QUARANTINE_BLOCKS blocks and AGENT_QUARANTINE_BYTES bytes are
 * kept; the oldest goes to the allocator first. A block larger than a
 * quarter of the bytes is not kept, nor one of AGENT_QUARANTINE_MIN
 * bytes or fewer: glibc's thread cache holds blocks up to that size, and
 * one held back here sends the thread's next allocation of its size to
 * the arena and its lock, where the allocation of a signal handler that
 * interrupted it waits for ever (programs allocate in handlers when the
 * cache serves both: e2e signal_handler_alloc, hostile handler_storm);
 * a bigger block's free and allocation take that lock anyway.
 *
 * What it costs is bounded, for it must cost no more than sampling does:
 * a kept block keeps the allocator from merging its neighbours (a thread
 * that churns 1-4 KiB blocks at 8 KiB sampling spent 50 % more CPU with
 * 256 blocks kept and no bound on the rate, est_server busy), so at most
 * AGENT_QUARANTINE_RATE blocks a second are kept (a sampled free beyond
 * that is given back as before), 64 at once. Each kept block's page stays
 * counted in the sampling filter (table.h) with a weight of its own, so
 * its second free comes to the slow path, and a free on a page holding
 * kept blocks only costs a look at this file's hint, without a lock or
 * the table (hooks.c, free_slow); an unsampled block's free elsewhere
 * costs what it did. Kept blocks are not live: the live table, the
 * counters and the leak scan no longer hold them (their free was
 * counted). Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_QUARANTINE_H
#define HEAPTRAIL_AGENT_QUARANTINE_H

#include "agent/agent.h"

#define AGENT_QUARANTINE_BLOCKS 64
#define AGENT_QUARANTINE_BYTES (4u << 20)
#define AGENT_QUARANTINE_MIN 1032      /* glibc's tcache_max_bytes */
#define AGENT_QUARANTINE_RATE 200      /* blocks kept a second, at most (burst: BLOCKS) */

/* Blocks kept now: 0 most of the time, read without a lock (a hint). */
extern _Atomic uint32_t agent_quarantine_count;
/* Blocks kept a second at most, over a burst of AGENT_QUARANTINE_BLOCKS
 * (AGENT_QUARANTINE_RATE; 0: no bound, for the unit test). */
extern uint32_t agent_quarantine_rate;

/* Keeps sampled block p (size bytes, allocation stack alloc_stack, given
 * back by d, enum agent_dealloc, from return address ra) instead of
 * freeing it; the blocks it pushes out are given to free (the real
 * allocator's, from the caller's entry point). false: not kept (too big,
 * detached): the caller frees p. Hook-safe. */
bool agent_quarantine_put(void *p, size_t size, uint32_t alloc_stack, int d, uintptr_t ra,
			  void (*free_fn)(void *));
/* false: p is surely no kept block (one load, no lock). Hook-safe. */
bool agent_quarantine_may_hold(const void *p);
/* Whether p is a kept block: its size, allocation stack, how and where
 * (return address) it was first given back. Hook-safe. */
bool agent_quarantine_find(const void *p, size_t *size, uint32_t *alloc_stack, int *first_d,
			   uintptr_t *ra);
/* The bytes kept now (the allocator counts them in use: heapstats.h). */
uint64_t agent_quarantine_bytes(void);
/* Gives every kept block to free_fn and keeps no more until keep is
 * called (a detach: before the hooks go, nothing may stay behind). */
void agent_quarantine_drain(void (*free_fn)(void *));
void agent_quarantine_keep(void);
/* Counts the kept blocks' pages in the sampling filter again, after it
 * was cleared (sample.c, agent_resample; every table lock held). */
void agent_quarantine_refilter(void);
/* Fork: the lock taken before (after every table lock) and released in
 * both processes after; the child keeps the blocks, which are its own. */
void agent_quarantine_lock(void);
void agent_quarantine_unlock(void);

#endif
