/*
 * heuristic_reachable — blocks reachable only through a pointer into
 * their middle, of the four shapes memcheck's leak-check heuristics
 * (default: all) accept as reachable, each next to a block of a shape
 * they do not accept, which stays possibly lost.
 *
 *   newarray             g_gadgets = new Gadget[3]: Gadget has a
 *                        destructor, so new[] puts the element count (3)
 *                        in the first 8 bytes and returns block + 8;
 *                        (56 - 8) % 3 == 0
 *   length64             a length-prefixed buffer, 8 + 40 bytes, the
 *                        first 8 bytes holding 40, kept as block + 8
 *   stdstring            a pre-C++11-ABI (copy-on-write) std::string:
 *                        its object points 24 bytes into its heap
 *                        block (length, capacity, refcount, chars)
 *   multipleinheritance  g_second = new Both: a pointer to the second
 *                        base (block + 16) holds a vtable pointer, and so
 *                        does the block's first word
 *   controls             a 32-byte block whose first word is 0, and an
 *                        8 + 40-byte block whose length word says 7, both
 *                        kept as block + 8: no heuristic accepts them
 *                        (0 elements; 40 is not 7, nor a multiple of
 *                        it), so they are possibly lost
 *
 * The COW std::string lives in a static buffer (placement new), so no
 * destructor frees it at exit.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   make_gadgets   56/1 still reachable (newarray)
 *   make_counted   48/1 still reachable (length64)
 *   make_cow_string 55/1 still reachable (stdstring: 24 + 30 + 1)
 *   make_both      40/1 still reachable (multipleinheritance)
 *   make_zero_head 32/1, make_bad_length 48/1: possibly lost
 *   in use at exit: 279 bytes in 6 blocks
 *
 * @proc 0 exit=0 in_use=279/6
 * @kinds 0 possibly_lost=80/2 still_reachable=199/4
 * @heuristic 0 newarray 56/1
 * @heuristic 0 length64 48/1
 * @heuristic 0 stdstring 55/1
 * @heuristic 0 multipleinheritance 40/1
 * @leak 0 make_gadgets 56/1 still_reachable
 * @leak 0 make_counted 48/1 still_reachable
 * @leak 0 make_cow_string 55/1 still_reachable
 * @leak 0 make_both 40/1 still_reachable
 * @leak 0 make_zero_head 32/1 possibly_lost
 * @leak 0 make_bad_length 48/1 possibly_lost
 */
#define _GLIBCXX_USE_CXX11_ABI 0 /* the copy-on-write std::string */

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "kinds.h"

struct Gadget {
	long a, b;
	Gadget() : a(1), b(2) {}
	~Gadget() { a = 0; }
};

struct First {
	virtual ~First() {}
	long f = 1;
};

struct Second {
	virtual ~Second() {}
	long s = 2;
};

struct Both : First, Second {
	long both = 3;
};

static Gadget *g_gadgets;
static char *g_counted;
static Second *g_second;
static char *g_zero_head;
static char *g_bad_length;
alignas(std::string) static char g_cow_buf[sizeof(std::string)];

NOINLINE void make_gadgets()
{
	STORE(g_gadgets, new Gadget[3]); /* @site make_gadgets */
}

NOINLINE void make_counted()
{
	uint64_t *p = (uint64_t *)malloc(8 + 40); /* @site make_counted */

	p[0] = 40;
	memset(p + 1, 'c', 40);
	STORE(g_counted, (char *)(p + 1));
}

NOINLINE void make_cow_string()
{
	new (g_cow_buf) std::string("thirty characters, on the heap"); // 30
}

NOINLINE void make_both()
{
	STORE(g_second, static_cast<Second *>(new Both)); /* @site make_both */
}

NOINLINE void make_zero_head()
{
	char *p = (char *)calloc(1, 32); /* @site make_zero_head */

	STORE(g_zero_head, p + 8);
}

NOINLINE void make_bad_length()
{
	uint64_t *p = (uint64_t *)malloc(8 + 40); /* @site make_bad_length */

	p[0] = 7;
	memset(p + 1, 'b', 40);
	STORE(g_bad_length, (char *)(p + 1));
}

int main()
{
	make_gadgets();
	make_counted();
	make_cow_string();
	make_both();
	make_zero_head();
	make_bad_length();
	scrub_stack();
	printf("kept 6 blocks by interior pointers\n");
	return 0;
}
