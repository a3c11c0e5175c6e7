/*
 * new_delete — deletes of the right family that disagree with their new
 * on the size or the alignment, each at its own line, for
 * tests/agent/test_errors.py, which asks AddressSanitizer (the same
 * source built with -fsanitize=address: valgrind 3.19 has no such check)
 * what they are, and checks heaptrail says the same:
 *
 *   new Derived, delete through a Base without a virtual
 *   destructor (a sized delete of sizeof(Base))          size, 1 error
 *   new[] 40 bytes, operator delete[](p, 48)             size, 1 error
 *   the same as the first, three times at one line       size, 3 errors
 *   aligned new (alignas(64)), an unaligned delete       alignment, 1 error
 *   new(64, align 64), operator delete(p, align 32)      alignment, 1 error
 *   new(32), operator delete(p, align 32)                alignment, 1 error
 *   new(64, align 64), operator delete(p, 64, align 128) alignment, 1 error
 *
 * and, before and after, blocks given back as they should be: sized
 * deletes of the right size (a virtual destructor's, new[] of a class
 * with a destructor, libstdc++'s containers of strings, maps, lists,
 * shared_ptr), aligned news and deletes that agree (a vector of an
 * over-aligned type, alignas(64) objects, explicit calls): no error.
 * "right" alone does only those. It prints "done" and exits 0.
 */
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

__attribute__((noinline)) static void keep(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

struct Base {
	long a = 1;
};
struct Derived : Base {
	long b = 2, c = 3;
};
struct VBase {
	virtual ~VBase() {}
	long a = 1;
};
struct VDerived : VBase {
	long b[5] = {};
};
struct alignas(64) Wide {
	char bytes[64];
};
struct WithDtor {
	~WithDtor() { keep(this); }
	long v = 0;
};

__attribute__((noinline)) static void base_delete(void)
{
	Base *b = new Derived;
	keep(b);
	delete b;
}

__attribute__((noinline)) static void array_wrong_size(void)
{
	void *p = operator new[](40);
	keep(p);
	operator delete[](p, 48);
}

__attribute__((noinline)) static void base_delete_thrice(void)
{
	for (int i = 0; i < 3; i++) {
		Base *b = new Derived;
		keep(b);
		delete b;
	}
}

__attribute__((noinline)) static void wide_unaligned_delete(void)
{
	Wide *w = new Wide;
	keep(w);
	operator delete(w);
}

__attribute__((noinline)) static void align_64_then_32(void)
{
	void *p = operator new(64, std::align_val_t(64));
	keep(p);
	operator delete(p, std::align_val_t(32));
}

__attribute__((noinline)) static void plain_then_aligned(void)
{
	void *p = operator new(32);
	keep(p);
	operator delete(p, std::align_val_t(32));
}

__attribute__((noinline)) static void sized_aligned_wrong(void)
{
	void *p = operator new(64, std::align_val_t(64));
	keep(p);
	operator delete(p, 64, std::align_val_t(128));
}

__attribute__((noinline)) static void all_right(void)
{
	VBase *v = new VDerived;          /* sized delete through the vtable */
	keep(v);
	delete v;
	WithDtor *w = new WithDtor[7];    /* new[] with a cookie, sized delete[] */
	keep(w);
	delete[] w;
	Wide *a = new Wide;               /* aligned new, aligned sized delete */
	keep(a);
	delete a;
	Wide *aa = new Wide[3];
	keep(aa);
	delete[] aa;
	void *p = operator new(100, std::align_val_t(256));
	keep(p);
	operator delete(p, std::align_val_t(256));
	p = operator new(24);
	keep(p);
	operator delete(p, 24);
	std::vector<std::string> names;
	for (int i = 0; i < 200; i++)
		names.push_back(std::string(i % 40 + 20, 'x'));
	std::vector<Wide> wides(5);
	wides.resize(40);
	std::map<std::string, std::vector<int>> m;
	for (int i = 0; i < 100; i++)
		m[names[i]].push_back(i);
	std::unordered_map<int, std::string> u;
	for (int i = 0; i < 300; i++)
		u[i] = names[i % 200];
	std::list<Wide> l(10);
	auto s = std::make_shared<Wide>();
	std::unique_ptr<VBase> up(new VDerived);
	keep(s.get()), keep(up.get()), keep(&l), keep(&u);
}

int main(int argc, char **argv)
{
	all_right();
	if (argc < 2 || strcmp(argv[1], "right")) {
		base_delete();
		array_wrong_size();
		base_delete_thrice();
		wide_unaligned_delete();
		align_64_then_32();
		plain_then_aligned();
		sized_aligned_wrong();
	}
	all_right();
	printf("done\n");
	return 0;
}
