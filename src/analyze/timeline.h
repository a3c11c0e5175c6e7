/*
 * timeline — a run's heaptrail.PID.timeline read back: one tick per line
 * the agent's timer thread wrote (src/agent/triggers.c, timeline_record):
 *
 *   # heaptrail timeline 1: ms live_bytes live_blocks allocated_bytes rss_bytes; sample=S
 *   102 106120428 137 147048918 3383296
 *
 * ms counts from the agent's start, the same clock as a dump's ms=, so
 * ticks and dumps can be put side by side. Live bytes and blocks are
 * estimates when the run sampled (sample > 1). The first line must be
 * that header (version 1); other lines starting with '#' are comments.
 * A last line without its newline that could be the start of a row
 * (digits and blanks: a run killed in the middle of a write) is dropped;
 * an empty file, or any other malformed line, is an error.
 * Used by `heaptrail timeline`; pure apart from prof_timeline_load.
 */
#ifndef HEAPTRAIL_ANALYZE_TIMELINE_H
#define HEAPTRAIL_ANALYZE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

struct prof_tick {
	int64_t ms;
	int64_t live_bytes, live_blocks, allocated_bytes, rss_bytes;
};

struct prof_timeline {
	struct prof_tick *ticks;   /* in file order (ms non-decreasing) */
	size_t nticks;
	uint64_t sample;           /* from the header; 0 when it does not say */
	char error[128];           /* what went wrong, when parsing failed */
};

/* Parses len bytes of timeline text into t. Returns 0, or -EINVAL with
 * *err a message naming the line ("line 3: want 5 numbers"; in
 * t->error), or -ENOMEM. On failure t holds nothing else to release. */
int prof_timeline_parse(struct prof_timeline *t, const char *text, size_t len,
			const char **err);

/* Reads and parses the file at path. Returns 0 or -errno with *err set
 * (strerror's text for I/O errors); the message does not repeat path. */
int prof_timeline_load(struct prof_timeline *t, const char *path, const char **err);

/* The index of the tick with the most live bytes (the first of equals),
 * or -1 when t has no ticks. */
long prof_timeline_peak(const struct prof_timeline *t);

void prof_timeline_release(struct prof_timeline *t);

#endif
