/*
 * pprof_inline — an allocation inside an always_inline function, for
 * tests/views/test_pprof.py: compiled -O2 -g, the pc that calls malloc
 * is in outer_fn's code but its source is inl_make, so its location has
 * two frames (inl_make inlined into outer_fn) and pprof must show both.
 *
 * 64 blocks of 1000..1063 bytes (66,016 in all), never freed.
 */
#include <stdlib.h>
#include <string.h>

static inline __attribute__((always_inline)) char *inl_make(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, 1, n);
	return p;
}

__attribute__((noinline)) char *outer_fn(size_t n)
{
	return inl_make(n);
}

char *volatile keep[64];

int main(void)
{
	for (int i = 0; i < 64; i++)
		keep[i] = outer_fn(1000 + (size_t)i);
	return 0;
}
