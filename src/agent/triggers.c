/*
 * triggers.c — what decides when a heap profile is written
 * (heapprofile.c), and the timeline.
 *
 * Triggers: every `interval` bytes allocated and at a new peak (both
 * checked from the allocation path now and then, see sample.c); every
 * `every` ms and the timeline, from the agent's ticker thread (started
 * only when one of the two is on: a program that must stay single-
 * threaded, for unshare(CLONE_NEWUSER) say, is profiled without them);
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

/* ---------- the ticker thread: timeline and `every` ---------- */

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
static uint64_t last_every_ms;

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

/* One row of the timeline. */
static void timeline_record(void)
{
	char line[160];
	size_t n = 0;
	uint64_t ms = agent_ms_since_start();
	if (ms == timeline_last_ms)
		return;  /* a late tick caught up: one row per ms at most */
	timeline_last_ms = ms;
	struct agent_counts t;
	agent_counters_sum(&t);
	int64_t bytes = (int64_t)t.est_bytes, blocks = (int64_t)t.est_blocks_x1024 / 1024;
	put_num(line, &n, ms);
	line[n++] = ' ';
	put_num(line, &n, bytes > 0 ? (uint64_t)bytes : 0);
	line[n++] = ' ';
	put_num(line, &n, blocks > 0 ? (uint64_t)blocks : 0);
	line[n++] = ' ';
	put_num(line, &n, t.bytes_allocated);
	line[n++] = ' ';
	put_num(line, &n, rss_bytes());
	line[n++] = '\n';
	timeline_append(line, n);
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

/* The ticker: a thread of the agent's own that wakes every period to
 * append to the timeline and write the `every` dumps. A timer signal
 * would be cheaper to set up, but it interrupts the program's sleeps and
 * reads (EINTR), which a program has every right not to expect. The
 * thread blocks every signal, so none meant for the program lands on it,
 * and the leak scan neither stops it nor counts it. */
atomic_int agent_ticker_tid;

static void *ticker(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	agent_tls.busy = 1;  /* whatever this thread allocates is the agent's */
	atomic_store(&agent_ticker_tid, (int)agent_gettid());
	uint64_t period = (uint64_t)(uintptr_t)arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		next.tv_sec += (time_t)(period / 1000);
		next.tv_nsec += (long)(period % 1000) * 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		/* Late by a whole period or more (a loaded machine): start again
		 * from now instead of firing the missed ticks back to back, which
		 * would write rows with the same time. */
		struct timespec woke;
		clock_gettime(CLOCK_MONOTONIC, &woke);
		if ((uint64_t)(woke.tv_sec - next.tv_sec) * 1000 +
			    (uint64_t)((woke.tv_nsec - next.tv_nsec) / 1000000) >= period &&
		    (woke.tv_sec > next.tv_sec || (woke.tv_sec == next.tv_sec && woke.tv_nsec > next.tv_nsec)))
			next = woke;
		if (timeline_on)
			timeline_record();
		if (agent_config.every_ms) {
			uint64_t now = agent_ms_since_start();
			if (now - last_every_ms + period / 2 >= agent_config.every_ms) {
				last_every_ms = now;
				agent_dump(NULL, "every");
			}
		}
	}
	return NULL;
}

void agent_triggers_start(void)
{
	agent_sample_on_check(agent_triggers_check);
	agent_clock_start();
	last_every_ms = 0;
	atomic_store(&agent_ticker_tid, 0);
	if (agent_config.dump_signal > 0)
		handle(agent_config.dump_signal, dump_signal_handler);
	uint64_t period = agent_config.timeline_ms;
	if (agent_config.every_ms && (!period || agent_config.every_ms < period))
		period = agent_config.every_ms;
	if (!period)
		return;
	if (agent_config.timeline_ms)
		open_timeline();
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	int busy = agent_tls.busy;
	agent_tls.busy = 1;  /* the thread's own allocations are not the program's */
	if (pthread_create(&t, &attr, ticker, (void *)(uintptr_t)period) != 0)
		agent_log("cannot start the timer thread: no timeline or periodic dumps", "", "");
	agent_tls.busy = busy;
	pthread_attr_destroy(&attr);
}
