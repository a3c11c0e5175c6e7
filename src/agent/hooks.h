/*
 * hooks.h — the allocator entry points (hooks.c), the loader's
 * (dlhooks.c) and mmap's (mmaphooks.c): whether new blocks are recorded,
 * fork, and the work signal handlers leave for a thread's way out of the
 * agent. Layer 2.
 */
#ifndef HEAPTRAIL_AGENT_HOOKS_H
#define HEAPTRAIL_AGENT_HOOKS_H

#include "agent/agent.h"

/* Stops or restarts recording new blocks (frees are always seen);
 * returns the previous state. */
int agent_set_recording(bool on);
bool agent_recording(void);
/* Around fork: every nested call passes through while the tables are
 * locked. */
void agent_hooks_fork_prepare(void);
void agent_hooks_fork_done(void);
/* Carries out the frees (and records the allocations) that signal
 * handlers made while this thread was inside the agent; call once the
 * thread holds no table lock. One batch a call: what was written down
 * when it started; what handlers add meanwhile waits for the next call
 * (agent_pending stays set). Called inside itself (a dump's unlock), it
 * does nothing. Hook-safe. */
void agent_defer_drain(void);


/* Work asked for by a signal while the thread was inside the agent runs
 * when it leaves: hooks call agent_run_pending when agent_pending is set. */
#define AGENT_PENDING_CHECK 1            /* a leak check, "all" */
#define AGENT_PENDING_CHECK_INCREASED 2  /* a leak check, "increased" */
#define AGENT_PENDING_DUMP_EVERY 4
#define AGENT_PENDING_DUMP_SIGNAL 8
#define AGENT_PENDING_DUMP_LIVE 16     /* the live endpoint asked for a dump */
#define AGENT_PENDING_WORK 0xff          /* the bits above */
/* Above them, how many threads hold signal handlers' deferred calls
 * (hooks.c): those threads drain theirs when they run the pending work;
 * the others find nothing to do, for the few instructions it lasts. */
#define AGENT_PENDING_DEFERRED 0x100
extern atomic_int agent_pending;
void agent_run_pending(void);
/* Puts back the signal mask an entry point's drain blocked (hooks.c). */
void agent_hook_unmask(void);
/* An entry point is done with the tables: the signals its drain held
 * back are let in (their handlers find busy 0), and what signal handlers
 * deferred meanwhile is pending work too. */
static inline void agent_hook_leave(void)
{
	agent_tls.busy = 0;
	if (AGENT_UNLIKELY(agent_tls.masked))
		agent_hook_unmask();
	if (AGENT_UNLIKELY(atomic_load_explicit(&agent_pending, memory_order_relaxed)))
		agent_run_pending();
}
/* The leak check agent_run_pending runs (exitreport.c's agent_leak_check,
 * set by the constructor: the hooks sit below it). */
typedef int agent_leak_check_fn(int flags, uintptr_t stack_from, const uintptr_t *extra,
				int nextra, char *wrote, size_t cap);
void agent_pending_on_check(agent_leak_check_fn *fn);

/* free and realloc after a detach while guarded blocks live (attach.c):
 * guarded blocks go back to guard.c, every other one passes straight to
 * the allocator. Hook-safe. */
void agent_free_detached(void *p);
void *agent_realloc_detached(void *p, size_t n);

/* Called at the start of each of the program's dlsym calls, when set
 * (attach.c, while attached: a module the program loaded since is
 * patched before the program gets the address of its code). Not inside
 * the agent nor inside dlclose. */
void agent_hooks_on_dlsym(void (*fn)(void));

#endif
