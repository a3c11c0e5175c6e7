/*
 * threads — churn's work split over two threads (N/2 malloc/free pairs
 * each, 5 000 live blocks each), and half of every thread's frees done by
 * the other thread: a block evicted from the live set is either freed
 * here or handed over through a lock-free single-producer/single-consumer
 * ring, and the other thread frees it. A tool with one global lock, or
 * one that assumes the allocating thread frees, shows it here.
 *   threads [N [T]]   T threads (default 2, at most 16) in a circle, each
 * handing blocks to the next; 10 000 live blocks in all. With T = 1 the
 * one thread hands its blocks to itself.
 *
 * When a ring is full the producer frees what it was given and yields
 * until there is room: under a tool that runs one thread at a time
 * (valgrind) this keeps both threads moving instead of spinning.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "common.h"

#define RING_SIZE 4096	/* power of two */
#define DRAIN_EVERY 32
#define MAX_THREADS 16

static int nthreads = 2;

struct ring {
	_Alignas(64) _Atomic unsigned long head;	/* written by the producer */
	_Alignas(64) _Atomic unsigned long tail;	/* written by the consumer */
	_Alignas(64) void *slot[RING_SIZE];
};

struct worker {
	int id;
	long ops;
	struct ring *out, *in;
	unsigned long out_tail_seen;	/* producer's cached view of out->tail */
	uint64_t sum;
	_Atomic int done;
	struct worker *peer;
	unsigned char *live[LIVE_BLOCKS];
};

static unsigned long ring_drain(struct ring *r, uint64_t *sum)
{
	unsigned long tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	unsigned long head = atomic_load_explicit(&r->head, memory_order_acquire);
	unsigned long n = head - tail;
	for (; tail != head; tail++) {
		unsigned char *p = r->slot[tail & (RING_SIZE - 1)];
		*sum += p[0];
		free(p);
	}
	atomic_store_explicit(&r->tail, tail, memory_order_release);
	return n;
}

static void ring_push(struct worker *w, void *p)
{
	struct ring *r = w->out;
	unsigned long head = atomic_load_explicit(&r->head, memory_order_relaxed);
	while (head - w->out_tail_seen >= RING_SIZE) {
		w->out_tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (head - w->out_tail_seen >= RING_SIZE) {
			ring_drain(w->in, &w->sum);
			sched_yield();
		}
	}
	r->slot[head & (RING_SIZE - 1)] = p;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(w->id + 1);
	const unsigned nlive = LIVE_BLOCKS / nthreads;

	for (unsigned i = 0; i < nlive; i++) {
		size_t n = request_size(xorshift64(&rng));
		w->live[i] = xmalloc(n);
		w->live[i][0] = (unsigned char)n;
	}
	for (long i = 0; i < w->ops; i++) {
		uint64_t r = xorshift64(&rng);
		unsigned slot = (unsigned)(r % nlive);
		size_t n = request_size(r);
		unsigned char *victim = w->live[slot];
		if (i & 1) {
			ring_push(w, victim);
		} else {
			w->sum += victim[0];
			free(victim);
		}
		w->live[slot] = xmalloc(n);
		w->live[slot][0] = (unsigned char)r;
		w->live[slot][n - 1] = (unsigned char)i;
		if (i % DRAIN_EVERY == 0)
			ring_drain(w->in, &w->sum);
	}
	for (unsigned i = 0; i < nlive; i++)
		ring_push(w, w->live[i]);
	atomic_store_explicit(&w->done, 1, memory_order_release);
	/* keep freeing what the peer hands over until it has finished */
	while (!atomic_load_explicit(&w->peer->done, memory_order_acquire)) {
		if (!ring_drain(w->in, &w->sum))
			sched_yield();
	}
	ring_drain(w->in, &w->sum);
	return NULL;
}

static struct ring rings[MAX_THREADS];
static struct worker workers[MAX_THREADS];

int main(int argc, char **argv)
{
	long ops = arg_ops(argc, argv, 20000000);
	pthread_t tid[MAX_THREADS];

	if (argc > 2) {
		nthreads = (int)arg_ops(argc - 1, argv + 1, 2);
		if (nthreads > MAX_THREADS) {
			fprintf(stderr, "threads: at most %d threads, not %d\n", MAX_THREADS, nthreads);
			return 2;
		}
	}
	/* worker i hands blocks to worker i + 1 through rings[i]; its peer is
	 * the worker that hands blocks to it */
	for (int i = 0; i < nthreads; i++) {
		workers[i].id = i;
		workers[i].ops = ops / nthreads + (i == 0 ? ops % nthreads : 0);
		workers[i].out = &rings[i];
		workers[i].in = &rings[(i + nthreads - 1) % nthreads];
		workers[i].peer = &workers[(i + nthreads - 1) % nthreads];
	}
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&tid[i], NULL, worker_main, &workers[i])) {
			fprintf(stderr, "threads: cannot create a thread\n");
			return 1;
		}
	for (int i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	uint64_t sum = 0;
	for (int i = 0; i < nthreads; i++)
		sum += workers[i].sum;
	printf("threads: %ld ops, checksum %llu\n", ops, (unsigned long long)sum);
	return 0;
}
