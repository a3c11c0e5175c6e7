/*
 * cxx_leaks — C++ objects new'ed and never deleted, through every form
 * of operator new the agent hooks: plain, array (with and without the
 * array cookie a non-trivial destructor adds), nothrow, aligned (C++17),
 * from a namespace, a static member function and a template, so the
 * report needs demangled names.
 *
 * Expected (valgrind memcheck, Debian 12):
 *   leaky::make_widget             2 x 64 (Widget)            = 128 / 2
 *   leaky::make_ints               new int[25]                = 100 / 1
 *   leaky::make_gadgets            new Gadget[3]: 3*16 + 8    =  56 / 1
 *                                   (8-byte array cookie)
 *   leaky::Factory::build          new Widget                 =  64 / 1
 *   leaky::make_array_of<short>    new short[30]              =  60 / 1
 *   leaky::make_widget_nothrow     new (std::nothrow) Widget  =  64 / 1
 *   leaky::make_aligned            new Aligned (alignas 64)   =  64 / 1
 *   in use at exit: 536 bytes in 8 blocks
 *   libstdc++'s emergency exception pool is released by
 *   __gnu_cxx::__freeres at exit, so it is not in use.
 *
 * @proc 0 exit=0 in_use=536/8
 * @leak 0 leaky::make_widget 128/2
 * @leak 0 leaky::make_ints 100/1
 * @leak 0 leaky::make_gadgets 56/1
 * @leak 0 leaky::Factory::build 64/1
 * @leak 0 leaky::make_array_of<short> 60/1
 * @leak 0 leaky::make_widget_nothrow 64/1
 * @leak 0 leaky::make_aligned 64/1
 */
#include <cstdio>
#include <cstring>
#include <new>

#include "common.h"

namespace leaky {

struct Widget {
	int id;
	double weight[7];
};

struct Gadget {
	Gadget() : v(1), w(2) {}
	~Gadget() { std::printf("never printed\n"); }
	long v, w;
};

struct alignas(64) Aligned {
	char c[64];
};

NOINLINE Widget *make_widget(int id)
{
	Widget *w = new Widget(); // @site leaky::make_widget
	w->id = id;
	KEEP(w);
	return w;
}

NOINLINE int *make_ints()
{
	int *v = new int[25]; // @site leaky::make_ints
	std::memset(v, 1, 25 * sizeof(int));
	KEEP(v);
	return v;
}

NOINLINE Gadget *make_gadgets()
{
	Gadget *g = new Gadget[3]; // @site leaky::make_gadgets
	KEEP(g);
	return g;
}

struct Factory {
	NOINLINE static Widget *build()
	{
		Widget *w = new Widget(); // @site leaky::Factory::build
		w->id = 99;
		KEEP(w);
		return w;
	}
};

template <typename T> NOINLINE T *make_array_of(unsigned long n)
{
	T *v = new T[n]; // @site leaky::make_array_of<short>
	std::memset(v, 0x11, n * sizeof(T));
	KEEP(v);
	return v;
}

NOINLINE Widget *make_widget_nothrow()
{
	Widget *w = new (std::nothrow) Widget(); // @site leaky::make_widget_nothrow
	if (w)
		w->id = 7;
	KEEP(w);
	return w;
}

NOINLINE Aligned *make_aligned()
{
	Aligned *a = new Aligned(); // @site leaky::make_aligned
	a->c[0] = 'a';
	KEEP(a);
	return a;
}

} // namespace leaky

int main()
{
	leaky::make_widget(1);
	leaky::make_widget(2);
	leaky::make_ints();
	leaky::make_gadgets();
	leaky::Factory::build();
	leaky::make_array_of<short>(30);
	leaky::make_widget_nothrow();
	leaky::make_aligned();
	std::printf("c++ objects leaked\n");
	return 0;
}
