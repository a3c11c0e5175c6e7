/*
 * dlopen_leak — a leak from a library that was dlopen'ed, then
 * dlclose'd: libdlleak.so (dlopen_lib.c) mallocs and returns a block,
 * the program drops it and unloads the library, and checks with
 * RTLD_NOLOAD that the library really is gone.  Reporting the leak
 * needs the module list as it was when the block was allocated.
 *
 * The library is found beside the executable (/proc/self/exe), so the
 * program takes no arguments.  dlopen's own bookkeeping is freed by
 * dlclose.
 *
 * Expected (valgrind memcheck, Debian 12):
 *   dl_lib_leak 1 x 555, called from call_into_library
 *   in use at exit: 555 bytes in 1 blocks
 *
 * @lib dlopen_lib.c libdlleak.so
 * @link -ldl
 * @proc 0 exit=0 in_use=555/1
 * @leak 0 dl_lib_leak 555/1
 * @leak 0 call_into_library 555/1
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

typedef void *(*leak_fn)(size_t);

NOINLINE int call_into_library(leak_fn fn)
{
	char *p = fn(555);
	int first = p[0];

	KEEP(p);
	return first;
}

static int lib_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n < 0)
		return -1;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash || (size_t)(slash - buf) + sizeof("/libdlleak.so") > len)
		return -1;
	strcpy(slash, "/libdlleak.so");
	return 0;
}

int main(void)
{
	char path[PATH_MAX];
	void *h;
	leak_fn fn;
	int c;

	if (lib_path(path, sizeof(path)) != 0) {
		fprintf(stderr, "dlopen_leak: cannot find own path\n");
		return 1;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen_leak: %s\n", dlerror());
		return 1;
	}
	fn = (leak_fn)dlsym(h, "dl_lib_leak");
	if (!fn) {
		fprintf(stderr, "dlopen_leak: no dl_lib_leak in library\n");
		return 1;
	}
	c = call_into_library(fn);
	if (dlclose(h) != 0) {
		fprintf(stderr, "dlopen_leak: dlclose failed\n");
		return 1;
	}
	printf("called library: %c\n", c);
	printf("library unloaded: %s\n",
	       dlopen(path, RTLD_NOW | RTLD_NOLOAD) ? "no" : "yes");
	return 0;
}
