/* collapsed.c — `heaptrail collapsed DUMP` (folded stacks) and
 * `heaptrail callgraph DUMP --dot` (Graphviz). Both print to stdout or to
 * -o FILE, written whole (a temporary file renamed into place). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "render/graph.h"

static const char collapsed_usage[] =
	"usage: heaptrail collapsed [options] DUMP\n"
	"  The dump as folded stacks, one line per stack: 'main;f;g BYTES', root\n"
	"  first, as flamegraph.pl, speedscope and inferno read them. With --base,\n"
	"  'STACK OLD NEW' lines, as flamegraph.pl's difffolded.pl writes them.\n"
	CLI_PROF_VALUE_HELP
	"  --base OLD             the difffolded form against dump OLD\n"
	"  --lines                frames as 'function file:line'\n"
	"  --focus RE, --ignore RE, --hide RE, --pool NAME, --binary-path DIRS\n"
	"                         as for top\n"
	"  -o FILE                write FILE instead of standard output\n";

static const char callgraph_usage[] =
	"usage: heaptrail callgraph [options] --dot DUMP\n"
	"  The call graph in Graphviz dot (render it with 'dot -Tsvg'): a box per\n"
	"  function with what it allocated itself (flat) and with its callees\n"
	"  (cum), an arrow per call, as wide as the bytes that went through it.\n"
	CLI_PROF_OPTS_HELP
	"  --lines                a box per source line\n"
	"  --node-fraction F      hide functions below F of the total (default 0.005)\n"
	"  --edge-fraction F      hide calls below F of the total (default 0.001)\n"
	"  -n N                   at most N boxes (default 80)\n"
	"  -o FILE                write FILE instead of standard output\n";

/* Runs render into a memory stream, then writes it to o->output (whole)
 * or stdout. Returns the exit status. */
static int emit(const struct cli_prof_opts *o, int (*render)(FILE *, void *), void *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (!mem) {
		cli_error("out of memory");
		return 1;
	}
	int rc = render(mem, ctx);
	if (fclose(mem) || rc) {
		free(buf);
		cli_error("out of memory");
		return 1;
	}
	int ret = cli_emit(o->output ? o->output : "-", buf, len) ? 1 : 0;
	free(buf);
	return ret;
}

struct collapsed_ctx {
	struct prof_profile *p, *base;
	int v;
	bool lines;
};

static int do_collapsed(FILE *out, void *arg)
{
	struct collapsed_ctx *c = arg;
	return render_collapsed(out, c->p, c->base, c->v, c->lines);
}

int cmd_collapsed(int argc, char **argv)
{
	struct cli_prof_opts o;
	struct prof_profile p, b;
	int ret = cli_prof_opts_parse(&o, argc, argv, collapsed_usage, NULL, NULL);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out;
	}
	if (o.nargs != 1) {
		cli_error("collapsed: want one dump, got %d", o.nargs);
		fputs(collapsed_usage, stderr);
		ret = 2;
		goto out;
	}
	ret = 1;
	/* the base is kept apart: the difffolded form has both columns */
	const char *base = o.base;
	o.base = NULL;
	if (cli_prof_load(&o, o.args[0], &p))
		goto out;
	if (base && cli_prof_load(&o, base, &b))
		goto out_p;
	struct collapsed_ctx c = { &p, base ? &b : NULL,
				   o.value >= 0 ? o.value : PROF_INUSE_SPACE, o.lines };
	ret = emit(&o, do_collapsed, &c);
	if (base)
		prof_profile_release(&b);
out_p:
	prof_profile_release(&p);
out:
	cli_prof_opts_release(&o);
	return ret;
}

struct dot_ctx {
	struct prof_profile *p;
	struct render_dot_opts ro;
};

static int do_dot(FILE *out, void *arg)
{
	struct dot_ctx *c = arg;
	return render_dot(out, c->p, &c->ro);
}

struct callgraph_flags {
	bool dot;
	double node_fraction, edge_fraction;
};

static int parse_fraction(const char *name, const char *v, double *out)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (!*v || *end || errno || d < 0 || d > 1) {
		cli_error("%s: want a fraction between 0 and 1, not '%s'", name, v);
		return -1;
	}
	*out = d;
	return 1;
}

static int callgraph_extra(int argc, char **argv, int *i, void *arg)
{
	struct callgraph_flags *f = arg;
	const char *v;
	if (!strcmp(argv[*i], "--dot")) {
		f->dot = true;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--node-fraction")) ||
	    (v = cli_opt_value(argc, argv, i, "--nodefraction")))
		return parse_fraction("--node-fraction", v, &f->node_fraction);
	if ((v = cli_opt_value(argc, argv, i, "--edge-fraction")) ||
	    (v = cli_opt_value(argc, argv, i, "--edgefraction")))
		return parse_fraction("--edge-fraction", v, &f->edge_fraction);
	return 0;
}

int cmd_callgraph(int argc, char **argv)
{
	struct cli_prof_opts o;
	struct prof_profile p;
	struct callgraph_flags f = { false, 0.005, 0.001 };
	int ret = cli_prof_opts_parse(&o, argc, argv, callgraph_usage, callgraph_extra, &f);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out;
	}
	if (o.nargs != 1) {
		cli_error("callgraph: want one dump, got %d", o.nargs);
		fputs(callgraph_usage, stderr);
		ret = 2;
		goto out;
	}
	(void)f.dot; /* dot is the only output format; --dot is accepted for jeprof's users */
	ret = 1;
	if (cli_prof_load(&o, o.args[0], &p))
		goto out;
	struct dot_ctx c = { &p, { .value = o.value >= 0 ? o.value : PROF_INUSE_SPACE,
				   .lines = o.lines, .node_fraction = f.node_fraction,
				   .edge_fraction = f.edge_fraction,
				   .max_nodes = o.nodecount ? o.nodecount : 80 } };
	ret = emit(&o, do_dot, &c);
	prof_profile_release(&p);
out:
	cli_prof_opts_release(&o);
	return ret;
}
