/*
 * killed_bus — dies of SIGBUS (a read of a file mapping past the end of
 * its file).  See killed.h.
 *
 * @proc 0 exit=-7 in_use=192/2
 * @kinds 0 definitely_lost=128/1 still_reachable=64/1
 * @leak 0 leak_before_death 128/1 definitely_lost
 * @leak 0 keep_before_death 64/1 still_reachable
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "killed.h"

int main(void)
{
	char name[] = "/tmp/heaptrail-killed_bus-XXXXXX";
	int fd = mkstemp(name);
	volatile char *m;

	prepare_to_die("a read of a file mapping past the end of its file\n");
	if (fd < 0)
		return 9;
	unlink(name);
	m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 9;
	return m[0];
}
