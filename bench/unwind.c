/*
 * bench/unwind.c — a micro-benchmark of stack capture, not a test: the
 * agent's CFI unwinder (src/agent/unwind_cfi.c) against libunwind's
 * unw_backtrace (what the agent used before it), on stacks 10 and 40 frames
 * deep, 1M unwinds each.
 * Also: the same with 2 threads unwinding at once (the rule cache is
 * shared), and the cost of a cold unwind (every frame a cache miss).
 *
 * Each configuration runs in 20 batches; the minimum and the median batch
 * are shown (per unwind), so that other load on the machine shows as a gap
 * between the two rather than as a wrong number.
 *
 * The frames are compiled without frame pointers, as distro code is. Build
 * the unwinder with the agent's flags, the rest like a distro program:
 *   cc -O2 -g -D_GNU_SOURCE -Iinclude -Isrc -fPIC -fvisibility=hidden \
 *      -fno-omit-frame-pointer -fno-stack-protector -fno-builtin \
 *      -c src/agent/unwind_cfi.c -o /tmp/unwind_cfi.o
 *   cc -O2 -g -D_GNU_SOURCE -Iinclude -Isrc -c src/agent/os.c -o /tmp/os.o
 *   cc -O2 -g -fomit-frame-pointer -D_GNU_SOURCE -o /tmp/bench_unwind \
 *      bench/unwind.c /tmp/unwind_cfi.o /tmp/os.o -lunwind -lpthread
 *   /tmp/bench_unwind [unwinds]
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

uintptr_t agent_self_lo, agent_self_hi;
int agent_unwind_cfi(uintptr_t *pcs, int max);
void agent_unwind_cfi_flush(void);

#define NOINLINE __attribute__((noinline))
#define MAXF 64

enum which { OURS, LIBUNWIND, OURS_COLD };

#define BATCHES 20

struct job {
	enum which which;
	int depth;              /* frames the captured stack should have */
	long iters;
	int frames;             /* what one unwind returned */
	double min_ns, med_ns;  /* per unwind, best and median batch */
};

static volatile unsigned sink;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static NOINLINE void loop(struct job *j)
{
	uintptr_t pcs[MAXF];
	int n = 0;
	unsigned local = 0;
	double t[BATCHES];
	long per = j->iters / BATCHES > 0 ? j->iters / BATCHES : 1;
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns();
		for (long i = 0; i < per; i++) {
			switch (j->which) {
			case OURS: n = agent_unwind_cfi(pcs, MAXF); break;
			case LIBUNWIND: n = unw_backtrace((void **)pcs, MAXF); break;
			case OURS_COLD:
				agent_unwind_cfi_flush();
				n = agent_unwind_cfi(pcs, MAXF);
				break;
			}
			local += (unsigned)pcs[n - 1];
		}
		t[b] = (now_ns() - t0) / (double)per;
	}
	qsort(t, BATCHES, sizeof t[0], by_value);
	j->min_ns = t[0];
	j->med_ns = t[BATCHES / 2];
	j->frames = n;
	sink += local;
}

static NOINLINE int down(int levels, struct job *j)
{
	if (levels <= 0) {
		loop(j);
		return 0;
	}
	int r = down(levels - 1, j);
	sink += (unsigned)r;
	return r + 1;
}

/* Frames under down(): loop, main/thread entry and libc's start code. */
static void run(struct job *j, int base)
{
	down(j->depth - base, j);
}

static void *thread_main(void *arg)
{
	run(arg, 4);    /* loop, down(0), thread_main, start_thread, clone3 */
	return NULL;
}

static const char *name(enum which w)
{
	switch (w) {
	case OURS: return "agent_unwind_cfi";
	case LIBUNWIND: return "unw_backtrace";
	case OURS_COLD: return "agent_unwind_cfi, cold";
	}
	return "?";
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000000;
	static const int depths[] = { 10, 40 };

	printf("%-28s %6s %10s %10s %10s\n", "unwinder", "frames", "unwinds", "min ns", "median ns");
	for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
		for (enum which w = OURS; w <= OURS_COLD; w++) {
			struct job j = { w, depths[d], w == OURS_COLD ? iters / 100 : iters, 0, 0, 0 };
			struct job warm = j;
			warm.iters = 1000 < j.iters ? 1000 : j.iters;
			run(&warm, 5); /* loop, down(0), main, libc x2, _start */
			run(&j, 5);
			printf("%-28s %6d %10ld %10.1f %10.1f\n", name(w), j.frames, j.iters,
			       j.min_ns, j.med_ns);
		}
		/* Two threads at once on the shared cache (the machine has 2 cores). */
		for (enum which w = OURS; w <= LIBUNWIND; w++) {
			struct job j[2] = { { w, depths[d], iters, 0, 0, 0 }, { w, depths[d], iters, 0, 0, 0 } };
			pthread_t th[2];
			for (int i = 0; i < 2; i++)
				pthread_create(&th[i], NULL, thread_main, &j[i]);
			for (int i = 0; i < 2; i++)
				pthread_join(th[i], NULL);
			char label[64];
			snprintf(label, sizeof label, "%s, 2 threads", name(w));
			printf("%-28s %6d %10ld %10.1f %10.1f\n", label, j[0].frames, iters,
			       (j[0].min_ns + j[1].min_ns) / 2, (j[0].med_ns + j[1].med_ns) / 2);
		}
	}
	return 0;
}
