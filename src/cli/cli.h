/*
 * cli — heaptrail's subcommands, one file each, dispatched from main.c.
 * Only code under src/cli prints to the user and decides exit codes
 * (src/control, the engine below, prints its errors too: control.h).
 * Every subcommand returns the process exit status.
 *
 * A command file calls no function another command file defines: what
 * two commands share lives in the files below, or in a layer under this
 * one (scripts/check-layers reads this line):
 * Not commands: main.c profopts.c page.c
 *   main.c      the table of commands; options shared by commands
 *   profopts.c  the options of the analyzer's views (top, flame, ...)
 *   page.c      the HTML page of a run (html, run --html, the live page)
 */
#ifndef HEAPTRAIL_CLI_H
#define HEAPTRAIL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "analyze/load.h"
#include "analyze/report.h"
#include "analyze/series.h"
#include "analyze/suppress.h"
#include "control/control.h"

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_growth(int argc, char **argv);
int cmd_flame(int argc, char **argv);
int cmd_collapsed(int argc, char **argv);
int cmd_pprof(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_callgraph(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_detach(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_html(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* page.c (not a command): writes the HTML page of the run in dir to
 * path (cli_write_file; "-": standard output); min_share as `html
 * --min-share`. 0, or -1 (printed). */
int cli_html_write(const char *dir, const char *path, const char *binary_path,
		   double min_share);
/* The page (or its data) of the run in dir into *out (*len bytes,
 * malloc'd: the caller frees it). 0, or -1 (printed, or in why when
 * quiet). A ctl_page_fn: the live endpoint serves it (ctl_live_opts). */
int cli_html_build(const char *dir, const struct ctl_page_opts *o, char **out, size_t *len,
		   char *why, size_t whycap);

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
	const char *pool;       /* --pool NAME: only that pool and its descendants */
	struct prof_supps supps;
};
#define CLI_REPORT_OPTS_HELP \
	"  --show-leak-kinds=K    kinds of records to print: all, none, or a list of\n" \
	"                         definite,indirect,possible,reachable (default\n" \
	"                         definite,possible)\n" \
	"  --errors-for-leak-kinds=K  kinds --error-exitcode counts (same words;\n" \
	"                         default definite,possible)\n" \
	"  --suppressions FILE    LeakSanitizer-style suppressions of leaks and heap\n" \
	"                         errors (repeatable)\n" \
	"  --gen-suppressions     print a ready suppression after each record and\n" \
	"                         heap error (in --json: each one's \"suppression\")\n" \
	"  --pool NAME            only the blocks of the memory pool NAME and of the\n" \
	"                         pools under it (heaptrail_pool_create)\n" \
	"  --binary-path DIRS     directories searched first when symbolizing\n"
void cli_report_opts_init(struct cli_report_opts *o);
/* 1 when argv[*i] was one of these options (consumed), 0 when it is not,
 * -1 on a bad value (the error is printed). */
int cli_report_opt(int argc, char **argv, int *i, struct cli_report_opts *o);
/* The kinds whose records need symbols for o: those printed, or all when
 * JSON is printed or suppressions must match (prof_run_load_kinds). */
unsigned cli_report_sym_kinds(const struct cli_report_opts *o);
/* Applies suppressions to every process of run. */
void cli_report_apply(const struct cli_report_opts *o, struct prof_run *run);
/* Applies suppressions and prints run as o asks (text or JSON). */
void cli_report_print(FILE *out, struct prof_run *run, const struct cli_report_opts *o);
void cli_report_opts_release(struct cli_report_opts *o);

/* Options shared by the analyzer's commands (top, diff, flame, ...). */
struct cli_prof_opts {
	const char *base;        /* --base OLD */
	int value;               /* enum prof_value; -1 = not given */
	bool lines;              /* --lines: by source line instead of function */
	long nodecount;          /* -n N; 0 = the command's default */
	const char *focus, *ignore;
	const char *hide;        /* --hide RE: frames removed from every stack */
	const char *output;      /* -o FILE */
	bool bytes;              /* --bytes: exact integers instead of KiB/MiB */
	struct prof_load_opts load;
	char **args;             /* positional arguments */
	int nargs;
};
#define CLI_PROF_VALUE_HELP \
	"  --inuse-space | --inuse-objects | --alloc-space | --alloc-objects\n" \
	"                         which value to show (default: in-use space)\n"
#define CLI_PROF_OPTS_HELP \
	CLI_PROF_VALUE_HELP \
	"  --base OLD             subtract the dump OLD first (what changed since)\n" \
	"  --focus RE             keep only stacks with a function matching RE\n" \
	"  --ignore RE            drop stacks with a function matching RE\n" \
	"  --hide RE              remove frames matching RE from every stack (an\n" \
	"                         allocator's wrappers: the site is their caller)\n" \
	"  --pool NAME            only the blocks of the memory pool NAME\n" \
	"  --binary-path DIRS     directories searched first for the dump's binaries\n" \
	"                         (colon-separated, like PPROF_BINARY_PATH)\n"
/* Parses argv (argv[0] is the command's name) into o. extra, when not
 * NULL, is tried first on each argument: it returns 1 when it consumed
 * argv[*i], 0 when not, -1 on a bad value (error printed). Returns 0, 1
 * when --help was printed (usage on stdout), or 2 on a usage error
 * (printed, with usage on stderr). */
int cli_prof_opts_parse(struct cli_prof_opts *o, int argc, char **argv, const char *usage,
			int (*extra)(int argc, char **argv, int *i, void *ctx), void *ctx);
void cli_prof_opts_release(struct cli_prof_opts *o);
/* Loads one dump as o says (binary path); applies --base and --focus /
 * --ignore. Prints the error and returns -1 on failure. */
int cli_prof_load(const struct cli_prof_opts *o, const char *path, struct prof_profile *p);
/* Applies --focus, --ignore and --hide to p. Prints the error and
 * returns -1 on failure (p is left to the caller). */
int cli_prof_filter(const struct cli_prof_opts *o, struct prof_profile *p);
/* Prints p's symbolization notes on stderr ("heaptrail: note: ..."). */
void cli_prof_notes(const struct prof_profile *p);
/* Without --pool, a dump that holds pool chunks counts them and the
 * malloc blocks holding them both: says so on stderr, with the chunks'
 * in-use bytes. */
void cli_prof_pool_note(const struct cli_prof_opts *o, const struct prof_profile *p);
/* The same note into buf (empty when there is none); its length. */
size_t cli_prof_pool_text(const struct cli_prof_opts *o, const struct prof_profile *p, char *buf,
			  size_t cap);
/* A note on stderr when the allocator counted far more in use than the
 * dump p holds (heap_in_use): memory heaptrail does not see. Not for a
 * filtered view (--focus, --ignore, --hide, --pool, --base). */
void cli_prof_unseen_note(const struct cli_prof_opts *o, const struct prof_profile *p);
/* Writes data to path whole (a temporary file renamed into place), or to
 * standard output when path is "-". Prints the error and returns -1 on
 * failure. */
int cli_emit(const char *path, const char *data, size_t len);

/* Prints "heaptrail: <message>" on stderr (printf-style), one line. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A value from the command line or a file, fit to quote in cli_error:
 * control bytes as '?', cut past about 160 bytes with its length said
 * (fmt_shown). The string stays valid for the next three calls. */
const char *cli_shown(const char *v);


/* Writes len bytes of data to path via a temporary file and a rename
 * (through a symlink to the file it names; straight into a path that is
 * not a regular file, a FIFO or a device). The file is 0600 whatever the
 * umask, a file it replaces included. Returns 0 or -errno. */
int cli_write_file(const char *path, const char *data, size_t len);
/* 0 when path could be written: its directory exists and path is not a
 * directory; else -errno. Checked before long work (loading a dump,
 * running the program); writing can still fail later, and
 * cli_write_file then leaves nothing. */
int cli_output_ok(const char *path);

/* Shared by the commands that start an agent (run, attach); main.c. */
/* An options file (--options-file FILE of run and attach): for each line
 * that is neither blank nor a comment (#), calls fn with an argv of cmd,
 * the line's first word (the flag) and, if any, the rest of the line (its
 * value, spaces and all), stopping at the first call that returns non-0.
 * Returns 0, or -1 (said why, or fn did). */
int cli_each_options_line(const char *path, const char *cmd,
			  int (*fn)(int argc, char **argv, void *ctx), void *ctx);
/* --KIND-fn SPEC (format/fnspec.h) or --no-builtin-fns at argv[*i]:
 * appends the agent option to fns (cap bytes) and returns 1; returns -1
 * after saying why it is refused (cmd: "run", "attach"), 0 when argv[*i]
 * is not one. */
int cli_fn_opt(int argc, char **argv, int *i, const char *cmd, char *fns, size_t cap);

/* main.c: "--http ADDR", "--http-allow-remote" and the --push options
 * of run, attach and serve into o (control.h): 1 consumed, 0 not ours,
 * -1 bad value (printed). */
int cli_live_opt(int argc, char **argv, int *i, struct ctl_live_opts *o);

#endif
