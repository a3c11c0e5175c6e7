/* api.c — the public API of include/heaptrail.h, and jemalloc's mallctl
 * profiling controls, as seen from inside. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "heaptrail.h"
#include "agent/agent.h"
#include "agent/config.h"
#include "agent/heapprofile.h"
#include "agent/hooks.h"
#include "agent/lifecycle.h"
#include "agent/pool.h"
#include "agent/unwind.h"
#include "agent/sample.h"
#include "agent/table.h"
#include "format/leakfile.h"
#include "agent/banned.h"

AGENT_API int heaptrail_set_active(int on)
{
	return agent_set_recording(on != 0);
}

/* int heaptrail_leak_check(int flags): the caller's callee-saved
 * registers are roots, and its frames start right above the entry. */
AGENT_CALLER_ENTRY(heaptrail_leak_check, agent_api_leak_check, AGENT_CALLER_RETURNS);

__attribute__((used)) int agent_api_leak_check(int flags, const uintptr_t *regs, uintptr_t sp)
{
	return agent_leak_check(flags, sp, regs, AGENT_CALLER_NREGS);
}

AGENT_API int heaptrail_dump(const char *path)
{
	return agent_dump(path, "api");
}

AGENT_API int heaptrail_reset(void)
{
	agent_reset_cumulative();
	return 0;
}

/* ---------- pools (pool.c keeps them) ----------
 * Each call runs as an allocator entry point does: with busy set, so a
 * signal handler's malloc meanwhile is deferred (hooks.c), and with the
 * pending work run on the way out. A call the agent cannot take (not
 * ready, or nested in the agent's own work) does nothing and says so. */

static bool pool_enter(void)
{
	if (atomic_load_explicit(&agent_state, memory_order_acquire) != 2 || agent_tls.busy)
		return false;
	agent_tls.busy = AGENT_BUSY_HOOK;
	return true;
}

static int pool_leave(int ret)
{
	agent_tls.busy = 0;
	if (AGENT_UNLIKELY(atomic_load_explicit(&agent_pending, memory_order_relaxed)))
		agent_run_pending();
	return ret;
}

/* A new chunk [addr, addr+size) of the pool anchored at anchor (0: the
 * malloc-like pool), recorded with the caller's stack when the sampler
 * picks it. */
static AGENT_NOINLINE int pool_alloc(uintptr_t anchor, uintptr_t addr, size_t size, int fn)
{
	if (!pool_enter())
		return -EAGAIN;
	int ret = 0;
	if (!addr || !agent_recording() || !agent_sampled(size))
		return pool_leave(0);
	uint32_t id = agent_pool_find(anchor);
	if (!id)
		return pool_leave(-ENOENT);
	uintptr_t pcs[AGENT_MAX_DEPTH];
	int n = agent_unwind_cfi(pcs, agent_config.depth);
	uint32_t stack = agent_stack_intern_pool(fn, id, pcs, n);
	if (stack)
		ret = agent_pool_chunk_add(id, addr, size, stack);
	if (!stack || ret == -ENOMEM) {
		agent_count(&agent_my_counts()->dropped, 1);
		return pool_leave(-ENOMEM);
	}
	if (ret == 0) {
		struct agent_stack *s = agent_stack_get(stack);
		agent_add_shared(&s->total_bytes, size);
		agent_add_shared(&s->total_blocks, 1);
	}
	return pool_leave(ret);
}

AGENT_API int heaptrail_pool_create(const void *pool, const void *parent, const char *name)
{
	if (!pool_enter())
		return -EAGAIN;
	long id = agent_pool_create((uintptr_t)pool, (uintptr_t)parent, name);
	return pool_leave(id < 0 ? (int)id : 0);
}

AGENT_API int heaptrail_pool_name(const void *pool, const char *name)
{
	if (!pool_enter())
		return -EAGAIN;
	return pool_leave(agent_pool_rename((uintptr_t)pool, name));
}

AGENT_API int heaptrail_pool_alloc(const void *pool, const void *addr, size_t size)
{
	if (!pool)
		return -EINVAL;
	return pool_alloc((uintptr_t)pool, (uintptr_t)addr, size, FMT_FN_POOL);
}

AGENT_API int heaptrail_pool_free(const void *pool, const void *addr)
{
	if (!pool)
		return -EINVAL;
	if (!pool_enter())
		return -EAGAIN;
	size_t size;
	uint32_t stack;
	int ret = agent_pool_chunk_remove((uintptr_t)pool, (uintptr_t)addr, &size, &stack);
	/* an untracked chunk is the usual case when sampling */
	return pool_leave(ret == -ENOENT && agent_config.sample > 1 ? 0 : ret);
}

AGENT_API int heaptrail_pool_change(const void *pool, const void *old, const void *addr,
				    size_t size)
{
	if (!pool)
		return -EINVAL;
	if (!pool_enter())
		return -EAGAIN;
	int ret = agent_pool_chunk_change((uintptr_t)pool, (uintptr_t)old, (uintptr_t)addr, size);
	return pool_leave(ret == -ENOENT && agent_config.sample > 1 ? 0 : ret);
}

AGENT_API int heaptrail_pool_trim(const void *pool, const void *addr, size_t size)
{
	if (!pool_enter())
		return -EAGAIN;
	return pool_leave(agent_pool_trim((uintptr_t)pool, (uintptr_t)addr, size));
}

AGENT_API int heaptrail_pool_reset(const void *pool)
{
	if (!pool_enter())
		return -EAGAIN;
	return pool_leave(agent_pool_reset((uintptr_t)pool));
}

AGENT_API int heaptrail_pool_destroy(const void *pool)
{
	if (!pool_enter())
		return -EAGAIN;
	return pool_leave(agent_pool_destroy((uintptr_t)pool));
}

AGENT_API int heaptrail_pool_move(const void *pool, const void *new_pool)
{
	if (!pool_enter())
		return -EAGAIN;
	return pool_leave(agent_pool_move((uintptr_t)pool, (uintptr_t)new_pool));
}

AGENT_API int heaptrail_pool_exists(const void *pool)
{
	if (!pool || !pool_enter())
		return 0;
	return pool_leave(agent_pool_find((uintptr_t)pool) != 0);
}

AGENT_API int heaptrail_block_alloc(const void *addr, size_t size)
{
	return pool_alloc(0, (uintptr_t)addr, size, FMT_FN_MALLOCLIKE);
}

AGENT_API int heaptrail_block_free(const void *addr)
{
	if (!pool_enter())
		return -EAGAIN;
	size_t size;
	uint32_t stack;
	int ret = agent_pool_chunk_remove(0, (uintptr_t)addr, &size, &stack);
	return pool_leave(ret == -ENOENT && agent_config.sample > 1 ? 0 : ret);
}

AGENT_API int heaptrail_block_resize(const void *addr, size_t old_size, size_t new_size)
{
	(void)old_size;
	if (!pool_enter())
		return -EAGAIN;
	int ret = agent_pool_chunk_change(0, (uintptr_t)addr, (uintptr_t)addr, new_size);
	return pool_leave(ret == -ENOENT && agent_config.sample > 1 ? 0 : ret);
}

/* jemalloc's profiling controls, for programs written against jemalloc's
 * profiler; when the process has a real jemalloc, it gets every call. */
AGENT_API int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	static int (*next)(const char *, void *, size_t *, void *, size_t);
	static bool looked;
	if (!looked) {
		int busy = agent_tls.busy;
		agent_tls.busy = 1;
		next = (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_NEXT, "mallctl");
		agent_tls.busy = busy;
		looked = true;
	}
	if (next)
		return next(name, oldp, oldlenp, newp, newlen);
	if (!name)
		return EINVAL;
	if (!strcmp(name, "prof.dump")) {
		if (oldp || (newp && newlen != sizeof(const char *)))
			return EINVAL;
		return agent_dump(newp ? *(const char **)newp : NULL, "api") ? EFAULT : 0;
	}
	if (!strcmp(name, "prof.active")) {
		if ((oldp && (!oldlenp || *oldlenp != sizeof(bool))) ||
		    (newp && newlen != sizeof(bool)))
			return EINVAL;
		bool was = newp ? agent_set_recording(*(bool *)newp) : agent_recording();
		if (oldp)
			*(bool *)oldp = was;
		return 0;
	}
	if (!strcmp(name, "opt.prof")) {  /* read-only: profiling is built in */
		if (newp)
			return EPERM;
		if (!oldp || !oldlenp || *oldlenp != sizeof(bool))
			return EINVAL;
		*(bool *)oldp = true;
		return 0;
	}
	if (!strcmp(name, "prof.reset")) {
		if (newp && (newlen != sizeof(size_t) || *(size_t *)newp > 62))
			return EINVAL;
		if (newp) {
			agent_config.sample_auto = false;  /* the program chose S */
			agent_resample((uint64_t)1 << *(size_t *)newp);
		}
		agent_reset_cumulative();
		return 0;
	}
	if (!strcmp(name, "opt.lg_prof_sample") || !strcmp(name, "prof.lg_sample")) {
		if (!oldp || !oldlenp || *oldlenp != sizeof(size_t))
			return EINVAL;
		size_t lg = 0;
		while ((1ull << (lg + 1)) <= agent_config.sample)
			lg++;
		*(size_t *)oldp = lg;
		return 0;
	}
	return ENOENT;
}
