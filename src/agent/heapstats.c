/*
 * heapstats.c — the allocator's own count of its bytes in use (see
 * heapstats.h), and when it is safe to ask for it.
 */
#include <malloc.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/heapstats.h"
#include "agent/startup.h"
#include "agent/unwind.h"
#include "agent/banned.h"

/* Whether this thread may be a signal handler that interrupted code
 * holding an allocator lock. A handler returns into the rt_sigreturn
 * trampoline, whose address is then a return address on the stack: the
 * walk looks for it. A walk cut short by its length proves nothing, and
 * then a blocked signal (a handler's own, unless SA_NODEFER) is taken
 * as one. Left: a handler with SA_NODEFER and no mask, reached through
 * code the unwinder cannot step over. */
static bool maybe_in_handler(void)
{
	uint64_t mask = 0;
	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask, sizeof mask) != 0)
		return true;
	enum { MAX = 256 };
	uintptr_t pcs[MAX], sps[MAX];
	int n = agent_unwind_frames(pcs, sps, MAX);
	for (int i = 0; i < n; i++) {
		uint8_t code[CFI_SIGRETURN_LEN];
		if (agent_copy_self(code, pcs[i], sizeof code) == (ssize_t)sizeof code &&
		    !agent_memcmp(code, cfi_sigreturn_code, sizeof code))
			return true;
	}
	return mask != 0 && n >= MAX;
}

int64_t agent_heapstats_in_use(void)
{
	const struct agent_heap_fns *f = &agent_heap_fns;
	if (!f->mallctl && !f->tc_property && !f->mallinfo2)
		return -1;
	if (maybe_in_handler())
		return -1;
	if (f->mallctl) {
		/* jemalloc's statistics are a snapshot taken at an "epoch" */
		uint64_t epoch = 1;
		size_t allocated = 0, len = sizeof allocated;
		if (f->mallctl("epoch", NULL, NULL, &epoch, sizeof epoch) ||
		    f->mallctl("stats.allocated", &allocated, &len, NULL, 0))
			return -1;
		return (int64_t)allocated;
	}
	if (f->tc_property) {
		size_t v = 0;
		return f->tc_property("generic.current_allocated_bytes", &v) ? (int64_t)v : -1;
	}
	/* glibc: chunks in use in the arenas, and chunks mmapped on their own */
	struct mallinfo2 m = ((struct mallinfo2 (*)(void))f->mallinfo2)();
	return (int64_t)(m.uordblks + m.hblkhd);
}
