/* top.c — `heaptrail top DUMP` (pprof -top's table) and `heaptrail diff
 * OLD NEW` (what grew and shrank, by allocation site). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/aggregate.h"
#include "cli/cli.h"

static const char top_usage[] =
	"usage: heaptrail top [options] DUMP\n"
	"  The functions holding the most memory: flat is what a function\n"
	"  allocated itself, cum what it and its callees did.\n"
	CLI_PROF_OPTS_HELP
	"  --lines                by source line instead of by function\n"
	"  -n N                   show the first N rows (default 20)\n"
	"  --cum                  sort by cum instead of flat\n"
	"  --bytes                exact byte counts instead of KiB/MiB\n";

static const char diff_usage[] =
	"usage: heaptrail diff [options] OLD NEW\n"
	"  What grew and what shrank from dump OLD to dump NEW, by allocation\n"
	"  site (the function that called the allocator), growth first.\n"
	CLI_PROF_VALUE_HELP
	"  --lines                by source line instead of by function\n"
	"  -n N                   at most N sites that grew and N that shrank (default 20)\n"
	"  --focus RE, --ignore RE, --binary-path DIRS   as for top\n"
	"  --bytes                exact byte counts instead of KiB/MiB\n";

static const char *const value_titles[PROF_NVALUES] = {
	"in-use objects", "in-use space", "allocated objects", "allocated space",
};

static bool is_space(int v)
{
	return v == PROF_INUSE_SPACE || v == PROF_ALLOC_SPACE;
}

static const char *fmt_value(char *buf, size_t cap, int64_t x, int v, bool exact, bool sign)
{
	char tmp[48];
	if (is_space(v))
		cli_fmt_bytes(tmp, sizeof tmp, x, exact);
	else
		snprintf(tmp, sizeof tmp, "%" PRId64, x);
	snprintf(buf, cap, "%s%s", sign && x > 0 ? "+" : "", tmp);
	return buf;
}

static double pct(int64_t x, int64_t total)
{
	return total ? 100.0 * (double)x / (double)total : 0.0;
}

static void print_sampling(const struct prof_profile *p)
{
	if (p->sample > 1)
		printf(" (sampled every %" PRIu64 " bytes on average: estimates)", p->sample);
}

static bool sort_cum;

static int top_extra(int argc, char **argv, int *i, void *ctx)
{
	if (!strcmp(argv[*i], "--cum")) {
		sort_cum = true;
		return 1;
	}
	return 0;
}

int cmd_top(int argc, char **argv)
{
	struct cli_prof_opts o;
	struct prof_profile p;
	struct prof_table t;
	int ret = cli_prof_opts_parse(&o, argc, argv, top_usage, top_extra, NULL);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out_opts;
	}
	if (o.nargs != 1) {
		cli_error("top: want one dump, got %d", o.nargs);
		fputs(top_usage, stderr);
		ret = 2;
		goto out_opts;
	}
	if (cli_prof_load(&o, o.args[0], &p)) {
		ret = 1;
		goto out_opts;
	}
	int v = o.value >= 0 ? o.value : PROF_INUSE_SPACE;
	if (prof_table_build(&t, &p, o.lines, v, sort_cum ? PROF_SORT_CUM : PROF_SORT_FLAT)) {
		cli_error("out of memory");
		ret = 1;
		goto out_prof;
	}
	char a[48], b[48];
	int64_t total = p.total[v];
	printf("%s: %s%s %s", o.args[0], o.base ? "change in " : "", value_titles[v],
	       fmt_value(a, sizeof a, total, v, o.bytes, o.base != NULL));
	print_sampling(&p);
	printf("\n");
	if (o.base)
		printf("(minus %s)\n", o.base);
	if (o.focus || o.ignore)
		printf("(stacks%s%s%s%s)\n", o.focus ? " matching " : "", o.focus ? o.focus : "",
		       o.ignore ? " without " : "", o.ignore ? o.ignore : "");
	printf("%12s %6s %6s %12s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
	       o.lines ? "function file:line" : "function");
	long n = o.nodecount ? o.nodecount : 20;
	int64_t sum = 0;
	long shown = 0;
	for (size_t i = 0; i < t.nrows && shown < n; i++) {
		const struct prof_row *r = &t.rows[i];
		if (!r->flat[v] && !r->cum[v])
			continue;
		sum += r->flat[v];
		printf("%12s %5.1f%% %5.1f%% %12s %5.1f%%  %s\n",
		       fmt_value(a, sizeof a, r->flat[v], v, o.bytes, false), pct(r->flat[v], total),
		       pct(sum, total), fmt_value(b, sizeof b, r->cum[v], v, o.bytes, false),
		       pct(r->cum[v], total), r->name);
		shown++;
	}
	size_t rest = 0;
	for (size_t i = 0; i < t.nrows; i++)
		if (t.rows[i].flat[v] || t.rows[i].cum[v])
			rest++;
	if (rest > (size_t)shown)
		printf("(%zu more; -n to see them)\n", rest - (size_t)shown);
	cli_prof_notes(&p);
	ret = fflush(stdout) ? 1 : 0;
	prof_table_release(&t);
out_prof:
	prof_profile_release(&p);
out_opts:
	cli_prof_opts_release(&o);
	return ret;
}

/* The flat value of the row named name in t, or 0. */
static int64_t flat_of(const struct prof_table *t, const char *name, int v)
{
	for (size_t i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].name, name))
			return t->rows[i].flat[v];
	return 0;
}

static void print_diff_rows(const struct prof_table *delta, const struct prof_table *old,
			    const struct prof_table *new, int v, long n, bool exact, int sign)
{
	char a[48], b[48], c[48];
	long shown = 0;
	size_t more = 0;
	for (size_t k = 0; k < delta->nrows; k++) {
		size_t i = sign > 0 ? k : delta->nrows - 1 - k;
		const struct prof_row *r = &delta->rows[i];
		if (sign > 0 ? r->flat[v] <= 0 : r->flat[v] >= 0)
			continue;
		if (shown >= n) {
			more++;
			continue;
		}
		printf("  %12s %12s %12s  %s\n", fmt_value(a, sizeof a, r->flat[v], v, exact, true),
		       fmt_value(b, sizeof b, flat_of(old, r->name, v), v, exact, false),
		       fmt_value(c, sizeof c, flat_of(new, r->name, v), v, exact, false), r->name);
		shown++;
	}
	if (!shown)
		printf("  (none)\n");
	if (more)
		printf("  (%zu more; -n to see them)\n", more);
}

int cmd_diff(int argc, char **argv)
{
	struct cli_prof_opts o;
	struct prof_profile oldp, newp, delta;
	struct prof_table to, tn, td;
	int ret = cli_prof_opts_parse(&o, argc, argv, diff_usage, NULL, NULL);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out_opts;
	}
	if (o.nargs != 2 || o.base) {
		cli_error("diff: want two dumps, OLD and NEW");
		fputs(diff_usage, stderr);
		ret = 2;
		goto out_opts;
	}
	ret = 1;
	if (cli_prof_load(&o, o.args[0], &oldp))
		goto out_opts;
	if (cli_prof_load(&o, o.args[1], &newp))
		goto out_old;
	o.base = o.args[0];
	if (cli_prof_load(&o, o.args[1], &delta))
		goto out_new;
	int v = o.value >= 0 ? o.value : PROF_INUSE_SPACE;
	if (prof_table_build(&to, &oldp, o.lines, v, PROF_SORT_FLAT) ||
	    prof_table_build(&tn, &newp, o.lines, v, PROF_SORT_FLAT) ||
	    prof_table_build(&td, &delta, o.lines, v, PROF_SORT_GROWTH)) {
		cli_error("out of memory");
		goto out_delta;
	}
	char a[48], b[48], c[48];
	printf("%s -> %s: %s %s (%s -> %s)\n", o.args[0], o.args[1], value_titles[v],
	       fmt_value(a, sizeof a, delta.total[v], v, o.bytes, true),
	       fmt_value(b, sizeof b, oldp.total[v], v, o.bytes, false),
	       fmt_value(c, sizeof c, newp.total[v], v, o.bytes, false));
	long n = o.nodecount ? o.nodecount : 20;
	printf("grew:\n  %12s %12s %12s  %s\n", "change", "old", "new",
	       o.lines ? "function file:line" : "function");
	print_diff_rows(&td, &to, &tn, v, n, o.bytes, 1);
	printf("shrank:\n");
	print_diff_rows(&td, &to, &tn, v, n, o.bytes, -1);
	ret = fflush(stdout) ? 1 : 0;
	prof_table_release(&td);
	prof_table_release(&tn);
	prof_table_release(&to);
out_delta:
	prof_profile_release(&delta);
out_new:
	prof_profile_release(&newp);
out_old:
	prof_profile_release(&oldp);
out_opts:
	cli_prof_opts_release(&o);
	return ret;
}
