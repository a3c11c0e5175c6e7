/*
 * config.h — the options (config.c): read once from HEAPTRAIL_OPTIONS
 * by the constructor (or from the CLI's at an attach), and the sampling
 * in force. Layer 0.
 *
 * The options keep their values for the life of the process (a forked
 * child inherits them); an attach after a detach reads them again. What
 * changes at run time is apart, in struct agent_sampling below.
 */
#ifndef HEAPTRAIL_AGENT_CONFIG_H
#define HEAPTRAIL_AGENT_CONFIG_H

#include "agent/agent.h"
#include "format/options.h"

struct agent_config {
	int depth;               /* frames kept per stack */
	bool follow_children;    /* keep LD_PRELOAD for exec'd children */
	bool freeres;            /* release libc/libstdc++ caches before the report */
	bool leak_kinds;         /* classify blocks at exit (reachability scan) */
	bool errors_abort;       /* abort() at the first heap error (--errors=abort) */
	uint64_t guard;          /* guard=RATE: one allocation every RATE bytes on a
				  * guarded page (guard.c); 0 = off */
	bool guard_continue;     /* a guarded page that faulted is opened and the
				  * program goes on (else it dies of the fault) */
	bool active;             /* record new allocations from the start */
	bool peak;               /* keep a dump of the peak */
	bool final;              /* dump at exit */
	bool mmap;               /* record anonymous mmap/munmap/mremap (pool "[mmap]") */
	bool builtin_fns;        /* hook the allocators the program carries a copy
				  * of (mimalloc, jemalloc, Rust...: fnhook.c) */
	bool entries;            /* attach: the allocator's entry points jump to the
				  * agent too, not only the slots (attach.c) */
	int stop_signal;         /* signal that stops threads for the scan */
	bool stop_ptrace;        /* stop threads with ptrace first (else the signal only) */
	int leak_check_signal;   /* signal that asks for a leak check; 0 = none */
	int dump_signal;         /* dump on this signal; 0 = none */
	int peak_step;           /* percent the peak must grow by to be dumped again */
	uint64_t sample;         /* mean bytes between samples; 1 = exact */
	bool sample_auto;        /* sample=auto: `sample` follows the heap (sample.c) */
	uint64_t interval;       /* dump every this many bytes allocated; 0 = off */
	uint64_t every_ms;       /* dump every this many ms; 0 = off */
	uint64_t timeline_ms;    /* timeline period; 0 = off */
	int error_exitcode;      /* exit status when the exit report cannot be
				  * written; 0 = keep the program's */
	int shown_pid;           /* the PID files and records name (0: getpid()):
				  * an attach from outside the process's PID
				  * namespace gives the one its user typed */
	char run_id[FMT_RUN_ID_MAX + 1]; /* the run these files belong to ("" = none) */
	char output[4096];       /* directory for files, made absolute at start-up
				  * ("" = the working directory then; still ""
				  * or relative only when it cannot be named) */
	char prefix[4096];       /* dump name prefix ("" = OUTPUT/heaptrail),
				  * absolute like output */
	/* allocator functions by name (KIND_fn=SPEC, format/fnspec.h): one
	 * "KIND SPEC\n" line each, in the order given, each already parsed
	 * once (well-formed); fnhook.c hooks them at start-up */
	char fns[4096];
	char debug_dir[1024];    /* separate debug files; "" = /usr/lib/debug */
};
extern struct agent_config agent_config;

/* The sampling in force. agent_config says what was asked; this is what
 * is, and it changes while the program runs: sample=auto raises the
 * period as the heap grows (agent_sample_raise: the recorded blocks are
 * thinned), a program's mallctl("prof.reset") with a new lg_sample and
 * an attach after a detach set it (agent_resample: the blocks recorded
 * before are forgotten, and with them the classification). Written by
 * sample.c alone (agent_sampling_start copies the options at start-up
 * and at each attach); read anywhere. Until then: exact, so the first
 * allocations, which may come before any constructor, are tracked (and
 * forgotten by the constructor when sampling is asked for). */
struct agent_sampling {
	uint64_t period;         /* mean bytes between samples; 1 = exact */
	bool automatic;          /* sample=auto: the period follows the heap */
	bool leak_kinds;         /* blocks are classified at exit: exact all
				  * along, and the option leak_kinds */
	bool notes;              /* period > 1, or a trigger by bytes (interval,
				  * peak): every event goes to agent_sample_note
				  * (sample.h); set with period (sample.c) */
};
extern struct agent_sampling agent_sampling;

/* sample=auto: where `sample` starts and how far it may rise (sample.c
 * says why 8 KiB) */
#define AGENT_SAMPLE_AUTO_MIN (8u << 10)
#define AGENT_SAMPLE_AUTO_MAX (512u << 10)

/* Reads HEAPTRAIL_OPTIONS from the environment. Called once, from the
 * constructor (the only place the agent calls getenv). Unknown options are
 * reported once on stderr and ignored. */
void agent_config_load(void);
/* Options from a string instead of the environment (attach). */
void agent_config_load_from(const char *opts, const char *output);

#endif
