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
 *
 * The agent in layers. A file includes headers of its own layer and of
 * the layers below, never above; no two files include each other's
 * header. scripts/check-layers reads the table below (keep its shape:
 * "layer N NAME: files") and the #include lines, and `make check-layers`
 * (run by `make test`) fails on a violation, or when the agent includes
 * anything of the CLI's (analyze/, render/, symbolize/, cli/). Where a
 * lower layer must call up (the sampler asks the triggers for a check,
 * the tables drain the hooks' deferred calls, a fatal signal asks for the
 * exit report, pending work runs a leak check), the upper file registers
 * a function at start-up: agent_sample_on_check, agent_tables_on_unlock,
 * agent_signals_on_fatal, agent_pending_on_check.
 *
 *   layer 3 process: lifecycle exitreport sigchecks leakscan api attach
 *        (the constructor, fork, exit and its report, leak checks, the API,
 *        the agent loaded into a running process)
 *   layer 2 record:  hooks dlhooks mmaphooks heaperrors guard heapprofile triggers leakwriter
 *                    poolrec fnhook fnhook_impl fnreloc fnfind fnentries
 *        (the allocator entry points, pool operations and the allocator
 *        functions hooked by name, and the files written while the
 *        program runs and at its end)
 *   layer 1 state:   counters table pool sample unwind cfi walk_memo modules stopworld
 *                    stopworld_impl stoptrace rulecache heapstats quarantine
 *        (what is recorded, and how: counters, stacks and live blocks,
 *        the pools' chunks, the allocator's own count,
 *        the sampler, the unwinder, the module list, stopping threads)
 *   layer 0 base:    agent os config writer procmaps buildid signals startup banned
 *        (this header and os.c: memory, strings, locks, the clock; the
 *        options; the file writer; /proc/self/maps; build-ids; the
 *        signals the agent owns; the real allocator and bootstrap buffer)
 *
 * Each header says what its module is; this one keeps only what every
 * file needs: the per-thread state, the process facts, the OS helpers.
 */
#ifndef HEAPTRAIL_AGENT_H
#define HEAPTRAIL_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>

#define AGENT_API __attribute__((visibility("default")))
#define AGENT_LIKELY(x) __builtin_expect(!!(x), 1)
#define AGENT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AGENT_NOINLINE __attribute__((noinline))

#define AGENT_MAX_DEPTH 256
#define AGENT_DEFAULT_DEPTH 64

/* ---- per-thread state (startup.c) ---- */
struct agent_tls {
	int busy;                /* inside the agent: nested calls pass through */
	struct agent_counters *ctr;
	int64_t sample_left;     /* bytes until the next sampled allocation; >= 0, and
				  * compared unsigned: a size of 2^63 or more
				  * (malloc(SIZE_MAX)) is never below it */
	uint64_t rng;            /* the sampler's random state; 0 = unseeded */
	uint64_t sample_s;       /* the S sample_left was drawn at (sample.c: auto) */
	int64_t guard_left;      /* --guard, exact mode: bytes until the next guarded
				  * allocation; 0 = not drawn yet (sample.c) */
	uint64_t auto_ns;        /* sample=auto: when this thread last looked at its rate */
	uint32_t auto_n;         /* sample=auto: samples since that look */
	uint32_t auto_debt;      /* sample=auto: ns spent sampling over the budget (sample.c) */
	uint64_t auto_tsc;       /* sample=auto: the TSC at auto_ns */
	uint64_t auto_cost;      /* sample=auto: TSC ticks spent on samples since then */
	uint64_t sample_tsc;     /* sample=auto: the TSC when the sample in hand was
				  * decided, 0 when none is in hand */
	uint64_t since_check;    /* estimated bytes since the last trigger check */
	int time_left;           /* recorded events until the next look at the clock */
	uint64_t time_tsc;       /* the TSC at this thread's last look at it */
	/* Calls a signal handler made while the thread was inside the agent,
	 * kept for when it leaves (hooks.c, "deferred calls"). */
	int deferred;            /* the buffer holds records (counted in agent_pending) */
	bool pushing;            /* a record is being written (nested signals) */
	bool draining;           /* agent_defer_drain is at work: it does not
				  * start again, and the sampler's slow work
				  * waits for the end of its batch (due) */
	int due;                 /* that work, AGENT_DUE_* (sample.h) */
	bool masked;             /* signals blocked by an entry point's drain until
				  * it leaves; unmasked: the mask to put back */
	uint64_t unmasked;
	bool tables_locked;      /* this thread holds (or is taking) every table lock */
	bool in_loader;          /* inside dlclose: the loader's list may be
				  * half changed (dlhooks.c, dlclose) */
	struct agent_defer *defer;
	struct agent_free_ring *frees; /* exact mode: the ring of this thread's
				  * last frees, its counters slot's (heaperrors.h);
				  * NULL until its first free */
	uintptr_t fn_outer;      /* the saved registers of this thread's hooked
				  * allocator call in progress (fnhook.c), 0 none */
	bool in_real;            /* inside a call of the agent's to the real
				  * allocator: its calls of its own entry points
				  * (glibc's realloc calls malloc) go straight on
				  * (fnentries.c: the allocator's own entry points) */
};
extern __thread struct agent_tls agent_tls;
/* agent_tls.busy values: 1 = the agent's own work, whose nested
 * allocations are its own; 2 = every lock held (fork): pass through
 * without touching any table; 3 = an entry point recording a call, maybe
 * holding a table lock: a nested call comes from a signal handler and
 * waits (hooks.c, "deferred calls"). */
#define AGENT_BUSY_AGENT 1
#define AGENT_BUSY_LOCKED 2
#define AGENT_BUSY_HOOK 3

/* ---- process state (startup.c) ---- */
/* the real allocator and what tracking needs (agent_ready, startup.h) */
enum agent_state { AGENT_STATE_NONE, AGENT_STATE_INITIALISING, AGENT_STATE_READY };
extern atomic_int agent_state;   /* an enum agent_state */
extern pid_t agent_pid;          /* updated in a forked child */
/* The PID files name and record: the process's own, or the one heaptrail
 * attach was given for it from another PID namespace (the `pid` option),
 * not in a child forked since. Hook-safe, signal-safe. */
pid_t agent_shown_pid(void);
extern uintptr_t agent_self_lo, agent_self_hi; /* our own text, skipped in stacks */
/* Runs the part of initialisation that must precede the first tracked
 * allocation (tables, own address range). Hook-safe, idempotent. */
void agent_init_early(void);
static inline __attribute__((always_inline)) uintptr_t agent_stack_pointer(void)
{
	uintptr_t sp;
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	return sp;
}

/* ---- OS helpers (os.c): raw syscalls, no errno games beyond libc's ---- */
/* Anonymous private mapping; NULL on failure. Hook-safe, signal-safe. */
void *agent_mmap(size_t len);
/* The same for a big table read and written at random (the live table):
 * from 2 MiB on, aligned to 2 MiB and asked to be transparent huge pages,
 * its pages faulted in for writing at once (os.c says why). Released with
 * agent_munmap. Hook-safe. */
void *agent_mmap_table(size_t len);
/* Bytes mapped by agent_mmap and not yet unmapped: the agent's own
 * memory (virtual; pages are committed as they are touched). */
extern _Atomic uint64_t agent_mapped_bytes;
void agent_munmap(void *p, size_t len);
/* A scratch arena: one mapping for the many buffers of one job (the leak
 * scan), carved in 64-byte-aligned pieces and released at once. Pieces
 * start zeroed (a fresh mapping). agent_arena_need(n) is what a piece of n
 * bytes uses, for sizing the arena. Signal-safe; not hook-safe (mmap). */
struct agent_arena {
	char *base;
	size_t len, used;
};
size_t agent_arena_need(size_t n);
bool agent_arena_init(struct agent_arena *a, size_t len);
/* NULL when the arena has no room left for n bytes. */
void *agent_arena_take(struct agent_arena *a, size_t n);
void agent_arena_release(struct agent_arena *a);
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
/* The process's resident set in bytes (/proc/self/statm), 0 when it
 * cannot be read; anon: only its private memory (resident less the
 * shared: file pages and shared memory, which a heap never holds).
 * Signal-safe. */
uint64_t agent_rss_bytes(bool anon);
/* Copies up to n bytes of the process's own memory at from into to
 * through the kernel (process_vm_readv), so an address that is not
 * mapped, or not readable, fails instead of faulting. Returns the bytes
 * copied (fewer at the first unreadable page), or -errno (-EFAULT; -EPERM
 * or -ENOSYS when the call is refused: seccomp, an old kernel). Saves
 * errno. Hook-safe and signal-safe. */
ssize_t agent_copy_self(void *to, uintptr_t from, size_t n);
/* The calling thread's id, by a raw system call: no errno, no libc, so
 * usable anywhere (a hook, a signal handler, the stop-the-world tracer). */
static inline pid_t agent_gettid(void)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"((long)SYS_gettid) : "rcx", "r11", "memory");
	return (pid_t)ret;
}
/* The number of threads of this process (/proc/self/task), -1 when it
 * cannot tell. Not hook-safe (open). */
int agent_thread_count(void);
/* Writes a message to stderr as one write(2). Signal-safe. While the
 * calling thread captures (below), the line goes into the capture
 * instead, without its "heaptrail: " prefix. */
void agent_log(const char *a, const char *b, const char *c);
/* Starts capturing this thread's agent_log lines into buf (cap bytes,
 * NUL-terminated, one line each; lines that do not fit are dropped and
 * the last kept says so), or stops with buf NULL. For an attach: what
 * the agent has to say then is for the CLI, not the program's stderr.
 * One capture at a time (the attach is serialized). */
void agent_log_capture(char *buf, size_t cap);
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
/* The same, zero-padded to at least width digits. */
char *agent_put_dec_width(char *dst, uint64_t v, int width);
/* Milliseconds since agent_clock_start (monotonic; 0 before it).
 * Hook-safe and signal-safe. */
uint64_t agent_ms_since_start(void);
void agent_clock_start(void);
void agent_memcpy(void *dst, const void *src, size_t n);
void agent_memset(void *dst, int c, size_t n);
int agent_memcmp(const void *a, const void *b, size_t n);

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
	if (AGENT_LIKELY(__libc_single_threaded)) {
		atomic_store_explicit(&l->v, 1, memory_order_relaxed);
		return;
	}
	if (AGENT_LIKELY(!atomic_exchange_explicit(&l->v, 1, memory_order_acquire)))
		return;
	agent_lock_slow(l);
}
/* Has l been seen free at some moment within about ms milliseconds? False
 * means it stayed held all along: perhaps by the code a signal handler
 * interrupted, so taking it would never return. Signal-safe. */
bool agent_lock_seen_free(agent_lock_t *l, long ms);
/* Sleeps about us microseconds; keeps errno. The agent's only sleep:
 * never nanosleep, which resets the thread's restart record on entry,
 * from which a thread heaptrail's CLI borrowed out of the program's
 * nanosleep, poll or futex wait resumes that call afterwards
 * (heaptrail_request). A futex wait leaves the record alone unless a
 * signal interrupts it. Signal-safe. */
void agent_nap_us(long us);
static inline void agent_unlock(agent_lock_t *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* Adds n to a total any thread may add to: a locked add (a full
 * barrier) only once the process has a second thread (see agent_lock). */
static inline void agent_add_shared(_Atomic uint64_t *x, uint64_t n)
{
	if (AGENT_LIKELY(__libc_single_threaded))
		atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(x, n, memory_order_relaxed);
}

#endif
