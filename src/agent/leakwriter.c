/*
 * leakwriter.c — writes one leak file (heaptrail.PID.leaks, or
 * heaptrail.PID.check-N.leaks for a leak check) from what the report
 * gathered: the counters, the per-stack totals by kind, the scan's
 * summary. The format is format/leakfile.h's; the CLI reads it. This
 * file only formats: classifying, locking and choosing when to write
 * are the caller's (exitreport.c).
 */
#include <unistd.h>

#include "agent/agent.h"
#include "format/vocab.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/guard.h"
#include "agent/heaperrors.h"
#include "agent/modules.h"
#include "agent/startup.h"
#include "agent/table.h"
#include "agent/writer.h"
#include "agent/leakwriter.h"
#include "format/leakfile.h"
#include "heaptrail.h"
#include "agent/banned.h"

/* Writes /proc/self/cmdline as "arg" lines. */
static void write_args(struct agent_writer *w)
{
	char buf[8192];
	ssize_t n = agent_read_small("/proc/self/cmdline", buf, sizeof buf);
	for (ssize_t i = 0; i < n;) {
		agent_put(w, FMT_LEAKS_ARG " ");
		agent_put_escaped(w, buf + i);
		agent_put(w, "\n");
		i += (ssize_t)agent_strlen(buf + i) + 1;
	}
}

static void write_line_u64(struct agent_writer *w, const char *key, uint64_t v)
{
	agent_put(w, key);
	agent_put(w, " ");
	agent_put_u64(w, v);
	agent_put(w, "\n");
}

/* t: the counters; live_*: what the records add up to, from the same
 * snapshot of the live table, so "in use at exit" and the summary agree
 * even while other threads allocate. */
static void write_header(struct agent_writer *w, const struct agent_leak_report *r)
{
	int status = r->status, killed_by = r->killed_by;
	bool freeres = r->freeres;
	const struct agent_counts *t = r->totals;
	uint64_t live_bytes = r->live_bytes, live_blocks = r->live_blocks;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;

	agent_put(w, FMT_LEAKS_MAGIC " " FMT_STR(FMT_LEAKS_VERSION) "\n");
	write_line_u64(w, FMT_LEAKS_PID, (uint64_t)agent_shown_pid());
	write_line_u64(w, FMT_LEAKS_PPID, (uint64_t)getppid());
	if (agent_config.run_id[0]) {
		agent_put(w, FMT_LEAKS_RUN " ");
		agent_put(w, agent_config.run_id);
		agent_put(w, "\n");
	}
	agent_put(w, FMT_LEAKS_EXE " ");
	agent_put_escaped(w, exe[0] ? exe : "?");
	agent_put(w, "\n");
	write_args(w);
	if (killed_by)
		write_line_u64(w, FMT_LEAKS_EXIT " " FMT_LEAKS_SIGNAL, (uint64_t)killed_by);
	else if (status >= 0)
		write_line_u64(w, FMT_LEAKS_EXIT " " FMT_LEAKS_STATUS, (uint64_t)status);
	else
		agent_put(w, FMT_LEAKS_EXIT " " FMT_LEAKS_UNKNOWN "\n");
	agent_put(w, FMT_LEAKS_TOTALS " ");
	agent_put_u64(w, t->allocs);
	agent_put(w, " ");
	agent_put_u64(w, t->frees);
	agent_put(w, " ");
	agent_put_u64(w, t->bytes_allocated);
	agent_put(w, " ");
	agent_put_u64(w, live_bytes);
	agent_put(w, " ");
	agent_put_u64(w, live_blocks);
	agent_put(w, "\n");
	write_line_u64(w, FMT_LEAKS_DROPPED, t->dropped);
	agent_counters_put_shape(w, FMT_LEAKS_SHAPE);
	if (agent_sampling.period > 1)
		write_line_u64(w, FMT_LEAKS_SAMPLE, agent_sampling.period);
	agent_put(w, freeres ? FMT_LEAKS_FREERES " " FMT_YES "\n" : FMT_LEAKS_FREERES " " FMT_NO "\n");
	if (agent_allocator_bypassed()) {
		agent_put(w, FMT_LEAKS_BYPASSED " ");
		agent_put_escaped(w, agent_allocator_bypassed());
		agent_put(w, "\n");
	}
	agent_modules_write(w);
}

static void write_stack(struct agent_writer *w, uint32_t id, const struct agent_stack *s)
{
	agent_put(w, FMT_LEAKS_STACK " ");
	agent_put_u64(w, id);
	agent_put(w, " ");
	agent_put(w, fmt_alloc_fn_names[s->fn]);
	const uintptr_t *pcs = agent_stack_pcs(s);
	for (int i = 0; i < s->depth; i++) {
		agent_put(w, " ");
		agent_put_hex(w, pcs[i]);
	}
	agent_put(w, "\n");
	if (s->pool > AGENT_POOL_MALLOCLIKE) {
		agent_put(w, FMT_LEAKS_IN_POOL " ");
		agent_put_u64(w, id);
		agent_put(w, " ");
		agent_put_u64(w, s->pool);
		agent_put(w, "\n");
	}
}

/* The pools: every one still alive, and the gone ones a record names. */
static void write_pools(struct agent_writer *w, const struct agent_leak_report *r)
{
	if (!r->pools)
		return;
	uint32_t count = agent_stack_count();
	for (uint32_t id = 1; r->kinds && id <= count && id <= r->nstacks; id++) {
		const struct agent_stack *s = agent_stack_get(id);
		if (s->pool <= AGENT_POOL_MALLOCLIKE || s->pool - 2 >= r->npools)
			continue;
		for (int k = 0; k < FMT_KIND_COUNT; k++)
			if (r->kinds[id].blocks[k])
				r->pools[s->pool - 2].used = true;
	}
	for (uint32_t i = 0; i < r->npools; i++) {
		const struct agent_pool_snap *p = &r->pools[i];
		if ((!p->alive && !p->used) || p->mmap)
			continue;
		agent_put(w, FMT_LEAKS_POOL " ");
		agent_put_u64(w, i + 2);
		agent_put(w, " ");
		agent_put_u64(w, p->parent);
		agent_put(w, p->alive ? " " FMT_LEAKS_ALIVE " " : " " FMT_LEAKS_GONE " ");
		agent_put_u64(w, p->bytes);
		agent_put(w, " ");
		agent_put_u64(w, p->blocks);
		agent_put(w, " ");
		agent_put_escaped(w, p->name[0] ? p->name : "-");
		agent_put(w, "\n");
	}
}

static void write_record(struct agent_writer *w, int kind, uint64_t bytes, uint64_t blocks,
			 uint32_t id)
{
	agent_put(w, FMT_LEAKS_RECORD " ");
	agent_put(w, fmt_kind_names[kind]);
	agent_put(w, " ");
	agent_put_u64(w, bytes);
	agent_put(w, " ");
	agent_put_u64(w, blocks);
	agent_put(w, " ");
	agent_put_u64(w, id);
}


static bool increased(const struct agent_leak_report *r, uint32_t id, int kind, uint64_t *db,
		      uint64_t *dn)
{
	const struct agent_kinds *k = r->kinds;
	uint64_t pb = 0, pn = 0;
	if (r->prev && id <= r->prev_nstacks) {
		pb = r->prev[id].bytes[kind];
		pn = r->prev[id].blocks[kind];
	}
	*db = k[id].bytes[kind] > pb ? k[id].bytes[kind] - pb : 0;
	*dn = k[id].blocks[kind] > pn ? k[id].blocks[kind] - pn : 0;
	return *db || *dn;
}

/* Stacks and records: by kind when kinds is not NULL, else "in_use".
 * With only_increased, a (stack, kind) appears only when it grew since
 * the previous check, and its line carries the increase. */
static void sort_ids(uint32_t *a, size_t n)
{
	for (size_t gap = n / 2; gap; gap /= 2)
		for (size_t i = gap; i < n; i++)
			for (size_t j = i; j >= gap && a[j - gap] > a[j]; j -= gap) {
				uint32_t t = a[j];
				a[j] = a[j - gap];
				a[j - gap] = t;
			}
}

/* The heap errors' contexts (heaperrors.h): "error KIND COUNT SIZE
 * ALLOC_STACK FREE_STACK [OFFSET WHERE [PREV_STACK]]", a size mismatch's
 * with GIVEN after the stacks, an alignment mismatch's with ALLOC_ALIGN
 * GIVEN (format/vocab.h); after the stacks they name. */
static void write_errors(struct agent_writer *w, const struct agent_error *e, size_t n)
{
	agent_put(w, FMT_LEAKS_ERRORS_CHECKED "\n");
	uint64_t guarded, full;
	if (agent_guard_counts(&guarded, &full)) {
		agent_put(w, FMT_LEAKS_GUARDED " ");
		agent_put_u64(w, guarded);
		agent_put(w, " ");
		agent_put_u64(w, full);
		agent_put(w, "\n");
	}
	for (size_t i = 0; i < n; i++) {
		agent_put(w, FMT_LEAKS_ERROR " ");
		agent_put(w, fmt_error_kind_names[e[i].kind]);
		agent_put(w, " ");
		agent_put_u64(w, e[i].count);
		agent_put(w, " ");
		agent_put_u64(w, e[i].size);
		agent_put(w, " ");
		agent_put_u64(w, e[i].alloc_stack);
		agent_put(w, " ");
		agent_put_u64(w, e[i].free_stack);
		if (e[i].kind == FMT_ERROR_ALIGN_MISMATCH) {
			agent_put(w, " ");
			agent_put_u64(w, e[i].align);
		}
		if (fmt_error_new_delete((int)e[i].kind)) {
			agent_put(w, " ");
			agent_put_u64(w, e[i].offset);
		}
		if (e[i].kind == FMT_ERROR_INVALID || fmt_error_guarded((int)e[i].kind)) {
			agent_put(w, " ");
			agent_put_u64(w, e[i].offset);
			agent_put(w, " ");
			agent_put(w, fmt_error_where_names[e[i].where]);
			if (e[i].where == FMT_WHERE_FREED || fmt_error_guarded((int)e[i].kind)) {
				agent_put(w, " ");
				agent_put_u64(w, e[i].prev_stack);
			}
		}
		agent_put(w, "\n");
	}
	if (agent_errors_dropped())
		write_line_u64(w, FMT_LEAKS_ERRORS_DROPPED, agent_errors_dropped());
}

static void write_records(struct agent_writer *w, const struct agent_leak_report *r)
{
	const struct agent_kinds *kinds = r->kinds;
	uint32_t nstacks = r->nstacks;
	bool only_increased = r->check && (r->flags & HEAPTRAIL_LEAKS_INCREASED);
	uint32_t count = agent_stack_count();
	/* the stacks the heap errors name are written too, in id order */
	size_t errlen = AGENT_ERROR_CONTEXTS * (sizeof(struct agent_error) + 3 * sizeof(uint32_t));
	struct agent_error *errs = agent_mmap(errlen);
	size_t nerr = 0, nids = 0, next = 0;
	uint32_t *ids = NULL;
	if (errs) {
		agent_guard_check_live();  /* the live guarded blocks' slack */
		nerr = agent_errors_copy(errs, AGENT_ERROR_CONTEXTS);
		nerr = nerr < AGENT_ERROR_CONTEXTS ? nerr : AGENT_ERROR_CONTEXTS;
		ids = (uint32_t *)(errs + AGENT_ERROR_CONTEXTS);
		for (size_t i = 0; i < nerr; i++) {
			ids[nids++] = errs[i].alloc_stack;
			ids[nids++] = errs[i].free_stack;
			ids[nids++] = errs[i].prev_stack;
		}
		sort_ids(ids, nids);
	}
	for (uint32_t id = 1; id <= count; id++) {
		struct agent_stack *s = agent_stack_get(id);
		bool stack_written = false;
		while (next < nids && ids[next] < id)
			next++;
		if (next < nids && ids[next] == id) {
			write_stack(w, id, s);
			stack_written = true;
		}
		if (!kinds || id > nstacks)
			continue;
		for (int k = 0; k < FMT_KIND_COUNT; k++) {
			uint64_t db = 0, dn = 0;
			if (!kinds[id].blocks[k] || (only_increased && !increased(r, id, k, &db, &dn)))
				continue;
			if (!stack_written)
				write_stack(w, id, s);
			stack_written = true;
			write_record(w, k, kinds[id].bytes[k], kinds[id].blocks[k], id);
			if (only_increased) {
				agent_put(w, " ");
				agent_put_u64(w, db);
				agent_put(w, " ");
				agent_put_u64(w, dn);
			}
			agent_put(w, "\n");
		}
	}
	if (errs) {
		write_errors(w, errs, nerr);
		agent_munmap(errs, errlen);
	}
}

static void file_name(char *name, size_t cap, unsigned check)
{
	size_t n = agent_strlcpy(name, FMT_FILE_PREFIX ".", cap);
	n = (size_t)(agent_put_dec(name + n, (uint64_t)agent_shown_pid()) - name);
	if (check) {
		n += agent_strlcpy(name + n, "." FMT_LEAKS_CHECK, cap - n);
		n = (size_t)(agent_put_dec(name + n, check) - name);
	}
	agent_strlcpy(name + n, FMT_LEAKS_SUFFIX, cap - n);
}

int agent_leakfile_write(const struct agent_leak_report *r)
{
	const struct agent_scan_info *info = r->info;
	char name[64];
	file_name(name, sizeof name, r->check);
	struct agent_writer w;
	int err = agent_writer_open(&w, agent_config.output, name);
	if (err == 0) {
		write_header(&w, r);
		if (r->check) {
			agent_put(&w, FMT_LEAKS_CHECK_LINE " ");
			agent_put_u64(&w, r->check);
			agent_put(&w, r->flags & HEAPTRAIL_LEAKS_INCREASED ? " " FMT_LEAKS_INCREASED "\n" : " " FMT_LEAKS_ALL "\n");
		}
		if (info) {
			agent_put(&w, FMT_LEAKS_CLASSIFIED " " FMT_YES "\n");
			write_line_u64(&w, FMT_LEAKS_SCAN_US, info->scan_ns / 1000);
			for (int k = FMT_KIND_DEFINITELY; k < FMT_KIND_COUNT; k++) {
				agent_put(&w, FMT_LEAKS_SUMMARY " ");
				agent_put(&w, fmt_kind_names[k]);
				agent_put(&w, " ");
				agent_put_u64(&w, info->bytes[k]);
				agent_put(&w, " ");
				agent_put_u64(&w, info->blocks[k]);
				agent_put(&w, "\n");
			}
		}
		if (info && info->threads_unstopped)
			write_line_u64(&w, FMT_LEAKS_UNSTOPPED, (uint64_t)info->threads_unstopped);
		write_pools(&w, r);
		write_records(&w, r);
		agent_put(&w, FMT_LEAKS_END "\n");
		err = agent_writer_commit(&w);
		if (!err && r->wrote)
			agent_strlcpy(r->wrote, w.path, r->wrote_cap);
	}
	if (err) {
		char what[4400];
		size_t n = agent_strlcpy(what, agent_config.output, sizeof what - 80);
		if (n && what[n - 1] != '/')
			what[n++] = '/';
		n += agent_strlcpy(what + n, name, sizeof what - n);
		agent_strlcpy(what + n, "': ", sizeof what - n);
		agent_log(r->check ? "cannot write the leak check '" : "cannot write the leak report '",
			  what, agent_strerror(-err));
	}
	return err;
}
