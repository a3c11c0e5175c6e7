/*
 * poolrec.h — recording what a pool operation does, for the two ways the
 * program tells of one: the API (api.c, heaptrail_pool_*) and the
 * allocator functions hooked by name (fnhook.c). Layer 2.
 *
 * An operation runs as an allocator entry point does: between
 * agent_poolrec_enter, which sets agent_tls.busy (a signal handler's
 * malloc meanwhile is deferred, hooks.c), and agent_poolrec_leave, which
 * clears it and runs the pending work. An operation the agent cannot take
 * (not ready, or nested in the agent's own work) is not recorded.
 * Hook-safe only in the sense of the entry points: not from inside one.
 */
#ifndef HEAPTRAIL_AGENT_POOLREC_H
#define HEAPTRAIL_AGENT_POOLREC_H

#include "agent/agent.h"

/* True when the caller may record (busy is then set); false when not. */
bool agent_poolrec_enter(void);
/* Ends what agent_poolrec_enter began; returns ret. */
int agent_poolrec_leave(int ret);

/* A new chunk [addr, addr+size) of the pool anchored at anchor (0: the
 * malloc-like pool), recorded with the caller's stack when the sampler
 * picks it; fn (FMT_FN_POOL, FMT_FN_MALLOCLIKE) is its frame #0. first_pc,
 * when not 0, is put before the caller's frames (fnhook.c: the hooked
 * function, whose frame is not live yet). With make, a pool that does not
 * exist is created (no parent), unnamed, or, when name_at is not 0, named
 * by the C string whose address is the word at name_at (both read
 * without trusting them: a bad address gives no name, never a fault).
 * Returns 0 or -errno; does its own enter and leave (-EAGAIN when it
 * cannot). */
int agent_poolrec_alloc(uintptr_t anchor, uintptr_t addr, size_t size, int fn,
			uintptr_t first_pc, bool make, uintptr_t name_at);

/* The chunk at addr of pool anchor (0: malloc-like) goes back: 0 or
 * -errno (an untracked chunk when sampling is 0). Own enter and leave. */
int agent_poolrec_free(uintptr_t anchor, uintptr_t addr);

#endif
