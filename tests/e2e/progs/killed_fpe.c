/*
 * killed_fpe — dies of SIGFPE (an integer division by zero).  See
 * killed.h.
 *
 * @proc 0 exit=-8 in_use=192/2
 * @kinds 0 definitely_lost=128/1 still_reachable=64/1
 * @leak 0 leak_before_death 128/1 definitely_lost
 * @leak 0 keep_before_death 64/1 still_reachable
 */
#include <signal.h>

#include "killed.h"

int main(void)
{
	volatile int num = 100, zero = 0;

	prepare_to_die("an integer division by zero\n");
	return num / zero;
}
