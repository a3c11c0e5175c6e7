/*
 * stopworld_impl.h — what stopworld.c (the interface, the program's
 * signals during a stop, the signal way) and stoptrace.c (the ptrace way:
 * the tracer task) share: the stop under way and the raw system calls the
 * tracer may make. Included by those two only; the rest of the agent uses
 * stopworld.h. Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_STOPWORLD_IMPL_H
#define HEAPTRAIL_AGENT_STOPWORLD_IMPL_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

#include "agent/agent.h"
struct agent_stopped;   /* stopworld.h, which the files include first */

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128/* The tracer's stack, mapped once (agent_stopworld_init); whether the
 * next ptrace stop takes threads blocked in system calls too
 * (agent_stopworld_stop_all); after the resume, in the main thread, the
 * signals the others took for it during the stop, sent again. */
void agent_stopw_trace_init(void);
void agent_stopw_trace_all(bool all);
void agent_stopw_resend_moved(void);

#endif

#define MAX_THREADS 4096
#define SIGBIT(sig) (1ull << ((sig) - 1))

struct agent_stopw_state {
	atomic_int active;
	atomic_int number;   /* of the current stop, counting from 1 */
	atomic_int released; /* number of the last stop released */
	int sig;
	struct agent_stopped *slots; /* MAX_THREADS, from mmap */
	int nslots;
	int method;
	atomic_int owner;    /* the thread between a stop and its resume: one
			      * stop at a time (a leak scan, a hook's write) */
	int nested;          /* stops the owner asked for during its own, refused */
};
/* The stop under way (stopworld.c). */
extern struct agent_stopw_state agent_stopw;

/* ---------- raw system calls (usable in the tracer: no errno) ---------- */

static inline long raw6(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#define RAW(nr, a, b, c, d) raw6(nr, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

/* agent_nap_us without errno (see there: never nanosleep) */
static inline void sleep_us_raw(long us)
{
	int word = 0;
	struct timespec ts = { 0, us * 1000 };
	RAW(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);  /* vDSO: no lock, no errno */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC by a raw system call (the tracer's: now_ns is the caller's) */
static inline uint64_t now_ns_raw(void)
{
	struct timespec ts;
	RAW(SYS_clock_gettime, CLOCK_MONOTONIC, &ts, 0, 0);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void futex_wait(atomic_int *p, int val, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000 * 1000 };
	RAW(SYS_futex, p, FUTEX_WAIT, val, &ts);
}

static inline void futex_wake(atomic_int *p)
{
	RAW(SYS_futex, p, FUTEX_WAKE, 1 << 30, 0);
}

/* ---- stopworld.c ---- */
bool agent_stopw_each_task(pid_t pid, void (*fn)(pid_t tid, void *arg), void *arg);
struct agent_stopped *agent_stopw_slot_of(pid_t tid);
uint64_t agent_stopw_status_hex(const char *status, const char *name);

/* ---- stoptrace.c ---- */
uint64_t agent_stopw_task_sigblk(pid_t pid, pid_t tid, uint64_t unknown);
void agent_stopw_task_syscall(pid_t pid, pid_t tid, long *nr, uintptr_t *sp);
bool agent_stopw_is_zombie(pid_t pid, pid_t tid);
bool agent_stopw_stop_ptrace(pid_t self, pid_t skip);
void agent_stopw_resume_ptrace(void);

#endif
