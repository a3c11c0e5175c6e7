// build: agent
/*
 * test_config — the agent's configuration parser (src/agent/config.c):
 * HEAPTRAIL_OPTIONS as the constructor reads it. Each case starts from
 * the configuration the agent has before the constructor runs, sets the
 * environment and calls agent_config_load(), then checks the fields:
 * defaults; sizes, durations and booleans; jemalloc's names (key:value,
 * lg_ values); a key given twice (the last well-formed value wins, a
 * malformed one is ignored); ranges (depth, peak_step, timeline,
 * error_exitcode); signals by number and name, faults refused; the run
 * id's characters; HEAPTRAIL_OUTPUT winning over output=; output= and
 * prefix= made absolute against the working directory; sample=0 read
 * as exact mode; sample=auto (8 KiB to start, a later size wins); classification off whenever sampling; and one stderr
 * line per ignored option, naming it.
 *
 * Prints "ok - ..." / "not ok - ..." per check and exits 1 when one failed.
 */
#include "agent/agent.h"
#include "agent/config.h"
#include "agent/sample.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

/* hooks.c's, which this test does not link */
__thread struct agent_tls agent_tls;

static struct agent_config initial;

#define EQ(got, want, what) \
	check((uint64_t)(got) == (uint64_t)(want), "%s: %s = %llu (expected %llu)", opts, what, \
	      (unsigned long long)(got), (unsigned long long)(want))
#define STR(got, want, what) \
	check(strcmp(got, want) == 0, "%s: %s = '%s' (expected '%s')", opts, what, got, want)

static char err_text[4096];

/* agent_config_load() and agent_sampling_start() with HEAPTRAIL_OPTIONS=opts (NULL: unset) and
 * HEAPTRAIL_OUTPUT=out (NULL: unset), from the initial configuration;
 * what it wrote on stderr lands in err_text. */
static void load(const char *opts, const char *out)
{
	agent_config = initial;
	if (opts)
		setenv("HEAPTRAIL_OPTIONS", opts, 1);
	else
		unsetenv("HEAPTRAIL_OPTIONS");
	if (out)
		setenv("HEAPTRAIL_OUTPUT", out, 1);
	else
		unsetenv("HEAPTRAIL_OUTPUT");
	FILE *tmp = tmpfile();
	int saved = dup(2);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	agent_config_load();
	agent_sampling_start();  /* what start-up makes of them (sample.c) */
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(err_text, 1, sizeof err_text - 1, tmp);
	err_text[n] = 0;
	fclose(tmp);
}

/* err_text on one line, for the messages */
static const char *shown(void)
{
	static char one[sizeof err_text];
	size_t i = 0;
	for (; err_text[i]; i++)
		one[i] = err_text[i] == '\n' ? '|' : err_text[i];
	one[i] = 0;
	return one;
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

int main(void)
{
	const char *opts;
	initial = agent_config;

	opts = "(unset)";
	load(NULL, NULL);
	EQ(agent_config.sample, 512 * 1024, "sample");
	EQ(agent_config.depth, 64, "depth");
	EQ(agent_config.interval, 0, "interval");
	EQ(agent_config.every_ms, 0, "every");
	EQ(agent_config.dump_signal, 0, "signal");
	EQ(agent_config.final, 0, "final");
	EQ(agent_config.peak, 0, "peak");
	EQ(agent_config.peak_step, 10, "peak_step");
	EQ(agent_config.active, 1, "active");
	EQ(agent_config.follow_children, 1, "follow_children");
	EQ(agent_config.freeres, 1, "freeres");
	EQ(agent_config.stop_ptrace, 1, "stop_ptrace");
	EQ(agent_config.stop_signal, SIGRTMAX - 1, "stop_signal");
	EQ(agent_config.leak_kinds, 1, "leak_kinds (the option)");
	EQ(agent_sampling.leak_kinds, 0, "sampling's leak_kinds (sampling: no classification)");
	EQ(agent_sampling.period, 512 * 1024, "sampling's period");
	EQ(agent_config.error_exitcode, 0, "error_exitcode");
	char cwd[4096], want[4200];
	if (!getcwd(cwd, sizeof cwd))
		strcpy(cwd, "?");
	STR(agent_config.output, cwd, "output (the working directory at start-up)");
	STR(agent_config.prefix, "", "prefix");
	STR(agent_config.run_id, "", "run");
	EQ(err_text[0], 0, "nothing on stderr");

	opts = "sample=1";
	load(opts, NULL);
	EQ(agent_config.sample, 1, "sample");
	EQ(agent_sampling.leak_kinds, 1, "sampling's leak_kinds (exact mode)");

	opts = "sample=0";
	load(opts, NULL);
	EQ(agent_config.sample, 1, "sample (0 is exact mode)");
	EQ(agent_sampling.leak_kinds, 1, "sampling's leak_kinds");

	opts = "sample=1,leak_kinds=0";
	load(opts, NULL);
	EQ(agent_config.leak_kinds, 0, "leak_kinds");
	EQ(agent_sampling.leak_kinds, 0, "sampling's leak_kinds (the option says no)");

	opts = "sample=64k,interval=1g,peak=1,every=10s,final=true,timeline=50,output=/tmp/run";
	load(opts, NULL);
	EQ(agent_config.sample, 65536, "sample");
	EQ(agent_config.interval, 1ull << 30, "interval");
	EQ(agent_config.peak, 1, "peak");
	EQ(agent_config.every_ms, 10000, "every");
	EQ(agent_config.final, 1, "final");
	EQ(agent_config.timeline_ms, 50, "timeline");
	STR(agent_config.output, "/tmp/run", "output");
	EQ(err_text[0], 0, "nothing on stderr");

	opts = "every=500ms,sample=3m";
	load(opts, NULL);
	EQ(agent_config.every_ms, 500, "every");
	EQ(agent_config.sample, 3 << 20, "sample");
	EQ(agent_config.sample_auto, 0, "sample_auto (a size)");

	/* sample=auto: sampling from 8 KiB; a later size, or jemalloc's
	 * lg_prof_sample, fixes S again; a later auto wins over a size;
	 * "autox" is malformed (the default stays) */
	static const struct {
		const char *opts;
		uint64_t sample;
		bool is_auto;
	} sample_cases[] = {
		{ "sample=auto", 8192, true },
		{ "sample=auto,sample=64k", 65536, false },
		{ "sample=auto,lg_prof_sample:10", 1024, false },
		{ "sample=1,sample=auto", 8192, true },
		{ "sample=autox", 512 * 1024, false },
	};
	for (size_t i = 0; i < sizeof sample_cases / sizeof sample_cases[0]; i++) {
		opts = sample_cases[i].opts;
		load(opts, NULL);
		EQ(agent_config.sample_auto, sample_cases[i].is_auto, "sample_auto");
		EQ(agent_config.sample, sample_cases[i].sample, "sample");
		EQ(agent_sampling.automatic, sample_cases[i].is_auto, "sampling's automatic");
		EQ(agent_sampling.period, sample_cases[i].sample, "sampling's period");
		EQ(agent_sampling.leak_kinds, 0, "sampling's leak_kinds (sampling)");
		if (sample_cases[i].is_auto)
			EQ(err_text[0], 0, "nothing on stderr");
	}

	/* jemalloc's names and its key:value form */
	opts = "prof:true,prof_active:false,lg_prof_sample:10,lg_prof_interval:20,"
	       "prof_gdump:true,prof_final:true,prof_prefix:/tmp/jeprof,prof_leak:true,prof_accum:false";
	load(opts, NULL);
	EQ(agent_config.active, 0, "active (prof_active, after prof)");
	EQ(agent_config.sample, 1024, "sample (2^10)");
	EQ(agent_config.interval, 1 << 20, "interval (2^20)");
	EQ(agent_config.peak, 1, "peak (prof_gdump)");
	EQ(agent_config.final, 1, "final (prof_final)");
	STR(agent_config.prefix, "/tmp/jeprof", "prefix");
	EQ(err_text[0], 0, "nothing on stderr (prof_leak, prof_accum accepted)");

	opts = "lg_prof_interval:30,lg_prof_interval:-1";
	load(opts, NULL);
	EQ(agent_config.interval, 0, "interval (-1 is off)");

	/* a key twice: the last well-formed value */
	opts = "depth=10,depth=20";
	load(opts, NULL);
	EQ(agent_config.depth, 20, "depth");
	EQ(err_text[0], 0, "nothing on stderr");

	opts = "depth=10,depth=0";
	load(opts, NULL);
	EQ(agent_config.depth, 10, "depth (0 below the range: ignored)");
	EQ(lines(err_text), 1, "stderr lines");
	check(strstr(err_text, "'depth=0'") != NULL, "%s: stderr names 'depth=0': %s", opts, shown());

	opts = "depth=256,peak_step=1000,timeline=3600000,error_exitcode=255";
	load(opts, NULL);
	EQ(agent_config.depth, 256, "depth (the maximum)");
	EQ(agent_config.peak_step, 1000, "peak_step (the maximum)");
	EQ(agent_config.timeline_ms, 3600000, "timeline (the maximum)");
	EQ(agent_config.error_exitcode, 255, "error_exitcode (the maximum)");
	EQ(err_text[0], 0, "nothing on stderr");

	opts = "depth=257,peak_step=1001,timeline=3600001,error_exitcode=256,peak_step=0";
	load(opts, NULL);
	EQ(agent_config.depth, 64, "depth (257: ignored)");
	EQ(agent_config.peak_step, 10, "peak_step (1001, 0: ignored)");
	EQ(agent_config.timeline_ms, 0, "timeline (ignored)");
	EQ(agent_config.error_exitcode, 0, "error_exitcode (ignored)");
	EQ(lines(err_text), 5, "stderr lines, one per bad option");

	/* signals */
	opts = "signal=usr2,stop_signal=SIGRTMIN+3,leak_check_signal=0";
	load(opts, NULL);
	EQ(agent_config.dump_signal, SIGUSR2, "signal");
	EQ(agent_config.stop_signal, SIGRTMIN + 3, "stop_signal");
	EQ(agent_config.leak_check_signal, 0, "leak_check_signal (0 off)");

	/* leak_check_signal: which signal the agent takes for a request by
	 * sigqueue (cli:leaks-signal-rules sends them) */
	int def = SIGRTMAX - 2;
	static const struct {
		const char *opts;
		int want;  /* -1: the default */
		const char *what;
	} lcs[] = {
		{ "sample=1,depth=8", -1, "not given" },
		{ "leak_check_signal=10", SIGUSR1, "key=value" },
		{ "leak_check_signal:12", SIGUSR2, "key:value" },
		{ "leak_check_signal=SIGUSR2", SIGUSR2, "by name" },
		{ "leak_check_signal=10,sample=1,leak_check_signal:usr2", SIGUSR2,
		  "given twice: the last" },
		{ "leak_check_signal=10,leak_check_signal=bogus", SIGUSR1,
		  "a malformed later value leaves the earlier one" },
		{ "leak_check_signal=10,leak_check_signal=11", SIGUSR1,
		  "a refused later value leaves the earlier one" },
		{ "xleak_check_signal=10", -1, "another key's suffix" },
		{ "leak_check_signal_x=10", -1, "a longer key" },
		{ ",,leak_check_signal=34,", 34, "empty options around" },
	};
	for (size_t i = 0; i < sizeof lcs / sizeof lcs[0]; i++) {
		opts = lcs[i].opts;
		load(opts, NULL);
		EQ(agent_config.leak_check_signal, lcs[i].want < 0 ? def : lcs[i].want, lcs[i].what);
	}

	opts = "signal=12,signal=SIGSEGV";
	load(opts, NULL);
	EQ(agent_config.dump_signal, 12, "signal (SIGSEGV refused, 12 kept)");
	EQ(lines(err_text), 1, "stderr lines");
	check(strstr(err_text, "'signal=SIGSEGV'") && strstr(err_text, "fault or uncatchable"),
	      "%s: stderr says SIGSEGV is refused: %s", opts, shown());

	/* booleans */
	opts = "final=yes,peak=2,follow_children=0,freeres=false,stop_ptrace=0";
	load(opts, NULL);
	EQ(agent_config.final, 0, "final (yes: malformed)");
	EQ(agent_config.peak, 0, "peak (2: malformed)");
	EQ(agent_config.follow_children, 0, "follow_children");
	EQ(agent_config.freeres, 0, "freeres");
	EQ(agent_config.stop_ptrace, 0, "stop_ptrace");
	EQ(lines(err_text), 2, "stderr lines");

	/* the run id */
	opts = "run=Ab-1_z9";
	load(opts, NULL);
	STR(agent_config.run_id, "Ab-1_z9", "run");
	opts = "run=ok,run=a/b,run=a.b,run=";
	load(opts, NULL);
	STR(agent_config.run_id, "ok", "run (bad characters, empty: ignored)");
	EQ(lines(err_text), 3, "stderr lines");
	char long_id[80] = "run=";
	memset(long_id + 4, 'x', 64);
	long_id[68] = 0;
	opts = long_id;
	load(opts, NULL);
	STR(agent_config.run_id, "", "run (64 characters: too long)");

	/* relative paths are read against the working directory at start-up */
	opts = "output=rel/dir,prefix=p/x";
	load(opts, NULL);
	snprintf(want, sizeof want, "%s/rel/dir", cwd);
	STR(agent_config.output, want, "output");
	snprintf(want, sizeof want, "%s/p/x", cwd);
	STR(agent_config.prefix, want, "prefix");

	/* HEAPTRAIL_OUTPUT wins, and may hold commas */
	opts = "output=/a";
	load(opts, "/b,c");
	STR(agent_config.output, "/b,c", "output (HEAPTRAIL_OUTPUT=/b,c)");

	/* unknown, empty and value-less options */
	opts = "bogus=1,sample=2k,,final";
	load(opts, NULL);
	EQ(agent_config.sample, 2048, "sample (beside bad options)");
	check(strstr(err_text, "'bogus=1'") != NULL, "%s: stderr names 'bogus=1': %s", opts,
	      shown());
	check(strstr(err_text, "'final'") != NULL, "%s: stderr names 'final' (no value): %s", opts,
	      shown());

	opts = "sample=12q,interval=-5,every=10parsecs";
	load(opts, NULL);
	EQ(agent_config.sample, 512 * 1024, "sample (12q: ignored)");
	EQ(agent_config.interval, 0, "interval (-5: ignored)");
	EQ(agent_config.every_ms, 0, "every (ignored)");
	EQ(lines(err_text), 3, "stderr lines");

	/* allocator functions: each one kept, in order, whole (its commas
	 * too); a malformed one said and dropped; on by default: the
	 * built-in profiles */
	opts = "alloc_fn=A(ctx=arg1,size=arg2)->ret,depth=9,free_fn=F(ptr=arg1),"
	       "reset_fn=R(size=arg1),builtin_fns=0";
	load(opts, NULL);
	STR(agent_config.fns, "alloc A(ctx=arg1,size=arg2)->ret\nfree F(ptr=arg1)\n", "fns");
	EQ(agent_config.depth, 9, "depth (between two functions)");
	EQ(agent_config.builtin_fns, 0, "builtin_fns");
	EQ(lines(err_text), 1, "stderr lines (the malformed reset_fn)");
	check(strstr(err_text, "'R(size=arg1)'") != NULL, "%s: stderr names it: %s", opts, shown());
	opts = "sample=1";
	load(opts, NULL);
	STR(agent_config.fns, "", "fns (none)");
	EQ(agent_config.builtin_fns, 1, "builtin_fns (default)");

	return failures ? 1 : 0;
}
