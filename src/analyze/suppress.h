/*
 * suppress — LeakSanitizer-style suppression files, with limits.
 *
 *   # a comment
 *   leak:cache_init                    any frame's function, file or module
 *   leak:libvendor*.so                 "*" matches anything
 *   leak:^xmalloc$                     '^' and '$' anchor; else a substring
 *   leak:pool_grow:max_bytes=4096      suppress only while the records this
 *                                      pattern matches total <= 4096 bytes
 *
 * Lines of LSan's other types (called_from_lib:, interceptor_via_fun:...)
 * are accepted and ignored, so an existing LSan file loads unchanged.
 */
#ifndef HEAPTRAIL_ANALYZE_SUPPRESS_H
#define HEAPTRAIL_ANALYZE_SUPPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prof_process;

struct prof_supp {
	char *pattern;
	bool has_limit;
	uint64_t max_bytes;
	char *origin;            /* "file:line", for messages */
};

struct prof_supps {
	struct prof_supp *v;
	size_t n;
};

/* Appends the suppressions in path to s. Returns 0, or -errno / -EINVAL
 * with *err a static reason and *line the offending line (0 for I/O). */
int prof_supps_load(struct prof_supps *s, const char *path, const char **err, int *line);
void prof_supps_release(struct prof_supps *s);

/* LSan's template match: '*' wildcards, optional '^'/'$' anchors,
 * otherwise a substring match. */
bool prof_supp_match(const char *pattern, const char *str);

/* Marks the records of p that a suppression hides (suppressed_by), or
 * that it would hide but for its limit (over_limit), and fills p's
 * suppressed totals. */
void prof_supps_apply(const struct prof_supps *s, struct prof_process *p);

#endif
