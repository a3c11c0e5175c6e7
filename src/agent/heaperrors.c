/*
 * heaperrors.c — see heaperrors.h. The contexts are a small array under a
 * lock: an error is rare, and its cost (an unwind, the lock) is paid by
 * the free that made it, never by a free that did not.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/heaperrors.h"
#include "agent/table.h"
#include "agent/unwind.h"
#include "agent/banned.h"

#define FREES ((1u << AGENT_DEALLOC_FREE) | (1u << AGENT_DEALLOC_REALLOC))
#define ANY 0xffffffffu
#define UNCHECKED (1u << AGENT_DEALLOC_UNCHECKED)

const uint32_t agent_dealloc_ok[FMT_FN_COUNT] = {
	[FMT_FN_MALLOC] = FREES | UNCHECKED, [FMT_FN_CALLOC] = FREES | UNCHECKED,
	[FMT_FN_REALLOC] = FREES | UNCHECKED, [FMT_FN_REALLOCARRAY] = FREES | UNCHECKED,
	[FMT_FN_POSIX_MEMALIGN] = FREES | UNCHECKED, [FMT_FN_ALIGNED_ALLOC] = FREES | UNCHECKED,
	[FMT_FN_MEMALIGN] = FREES | UNCHECKED, [FMT_FN_VALLOC] = FREES | UNCHECKED,
	[FMT_FN_PVALLOC] = FREES | UNCHECKED,
	[FMT_FN_NEW] = (1u << AGENT_DEALLOC_DELETE) | UNCHECKED,
	[FMT_FN_NEW_ARRAY] = (1u << AGENT_DEALLOC_DELETE_ARRAY) | UNCHECKED,
	[FMT_FN_POOL] = ANY, [FMT_FN_MALLOCLIKE] = ANY, [FMT_FN_MMAP] = ANY,
	[FMT_FN_FREE] = ANY, [FMT_FN_DELETE] = ANY, [FMT_FN_DELETE_ARRAY] = ANY,
};

static agent_lock_t lock;
static struct agent_error contexts[AGENT_ERROR_CONTEXTS];
static size_t ncontexts;
static uint64_t dropped;

/* --errors=abort: the program's ordinary abort at the first error, as
 * ASan's halt_on_error (SIGABRT goes through the fatal-signal report). */
static void stop_if_asked(void)
{
	if (agent_config.errors_abort)
		abort();
}

/* Counts error e (count unset) in its context: the one of the same
 * kind, stacks and where, or a new one that keeps e's values; then
 * aborts when asked and may (not inside a leak report being written). */
static void count_error_at(const struct agent_error *e, bool may_stop)
{
	agent_lock(&lock);
	size_t i = 0;
	while (i < ncontexts && (contexts[i].kind != e->kind ||
				 contexts[i].alloc_stack != e->alloc_stack ||
				 contexts[i].free_stack != e->free_stack ||
				 contexts[i].where != e->where || contexts[i].prev_stack != e->prev_stack))
		i++;
	if (i == ncontexts) {
		bool guarded = fmt_error_guarded((int)e->kind);
		if (ncontexts == AGENT_ERROR_CONTEXTS || (!e->free_stack && !guarded)) {
			dropped++;
			agent_unlock(&lock);
			if (may_stop)
				stop_if_asked();
			return;
		}
		contexts[ncontexts] = *e;
		contexts[ncontexts++].count = 0;
	}
	contexts[i].count++;
	agent_unlock(&lock);
	if (may_stop)
		stop_if_asked();
}

static void count_error(const struct agent_error *e)
{
	count_error_at(e, true);
}

static void count_prev(uint32_t kind, uint32_t alloc_stack, uint32_t free_stack, size_t size,
		       uint32_t where, uint64_t offset, uint32_t prev_stack)
{
	count_error(&(struct agent_error){ .kind = kind, .alloc_stack = alloc_stack,
					   .free_stack = free_stack, .size = size, .where = where,
					   .offset = offset, .prev_stack = prev_stack });
}

static void count(uint32_t kind, uint32_t alloc_stack, uint32_t free_stack, size_t size,
		  uint32_t where, uint64_t offset)
{
	count_prev(kind, alloc_stack, free_stack, size, where, offset, 0);
}

/* The stack of the free being made now, interned as given back by d. */
static uint32_t free_stack_now(int d)
{
	uintptr_t pcs[AGENT_MAX_DEPTH];
	int n = agent_unwind_cfi(pcs, agent_config.depth);
	return agent_stack_intern(d, pcs, n);
}

/* Every thread's ring, newest first within each: the entry of p, or
 * NULL. Not under a lock: a slot's owner may be writing its ring, and a
 * torn entry is checked by its address word, written first. */
static struct agent_freed *ring_find(uintptr_t p, bool forget)
{
	struct agent_freed *found = NULL;
	for (struct agent_counters *s = agent_counters_first(); s; s = agent_counters_next(s)) {
		struct agent_free_ring *r = __atomic_load_n(&s->frees, __ATOMIC_ACQUIRE);
		if (!r)
			continue;
		uint32_t next = __atomic_load_n(&r->next, __ATOMIC_RELAXED);
		for (uint32_t k = 1; k <= AGENT_FREE_RING; k++) {
			struct agent_freed *f = &r->e[(next - k) % AGENT_FREE_RING];
			if (!f->key || ~f->key != p)
				continue;
			if (forget)
				f->key = 0;
			else if (!found)
				found = f;
		}
	}
	return found;
}

struct agent_free_ring *agent_free_ring_mine(void)
{
	agent_my_counts();  /* claims the slot */
	struct agent_counters *slot = agent_tls.ctr;
	if (slot->shared)  /* a shared slot's ring would be torn */
		return NULL;
	struct agent_free_ring *r = slot->frees;
	if (!r && !(r = agent_mmap(sizeof *r)))
		return NULL;
	__atomic_store_n(&slot->frees, r, __ATOMIC_RELEASE);  /* ring_find reads it */
	return agent_tls.frees = r;
}

void agent_free_ring_forget(uintptr_t p)
{
	ring_find(p, true);
}

bool agent_error_double_free(void *p, int d)
{
	struct agent_freed *f = ring_find((uintptr_t)p, false);
	if (!f)
		return false;
	agent_error_double_free_of(agent_live_meta_stack(f->meta), agent_live_meta_size(f->meta),
				   (int)f->d, f->ra, d);
	return true;
}

void agent_error_double_free_stack(uint32_t alloc_stack, size_t size, uint32_t first_free, int d)
{
	count_prev(FMT_ERROR_INVALID, alloc_stack, free_stack_now(d), size, FMT_WHERE_FREED, 0,
		   first_free);
}

void agent_error_double_free_of(uint32_t alloc_stack, size_t size, int first_d, uintptr_t ra,
				int d)
{
	uintptr_t pcs[AGENT_MAX_DEPTH];
	int n = agent_unwind_cfi(pcs, agent_config.depth);
	uint32_t prev = ra ? agent_stack_intern(first_d, &ra, 1) : 0;
	count_prev(FMT_ERROR_INVALID, alloc_stack, agent_stack_intern(d, pcs, n), size,
		   FMT_WHERE_FREED, 0, prev);
}

void agent_error_mismatch(uint32_t alloc_stack, size_t size, int d)
{
	count(FMT_ERROR_MISMATCHED, alloc_stack, free_stack_now(d), size, FMT_WHERE_NONE, 0);
}

void agent_error_size_mismatch(uint32_t alloc_stack, size_t size, int d, size_t given)
{
	count_error(&(struct agent_error){ .kind = FMT_ERROR_SIZE_MISMATCH,
					   .alloc_stack = alloc_stack, .free_stack = free_stack_now(d),
					   .size = size, .offset = given });
}

void agent_error_align_mismatch(uint32_t alloc_stack, size_t size, int d, size_t alloc_align,
				size_t given)
{
	count_error(&(struct agent_error){ .kind = FMT_ERROR_ALIGN_MISMATCH,
					   .alloc_stack = alloc_stack, .free_stack = free_stack_now(d),
					   .size = size, .offset = given, .align = alloc_align });
}

extern void *__libc_stack_end;

bool agent_error_invalid_free(void *p, int d)
{
	uintptr_t a = (uintptr_t)p, base = 0;
	size_t size = 0;
	uint32_t stack = 0, where;
	struct dl_find_object obj;
	if (agent_live_containing(a, &base, &size, &stack))
		where = FMT_WHERE_BLOCK;
	else if (_dl_find_object(p, &obj) == 0)
		where = FMT_WHERE_DATA;  /* an object's image: its globals */
	else if (agent_gettid() == getpid() && a > agent_stack_pointer() &&
		 a < (uintptr_t)__libc_stack_end + 65536)
		where = FMT_WHERE_STACK;  /* the main thread's, above this frame */
	else
		return false;
	uintptr_t pcs[AGENT_MAX_DEPTH];
	int n = agent_unwind_cfi(pcs, agent_config.depth);
	count(FMT_ERROR_INVALID, stack, agent_stack_intern(d, pcs, n), size, where,
	      where == FMT_WHERE_BLOCK ? a - base : 0);
	return true;
}

void agent_error_guard(uint32_t kind, uint32_t alloc_stack, uint32_t free_stack, size_t size,
		       uint32_t access, uint64_t offset, uint32_t access_stack)
{
	if (!access_stack) {  /* the stack table was full: not kept */
		agent_lock(&lock);
		dropped++;
		agent_unlock(&lock);
		stop_if_asked();
		return;
	}
	count_prev(kind, alloc_stack, free_stack, size, access, offset, access_stack);
}

void agent_error_slack(uint32_t alloc_stack, uint32_t free_stack, size_t size, uint64_t offset)
{
	/* found by a leak report (no free): --errors=abort would stop the
	 * program in the middle of writing it */
	count_error_at(&(struct agent_error){ .kind = FMT_ERROR_OVERFLOW, .alloc_stack = alloc_stack,
					      .free_stack = free_stack, .size = size,
					      .where = FMT_WHERE_WRITE, .offset = offset },
		       free_stack != 0);
}

size_t agent_errors_copy(struct agent_error *out, size_t cap)
{
	agent_lock(&lock);
	size_t n = ncontexts;
	for (size_t i = 0; i < n && i < cap; i++)
		out[i] = contexts[i];
	agent_unlock(&lock);
	return n;
}

uint64_t agent_errors_dropped(void)
{
	return __atomic_load_n(&dropped, __ATOMIC_RELAXED);
}
