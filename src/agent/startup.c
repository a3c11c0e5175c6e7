/*
 * startup.c — what the first allocation of the process sets up: the real
 * allocator, the bootstrap buffer that serves allocations until it is
 * known, and the process facts (pid, the agent's own text) that tracking
 * needs. The first allocation can come before any constructor; the
 * constructor (lifecycle.c) does the rest of start-up. Also: whether the
 * program's malloc is the agent's at all.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/startup.h"
#include "agent/banned.h"

__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));

atomic_int agent_state;
pid_t agent_pid;
uintptr_t agent_self_lo, agent_self_hi;

extern char __ehdr_start[] __attribute__((visibility("hidden")));
extern char _etext[] __attribute__((visibility("hidden")));

struct agent_real agent_real;
struct agent_real agent_defs;
struct agent_heap_fns agent_heap_fns;

void agent_init_early(void)
{
	agent_self_lo = (uintptr_t)__ehdr_start;
	agent_self_hi = (uintptr_t)_etext;
	agent_pid = getpid();
}

pid_t agent_shown_pid(void)
{
	pid_t self = getpid();
	return agent_config.shown_pid && self == agent_pid ? (pid_t)agent_config.shown_pid : self;
}

/* ---------- bootstrap buffer ---------- */

char agent_boot_buf[AGENT_BOOT_SIZE] __attribute__((aligned(64)));
static atomic_size_t boot_used;

/* 16 bytes before each bootstrap block hold its size. */
void *agent_boot_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t need = n + align + 16;
	size_t off = atomic_fetch_add(&boot_used, need);
	if (off + need > AGENT_BOOT_SIZE || n > AGENT_BOOT_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	uintptr_t p = (uintptr_t)agent_boot_buf + off + 16;
	p = (p + align - 1) & ~(uintptr_t)(align - 1);
	((size_t *)p)[-1] = n;
	return (void *)p;
}

/* ---------- resolving the real allocator ---------- */

static void *global_definition(void *(*find)(const char *), const char *name)
{
	void *f = find(name);
	return f ? f : dlsym(RTLD_DEFAULT, name);
}

static void *next_definition(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* jemalloc first: it exports mallinfo too, glibc's name for another
 * heap; a program linked with tcmalloc has glibc's mallinfo2 beside it. */
static void find_heap_fns(void *(*find)(const char *))
{
	agent_heap_fns.mallctl = (__typeof__(agent_heap_fns.mallctl))find("mallctl");
	if (!agent_heap_fns.mallctl)
		agent_heap_fns.tc_property = (__typeof__(agent_heap_fns.tc_property))find(
			"MallocExtension_GetNumericProperty");
	if (!agent_heap_fns.mallctl && !agent_heap_fns.tc_property)
		agent_heap_fns.mallinfo2 = find("mallinfo2");
}

void agent_resolve_real(void)
{
	agent_tls.busy = AGENT_BUSY_AGENT;
	/* Each lookup may itself call calloc/malloc/free: those see busy and
	 * NULL real pointers, and use the bootstrap buffer. */
	agent_real.free = dlsym(RTLD_NEXT, "free");
	agent_real.calloc = dlsym(RTLD_NEXT, "calloc");
	agent_real.realloc = dlsym(RTLD_NEXT, "realloc");
	agent_real.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	agent_real.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	agent_real.memalign = dlsym(RTLD_NEXT, "memalign");
	agent_real.valloc = dlsym(RTLD_NEXT, "valloc");
	agent_real.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	agent_real.malloc_usable_size = dlsym(RTLD_NEXT, "malloc_usable_size");
	agent_real.dlclose = dlsym(RTLD_NEXT, "dlclose");
	agent_real.exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
	find_heap_fns(next_definition);
	void *m = dlsym(RTLD_NEXT, "malloc");
	agent_defs = agent_real;
	agent_defs.malloc = m;
	atomic_thread_fence(memory_order_release);
	agent_real.malloc = m;      /* published last: it means "resolved" */
	agent_tls.busy = 0;
}

/* An agent loaded by dlopen (attach) wraps whatever allocator the program
 * uses: the global scope's, not the next one after the agent in its own
 * local scope (libc's, even when the program preloads another). find is
 * attach.c's lookup of a function's first definition among the loaded
 * modules (NULL: none); dlsym(RTLD_DEFAULT) answers otherwise. Called
 * before any slot points at the agent, so no hook runs before. */
void agent_resolve_global(void *(*find)(const char *name))
{
	agent_tls.busy = AGENT_BUSY_AGENT;
#define GLOBAL(f) ((__typeof__(agent_real.f))global_definition(find, #f))
	agent_real.free = GLOBAL(free);
	agent_real.calloc = GLOBAL(calloc);
	agent_real.realloc = GLOBAL(realloc);
	agent_real.posix_memalign = GLOBAL(posix_memalign);
	agent_real.aligned_alloc = GLOBAL(aligned_alloc);
	agent_real.memalign = GLOBAL(memalign);
	agent_real.valloc = GLOBAL(valloc);
	agent_real.pvalloc = GLOBAL(pvalloc);
	agent_real.malloc_usable_size = GLOBAL(malloc_usable_size);
	agent_real.dlclose = GLOBAL(dlclose);
	agent_real.exit = GLOBAL(exit);
	find_heap_fns(find);  /* never the fallback: the agent has a mallctl */
	void *m = GLOBAL(malloc);
#undef GLOBAL
	agent_defs = agent_real;
	agent_defs.malloc = m;
	atomic_thread_fence(memory_order_release);
	agent_real.malloc = m;
	agent_init_early();
	atomic_store_explicit(&agent_state, AGENT_STATE_READY, memory_order_release);
	agent_tls.busy = 0;
}

void agent_ensure_ready(void)
{
	if (!agent_tls.busy)
		agent_ready();
}

/* ---------- another allocator before us ---------- */

static char bypass_path[512];

/* The program calls the first malloc in the global scope: when that is
 * not ours (another allocator preloaded before the agent, or one linked
 * into the program), the agent sees almost nothing. */
/* Where a PLT entry at p jumps (jmp *GOT(%rip), after an endbr64 or a
 * bnd prefix), or p when it is no such entry. */
static uintptr_t plt_target(uintptr_t p)
{
	const unsigned char *c = (const unsigned char *)p;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		c += 4;
	if (c[0] == 0xf2)
		c++;
	if (c[0] != 0xff || c[1] != 0x25)
		return p;
	int32_t disp;
	agent_memcpy(&disp, c + 2, 4);
	return *(const uintptr_t *)(c + 6 + disp);
}

static bool in_agent(uintptr_t p)
{
	return p - agent_self_lo < agent_self_hi - agent_self_lo;
}

void agent_hooks_check_bypass(void)
{
	/* (&malloc here would be the GOT's answer, the same first malloc) */
	uintptr_t first = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc");
	if (!first || in_agent(first))
		return;
	Dl_info info, to_info;
	/* A non-PIE executable that takes malloc's address (python3) answers
	 * with its own PLT entry, the function's canonical address, which
	 * jumps through its GOT to the first real malloc: ours, most likely.
	 * A jump that stays in the executable is lazy binding's stub, not
	 * resolved yet: then nothing can be told, and nothing is said. */
	uintptr_t to = plt_target(first);
	if (to != first) {
		if (in_agent(to))
			return;
		if (dladdr((void *)first, &info) && dladdr((void *)to, &to_info) &&
		    info.dli_fbase == to_info.dli_fbase)
			return;
		first = to;
	}
	const char *path = dladdr((void *)first, &info) && info.dli_fname && info.dli_fname[0]
				   ? info.dli_fname : "another object";
	agent_strlcpy(bypass_path, path, sizeof bypass_path);
	agent_log("malloc here is not heaptrail's but that of ", bypass_path,
		  ", loaded before libheaptrail.so: allocations are not tracked"
		  " (put libheaptrail.so first in LD_PRELOAD; heaptrail run does)");
}

const char *agent_allocator_bypassed(void)
{
	return bypass_path[0] ? bypass_path : NULL;
}

/* ---------- loaded into a running process (attach.c) ---------- */

atomic_int agent_attach_state;
static bool late_checked, late;

bool agent_attach_loaded_late(void)
{
	if (late_checked)
		return late;
	late_checked = true;
	/* Preloaded (the usual case): decided without a lookup. */
	const char *pre = getenv("LD_PRELOAD");
	for (const char *p = pre; p && *p; p++)
		if (agent_strstarts(p, "libheaptrail"))
			return late = false;
	/* Preloaded or linked, the agent is in the global scope; loaded by
	 * the attach's dlopen (RTLD_LOCAL), it is not. (RTLD_DEFAULT would
	 * search the caller's local scope too: the agent itself.) */
	void *global = dlopen(NULL, RTLD_LAZY);
	late = !global || dlsym(global, "heaptrail_attach_start") == NULL;
	return late;
}
