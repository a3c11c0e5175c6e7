/*
 * kinds_regs.h — blocks whose only pointers are in callee-saved registers
 * when the program calls a function that ends in a leak scan (exit,
 * _Exit, heaptrail_leak_check).  x86-64 only.
 *
 * fill_registers() allocates the blocks and leaves their addresses only in
 * the globals g_rbx, g_rbp, g_r12 and (inverted, a control that points
 * nowhere) g_r13; the caller then scrubs the stack, and the asm in
 * CALL_WITH_REGISTERS moves them into rbx, rbp, r12 and r13, zeroes the
 * globals and every scratch register, and calls FN(ARG).  So the only
 * copies are in the registers, wherever the callee saves them: memcheck
 * finds them (registers and the stack above the stack pointer are roots)
 * and so must heaptrail.
 *
 *   in rbx  111/1, in rbp  222/1, in r12  333/1: still reachable
 *   in r13 as ~address 55/1: definitely lost
 */
#ifndef HEAPTRAIL_E2E_KINDS_REGS_H
#define HEAPTRAIL_E2E_KINDS_REGS_H

#include <stdlib.h>

#include "kinds.h"

void *g_rbx, *g_rbp, *g_r12, *g_r13;
/* ~address of each block, for freeing them after a check */
unsigned long g_keep[4];

NOINLINE void *reg_block(size_t n)
{
	void *p = malloc(n); /* @site reg_block */

	memset(p, 'r', n);
	return p;
}

/* with_r12 0: r12 holds no block */
NOINLINE void fill_registers(int with_r12)
{
	STORE(g_rbx, reg_block(111));
	STORE(g_rbp, reg_block(222));
	STORE(g_r12, with_r12 ? reg_block(333) : NULL);
	STORE(g_r13, (void *)~(unsigned long)reg_block(55));
	g_keep[0] = ~(unsigned long)g_rbx;
	g_keep[1] = ~(unsigned long)g_rbp;
	g_keep[2] = ~(unsigned long)g_r12;
	g_keep[3] = (unsigned long)g_r13;
}

/* what CALL_WITH_REGISTERS calls, read by name: an operand could be
 * addressed through rsp or rbp, which the asm changes */
void (*g_call_fn)(int);
int g_call_arg;

/* Calls fn(arg) with the four registers loaded (and nothing else holding
 * the addresses); restores every register it changed before going on.
 * The red zone is skipped and the stack aligned for the call. */
#define CALL_WITH_REGISTERS(fn, arg)                                         \
	g_call_fn = (void (*)(int))(fn);                                     \
	g_call_arg = (arg);                                                  \
	__asm__ volatile("sub $128, %%rsp\n\t"                               \
			 "push %%rbx\n\t"                                    \
			 "push %%rbp\n\t"                                    \
			 "push %%r12\n\t"                                    \
			 "push %%r13\n\t"                                    \
			 "push %%r14\n\t"                                    \
			 "push %%r15\n\t"                                    \
			 "mov %%rsp, %%r14\n\t"                              \
			 "and $-16, %%rsp\n\t"                               \
			 "mov g_call_fn(%%rip), %%r15\n\t"                                 \
			 "mov g_call_arg(%%rip), %%edi\n\t"                                 \
			 "mov g_rbx(%%rip), %%rbx\n\t"                       \
			 "mov g_rbp(%%rip), %%rbp\n\t"                       \
			 "mov g_r12(%%rip), %%r12\n\t"                       \
			 "mov g_r13(%%rip), %%r13\n\t"                       \
			 "xor %%eax, %%eax\n\t"                              \
			 "mov %%rax, g_rbx(%%rip)\n\t"                       \
			 "mov %%rax, g_rbp(%%rip)\n\t"                       \
			 "mov %%rax, g_r12(%%rip)\n\t"                       \
			 "mov %%rax, g_r13(%%rip)\n\t"                       \
			 "xor %%ecx, %%ecx\n\t"                              \
			 "xor %%edx, %%edx\n\t"                              \
			 "xor %%esi, %%esi\n\t"                              \
			 "xor %%r8d, %%r8d\n\t"                              \
			 "xor %%r9d, %%r9d\n\t"                              \
			 "xor %%r10d, %%r10d\n\t"                            \
			 "xor %%r11d, %%r11d\n\t"                            \
			 "call *%%r15\n\t"                                   \
			 "xor %%ebx, %%ebx\n\t"                              \
			 "xor %%r12d, %%r12d\n\t"                            \
			 "xor %%r13d, %%r13d\n\t"                            \
			 "mov %%r14, %%rsp\n\t"                              \
			 "pop %%r15\n\t"                                     \
			 "pop %%r14\n\t"                                     \
			 "pop %%r13\n\t"                                     \
			 "pop %%r12\n\t"                                     \
			 "pop %%rbp\n\t"                                     \
			 "pop %%rbx\n\t"                                     \
			 "add $128, %%rsp\n\t"                               \
			 :                                                   \
			 :                                                   \
			 : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9",    \
			   "r10", "r11", "memory", "cc")

#endif
