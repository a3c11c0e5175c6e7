/*
 * input — the one way the CLI opens a file it was given to read (a leak
 * file, a heap dump, a timeline, a suppressions file).
 *
 * Whatever the path names, opening and reading it ends: it must be a
 * regular file (a FIFO, a tty, /dev/zero or a directory is refused without
 * blocking: the open is non-blocking, so a FIFO without a writer does not
 * wait) no larger than the caller's limit. Errors are a static one-line
 * reason without the path, for the caller to print with it.
 */
#ifndef HEAPTRAIL_FORMAT_INPUT_H
#define HEAPTRAIL_FORMAT_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The largest file any reader accepts unless it says otherwise. */
#define FMT_INPUT_MAX ((uint64_t)4 << 30)

/* Opens path for reading after the checks above; returns the fd
 * (O_CLOEXEC, blocking again once open) or -errno with *err set
 * ("not a regular file", "file too large (over 4096 MiB)", strerror). */
int fmt_input_open(const char *path, uint64_t max, const char **err);

/* The same as a stdio stream ("r"); NULL with *err set and errno. */
FILE *fmt_input_fopen(const char *path, uint64_t max, const char **err);

/* Reads path whole into a malloc'd, NUL-terminated buffer (the caller
 * frees it) of *len bytes. Returns 0 or -errno with *err set. A file that
 * grows past max while being read is refused too. */
int fmt_input_read(const char *path, uint64_t max, char **buf, size_t *len,
		   const char **err);

#endif
