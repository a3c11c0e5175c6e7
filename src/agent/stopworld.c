/*
 * stopworld.c — stopping every other thread of the process for a leak
 * scan, and reading their registers, without the program noticing.
 *
 * The first way (LeakSanitizer's): a tracer task, created with
 * clone(CLONE_VM | CLONE_FS | CLONE_UNTRACED) and exit signal 0 on a stack
 * of ours, attaches to every thread with PTRACE_SEIZE, stops it with
 * PTRACE_INTERRUPT and reads its registers with PTRACE_GETREGS into
 * memory shared with the caller (the same address space). It keeps them
 * stopped until the caller releases them, then detaches and exits; the
 * caller reaps it. A ptrace stop is not a signal the program can see: a
 * thread stopped inside nanosleep, poll, select, read or a futex wait
 * resumes the call where it was, with its result and its timeout intact.
 * The program gets no SIGCHLD (exit signal 0), and its wait(-1) or
 * waitpid(-1) cannot reap the tracer (only __WALL or __WCLONE waits see a
 * child with no exit signal). Threads that block every signal are
 * stopped like any other.
 *
 * The fallback, when ptrace is not permitted (a seccomp filter, Yama
 * ptrace_scope 2 or 3, a non-dumpable process without CAP_SYS_PTRACE, a
 * debugger or strace already tracing the threads): a real-time signal
 * whose handler reports its registers and waits. A thread that blocks the
 * signal cannot be stopped that way: after a short wait its stack pointer
 * is read from /proc/self/task/TID/syscall (it is blocked in a system
 * call) and it is counted as not stopped.
 *
 * The tracer runs while the caller holds every table lock and other
 * threads may hold any lock of libc: it makes only raw system calls (no
 * errno, no TLS, no locks), on a stack from mmap, with every signal
 * blocked. *
 * Here: the interface, the program's signals during a stop, and the
 * signal way; the ptrace way, the tracer, is stoptrace.c (what the two
 * share: stopworld_impl.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/signals.h"
#include "agent/stopworld.h"
#include "agent/stopworld_impl.h"
#include "agent/banned.h"
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif

struct agent_stopw_state agent_stopw;

/* Calls fn(tid, arg) for every thread of process pid listed in
 * /proc/PID/task. Returns false when the directory cannot be read. */
bool agent_stopw_each_task(pid_t pid, void (*fn)(pid_t tid, void *arg), void *arg)
{
	char path[48] = "/proc/", buf[2048];
	agent_strlcpy(agent_put_dec(path + 6, (unsigned long)pid), "/task", 8);
	long fd = RAW(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	for (;;) {
		long r = RAW(SYS_getdents64, fd, buf, sizeof buf, 0);
		if (r <= 0)
			break;
		for (long off = 0; off < r;) {
			struct dirent64_raw { uint64_t ino; int64_t off; unsigned short reclen;
					      unsigned char type; char name[]; } *d = (void *)(buf + off);
			off += d->reclen;
			if (d->name[0] < '0' || d->name[0] > '9')
				continue;
			pid_t tid = 0;
			for (const char *c = d->name; *c; c++)
				tid = tid * 10 + (*c - '0');
			fn(tid, arg);
		}
	}
	RAW(SYS_close, fd, 0, 0, 0);
	return true;
}

struct agent_stopped *agent_stopw_slot_of(pid_t tid)
{
	for (int i = 0; i < agent_stopw.nslots; i++)
		if (agent_stopw.slots[i].tid == tid)
			return &agent_stopw.slots[i];
	return NULL;
}

/* ---------- the program's signals during a stop ----------
 *
 * Bare, a signal sent to the process goes to its main thread unless that
 * one blocks it (the kernel's first choice). While a stop holds the main
 * thread, the kernel gives it to a thread that can take it: the caller,
 * in the middle of the scan (a handler there waits for a lock a stopped
 * thread holds), or a thread left in epoll_wait or another call a stop
 * would disturb, which then fails with EINTR where bare it never would;
 * and right after the release, any thread on its way out of its stop
 * takes what is pending for the process, in the middle of its nanosleep
 * (tests/hostile's signal_in_check, eintr). So:
 * - a caller that is not the main thread blocks every signal but the
 *   faults from the stop to the resume (a main thread that is the caller
 *   blocks nothing: the signals go to it, as bare);
 * - the main thread is seized last, so that the others are held or
 *   watched before it stops taking the process's signals;
 * - a thread left in such a call is seized without being stopped
 *   (watched): a signal it takes waits in its delivery stop;
 * - at the release every stopped thread goes on still traced, the main
 *   thread first, until each has had a CPU since (it is then past the
 *   kernel's signal path);
 * - a signal sent to the process that another thread took meanwhile
 *   (watched, or on its way out) goes to the main thread, as bare: that
 *   thread goes on without it (its call rewound when the signal made it
 *   fail with EINTR), and the tracer sends it to the main thread with
 *   tgkill, putting the sender's siginfo back at its delivery stop (or
 *   the caller, when it is the main thread, sends it again itself). One
 *   sent to that thread alone (tgkill), or that the main thread blocks,
 *   is delivered where it landed, as bare. */

static struct {
	uint64_t saved;                  /* the caller's mask before the stop */
	bool blocked;
} sigs;

/* never blocked: a fault in the agent must take its course */
#define FAULT_SIGNALS (SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) | \
		       SIGBIT(SIGTRAP) | SIGBIT(SIGSYS))

static void block_signals(pid_t self)
{
	uint64_t all = ~FAULT_SIGNALS;
	sigs.blocked = self != getpid() &&
		       RAW(SYS_rt_sigprocmask, SIG_SETMASK, &all, &sigs.saved, sizeof all) == 0;
}

static void unblock_signals(void)
{
	if (sigs.blocked)
		RAW(SYS_rt_sigprocmask, SIG_SETMASK, &sigs.saved, 0, sizeof sigs.saved);
	sigs.blocked = false;
}

/* The mask of a "Name:\tHEX" line (not the first) of a /proc status
 * file; 0 when absent. */
uint64_t agent_stopw_status_hex(const char *status, const char *name)
{
	const char *p = status;
	while (*p && !(p[0] == '\n' && agent_strstarts(p + 1, name)))
		p++;
	if (!*p)
		return 0;
	for (p += 1 + agent_strlen(name); *p == '\t' || *p == ' '; p++)
		;
	uint64_t v = 0;
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		v = v * 16 + (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
	return v;
}

/* ---------- the signal way (fallback) ---------- */

static void stop_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	bool ours = si && si->si_code == SI_TKILL && si->si_pid == getpid();
	if (!ours) {
		/* Someone else's signal: the program's disposition takes it. */
		agent_sig_program(sig, si, ucv);
		errno = saved_errno;
		return;
	}
	if (!atomic_load(&agent_stopw.active)) {
		errno = saved_errno;  /* a late stop request: nothing to do */
		return;
	}
	struct agent_stopped *slot = agent_stopw_slot_of(agent_gettid());
	if (slot) {
		ucontext_t *uc = ucv;
		for (int i = 0; i < NGREG && i < AGENT_STOP_NREGS; i++)
			slot->regs[i] = (uintptr_t)uc->uc_mcontext.gregs[i];
		slot->nregs = NGREG;
		slot->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
		/* Waits for the release of this stop, not of any stop: a
		 * thread slow to wake must not sleep on through the next. */
		int number = atomic_load(&agent_stopw.number);
		atomic_store(&slot->state, AGENT_STOP_STOPPED);
		for (int seen; (seen = atomic_load(&agent_stopw.released)) != number;)
			futex_wait(&agent_stopw.released, seen, 50);
		atomic_store(&slot->state, AGENT_STOP_RELEASED);
	}
	errno = saved_errno;
}

/* Makes sure our handler is the one installed; the program's own
 * disposition of the signal is kept by signals.c and gets every signal
 * that is not ours. */
static bool install_handler(void)
{
	sigset_t all;
	sigfillset(&all);
	return agent_sig_own(agent_stopw.sig, stop_handler, &all, 0);
}

static pid_t sig_self, sig_skip;
static int sig_added;

/* Remembers which threads block the signal during one stop, so the wait
 * loop does not read their status again and again. */
static pid_t sigblocked[MAX_THREADS];
static int nsigblocked;

/* Does thread tid block signal sig? From the SigBlk line of its status. */
static bool blocks_signal(pid_t tid, int sig)
{
	return sig >= 1 && sig <= 64 && (agent_stopw_task_sigblk(getpid(), tid, 0) & SIGBIT(sig));
}

/* A thread blocked in a system call is not signalled: the signal would
 * make its call fail with EINTR or return early. It runs no code of the
 * program while it stays there; its stack pointer comes from /proc. A
 * thread that blocks the signal is not waited for. */
static void signal_add(pid_t tid, void *arg)
{
	if (tid == sig_self || tid == sig_skip || agent_stopw_slot_of(tid) || agent_stopw.nslots == MAX_THREADS ||
	    agent_stopw_is_zombie(getpid(), tid))
		return;
	struct agent_stopped *s = &agent_stopw.slots[agent_stopw.nslots];
	agent_memset(s, 0, sizeof *s);
	s->tid = tid;
	agent_stopw.nslots++;
	sig_added++;
	/* Read before the system call: the thread may enter a call between
	 * the look at it and the signal, so nothing else goes between. */
	bool blocked = blocks_signal(tid, agent_stopw.sig);
	long nr;
	uintptr_t sp;
	agent_stopw_task_syscall(getpid(), tid, &nr, &sp);
	if (nr >= 0) {
		s->sp = sp;
		atomic_store(&s->state, AGENT_STOP_IN_SYSCALL);
		return;
	}
	atomic_store(&s->state, AGENT_STOP_WAITING);
	if (blocked) {
		if (nsigblocked < MAX_THREADS)
			sigblocked[nsigblocked++] = tid;
		return;  /* counted as not stopped below */
	}
	if (syscall(SYS_tgkill, getpid(), tid, agent_stopw.sig) != 0)
		atomic_store(&s->state, AGENT_STOP_GONE);
}

/* The stack pointer of a thread blocked in a system call; 0 when unknown. */
static uintptr_t blocked_sp(pid_t tid)
{
	long nr;
	uintptr_t sp;
	agent_stopw_task_syscall(getpid(), tid, &nr, &sp);
	return sp;
}


static bool blocked_here(pid_t tid)
{
	for (int i = 0; i < nsigblocked; i++)
		if (sigblocked[i] == tid)
			return true;
	return false;
}

static int stop_signal(pid_t self, pid_t skip)
{
	nsigblocked = 0;
	agent_stopw.nslots = 0;
	atomic_fetch_add(&agent_stopw.number, 1);
	atomic_store(&agent_stopw.active, 1);
	if (!install_handler())
		return -1;
	sig_self = self;
	sig_skip = skip;
	/* A thread that blocks the signal never answers: the first wait is
	 * the long one, later rounds only catch threads created meanwhile. */
	for (int round = 0; round < 8; round++) {
		sig_added = 0;
		agent_stopw_each_task(getpid(), signal_add, NULL);
		if (!sig_added && round)
			break;
		for (int waited = 0; waited < (round ? 200 : 2000); waited++) {
			bool all = true;
			for (int i = 0; i < agent_stopw.nslots; i++)
				if (atomic_load(&agent_stopw.slots[i].state) == AGENT_STOP_WAITING &&
				    !blocked_here(agent_stopw.slots[i].tid))
					all = false;
			if (all)
				break;
			/* A thread may block the signal after it came (an
			 * exiting thread blocks them all): it will not answer. */
			if (waited >= 100 && waited % 10 == 0)
				for (int i = 0; i < agent_stopw.nslots; i++) {
					pid_t tid = agent_stopw.slots[i].tid;
					if (atomic_load(&agent_stopw.slots[i].state) == AGENT_STOP_WAITING &&
					    !blocked_here(tid) && nsigblocked < MAX_THREADS &&
					    blocks_signal(tid, agent_stopw.sig))
						sigblocked[nsigblocked++] = tid;
				}
			if (waited < 100)
				sched_yield();
			else
				sleep_us_raw(1000);
		}
	}
	int missing = 0;
	for (int i = 0; i < agent_stopw.nslots; i++) {
		struct agent_stopped *s = &agent_stopw.slots[i];
		if (atomic_load(&s->state) == AGENT_STOP_WAITING) {
			/* blocked the signal: maybe it sits in a system call */
			s->sp = blocked_sp(s->tid);
			s->nregs = 0;
			missing++;
		}
	}
	return missing;
}

static void resume_signal(void)
{
	atomic_store(&agent_stopw.released, atomic_load(&agent_stopw.number));
	futex_wake(&agent_stopw.released);
	for (int i = 0; i < agent_stopw.nslots; i++)
		for (int w = 0; w < 2000 && atomic_load(&agent_stopw.slots[i].state) == AGENT_STOP_STOPPED; w++)
			sched_yield();
	atomic_store(&agent_stopw.active, 0);
}

/* ---------- the interface ---------- */

/* Names a thread that the fallback could not stop: "thread TID (COMM)". */
static void warn_unstopped(pid_t tid)
{
	char path[64] = "/proc/self/task/", name[64] = "thread ", comm[32];
	agent_strlcpy(agent_put_dec(path + agent_strlen(path), (unsigned long)tid), "/comm", 8);
	char *p = agent_put_dec(name + agent_strlen(name), (unsigned long)tid);
	static pid_t warned[16];
	static unsigned nwarned;
	for (unsigned i = 0; i < 16; i++)
		if (warned[i] == tid)
			return;  /* once per thread is enough */
	ssize_t n = agent_read_small(path, comm, sizeof comm);
	if (n <= 0)
		return;  /* gone: exiting threads block every signal */
	warned[nwarned++ % 16] = tid;
	{
		while (n > 0 && (comm[n - 1] == '\n' || comm[n - 1] == 0))
			n--;
		comm[n] = 0;
		*p++ = ' ';
		*p++ = '(';
		p += agent_strlcpy(p, comm, sizeof name - (size_t)(p - name) - 2);
		*p++ = ')';
		*p = 0;
	}
	agent_log(name, " blocks the stop signal and ptrace is not permitted: ",
		  "the leak scan reads its stack but not its registers");
}

void agent_stopworld_init(int sig)
{
	agent_stopw.sig = sig;
	agent_stopw.slots = agent_mmap(MAX_THREADS * sizeof *agent_stopw.slots);
	agent_stopw_trace_init();
}

/* A thread stopped at any instruction may keep live data in the 128
 * bytes below its stack pointer (the x86-64 red zone). */
static void lower_to_red_zone(void)
{
	for (int i = 0; i < agent_stopw.nslots; i++)
		if (agent_stopw.slots[i].sp > 128)
			agent_stopw.slots[i].sp -= 128;
}

/* valgrind runs a task cloned with CLONE_VM but not CLONE_THREAD (the
 * tracer) by giving up on the whole program ("Unsupported clone()"): under
 * it, threads are stopped with the signal. */
static bool under_valgrind(void)
{
#if __has_include(<valgrind/valgrind.h>)
	return RUNNING_ON_VALGRIND;
#else
	return false;
#endif
}

/* One stop at a time: waits while another thread's stop lasts; false
 * when the caller's own stop is under way (a leak check that would run
 * inside a hook's write). */
static bool own_stop(pid_t self)
{
	for (;;) {
		int expect = 0;
		if (atomic_compare_exchange_strong(&agent_stopw.owner, &expect, (int)self))
			return true;
		if (expect == (int)self)
			return false;
		sleep_us_raw(1000);
	}
}

static int stop_world(pid_t skip, struct agent_stopped **threads, int *nthreads, bool all)
{
	int saved_errno = errno;
	pid_t self = agent_gettid();
	int missing = -1;
	*threads = agent_stopw.slots;
	*nthreads = 0;
	if (!own_stop(self)) {
		agent_stopw.nested++;   /* its resume must not end the owner's stop */
		errno = saved_errno;
		return -1;
	}
	agent_stopw.nslots = 0;
	agent_stopw.method = AGENT_STOP_NONE;
	agent_stopw_trace_all(all);
	block_signals(self);
	if (agent_stopw.slots) {
		if (agent_config.stop_ptrace && !under_valgrind() && agent_stopw_stop_ptrace(self, skip)) {
			agent_stopw.method = AGENT_STOP_PTRACE;
			missing = 0;
			for (int i = 0; i < agent_stopw.nslots; i++) {
				struct agent_stopped *s = &agent_stopw.slots[i];
				if (s->state == AGENT_STOP_WAITING) {
					s->sp = blocked_sp(s->tid);
					missing++;
				}
			}
		} else {
			agent_stopw.method = AGENT_STOP_SIGNAL;
			missing = stop_signal(self, skip);
		}
	}
	lower_to_red_zone();
	*threads = agent_stopw.slots;
	*nthreads = agent_stopw.nslots;
	errno = saved_errno;
	return missing;
}

int agent_stopworld_stop(pid_t skip, struct agent_stopped **threads, int *nthreads)
{
	return stop_world(skip, threads, nthreads, false);
}

int agent_stopworld_stop_all(struct agent_stopped **threads, int *nthreads)
{
	return stop_world(0, threads, nthreads, true);
}

void agent_stopworld_warn(void)
{
	if (agent_stopw.method != AGENT_STOP_SIGNAL)
		return;
	for (int i = 0; i < agent_stopw.nslots; i++)
		if (atomic_load(&agent_stopw.slots[i].state) == AGENT_STOP_WAITING)
			warn_unstopped(agent_stopw.slots[i].tid);
}

int agent_stopworld_method(void)
{
	return agent_stopw.method;
}

void agent_stopworld_resume(void)
{
	int saved_errno = errno;
	if (atomic_load(&agent_stopw.owner) != (int)agent_gettid())
		return;   /* no stop of the caller's */
	if (agent_stopw.nested) {   /* the resume of a stop own_stop refused */
		agent_stopw.nested--;
		errno = saved_errno;
		return;
	}
	if (agent_stopw.method == AGENT_STOP_PTRACE)
		agent_stopw_resume_ptrace();
	else if (agent_stopw.method == AGENT_STOP_SIGNAL)
		resume_signal();
	agent_stopw.method = AGENT_STOP_NONE;
	/* the caller is the main thread: what others took goes to it */
	agent_stopw_resend_moved();
	unblock_signals();
	atomic_store(&agent_stopw.owner, 0);
	errno = saved_errno;
}
