/* timeline.c — `heaptrail timeline DIR`: a run's live heap over time from
 * its heaptrail.PID.timeline, the peak marked, then the top allocation
 * sites of the dump of that process taken nearest the peak in time (of
 * two as near, the one holding more). Nearest in time, not holding the
 * most: a sampled dump's total is an estimate, and a noisy one can make
 * a dump far from the peak look the largest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/aggregate.h"
#include "analyze/load.h"
#include "analyze/series.h"
#include "analyze/timeline.h"
#include "cli/cli.h"
#include "format/vocab.h"
#include "render/render.h"

static const char timeline_usage[] =
	"usage: heaptrail timeline [options] DIR\n"
	"  The live heap of a run over time, from DIR's heaptrail.PID.timeline\n"
	"  (or a timeline file given itself), its peak marked; then the top\n"
	"  allocation sites at the peak, from the dump taken nearest the peak in\n"
	"  time (of two as near, the one holding more) among that process's dumps\n"
	"  beside the timeline (heaptrail.PID.*.heap; one that cannot be read is\n"
	"  skipped with a note).\n"
	"  --svg FILE             also write the chart as an SVG (live heap and RSS)\n"
	"  --pid PID              the process to show when DIR holds several\n"
	"                         timelines (default: the one with the highest peak)\n"
	"  -n N                   allocation sites to list at the peak (default 10)\n"
	CLI_PROF_VALUE_HELP
	"  --lines, --focus RE, --ignore RE, --hide RE, --binary-path DIRS, --bytes\n"
	"                         as for top\n";

struct timeline_args {
	const char *svg;
	long pid;               /* -1: not given */
};

static int timeline_extra(int argc, char **argv, int *i, void *ctx)
{
	struct timeline_args *a = ctx;
	const char *v;
	if ((v = cli_opt_value(argc, argv, i, "--svg"))) {
		if (!*v) {
			cli_error("timeline: '--svg' needs a value");
			return -1;
		}
		a->svg = v;
	} else if ((v = cli_opt_value(argc, argv, i, "--pid"))) {
		if ((a->pid = ctl_parse_count(v, 1L << 31)) < 1) {
			cli_error("timeline: --pid wants a process id, not '%s'", v);
			return -1;
		}
	} else {
		return 0;
	}
	return 1;
}

/* A timeline chosen among a directory's: its path, pid and contents. */
struct chosen {
	char *path;
	long pid;
	struct prof_timeline t;
};

/* Loads DIR's timeline of pid (or the one with the highest peak, when
 * pid is -1) into c. Prints the error and returns -1 on failure. */
static int choose_timeline(const char *dir, long pid, struct chosen *c)
{
	const char *err;
	int ret = -1;
	char **names = NULL;
	size_t n = 0;
	memset(c, 0, sizeof *c);
	c->pid = -1;
	if (pid > 0) {
		if (asprintf(&c->path, "%s/" FMT_FILE_PREFIX ".%ld" FMT_TIMELINE_SUFFIX, dir, pid) < 0) {
			c->path = NULL;
			cli_error("out of memory");
			return -1;
		}
		if (prof_timeline_load(&c->t, c->path, &err)) {
			cli_error("cannot read '%s': %s", c->path, err);
			goto out;
		}
		c->pid = pid;
		ret = 0;
		goto out;
	}
	int rc = prof_dir_names(dir, prof_is_timeline, -1, &names, &n);
	if (rc) {
		cli_error("cannot open '%s': %s", dir, strerror(-rc));
		goto out;
	}
	if (!n) {
		cli_error("no timeline in '%s': no file heaptrail.PID.timeline (heaptrail run "
			  "writes one when it profiles)", dir);
		goto out;
	}
	int64_t best = -1;
	for (size_t i = 0; i < n; i++) {
		struct prof_timeline t;
		char *path;
		if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
			cli_error("out of memory");
			goto out;
		}
		if (prof_timeline_load(&t, path, &err)) {
			cli_error("cannot read '%s': %s", path, err);
			free(path);
			goto out;
		}
		long ip = prof_timeline_peak(&t);
		int64_t peak = ip < 0 ? 0 : t.ticks[ip].live_bytes;
		if (peak > best) {
			best = peak;
			prof_timeline_release(&c->t);
			free(c->path);
			c->t = t;
			c->path = path;
			c->pid = prof_timeline_pid(names[i]);
		} else {
			prof_timeline_release(&t);
			free(path);
		}
	}
	if (n > 1)
		fprintf(stderr, "heaptrail: note: %zu timelines in '%s' (forked children?); showing "
			"pid %ld's, the highest peak (--pid to choose)\n", n, dir, c->pid);
	ret = 0;
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (ret) {
		prof_timeline_release(&c->t);
		free(c->path);
		c->path = NULL;
	}
	return ret;
}

/* Whether dump a is to be shown at a peak at peak_ms rather than b: taken
 * nearer in time (a dump or peak of unknown time is the farthest), or as
 * near and holding more. */
static bool nearer_peak(const struct prof_profile *a, const struct prof_profile *b,
			int64_t peak_ms)
{
	int64_t da = a->ms >= 0 && peak_ms >= 0 ? llabs(a->ms - peak_ms) : INT64_MAX;
	int64_t db = b->ms >= 0 && peak_ms >= 0 ? llabs(b->ms - peak_ms) : INT64_MAX;
	if (da != db)
		return da < db;
	return a->total[PROF_INUSE_SPACE] > b->total[PROF_INUSE_SPACE];
}

/* The dump of process pid (any, when -1) in dir to show at a peak at
 * peak_ms (-1: unknown), by nearer_peak, moved into *best; *ndumps counts
 * the dumps read. A dump that cannot be read is skipped with a note: the
 * timeline stands without it. Returns 1 when found, 0 when dir has none
 * that could be read, -1 on an error (printed). */
static int peak_dump(const char *dir, long pid, int64_t peak_ms,
		     const struct prof_load_opts *lo, struct prof_profile *best, size_t *ndumps)
{
	char **names;
	size_t n;
	int ret = -1, found = 0;
	struct prof_load_opts shared = *lo;
	struct prof_sym_cache *cache = NULL;
	*ndumps = 0;
	int rc = prof_dir_names(dir, prof_is_dump_of, pid, &names, &n);
	if (rc) {
		cli_error("cannot open '%s': %s", dir, strerror(-rc));
		goto out;
	}
	if (!shared.sym_cache)
		shared.sym_cache = cache = prof_sym_cache_new(); /* NULL: no sharing */
	for (size_t i = 0; i < n; i++) {
		struct prof_profile p;
		const char *err;
		char *path;
		if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
			cli_error("out of memory");
			goto out;
		}
		rc = prof_profile_load(&p, path, &shared, &err);
		if (rc == -ENOMEM) {
			cli_error("cannot read '%s': %s", path, err);
			free(path);
			goto out;
		}
		if (rc)
			fprintf(stderr, "heaptrail: note: cannot read '%s': %s; skipped it\n",
				path, err);
		free(path);
		if (rc)
			continue;
		++*ndumps;
		if (!found || nearer_peak(&p, best, peak_ms)) {
			if (found)
				prof_profile_release(best);
			*best = p;
			found = 1;
		} else {
			prof_profile_release(&p);
		}
	}
	ret = found;
out:
	if (ret < 0 && found)
		prof_profile_release(best);
	prof_sym_cache_free(cache);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

static int print_top(const struct cli_prof_opts *o, const struct prof_profile *p, size_t ndumps)
{
	struct prof_table t;
	int v = o->value >= 0 ? o->value : PROF_INUSE_SPACE;
	if (prof_table_build(&t, p, o->lines, v, PROF_SORT_FLAT)) {
		cli_error("out of memory");
		return -1;
	}
	struct render_table_opts ro = {
		.value = v, .lines = o->lines, .exact = o->bytes,
		.max = o->nodecount ? o->nodecount : 10, .focus = o->focus, .ignore = o->ignore,
	};
	render_peak_top(stdout, p, &t, ndumps, &ro);
	prof_table_release(&t);
	return 0;
}

int cmd_timeline(int argc, char **argv)
{
	struct timeline_args a = { .pid = -1 };
	struct cli_prof_opts o;
	struct chosen c = { 0 };
	struct prof_profile dump;
	size_t ndumps = 0;
	char *dir = NULL, *svg = NULL;
	int have_dump = 0;
	int ret = cli_prof_opts_parse(&o, argc, argv, timeline_usage, timeline_extra, &a);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out;
	}
	if (o.nargs != 1 || o.base || o.output) {
		if (o.nargs != 1)
			cli_error("timeline: want one directory (a run's -o), got %d", o.nargs);
		else
			cli_error("timeline: %s does not apply here (--svg FILE writes the chart)",
				  o.base ? "--base" : "-o");
		fputs(timeline_usage, stderr);
		ret = 2;
		goto out;
	}
	ret = 1;
	/* DIR, or a timeline file itself with its dumps beside it */
	struct stat st;
	const char *arg = o.args[0];
	if (stat(arg, &st)) {
		cli_error("cannot open '%s': %s", arg, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!(dir = strdup(arg)))
			goto nomem;
		if (choose_timeline(dir, a.pid, &c))
			goto out;
	} else {
		const char *err, *slash = strrchr(arg, '/');
		dir = slash ? strndup(arg, (size_t)(slash - arg + (slash == arg))) : strdup(".");
		if (!dir || !(c.path = strdup(arg)))
			goto nomem;
		if (prof_timeline_load(&c.t, c.path, &err)) {
			cli_error("cannot read '%s': %s", c.path, err);
			goto out;
		}
		c.pid = a.pid > 0 ? a.pid : prof_timeline_pid(arg);
	}
	long ip = prof_timeline_peak(&c.t);
	int64_t peak_ms = ip < 0 ? -1 : c.t.ticks[ip].ms;
	if ((have_dump = peak_dump(dir, c.pid, peak_ms, &o.load, &dump, &ndumps)) < 0)
		goto out;
	if (have_dump && cli_prof_filter(&o, &dump))
		goto out;
	struct render_timeline_opts ro = { .name = c.path, .dump_ms = have_dump ? dump.ms : -1 };
	char since[96];
	if (c.pid > 0 && !prof_attach_label(c.path, c.pid, since, sizeof since))
		ro.since = since;  /* heaptrail attach: nothing from before */
	if (a.svg) {
		size_t n;
		FILE *f = open_memstream(&svg, &n);
		if (!f)
			goto nomem;
		render_timeline_svg(f, &c.t, &ro);
		if (fclose(f))
			goto nomem;
		int rc = cli_write_file(a.svg, svg, n);
		if (rc) {
			cli_error("cannot write '%s': %s", a.svg, strerror(-rc));
			goto out;
		}
	}
	render_timeline_text(stdout, &c.t, &ro);
	if (!have_dump && c.pid > 0)
		printf("\nno heap dumps (*.heap) of process %ld in '%s': no allocation sites to "
		       "show\n", c.pid, dir);
	else if (!have_dump)
		printf("\nno heap dumps (*.heap) in '%s': no allocation sites to show\n", dir);
	else if (print_top(&o, &dump, ndumps))
		goto out;
	if (have_dump)
		cli_prof_notes(&dump);
	ret = fflush(stdout) ? 1 : 0;
	goto out;
nomem:
	cli_error("out of memory");
out:
	if (have_dump > 0)
		prof_profile_release(&dump);
	prof_timeline_release(&c.t);
	free(c.path);
	free(svg);
	free(dir);
	cli_prof_opts_release(&o);
	return ret;
}
