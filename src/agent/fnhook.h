/*
 * fnhook.h — allocator functions hooked by name: the
 * functions the options alloc_fn, free_fn... name (agent_config.fns,
 * format/fnspec.h) are found by symbol in the program or a loaded library
 * (.symtab, static functions included, else .dynsym) and their first
 * instructions are replaced with a jump to a trampoline that reports what
 * they do to the pool machinery (poolrec.c, pool.c): the ctx argument is
 * the pool's anchor, so a reset or destroy frees every chunk of the pool.
 * Layer 2.
 *
 * The displaced instructions are decoded and re-encoded at their new
 * place by Zydis (RIP-relative operands and relative branches relocated).
 * A function is refused, with one line on stderr, when it is not found,
 * when it is shorter than the 5-byte jump, when any of its own branches
 * jumps into the bytes the jump replaces, or when its first instructions
 * cannot be decoded or relocated.
 *
 * Patching code is safe only while no other thread can be executing the
 * bytes being replaced: when the program runs other threads (an attach,
 * or a library that started one before the agent's constructor), they
 * are stopped while the jumps are written, and a function that one of
 * them is inside (its pc, or a pc a signal frame on its stack keeps) is
 * tried again, then refused (fnhook.c). A detach puts the first bytes
 * back; the stubs stay mapped, for a thread still in one.
 *
 * At an attach, the real allocator's own entry points (malloc, free...)
 * are hooked the same way, their stubs jumping straight to the agent's
 * function of the same name (agent_fnhook_entries), so that calls
 * through pointers taken before the attach are seen too.
 *
 * The files, by job (fnhook_impl.h between them): fnhook.c installs and
 * removes the hooks (the entry every hook goes through, the jumps written
 * while other threads are stopped); fnreloc.c checks and relocates a
 * function's first instructions; fnfind.c finds functions by name and
 * holds the built-in profiles; fnentries.c hooks the real allocator's
 * entry points at an attach.
 */
#ifndef HEAPTRAIL_AGENT_FNHOOK_H
#define HEAPTRAIL_AGENT_FNHOOK_H

#include "agent/agent.h"

/* Hooks every function agent_config.fns names, and the built-in
 * profiles' the program defines; says on stderr what it refused. Returns
 * how many are hooked. pc and sp: where the calling thread's own code is
 * when the call runs elsewhere (an attach's), else 0. Not hook-safe
 * (opens files, mmap, mprotect, stops threads); from the constructor, or
 * an attach (again after a detach). */
int agent_fnhook_install(uintptr_t pc, uintptr_t sp);

/* An entry point of the process's allocator, to put behind a trampoline
 * at an attach (fnentries.c). */
struct agent_entry {
	const char *name;        /* for messages: "malloc" */
	uintptr_t fn;            /* the allocator's function */
	uint64_t size;           /* its size, from the symbol table */
	uintptr_t hook;          /* the agent's function it is to reach */
	bool needed;             /* without it, none (free, realloc) */
	bool plain;              /* the agent calls it without in_real (malloc,
				  * free, calloc: their fast paths): it must call
				  * none of the others, or none is hooked */
	uintptr_t orig;          /* set: the trampoline that runs fn as it was
				  * (valid for good, hooked or not), 0 refused */
};
#define AGENT_MAX_ENTRIES 16

/* Makes the trampolines of e[0..n) and marks them for the next
 * agent_fnhook_install, which writes their jumps with the others, all
 * at once or none (with one line); sets each orig. A function one of
 * the others needs that cannot be hooked leaves them all alone (orig 0
 * everywhere), with one line saying why and one saying what is not
 * seen then. Functions at the same address (aliases) share one.
 * Returns how many are to be written. Not hook-safe; an attach only. */
int agent_fnhook_entries(struct agent_entry *e, int n);

/* Whether the allocator's entry points that the others need (free and
 * realloc) jump to the agent (an attach, after agent_fnhook_install). */
bool agent_fnhook_frees_on(void);

/* Points the stub of the allocator's entry point name (hooked, jumping)
 * at to, or back at the agent's function of that name (to 0): one store
 * a jumping thread sees whole. false when there is no such stub, or its
 * page cannot be written. Not hook-safe (mprotect). */
bool agent_fnhook_retarget(const char *name, uintptr_t to);

/* Puts back the first bytes of every hooked function (a detach), every
 * other thread stopped for the write; a function it cannot put back stays
 * hooked (its stub records nothing once detached), with one line. With
 * keep_frees, the entry points free and realloc stay hooked, to the
 * agent's functions, which pass every block through but guarded ones
 * (guard.h: blocks still live at a detach). Not hook-safe (stops
 * threads, mprotect). */
void agent_fnhook_remove(bool keep_frees);

#endif
