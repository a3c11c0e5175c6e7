/*
 * run.c — `heaptrail run [options] -- PROG ARGS...`
 *
 * Starts PROG with the agent preloaded, leaves its stdin, stdout and
 * stderr alone, waits for it and for every process it leaves behind
 * (heaptrail becomes their subreaper, so a forked child that outlives its
 * parent still gets reported), then prints the report of every process
 * that wrote one, on stderr. heaptrail exits with PROG's status, or dies of
 * PROG's signal, unless --error-exitcode says otherwise.
 */
#include <elf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "analyze/report.h"
#include "cli/cli.h"
#include "format/fnspec.h"
#include "format/options.h"
#include "format/vocab.h"
#include "render/render.h"

static const char usage[] =
	"usage: heaptrail run [options] [--] PROG [ARGS...]\n"
	"  -o DIR                 where the agent writes its files (created 0700 if\n"
	"                         missing; refused when it holds another run's\n"
	"                         files; default a fresh ./heaptrail-PROG-PID)\n"
	"  --json FILE            also write the JSON report to FILE\n"
	"  --html FILE            also write the HTML page of the run to FILE (heaptrail\n"
	"                         html: leaks, growth, timeline, flame graphs)\n"
	"  --error-exitcode=N     exit with N when anything is reported, or when a\n"
	"                         process's report is missing or unreadable\n"
	"  --errors=continue|abort  on a heap error (mismatched or invalid free), go on\n"
	"                         (default) or abort the program at the first one\n"
	"  --guard SIZE           place about one allocation every SIZE bytes (e.g.\n"
	"                         1m) on a guarded page: a read or write past its end\n"
	"                         or after its free is reported with its stacks, then\n"
	"                         the program dies of the fault (off by default)\n"
	"  --guard-continue       ... or the page is opened and the program goes on\n"
	"  --depth N              frames kept per allocation stack (1-256, default 64)\n"
	"  --no-follow-children   do not track programs PROG execs, nor its forks\n"
	"  -q, --quiet            print only the summary, not every record\n"
	"profiling (heap dumps while PROG runs; see the README):\n"
	"  --sample SIZE|auto     sample allocations every SIZE bytes on average\n"
	"                         (e.g. 512k) instead of tracking every one; auto:\n"
	"                         from 8k, coarser as the heap grows (the default\n"
	"                         with --interval, --peak or --every); leak kinds\n"
	"                         need every one (the default otherwise, --sample 1)\n"
	"  --interval SIZE        write a heap dump every SIZE bytes allocated\n"
	"  --peak                 keep a heap dump of the peak\n"
	"  --every DURATION       write a heap dump every DURATION (10s, 500ms)\n"
	"  --signal N             write a heap dump when signal N arrives\n"
	"  --final                write a heap dump at exit\n"
	"  --mmap                 also record anonymous mmap/munmap/mremap, in dumps\n"
	"                         as the pool \"[mmap]\" (not in leak reports)\n"
	"  --timeline MS          heap timeline period in ms (default 100 when\n"
	"                         profiling; 0 off)\n"
	"allocator functions by name, for pools without annotations\n"
	"(docs/usage/pools-and-allocators.md):\n"
	"  --alloc-fn 'F(ctx=argN,size=argN)->ret'      F hands out a block of pool ctx\n"
	"  --free-fn 'F(ctx=argN,ptr=argN)'             F gives it back\n"
	"  --realloc-fn 'F(ctx=argN,ptr=argN,size=argN)->ret'\n"
	"  --reset-fn 'F(ctx=argN)', --destroy-fn 'F(ctx=argN)'\n"
	"  --create-fn 'F(parent=argN,name=argN)->ret', --move-fn 'F(ctx=argN)->ret',\n"
	"  --trim-fn 'F(ctx=argN,ptr=argN,size=argN)'   (each may be given again)\n"
	"  --no-builtin-fns       do not hook the allocators PROG carries a copy of\n"
	"                         (mimalloc, prefixed jemalloc, tcmalloc, Rust's)\n"
	"  --options-file FILE    more options, one per line (\"--alloc-fn SPEC\"; the\n"
	"                         value is the rest of the line; # comments)\n"
	"live endpoint (pprof's /debug/pprof/heap, Prometheus' /metrics):\n"
	"  --http ADDR            serve it on 127.0.0.1:PORT or a unix socket path\n"
	"  --http-allow-remote    allow an ADDR beyond loopback (with a warning)\n"
	CTL_LIVE_PUSH_HELP
	CLI_REPORT_OPTS_HELP;

struct run_opts {
	const char *outdir, *json, *html;
	struct cli_report_opts report;
	int error_exitcode;     /* -1: off */
	int errors_abort;       /* --errors=abort */
	char guard[24];         /* --guard RATE ("" off) */
	int guard_continue;     /* --guard-continue */
	int depth;
	int follow;
	char profile[512];      /* agent options for the profiling flags */
	char fns[4096];         /* agent options for the allocator functions */
	int quiet;
	char **prog;            /* PROG ARGS..., NULL-terminated */
	struct ctl_live_opts live;
};

static void add_option(struct run_opts *o, const char *key, const char *value)
{
	size_t n = strlen(o->profile);
	snprintf(o->profile + n, sizeof o->profile - n, ",%s=%s", key, value);
}

static int parse_loop(int argc, char **argv, struct run_opts *o, bool nested);

/* One line of an options file, as cli_each_options_line gives it. */
static int run_file_line(int argc, char **argv, void *o)
{
	int end = parse_loop(argc, argv, o, true);
	if (end < 0)
		return -1;
	if (end < argc) {
		cli_error(end == 1 ? "run: '%s' is not an option of heaptrail run"
				   : "run: '%s %s': one option per line", cli_shown(argv[1]),
			  cli_shown(argv[end]));
		return -1;
	}
	return 0;
}

/* The options in argv[1..argc) into o, up to the program (or "--"):
 * returns the index where they end, or -1 after saying why. nested: argv
 * comes from an options file. */
static int parse_loop(int argc, char **argv, struct run_opts *o, bool nested)
{
	const char *v;
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		/* run's --json takes a file; the report options' --json is a flag */
		int r = strncmp(a, "--json", 6) ? cli_report_opt(argc, argv, &i, &o->report) : 0;
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		if ((r = cli_live_opt(argc, argv, &i, &o->live)) < 0)
			return -1;
		if (r > 0)
			continue;
		if (!strcmp(a, "--") || a[0] != '-') {
			if (nested)
				break;   /* the caller says it is not an option */
			i += a[0] == '-';
			break;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			exit(0);
		} else if ((v = cli_opt_value(argc, argv, &i, "-o")) || (v = cli_opt_value(argc, argv, &i, "--output"))) {
			o->outdir = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--json"))) {
			o->json = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--html"))) {
			o->html = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--error-exitcode"))) {
			long n = ctl_parse_count(v, 255);
			if (n < 0) {
				cli_error("run: --error-exitcode takes a number from 0 to 255, not '%s'",
					  cli_shown(v));
				return -1;
			}
			o->error_exitcode = (int)n;
		} else if ((v = cli_opt_value(argc, argv, &i, "--errors"))) {
			if (strcmp(v, "abort") && strcmp(v, "continue")) {
				cli_error("run: --errors takes 'continue' or 'abort', not '%s'",
					  cli_shown(v));
				return -1;
			}
			o->errors_abort = !strcmp(v, "abort");
		} else if ((v = cli_opt_value(argc, argv, &i, "--guard"))) {
			const char *why = ctl_check_profile_value("guard", v, o->guard,
								  sizeof o->guard);
			if (why) {
				cli_error("run: bad value for --guard: '%s' (%s)", cli_shown(v), why);
				return -1;
			}
		} else if (!strcmp(a, "--guard-continue")) {
			o->guard_continue = 1;
		} else if ((v = cli_opt_value(argc, argv, &i, "--depth"))) {
			long n = ctl_parse_count(v, 256);
			if (n < 1) {
				cli_error("run: --depth takes a number from 1 to 256, not '%s'", cli_shown(v));
				return -1;
			}
			o->depth = (int)n;
		} else if (!strcmp(a, "--peak") || !strcmp(a, "--final") || !strcmp(a, "--mmap")) {
			add_option(o, a + 2, "1");
		} else if ((v = cli_opt_value(argc, argv, &i, "--sample")) ||
			   (v = cli_opt_value(argc, argv, &i, "--interval")) ||
			   (v = cli_opt_value(argc, argv, &i, "--every")) ||
			   (v = cli_opt_value(argc, argv, &i, "--signal")) ||
			   (v = cli_opt_value(argc, argv, &i, "--timeline"))) {
			const char *name = a + 2;
			size_t len = strcspn(name, "=");
			char key[16], num[24];
			snprintf(key, sizeof key, "%.*s", (int)len, name);
			if (!*v) {
				cli_error("run: option '--%s' needs a value", key);
				return -1;
			}
			const char *why = ctl_check_profile_value(key, v, num, sizeof num);
			if (why) {
				cli_error("run: bad value for --%s: '%s' (%s)", key, cli_shown(v), why);
				return -1;
			}
			add_option(o, key, num);
		} else if ((r = cli_fn_opt(argc, argv, &i, "run", o->fns, sizeof o->fns))) {
			if (r < 0)
				return -1;
		} else if (!strcmp(a, "--no-follow-children")) {
			o->follow = 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o->quiet = 1;
		} else if ((v = cli_opt_value(argc, argv, &i, "--options-file")) && *v) {
			if (nested) {
				cli_error("run: an options file cannot name another ('%s')", v);
				return -1;
			}
			if (cli_each_options_line(v, "run", run_file_line, o))
				return -1;
		} else if (!v) {
			cli_error("run: unknown option '%s'", cli_shown(a));
			fputs(usage, stderr);
			return -1;
		}
		if (v && !*v) {
			cli_error("run: option '%s' needs a value", a);
			return -1;
		}
	}
	return i;
}

static int parse_opts(int argc, char **argv, struct run_opts *o)
{
	*o = (struct run_opts){ .error_exitcode = -1, .depth = 64, .follow = 1 };
	cli_report_opts_init(&o->report);
	int i = parse_loop(argc, argv, o, false);
	if (i < 0)
		return -1;
	/* dumps while it runs sample with S following the heap, unless told
	 * otherwise; without them, exact mode (leak kinds need it) */
	if ((strstr(o->profile, ",interval=") || strstr(o->profile, ",peak=") ||
	     strstr(o->profile, ",every=")) && !strstr(o->profile, ",sample="))
		add_option(o, "sample", "auto");
	/* profiling gets a timeline unless told otherwise */
	if (o->profile[0] && !strstr(o->profile, ",timeline="))
		add_option(o, "timeline", "100");
	if (i >= argc) {
		cli_error("run: no program given");
		fputs(usage, stderr);
		return -1;
	}
	if (o->guard_continue && !o->guard[0]) {
		cli_error("run: --guard-continue goes with --guard SIZE");
		return -1;
	}
	o->prog = argv + i;
	return 0;
}

/* In the child: environment, then exec. On failure, writes errno to fd. */
static void child_exec(const struct run_opts *o, const char *agent, const char *outdir,
		       const char *path, const char *run_id, int fd)
{
	char buf[PATH_MAX * 2 + sizeof o->fns], opts[1024 + sizeof o->fns];
	const char *old = getenv("LD_PRELOAD");
	snprintf(buf, sizeof buf, "%s%s%s", agent, old && *old ? ":" : "", old ? old : "");
	setenv("LD_PRELOAD", buf, 1);
	setenv("HEAPTRAIL_OUTPUT", outdir, 1);
	/* exact mode unless --sample says otherwise (it comes later and wins) */
	snprintf(opts, sizeof opts, "sample=1,depth=%d,follow_children=%d%s%s", o->depth, o->follow,
		 o->profile, o->fns);
	/* a process whose report is lost exits with the error code itself */
	if (o->error_exitcode > 0)
		snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ",error_exitcode=%d",
			 o->error_exitcode);
	if (o->errors_abort)
		snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ",errors_abort=1");
	if (o->guard[0])
		snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ",guard=%s%s", o->guard,
			 o->guard_continue ? ",guard_continue=1" : "");
	/* every file of this run names it (a `run ID` line, `run=ID`), with
	 * the user's id when HEAPTRAIL_OPTIONS gives one (run_id NULL) */
	const char *oldopts = getenv("HEAPTRAIL_OPTIONS");
	if (run_id)
		snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ",run=%s", run_id);
	snprintf(buf, sizeof buf, "%s%s%s", oldopts && *oldopts ? oldopts : "",
		 oldopts && *oldopts ? "," : "", opts);
	setenv("HEAPTRAIL_OPTIONS", buf, 1);
	execv(path, o->prog);
	int e = errno;
	ssize_t w = write(fd, &e, sizeof e);
	(void)w;
	_exit(127);
}

static int write_json(const char *path, const struct prof_run *run, bool gen_suppressions)
{
	char *data = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&data, &len);
	if (!mem)
		return -ENOMEM;
	render_json(mem, run, &(struct render_json_opts){ .suppressions = gen_suppressions });
	if (fclose(mem)) {
		free(data);
		return -ENOMEM;
	}
	int ret = cli_write_file(path, data, len);
	free(data);
	return ret;
}

/* After a run that wrote heap dumps, the next command to try: growth for
 * a process with a series of dumps (the one with the most), top for a
 * single dump. Dump names are PREFIX.PID.SEQ.KIND.heap. */
static void suggest_analysis(const char *outdir)
{
	DIR *d = opendir(outdir);
	long best_pid = -1, pid;
	size_t best = 0, total = 0;
	struct { long pid; size_t n; } seen[64];
	size_t nseen = 0;
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		const char *dot = strchr(e->d_name, '.');
		if (len <= FMT_LEN(FMT_HEAP_SUFFIX) ||
		    strcmp(e->d_name + len - FMT_LEN(FMT_HEAP_SUFFIX), FMT_HEAP_SUFFIX) || !dot)
			continue;
		total++;
		pid = strtol(dot + 1, NULL, 10);
		size_t i;
		for (i = 0; i < nseen && seen[i].pid != pid; i++)
			;
		if (i == nseen) {
			if (nseen == 64)
				continue;
			seen[nseen++] = (typeof(seen[0])){ pid, 0 };
		}
		if (++seen[i].n > best) {
			best = seen[i].n;
			best_pid = pid;
		}
	}
	closedir(d);
	if (best >= 3 && nseen == 1)
		fprintf(stderr, "heaptrail: %zu heap dumps: 'heaptrail growth %s' names what grew, "
			"'heaptrail timeline %s' draws the heap over time\n", best, outdir, outdir);
	else if (best >= 3)
		fprintf(stderr, "heaptrail: %zu heap dumps of process %ld: 'heaptrail growth %s/"
			"heaptrail.%ld.*.heap' names what grew\n", best, best_pid, outdir, best_pid);
	else if (total)
		fprintf(stderr, "heaptrail: %zu heap dump%s in %s: 'heaptrail top DUMP' shows what "
			"one holds\n", total, total == 1 ? "" : "s", outdir);
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	char agent[PATH_MAX], path[PATH_MAX], outdir[PATH_MAX], cwd[PATH_MAX];
	int pipefd[2], r;

	if (parse_opts(argc, argv, &o))
		return 2;
	if (o.json && (r = cli_output_ok(o.json))) {
		cli_error("cannot write '%s': %s", o.json, strerror(-r));
		return 2;
	}
	if (o.html && (r = cli_output_ok(o.html))) {
		cli_error("cannot write '%s': %s", o.html, strerror(-r));
		return 2;
	}
	if (ctl_find_agent(agent, sizeof agent)) {
		cli_error("cannot find the agent library libheaptrail.so next to the heaptrail "
			  "executable (set HEAPTRAIL_AGENT to its path)");
		return 2;
	}
	r = ctl_resolve_prog(o.prog[0], path, sizeof path);
	if (r) {
		cli_error("cannot run '%s': %s", o.prog[0],
			  r == -ENOENT && !strchr(o.prog[0], '/') ? "command not found" : strerror(-r));
		return 127;
	}
	if (ctl_check_prog(o.prog[0], path))
		return 126;
	if (!getcwd(cwd, sizeof cwd))
		snprintf(cwd, sizeof cwd, ".");
	if (o.outdir) {
		char old[256];
		if (ctl_other_run_file(o.outdir, old, sizeof old)) {
			cli_error("output directory '%s' holds files of another run (%s): "
				  "remove them or choose another directory", o.outdir, old);
			return 2;
		}
	}
	struct ctl_live *live = NULL;
	o.live.page = cli_html_build;
	if ((o.live.addr || o.live.push) && !(live = ctl_live_bind(&o.live)))
		return 2;
	if (pipe2(pipefd, O_CLOEXEC)) {
		cli_error("cannot create a pipe: %s", strerror(errno));
		return 2;
	}
	/* Without -o, the directory is named after the child's pid, which
	 * only the child knows before it execs: it creates the directory,
	 * and the parent rebuilds the same name from fork's return. */
	const char *base = strrchr(o.prog[0], '/');
	base = base ? base + 1 : o.prog[0];
	char run_id[FMT_RUN_ID_MAX + 1];
	bool run_added;
	ctl_choose_run_id(run_id, &run_added);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* blocked across fork: the child must not run the forwarder, and the
	 * parent must know the pid before it can forward anything */
	sigset_t oldmask;
	ctl_forward_block(SIG_BLOCK, &oldmask);
	ctl_forward_install();
	fflush(NULL);
	pid_t child = fork();
	if (child < 0) {
		cli_error("cannot fork: %s", strerror(errno));
		return 2;
	}
	if (child == 0) {
		ctl_forward_restore();
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		close(pipefd[0]);
		if (o.outdir)
			snprintf(outdir, sizeof outdir, "%s%s%s", o.outdir[0] == '/' ? "" : cwd,
				 o.outdir[0] == '/' ? "" : "/", o.outdir);
		else
			snprintf(outdir, sizeof outdir, "%s/heaptrail-%s-%ld", cwd, base, (long)getpid());
		int e = ctl_make_dir(outdir, !o.outdir);
		if (e) {
			e = -e | (1 << 16);  /* tag: directory problem */
			ssize_t w = write(pipefd[1], &e, sizeof e);
			(void)w;
			_exit(127);
		}
		child_exec(&o, agent, outdir, path, run_added ? run_id : NULL, pipefd[1]);
	}
	ctl_forward_to(child);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	close(pipefd[1]);
	if (o.outdir)
		snprintf(outdir, sizeof outdir, "%s%s%s", o.outdir[0] == '/' ? "" : cwd,
			 o.outdir[0] == '/' ? "" : "/", o.outdir);
	else
		snprintf(outdir, sizeof outdir, "%s/heaptrail-%s-%ld", cwd, base, (long)child);
	int e = 0;
	ssize_t got;
	do
		got = read(pipefd[0], &e, sizeof e);
	while (got < 0 && errno == EINTR);
	close(pipefd[0]);
	if (live && got == 0) {
		/* exec'd: the endpoint asks the agent as `heaptrail leaks` does */
		struct ctl_agent ag = { .pid = child };
		snprintf(ag.dir, sizeof ag.dir, "%s", outdir);
		if (ctl_live_start(live, &ag, o.prog[0])) {
			ctl_live_stop(live);
			live = NULL;
		}
	}
	int status = ctl_wait_all(child);
	ctl_live_stop(live);
	if (got == (ssize_t)sizeof e) {
		if (e & (1 << 16) && !o.outdir && (e & 0xffff) == EEXIST)
			cli_error("output directory '%s' already exists and this run did not make "
				  "it: refusing to use it (give -o DIR)", outdir);
		else if (e & (1 << 16))
			cli_error("cannot use output directory '%s': %s", o.outdir ? o.outdir : outdir,
				  strerror(e & 0xffff));
		else
			cli_error("cannot run '%s': %s", o.prog[0], strerror(e));
		return e & (1 << 16) ? 2 : 126;
	}

	const char *err, *err_file;
	struct prof_run run;
	/* Symbols only for the records that are printed, or all of them when
	 * the JSON report is written or suppressions must match; a summary
	 * alone needs none. */
	unsigned sym_kinds = o.json ? PROF_KINDS_ALL
			     : o.report.supps.n || !o.quiet ? cli_report_sym_kinds(&o.report) : 0;
	/* With --error-exitcode, a run with a process whose report is missing
	 * or unreadable must not pass: nobody checked what it leaked. */
	bool missing = false;
	/* this run's reports only: another run may share the directory */
	if (prof_run_load_of(&run, outdir, o.report.binary_path, sym_kinds, run_id, &err,
			     &err_file)) {
		if (WIFSIGNALED(status))
			cli_error("'%s' was killed by signal %d (%s) before it could write a report",
				  o.prog[0], WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			cli_error("no report from '%s' (process %ld) in '%s': %s", o.prog[0],
				  (long)child, err_file, err);
		cli_report_opts_release(&o.report);
		if (o.error_exitcode >= 0)
			return o.error_exitcode;
		ctl_die_like(status);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	for (size_t i = 0; i < run.nbad; i++) {
		cli_error("cannot read report '%s': %s", run.bad[i].file, run.bad[i].err);
		missing = true;
	}
	bool child_reported = false;
	/* The wait status we saw beats what the agent could know. */
	for (size_t i = 0; i < run.nprocs; i++) {
		struct fmt_leaks *l = &run.procs[i].raw;
		if (l->pid == child) {
			child_reported = true;
			if (WIFSIGNALED(status)) {
				l->exit_how = FMT_EXIT_SIGNAL;
				l->exit_code = WTERMSIG(status);
			} else if (WIFEXITED(status)) {
				l->exit_how = FMT_EXIT_STATUS;
				l->exit_code = WEXITSTATUS(status);
			}
		}
	}
	if (!child_reported) {
		missing = true;
		if (WIFSIGNALED(status))
			cli_error("no report from '%s' (process %ld): killed by signal %d (%s) "
				  "before it could write one", o.prog[0], (long)child,
				  WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			cli_error("no report from '%s' (process %ld) in %s: it could not write "
				  "one, or exec'd a program heaptrail does not track", o.prog[0],
				  (long)child, outdir);
	}
	cli_report_apply(&o.report, &run);
	size_t reported = prof_run_errors(&run, o.report.errors);
	fflush(stdout);
	render_text(stderr, &run, &(struct render_text_opts){
		    .summary_only = o.quiet, .kinds = o.report.shown,
		    .gen_suppressions = o.report.gen_suppressions, .supps = &o.report.supps });
	if (WIFSIGNALED(status))
		cli_error("'%s' was killed by signal %d (%s)", o.prog[0], WTERMSIG(status),
			  strsignal(WTERMSIG(status)));
	fprintf(stderr, "heaptrail: %zu report%s in %s\n", run.nprocs, run.nprocs == 1 ? "" : "s",
		outdir);
	suggest_analysis(outdir);
	int ret = 0;
	if (o.json && (r = write_json(o.json, &run, o.report.gen_suppressions))) {
		cli_error("cannot write '%s': %s", o.json, strerror(-r));
		ret = 2;
	}
	/* the page reads the directory again: dumps and timelines too */
	if (o.html && cli_html_write(outdir, o.html, o.report.binary_path, 0.001))
		ret = 2;
	prof_run_release(&run);
	cli_report_opts_release(&o.report);
	if (ret)
		return ret;
	if (o.error_exitcode >= 0 && (reported || missing))
		return o.error_exitcode;
	ctl_die_like(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
