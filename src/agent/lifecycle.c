/*
 * lifecycle.c — start-up (the constructor), fork, and the report at exit
 * and the leak checks: when they run and on which stack; the leak file
 * itself is written by leakwriter.c.
 *
 * Start-up happens in two steps. The first allocation of the process
 * (which can come before any constructor) resolves the real allocator and
 * sets up what tracking needs (agent_init_early). The constructor then
 * reads the options, registers the fork handlers and, with
 * follow_children=0, removes the agent from LD_PRELOAD.
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
 * process killed by a fatal signal gets its report from a handler (end
 * of this file). Reports and leak checks run on a stack of the agent's
 * own, so they fit on any stack the program calls or signals them on.
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
#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <ucontext.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/sample.h"
#include "agent/counters.h"
#include "agent/heapprofile.h"
#include "format/vocab.h"
#include "agent/hooks.h"
#include "agent/leakscan.h"
#include "agent/fnhook.h"
#include "agent/lifecycle.h"
#include "agent/pool.h"
#include "agent/modules.h"
#include "agent/signals.h"
#include "agent/startup.h"
#include "agent/stopworld.h"
#include "agent/table.h"
#include "agent/triggers.h"
#include "agent/writer.h"
#include "agent/leakwriter.h"
#include "agent/unwind.h"
#include "format/leakfile.h"
#include "format/options.h"
#include "heaptrail.h"
#include "agent/banned.h"

static void (*libc_freeres)(void);
static void install_check_handler(void);
static void install_fatal_handlers(bool all);
static void remove_fatal_handlers(bool keep_faults);
static int find_libc(struct dl_phdr_info *info, size_t size, void *arg);
static int find_ldso(struct dl_phdr_info *info, size_t size, void *arg);
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

/* ---------- fork ---------- */

/* Were there other threads at the fork? Any of them may have held a lock
 * that the child inherits held (glibc's loader lock among them). */
static bool fork_threaded;

static void fork_prepare(void)
{
	agent_hooks_fork_prepare();
	fork_threaded = !__libc_single_threaded || agent_modules_frozen();
	agent_modules_fork_prepare();
	agent_modules_lock();
	agent_tables_lock_all();
}

static void fork_parent(void)
{
	agent_tables_unlock_all();
	agent_modules_unlock();
	agent_hooks_fork_done();
}

static void fork_child(void)
{
	agent_tables_unlock_all();
	agent_modules_unlock();
	agent_modules_fork_child(fork_threaded);
	agent_pid = getpid();
	if (agent_pid == 1)  /* the init of a new PID namespace (above) */
		remove_fatal_handlers(true);
	atomic_store(&reported, 0);
	atomic_store(&scan_owner, 0);  /* its thread is not in this process */
	atomic_store(&exit_owner, 0);
	atomic_store(&report_done, 0);
	atomic_store(&report_tid, 0);
	atomic_store(&exit_ctx.tid, 0);
	agent_counters_forked();
	agent_signals_forked();
	/* threads that had deferred calls (hooks.c) are gone; this one's stay */
	atomic_store(&agent_pending, (atomic_load(&agent_pending) & AGENT_PENDING_WORK) |
				     (agent_tls.deferred ? AGENT_PENDING_DEFERRED : 0));
	agent_tls.rng = 0;  /* draw different samples from the parent */
	agent_sample_forked();
	agent_heapprofile_forked();
	/* a child of a detached process is as inert as its parent: no
	 * timeline, no dumps, no report (every fork wrote a timeline file
	 * into the old output directory, for as long as the process ran) */
	if (agent_attach_reports())
		agent_triggers_start();
	if (!agent_config.follow_children || !agent_attach_reports())
		reports_enabled = false;
	agent_hooks_fork_done();
}

/* ---------- follow_children=0 ---------- */

/* Removes every LD_PRELOAD entry naming libheaptrail from the environment,
 * in place, so programs this one execs run without the agent. */
static void drop_self_from_preload(void)
{
	extern char **environ;
	for (char **e = environ; e && *e; e++) {
		if (!agent_strstarts(*e, "LD_PRELOAD="))
			continue;
		char *src = *e + 11, *dst = src;
		while (*src) {
			char *tok = src;
			while (*src && *src != ':' && *src != ' ')
				src++;
			size_t n = (size_t)(src - tok);
			bool ours = false;
			for (size_t i = 0; i + 12 <= n; i++)
				if (agent_strstarts(tok + i, "libheaptrail"))
					ours = true;
			if (n && !ours) {
				if (dst != *e + 11)
					*dst++ = ':';
				for (size_t i = 0; i < n; i++)
					*dst++ = tok[i];
			}
			if (*src)
				src++;
		}
		*dst = 0;
	}
}

/* The allocations made before the options were read were all tracked;
 * in sampling mode they are forgotten (they were not sampled), so the
 * dumps' weights stay unbiased. */
static void start_sampling(void)
{
	agent_tables_lock_all();
	agent_live_clear_locked();
	agent_tables_unlock_all();
	agent_reset_cumulative();
	struct agent_counts *c = agent_my_counts();
	atomic_store(&c->tracked, 0);
	atomic_store(&c->tracked_bytes, 0);
	atomic_store(&c->tracked_frees, 0);
	atomic_store(&c->freed_bytes, 0);
	atomic_store(&c->est_bytes, 0);
	atomic_store(&c->est_blocks_x1024, 0);
	agent_filter_init();
}

/* ---------- constructor / destructor ---------- */

static void start(bool preloaded);
static void exit_park(int status, void *arg);

__attribute__((constructor)) static void agent_constructor(void)
{
	/* loaded by `heaptrail attach`: attach.c starts the agent with the
	 * options the CLI passes, once the real allocator is known */
	if (agent_attach_loaded_late())
		return;
	agent_ensure_ready();
	agent_tls.busy = 1;
	agent_config_load();
	if (!agent_config.follow_children)
		drop_self_from_preload();
	start(true);
	agent_fnhook_install(0, 0);
	/* the ld.so runs this before __libc_start_main registers _dl_fini:
	 * these two are the last exit handlers of all (see exit_park) */
	on_exit(exit_park, NULL);
	on_exit(exit_park, NULL);
	agent_tls.busy = 0;
}

void agent_start_attached(void)
{
	start(false);
}

/* What the constructor and an attach share. An attach installs the
 * fatal-signal handlers itself (agent_fatal_handlers), and takes them
 * away at the detach. */
static void start(bool preloaded)
{
	libc_freeres = (void (*)(void))dlsym(RTLD_DEFAULT, "__libc_freeres");
	real_exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
	if (preloaded)  /* attached: the agent wraps whatever malloc is there */
		agent_hooks_check_bypass();
	/* libc's exit, not the agent's hook of the same name */
	dl_iterate_phdr(find_libc, real_exit ? (void *)(uintptr_t)real_exit
					     : (void *)(uintptr_t)&on_exit);
	if (getauxval(AT_BASE))
		dl_iterate_phdr(find_ldso, (void *)(uintptr_t)getauxval(AT_BASE));
	agent_signals_on_fatal(agent_report_fatal);
	agent_pending_on_check(agent_leak_check);
	agent_leakscan_init(agent_config.stop_signal);
	agent_signals_init();
	install_check_handler();
	if (preloaded)
		install_fatal_handlers(true);
	if (agent_config.sample > 1)
		start_sampling();
	agent_set_recording(agent_config.active);
	agent_triggers_start();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* libc's text, whose exit machinery sits between the program's last live
 * frame and the report. */
static uintptr_t libc_lo, libc_hi;
/* The loader's text (its base is AT_BASE): see check_handler. */
static uintptr_t ldso_lo, ldso_hi;

static int find_ldso(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (info->dlpi_addr != (uintptr_t)arg)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			ldso_lo = info->dlpi_addr + ph->p_vaddr;
			ldso_hi = ldso_lo + ph->p_memsz;
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
			libc_lo = a;
			libc_hi = a + ph->p_memsz;
			return 1;
		}
	}
	return 0;
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
	if (!libc_hi || agent_modules_frozen())
		return fallback;
	int n = agent_unwind_frames(pcs, sps, 64);
	for (int i = 0; i < n; i++) {
		uintptr_t ip = pcs[i], sp = sps[i];
		bool ours = ip >= agent_self_lo && ip < agent_self_hi;
		bool libc = ip >= libc_lo && ip < libc_hi;
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
		agent_tls.busy = 1;  /* dlsym's allocations are not the program's */
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
	agent_tls.busy = 1;
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
	agent_tls.busy = 1;

	bool classified = false;
	struct agent_counts totals;
	if (agent_config.leak_kinds)
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
	return (c[-2] == 0x0f && c[-1] == 0x05) || (pc + 2 <= libc_hi && c[0] == 0x0f && c[1] == 0x05);
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
	bool in_loader = agent_tls.in_loader || (ipc >= ldso_lo && ipc < ldso_hi) ||
			 (ipc >= libc_lo + 2 && ipc < libc_hi && !at_syscall(ipc));
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
	if (agent_tls.busy || agent_tls.in_loader || (pc >= ldso_lo && pc < ldso_hi))
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

static void install_check_handler(void)
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
	pid_t self = agent_gettid();
	if (getpid() != agent_pid || !reports_enabled) {
		/* a child that does not report */
	} else if (atomic_load(&reported)) {
		/* another thread is writing the report: let it finish */
		for (int i = 0; i < 30000 && atomic_load(&report_tid) != self &&
				!atomic_load(&report_done); i++) {
			agent_nap_us(1000);
		}
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
		report_exit(-1, sig, sp, uc ? regs : NULL, uc ? NGREG : 0);
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

static void install_fatal_handlers(bool all)
{
	for (int sig = 1; sig < 65 && sig < _NSIG; sig++) {
		struct sigaction old, sa;
		if (!reported_signal(sig, all) || sigaction(sig, NULL, &old))
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
static void remove_fatal_handlers(bool keep_faults)
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
		install_fatal_handlers(false);
	else
		remove_fatal_handlers(false);
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
