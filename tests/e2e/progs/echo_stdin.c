/*
 * echo_stdin — copies stdin to stdout line by line ("echo: LINE"),
 * keeping a leaked copy of each line, so stdin and stdout must both pass
 * through heaptrail untouched.  The runner feeds "alpha\nbeta\ngamma\n".
 *
 * Expected (valgrind memcheck, Debian 12):
 *   leak_in_echo: one block of strlen(line)+1 per line:
 *     "alpha\n" 7 + "beta\n" 6 + "gamma\n" 7 = 20 bytes in 3 blocks
 *   in use at exit: 20 bytes in 3 blocks
 *
 * @stdin alpha\nbeta\ngamma\n
 * @proc 0 exit=0 in_use=20/3
 * @leak 0 leak_in_echo 20/3
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE char *leak_in_echo(const char *line)
{
	size_t n = strlen(line) + 1;
	char *copy = malloc(n); /* @site leak_in_echo */

	memcpy(copy, line, n);
	KEEP(copy);
	return copy;
}

int main(void)
{
	char line[256];
	int count = 0;

	while (fgets(line, sizeof(line), stdin)) {
		char *copy = leak_in_echo(line);

		printf("echo: %s", copy);
		count++;
	}
	printf("%d lines\n", count);
	return 0;
}
