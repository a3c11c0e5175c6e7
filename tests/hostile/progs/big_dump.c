/*
 * big_dump — a heap of 200,000 live blocks from 4,096 distinct stacks
 * (12 levels of two call sites each), then heap dumps (heaptrail_dump)
 * in a loop for as long as it lives: the runner kills it with SIGKILL in
 * the middle of one, and every file the agent left under a name a reader
 * takes must be whole.  Prints "ready" once the heap is built.
 *
 * @modes none
 */
#include "hostile.h"

static void *blocks[200000];
static volatile int sink;

NOINLINE static void *lvl12(unsigned bits, int n) { (void)bits; return malloc(16 + n % 64); }
NOINLINE static void *lvl11(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl12(bits >> 1, n);
		sink += 12;
	} else {
		p = lvl12(bits >> 1, n + 1);
		sink -= 18;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl10(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl11(bits >> 1, n);
		sink += 11;
	} else {
		p = lvl11(bits >> 1, n + 1);
		sink -= 17;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl9(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl10(bits >> 1, n);
		sink += 10;
	} else {
		p = lvl10(bits >> 1, n + 1);
		sink -= 16;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl8(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl9(bits >> 1, n);
		sink += 9;
	} else {
		p = lvl9(bits >> 1, n + 1);
		sink -= 15;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl7(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl8(bits >> 1, n);
		sink += 8;
	} else {
		p = lvl8(bits >> 1, n + 1);
		sink -= 14;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl6(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl7(bits >> 1, n);
		sink += 7;
	} else {
		p = lvl7(bits >> 1, n + 1);
		sink -= 13;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl5(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl6(bits >> 1, n);
		sink += 6;
	} else {
		p = lvl6(bits >> 1, n + 1);
		sink -= 12;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl4(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl5(bits >> 1, n);
		sink += 5;
	} else {
		p = lvl5(bits >> 1, n + 1);
		sink -= 11;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl3(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl4(bits >> 1, n);
		sink += 4;
	} else {
		p = lvl4(bits >> 1, n + 1);
		sink -= 10;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl2(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl3(bits >> 1, n);
		sink += 3;
	} else {
		p = lvl3(bits >> 1, n + 1);
		sink -= 9;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl1(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl2(bits >> 1, n);
		sink += 2;
	} else {
		p = lvl2(bits >> 1, n + 1);
		sink -= 8;
	}
	KEEP(p);
	return p;
}
NOINLINE static void *lvl0(unsigned bits, int n)
{
	void *p;
	if (bits & 1) {
		p = lvl1(bits >> 1, n);
		sink += 1;
	} else {
		p = lvl1(bits >> 1, n + 1);
		sink -= 7;
	}
	KEEP(p);
	return p;
}

int main(void)
{
	for (int i = 0; i < 200000; i++)
		blocks[i] = lvl0((unsigned)i % 4096, i);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (heaptrail_dump)
			heaptrail_dump(NULL);
		else
			nap_ms(10);
	}
}
