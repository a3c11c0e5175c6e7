/* growth.c — `heaptrail growth DUMPS...|DIR`: the sites that keep growing
 * over a run's dumps, steadiest and fastest first (the fit is
 * analyze/growth.c, the table render/tables.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/growth.h"
#include "analyze/series.h"
#include "cli/cli.h"
#include "render/render.h"

static const char usage[] =
	"usage: heaptrail growth [options] DIR | DUMP DUMP DUMP...\n"
	"  Over a series of dumps of one run (at least three; a directory means\n"
	"  its *.heap files), which allocation sites keep growing: a line is\n"
	"  fitted to each site's in-use bytes over time; a site is growing when\n"
	"  the line rises steadily (r2, 1 = perfectly straight) and still rises\n"
	"  in the later half of the run, so a cache that fills and then stays\n"
	"  flat, or a site that allocates and frees, is not called growing.\n"
	"  With sampled dumps each slope has a 90% interval (±90%) and a site\n"
	"  is growing only when its rise clears the sampling noise; else it is\n"
	"  'too few samples', with what would tell (a longer run, a smaller --sample).\n"
	"  --inuse-space | --inuse-objects  which value (default: in-use space)\n"
	"  --lines                by source line instead of by function\n"
	"  -n N                   at most N sites in each part (default 10)\n"
	"  --focus RE, --ignore RE  only stacks with / without a function matching RE\n"
	"  --hide RE              remove frames matching RE from every stack (an\n"
	"                         allocator's wrappers: the site is their caller)\n"
	"  --pool NAME            only the blocks of the memory pool NAME\n"
	"  --keep-wrappers        keep allocation wrappers as sites: by default a\n"
	"                         function that only calls the allocator and has\n"
	"                         3 or more callers (xmalloc, zmalloc, g_malloc)\n"
	"                         is folded into its callers, which are the sites\n"
	"  --binary-path DIRS     directories searched first for the dumps' binaries\n"
	"  --bytes                exact byte counts instead of KiB/MiB\n";

static int growth_opt(int argc, char **argv, int *i, void *ctx)
{
	(void)argc;
	if (strcmp(argv[*i], "--keep-wrappers"))
		return 0;
	*(bool *)ctx = true;
	return 1;
}

int cmd_growth(int argc, char **argv)
{
	struct cli_prof_opts o;
	bool keep_wrappers = false;
	struct prof_profile *ps = NULL;
	size_t n = 0;
	int ret = cli_prof_opts_parse(&o, argc, argv, usage, growth_opt, &keep_wrappers);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out;
	}
	if (!o.nargs || o.base || o.output) {
		cli_error("growth: want a directory of dumps or at least three dumps%s",
			  o.base || o.output ? " (no --base or -o)" : "");
		fputs(usage, stderr);
		ret = 2;
		goto out;
	}
	ret = 1;
	char why[4800];
	if (prof_series_load(o.args, (size_t)o.nargs, &o.load, &ps, &n, why, sizeof why)) {
		cli_error("%s", why);
		goto out;
	}
	if (n < 3) {
		cli_error("growth: %zu dump%s, need at least three to see a trend", n,
			  n == 1 ? "" : "s");
		goto out_series;
	}
	for (size_t i = 0; i < n; i++)
		if (cli_prof_filter(&o, &ps[i]))
			goto out_series;
	long pid = ps[0].pid;
	if (o.nargs == 1 && n > 1) {
		/* a directory of several processes' dumps (a program that forks):
		 * the process with the most dumps, and a note about the others */
		size_t best = 0;
		int64_t best_peak = -1;
		for (size_t i = 0; i < n; i++) {
			size_t c = 0;
			int64_t peak = 0;
			for (size_t k = 0; k < n; k++)
				if (ps[k].pid == ps[i].pid) {
					c++;
					if (ps[k].total[PROF_INUSE_SPACE] > peak)
						peak = ps[k].total[PROF_INUSE_SPACE];
				}
			/* ties (a driver and the compilers it runs, dumped on the
			 * same timer): the one that held the most */
			if (c > best || (c == best && peak > best_peak)) {
				best = c;
				best_peak = peak;
				pid = ps[i].pid;
			}
		}
		if (best < n) {
			size_t kept = 0;
			for (size_t i = 0; i < n; i++) {
				if (ps[i].pid == pid)
					ps[kept++] = ps[i];
				else
					prof_profile_release(&ps[i]);
			}
			fprintf(stderr, "heaptrail: %zu of the %zu dumps in '%s' are of pid %ld, the "
				"rest of other processes: give their files to see those\n", kept, n,
				o.args[0], pid);
			n = kept;
			if (n < 3) {
				cli_error("growth: %zu dump%s of pid %ld, need at least three to see a "
					  "trend", n, n == 1 ? "" : "s", pid);
				goto out_series;
			}
		}
	}
	for (size_t i = 1; i < n; i++)
		if (ps[i].pid != pid) {
			cli_error("growth: the dumps come from different processes (pid %ld in '%s', "
				  "%ld in '%s'); give one run's dumps", pid, ps[0].path, ps[i].pid,
				  ps[i].path);
			goto out_series;
		}
	if (o.load.pool) {
		/* a pool made mid-run is absent from the early dumps (it held
		 * nothing then); absent from all of them, it is a wrong name */
		size_t absent = 0;
		for (size_t i = 0; i < n; i++)
			absent += ps[i].pool_absent;
		if (absent == n) {
			const char *const *w;
			size_t nw = prof_profile_warnings(&ps[n - 1], &w);
			/* the load's note ends "(its pools: ...)" of the last dump */
			const char *pools = nw ? strstr(w[nw - 1], "(its pools") : NULL;
			cli_error("growth: no pool named '%s' in any of the %zu dumps%s%s",
				  cli_shown(o.load.pool), n, pools ? " (the last one's pools" : "",
				  pools ? pools + strlen("(its pools") : "");
			ret = 2;
			goto out_series;
		}
		if (absent)
			fprintf(stderr, "heaptrail: note: the pool '%s' is in %zu of the %zu dumps; "
				"in the others it counts as 0 B\n", o.load.pool, n - absent, n);
	}
	int v = o.value >= 0 ? o.value : PROF_INUSE_SPACE;
	if (v == PROF_ALLOC_SPACE || v == PROF_ALLOC_OBJECTS) {
		cli_error("growth: allocated totals only ever grow; use --inuse-space or --inuse-objects");
		ret = 2;
		goto out_series;
	}
	struct prof_growth g;
	if (keep_wrappers ? prof_growth_compute(&g, ps, n, v, o.lines)
			  : prof_growth_fold_compute(&g, ps, n, v, o.lines)) {
		cli_error("out of memory");
		goto out_series;
	}
	/* a filtered heap is a part: its rise says nothing of what is unseen */
	if (o.load.pool || o.focus || o.ignore)
		g.rss_known = false;
	char since[96];
	struct render_table_opts ro = {
		.value = v, .lines = o.lines, .exact = o.bytes, .max = o.nodecount ? o.nodecount : 10,
	};
	if (pid >= 0 && !prof_attach_label(ps[0].path, pid, since, sizeof since))
		ro.since = since;  /* heaptrail attach: nothing from before */
	render_growth(stdout, &g, pid, ps[0].sample > 1, &ro);
	fflush(stdout);
	cli_prof_pool_note(&o, &ps[n - 1]);
	prof_growth_release(&g);
	ret = fflush(stdout) ? 1 : 0;
out_series:
	for (size_t i = 0; i < n; i++)
		prof_profile_release(&ps[i]);
	free(ps);
out:
	cli_prof_opts_release(&o);
	return ret;
}
