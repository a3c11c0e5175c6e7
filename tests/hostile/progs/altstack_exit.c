/*
 * altstack_exit — the exit report written from a signal handler that runs
 * on a small sigaltstack (16 KiB, about glibc's SIGSTKSZ on machines with
 * big vector registers): SIGUSR1's handler calls exit(4).
 *
 * Expected: 1,500 bytes in 1 block definitely lost; exit 4.  The alternate
 * stack itself is a global array.
 *
 * @exit 4
 * @kinds 0 definitely_lost=1500/1
 * @vg
 */
#include <signal.h>

#include "hostile.h"

static char altstack[16384] __attribute__((aligned(16)));

static void on_usr1(int sig)
{
	(void)sig;
	static const char msg[] = "altstack_exit: exiting from the handler\n";
	write(1, msg, sizeof msg - 1);
	exit(4);
}

int main(void)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL))
		die("sigaltstack");
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	leak_bytes(1500);
	scrub_stack();
	raise(SIGUSR1);
	return 0;
}
