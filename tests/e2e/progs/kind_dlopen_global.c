/*
 * kind_dlopen_global — blocks kept only in variables of a library that
 * was dlopen'ed and is still loaded at exit (libkeepglobal.so, from
 * kind_dlopen_global_lib.c): its writable segments are roots like the
 * program's own, so the blocks are still reachable.  What dlopen itself
 * allocates (the library's link map and search lists, reachable from
 * the loader's data) stays in use too, still reachable.  The library is
 * found beside the executable (/proc/self/exe); the program drops every
 * pointer it got back.
 *
 *   lib_keep_in_data  123/1  the library's initialised global
 *   lib_keep_in_bss    45/1  the library's static (.bss)
 *   lib_keep_in_tls    67/1  the library's __thread variable, in main's
 *                            dynamic TLS block for the library, which
 *                            glibc malloc'ed on first use (8/1, from
 *                            __tls_get_addr; main's DTV, made by the
 *                            loader before the heap existed, points to it)
 *   dlopen            the loader's bookkeeping: link map 1,243/1, its
 *                     name 19/1, origin 147/1 (name + 128), version
 *                     table 96/1
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable 1,748/8
 *   in use at exit: 1,748 bytes in 8 blocks
 *
 * @lib kind_dlopen_global_lib.c libkeepglobal.so
 * @link -ldl
 * @proc 0 exit=0 in_use=1748/8
 * @kinds 0 still_reachable=1748/8
 * @leak 0 lib_keep_in_data 123/1 still_reachable
 * @leak 0 lib_keep_in_bss 45/1 still_reachable
 * @leak 0 lib_keep_in_tls 75/2 still_reachable
 * @leak 0 dl_open_worker 1505/4 still_reachable
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kinds.h"

/* From the executable's directory, by a relative name: the loader's
 * copies of the name and of its origin then have the same sizes wherever
 * the tests are built (with an absolute name they grow with the path;
 * with a relative one the origin buffer is the name + 128 bytes, as long
 * as the directory's path is shorter than that). */
NOINLINE int load_and_keep(void)
{
	static const char *const fns[] = {
		"lib_keep_in_data", "lib_keep_in_bss", "lib_keep_in_tls",
	};
	char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	void *lib;
	size_t i;

	if (n <= 0)
		return -1;
	dir[n] = 0;
	*strrchr(dir, '/') = 0;
	if (chdir(dir))
		return -1;
	lib = dlopen("./libkeepglobal.so", RTLD_NOW);
	if (!lib)
		return -1;
	for (i = 0; i < sizeof(fns) / sizeof(*fns); i++) {
		void (*fn)(void) = (void (*)(void))dlsym(lib, fns[i]);

		if (!fn)
			return -1;
		fn();
	}
	return 0;
}

int main(void)
{
	if (load_and_keep())
		return 1;
	scrub_stack();
	printf("kept blocks in a library that stays loaded\n");
	return 0;
}
