/*
 * dlhooks.c — the loader's entry points the agent defines beside the
 * allocator's (hooks.c): dlsym, so that a library's own malloc asked for
 * by handle is the agent's, and dlclose, so that nothing walks an object
 * while it is unmapped; and the hooks' side of fork.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>

#include "agent/agent.h"
#include "agent/hooks.h"
#include "agent/modules.h"
#include "agent/unwind.h"
#include "agent/startup.h"
#include "agent/banned.h"

/* ---------- dlsym ----------
 *
 * dlsym(handle, "malloc") with the handle of a library (Python's ctypes:
 * CDLL("libc.so.6").malloc) searches that library's own scope, where the
 * agent is not: the program would get libc's malloc and allocate behind
 * the agent's back (a preloaded agent or an attached one alike). So the
 * agent defines dlsym: for a real handle it asks libc's dlsym and, when
 * the answer is the allocator the agent wraps, gives the agent's entry
 * point instead. RTLD_DEFAULT and RTLD_NEXT depend on who calls (the
 * loader reads the return address): those jump straight to libc's dlsym
 * with the caller's return address untouched, from the assembly stub
 * below. For a real handle glibc does not look at the caller. */

void *agent_real_dlsym __attribute__((visibility("hidden")));
/* agent_hooks_on_dlsym's function; the stub below tests it too */
void (*agent_dlsym_seen)(void) __attribute__((visibility("hidden")));

void agent_hooks_on_dlsym(void (*fn)(void))
{
	__atomic_store_n(&agent_dlsym_seen, fn, __ATOMIC_RELEASE);
}

/* Runs agent_dlsym_seen for a dlsym of the program's. */
__attribute__((visibility("hidden"), used)) void agent_dlsym_note(void)
{
	void (*fn)(void) = __atomic_load_n(&agent_dlsym_seen, __ATOMIC_ACQUIRE);
	if (!fn || agent_tls.busy || agent_tls.in_loader)
		return;
	agent_tls.busy = AGENT_BUSY_AGENT;
	fn();
	agent_tls.busy = 0;
}

static void *dlsym_unavailable(void *handle, const char *name)
{
	(void)handle, (void)name;
	return NULL;
}

/* libc's dlsym, looked up once; never NULL. */
__attribute__((visibility("hidden"), used)) void *agent_dlsym_resolve(void)
{
	void *f = __atomic_load_n(&agent_real_dlsym, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	int busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;  /* dlopen's allocations are ours */
	/* a reference to libc kept for good: libc is never unloaded */
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (libc) {
		f = dlvsym(libc, "dlsym", "GLIBC_2.34");
		if (!f)
			f = dlvsym(libc, "dlsym", "GLIBC_2.2.5");
	}
	if (!f) {
		void *dl = dlopen("libdl.so.2", RTLD_LAZY | RTLD_NOLOAD);
		if (dl)
			f = dlvsym(dl, "dlsym", "GLIBC_2.2.5");
	}
	agent_tls.busy = busy;
	if (!f)
		f = (void *)dlsym_unavailable;
	__atomic_store_n(&agent_real_dlsym, f, __ATOMIC_RELEASE);
	return f;
}

/* The allocator entry point the agent has for what libc's dlsym found
 * under name, or found itself when it is not the wrapped allocator. */
__attribute__((visibility("hidden"), used)) void *agent_dlsym_handle(void *handle,
								  const char *name)
{
	void *(*real)(void *, const char *) =
		(void *(*)(void *, const char *))agent_dlsym_resolve();
	agent_dlsym_note();
	void *f = real(handle, name);
	if (!f || !name || !agent_ready())
		return f;
#define SAME(fn) if (f == (void *)agent_defs.fn) return (void *)fn
	switch (name[0]) {
	case 'm': SAME(malloc); SAME(memalign); SAME(malloc_usable_size); break;
	case 'f': SAME(free); break;
	case 'c': SAME(calloc); break;
	case 'r': SAME(realloc); break;
	case 'p': SAME(posix_memalign); SAME(pvalloc); break;
	case 'a': SAME(aligned_alloc); break;
	case 'v': SAME(valloc); break;
	}
#undef SAME
	return f;
}

/* dlsym(handle, name): rdi = handle, rsi = name. RTLD_DEFAULT is 0 and
 * RTLD_NEXT -1; either goes to libc's dlsym by a jump (the return address
 * stays the caller's), after agent_dlsym_note when agent_dlsym_seen is
 * set; anything else to agent_dlsym_handle. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	cmpq $-1, %rdi\n"
	"	je 1f\n"
	"	testq %rdi, %rdi\n"
	"	jne agent_dlsym_handle\n"
	"1:	movq agent_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 2f\n"
	"	cmpq $0, agent_dlsym_seen(%rip)\n"
	"	jne 2f\n"
	"	jmp *%rax\n"
	"2:	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call agent_dlsym_note\n"
	"	call agent_dlsym_resolve\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%rax\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");

/* ---------- process events ---------- */

AGENT_API int dlclose(void *h)
{
	if (!agent_real.dlclose)
		agent_ready();
	if (!agent_tls.busy) {
		agent_tls.busy = AGENT_BUSY_AGENT;
		agent_modules_snapshot();
		agent_tls.busy = 0;
	}
	/* dlclose unmaps the object before it takes it off the loader's
	 * list, and the loader's lock is recursive: a leak check or a dump
	 * on this thread meanwhile (a signal, or pending work run at the exit
	 * of a free inside dlclose) would walk the list into unmapped memory.
	 * Such work waits for a thread outside (agent_run_pending). */
	bool was = agent_tls.in_loader;
	agent_tls.in_loader = true;
	int r = agent_real.dlclose(h);
	agent_tls.in_loader = was;
	agent_unwind_cfi_flush();  /* its code may be gone: forget its frames */
	return r;
}

void agent_hooks_fork_prepare(void)
{
	agent_tls.busy = AGENT_BUSY_LOCKED;
}

void agent_hooks_fork_done(void)
{
	agent_tls.busy = 0;
}
