/* report.c — `heaptrail report [--json] [--binary-path DIRS] PATH`. */
#include <stdio.h>
#include <string.h>

#include "analyze/report.h"
#include "cli/cli.h"
#include "render/render.h"

static const char usage[] =
	"usage: heaptrail report [options] PATH\n"
	"  PATH                   a run's output directory, or one .leaks file in it\n"
	"  --json                 print the JSON report instead of text\n"
	CLI_REPORT_OPTS_HELP;

int cmd_report(int argc, char **argv)
{
	const char *path = NULL, *err, *err_file;
	struct cli_report_opts o;
	int ret = 0;
	cli_report_opts_init(&o);
	for (int i = 1; i < argc; i++) {
		int r = cli_report_opt(argc, argv, &i, &o);
		if (r < 0) {
			ret = 2;
			goto out;
		}
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			goto out;
		} else if (argv[i][0] == '-' || path) {
			cli_error("report: unexpected argument '%s'", cli_shown(argv[i]));
			fputs(usage, stderr);
			ret = 2;
			goto out;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fputs(usage, stderr);
		ret = 2;
		goto out;
	}
	struct prof_run run;
	if (prof_run_load_kinds(&run, path, o.binary_path, cli_report_sym_kinds(&o),
				&err, &err_file)) {
		cli_error("cannot read '%s': %s", err_file, err);
		ret = 1;
		goto out;
	}
	/* a bad file is named, the others are still reported, and the
	 * status says that something could not be read */
	for (size_t i = 0; i < run.nbad; i++)
		cli_error("cannot read '%s': %s", run.bad[i].file, run.bad[i].err);
	cli_report_print(stdout, &run, &o);
	ret = fflush(stdout) || run.nbad ? 1 : 0;
	prof_run_release(&run);
out:
	cli_report_opts_release(&o);
	return ret;
}
