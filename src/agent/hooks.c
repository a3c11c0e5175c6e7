/*
 * hooks.c — the allocator entry points the agent replaces.
 *
 * Each hook forwards to the real allocator (found with dlsym(RTLD_NEXT),
 * so another preloaded allocator keeps working) and records the result.
 * The order that keeps the tables right under threads: a block is
 * recorded after the real allocator returns it, and forgotten before the
 * real free gives its address back, so no other thread can be handed the
 * same address while it is still in the table.
 *
 * Re-entrancy: agent_tls.busy is set while the agent works. Inside the
 * agent's own work (dumps, reports: AGENT_BUSY_AGENT) an allocation made while
 * it is set (by dlsym or libc inside our own calls) goes straight to the
 * real allocator untracked. Inside an entry point (AGENT_BUSY_HOOK) the agent
 * calls nothing that allocates, so a nested call there is a signal
 * handler's: it is written down and carried out when the entry point
 * leaves (see "deferred calls"). Before the real
 * allocator is known (dlsym's own calloc, the first allocations of the
 * process), blocks come from the bootstrap buffer (startup.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/guard.h"
#include "agent/heaperrors.h"
#include "agent/heapprofile.h"
#include "format/vocab.h"
#include "agent/hooks.h"
#include "agent/modules.h"
#include "agent/pool.h"
#include "agent/quarantine.h"
#include "agent/sample.h"
#include "agent/table.h"
#include "agent/unwind.h"
#include "heaptrail.h"
#include "agent/startup.h"
#include "format/leakfile.h"
#include "agent/banned.h"

/* ---------- recording ---------- */

static atomic_bool recording = true;
/* Recording was stopped at some time: a block allocated then is freed
 * untracked, rightly, and a free the table does not know is no error. */
static atomic_bool recording_stopped;

int agent_set_recording(bool on)
{
	if (!on)
		atomic_store(&recording_stopped, true);
	return atomic_exchange(&recording, on);
}

bool agent_recording(void)
{
	return atomic_load(&recording);
}

/* The current stack interned for allocator fn. Stacks are followed with
 * DWARF call-frame information (.eh_frame), so binaries built without
 * frame pointers — most of Debian — unwind fully. The work is done by
 * unwind.c, which caches each pc's frame rule in a lock-free table and
 * finds objects with glibc's lock-free _dl_find_object (libunwind, which
 * we used first, calls dl_iterate_phdr on a cache miss, whose lock glibc
 * does not reset in a forked child). Inlined into note_alloc: each agent
 * frame between the walk and the program is one more word for every
 * replay of a remembered walk to check. */
static inline __attribute__((always_inline)) uint32_t capture_stack(int fn)
{
	uintptr_t pcs[AGENT_MAX_DEPTH];
	struct agent_counters *slot = agent_tls.ctr;
	struct walk_memos *ms = NULL;
	uintptr_t pc, sp, bp;
	AGENT_FRAME_REGS(pc, sp, bp);
	if (slot && !slot->shared) {
		if (AGENT_UNLIKELY(!slot->memo))
			slot->memo = agent_mmap(sizeof *slot->memo);
		ms = slot->memo;
	}
	/* A walk the thread has made before, found without a call: its
	 * stack id, or its pcs to intern for this allocator. */
	if (AGENT_LIKELY(ms)) {
		struct walk_memo *m = agent_memo_find(ms, pc, sp, bp, agent_config.depth);
		if (m) {
			uint32_t id = agent_memo_stack_id(m, fn);
			if (!id) {
				id = agent_stack_intern(fn, agent_memo_pcs(m), agent_memo_npcs(m));
				agent_memo_set_stack_id(m, fn, id);
			}
			return id;
		}
	}
	struct agent_walk w = agent_unwind_cfi_at(pc, sp, bp, pcs, agent_config.depth, ms);
	uint32_t id = agent_stack_intern(fn, pcs, w.npcs);
	if (w.memo)  /* recorded */
		agent_memo_set_stack_id(w.memo, fn, id);
	return id;
}

/* p was handed out and will not be recorded (the agent's own work, a
 * full table): in exact mode, its address must leave the rings of last
 * frees, or its free would pass for a double free (heaperrors.h). */
static AGENT_NOINLINE void untracked_alloc(void *p)
{
	if (agent_sampling.leak_kinds && p)
		agent_free_ring_forget((uintptr_t)p);
}

/* Enters block p, of stack id, in the live table and the counts;
 * returns id, or 0 when the table did not take it. */
static inline __attribute__((always_inline)) uint32_t note_alloc_id(struct agent_counts *c,
								    void *p, size_t n, uint32_t id)
{
	agent_count_shape_alloc(c, p, n);
	struct agent_stack *s;
	if (AGENT_UNLIKELY(!id) ||
	    AGENT_UNLIKELY(!agent_live_insert((uintptr_t)p, n, id, (s = agent_stack_get(id))->family))) {
		untracked_alloc(p);
		agent_count(&c->dropped, 1);
		agent_count2(&c->allocs, 1, &c->bytes_allocated, n);
		return 0;
	}
	agent_add_shared(&s->total_bytes, n);
	agent_add_shared(&s->total_blocks, 1);
	agent_count2(&c->tracked, 1, &c->tracked_bytes, n);
	agent_sample_note_maybe(c, n, +1);
	return id;
}

static void drain_in_entry(void);

/* Records a sampled (in exact mode: every) block: its stack, its entry in
 * the live table, and what it adds to the estimates. Returns its stack's
 * id, 0 when it is not recorded. */
static AGENT_NOINLINE uint32_t note_alloc(void *p, size_t n, int fn)
{
	/* the table's line for p is on its way while the stack is taken */
	agent_live_prefetch((uintptr_t)p);
	struct agent_counts *c = agent_my_counts();
	if (!atomic_load_explicit(&recording, memory_order_relaxed)) {
		agent_count2(&c->allocs, 1, &c->bytes_allocated, n);  /* seen, not tracked */
		return 0;
	}
	/* p may be a block a handler freed meanwhile, still in the table
	 * until its record is drained ("deferred calls"): the record was
	 * written before the allocator handed p out, so it is in this batch */
	if (AGENT_UNLIKELY(agent_tls.deferred))
		drain_in_entry();
	return note_alloc_id(c, p, n, capture_stack(fn));
}

/* The block guard.c placed instead of the allocator's (n bytes, align
 * as guard.h says), recorded; NULL when none was placed, or when the
 * table did not take it (then the caller allocates as usual: a guarded
 * block must stay known, or its free would reach the allocator). */
static AGENT_NOINLINE void *guarded_alloc(size_t n, size_t align, int fn)
{
	if (!atomic_load_explicit(&recording, memory_order_relaxed))
		return NULL;  /* it would not be recorded */
	void *p = agent_guard_alloc(n, align);
	return p ? agent_guard_recorded(p, note_alloc(p, n, fn)) : NULL;
}

/* Gives p to the allocator, or to guard.c when it is a guarded block
 * (d: how, enum agent_dealloc; stack: whether its free's stack may be
 * taken, not from inside the agent). */
static inline void give_back(void *p, int d, bool stack)
{
	if (AGENT_UNLIKELY(agent_guard_owns(p)))
		agent_guard_free(p, d, stack);
	else
		agent_real.free(p);
}

/* Its usable size: the allocator's, or guard.c's. */
static size_t usable_size(void *p)
{
	if (AGENT_UNLIKELY(agent_guard_owns(p)))
		return agent_guard_usable(p);
	return agent_real.malloc_usable_size ? agent_real.malloc_usable_size(p) : 0;
}

/* realloc of guarded block p: a new block of the allocator's with its
 * bytes (glibc's realloc(p, 0) frees p and returns NULL). */
static void *realloc_guarded(void *p, size_t n, bool stack)
{
	void *q = n ? agent_real.malloc(n) : NULL;
	if (q) {
		size_t old = agent_guard_usable(p);
		agent_memcpy(q, p, old < n ? old : n);
	}
	if (q || !n)
		agent_guard_free(p, AGENT_DEALLOC_REALLOC, stack);
	return q;
}

/* A free (how, dsize: note_free's) of a block of stack (size bytes)
 * that its live entry's family could not clear at once, checked against
 * the stack's allocator: a block given back by the wrong family; else,
 * for the blocks of a new only (a pool's chunks and the rest follow
 * their own rules), a delete that gave an alignment other than its
 * new's, or a size (dsize) other than its own, as ASan's
 * new-delete-type-mismatch does (one error a delete, the alignment's
 * first). */
static AGENT_NOINLINE void check_dealloc(uint32_t stack, size_t size, int how, size_t dsize)
{
	int d = how & 0xff;
	const struct agent_stack *s = agent_stack_get(stack);
	if (!agent_dealloc_matches(s->fn, d)) {
		agent_error_mismatch(stack, size, d);
		return;
	}
	if (d == AGENT_DEALLOC_UNCHECKED || (s->fn != FMT_FN_NEW && s->fn != FMT_FN_NEW_ARRAY))
		return;
	if (s->align_log != (uint8_t)(how >> 8))
		agent_error_align_mismatch(stack, size, d, AGENT_STACK_ALIGN(s),
					   how >> 8 ? 1ull << ((how >> 8) - 1) : 0);
	else if (dsize != AGENT_DEALLOC_NO_SIZE && dsize != size && size < AGENT_LIVE_SIZE_MAX)
		agent_error_size_mismatch(stack, size, d, dsize);
}

/* A free (or realloc: d) of p, a block kept in quarantine.h's
 * quarantine since its first free: a double free, counted as exact mode
 * counts one (its first free's caller, and this free's stack); true: it
 * must not reach the allocator, which has not freed p. */
static AGENT_NOINLINE bool quarantined(void *p, int d)
{
	size_t size;
	uint32_t alloc_stack;
	int first_d;
	uintptr_t ra;
	if (!agent_quarantine_find(p, &size, &alloc_stack, &first_d, &ra))
		return false;
	agent_error_double_free_of(alloc_stack, size, first_d, ra, d);
	return true;
}

static void real_free(void *p)
{
	agent_real.free(p);
}

/* Sampled mode: sampled block p (size bytes, stack id), just forgotten
 * by note_free and given back by d from return address ra, is kept in
 * quarantine.h's quarantine instead of freed, when it is the malloc or
 * new families' and no guarded block (guard.c keeps those). false: the
 * caller gives it back. */
static AGENT_NOINLINE bool keep_freed(void *p, size_t size, uint32_t id, int d, uintptr_t ra)
{
	if (agent_guard_owns(p) || agent_stack_get(id)->fn > FMT_FN_NEW_ARRAY)
		return false;
	return agent_quarantine_put(p, size, id, d, ra, real_free);
}

/* note_free of p (by d, enum agent_dealloc) when the table does not
 * hold it: 0, or -1 when p must not reach the allocator. */
static AGENT_NOINLINE int note_untracked_free(void *p, int d)
{
	if (AGENT_UNLIKELY(agent_guard_owns(p)) && d != AGENT_DEALLOC_UNCHECKED &&
	    agent_guard_freed_again(p, d))
		return -1;
	if (AGENT_UNLIKELY(atomic_load_explicit(&agent_quarantine_count, memory_order_relaxed)) &&
	    d != AGENT_DEALLOC_UNCHECKED && quarantined(p, d))
		return -1;
	if (agent_sampling.period > 1)  /* sampling: the usual case, not counted */
		return 0;
	agent_count(&agent_my_counts()->untracked_frees, 1);
	/* exact since the start, every block the allocator handed out is
	 * known: one that is not may be judged */
	if (p && d != AGENT_DEALLOC_UNCHECKED && agent_sampling.leak_kinds &&
	    atomic_load_explicit(&agent_attach_state, memory_order_relaxed) == AGENT_NEVER_ATTACHED &&
	    !atomic_load_explicit(&recording_stopped, memory_order_relaxed) &&
	    (agent_error_double_free(p, d) || agent_error_invalid_free(p, d)))
		return -1;
	return 0;
}

/* Forgets p if it was tracked; returns whether it was (1), with its size
 * and stack so realloc can put it back when the real realloc fails; 0
 * when it was not; -1 when p is provably none of the allocator's (an
 * invalid free, heaperrors.h): it must not reach the allocator. how: how
 * it is given back (enum agent_dealloc, or AGENT_DEALLOC_ALIGNED's),
 * checked against how it was allocated, and dsize the size a sized
 * delete gave (AGENT_DEALLOC_NO_SIZE: none) against its size;
 * AGENT_DEALLOC_UNCHECKED: not checked (a signal handler's, deferred).
 * Inline in free_slow, whose frame it shares; note_free elsewhere. */
static inline __attribute__((always_inline)) int note_free_in(void *p, size_t *size,
							      uint32_t *stack, int how,
							      size_t dsize, uintptr_t ra)
{
	uint64_t meta;
	if (!agent_live_take((uintptr_t)p, &meta))
		return note_untracked_free(p, how & 0xff);
	*size = agent_live_meta_size(meta);
	*stack = agent_live_meta_stack(meta);
	/* exact mode: noted for double frees */
	struct agent_free_ring *r = agent_tls.frees;
	if (AGENT_LIKELY(r) || (AGENT_UNLIKELY(agent_sampling.leak_kinds) && (r = agent_free_ring_mine())))
		agent_free_ring_note(r, (uintptr_t)p, meta, how & 0xff, ra);
	if (AGENT_UNLIKELY(!agent_dealloc_surely_ok(agent_live_meta_family(meta), how)) ||
	    AGENT_UNLIKELY(dsize != AGENT_DEALLOC_NO_SIZE))
		check_dealloc(*stack, *size, how, dsize);
	struct agent_counts *c = agent_my_counts();
	agent_count2(&c->tracked_frees, 1, &c->freed_bytes, *size);
	agent_count_shape_free(c, p);
	agent_sample_note_maybe(c, *size, -1);
	return true;
}

static AGENT_NOINLINE int note_free(void *p, size_t *size, uint32_t *stack, int how, size_t dsize,
				    uintptr_t ra)
{
	return note_free_in(p, size, stack, how, dsize, ra);
}

static void put_back(void *p, size_t size, uint32_t id)
{
	if (!agent_live_insert((uintptr_t)p, size, id, agent_stack_get(id)->family))
		return;
	struct agent_counts *c = agent_my_counts();
	/* undo note_free's counts */
	agent_count(&c->tracked_frees, (uint64_t)-1);
	agent_count(&c->freed_bytes, (uint64_t)-size);
	agent_sample_note_maybe(c, size, +1);
}

/* ---------- the real allocator ----------
 * Its functions that may call its own entry points (glibc's realloc
 * calls malloc and free, its memalign family malloc) run with in_real
 * set: at an attach those entry points jump to the agent, unless
 * in_real says that the call comes from inside the allocator itself
 * (fnentries.c, "the allocator's own entry points"), where it was already
 * counted once. malloc, calloc and free call none (attach.c checks it
 * before it hooks them) and stay plain tail calls. */
#define REAL_INSIDE(type, call)                                            \
	({                                                                 \
		bool was_ = agent_tls.in_real;                             \
		agent_tls.in_real = true;                                  \
		type r_ = (call);                                          \
		agent_tls.in_real = was_;                                  \
		r_;                                                        \
	})

static inline void *real_realloc(void *p, size_t n)
{
	return REAL_INSIDE(void *, agent_real.realloc(p, n));
}

static inline void *real_memalign(size_t align, size_t n)
{
	return REAL_INSIDE(void *, agent_real.memalign(align, n));
}

static inline void *real_aligned_alloc(size_t align, size_t n)
{
	return REAL_INSIDE(void *, agent_real.aligned_alloc(align, n));
}

static inline void *real_valloc(size_t n)
{
	return REAL_INSIDE(void *, agent_real.valloc(n));
}

static inline void *real_pvalloc(size_t n)
{
	return REAL_INSIDE(void *, agent_real.pvalloc(n));
}

static inline int real_posix_memalign(void **out, size_t align, size_t n)
{
	return REAL_INSIDE(int, agent_real.posix_memalign(out, align, n));
}

/* ---------- deferred calls ----------
 * A signal handler that allocates or frees (glibc allows it in practice)
 * may interrupt this thread inside an entry point, holding a table lock
 * or halfway through a counter update. Touching the tables then would
 * deadlock (the spinlock is held by the code the handler interrupted) or,
 * single-threaded, corrupt them; so what the handler's call does to the
 * tables is written down in a per-thread buffer and done when the entry
 * point leaves. The call itself reaches the real allocator at once, in
 * the handler, as bare: an allocation with its stack taken then (the
 * unwinder takes no lock), a free given back then. A program whose
 * handler mallocs and frees (glibc allows it in practice when the
 * handler's size comes from the thread's tcache, balanced, and nothing
 * else uses that size) relies on the allocator's state being what its
 * own calls leave: a free kept back until the entry point left (as it
 * once was) left the handler's next malloc an empty tcache list, so it
 * went for the arena lock the interrupted realloc held (a deadlock), or
 * was done outside the handler where the next signal's handler took
 * from the list that free was changing ("double free detected in tcache
 * 2"; issue 27, hostile:handler_storm).
 *
 * So the table may hold a freed block for a moment. A free is written
 * down before the block goes back, so a later handler's allocation of
 * the same address comes after it in the buffer; the interrupted entry
 * point, which may get that address from the real allocator, drains the
 * buffer before it enters its own block (note_alloc). Another thread
 * can get the address only once this thread's cache has passed it on,
 * within the same microseconds: then the table holds the address twice
 * for that moment, the drain forgets one of the two, and the block
 * counts stay right (its size and stack may be the handler's block's).
 * The same holds for a free while the thread holds every table lock for
 * a dump or a scan; allocations there cannot be told from the agent's
 * own and stay untracked.
 *
 * A record: word 0 = kind | fn << 8 | npcs << 32 (fn: 16 bits, an
 * aligned new's, AGENT_FN_ALIGNED), word 1 the address;
 * an allocation adds its size and its pcs. Only this thread and its
 * signal handlers touch the buffer: a handler appends a whole record
 * before the interrupted code reads on, and a handler interrupting a
 * handler that is appending (agent_tls.pushing) gives up on recording.
 *
 * The drain (agent_defer_drain) works in batches, so that it returns
 * however fast handlers add records: a signal storm whose handler
 * allocates, every 10 us on every thread, adds them about as fast as the
 * thread can take them in (hostile:handler_storm, exact mode). Each
 * thread has two buffers: handlers append to the active one; the drain
 * makes the other (empty) one active, carries out the records of the
 * one it took, then empties it, and returns. What handlers add meanwhile
 * is the next drain's, at the thread's next way out of the agent. A
 * drain never starts inside another (agent_tls.draining: the table locks'
 * on_unlock, a dump's, would drain from inside a record), and what the
 * records' notes would start that is slow or takes every table lock (the
 * time triggers' rows and dumps, interval and peak dumps, a raise of S)
 * is noted as due and done once, after the batch (sample.h).
 *
 * The batch runs with signals blocked (faults excepted), and an entry
 * point that drains before its own record (drain_in_entry) keeps them
 * blocked until it leaves (agent_hook_leave lets them in, at busy 0).
 * Where delivering a signal takes most of the storm's period (9 of every
 * 10 us on a 2-core VM, bare), whatever a handler adds eats the little
 * time the code it interrupts gets between signals: a drain they could
 * interrupt took in a few records a second, and an entry point's walk
 * and table insert never finished; the program never left the agent.
 * Signals wait at most one batch and one entry point. For the same
 * reason a handler's allocation is written without its stack (no walk:
 * drained as dropped, untracked) once the buffer holds DEFER_BACKLOG
 * words, the sign that the thread gets no time to drain; a full buffer's
 * fallback (untracked_alloc) costs a handler more still. */

#define DEFER_WORDS (1u << 17)   /* 1 MiB a buffer, two mapped when first needed */
#define DEFER_BACKLOG 4096       /* words waiting past which records have no stack */
#define DEFER_FREE 1
#define DEFER_ALLOC 2

struct agent_defer {
	_Atomic uint32_t n;      /* words in use */
	struct agent_defer *other;  /* the thread's second buffer */
	uintptr_t w[DEFER_WORDS];
};

/* The thread's buffer with room for k words at *at, marked as being
 * written; NULL (nothing marked) when there is none. */
static struct agent_defer *defer_begin(uint32_t k, uint32_t *at)
{
	if (agent_tls.pushing)
		return NULL;
	agent_tls.pushing = true;
	struct agent_defer *d = agent_tls.defer;
	if (!d) {
		agent_tables_on_unlock(agent_defer_drain);
		d = agent_mmap(2 * sizeof *d);
		if (d) {
			d[0].other = &d[1];
			d[1].other = &d[0];
			agent_tls.defer = d;
		}
	}
	if (d) {
		*at = atomic_load_explicit(&d->n, memory_order_relaxed);
		if (*at + k <= DEFER_WORDS)
			return d;
	}
	agent_tls.pushing = false;
	return NULL;
}

static void defer_end(struct agent_defer *d, uint32_t end)
{
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&d->n, end, memory_order_relaxed);
	if (!agent_tls.deferred) {
		agent_tls.deferred = 1;  /* leave() sees agent_pending */
		atomic_fetch_add(&agent_pending, AGENT_PENDING_DEFERRED);
	}
	agent_tls.pushing = false;
}

/* A handler's free of p, to be forgotten later; false when it cannot be
 * written down (the table may then keep a stale entry for it). The
 * caller frees p after this, not before. */
static bool defer_free(void *p)
{
	uint32_t at;
	struct agent_defer *d = defer_begin(2, &at);
	if (!d)
		return false;
	d->w[at] = DEFER_FREE;
	d->w[at + 1] = (uintptr_t)p;
	defer_end(d, at + 2);
	return true;
}

/* A handler's new block p, to be recorded later with the stack of now. */
static AGENT_NOINLINE void defer_alloc(void *p, size_t n, int fn)
{
	uint32_t at;
	int depth = agent_config.depth;
	struct agent_defer *d = defer_begin(3 + (uint32_t)depth, &at);
	if (d && at >= DEFER_BACKLOG)
		depth = 0;  /* a backlog: a storm leaves no time for walks */
	if (!d) {
		depth = 0;  /* full: kept, without its stack */
		if (!(d = defer_begin(3, &at))) {
			untracked_alloc(p);
			return;
		}
	}
	int got = depth ? agent_unwind_cfi(&d->w[at + 3], depth) : 0, npcs = 0;
	/* below the signal frame are the entry point's frames it
	 * interrupted: the agent's own, which no stack shows */
	for (int i = 0; i < got; i++) {
		uintptr_t pc = d->w[at + 3 + i];
		if (pc - agent_self_lo >= agent_self_hi - agent_self_lo)
			d->w[at + 3 + npcs++] = pc;
	}
	d->w[at] = DEFER_ALLOC | (uintptr_t)(fn & 0xffff) << 8 | (uintptr_t)npcs << 32;
	d->w[at + 1] = (uintptr_t)p;
	d->w[at + 2] = n;
	defer_end(d, at + 3 + (uint32_t)npcs);
}

static void drain_record(const uintptr_t *w)
{
	void *p = (void *)w[1];
	if ((w[0] & 0xff) == DEFER_FREE) {
		size_t size;
		uint32_t id;
		note_free(p, &size, &id, AGENT_DEALLOC_UNCHECKED, AGENT_DEALLOC_NO_SIZE,
			  0);  /* freed by the handler already */
		return;
	}
	size_t n = w[2];
	int fn = (int)(w[0] >> 8 & 0xffff), npcs = (int)(w[0] >> 32);
	struct agent_counts *c = agent_my_counts();
	if (!agent_sampled(n))
		return;
	if (!atomic_load_explicit(&recording, memory_order_relaxed) || !npcs) {
		if (!npcs) {
			untracked_alloc(p);
			agent_count(&c->dropped, 1);  /* written without its stack */
		}
		agent_count2(&c->allocs, 1, &c->bytes_allocated, n);
		return;
	}
	note_alloc_id(c, p, n, agent_stack_intern(fn, &w[3], npcs));
}

static size_t record_words(const uintptr_t *w)
{
	return (w[0] & 0xff) == DEFER_FREE ? 2 : 3 + (w[0] >> 32);
}

/* rt_sigprocmask inline, not libc's syscall(): a signal waiting for the
 * unblock is delivered at this pc, in our own text, which the stack its
 * handler's allocation records leaves out. */
static inline long raw_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	long ret;
	register long size __asm__("r10") = _NSIG / 8;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"((long)SYS_rt_sigprocmask), "D"((long)how), "S"(set), "d"(old), "r"(size)
			 : "rcx", "r11", "memory");
	return ret;
}

/* Blocks every signal but those a fault raises (the agent's fatal
 * report must still see a crash), saving the mask in old; false when it
 * could not. */
static bool block_signals(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	return raw_sigmask(SIG_BLOCK, &all, old) == 0;
}

/* The drain; hold: leave the signals blocked until the entry point
 * that called it leaves (agent_hook_leave). */
static void drain(bool hold)
{
	struct agent_defer *d = agent_tls.defer;
	int saved = agent_tls.busy;
	if (!d || !agent_tls.deferred || agent_tls.draining || saved == AGENT_BUSY_LOCKED ||
	    agent_tls.tables_locked)
		return;
	agent_tls.draining = true;
	agent_tls.busy = AGENT_BUSY_HOOK;  /* handlers running now append */
	sigset_t old;
	bool blocked = !agent_tls.masked && block_signals(&old);
	/* The batch: d as it is once the other buffer is active. Cleared
	 * first: a handler that appends to d before the switch sets it
	 * again, for a drain that will find the other buffer empty. */
	agent_tls.deferred = 0;
	atomic_fetch_sub(&agent_pending, AGENT_PENDING_DEFERRED);
	atomic_signal_fence(memory_order_seq_cst);
	agent_tls.defer = d->other;  /* empty: the previous drain emptied it */
	atomic_signal_fence(memory_order_seq_cst);
	uint32_t end = atomic_load_explicit(&d->n, memory_order_relaxed);
	for (uint32_t i = 0; i < end; i += (uint32_t)record_words(&d->w[i]))
		drain_record(&d->w[i]);
	atomic_store_explicit(&d->n, 0, memory_order_relaxed);
	if (blocked && hold) {
		agent_memcpy(&agent_tls.unmasked, &old, sizeof agent_tls.unmasked);
		agent_tls.masked = true;
	} else if (blocked) {
		raw_sigmask(SIG_SETMASK, &old, NULL);
	}
	/* the slow work the batch's notes found due; still draining: its
	 * dumps' unlocks drain nothing */
	if (agent_tls.due)
		agent_sample_run_due();
	/* in this order: a handler that finds busy back at 0 (the program's
	 * code) may drain, and its free must find the batch entered */
	agent_tls.draining = false;
	atomic_signal_fence(memory_order_seq_cst);
	agent_tls.busy = saved;
}

AGENT_NOINLINE void agent_defer_drain(void)
{
	drain(false);
}

/* An entry point's drain, before it enters or forgets a block of the
 * program's: its own work then runs with the signals still blocked, for
 * in a storm that work is what the handlers' signals keep from finishing
 * (above). */
static AGENT_NOINLINE void drain_in_entry(void)
{
	drain(true);
}

void agent_hook_unmask(void)
{
	agent_tls.masked = false;
	raw_sigmask(SIG_SETMASK, (const sigset_t *)&agent_tls.unmasked, NULL);
}

/* A nested allocation p: a signal handler's when an entry point was
 * interrupted, to be recorded; else the agent's own. */
static AGENT_NOINLINE void *nested_alloc(void *p, size_t n, int fn)
{
	if (p && agent_tls.busy == AGENT_BUSY_HOOK)
		defer_alloc(p, n, fn);
	else
		untracked_alloc(p);
	return p;
}

/* Whether a nested free (or realloc) inside the agent (busy: HOOK or
 * AGENT) must be written down rather than done on the tables now: inside
 * an entry point or under the table locks, and while records wait or are
 * being drained, so that it comes after them (the handler's earlier
 * allocation of that block may be one of them). */
static inline bool nested_defers(int busy)
{
	return busy == AGENT_BUSY_HOOK || agent_tls.tables_locked || agent_tls.deferred ||
	       agent_tls.draining;
}

/* A handler's free while the thread is inside the agent (busy is AGENT_BUSY_HOOK
 * or AGENT_BUSY_AGENT). */
static AGENT_NOINLINE void nested_free(void *p, int busy)
{
	if (nested_defers(busy)) {
		defer_free(p);
		give_back(p, AGENT_DEALLOC_UNCHECKED, false);
		return;
	}
	/* the agent's own work, no table lock held: libc freeing something
	 * inside our call, or a handler; either may release a tracked block */
	size_t size;
	uint32_t id;
	agent_tls.busy = AGENT_BUSY_HOOK;
	note_free(p, &size, &id, AGENT_DEALLOC_UNCHECKED, AGENT_DEALLOC_NO_SIZE, 0);
	give_back(p, AGENT_DEALLOC_UNCHECKED, false);
	agent_tls.busy = busy;
}

/* A handler's realloc while the thread is inside the agent: what realloc
 * does, from parts that need no table (forgetting the old block waits). */
static AGENT_NOINLINE void *nested_realloc(void *p, size_t n, int fn, int busy)
{
	if (!n) {  /* glibc frees the block and returns NULL */
		nested_free(p, busy);
		return NULL;
	}
	void *q = agent_real.malloc(n);
	if (!q)
		return NULL;
	size_t old = usable_size(p);
	agent_memcpy(q, p, old < n ? old : n);
	if (busy == AGENT_BUSY_HOOK)
		defer_alloc(q, n, fn);
	else
		untracked_alloc(q);
	nested_free(p, busy);
	return q;
}

/* ---------- work left by signal handlers ---------- */

atomic_int agent_pending;

/* The leak check (exitreport.c), set by the constructor before the check
 * signal's handler can ask for one. */
static agent_leak_check_fn *pending_check;

void agent_pending_on_check(agent_leak_check_fn *fn)
{
	pending_check = fn;
}

AGENT_NOINLINE void agent_run_pending(void)
{
	if (agent_tls.deferred)
		agent_defer_drain();
	if (agent_tls.in_loader)
		return;  /* inside dlclose: the work waits for another exit */
	int pending = atomic_fetch_and(&agent_pending, ~AGENT_PENDING_WORK) & AGENT_PENDING_WORK;
	if (pending & (AGENT_PENDING_CHECK | AGENT_PENDING_CHECK_INCREASED)) {
		int flags = pending & AGENT_PENDING_CHECK_INCREASED ? HEAPTRAIL_LEAKS_INCREASED
								    : HEAPTRAIL_LEAKS_ALL;
		__builtin_unwind_init();
		if (pending_check && pending_check(flags, agent_stack_pointer(), NULL, 0, NULL, 0) == -EBUSY)
			atomic_fetch_or(&agent_pending,  /* later, then */
					pending & (AGENT_PENDING_CHECK | AGENT_PENDING_CHECK_INCREASED));
	}
	if (pending & AGENT_PENDING_DUMP_EVERY)
		agent_dump(NULL, "every");
	if (pending & AGENT_PENDING_DUMP_SIGNAL)
		agent_dump(NULL, "signal");
	if (pending & AGENT_PENDING_DUMP_LIVE)
		agent_dump(NULL, FMT_HEAP_LIVE);
}

/* ---------- the entry points ---------- */

/* An entry point is done with the tables (hooks.h). */
#define leave agent_hook_leave

/* The common shape: pass through when nested or not ready; an allocation
 * the sampler passes over costs a countdown; a sampled one is recorded
 * with busy set. */
/* Sampling: most allocations only count down. The countdown is zero
 * until the agent is ready and in exact mode, so this never passes before
 * agent_real.* is known. */
#define FAST_PATH(size, call)                                              \
	do {                                                               \
		if (AGENT_LIKELY((uint64_t)(size) < (uint64_t)agent_tls.sample_left)) { \
			agent_tls.sample_left -= (int64_t)(size);          \
			return (call);                                     \
		}                                                          \
	} while (0)

/* The rest: pass through when nested or not ready; else ask the sampler,
 * and record a sampled block with busy set. */
#define TRACKED_SLOW(fn_id, size, align, call, fallback)                   \
	do {                                                               \
		void *p_;                                                  \
		if (AGENT_UNLIKELY(agent_tls.busy) || AGENT_UNLIKELY(!agent_ready())) {      \
			if (!agent_real.malloc)                                  \
				return (fallback);                         \
			return nested_alloc((call), (size), (fn_id));      \
		}                                                          \
		if (AGENT_LIKELY(!agent_sample_due(size)))                       \
			return (call);                                     \
		agent_tls.busy = AGENT_BUSY_HOOK;                                \
		if (AGENT_UNLIKELY(agent_guard_due(size)) &&               \
		    (p_ = guarded_alloc((size), (align), (fn_id))) != NULL) { \
			leave();                                           \
			return p_;                                         \
		}                                                          \
		p_ = (call);                                               \
		if (AGENT_LIKELY(p_ != NULL))                                    \
			note_alloc(p_, (size), (fn_id));                   \
		leave();                                                   \
		return p_;                                                 \
	} while (0)

#define TRACKED(fn_id, size, align, call, fallback)                        \
	do {                                                               \
		FAST_PATH(size, call);                                     \
		TRACKED_SLOW(fn_id, size, align, call, fallback);          \
	} while (0)

/* malloc's slow part out of line, so its fast path needs no frame. */
static AGENT_NOINLINE void *malloc_slow(size_t n)
{
	TRACKED_SLOW(FMT_FN_MALLOC, n, 0, agent_real.malloc(n), agent_boot_alloc(n, 16));
}

AGENT_API void *malloc(size_t n)
{
	FAST_PATH(n, agent_real.malloc(n));
	return malloc_slow(n);
}

AGENT_API void *calloc(size_t k, size_t n)
{
	size_t total;
	if (__builtin_mul_overflow(k, n, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	TRACKED(FMT_FN_CALLOC, total, 0, agent_real.calloc(k, n), agent_boot_alloc(total, 16));
}

AGENT_API void *memalign(size_t align, size_t n)
{
	TRACKED(FMT_FN_MEMALIGN, n, align, real_memalign(align, n), agent_boot_alloc(n, align));
}

AGENT_API void *aligned_alloc(size_t align, size_t n)
{
	TRACKED(FMT_FN_ALIGNED_ALLOC, n, align, real_aligned_alloc(align, n),
		agent_boot_alloc(n, align));
}

AGENT_API void *valloc(size_t n)
{
	TRACKED(FMT_FN_VALLOC, n, 4096, real_valloc(n), agent_boot_alloc(n, 4096));
}

AGENT_API void *pvalloc(size_t n)
{
	/* pvalloc hands out whole pages, and that is what it counts as. */
	size_t page = 4096, rounded = n ? (n + page - 1) & ~(page - 1) : page;
	TRACKED(FMT_FN_PVALLOC, rounded, page, real_pvalloc(n), agent_boot_alloc(rounded, page));
}

AGENT_API int posix_memalign(void **out, size_t align, size_t n)
{
	if (AGENT_UNLIKELY(agent_tls.busy) || AGENT_UNLIKELY(!agent_ready())) {
		if (agent_real.posix_memalign) {
			int r = real_posix_memalign(out, align, n);
			if (r == 0 && agent_tls.busy == AGENT_BUSY_HOOK && *out)
				defer_alloc(*out, n, FMT_FN_POSIX_MEMALIGN);
			else if (r == 0)
				untracked_alloc(*out);
			return r;
		}
		*out = agent_boot_alloc(n, align);
		return *out ? 0 : ENOMEM;
	}
	if (AGENT_LIKELY(!agent_sampled(n)))
		return real_posix_memalign(out, align, n);
	agent_tls.busy = AGENT_BUSY_HOOK;
	if (AGENT_UNLIKELY(agent_guard_due(n)) && align >= sizeof(void *) &&
	    (*out = guarded_alloc(n, align, FMT_FN_POSIX_MEMALIGN)) != NULL) {
		leave();
		return 0;
	}
	int r = real_posix_memalign(out, align, n);
	if (r == 0 && *out)
		note_alloc(*out, n, FMT_FN_POSIX_MEMALIGN);
	leave();
	return r;
}

/* free's (and delete's: how and dsize, note_free's) slow part out of
 * line, so its fast path needs no frame. */
static AGENT_NOINLINE void free_slow(void *p, int how, size_t dsize, uintptr_t ra)
{
	int d = how & 0xff;
	if (AGENT_UNLIKELY(!p) || AGENT_UNLIKELY(agent_is_boot(p)))
		return;
	/* Two cache misses for a block freed long after it was allocated:
	 * its entry in the table and the allocator's header before it. The
	 * header asked for now, before the table is read, they overlap
	 * instead of following each other. */
	__builtin_prefetch((const char *)p - 16);
	size_t size = 0;
	uint32_t id = 0;
	int busy = agent_tls.busy;
	if (AGENT_UNLIKELY(busy)) {
		/* Only a fork in progress forbids touching the tables for
		 * good; see nested_free for the rest. */
		if (busy == AGENT_BUSY_LOCKED)
			give_back(p, AGENT_DEALLOC_UNCHECKED, false);
		else
			nested_free(p, busy);
		return;
	}
	agent_tls.busy = AGENT_BUSY_HOOK;
	/* p may be a handler's block whose record waits: it is entered first */
	if (AGENT_UNLIKELY(agent_tls.deferred))
		drain_in_entry();
	uint64_t t0 = agent_auto_clock();
	int had = note_free_in(p, &size, &id, how, dsize, ra);
	agent_auto_charge(t0);
	if (had > 0 && AGENT_UNLIKELY(size > AGENT_QUARANTINE_MIN) && agent_sampling.period > 1 &&
	    keep_freed(p, size, id, d, ra))
		;  /* kept: given back when it leaves the quarantine */
	else if (AGENT_LIKELY(had >= 0))
		give_back(p, d, true);
	leave();
}

/* free_slow when sampling, for an address the filter says may be
 * tracked. A page that holds kept blocks only (quarantine.h): the table
 * has no block there, and p is another block of that page unless the
 * quarantine may hold it (a double free, free_slow). */
static AGENT_NOINLINE void free_filtered(void *p, int how, size_t dsize, uintptr_t ra)
{
	if (AGENT_UNLIKELY(agent_filter_kept_only((uintptr_t)p)) && !agent_is_boot(p) &&
	    !agent_quarantine_may_hold(p))
		agent_real.free(p);
	else
		free_slow(p, how, dsize, ra);
}

/* Sampling: most blocks were never tracked, and the filter says so
 * without a lock. It has no filter in exact mode, and its slots for the
 * bootstrap buffer's pages are pinned at "maybe". */
#define dealloc_sized(p, how, dsize)                                                       \
	do {                                                                               \
		if (AGENT_LIKELY(agent_filter != NULL)) {                                  \
			if (AGENT_LIKELY(!agent_filter_maybe((uintptr_t)(p))))             \
				agent_real.free(p);                                        \
			else                                                               \
				free_filtered((p), (how), (dsize),                         \
					      (uintptr_t)__builtin_return_address(0));     \
		} else {                                                                   \
			free_slow((p), (how), (dsize),                                     \
				  (uintptr_t)__builtin_return_address(0));                 \
		}                                                                          \
	} while (0)
#define dealloc(p, how) dealloc_sized(p, how, AGENT_DEALLOC_NO_SIZE)

AGENT_API void free(void *p)
{
	dealloc(p, AGENT_DEALLOC_FREE);
}

static void *realloc_as(void *p, size_t n, int fn, uintptr_t ra)
{
	if (!p)
		TRACKED(fn, n, 0, agent_real.malloc(n), agent_boot_alloc(n, 16));
	if (AGENT_UNLIKELY(agent_is_boot(p))) {
		void *q = malloc(n);
		if (q) {
			size_t old = agent_boot_size(p);
			agent_memcpy(q, p, old < n ? old : n);
		}
		return q;
	}
	size_t osize = 0;
	uint32_t oid = 0;
	int busy = agent_tls.busy;
	if (AGENT_UNLIKELY(busy)) {
		if (busy == AGENT_BUSY_LOCKED)
			return agent_guard_owns(p) ? realloc_guarded(p, n, false) : real_realloc(p, n);
		if (nested_defers(busy))
			return nested_realloc(p, n, fn, busy);
		agent_tls.busy = AGENT_BUSY_HOOK;
		void *q;
		if (note_free(p, &osize, &oid, AGENT_DEALLOC_REALLOC, AGENT_DEALLOC_NO_SIZE, ra) > 0) {
			q = agent_guard_owns(p) ? realloc_guarded(p, n, false) : real_realloc(p, n);
			if (!q && n)
				put_back(p, osize, oid);
		} else {
			q = agent_guard_owns(p) ? realloc_guarded(p, n, false) : real_realloc(p, n);
		}
		untracked_alloc(q);
		agent_tls.busy = busy;
		return q;
	}
	bool sampled = agent_sampled(n);
	if (!sampled && !agent_live_may_contain((uintptr_t)p))
		return real_realloc(p, n);
	agent_tls.busy = AGENT_BUSY_HOOK;
	if (AGENT_UNLIKELY(agent_tls.deferred))
		drain_in_entry();  /* as free's */
	int had = note_free(p, &osize, &oid, AGENT_DEALLOC_REALLOC, AGENT_DEALLOC_NO_SIZE, ra);
	if (AGENT_UNLIKELY(had < 0)) {
		/* not the allocator's: as valgrind, no block, nothing freed */
		leave();
		return NULL;
	}
	/* a guarded block's bytes go to one of the allocator's (realloc's
	 * blocks are never placed on guarded pages) */
	void *q = AGENT_UNLIKELY(agent_guard_owns(p)) ? realloc_guarded(p, n, true)
						       : real_realloc(p, n);
	if (q && sampled)
		note_alloc(q, n, fn);
	else if (!q && n && had)
		put_back(p, osize, oid);   /* failed: the old block is intact */
	leave();
	return q;
}

AGENT_API void *realloc(void *p, size_t n)
{
	/* Sampling: an untracked block, and a new size the sampler passes
	 * over, is a plain realloc (NULL's filter slot is always zero). */
	if (AGENT_LIKELY(agent_filter != NULL) && AGENT_LIKELY((uint64_t)n < (uint64_t)agent_tls.sample_left) &&
	    AGENT_LIKELY(!agent_live_may_contain((uintptr_t)p))) {
		agent_tls.sample_left -= (int64_t)n;
		return real_realloc(p, n);
	}
	return realloc_as(p, n, FMT_FN_REALLOC, (uintptr_t)__builtin_return_address(0));
}

AGENT_API void *reallocarray(void *p, size_t k, size_t n)
{
	size_t total;
	if (__builtin_mul_overflow(k, n, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_as(p, total, FMT_FN_REALLOCARRAY, (uintptr_t)__builtin_return_address(0));
}

/* ---------- after a detach that left guarded blocks live ----------
 * attach.c points the allocator's free and realloc (their entry
 * points' jumps, kept) here: a guarded block goes back to guard.c, and
 * every other block straight to the allocator, nothing recorded. */
void agent_free_detached(void *p)
{
	give_back(p, AGENT_DEALLOC_FREE, false);
}

void *agent_realloc_detached(void *p, size_t n)
{
	if (AGENT_UNLIKELY(agent_guard_owns(p)))
		return realloc_guarded(p, n, false);
	return real_realloc(p, n);
}

AGENT_API size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (agent_is_boot(p))
		return agent_boot_size(p);
	if (!agent_real.malloc_usable_size)
		agent_ready();
	return usable_size(p);
}

/* ---------- C++ operators ----------
 * The blocks come from the real malloc (posix_memalign past 16 bytes of
 * alignment); a failure runs libstdc++'s rules, so the new_handler,
 * std::bad_alloc and the nothrow forms behave as without us. */

static void *new_tracked(size_t n, size_t align, int fn)
{
	void *p = NULL;
	if (AGENT_UNLIKELY(agent_tls.busy) || AGENT_UNLIKELY(!agent_ready())) {
		if (!agent_real.malloc)
			return agent_boot_alloc(n, align);
		if (align <= 16)
			p = agent_real.malloc(n);
		else if (real_posix_memalign(&p, align, n) != 0)
			p = NULL;
		if (p && agent_tls.busy == AGENT_BUSY_HOOK)
			defer_alloc(p, n, fn);
		else
			untracked_alloc(p);
		return p;
	}
	bool sampled = agent_sampled(n);
	if (sampled) {
		agent_tls.busy = AGENT_BUSY_HOOK;
		if (AGENT_UNLIKELY(agent_guard_due(n)) && (p = guarded_alloc(n, align, fn)) != NULL) {
			leave();
			return p;
		}
	}
	if (align <= 16)
		p = agent_real.malloc(n);
	else if (real_posix_memalign(&p, align, n) != 0)
		p = NULL;
	if (sampled) {
		if (AGENT_LIKELY(p != NULL))
			note_alloc(p, n, fn);
		leave();
	}
	return p;
}

/* A libstdc++ symbol, looked up once (NULL without libstdc++). The
 * lookup may allocate: that is the agent's own. */
static void *cxx_symbol(void *_Atomic *slot, const char *name, void *handle)
{
	void *f = atomic_load_explicit(slot, memory_order_acquire);
	if (f)
		return f == (void *)slot ? NULL : f;
	int busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	f = dlsym(handle, name);
	agent_tls.busy = busy;
	atomic_store_explicit(slot, f ? f : (void *)slot, memory_order_release);
	return f;
}

#define CXX_SYMBOL(name, handle)                                   \
	({                                                         \
		static void *_Atomic slot_;                        \
		cxx_symbol(&slot_, (name), (handle));              \
	})

static AGENT_NOINLINE __attribute__((noreturn)) void throw_bad_alloc(void)
{
	void (*thrower)(void) = CXX_SYMBOL("_ZSt17__throw_bad_allocv", RTLD_DEFAULT);
	if (thrower)
		thrower();
	__builtin_trap();  /* no libstdc++, yet a C++ operator new: cannot be */
}

/* What libstdc++'s throwing operator new does when the allocator says no:
 * calls the installed new_handler and tries again, and throws
 * std::bad_alloc when there is none. The handler may throw, or free
 * memory, or install another handler. */
static AGENT_NOINLINE void *new_retry(size_t n, size_t align, int fn)
{
	for (;;) {
		void (*(*get)(void))(void) = CXX_SYMBOL("_ZSt15get_new_handlerv", RTLD_DEFAULT);
		void (*handler)(void) = get ? get() : NULL;
		if (!handler)
			throw_bad_alloc();
		handler();
		void *p = new_tracked(n, align, fn);
		if (p)
			return p;
	}
}

static inline bool bad_alignment(size_t al)
{
	return !al || (al & (al - 1));
}

/* The nothrow forms are libstdc++'s throwing ones inside a try block: on
 * failure, its own nothrow operator runs, which calls ours (interposed)
 * for the new_handler loop and catches what it throws. */
#define NOTHROW_RETRY(sym, n, nt)                                                \
	({                                                                       \
		void *(*nt_)(size_t, const void *) = CXX_SYMBOL(sym, RTLD_NEXT); \
		nt_ ? nt_(n, nt) : NULL;                                         \
	})
#define NOTHROW_RETRY_ALIGNED(sym, n, al, nt)                                    \
	({                                                                       \
		void *(*nt_)(size_t, size_t, const void *) =                     \
			CXX_SYMBOL(sym, RTLD_NEXT);                              \
		nt_ ? nt_(n, al, nt) : NULL;                                     \
	})

#define NEW_THROWING(name, fn, align)                            \
	AGENT_API void *name(size_t n);                          \
	AGENT_API void *name(size_t n)                           \
	{                                                        \
		void *p = new_tracked(n, (align), (fn));         \
		return AGENT_LIKELY(p != NULL) ? p : new_retry(n, (align), (fn)); \
	}
#define NEW_NOTHROW(name, fn, align)                             \
	AGENT_API void *name(size_t n, const void *nt);          \
	AGENT_API void *name(size_t n, const void *nt)           \
	{                                                        \
		void *p = new_tracked(n, (align), (fn));         \
		return AGENT_LIKELY(p != NULL) ? p : NOTHROW_RETRY(#name, n, nt); \
	}
/* An aligned new's blocks are recorded with its alignment in their
 * stack's fn (AGENT_FN_ALIGNED), for their delete's check. */
#define NEW_ALIGNED(name, fn)                                    \
	AGENT_API void *name(size_t n, size_t al);               \
	AGENT_API void *name(size_t n, size_t al)                \
	{                                                        \
		if (AGENT_UNLIKELY(bad_alignment(al)))                 \
			throw_bad_alloc();                       \
		void *p = new_tracked(n, al, AGENT_FN_ALIGNED(fn, al)); \
		return AGENT_LIKELY(p != NULL) ? p : new_retry(n, al, AGENT_FN_ALIGNED(fn, al)); \
	}
#define NEW_ALIGNED_NOTHROW(name, fn)                                    \
	AGENT_API void *name(size_t n, size_t al, const void *nt);      \
	AGENT_API void *name(size_t n, size_t al, const void *nt)       \
	{                                                                \
		void *p = bad_alignment(al) ? NULL : new_tracked(n, al, AGENT_FN_ALIGNED(fn, al)); \
		return AGENT_LIKELY(p != NULL) ? p : NOTHROW_RETRY_ALIGNED(#name, n, al, nt); \
	}

NEW_THROWING(_Znwm, FMT_FN_NEW, 0)
NEW_THROWING(_Znam, FMT_FN_NEW_ARRAY, 0)
NEW_NOTHROW(_ZnwmRKSt9nothrow_t, FMT_FN_NEW, 0)
NEW_NOTHROW(_ZnamRKSt9nothrow_t, FMT_FN_NEW_ARRAY, 0)
NEW_ALIGNED(_ZnwmSt11align_val_t, FMT_FN_NEW)
NEW_ALIGNED(_ZnamSt11align_val_t, FMT_FN_NEW_ARRAY)
NEW_ALIGNED_NOTHROW(_ZnwmSt11align_val_tRKSt9nothrow_t, FMT_FN_NEW)
NEW_ALIGNED_NOTHROW(_ZnamSt11align_val_tRKSt9nothrow_t, FMT_FN_NEW_ARRAY)

/* delete (D: AGENT_DEALLOC_DELETE) and delete[] (..._ARRAY): free's
 * path, with how the block is given back checked against its new: the
 * family, and the size and alignment the sized and aligned forms give
 * (SIZE, ALIGN: expressions of the arguments a and b). An alignment that
 * is no power of two (undefined behaviour; libstdc++ frees the block
 * all the same) is not checked. */
#define DELETE1(name, D) AGENT_API void name(void *p); \
	AGENT_API void name(void *p) { dealloc(p, D); }
#define DELETE2(name, D, T) AGENT_API void name(void *p, T); \
	AGENT_API void name(void *p, T a) { dealloc(p, D); }
#define DELETE_SIZED(name, D) AGENT_API void name(void *p, size_t); \
	AGENT_API void name(void *p, size_t a) { dealloc_sized(p, D, a); }
#define DELETE_ALIGNED(name, D, T, SIZE, ALIGN) AGENT_API void name(void *p, size_t, T); \
	AGENT_API void name(void *p, size_t a, T b)                                     \
	{                                                                               \
		int how_ = bad_alignment(ALIGN) ? AGENT_DEALLOC_UNCHECKED                 \
						: AGENT_DEALLOC_ALIGNED(D, ALIGN);        \
		dealloc_sized(p, how_, (SIZE));                                         \
	}
#define DEL AGENT_DEALLOC_DELETE
#define DELA AGENT_DEALLOC_DELETE_ARRAY
#define NO_SIZE AGENT_DEALLOC_NO_SIZE

DELETE1(_ZdlPv, DEL)
DELETE1(_ZdaPv, DELA)
DELETE_SIZED(_ZdlPvm, DEL)
DELETE_SIZED(_ZdaPvm, DELA)
DELETE2(_ZdlPvRKSt9nothrow_t, DEL, const void *)
DELETE2(_ZdaPvRKSt9nothrow_t, DELA, const void *)
/* operator delete(void *, align_val_t): a is the alignment, b nothing */
#define DELETE_ALIGNED1(name, D) AGENT_API void name(void *p, size_t); \
	AGENT_API void name(void *p, size_t a)                           \
	{                                                                \
		int how_ = bad_alignment(a) ? AGENT_DEALLOC_UNCHECKED      \
					    : AGENT_DEALLOC_ALIGNED(D, a); \
		dealloc(p, how_);                                        \
	}
DELETE_ALIGNED1(_ZdlPvSt11align_val_t, DEL)
DELETE_ALIGNED1(_ZdaPvSt11align_val_t, DELA)
DELETE_ALIGNED(_ZdlPvmSt11align_val_t, DEL, size_t, a, b)
DELETE_ALIGNED(_ZdaPvmSt11align_val_t, DELA, size_t, a, b)
DELETE_ALIGNED(_ZdlPvSt11align_val_tRKSt9nothrow_t, DEL, const void *, NO_SIZE, a)
DELETE_ALIGNED(_ZdaPvSt11align_val_tRKSt9nothrow_t, DELA, const void *, NO_SIZE, a)
