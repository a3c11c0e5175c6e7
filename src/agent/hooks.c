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
 * Re-entrancy: agent_tls.busy is set while the agent works; an allocation
 * made while it is set (by dlsym, libunwind, or libc inside our own calls)
 * goes straight to the real allocator untracked. Before the real
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
#include "format/leakfile.h"
#include "agent/banned.h"

__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));

/* busy values: 1 = inside the agent, 2 = every lock held (fork): pass
 * through without touching any table. */
#define BUSY_AGENT 1
#define BUSY_LOCKED 2

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
	if (off + need > BOOT_SIZE || n > BOOT_SIZE)
		return NULL;
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
 * unwind_cfi.c, which caches each pc's frame rule in a lock-free table and
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
	int way = -1 - MEMO_WAYS;  /* no memo */
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
		int hit = agent_memo_find(ms, pc, sp, bp, agent_config.depth);
		if (hit >= 0) {
			struct walk_memo *m = &ms->e[hit];
			if (m->fn != fn || !m->stack_id) {
				m->stack_id = agent_stack_intern(fn, m->pcs, m->npcs);
				m->fn = fn;
			}
			return m->stack_id;
		}
	}
	int depth = agent_unwind_cfi_at(pc, sp, bp, pcs, agent_config.depth, ms, &way);
	uint32_t id = agent_stack_intern(fn, pcs, depth);
	if (ms && way > -1 - MEMO_WAYS && ms->e[-1 - way].valid) {  /* recorded */
		ms->e[-1 - way].fn = fn;
		ms->e[-1 - way].stack_id = id;
	}
	return id;
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
	uint32_t id = capture_stack(fn);
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

/* Forgets p if it was tracked; returns whether it was, with its size and
 * stack so realloc can put it back when the real realloc fails. */
static bool note_free(void *p, size_t *size, uint32_t *stack)
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

/* ---------- the entry points ---------- */

static inline void check_pending(void)
{
	if (unlikely(atomic_load_explicit(&agent_pending, memory_order_relaxed)))
		agent_run_pending();
}

/* The common shape: pass through when nested or not ready; an allocation
 * the sampler passes over costs a countdown; a sampled one is recorded
 * with busy set. */
/* Sampling: most allocations only count down. The countdown is zero
 * until the agent is ready and in exact mode, so this never passes before
 * real.* is known. */
#define FAST_PATH(size, call)                                              \
	do {                                                               \
		if (likely((int64_t)(size) < agent_tls.sample_left)) {     \
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
			return (call);                                     \
		}                                                          \
		if (likely(!agent_sample_due(size)))                       \
			return (call);                                     \
		agent_tls.busy = BUSY_AGENT;                               \
		p_ = (call);                                               \
		if (likely(p_ != NULL))                                    \
			note_alloc(p_, (size), (fn_id));                   \
		agent_tls.busy = 0;                                        \
		check_pending();                                           \
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
		if (real.posix_memalign)
			return real.posix_memalign(out, align, n);
		*out = boot_alloc(n, align);
		return *out ? 0 : ENOMEM;
	}
	if (likely(!agent_sampled(n)))
		return real.posix_memalign(out, align, n);
	agent_tls.busy = BUSY_AGENT;
	int r = real.posix_memalign(out, align, n);
	if (r == 0 && *out)
		note_alloc(*out, n, FMT_FN_POSIX_MEMALIGN);
	agent_tls.busy = 0;
	check_pending();
	return r;
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
	if (unlikely(!p) || unlikely(is_boot(p)))
		return;
	size_t size;
	uint32_t id;
	int busy = agent_tls.busy;
	if (unlikely(busy)) {
		/* A nested free may still release a tracked block (libc
		 * freeing something inside our own call); only a fork in
		 * progress forbids touching the tables. */
		if (busy == BUSY_AGENT)
			note_free(p, &size, &id);
		real.free(p);
		return;
	}
	agent_tls.busy = BUSY_AGENT;
	note_free(p, &size, &id);
	real.free(p);
	agent_tls.busy = 0;
	check_pending();
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
		if (busy == BUSY_AGENT && note_free(p, &osize, &oid)) {
			void *q = real.realloc(p, n);
			if (!q && n)
				put_back(p, osize, oid);
			return q;
		}
		return real.realloc(p, n);
	}
	bool sampled = agent_sampled(n);
	if (!sampled && !agent_live_may_contain((uintptr_t)p))
		return real.realloc(p, n);
	agent_tls.busy = BUSY_AGENT;
	bool had = note_free(p, &osize, &oid);
	void *q = real.realloc(p, n);
	if (q && sampled)
		note_alloc(q, n, fn);
	else if (!q && n && had)
		put_back(p, osize, oid);   /* failed: the old block is intact */
	agent_tls.busy = 0;
	check_pending();
	return q;
}

AGENT_API void *realloc(void *p, size_t n)
{
	/* Sampling: an untracked block, and a new size the sampler passes
	 * over, is a plain realloc (NULL's filter slot is always zero). */
	if (likely(agent_filter != NULL) && likely((int64_t)n < agent_tls.sample_left) &&
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
 * The blocks come from the real malloc; a failure falls back to the
 * throwing path so new_handler and std::bad_alloc behave as without us. */

static void *new_tracked(size_t n, size_t align, int fn)
{
	void *p = NULL;
	if (unlikely(agent_tls.busy) || unlikely(!ready())) {
		if (!real.malloc)
			return boot_alloc(n, align);
		if (align <= 16)
			return real.malloc(n);
		return real.posix_memalign(&p, align, n) == 0 ? p : NULL;
	}
	bool sampled = agent_sampled(n);
	if (sampled)
		agent_tls.busy = BUSY_AGENT;
	if (align <= 16)
		p = real.malloc(n);
	else if (real.posix_memalign(&p, align, n) != 0)
		p = NULL;
	if (sampled) {
		if (likely(p != NULL))
			note_alloc(p, n, fn);
		agent_tls.busy = 0;
		check_pending();
	}
	return p;
}

static void *new_failed(size_t n)
{
	static void *(*real_new)(size_t);
	if (!real_new)
		real_new = dlsym(RTLD_NEXT, "_Znwm");
	if (real_new)
		return real_new(n);  /* throws std::bad_alloc, or new_handler helps */
	__builtin_trap();
}

#define NEW_THROWING(name, fn, align)                            \
	AGENT_API void *name(size_t n);                          \
	AGENT_API void *name(size_t n)                           \
	{                                                        \
		void *p = new_tracked(n, (align), (fn));         \
		return p ? p : new_failed(n);                    \
	}
#define NEW_NOTHROW(name, fn, align)                             \
	AGENT_API void *name(size_t n, const void *nt);          \
	AGENT_API void *name(size_t n, const void *nt)           \
	{                                                        \
		return new_tracked(n, (align), (fn));            \
	}
#define NEW_ALIGNED(name, fn)                                    \
	AGENT_API void *name(size_t n, size_t al);               \
	AGENT_API void *name(size_t n, size_t al)                \
	{                                                        \
		void *p = new_tracked(n, al, (fn));              \
		return p ? p : new_failed(n);                    \
	}
#define NEW_ALIGNED_NOTHROW(name, fn)                                    \
	AGENT_API void *name(size_t n, size_t al, const void *nt);      \
	AGENT_API void *name(size_t n, size_t al, const void *nt)       \
	{                                                                \
		return new_tracked(n, al, (fn));                         \
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
	if (getpid() == agent_pid)
		agent_report_exit(status & 0xff, sp, regs, AGENT_CALLER_NREGS);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

void agent_hooks_fork_prepare(void)
{
	agent_tls.busy = BUSY_LOCKED;
}

void agent_hooks_fork_done(void)
{
	agent_tls.busy = 0;
}
