/*
 * fnhook.h — allocator functions hooked by name (fnhook.c): the
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

/* Puts back the first bytes of every hooked function (a detach), every
 * other thread stopped for the write; a function it cannot put back stays
 * hooked (its stub records nothing once detached), with one line. Not
 * hook-safe (stops threads, mprotect). */
void agent_fnhook_remove(void);

#endif
