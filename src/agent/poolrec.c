/* poolrec.c — recording pool operations (poolrec.h). */
#include <errno.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/hooks.h"
#include "agent/pool.h"
#include "agent/poolrec.h"
#include "agent/sample.h"
#include "agent/table.h"
#include "agent/unwind.h"
#include "agent/banned.h"

bool agent_poolrec_enter(void)
{
	if (atomic_load_explicit(&agent_state, memory_order_acquire) != AGENT_STATE_READY || agent_tls.busy)
		return false;
	agent_tls.busy = AGENT_BUSY_HOOK;
	return true;
}

int agent_poolrec_leave(int ret)
{
	agent_tls.busy = 0;
	if (AGENT_UNLIKELY(atomic_load_explicit(&agent_pending, memory_order_relaxed)))
		agent_run_pending();
	return ret;
}

static bool read_safely(void *to, uintptr_t from, size_t n)
{
	return agent_copy_self(to, from, n) == (ssize_t)n;
}

/* The pool name whose address is the word at name_at, into name ("" when
 * it cannot be read), up to its first byte that is not printable ASCII. */
static void name_from(uintptr_t name_at, char *name)
{
	uintptr_t p;
	name[0] = 0;
	if (!read_safely(&p, name_at, sizeof p) || !p)
		return;
	/* byte by byte up to the end of p's page, then the next page's */
	size_t n = 0;
	while (n < AGENT_POOL_NAME_MAX - 1) {
		size_t page_left = 4096 - ((p + n) & 4095), want = AGENT_POOL_NAME_MAX - 1 - n;
		size_t k = want < page_left ? want : page_left;
		if (!read_safely(name + n, p + n, k))
			break;
		size_t end = 0;   /* printable ASCII only: memory read on trust */
		while (end < k && name[n + end] >= 0x20 && name[n + end] < 0x7f)
			end++;
		n += end;
		if (end < k)
			break;
	}
	name[n] = 0;
}

AGENT_NOINLINE int agent_poolrec_alloc(uintptr_t anchor, uintptr_t addr, size_t size, int fn,
				       uintptr_t first_pc, bool make, uintptr_t name_at)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	int ret = 0;
	if (!addr || !agent_recording() || !agent_sampled(size))
		return agent_poolrec_leave(0);
	uint32_t id = agent_pool_find(anchor);
	if (!id && make && anchor) {
		char name[AGENT_POOL_NAME_MAX] = "";
		if (name_at)
			name_from(name_at, name);
		if (agent_pool_create(anchor, 0, name[0] ? name : NULL) > 0)
			id = agent_pool_find(anchor);
	}
	if (!id)
		return agent_poolrec_leave(-ENOENT);
	uintptr_t pcs[AGENT_MAX_DEPTH];
	int first = first_pc != 0;
	pcs[0] = first_pc;
	int n = first + agent_unwind_cfi(pcs + first, agent_config.depth - first);
	uint32_t stack = agent_stack_intern_pool(fn, id, pcs, n);
	if (stack)
		ret = agent_pool_chunk_add(id, addr, size, stack);
	if (!stack || ret == -ENOMEM) {
		agent_count(&agent_my_counts()->dropped, 1);
		return agent_poolrec_leave(-ENOMEM);
	}
	if (ret == 0) {
		struct agent_stack *s = agent_stack_get(stack);
		agent_add_shared(&s->total_bytes, size);
		agent_add_shared(&s->total_blocks, 1);
	}
	return agent_poolrec_leave(ret);
}

int agent_poolrec_free(uintptr_t anchor, uintptr_t addr)
{
	if (!agent_poolrec_enter())
		return -EAGAIN;
	size_t size;
	uint32_t stack;
	int ret = agent_pool_chunk_remove(anchor, addr, &size, &stack);
	/* an untracked chunk is the usual case when sampling */
	return agent_poolrec_leave(ret == -ENOENT && agent_sampling.period > 1 ? 0 : ret);
}
