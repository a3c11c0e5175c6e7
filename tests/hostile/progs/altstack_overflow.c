/*
 * altstack_overflow — a SIGSEGV handler on a sigaltstack catches a stack
 * overflow (unbounded recursion) and calls exit(3): the agent's exit
 * report then runs inside that handler, on the alternate stack
 * (SIGSTKSZ bytes, glibc's usual 8 KiB or more), with the real stack
 * used up.
 *
 * Expected: 3,000 bytes in 1 block definitely lost; exit 3.
 *
 * @exit 3
 * @kinds 0 definitely_lost=3000/1
 * @modes exact sample
 */
#include <signal.h>
#include <sys/resource.h>

#include "hostile.h"

/* static, not malloc'd: a block would be "still reachable" through this
 * pointer, with a size that depends on the CPU (sysconf's SIGSTKSZ) */
static char altstack[1 << 16];

static void on_segv(int sig)
{
	(void)sig;
	static const char msg[] = "altstack_overflow: caught the overflow\n";
	write(1, msg, sizeof msg - 1);
	exit(3);
}

NOINLINE static int recurse(volatile char *prev, int depth)
{
	volatile char pad[512];
	pad[0] = (char)depth;
	pad[511] = prev ? prev[0] : 0;
	return recurse(pad, depth + 1) + pad[1];
}

int main(void)
{
	/* a small stack, so the overflow comes fast */
	struct rlimit rl = { 8 << 20, 8 << 20 };
	setrlimit(RLIMIT_STACK, &rl);
	long size = sysconf(_SC_SIGSTKSZ);
	if (size < SIGSTKSZ)
		size = SIGSTKSZ;
	if (size > (long)sizeof altstack)
		size = sizeof altstack;
	stack_t ss = { .ss_sp = altstack, .ss_size = size, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL))
		die("sigaltstack");
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_segv;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGSEGV, &sa, NULL);
	leak_bytes(3000);
	scrub_stack();
	fflush(stdout);
	return recurse(NULL, 0);
}
