/*
 * agentopts — the value syntax of HEAPTRAIL_OPTIONS, as the agent's
 * config.c reads it, for the CLI: `heaptrail run` checks its profiling
 * flags with it before starting anything, and `heaptrail leaks PID` finds
 * the signal a running process listens on by reading that process's
 * options exactly as its agent did.
 *
 * The rules (config.c): options are comma-separated; an option is
 * KEY=VALUE or KEY:VALUE (the key ends at the first '=' or ':'); they
 * apply in order, so a later valid value wins; an unknown key or a
 * malformed value is ignored (the agent complains once on stderr).
 *
 * Written without libc calls, so the agent can link it
 * too (it links src/format/names.c the same way). Each parser takes a
 * string of n bytes (not NUL-terminated) and returns false when it is
 * malformed, leaving *out alone.
 */
#ifndef HEAPTRAIL_FORMAT_AGENTOPTS_H
#define HEAPTRAIL_FORMAT_AGENTOPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal digits only, at most max. */
bool fmt_opt_num(const char *s, size_t n, uint64_t max, uint64_t *out);
/* 4096, 512k, 64m, 1g (suffix case-insensitive), at most 2^50 bytes. */
bool fmt_opt_size(const char *s, size_t n, uint64_t *out);
/* 10s, 500ms, 2m; a bare number is seconds; *out in milliseconds. */
bool fmt_opt_duration(const char *s, size_t n, uint64_t *out);
/* A signal number 0..64 (0: off), neither SIGKILL nor SIGSTOP. */
bool fmt_opt_signal(const char *s, size_t n, uint64_t *out);

/* Walks opts (a whole HEAPTRAIL_OPTIONS string, NUL-terminated) and
 * returns the value the agent ends up with for key: the last occurrence
 * whose value valid() (one of the parsers above) accepts. Returns true
 * and sets *out when there is one, else false (the agent's default). */
bool fmt_opts_last(const char *opts, const char *key,
		   bool (*valid)(const char *s, size_t n, uint64_t *out), uint64_t *out);

#endif
