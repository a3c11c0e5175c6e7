/*
 * pools_misuse — the pool API called wrongly, and from a signal handler:
 * every call must return (an error where it is one) and the program must
 * end as it would without the agent. Prints one line per check, "ok" or
 * "bad", and the number of bad ones; exits 0 either way (the test reads
 * the lines). Without the agent every call is skipped (HEAPTRAIL_CALL)
 * and the program prints "no agent".
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <heaptrail.h>

static int bad;
static char pool, other, big[1 << 16];
static volatile sig_atomic_t ticks;

static void expect(const char *what, int got, int want)
{
	printf("%s %s (%d, expected %d)\n", got == want ? "ok" : "bad", what, got, want);
	bad += got != want;
}

static void on_alarm(int sig)
{
	(void)sig;
	/* not supported from a handler, but it must not hang or crash */
	heaptrail_pool_alloc(&pool, big + 4096 + 64 * (ticks % 64), 8);
	heaptrail_pool_free(&pool, big + 4096 + 64 * (ticks % 64));
	ticks++;
}

int main(void)
{
	if (!heaptrail_loaded()) {
		printf("no agent\n");
		return HEAPTRAIL_CALL(pool_create, &pool, NULL, "x");  /* 0 */
	}
	expect("alloc in an unknown pool", heaptrail_pool_alloc(&pool, big, 8), -ENOENT);
	expect("create with a NULL anchor", heaptrail_pool_create(NULL, NULL, "n"), -EINVAL);
	expect("create under an unknown parent", heaptrail_pool_create(&pool, &other, "p"), -ENOENT);
	expect("create", heaptrail_pool_create(&pool, NULL, NULL), 0);
	expect("create again", heaptrail_pool_create(&pool, NULL, "again"), -EEXIST);
	expect("a NULL chunk is ignored", heaptrail_pool_alloc(&pool, NULL, 8), 0);
	expect("free of a chunk never given", heaptrail_pool_free(&pool, big + 8), -ENOENT);
	expect("change of a chunk never given", heaptrail_pool_change(&pool, big + 8, big, 8),
	       -ENOENT);
	expect("a chunk of 2^63 bytes", heaptrail_pool_alloc(&pool, big, (size_t)1 << 63), 0);
	expect("the same address again (replaced)", heaptrail_pool_alloc(&pool, big, 16), 0);
	expect("free", heaptrail_pool_free(&pool, big), 0);
	expect("free twice", heaptrail_pool_free(&pool, big), -ENOENT);
	expect("a name of 1000 bytes", heaptrail_pool_name(&pool, memset(calloc(1, 1001), 'n', 1000)),
	       0);
	expect("move onto itself", heaptrail_pool_move(&pool, &pool), 0);
	expect("move of an unknown pool", heaptrail_pool_move(&other, &pool), -ENOENT);
	expect("trim of an unknown pool", heaptrail_pool_trim(&other, big, 1), -ENOENT);
	expect("reset of an unknown pool", heaptrail_pool_reset(&other), -ENOENT);
	expect("free-like of an unknown block", heaptrail_block_free(big + 3), -ENOENT);
	expect("malloc-like", heaptrail_block_alloc(big + 3, 5), 0);
	expect("resize-in-place", heaptrail_block_resize(big + 3, 5, 7), 0);
	expect("exists", heaptrail_pool_exists(&pool), 1);
	expect("exists (not)", heaptrail_pool_exists(&other), 0);

	/* 2,000 chunks while a timer's handler allocates and frees too */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int fails = 0;
	for (int round = 0; round < 200; round++)
		for (int i = 0; i < 64; i++) {
			fails += heaptrail_pool_alloc(&pool, big + 64 * i, 32) != 0;
			if (i % 2)
				fails += heaptrail_pool_free(&pool, big + 64 * i) != 0;
		}
	it.it_value.tv_usec = it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	expect("chunks with a handler at work: failed calls", fails, 0);
	expect("destroy", heaptrail_pool_destroy(&pool), 0);
	expect("destroy twice", heaptrail_pool_destroy(&pool), -ENOENT);
	printf("%d bad\n", bad);
	return 0;
}
