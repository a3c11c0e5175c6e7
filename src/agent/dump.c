/*
 * dump.c — heap profiles written while the program runs, and what
 * triggers them.
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
 * Each stack line: objects and bytes in use, then allocated so far, as
 * raw sampled counts (readers unbias them with S, see sample.c), then the
 * return addresses, innermost first.
 *
 * Triggers: every `interval` bytes allocated and at a new peak (both
 * checked from the allocation path now and then, see sample.c); every
 * `every` ms and the timeline, also from the allocation path (the agent
 * starts no thread: see agent_time_check);
 * on the `signal` option's signal; from the API; at exit. The
 * peak keeps a single file, rewritten only when the peak has grown by
 * peak_step percent since it was last written — never a thousand files.
 * A signal that arrives while its thread is inside the agent (perhaps
 * holding a table lock) leaves the work to that thread's way out.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "format/options.h"
#include "agent/banned.h"

static atomic_uint dump_seq;
static atomic_int dumping;      /* one dump at a time */

static void put_padded(char *dst, size_t *n, uint64_t v, int width)
{
	char tmp[24];
	int k = 0;
	do
		tmp[k++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (k < width)
		tmp[k++] = '0';
	while (k)
		dst[(*n)++] = tmp[--k];
	dst[*n] = 0;
}

/* PREFIX.PID.SEQ.KIND.heap, or PREFIX.PID.peak.heap */
static void auto_name(char *out, size_t cap, const char *kind)
{
	size_t n;
	if (agent_config.prefix[0])
		n = agent_strlcpy(out, agent_config.prefix, cap - 64);
	else if (agent_config.output[0]) {
		n = agent_strlcpy(out, agent_config.output, cap - 80);
		n += agent_strlcpy(out + n, "/heaptrail", cap - n);
	} else
		n = agent_strlcpy(out, "heaptrail", cap);
	out[n++] = '.';
	put_padded(out, &n, (uint64_t)getpid(), 1);
	out[n++] = '.';
	if (!agent_streq(kind, "peak")) {
		put_padded(out, &n, atomic_fetch_add(&dump_seq, 1), 4);
		out[n++] = '.';
	}
	n += agent_strlcpy(out + n, kind, cap - n);
	agent_strlcpy(out + n, ".heap", cap - n);
}

static uint64_t ms_since_start(void);

/* "# heaptrail-dump ms=M unix_ms=U pid=P [run=ID]": when the dump was
 * taken, for `heaptrail growth`, and by which run (the `run` option).
 * jeprof and pprof skip '#' lines. */
static void put_when(struct agent_writer *w)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	agent_put(w, "# heaptrail-dump ms=");
	agent_put_u64(w, ms_since_start());
	agent_put(w, " unix_ms=");
	agent_put_u64(w, (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000);
	agent_put(w, " pid=");
	agent_put_u64(w, (uint64_t)getpid());
	if (agent_config.run_id[0]) {
		agent_put(w, " run=");
		agent_put(w, agent_config.run_id);
	}
	agent_put(w, "\n");
}

/* The GNU build-id of the ELF image whose first page is mapped at
 * [start, end), read from memory; 0 when there is none within the
 * mapping. hex gets 2 * 20 + 1 bytes at most. */
static int image_build_id(uintptr_t start, uintptr_t end, char *hex)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;
	if (end - start < sizeof *eh || eh->e_ident[0] != 0x7f || eh->e_ident[1] != 'E' ||
	    eh->e_ident[2] != 'L' || eh->e_ident[3] != 'F' || eh->e_ident[4] != ELFCLASS64)
		return 0;
	if (eh->e_phoff > end - start ||
	    (uintptr_t)eh->e_phnum * sizeof(ElfW(Phdr)) > end - start - eh->e_phoff)
		return 0;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(start + eh->e_phoff);
	uintptr_t first = UINTPTR_MAX;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	if (first == UINTPTR_MAX)
		return 0;
	uintptr_t bias = start - (first & ~(uintptr_t)4095);
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_NOTE)
			continue;
		uintptr_t p = bias + ph[i].p_vaddr, stop = p + ph[i].p_memsz;
		if (p < start || stop > end || stop < p)
			continue;
		while (p + sizeof(ElfW(Nhdr)) <= stop) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			uintptr_t name = p + sizeof *nh;
			uintptr_t desc = name + ((nh->n_namesz + 3) & ~3u);
			uintptr_t next = desc + ((nh->n_descsz + 3) & ~3u);
			if (next > stop || next <= p)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    agent_streq((const char *)name, "GNU") && nh->n_descsz &&
			    nh->n_descsz <= 20) {
				const unsigned char *d = (const unsigned char *)desc;
				for (uint32_t k = 0; k < nh->n_descsz; k++) {
					hex[2 * k] = "0123456789abcdef"[d[k] >> 4];
					hex[2 * k + 1] = "0123456789abcdef"[d[k] & 15];
				}
				hex[2 * nh->n_descsz] = 0;
				return 1;
			}
			p = next;
		}
	}
	return 0;
}

static uintptr_t parse_hex(const char **s)
{
	uintptr_t v = 0;
	for (;; ++*s) {
		char c = **s;
		if (c >= '0' && c <= '9')
			v = v << 4 | (uintptr_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uintptr_t)(c - 'a' + 10);
		else
			return v;
	}
}

struct maps_line {
	uintptr_t start, end, offset;
	char perms[4];
	const char *path;   /* NULL when the mapping names no file */
};

static bool parse_maps_line(const char *s, struct maps_line *m)
{
	m->start = parse_hex(&s);
	if (*s++ != '-')
		return false;
	m->end = parse_hex(&s);
	if (*s++ != ' ')
		return false;
	for (int i = 0; i < 4; i++)
		if (!(m->perms[i] = *s++))
			return false;
	if (*s++ != ' ')
		return false;
	m->offset = parse_hex(&s);
	while (*s && *s != '/')
		s++;
	m->path = *s && !agent_strstarts(s, "/dev/") ? s : NULL;
	return m->end > m->start;
}

static void put_build_id(struct agent_writer *w, const struct maps_line *m, const char *path)
{
	char hex[48];
	if (!image_build_id(m->start, m->end, hex))
		return;
	agent_put(w, "# build-id ");
	agent_put(w, hex);
	agent_put(w, " ");
	agent_put(w, path);
	agent_put(w, "\n");
}

/* "# build-id HEX PATH" lines for the ELF images in the process's maps,
 * after the maps (jeprof and pprof skip '#' lines there). The id is read
 * from memory, so no lock is taken; and only from a private, readable
 * mapping at file offset 0 of a file that also has an executable mapping:
 * a loaded image, never a data file that another process may truncate
 * under us (reading it would raise SIGBUS). */
static void put_build_ids(struct agent_writer *w)
{
	char buf[4096], line[512], cand_path[512] = "";
	struct maps_line cand = { 0 };
	size_t len = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] != '\n') {
				if (len < sizeof line - 1)
					line[len++] = buf[i];
				continue;
			}
			line[len] = 0;
			len = 0;
			struct maps_line m;
			if (!parse_maps_line(line, &m) || !m.path)
				continue;
			if (m.perms[0] == 'r' && m.perms[3] == 'p' && m.offset == 0) {
				cand = m;
				agent_strlcpy(cand_path, m.path, sizeof cand_path);
			}
			if (m.perms[2] == 'x' && cand_path[0] && agent_streq(m.path, cand_path)) {
				put_build_id(w, &cand, cand_path);
				cand_path[0] = 0;
			}
		}
	}
	close(fd);
}

static void put_counts(struct agent_writer *w, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	agent_put_u64(w, a);
	agent_put(w, ": ");
	agent_put_u64(w, b);
	agent_put(w, " [");
	agent_put_u64(w, c);
	agent_put(w, ": ");
	agent_put_u64(w, d);
	agent_put(w, "] @");
}

static int dump_now(const char *path, const char *kind)
{
	char name[4352];
	int err = 0;
	if (atomic_exchange(&dumping, 1))
		return -EBUSY;
	int saved_busy = agent_tls.busy;
	agent_tls.busy = 1;

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
	agent_live_per_stack_locked(live, nstacks);
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
	agent_put(&w, "heap profile: ");
	put_counts(&w, in_n, in_b, all_n, all_b);
	agent_put(&w, " heap_v2/");
	agent_put_u64(&w, agent_config.sample);
	agent_put(&w, "\n");
	put_when(&w);
	for (uint32_t id = 1; id <= nstacks; id++) {
		struct agent_stack *s = agent_stack_get(id);
		if (!live[id].blocks[FMT_KIND_IN_USE] && !live[id].blocks[ALL])
			continue;
		put_counts(&w, live[id].blocks[FMT_KIND_IN_USE], live[id].bytes[FMT_KIND_IN_USE],
			   live[id].blocks[ALL], live[id].bytes[ALL]);
		const uintptr_t *pcs = agent_stack_pcs(s);
		for (int i = 0; i < s->depth; i++) {
			agent_put(&w, " ");
			agent_put_hex(&w, pcs[i]);
		}
		agent_put(&w, "\n");
	}
	agent_put(&w, "\nMAPPED_LIBRARIES:\n");
	agent_put_file(&w, "/proc/self/maps");
	put_build_ids(&w);
	err = agent_writer_commit(&w);
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
	agent_tls.busy = saved_busy;
	atomic_store(&dumping, 0);
	return err;
}

/* A program thread may write the dump (a signal handler, pending work):
 * its open/write/close must not be where a pthread_cancel acts, or the
 * thread would vanish with the dump half done and `dumping` set. */
int agent_dump(const char *path, const char *kind)
{
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int err = dump_now(path, kind);
	pthread_setcancelstate(cancel, NULL);
	return err;
}

/* jemalloc's prof.reset with a new lg_sample: every sample so far was
 * drawn at the old rate, so all of them are forgotten, as jemalloc does. */
void agent_resample(uint64_t sample)
{
	if (sample == agent_config.sample)
		return;
	agent_tables_lock_all();
	agent_live_clear_locked();
	if (agent_filter)  /* saturated slots (the bootstrap buffer's) stay */
		for (size_t i = 0; i < (1u << 20); i++)
			if (atomic_load_explicit(&agent_filter[i], memory_order_relaxed) != 0xffff)
				atomic_store_explicit(&agent_filter[i], 0, memory_order_relaxed);
	agent_config.sample = sample;
	if (sample > 1 && !agent_filter)
		agent_filter_init();
	agent_config.leak_kinds = false;  /* the blocks before now are gone */
	agent_tables_unlock_all();
	agent_reset_cumulative();
	agent_tls.sample_left = 0;
	agent_tls.rng = 0;
}

void agent_reset_cumulative(void)
{
	uint32_t n = agent_stack_count();
	for (uint32_t id = 1; id <= n; id++) {
		struct agent_stack *s = agent_stack_get(id);
		atomic_store(&s->total_bytes, 0);
		atomic_store(&s->total_blocks, 0);
	}
}

/* ---------- interval and peak ---------- */

static _Atomic uint64_t next_interval;  /* bytes allocated at the next dump */
static _Atomic uint64_t peak_written;   /* estimated live bytes of the peak dump */
static atomic_int checking;

void agent_triggers_check(void)
{
	if (atomic_exchange(&checking, 1))
		return;
	struct agent_counts t;
	agent_counters_sum(&t);
	if (agent_config.interval) {
		uint64_t next = atomic_load(&next_interval);
		if (!next)
			next = agent_config.interval;
		if (t.bytes_allocated >= next) {
			while (next <= t.bytes_allocated)
				next += agent_config.interval;
			atomic_store(&next_interval, next);
			agent_dump(NULL, "interval");
		} else {
			atomic_store(&next_interval, next);
		}
	}
	if (agent_config.peak) {
		int64_t live = (int64_t)t.est_bytes;
		uint64_t written = atomic_load(&peak_written);
		if (live > 0 && (uint64_t)live > written + written / 100 * (uint64_t)agent_config.peak_step &&
		    (uint64_t)live >= (1u << 20)) {
			if (agent_dump(NULL, "peak") == 0)
				atomic_store(&peak_written, (uint64_t)live);
		}
	}
	atomic_store(&checking, 0);
}

/* ---------- the timer: timeline and `every` ---------- */

/* The timeline is appended to by path, one open, check, write and close
 * per row: the agent holds no descriptor the program could see, close
 * (close_range) or have replaced (dup2) — a row never lands in a file
 * of the program's. The file is the one the agent created (its device
 * and inode are checked at every row); if something else is found at
 * its name, the timeline stops with a message. */
static bool timeline_on;
static char timeline_path[4352];
static uint64_t timeline_dev, timeline_ino;
static uint64_t timeline_last_ms;
static struct timespec started;

static uint64_t ms_since_start(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	/* in ns first: a negative nanosecond difference must not round
	 * towards zero (two readings 1 ms apart would get the same ms) */
	int64_t ns = (int64_t)(now.tv_sec - started.tv_sec) * 1000000000 +
		     (int64_t)(now.tv_nsec - started.tv_nsec);
	return ns > 0 ? (uint64_t)ns / 1000000 : 0;
}

static uint64_t rss_bytes(void)
{
	char buf[128];
	if (agent_read_small("/proc/self/statm", buf, sizeof buf) < 0)
		return 0;
	const char *p = buf;
	while (*p && *p != ' ')
		p++;  /* skip the size field; resident is the second */
	uint64_t pages = 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		pages = pages * 10 + (uint64_t)(*p - '0');
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void put_num(char *dst, size_t *n, uint64_t v)
{
	put_padded(dst, n, v, 1);
}

/* Appends line to the timeline as one write, so rows never interleave. */
static void timeline_append(const char *line, size_t n)
{
	struct agent_rlimit_raise lim = { 0 };
	int fd = open(timeline_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EMFILE && agent_rlimit_raise(&lim))
		fd = open(timeline_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP) {
			timeline_on = false;
			agent_log("the timeline file '", timeline_path, "' is gone: timeline stopped");
		}
		agent_rlimit_restore(&lim);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != timeline_dev ||
	    (uint64_t)st.st_ino != timeline_ino) {
		timeline_on = false;
		agent_log("the timeline file '", timeline_path,
			  "' was replaced by another file: timeline stopped");
	} else {
		ssize_t r = write(fd, line, n);
		(void)r;
	}
	close(fd);
	agent_rlimit_restore(&lim);
}

static void dump_signal_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	bool ours = si && si->si_code == SI_QUEUE && FMT_SIGVAL_IS_OURS(si->si_value.sival_int);
	if (!ours && agent_sig_program_has_handler(sig)) {
		/* the program's own use of the signal: a plain kill is a dump
		 * request only while the program has no handler on it */
		agent_sig_program(sig, si, uc);
		errno = saved;
		return;
	}
	if (agent_tls.busy)
		atomic_fetch_or(&agent_pending, AGENT_PENDING_DUMP_SIGNAL);
	else
		agent_dump(NULL, "signal");
	errno = saved;
}

/* Creates heaptrail.PID.timeline with its header line, through the
 * writer (a fresh 0600 file, renamed into place), and remembers which
 * file it is. */
static void open_timeline(void)
{
	char name[64];
	size_t n = agent_strlcpy(name, "heaptrail.", sizeof name);
	put_num(name, &n, (uint64_t)getpid());
	agent_strlcpy(name + n, ".timeline", sizeof name - n);
	timeline_on = false;
	timeline_last_ms = UINT64_MAX;
	struct agent_writer w;
	int err = agent_writer_open(&w, agent_config.output, name);
	if (err == 0) {
		agent_strlcpy(timeline_path, w.path, sizeof timeline_path);
		timeline_dev = w.dev;
		timeline_ino = w.ino;
		agent_put(&w, "# heaptrail timeline 1: ms live_bytes live_blocks "
			  "allocated_bytes rss_bytes; sample=");
		agent_put_u64(&w, agent_config.sample);
		if (agent_config.run_id[0]) {
			agent_put(&w, " run=");
			agent_put(&w, agent_config.run_id);
		}
		agent_put(&w, "\n");
		err = agent_writer_commit(&w);
	}
	if (err) {
		agent_log("cannot write the timeline '", name, "': no timeline");
		return;
	}
	timeline_on = true;
}

static void handle(int sig, void (*fn)(int, siginfo_t *, void *))
{
	if (!agent_sig_own(sig, fn, NULL))
		agent_log("cannot install the dump signal's handler", NULL, NULL);
}

/* The time triggers, timeline and `every`, without a thread of the
 * agent's own: a thread more is something the program would see (its
 * /proc/self/task, unshare(CLONE_NEWUSER) failing with EINVAL), and a
 * timer signal would interrupt its sleeps and reads (EINTR). The heap,
 * and every figure a dump or a row holds, changes only when the agent
 * records an event (a sampled allocation, the free of a tracked block;
 * in exact mode every allocation and free), so the time is looked at
 * there, on the thread that allocates (agent_time_check, from
 * agent_sample_note), and the row or dump is written then. An idle
 * program's heap does not change, so nothing is lost while it sleeps:
 * the next row carries the same figures. Only the RSS column is sampled
 * at those moments, not in between. After an idle stretch of two periods
 * or more, a row with the figures of just before the event (at the
 * previous millisecond) comes first, so a plot shows a step, not a
 * slope. */
atomic_bool agent_time_on;
int agent_time_gate = 1;
uint64_t agent_time_tsc_gate;
static _Atomic uint64_t timeline_next_ms, every_next_ms;  /* ms; UINT64_MAX = off */

/* TSC ticks between two looks at the clock by one thread: 2^20, about a
 * millisecond at 1 GHz and a third of one at 3 GHz (no calibration is
 * needed: a look costs tens of nanoseconds, and what matters is that the
 * first event after an idle stretch looks). 0 when reading the TSC is
 * slow (a hypervisor that traps it), then events are counted instead. */
static uint64_t tsc_gate(void)
{
	for (int tries = 0; tries < 3; tries++) {   /* the best of three: a preemption */
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		uint64_t t0 = agent_rdtsc(), t1 = t0;
		for (int i = 0; i < 64; i++)
			t1 = agent_rdtsc();
		clock_gettime(CLOCK_MONOTONIC, &b);
		int64_t ns = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
		if (t1 == t0)
			return 0;   /* a TSC that does not tick */
		if (ns <= 64 * 200)
			return 1u << 20;
	}
	return 0;   /* more than 200 ns a read: a hypervisor traps it */
}

/* The figures of a row without the event being recorded (d*): the row
 * for "just before" it. */
static void timeline_row(uint64_t ms, int64_t dbytes, int64_t dblocks, uint64_t dalloc)
{
	char line[160];
	size_t n = 0;
	if (ms == timeline_last_ms || (timeline_last_ms != UINT64_MAX && ms < timeline_last_ms))
		return;  /* one row per ms at most, in order */
	timeline_last_ms = ms;
	struct agent_counts t;
	agent_counters_sum(&t);
	int64_t bytes = (int64_t)t.est_bytes - dbytes;
	int64_t blocks = (int64_t)t.est_blocks_x1024 / 1024 - dblocks;
	uint64_t alloc = t.bytes_allocated >= dalloc ? t.bytes_allocated - dalloc : 0;
	put_num(line, &n, ms);
	line[n++] = ' ';
	put_num(line, &n, bytes > 0 ? (uint64_t)bytes : 0);
	line[n++] = ' ';
	put_num(line, &n, blocks > 0 ? (uint64_t)blocks : 0);
	line[n++] = ' ';
	put_num(line, &n, alloc);
	line[n++] = ' ';
	put_num(line, &n, rss_bytes());
	line[n++] = '\n';
	timeline_append(line, n);
}

void agent_time_check(size_t n, int sign, bool counted)
{
	uint64_t now = ms_since_start();
	uint64_t tl = atomic_load_explicit(&timeline_next_ms, memory_order_relaxed);
	uint64_t ev = atomic_load_explicit(&every_next_ms, memory_order_relaxed);
	if (now < tl && now < ev)
		return;
	if (atomic_exchange(&checking, 1))
		return;  /* another thread is at it; the next event looks again */
	int saved_busy = agent_tls.busy;
	agent_tls.busy = 1;
	uint64_t period = agent_config.timeline_ms;
	if (timeline_on && now >= timeline_next_ms) {
		if (now >= timeline_next_ms + period && now > 0) {
			/* idle for a period or more: "just before" first */
			int64_t db = 0, dk = 0;
			uint64_t da = 0;
			if (counted) {
				uint64_t b = n, k = 1024;
				if (agent_config.sample > 1)
					agent_sample_weight(n, &b, &k);
				db = sign * (int64_t)b;
				dk = sign * (int64_t)(k / 1024);
				da = sign > 0 && agent_config.sample <= 1 ? n : 0;
			}
			timeline_row(now - 1, db, dk, da);
		}
		timeline_row(now, 0, 0, 0);
		atomic_store(&timeline_next_ms, now + period);
	} else if (!timeline_on) {
		atomic_store(&timeline_next_ms, UINT64_MAX);
	}
	if (agent_config.every_ms && now >= every_next_ms) {
		atomic_store(&every_next_ms, now + agent_config.every_ms);
		agent_dump(NULL, "every");
	}
	agent_tls.busy = saved_busy;
	atomic_store(&checking, 0);
}

/* The last row, at exit: the heap as the program leaves it, so a plot
 * runs to the end even when the program was idle before exiting. */
void agent_time_final(void)
{
	if (!timeline_on)
		return;
	for (int i = 0; atomic_exchange(&checking, 1); i++) {
		if (i >= 1000)
			return;  /* a checker that never returns (this thread's?) */
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	int saved_busy = agent_tls.busy;
	agent_tls.busy = 1;
	uint64_t now = ms_since_start();
	if (timeline_last_ms != UINT64_MAX && now <= timeline_last_ms)
		now = timeline_last_ms + 1;  /* after the last row, by a ms at most */
	timeline_row(now, 0, 0, 0);
	timeline_next_ms = UINT64_MAX;
	agent_tls.busy = saved_busy;
	atomic_store(&checking, 0);
}

/* detach: the time triggers stop; waits (bounded) for a check that is
 * writing a row or a dump on some thread. */
void agent_triggers_stop(void)
{
	atomic_store(&agent_time_on, false);
	atomic_store(&timeline_next_ms, UINT64_MAX);
	atomic_store(&every_next_ms, UINT64_MAX);
	for (int i = 0; i < 4000 && atomic_load(&checking); i++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}

void agent_triggers_start(void)
{
	clock_gettime(CLOCK_MONOTONIC, &started);
	atomic_store(&checking, 0);  /* a forked child: the checker is gone */
	atomic_store(&agent_time_on, false);
	timeline_next_ms = every_next_ms = UINT64_MAX;
	if (agent_config.dump_signal > 0)
		handle(agent_config.dump_signal, dump_signal_handler);
	if (agent_config.timeline_ms)
		open_timeline();
	if (timeline_on)
		timeline_next_ms = 0;  /* the first recorded event writes a row */
	if (agent_config.every_ms)
		every_next_ms = agent_config.every_ms;
	agent_time_tsc_gate = tsc_gate();
	/* without a usable TSC: sampled events are rare and dearer than a
	 * clock read, look at each; in exact mode, at every 64th event of a
	 * thread */
	agent_time_gate = agent_config.sample > 1 ? 1 : 64;
	if (timeline_on || agent_config.every_ms)
		atomic_store(&agent_time_on, true);
}
