/*
 * sigchecks.c — the agent's signal handlers of the process's life: the
 * leak check signal (and heaptrail's own requests, made by ptrace), and
 * the fatal signals whose death gets a leak report first. The reports
 * themselves are exitreport.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/heapprofile.h"
#include "format/vocab.h"
#include "agent/hooks.h"
#include "agent/lifecycle.h"
#include "agent/modules.h"
#include "agent/signals.h"
#include "agent/startup.h"
#include "agent/stopworld.h"
#include "agent/table.h"
#include "heaptrail.h"
#include "agent/banned.h"

/* ---------- leak checks asked for by signal ----------
 *
 * The leak check signal with heaptrail's value, by sigqueue: an older
 * heaptrail's `leaks PID`, or anyone who asks so. heaptrail itself asks
 * by ptrace now (heaptrail_request, below). */

/* Was the code at pc, in libc's text, blocked in a system call: pc just
 * after a syscall instruction (0f 05), or on it (a call the kernel
 * restarts after the handler)? */
static bool at_syscall(uintptr_t pc)
{
	const unsigned char *c = (const unsigned char *)pc;
	return (c[-2] == 0x0f && c[-1] == 0x05) || (pc + 2 <= agent_libc_text.hi && c[0] == 0x0f && c[1] == 0x05);
}

static void check_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	if (!si || si->si_code != SI_QUEUE || !FMT_SIGVAL_IS_OURS(si->si_value.sival_int)) {
		/* not heaptrail's request: the program's own use of the signal */
		errno = saved_errno;
		agent_sig_program(sig, si, ucv);
		errno = saved_errno;
		return;
	}
	/* in the loader (dlclose, or the loader's own code: a dlopen), whose
	 * list the check and the dump walk, or running libc's code (not
	 * blocked in one of its system calls): it may be halfway through
	 * taking or giving back the loader's lock (a recursive mutex whose
	 * owner is not written yet), which the check's dl_iterate_phdr would
	 * then wait for forever (hostile:check_in_dlclose, once in 60 runs):
	 * on another thread's way out */
	ucontext_t *ucl = ucv;
	uintptr_t ipc = ucl ? (uintptr_t)ucl->uc_mcontext.gregs[REG_RIP] : 0;
	bool in_loader = agent_tls.in_loader || (ipc >= agent_ldso_text.lo && ipc < agent_ldso_text.hi) ||
			 (ipc >= agent_libc_text.lo + 2 && ipc < agent_libc_text.hi && !at_syscall(ipc));
	if (si->si_value.sival_int & FMT_SIGVAL_DUMP) {
		/* the live endpoint: a heap dump, no scan, no thread stopped */
		if (agent_tls.busy || in_loader)
			atomic_fetch_or(&agent_pending, AGENT_PENDING_DUMP_LIVE);
		else
			agent_dump(NULL, FMT_HEAP_LIVE);
		errno = saved_errno;
		return;
	}
	int flags = si->si_value.sival_int & 1;
	int bit = flags ? AGENT_PENDING_CHECK_INCREASED : AGENT_PENDING_CHECK;
	if (agent_tls.busy || in_loader) {
		/* inside the agent, perhaps holding a table lock, or in the
		 * loader: on the way out */
		atomic_fetch_or(&agent_pending, bit);
	} else {
		/* The interrupted code's registers are roots, and so is its
		 * stack down to its red zone; below that is this handler. */
		ucontext_t *uc = ucv;
		uintptr_t regs[NGREG];
		for (int i = 0; i < NGREG; i++)
			regs[i] = (uintptr_t)uc->uc_mcontext.gregs[i];
		uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - 128;
		if (agent_leak_check(flags, sp, regs, NGREG, NULL, 0) == -EBUSY)
			atomic_fetch_or(&agent_pending, bit);
	}
	errno = saved_errno;
}

/* heaptrail's own requests, made by ptrace (src/control/inject.c,
 * ctl_agent_request): `heaptrail leaks PID`, the live endpoint. The CLI
 * stops one thread that waits in a system call (or runs the program's
 * own code), runs this function in it as a signal handler would, on its
 * own stack below the red zone with every signal blocked, and gives the
 * thread back with its registers as they were. No signal is
 * sent: the thread's interrupted call starts again when it is given
 * back (a wait with a relative timeout starts its whole timeout again;
 * the CLI prefers threads in other waits), so no thread of the program
 * sees EINTR. regs (nregs
 * words: the thread's user_regs_struct as it was stopped) are roots of a
 * leak check, as a handler's interrupted context was, its stack above
 * their rsp is live, and their rip tells whether it was in the loader.
 * value: FMT_SIGVAL_MAGIC | FMT_SIGVAL_DUMP for a dump
 * (PREFIX.PID.live.heap), | 1 for a check of what increased. wrote, when
 * not NULL (a heaptrail that passes only three arguments passes 0 here),
 * gets the path of the file written, FMT_REQUEST_PATH_MAX bytes at most:
 * the CLI need not guess where output= and prefix=, made absolute against
 * the working directory of the start, put it. Returns 0, -ENOTCONN when the process was detached,
 * -EAGAIN when this thread cannot do it now (inside the agent or the
 * loader: the CLI tries again), -EBUSY when a check or a dump is under
 * way, -EINVAL for a value that is not heaptrail's. */
AGENT_API int heaptrail_request(int value, const uintptr_t *regs, int nregs, char *wrote)
{
	/* x86-64's user_regs_struct: rip and rsp */
	enum { UREG_RIP = 16, UREG_RSP = 19, UREGS = 27 };
	if (!FMT_SIGVAL_IS_OURS(value) || nregs != UREGS || !regs)
		return -EINVAL;
	uintptr_t pc = regs[UREG_RIP], sp = regs[UREG_RSP];
	if (!agent_attach_reports())
		return -ENOTCONN;
	if (agent_tls.busy || agent_tls.in_loader || (pc >= agent_ldso_text.lo && pc < agent_ldso_text.hi))
		return -EAGAIN;
	/* below the interrupted frame's red zone nothing is live */
	agent_stopworld_lent(agent_gettid(), sp - 128);
	int r = value & FMT_SIGVAL_DUMP
			? agent_dump_wrote(FMT_HEAP_LIVE, wrote, wrote ? FMT_REQUEST_PATH_MAX : 0)
			: agent_leak_check(value & 1, sp - 128, regs, nregs, wrote,
					   wrote ? FMT_REQUEST_PATH_MAX : 0);
	agent_stopworld_lent(0, 0);
	return r;
}

void agent_check_handler_install(void)
{
	int sig = agent_config.leak_check_signal;
	/* SA_NODEFER: while a thread runs a check in this handler, a
	 * second request by signal (heaptrail itself asks by ptrace now:
	 * heaptrail_request) finds it taking the signal and is left for
	 * later (-EBUSY) instead of going to another thread */
	if (sig > 0 && !agent_sig_own(sig, check_handler, NULL, SA_NODEFER))
		agent_log("cannot install the leak check signal's handler", NULL, NULL);
}

/* ---------- a report for a process killed by a signal ----------
 *
 * As valgrind does, a process killed by a signal still gets its leak
 * report ("exit signal N"), written before the signal takes its default
 * action. The handlers go only where the program left the default
 * disposition, at start-up; a program that installs its own replaces
 * them, and one that resets it to SIG_DFL and raises the signal again
 * (coreutils' sort, most daemons) gets the agent's back (signals.c,
 * hidden). Then the signal is raised again with the default action (a
 * fault is simply re-executed), so the exit status and the core dump
 * are those of the bare run.
 *
 * Which signals: under `heaptrail run`, every one whose default action
 * ends the process (man 7 signal: Term and Core), real-time ones
 * included, as valgrind reports them all; not SIGTRAP, the debugger's
 * (and a breakpoint is not re-executed), nor the agent's own. A handler
 * there changes nothing the program can see: the program reads SIG_DFL
 * (sigaction and signal are the agent's), a handler is reset to SIG_DFL
 * across exec as SIG_DFL stays, a blocked signal stays pending for
 * sigwait or a signalfd, and the thread the handler interrupts dies
 * before any code of the program runs again (the others are stopped by
 * ptrace for the report, which restarts their calls). Attached, where the
 * program's sigaction is not the agent's and a program would read the
 * handler, only the classic six: the faults, SIGABRT and SIGTERM.
 *
 * The init of a PID namespace (a container's program, or a forked child
 * that became one) is killed by no signal it leaves at SIG_DFL but
 * SIGKILL and a fault, from inside or outside: a handler would report a
 * death that does not come, and then no report at the real exit. There
 * the agent takes only the faults. */

static bool is_fault(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
}

/* Whether the agent puts its handler on sig where the program left
 * SIG_DFL (above); all: every signal whose default ends the process. */
static bool reported_signal(int sig, bool all)
{
	if (sig == agent_config.leak_check_signal || sig == agent_config.stop_signal ||
	    sig == agent_config.dump_signal)
		return false;  /* the agent's own (signals.c reports them) */
	if (is_fault(sig))
		return true;
	if (getpid() == 1)
		return false;
	if (!all)
		return sig == SIGABRT || sig == SIGTERM;
	switch (sig) {
	case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH:  /* ignored */
	case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU:  /* stopped */
	case SIGKILL: case SIGTRAP:
		return false;
	}
	return (sig >= 1 && sig < 32) || (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

static void die_by_default(int sig, const siginfo_t *si)
{
	agent_sig_kernel_default(sig);
	/* a fault the kernel raised comes back when the instruction runs
	 * again; anything else (SIGXCPU, SIGALRM and SIGHUP come from the
	 * kernel too) is sent again, and is delivered when the handler
	 * returns: it is blocked now */
	if (!(si && si->si_code > 0 && is_fault(sig)))
		syscall(SYS_tgkill, getpid(), agent_gettid(), sig);
}

void agent_report_fatal(int sig, siginfo_t *si, void *ucv)
{
	(void)si;
	if (getpid() != agent_pid || !agent_exit_reports()) {
		/* a child that does not report */
	} else if (agent_report_wait_other()) {
		/* another thread was writing the report: it is done */
	} else if (agent_tls.busy &&
		   (!agent_tables_wait_unlocked(1000) || !agent_modules_wait_unlocked(1000))) {
		/* the code we interrupted holds one of our locks */
		agent_log("no leak report: the fatal signal came while the agent held a lock",
			  NULL, NULL);
	} else {
		/* The interrupted code's registers are roots, and so is its
		 * stack down to its red zone; below that is this handler. */
		ucontext_t *uc = ucv;
		uintptr_t regs[NGREG];
		uintptr_t sp = agent_stack_pointer();  /* called, not signalled */
		for (int i = 0; uc && i < NGREG; i++)
			regs[i] = (uintptr_t)uc->uc_mcontext.gregs[i];
		if (uc)
			sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - 128;
		agent_report_killed(sig, sp, uc ? regs : NULL, uc ? NGREG : 0);
	}
}

static void fatal_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	agent_report_fatal(sig, si, ucv);
	die_by_default(sig, si);
	errno = saved_errno;
}

static uint64_t fatal_installed;  /* bit sig-1: sig has fatal_handler */

void agent_fatal_handlers_install(bool all)
{
	for (int sig = 1; sig < 65 && sig < _NSIG; sig++) {
		struct sigaction old, sa;
		/* an owned signal (the guard's SIGSEGV) reports by itself: its
		 * default action runs the report first (signals.c) */
		if (!reported_signal(sig, all) || agent_sig_owned(sig) || sigaction(sig, NULL, &old))
			continue;
		if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
			continue;  /* the program's (or ignored): not ours to touch */
		agent_memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = fatal_handler;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sig, &sa, NULL) == 0) {
			agent_sig_hide_default(sig, fatal_handler);
			fatal_installed |= 1ull << (sig - 1);
		}
	}
}

/* libc's own sigaction, under its exported second name: the kernel's
 * disposition, not what the agent shows the program */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Takes the agent's handler off every signal it put one on (but the
 * faults when keep_faults): SIG_DFL back where the kernel still has the
 * handler (the program may have replaced it since), and the program's
 * SIG_DFL no longer puts it back. */
void agent_fatal_handlers_remove(bool keep_faults)
{
	for (int sig = 1; sig < 65 && sig < _NSIG; sig++) {
		struct sigaction cur;
		if (!(fatal_installed & (1ull << (sig - 1))) || (keep_faults && is_fault(sig)))
			continue;
		fatal_installed &= ~(1ull << (sig - 1));
		if (__sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_sigaction == fatal_handler)
			agent_sig_kernel_default(sig);
		else
			agent_sig_hide_default(sig, NULL);
	}
}

/* Attached, a process killed by a fatal signal gets its report as under
 * `heaptrail run` (for the classic six, above); the detach takes the
 * handlers away. The program's sigaction is not hooked while attached:
 * asked, it sees the agent's handler instead of SIG_DFL. */
void agent_fatal_handlers(bool on)
{
	if (on)
		agent_fatal_handlers_install(false);
	else
		agent_fatal_handlers_remove(false);
}
