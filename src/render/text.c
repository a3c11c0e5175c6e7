/* text.c — the human report. Records read like valgrind's so its users
 * feel at home; each frame is one line: function, file:line, module. */
#include <string.h>

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
	default: return "still in use at exit";
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

static void render_frame(FILE *out, int i, const struct sym_frame *f)
{
	fprintf(out, "    #%-2d %s", i, f->function ? f->function : "??");
	if (f->file)
		fprintf(out, " (%s:%d)", f->file, f->line);
	if (f->inlined)
		fprintf(out, " [inlined]");
	if (!f->file && f->module)
		fprintf(out, " (in %s)", f->module);
	else if (!f->module)
		fprintf(out, " at 0x%llx", (unsigned long long)f->pc);
	fputc('\n', out);
}

/* Like valgrind, frames below main (libc's start-up code) are left out of
 * the text; the JSON keeps them. */
static bool is_main(const struct sym_frame *f)
{
	return !f->inlined && f->function && !strcmp(f->function, "main");
}

static void render_process(FILE *out, const struct prof_process *p, bool records)
{
	const struct fmt_leaks *l = &p->raw;
	char a[32], b[32], c[32];

	fprintf(out, "== heaptrail: process %ld:", l->pid);
	for (size_t i = 0; i < l->argc && i < 8; i++)
		fprintf(out, " %s", l->argv[i]);
	if (l->argc > 8)
		fprintf(out, " ...");
	fprintf(out, " (");
	describe_exit(out, l);
	fprintf(out, ")\n\n");

	for (size_t i = 0; records && i < p->nrecords; i++) {
		const struct prof_record *r = &p->records[i];
		fprintf(out, "%s bytes in %s %s %s [record %zu of %zu], allocated at:\n",
			render_thousands(a, r->bytes), render_thousands(b, r->blocks),
			plural(r->blocks, "block", "blocks"), kind_phrase(r->kind), i + 1,
			p->nrecords);
		fprintf(out, "    #0  %s\n", prof_alloc_fn_name(r->alloc_fn));
		for (size_t j = 0; j < r->nframes; j++) {
			render_frame(out, (int)j + 1, &r->frames[j]);
			if (is_main(&r->frames[j]))
				break;
		}
		if (!r->nframes)
			fprintf(out, "    (no stack recorded)\n");
		fputc('\n', out);
	}

	fprintf(out, "== summary for process %ld\n", l->pid);
	fprintf(out, "   total heap usage: %s allocs, %s frees, %s bytes allocated\n",
		render_thousands(a, l->allocs), render_thousands(b, l->frees),
		render_thousands(c, l->bytes_allocated));
	fprintf(out, "   in use at exit:   %s bytes in %s %s\n",
		render_thousands(a, l->in_use_bytes), render_thousands(b, l->in_use_blocks),
		plural(l->in_use_blocks, "block", "blocks"));
	if (l->dropped)
		fprintf(out, "   warning: %s allocations could not be tracked (agent out of room);"
			" totals above are low\n", render_thousands(a, l->dropped));
	if (!l->freeres)
		fprintf(out, "   note: libc's internal caches were not released before this report"
			" (threads were still running), so some of them may be listed\n");
	fputc('\n', out);
}

void render_text(FILE *out, const struct prof_run *run, const struct render_text_opts *opts)
{
	bool records = !(opts && opts->summary_only);
	for (size_t i = 0; i < run->nprocs; i++)
		render_process(out, &run->procs[i], records);
}
