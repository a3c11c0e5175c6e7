/*
 * counters.c — event counts kept per thread, summed when a report needs
 * them. Every allocation and free bumps a few counters; shared atomic
 * counters would put a locked instruction and a contended cache line on
 * that path in every thread. Each thread instead owns a cache-line-sized
 * slot (claimed on its first count, taken over from a dead thread when
 * none is free) and adds to it with plain stores; readers sum all slots.
 * A thread that finds no slot at all shares the last one, with atomic adds.
 */
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/unwind.h"
#include "agent/walk_memo.h"
#include "agent/writer.h"
#include "agent/banned.h"

#define NSLOTS 1024

static struct agent_counters slots[NSLOTS];

static bool alive(pid_t tid)
{
	return syscall(SYS_tgkill, getpid(), tid, 0) == 0 || errno != ESRCH;
}

struct agent_counters *agent_counters_first(void)
{
	return &slots[0];
}

struct agent_counters *agent_counters_next(struct agent_counters *s)
{
	return s + 1 < slots + NSLOTS ? s + 1 : NULL;
}

struct agent_counters *agent_counters_claim(void)
{
	pid_t tid = agent_gettid();
	int saved = errno;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < NSLOTS - 1; i++) {
			pid_t owner = atomic_load_explicit(&slots[i].owner, memory_order_relaxed);
			if ((pass == 0 && owner == 0) || (pass == 1 && owner && !alive(owner))) {
				if (atomic_compare_exchange_strong(&slots[i].owner, &owner, tid)) {
					if (slots[i].memo)  /* a dead thread's last walks */
						agent_memo_forget_all(slots[i].memo);
					errno = saved;
					return &slots[i];
				}
			}
		}
	errno = saved;
	slots[NSLOTS - 1].shared = true;
	return &slots[NSLOTS - 1];
}

void agent_counters_forked(void)
{
	if (agent_tls.ctr && !agent_tls.ctr->shared)
		atomic_store(&agent_tls.ctr->owner, agent_gettid());
}

/* Frees are the frees of tracked blocks (valgrind, too, counts the frees
 * of the blocks it knows). In sampling mode allocations are not counted
 * one by one: the totals are what the samples stand for. */
static void estimate_totals(struct agent_counts *out)
{
	if (agent_sampling.period <= 1) {
		out->allocs += out->tracked;
		out->bytes_allocated += out->tracked_bytes;
		out->frees = out->tracked_frees;
		/* exact mode keeps no separate estimates (sample.c) */
		out->est_bytes = out->tracked_bytes - out->freed_bytes;
		out->est_blocks_x1024 = (out->tracked - out->tracked_frees) * 1024;
		return;
	}
	out->allocs = out->est_allocs_x1024 / 1024;
	out->bytes_allocated = out->est_allocated;
	out->frees = out->allocs - (uint64_t)((int64_t)out->est_blocks_x1024 / 1024);
}

void agent_counters_sum(struct agent_counts *out)
{
	agent_memset(out, 0, sizeof *out);
	for (int i = 0; i < NSLOTS; i++) {
		const struct agent_counts *c = &slots[i].c;
		out->allocs += atomic_load_explicit(&c->allocs, memory_order_relaxed);
		out->bytes_allocated += atomic_load_explicit(&c->bytes_allocated, memory_order_relaxed);
		out->tracked += atomic_load_explicit(&c->tracked, memory_order_relaxed);
		out->tracked_frees += atomic_load_explicit(&c->tracked_frees, memory_order_relaxed);
		out->est_bytes += atomic_load_explicit(&c->est_bytes, memory_order_relaxed);
		out->est_blocks_x1024 += atomic_load_explicit(&c->est_blocks_x1024, memory_order_relaxed);
		out->est_allocated += atomic_load_explicit(&c->est_allocated, memory_order_relaxed);
		out->est_allocs_x1024 += atomic_load_explicit(&c->est_allocs_x1024, memory_order_relaxed);
		out->tracked_bytes += atomic_load_explicit(&c->tracked_bytes, memory_order_relaxed);
		out->frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
		out->freed_bytes += atomic_load_explicit(&c->freed_bytes, memory_order_relaxed);
		out->dropped += atomic_load_explicit(&c->dropped, memory_order_relaxed);
		out->untracked_frees += atomic_load_explicit(&c->untracked_frees, memory_order_relaxed);
	}
	estimate_totals(out);
}

void agent_counters_put_shape(struct agent_writer *w, const char *key)
{
	if (agent_sampling.period > 1)
		return;
	uint64_t temporary = 0, sizes[FMT_SHAPE_BUCKETS] = { 0 };
	for (int i = 0; i < NSLOTS; i++) {
		temporary += atomic_load_explicit(&slots[i].temporary, memory_order_relaxed);
		for (int k = 0; k < FMT_SHAPE_BUCKETS; k++)
			sizes[k] += atomic_load_explicit(&slots[i].sizes[k], memory_order_relaxed);
	}
	agent_put(w, key);
	agent_put(w, " " FMT_SHAPE_TEMPORARY);
	agent_put_u64(w, temporary);
	agent_put(w, " " FMT_SHAPE_SIZES);
	for (int k = 0; k < FMT_SHAPE_BUCKETS; k++) {
		if (k)
			agent_put(w, ",");
		agent_put_u64(w, sizes[k]);
	}
	agent_put(w, "\n");
}
