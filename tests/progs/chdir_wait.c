/* A daemon's start: leaks 4321 bytes, changes directory to argv[1] (as
 * daemons chdir("/")), prints "ready", then waits in read on stdin and
 * prints "done" at its end. The agent made its output directory absolute
 * at start-up, so its files stay where the options said; `heaptrail
 * leaks PID` and the live endpoint must find them there
 * (requests:moved-cwd). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile kept;

int main(int argc, char **argv)
{
	char *lost = malloc(4321);
	memset(lost, 1, 4321);
	lost = NULL;
	kept = malloc(100);
	if (argc < 2 || chdir(argv[1])) {
		perror("chdir");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0)
		;
	printf("done\n");
	return 0;
}
