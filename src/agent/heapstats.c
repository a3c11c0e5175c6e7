/*
 * heapstats.c — the allocator's own count of its bytes in use (see
 * heapstats.h), and when it is safe to ask for it.
 */
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
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

/* glibc's count walks every free chunk with the arena locked: 128 ms at
 * 430,000 free chunks, 540 ms at 1.7 million (on this project's test
 * machine), while that arena's other threads wait. So a count costs at
 * most 1 % of the time: the next comes no sooner than 100 times the
 * last one took after it, and one that took over 20 ms is the last. */
#define COUNT_SHARE 100
#define COUNT_MAX_NS (20 * 1000000ull)

static _Atomic uint64_t next_count_ns;  /* UINT64_MAX: never again */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t count(const struct agent_heap_fns *f);

int64_t agent_heapstats_in_use(void)
{
	const struct agent_heap_fns *f = &agent_heap_fns;
	if (!f->mallctl && !f->tc_property && !f->mallinfo2)
		return -1;
	uint64_t t0 = now_ns();
	if (t0 < atomic_load_explicit(&next_count_ns, memory_order_relaxed) || maybe_in_handler())
		return -1;
	int64_t v = count(f);
	uint64_t took = now_ns() - t0;
	atomic_store_explicit(&next_count_ns, took > COUNT_MAX_NS ? UINT64_MAX
							       : t0 + took + COUNT_SHARE * took,
			      memory_order_relaxed);
	return v;
}

static int64_t count(const struct agent_heap_fns *f)
{
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
