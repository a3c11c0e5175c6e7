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
#include "agent/poolrec.h"
#include "agent/unwind.h"
#include "agent/sample.h"
#include "agent/table.h"
#include "format/leakfile.h"
#include "format/options.h"
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
	if (!agent_sampling.leak_kinds)
		return -ENOTSUP;  /* as heaptrail.h says: the program asked for kinds */
	return agent_leak_check(flags, sp, regs, AGENT_CALLER_NREGS, NULL, 0);
}

AGENT_API int heaptrail_dump(const char *path)
{
	return agent_dump_from_program(path, "api");
}

/* `heaptrail dump PID` (src/control/inject.c calls it by ptrace, as it calls
 * heaptrail_request): the dump heaptrail_dump(NULL) writes, and its path
 * (as the process names it) into wrote, FMT_REQUEST_PATH_MAX bytes, left
 * alone when none was written. Returns as heaptrail_dump does. */
AGENT_API int heaptrail_dump_request(char *wrote)
{
	return agent_dump_wrote("api", wrote, wrote ? FMT_REQUEST_PATH_MAX : 0);
}

AGENT_API int heaptrail_reset(void)
{
	agent_reset_cumulative();
	return 0;
}

/* ---------- pools (pool.c keeps them; poolrec.c records) ---------- */

AGENT_API int heaptrail_pool_create(const void *pool, const void *parent, const char *name)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	long id = agent_pool_create((uintptr_t)pool, (uintptr_t)parent, name);
	return agent_poolrec_leave(id < 0 ? (int)id : 0);
}

AGENT_API int heaptrail_pool_name(const void *pool, const char *name)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	return agent_poolrec_leave(agent_pool_rename((uintptr_t)pool, name));
}

AGENT_API int heaptrail_pool_alloc(const void *pool, const void *addr, size_t size)
{
	if (!pool)
		return -EINVAL;
	return agent_poolrec_alloc((uintptr_t)pool, (uintptr_t)addr, size, FMT_FN_POOL, 0, false, 0);
}

AGENT_API int heaptrail_pool_free(const void *pool, const void *addr)
{
	if (!pool)
		return -EINVAL;
	return agent_poolrec_free((uintptr_t)pool, (uintptr_t)addr);
}

AGENT_API int heaptrail_pool_change(const void *pool, const void *old, const void *addr,
				    size_t size)
{
	if (!pool)
		return -EINVAL;
	if (!agent_poolrec_enter())
		return -EAGAIN;
	int ret = agent_pool_chunk_change((uintptr_t)pool, (uintptr_t)old, (uintptr_t)addr, size);
	return agent_poolrec_leave(ret == -ENOENT && agent_sampling.period > 1 ? 0 : ret);
}

AGENT_API int heaptrail_pool_trim(const void *pool, const void *addr, size_t size)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	return agent_poolrec_leave(agent_pool_trim((uintptr_t)pool, (uintptr_t)addr, size));
}

AGENT_API int heaptrail_pool_reset(const void *pool)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	return agent_poolrec_leave(agent_pool_reset((uintptr_t)pool));
}

AGENT_API int heaptrail_pool_destroy(const void *pool)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	return agent_poolrec_leave(agent_pool_destroy((uintptr_t)pool));
}

AGENT_API int heaptrail_pool_move(const void *pool, const void *new_pool)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	return agent_poolrec_leave(agent_pool_move((uintptr_t)pool, (uintptr_t)new_pool));
}

AGENT_API int heaptrail_pool_exists(const void *pool)
{
	if (!pool || !agent_poolrec_enter())
		return 0;
	return agent_poolrec_leave(agent_pool_find((uintptr_t)pool) != 0);
}

AGENT_API int heaptrail_block_alloc(const void *addr, size_t size)
{
	return agent_poolrec_alloc(0, (uintptr_t)addr, size, FMT_FN_MALLOCLIKE, 0, false, 0);
}

AGENT_API int heaptrail_block_free(const void *addr)
{
	return agent_poolrec_free(0, (uintptr_t)addr);
}

AGENT_API int heaptrail_block_resize(const void *addr, size_t old_size, size_t new_size)
{
	(void)old_size;
	if (!agent_poolrec_enter())
		return -EAGAIN;
	int ret = agent_pool_chunk_change(0, (uintptr_t)addr, (uintptr_t)addr, new_size);
	return agent_poolrec_leave(ret == -ENOENT && agent_sampling.period > 1 ? 0 : ret);
}

/* jemalloc's profiling controls, for programs written against jemalloc's
 * profiler; when the process has a real jemalloc, it gets every call. */
AGENT_API int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	static int (*next)(const char *, void *, size_t *, void *, size_t);
	static bool looked;
	if (!looked) {
		int busy = agent_tls.busy;
		agent_tls.busy = AGENT_BUSY_AGENT;
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
		return agent_dump_from_program(newp ? *(const char **)newp : NULL, "api") ? EFAULT : 0;
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
			/* the program chose S: no longer auto */
			agent_resample((uint64_t)1 << *(size_t *)newp, false);
		}
		agent_reset_cumulative();
		return 0;
	}
	if (!strcmp(name, "opt.lg_prof_sample") || !strcmp(name, "prof.lg_sample")) {
		if (!oldp || !oldlenp || *oldlenp != sizeof(size_t))
			return EINVAL;
		size_t lg = 0;
		while ((1ull << (lg + 1)) <= agent_sampling.period)
			lg++;
		*(size_t *)oldp = lg;
		return 0;
	}
	return ENOENT;
}
