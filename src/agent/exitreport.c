/*
 * exitreport.c — the exit, and the leak report: the report at exit and
 * the leak checks, when they run and on which stack (the file itself is
 * written by leakwriter.c).
 *
 * The exit report is written as late as the process allows, so that
 * every destructor has had its chance to free: the agent's destructor
 * (run by _dl_fini, itself the last exit handler) registers one more exit
 * handler, which glibc runs after _dl_fini returns. That handler receives
 * the exit status, releases libc's and libstdc++'s one-time caches as
 * valgrind does (only when no other thread is left to use them), and
 * writes heaptrail.PID.leaks. _exit, which skips all of this, writes the
 * report from its hook. exit, _exit and _Exit record the caller's
 * callee-saved registers and stack pointer on entry (AGENT_CALLER_ENTRY):
 * they are roots, and the scan of that thread's stack starts there. A
 * process killed by a fatal signal gets its report from a handler
 * (sigchecks.c, agent_report_killed). Reports and leak checks run on a
 * stack of the agent's own, so they fit on any stack the program calls
 * or signals them on.
 *
 * One thread ends the process. glibc (before 2.41) lets two threads run
 * exit() at once, and the one that finishes first kills the other in the
 * middle of the report; so the agent's exit() hook lets the first caller
 * through and makes any later one wait for ever (the first one's exit
 * ends it), as glibc 2.41 does. The report paths claim the exit the same
 * way, so a thread that calls _exit while another writes the report
 * waits too. main returning is libc's own call to exit, which is not
 * hooked: for a main that returns while another thread calls exit(), the
 * constructor registers two last exit handlers (exit_park).
 *
 * When the exit report cannot be written, the agent says why on stderr
 * and, with the option error_exitcode=N (which `heaptrail run
 * --error-exitcode=N` passes), the process exits with N instead of its
 * own status, so a run whose report is lost never passes as clean.
 */
#include <errno.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/heapprofile.h"
#include "format/vocab.h"
#include "agent/hooks.h"
#include "agent/leakscan.h"
#include "agent/lifecycle.h"
#include "agent/pool.h"
#include "agent/modules.h"
#include "agent/startup.h"
#include "agent/table.h"
#include "agent/triggers.h"
#include "agent/leakwriter.h"
#include "agent/unwind.h"
#include "heaptrail.h"
#include "agent/banned.h"

static void (*libc_freeres)(void);
static bool reports_enabled = true;
static atomic_int reported;
static _Atomic pid_t scan_owner;  /* the thread scanning; see scan_enter */
static int report_err;              /* the exit report's result */
static atomic_int exit_owner;       /* tid of the thread ending the process */
static void (*real_exit)(int);
/* The thread writing the exit report, and whether it is done: a thread
 * killed meanwhile waits for it. */
static _Atomic pid_t report_tid;
static atomic_int report_done;

/* Where the thread that called exit() left the program, for the report
 * its last exit handler writes. The first caller wins. */
static struct {
	_Atomic pid_t tid;
	uintptr_t sp;
	uintptr_t regs[AGENT_CALLER_NREGS];
} exit_ctx;

struct agent_text agent_libc_text, agent_ldso_text;

static int find_ldso(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (info->dlpi_addr != (uintptr_t)arg)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			agent_ldso_text.lo = info->dlpi_addr + ph->p_vaddr;
			agent_ldso_text.hi = agent_ldso_text.lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t target = (uintptr_t)arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && target >= a &&
		    target < a + ph->p_memsz) {
			agent_libc_text.lo = a;
			agent_libc_text.hi = a + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

void agent_exit_init(void)
{
	libc_freeres = (void (*)(void))dlsym(RTLD_DEFAULT, "__libc_freeres");
	real_exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
	/* libc's exit, not the agent's hook of the same name */
	dl_iterate_phdr(find_libc, real_exit ? (void *)(uintptr_t)real_exit
					     : (void *)(uintptr_t)&on_exit);
	if (getauxval(AT_BASE))
		dl_iterate_phdr(find_ldso, (void *)(uintptr_t)getauxval(AT_BASE));
}

void agent_exit_forked(bool reports)
{
	atomic_store(&reported, 0);
	atomic_store(&scan_owner, 0);  /* its thread is not in this process */
	atomic_store(&exit_owner, 0);
	atomic_store(&report_done, 0);
	atomic_store(&report_tid, 0);
	atomic_store(&exit_ctx.tid, 0);
	if (!reports)
		reports_enabled = false;
}

bool agent_exit_reports(void)
{
	return reports_enabled;
}

/* At exit, the main thread's live program frames start above libc's exit
 * machinery (exit, the exit handlers, _dl_fini...) and the agent's own
 * frames. Their unwritten slots hold stale values from long-dead calls —
 * valgrind treats such memory as undefined and ignores it — so the scan
 * starts at the first frame that belongs to neither: the function that
 * called exit(), or _start when main returned. */
static uintptr_t program_stack_start(uintptr_t fallback)
{
	uintptr_t pcs[64], sps[64];
	/* as the walk did when it was libunwind's: no walk in a child forked
	 * from threads (see modules.c) */
	if (!agent_libc_text.hi || agent_modules_frozen())
		return fallback;
	int n = agent_unwind_frames(pcs, sps, 64);
	for (int i = 0; i < n; i++) {
		uintptr_t ip = pcs[i], sp = sps[i];
		bool ours = ip >= agent_self_lo && ip < agent_self_hi;
		bool libc = ip >= agent_libc_text.lo && ip < agent_libc_text.hi;
		if (!ours && !libc)
			return sp > fallback ? sp : fallback;
	}
	return fallback;
}

void agent_exit_entered(const uintptr_t *regs, uintptr_t sp)
{
	pid_t none = 0, tid = agent_gettid();
	if (atomic_load(&exit_ctx.tid) || getpid() != agent_pid)
		return;
	exit_ctx.sp = sp;
	for (int i = 0; i < AGENT_CALLER_NREGS; i++)
		exit_ctx.regs[i] = regs[i];
	atomic_compare_exchange_strong(&exit_ctx.tid, &none, tid);
}

static AGENT_NOINLINE void late_report(int status, void *arg)
{
	if (atomic_load(&exit_ctx.tid) == agent_gettid()) {
		agent_report_exit(status & 0xff, exit_ctx.sp, exit_ctx.regs, AGENT_CALLER_NREGS);
		return;
	}
	/* main returned (libc's own call to exit is not hooked) */
	__builtin_unwind_init();  /* spill callee-saved registers: roots */
	agent_report_exit(status & 0xff, program_stack_start(agent_stack_pointer()), NULL, 0);
}

/* ---------- one thread ends the process ---------- */

void agent_exit_claim(void)
{
	if (getpid() != agent_pid)
		return;  /* a vfork child, or a clone the agent does not know */
	int me = (int)agent_gettid(), owner = 0;
	if (atomic_compare_exchange_strong(&exit_owner, &owner, me) || owner == me)
		return;
	/* Another thread is ending the process: its exit_group ends this
	 * one too. Waiting in a futex keeps the thread stoppable by the
	 * leak scan (its signal handler runs, then the wait resumes). */
	for (;;)
		syscall(SYS_futex, &exit_owner, FUTEX_WAIT_PRIVATE, owner, NULL, NULL, 0);
}

static void (*resolve_exit(void))(int)
{
	if (!real_exit) {
		int busy = agent_tls.busy;
		agent_tls.busy = AGENT_BUSY_AGENT;  /* dlsym's allocations are not the program's */
		real_exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
		agent_tls.busy = busy;
	}
	return real_exit;
}

/* A report that could not be written: exit() again, with error_exitcode
 * (unless this exit already has it). */
static void exit_if_report_lost(int status)
{
	if (report_err && agent_config.error_exitcode && status != agent_config.error_exitcode &&
	    resolve_exit())
		real_exit(agent_config.error_exitcode);
}

/* Runs inside exit(), after every destructor. A report that could not be
 * written makes the process exit with error_exitcode when it is set:
 * exit() called again from an exit handler runs what handlers remain,
 * flushes stdio and exits with the new status (glibc's behaviour for a
 * nested exit). */
static void exit_handler(int status, void *arg)
{
	agent_exit_claim();
	late_report(status, arg);
	exit_if_report_lost(status);
}

/* The last two exit handlers (registered by the constructor, below
 * _dl_fini). glibc before 2.41 lets two threads run the exit handlers at
 * once (main returning, which is libc's own unhooked call to exit, while
 * another thread calls exit()), and a thread that finds no handler left
 * ends the process, even while the other one writes the report. While a
 * park is left in the list no thread can find it empty: the thread that
 * pops one and does not own the exit waits for ever (the owner's exit
 * ends it); the owner makes sure of the report (writes it if no thread
 * has, or waits for the thread writing it) and goes on. Two, so that one
 * is still there while the owner runs the other. */
static void exit_park(int status, void *arg)
{
	if (getpid() != agent_pid || !agent_attach_reports())
		return;
	agent_exit_claim();
	late_report(status, arg);  /* nothing when it is written already */
	for (pid_t t; atomic_load(&reported) && !atomic_load(&report_done) &&
		      (t = atomic_load(&report_tid)) && syscall(SYS_tgkill, agent_pid, t, 0) == 0;) {
		agent_nap_us(1000);
	}
	exit_if_report_lost(status);
}

void agent_exit_parks(void)
{
	on_exit(exit_park, NULL);
	on_exit(exit_park, NULL);
}

__attribute__((destructor)) static void agent_destructor(void)
{
	if (getpid() != agent_pid || !agent_attach_reports())
		return;
	if (on_exit(exit_handler, NULL) != 0)
		exit_handler(-1, NULL);
}

/* ---------- the report ---------- */

static bool release_caches(void)
{
	if (!agent_config.freeres || agent_thread_count() != 1)
		return false;
	agent_tls.busy = AGENT_BUSY_AGENT;
	void (*cxx_freeres)(void) =
		(void (*)(void))dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv");
	agent_tls.busy = 0;
	/* With busy clear, what they free is forgotten by the tables. */
	if (cxx_freeres)
		cxx_freeres();
	if (libc_freeres)
		libc_freeres();
	return true;
}

/* The previous leak check's totals, for "what increased" checks. */
static struct agent_kinds *prev_kinds;
static uint32_t prev_nstacks;
static size_t prev_len;
static unsigned check_count;

/* What a report needs from where it was asked for: it is written on the
 * agent's own stack (agent_call_on_own_stack), so everything about the
 * program's stack is taken before the switch. */
struct report_call {
	int status;              /* exit status, < 0 when unknown */
	uintptr_t stack_from;    /* as for agent_leakscan */
	const uintptr_t *extra;  /* extra roots (registers), may be NULL */
	int nextra;
	unsigned check;          /* 0 for the exit report, else the check's number */
	int flags;               /* HEAPTRAIL_LEAKS_* of a check */
	uintptr_t alt_lo, alt_hi; /* the sigaltstack we were called on, if any */
	int killed_by;           /* the fatal signal being reported, else 0 */
	char *wrote;             /* when not NULL: the file's path (wrote_cap bytes) */
	size_t wrote_cap;
};

static void note_altstack(struct report_call *c)
{
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) {
		c->alt_lo = (uintptr_t)ss.ss_sp;
		c->alt_hi = (uintptr_t)ss.ss_sp + ss.ss_size;
	}
}

/* Classifies (when enabled), then writes one leak file. Returns 0 or
 * -errno. */
static int write_report(const struct report_call *c)
{
	int status = c->status;
	uintptr_t stack_from = c->stack_from;
	const uintptr_t *extra = c->extra;
	int nextra = c->nextra;
	unsigned check = c->check;
	int flags = c->flags;
	struct agent_scan_info info;
	struct agent_kinds *kinds = NULL;
	uint32_t nstacks = 0;
	size_t maplen = 0;
	/* The scan and the report read /proc and write a file: a program that
	 * lowered its soft RLIMIT_NOFILE (to 3, say) lends us its hard limit
	 * for the time of the report. */
	struct agent_rlimit_raise lim = { 0 };
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 64)
		agent_rlimit_raise(&lim);
	/* killed: libc may be stopped anywhere (inside malloc, holding its
	 * locks), so its caches stay, as under valgrind */
	bool freeres = !check && !c->killed_by && release_caches();
	int saved_busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;

	bool classified = false;
	struct agent_counts totals;
	if (agent_sampling.leak_kinds)
		classified = (kinds = agent_leakscan(stack_from, extra, nextra, c->alt_lo, c->alt_hi,
							       &nstacks, &maplen, &info));
	if (classified) {
		totals = info.totals;
	} else {
		/* no classification: every live block is "in use" */
		nstacks = agent_stack_count();
		maplen = ((size_t)nstacks + 1) * sizeof *kinds;
		agent_tables_lock_all();
		if ((kinds = agent_mmap(maplen))) {
			agent_live_per_stack_locked(kinds, nstacks);
			agent_pool_per_stack_locked(kinds, nstacks, false);
		}
		agent_counters_sum(&totals);
		agent_tables_unlock_all();
	}
	uint64_t live_bytes = 0, live_blocks = 0;
	for (uint32_t id = 1; kinds && id <= nstacks; id++)
		for (int k = 0; k < FMT_KIND_COUNT; k++) {
			live_bytes += kinds[id].bytes[k];
			live_blocks += kinds[id].blocks[k];
		}
	if (!kinds) {
		live_bytes = totals.tracked_bytes - totals.freed_bytes;
		live_blocks = totals.tracked - totals.tracked_frees;
	}

	uint32_t npools = 0;
	size_t pools_len = 0;
	struct agent_pool_snap *pools = agent_pool_snapshot(&npools, &pools_len);
	struct agent_leak_report r = {
		.status = status, .killed_by = c->killed_by, .freeres = freeres,
		.check = check, .flags = flags, .totals = &totals,
		.live_bytes = live_bytes, .live_blocks = live_blocks,
		.kinds = kinds, .nstacks = nstacks,
		.prev = prev_kinds, .prev_nstacks = prev_nstacks,
		.info = classified ? &info : NULL,
		.pools = pools, .npools = npools,
		.wrote = c->wrote, .wrote_cap = c->wrote_cap,
	};
	int err = agent_leakfile_write(&r);
	agent_munmap(pools, pools_len);
	if (check && classified) {
		agent_munmap(prev_kinds, prev_len);
		prev_kinds = kinds;
		prev_nstacks = nstacks;
		prev_len = maplen;
	} else {
		agent_munmap(kinds, maplen);
	}
	agent_rlimit_restore(&lim);
	agent_tls.busy = saved_busy;
	return err;
}

static long exit_report(void *arg)
{
	agent_set_recording(false);
	agent_time_final();
	/* A dump of another thread (a trigger, a signal) may be under way: the final
	 * one waits for it (up to 2 s: this thread may be that dump's,
	 * exiting from a signal handler) instead of being skipped. */
	for (int i = 0; agent_config.final && agent_dump(NULL, "final") == -EBUSY && i < 2000; i++) {
		agent_nap_us(1000);
	}
	return write_report(arg);
}

/* One scan at a time: its scratch (the maps, the regions, the marks) is
 * the agent's, not the thread's, and an exit report must not start while
 * another thread's leak check is still using it. scan_owner is the tid
 * of the thread scanning (0: none). With wait, the caller waits for the
 * other scan to end (up to 30 s: it is stuck then); false when it cannot
 * have the scan, at once when it is this thread's own interrupted one. */

static bool scan_enter(bool wait)
{
	pid_t me = agent_gettid();
	for (int i = 0;; i++) {
		pid_t none = 0;
		if (atomic_compare_exchange_strong(&scan_owner, &none, me))
			return true;
		if (none == me || !wait || i == 30000)
			return false;
		agent_nap_us(1000);
	}
}

static void scan_leave(void)
{
	atomic_store(&scan_owner, 0);
}

/* The report's and the checks' file work is no place for a pthread_cancel
 * to act (it would leave the flags below set): cancellation waits. */
static int report_exit(int status, int killed_by, uintptr_t stack_from, const uintptr_t *extra,
		       int nextra)
{
	if (!reports_enabled || atomic_exchange(&reported, 1))
		return 0;
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	atomic_store(&report_tid, agent_gettid());
	struct report_call c = { .status = status, .stack_from = stack_from,
				 .extra = extra, .nextra = nextra, .killed_by = killed_by };
	note_altstack(&c);
	if (scan_enter(true)) {
		report_err = (int)agent_call_on_own_stack(exit_report, &c);
		scan_leave();
	} else {
		agent_log("a leak check of this thread was interrupted: ", "no exit report", NULL);
		report_err = -EDEADLK;
	}
	atomic_store(&report_done, 1);
	if (report_err && agent_config.error_exitcode) {
		char code[24];
		agent_put_dec(code, (uint64_t)agent_config.error_exitcode);
		agent_log("no leak report: exiting with status ", code, " (error_exitcode)");
	}
	pthread_setcancelstate(cancel, NULL);
	return report_err;
}

int agent_report_exit(int status, uintptr_t stack_from, const uintptr_t *extra, int nextra)
{
	return report_exit(status, 0, stack_from, extra, nextra);
}

int agent_report_killed(int sig, uintptr_t stack_from, const uintptr_t *regs, int nregs)
{
	return report_exit(-1, sig, stack_from, regs, nregs);
}

bool agent_report_wait_other(void)
{
	if (!atomic_load(&reported))
		return false;
	pid_t self = agent_gettid();
	for (int i = 0; i < 30000 && atomic_load(&report_tid) != self &&
			!atomic_load(&report_done); i++) {
		agent_nap_us(1000);
	}
	return true;
}

static long check_report(void *arg)
{
	return write_report(arg);
}

static atomic_int check_running;

/* Without leak kinds (sampling) the check lists what is in use, as the
 * exit report then does: `heaptrail leaks PID` waited out its timeout. */
int agent_leak_check(int flags, uintptr_t stack_from, const uintptr_t *extra, int nextra,
		     char *wrote, size_t cap)
{
	if (!reports_enabled || !agent_attach_reports())  /* detached: inert */
		return -ENOTSUP;
	if (atomic_exchange(&check_running, 1))
		return -EBUSY;
	if (!scan_enter(false)) {
		atomic_store(&check_running, 0);
		return -EBUSY;
	}
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	struct report_call c = { .status = -1, .stack_from = stack_from, .extra = extra,
				 .nextra = nextra, .check = ++check_count, .flags = flags,
				 .wrote = wrote, .wrote_cap = cap };
	note_altstack(&c);
	int r = (int)agent_call_on_own_stack(check_report, &c);
	pthread_setcancelstate(cancel, NULL);
	scan_leave();
	atomic_store(&check_running, 0);
	return r;
}

/* ---------- exit, _exit and _Exit ---------- */

/* exit runs the exit handlers, the last of which writes the report
 * (late_report above); what it needs from here is the caller's registers
 * and where its frames end. */
AGENT_CALLER_ENTRY(exit, agent_exit_hook, AGENT_CALLER_NORETURN);

__attribute__((used, noreturn)) void agent_exit_hook(int status, const uintptr_t *regs,
						      uintptr_t sp)
{
	agent_exit_claim();
	agent_exit_entered(regs, sp);
	/* resolved with the allocator, so an exit() from a signal handler on
	 * a small stack costs no dlsym here */
	while (!agent_real.exit && !agent_ready())
		sched_yield();  /* another thread is resolving: not for long */
	if (agent_real.exit)
		agent_real.exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* _exit and _Exit skip exit handlers and destructors, so the report is
 * written here (a vfork child shares our memory and is not us: skipped). */
AGENT_CALLER_ENTRY(_exit, agent__exit_hook, AGENT_CALLER_NORETURN);
AGENT_CALLER_ENTRY(_Exit, agent__exit_hook, AGENT_CALLER_NORETURN);

__attribute__((used, noreturn)) void agent__exit_hook(int status, const uintptr_t *regs,
						       uintptr_t sp)
{
	if (getpid() == agent_pid) {
		agent_exit_claim();
		if (agent_report_exit(status & 0xff, sp, regs, AGENT_CALLER_NREGS) &&
		    agent_config.error_exitcode)
			status = agent_config.error_exitcode;
	}
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}
