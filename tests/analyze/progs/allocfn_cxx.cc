/*
 * allocfn_cxx — a C++ arena hooked by name (test_allocfn.py): the method
 * mem::Pool::take, named by its qualified name, and pool_take, a
 * function whose first instructions include the call to it (built -O1:
 * sub, call), so the call is among the bytes the hook moves. take throws
 * std::bad_alloc for a big request: the exception must travel through
 * both hooks to main's catch. The program prints what it holds:
 *   caught N
 *   pool live BYTES BLOCKS
 */
#include <cstdio>
#include <new>

#define NOINLINE __attribute__((noipa))

namespace mem {
struct Pool {
	char buf[1 << 16];
	size_t used = 0, bytes = 0, blocks = 0;
	NOINLINE void *take(size_t n);
};

NOINLINE void *Pool::take(size_t n)
{
	if (n > 1000)
		throw std::bad_alloc();
	void *r = buf + used;
	used += (n + 15) & ~static_cast<size_t>(15);
	bytes += n;
	blocks++;
	return r;
}
}  // namespace mem

NOINLINE void *pool_take(mem::Pool *p, size_t n)
{
	return p->take(n);
}

int main()
{
	mem::Pool *p = new mem::Pool;
	int caught = 0;
	for (int i = 0; i < 10; i++) {
		try {
			pool_take(p, i % 2 ? 5000 : 64 + static_cast<size_t>(i));
		} catch (const std::bad_alloc &) {
			caught++;
		}
	}
	pool_take(p, 32);
	std::printf("caught %d\npool live %zu %zu\n", caught, p->bytes, p->blocks);
	return 0;
}
