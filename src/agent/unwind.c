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

int agent_unwind(uintptr_t *pcs, int max)
{
	return agent_unwind_cfi(pcs, max);
}
