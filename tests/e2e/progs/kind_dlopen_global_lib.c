/*
 * kind_dlopen_global_lib — built as libkeepglobal.so beside
 * kind_dlopen_global, which dlopens it and never dlcloses it.  It keeps
 * blocks in its own writable data: an initialised global (.data), a
 * static (.bss), and a __thread variable (dynamic TLS: a block glibc
 * allocates for the module in each thread that touches it).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static long lib_data_init = 5;
void *lib_data = &lib_data_init;
static void *lib_bss;
static __thread void *lib_tls;

NOINLINE void *lib_block(size_t n, int fill)
{
	void *p = malloc(n); /* @site lib_block */

	memset(p, fill, n);
	return p;
}

/* Each keeps a new block in one of the library's variables. */
NOINLINE void lib_keep_in_data(void)
{
	*(void *volatile *)&lib_data = lib_block(123, 'd');
}

NOINLINE void lib_keep_in_bss(void)
{
	*(void *volatile *)&lib_bss = lib_block(45, 'b');
}

NOINLINE void lib_keep_in_tls(void)
{
	*(void *volatile *)&lib_tls = lib_block(67, 't');
}
