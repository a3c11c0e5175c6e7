/* flame.c — `heaptrail flame DUMP -o out.svg`: an interactive flame graph
 * of a heap dump, or with --base a differential one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "render/render.h"

static const char flame_usage[] =
	"usage: heaptrail flame [options] DUMP -o FILE.svg\n"
	"  An interactive flame graph (SVG) of the stacks holding memory: each\n"
	"  frame as wide as what it and its callees hold, callers below callees.\n"
	"  Click a frame to zoom, Search to highlight functions by regex.\n"
	CLI_PROF_VALUE_HELP
	"  -o FILE                the SVG to write ('-': standard output)\n"
	"  --base OLD             a differential graph: widths from DUMP, colours\n"
	"                         from the change since OLD (red grew, blue shrank)\n"
	"  --reverse              merge stacks from the allocation site (the leaf)\n"
	"  --inverted             draw root at the top (an icicle graph)\n"
	"  --lines                a frame per source line instead of per function\n"
	"  --title T              the title (default: names the value)\n"
	"  --width N              the image width in pixels (default 1200)\n"
	"  --focus RE             keep only stacks with a function matching RE\n"
	"  --ignore RE            drop stacks with a function matching RE\n"
	"  --hide RE              remove frames matching RE from every stack (an\n"
	"                         allocator's wrappers: the site is their caller)\n"
	"  --pool NAME            only the blocks of the memory pool NAME\n"
	"  --binary-path DIRS     directories searched first for the dump's binaries\n";

static int flame_extra(int argc, char **argv, int *i, void *ctx)
{
	struct render_flame_opts *r = ctx;
	const char *v;
	if (!strcmp(argv[*i], "--reverse")) {
		r->reverse = true;
	} else if (!strcmp(argv[*i], "--inverted")) {
		r->inverted = true;
	} else if ((v = cli_opt_value(argc, argv, i, "--title"))) {
		r->title = v;
	} else if ((v = cli_opt_value(argc, argv, i, "--width"))) {
		long w = ctl_parse_count(v, 100000);
		if (w < 200) {
			cli_error("flame: --width wants a number of pixels from 200 to 100000, not '%s'", v);
			return -1;
		}
		r->width = (unsigned)w;
	} else {
		return 0;
	}
	return 1;
}

/* Writes the n bytes of an SVG to o->output, whole or not at all. */
int cmd_flame(int argc, char **argv)
{
	struct render_flame_opts r = { 0 };
	struct cli_prof_opts o;
	struct prof_profile p, base;
	char *svg = NULL;
	size_t n = 0;
	int ret = cli_prof_opts_parse(&o, argc, argv, flame_usage, flame_extra, &r);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out_opts;
	}
	if (o.nargs != 1 || !o.output) {
		if (o.nargs != 1)
			cli_error("flame: want one dump, got %d", o.nargs);
		else
			cli_error("flame: want -o FILE, the SVG to write");
		fputs(flame_usage, stderr);
		ret = 2;
		goto out_opts;
	}
	ret = 1;
	/* DUMP and OLD load apart: the renderer needs both sides' values,
	 * not only their difference */
	const char *base_path = o.base;
	o.base = NULL;
	if (cli_prof_load(&o, o.args[0], &p))
		goto out_opts;
	if (base_path && cli_prof_load(&o, base_path, &base))
		goto out_p;
	r.value = o.value >= 0 ? o.value : PROF_INUSE_SPACE;
	r.lines = o.lines;
	FILE *f = open_memstream(&svg, &n);
	if (!f) {
		cli_error("out of memory");
		goto out_base;
	}
	int rc = render_flame_svg(f, &p, base_path ? &base : NULL, &r);
	if (fclose(f) || rc) {
		cli_error("out of memory");
		goto out_base;
	}
	if (cli_emit(o.output, svg, n))
		goto out_base;
	cli_prof_notes(&p);
	cli_prof_pool_note(&o, &p);
	ret = 0;
out_base:
	free(svg);
	if (base_path)
		prof_profile_release(&base);
out_p:
	prof_profile_release(&p);
out_opts:
	cli_prof_opts_release(&o);
	return ret;
}
