/*
 * kind_register_check — blocks kept only in callee-saved registers (rbx,
 * rbp, r12) while the program asks for a leak check:
 * heaptrail_leak_check(HEAPTRAIL_LEAKS_INCREASED) under heaptrail,
 * VALGRIND_DO_ADDED_LEAK_CHECK under valgrind (which scans the calling
 * thread's registers and its stack above the stack pointer).  They are
 * still reachable; the control in r13 (~address) is definitely lost.
 * Afterwards the program frees all four: nothing is in use at exit.
 * See kinds_regs.h.  x86-64 only.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   check 1: still reachable +666/3, definitely lost +55/1
 *   in use at exit: 0 bytes in 0 blocks
 *
 * @proc 0 exit=0 in_use=0/0
 * @kinds 0
 * @check 1 still_reachable 666/3 fill_registers
 * @check 1 definitely_lost 55/1 fill_registers
 */
#include <stdio.h>
#include <stdlib.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif

#include "kinds_regs.h"

#ifndef HEAPTRAIL_LEAKS_INCREASED
#define HEAPTRAIL_LEAKS_INCREASED 1
#endif
int heaptrail_leak_check(int flags) __attribute__((weak));

NOINLINE void valgrind_check(int flags)
{
	(void)flags;
#ifdef RUNNING_ON_VALGRIND
	VALGRIND_DO_ADDED_LEAK_CHECK;
#endif
}

int main(void)
{
	int i;

	fill_registers(1);
	scrub_stack();
#ifdef RUNNING_ON_VALGRIND
	if (RUNNING_ON_VALGRIND) {
		CALL_WITH_REGISTERS(valgrind_check, HEAPTRAIL_LEAKS_INCREASED);
	} else
#endif
	if (heaptrail_leak_check) {
		CALL_WITH_REGISTERS(heaptrail_leak_check, HEAPTRAIL_LEAKS_INCREASED);
	}
	for (i = 0; i < 4; i++)
		free((void *)~g_keep[i]);
	printf("a leak check with pointers in rbx, rbp, r12\n");
	return 0;
}
