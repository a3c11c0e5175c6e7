/*
 * guard.c — see guard.h.
 *
 * The slots are one mapping: page 0 inaccessible, then for slot i its
 * page (2i + 1) and an inaccessible page after it (2i + 2). A block sits
 * at the end of its slot's page, its start aligned as asked (memalign,
 * aligned new) or as malloc's are, to 16 bytes: a block whose size is a
 * multiple of 16 ends right at the page's end, and one byte past it is
 * the inaccessible page; a block of 13 bytes ends 3 bytes before it.
 * Aligning less is not safe: programs count on malloc's 16 whatever the
 * size (CPython's bytes objects, 33 bytes of header then the data, check
 * that their data is 2-byte aligned). (GWP-ASan picks either end at
 * random, to catch underflows too; heaptrail keeps the end, where most
 * overflows go.)
 *
 * Those slack bytes between the block's end and the page's are filled
 * with a byte of the block's own (never 0, the byte a string overflow
 * writes) and checked when the block is given back, and at each leak
 * report for the blocks still live: a changed byte is an overflow
 * (a write; its access unseen, so without a stack of its own) at the
 * first changed byte. The usable size of a guarded block is its size,
 * so malloc_usable_size does not hand the slack to the program.
 *
 * A freed slot keeps its page inaccessible, and is reused oldest first
 * once no slot was never used: the longer a block stays freed, the
 * longer a use after its free is caught. A slot's state changes by
 * compare-and-swap, without a lock: a signal handler's free may come
 * while the thread it interrupted is choosing a slot. The fault handler
 * reads them as they are (a fault comes from the program's code, and a
 * slot it names changes no more until the program frees or allocates a
 * guarded block again).
 *
 * Guarded blocks never reach the allocator: their free comes here
 * because they are recorded blocks (the sampling filter's slots for the
 * guard's pages are pinned at "maybe", so a free always asks the table),
 * and a block the table did not take is given back before it is handed
 * out (agent_guard_recorded).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/guard.h"
#include "agent/heaperrors.h"
#include "agent/sample.h"
#include "agent/signals.h"
#include "agent/startup.h"
#include "agent/table.h"
#include "agent/unwind.h"
#include "agent/banned.h"

void agent_guard_fault(int sig, siginfo_t *si, void *ucv);

#define SLOTS 128
#define PAGE 4096u

/* SETUP: taken, its block being placed; LIVE once its slack is filled */
enum { NEVER_USED, SETUP, LIVE, FREED };

struct slot {
	uintptr_t addr;        /* the block's start */
	size_t size;
	uint32_t alloc_stack;  /* ids of the stack table; 0: none */
	uint32_t free_stack;
	atomic_uint_fast64_t freed_at; /* FREED: the order of its free */
	atomic_uint_fast64_t gen;      /* its blocks so far: a reader that
					  holds no slot (agent_guard_check_live)
					  sees whether the block changed under it */
	atomic_int state;
	uint8_t fill;          /* the slack's byte */
	atomic_bool reported;  /* the block's overflow has been counted */
};

uintptr_t agent_guard_lo, agent_guard_len;
static struct slot slots[SLOTS];
static atomic_uint_fast64_t frees;
static atomic_uint_fast64_t full;    /* allocations picked with no slot free */
static atomic_uint_fast64_t guarded; /* blocks placed */
static atomic_bool opened;           /* guard_continue opened a page after a fault */
/* A detach (agent_guard_retire): no block is placed, and every page is
 * open, until an attach with guard on resumes. */
static atomic_bool retired;
static atomic_int placing;           /* agent_guard_alloc calls under way */

static uintptr_t slot_page(int i)
{
	return agent_guard_lo + (uintptr_t)(2 * i + 1) * PAGE;
}

static int protect(uintptr_t page, int prot)
{
	return (int)syscall(SYS_mprotect, page, PAGE, prot);
}

void agent_guard_init(void)
{
	if (!agent_config.guard || agent_guard_len)
		return;
	size_t len = (size_t)(2 * SLOTS + 1) * PAGE;
	long m = syscall(SYS_mmap, 0, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (m < 0 && m > -4096) {
		agent_log("guard: no room for the guarded pages: ", agent_strerror((int)-m),
			  "; --guard is off");
		return;
	}
	agent_guard_lo = (uintptr_t)m;
	agent_filter_pin((uintptr_t)m, len);
	if (!agent_sig_own(SIGSEGV, agent_guard_fault, NULL, 0)) {
		syscall(SYS_munmap, m, len);
		agent_guard_lo = 0;
		agent_log("guard: cannot take SIGSEGV", "; --guard is off", NULL);
		return;
	}
	__atomic_store_n(&agent_guard_len, len, __ATOMIC_RELEASE);
}

/* A slot to use, marked SETUP: one never used, else the one freed
 * longest ago; -1 when every slot holds a live block. */
static int take_slot(void)
{
	for (int tries = 0; tries < 8; tries++) {
		int best = -1, st = FREED;
		uint64_t oldest = UINT64_MAX;
		for (int i = 0; i < SLOTS; i++) {
			int s = atomic_load(&slots[i].state);
			if (s == NEVER_USED) {
				best = i, st = NEVER_USED;
				break;
			}
			uint64_t at = atomic_load(&slots[i].freed_at);
			if (s == FREED && at < oldest)
				best = i, oldest = at;
		}
		if (best < 0)
			break;
		if (atomic_compare_exchange_strong(&slots[best].state, &st, SETUP)) {
			atomic_fetch_add(&guarded, 1);
			return best;
		}
		/* another thread (or a handler) took it meanwhile */
	}
	atomic_fetch_add(&full, 1);
	return -1;
}

static void put_slot(int i)
{
	atomic_store(&slots[i].freed_at, atomic_fetch_add(&frees, 1) + 1);
	atomic_store(&slots[i].state, FREED);
}

static void *place(int i, size_t n, size_t align);
static void open_all(void);

/* Attached, the program's sigaction is not hooked: a SIGSEGV handler it
 * sets replaces the guard's, and would get the guard's faults without
 * their report (a runtime that takes faults for its own ends would
 * misread them). Looked at before each block is placed: once replaced,
 * the guard is off, every page open, with one line. */
static bool handler_kept(void)
{
	if (atomic_load(&agent_attach_state) == AGENT_NEVER_ATTACHED || agent_sig_still_ours(SIGSEGV))
		return true;
	bool was = false;
	if (atomic_compare_exchange_strong(&retired, &was, true)) {
		open_all();
		agent_log("guard: the program set a SIGSEGV handler of its own after the attach; "
			  "--guard is off from here (the guard's faults would reach that handler, "
			  "without their report)", NULL, NULL);
	}
	return false;
}

void *agent_guard_alloc(size_t n, size_t align)
{
	if (AGENT_LIKELY(!agent_guard_len) || !n || n > PAGE || align > PAGE || (align & (align - 1)))
		return NULL;
	if (align < 16)
		align = 16;
	/* attached: glibc's own malloc_usable_size may read the size word
	 * before the block (place), which must then be on the block's page */
	if (((PAGE - n) & ~(align - 1)) < 16 &&
	    atomic_load(&agent_attach_state) != AGENT_NEVER_ATTACHED)
		return NULL;
	atomic_fetch_add(&placing, 1);
	void *p = NULL;
	if (AGENT_UNLIKELY(atomic_load(&retired)))
		/* exact mode's countdown: asks again now and then, soon
		 * enough after an attach that resumes (a thread's countdown
		 * is its own: nothing else can reset it) */
		agent_tls.guard_left = 1 << 20;
	else if (agent_sample_guard_pick(n, agent_config.guard) && handler_kept()) {
		int i = take_slot();
		if (i >= 0)
			p = place(i, n, align);
	}
	atomic_fetch_sub(&placing, 1);
	return p;
}

/* Block of n bytes (aligned to align) into slot i, taken. */
static void *place(int i, size_t n, size_t align)
{
	uintptr_t page = slot_page(i);
	if (AGENT_UNLIKELY(atomic_load(&opened)))  /* its guard pages may have been opened */
		protect(page - PAGE, PROT_NONE), protect(page + PAGE, PROT_NONE);
	if (protect(page, PROT_READ | PROT_WRITE)) {
		put_slot(i);
		return NULL;
	}
	struct slot *s = &slots[i];
	s->addr = (page + PAGE - n) & ~(uintptr_t)(align - 1);
	s->size = n;
	s->alloc_stack = s->free_stack = 0;
	atomic_store(&s->reported, false);
	atomic_fetch_add(&s->gen, 1);
	/* what the slot's last block left goes: it reads as zero (calloc);
	 * cheaper than an madvise for a page at most */
	agent_memset((void *)s->addr, 0, n);
	/* the slack's byte: 1 to 255, from where the mapping landed (ASLR)
	 * and the block's number, so that no one value is always missed */
	uint64_t h = (agent_guard_lo ^ atomic_load(&guarded) * 0x9e3779b97f4a7c15ull) *
		     0xff51afd7ed558ccdull;
	s->fill = (uint8_t)(1 + (h >> 56) % 255);
	agent_memset((void *)(s->addr + n), s->fill, page + PAGE - (s->addr + n));
	/* the size word of a chunk glibc mapped by itself, before the block:
	 * glibc's malloc_usable_size reached past the agent (a pointer taken
	 * before an attach) reads it and answers n rounded down to 8, never
	 * into the slack */
	if (s->addr - 8 >= page)
		*(uint64_t *)(s->addr - 8) = ((uint64_t)(n & ~(size_t)7) + 16) | 2;
	atomic_store(&s->state, LIVE);  /* after its fields: check_live reads them */
	return (void *)s->addr;
}

/* The offset past block s's end of the first byte of its slack (len
 * bytes at slack) that is no longer its fill; -1 when none is. */
static long slack_changed(const struct slot *s, const uint8_t *slack, size_t len)
{
	for (size_t k = 0; k < len; k++)
		if (slack[k] != s->fill)
			return (long)k;
	return -1;
}

/* Counts block s's overflow into its slack, found at its free (free
 * stack free_stack) or at a leak report (0), once a block. */
static void slack_overflow(struct slot *s, uint32_t free_stack, long k)
{
	bool was = false;
	if (!atomic_compare_exchange_strong(&s->reported, &was, true))
		return;
	agent_error_slack(s->alloc_stack, free_stack, s->size, (uint64_t)s->size + (uint64_t)k);
}

/* The slot of block p (its start), or -1. */
static int slot_of(const void *p)
{
	if (!agent_guard_owns(p))
		return -1;
	uintptr_t k = ((uintptr_t)p - agent_guard_lo) / PAGE;
	if (!(k & 1))
		return -1;
	return (int)(k / 2);
}

void *agent_guard_recorded(void *p, uint32_t stack)
{
	int i = slot_of(p);
	if (i < 0)
		return p;
	if (stack) {
		slots[i].alloc_stack = stack;
		return p;
	}
	protect(slot_page(i), PROT_NONE);
	atomic_fetch_sub(&guarded, 1);
	put_slot(i);
	return NULL;
}

void agent_guard_free(void *p, int d, bool stack)
{
	int i = slot_of(p);
	if (i < 0 || atomic_load(&slots[i].state) != LIVE || slots[i].addr != (uintptr_t)p)
		return;  /* not a live guarded block: nothing to give back */
	if (atomic_load(&retired)) {  /* detached: its page stays open */
		put_slot(i);
		return;
	}
	if (stack && d != AGENT_DEALLOC_UNCHECKED) {
		uintptr_t pcs[AGENT_MAX_DEPTH];
		int n = agent_unwind_cfi(pcs, agent_config.depth);
		slots[i].free_stack = agent_stack_intern(d, pcs, n);
		/* not from inside the agent (stack false): counting takes a
		 * lock that the code a handler interrupted may hold */
		uintptr_t end = slots[i].addr + slots[i].size;
		long k = slack_changed(&slots[i], (const uint8_t *)end, slot_page(i) + PAGE - end);
		if (k >= 0)
			slack_overflow(&slots[i], slots[i].free_stack, k);
	}
	protect(slot_page(i), PROT_NONE);
	put_slot(i);
}

bool agent_guard_freed_again(const void *p, int d)
{
	int i = slot_of(p);
	if (i < 0)
		return false;
	struct slot *s = &slots[i];
	uint_fast64_t gen = atomic_load(&s->gen);
	if (atomic_load(&s->state) != FREED || s->addr != (uintptr_t)p)
		return false;
	uint32_t alloc_stack = s->alloc_stack, first = s->free_stack;
	size_t size = s->size;
	if (atomic_load(&s->gen) != gen || atomic_load(&s->state) != FREED)
		return false;  /* taken again meanwhile: its block is a new one */
	agent_error_double_free_stack(alloc_stack, size, first, d);
	return true;
}

/* The first changed byte of live slot i's slack, read through the
 * kernel in pieces (another thread may free the block, and its page then
 * faults, or take the slot again meanwhile); -1 when none is, or when it
 * could not be read. */
static long slack_changed_live(int i)
{
	const struct slot *s = &slots[i];
	uint8_t buf[256];
	uintptr_t end = s->addr + s->size, len = slot_page(i) + PAGE - end;
	for (uintptr_t at = 0; at < len; at += sizeof buf) {
		size_t n = len - at < sizeof buf ? len - at : sizeof buf;
		if (agent_copy_self(buf, end + at, n) != (ssize_t)n)
			return -1;
		long k = slack_changed(s, buf, n);
		if (k >= 0)
			return (long)at + k;
	}
	return -1;
}

void agent_guard_check_live(void)
{
	if (!agent_guard_len || atomic_load(&retired))
		return;
	for (int i = 0; i < SLOTS; i++) {
		struct slot *s = &slots[i];
		uint64_t gen = atomic_load(&s->gen);
		if (atomic_load(&s->state) != LIVE || atomic_load(&s->reported))
			continue;
		long k = slack_changed_live(i);
		/* still the block whose slack was read */
		if (k >= 0 && atomic_load(&s->state) == LIVE && atomic_load(&s->gen) == gen)
			slack_overflow(s, 0, k);
	}
}

int agent_guard_retire(void)
{
	if (!agent_guard_len)
		return 0;
	atomic_store(&retired, true);
	/* a block being placed now is handed out: wait for it (a thread
	 * stopped half-way is counted as holding one) */
	for (int tries = 0; atomic_load(&placing) && tries < 2000; tries++)
		sched_yield();
	int live = atomic_load(&placing) ? 1 : 0;
	open_all();
	for (int i = 0; i < SLOTS; i++)
		live += atomic_load(&slots[i].state) == LIVE;
	return live;
}

/* Nothing of the guard's faults from now on: every page open, SIGSEGV
 * the program's. */
static void open_all(void)
{
	atomic_store(&opened, true);
	syscall(SYS_mprotect, agent_guard_lo, agent_guard_len, PROT_READ | PROT_WRITE);
	agent_sig_disown(SIGSEGV);
}

void agent_guard_resume(void)
{
	if (!agent_guard_len || !atomic_load(&retired))
		return;
	if (!agent_sig_own(SIGSEGV, agent_guard_fault, NULL, 0)) {
		agent_log("guard: cannot take SIGSEGV", "; --guard is off", NULL);
		return;
	}
	protect(agent_guard_lo, PROT_NONE);
	for (int i = 0; i < SLOTS; i++) {
		if (atomic_load(&slots[i].state) != LIVE)
			protect(slot_page(i), PROT_NONE);
		protect(slot_page(i) + PAGE, PROT_NONE);
	}
	atomic_store(&retired, false);
}

bool agent_guard_counts(uint64_t *g, uint64_t *f)
{
	if (!agent_guard_len)
		return false;
	*g = atomic_load(&guarded);
	*f = atomic_load(&full);
	return true;
}

size_t agent_guard_usable(const void *p)
{
	int i = slot_of(p);
	return i < 0 ? 0 : slots[i].size;
}

/* ---------- the fault ---------- */

/* The slot whose block the faulting address a is about: the freed block
 * whose page holds it, or the block nearest to it across a guard page
 * (past the end of the one before, before the start of the one after). */
static int blamed(uintptr_t a)
{
	uintptr_t k = (a - agent_guard_lo) / PAGE;
	if (k & 1)
		return atomic_load(&slots[k / 2].state) == NEVER_USED ? -1 : (int)(k / 2);
	int before = k ? (int)(k / 2) - 1 : -1, after = k / 2 < SLOTS ? (int)(k / 2) : -1;
	if (before >= 0 && atomic_load(&slots[before].state) == NEVER_USED)
		before = -1;
	if (after >= 0 && atomic_load(&slots[after].state) == NEVER_USED)
		after = -1;
	if (before < 0 || after < 0)
		return before < 0 ? after : before;
	uintptr_t past = a - (slots[before].addr + slots[before].size);
	uintptr_t ahead = slots[after].addr - a;
	return past <= ahead ? before : after;
}

static char *put_hex(char *p, uintptr_t v)
{
	int k = 60;
	while (k > 0 && !((v >> k) & 15))
		k -= 4;
	for (; k >= 0; k -= 4)
		*p++ = "0123456789abcdef"[(v >> k) & 15];
	*p = 0;
	return p;
}

static void say_fault(const char *what, uintptr_t a, const struct slot *s)
{
	char buf[160], *p = buf;
	p += agent_strlcpy(p, "guard: ", 8);
	p += agent_strlcpy(p, what, 40);
	p += agent_strlcpy(p, " at 0x", 8);
	p = put_hex(p, a);
	p += agent_strlcpy(p, ", a block of ", 16);
	p = agent_put_dec(p, s->size);
	agent_strlcpy(p, " bytes", 8);
	agent_log(buf, "; the report has its stacks", NULL);
}

void agent_guard_fault(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	uintptr_t a = si ? (uintptr_t)si->si_addr : 0;
	ucontext_t *uc = ucv;
	int i = -1;
	if (si && si->si_code == SEGV_ACCERR && uc && agent_guard_owns((void *)a))
		i = blamed(a);
	if (i < 0) {
		agent_sig_program(sig, si, ucv);  /* not the guard's */
		errno = saved_errno;
		return;
	}
	struct slot *s = &slots[i];
	bool freed = atomic_load(&s->state) == FREED;
	int busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	/* the faulting access first (as a return address one past it, which
	 * symbolizes back to it), then its callers */
	uintptr_t pcs[AGENT_MAX_DEPTH];
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	pcs[0] = pc + 1;
	int n = 1 + agent_unwind_cfi_at(pc, (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
					(uintptr_t)uc->uc_mcontext.gregs[REG_RBP], pcs + 1,
					agent_config.depth - 1, NULL).npcs;
	bool write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
	uint32_t access = agent_stack_intern(FMT_FN_MALLOC, pcs, n);
	atomic_store(&s->reported, true);  /* its slack says no more */
	agent_error_guard(freed ? FMT_ERROR_USE_AFTER_FREE : FMT_ERROR_OVERFLOW, s->alloc_stack,
			  freed ? s->free_stack : 0, s->size, write ? FMT_WHERE_WRITE : FMT_WHERE_READ,
			  (uint64_t)(a - s->addr), access);
	say_fault(freed ? "use after free" : (a < s->addr ? "underflow" : "overflow"), a, s);
	agent_tls.busy = busy;
	if (agent_config.guard_continue) {
		/* the page opened: the access runs again and goes through */
		if (!protect(a & ~(uintptr_t)(PAGE - 1), PROT_READ | PROT_WRITE)) {
			atomic_store(&opened, true);
			errno = saved_errno;
			return;
		}
	}
	agent_sig_program(sig, si, ucv);  /* dies of it, or the program's handler */
	errno = saved_errno;
}
