/*
 * startup.h — what the agent needs before it can record anything: the
 * real allocator (found with dlsym(RTLD_NEXT), so another preloaded
 * allocator keeps working), a static bootstrap buffer for the allocations
 * made before it is known (dlsym's own calloc, the first allocations of
 * the process), and the process facts the first tracked allocation needs
 * (agent_pid, the agent's own text). Used by the hooks (hooks.c) and by
 * the constructor (lifecycle.c). Everything here is hook-safe.
 */
#ifndef HEAPTRAIL_AGENT_STARTUP_H
#define HEAPTRAIL_AGENT_STARTUP_H

#include "agent/agent.h"

/* The allocator the hooks forward to; malloc is written last (with a
 * release fence): non-NULL means every other pointer is set too. */
struct agent_real {
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
};
extern struct agent_real agent_real;
/* The real allocator's own account of what it holds (heapstats.c reads
 * it): jemalloc's mallctl, gperftools' numeric properties, or glibc's
 * mallinfo2, whichever the allocator the hooks forward to provides (the
 * first found, in that order); all NULL when none. Set with agent_real. */
struct agent_heap_fns {
	int (*mallctl)(const char *, void *, size_t *, void *, size_t);
	int (*tc_property)(const char *, size_t *);
	void *mallinfo2;        /* struct mallinfo2 (*)(void) */
};
extern struct agent_heap_fns agent_heap_fns;
/* The same functions as the loader found them: at an attach, agent_real
 * may point at trampolines that run them (attach.c), and the program's
 * dlsym answers these (dlhooks.c). */
extern struct agent_real agent_defs;

/* The bootstrap buffer: blocks handed out before the real allocator is
 * known; never given back. */
#define AGENT_BOOT_SIZE (256 * 1024)
extern char agent_boot_buf[AGENT_BOOT_SIZE];
static inline bool agent_is_boot(const void *p)
{
	/* one compare: below the buffer wraps around to far above it */
	return (uintptr_t)p - (uintptr_t)agent_boot_buf < AGENT_BOOT_SIZE;
}
/* A bootstrap block of n bytes aligned to align (at least 16); NULL and
 * ENOMEM when the buffer is used up. */
void *agent_boot_alloc(size_t n, size_t align);
/* The size a bootstrap block was allocated with (16 bytes before it). */
static inline size_t agent_boot_size(const void *p)
{
	return ((const size_t *)p)[-1];
}

/* Fills in agent_real (with busy set: dlsym's allocations use the
 * bootstrap buffer). */
void agent_resolve_real(void);
/* The same for an agent loaded into a running process (attach): the
 * global scope's allocator, found first by find (attach.c's lookup). */
void agent_resolve_global(void *(*find)(const char *name));

/* Makes sure the real allocator is known; false while another thread is
 * still resolving it (the caller then uses the bootstrap buffer). */
static inline bool agent_ready(void)
{
	if (AGENT_LIKELY(atomic_load_explicit(&agent_state, memory_order_acquire) ==
			 AGENT_STATE_READY))
		return true;
	int expect = AGENT_STATE_NONE;
	if (atomic_compare_exchange_strong(&agent_state, &expect, AGENT_STATE_INITIALISING)) {
		agent_resolve_real();
		agent_init_early();
		atomic_store_explicit(&agent_state, AGENT_STATE_READY, memory_order_release);
		return true;
	}
	return atomic_load(&agent_state) == AGENT_STATE_READY;
}

/* Resolves the real allocator and runs agent_init_early if no allocation
 * has done it yet. */
void agent_ensure_ready(void);
/* Says on stderr, once, when the program's malloc is not the agent's
 * (another allocator before it in LD_PRELOAD); from the constructor. */
void agent_hooks_check_bypass(void);
/* The path of that allocator's object, or NULL. */
const char *agent_allocator_bypassed(void);

/* heaptrail attach (attach.c sets it): an enum agent_attach_state. */
enum agent_attach_state { AGENT_NEVER_ATTACHED, AGENT_ATTACHED, AGENT_DETACHED };
extern atomic_int agent_attach_state;
/* The agent was loaded by dlopen into a running process (heaptrail
 * attach), not preloaded: asked by the constructor. */
bool agent_attach_loaded_late(void);
/* Attached now (the heap holds blocks the agent never saw). */
static inline bool agent_attach_active(void)
{
	return atomic_load(&agent_attach_state) == AGENT_ATTACHED;
}
/* false once an attached agent was detached: no exit report then. */
static inline bool agent_attach_reports(void)
{
	return atomic_load(&agent_attach_state) != AGENT_DETACHED;
}

#endif
