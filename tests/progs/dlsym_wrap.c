/*
 * dlsym_wrap — a library that wraps puts the way interposers do: it
 * finds the next definition with dlsym(RTLD_NEXT, "puts"), which depends
 * on the caller's address. Were the answer relative to anything but this
 * library, it would find this very puts again and recurse for ever.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int puts(const char *s)
{
	static int (*next)(const char *);
	if (!next)
		next = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
	if (!next)
		return EOF;
	fputs("wrapped: ", stdout);
	return next(s);
}
