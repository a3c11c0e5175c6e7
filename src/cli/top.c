/* top.c — `heaptrail top DUMP` (pprof -top's table) and `heaptrail diff
 * OLD NEW` (what grew and shrank, by allocation site): options, load,
 * the tables of aggregate.h, printed by render/tables.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/aggregate.h"
#include "cli/cli.h"
#include "render/render.h"

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
	"  --focus RE, --ignore RE, --hide RE, --binary-path DIRS   as for top\n"
	"  --bytes                exact byte counts instead of KiB/MiB\n";

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
	struct render_table_opts ro = {
		.value = v, .lines = o.lines, .exact = o.bytes, .max = o.nodecount ? o.nodecount : 20,
		.name = o.args[0], .base = o.base, .focus = o.focus, .ignore = o.ignore,
	};
	char since[96];
	if (p.pid > 0 && !prof_attach_label(o.args[0], p.pid, since, sizeof since))
		ro.since = since;  /* heaptrail attach: nothing from before */
	render_top(stdout, &p, &t, &ro);
	cli_prof_notes(&p);
	cli_prof_pool_note(&o, &p);
	cli_prof_unseen_note(&o, &p);
	ret = fflush(stdout) ? 1 : 0;
	prof_table_release(&t);
out_prof:
	prof_profile_release(&p);
out_opts:
	cli_prof_opts_release(&o);
	return ret;
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
	struct render_table_opts ro = {
		.value = v, .lines = o.lines, .exact = o.bytes, .max = o.nodecount ? o.nodecount : 20,
	};
	struct render_diff d = {
		.old_name = o.args[0], .new_name = o.args[1], .old = &oldp, .new = &newp,
		.delta = &delta, .old_rows = &to, .new_rows = &tn, .delta_rows = &td,
		.sampled = oldp.sample > 1 || newp.sample > 1,
	};
	render_diff(stdout, &d, &ro);
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
