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
 * agent's own work (dumps, reports: BUSY_AGENT) an allocation made while
 * it is set (by dlsym or libc inside our own calls) goes straight to the
 * real allocator untracked. Inside an entry point (BUSY_HOOK) the agent
 * calls nothing that allocates, so a nested call there is a signal
 * handler's: it is written down and carried out when the entry point
 * leaves (see "deferred calls"). Before the real
 * allocator is known (dlsym's own calloc, the first allocations of the
 * process), blocks come from a static bootstrap buffer that is never
 * given back.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/unwind.h"
#include "format/leakfile.h"
#include "agent/banned.h"

__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));

/* busy values: 1 = the agent's own work, whose nested allocations are
 * its own; 2 = every lock held (fork): pass through without touching any
 * table; 3 = an entry point recording a call, maybe holding a table lock:
 * a nested call comes from a signal handler and waits. */
#define BUSY_AGENT 1
#define BUSY_LOCKED 2
#define BUSY_HOOK 3

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
	int (*dlclose)(void *);
	void (*exit)(int);
} real;

/* ---------- bootstrap buffer ---------- */

#define BOOT_SIZE (256 * 1024)
static char boot_buf[BOOT_SIZE] __attribute__((aligned(64)));
static atomic_size_t boot_used;

static inline bool is_boot(const void *p)
{
	return (const char *)p >= boot_buf && (const char *)p < boot_buf + BOOT_SIZE;
}

/* 16 bytes before each bootstrap block hold its size. */
static void *boot_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t need = n + align + 16;
	size_t off = atomic_fetch_add(&boot_used, need);
	if (off + need > BOOT_SIZE || n > BOOT_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	uintptr_t p = (uintptr_t)boot_buf + off + 16;
	p = (p + align - 1) & ~(uintptr_t)(align - 1);
	((size_t *)p)[-1] = n;
	return (void *)p;
}

static size_t boot_size(const void *p)
{
	return ((const size_t *)p)[-1];
}

/* ---------- resolving the real allocator ---------- */

static void resolve_real(void)
{
	agent_tls.busy = BUSY_AGENT;
	/* Each lookup may itself call calloc/malloc/free: those see busy and
	 * NULL real pointers, and use the bootstrap buffer. */
	real.free = dlsym(RTLD_NEXT, "free");
	real.calloc = dlsym(RTLD_NEXT, "calloc");
	real.realloc = dlsym(RTLD_NEXT, "realloc");
	real.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	real.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	real.memalign = dlsym(RTLD_NEXT, "memalign");
	real.valloc = dlsym(RTLD_NEXT, "valloc");
	real.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	real.malloc_usable_size = dlsym(RTLD_NEXT, "malloc_usable_size");
	real.dlclose = dlsym(RTLD_NEXT, "dlclose");
	real.exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
	void *m = dlsym(RTLD_NEXT, "malloc");
	atomic_thread_fence(memory_order_release);
	real.malloc = m;      /* published last: it means "resolved" */
	agent_tls.busy = 0;
}

/* Makes sure the real allocator is known; false while another thread is
 * still resolving it (the caller then uses the bootstrap buffer). */
static inline bool ready(void)
{
	if (likely(atomic_load_explicit(&agent_state, memory_order_acquire) == 2))
		return true;
	int expect = 0;
	if (atomic_compare_exchange_strong(&agent_state, &expect, 1)) {
		resolve_real();
		agent_init_early();
		atomic_store_explicit(&agent_state, 2, memory_order_release);
		return true;
	}
	return atomic_load(&agent_state) == 2;
}

void agent_filter_pin_boot(_Atomic uint16_t *filter)
{
	for (uintptr_t a = (uintptr_t)boot_buf & ~(uintptr_t)4095; a < (uintptr_t)boot_buf + BOOT_SIZE;
	     a += 4096)
		atomic_store(&filter[agent_filter_slot(a)], 0xffff);
}

void agent_ensure_ready(void)
{
	if (!agent_tls.busy)
		ready();
}

/* ---------- recording ---------- */

static atomic_bool recording = true;

int agent_set_recording(bool on)
{
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
		if (unlikely(!slot->memo))
			slot->memo = agent_mmap(sizeof *slot->memo);
		ms = slot->memo;
	}
	/* A walk the thread has made before, found without a call: its
	 * stack id, or its pcs to intern for this allocator. */
	if (likely(ms)) {
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

/* Enters block p, of stack id, in the live table and the counts. */
static inline __attribute__((always_inline)) void note_alloc_id(struct agent_counts *c, void *p,
								size_t n, uint32_t id)
{
	if (unlikely(!id) || unlikely(!agent_live_insert((uintptr_t)p, n, id))) {
		agent_count(&c->dropped, 1);
		agent_count2(&c->allocs, 1, &c->bytes_allocated, n);
		return;
	}
	struct agent_stack *s = agent_stack_get(id);
	agent_add_shared(&s->total_bytes, n);
	agent_add_shared(&s->total_blocks, 1);
	agent_count2(&c->tracked, 1, &c->tracked_bytes, n);
	agent_sample_note_maybe(c, n, +1);
}

/* Records a sampled (in exact mode: every) block: its stack, its entry in
 * the live table, and what it adds to the estimates. */
static NOINLINE void note_alloc(void *p, size_t n, int fn)
{
	struct agent_counts *c = agent_my_counts();
	if (!atomic_load_explicit(&recording, memory_order_relaxed)) {
		agent_count2(&c->allocs, 1, &c->bytes_allocated, n);  /* seen, not tracked */
		return;
	}
	note_alloc_id(c, p, n, capture_stack(fn));
}

/* Forgets p if it was tracked; returns whether it was, with its size and
 * stack so realloc can put it back when the real realloc fails. */
static NOINLINE bool note_free(void *p, size_t *size, uint32_t *stack)
{
	if (!agent_live_remove((uintptr_t)p, size, stack))
		return false;
	struct agent_counts *c = agent_my_counts();
	agent_count2(&c->tracked_frees, 1, &c->freed_bytes, *size);
	agent_sample_note_maybe(c, *size, -1);
	return true;
}

static void put_back(void *p, size_t size, uint32_t id)
{
	if (!agent_live_insert((uintptr_t)p, size, id))
		return;
	struct agent_counts *c = agent_my_counts();
	/* undo note_free's counts */
	agent_count(&c->tracked_frees, (uint64_t)-1);
	agent_count(&c->freed_bytes, (uint64_t)-size);
	agent_sample_note_maybe(c, size, +1);
}

/* ---------- deferred calls ----------
 * A signal handler that allocates or frees (glibc allows it in practice)
 * may interrupt this thread inside an entry point, holding a table lock
 * or halfway through a counter update. Touching the tables then would
 * deadlock (the spinlock is held by the code the handler interrupted) or,
 * single-threaded, corrupt them; so the handler's call is written down in
 * a per-thread buffer and carried out when the entry point leaves. A free
 * is kept back until then (the block stays allocated a few instructions
 * longer, so its address cannot be handed out while the table still
 * holds it). An allocation is made at once and its stack taken at once
 * (the unwinder takes no lock), and it is entered in the tables later.
 * The same holds for a free while the thread holds every table lock for
 * a dump or a scan; allocations there cannot be told from the agent's
 * own and stay untracked.
 *
 * A record: word 0 = kind | fn << 8 | npcs << 16, word 1 the address;
 * an allocation adds its size and its pcs. Only this thread and its
 * signal handlers touch the buffer: a handler appends a whole record
 * before the interrupted code reads on, and a handler interrupting a
 * handler that is appending (agent_tls.pushing) gives up on recording. */

#define DEFER_WORDS (1u << 17)   /* 1 MiB, mapped when first needed */
#define DEFER_FREE 1
#define DEFER_ALLOC 2

struct agent_defer {
	_Atomic uint32_t n;      /* words in use */
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
	if (!d)
		d = agent_tls.defer = agent_mmap(sizeof *d);
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

/* A handler's free of p, kept back; false when it cannot be (then the
 * caller frees p now, and the table may keep a stale entry for it). */
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
static NOINLINE void defer_alloc(void *p, size_t n, int fn)
{
	uint32_t at;
	int depth = agent_config.depth;
	struct agent_defer *d = defer_begin(3 + (uint32_t)depth, &at);
	if (!d) {
		depth = 0;  /* full: kept, without its stack */
		if (!(d = defer_begin(3, &at)))
			return;  /* untracked */
	}
	int got = depth ? agent_unwind_cfi(&d->w[at + 3], depth) : 0, npcs = 0;
	/* below the signal frame are the entry point's frames it
	 * interrupted: the agent's own, which no stack shows */
	for (int i = 0; i < got; i++) {
		uintptr_t pc = d->w[at + 3 + i];
		if (pc - agent_self_lo >= agent_self_hi - agent_self_lo)
			d->w[at + 3 + npcs++] = pc;
	}
	d->w[at] = DEFER_ALLOC | (uintptr_t)fn << 8 | (uintptr_t)npcs << 16;
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
		note_free(p, &size, &id);
		real.free(p);
		return;
	}
	size_t n = w[2];
	int fn = (int)(w[0] >> 8 & 0xff), npcs = (int)(w[0] >> 16);
	struct agent_counts *c = agent_my_counts();
	if (!agent_sampled(n))
		return;
	if (!atomic_load_explicit(&recording, memory_order_relaxed) || !npcs) {
		if (!npcs)
			agent_count(&c->dropped, 1);  /* its stack had no room */
		agent_count2(&c->allocs, 1, &c->bytes_allocated, n);
		return;
	}
	note_alloc_id(c, p, n, agent_stack_intern(fn, &w[3], npcs));
}

static size_t record_words(const uintptr_t *w)
{
	return (w[0] & 0xff) == DEFER_FREE ? 2 : 3 + (w[0] >> 16);
}

NOINLINE void agent_defer_drain(void)
{
	struct agent_defer *d = agent_tls.defer;
	int saved = agent_tls.busy;
	if (saved == BUSY_LOCKED || agent_tls.tables_locked)
		return;
	if (!d)
		return;  /* nothing was ever deferred */
	agent_tls.busy = BUSY_HOOK;  /* handlers running now append */
	do {
		uint32_t i = 0;
		for (;;) {
			uint32_t n = atomic_load_explicit(&d->n, memory_order_relaxed);
			if (i >= n) {
				if (agent_tls.deferred) {
					agent_tls.deferred = 0;
					atomic_fetch_sub(&agent_pending, AGENT_PENDING_DEFERRED);
				}
				if (atomic_compare_exchange_strong(&d->n, &n, 0))
					break;
				continue;
			}
			drain_record(&d->w[i]);
			i += (uint32_t)record_words(&d->w[i]);
		}
	} while (agent_tls.deferred);
	agent_tls.busy = saved;
}

/* A nested allocation p: a signal handler's when an entry point was
 * interrupted, to be recorded; else the agent's own. */
static NOINLINE void *nested_alloc(void *p, size_t n, int fn)
{
	if (p && agent_tls.busy == BUSY_HOOK)
		defer_alloc(p, n, fn);
	return p;
}

/* A handler's free while the thread is inside the agent (busy is BUSY_HOOK
 * or BUSY_AGENT). */
static NOINLINE void nested_free(void *p, int busy)
{
	if (busy == BUSY_HOOK || agent_tls.tables_locked) {
		if (!defer_free(p))
			real.free(p);
		return;
	}
	/* the agent's own work, no table lock held: libc freeing something
	 * inside our call, or a handler; either may release a tracked block */
	size_t size;
	uint32_t id;
	agent_tls.busy = BUSY_HOOK;
	note_free(p, &size, &id);
	real.free(p);
	agent_tls.busy = busy;
}

/* A handler's realloc while the thread is inside the agent: what realloc
 * does, from parts that need no table (the old block's free waits). */
static NOINLINE void *nested_realloc(void *p, size_t n, int fn, int busy)
{
	if (!n) {  /* glibc frees the block and returns NULL */
		nested_free(p, busy);
		return NULL;
	}
	void *q = real.malloc(n);
	if (!q)
		return NULL;
	size_t old = real.malloc_usable_size ? real.malloc_usable_size(p) : 0;
	agent_memcpy(q, p, old < n ? old : n);
	if (busy == BUSY_HOOK)
		defer_alloc(q, n, fn);
	nested_free(p, busy);
	return q;
}

/* ---------- the entry points ---------- */

static inline void check_pending(void)
{
	if (unlikely(atomic_load_explicit(&agent_pending, memory_order_relaxed)))
		agent_run_pending();
}

/* An entry point is done with the tables: what signal handlers deferred
 * meanwhile is pending work too. */
static inline void leave(void)
{
	agent_tls.busy = 0;
	check_pending();
}

/* The common shape: pass through when nested or not ready; an allocation
 * the sampler passes over costs a countdown; a sampled one is recorded
 * with busy set. */
/* Sampling: most allocations only count down. The countdown is zero
 * until the agent is ready and in exact mode, so this never passes before
 * real.* is known. */
#define FAST_PATH(size, call)                                              \
	do {                                                               \
		if (likely((uint64_t)(size) < (uint64_t)agent_tls.sample_left)) { \
			agent_tls.sample_left -= (int64_t)(size);          \
			return (call);                                     \
		}                                                          \
	} while (0)

/* The rest: pass through when nested or not ready; else ask the sampler,
 * and record a sampled block with busy set. */
#define TRACKED_SLOW(fn_id, size, call, fallback)                          \
	do {                                                               \
		void *p_;                                                  \
		if (unlikely(agent_tls.busy) || unlikely(!ready())) {      \
			if (!real.malloc)                                  \
				return (fallback);                         \
			return nested_alloc((call), (size), (fn_id));      \
		}                                                          \
		if (likely(!agent_sample_due(size)))                       \
			return (call);                                     \
		agent_tls.busy = BUSY_HOOK;                                \
		p_ = (call);                                               \
		if (likely(p_ != NULL))                                    \
			note_alloc(p_, (size), (fn_id));                   \
		leave();                                                   \
		return p_;                                                 \
	} while (0)

#define TRACKED(fn_id, size, call, fallback)                               \
	do {                                                               \
		FAST_PATH(size, call);                                     \
		TRACKED_SLOW(fn_id, size, call, fallback);                 \
	} while (0)

/* malloc's slow part out of line, so its fast path needs no frame. */
static NOINLINE void *malloc_slow(size_t n)
{
	TRACKED_SLOW(FMT_FN_MALLOC, n, real.malloc(n), boot_alloc(n, 16));
}

AGENT_API void *malloc(size_t n)
{
	FAST_PATH(n, real.malloc(n));
	return malloc_slow(n);
}

AGENT_API void *calloc(size_t k, size_t n)
{
	size_t total;
	if (__builtin_mul_overflow(k, n, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	TRACKED(FMT_FN_CALLOC, total, real.calloc(k, n), boot_alloc(total, 16));
}

AGENT_API void *memalign(size_t align, size_t n)
{
	TRACKED(FMT_FN_MEMALIGN, n, real.memalign(align, n), boot_alloc(n, align));
}

AGENT_API void *aligned_alloc(size_t align, size_t n)
{
	TRACKED(FMT_FN_ALIGNED_ALLOC, n, real.aligned_alloc(align, n), boot_alloc(n, align));
}

AGENT_API void *valloc(size_t n)
{
	TRACKED(FMT_FN_VALLOC, n, real.valloc(n), boot_alloc(n, 4096));
}

AGENT_API void *pvalloc(size_t n)
{
	/* pvalloc hands out whole pages, and that is what it counts as. */
	size_t page = 4096, rounded = n ? (n + page - 1) & ~(page - 1) : page;
	TRACKED(FMT_FN_PVALLOC, rounded, real.pvalloc(n), boot_alloc(rounded, page));
}

AGENT_API int posix_memalign(void **out, size_t align, size_t n)
{
	if (unlikely(agent_tls.busy) || unlikely(!ready())) {
		if (real.posix_memalign) {
			int r = real.posix_memalign(out, align, n);
			if (r == 0 && agent_tls.busy == BUSY_HOOK && *out)
				defer_alloc(*out, n, FMT_FN_POSIX_MEMALIGN);
			return r;
		}
		*out = boot_alloc(n, align);
		return *out ? 0 : ENOMEM;
	}
	if (likely(!agent_sampled(n)))
		return real.posix_memalign(out, align, n);
	agent_tls.busy = BUSY_HOOK;
	int r = real.posix_memalign(out, align, n);
	if (r == 0 && *out)
		note_alloc(*out, n, FMT_FN_POSIX_MEMALIGN);
	leave();
	return r;
}

/* free's slow part out of line, so its fast path needs no frame. */
static NOINLINE void free_slow(void *p)
{
	if (unlikely(!p) || unlikely(is_boot(p)))
		return;
	size_t size;
	uint32_t id;
	int busy = agent_tls.busy;
	if (unlikely(busy)) {
		/* Only a fork in progress forbids touching the tables for
		 * good; see nested_free for the rest. */
		if (busy == BUSY_LOCKED)
			real.free(p);
		else
			nested_free(p, busy);
		return;
	}
	agent_tls.busy = BUSY_HOOK;
	note_free(p, &size, &id);
	real.free(p);
	leave();
}

AGENT_API void free(void *p)
{
	/* Sampling: most blocks were never tracked, and the filter says so
	 * without a lock. It has no filter in exact mode, and its slots for
	 * the bootstrap buffer's pages are pinned at "maybe". */
	if (likely(agent_filter != NULL) && likely(!agent_live_may_contain((uintptr_t)p))) {
		real.free(p);
		return;
	}
	free_slow(p);
}

static void *realloc_as(void *p, size_t n, int fn)
{
	if (!p)
		TRACKED(fn, n, real.malloc(n), boot_alloc(n, 16));
	if (unlikely(is_boot(p))) {
		void *q = malloc(n);
		if (q) {
			size_t old = boot_size(p);
			agent_memcpy(q, p, old < n ? old : n);
		}
		return q;
	}
	size_t osize = 0;
	uint32_t oid = 0;
	int busy = agent_tls.busy;
	if (unlikely(busy)) {
		if (busy == BUSY_LOCKED)
			return real.realloc(p, n);
		if (busy == BUSY_HOOK || agent_tls.tables_locked)
			return nested_realloc(p, n, fn, busy);
		agent_tls.busy = BUSY_HOOK;
		void *q;
		if (note_free(p, &osize, &oid)) {
			q = real.realloc(p, n);
			if (!q && n)
				put_back(p, osize, oid);
		} else {
			q = real.realloc(p, n);
		}
		agent_tls.busy = busy;
		return q;
	}
	bool sampled = agent_sampled(n);
	if (!sampled && !agent_live_may_contain((uintptr_t)p))
		return real.realloc(p, n);
	agent_tls.busy = BUSY_HOOK;
	bool had = note_free(p, &osize, &oid);
	void *q = real.realloc(p, n);
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
	if (likely(agent_filter != NULL) && likely((uint64_t)n < (uint64_t)agent_tls.sample_left) &&
	    likely(!agent_live_may_contain((uintptr_t)p))) {
		agent_tls.sample_left -= (int64_t)n;
		return real.realloc(p, n);
	}
	return realloc_as(p, n, FMT_FN_REALLOC);
}

AGENT_API void *reallocarray(void *p, size_t k, size_t n)
{
	size_t total;
	if (__builtin_mul_overflow(k, n, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_as(p, total, FMT_FN_REALLOCARRAY);
}

AGENT_API size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (is_boot(p))
		return boot_size(p);
	if (!real.malloc_usable_size)
		ready();
	return real.malloc_usable_size ? real.malloc_usable_size(p) : 0;
}

/* ---------- C++ operators ----------
 * The blocks come from the real malloc (posix_memalign past 16 bytes of
 * alignment); a failure runs libstdc++'s rules, so the new_handler,
 * std::bad_alloc and the nothrow forms behave as without us. */

static void *new_tracked(size_t n, size_t align, int fn)
{
	void *p = NULL;
	if (unlikely(agent_tls.busy) || unlikely(!ready())) {
		if (!real.malloc)
			return boot_alloc(n, align);
		if (align <= 16)
			p = real.malloc(n);
		else if (real.posix_memalign(&p, align, n) != 0)
			p = NULL;
		if (p && agent_tls.busy == BUSY_HOOK)
			defer_alloc(p, n, fn);
		return p;
	}
	bool sampled = agent_sampled(n);
	if (sampled)
		agent_tls.busy = BUSY_HOOK;
	if (align <= 16)
		p = real.malloc(n);
	else if (real.posix_memalign(&p, align, n) != 0)
		p = NULL;
	if (sampled) {
		if (likely(p != NULL))
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
	agent_tls.busy = BUSY_AGENT;
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

static NOINLINE __attribute__((noreturn)) void throw_bad_alloc(void)
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
static NOINLINE void *new_retry(size_t n, size_t align, int fn)
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
		return likely(p != NULL) ? p : new_retry(n, (align), (fn)); \
	}
#define NEW_NOTHROW(name, fn, align)                             \
	AGENT_API void *name(size_t n, const void *nt);          \
	AGENT_API void *name(size_t n, const void *nt)           \
	{                                                        \
		void *p = new_tracked(n, (align), (fn));         \
		return likely(p != NULL) ? p : NOTHROW_RETRY(#name, n, nt); \
	}
#define NEW_ALIGNED(name, fn)                                    \
	AGENT_API void *name(size_t n, size_t al);               \
	AGENT_API void *name(size_t n, size_t al)                \
	{                                                        \
		if (unlikely(bad_alignment(al)))                 \
			throw_bad_alloc();                       \
		void *p = new_tracked(n, al, (fn));              \
		return likely(p != NULL) ? p : new_retry(n, al, (fn)); \
	}
#define NEW_ALIGNED_NOTHROW(name, fn)                                    \
	AGENT_API void *name(size_t n, size_t al, const void *nt);      \
	AGENT_API void *name(size_t n, size_t al, const void *nt)       \
	{                                                                \
		void *p = bad_alignment(al) ? NULL : new_tracked(n, al, (fn)); \
		return likely(p != NULL) ? p : NOTHROW_RETRY_ALIGNED(#name, n, al, nt); \
	}

NEW_THROWING(_Znwm, FMT_FN_NEW, 0)
NEW_THROWING(_Znam, FMT_FN_NEW_ARRAY, 0)
NEW_NOTHROW(_ZnwmRKSt9nothrow_t, FMT_FN_NEW, 0)
NEW_NOTHROW(_ZnamRKSt9nothrow_t, FMT_FN_NEW_ARRAY, 0)
NEW_ALIGNED(_ZnwmSt11align_val_t, FMT_FN_NEW)
NEW_ALIGNED(_ZnamSt11align_val_t, FMT_FN_NEW_ARRAY)
NEW_ALIGNED_NOTHROW(_ZnwmSt11align_val_tRKSt9nothrow_t, FMT_FN_NEW)
NEW_ALIGNED_NOTHROW(_ZnamSt11align_val_tRKSt9nothrow_t, FMT_FN_NEW_ARRAY)

#define DELETE1(name) AGENT_API void name(void *p); \
	AGENT_API void name(void *p) { free(p); }
#define DELETE2(name, T) AGENT_API void name(void *p, T); \
	AGENT_API void name(void *p, T a) { free(p); }
#define DELETE3(name, T, U) AGENT_API void name(void *p, T, U); \
	AGENT_API void name(void *p, T a, U b) { free(p); }

DELETE1(_ZdlPv)
DELETE1(_ZdaPv)
DELETE2(_ZdlPvm, size_t)
DELETE2(_ZdaPvm, size_t)
DELETE2(_ZdlPvRKSt9nothrow_t, const void *)
DELETE2(_ZdaPvRKSt9nothrow_t, const void *)
DELETE2(_ZdlPvSt11align_val_t, size_t)
DELETE2(_ZdaPvSt11align_val_t, size_t)
DELETE3(_ZdlPvmSt11align_val_t, size_t, size_t)
DELETE3(_ZdaPvmSt11align_val_t, size_t, size_t)
DELETE3(_ZdlPvSt11align_val_tRKSt9nothrow_t, size_t, const void *)
DELETE3(_ZdaPvSt11align_val_tRKSt9nothrow_t, size_t, const void *)

/* ---------- process events ---------- */

AGENT_API int dlclose(void *h)
{
	if (!real.dlclose)
		ready();
	if (!agent_tls.busy) {
		agent_tls.busy = BUSY_AGENT;
		agent_modules_snapshot();
		agent_tls.busy = 0;
	}
	int r = real.dlclose(h);
	agent_unwind_cfi_flush();  /* its code may be gone: forget its frames */
	return r;
}

/* exit runs the exit handlers, the last of which writes the report (see
 * lifecycle.c); what it needs from here is the caller's registers and
 * where its frames end. */
AGENT_CALLER_ENTRY(exit, agent_exit_hook, AGENT_CALLER_NORETURN);

__attribute__((used, noreturn)) void agent_exit_hook(int status, const uintptr_t *regs,
						      uintptr_t sp)
{
	agent_exit_claim();
	agent_exit_entered(regs, sp);
	/* resolved with the allocator, so an exit() from a signal handler on
	 * a small stack costs no dlsym here */
	while (!real.exit && !ready())
		sched_yield();  /* another thread is resolving: not for long */
	if (real.exit)
		real.exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* _exit and _Exit skip exit handlers and destructors, so the report is
 * written here (a vfork child shares our memory and is not us: skipped). */
AGENT_CALLER_ENTRY(_exit, agent__exit_hook, AGENT_CALLER_NORETURN);
AGENT_CALLER_ENTRY(_Exit, agent__exit_hook, AGENT_CALLER_NORETURN);

__attribute__((used, noreturn)) void agent__exit_hook(int status, const uintptr_t *regs,
						       uintptr_t sp)
{
	if (getpid() == agent_pid) {
		agent_exit_claim();
		if (agent_report_exit(status & 0xff, sp, regs, AGENT_CALLER_NREGS) &&
		    agent_config.error_exitcode)
			status = agent_config.error_exitcode;
	}
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* ---------- another allocator before us ---------- */

static char bypass_path[512];

/* The program calls the first malloc in the global scope: when that is
 * not ours (another allocator preloaded before the agent, or one linked
 * into the program), the agent sees almost nothing. */
void agent_hooks_check_bypass(void)
{
	/* (&malloc here would be the GOT's answer, the same first malloc) */
	uintptr_t first = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc");
	if (!first || first - agent_self_lo < agent_self_hi - agent_self_lo)
		return;
	Dl_info info;
	const char *path = dladdr((void *)first, &info) && info.dli_fname && info.dli_fname[0]
				   ? info.dli_fname : "another object";
	agent_strlcpy(bypass_path, path, sizeof bypass_path);
	agent_log("malloc here is not heaptrail's but that of ", bypass_path,
		  ", loaded before libheaptrail.so: allocations are not tracked"
		  " (put libheaptrail.so first in LD_PRELOAD; heaptrail run does)");
}

const char *agent_allocator_bypassed(void)
{
	return bypass_path[0] ? bypass_path : NULL;
}

void agent_hooks_fork_prepare(void)
{
	agent_tls.busy = BUSY_LOCKED;
}

void agent_hooks_fork_done(void)
{
	agent_tls.busy = 0;
}
