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
 * bytes being replaced: the constructor hooks before main, when the
 * program has one thread (the start-up is refused otherwise: see
 * fnhook.c).
 */
#ifndef HEAPTRAIL_AGENT_FNHOOK_H
#define HEAPTRAIL_AGENT_FNHOOK_H

#include "agent/agent.h"

/* Hooks every function agent_config.fns names; says on stderr what it
 * refused. Returns how many were hooked. Not hook-safe (opens files,
 * mmap, mprotect); call once, from the constructor. */
int agent_fnhook_install(void);

#endif
