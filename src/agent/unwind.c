/*
 * unwind.c — the current thread's call stack as return addresses.
 *
 * Stacks are followed with DWARF call-frame information (.eh_frame), so
 * binaries built without frame pointers — most of Debian — unwind fully.
 * The work is done by unwind_cfi.c, which caches each pc's frame rule in a
 * lock-free table and finds objects with glibc's lock-free
 * _dl_find_object: libunwind (which we used first) calls dl_iterate_phdr
 * on a cache miss, whose lock glibc does not reset in a forked child.
 */
#include "agent/agent.h"
#include "agent/banned.h"


uint32_t agent_capture_stack(int fn)
{
	uintptr_t pcs[AGENT_MAX_DEPTH];
	struct agent_counters *slot = agent_tls.ctr;
	struct walk_memos *ms = NULL;
	int way = -1 - MEMO_WAYS;  /* no memo */
	if (slot && !slot->shared) {
		if (!slot->memo)
			slot->memo = agent_mmap(sizeof *slot->memo);
		ms = slot->memo;
	}
	int depth = agent_unwind_cfi_memo(pcs, agent_config.depth, ms, &way);
	if (way >= 0 && ms->e[way].fn == fn && ms->e[way].stack_id)
		return ms->e[way].stack_id;
	uint32_t id = agent_stack_intern(fn, pcs, depth);
	struct walk_memo *m = ms ? &ms->e[way >= 0 ? way : -1 - way] : NULL;
	if (m && way > -1 - MEMO_WAYS && m->valid) {
		m->fn = fn;
		m->stack_id = id;
	}
	return id;
}
