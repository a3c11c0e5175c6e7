/*
 * agent.h — what the files of libheaptrail.so share with each other.
 *
 * The agent lives inside another program's allocator calls. Everything
 * here obeys three rules:
 *  - no libc allocation (metadata comes from mmap: agent_mmap), no stdio,
 *    no locale; banned.h makes the obvious offenders compile errors;
 *  - a thread that is already inside the agent (agent_tls.busy) never
 *    re-enters it: nested allocations go straight to the real allocator;
 *  - locks are spinlocks held for a few instructions, never across a call
 *    into libc other than mmap, and all of them are taken around fork()
 *    so a child never inherits one held.
 * "Hook-safe" below means callable from inside a malloc hook; "signal-safe"
 * means callable from a signal handler.
 */
#ifndef HEAPTRAIL_AGENT_H
#define HEAPTRAIL_AGENT_H

#include <emmintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/leakfile.h"

#define AGENT_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))

#define AGENT_MAX_DEPTH 256
#define AGENT_DEFAULT_DEPTH 64

/* ---- configuration (config.c), fixed after the constructor ---- */
struct agent_config {
	int depth;               /* frames kept per stack */
	bool follow_children;    /* keep LD_PRELOAD for exec'd children */
	bool freeres;            /* release libc/libstdc++ caches before the report */
	bool leak_kinds;         /* classify blocks at exit (reachability scan) */
	bool active;             /* record new allocations from the start */
	bool peak;               /* keep a dump of the peak */
	bool final;              /* dump at exit */
	int stop_signal;         /* signal that stops threads for the scan */
	bool stop_ptrace;        /* stop threads with ptrace first (else the signal only) */
	int leak_check_signal;   /* signal that asks for a leak check; 0 = none */
	int dump_signal;         /* dump on this signal; 0 = none */
	int peak_step;           /* percent the peak must grow by to be dumped again */
	uint64_t sample;         /* mean bytes between samples; 1 = exact */
	uint64_t interval;       /* dump every this many bytes allocated; 0 = off */
	uint64_t every_ms;       /* dump every this many ms; 0 = off */
	uint64_t timeline_ms;    /* timeline period; 0 = off */
	int error_exitcode;      /* exit status when the exit report cannot be
				  * written; 0 = keep the program's */
	char run_id[64];         /* the run these files belong to ("" = none) */
	char output[4096];       /* directory for files; "" = current directory */
	char prefix[4096];       /* dump name prefix; "" = OUTPUT/heaptrail */
};
extern struct agent_config agent_config;

/* Reads HEAPTRAIL_OPTIONS from the environment. Called once, from the
 * constructor (the only place the agent calls getenv). Unknown options are
 * reported once on stderr and ignored. */
void agent_config_load(void);

/* ---- per-thread counters (counters.c) ---- */
struct agent_counts {
	/* every allocation seen; in exact mode only those not tracked, the
	 * tracked ones are added when the counters are summed */
	_Atomic uint64_t allocs, bytes_allocated;
	_Atomic uint64_t frees;                    /* filled in by agent_counters_sum */
	_Atomic uint64_t tracked, tracked_bytes;   /* entered in the live table */
	_Atomic uint64_t tracked_frees, freed_bytes; /* tracked blocks released */
	_Atomic uint64_t dropped;                  /* could not be tracked */
	/* What the tracked blocks stand for (each sampled block weighted as
	 * in sample.c; in exact mode, the blocks themselves): signed sums. */
	_Atomic uint64_t est_bytes, est_blocks_x1024;
	/* Sampling mode: what the samples stand for, ever allocated. */
	_Atomic uint64_t est_allocated, est_allocs_x1024;
};
struct agent_counters {
	struct agent_counts c;
	_Atomic pid_t owner;     /* thread writing it; 0 = free */
	bool shared;             /* the overflow slot: atomic adds */
	struct walk_memos *memo; /* the owner's last walks (unwind_cfi.c); mapped on demand */
} __attribute__((aligned(64)));

/* ---- per-thread state (hooks.c) ---- */
struct agent_tls {
	int busy;                /* inside the agent: nested calls pass through */
	struct agent_counters *ctr;
	int64_t sample_left;     /* bytes until the next sampled allocation; >= 0, and
				  * compared unsigned: a size of 2^63 or more
				  * (malloc(SIZE_MAX)) is never below it */
	uint64_t rng;            /* the sampler's random state; 0 = unseeded */
	uint64_t since_check;    /* estimated bytes since the last trigger check */
	/* Calls a signal handler made while the thread was inside the agent,
	 * kept for when it leaves (hooks.c, "deferred calls"). */
	int deferred;            /* the buffer holds records (counted in agent_pending) */
	bool pushing;            /* a record is being written (nested signals) */
	bool tables_locked;      /* this thread holds every table lock */
	struct agent_defer *defer;
};
extern __thread struct agent_tls agent_tls;

/* A slot for the calling thread. Hook-safe (a system call or two, once). */
struct agent_counters *agent_counters_claim(void);
/* In a forked child: the surviving thread keeps its slot under its new id. */
void agent_counters_forked(void);
/* Sums every thread's counters. Signal-safe. */
void agent_counters_sum(struct agent_counts *out);

static inline void agent_count(_Atomic uint64_t *field, uint64_t n)
{
	if (unlikely(agent_tls.ctr->shared))
		atomic_fetch_add_explicit(field, n, memory_order_relaxed);
	else  /* the only writer: no locked instruction needed */
		atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + n,
				      memory_order_relaxed);
}

/* Two counts at once: one look at whether the slot is shared. */
static inline void agent_count2(_Atomic uint64_t *a, uint64_t na, _Atomic uint64_t *b, uint64_t nb)
{
	if (unlikely(agent_tls.ctr->shared)) {
		atomic_fetch_add_explicit(a, na, memory_order_relaxed);
		atomic_fetch_add_explicit(b, nb, memory_order_relaxed);
	} else {
		atomic_store_explicit(a, atomic_load_explicit(a, memory_order_relaxed) + na,
				      memory_order_relaxed);
		atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + nb,
				      memory_order_relaxed);
	}
}

static inline struct agent_counts *agent_my_counts(void)
{
	if (unlikely(!agent_tls.ctr))
		agent_tls.ctr = agent_counters_claim();
	return &agent_tls.ctr->c;
}

/* ---- sampling (sample.c) ---- */
/* Sampling mode only: the countdown has run out (or was never set). */
bool agent_sample_slow(size_t n);
/* What agent_sampled does once the countdown has run out: always true in
 * exact mode (where the countdown stays at zero), without a call. */
static inline bool agent_sample_due(size_t n)
{
	return agent_config.sample <= 1 || agent_sample_slow(n);
}
/* Says whether to record an allocation of n bytes: always in exact mode;
 * else when it crosses the thread's byte countdown. In sampling mode an
 * allocation passed over costs one subtraction and one compare, and is
 * not counted one by one: the totals are estimated from the samples. In
 * exact mode every allocation is counted as it is tracked (note_alloc),
 * and the few that are not tracked are counted apart. Hook-safe. */
static inline bool agent_sampled(size_t n)
{
	if (likely((uint64_t)n < (uint64_t)agent_tls.sample_left)) {
		agent_tls.sample_left -= (int64_t)n;
		return false;
	}
	return agent_sample_due(n);
}
/* A tracked block of n bytes appears (sign +1) or goes (-1): updates the
 * estimates, and now and then checks the triggers. Hook-safe. */
void agent_sample_note(struct agent_counts *c, size_t n, int sign);
/* The same, without a call in exact mode with no byte-driven trigger:
 * then there is nothing to note (the estimates are the tracked counts). */
static inline void agent_sample_note_maybe(struct agent_counts *c, size_t n, int sign)
{
	if (agent_config.sample > 1 || agent_config.interval || agent_config.peak)
		agent_sample_note(c, n, sign);
}
/* What a sampled block of n bytes stands for, in bytes and in blocks
 * scaled by 1024. */
void agent_sample_weight(size_t n, uint64_t *bytes, uint64_t *blocks_x1024);

/* ---- real allocator (hooks.c) ---- */
/* Resolves the real allocator and runs agent_init_early if no allocation
 * has done it yet. */
void agent_ensure_ready(void);
/* Stops or restarts recording new blocks (frees are always seen);
 * returns the previous state. */
int agent_set_recording(bool on);
bool agent_recording(void);
/* Around fork: every nested call passes through while the tables are
 * locked. */
void agent_hooks_fork_prepare(void);
void agent_hooks_fork_done(void);
/* Says on stderr, once, when the program's malloc is not the agent's
 * (another allocator before it in LD_PRELOAD); from the constructor. */
void agent_hooks_check_bypass(void);
/* The path of that allocator's object, or NULL. */
const char *agent_allocator_bypassed(void);
/* Carries out the frees (and records the allocations) that signal
 * handlers made while this thread was inside the agent; call once the
 * thread holds no table lock. Hook-safe. */
void agent_defer_drain(void);

/* ---- process state (lifecycle.c) ---- */
extern atomic_int agent_state;   /* 0 uninitialised, 1 initialising, 2 ready */
extern pid_t agent_pid;          /* updated in a forked child */
extern uintptr_t agent_self_lo, agent_self_hi; /* our own text, skipped in stacks */
/* Runs the part of initialisation that must precede the first tracked
 * allocation (tables, own address range). Hook-safe, idempotent. */
void agent_init_early(void);
/* Writes the at-exit report once; status < 0 when unknown; stack_from as
 * for agent_leakscan; extra: the exit caller's callee-saved registers
 * (roots), or NULL. Returns 0, or -errno when the report could not be
 * written (it says so on stderr); 0 too when it was written before or is
 * not wanted. Not hook-safe (it takes every table lock); called from exit
 * paths, after agent_exit_claim. */
int agent_report_exit(int status, uintptr_t stack_from, const uintptr_t *extra, int nextra);
/* Makes the calling thread the one that ends the process; in any other
 * thread that calls it later, waits for ever (the first one's exit ends
 * the process). Returns at once in a process that is not agent_pid (a
 * vfork child). */
void agent_exit_claim(void);
/* exit() was entered by this thread: the caller's callee-saved registers
 * (AGENT_CALLER_NREGS of them) and its stack pointer, roots for the
 * report that its exit handlers write later. Hook-safe. */
void agent_exit_entered(const uintptr_t *regs, uintptr_t sp);

/* Entry points that end in a leak scan (exit, _Exit, _exit,
 * heaptrail_leak_check) start with AGENT_CALLER_ENTRY: it pushes the
 * caller's callee-saved registers (rbx, rbp, r12-r15) and calls
 * TARGET(arg0, regs, sp), with sp the stack pointer at the entry (the
 * slot of the return address: every program frame is above it). C code
 * cannot do this: by its first line the compiler may have moved those
 * registers already, and whatever libc's exit machinery later spills
 * them to is below the caller's frames, where the scan does not look.
 * With RET, TARGET's return value is returned; else TARGET must not
 * return. x86-64 only. */
#define AGENT_CALLER_NREGS 6
#define AGENT_CALLER_ENTRY(name, target, ret)                              \
	__asm__(".text\n"                                                   \
		".globl " #name "\n"                                          \
		".type " #name ", @function\n"                                \
		".p2align 4\n" #name ":\n"                                    \
		"	.cfi_startproc\n"                                     \
		"	endbr64\n"                                            \
		"	push %r15\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %r14\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %r13\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %r12\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %rbp\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %rbx\n	.cfi_adjust_cfa_offset 8\n"           \
		"	mov %rsp, %rsi\n"                                     \
		"	lea 48(%rsp), %rdx\n"                                 \
		"	sub $8, %rsp\n	.cfi_adjust_cfa_offset 8\n"           \
		"	call " #target "\n"                                   \
		ret                                                         \
		"	.cfi_endproc\n"                                       \
		".size " #name ", .-" #name "\n")
#define AGENT_CALLER_RETURNS                                               \
	"	add $8, %rsp\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %rbx\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %rbp\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r12\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r13\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r14\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r15\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	ret\n"
#define AGENT_CALLER_NORETURN "	ud2\n"
/* A leak check now: classifies and writes heaptrail.PID.check-N.leaks.
 * flags: HEAPTRAIL_LEAKS_*; extra roots (an interrupted context's
 * registers) may be NULL. Returns 0 or -errno (-EBUSY when another check
 * is running). Not hook-safe. */
int agent_leak_check(int flags, uintptr_t stack_from, const uintptr_t *extra, int nextra);

/* Work asked for by a signal while the thread was inside the agent runs
 * when it leaves: hooks call agent_run_pending when agent_pending is set. */
#define AGENT_PENDING_CHECK 1            /* a leak check, "all" */
#define AGENT_PENDING_CHECK_INCREASED 2  /* a leak check, "increased" */
#define AGENT_PENDING_DUMP_EVERY 4
#define AGENT_PENDING_DUMP_SIGNAL 8
#define AGENT_PENDING_WORK 0xff          /* the bits above */
/* Above them, how many threads hold signal handlers' deferred calls
 * (hooks.c): those threads drain theirs when they run the pending work;
 * the others find nothing to do, for the few instructions it lasts. */
#define AGENT_PENDING_DEFERRED 0x100
extern atomic_int agent_pending;
void agent_run_pending(void);

static inline __attribute__((always_inline)) uintptr_t agent_stack_pointer(void)
{
	uintptr_t sp;
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	return sp;
}

/* ---- OS helpers (os.c): raw syscalls, no errno games beyond libc's ---- */
/* Anonymous private mapping; NULL on failure. Hook-safe, signal-safe. */
void *agent_mmap(size_t len);
void agent_munmap(void *p, size_t len);
/* Runs fn(arg) on a stack of the agent's own (mapped for the call, with a
 * guard page below it, left out of leak scans) and returns its result, or
 * -ENOMEM, with a message, when no stack could be mapped. For work that
 * may run in a signal handler or on a program's small stack (a
 * sigaltstack, a 16 KiB thread stack): it then uses a few dozen bytes of
 * that stack. Safe in a signal handler; not hook-safe (mmap). */
long agent_call_on_own_stack(long (*fn)(void *), void *arg);
/* Copies up to cap of the agent's current mappings; returns the count.
 * Signal-safe. */
size_t agent_mmap_ranges(uintptr_t *starts, size_t *lens, size_t cap);
/* Reads a small file (under /proc) whole into buf, NUL-terminated; returns
 * its length, or -1 when it cannot be read or is empty. Signal-safe. */
ssize_t agent_read_small(const char *path, char *buf, size_t cap);
/* Writes a message to stderr as one write(2). Signal-safe. */
void agent_log(const char *a, const char *b, const char *c);
/* A short lower-case description of an errno value (e > 0), without
 * libc's strerror (which may load a locale). Signal-safe. */
const char *agent_strerror(int e);
size_t agent_strlen(const char *s);
bool agent_streq(const char *a, const char *b);
bool agent_strstarts(const char *s, const char *prefix);
/* Copies at most cap-1 bytes and terminates; returns the source length. */
size_t agent_strlcpy(char *dst, const char *src, size_t cap);
/* Writes v in decimal at dst (up to 20 digits) and a NUL; returns the
 * end (the NUL). Hook-safe and signal-safe. */
char *agent_put_dec(char *dst, uint64_t v);
void agent_memcpy(void *dst, const void *src, size_t n);
void agent_memset(void *dst, int c, size_t n);

/* A spinlock that yields after a short spin. Fork handling in lifecycle.c
 * takes every lock in the agent before fork and releases it in both
 * processes afterwards.
 *
 * While the process has a single thread, taking a lock is a plain store:
 * glibc's __libc_single_threaded is true until the first thread is
 * created by any means glibc knows (pthread_create, and the threads libc
 * starts for itself: SIGEV_THREAD timers, POSIX AIO), and the thread that
 * creates it is never inside a locked section then. A lock's holder that
 * is interrupted by a signal handler which enters the agent is handled by
 * the recursion guard, as before. (Threads made with a raw clone(2), which
 * glibc does not know of, would break this; programs that malloc from
 * such threads break glibc itself too.) */
extern char __libc_single_threaded;
typedef struct { atomic_int v; } agent_lock_t;
void agent_lock_slow(agent_lock_t *l);
static inline void agent_lock(agent_lock_t *l)
{
	if (likely(__libc_single_threaded)) {
		atomic_store_explicit(&l->v, 1, memory_order_relaxed);
		return;
	}
	if (likely(!atomic_exchange_explicit(&l->v, 1, memory_order_acquire)))
		return;
	agent_lock_slow(l);
}
/* Has l been seen free at some moment within about ms milliseconds? False
 * means it stayed held all along: perhaps by the code a signal handler
 * interrupted, so taking it would never return. Signal-safe. */
bool agent_lock_seen_free(agent_lock_t *l, long ms);
static inline void agent_unlock(agent_lock_t *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* Adds n to a total any thread may add to: a locked add (a full
 * barrier) only once the process has a second thread (see agent_lock). */
static inline void agent_add_shared(_Atomic uint64_t *x, uint64_t n)
{
	if (likely(__libc_single_threaded))
		atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(x, n, memory_order_relaxed);
}

/* ---- stack capture: unwind.h (the unwinder), walk_memo.h (its memo) ---- */

/* ---- tables (table.c) ---- */
/* What is live per stack is not counted here: it is summed from the live
 * table when a report needs it, so a free never touches its stack. */
struct agent_stack {
	uint64_t hash;
	uint32_t pc_chunk, pc_off;      /* where its pcs live */
	uint16_t depth;
	uint8_t fn;                     /* enum fmt_alloc_fn */
	_Atomic uint64_t total_bytes, total_blocks;  /* ever allocated */
};

/* Interns a stack; returns its id (>= 1), or 0 when the table is full.
 * Hook-safe. */
uint32_t agent_stack_intern(int fn, const uintptr_t *pcs, int depth);
/* Number of stacks interned so far; ids are 1..count. */
uint32_t agent_stack_count(void);
/* The record of stack id (1..count). Records never move. Hook-safe. */
#define AGENT_STACKS_PER_CHUNK (1u << 16)
extern struct agent_stack *agent_stack_chunks[];
static inline struct agent_stack *agent_stack_get(uint32_t id)
{
	id--;
	return &agent_stack_chunks[id / AGENT_STACKS_PER_CHUNK][id % AGENT_STACKS_PER_CHUNK];
}
const uintptr_t *agent_stack_pcs(const struct agent_stack *s);

/* Records a new live block. Returns false (and counts it as dropped) when
 * there is no room. Hook-safe. */
bool agent_live_insert(uintptr_t addr, size_t size, uint32_t stack);
/* Removes a block; returns true and fills size/stack when it was tracked.
 * A block the agent never saw is not an error. Hook-safe. */
bool agent_live_remove(uintptr_t addr, size_t *size, uint32_t *stack);

struct agent_kinds {
	uint64_t bytes[FMT_KIND_COUNT], blocks[FMT_KIND_COUNT];
	struct agent_counts totals; /* the counters summed while the world was
				       stopped: the same moment as the kinds */
};

/* A live block as the leak scan sees it. */
struct agent_block {
	uintptr_t addr;
	uint64_t size : 40;
	uint64_t stack : 24;
};
/* With every table lock held: adds each live block's size and count to
 * out[stack].bytes/blocks[FMT_KIND_IN_USE] (out has nstacks + 1 entries). */
void agent_live_per_stack_locked(struct agent_kinds *out, uint32_t nstacks);
/* With every table lock held: the number of live blocks, and a copy of up
 * to cap of them (unordered). */
size_t agent_live_count_locked(void);
size_t agent_live_copy_locked(struct agent_block *out, size_t cap);

/* With every table lock held: how full the live table is and how far its
 * entries sit from their home slots (a lookup's probe count is 1 + the
 * displacement); for tests and benchmarks. */
struct agent_live_stats {
	uint64_t entries, slots, displacement_sum, displacement_max;
};
void agent_live_stats_locked(struct agent_live_stats *st);

/* With every table lock held: forgets every live block. */
void agent_live_clear_locked(void);

/* In sampling mode, whether addr may be a tracked block: false is sure and
 * costs one load, without a lock. Always true in exact mode. Hook-safe. */
extern _Atomic uint16_t *agent_filter;
static inline size_t agent_filter_slot(uintptr_t a)
{
	/* A slot per 4 KiB page, not hashed, wrapping every 4 GiB: a heap of
	 * a few MiB needs a few KiB of filter, which stays in L1 however the
	 * program frees. A page holding a sampled block sends its other frees
	 * down the slow path, and sampling keeps such pages rare. */
	return (size_t)((a >> 12) & ((1u << 20) - 1));
}
static inline bool agent_live_may_contain(uintptr_t addr)
{
	return !agent_filter ||
	       atomic_load_explicit(&agent_filter[agent_filter_slot(addr)], memory_order_relaxed);
}
/* Sets up the filter (sampling mode only); from the constructor. */
void agent_filter_init(void);
/* Pins the filter's slots for the bootstrap buffer at "maybe", so a free
 * of a bootstrap block always reaches the slow path (hooks.c). */
void agent_filter_pin_boot(_Atomic uint16_t *filter);

/* Take/release every table lock (fork, leak scan). */
void agent_tables_lock_all(void);
/* agent_lock_seen_free for every table lock. Signal-safe. */
bool agent_tables_wait_unlocked(long ms);
void agent_tables_unlock_all(void);

/* ---- modules (modules.c) ---- */
/* Remembers every module currently loaded, so one that is dlclose'd later
 * still symbolizes. Call before dlclose. Not hook-safe (dl_iterate_phdr). */
void agent_modules_snapshot(void);
/* Fork: the parent's prepare handler snapshots the list (marking what is
 * loaded); the child is told whether other threads existed at the fork,
 * in which case it never calls dl_iterate_phdr again (its lock may have
 * been held) and writes the snapshot. agent_modules_frozen says so, for
 * other users of the loader's lock (libunwind). */
void agent_modules_fork_prepare(void);
void agent_modules_fork_child(bool threaded);
bool agent_modules_frozen(void);

/* ---- stopping the other threads (stopworld.c) ---- */
/* The registers of one stopped thread: the words of x86-64's
 * user_regs_struct (ptrace) or of its ucontext gregs (signal). */
#define AGENT_STOP_NREGS 32
enum { AGENT_STOP_WAITING, AGENT_STOP_STOPPED, AGENT_STOP_RELEASED, AGENT_STOP_GONE,
       AGENT_STOP_IN_SYSCALL, /* left in a call a stop would disturb (sp known) */
       AGENT_STOP_TRAPPED /* stopped, registers not read yet (internal) */ };
enum { AGENT_STOP_NONE, AGENT_STOP_PTRACE, AGENT_STOP_SIGNAL };
struct agent_stopped {
	pid_t tid;
	atomic_int state;        /* AGENT_STOP_*; WAITING after the stop = not stopped */
	int nregs;               /* words of regs filled in (0: unknown) */
	uintptr_t sp;            /* lowest live stack address (its stack pointer
				    less the red zone); for a thread not stopped,
				    from the system call it blocks in, or 0 */
	uintptr_t regs[AGENT_STOP_NREGS];
};
/* Once, from the constructor: sig is the fallback's stop signal. */
void agent_stopworld_init(int sig);
/* Stops every thread of the process but the caller and skip (ptrace from
 * a tracer task; a signal when ptrace is not permitted), and points
 * *threads at their registers (valid until the resume). Returns how many
 * threads could not be stopped, -1 when nothing could be done. Not
 * hook-safe; the caller must not hold a lock the stop takes (none: it
 * makes only system calls). Saves errno. */
int agent_stopworld_stop(pid_t skip, struct agent_stopped **threads, int *nthreads);
/* AGENT_STOP_PTRACE or AGENT_STOP_SIGNAL while stopped, else NONE. */
int agent_stopworld_method(void);
/* Lets every stopped thread go on; returns when the tracer has gone. */
void agent_stopworld_resume(void);

/* ---- leak scan (leakscan.c) ---- */
struct agent_scan_info {
	int threads_stopped, threads_unstopped;
	uint64_t root_bytes, blocks_scanned;
	uint64_t scan_ns;        /* wall time the world was stopped for */
	uint64_t bytes[FMT_KIND_COUNT], blocks[FMT_KIND_COUNT];
	struct agent_counts totals; /* the counters summed while the world was
				       stopped: the same moment as the kinds */
};
/* Once, from the constructor: sig is the signal used to stop threads. */
void agent_leakscan_init(int sig);
/* Classifies every live block as valgrind memcheck would. stack_from is
 * the lowest address of the calling thread's stack that belongs to the
 * program; everything below it is the agent's own and not a root. extra
 * are more roots (the caller's registers). [alt_lo, alt_hi) is the
 * sigaltstack the request came on (else 0, 0), left out when stack_from is
 * not on it: then it holds only handler frames. Returns per-stack totals indexed by stack id (0 unused),
 * *nstacks ids, mapped with agent_mmap (*maplen bytes: release with
 * agent_munmap), or NULL when the scan could not run. Not hook-safe: takes
 * every table lock and stops every other thread for the duration. */
struct agent_kinds *agent_leakscan(uintptr_t stack_from, const uintptr_t *extra, int nextra,
				   uintptr_t alt_lo, uintptr_t alt_hi, uint32_t *nstacks,
				   size_t *maplen, struct agent_scan_info *info);

/* ---- heap dumps and triggers (dump.c) ---- */
/* Writes a heap profile in gperftools' text layout (heap_v2/S header,
 * MAPPED_LIBRARIES) to path, or when path is NULL to an automatic name
 * PREFIX.PID.SEQ.KIND.heap. Returns 0 or -errno. Takes every table lock
 * briefly; safe from a signal handler when the thread is not inside the
 * agent. */
int agent_dump(const char *path, const char *kind);
/* Checks the interval and peak triggers against the current totals.
 * Called now and then by agent_sample_note. */
void agent_triggers_check(void);
/* Starts the ticker thread and installs the dump signal (constructor;
 * again in a forked child, which fork left without the thread). */
void agent_triggers_start(void);
/* The ticker thread's id, or 0: it is the agent's, not the program's. */
extern atomic_int agent_ticker_tid;
/* Zeroes every stack's allocated-so-far counts (heaptrail_reset). */
void agent_reset_cumulative(void);
/* Switches to sampling every `sample` bytes, forgetting every block
 * recorded so far (jemalloc's prof.reset with lg_sample). */
void agent_resample(uint64_t sample);

/* ---- writer (writer.c) ---- */
/* A soft RLIMIT_NOFILE raised to the hard one while a file is open. */
struct agent_rlimit_raise {
	bool raised;
	uint64_t old;
};
struct agent_writer {
	int fd;
	char *buf;
	size_t len, cap;
	bool failed;
	int err;                 /* errno of the first failed write */
	uint64_t dev, ino;       /* of the file written */
	struct agent_rlimit_raise lim;
	char tmp[4352], path[4352];
};
/* Creates a new file in dir ("" = the current directory) at an
 * unpredictable temporary name (written into tmp), O_EXCL|O_NOFOLLOW,
 * mode 0600; raises the soft RLIMIT_NOFILE when no descriptor is left
 * (undo with agent_rlimit_restore once the file is closed). Returns the
 * descriptor or -errno. Signal-safe. */
int agent_open_exclusive(const char *dir, char *tmp, size_t cap, struct agent_rlimit_raise *lim);
/* Raises the soft RLIMIT_NOFILE to the hard one (false when it cannot);
 * agent_rlimit_restore puts it back. Signal-safe. */
bool agent_rlimit_raise(struct agent_rlimit_raise *lim);
void agent_rlimit_restore(struct agent_rlimit_raise *lim);
/* Opens dir/name via a temporary name (agent_open_exclusive). Returns 0
 * or -errno. */
int agent_writer_open(struct agent_writer *w, const char *dir, const char *name);
/* The same for a whole path. */
int agent_writer_open_path(struct agent_writer *w, const char *path);
/* Copies the file at path (e.g. /proc/self/maps) into the output. */
void agent_put_file(struct agent_writer *w, const char *path);
void agent_put(struct agent_writer *w, const char *s);
void agent_put_u64(struct agent_writer *w, uint64_t v);
void agent_put_hex(struct agent_writer *w, uint64_t v);
void agent_put_escaped(struct agent_writer *w, const char *s);
/* Flushes, fsyncs nothing, closes and renames into place. Returns 0 or
 * -errno; on failure the temporary file is removed. */
int agent_writer_commit(struct agent_writer *w);

/* Writes the module list as "module" lines. */
void agent_modules_write(struct agent_writer *w);

/* signals.c: signals the agent owns keep the agent's handler in the
 * kernel; the program's sigaction/signal calls on them are recorded and
 * answered as the kernel would. Signal-safe. */
bool agent_sig_own(int sig, void (*fn)(int, siginfo_t *, void *), const sigset_t *agent_mask);
/* Hands a signal that is not heaptrail's to the program's disposition. */
void agent_sig_program(int sig, siginfo_t *si, void *uc);
bool agent_sig_program_has_handler(int sig);
void agent_signals_init(void);
/* In a fork child: a thread of the parent that held the table lock is gone. */
void agent_signals_forked(void);
/* lifecycle.c: the exit report of a process a signal is about to kill
 * ("exit signal N"), from that signal's handler. */
void agent_report_fatal(int sig, siginfo_t *si, void *uc);

#endif
