/* report.c — `heaptrail report [--json] [--binary-path DIRS] PATH`. */
#include <stdio.h>
#include <string.h>

#include "analyze/report.h"
#include "cli/cli.h"
#include "render/render.h"

static const char usage[] =
	"usage: heaptrail report [--json] [--binary-path DIRS] PATH\n"
	"  PATH             a run's output directory, or one heaptrail.PID.leaks file\n"
	"  --json           print the JSON report instead of text\n"
	"  --binary-path D  colon-separated directories searched first for the\n"
	"                   program and libraries (for runs from another machine)\n";

int cmd_report(int argc, char **argv)
{
	const char *path = NULL, *binary_path = NULL, *err, *err_file;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--binary-path") && i + 1 < argc) {
			binary_path = argv[++i];
		} else if (!strncmp(argv[i], "--binary-path=", 14)) {
			binary_path = argv[i] + 14;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (argv[i][0] == '-' || path) {
			cli_error("report: unexpected argument '%s'", argv[i]);
			fputs(usage, stderr);
			return 2;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fputs(usage, stderr);
		return 2;
	}
	struct prof_run run;
	if (prof_run_load(&run, path, binary_path, &err, &err_file)) {
		cli_error("cannot read '%s': %s", err_file, err);
		return 1;
	}
	if (json)
		render_json(stdout, &run, false);
	else
		render_text(stdout, &run, NULL);
	prof_run_release(&run);
	return fflush(stdout) ? 1 : 0;
}
