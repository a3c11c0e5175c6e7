/*
 * config.c — HEAPTRAIL_OPTIONS, read once by the constructor.
 *
 *   HEAPTRAIL_OPTIONS="sample=512k,interval=1g,peak=1,every=10s,output=/tmp/run"
 *
 * Options are comma-separated; "key=value" or jemalloc's "key:value",
 * applied in order (a key given twice: its last well-formed value).
 *
 * output           directory for the agent's files (default: current dir)
 * prefix           path prefix of heap dump names (default OUTPUT/heaptrail)
 *                  Both are read against the working directory at start-up
 *                  (resolve_at_start): a program that changes directory
 *                  later still writes where it was told.
 * sample           mean bytes between sampled allocations (k/m/g suffixes;
 *                  default 512k, as jemalloc and Go); 1 = every allocation
 *                  (exact mode, needed for leak classification); auto =
 *                  start at 8k and raise it as the heap grows, within a
 *                  cost budget (sample.c, "sample=auto")
 * interval         write a heap dump every SIZE bytes allocated (0 = off)
 * peak             1: keep one dump of the heap at its peak, rewritten
 *                  when the peak has grown by peak_step percent (default 10)
 * every            write a heap dump every DURATION (10s, 500ms; 0 = off)
 * signal           write a heap dump when this signal arrives (0 = off)
 *                  Signals are numbers or names (SIGUSR2, usr2, RTMIN+3);
 *                  faults and uncatchable ones (SIGSEGV, SIGBUS, SIGILL,
 *                  SIGFPE, SIGTRAP, SIGSYS, SIGABRT, SIGKILL, SIGSTOP) are
 *                  refused with a message (format/options.c)
 * final            1: write a heap dump at exit (default 0)
 * mmap             1: record the program's anonymous mmap, munmap and mremap
 *                  calls, as the blocks of a pool named "[mmap]" that heap
 *                  dumps show and leak reports leave out (default 0)
 * timeline         record time, live bytes and blocks, bytes allocated and
 *                  RSS every N ms into heaptrail.PID.timeline (0 = off,
 *                  the default). Timeline rows and `every` dumps are
 *                  written by the program's thread that allocates or
 *                  frees once their time has come (no thread of the
 *                  agent's: triggers.c): none while the heap stays still.
 * active           0: start with recording stopped (heaptrail_set_active)
 * depth            frames kept per allocation stack (1..256, default 64)
 * follow_children  1: exec'd programs are tracked too (default); 0: the
 *                  agent removes itself from LD_PRELOAD at start-up
 * freeres          1: release libc's and libstdc++'s internal caches
 *                  before the exit report, as valgrind does (default)
 * leak_kinds       1: classify blocks at exit into valgrind's four kinds
 *                  with a reachability scan (default; exact mode only)
 * stop_signal      signal used to stop threads during the scan when
 *                  ptrace is not permitted (default SIGRTMAX-1)
 * stop_ptrace      0: stop threads with stop_signal only, never ptrace
 *                  (default 1: ptrace first, the signal as the fallback)
 * leak_check_signal  signal that asks for a leak check now when it comes
 *                  by sigqueue with heaptrail's value (FMT_SIGVAL_MAGIC: an
 *                  older heaptrail's `leaks PID`; heaptrail asks by ptrace
 *                  now) (default SIGRTMAX-2; 0 off)
 * error_exitcode   when the exit report cannot be written (disk full,
 *                  directory gone or not writable any more...), the
 *                  process exits with this status instead of its own
 *                  (1-255; 0, the default, keeps the program's status).
 *                  `heaptrail run --error-exitcode=N` passes N.
 * pid              the PID the files are named after and that they record,
 *                  instead of getpid(): `heaptrail attach` passes the one it
 *                  was given when the process sees itself under another
 *                  (its own PID namespace: a container). A child forked
 *                  later names its files with its getpid().
 * run              an id written into every file of this run (letters,
 *                  digits, '-', '_'; at most 63), so a reader can tell
 *                  them from an earlier run's files in the same directory.
 *                  `heaptrail run` passes a fresh one; children inherit it.
 *
 * alloc_fn, free_fn, realloc_fn, reset_fn, destroy_fn, create_fn, move_fn,
 * trim_fn    a function of the program's to hook as that operation of a
 *            pool allocator: alloc_fn=AllocSetAlloc(ctx=arg1,size=arg2)->ret
 *            (format/fnspec.h; commas inside the parentheses do not end the
 *            option). Each adds one; hooked by fnhook.c at start-up.
 * builtin_fns 0: do not hook the allocators the program carries a copy of
 *            (mimalloc's mi_malloc..., je_/_rjem_ prefixed jemalloc, tc_
 *            tcmalloc, Rust's __rust_alloc... with a global allocator of
 *            its own), which are hooked by default (fnhook.c)
 * entries    0: at an attach, redirect the relocation slots only, not
 *            the allocator's entry points too (attach.c): calls through a
 *            pointer to malloc taken before the attach are then not seen
 * debug_dir  where separate debug files are looked for by build-id
 *            (DIR/.build-id/xx/yyyy.debug), for the symbols of a stripped
 *            binary the functions above are named in (default
 *            /usr/lib/debug, where Debian's -dbgsym packages put them)
 *
 * jemalloc's names are accepted too: prof, prof_active (active),
 * lg_prof_sample (sample = 2^N), lg_prof_interval (interval = 2^N, -1 off),
 * prof_gdump (peak), prof_final (final), prof_prefix (prefix), prof_leak
 * and prof_accum (accepted; heaptrail always does both).
 *
 * HEAPTRAIL_OUTPUT, when set, names the output directory too (and wins):
 * it may hold commas. A malformed or unknown option is reported once on
 * stderr and ignored.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "format/fnspec.h"
#include "format/options.h"
#include "agent/banned.h"

struct agent_config agent_config = {
	.depth = AGENT_DEFAULT_DEPTH,
	.follow_children = true,
	.freeres = true,
	.leak_kinds = true,
	.stop_ptrace = true,
	.builtin_fns = true,
	.entries = true,
	.active = true,
	/* Until the options are read, every allocation is tracked: the
	 * constructor forgets those blocks if sampling is asked for. */
	.sample = 1,
	.peak_step = 10,
};

struct agent_sampling agent_sampling = { .period = 1, .leak_kinds = true };

/* ---- value parsers: each returns false on a malformed value ---- */

static bool parse_bool(const char *s, size_t n, uint64_t *out)
{
	if ((n == 1 && *s == '1') || (n == 4 && agent_strstarts(s, "true"))) {
		*out = 1;
		return true;
	}
	if ((n == 1 && *s == '0') || (n == 5 && agent_strstarts(s, "false"))) {
		*out = 0;
		return true;
	}
	return false;
}

/* jemalloc's lg_ values: 2^N, or -1 for off (0). */
static bool parse_lg(const char *s, size_t n, uint64_t *out)
{
	uint64_t v;
	if (n == 2 && s[0] == '-' && s[1] == '1') {
		*out = 0;
		return true;
	}
	if (!fmt_opt_num(s, n, 62, &v))
		return false;
	*out = 1ull << v;
	return true;
}

/* A number or a name (format/options.c); false when malformed, and
 * *refused when it is a signal the agent must not take over. */
static bool parse_signal(const char *s, size_t n, uint64_t *out, bool *refused)
{
	int sig = fmt_signal_parse(s, n);
	*refused = sig == FMT_SIGNAL_REFUSED;
	if (sig < 0)
		return false;
	*out = (uint64_t)sig;
	return true;
}

/* ---- the table ---- */

enum { T_SIZE, T_BOOL, T_NUM, T_DURATION, T_LG, T_SIGNAL, T_PATH, T_ID, T_IGNORED };

static const struct option {
	const char *name;
	int type;
	size_t offset;        /* into agent_config */
	size_t width;         /* of the field: 1 (bool), 4 (int) or 8 */
	uint64_t min, max;    /* for T_NUM */
} options[] = {
#define F(field) offsetof(struct agent_config, field), sizeof(agent_config.field)
	{ "output", T_PATH, F(output), 0, 0 },
	{ "prefix", T_PATH, F(prefix), 0, 0 },
	{ "prof_prefix", T_PATH, F(prefix), 0, 0 },
	{ "sample", T_SIZE, F(sample), 0, 0 },
	{ "lg_prof_sample", T_LG, F(sample), 0, 0 },
	{ "interval", T_SIZE, F(interval), 0, 0 },
	{ "lg_prof_interval", T_LG, F(interval), 0, 0 },
	{ "peak", T_BOOL, F(peak), 0, 0 },
	{ "prof_gdump", T_BOOL, F(peak), 0, 0 },
	{ "peak_step", T_NUM, F(peak_step), 1, 1000 },
	{ "every", T_DURATION, F(every_ms), 0, 0 },
	{ "signal", T_SIGNAL, F(dump_signal), 0, 0 },
	{ "final", T_BOOL, F(final), 0, 0 },
	{ "mmap", T_BOOL, F(mmap), 0, 0 },
	{ "builtin_fns", T_BOOL, F(builtin_fns), 0, 0 },
	{ "entries", T_BOOL, F(entries), 0, 0 },
	{ "debug_dir", T_PATH, F(debug_dir), 0, 0 },
	{ "prof_final", T_BOOL, F(final), 0, 0 },
	{ "timeline", T_NUM, F(timeline_ms), 0, 3600000 },
	{ "active", T_BOOL, F(active), 0, 0 },
	{ "prof_active", T_BOOL, F(active), 0, 0 },
	{ "prof", T_BOOL, F(active), 0, 0 },
	{ "depth", T_NUM, F(depth), 1, AGENT_MAX_DEPTH },
	{ "follow_children", T_BOOL, F(follow_children), 0, 0 },
	{ "freeres", T_BOOL, F(freeres), 0, 0 },
	{ "leak_kinds", T_BOOL, F(leak_kinds), 0, 0 },
	{ "errors_abort", T_BOOL, F(errors_abort), 0, 0 },
	{ "guard", T_SIZE, F(guard), 0, 0 },
	{ "guard_continue", T_BOOL, F(guard_continue), 0, 0 },
	{ "stop_signal", T_SIGNAL, F(stop_signal), 0, 0 },
	{ "stop_ptrace", T_BOOL, F(stop_ptrace), 0, 0 },
	{ "leak_check_signal", T_SIGNAL, F(leak_check_signal), 0, 0 },
	{ "error_exitcode", T_NUM, F(error_exitcode), 0, 255 },
	{ "run", T_ID, F(run_id), 0, 0 },
	{ "pid", T_NUM, F(shown_pid), 1, 0x7fffffff },
	{ "prof_leak", T_IGNORED, 0, 0, 0, 0 },
	{ "prof_accum", T_IGNORED, 0, 0, 0, 0 },
#undef F
};

static void store(const struct option *o, uint64_t v)
{
	char *field = (char *)&agent_config + o->offset;
	switch (o->width) {
	case 1: *(bool *)field = v != 0; break;
	case 4: *(int *)field = (int)v; break;
	case 8: *(uint64_t *)field = v; break;
	}
}

static bool apply_one(const struct option *o, const char *val, size_t vlen, bool *refused)
{
	uint64_t v;
	switch (o->type) {
	case T_PATH:
		if (vlen >= o->width)
			return false;
		agent_memcpy((char *)&agent_config + o->offset, val, vlen);
		((char *)&agent_config + o->offset)[vlen] = 0;
		return true;
	case T_ID:
		if (!fmt_run_id_ok(val, vlen))
			return false;
		agent_memcpy((char *)&agent_config + o->offset, val, vlen);
		((char *)&agent_config + o->offset)[vlen] = 0;
		return true;
	case T_SIZE:
		if (o->offset == offsetof(struct agent_config, sample) && vlen == 4 &&
		    agent_strstarts(val, "auto")) {
			agent_config.sample_auto = true;
			return true;
		}
		if (!fmt_opt_size(val, vlen, &v))
			return false;
		break;
	case T_BOOL: if (!parse_bool(val, vlen, &v)) return false; break;
	case T_DURATION: if (!fmt_opt_duration(val, vlen, &v)) return false; break;
	case T_LG: if (!parse_lg(val, vlen, &v)) return false; break;
	case T_SIGNAL: if (!parse_signal(val, vlen, &v, refused)) return false; break;
	case T_NUM:
		if (!fmt_opt_num(val, vlen, o->max, &v) || v < o->min)
			return false;
		break;
	default:
		return parse_bool(val, vlen, &v);
	}
	store(o, v);
	if (o->offset == offsetof(struct agent_config, sample))
		agent_config.sample_auto = false;  /* a fixed size given later wins */
	return true;
}

/* KIND_fn=SPEC: appended to agent_config.fns when well-formed. 1 when
 * taken, 0 when the key is not one of these, -1 when refused (said). */
static int apply_fn(const char *key, size_t klen, const char *val, size_t vlen)
{
	int kind;
	if (!val || klen < 4 || !agent_strstarts(key + klen - 3, "_fn") ||
	    (kind = fmt_fn_kind_parse(key, klen - 3)) < 0)
		return 0;
	struct fmt_fnspec spec;
	const char *why = fmt_fnspec_parse(kind, val, vlen, &spec);
	size_t have = agent_strlen(agent_config.fns), klen0 = klen - 3;
	if (!why && have + klen0 + vlen + 3 > sizeof agent_config.fns)
		why = "too many allocator functions";
	if (why) {
		char shown[256];
		size_t n = agent_strlen(fmt_shown(shown, sizeof shown - 3, val, vlen));
		agent_memcpy(shown + n, "': ", 4);
		agent_log("ignoring allocator function '", shown, why);
		return -1;
	}
	char *p = agent_config.fns + have;
	agent_memcpy(p, key, klen0);
	p[klen0] = ' ';
	agent_memcpy(p + klen0 + 1, val, vlen);
	p[klen0 + 1 + vlen] = '\n';
	p[klen0 + 2 + vlen] = 0;
	return 1;
}

static void apply(const char *opt, size_t klen, const char *val, size_t vlen, void *arg)
{
	char shown[256];
	bool refused = false;
	int fn = apply_fn(opt, klen, val, vlen);
	if (fn)
		return;
	if (val) {
		for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
			if (agent_strlen(options[i].name) == klen &&
			    agent_strstarts(opt, options[i].name))
				if (apply_one(&options[i], val, vlen, &refused))
					return;
	}
	size_t len = val ? (size_t)(val - opt) + vlen : klen;
	fmt_shown(shown, sizeof shown, opt, len);
	if (refused)
		agent_log("ignoring option '", shown,
			  "': a fault or uncatchable signal cannot be used");
	else
		agent_log("ignoring unknown or malformed option '", shown, "'");
}

void agent_config_load(void)
{
	agent_config_load_from(getenv("HEAPTRAIL_OPTIONS"), getenv("HEAPTRAIL_OUTPUT"));
}

/* Makes path (a directory, or a prefix of file names when prefix) absolute
 * against the working directory now: files written later, at exit, go where
 * the options said when the process started, even if it has changed
 * directory since (daemons chdir("/")). An empty output is the working
 * directory itself; an empty prefix stays empty (OUTPUT/heaptrail). When
 * the working directory cannot be named (removed, outside a chroot) or the
 * whole would not fit, path stays as it was and is read against the
 * working directory of the moment. */
static void resolve_at_start(char *path, size_t cap, bool prefix)
{
	if (path[0] == '/' || (prefix && !path[0]))
		return;
	char cwd[4096];
	long n = syscall(SYS_getcwd, cwd, sizeof cwd);
	if (n <= 1 || cwd[0] != '/')  /* "(unreachable)...": not a path */
		return;
	size_t c = agent_strlen(cwd), p = agent_strlen(path);
	if (!p) {  /* output "": the working directory */
		agent_strlcpy(path, cwd, cap);
		return;
	}
	bool slash = cwd[c - 1] != '/';
	if (c + slash + p + 1 > cap)
		return;
	for (size_t i = p + 1; i-- > 0;)  /* overlapping: from the end */
		path[c + slash + i] = path[i];
	agent_memcpy(path, cwd, c);
	if (slash)
		path[c] = '/';
}

void agent_config_load_from(const char *s, const char *out)
{
	agent_config.stop_signal = SIGRTMAX - 1;
	agent_config.leak_check_signal = fmt_leak_check_signal_default();
	agent_config.sample = 512 * 1024;
	agent_config.sample_auto = false;
	agent_config.fns[0] = 0;      /* an attach after a detach names its own */
	agent_config.shown_pid = 0;   /* and says again from where it comes */
	agent_config.builtin_fns = true;
	agent_config.entries = true;
	fmt_options_each(s, apply, NULL);
	if (out && agent_strlen(out) < sizeof agent_config.output)
		agent_strlcpy(agent_config.output, out, sizeof agent_config.output);
	resolve_at_start(agent_config.output, sizeof agent_config.output, false);
	resolve_at_start(agent_config.prefix, sizeof agent_config.prefix, true);
	if (agent_config.sample_auto)
		agent_config.sample = AGENT_SAMPLE_AUTO_MIN;
	if (agent_config.sample == 0)
		agent_config.sample = 1;
}
