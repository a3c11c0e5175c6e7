/* A program started bare (no heaptrail) for `heaptrail attach`: four
 * threads — one leaks slowly, one fills a cache that then stays flat,
 * one churns, one waits in epoll_wait/read for commands on stdin:
 *   leak N   leaks N blocks of 100 bytes (cmd_leak), answers "ok N"
 *   hold N   allocates N blocks of 200 bytes kept only in a heap array
 *            allocated at start-up (before any attach), answers "ok N"
 *   drop     frees every block "hold" allocated, answers "ok N"
 *   pause / resume   stops / restarts the slow leak and the churn, "ok"
 *   count    answers "ok N": blocks of 512 bytes the slow leak lost so far
 *   plugin N loads attach_plugin.so (beside the program) with dlopen, finds
 *            plugin_leak with dlsym and has it leak N blocks of 300
 *            bytes, answers "ok N"
 *   crash    dies of a SIGSEGV (a write through a null pointer)
 *   quit     ends: prints a summary, exits with status 3
 * Its output and exit status do not depend on timing. */
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static atomic_int paused, quitting;
static atomic_long slow_leaked;
static char plugin_path[4096];
static void **holder;  /* malloc'd at start-up: memory an attach never saw */
static int nheld;
void *cache[256];  /* global, read at the end: the cache is kept */

static void nap(long us)
{
	struct timespec t = { 0, us * 1000 };
	nanosleep(&t, NULL);
}

__attribute__((noinline)) static void *slow_leak_site(void)
{
	void *p = malloc(512);
	memset(p, 1, 512);
	return p;
}

static void *slow_leaker(void *arg)
{
	while (!atomic_load(&quitting)) {
		if (!atomic_load(&paused)) {
			void *p = slow_leak_site();
			__asm__ volatile("" : : "r"(p) : "memory");
			atomic_fetch_add(&slow_leaked, 1);
		}
		nap(5000);
	}
	return NULL;
}

__attribute__((noinline)) static void *cache_fill_site(size_t n)
{
	return calloc(1, n);
}

static void *cacher(void *arg)
{
	for (int i = 0; i < 256; i++) {
		cache[i] = cache_fill_site(4096);
		nap(1000);
	}
	while (!atomic_load(&quitting))
		nap(20000);
	return NULL;
}

__attribute__((noinline)) static void *churn_site(size_t n)
{
	return malloc(n);
}

static void *churner(void *arg)
{
	unsigned seed = 1;
	void *slots[64] = { 0 };
	while (!atomic_load(&quitting)) {
		if (atomic_load(&paused)) {
			nap(1000);
			continue;
		}
		for (int k = 0; k < 200; k++) {
			int i = (int)(rand_r(&seed) % 64);
			free(slots[i]);
			slots[i] = churn_site(16 + rand_r(&seed) % 2000);
		}
		nap(1000);
	}
	for (int i = 0; i < 64; i++)
		free(slots[i]);
	return NULL;
}

__attribute__((noinline)) static void cmd_leak(int n)
{
	for (int i = 0; i < n; i++) {
		char *p = malloc(100);
		memset(p, 2, 100);
		__asm__ volatile("" : : "r"(p) : "memory");
	}
}

__attribute__((noinline)) static void cmd_hold(int n)
{
	for (int i = 0; i < n && nheld < 4096; i++)
		holder[nheld++] = malloc(200);
}

static void *commands(void *arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = 0 };
	epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
	char buf[256];
	size_t have = 0;
	for (;;) {
		struct epoll_event got;
		int r = epoll_wait(ep, &got, 1, -1);
		if (r < 0) {
			perror("epoll_wait");  /* an attach must never cause this */
			exit(9);
		}
		ssize_t n = read(0, buf + have, sizeof buf - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		char *nl;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			int k = 0;
			if (sscanf(buf, "leak %d", &k) == 1) {
				cmd_leak(k);
				printf("ok %d\n", k);
			} else if (sscanf(buf, "hold %d", &k) == 1) {
				cmd_hold(k);
				printf("ok %d\n", k);
			} else if (sscanf(buf, "plugin %d", &k) == 1) {
				void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
				void (*leak)(int) = h ? (void (*)(int))dlsym(h, "plugin_leak") : NULL;
				if (leak)
					leak(k);
				printf(leak ? "ok %d\n" : "no plugin %d\n", k);
			} else if (!strcmp(buf, "drop")) {
				printf("ok %d\n", nheld);
				while (nheld)
					free(holder[--nheld]);
			} else if (!strcmp(buf, "pause")) {
				atomic_store(&paused, 1);
				printf("ok\n");
			} else if (!strcmp(buf, "resume")) {
				atomic_store(&paused, 0);
				printf("ok\n");
			} else if (!strcmp(buf, "count")) {
				printf("ok %ld\n", atomic_load(&slow_leaked));
			} else if (!strcmp(buf, "crash")) {
				fflush(stdout);
				*(volatile int *)(uintptr_t)k = 1;  /* k is 0 */
			} else if (!strcmp(buf, "quit")) {
				atomic_store(&quitting, 1);
				fflush(stdout);
				return NULL;
			}
			fflush(stdout);
			memmove(buf, nl + 1, strlen(nl + 1) + 1);
			have = strlen(buf);
		}
	}
	atomic_store(&quitting, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	char exe[4096];
	strncpy(exe, argv[0], sizeof exe - 1);
	snprintf(plugin_path, sizeof plugin_path, "%s/attach_plugin.so", dirname(exe));
	holder = malloc(4096 * sizeof *holder);
	pthread_t t[4];
	pthread_create(&t[0], NULL, slow_leaker, NULL);
	pthread_create(&t[1], NULL, cacher, NULL);
	pthread_create(&t[2], NULL, churner, NULL);
	pthread_create(&t[3], NULL, commands, NULL);
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	int cached = 0;
	for (int i = 0; i < 256; i++)
		cached += cache[i] != NULL;
	printf("done held=%d cached=%d\n", nheld, cached);
	return 3;
}
