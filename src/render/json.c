/* json.c — the machine report (schema in the README). */
#include <stdlib.h>

#include "analyze/unbias.h"
#include "render/render.h"

void render_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c == '\t')
			fputs("\\t", out);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void json_frame(FILE *out, const struct sym_frame *f)
{
	fprintf(out, "{\"pc\": \"0x%llx\", \"function\": ", (unsigned long long)f->pc);
	render_json_string(out, f->function ? f->function : "??");
	fprintf(out, ", \"file\": ");
	if (f->file)
		render_json_string(out, f->file);
	else
		fputs("null", out);
	fprintf(out, ", \"line\": %d, \"module\": ", f->line);
	if (f->module)
		render_json_string(out, f->module);
	else
		fputs("null", out);
	fprintf(out, ", \"inlined\": %s}", f->inlined ? "true" : "false");
}

/* A stack's frames, the JSON array's items (no brackets). */
static void json_u64_or_null(FILE *out, uint64_t v)
{
	if (v)
		fprintf(out, "%llu", (unsigned long long)v);
	else
		fputs("null", out);
}

static void json_frames(FILE *out, const struct sym_frame *frames, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		fputs(j ? ",\n    " : "\n    ", out);
		json_frame(out, &frames[j]);
	}
}

void render_json_process(FILE *out, const struct prof_process *p,
			 const struct render_json_opts *o)
{
	const struct fmt_leaks *l = &p->raw;
	fprintf(out, "{\"heaptrail\": 1, \"pid\": %ld, \"ppid\": %ld, \"command\": [", l->pid, l->ppid);
	for (size_t i = 0; i < l->argc; i++) {
		if (i)
			fputs(", ", out);
		render_json_string(out, l->argv[i]);
	}
	fputs("],\n \"exit\": ", out);
	if (l->exit_how == FMT_EXIT_STATUS)
		fprintf(out, "{\"status\": %d}", l->exit_code);
	else if (l->exit_how == FMT_EXIT_SIGNAL)
		fprintf(out, "{\"signal\": %d}", l->exit_code);
	else
		fputs("null", out);
	fprintf(out, ",\n \"totals\": {\"allocs\": %llu, \"frees\": %llu, \"bytes_allocated\": %llu, "
		"\"in_use_bytes\": %llu, \"in_use_blocks\": %llu, \"untracked\": %llu},\n",
		(unsigned long long)l->allocs, (unsigned long long)l->frees,
		(unsigned long long)l->bytes_allocated, (unsigned long long)l->in_use_bytes,
		(unsigned long long)l->in_use_blocks, (unsigned long long)l->dropped);
	if (l->shape.known) {
		/* exact runs: heaptrack's temporaries (per thread) and the
		 * allocations per size class [2^k, 2^(k+1)) */
		fprintf(out, " \"shape\": {\"temporary\": %llu, \"sizes\": [",
			(unsigned long long)l->shape.temporary);
		for (int k = 0; k < FMT_SHAPE_BUCKETS; k++)
			fprintf(out, "%s%llu", k ? ", " : "", (unsigned long long)l->shape.sizes[k]);
		fputs("]},\n", out);
	}
	if (l->sample > 1) {
		/* how sure the estimates are (analyze/unbias.h) */
		double lo, hi;
		prof_interval90((double)l->in_use_bytes, p->in_use_var, &lo, &hi);
		fprintf(out, " \"sampling\": {\"interval\": %llu, \"in_use_samples\": %llu, "
			"\"in_use_bytes_90\": [%.0f, %.0f]},\n", (unsigned long long)l->sample,
			(unsigned long long)p->in_use_nsampled, lo, hi);
	}
	fputs(" \"summary\": {", out);
	for (int k = 0; k < FMT_KIND_COUNT; k++) {
		/* in_use alone when unclassified, the four kinds when classified */
		if ((k == FMT_KIND_IN_USE) == l->classified)
			continue;
		fprintf(out, "\"%s\": {\"bytes\": %llu, \"blocks\": %llu}, ", fmt_kind_names[k],
			(unsigned long long)p->kind_bytes[k], (unsigned long long)p->kind_blocks[k]);
	}
	fprintf(out, "\"suppressed\": {\"bytes\": %llu, \"blocks\": %llu}",
		(unsigned long long)p->supp_bytes, (unsigned long long)p->supp_blocks);
	fputs("},\n", out);
	if (l->allocator_bypassed) {
		fputs(" \"allocator_bypassed\": ", out);
		render_json_string(out, l->allocator_bypassed);
		fputs(",\n", out);
	}
	if (l->check)
		fprintf(out, " \"check\": {\"number\": %u, \"mode\": \"%s\"},\n", l->check,
			l->check_increased ? "increased" : "all");
	size_t npools;
	struct prof_pool_node *t = prof_pool_tree(p, &npools);
	if (npools) {
		fputs(" \"pools\": [", out);
		for (size_t i = 0; i < npools; i++) {
			const struct fmt_pool *pl = t[i].pool;
			fprintf(out, "%s\n  {\"id\": %llu, \"name\": ", i ? "," : "",
				(unsigned long long)pl->id);
			render_json_string(out, prof_pool_name(p, pl->id));
			fputs(", \"parent\": ", out);
			if (pl->parent && fmt_leaks_pool(l, pl->parent))
				fprintf(out, "%llu", (unsigned long long)pl->parent);
			else
				fputs("null", out);
			fprintf(out, ", \"alive\": %s, \"bytes\": %llu, \"blocks\": %llu, "
				"\"tree_bytes\": %llu, \"tree_blocks\": %llu, "
				"\"lost_bytes\": %llu, \"lost_blocks\": %llu}",
				pl->alive ? "true" : "false", (unsigned long long)pl->bytes,
				(unsigned long long)pl->blocks, (unsigned long long)t[i].tree_bytes,
				(unsigned long long)t[i].tree_blocks,
				(unsigned long long)t[i].lost_bytes,
				(unsigned long long)t[i].lost_blocks);
		}
		fputs("],\n", out);
	}
	free(t);
	if (p->pool_filter) {
		fputs(" \"pool_filter\": ", out);
		render_json_string(out, p->pool_filter);
		fputs(",\n", out);
	}
	/* heap errors: valgrind's "N errors from M contexts", each context
	 * with its two stacks */
	if (l->guard)
		fprintf(out, " \"guard\": {\"guarded\": %llu, \"slots_full\": %llu},\n",
			(unsigned long long)l->guarded, (unsigned long long)l->guard_full);
	if (l->errors_checked || p->nerrors)
		fprintf(out, " \"error_summary\": {\"errors\": %llu, \"contexts\": %zu, "
			"\"suppressed\": {\"errors\": %llu, \"contexts\": %zu}},\n",
			(unsigned long long)p->error_count, p->error_contexts,
			(unsigned long long)p->supp_errors, p->supp_error_contexts);
	if (p->error_contexts) {
		/* those a suppression hides are left out, as its records are */
		fputs(" \"errors\": [", out);
		bool first_error = true;
		for (size_t i = 0; i < p->nerrors; i++) {
			const struct prof_heap_error *e = &p->errors[i];
			if (e->suppressed_by)
				continue;
			fprintf(out, "%s\n  {\"kind\": \"%s\", \"count\": %llu, \"size\": %llu, "
				"\"allocator\": ", first_error ? "" : ",", fmt_error_kind_names[e->kind],
				(unsigned long long)e->count, (unsigned long long)e->size);
			first_error = false;
			if (e->alloc_fn >= 0)
				render_json_string(out, prof_alloc_fn_name(e->alloc_fn));
			else
				fputs("null", out);
			if (e->kind == FMT_ERROR_INVALID)
				fprintf(out, ", \"where\": \"%s\", \"offset\": %llu",
					fmt_error_where_names[e->where],
					(unsigned long long)e->offset);
			if (fmt_error_guarded(e->kind))
				fprintf(out, ", \"access\": \"%s\", \"offset\": %lld",
					fmt_error_where_names[e->where], (long long)e->offset);
			if (e->kind == FMT_ERROR_SIZE_MISMATCH)
				fprintf(out, ", \"dealloc_size\": %llu", (unsigned long long)e->given);
			if (e->kind == FMT_ERROR_ALIGN_MISMATCH) {
				/* null: the operator took no alignment (default-aligned) */
				fputs(", \"alloc_align\": ", out);
				json_u64_or_null(out, e->align);
				fputs(", \"dealloc_align\": ", out);
				json_u64_or_null(out, e->given);
			}
			fputs(", \"deallocator\": ", out);
			if (e->free_fn >= 0)
				render_json_string(out, prof_alloc_fn_name(e->free_fn));
			else
				fputs("null", out);
			char supp[512];
			if (o && o->suppressions && render_error_suppression(e, supp, sizeof supp)) {
				fputs(", \"suppression\": ", out);
				render_json_string(out, supp);
			}
			fputs(", \"free_stack\": [", out);
			json_frames(out, e->free_frames, e->nfree);
			if (e->prev_frames && fmt_error_guarded(e->kind)) {
				fputs("], \"access_stack\": [", out);
				json_frames(out, e->prev_frames, e->nprev);
			} else if (fmt_error_guarded(e->kind)) {
				/* its slack found written: at its free, or at this
				 * report (still in use) */
				fprintf(out, "], \"found_at\": \"%s\"",
					e->free_frames ? "free" : "report");
				fputs(", \"access_stack\": [", out);
			} else if (e->prev_frames) {
				fputs("], \"first_free\": ", out);
				render_json_string(out, prof_alloc_fn_name(e->prev_fn));
				fputs(", \"first_free_stack\": [", out);
				json_frames(out, e->prev_frames, e->nprev);
			}
			fputs("], \"alloc_stack\": [", out);
			json_frames(out, e->alloc_frames, e->nalloc);
			fputs("]}", out);
		}
		fputs("],\n", out);
	}
	fputs(" \"records\": [", out);
	bool first = true;
	size_t shown = 0, more = 0;
	uint64_t more_bytes = 0;
	for (size_t i = 0; i < p->nrecords; i++) {
		const struct prof_record *r = &p->records[i];
		if (r->suppressed_by)
			continue;
		if (o && o->max_records && shown == o->max_records) {
			more++;
			more_bytes += r->bytes;
			continue;
		}
		shown++;
		fprintf(out, "%s\n  {\"kind\": \"%s\", \"bytes\": %llu, \"blocks\": %llu, ",
			first ? "" : ",", fmt_kind_names[r->kind], (unsigned long long)r->bytes,
			(unsigned long long)r->blocks);
		first = false;
		if (l->sample > 1) {
			double lo, hi;
			prof_interval90((double)r->bytes, r->var_bytes, &lo, &hi);
			fprintf(out, "\"samples\": %llu, \"bytes_90\": [%.0f, %.0f], ",
				(unsigned long long)r->nsampled, lo, hi);
		}
		if (r->has_increase)
			fprintf(out, "\"increase\": {\"bytes\": %llu, \"blocks\": %llu}, ",
				(unsigned long long)r->inc_bytes, (unsigned long long)r->inc_blocks);
		if (r->over_limit)
			fprintf(out, "\"over_suppression_limit\": true, ");
		if (r->pool_id) {
			fputs("\"pool\": ", out);
			render_json_string(out, prof_pool_name(p, r->pool_id));
			fputs(", ", out);
		}
		char supp[512];
		if (o && o->suppressions && render_suppression_pattern(r, supp, sizeof supp)) {
			fputs("\"suppression\": ", out);
			render_json_string(out, supp);
			fputs(", ", out);
		}
		fputs("\"allocator\": ", out);
		render_json_string(out, prof_alloc_fn_name(r->alloc_fn));
		fputs(", \"stack\": [", out);
		json_frames(out, r->frames, r->nframes);
		fputs("]}", out);
	}
	fputs("]", out);
	if (more)
		fprintf(out, ",\n \"records_more\": {\"records\": %zu, \"bytes\": %llu}", more,
			(unsigned long long)more_bytes);
	fputs("}", out);
}

void render_json(FILE *out, const struct prof_run *run, const struct render_json_opts *o)
{
	bool array = run->nprocs != 1;
	if (array)
		fputs("[", out);
	for (size_t i = 0; i < run->nprocs; i++) {
		if (i)
			fputs(",\n", out);
		render_json_process(out, &run->procs[i], o);
	}
	if (array)
		fputs("]", out);
	fputs("\n", out);
}
