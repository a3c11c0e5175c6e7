/*
 * regs — at exit, the only pointer to a block is in a callee-saved
 * register: the program moves it into REG (rbx, rbp, r12 or r15) in
 * assembly and calls exit(0) or _Exit(0) straight away, so no other copy
 * is left where the program can see it.  exit's own frames save the
 * register on the stack, which valgrind scans; the block is still
 * reachable for valgrind, and heaptrail must agree (it once started its
 * scan above those slots, or below the saved registers, and said
 * "definitely lost", failing CI on correct programs).
 *
 * Expected (valgrind): 77 bytes in 1 block still reachable.  (Not
 * r15 with _Exit: valgrind calls that block definitely lost, as it does
 * not see the register there, while heaptrail reads it: no case.)
 *
 * @case rbx-exit rbx exit
 * @case rbp-exit rbp exit
 * @case r12-exit r12 exit
 * @case r15-exit r15 exit
 * @case rbx-Exit rbx _Exit
 * @kinds 0 still_reachable=77/1
 * @vg
 */
#include "hostile.h"

/* void leave_with_REG(void *p, void (*leave)(int)): REG = p; leave(0) */
#define LEAVE_WITH(reg)                                                   \
	__asm__(".text\n.globl leave_with_" #reg "\n"                     \
		".type leave_with_" #reg ", @function\n"                  \
		"leave_with_" #reg ":\n"                                  \
		"\tmov %rdi, %" #reg "\n"                                 \
		"\txor %edi, %edi\n"                                      \
		"\txor %eax, %eax\n"                                      \
		"\tsub $8, %rsp\n"                                        \
		"\tcall *%rsi\n"                                          \
		"\tud2\n");                                               \
	void leave_with_##reg(void *p, void (*leave)(int));
LEAVE_WITH(rbx)
LEAVE_WITH(rbp)
LEAVE_WITH(r12)
LEAVE_WITH(r15)

NOINLINE static void *make(void)
{
	char *p = malloc(77);
	memset(p, 'r', 77);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		die("usage: regs rbx|rbp|r12|r15 exit|_Exit");
	say("regs: leaving with the block in ");
	say(argv[1]);
	say("\n");
	void (*leave)(int) = strcmp(argv[2], "exit") ? _Exit : exit;
	const char *r = argv[1];
	void (*with)(void *, void (*)(int)) =
		!strcmp(r, "rbx") ? leave_with_rbx : !strcmp(r, "rbp") ? leave_with_rbp :
		!strcmp(r, "r12") ? leave_with_r12 : leave_with_r15;
	scrub_stack();
	with(make(), leave);
	return 1;
}
