/*
 * allocfn_cxx — a C++ arena hooked by name (test_allocfn.py): the method
 * mem::Pool::take, named by its qualified name, and pool_take, a
 * function whose first instructions include the call to it (built -O1:
 * sub, call), so the call is among the bytes the hook moves. take throws
 * std::bad_alloc for a big request: the exception must travel through
 * both hooks to main's catch. mem::Pool::grab has a .cold part, as GCC
 * makes one (_ZN3mem4Pool4grabEm.cold: size 0 carves 16), which jumps
 * back into grab past the bytes a hook replaces: named by its qualified name,
 * grab is hooked and its cold part read (it was refused: the cold part's
 * symbol starts with the same mangled prefix). mem::Pool::grab_back's
 * cold part jumps back to its entry: refused with the .cold line, and it
 * allocates from a second pool of its own. The program prints what it
 * holds:
 *   caught N
 *   pool live BYTES BLOCKS
 *   other live BYTES BLOCKS
 */
#include <cstdio>
#include <new>

#define NOINLINE __attribute__((noipa))

namespace mem {
struct Pool {
	char buf[1 << 16];
	size_t used = 0, bytes = 0, blocks = 0;
	NOINLINE void *take(size_t n);
	void *grab(size_t n);        /* in assembly below */
	void *grab_back(size_t n);
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

/* n bytes carved, asked counted (a chunk of 0 bytes asked takes 16) */
extern "C" NOINLINE void *pool_carve(mem::Pool *p, size_t n, size_t asked)
{
	void *r = p->buf + p->used;
	p->used += (n + 15) & ~static_cast<size_t>(15);
	p->bytes += asked;
	p->blocks++;
	return r;
}

/* grab(n): pool_carve(this, n ? n : 16 (the cold part), n); the cold
 * part jumps back into grab past the 6 bytes a hook replaces. */
#define GRAB(NAME, BACK)                                   \
	".globl " NAME "\n"                                  \
	".p2align 4\n"                                       \
	".type " NAME ", @function\n"                        \
	NAME ":\n"                                           \
	"	movq %rsi, %rdx\n"                           \
	"	testq %rsi, %rsi\n"                          \
	"	je " NAME ".cold\n"                          \
	"1:	jmp pool_carve\n"                            \
	".size " NAME ", .-" NAME "\n"                       \
	".type " NAME ".cold, @function\n"                   \
	NAME ".cold:\n"                                      \
	"	movl $16, %esi\n"                            \
	"	jmp " BACK "\n"                              \
	".size " NAME ".cold, .-" NAME ".cold\n"
__asm__(".text\n"
	GRAB("_ZN3mem4Pool4grabEm", "1b")
	GRAB("_ZN3mem4Pool9grab_backEm", "_ZN3mem4Pool9grab_backEm"));

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
	mem::Pool *other = new mem::Pool;
	static const size_t sizes[] = { 40, 0, 24 };
	for (size_t n : sizes) {
		p->grab(n);
		other->grab_back(n);
	}
	std::printf("caught %d\npool live %zu %zu\nother live %zu %zu\n", caught, p->bytes,
		    p->blocks, other->bytes, other->blocks);
	return 0;
}
