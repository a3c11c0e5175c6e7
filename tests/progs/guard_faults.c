/*
 * guard_faults — reads and writes that heaptrail's --guard catches
 * (tests/agent/test_guard.py): `guard_faults MODE [SIZE]` allocates a
 * block of SIZE bytes (default 32) in make(), then
 *   overflow   writes one byte past its end in overflow();
 *   uaf        frees it and reads its third byte in use_after();
 *   slack      writes one byte past its end in overflow(), then frees it
 *              in release(): with a SIZE no multiple of 16 (13), the
 *              byte lands before the guarded page, found at the free;
 *   handler    installs a SIGSEGV handler of its own that says "caught"
 *              and exits 3, then overflows as above;
 *   late_handler  the same handler installed first, then a second block
 *              made and overflowed (with `wait`: after an attach);
 *   usable     asks libc's own malloc_usable_size (looked up before any
 *              attach, as a saved pointer) about 50 page-aligned blocks
 *              of 100 bytes and 50 of 4,090: "usable ok" when each is at
 *              least its size;
 *   clean      allocates, reallocs and frees blocks of many sizes
 *              (malloc, calloc, aligned_alloc, posix_memalign, realloc)
 *              and checks their contents: no error.
 * `guard_faults wait MODE [SIZE]` first says "ready" and waits for a
 * line on stdin (time for an attach), then runs MODE.
 * Bare (and under valgrind) none of these faults: the byte written past
 * the end lands in the allocator's next chunk, the freed byte is still
 * there. Built -O0 so that every function keeps its own frame.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *make(size_t n)
{
	char *p = malloc(n);
	memset(p, 'a', n);
	return p;
}

static void overflow(char *p, size_t n)
{
	p[n] = 'x';
}

static void release(char *p)
{
	free(p); /* release's free */
}

static int use_after(char *p)
{
	return ((volatile char *)p)[2];
}

static void caught(int sig)
{
	(void)sig;
	static const char msg[] = "caught\n";
	if (write(1, msg, sizeof msg - 1) < 0)
		_exit(4);
	exit(3);
}

static int clean(void)
{
	int bad = 0;
	for (size_t n = 1; n <= 5000; n = n * 3 / 2 + 1) {
		char *a = malloc(n), *b = calloc(1, n), *c = aligned_alloc(64, (n + 63) & ~63ul), *d;
		if (posix_memalign((void **)&d, 32, n) || !a || !b || !c)
			return 1;
		memset(a, 1, n);
		memset(c, 3, n);
		memset(d, 4, n);
		for (size_t i = 0; i < n; i++)
			bad |= b[i] != 0;
		bad |= ((uintptr_t)c & 63) || ((uintptr_t)d & 31) || ((uintptr_t)a & 15);
		a = realloc(a, 2 * n + 1);
		for (size_t i = 0; i < n; i++)
			bad |= a[i] != 1;
		free(a);
		free(b);
		free(c);
		free(d);
	}
	printf("clean %s\n", bad ? "BAD" : "ok");
	return bad;
}

static size_t (*libc_usable)(void *);

static int usable(void)
{
	int bad = 0;
	for (int i = 0; i < 50; i++) {
		char *p = aligned_alloc(4096, 100), *q = malloc(4090);
		bad |= !p || !q || libc_usable(p) < 100 || libc_usable(q) < 4090;
		free(p);
		free(q);
	}
	printf("usable %s\n", bad ? "BAD" : "ok");
	return bad;
}

int main(int argc, char **argv)
{
	libc_usable = (size_t (*)(void *))dlsym(dlopen("libc.so.6", RTLD_NOW), "malloc_usable_size");
	if (argc > 2 && !strcmp(argv[1], "wait")) {
		char line[64];
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 2;
		argc--, argv++;
	}
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "clean"))
		return clean();
	if (!strcmp(argv[1], "usable"))
		return libc_usable ? usable() : 2;
	size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 32;
	char *p = make(n);
	if (!strcmp(argv[1], "handler")) {
		signal(SIGSEGV, caught);
		overflow(p, n);
		printf("overflow done\n");
	} else if (!strcmp(argv[1], "overflow")) {
		overflow(p, n);
		printf("overflow done\n");
	} else if (!strcmp(argv[1], "slack")) {
		overflow(p, n);
		release(p);
		printf("slack done\n");
	} else if (!strcmp(argv[1], "late_handler")) {
		/* its handler set first (at an attach, after it), then a
		 * block made and overflowed as above */
		signal(SIGSEGV, caught);
		char *q = make(n);
		overflow(q, n);
		printf("overflow done\n");
	} else if (!strcmp(argv[1], "uaf")) {
		free(p);
		printf("read %d\n", use_after(p));
	}
	return 0;
}
