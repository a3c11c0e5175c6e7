/*
 * lifecycle.c — start-up (the constructor) and fork. The exit and its
 * report, and the leak checks, are exitreport.c's; the handlers of the
 * leak check signal and of fatal signals are sigchecks.c's; the leak
 * file itself is written by leakwriter.c.
 *
 * Start-up happens in two steps. The first allocation of the process
 * (which can come before any constructor) resolves the real allocator and
 * sets up what tracking needs (agent_init_early). The constructor then
 * reads the options, registers the fork handlers and, with
 * follow_children=0, removes the agent from LD_PRELOAD.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/sample.h"
#include "agent/counters.h"
#include "agent/heapprofile.h"
#include "agent/hooks.h"
#include "agent/leakscan.h"
#include "agent/fnhook.h"
#include "agent/guard.h"
#include "agent/lifecycle.h"
#include "agent/modules.h"
#include "agent/quarantine.h"
#include "agent/signals.h"
#include "agent/startup.h"
#include "agent/table.h"
#include "agent/triggers.h"
#include "agent/banned.h"

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
	agent_quarantine_lock();
}

static void fork_parent(void)
{
	agent_quarantine_unlock();
	agent_tables_unlock_all();
	agent_modules_unlock();
	agent_hooks_fork_done();
}

static void fork_child(void)
{
	agent_quarantine_unlock();  /* its blocks are the child's too */
	agent_tables_unlock_all();
	agent_modules_unlock();
	agent_modules_fork_child(fork_threaded);
	agent_pid = getpid();
	if (agent_pid == 1)  /* the init of a new PID namespace (sigchecks.c) */
		agent_fatal_handlers_remove(true);
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
	agent_exit_forked(agent_config.follow_children && agent_attach_reports());
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

/* ---------- the constructor ---------- */

static void start(bool preloaded);

__attribute__((constructor)) static void agent_constructor(void)
{
	/* loaded by `heaptrail attach`: attach.c starts the agent with the
	 * options the CLI passes, once the real allocator is known */
	if (agent_attach_loaded_late())
		return;
	agent_ensure_ready();
	agent_tls.busy = AGENT_BUSY_AGENT;
	agent_config_load();
	if (!agent_config.follow_children)
		drop_self_from_preload();
	start(true);
	agent_fnhook_install(0, 0);
	/* the ld.so runs this before __libc_start_main registers _dl_fini */
	agent_exit_parks();
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
	agent_sampling_start();
	agent_exit_init();
	if (preloaded)  /* attached: the agent wraps whatever malloc is there */
		agent_hooks_check_bypass();
	agent_signals_on_fatal(agent_report_fatal);
	agent_pending_on_check(agent_leak_check);
	agent_leakscan_init(agent_config.stop_signal);
	agent_signals_init();
	agent_check_handler_install();
	if (preloaded) {
		/* before the fatal handlers: SIGSEGV is then the guard's, whose
		 * handler hands what is not its own to the program's
		 * disposition, and to the report at a death by default */
		agent_guard_init();
		agent_fatal_handlers_install(true);
	}
	if (agent_sampling.period > 1)
		start_sampling();
	agent_set_recording(agent_config.active);
	agent_triggers_start();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
