/*
 * mmaphooks.c — the program's mmap, munmap and mremap, recorded as the
 * pool "[mmap]" when the option mmap=1 is set (the allocator's entry
 * points are in hooks.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/hooks.h"
#include "agent/pool.h"
#include "agent/sample.h"
#include "agent/table.h"
#include "agent/unwind.h"
#include "format/vocab.h"
#include "agent/banned.h"

/* ---------- anonymous mappings (config mmap=1) ----------
 * The program's mmap, munmap and mremap (glibc's own, malloc's among
 * them, call the kernel directly and are not seen). Each is the system
 * call, as glibc's wrapper makes it; with mmap=1 an anonymous mapping is
 * also recorded, with its stack, as a chunk of the pool "[mmap]"
 * (pool.c), which heap dumps show and leak reports leave out. A mapping
 * is forgotten before munmap gives its addresses back, as a block before
 * free. Off, the cost is one load of the option. */

static AGENT_NOINLINE void note_mmap(void *p, size_t len)
{
	if (atomic_load_explicit(&agent_state, memory_order_acquire) != AGENT_STATE_READY || agent_tls.busy)
		return;
	agent_tls.busy = AGENT_BUSY_HOOK;
	uint32_t id = agent_pool_mmap();
	if (id && agent_recording() && agent_sampled(len)) {
		uintptr_t pcs[AGENT_MAX_DEPTH];
		int n = agent_unwind_cfi(pcs, agent_config.depth);
		uint32_t stack = agent_stack_intern_pool(FMT_FN_MMAP, id, pcs, n);
		agent_pool_unmap(id, (uintptr_t)p, len);  /* MAP_FIXED over a recorded one */
		if (!stack || agent_pool_chunk_add(id, (uintptr_t)p, len, stack)) {
			agent_count(&agent_my_counts()->dropped, 1);
		} else {
			struct agent_stack *s = agent_stack_get(stack);
			agent_add_shared(&s->total_bytes, len);
			agent_add_shared(&s->total_blocks, 1);
		}
	}
	agent_hook_leave();
}

/* Forgets what of [p, p+len) was recorded; returns the bytes it held. */
static AGENT_NOINLINE uint64_t note_munmap(void *p, size_t len)
{
	if (atomic_load_explicit(&agent_state, memory_order_acquire) != AGENT_STATE_READY || agent_tls.busy)
		return 0;
	agent_tls.busy = AGENT_BUSY_HOOK;
	uint32_t id = agent_pool_mmap();
	uint64_t gone = id ? agent_pool_unmap(id, (uintptr_t)p, len) : 0;
	agent_hook_leave();
	return gone;
}

AGENT_API void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (off & 4095) {  /* as glibc checks */
		errno = EINVAL;
		return MAP_FAILED;
	}
	void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (AGENT_UNLIKELY(agent_config.mmap) && p != MAP_FAILED && (flags & MAP_ANONYMOUS))
		note_mmap(p, len);
	return p;
}

AGENT_API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

AGENT_API int munmap(void *addr, size_t len)
{
	if (AGENT_UNLIKELY(agent_config.mmap))
		note_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

AGENT_API void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *want = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	uint64_t had = AGENT_UNLIKELY(agent_config.mmap) ? note_munmap(old, old_len) : 0;
	void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
	if (had) {
		int saved = errno;
		if (p != MAP_FAILED)
			note_mmap(p, new_len);
		else
			note_mmap(old, old_len);  /* still there */
		errno = saved;
	}
	return p;
}
