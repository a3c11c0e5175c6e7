/*
 * cli — heaptrail's subcommands, one file each, dispatched from main.c.
 * Only code under src/cli prints to the user and decides exit codes.
 * Every subcommand returns the process exit status.
 */
#ifndef HEAPTRAIL_CLI_H
#define HEAPTRAIL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "analyze/report.h"
#include "analyze/suppress.h"

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_leaks(int argc, char **argv);

/* "--name=value" or "--name value" at argv[*i]: returns the value (and
 * advances *i for the second form), "" when the value is missing, or NULL
 * when argv[*i] is another option. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name);

/* Options shared by every command that prints a leak report. */
struct cli_report_opts {
	unsigned shown;         /* PROF_KIND_BIT mask; 0 = default */
	unsigned errors;        /* kinds --error-exitcode counts */
	bool gen_suppressions;
	bool json;              /* --json: print JSON instead of text */
	const char *binary_path;
	struct prof_supps supps;
};
#define CLI_REPORT_OPTS_HELP \
	"  --show-leak-kinds=K    kinds of records to print: all, none, or a list of\n" \
	"                         definite,indirect,possible,reachable (default\n" \
	"                         definite,possible)\n" \
	"  --errors-for-leak-kinds=K  kinds --error-exitcode counts (same words;\n" \
	"                         default definite,possible)\n" \
	"  --suppressions FILE    LeakSanitizer-style suppressions (repeatable)\n" \
	"  --gen-suppressions     print a ready suppression after each record\n" \
	"  --binary-path DIRS     directories searched first when symbolizing\n"
void cli_report_opts_init(struct cli_report_opts *o);
/* 1 when argv[*i] was one of these options (consumed), 0 when it is not,
 * -1 on a bad value (the error is printed). */
int cli_report_opt(int argc, char **argv, int *i, struct cli_report_opts *o);
/* Applies suppressions to every process of run. */
void cli_report_apply(const struct cli_report_opts *o, struct prof_run *run);
/* Applies suppressions and prints run as o asks (text or JSON). */
void cli_report_print(FILE *out, struct prof_run *run, const struct cli_report_opts *o);
void cli_report_opts_release(struct cli_report_opts *o);

/* Prints "heaptrail: <message>" on stderr (printf-style), one line. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses a non-negative decimal integer option value; -1 when it is not. */
long cli_parse_count(const char *s, long max);

/* Writes len bytes of data to path via a temporary file and a rename.
 * Returns 0 or -errno. */
int cli_write_file(const char *path, const char *data, size_t len);

#endif
