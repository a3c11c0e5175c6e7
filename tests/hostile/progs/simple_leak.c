/*
 * simple_leak — a plain program with known leaks, for the runner's cases
 * about the run itself (output directory, options, preloaded allocators,
 * timeout): one block definitely lost, one still reachable.  With an
 * argument "marker FILE" it first creates FILE (so the runner can tell
 * whether it was started at all); with "sleep MS" it sleeps before
 * exiting; "pidfile FILE" writes its pid there; "chdir DIR" changes
 * directory (as daemons do before they exit).
 *
 * Expected: 2,500 bytes in 1 block definitely lost, 40 bytes in 1 block
 * still reachable.
 *
 * @kinds 0 definitely_lost=2500/1 still_reachable=40/1
 * @vg
 */
#include <fcntl.h>

#include "hostile.h"

static char *reachable;

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "marker") || !strcmp(argv[i], "pidfile")) {
			FILE *f = fopen(argv[i + 1], "w");
			if (!f)
				die("%s", argv[i + 1]);
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		} else if (!strcmp(argv[i], "sleep"))
			nap_ms(atol(argv[i + 1]));
		else if (!strcmp(argv[i], "chdir") && chdir(argv[i + 1]))
			die("chdir %s", argv[i + 1]);
	}
	STORE(reachable, malloc(40));
	memset(reachable, 1, 40);
	leak_bytes(2500);
	scrub_stack();
	printf("simple_leak: done\n");
	return 0;
}
