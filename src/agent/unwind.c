/*
 * unwind.c — the current thread's call stack as return addresses.
 *
 * Uses libunwind's unw_backtrace: it follows DWARF call-frame information
 * (.eh_frame), so it works on binaries built without frame pointers, which
 * is most of Debian. libunwind keeps its own per-thread cache of frame
 * descriptions and takes its memory from mmap, never from the host's
 * malloc. Frames inside the agent are dropped here so stacks start at the
 * caller of the allocator.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "agent/agent.h"
#include "agent/banned.h"

int agent_unwind(uintptr_t *pcs, int max)
{
	void *raw[AGENT_MAX_DEPTH + 16];
	int want = max + 16 < (int)(sizeof raw / sizeof raw[0]) ? max + 16
								: (int)(sizeof raw / sizeof raw[0]);
	int n = unw_backtrace(raw, want);
	int i = 0, k = 0;
	while (i < n && (uintptr_t)raw[i] >= agent_self_lo && (uintptr_t)raw[i] < agent_self_hi)
		i++;
	for (; i < n && k < max; i++)
		pcs[k++] = (uintptr_t)raw[i];
	return k;
}
