/* leaks.c — `heaptrail leaks [--increased] [options] PID`: asks a process
 * running under the agent for a leak check now, waits for the file it
 * writes, and prints it. The process goes on running. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "format/options.h"
#include "format/vocab.h"
#include "cli/cli.h"
#include "render/render.h"

static const char usage[] =
	"usage: heaptrail leaks [options] PID\n"
	"  PID                    a process started under heaptrail (or with the agent\n"
	"                         preloaded)\n"
	"  --increased            list only what grew since the previous check\n"
	"  --timeout SECONDS      how long to wait for the check (default 60)\n"
	"  --json                 print the JSON report instead of text\n"
	CLI_REPORT_OPTS_HELP;

int cmd_leaks(int argc, char **argv)
{
	struct cli_report_opts o;
	long pid = -1, timeout = 60;
	int increased = 0, ret = 1;
	const char *v;
	struct ctl_agent ag;
	cli_report_opts_init(&o);
	for (int i = 1; i < argc; i++) {
		int r = cli_report_opt(argc, argv, &i, &o);
		if (r < 0) {
			ret = 2;
			goto out;
		}
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--increased")) {
			increased = 1;
		} else if ((v = cli_opt_value(argc, argv, &i, "--timeout"))) {
			if ((timeout = ctl_parse_count(v, 86400)) < 1) {
				cli_error("leaks: --timeout takes a number of seconds, not '%s'", v);
				ret = 2;
				goto out;
			}
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			ret = 0;
			goto out;
		} else if (pid < 0 && (pid = ctl_parse_count(argv[i], INT_MAX)) > 0) {
			;
		} else {
			cli_error("leaks: unexpected argument '%s'", argv[i]);
			fputs(usage, stderr);
			ret = 2;
			goto out;
		}
	}
	if (pid <= 0) {
		fputs(usage, stderr);
		ret = 2;
		goto out;
	}
	if (ctl_agent_open(pid, &ag, false))
		goto out;
	char path[PATH_MAX + 64], why[PATH_MAX + 128];
	if (ctl_agent_leak_check(&ag, increased, timeout * 1000, path, sizeof path, why,
				 sizeof why)) {
		if (why[0])
			cli_error("%s", why);
		goto out;
	}
	struct prof_run run;
	const char *err, *err_file;
	if (prof_run_load_kinds(&run, path, o.binary_path, cli_report_sym_kinds(&o),
				&err, &err_file)) {
		cli_error("cannot read '%s': %s", err_file, err);
		goto out;
	}
	cli_report_print(stdout, &run, &o);
	prof_run_release(&run);
	fprintf(stderr, "heaptrail: leak check written to %s\n", path);
	ret = 0;
out:
	cli_report_opts_release(&o);
	return ret;
}
