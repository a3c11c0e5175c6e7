/*
 * stoptrace.c — stopping the world the ptrace way (stopworld.c says
 * why and how): the tracer task that seizes, interrupts and reads every
 * other thread, keeps them stopped until the release, and detaches. It
 * makes only raw system calls (stopworld_impl.h). Layer 1.
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

/* ---------- the ptrace way ---------- */

enum { T_START, T_GO, T_STOPPED, T_FAILED, T_RELEASE };

static struct {
	atomic_int phase;
	pid_t pid, self, skip;
	int seize_errno;
	int added;           /* threads new in the last listing */
	bool all;            /* agent_stopworld_stop_all: syscalls too */
} tr;

/* System calls that a stop (a ptrace stop as much as SIGSTOP) does not
 * resume transparently: epoll_wait, sigtimedwait, semop, io_getevents and
 * socket calls with a timeout fail with EINTR, and select, pselect and
 * ppoll restart with what was left of their timeout, so the stop's
 * duration is added to it. signal(7) lists them. A thread blocked in one
 * is left alone: it runs no code of the program until the call returns. */
static bool stop_would_show(long nr)
{
	switch (nr) {
	case SYS_select: case SYS_pselect6: case SYS_ppoll:
	case SYS_epoll_wait: case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_rt_sigtimedwait: case SYS_semop: case SYS_semtimedop:
	case SYS_io_getevents:
#ifdef SYS_io_pgetevents
	case SYS_io_pgetevents:
#endif
	case SYS_recvfrom: case SYS_recvmsg: case SYS_recvmmsg:
	case SYS_sendto: case SYS_sendmsg: case SYS_sendmmsg:
	case SYS_accept: case SYS_accept4: case SYS_connect:
	/* and calls a stop cannot interrupt at all: the parent of a vfork
	 * until the child execs or exits */
	case SYS_vfork: case SYS_clone:
#ifdef SYS_clone3
	case SYS_clone3:
#endif
		return true;
	}
	return false;
}

/* Reads /proc/PID/task/TID/LEAF into buf (NUL-terminated); returns the
 * bytes read, <= 0 when the thread is gone. Raw system calls only (the
 * tracer uses it). */
static long read_task_file(pid_t pid, pid_t tid, const char *leaf, char *buf, size_t cap)
{
	char path[64] = "/proc/";
	char *p = agent_put_dec(path + 6, (unsigned long)pid);
	p = agent_put_dec(p + agent_strlcpy(p, "/task/", 8), (unsigned long)tid);
	agent_strlcpy(p, leaf, 16);
	long fd = RAW(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	long n = RAW(SYS_read, fd, buf, cap - 1, 0);
	RAW(SYS_close, fd, 0, 0, 0);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* The signals thread tid of pid blocks (its status file's SigBlk), or
 * unknown when that cannot be read. Raw system calls only. */
uint64_t agent_stopw_task_sigblk(pid_t pid, pid_t tid, uint64_t unknown)
{
	char buf[2048];
	if (read_task_file(pid, tid, "/status", buf, sizeof buf) <= 0)
		return unknown;
	return agent_stopw_status_hex(buf, "SigBlk:");
}

/* Reads /proc/PID/task/TID/syscall ("NR ARG1..ARG6 SP PC" for a thread
 * blocked in a system call, "-1 SP PC" outside one, "running"): *nr is
 * the call's number or -1, *sp the stack pointer or 0. Raw system calls
 * only (the tracer uses it). */
void agent_stopw_task_syscall(pid_t pid, pid_t tid, long *nr, uintptr_t *sp)
{
	char buf[256];
	*nr = -1;
	*sp = 0;
	long n = read_task_file(pid, tid, "/syscall", buf, sizeof buf);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return;  /* gone, "running", "-1 ...": in no system call */
	long v = 0;
	const char *c = buf;
	for (; *c >= '0' && *c <= '9'; c++)
		v = v * 10 + (*c - '0');
	*nr = v;
	/* the 8th field */
	for (int field = 0; field < 7 && *c; field++) {
		while (*c == ' ')
			c++;
		if (field < 6)
			while (*c && *c != ' ')
				c++;
	}
	if (c[0] != '0' || c[1] != 'x')
		return;
	uintptr_t x = 0;
	for (c += 2; *c && *c != ' ' && *c != '\n'; c++)
		x = x * 16 + (uintptr_t)(*c <= '9' ? *c - '0' : (*c | 32) - 'a' + 10);
	*sp = x;
}

/* The state letter of thread tid (R, S, D, Z...), 'X' when it is gone.
 * Raw system calls only. */
static char task_state(pid_t pid, pid_t tid)
{
	char buf[512];
	long n = read_task_file(pid, tid, "/stat", buf, sizeof buf);
	if (n <= 0)
		return 'X';  /* gone */
	/* "TID (COMM) S ...": the state follows the last ')' */
	long close_paren = -1;
	for (long i = 0; i < n; i++)
		if (buf[i] == ')')
			close_paren = i;
	if (close_paren < 0 || close_paren + 2 >= n)
		return '?';
	return buf[close_paren + 2];
}

/* Has thread tid exited, leaving a zombie in the task list (the main
 * thread after pthread_exit)? */
bool agent_stopw_is_zombie(pid_t pid, pid_t tid)
{
	char st = task_state(pid, tid);
	return st == 'Z' || st == 'X';
}

/* A thread heaptrail's CLI has lent to a request (agent_stopworld_lent). */
static struct {
	atomic_int tid;
	_Atomic uintptr_t sp;
} lent;

void agent_stopworld_lent(pid_t tid, uintptr_t sp)
{
	atomic_store(&lent.sp, sp);
	atomic_store(&lent.tid, (int)tid);
}

/* Who traces thread tid (its status file's TracerPid): HELD_CLI, a task
 * named heaptrail, its CLI, which holds it for a request or a dump and
 * gives it back in the system call it waited in; HELD_NONE, no tracer now
 * (or one that has just ended); HELD_OTHER, a debugger, whose threads the
 * fallback's signal stops. Raw system calls only. */
enum { HELD_NONE, HELD_CLI, HELD_OTHER };

static int held_by(pid_t pid, pid_t tid)
{
	char buf[2048];
	if (read_task_file(pid, tid, "/status", buf, sizeof buf) <= 0)
		return HELD_NONE;
	const char *p = buf;
	for (; *p; p++)
		if (p[0] == '\n' && !agent_memcmp(p + 1, "TracerPid:", 10))
			break;
	if (!*p)
		return HELD_NONE;
	p += 11;
	while (*p == ' ' || *p == '\t')
		p++;
	long v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	if (v <= 0)
		return HELD_NONE;
	if (v == RAW(SYS_getpid, 0, 0, 0, 0))
		return HELD_OTHER;  /* ours: not a refusal to wait out */
	char path[48] = "/proc/";
	agent_strlcpy(agent_put_dec(path + 6, (unsigned long)v), "/comm", 8);
	long fd = RAW(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return HELD_NONE;
	long n = RAW(SYS_read, fd, buf, 16, 0);
	RAW(SYS_close, fd, 0, 0, 0);
	return n >= 9 && !agent_memcmp(buf, "heaptrail", 9) ? HELD_CLI : HELD_OTHER;
}

/* Tries of a refused seize that found no tracer, 100 us apart: several
 * requests at once take and give back threads all the time, and a look
 * may fall between two of them; the kernel's refusal comes every time. */
#define SEIZE_AGAIN 200

/* arg: NULL from the listing, which leaves the main thread for last (see
 * "the program's signals during a stop"). */
static void tracer_add(pid_t tid, void *arg)
{
	if (tid == tr.self || tid == tr.skip || agent_stopw_slot_of(tid) || agent_stopw.nslots == MAX_THREADS ||
	    tr.seize_errno || (tid == tr.pid && !arg))
		return;
	long nr;
	uintptr_t sp;
	agent_stopw_task_syscall(tr.pid, tid, &nr, &sp);
	/* In uninterruptible sleep (disk, NFS) it would not stop before the
	 * call returns: it runs no program code meanwhile either. With
	 * tr.all (agent_stopworld_stop_all) the calls a stop interrupts are
	 * interrupted (tracer_got_regs starts them again), but for connect,
	 * which would not be the same call again; one that cannot be
	 * interrupted is seized and interrupted all the same, so that it
	 * stops before it runs code (held), but not waited for. */
	bool shows = nr >= 0 && stop_would_show(nr);
	bool stuck = nr >= 0 && (task_state(tr.pid, tid) == 'D' || nr == SYS_vfork ||
#ifdef SYS_clone3
				 nr == SYS_clone3 ||
#endif
				 nr == SYS_clone);
	if ((shows || stuck) && !(tr.all && shows && !stuck && nr != SYS_connect)) {
		struct agent_stopped *s = &agent_stopw.slots[agent_stopw.nslots++];
		agent_memset(s, 0, sizeof *s);
		s->tid = tid;
		s->sp = sp;
		s->state = AGENT_STOP_IN_SYSCALL;
		if (tr.all && stuck)
			s->held = RAW(SYS_ptrace, PTRACE_SEIZE, tid, 0, 0) == 0 &&
				  RAW(SYS_ptrace, PTRACE_INTERRUPT, tid, 0, 0) == 0;
		else if (shows && !stuck)  /* it sleeps on, watched */
			s->watched = RAW(SYS_ptrace, PTRACE_SEIZE, tid, 0, 0) == 0;
		return;
	}
	long r = RAW(SYS_ptrace, PTRACE_SEIZE, tid, 0, 0);
	int held = HELD_NONE;
	for (int again = 0; r == -EPERM && again < SEIZE_AGAIN; again++) {
		if (agent_stopw_is_zombie(tr.pid, tid))
			return;  /* gone already */
		if ((held = held_by(tr.pid, tid)) != HELD_NONE)
			break;
		/* no tracer: let go since the refusal (falling back to the
		 * signal would cost the program EINTRs) */
		sleep_us_raw(100);
		r = RAW(SYS_ptrace, PTRACE_SEIZE, tid, 0, 0);
	}
	if (r == -ESRCH)
		return;  /* gone already */
	if (r == -EPERM && held == HELD_CLI) {
		/* heaptrail's CLI holds it (a request, a dump): scanned from
		 * its stack pointer (its own stack's, during a request),
		 * without its registers, rather than every thread stopped by
		 * the signal instead */
		struct agent_stopped *s = &agent_stopw.slots[agent_stopw.nslots++];
		agent_memset(s, 0, sizeof *s);
		s->tid = tid;
		s->sp = tid == atomic_load(&lent.tid) ? atomic_load(&lent.sp) : sp;
		s->state = AGENT_STOP_IN_SYSCALL;
		return;
	}
	if (r < 0) {
		tr.seize_errno = (int)-r;
		return;
	}
	struct agent_stopped *s = &agent_stopw.slots[agent_stopw.nslots++];
	agent_memset(s, 0, sizeof *s);
	s->tid = tid;
	s->state = AGENT_STOP_WAITING;
	tr.added++;
	if (RAW(SYS_ptrace, PTRACE_INTERRUPT, tid, 0, 0) < 0)
		s->state = AGENT_STOP_GONE;
}

static void tracer_got_regs(struct agent_stopped *s)
{
	struct user_regs_struct u;
	if (RAW(SYS_ptrace, PTRACE_GETREGS, s->tid, 0, &u) < 0) {
		s->state = AGENT_STOP_GONE;
		return;
	}
	/* It entered one of the calls above after we looked: the stop made
	 * the call fail with EINTR. Undo that: rewind to the system call
	 * instruction, as the kernel does for a call it restarts. */
	if (stop_would_show((long)u.orig_rax) && (long)u.rax == -EINTR) {
		u.rax = u.orig_rax;
		u.rip -= 2;
		RAW(SYS_ptrace, PTRACE_SETREGS, s->tid, 0, &u);
	}
	const unsigned long *w = (const unsigned long *)&u;
	s->nregs = (int)(sizeof u / sizeof *w);
	for (int i = 0; i < s->nregs && i < AGENT_STOP_NREGS; i++)
		s->regs[i] = w[i];
	s->sp = u.rsp;
	s->state = AGENT_STOP_STOPPED;
}

/* agent_stopped.settle, at the release */
enum { SETTLED, LET_GO };

#define MAX_MOVED 64

/* Signals sent to the process that another thread than the main one took
 * while traced, moved to the main thread (see "the program's signals
 * during a stop"). */
static struct {
	siginfo_t info[MAX_MOVED];
	int n;              /* to move */
	int sent;           /* of which sent to the main thread (tgkill) */
	bool resend;        /* the caller is the main thread: it sends them
			       again itself after the resume */
	pid_t self;         /* the tracer's pid */
} moved;

/* Can a signal be moved to the main thread: is it traced by this tracer
 * (stopped, being stopped or watched), or the caller? */
static bool main_can_take(void)
{
	struct agent_stopped *m = agent_stopw_slot_of(tr.pid);
	return tr.self == tr.pid ||
	       (m && !m->held && (m->state == AGENT_STOP_WAITING || m->state == AGENT_STOP_TRAPPED ||
				  m->state == AGENT_STOP_STOPPED || m->watched));
}

/* A traced thread that the stop does not wait for (watched, or let go at
 * the release) stopped to take a signal: returns the signal to deliver
 * to it. A signal sent to the process goes to the main thread instead,
 * as it would have bare, when the main thread does not block it: this
 * thread goes on without it (its call rewound when the signal made it
 * fail with EINTR; the kernel restarts the others itself), and the
 * signal is kept in moved. A signal sent to this thread alone (tgkill),
 * one taken by the main thread, or one the main thread blocks is
 * delivered here, as bare. */
static int tracer_took_signal(struct agent_stopped *s, int status)
{
	siginfo_t si;
	struct user_regs_struct u;
	int sig = WSTOPSIG(status);
	if (s->tid == tr.pid || moved.n == MAX_MOVED || !main_can_take() ||
	    RAW(SYS_ptrace, PTRACE_GETSIGINFO, s->tid, 0, &si) < 0 || si.si_code == SI_TKILL ||
	    (agent_stopw_task_sigblk(tr.pid, tr.pid, ~0ull) & SIGBIT(sig)) ||
	    RAW(SYS_ptrace, PTRACE_GETREGS, s->tid, 0, &u) < 0)
		return sig;
	if ((long)u.orig_rax >= 0 && (long)u.rax == -EINTR) {
		u.rax = u.orig_rax;
		u.rip -= 2;
		if (RAW(SYS_ptrace, PTRACE_SETREGS, s->tid, 0, &u) < 0)
			return sig;
	}
	moved.info[moved.n++] = si;
	return 0;
}

/* What a traced thread's status says, for one the stop does not wait
 * for: gone, or stopped to take a signal (delivered at the release when
 * the world is stopped, at once after it). Group stops are left to the
 * detach. */
static void tracer_not_waited(struct agent_stopped *s, int status, bool released)
{
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		s->state = AGENT_STOP_GONE;
		s->watched = false;
		s->settle = SETTLED;
		return;
	}
	if (!WIFSTOPPED(status) || (status >> 16) == PTRACE_EVENT_STOP || s->caught)
		return;
	int sig = tracer_took_signal(s, status);
	if (released)
		RAW(SYS_ptrace, PTRACE_CONT, s->tid, 0, sig);
	else
		s->caught = sig ? sig : -1;  /* -1: go on without it */
}

/* Which moved signal in flight (index below moved.sent) the main
 * thread's stop for sig, with siginfo si, is; moved.sent when the tracer
 * did not send it: a signal not ours keeps its siginfo. */
static int moved_in_flight(int sig, const siginfo_t *si)
{
	if (si->si_code != SI_TKILL || si->si_pid != moved.self)
		return moved.sent;
	int i = 0;
	while (i < moved.sent && moved.info[i].si_signo != sig)
		i++;
	return i;
}

/* The main thread, traced, stopped to take a signal: one that was moved
 * to it comes with the tracer's tgkill, whose siginfo is replaced with
 * the one the sender gave. */
static void tracer_main_took(int status)
{
	siginfo_t si;
	int sig = WSTOPSIG(status);
	int i = RAW(SYS_ptrace, PTRACE_GETSIGINFO, tr.pid, 0, &si) == 0 ? moved_in_flight(sig, &si)
									 : moved.sent;
	if (i < moved.sent) {
		RAW(SYS_ptrace, PTRACE_SETSIGINFO, tr.pid, 0, &moved.info[i]);
		for (moved.sent--, moved.n--; i < moved.n; i++)
			moved.info[i] = moved.info[i + 1];
	}
	RAW(SYS_ptrace, PTRACE_CONT, tr.pid, 0, sig);
}

/* The moved signals the main thread could not take after all (it was not
 * stopped): to the process, with their siginfo where the kernel lets
 * another process give it (a code below 0, but tgkill's), else by kill. */
static void tracer_send_moved(void)
{
	for (int i = moved.sent; i < moved.n; i++) {
		siginfo_t *si = &moved.info[i];
		if (si->si_code >= 0 || si->si_code == SI_TKILL ||
		    RAW(SYS_rt_sigqueueinfo, tr.pid, si->si_signo, si, 0) < 0)
			RAW(SYS_kill, tr.pid, si->si_signo, 0, 0);
	}
	moved.n = moved.sent;
}

/* How many times thread tid was given a CPU (the third field of its
 * schedstat); ~0 when unknown (a kernel without CONFIG_SCHED_INFO). */
static unsigned long task_runs(pid_t tid)
{
	char buf[96];
	if (read_task_file(tr.pid, tid, "/schedstat", buf, sizeof buf) <= 0)
		return ~0ul;
	const char *p = buf;
	for (int field = 0; field < 2; field++) {
		while (*p && *p != ' ')
			p++;
		while (*p == ' ')
			p++;
	}
	if (*p < '0' || *p > '9')
		return ~0ul;
	unsigned long v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (unsigned long)(*p - '0');
	return v;
}

/* Is a thread let go past the kernel's signal path? Leaving its stop, it
 * is flagged as having a signal to look at until it has run through that
 * path, and there it takes any signal pending for the process, whichever
 * thread the kernel meant it for (the main thread is not eligible
 * meanwhile). Past it: asleep again, or given a CPU since (the path takes
 * microseconds, with no sleep), as its schedstat counts. A runnable
 * thread waiting for a CPU is not: its syscall file says "running" all
 * the same. Without schedstat: out of its stop. */
static void tracer_settle(struct agent_stopped *s)
{
	char st = task_state(tr.pid, s->tid);
	if (st == 't')
		return;  /* not yet out of its stop, or in one to take a signal */
	if (st != 'R' || s->runs == ~0ul || task_runs(s->tid) != s->runs)
		s->settle = SETTLED;
}

#define RELEASE_ROUNDS 50     /* the release settles in this many rounds at most */
#define RELEASE_NS 50000000   /* and this long (a round reads /proc for each thread) */

/* The release. Every stopped thread is let go still traced, the main
 * thread first, until each is past its signal path (at most
 * RELEASE_ROUNDS of 100 us, and RELEASE_NS): the signals sent to the
 * process that another thread takes meanwhile, or that a watched thread
 * took during the stop, go to the main thread (tracer_took_signal),
 * sent by tgkill with their siginfo put back at its delivery
 * (tracer_main_took); when the caller is the main thread, it sends them
 * again itself. Then the tracer exits, which detaches every thread at
 * once. */
static void tracer_release(void)
{
	struct agent_stopped *m = agent_stopw_slot_of(tr.pid);
	for (int i = 0; i < agent_stopw.nslots; i++)
		agent_stopw.slots[i].runs = task_runs(agent_stopw.slots[i].tid);
	int status;
	if (m && m->watched && RAW(SYS_wait4, tr.pid, &status, __WALL | WNOHANG, 0) == tr.pid)
		tracer_not_waited(m, status, false);
	if (m && !m->held && (m->state == AGENT_STOP_STOPPED || (m->watched && m->caught)) &&
	    RAW(SYS_ptrace, PTRACE_CONT, tr.pid, 0, m->caught > 0 ? m->caught : 0) == 0) {
		m->settle = LET_GO;
		m->caught = 0;
	}
	for (int i = 0; i < agent_stopw.nslots; i++) {
		struct agent_stopped *s = &agent_stopw.slots[i];
		if (s->tid == tr.pid)
			continue;
		if (s->watched && RAW(SYS_wait4, s->tid, &status, __WALL | WNOHANG, 0) == s->tid)
			tracer_not_waited(s, status, false);
		if (s->state == AGENT_STOP_GONE || s->held || (s->watched && !s->caught))
			continue;
		if (RAW(SYS_ptrace, PTRACE_CONT, s->tid, 0, s->caught > 0 ? s->caught : 0) == 0) {
			s->settle = LET_GO;
			s->caught = 0;
		}
	}
	bool main_traced = m && (m->settle == LET_GO || m->watched);
	uint64_t deadline = now_ns_raw() + RELEASE_NS;
	for (int round = 0; round < RELEASE_ROUNDS; round++) {
		for (long tid; (tid = RAW(SYS_wait4, -1, &status, __WALL | WNOHANG, 0)) > 0;) {
			struct agent_stopped *s = agent_stopw_slot_of((pid_t)tid);
			if (s && tid == tr.pid && WIFSTOPPED(status) &&
			    (status >> 16) != PTRACE_EVENT_STOP)
				tracer_main_took(status);
			else if (s)
				tracer_not_waited(s, status, true);
		}
		/* the moved signals, to the main thread */
		for (; main_traced && moved.sent < moved.n; moved.sent++)
			RAW(SYS_tgkill, tr.pid, tr.pid, moved.info[moved.sent].si_signo, 0);
		bool all = main_traced ? moved.n == 0 : !moved.n || moved.resend;
		for (int i = 0; i < agent_stopw.nslots; i++)
			if (agent_stopw.slots[i].settle != SETTLED) {
				tracer_settle(&agent_stopw.slots[i]);
				all &= agent_stopw.slots[i].settle == SETTLED;
			}
		if (all || now_ns_raw() > deadline)
			break;
		sleep_us_raw(100);
	}
	if (!main_traced && !moved.resend)
		tracer_send_moved();
}

static void tracer_wait_stops(void);

/* Waits for every seized thread to reach its interrupt stop, then reads
 * the registers of all (reading one just stopped would make the kernel
 * wait for it to leave its CPU, a scheduler tick when it is busy). */
static void tracer_wait_all(void)
{
	tracer_wait_stops();
	for (int i = 0; i < agent_stopw.nslots; i++)
		if (agent_stopw.slots[i].state == AGENT_STOP_TRAPPED)
			tracer_got_regs(&agent_stopw.slots[i]);
}

/* Waits for every seized thread to reach its interrupt stop, passing on
 * the signals that arrive meanwhile (a signal-delivery stop comes first
 * when one is pending: it is delivered as if we were not there). */
static void tracer_wait_stops(void)
{
	for (;;) {
		int waiting = 0;
		for (int i = 0; i < agent_stopw.nslots; i++)
			waiting += agent_stopw.slots[i].state == AGENT_STOP_WAITING;
		if (!waiting)
			return;
		/* Blocks: a thread that never stops (uninterruptible sleep)
		 * is the caller's to give up on, by killing us. */
		int status = 0;
		long tid = RAW(SYS_wait4, -1, &status, __WALL, 0);
		if (tid == -EINTR)
			continue;
		if (tid < 0)
			return;
		struct agent_stopped *s = agent_stopw_slot_of((pid_t)tid);
		if (!s)
			continue;
		if (s->watched) {
			tracer_not_waited(s, status, false);
		} else if (WIFEXITED(status) || WIFSIGNALED(status)) {
			s->state = AGENT_STOP_GONE;
		} else if (WIFSTOPPED(status)) {
			if ((status >> 16) == PTRACE_EVENT_STOP) {
				if (s->state == AGENT_STOP_WAITING)
					s->state = AGENT_STOP_TRAPPED;
			} else {
				/* signal-delivery stop: deliver it, keep waiting */
				RAW(SYS_ptrace, PTRACE_CONT, tid, 0, WSTOPSIG(status));
			}
		}
	}
}

static void tracer_detach_all(void)
{
	for (int i = 0; i < agent_stopw.nslots; i++) {
		struct agent_stopped *s = &agent_stopw.slots[i];
		if (s->state == AGENT_STOP_WAITING) {
			/* never stopped: a detach needs a stopped tracee, so
			 * wait a little more for its stop */
			int status;
			for (int w = 0; w < 1000; w++) {
				long r = RAW(SYS_wait4, s->tid, &status, __WALL | WNOHANG, 0);
				if (r == s->tid && WIFSTOPPED(status) && (status >> 16) != PTRACE_EVENT_STOP) {
					RAW(SYS_ptrace, PTRACE_CONT, s->tid, 0, WSTOPSIG(status));
					continue;
				}
				if (r == s->tid || r < 0)
					break;
				sleep_us_raw(1000);
			}
		}
		if (s->state != AGENT_STOP_GONE && !s->held && (!s->watched || s->caught))
			RAW(SYS_ptrace, PTRACE_DETACH, s->tid, 0, s->caught > 0 ? s->caught : 0);
	}
	if (!moved.resend)
		tracer_send_moved();
}

static int tracer_main(void *arg)
{
	/* Dies with the thread that made it: when the program exits (or is
	 * killed) during a stop, the tracer must not linger on, holding the
	 * address space and copies of the program's file descriptors. */
	RAW(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0);
	if (RAW(SYS_getppid, 0, 0, 0, 0) != tr.pid)
		return 0;  /* it is gone already */
	moved.self = (pid_t)RAW(SYS_getpid, 0, 0, 0, 0);
	while (atomic_load(&tr.phase) == T_START)
		futex_wait(&tr.phase, T_START, 100);
	/* Seize everything listed, again until a listing finds no new
	 * thread (one not yet stopped may have created another). */
	for (int round = 0; round < 64; round++) {
		tr.added = 0;
		if (!agent_stopw_each_task(tr.pid, tracer_add, NULL) && round == 0)
			tr.seize_errno = ENOENT;
		tracer_add(tr.pid, &tr);
		if (tr.seize_errno)
			break;
		tracer_wait_all();
		if (!tr.added)
			break;
	}
	if (tr.seize_errno) {
		tracer_detach_all();
		agent_stopw.nslots = 0;
		atomic_store(&tr.phase, T_FAILED);
		futex_wake(&tr.phase);
		return 0;
	}
	atomic_store(&tr.phase, T_STOPPED);
	futex_wake(&tr.phase);
	while (atomic_load(&tr.phase) != T_RELEASE)
		futex_wait(&tr.phase, T_STOPPED, 1000);
	tracer_release();
	/* Exiting detaches every tracee at once, in the kernel: detaching
	 * them one by one lets each woken thread preempt us in turn. */
	return 0;
}

static void *tracer_stack;
#define TRACER_STACK (256 * 1024)
static pid_t tracer_pid;

static bool yama_restricts(void)
{
	char buf[8];
	return agent_read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) > 0 &&
	       buf[0] == '1';
}

/* Reaps the tracer, which has exited or is about to. */
static void reap_tracer(void)
{
	int status;
	for (int i = 0; i < 5000; i++) {
		long r = RAW(SYS_wait4, tracer_pid, &status, __WALL, 0);
		if (r != -EINTR)
			break;
	}
	tracer_pid = 0;
}

bool agent_stopw_stop_ptrace(pid_t self, pid_t skip)
{
	if (!tracer_stack)
		return false;
	tr.pid = getpid();
	tr.self = self;
	tr.skip = skip;
	tr.seize_errno = 0;
	agent_stopw.nslots = 0;
	moved.n = moved.sent = 0;
	moved.resend = self == tr.pid;

	/* The tracer must never run a handler of the program's: it starts
	 * with every signal blocked, as the mask it inherits. */
	bool yama = yama_restricts();
	atomic_store(&tr.phase, yama ? T_START : T_GO);
	sigset_t all, old;
	sigfillset(&all);
	RAW(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(long));
	long pid = clone(tracer_main, (char *)tracer_stack + TRACER_STACK,
			 CLONE_VM | CLONE_FS | CLONE_UNTRACED, NULL);
	RAW(SYS_rt_sigprocmask, SIG_SETMASK, &old, 0, sizeof(long));
	if (pid <= 0)
		return false;
	tracer_pid = (pid_t)pid;
	if (yama) {
		/* Yama lets a process trace only its descendants, unless it
		 * names its tracer: the tracer waits for that. */
		prctl(PR_SET_PTRACER, pid, 0, 0, 0);
		atomic_store(&tr.phase, T_GO);
		futex_wake(&tr.phase);
	}
	int ph;
	uint64_t deadline = now_ns() + 2000000000ull;
	while ((ph = atomic_load(&tr.phase)) == T_GO) {
		futex_wait(&tr.phase, T_GO, 20);
		int status;
		if (RAW(SYS_wait4, tracer_pid, &status, __WALL | WNOHANG, 0) == tracer_pid) {
			tracer_pid = 0;  /* killed */
			ph = T_FAILED;
			break;
		}
		if (now_ns() > deadline && atomic_load(&tr.phase) == T_GO) {
			/* A thread does not stop (uninterruptible sleep): kill
			 * the tracer, which lets every thread go, and fall back. */
			RAW(SYS_kill, tracer_pid, SIGKILL, 0, 0);
			ph = T_FAILED;
			break;
		}
	}
	if (ph != T_STOPPED)
		agent_stopw.nslots = 0;
	if (yama)
		prctl(PR_SET_PTRACER, 0, 0, 0, 0);
	if (ph != T_STOPPED) {
		if (tracer_pid)
			reap_tracer();
		return false;
	}
	return true;
}

void agent_stopw_resume_ptrace(void)
{
	atomic_store(&tr.phase, T_RELEASE);
	futex_wake(&tr.phase);
	reap_tracer();  /* it exits right after detaching */
}

void agent_stopw_trace_init(void)
{
	tracer_stack = agent_mmap(TRACER_STACK);
}

void agent_stopw_trace_all(bool all)
{
	tr.all = all;
}

void agent_stopw_resend_moved(void)
{
	for (int i = 0; moved.resend && i < moved.n; i++)
		RAW(SYS_rt_sigqueueinfo, getpid(), moved.info[i].si_signo, &moved.info[i], 0);
	moved.n = 0;
}
