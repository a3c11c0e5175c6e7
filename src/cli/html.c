/* html.c — `heaptrail html DIR [-o FILE]`: a run's leak reports, dumps
 * and timelines as one self-contained HTML page, built by page.c (also
 * for `heaptrail run --html FILE`, `heaptrail attach --html FILE` and
 * the live endpoint's page). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char usage[] =
	"usage: heaptrail html [options] DIR\n"
	"  One self-contained HTML page of a run's output directory DIR: per\n"
	"  process, the summary and leak records (heaptrail report), the growth\n"
	"  ranking over its dumps (heaptrail growth), the timeline, and a flame\n"
	"  graph of each dump (heaptrail flame). It needs no network: open it\n"
	"  from disk, mail it, attach it to a bug.\n"
	"  -o FILE                where to write it (default DIR/report.html; - for\n"
	"                         standard output)\n"
	"  --min-share F          a flame graph keeps the frames of at least this\n"
	"                         share of its dump (default 0.001); the smaller\n"
	"                         ones are summed into one \"n more\" frame\n"
	"  --binary-path DIRS     directories searched first when symbolizing\n";

int cmd_html(int argc, char **argv)
{
	const char *dir = NULL, *output = NULL, *binary_path = NULL, *v;
	double min_share = 0.001;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if ((v = cli_opt_value(argc, argv, &i, "-o"))) {
			output = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--binary-path"))) {
			binary_path = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--min-share"))) {
			char *end;
			min_share = strtod(v, &end);
			if (!*v || *end || !(min_share >= 0 && min_share < 1)) {
				cli_error("html: --min-share wants a share from 0 to 1, not '%s'",
					  cli_shown(v));
				return 2;
			}
			continue;
		} else if (argv[i][0] == '-' || dir) {
			cli_error("html: unexpected argument '%s'", cli_shown(argv[i]));
			fputs(usage, stderr);
			return 2;
		} else {
			dir = argv[i];
			continue;
		}
		if (!*v) {
			cli_error("html: option '%s' needs a value", cli_shown(argv[i]));
			return 2;
		}
	}
	if (!dir) {
		fputs(usage, stderr);
		return 2;
	}
	char def[4096];
	if (!output) {
		snprintf(def, sizeof def, "%s/report.html", dir);
		output = def;
	}
	int rc;
	if (strcmp(output, "-") && (rc = cli_output_ok(output))) {
		cli_error("cannot write '%s': %s", output, strerror(-rc));
		return 2;
	}
	if (cli_html_write(dir, output, binary_path, min_share))
		return 1;
	if (strcmp(output, "-"))
		fprintf(stderr, "heaptrail: wrote %s\n", output);
	return 0;
}

