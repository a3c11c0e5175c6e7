/* growth.c — `heaptrail growth DUMPS...|DIR`: the sites that keep growing
 * over a run's dumps, steadiest and fastest first (the fit is
 * analyze/growth.c, the table render/tables.c). */
#include <errno.h>
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

/* What growth keeps of each dump as it is read (a long series is read
 * one dump at a time, never held whole): growth's digest of it and what
 * the checks and notes below need. */
struct kept {
	struct prof_growth_dump *digest;
	char *path;
	long pid;
	int64_t inuse;          /* in-use space */
	uint64_t sample;
	bool pool_absent;
	char *pools;            /* --pool: the load's note naming the dump's pools */
	char *pool_note;        /* no --pool: the note on its pool chunks */
};

struct reading {
	const struct cli_prof_opts *o;
	int v;
	struct kept *k;
	size_t n, cap;
	bool said;              /* the error is printed already */
};

static void kept_release(struct kept *k)
{
	prof_growth_digest_free(k->digest);
	free(k->path);
	free(k->pools);
	free(k->pool_note);
}

static int read_dump(void *ctx, struct prof_profile *p, size_t i)
{
	struct reading *r = ctx;
	if (cli_prof_filter(r->o, p)) {
		r->said = true;
		return -EINVAL;
	}
	if (i >= r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		struct kept *k = realloc(r->k, cap * sizeof *k);
		if (!k)
			return -ENOMEM;
		memset(k + r->cap, 0, (cap - r->cap) * sizeof *k);
		r->k = k;
		r->cap = cap;
	}
	struct kept *k = &r->k[i];
	r->n = i + 1 > r->n ? i + 1 : r->n;
	k->digest = prof_growth_digest(p, r->v, r->o->lines);
	k->path = strdup(p->path);
	k->pid = p->pid;
	k->inuse = p->total[PROF_INUSE_SPACE];
	k->sample = p->sample;
	k->pool_absent = p->pool_absent;
	bool ok = k->digest && k->path;
	if (r->o->load.pool) {
		/* the load's last note ends "(its pools: ...)" */
		const char *const *w;
		size_t nw = prof_profile_warnings(p, &w);
		const char *pools = nw ? strstr(w[nw - 1], "(its pools") : NULL;
		if (pools)
			ok &= !!(k->pools = strdup(pools + strlen("(its pools")));
	} else {
		char buf[1024];
		if (cli_prof_pool_text(r->o, p, buf, sizeof buf))
			ok &= !!(k->pool_note = strdup(buf));
	}
	return ok ? 0 : -ENOMEM;
}

int cmd_growth(int argc, char **argv)
{
	struct cli_prof_opts o;
	bool keep_wrappers = false;
	struct reading r = { .o = &o };
	size_t n = 0, *order = NULL;
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
	r.v = o.value >= 0 ? o.value : PROF_INUSE_SPACE;
	if (r.v == PROF_ALLOC_SPACE || r.v == PROF_ALLOC_OBJECTS) {
		cli_error("growth: allocated totals only ever grow; use --inuse-space or --inuse-objects");
		ret = 2;
		goto out;
	}
	ret = 1;
	char why[4800];
	if (prof_series_each(o.args, (size_t)o.nargs, &o.load, &(struct prof_series_visit){
				     .each = read_dump, .ctx = &r }, &order, &n, why, sizeof why)) {
		if (!r.said)
			cli_error("%s", why);
		goto out;
	}
	/* time order */
	struct kept *ks = malloc((n + 1) * sizeof *ks);
	if (!ks) {
		cli_error("out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ks[i] = r.k[order[i]];
	free(r.k);
	r.k = ks;
	if (n < 3) {
		cli_error("growth: %zu dump%s, need at least three to see a trend", n,
			  n == 1 ? "" : "s");
		goto out;
	}
	long pid = ks[0].pid;
	if (o.nargs == 1 && n > 1) {
		/* a directory of several processes' dumps (a program that forks):
		 * the process with the most dumps, and a note about the others */
		size_t best = 0;
		int64_t best_peak = -1;
		for (size_t i = 0; i < n; i++) {
			size_t c = 0;
			int64_t peak = 0;
			for (size_t k = 0; k < n; k++)
				if (ks[k].pid == ks[i].pid) {
					c++;
					if (ks[k].inuse > peak)
						peak = ks[k].inuse;
				}
			/* ties (a driver and the compilers it runs, dumped on the
			 * same timer): the one that held the most */
			if (c > best || (c == best && peak > best_peak)) {
				best = c;
				best_peak = peak;
				pid = ks[i].pid;
			}
		}
		if (best < n) {
			size_t kept = 0;
			for (size_t i = 0; i < n; i++) {
				if (ks[i].pid == pid)
					ks[kept++] = ks[i];
				else
					kept_release(&ks[i]);
			}
			fprintf(stderr, "heaptrail: %zu of the %zu dumps in '%s' are of pid %ld, the "
				"rest of other processes: give their files to see those\n", kept, n,
				o.args[0], pid);
			n = kept;
			if (n < 3) {
				cli_error("growth: %zu dump%s of pid %ld, need at least three to see a "
					  "trend", n, n == 1 ? "" : "s", pid);
				goto out;
			}
		}
	}
	for (size_t i = 1; i < n; i++)
		if (ks[i].pid != pid) {
			cli_error("growth: the dumps come from different processes (pid %ld in '%s', "
				  "%ld in '%s'); give one run's dumps", pid, ks[0].path, ks[i].pid,
				  ks[i].path);
			goto out;
		}
	if (o.load.pool) {
		/* a pool made mid-run is absent from the early dumps (it held
		 * nothing then); absent from all of them, it is a wrong name */
		size_t absent = 0;
		for (size_t i = 0; i < n; i++)
			absent += ks[i].pool_absent;
		if (absent == n) {
			const char *pools = ks[n - 1].pools;
			cli_error("growth: no pool named '%s' in any of the %zu dumps%s%s",
				  cli_shown(o.load.pool), n, pools ? " (the last one's pools" : "",
				  pools ? pools : "");
			ret = 2;
			goto out;
		}
		if (absent)
			fprintf(stderr, "heaptrail: note: the pool '%s' is in %zu of the %zu dumps; "
				"in the others it counts as 0 B\n", o.load.pool, n - absent, n);
	}
	struct prof_growth g;
	struct prof_growth_dump **ds = malloc((n + 1) * sizeof *ds);
	if (!ds) {
		cli_error("out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ds[i] = ks[i].digest;
	int rc = prof_growth_compute_digests(&g, ds, n, !keep_wrappers);
	free(ds);
	if (rc) {
		cli_error("out of memory");
		goto out;
	}
	/* a filtered heap is a part: its rise says nothing of what is unseen */
	if (o.load.pool || o.focus || o.ignore)
		g.rss_known = false;
	char since[96];
	struct render_table_opts ro = {
		.value = r.v, .lines = o.lines, .exact = o.bytes, .max = o.nodecount ? o.nodecount : 10,
	};
	if (pid >= 0 && !prof_attach_label(ks[0].path, pid, since, sizeof since))
		ro.since = since;  /* heaptrail attach: nothing from before */
	render_growth(stdout, &g, pid, ks[0].sample > 1, &ro);
	fflush(stdout);
	if (ks[n - 1].pool_note)
		fputs(ks[n - 1].pool_note, stderr);
	prof_growth_release(&g);
	ret = fflush(stdout) ? 1 : 0;
out:
	for (size_t i = 0; i < (order ? n : r.n); i++)
		kept_release(&r.k[i]);
	free(r.k);
	free(order);
	cli_prof_opts_release(&o);
	return ret;
}
