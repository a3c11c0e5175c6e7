/*
 * dlopen_lib — built as libdlleak.so beside dlopen_leak, which loads it,
 * calls dl_lib_leak, and unloads it again.  The block outlives the code
 * that allocated it: its stack names a module that is gone at exit.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void *dl_lib_leak(size_t n)
{
	char *p = malloc(n); /* @site dl_lib_leak */
	memset(p, 'd', n);
	return p;
}
