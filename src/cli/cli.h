/*
 * cli — heaptrail's subcommands, one file each, dispatched from main.c.
 * Only code under src/cli prints to the user and decides exit codes.
 * Every subcommand returns the process exit status.
 */
#ifndef HEAPTRAIL_CLI_H
#define HEAPTRAIL_CLI_H

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* Prints "heaptrail: <message>" on stderr (printf-style), one line. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses a non-negative decimal integer option value; -1 when it is not. */
long cli_parse_count(const char *s, long max);

/* Writes len bytes of data to path via a temporary file and a rename.
 * Returns 0 or -errno. */
int cli_write_file(const char *path, const char *data, size_t len);

#endif
