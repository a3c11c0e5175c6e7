/* pprof.c — `heaptrail pprof DUMP -o OUT.pb.gz`: a heap dump as a pprof
 * profile, for `pprof -top`, `pprof -http` and the other tools that read
 * profile.proto. The dump is symbolized here, so the profile carries its
 * function names, source lines and inlined frames and pprof needs neither
 * the binaries nor their debug info. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "render/render.h"

static const char pprof_usage[] =
	"usage: heaptrail pprof [options] DUMP -o OUT.pb.gz\n"
	"  Writes the heap dump DUMP as a gzip'd pprof profile, symbolized, with\n"
	"  the sample types alloc_objects, alloc_space, inuse_objects, inuse_space.\n"
	"  -o FILE                the profile to write ('-' for standard output)\n"
	"  --inuse-space | --inuse-objects | --alloc-space | --alloc-objects\n"
	"                         the sample type pprof shows by default (in-use space)\n"
	"  --focus RE             keep only stacks with a function matching RE\n"
	"  --ignore RE            drop stacks with a function matching RE\n"
	"  --hide RE              remove frames matching RE from every stack (an\n"
	"                         allocator's wrappers: the site is their caller)\n"
	"  --pool NAME            only the blocks of the memory pool NAME\n"
	"  --binary-path DIRS     directories searched first for the dump's binaries\n"
	"                         (colon-separated, like PPROF_BINARY_PATH)\n"
	"  To see what changed between two dumps, write both and use\n"
	"  'pprof -base OLD.pb.gz NEW.pb.gz'.\n";

/* The option that means nothing for a profile file, or NULL. */
static const char *pointless_option(const struct cli_prof_opts *o)
{
	if (o->lines)
		return "--lines";
	if (o->nodecount)
		return "-n";
	if (o->bytes)
		return "--bytes";
	return NULL;
}

int cmd_pprof(int argc, char **argv)
{
	struct cli_prof_opts o;
	struct prof_profile p;
	char *data = NULL;
	size_t len = 0;
	const char *bad;
	int ret = cli_prof_opts_parse(&o, argc, argv, pprof_usage, NULL, NULL);
	if (ret) {
		ret = ret == 1 ? 0 : ret;
		goto out_opts;
	}
	ret = 2;
	if (o.nargs != 1) {
		cli_error("pprof: want one dump, got %d", o.nargs);
		fputs(pprof_usage, stderr);
		goto out_opts;
	}
	if (!o.output) {
		cli_error("pprof: want -o FILE, the profile to write");
		fputs(pprof_usage, stderr);
		goto out_opts;
	}
	/* A base profile's samples carry frames but no pcs, and pprof
	 * subtracts better itself: it keeps both stacks' addresses. */
	if (o.base) {
		cli_error("pprof: --base is not supported; write both dumps and run "
			  "'pprof -base OLD.pb.gz NEW.pb.gz'");
		goto out_opts;
	}
	if ((bad = pointless_option(&o))) {
		cli_error("pprof: '%s' does not apply to a profile file (pprof has its own)", bad);
		goto out_opts;
	}
	ret = 1;
	int rc = strcmp(o.output, "-") ? cli_output_ok(o.output) : 0;
	if (rc) {
		cli_error("cannot write '%s': %s", o.output, strerror(-rc));
		goto out_opts;
	}
	if (cli_prof_load(&o, o.args[0], &p))
		goto out_opts;
	rc = render_pprof(&p, o.value >= 0 ? o.value : PROF_INUSE_SPACE, &data, &len);
	if (rc) {
		cli_error("cannot encode '%s' as a pprof profile: %s", o.args[0], strerror(-rc));
		goto out_prof;
	}
	if (!strcmp(o.output, "-") && isatty(STDOUT_FILENO)) {
		cli_error("pprof: not writing a binary profile to a terminal (redirect it, or -o FILE)");
		goto out_prof;
	}
	if (cli_emit(o.output, data, len))
		goto out_prof;
	cli_prof_notes(&p);
	ret = 0;
out_prof:
	free(data);
	prof_profile_release(&p);
out_opts:
	cli_prof_opts_release(&o);
	return ret;
}
