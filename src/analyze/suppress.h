/*
 * suppress — LeakSanitizer-style suppression files, with limits.
 *
 *   # a comment
 *   leak:cache_init                    any frame's function, file or module
 *   leak:libvendor*.so                 "*" matches anything
 *   leak:^xmalloc$                     '^' and '$' anchor; else a substring
 *   leak:pool_grow:max_bytes=4096      suppress only while the records this
 *                                      pattern matches total <= 4096 bytes
 *   alloc_dealloc_mismatch:PATTERN     heap errors (analyze/report.h's
 *   invalid_free:PATTERN               prof_heap_error), one type per kind:
 *   bad_free:PATTERN                   see prof_supp_type; the pattern is
 *   double_free:PATTERN                matched against the frames of the
 *   heap_buffer_overflow:PATTERN       error's stacks: allocation, free,
 *   heap_use_after_free:PATTERN        first free or faulting access
 *   new_delete_type_mismatch:PATTERN
 *
 * Lines of LSan's and ASan's other types (called_from_lib:,
 * interceptor_via_fun:, odr_violation:...) are accepted and ignored, so an
 * existing LSan or ASan file loads unchanged.
 */
#ifndef HEAPTRAIL_ANALYZE_SUPPRESS_H
#define HEAPTRAIL_ANALYZE_SUPPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prof_process;
struct prof_heap_error;

/* What a suppression hides. The error types take ASan's names for its
 * errors, spelled as ASan spells them in a suppression (odr-violation is
 * odr_violation:), and valgrind's heading for the catch-all. */
enum prof_supp_type {
	PROF_SUPP_LEAK,         /* leak: a leak record */
	PROF_SUPP_MISMATCH,     /* alloc_dealloc_mismatch: any mismatched
				   deallocation (FMT_ERROR_MISMATCHED) */
	PROF_SUPP_INVALID_FREE, /* invalid_free: any invalid free
				   (FMT_ERROR_INVALID), double frees included */
	PROF_SUPP_BAD_FREE,     /* bad_free: an invalid free that is not a
				   double free (a global, the stack, inside a
				   block, an address never handed out) */
	PROF_SUPP_DOUBLE_FREE,  /* double_free: a block given back twice
				   (FMT_WHERE_FREED) */
	PROF_SUPP_OVERFLOW,     /* heap_buffer_overflow: a guarded block's
				   page ran past (FMT_ERROR_OVERFLOW) */
	PROF_SUPP_USE_AFTER_FREE, /* heap_use_after_free: a guarded block used
				     after its free (FMT_ERROR_USE_AFTER_FREE) */
	PROF_SUPP_NEW_DELETE,   /* new_delete_type_mismatch: a sized or aligned
				   delete disagreeing with its new
				   (FMT_ERROR_SIZE_MISMATCH, _ALIGN_MISMATCH) */
	PROF_SUPP_TYPE_COUNT
};
/* "leak", "alloc_dealloc_mismatch"...: each type's word, without its ':' */
extern const char *const prof_supp_type_names[PROF_SUPP_TYPE_COUNT];

struct prof_supp {
	int type;                /* enum prof_supp_type */
	char *pattern;
	bool has_limit;          /* leak: only */
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
 * suppressed totals; marks the heap errors a suppression of their kind
 * hides (suppressed_by) and moves their counts from p's error totals to
 * its suppressed ones (valgrind's "suppressed: N from M"). Call it once
 * per process. */
void prof_supps_apply(const struct prof_supps *s, struct prof_process *p);

/* The type a suppression of e would take: the narrowest that holds it
 * (all but invalid_free). */
enum prof_supp_type prof_supp_type_of(const struct prof_heap_error *e);

#endif
