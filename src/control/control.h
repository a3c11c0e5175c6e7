/*
 * control.h — the process-control layer: everything heaptrail does to a
 * process other than reading what its agent wrote.
 *
 * Layers of the CLI side, each calling only those before it:
 *   format < symbolize < analyze < render < control < cli
 * control is the engine below the commands (src/cli/): the commands parse
 * their arguments, call in here, and decide what to print and the exit
 * status; nothing here is a command, and nothing here calls a command's
 * code. Only src/cli/ includes this header (scripts/check-layers). The
 * agent (src/agent/) never does: it is the other side of these calls.
 *
 * Its jobs, one file or a few each:
 *   agentopts.c  finding the agent library and checking the options
 *                handed to it; a run's output directory
 *
 * Unlike the layers below, control prints its errors itself, one line
 * each on stderr (ctl_error), as the commands do: a function that says it
 * "prints" has said why it failed when it returns -1.
 */
#ifndef HEAPTRAIL_CONTROL_H
#define HEAPTRAIL_CONTROL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Prints "heaptrail: <message>" on stderr (printf-style), one line;
 * cli_error is the commands' name for it. */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ctl_verror(const char *fmt, va_list ap);

/* ---- finding the agent, checking options (agentopts.c) ---- */

/* The agent library's path (HEAPTRAIL_AGENT, beside this executable, or
 * ../lib/heaptrail); 0, or -1 when there is none. */
int ctl_find_agent(char *out, size_t cap);
/* Checks a profiling option's value (sample, interval, every, timeline,
 * signal) as the agent will parse it; writes what to pass into out.
 * Returns NULL, or why the value is bad. */
const char *ctl_check_profile_value(const char *key, const char *v, char *out, size_t cap);
/* mkdir -p with the last one 0700 (fresh: must not exist). 0 or -errno. */
int ctl_make_dir(const char *dir, bool fresh);
/* The first file of an earlier run in dir (into name), or 0. */
int ctl_other_run_file(const char *dir, char *name, size_t cap);

#endif
