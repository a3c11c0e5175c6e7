/*
 * signals.c — the agent's signals stay the agent's, the program's
 * handlers stay the program's.
 *
 * The agent owns a few signals (leak_check_signal, the dump `signal`, the
 * fallback stop signal). Once it owns one, its handler stays installed in
 * the kernel: the program's sigaction/signal/sigset/... calls on that
 * signal are answered here, recording the program's disposition (handler,
 * flags, mask) in a small static table and returning the previous one in
 * oldact as the kernel would have. Every other signal passes straight to
 * libc. A signal that does not come from heaptrail is handed to the
 * program's disposition by agent_sig_program: its handler (with its mask,
 * SA_SIGINFO, SA_RESETHAND, SA_NODEFER), nothing for SIG_IGN, and for
 * SIG_DFL the default action itself (the kernel's SIG_DFL put back for the
 * time of a re-raise, so the exit status is the bare run's).
 *
 * Limit: a program that sets a disposition with the raw rt_sigaction
 * system call (not through libc) replaces the agent's handler; the CLI
 * then sees the signal as not caught (SigCgt) and refuses to send it.
 *
 * Signal-safe, no allocation: the table is static, indexed by signal;
 * writers take a spin lock with every signal blocked and publish a new
 * copy by flipping an index, so a handler reads a whole disposition.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/signals.h"
#include "agent/banned.h"

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* libc's own sigaction, under its exported second name: not ours */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

typedef void (*agent_sig_fn)(int, siginfo_t *, void *);
typedef void (*sighandler_fn)(int);

static struct owned {
	_Atomic(agent_sig_fn) fn;   /* the agent's handler; NULL: not owned */
	sigset_t agent_mask;        /* blocked while the agent's handler runs */
	int agent_flags;            /* SA_NODEFER: sig is not */
	atomic_int cur;             /* which of prog[] is the current one */
	struct sigaction prog[2];   /* the program's disposition */
} owned[_NSIG];

/* Signals whose default action the agent replaced by a handler of its
 * own that reports and then acts as the default would (the fatal
 * signals): the program reads SIG_DFL there, and setting SIG_DFL keeps
 * the agent's handler. hidden_view is what the program last set (all
 * zero: SIG_DFL as the kernel reports a disposition never set). */
static _Atomic(agent_sig_fn) hidden[_NSIG];
static struct sigaction hidden_view[_NSIG];

static atomic_int table_lock;
/* what libc puts in the kernel with every handler (seen on our own) */
static int restorer_flag;
static void (*restorer)(void);

static struct {
	sighandler_fn (*signal)(int, sighandler_fn);
	sighandler_fn (*bsd_signal)(int, sighandler_fn);
	sighandler_fn (*ssignal)(int, sighandler_fn);
	sighandler_fn (*sysv_signal)(int, sighandler_fn);
	sighandler_fn (*sysv_signal2)(int, sighandler_fn);
	sighandler_fn (*sigset)(int, sighandler_fn);
	atomic_int resolved;
} real;

static void resolve(void)
{
	if (atomic_load(&real.resolved))
		return;
	int busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;  /* dlsym's allocations are not the program's */
	real.signal = (sighandler_fn (*)(int, sighandler_fn))dlsym(RTLD_NEXT, "signal");
	real.bsd_signal = (sighandler_fn (*)(int, sighandler_fn))dlsym(RTLD_NEXT, "bsd_signal");
	real.ssignal = (sighandler_fn (*)(int, sighandler_fn))dlsym(RTLD_NEXT, "ssignal");
	real.sysv_signal = (sighandler_fn (*)(int, sighandler_fn))dlsym(RTLD_NEXT, "sysv_signal");
	real.sysv_signal2 = (sighandler_fn (*)(int, sighandler_fn))dlsym(RTLD_NEXT, "__sysv_signal");
	real.sigset = (sighandler_fn (*)(int, sighandler_fn))dlsym(RTLD_NEXT, "sigset");
	agent_tls.busy = busy;
	atomic_store(&real.resolved, 1);
}

static int raw_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return (int)syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

static bool is_owned(int sig)
{
	return sig > 0 && sig < _NSIG && atomic_load(&owned[sig].fn) != NULL;
}

static agent_sig_fn hidden_fn(int sig)
{
	return sig > 0 && sig < _NSIG ? atomic_load(&hidden[sig]) : NULL;
}

static bool has_handler(const struct sigaction *sa)
{
	return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

static void lock(sigset_t *saved)
{
	sigset_t all;
	sigfillset(&all);
	raw_sigmask(SIG_SETMASK, &all, saved);
	while (atomic_exchange(&table_lock, 1))
		syscall(SYS_sched_yield);
}

static void unlock(const sigset_t *saved)
{
	atomic_store(&table_lock, 0);
	raw_sigmask(SIG_SETMASK, saved, NULL);
}

/* The agent's handler in the kernel, with the program's SA_RESTART and
 * SA_ONSTACK when the program has a handler (its calls see what they
 * would see bare), else restarting. */
static int kernel_install(int sig, const struct sigaction *prog)
{
	struct sigaction sa;
	agent_memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = atomic_load(&owned[sig].fn);
	sa.sa_mask = owned[sig].agent_mask;
	sa.sa_flags = SA_SIGINFO | owned[sig].agent_flags;
	if (!has_handler(prog) || (prog->sa_flags & SA_RESTART))
		sa.sa_flags |= SA_RESTART;
	if (has_handler(prog))
		sa.sa_flags |= prog->sa_flags & SA_ONSTACK;
	return __sigaction(sig, &sa, NULL);
}

/* Under the lock: publishes a new disposition for the program. */
static void publish(int sig, const struct sigaction *prog)
{
	struct owned *o = &owned[sig];
	int next = !atomic_load(&o->cur);
	o->prog[next] = *prog;
	atomic_store(&o->cur, next);
	kernel_install(sig, prog);
}

static void snapshot(int sig, struct sigaction *out)
{
	struct owned *o = &owned[sig];
	*out = o->prog[atomic_load(&o->cur)];
}

bool agent_sig_own(int sig, agent_sig_fn fn, const sigset_t *agent_mask, int agent_flags)
{
	if (sig <= 0 || sig >= _NSIG || sig == SIGKILL || sig == SIGSTOP)
		return false;
	sigset_t saved;
	lock(&saved);
	bool ok = true;
	if (atomic_load(&owned[sig].fn) == NULL) {
		struct sigaction cur;
		if (__sigaction(sig, NULL, &cur)) {
			ok = false;
		} else {
			if (agent_mask)
				owned[sig].agent_mask = *agent_mask;
			else
				sigemptyset(&owned[sig].agent_mask);
			owned[sig].agent_flags = agent_flags & SA_NODEFER;
			owned[sig].prog[0] = cur;
			owned[sig].prog[1] = cur;
			atomic_store(&owned[sig].cur, 0);
			atomic_store(&owned[sig].fn, fn);
			struct sigaction k;
			if (kernel_install(sig, &cur)) {
				atomic_store(&owned[sig].fn, NULL);
				ok = false;
			} else if (!restorer_flag && __sigaction(sig, NULL, &k) == 0 &&
				   (k.sa_flags & SA_RESTORER)) {
				restorer = k.sa_restorer;
				restorer_flag = SA_RESTORER;
			}
		}
	}
	unlock(&saved);
	return ok;
}

/* Whether the kernel's handler for owned signal sig is still the agent's. */
static bool kernel_has_ours(int sig)
{
	struct sigaction cur;
	agent_sig_fn fn = atomic_load(&owned[sig].fn);
	return fn && __sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	       cur.sa_sigaction == fn;
}

bool agent_sig_still_ours(int sig)
{
	return is_owned(sig) && kernel_has_ours(sig);
}

void agent_sig_disown(int sig)
{
	if (!is_owned(sig))
		return;
	sigset_t saved;
	lock(&saved);
	struct sigaction prog;
	snapshot(sig, &prog);
	if (kernel_has_ours(sig))
		__sigaction(sig, &prog, NULL);
	/* a signal delivered meanwhile finds it not owned: its handler
	 * returns, and a fault comes again, to the program's disposition */
	atomic_store(&owned[sig].fn, NULL);
	unlock(&saved);
}

bool agent_sig_owned(int sig)
{
	return is_owned(sig);
}

bool agent_sig_program_has_handler(int sig)
{
	if (!is_owned(sig))
		return false;
	struct sigaction p;
	snapshot(sig, &p);
	return has_handler(&p);
}

static bool ignored_by_default(int sig)
{
	return sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
}

/* SIG_DFL: the kernel's default action, for real. The signal is blocked
 * in this handler (the kernel did it); it goes back to SIG_DFL, is sent
 * again to this thread and unblocked, so it takes its action now (dies,
 * or stops until continued). Then our handler returns. */
static agent_sig_fn on_fatal;

void agent_signals_on_fatal(agent_sig_fn fn)
{
	on_fatal = fn;
}

static void default_action(int sig, siginfo_t *si, void *uc)
{
	if (ignored_by_default(sig))
		return;
	if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU && on_fatal)
		on_fatal(sig, si, uc);  /* it terminates the process */
	sigset_t saved;
	lock(&saved);
	struct sigaction dfl;
	agent_memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	__sigaction(sig, &dfl, NULL);
	syscall(SYS_tgkill, getpid(), agent_gettid(), sig);
	sigset_t only;
	sigemptyset(&only);
	sigaddset(&only, sig);
	raw_sigmask(SIG_UNBLOCK, &only, NULL);  /* a terminating signal ends here */
	raw_sigmask(SIG_BLOCK, &only, NULL);
	struct sigaction p;
	snapshot(sig, &p);
	kernel_install(sig, &p);
	atomic_store(&table_lock, 0);
	raw_sigmask(SIG_SETMASK, &saved, NULL);
}

void agent_sig_program(int sig, siginfo_t *si, void *ucv)
{
	if (!is_owned(sig))
		return;
	struct sigaction p;
	snapshot(sig, &p);
	if (p.sa_handler == SIG_IGN)
		return;
	if (p.sa_handler == SIG_DFL) {
		default_action(sig, si, ucv);
		return;
	}
	if (p.sa_flags & SA_RESETHAND) {
		sigset_t saved;
		lock(&saved);
		struct sigaction now;
		snapshot(sig, &now);
		if (now.sa_handler == p.sa_handler) {
			now.sa_handler = SIG_DFL;
			now.sa_flags &= ~SA_SIGINFO;
			publish(sig, &now);
		}
		unlock(&saved);
	}
	/* the mask the kernel would give the program's handler: the
	 * interrupted code's, its sa_mask, the signal unless SA_NODEFER */
	ucontext_t *uc = ucv;
	sigset_t mask, before;
	raw_sigmask(SIG_BLOCK, NULL, &before);
	if (uc)
		mask = uc->uc_sigmask;
	else
		mask = before;
	for (int s = 1; s < _NSIG; s++)
		if (sigismember(&p.sa_mask, s) == 1)
			sigaddset(&mask, s);
	if (p.sa_flags & SA_NODEFER)
		sigdelset(&mask, sig);
	else
		sigaddset(&mask, sig);
	raw_sigmask(SIG_SETMASK, &mask, NULL);
	if (p.sa_flags & SA_SIGINFO)
		p.sa_sigaction(sig, si, ucv);
	else
		p.sa_handler(sig);
	raw_sigmask(SIG_SETMASK, &before, NULL);
}

/* ---------- the program's calls ---------- */

static void as_kernel_returns(struct sigaction *old, const struct sigaction *rec)
{
	*old = *rec;
}

/* sigaction on a signal whose default the agent replaced (see hidden). */
static int hidden_sigaction(int sig, agent_sig_fn fn, const struct sigaction *act,
			    struct sigaction *oldact)
{
	sigset_t saved;
	lock(&saved);
	struct sigaction cur;
	int r = __sigaction(sig, NULL, &cur);
	bool ours = r == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fn;
	struct sigaction prev = ours ? hidden_view[sig] : cur;
	if (r == 0 && act) {
		if (act->sa_handler == SIG_DFL) {
			/* the agent's handler ends the process as SIG_DFL does */
			struct sigaction sa;
			agent_memset(&sa, 0, sizeof sa);
			sa.sa_sigaction = fn;
			sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
			sigemptyset(&sa.sa_mask);
			r = __sigaction(sig, &sa, NULL);
			if (r == 0) {
				hidden_view[sig] = *act;
				sigdelset(&hidden_view[sig].sa_mask, SIGKILL);
				sigdelset(&hidden_view[sig].sa_mask, SIGSTOP);
				hidden_view[sig].sa_flags |= restorer_flag;
				if (restorer_flag)
					hidden_view[sig].sa_restorer = restorer;
			}
		} else {
			r = __sigaction(sig, act, NULL);
		}
	}
	int e = errno;
	unlock(&saved);
	errno = e;
	if (r == 0 && oldact)
		*oldact = prev;
	return r;
}

void agent_sig_hide_default(int sig, agent_sig_fn fn)
{
	if (sig > 0 && sig < _NSIG)
		atomic_store(&hidden[sig], fn);
}

int agent_sig_kernel_default(int sig)
{
	struct sigaction dfl;
	agent_memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	if (sig > 0 && sig < _NSIG)
		atomic_store(&hidden[sig], NULL);
	return __sigaction(sig, &dfl, NULL);
}

AGENT_API int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	if (!is_owned(sig)) {
		agent_sig_fn fn = hidden_fn(sig);
		if (AGENT_UNLIKELY(fn != NULL))
			return hidden_sigaction(sig, fn, act, oldact);
		return __sigaction(sig, act, oldact);
	}
	sigset_t saved;
	lock(&saved);
	struct sigaction prev;
	snapshot(sig, &prev);
	if (act) {
		struct sigaction next = *act;
		/* the kernel never blocks these, and records libc's restorer */
		sigdelset(&next.sa_mask, SIGKILL);
		sigdelset(&next.sa_mask, SIGSTOP);
		next.sa_flags |= restorer_flag;
		if (restorer_flag)
			next.sa_restorer = restorer;
		publish(sig, &next);
	}
	unlock(&saved);
	if (oldact)
		as_kernel_returns(oldact, &prev);
	return 0;
}

/* signal()'s BSD semantics, as glibc's: sa_mask holds the signal,
 * SA_RESTART. */
static sighandler_fn owned_signal(int sig, sighandler_fn h, int flags, bool mask_self)
{
	struct sigaction sa, old;
	agent_memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	if (mask_self)
		sigaddset(&sa.sa_mask, sig);
	sa.sa_flags = flags;
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}

#define SIGNAL_LIKE(name, field, flags, mask_self)                              \
	AGENT_API sighandler_fn name(int sig, sighandler_fn h)                          \
	{                                                                        \
		if ((!is_owned(sig) && !hidden_fn(sig)) || h == SIG_ERR) {       \
			resolve();                                               \
			if (real.field)                                          \
				return real.field(sig, h);                       \
			errno = ENOSYS;                                          \
			return SIG_ERR;                                          \
		}                                                                \
		return owned_signal(sig, h, flags, mask_self);                   \
	}

SIGNAL_LIKE(signal, signal, SA_RESTART, true)
SIGNAL_LIKE(bsd_signal, bsd_signal, SA_RESTART, true)
SIGNAL_LIKE(ssignal, ssignal, SA_RESTART, true)
SIGNAL_LIKE(sysv_signal, sysv_signal, SA_RESETHAND | SA_NODEFER, false)
SIGNAL_LIKE(__sysv_signal, sysv_signal2, SA_RESETHAND | SA_NODEFER, false)

/* sigset(): SIG_HOLD blocks the signal; anything else sets the handler
 * and unblocks it; returns SIG_HOLD when it was blocked before. */
AGENT_API sighandler_fn sigset(int sig, sighandler_fn h)
{
	if (!is_owned(sig) && !hidden_fn(sig)) {
		resolve();
		if (real.sigset)
			return real.sigset(sig, h);
		errno = ENOSYS;
		return SIG_ERR;
	}
	sigset_t one, was;
	sigemptyset(&one);
	sigaddset(&one, sig);
	if (raw_sigmask(SIG_BLOCK, NULL, &was))
		return SIG_ERR;
	bool held = sigismember(&was, sig) == 1;
	struct sigaction old;
	if (h == SIG_HOLD) {
		sigaction(sig, NULL, &old);
		raw_sigmask(SIG_BLOCK, &one, NULL);
		return held ? SIG_HOLD : old.sa_handler;
	}
	struct sigaction sa;
	agent_memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	raw_sigmask(SIG_UNBLOCK, &one, NULL);
	return held ? SIG_HOLD : old.sa_handler;
}

void agent_signals_forked(void)
{
	/* a writer fills the copy not in use before publishing it: the
	 * current one is whole even if the lock holder vanished mid-way */
	atomic_store(&table_lock, 0);
}

void agent_signals_init(void)
{
	resolve();
}
