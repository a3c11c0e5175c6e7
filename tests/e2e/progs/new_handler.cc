/*
 * new_handler — operator new's failure rules, which must be libstdc++'s
 * with heaptrail as without: every form calls the installed new_handler
 * until it succeeds or no handler is left; then the throwing forms throw
 * std::bad_alloc and the nothrow forms return NULL; an alignment that is
 * not a power of two fails at once, without the handler. The program
 * prints what it saw;
 * cli:same-as-bare compares that with a bare run, and its "expect in use"
 * line with heaptrail's report.
 *
 * valgrind cannot run it (its operator new aborts instead of throwing).
 *
 * @cli-only
 */
#include <cstdint>
#include <cstdio>
#include <new>

#include "common.h"

static int calls, limit;

static void handler()
{
	calls++;
	if (calls >= limit)
		std::set_new_handler(nullptr);
}

static void arm(int n)
{
	calls = 0;
	limit = n;
	std::set_new_handler(handler);
}

static const size_t huge = SIZE_MAX / 2;

int main()
{
	arm(3);
	void *p = operator new(huge, std::nothrow);
	printf("new(nothrow) huge: %s, handler called %d times\n", p ? "block" : "NULL", calls);
	arm(2);
	p = operator new[](huge, std::nothrow);
	printf("new[](nothrow) huge: %s, handler called %d times\n", p ? "block" : "NULL", calls);
	arm(4);
	try {
		p = operator new(huge);
		printf("new huge: returned\n");
	} catch (const std::bad_alloc &) {
		printf("new huge: bad_alloc, handler called %d times\n", calls);
	}
	arm(2);
	try {
		p = operator new[](huge);
		printf("new[] huge: returned\n");
	} catch (const std::bad_alloc &) {
		printf("new[] huge: bad_alloc, handler called %d times\n", calls);
	}
	arm(3);
	try {
		p = operator new(huge, std::align_val_t(64));
		printf("aligned new huge: returned\n");
	} catch (const std::bad_alloc &) {
		printf("aligned new huge: bad_alloc, handler called %d times\n", calls);
	}
	arm(3);
	p = operator new[](huge, std::align_val_t(64), std::nothrow);
	printf("aligned new[](nothrow) huge: %s, handler called %d times\n", p ? "block" : "NULL",
	       calls);
	arm(3);
	try {
		p = operator new(64, std::align_val_t(48));
		printf("new align 48: returned\n");
	} catch (const std::bad_alloc &) {
		printf("new align 48: bad_alloc, handler called %d times\n", calls);
	}
	arm(3);
	p = operator new(64, std::align_val_t(48), std::nothrow);
	printf("new(nothrow) align 48: %s, handler called %d times\n", p ? "block" : "NULL", calls);

	/* A handler that throws: the throwing form passes it on, the
	 * nothrow form returns NULL. */
	std::set_new_handler([] { throw std::bad_alloc(); });
	try {
		p = operator new(huge);
	} catch (const std::bad_alloc &) {
		printf("new huge, throwing handler: bad_alloc\n");
	}
	p = operator new(huge, std::nothrow);
	printf("new(nothrow) huge, throwing handler: %s\n", p ? "block" : "NULL");

	/* Successes, kept: the report must count them. */
	std::set_new_handler(nullptr);
	char *kept1 = new char[100];
	char *kept2 = static_cast<char *>(operator new(200, std::align_val_t(64)));
	char *kept3 = new (std::nothrow) char[300];
	KEEP(kept1);
	KEEP(kept2);
	KEEP(kept3);
	printf("expect in use: 600 bytes in 3 blocks\n");
	return 0;
}
