/*
 * attach.c — `heaptrail attach PID`, `heaptrail detach PID`,
 * `heaptrail dump PID`: the commands. The engine below them, calls into
 * a running process with ptrace alone, is src/control (ptrace.h says how).
 */
#include <elf.h>
#include <linux/magic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/growth.h"
#include "cli/cli.h"
#include "format/options.h"
#include "format/vocab.h"

/* ---------- attach ---------- */

static const char attach_usage[] =
	"usage: heaptrail attach [options] PID\n"
	"  -o DIR                 where the agent writes its files (default a fresh\n"
	"                         ./heaptrail-attach-PID, -2, -3... when taken)\n"
	"  --sample SIZE|auto     sample every SIZE bytes on average (default auto:\n"
	"                         from 8k, coarser as the heap grows, up to 512k);\n"
	"                         1 tracks every allocation from the attach on\n"
	"  --interval SIZE        write a heap dump every SIZE bytes allocated\n"
	"  --peak                 keep a heap dump of the peak\n"
	"  --every DURATION       write a heap dump every DURATION (default 10s)\n"
	"  --timeline MS          heap timeline period in ms (default 100; 0 off)\n"
	"  --for DURATION         detach by itself after DURATION (final dump)\n"
	"  --http ADDR            serve the live endpoint (pprof, /metrics) on ADDR\n"
	"                         while attached (until --for ends, or until the\n"
	"                         process exits or heaptrail is interrupted)\n"
	"  --html FILE            write the HTML page of the attach (heaptrail html) to\n"
	"                         FILE at its end: after --for, or without --for when\n"
	"                         the process is detached or exits, or heaptrail is\n"
	"                         interrupted (heaptrail waits until then)\n"
	"  --http-allow-remote    allow an ADDR beyond loopback (with a warning)\n"
	"  --alloc-fn SPEC, --free-fn SPEC, ... (as `heaptrail run`'s): allocator\n"
	"                         functions hooked by name while attached\n"
	"  --no-builtin-fns       no built-in profile (embedded mimalloc, jemalloc...)\n"
	"  --slots-only           redirect the relocation slots only, not the\n"
	"                         allocator's entry points too: calls through a\n"
	"                         pointer to malloc taken earlier are then missed\n"
	"  --guard SIZE           place about one allocation every SIZE bytes on a\n"
	"                         guarded page (as heaptrail run's); free and realloc\n"
	"                         stay hooked after the detach while any such block\n"
	"                         is live\n"
	"  --guard-continue       ... and the program goes on after a guard fault\n"
	"  --options-file FILE    more options, one per line, as for heaptrail run\n"
	CTL_LIVE_PUSH_HELP;

static int parse_pid(const char *s)
{
	long v = ctl_parse_count(s, INT_MAX);
	return v > 0 ? (int)v : -1;
}

/* Prints the "note" lines of dir's heaptrail.PID.attach (what the agent
 * had to say during the attach or detach: functions it would not hook,
 * options it ignored), which it keeps out of the program's stderr; only
 * from a record whose `key` time ("attached", "detached") is not before
 * since, so an older record's notes are never shown again. */
static void print_notes(const char *dir, long pid, const char *key, const struct timespec *since)
{
	char rec[PATH_MAX + 64], want[32];
	snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", dir, pid);
	snprintf(want, sizeof want, "\n%s ", key);
	char *text = ctl_read_file(rec, NULL), *at, *end;
	if (!text || !(at = strstr(text, want)))
		goto out;
	long long sec = strtoll(at + strlen(want), &end, 10);
	long nsec = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
	if (sec < since->tv_sec || (sec == since->tv_sec && nsec < since->tv_nsec))
		goto out;
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, "note ", 5))
			fprintf(stderr, "heaptrail: %.*s\n", (int)strcspn(l + 5, "\n"), l + 5);
out:
	free(text);
}

static int detach_now(long pid, bool quiet)
{
	int r;
	double ms = 0;
	char dir[PATH_MAX];
	struct timespec since;
	bool has_dir = !ctl_attached_dir(pid, dir, sizeof dir);
	clock_gettime(CLOCK_REALTIME, &since);
	/* -EDEADLK: the thread borrowed runs the start of an attach whose
	 * heaptrail was killed, which lasts a moment more: borrow again */
	for (int tries = 0;; tries++) {
		double more = 0;
		if (ctl_call_agent(pid, "heaptrail_attach_stop", NULL, NULL, 0, &r, &more, NULL))
			return 1;
		ms += more;
		if (r != -EDEADLK || tries == 100)
			break;
		usleep(20000);
	}
	if (r == -ENOENT) {
		cli_error("process %ld is not attached (started under `heaptrail run`, or detached "
			  "already)", pid);
		return 1;
	}
	if (!quiet)
		fprintf(stderr, "heaptrail: detached from process %ld (thread stopped %.1f ms)\n", pid,
			ms);
	if (has_dir)
		print_notes(dir, pid, "detached", &since);
	return r ? 1 : 0;
}

/* Whether dir's attach record of pid says it was detached (by `heaptrail
 * detach PID`): the directory is this attach's alone (refuse_used_dir). */
static bool detached(const char *dir, long pid)
{
	char rec[PATH_MAX + 64];
	snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", dir, pid);
	char *text = ctl_read_file(rec, NULL);
	bool r = text && strstr(text, "\ndetached ");
	free(text);
	return r;
}

/* Why dir, holding old (a heaptrail.* file), is refused for an attach to
 * pid. Files of this process's earlier attach are named as such: a new
 * attach starts a new recording (counts from zero, its own timeline and
 * attach record, which would replace the earlier ones), so the two are
 * kept apart rather than mixed. */
static void refuse_used_dir(const char *dir, long pid, const char *old)
{
	char rec[PATH_MAX + 64], when[64] = "";
	snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", dir, pid);
	char *text = ctl_read_file(rec, NULL), *at = text ? strstr(text, "\ndetached ") : NULL;
	if (text && !at)
		cli_error("process %ld is attached already, its files in '%s' (`heaptrail detach "
			  "%ld` first)", pid, dir, pid);
	else if (text) {
		time_t sec = (time_t)strtoll(at + 10, NULL, 10);
		struct tm tm;
		if (gmtime_r(&sec, &tm))
			strftime(when, sizeof when, " at %Y-%m-%d %H:%M:%S UTC", &tm);
		cli_error("'%s' holds the recording of process %ld's earlier attach (detached%s); "
			  "a new attach records afresh: give another directory with -o (without "
			  "-o, heaptrail makes a fresh one)", dir, pid, when);
	} else
		cli_error("'%s' holds another run's files (%s): give a fresh directory with -o", dir,
			  old);
	free(text);
}

struct attach_args {
	const char *outdir, *html;
	char opts[1024], fns[4096];
	bool has_sample, has_every, has_timeline;
	bool exact;              /* --sample 1 */
	bool guard, guard_continue, slots_only;
	uint64_t every_ms;       /* --every, 0 when not given */
	uint64_t for_ms;
	long pid;
	struct ctl_live_opts lo;
};

static int attach_file_line(int argc, char **argv, void *ctx);

/* The argument at argv[*i] (moving *i past a value it takes): 1 when
 * taken, 0 after --help (printed), -1 after saying why it is refused.
 * in_file: from an options file (no PID there). */
static int attach_arg(int argc, char **argv, int *i, struct attach_args *a, bool in_file)
{
	const char *arg = argv[*i], *v;
	char val[64];
	int r = cli_live_opt(argc, argv, i, &a->lo);
	if (!r)
		r = cli_fn_opt(argc, argv, i, "attach", a->fns, sizeof a->fns);
	if (r)
		return r;
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		fputs(attach_usage, stdout);
		return 0;
	} else if ((v = cli_opt_value(argc, argv, i, "--options-file")) && *v && !in_file) {
		return cli_each_options_line(v, "attach", attach_file_line, a) ? -1 : 1;
	} else if ((v = cli_opt_value(argc, argv, i, "-o"))) {
		a->outdir = v;
	} else if ((v = cli_opt_value(argc, argv, i, "--html"))) {
		a->html = v;
	} else if (!strcmp(arg, "--peak")) {
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts), ",peak=1");
	} else if (!strcmp(arg, "--slots-only")) {
		a->slots_only = true;
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts), ",entries=0");
	} else if ((v = cli_opt_value(argc, argv, i, "--for"))) {
		if (!fmt_opt_duration(v, strlen(v), &a->for_ms) || !a->for_ms) {
			cli_error("attach: bad value for --for: '%s' (want a duration, e.g. 30s)",
				  cli_shown(v));
			return -1;
		}
	} else if ((v = cli_opt_value(argc, argv, i, "--sample")) ||
		   (v = cli_opt_value(argc, argv, i, "--interval")) ||
		   (v = cli_opt_value(argc, argv, i, "--every")) ||
		   (v = cli_opt_value(argc, argv, i, "--timeline")) ||
		   (v = cli_opt_value(argc, argv, i, "--guard"))) {
		char key[16];
		snprintf(key, sizeof key, "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
		const char *why = *v ? ctl_check_profile_value(key, v, val, sizeof val)
				     : "a value is needed";
		if (why) {
			cli_error("attach: bad value for --%s: '%s' (%s)", key, cli_shown(v), why);
			return -1;
		}
		a->has_sample |= !strcmp(key, "sample");
		a->has_every |= !strcmp(key, "every");
		if (!strcmp(key, "sample"))
			a->exact = !strcmp(v, "1");
		if (!strcmp(key, "every") && !fmt_opt_duration(v, strlen(v), &a->every_ms))
			a->every_ms = 0;
		a->has_timeline |= !strcmp(key, "timeline");
		a->guard |= !strcmp(key, "guard");
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts), ",%s=%s", key,
			 val);
	} else if (!in_file && a->pid < 0 && (a->pid = parse_pid(arg)) > 0) {
		;
	} else if (!strcmp(arg, "--guard-continue")) {
		a->guard_continue = true;
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts),
			 ",guard_continue=1");
	} else {
		cli_error(in_file ? "attach: '%s' is not an option of heaptrail attach"
				  : "attach: unexpected argument '%s'", cli_shown(arg));
		if (!in_file)
			fputs(attach_usage, stderr);
		return -1;
	}
	if (v && !*v) {
		cli_error("attach: option '%s' needs a value", cli_shown(arg));
		return -1;
	}
	return 1;
}

/* One line of an options file, as cli_each_options_line gives it. */
static int attach_file_line(int argc, char **argv, void *ctx)
{
	int i = 1;
	int r = attach_arg(argc, argv, &i, ctx, true);
	if (r > 0 && i + 1 < argc) {
		cli_error("attach: '%s %s': one option per line", cli_shown(argv[1]),
			  cli_shown(argv[2]));
		return -1;
	}
	return r > 0 ? 0 : -1;
}

int cmd_attach(int argc, char **argv)
{
	struct attach_args args = { .pid = -1 }, *a = &args;
	for (int i = 1; i < argc; i++) {
		int r = attach_arg(argc, argv, &i, a, false);
		if (r <= 0)
			return r < 0 ? 2 : 0;
	}
	const char *outdir = a->outdir;
	long pid = a->pid;
	uint64_t for_ms = a->for_ms;
	struct ctl_live_opts lo = a->lo;
	char *opts = a->opts, *fns = a->fns;
	bool has_sample = a->has_sample, has_every = a->has_every, has_timeline = a->has_timeline;
	if (pid <= 0) {
		fputs(attach_usage, stderr);
		return 2;
	}
	if (a->guard_continue && !a->guard) {
		cli_error("attach: --guard-continue goes with --guard SIZE");
		return 2;
	}
	if (a->guard && a->slots_only) {
		cli_error("attach: --guard needs the allocator's entry points hooked (a guarded "
			  "block must never reach the allocator): not with --slots-only");
		return 2;
	}
	int hr;
	if (a->html && (hr = cli_output_ok(a->html))) {
		cli_error("cannot write '%s': %s", a->html, strerror(-hr));
		return 2;
	}
	uint64_t id = 0;
	if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
		id = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
	char all[1200 + sizeof a->fns];
	snprintf(all, sizeof all, "%s%s%s,follow_children=0,run=%016llx%s%s",
		 has_sample ? "" : "sample=auto", has_every ? "" : ",every=10s",
		 has_timeline ? "" : ",timeline=100", (unsigned long long)id, opts, fns);
	if (all[0] == ',')
		memmove(all, all + 1, strlen(all));
	/* the directory, absolute: the target's working directory is not ours */
	char dir[PATH_MAX], abs[PATH_MAX], old[256];
	struct stat dst;
	bool made = true;
	int e;
	if (outdir) {
		snprintf(dir, sizeof dir, "%s", outdir);
		made = stat(dir, &dst) != 0;
		e = ctl_make_dir(dir, false);
	} else {
		/* a fresh one, made now: heaptrail-attach-PID, or -2, -3...
		 * when an earlier attach to the process (or anyone) has it */
		snprintf(dir, sizeof dir, "heaptrail-attach-%ld", pid);
		e = ctl_make_dir(dir, true);
		for (int k = 2; e == -EEXIST && k <= 100; k++) {
			snprintf(dir, sizeof dir, "heaptrail-attach-%ld-%d", pid, k);
			e = ctl_make_dir(dir, true);
		}
	}
	if (e) {
		cli_error("cannot make the output directory '%s': %s", dir, strerror(-e));
		return 1;
	}
	if (ctl_other_run_file(dir, old, sizeof old)) {
		refuse_used_dir(dir, pid, old);
		return 1;
	}
	if (!realpath(dir, abs)) {
		cli_error("cannot resolve '%s': %s", dir, strerror(errno));
		return 1;
	}
	/* a target of another user (we are root) must be able to write there */
	char sp[64];
	struct stat pst;
	snprintf(sp, sizeof sp, "/proc/%ld", pid);
	if (!stat(sp, &pst) && pst.st_uid != geteuid() && geteuid() == 0 &&
	    chown(abs, pst.st_uid, pst.st_gid))
		cli_error("cannot give '%s' to the target's user: %s", abs, strerror(errno));
	/* bound first: a bad address must not leave the process attached */
	struct ctl_live *live = NULL;
	lo.page = cli_html_build;
	if ((lo.addr || lo.push) && !(live = ctl_live_bind(&lo)))
		return 2;
	double ms = 0;
	struct timespec t0, since;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_REALTIME, &since);
	if (ctl_attach(pid, all, abs, &ms)) {
		if (made)
			rmdir(abs);  /* made for this attach, and still empty */
		ctl_live_stop(live);
		return 1;
	}
	fprintf(stderr, "heaptrail: attached to process %ld in %.1f ms (one thread stopped "
		"%.1f ms); files in %s\n", pid, ctl_ms_since(&t0), ms, abs);
	print_notes(abs, pid, "attached", &since);
	if (live) {
		struct ctl_agent ag = { .pid = pid };
		snprintf(ag.dir, sizeof ag.dir, "%s", abs);
		size_t clen;
		char *cmd = ctl_read_proc(pid, "cmdline", &clen);
		int sr = ctl_live_start(live, &ag, cmd);
		free(cmd);
		if (sr) {
			ctl_live_stop(live);
			live = NULL;
		}
	}
	if (!for_ms && !live && !a->html) {
		/* growth needs 3 dumps, PROF_GROWTH_MIN_DUMPS sampled; the
		 * first comes one period after the attach */
		int dumps = a->exact ? 3 : PROF_GROWTH_MIN_DUMPS;
		uint64_t every = has_every ? a->every_ms : 10000;
		fprintf(stderr, "heaptrail: `heaptrail detach %ld` stops; `heaptrail growth %s` "
			"ranks what grows", pid, abs);
		if (every)
			fprintf(stderr, " from %d dumps on (--every %gs: about %g s from now)",
				dumps, (double)every / 1000, (double)every * dumps / 1000);
		fputc('\n', stderr);
		return 0;
	}
	if (!for_ms) {
		/* serving (with --html, waiting) until the process ends or we are
		 * told to stop (it stays attached: `heaptrail detach PID`), or,
		 * with --html, until `heaptrail detach PID` ends the attach */
		sigset_t set, oldmask;
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, &oldmask);
		struct timespec tick = { 0, 200 * 1000 * 1000 };
		bool ended = false;
		while (!(ended = kill((pid_t)pid, 0) || (a->html && detached(abs, pid))) &&
		       sigtimedwait(&set, NULL, &tick) < 0)
			;
		ctl_live_stop(live);
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		if (!ended)
			fprintf(stderr, "heaptrail: stopped %s; process %ld stays attached "
				"(`heaptrail detach %ld`)\n", live ? "serving" : "waiting", pid, pid);
		return a->html && cli_html_write(abs, a->html, NULL, 0.001) ? 2 : 0;
	}
	struct timespec d = { (time_t)(for_ms / 1000), (long)(for_ms % 1000) * 1000000 };
	while (nanosleep(&d, &d) && errno == EINTR)
		;
	ctl_live_stop(live);
	if (detach_now(pid, false))
		return 1;
	fprintf(stderr, "heaptrail: next: heaptrail growth %s\n", abs);
	return a->html && cli_html_write(abs, a->html, NULL, 0.001) ? 2 : 0;
}

/* ---------- detach, dump ---------- */

int cmd_detach(int argc, char **argv)
{
	long pid = argc == 2 ? parse_pid(argv[1]) : -1;
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("usage: heaptrail detach PID");
		return 0;
	}
	if (pid <= 0) {
		fputs("usage: heaptrail detach PID\n", stderr);
		return 2;
	}
	return detach_now(pid, false);
}

int cmd_dump(int argc, char **argv)
{
	long pid = argc == 2 ? parse_pid(argv[1]) : -1;
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("usage: heaptrail dump PID   (a heap dump now, preloaded or attached)");
		return 0;
	}
	if (pid <= 0) {
		fputs("usage: heaptrail dump PID\n", stderr);
		return 2;
	}
	int r;
	double ms;
	char wrote[FMT_REQUEST_PATH_MAX], path[FMT_REQUEST_PATH_MAX + 64];
	if (ctl_call_agent(pid, "heaptrail_dump_request", NULL, NULL, 0, &r, &ms, wrote))
		return 1;
	if (r == -ENOTCONN) {
		cli_error("process %ld was detached from heaptrail: 'heaptrail attach %ld' to "
			  "record again", pid, pid);
		return 1;
	}
	if (r) {
		cli_error("process %ld could not write a heap dump: %s", pid, strerror(-r));
		return 1;
	}
	if (wrote[0]) {
		struct ctl_agent ag = { .pid = pid };
		ctl_agent_path(&ag, wrote, path, sizeof path);
		fprintf(stderr, "heaptrail: heap dump written to %s by process %ld (thread stopped "
			"%.1f ms)\n", path, pid, ms);
	} else {
		fprintf(stderr, "heaptrail: heap dump written by process %ld (thread stopped %.1f "
			"ms)\n", pid, ms);
	}
	return 0;
}
