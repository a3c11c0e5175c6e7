/*
 * rlimit_nofile — RLIMIT_NOFILE lowered to 3 (only stdin, stdout,
 * stderr) before exit: the agent may not be able to open its report.
 * Then it must say so and fail the run (@ci: with --error-exitcode a
 * leaking program never passes).
 *
 * Expected: 4,000 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=4000/1
 * @vg
 * @ci
 * @unwritable
 */
#include <sys/resource.h>

#include "hostile.h"

int main(void)
{
	leak_bytes(4000);
	scrub_stack();
	struct rlimit rl = { 3, 3 };
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit");
	printf("rlimit_nofile: RLIMIT_NOFILE is 3\n");
	return 0;
}
