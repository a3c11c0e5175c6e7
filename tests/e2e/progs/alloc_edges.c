/*
 * alloc_edges — the C allocator's failures and odd arguments, which must
 * return the same values and set the same errno under heaptrail as bare:
 * malloc(SIZE_MAX), calloc overflow, realloc and reallocarray to huge
 * sizes (the old block intact), realloc(p, 0), posix_memalign with
 * alignments that are not powers of two or smaller than a pointer,
 * aligned_alloc with alignment 0 or 3 or an odd size, memalign(3, n),
 * valloc and pvalloc of huge sizes. errno is set to a marker before each
 * call, so a success that changes it shows too. The blocks that succeed
 * are kept or freed as the program says; cli:same-as-bare compares the
 * output with a bare run, and the "expect in use" line (what it kept)
 * with heaptrail's report.
 *
 * @cli-only
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static size_t kept_bytes, kept_blocks;

static void show(const char *what, const void *p, int err)
{
	printf("%-40s %s errno=%s\n", what, p ? "block" : "NULL",
	       err == 12345 ? "unchanged" : strerror(err));
}

static void keep(void *p, size_t n)
{
	if (!p)
		return;
	memset(p, 1, n);
	KEEP(p);
	kept_bytes += n;
	kept_blocks++;
}

#define CALL(what, expr)                    \
	({                                  \
		errno = 12345;              \
		void *p_ = (expr);          \
		show(what, p_, errno);      \
		p_;                         \
	})

static void pm(size_t align, size_t n, int keepit)
{
	void *p = (void *)1;
	char what[64];
	errno = 12345;
	int r = posix_memalign(&p, align, n);
	int e = errno;
	snprintf(what, sizeof what, "posix_memalign(%zu, %zu)", align, n);
	printf("%-40s returns %s, out %s, errno=%s\n", what, r ? strerror(r) : "0",
	       p == (void *)1 ? "untouched" : p ? "block" : "NULL",
	       e == 12345 ? "unchanged" : strerror(e));
	if (r == 0) {
		if (keepit)
			keep(p, n);
		else
			free(p);
	}
}

int main(void)
{
	size_t big = SIZE_MAX / 2;
	void *p, *q;

	CALL("malloc(SIZE_MAX)", malloc(SIZE_MAX));
	CALL("malloc(SIZE_MAX / 2)", malloc(big));
	CALL("calloc(SIZE_MAX / 2, 4) overflows", calloc(big, 4));
	CALL("calloc(1, SIZE_MAX)", calloc(1, SIZE_MAX));
	keep(CALL("calloc(0, 0)", calloc(0, 0)), 0);

	p = malloc(40);
	q = CALL("realloc(p, SIZE_MAX)", realloc(p, SIZE_MAX));
	q = CALL("reallocarray(p, SIZE_MAX / 2, 4)", reallocarray(p, big, 4));
	q = CALL("realloc(p, SIZE_MAX / 2)", realloc(p, big));
	keep(p, 40);  /* the failures left it alone */
	p = malloc(50);
	q = CALL("realloc(p, 0)", realloc(p, 0));  /* glibc frees it */
	keep(CALL("realloc(NULL, 0)", realloc(NULL, 0)), 0);

	pm(3, 64, 1);
	pm(4, 64, 1);
	pm(24, 64, 1);
	pm(0, 64, 1);
	pm(8, 64, 1);
	pm(64, 100, 1);
	pm(4096, SIZE_MAX / 2, 1);
	pm(1u << 20, 10, 0);

	keep(CALL("aligned_alloc(0, 64)", aligned_alloc(0, 64)), 64);
	keep(CALL("aligned_alloc(3, 64)", aligned_alloc(3, 64)), 64);
	keep(CALL("aligned_alloc(64, 100) odd size", aligned_alloc(64, 100)), 100);
	keep(CALL("aligned_alloc(64, SIZE_MAX / 2)", aligned_alloc(64, big)), 0);
	keep(CALL("memalign(3, 70)", memalign(3, 70)), 70);
	keep(CALL("memalign(0, 80)", memalign(0, 80)), 80);
	keep(CALL("memalign(SIZE_MAX / 2, 8)", memalign(big, 8)), 8);
	keep(CALL("valloc(SIZE_MAX / 2)", valloc(big)), 0);
	keep(CALL("valloc(SIZE_MAX)", valloc(SIZE_MAX)), 0);
	free(CALL("valloc(90)", valloc(90)));
	keep(CALL("pvalloc(SIZE_MAX)", pvalloc(SIZE_MAX)), 0);
	keep(CALL("pvalloc(SIZE_MAX - 100)", pvalloc(SIZE_MAX - 100)), 0);
	free(CALL("pvalloc(10)", pvalloc(10)));
	keep(CALL("malloc(0)", malloc(0)), 0);
	printf("expect in use: %zu bytes in %zu blocks\n", kept_bytes, kept_blocks);
	return 0;
}
