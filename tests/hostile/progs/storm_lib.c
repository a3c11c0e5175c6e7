/* storm_lib — the library storm.c dlopens and dlcloses in a loop. */
#include <stdlib.h>
#include <string.h>

static char *kept;

void storm_lib_touch(int n)
{
	char *p = malloc(64 + n);
	memset(p, 1, 64 + n);
	free(kept);
	kept = p;
}

__attribute__((destructor)) static void storm_lib_fini(void)
{
	free(kept);
	kept = NULL;
}
