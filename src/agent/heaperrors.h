/*
 * heaperrors.h — frees done wrong (heaperrors.c): a block given back by
 * the wrong family (free of a new block, delete of a new[] one, realloc
 * of either), or by a delete whose size or alignment is not its new's,
 * found when the block was recorded (exact mode: every block; sampled:
 * the sampled ones), kept per context (the kind, where
 * the block was allocated, where it was given back) with a count, as
 * valgrind's "N errors from M contexts"; and the faults of guarded
 * blocks (guard.c), kept the same way. Layer 2.
 */
#ifndef HEAPTRAIL_AGENT_HEAPERRORS_H
#define HEAPTRAIL_AGENT_HEAPERRORS_H

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/table.h"
#include "format/leakfile.h"

/* How a block is given back: the stack fn of the free's stack. */
enum agent_dealloc {
	AGENT_DEALLOC_FREE = FMT_FN_FREE,
	AGENT_DEALLOC_REALLOC = FMT_FN_REALLOC,  /* realloc giving the old block back */
	AGENT_DEALLOC_DELETE = FMT_FN_DELETE,
	AGENT_DEALLOC_DELETE_ARRAY = FMT_FN_DELETE_ARRAY,
};

/* Not checked (a signal handler's free, deferred): every fn's bit. */
#define AGENT_DEALLOC_UNCHECKED 31
/* How a delete gave a block back, as its caller said: d (enum
 * agent_dealloc) in the low byte, and for an aligned delete
 * (operator delete(void *, align_val_t), al a power of two) the log2 of
 * its alignment + 1 above: what a block's stack says of its new
 * (agent_stack.align_log), so an unaligned delete of an unaligned new
 * compares 0 with 0. */
#define AGENT_DEALLOC_ALIGNED(d, al) ((d) | (__builtin_ctzll(al) + 1) << 8)
/* A delete that gave no size (free, realloc, an unsized delete). */
#define AGENT_DEALLOC_NO_SIZE ((size_t)-1)
/* Bit d of agent_dealloc_ok[fn]: a block allocated by fn (enum
 * fmt_alloc_fn) may be given back by d: the malloc family by free and
 * realloc, new by delete, new[] by delete[]; pool chunks and the rest by
 * anything (they follow their own rules). */
extern const uint32_t agent_dealloc_ok[FMT_FN_COUNT];
static inline bool agent_dealloc_matches(int fn, int d)
{
	return (agent_dealloc_ok[fn] >> d) & 1;
}
/* The same for a live block's family (table.h, enum agent_live_family),
 * and how (AGENT_DEALLOC_ALIGNED's, with the alignment): true when it is
 * the family's own deallocator (free, delete, delete[]: FMT_FN_FREE +
 * the family), unaligned, or a realloc of the malloc family's, with
 * nothing more to check; false sends the free to the full check, by its
 * stack: a free in a signal handler, any aligned delete, any block of
 * AGENT_LIVE_OTHER (whose deallocator would be FMT_FN_COUNT, none). One
 * compare on every free, two more on a realloc. */
_Static_assert(FMT_FN_FREE + AGENT_LIVE_MALLOC == AGENT_DEALLOC_FREE &&
		       FMT_FN_FREE + AGENT_LIVE_NEW == AGENT_DEALLOC_DELETE &&
		       FMT_FN_FREE + AGENT_LIVE_NEW_ARRAY == AGENT_DEALLOC_DELETE_ARRAY &&
		       FMT_FN_FREE + AGENT_LIVE_OTHER == FMT_FN_COUNT,
	       "each family's deallocator is FMT_FN_FREE + the family");
static inline bool agent_dealloc_surely_ok(unsigned family, int how)
{
	return how == FMT_FN_FREE + (int)family ||
	       (how == AGENT_DEALLOC_REALLOC && family == AGENT_LIVE_MALLOC);
}

/* The kinds of heap error and where an invalid free's address is: the
 * leak file's enums (format/leakfile.h, fmt_error_kind, fmt_error_where),
 * whose names leakwriter.c writes. */

/* Each thread's last frees of recorded blocks, in exact mode: a free of
 * an address the table no longer holds, found here, is a double free,
 * reported with where the block was allocated and first given back (its
 * caller's return address). Addresses are kept inverted: the leak scan
 * reads the agent's memory as the program's, and must not find a pointer
 * to a block there. An address the allocator hands out again without
 * heaptrail recording it (the agent's own work, a full table) is
 * forgotten (agent_free_ring_forget), so its free is no double free. */
#define AGENT_FREE_RING 256
struct agent_freed {
	uint64_t key;            /* ~address; 0: none */
	uint64_t meta;           /* the block's live entry's (table.h, agent_live_meta) */
	uintptr_t ra;            /* the return address of the free's caller */
	uint64_t d;              /* how it was freed: enum agent_dealloc */
};
struct agent_free_ring {
	uint32_t next;
	struct agent_freed e[AGENT_FREE_RING];
};
/* The calling thread's ring, its counters slot's, made when missing;
 * NULL when it has none (no slot of its own, no memory). Exact mode
 * only: agent_tls.frees holds it once made, and a free notes its block
 * there when it is set. Hook-safe. */
struct agent_free_ring *agent_free_ring_mine(void);
/* Notes in r, the thread's ring, the free of recorded block p (by d)
 * whose live entry's meta word was meta (hook-safe). */
static inline void agent_free_ring_note(struct agent_free_ring *r, uintptr_t p, uint64_t meta,
					int d, uintptr_t ra)
{
	struct agent_freed *f = &r->e[r->next++ % AGENT_FREE_RING];
	f->key = ~(uint64_t)p;  /* first: ring_find checks a torn entry by it */
	f->meta = meta;
	f->ra = ra;
	f->d = (uint64_t)d;
}
/* p was handed out again without being recorded: not freed any more. */
void agent_free_ring_forget(uintptr_t p);

/* A block of size bytes, of stack alloc_stack, given back by d which does
 * not match its family: counted in its context, the free's stack taken
 * now. Called from an entry point with busy set (hook-safe). */
void agent_error_mismatch(uint32_t alloc_stack, size_t size, int d);

/* A sized delete (d) of a block of size bytes, of stack alloc_stack,
 * that gave given bytes; an aligned or unaligned delete whose alignment
 * (given; 0: none) is not the block's new's (alloc_align; 0: none):
 * counted in the context of the two stacks, as agent_error_mismatch. The
 * family is right (a wrong one is agent_error_mismatch's alone). */
void agent_error_size_mismatch(uint32_t alloc_stack, size_t size, int d, size_t given);
void agent_error_align_mismatch(uint32_t alloc_stack, size_t size, int d, size_t alloc_align,
				size_t given);

/* A free of p by d, in exact mode since the start, of an address the
 * table does not hold: when p is provably none of the allocator's (inside
 * a live block past its start, in a loaded object's image, on the main
 * thread's stack) the error is counted and true returned: the caller must
 * not give p to the allocator (it would abort the program). false: an
 * address heaptrail cannot judge, passed on as ever. Hook-safe. */
bool agent_error_invalid_free(void *p, int d);
/* The same for p found in a thread's last frees: a double free, counted
 * (true: the caller must not pass it on); false when no ring holds it. */
bool agent_error_double_free(void *p, int d);
/* A double free by d of a block of size bytes and stack alloc_stack
 * first given back by first_d from return address ra (found in a ring,
 * or in sampled mode in quarantine.h's blocks): counted, with the
 * stack of this free. Hook-safe. */
void agent_error_double_free_of(uint32_t alloc_stack, size_t size, int first_d, uintptr_t ra,
				int d);
/* The same with the first free's whole stack, first_free (a guarded
 * block's: guard.c keeps it; 0: not taken). */
void agent_error_double_free_stack(uint32_t alloc_stack, size_t size, uint32_t first_free, int d);

/* A guarded block's fault (guard.c): kind FMT_ERROR_OVERFLOW or
 * FMT_ERROR_USE_AFTER_FREE, the block's stacks (free_stack 0 for a live
 * block), access FMT_WHERE_READ or _WRITE, offset from the block's start
 * (below zero, two's complement, for an access before it), and the
 * faulting access's stack. Signal-safe but for its lock (a fault comes
 * from the program's code, never from inside the agent). */
void agent_error_guard(uint32_t kind, uint32_t alloc_stack, uint32_t free_stack, size_t size,
		       uint32_t access, uint64_t offset, uint32_t access_stack);
/* A guarded block's slack written (guard.c): an overflow (a write) at
 * offset from its start, found at its free (free_stack) or at a leak
 * report (free_stack 0: then --errors=abort does not stop the program,
 * whose report is being written), with no access stack (prev_stack 0).
 * Hook-safe but for its lock: not from a signal handler that may have
 * interrupted an error's count. */
void agent_error_slack(uint32_t alloc_stack, uint32_t free_stack, size_t size, uint64_t offset);

/* One context: how many errors of kind, the block's size (the first
 * one's), and the two stacks (ids of the stack table; alloc_stack 0:
 * none, an invalid free outside any block); for an invalid free, where
 * the address is and its offset into the block; for a double free, the
 * stack of the first free (prev_stack: its caller alone); for a guarded
 * block's fault, where is the access (read, write) and prev_stack its
 * stack (0 for a slack's overflow, found after the access); for a size or alignment mismatch, offset is what the delete
 * gave (a size; an alignment, 0 none) and align the new's alignment (0
 * none), the first error's. */
struct agent_error {
	uint32_t kind, alloc_stack, free_stack, where, prev_stack;
	uint64_t count, size, offset, align;
};
/* A copy of up to cap contexts, in the order they were first seen;
 * returns how many there are (those beyond cap left out). */
size_t agent_errors_copy(struct agent_error *out, size_t cap);
/* Errors not kept in a context: the contexts were full. */
uint64_t agent_errors_dropped(void);
#define AGENT_ERROR_CONTEXTS 1024

#endif
