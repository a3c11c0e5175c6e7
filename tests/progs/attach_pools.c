/* A program started bare for `heaptrail attach` with allocator functions
 * named (issue 15): a pool allocator of its own (pool_get/pool_put over
 * 1 MiB superblocks from malloc, never malloc per chunk), called without a
 * pause by three threads while heaptrail writes its jumps; each thread
 * checks every chunk it gives back still holds what it wrote. A fourth
 * thread sits in read() with pool_get_zeroed's address + 2 on its stack,
 * as a signal frame that interrupted that function would keep it. A fifth
 * waits in epoll_wait (which a stop makes fail with EINTR, unless
 * heaptrail starts it again): if the program ever sees EINTR there, it
 * says so and exits 9. A pool keeps its name at +8.
 * Commands on stdin, answered on stdout:
 *   keep N   N chunks of 777 bytes from the pool `kept`, kept (reachable)
 *   other N  N chunks of 333 bytes from the pool `other`, kept
 *   lose N   N chunks of 555 bytes from `kept`, their addresses dropped
 *   code     the first 5 bytes of pool_get, in hex
 *   quit     stops the threads; prints "done ok kept=N" ("ok": chunks
 *            were checked), exits 0; a bad chunk exits 3 at once
 * Its output does not depend on timing. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define SUPER (1u << 20)
#define CLASSES 16

struct chunk {
	size_t size;
	struct chunk *next;  /* on a free list */
};

struct pool {
	unsigned long magic;
	const char *name;   /* at +8: name=*(ctx+8) */
	struct chunk *free[CLASSES];
	char *cur;
	size_t used;
	void **supers;
	size_t nsupers;
};

static size_t class_of(size_t size)
{
	size_t c = (size + 63) / 64;
	return c < CLASSES ? c : CLASSES - 1;
}

__attribute__((noinline)) void *pool_get(struct pool *p, size_t size)
{
	size_t c = class_of(size);
	struct chunk *ch = p->free[c];
	if (ch && ch->size >= size) {
		p->free[c] = ch->next;
	} else {
		size_t need = sizeof *ch + (size + 15) / 16 * 16;
		if (!p->cur || p->used + need > SUPER) {
			p->supers = realloc(p->supers, (p->nsupers + 1) * sizeof *p->supers);
			p->cur = p->supers[p->nsupers++] = malloc(SUPER);
			p->used = 0;
		}
		ch = (struct chunk *)(p->cur + p->used);
		p->used += need;
		ch->size = size;
	}
	return ch + 1;
}

__attribute__((noinline)) void pool_put(struct pool *p, void *ptr)
{
	struct chunk *ch = (struct chunk *)ptr - 1;
	size_t c = class_of(ch->size);
	if (class_of(ch->size) * 64 > ch->size || c == CLASSES - 1) {
		ch->next = p->free[c];
		p->free[c] = ch;
	}
}

__attribute__((noinline)) void *pool_get_zeroed(struct pool *p, size_t size)
{
	void *q = pool_get(p, size);
	memset(q, 0, size);
	return q;
}

static atomic_int quitting;
static atomic_long checked;
static struct pool kept = { .name = "kept" }, other = { .name = "other" };
void *keep[4096];  /* global, counted at the end: the chunks stay reachable */
static int nkeep;
static int sit_pipe[2];

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	struct pool p = { .name = "worker" };
	void *ring[64] = { 0 };
	size_t sizes[64];
	unsigned char marks[64];
	for (unsigned long seq = 0; !atomic_load(&quitting); seq++) {
		int i = (int)(seq % 64);
		if (ring[i]) {
			unsigned char *b = ring[i];
			for (size_t k = 0; k < sizes[i]; k++)
				if (b[k] != marks[i]) {
					printf("chunk %p corrupt at %zu\n", ring[i], k);
					fflush(stdout);
					exit(3);
				}
			pool_put(&p, ring[i]);
			atomic_fetch_add(&checked, 1);
		}
		sizes[i] = 16 + rand_r(&seed) % 500;
		marks[i] = (unsigned char)seq;
		ring[i] = seq % 3 ? pool_get(&p, sizes[i]) : pool_get_zeroed(&p, sizes[i]);
		memset(ring[i], marks[i], sizes[i]);
		if (seq % 4096 == 0) {
			struct timespec t = { 0, 200000 };
			nanosleep(&t, NULL);
		}
	}
	for (size_t k = 0; k < p.nsupers; k++)
		free(p.supers[k]);
	free(p.supers);
	return NULL;
}

static int poll_pipe[2];

static void *poller(void *arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = poll_pipe[0] }, got;
	epoll_ctl(ep, EPOLL_CTL_ADD, poll_pipe[0], &ev);
	for (;;) {
		int r = epoll_wait(ep, &got, 1, -1);
		if (r < 0) {
			printf("epoll_wait: %s\n", strerror(errno));  /* a stop must never show */
			fflush(stdout);
			exit(9);
		}
		if (r == 1)
			return NULL;
	}
}

static void *sitter(void *arg)
{
	volatile uintptr_t seen = (uintptr_t)pool_get_zeroed + 2;
	char c;
	while (read(sit_pipe[0], &c, 1) < 0)
		;
	return (void *)seen;
}

__attribute__((noinline)) static void keep_site(int n)
{
	for (int i = 0; i < n && nkeep < 4096; i++)
		keep[nkeep++] = pool_get(&kept, 777);
}

__attribute__((noinline)) static void other_site(int n)
{
	for (int i = 0; i < n && nkeep < 4096; i++)
		keep[nkeep++] = pool_get(&other, 333);
}

__attribute__((noinline)) static void lose_site(int n)
{
	for (int i = 0; i < n; i++) {
		char *q = pool_get(&kept, 555);
		memset(q, 5, 555);
		__asm__ volatile("" : : "r"(q) : "memory");
	}
}

/* Clears the stack below main's frame and the scratch registers, where
 * the last chunk's address may linger after lose_site. */
__attribute__((noinline)) static void scrub(void)
{
	volatile char area[4096];
	for (size_t i = 0; i < sizeof area; i++)
		area[i] = 0;
	__asm__ volatile("xor %%eax, %%eax; xor %%ecx, %%ecx; xor %%edx, %%edx; xor %%esi, %%esi;"
			 "xor %%edi, %%edi; xor %%r8d, %%r8d; xor %%r9d, %%r9d; xor %%r10d, %%r10d;"
			 "xor %%r11d, %%r11d" ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10",
			 "r11", "memory");
}

int main(void)
{
	if (pipe(sit_pipe) || pipe(poll_pipe))
		return 1;
	pthread_t t[5];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	pthread_create(&t[3], NULL, sitter, NULL);
	pthread_create(&t[4], NULL, poller, NULL);
	printf("ready\n");
	fflush(stdout);
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		int n;
		if (sscanf(line, "keep %d", &n) == 1) {
			keep_site(n);
			printf("ok %d\n", n);
		} else if (sscanf(line, "other %d", &n) == 1) {
			other_site(n);
			printf("ok %d\n", n);
		} else if (sscanf(line, "lose %d", &n) == 1) {
			lose_site(n);
			scrub();
			printf("ok %d\n", n);
		} else if (!strncmp(line, "code", 4)) {
			const unsigned char *c = (const unsigned char *)(uintptr_t)pool_get;
			printf("ok %02x%02x%02x%02x%02x\n", c[0], c[1], c[2], c[3], c[4]);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
		fflush(stdout);
	}
	atomic_store(&quitting, 1);
	if (write(sit_pipe[1], "x", 1) != 1 || write(poll_pipe[1], "x", 1) != 1)
		return 1;
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	int held = 0;
	for (int i = 0; i < 4096; i++)
		held += keep[i] != NULL;
	printf("done %s kept=%d\n", atomic_load(&checked) > 0 ? "ok" : "nothing checked", held);
	return 0;
}
