/*
 * embedded_mi — a program that carries its own copy of an allocator with
 * mimalloc's names (mi_malloc, mi_calloc, mi_zalloc, mi_realloc,
 * mi_free), as a program statically linked with mimalloc does: a small
 * test allocator (size classes of 16 bytes over one mmap'd region, a
 * free list per class), which never calls malloc, so an LD_PRELOAD
 * malloc sees none of it. heaptrail hooks it with no option (its
 * built-in profile for mimalloc, test_allocfn.py).
 *
 * Each site leaks what it counts and prints it:
 *   site FUNCTION BYTES BLOCKS
 * and everything else is freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define NOINLINE __attribute__((noipa))
#define REGION (4 << 20)
#define HDR 16
#define CLASSES 64   /* 16 .. 1024 bytes */

struct hdr {
	struct hdr *next;  /* on a free list */
	size_t cls;
};

static char *region, *cur;
static struct hdr *free_lists[CLASSES + 1];

NOINLINE void *mi_malloc(size_t n)
{
	size_t cls = (n + 15) / 16;
	if (!cls)
		cls = 1;
	if (cls > CLASSES)
		return NULL;
	struct hdr *h = free_lists[cls];
	if (h) {
		free_lists[cls] = h->next;
	} else {
		if (!region) {
			region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				      -1, 0);
			if (region == MAP_FAILED)
				return NULL;
			cur = region;
		}
		if (cur + HDR + cls * 16 > region + REGION)
			return NULL;
		h = (struct hdr *)cur;
		cur += HDR + cls * 16;
	}
	h->cls = cls;
	h->next = NULL;
	return (char *)h + HDR;
}

NOINLINE void mi_free(void *p)
{
	if (!p)
		return;
	struct hdr *h = (struct hdr *)((char *)p - HDR);
	h->next = free_lists[h->cls];
	free_lists[h->cls] = h;
}

NOINLINE void *mi_zalloc(size_t n)
{
	void *p = mi_malloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

NOINLINE void *mi_calloc(size_t count, size_t n)
{
	return mi_zalloc(count * n);
}

NOINLINE void *mi_realloc(void *p, size_t n)
{
	if (!p)
		return mi_malloc(n);
	struct hdr *h = (struct hdr *)((char *)p - HDR);
	if (n <= h->cls * 16)
		return p;
	void *q = mi_malloc(n);
	if (q) {
		memcpy(q, p, h->cls * 16);
		mi_free(p);
	}
	return q;
}

/* ---------- the program ---------- */

struct item {
	struct item *next;
	char name[40];
};

void *volatile sink;   /* what is written here is dropped at once */

NOINLINE void leak_items(void)
{
	for (int i = 0; i < 3; i++) {
		struct item *it = mi_malloc(sizeof *it);
		snprintf(it->name, sizeof it->name, "item %d", i);
		sink = it;
	}
	printf("site leak_items %zu 3\n", 3 * sizeof(struct item));
}

NOINLINE void leak_table(void)
{
	sink = mi_calloc(10, 24);
	printf("site leak_table 240 1\n");
}

NOINLINE void leak_grown(void)
{
	char *s = mi_malloc(20);
	strcpy(s, "short");
	s = mi_realloc(s, 500);   /* moved: a new block */
	sink = s;
	printf("site leak_grown 500 1\n");
}

NOINLINE void churn(void)
{
	for (int i = 0; i < 1000; i++) {
		char *p = mi_zalloc(16 + (size_t)(i % 50) * 8);
		p = mi_realloc(p, 900);
		mi_free(p);
	}
}

int main(void)
{
	churn();
	leak_items();
	leak_table();
	leak_grown();
	sink = NULL;
	return 0;
}
