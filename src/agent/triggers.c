/*
 * triggers.c — what decides when a heap profile is written
 * (heapprofile.c), and the timeline.
 *
 * Triggers: every `interval` bytes allocated and at a new peak (both
 * checked from the allocation path now and then, see sample.c); every
 * `every` ms and the timeline, also from the allocation path (the agent
 * starts no thread: see time_check);
 * on the `signal` option's signal. (The API and the exit report ask for
 * dumps directly.) The peak keeps a single file, rewritten only when the
 * peak has grown by peak_step percent since it was last written — never
 * a thousand files. A signal that arrives while its thread is inside the
 * agent (perhaps holding a table lock) leaves the work to that thread's
 * way out.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "format/vocab.h"
#include "agent/config.h"
#include "agent/counters.h"
#include "agent/heapprofile.h"
#include "agent/hooks.h"
#include "agent/sample.h"
#include "agent/signals.h"
#include "agent/triggers.h"
#include "agent/writer.h"
#include "format/options.h"
#include "agent/banned.h"

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
			agent_dump_from_program(NULL, "interval");
		} else {
			atomic_store(&next_interval, next);
		}
	}
	if (agent_config.peak) {
		int64_t live = (int64_t)t.est_bytes;
		uint64_t written = atomic_load(&peak_written);
		if (live > 0 && (uint64_t)live > written + written / 100 * (uint64_t)agent_config.peak_step &&
		    (uint64_t)live >= (1u << 20)) {
			if (agent_dump_from_program(NULL, "peak") == 0)
				atomic_store(&peak_written, (uint64_t)live);
		}
	}
	atomic_store(&checking, 0);
}

/* ---------- the time triggers: timeline and `every` ---------- */

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
static uint64_t timeline_sample;   /* the S the file last said */

static void put_num(char *dst, size_t *n, uint64_t v)
{
	*n = (size_t)(agent_put_dec(dst + *n, v) - dst);
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
	if (agent_tls.busy || agent_tls.in_loader)
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
	size_t n = agent_strlcpy(name, FMT_FILE_PREFIX ".", sizeof name);
	put_num(name, &n, (uint64_t)agent_shown_pid());
	agent_strlcpy(name + n, FMT_TIMELINE_SUFFIX, sizeof name - n);
	timeline_on = false;
	timeline_last_ms = UINT64_MAX;
	struct agent_writer w;
	int err = agent_writer_open(&w, agent_config.output, name);
	if (err == 0) {
		agent_strlcpy(timeline_path, w.path, sizeof timeline_path);
		timeline_dev = w.dev;
		timeline_ino = w.ino;
		agent_put(&w, FMT_TIMELINE_HEADER ": " FMT_TIMELINE_COLUMNS "; " FMT_TIMELINE_SAMPLE);
		timeline_sample = agent_sampling.period;
		agent_put_u64(&w, timeline_sample);
		if (agent_config.run_id[0]) {
			agent_put(&w, " " FMT_TIMELINE_RUN);
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
	if (!agent_sig_own(sig, fn, NULL, 0))
		agent_log("cannot install the dump signal's handler", NULL, NULL);
}

/* The time triggers, timeline and `every`, without a thread of the
 * agent's own: a thread more is something the program would see (its
 * /proc/self/task, unshare(CLONE_NEWUSER) failing with EINVAL), and a
 * timer signal would interrupt its sleeps and reads (EINTR). The heap,
 * and every figure a dump or a row holds, changes only when the agent
 * records an event (a sampled allocation, the free of a tracked block;
 * in exact mode every allocation and free), so the time is looked at
 * there, on the thread that allocates (time_check, from
 * agent_sample_note), and the row or dump is written then. An idle
 * program's heap does not change, so nothing is lost while it sleeps:
 * the next row carries the same figures. Only the RSS column is sampled
 * at those moments, not in between. After an idle stretch of two periods
 * or more, a row with the figures of just before the event (at the
 * previous millisecond) comes first, so a plot shows a step, not a
 * slope. */
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
	uint64_t sample = agent_sampling.period;
	if (sample != timeline_sample) {
		/* sample=auto raised S: "# sample=S" before the row, which the
		 * reader takes as the file's S from then on (the largest yet,
		 * so the peak's bound stays a bound) */
		timeline_sample = sample;
		agent_strlcpy(line, "# " FMT_TIMELINE_SAMPLE, sizeof line);
		n = agent_strlen(line);
		put_num(line, &n, sample);
		line[n++] = '\n';
		timeline_append(line, n);
		n = 0;
	}
	put_num(line, &n, ms);
	line[n++] = ' ';
	put_num(line, &n, bytes > 0 ? (uint64_t)bytes : 0);
	line[n++] = ' ';
	put_num(line, &n, blocks > 0 ? (uint64_t)blocks : 0);
	line[n++] = ' ';
	put_num(line, &n, alloc);
	line[n++] = ' ';
	put_num(line, &n, agent_rss_bytes(false));
	line[n++] = '\n';
	timeline_append(line, n);
}

static void time_check(size_t n, int sign, bool counted)
{
	uint64_t now = agent_ms_since_start();
	uint64_t tl = atomic_load_explicit(&timeline_next_ms, memory_order_relaxed);
	uint64_t ev = atomic_load_explicit(&every_next_ms, memory_order_relaxed);
	if (now < tl && now < ev)
		return;
	if (atomic_exchange(&checking, 1))
		return;  /* another thread is at it; the next event looks again */
	int saved_busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	uint64_t period = agent_config.timeline_ms;
	if (timeline_on && now >= timeline_next_ms) {
		if (now >= timeline_next_ms + period && now > 0) {
			/* idle for a period or more: "just before" first */
			int64_t db = 0, dk = 0;
			uint64_t da = 0;
			if (counted) {
				uint64_t b = n, k = 1024;
				if (agent_sampling.period > 1)
					agent_sample_weight(n, &b, &k);
				db = sign * (int64_t)b;
				dk = sign * (int64_t)(k / 1024);
				da = sign > 0 && agent_sampling.period <= 1 ? n : 0;
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
		agent_dump_from_program(NULL, "every");
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
		agent_nap_us(1000);
	}
	int saved_busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	uint64_t now = agent_ms_since_start();
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
		agent_nap_us(1000);
	}
}

void agent_triggers_start(void)
{
	agent_sample_on_check(agent_triggers_check);
	agent_sample_on_time(time_check);
	agent_clock_start();
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
	agent_time_gate = agent_sampling.period > 1 ? 1 : 64;
	if (timeline_on || agent_config.every_ms)
		atomic_store(&agent_time_on, true);
}
