/* text.c — the human report. Records read like valgrind's so its users
 * feel at home; each frame is one line: function, file:line, module. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/suppress.h"
#include "analyze/unbias.h"
#include "render/render.h"

const char *render_thousands(char *buf, uint64_t v)
{
	char tmp[32];
	int n = 0, k = 0;
	do {
		if (n && n % 3 == 0)
			tmp[k++] = ',';
		tmp[k++] = (char)('0' + v % 10);
		n++;
	} while ((v /= 10));
	for (int i = 0; i < k; i++)
		buf[i] = tmp[k - 1 - i];
	buf[k] = 0;
	return buf;
}

static const char *kind_phrase(int kind)
{
	switch (kind) {
	case FMT_KIND_DEFINITELY: return "definitely lost";
	case FMT_KIND_INDIRECTLY: return "indirectly lost";
	case FMT_KIND_POSSIBLY: return "possibly lost";
	case FMT_KIND_REACHABLE: return "still reachable";
	default: return "in use";
	}
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void describe_exit(FILE *out, const struct fmt_leaks *l)
{
	if (l->exit_how == FMT_EXIT_STATUS)
		fprintf(out, "exit status %d", l->exit_code);
	else if (l->exit_how == FMT_EXIT_SIGNAL)
		fprintf(out, "killed by signal %d (%s)", l->exit_code, strsignal(l->exit_code));
	else
		fprintf(out, "exit status unknown");
}

/* A frame without a name gets its offset in the file, which addr2line or
 * a later `heaptrail report --binary-path` with debug info can resolve. */
static void render_frame(FILE *out, int i, const struct sym_frame *f, const struct fmt_leaks *l)
{
	bool named = f->function && strcmp(f->function, "??");
	fprintf(out, "    #%-2d %s", i, named ? f->function : "??");
	if (f->file)
		fprintf(out, " (%s:%d)", f->file, f->line);
	if (f->inlined)
		fprintf(out, " [inlined]");
	if (!f->file && f->module) {
		fprintf(out, " (in %s", f->module);
		for (size_t k = 0; !named && k < l->nmodules; k++)
			if (f->pc >= l->modules[k].lo && f->pc < l->modules[k].hi &&
			    !strcmp(l->modules[k].path, f->module)) {
				fprintf(out, " +0x%llx", (unsigned long long)(f->pc - 1 - l->modules[k].base));
				break;
			}
		fputc(')', out);
	} else if (!f->module) {
		fprintf(out, " at 0x%llx", (unsigned long long)f->pc);
	}
	fputc('\n', out);
}

/* Like valgrind, frames below main (libc's start-up code) are left out of
 * the text; the JSON keeps them. */
static bool is_main(const struct sym_frame *f)
{
	return !f->inlined && f->function && !strcmp(f->function, "main");
}

/* "TYPE:^fn$" into buf, fn the first frame's with a function name; NULL
 * when none has one. */
static const char *suppression_of(const char *type, const struct sym_frame *frames, size_t n,
				  char *buf, size_t cap)
{
	for (size_t j = 0; j < n; j++)
		if (frames[j].function && strcmp(frames[j].function, "??")) {
			snprintf(buf, cap, "%s:^%s$", type, frames[j].function);
			return buf;
		}
	return NULL;
}

const char *render_suppression_pattern(const struct prof_record *r, char *buf, size_t cap)
{
	return suppression_of(prof_supp_type_names[PROF_SUPP_LEAK], r->frames, r->nframes, buf,
			      cap);
}

static void render_suppression(FILE *out, const struct prof_record *r)
{
	char buf[512];
	if (render_suppression_pattern(r, buf, sizeof buf))
		fprintf(out, "  suppression: %s\n", buf);
}

const char *render_error_suppression(const struct prof_heap_error *e, char *buf, size_t cap)
{
	/* a guarded block's fault: the code that made the access; its slack
	 * found written (no access seen): the free, or the allocation */
	bool access = fmt_error_guarded(e->kind) && e->prev_frames;
	bool alloc = !access && !e->free_frames;
	return suppression_of(prof_supp_type_names[prof_supp_type_of(e)],
			      access ? e->prev_frames : alloc ? e->alloc_frames : e->free_frames,
			      access ? e->nprev : alloc ? e->nalloc : e->nfree, buf, cap);
}

static void render_error_suppression_line(FILE *out, const struct prof_heap_error *e,
					  const struct render_text_opts *o)
{
	char supp[512];
	if (o->gen_suppressions && render_error_suppression(e, supp, sizeof supp))
		fprintf(out, "  suppression: %s\n", supp);
}

/* "±1,234 at 90 %, from 5 samples" (or "+2,000/-800 ...", few samples)
 * for a sampled estimate of bytes: the interval of analyze/unbias.h. */
static const char *estimate_note(char *buf, size_t cap, uint64_t bytes, double var,
				 uint64_t nsampled)
{
	double lo, hi;
	prof_interval90((double)bytes, var, &lo, &hi);
	char up[32], down[32];
	uint64_t u = hi > (double)bytes ? (uint64_t)(hi - (double)bytes + 0.5) : 0;
	uint64_t dn = lo < (double)bytes ? (uint64_t)((double)bytes - lo + 0.5) : 0;
	uint64_t m = u > dn ? u : dn;
	uint64_t skew = u > dn ? u - dn : dn - u;
	if (skew * 4 <= m)
		snprintf(buf, cap, "±%s at 90 %%, from %" PRIu64 " sample%s",
			 render_thousands(up, m), nsampled, nsampled == 1 ? "" : "s");
	else
		snprintf(buf, cap, "+%s/-%s at 90 %%, from %" PRIu64 " sample%s",
			 render_thousands(up, u), render_thousands(down, dn), nsampled,
			 nsampled == 1 ? "" : "s");
	return buf;
}

static void render_record(FILE *out, const struct prof_record *r, size_t i, size_t n,
			  const struct render_text_opts *o, const struct prof_process *p)
{
	const struct fmt_leaks *l = &p->raw;
	char a[32], b[32], c[96], d[32];
	if (r->has_increase)
		fprintf(out, "%s (+%s) bytes in %s (+%s) %s %s",
			render_thousands(a, r->bytes), render_thousands(b, r->inc_bytes),
			render_thousands(c, r->blocks), render_thousands(d, r->inc_blocks),
			plural(r->blocks, "block", "blocks"), kind_phrase(r->kind));
	else if (l->sample > 1)
		/* an estimate: how sure it is */
		fprintf(out, "%s bytes (%s) in %s %s %s",
			render_thousands(a, r->bytes), estimate_note(c, sizeof c, r->bytes,
								      r->var_bytes, r->nsampled),
			render_thousands(b, r->blocks), plural(r->blocks, "block", "blocks"),
			kind_phrase(r->kind));
	else
		fprintf(out, "%s bytes in %s %s %s",
			render_thousands(a, r->bytes), render_thousands(b, r->blocks),
			plural(r->blocks, "block", "blocks"), kind_phrase(r->kind));
	if (r->pool_id)
		fprintf(out, " in pool %s", prof_pool_name(p, r->pool_id));
	fprintf(out, " [record %zu of %zu], allocated at:\n", i, n);
	fprintf(out, "    #0  %s\n", prof_alloc_fn_name(r->alloc_fn));
	for (size_t j = 0; j < r->nframes; j++) {
		render_frame(out, (int)j + 1, &r->frames[j], l);
		if (is_main(&r->frames[j]))
			break;
	}
	if (!r->nframes)
		fprintf(out, "    (no stack recorded)\n");
	if (r->over_limit && o->supps && (size_t)r->over_limit <= o->supps->n) {
		const struct prof_supp *sp = &o->supps->v[r->over_limit - 1];
		fprintf(out, "  not suppressed: 'leak:%s' (%s) matches, but what it matches is over "
			"its limit of %s bytes\n", sp->pattern, sp->origin,
			render_thousands(a, sp->max_bytes));
	}
	if (o->gen_suppressions)
		render_suppression(out, r);
	fputc('\n', out);
}

static void summary_line(FILE *out, const char *label, uint64_t bytes, uint64_t blocks)
{
	char a[32], b[32];
	fprintf(out, "   %16s: %s bytes in %s %s\n", label, render_thousands(a, bytes),
		render_thousands(b, blocks), plural(blocks, "block", "blocks"));
}

/* The pools, as a tree: what their chunks hold now (at exit: the chunks
 * the program never gave back). */
static void render_pools(FILE *out, const struct prof_process *p)
{
	size_t n;
	struct prof_pool_node *t = prof_pool_tree(p, &n);
	char a[32], b[32], c[32];
	if (!n)
		return;
	fprintf(out, "   pools%s (bytes in their chunks %s, then with the pools under them%s):\n",
		p->pool_filter ? " (filtered)" : "", p->raw.check ? "now" : "at exit",
		p->raw.sample > 1 ? "; sampled: raw samples, not estimates" : "");
	for (size_t i = 0; i < n; i++) {
		const struct fmt_pool *pl = t[i].pool;
		int indent = 2 * (t[i].depth < 20 ? t[i].depth : 20);
		fprintf(out, "     %*s%s%s: %s bytes in %s %s", indent, "", prof_pool_name(p, pl->id),
			pl->alive ? "" : " (destroyed)", render_thousands(a, pl->bytes),
			render_thousands(b, pl->blocks), plural(pl->blocks, "block", "blocks"));
		if (t[i].lost_blocks)
			fprintf(out, ", %s bytes lost", render_thousands(c, t[i].lost_bytes));
		if (t[i].tree_blocks != pl->blocks || t[i].tree_bytes != pl->bytes)
			fprintf(out, "; %s bytes in all", render_thousands(c, t[i].tree_bytes));
		fputc('\n', out);
	}
	free(t);
}

static void render_frames(FILE *out, int fn, const struct sym_frame *f, size_t n,
			  const struct fmt_leaks *l)
{
	if (fn >= 0)
		fprintf(out, "    #0  %s\n", prof_alloc_fn_name(fn));
	for (size_t j = 0; j < n; j++) {
		render_frame(out, (int)j + (fn >= 0), &f[j], l);
		if (is_main(&f[j]))
			break;
	}
}

/* An overflow into a guarded block's slack, found at its free or at a
 * report: where the first changed byte is, the free, the allocation. */
static void render_slack_error(FILE *out, const struct prof_heap_error *e, size_t i, size_t n,
			       const struct fmt_leaks *l, const struct render_text_opts *o)
{
	char a[32], b[32], c[32];
	uint64_t past = e->offset - e->size;
	fprintf(out, "%s %s: Invalid write past a block's end [context %zu of %zu], found ",
		render_thousands(a, e->count), plural(e->count, "error", "errors"), i, n);
	if (e->free_frames) {
		fprintf(out, "when the block was given back, at:\n");
		render_frames(out, e->free_fn, e->free_frames, e->nfree, l);
	} else {
		fprintf(out, "at this report, the block still in use\n");
	}
	fprintf(out, "  the first byte changed is %s %s after a block of %s %s (in the bytes "
		"before its guarded page; the write itself was not seen), allocated at:\n",
		render_thousands(c, past), plural(past, "byte", "bytes"),
		render_thousands(b, e->size), plural(e->size, "byte", "bytes"));
	render_frames(out, e->alloc_fn, e->alloc_frames, e->nalloc, l);
	render_error_suppression_line(out, e, o);
	fputc('\n', out);
}

/* A guarded block's fault (--guard), in valgrind's words: the access,
 * where it fell against the block, the block's free and allocation. */
static void render_guard_error(FILE *out, const struct prof_heap_error *e, size_t i, size_t n,
			       const struct fmt_leaks *l, const struct render_text_opts *o)
{
	char a[32], b[32], c[32];
	if (!e->prev_frames && e->kind == FMT_ERROR_OVERFLOW) {
		render_slack_error(out, e, i, n, l, o);
		return;
	}
	bool uaf = e->kind == FMT_ERROR_USE_AFTER_FREE;
	int64_t off = (int64_t)e->offset;
	fprintf(out, "%s %s: Invalid %s%s [context %zu of %zu], at:\n",
		render_thousands(a, e->count), plural(e->count, "error", "errors"),
		e->where == FMT_WHERE_WRITE ? "write" : "read",
		uaf ? " after free" : " past a block's end", i, n);
	render_frames(out, -1, e->prev_frames, e->nprev, l);
	if (off < 0)
		fprintf(out, "  the address is %s %s before", render_thousands(c, (uint64_t)-off),
			plural((uint64_t)-off, "byte", "bytes"));
	else if ((uint64_t)off >= e->size)
		fprintf(out, "  the address is %s %s after", render_thousands(c, off - e->size),
			plural(off - e->size, "byte", "bytes"));
	else
		fprintf(out, "  the address is %s %s inside", render_thousands(c, (uint64_t)off),
			plural((uint64_t)off, "byte", "bytes"));
	fprintf(out, " a block of %s %s (a guarded page), ", render_thousands(b, e->size),
		plural(e->size, "byte", "bytes"));
	if (uaf && e->free_frames) {
		fprintf(out, "given back at:\n");
		render_frames(out, e->free_fn, e->free_frames, e->nfree, l);
		fprintf(out, "  and allocated at:\n");
	} else {
		fprintf(out, "allocated at:\n");
	}
	render_frames(out, e->alloc_fn, e->alloc_frames, e->nalloc, l);
	render_error_suppression_line(out, e, o);
	fputc('\n', out);
}

/* An alignment of a new or delete as valgrind says it: its bytes, or
 * "default-aligned" (0: the operator took no alignment). */
static const char *align_value(char *buf, size_t cap, uint64_t align)
{
	if (!align)
		return "default-aligned";
	snprintf(buf, cap, "%llu", (unsigned long long)align);
	return buf;
}

/* A heap error's context, in valgrind's words for its kind. */
static void render_heap_error(FILE *out, const struct prof_heap_error *e, size_t i, size_t n,
			      const struct fmt_leaks *l, const struct render_text_opts *o)
{
	if (fmt_error_guarded(e->kind)) {
		render_guard_error(out, e, i, n, l, o);
		return;
	}
	static const char *const what[FMT_ERROR_KIND_COUNT] = {
		[FMT_ERROR_MISMATCHED] = "Mismatched free() / delete / delete []",
		[FMT_ERROR_INVALID] = "Invalid free() / delete / delete[] / realloc()",
		[FMT_ERROR_OVERFLOW] = "", [FMT_ERROR_USE_AFTER_FREE] = "",  /* above */
		[FMT_ERROR_SIZE_MISMATCH] = "", [FMT_ERROR_ALIGN_MISMATCH] = "", /* below */
	};
	char a[32], b[32], c[32], head[128];
	if (e->kind == FMT_ERROR_SIZE_MISMATCH)
		snprintf(head, sizeof head, "Mismatched new/delete size value: %s",
			 render_thousands(c, e->given));
	else if (e->kind == FMT_ERROR_ALIGN_MISMATCH)
		snprintf(head, sizeof head, "Mismatched new/delete alignment alloc value: %s "
			 "dealloc value: %s", align_value(b, sizeof b, e->align),
			 align_value(c, sizeof c, e->given));
	else
		snprintf(head, sizeof head, "%s", what[e->kind]);
	fprintf(out, "%s %s: %s [context %zu of %zu], given back at:\n", render_thousands(a, e->count),
		plural(e->count, "error", "errors"), head, i, n);
	fprintf(out, "    #0  %s\n", prof_alloc_fn_name(e->free_fn));
	for (size_t j = 0; j < e->nfree; j++) {
		render_frame(out, (int)j + 1, &e->free_frames[j], l);
		if (is_main(&e->free_frames[j]))
			break;
	}
	if (e->kind == FMT_ERROR_INVALID && e->where == FMT_WHERE_DATA) {
		fprintf(out, "  the address is in a loaded object's data (a global), not the "
			"heap's; it was not given to the allocator\n");
		goto out;
	}
	if (e->kind == FMT_ERROR_INVALID && e->where == FMT_WHERE_STACK) {
		fprintf(out, "  the address is on the main thread's stack, not the heap's; it was "
			"not given to the allocator\n");
		goto out;
	}
	if (e->kind == FMT_ERROR_INVALID && e->where == FMT_WHERE_FREED) {
		fprintf(out, "  a block of %s %s given back before (a double free, not given to "
			"the allocator again), at:\n", render_thousands(b, e->size),
			plural(e->size, "byte", "bytes"));
		fprintf(out, "    #0  %s\n", prof_alloc_fn_name(e->prev_fn));
		for (size_t j = 0; j < e->nprev; j++)
			render_frame(out, (int)j + 1, &e->prev_frames[j], l);
		fprintf(out, "  and allocated at:\n");
	} else if (e->kind == FMT_ERROR_INVALID)
		fprintf(out, "  the address is %s %s inside a block of %s %s (not given to the "
			"allocator), allocated at:\n", render_thousands(c, e->offset),
			plural(e->offset, "byte", "bytes"), render_thousands(b, e->size),
			plural(e->size, "byte", "bytes"));
	else if (e->kind == FMT_ERROR_SIZE_MISMATCH)
		fprintf(out, "  the block of %s %s (the delete said %s) was allocated at:\n",
			render_thousands(b, e->size), plural(e->size, "byte", "bytes"),
			render_thousands(c, e->given));
	else if (e->kind == FMT_ERROR_ALIGN_MISMATCH && e->align)
		fprintf(out, "  the block of %s %s, aligned to %s by its new (the delete said %s), "
			"was allocated at:\n", render_thousands(b, e->size),
			plural(e->size, "byte", "bytes"), render_thousands(c, e->align),
			e->given ? render_thousands(a, e->given) : "no alignment");
	else if (e->kind == FMT_ERROR_ALIGN_MISMATCH)
		fprintf(out, "  the block of %s %s, from a new without alignment (the delete said "
			"%s), was allocated at:\n", render_thousands(b, e->size),
			plural(e->size, "byte", "bytes"), render_thousands(c, e->given));
	else
		fprintf(out, "  the block of %s %s was allocated at:\n", render_thousands(b, e->size),
			plural(e->size, "byte", "bytes"));
	fprintf(out, "    #0  %s\n", prof_alloc_fn_name(e->alloc_fn));
	for (size_t j = 0; j < e->nalloc; j++) {
		render_frame(out, (int)j + 1, &e->alloc_frames[j], l);
		if (is_main(&e->alloc_frames[j]))
			break;
	}
out:
	render_error_suppression_line(out, e, o);
	fputc('\n', out);
}

static void render_process(FILE *out, const struct prof_process *p,
			   const struct render_text_opts *o)
{
	const struct fmt_leaks *l = &p->raw;
	unsigned shown = o->kinds ? o->kinds : PROF_KINDS_DEFAULT_SHOWN;
	char a[32], b[32], c[32];

	fprintf(out, "== heaptrail: process %ld:", l->pid);
	for (size_t i = 0; i < l->argc && i < 8; i++)
		fprintf(out, " %s", l->argv[i]);
	if (l->argc > 8)
		fprintf(out, " ...");
	if (l->check) {
		fprintf(out, " (leak check %u%s, while running)\n\n", l->check,
			l->check_increased ? ", only what increased since the previous check" : "");
	} else {
		fprintf(out, " (");
		describe_exit(out, l);
		fprintf(out, ")\n\n");
	}

	for (size_t i = 0, k = 0; !o->summary_only && i < p->nerrors; i++)
		if (!p->errors[i].suppressed_by)
			render_heap_error(out, &p->errors[i], ++k, p->error_contexts, l, o);

	size_t nshown = 0, k = 0;
	for (size_t i = 0; i < p->nrecords; i++)
		nshown += !p->records[i].suppressed_by && (shown & PROF_KIND_BIT(p->records[i].kind));
	for (size_t i = 0; !o->summary_only && i < p->nrecords; i++) {
		const struct prof_record *r = &p->records[i];
		if (!r->suppressed_by && (shown & PROF_KIND_BIT(r->kind)))
			render_record(out, r, ++k, nshown, o, p);
	}

	fprintf(out, "== summary for process %ld\n", l->pid);
	/* sampled, the agent does not count allocations one by one: these
	 * are what the samples stand for */
	fprintf(out, "   total heap usage: %s%s allocs, %s frees, %s bytes allocated\n",
		l->sample > 1 ? "about " : "", render_thousands(a, l->allocs),
		render_thousands(b, l->frees), render_thousands(c, l->bytes_allocated));
	if (l->shape.known && l->allocs)
		fprintf(out, "   temporary allocations: %s (%.1f %%; freed by the thread that made "
			"them before it allocated again)\n", render_thousands(a, l->shape.temporary),
			100.0 * (double)l->shape.temporary / (double)l->allocs);
	if (l->sample > 1 && !p->in_use_nsampled) {
		/* no sample: the blocks in use hold B bytes with probability
		 * exp(-B / S) of none being sampled, under S ln 10 at 90 % */
		fprintf(out, "   in use %s: no block sampled (under about %s bytes, at 90 %%)\n",
			l->check ? "now" : "at exit",
			render_thousands(a, (uint64_t)((double)l->sample * 2.302585 + 0.5)));
	} else if (l->sample > 1) {
		char e[96];
		fprintf(out, "   in use %s: about %s bytes (%s) in %s %s\n",
			l->check ? "now" : "at exit", render_thousands(a, l->in_use_bytes),
			estimate_note(e, sizeof e, l->in_use_bytes, p->in_use_var,
				      p->in_use_nsampled),
			render_thousands(b, l->in_use_blocks),
			plural(l->in_use_blocks, "block", "blocks"));
	} else {
		fprintf(out, "   in use %s: %s bytes in %s %s\n", l->check ? "now" : "at exit",
			render_thousands(a, l->in_use_bytes), render_thousands(b, l->in_use_blocks),
			plural(l->in_use_blocks, "block", "blocks"));
	}
	if (l->sample > 1)
		fprintf(out, "   (sampled every %s bytes on average: records and totals in use are "
			"estimates, as are the heap usage counts; leak kinds need --sample 1)\n",
			render_thousands(a, l->sample));
	if (l->classified) {
		fprintf(out, "   LEAK SUMMARY:\n");
		summary_line(out, "definitely lost", p->kind_bytes[FMT_KIND_DEFINITELY],
			     p->kind_blocks[FMT_KIND_DEFINITELY]);
		summary_line(out, "indirectly lost", p->kind_bytes[FMT_KIND_INDIRECTLY],
			     p->kind_blocks[FMT_KIND_INDIRECTLY]);
		summary_line(out, "possibly lost", p->kind_bytes[FMT_KIND_POSSIBLY],
			     p->kind_blocks[FMT_KIND_POSSIBLY]);
		summary_line(out, "still reachable", p->kind_bytes[FMT_KIND_REACHABLE],
			     p->kind_blocks[FMT_KIND_REACHABLE]);
		summary_line(out, "suppressed", p->supp_bytes, p->supp_blocks);
		if (l->scan_us >= 100000)
			fprintf(out, "   (the reachability scan took %.1f s)\n", l->scan_us / 1e6);
		const char *sep = "";
		for (int kk = FMT_KIND_DEFINITELY; kk < FMT_KIND_COUNT && !o->summary_only; kk++)
			if (p->kind_blocks[kk] && !(shown & PROF_KIND_BIT(kk))) {
				fprintf(out, "%s%s", *sep ? sep : "   (not listed above: ", kind_phrase(kk));
				sep = ", ";
			}
		if (*sep)
			fprintf(out, "; --show-leak-kinds=all lists every kind)\n");
	} else if (p->supp_blocks) {
		summary_line(out, "suppressed", p->supp_bytes, p->supp_blocks);
	}
	/* valgrind's line, suppressed part included */
	if (p->error_count || p->supp_errors || l->errors_checked)
		fprintf(out, "   ERROR SUMMARY: %s %s from %zu %s (suppressed: %s from %zu)%s%s\n",
			render_thousands(a, p->error_count),
			plural(p->error_count, "error", "errors"), p->error_contexts,
			plural(p->error_contexts, "context", "contexts"),
			render_thousands(b, p->supp_errors), p->supp_error_contexts,
			l->errors_dropped ? " (and more contexts than the agent could keep)" : "",
			l->sample > 1 ? " (sampled: only the sampled blocks are checked; these are "
					"the errors they made, not an estimate of all)" : "");
	if (l->guard)
		fprintf(out, "   guarded: %s %s on guarded pages%s%s%s\n",
			render_thousands(a, l->guarded), plural(l->guarded, "block", "blocks"),
			l->guard_full ? " (and " : "",
			l->guard_full ? render_thousands(b, l->guard_full) : "",
			l->guard_full ? " more picked while every slot held a live block)" : "");
	if (p->pool_filter)
		fprintf(out, "   (the records and kinds above are those of pool %s and the pools "
			"under it; heap usage and what is in use, the whole process's)\n",
			p->pool_filter);
	if (!o->summary_only)
		render_pools(out, p);
	if (l->allocator_bypassed)
		fprintf(out, "   warning: the program's malloc was that of %s, loaded before "
			"libheaptrail.so: its allocations were not seen (put libheaptrail.so "
			"first in LD_PRELOAD)\n", l->allocator_bypassed);
	if (l->unstopped_threads)
		fprintf(out, "   warning: %u thread(s) could not be stopped for the scan; "
			"what only they point to may show as lost\n", l->unstopped_threads);
	if (l->dropped)
		fprintf(out, "   warning: %s allocations could not be tracked (agent out of room, or"
			" a signal storm in its hooks);"
			" totals above are low\n", render_thousands(a, l->dropped));
	if (!l->freeres && !l->check)
		fprintf(out, "   note: libc's internal caches were not released before this report"
			" (threads were still running), so some of them may be listed\n");
	fputc('\n', out);
}

void render_text(FILE *out, const struct prof_run *run, const struct render_text_opts *opts)
{
	struct render_text_opts none = { 0 };
	for (size_t i = 0; i < run->nprocs; i++)
		render_process(out, &run->procs[i], opts ? opts : &none);
}
