/*
 * leaks_sigdfl — a daemon that resets every signal disposition to SIG_DFL
 * once it runs (as many do after a fork), then works for 2.5 s.
 * The agent interposes signal()/sigaction() on the signals it owns: the
 * program's SIG_DFL is recorded as the program's disposition (a plain
 * kill of the leak check signal still kills it, as bare) while the
 * agent's handler stays in the kernel. `heaptrail leaks PID` sends no
 * signal (it asks by ptrace), and a sigqueue with heaptrail's value
 * would be the agent's: the calls must succeed and the program survive
 * with its normal output.
 *
 * Expected: 1,234 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=1234/1
 * @vg
 * @leaks-calls
 */
#include <signal.h>

#include "hostile.h"

int main(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int i = 0; i < 25; i++)
		nap_ms(100);
	leak_bytes(1234);
	scrub_stack();
	printf("leaks_sigdfl: survived\n");
	return 0;
}
