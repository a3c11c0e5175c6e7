/*
 * alloc_edge — the allocator's edge cases must give the same return
 * values and errno as bare glibc: malloc(SIZE_MAX), calloc overflow,
 * realloc to SIZE_MAX (the old block stays valid), reallocarray
 * overflow, posix_memalign / aligned_alloc / memalign with odd and huge
 * alignments, pvalloc(SIZE_MAX), malloc(0), and operator new(nothrow)
 * with an installed new_handler (which must be called, then give up).
 *
 * Expected: nothing lost (every successful allocation is freed).
 *
 * @kinds 0
 */
#include <errno.h>
#include <malloc.h>
#include <new>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void show(const char *what, void *p, int err, size_t align = 0)
{
	printf("%-34s -> %s", what, p ? "ptr" : "NULL");
	if (!p)
		printf(", errno %s", err == ENOMEM ? "ENOMEM" : err == EINVAL ? "EINVAL" : err == 0 ? "0" : "other");
	if (p && align)
		printf(", aligned %s", ((uintptr_t)p % align) ? "no" : "yes");
	printf("\n");
}

#define TRY(label, expr, align)                                                                    \
	do {                                                                                       \
		errno = 0;                                                                         \
		void *p_ = (expr);                                                                 \
		show(label, p_, errno, align);                                                     \
		free(p_);                                                                          \
	} while (0)

static int handler_calls;
static void on_new_failure()
{
	handler_calls++;
	std::set_new_handler(nullptr);
}

int main()
{
	TRY("malloc(SIZE_MAX)", malloc(SIZE_MAX), 0);
	TRY("malloc(SIZE_MAX/2)", malloc(SIZE_MAX / 2), 0);
	TRY("malloc(0)", malloc(0), 16);
	TRY("calloc(SIZE_MAX/2, 3)", calloc(SIZE_MAX / 2, 3), 0);
	TRY("calloc(1<<33, 1<<33)", calloc((size_t)1 << 33, (size_t)1 << 33), 0);
	TRY("calloc(0, 0)", calloc(0, 0), 0);
	TRY("reallocarray(NULL, SIZE_MAX, 2)", reallocarray(NULL, SIZE_MAX, 2), 0);
	TRY("aligned_alloc(3, 10)", aligned_alloc(3, 10), 0);
	TRY("aligned_alloc(64, 100)", aligned_alloc(64, 100), 64);
	TRY("aligned_alloc(4096, SIZE_MAX)", aligned_alloc(4096, SIZE_MAX), 0);
	TRY("memalign(3, 10)", memalign(3, 10), 4);
	TRY("memalign(1<<20, 10)", memalign((size_t)1 << 20, 10), (size_t)1 << 20);
	TRY("memalign(1<<62, 10)", memalign((size_t)1 << 62, 10), 0);
	TRY("valloc(1)", valloc(1), 4096);
	TRY("pvalloc(SIZE_MAX)", pvalloc(SIZE_MAX), 0);
	TRY("pvalloc(1)", pvalloc(1), 4096);

	static const size_t aligns[] = { 0, 1, 3, 4, 8, 24, 32, 4096, (size_t)1 << 40 };
	for (size_t a : aligns) {
		void *p = (void *)0x1;
		errno = 12345;
		int rc = posix_memalign(&p, a, 100);
		printf("posix_memalign(%zu, 100) -> %s, errno %s, p %s\n", a,
		       rc == 0 ? "0" : rc == EINVAL ? "EINVAL" : rc == ENOMEM ? "ENOMEM" : "other",
		       errno == 12345 ? "unchanged" : "changed",
		       rc == 0 ? (((uintptr_t)p % a) ? "misaligned" : "aligned") : (p == (void *)0x1 ? "untouched" : "changed"));
		if (rc == 0)
			free(p);
	}

	void *q = malloc(100);
	memset(q, 5, 100);
	errno = 0;
	void *r = realloc(q, SIZE_MAX);
	printf("realloc(p, SIZE_MAX) -> %s, errno %s, old block %s\n", r ? "ptr" : "NULL",
	       errno == ENOMEM ? "ENOMEM" : "other", ((unsigned char *)q)[99] == 5 ? "intact" : "changed");
	free(r ? r : q);

	std::set_new_handler(on_new_failure);
	void *n = operator new(SIZE_MAX / 2, std::nothrow);
	printf("new(nothrow) huge -> %s, new_handler called %d time(s)\n", n ? "ptr" : "NULL", handler_calls);
	std::set_new_handler(on_new_failure);
	handler_calls = 0;
	try {
		void *m = operator new(SIZE_MAX / 2);
		printf("new huge -> ptr\n");
		operator delete(m);
	} catch (const std::bad_alloc &) {
		printf("new huge -> bad_alloc, new_handler called %d time(s)\n", handler_calls);
	}
	return 0;
}
