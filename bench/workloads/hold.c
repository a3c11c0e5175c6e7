/*
 * hold — allocates N blocks of 32 bytes from one call site and keeps them
 * all, then prints its resident set size in KiB. Run bare and under the
 * agent, the difference over N is what the agent keeps per live block
 * (its live table, mostly; one stack). Used by bench/metadata, not by
 * bench/run.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

int main(int argc, char **argv)
{
	long n = arg_ops(argc, argv, 1000000);
	unsigned char **keep = malloc((size_t)n * sizeof *keep);
	if (!keep)
		return 1;
	for (long i = 0; i < n; i++) {
		keep[i] = xmalloc(32);
		keep[i][0] = (unsigned char)i;
	}
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2)
		return 1;
	fclose(f);
	printf("%ld\n", resident * 4);
	return 0;
}
