/*
 * killed_abort — dies of SIGABRT (abort()).  See killed.h.
 *
 * @proc 0 exit=-6 in_use=192/2
 * @kinds 0 definitely_lost=128/1 still_reachable=64/1
 * @leak 0 leak_before_death 128/1 definitely_lost
 * @leak 0 keep_before_death 64/1 still_reachable
 */
#include <signal.h>

#include "killed.h"

int main(void)
{
	prepare_to_die("abort()\n");
	abort();
	return 0;
}
