/*
 * dlsym_alloc — allocates through allocator addresses it got from dlsym,
 * as Python's ctypes does (CDLL("libc.so.6").malloc): with libc's own
 * handle, with RTLD_DEFAULT, and with RTLD_NEXT from a library that
 * wraps puts (dlsym_wrap.c; linked in, so puts reaches it first).
 *
 * Leaks 50 blocks of 4,000 bytes through dlsym(libc, "malloc") and 10
 * of 300 through dlsym(libc, "calloc"); frees through dlsym(libc,
 * "free") 20 blocks malloc'd through it and one malloc'd directly.
 * Prints "wrapped: done": the wrapper found libc's puts with RTLD_NEXT.
 * Expected: definitely lost 203,000 bytes in 60 blocks.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void *(*dl_malloc)(size_t);
static void *(*dl_calloc)(size_t, size_t);
static void (*dl_free)(void *);

NOINLINE static void leak_dlsym_malloc(void)
{
	char *p = dl_malloc(4000); /* @site leak_dlsym_malloc */
	KEEP(p);
	p[0] = 1;
}

NOINLINE static void leak_dlsym_calloc(void)
{
	char *p = dl_calloc(3, 100); /* @site leak_dlsym_calloc */
	KEEP(p);
	p[0] = 1;
}

int main(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW);
	if (!libc)
		return 2;
	dl_malloc = (void *(*)(size_t))dlsym(libc, "malloc");
	dl_calloc = (void *(*)(size_t, size_t))dlsym(libc, "calloc");
	dl_free = (void (*)(void *))dlsym(libc, "free");
	void *(*def_malloc)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
	if (!dl_malloc || !dl_calloc || !dl_free || !def_malloc)
		return 3;
	for (int i = 0; i < 50; i++)
		leak_dlsym_malloc();
	for (int i = 0; i < 10; i++)
		leak_dlsym_calloc();
	for (int i = 0; i < 20; i++) {
		char *p = dl_malloc(100);
		KEEP(p);
		dl_free(p);
	}
	char *q = def_malloc(77);
	KEEP(q);
	dl_free(q);
	puts("done");
	return 0;
}
