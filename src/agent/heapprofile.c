/*
 * heapprofile.c — writes a heap profile (a "dump") of what is live and
 * what was allocated so far, by stack. What asks for one is elsewhere
 * (triggers.c, the API, the exit report).
 *
 * A dump is gperftools' heap profile text, with the sampled header that
 * both jeprof and Google's pprof read unchanged:
 *
 *   heap profile: 12: 3400 [ 95: 41000] @ heap_v2/524288
 *        3:     1200 [    10:     4000] @ 0x4005d1 0x4007a2 0x7f1c02a0
 *   ...
 *
 *   MAPPED_LIBRARIES:
 *   (the process's /proc/self/maps)
 *
 * (While nothing has been freed the header's allocated count is written
 * with a leading zero, "[012: 3400]": see put_counts.)
 *
 * Each stack line: objects and bytes in use, then allocated so far, as
 * raw sampled counts (readers unbias them with S, see sample.c), then the
 * return addresses, innermost first. One dump at a time (-EBUSY).
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "format/vocab.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/heapprofile.h"
#include "agent/pool.h"
#include "agent/quarantine.h"
#include "agent/table.h"
#include "agent/writer.h"
#include "agent/buildid.h"
#include "agent/heapstats.h"
#include "agent/procmaps.h"
#include "agent/startup.h"
#include "format/options.h"
#include "agent/banned.h"

static atomic_uint dump_seq;
static atomic_int dumping;      /* one dump at a time */

/* PREFIX.PID.SEQ.KIND.heap, or PREFIX.PID.peak.heap */
static void auto_name(char *out, size_t cap, const char *kind)
{
	size_t n;
	if (agent_config.prefix[0])
		n = agent_strlcpy(out, agent_config.prefix, cap - 64);
	else if (agent_config.output[0]) {
		n = agent_strlcpy(out, agent_config.output, cap - 80);
		n += agent_strlcpy(out + n, "/" FMT_FILE_PREFIX, cap - n);
	} else
		n = agent_strlcpy(out, FMT_FILE_PREFIX, cap);
	out[n++] = '.';
	n = (size_t)(agent_put_dec(out + n, (uint64_t)agent_shown_pid()) - out);
	out[n++] = '.';
	if (!agent_streq(kind, FMT_HEAP_PEAK) && !agent_streq(kind, FMT_HEAP_LIVE)) {
		n = (size_t)(agent_put_dec_width(out + n, atomic_fetch_add(&dump_seq, 1), 4) - out);
		out[n++] = '.';
	}
	n += agent_strlcpy(out + n, kind, cap - n);
	agent_strlcpy(out + n, FMT_HEAP_SUFFIX, cap - n);
}

/* "# heaptrail-dump ms=M unix_ms=U pid=P agent_bytes=N rss_anon=R
 * [heap_in_use=H] end=1 [run=ID]": when the dump was taken, for
 * `heaptrail growth`, the agent's own mapped memory (the live endpoint's
 * /metrics), the process's private resident memory (growth compares its
 * rise with the heap's: memory the agent does not see; shared memory,
 * such as PostgreSQL's buffers, is left out), the allocator's own count
 * of its bytes in use when the dump was taken where it may be asked
 * (heapstats.h: growth tells replacing memory from before an attach from
 * growth by it), that the dump ends with a
 * "# heaptrail-end" line (a reader that finds none knows it was cut
 * between two lines), and by which run (the `run` option, last).
 * jeprof and pprof skip '#' lines. */
static void put_when(struct agent_writer *w, int64_t heap_in_use)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	agent_put(w, FMT_HEAP_DUMP_LINE " " FMT_HEAP_MS);
	agent_put_u64(w, agent_ms_since_start());
	agent_put(w, " " FMT_HEAP_UNIX_MS);
	agent_put_u64(w, (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000);
	agent_put(w, " " FMT_HEAP_PID);
	agent_put_u64(w, (uint64_t)agent_shown_pid());
	agent_put(w, " " FMT_HEAP_AGENT_BYTES);
	agent_put_u64(w, atomic_load_explicit(&agent_mapped_bytes, memory_order_relaxed));
	agent_put(w, " " FMT_HEAP_RSS);
	agent_put_u64(w, agent_rss_bytes(true));
	if (heap_in_use >= 0) {
		agent_put(w, " " FMT_HEAP_ALLOC_IN_USE);
		agent_put_u64(w, (uint64_t)heap_in_use);
	}
	agent_put(w, " " FMT_HEAP_ENDS);
	if (agent_config.run_id[0]) {
		agent_put(w, " " FMT_HEAP_RUN);
		agent_put(w, agent_config.run_id);
	}
	agent_put(w, "\n");
}

/* "# heaptrail-exe REAL STARTED": the executable's file (what the maps
 * name) and the path it was started by (AT_EXECFN), when they differ: a
 * program started through a symlink (Debian's redis-server is
 * redis-check-rdb) is shown by the name the user gave it. */
static void put_exe(struct agent_writer *w)
{
	char real[4096];
	const char *started = (const char *)getauxval(AT_EXECFN);
	ssize_t n = readlink("/proc/self/exe", real, sizeof real - 1);
	if (n <= 0 || !started || started[0] != '/')
		return;
	real[n] = 0;
	if (agent_streq(real, started))
		return;
	agent_put(w, FMT_HEAP_EXE " ");
	agent_put_escaped(w, real);
	agent_put(w, " ");
	agent_put_escaped(w, started);
	agent_put(w, "\n");
}

static void put_build_id(struct agent_writer *w, uintptr_t start, uintptr_t end, const char *path)
{
	char hex[48];
	if (!agent_build_id_of_image(start, end, hex))
		return;
	agent_put(w, FMT_HEAP_BUILD_ID " ");
	agent_put(w, hex);
	agent_put(w, " ");
	agent_put(w, path);
	agent_put(w, "\n");
}

/* The last mapping seen that may hold an ELF header, and its file. */
struct build_ids {
	struct agent_writer *w;
	uintptr_t start, end;
	char path[512];
};

static void maps_line_build_id(const struct agent_maps_line *m, void *arg)
{
	struct build_ids *b = arg;
	if (m->end <= m->start || m->name[0] != '/' || agent_strstarts(m->name, "/dev/"))
		return;
	if (m->perms[0] == 'r' && m->perms[3] == 'p' && m->offset == 0) {
		b->start = m->start;
		b->end = m->end;
		agent_strlcpy(b->path, m->name, sizeof b->path);
	}
	if (m->perms[2] == 'x' && b->path[0] && agent_streq(m->name, b->path)) {
		put_build_id(b->w, b->start, b->end, b->path);
		b->path[0] = 0;
	}
}

/* "# build-id HEX PATH" lines for the ELF images in the process's maps,
 * after the maps (jeprof and pprof skip '#' lines there). The id is read
 * from memory, so no lock is taken; and only from a private, readable
 * mapping at file offset 0 of a file that also has an executable mapping:
 * a loaded image, never a data file that another process may truncate
 * under us (reading it would raise SIGBUS). */
static void put_build_ids(struct agent_writer *w)
{
	char buf[4096];
	struct build_ids b = { .w = w };
	agent_maps_read(buf, sizeof buf, maps_line_build_id, &b);
}

/* "A: B [C: D] @". In the header (header set) C gets a leading zero when
 * the pairs are equal (nothing freed yet): pprof reads the allocated-so-far
 * columns only when the bracketed pair differs from the in-use pair *as
 * text* (and is not "0"); otherwise it reads one "space" column, and
 * `pprof -base` of such a dump (a first one) against any later one fails.
 * jeprof and our reader read "012" as 12. */
static void put_counts(struct agent_writer *w, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
		       bool header)
{
	agent_put_u64(w, a);
	agent_put(w, ": ");
	agent_put_u64(w, b);
	agent_put(w, header && a == c && b == d ? " [0" : " [");
	agent_put_u64(w, c);
	agent_put(w, ": ");
	agent_put_u64(w, d);
	agent_put(w, "] @");
}

/* "# heaptrail-pool INDEX NAME" for each sample line (INDEX from 0, in the
 * order written above) whose blocks are a pool's chunks: jeprof and
 * pprof skip it, heaptrail's reader labels the sample with the pool. */
static void put_pools(struct agent_writer *w, const struct agent_kinds *live, uint32_t nstacks,
		      const struct agent_pool_snap *pools, uint32_t npools)
{
	uint64_t index = 0;
	for (uint32_t id = 1; id <= nstacks; id++) {
		if (!live[id].blocks[FMT_KIND_IN_USE] && !live[id].blocks[FMT_KIND_REACHABLE])
			continue;
		const struct agent_stack *s = agent_stack_get(id);
		if (s->pool > AGENT_POOL_MALLOCLIKE) {
			char num[24] = "pool#";
			const char *name = s->pool - 2 < npools ? pools[s->pool - 2].name : "";
			if (!name[0]) {
				agent_put_dec(num + 5, s->pool);
				name = num;
			}
			agent_put(w, FMT_HEAP_POOL " ");
			agent_put_u64(w, index);
			agent_put(w, " ");
			agent_put_escaped(w, name);
			agent_put(w, "\n");
		}
		index++;
	}
}

static int dump_now(const char *path, const char *kind, char *wrote, size_t cap,
		    bool alloc_path)
{
	char name[4352];
	int err = 0;
	if (!agent_attach_reports())
		return -ENOTCONN;  /* detached: nothing recorded since, no dump */
	if (atomic_exchange(&dumping, 1))
		return -EBUSY;
	int saved_busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	/* before the tables' locks: the allocator takes its own */
	int64_t heap_in_use = alloc_path ? agent_heapstats_in_use() : -1;
	if (heap_in_use > 0)  /* freed by the program, kept by the agent */
		heap_in_use -= (int64_t)agent_quarantine_bytes();
	if (heap_in_use < -1)
		heap_in_use = 0;

	uint32_t npools = 0;
	size_t pools_len = 0;
	struct agent_pool_snap *pools = agent_pool_snapshot(&npools, &pools_len);
	uint32_t nstacks = agent_stack_count();
	size_t maplen = ((size_t)nstacks + 1) * sizeof(struct agent_kinds);
	struct agent_kinds *live = agent_mmap(maplen);
	if (!live) {
		err = -ENOMEM;
		goto out;
	}
	/* One snapshot, taken under the locks, for both the header and the
	 * lines: in use (IN_USE) and allocated so far (ALL), so the header is
	 * exactly the sum of the lines, as readers check. */
#define ALL FMT_KIND_REACHABLE
	agent_tables_lock_all();
	uint64_t sample = agent_sampling.period;  /* sample=auto raises it under these locks */
	agent_live_per_stack_locked(live, nstacks);
	agent_pool_per_stack_locked(live, nstacks, true);
	for (uint32_t id = 1; id <= nstacks; id++) {
		struct agent_stack *s = agent_stack_get(id);
		live[id].blocks[ALL] = s->total_blocks;
		live[id].bytes[ALL] = s->total_bytes;
	}
	agent_tables_unlock_all();

	uint64_t in_n = 0, in_b = 0, all_n = 0, all_b = 0;
	for (uint32_t id = 1; id <= nstacks; id++) {
		in_n += live[id].blocks[FMT_KIND_IN_USE];
		in_b += live[id].bytes[FMT_KIND_IN_USE];
		all_n += live[id].blocks[ALL];
		all_b += live[id].bytes[ALL];
	}

	if (!path) {
		auto_name(name, sizeof name, kind);
		path = name;
	}
	struct agent_writer w;
	err = agent_writer_open_path(&w, path);
	if (err)
		goto out;
	agent_put(&w, FMT_HEAP_HEADER " ");
	put_counts(&w, in_n, in_b, all_n, all_b, true);
	agent_put(&w, " " FMT_HEAP_V2 "/");
	agent_put_u64(&w, sample);
	agent_put(&w, "\n");
	put_when(&w, heap_in_use);
	put_exe(&w);
	agent_counters_put_shape(&w, FMT_HEAP_SHAPE);
	for (uint32_t id = 1; id <= nstacks; id++) {
		struct agent_stack *s = agent_stack_get(id);
		if (!live[id].blocks[FMT_KIND_IN_USE] && !live[id].blocks[ALL])
			continue;
		put_counts(&w, live[id].blocks[FMT_KIND_IN_USE], live[id].bytes[FMT_KIND_IN_USE],
			   live[id].blocks[ALL], live[id].bytes[ALL], false);
		const uintptr_t *pcs = agent_stack_pcs(s);
		for (int i = 0; i < s->depth; i++) {
			agent_put(&w, " ");
			agent_put_hex(&w, pcs[i]);
		}
		agent_put(&w, "\n");
	}
	agent_put(&w, "\n" FMT_HEAP_MAPS "\n");
	agent_put_file(&w, "/proc/self/maps");
	put_build_ids(&w);
	put_pools(&w, live, nstacks, pools, npools);
	agent_put(&w, FMT_HEAP_END_LINE "\n");
	err = agent_writer_commit(&w);
	if (!err && wrote)
		agent_strlcpy(wrote, w.path, cap);
out:
	if (err && err != -EBUSY) {
		/* said once per cause: a full disk must not turn every peak or
		 * interval check into a line on the program's stderr */
		static int last_err;
		if (err != last_err) {
			char what[4400];
			size_t n = agent_strlcpy(what, path ? path : kind, sizeof what - 8);
			agent_strlcpy(what + n, "': ", sizeof what - n);
			agent_log("cannot write heap dump '", what, agent_strerror(-err));
		}
		last_err = err;
	}
	agent_munmap(live, maplen);
	agent_munmap(pools, pools_len);
	agent_tls.busy = saved_busy;
	atomic_store(&dumping, 0);
	return err;
}

void agent_heapprofile_forked(void)
{
	atomic_store(&dump_seq, 0);
	atomic_store(&dumping, 0);
}

/* A program thread may write the dump (a signal handler, pending work):
 * its open/write/close must not be where a pthread_cancel acts, or the
 * thread would vanish with the dump half done and `dumping` set. */
int agent_dump(const char *path, const char *kind)
{
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int err = dump_now(path, kind, NULL, 0, false);
	pthread_setcancelstate(cancel, NULL);
	return err;
}

int agent_dump_from_program(const char *path, const char *kind)
{
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int err = dump_now(path, kind, NULL, 0, true);
	pthread_setcancelstate(cancel, NULL);
	return err;
}

int agent_dump_wrote(const char *kind, char *wrote, size_t cap)
{
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int err = dump_now(NULL, kind, wrote, cap, false);
	pthread_setcancelstate(cancel, NULL);
	return err;
}

