/*
 * kind_register__Exit — blocks kept only in callee-saved registers (rbx,
 * rbp) when the program calls _Exit(), which runs no exit handler: still
 * reachable, as memcheck says.  A scan that starts above the frames of
 * _Exit, or takes only the registers of the agent's own frames, calls
 * them definitely lost.  See kinds_regs.h.  x86-64 only.
 *
 * No block in r12 here: memcheck scans no register of a thread that has
 * exited, only the stack above its last stack pointer, so at _Exit what
 * it finds depends on which registers the frames of its own freeres
 * wrapper (run at exit_group) happen to save: rbx and rbp, not r12-r15.
 * heaptrail takes all of them as roots at _Exit.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable 111 + 222 = 333/2, definitely lost 55/1
 *   in use at exit: 388 bytes in 3 blocks
 *
 * @proc 0 exit=0 in_use=388/3
 * @kinds 0 definitely_lost=55/1 still_reachable=333/2
 * @leak 0 fill_registers 333/2 still_reachable
 * @leak 0 fill_registers 55/1 definitely_lost
 */
#include <stdio.h>
#include <stdlib.h>

#include "kinds_regs.h"

int main(void)
{
	fill_registers(0);
	scrub_stack();
	printf("_Exit with pointers in rbx, rbp\n");
	fflush(stdout);
	CALL_WITH_REGISTERS(_Exit, 0);
	return 1;
}
