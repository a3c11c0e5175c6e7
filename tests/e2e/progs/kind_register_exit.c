/*
 * kind_register_exit — blocks kept only in callee-saved registers (rbx,
 * rbp, r12) when the program calls exit(): still reachable, as memcheck
 * says (exit's frames save them on the stack above the stack pointer, or
 * they are still in the registers).  A scan that starts above exit's
 * frames, or that takes only its own registers, calls them definitely
 * lost.  See kinds_regs.h.  x86-64 only.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable 111 + 222 + 333 = 666/3, definitely lost 55/1
 *   in use at exit: 721 bytes in 4 blocks
 *
 * @proc 0 exit=0 in_use=721/4
 * @kinds 0 definitely_lost=55/1 still_reachable=666/3
 * @leak 0 fill_registers 666/3 still_reachable
 * @leak 0 fill_registers 55/1 definitely_lost
 */
#include <stdio.h>
#include <stdlib.h>

#include "kinds_regs.h"

int main(void)
{
	fill_registers(1);
	scrub_stack();
	printf("exit with pointers in rbx, rbp, r12\n");
	fflush(stdout);
	CALL_WITH_REGISTERS(exit, 0);
	return 1;
}
