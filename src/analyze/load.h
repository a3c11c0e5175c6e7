/*
 * load — one heap dump read (format/heapdump), symbolized (symbolize/)
 * and turned into the model of profile.h, the allocator's own frames
 * dropped. The only part of the analyzer that reads files and runs the
 * symbolizer; it never prints.
 */
#ifndef HEAPTRAIL_ANALYZE_LOAD_H
#define HEAPTRAIL_ANALYZE_LOAD_H

#include "analyze/profile.h"
#include "symbolize/symbolize.h"

/* Keeps the last symbolizer session, for loading several dumps of one
 * process: a dump whose modules are the same as the previous one's
 * (path, load address, build-id) reuses it and its cache. */
struct prof_sym_cache;
struct prof_sym_cache *prof_sym_cache_new(void);
void prof_sym_cache_free(struct prof_sym_cache *c);

struct prof_load_opts {
	const char *binary_path;  /* like PPROF_BINARY_PATH: colon-separated dirs */
	struct prof_sym_cache *sym_cache; /* may be NULL */
	bool no_symbolize;        /* frames are the bare pcs ("0x...") */
	bool keep_alloc_frames;   /* do not drop the allocator's frames */
	const char *pool;         /* only the stacks of this memory pool (the
				     dump's "# heaptrail-pool" lines), or NULL */
	/* called now and then while symbolizing: done of total stacks of the
	 * dump at path (may be NULL) */
	void (*progress)(void *ctx, const char *path, size_t done, size_t total);
	void *progress_ctx;
};

/* Loads and symbolizes one dump. Returns 0, or -errno with *err a message
 * naming the problem (a constant, or p->error); on failure p holds
 * nothing else to release. */
int prof_profile_load(struct prof_profile *p, const char *path,
		      const struct prof_load_opts *o, const char **err);

#endif
