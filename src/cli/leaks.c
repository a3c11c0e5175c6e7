/* leaks.c — `heaptrail leaks [--increased] [options] PID`: asks a process
 * running under the agent for a leak check now, waits for the file it
 * writes, and prints it. The process goes on running. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "format/options.h"
#include "format/vocab.h"
#include "cli/cli.h"
#include "render/render.h"

static const char usage[] =
	"usage: heaptrail leaks [options] PID\n"
	"  PID                    a process started under heaptrail (or with the agent\n"
	"                         preloaded)\n"
	"  --increased            list only what grew since the previous check\n"
	"  --timeout SECONDS      how long to wait for the check (default 60)\n"
	"  --json                 print the JSON report instead of text\n"
	CLI_REPORT_OPTS_HELP;

/* Reads /proc/PID/FILE whole (NUL-separated for environ). */
char *cli_read_proc(long pid, const char *file, size_t *len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/%s", pid, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap + 1);
	ssize_t r;
	while (buf && (r = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap) {
			char *nb = realloc(buf, 2 * cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	if (buf)
		buf[n] = 0;
	*len = n;
	return buf;
}

const char *cli_env_get(const char *env, size_t len, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < len; i += strlen(env + i) + 1)
		if (!strncmp(env + i, name, n) && env[i + n] == '=')
			return env + i + n + 1;
	return NULL;
}

/* The mask of a "Name:\tHEX" line of a /proc status file; 0 when absent. */
static uint64_t status_mask(const char *status, const char *name)
{
	const char *p = strstr(status, name);
	return p ? strtoull(p + strlen(name), NULL, 16) : 0;
}

/* Why sending sig to pid would do harm or nothing, from what the kernel
 * says of its dispositions. The agent interposes sigaction/signal on its
 * signals and keeps its own handler in the kernel (the program's
 * disposition is only recorded), so a caught signal is the agent's; one
 * not caught means the program went around libc (a raw rt_sigaction
 * system call) or the agent could not install its handler, and would
 * kill it; one it ignores, or that every one of its threads blocks,
 * would never be acted on. NULL when it is safe. */
const char *cli_signal_refused(long pid, int sig)
{
	static char why[160];
	uint64_t bit = 1ull << (sig - 1);
	size_t len;
	char *st = cli_read_proc(pid, "status", &len);
	if (!st) {
		snprintf(why, sizeof why, "cannot read its /proc status: %s", strerror(errno));
		return why;
	}
	uint64_t ign = status_mask(st, "\nSigIgn:"), cgt = status_mask(st, "\nSigCgt:");
	free(st);
	if (ign & bit) {
		snprintf(why, sizeof why, "it ignores signal %d, its leak check signal", sig);
		return why;
	}
	if (!(cgt & bit)) {
		snprintf(why, sizeof why, "it does not catch signal %d (its handler was reset to "
			 "the default action behind the agent's back), which would kill it", sig);
		return why;
	}
	/* a process-directed signal goes to any thread that does not block it */
	char dirpath[64];
	snprintf(dirpath, sizeof dirpath, "/proc/%ld/task", pid);
	DIR *d = opendir(dirpath);
	bool all_block = d != NULL;
	for (struct dirent *e; d && all_block && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char file[96];
		snprintf(file, sizeof file, "task/%s/status", e->d_name);
		char *ts = cli_read_proc(pid, file, &len);
		if (ts && !(status_mask(ts, "\nSigBlk:") & bit))
			all_block = false;
		free(ts);
	}
	if (d)
		closedir(d);
	if (all_block) {
		snprintf(why, sizeof why, "every thread of it blocks signal %d, its leak check "
			 "signal", sig);
		return why;
	}
	return NULL;
}

/* The highest check number already written by pid in dir. */
static unsigned last_check(const char *dir, long pid)
{
	char prefix[64];
	unsigned best = 0;
	snprintf(prefix, sizeof prefix, FMT_FILE_PREFIX ".%ld." FMT_LEAKS_CHECK, pid);
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			/* exactly PREFIX N.leaks: the agent's temporary file of a
			 * check being written has another name, and is not whole */
			char *end;
			unsigned n = (unsigned)strtoul(e->d_name + strlen(prefix), &end, 10);
			if (strcmp(end, FMT_LEAKS_SUFFIX))
				continue;
			if (n > best)
				best = n;
		}
	if (d)
		closedir(d);
	return best;
}

/* System calls that a handler installed with SA_RESTART (the agent's)
 * does not cut short: a thread waiting in one of them loses nothing to
 * our signal. nanosleep, poll, select and epoll_wait are never restarted
 * (they fail with EINTR), nor is anything with a timeout. x86-64 numbers. */
static bool restarted_syscall(long nr)
{
	static const long ok[] = {
		0 /* read */, 1 /* write */, 17 /* pread64 */, 18 /* pwrite64 */,
		19 /* readv */, 20 /* writev */, 43 /* accept */, 44 /* sendto */,
		45 /* recvfrom */, 46 /* sendmsg */, 47 /* recvmsg */, 61 /* wait4 */,
		73 /* flock */, 202 /* futex */, 247 /* waitid */, 288 /* accept4 */,
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (ok[i] == nr)
			return true;
	return false;
}

/* The thread of pid that our signal disturbs least, or 0 for any (let
 * the kernel choose): one running now (it notices nothing but the time
 * the work takes), else one waiting in a system call that is restarted
 * after the handler, else 0 (a sleeping thread will see EINTR, as it
 * would with `kill`). Threads that block sig are never chosen. */
static pid_t quiet_thread(long pid, int sig)
{
	char dirpath[64];
	snprintf(dirpath, sizeof dirpath, "/proc/%ld/task", pid);
	DIR *d = opendir(dirpath);
	pid_t running = 0, restarting = 0;
	uint64_t bit = 1ull << (sig - 1);
	for (struct dirent *e; d && !running && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char file[96];
		size_t len;
		snprintf(file, sizeof file, "task/%s/status", e->d_name);
		char *st = cli_read_proc(pid, file, &len);
		bool blocks = !st || (status_mask(st, "\nSigBlk:") & bit);
		const char *state = st ? strstr(st, "\nState:\t") : NULL;
		bool is_running = state && state[8] == 'R';
		free(st);
		if (blocks)
			continue;
		pid_t tid = (pid_t)atol(e->d_name);
		if (is_running) {
			running = tid;
			break;
		}
		if (restarting)
			continue;
		/* readable by the tracer's peers only (Yama): else no preference */
		snprintf(file, sizeof file, "task/%s/syscall", e->d_name);
		char *sc = cli_read_proc(pid, file, &len);
		if (sc && sc[0] >= '0' && sc[0] <= '9' && restarted_syscall(atol(sc)))
			restarting = tid;
		free(sc);
	}
	if (d)
		closedir(d);
	return running ? running : restarting;
}

/* The main thread of pid, when it is alive and does not block sig (or
 * stops blocking it within 100 ms: glibc blocks every signal for a
 * moment in pthread_create, and a leak check may have stopped the thread
 * right there): the thread the kernel gives a signal sent to the process
 * first. Sent to it alone, a leak check waits there while the main
 * thread is busy (in the agent's own check, or stopped by another
 * thread's) instead of going to a thread asleep in epoll_wait or
 * nanosleep, which would see EINTR. 0 otherwise. */
static pid_t main_thread(long pid, int sig)
{
	char file[48];
	snprintf(file, sizeof file, "task/%ld/status", pid);
	for (int tries = 0; tries < 20; tries++) {
		size_t len;
		char *st = cli_read_proc(pid, file, &len);
		const char *state = st ? strstr(st, "\nState:\t") : NULL;
		bool alive = state && state[8] != 'Z' && state[8] != 'X';
		bool blocks = st && (status_mask(st, "\nSigBlk:") & (1ull << (sig - 1)));
		free(st);
		if (!alive)
			return 0;
		if (!blocks)
			return (pid_t)pid;
		usleep(5 * 1000);
	}
	return 0;
}

int cli_agent_signal(const struct cli_agent *a, int value, bool quiet)
{
	pid_t tid = quiet ? quiet_thread(a->pid, a->sig) : main_thread(a->pid, a->sig);
	if (tid > 0) {
		/* rt_tgsigqueueinfo: sigqueue to one thread (SI_QUEUE, which the
		 * kernel lets another process send; the agent checks it) */
		siginfo_t si;
		memset(&si, 0, sizeof si);
		si.si_signo = a->sig;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_int = value;
		if (syscall(SYS_rt_tgsigqueueinfo, (pid_t)a->pid, tid, a->sig, &si) == 0)
			return 0;
		/* the thread just ended: to the process, then */
	}
	union sigval val = { .sival_int = value };
	return sigqueue((pid_t)a->pid, a->sig, val);
}

/* The process is gone, or a zombie: no check will come. */
static bool process_ended(long pid)
{
	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return true;
	size_t len;
	char *stat = cli_read_proc(pid, "stat", &len);
	if (!stat)
		return errno == ENOENT;
	/* "PID (COMM) S ...": COMM may hold anything, the state follows its
	 * last ')' */
	const char *close = strrchr(stat, ')');
	bool zombie = close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
	free(stat);
	return zombie;
}

int cli_agent_open(long pid, struct cli_agent *a)
{
	int ret = -1;
	char *env = NULL, *maps = NULL;
	memset(a, 0, sizeof *a);
	a->pid = pid;
	size_t envlen, mapslen;
	maps = cli_read_proc(pid, "maps", &mapslen);
	if (!maps) {
		if (errno == ENOENT)
			cli_error("no process %ld", pid);
		else
			cli_error("cannot inspect process %ld: %s", pid, strerror(errno));
		goto out;
	}
	if (!*maps && process_ended(pid)) {
		cli_error("process %ld is a zombie (it has exited; its parent has not reaped it)", pid);
		goto out;
	}
	/* Never signal a process without the agent: the signal would kill it. */
	if (!strstr(maps, "/libheaptrail.so")) {
		cli_error("process %ld does not run under heaptrail (no libheaptrail.so in its "
			  "memory map)", pid);
		goto out;
	}
	env = cli_read_proc(pid, "environ", &envlen);
	const char *dir = env ? cli_env_get(env, envlen, "HEAPTRAIL_OUTPUT") : NULL;
	char cwd_link[64], cwd[PATH_MAX], attached[PATH_MAX];
	if (!dir && !cli_attached_dir(pid, attached, sizeof attached))
		dir = attached;  /* heaptrail attach: no HEAPTRAIL_OUTPUT */
	if (!dir) {
		/* without an output directory the agent writes into its cwd */
		snprintf(cwd_link, sizeof cwd_link, "/proc/%ld/cwd", pid);
		ssize_t n = readlink(cwd_link, cwd, sizeof cwd - 1);
		if (n <= 0) {
			cli_error("cannot find where process %ld writes its files", pid);
			goto out;
		}
		cwd[n] = 0;
		dir = cwd;
	}
	/* the agent's own parse of its options: name or number, key=value or
	 * key:value, the last well-formed one when given twice */
	const char *opts = env ? cli_env_get(env, envlen, "HEAPTRAIL_OPTIONS") : NULL;
	int sig = fmt_leak_check_signal(opts);
	if (sig <= 0) {
		cli_error("process %ld has leak checks by signal turned off (leak_check_signal=0)", pid);
		goto out;
	}
	const char *why = cli_signal_refused(pid, sig);
	if (why) {
		cli_error("not signalling process %ld: %s", pid, why);
		goto out;
	}
	snprintf(a->dir, sizeof a->dir, "%s", dir);
	a->sig = sig;
	ret = 0;
out:
	free(env);
	free(maps);
	return ret;
}

int cli_agent_leak_check(const struct cli_agent *a, int increased, long timeout_ms,
			 char *path, size_t cap, char *why, size_t whycap)
{
	long pid = a->pid;
	const char *dir = a->dir;
	int sig = a->sig;
	unsigned before = last_check(dir, pid);
	/* to the main thread, the kernel's first choice (a leak check on a
	 * thread caught running, in tests/hostile's storm in the middle of
	 * its fork and dlopen storm, has been seen to crash the program) */
	if (cli_agent_signal(a, FMT_SIGVAL_MAGIC | increased, false)) {
		snprintf(why, whycap, "cannot signal process %ld: %s", pid, strerror(errno));
		return -1;
	}
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		unsigned n = last_check(dir, pid);
		if (n > before) {
			snprintf(path, cap, "%s/" FMT_FILE_PREFIX ".%ld." FMT_LEAKS_CHECK "%u" FMT_LEAKS_SUFFIX,
				 dir, pid, n);
			break;
		}
		if (process_ended(pid) && last_check(dir, pid) == n) {
			snprintf(why, whycap, "process %ld ended before it wrote its leak check", pid);
			return -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= timeout_ms) {
			snprintf(why, whycap, "process %ld wrote no leak check within %ld ms (is it "
				 "stopped, blocking signal %d, or detached from heaptrail?)", pid,
				 timeout_ms, sig);
			return -1;
		}
		usleep(20 * 1000);
	}
	return 0;
}

int cmd_leaks(int argc, char **argv)
{
	struct cli_report_opts o;
	long pid = -1, timeout = 60;
	int increased = 0, ret = 1;
	const char *v;
	struct cli_agent ag;
	cli_report_opts_init(&o);
	for (int i = 1; i < argc; i++) {
		int r = cli_report_opt(argc, argv, &i, &o);
		if (r < 0) {
			ret = 2;
			goto out;
		}
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--increased")) {
			increased = 1;
		} else if ((v = cli_opt_value(argc, argv, &i, "--timeout"))) {
			if ((timeout = cli_parse_count(v, 86400)) < 1) {
				cli_error("leaks: --timeout takes a number of seconds, not '%s'", v);
				ret = 2;
				goto out;
			}
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			ret = 0;
			goto out;
		} else if (pid < 0 && (pid = cli_parse_count(argv[i], INT_MAX)) > 0) {
			;
		} else {
			cli_error("leaks: unexpected argument '%s'", argv[i]);
			fputs(usage, stderr);
			ret = 2;
			goto out;
		}
	}
	if (pid <= 0) {
		fputs(usage, stderr);
		ret = 2;
		goto out;
	}
	if (cli_agent_open(pid, &ag))
		goto out;
	char path[PATH_MAX + 64], why[PATH_MAX + 128];
	if (cli_agent_leak_check(&ag, increased, timeout * 1000, path, sizeof path, why,
				 sizeof why)) {
		cli_error("%s", why);
		goto out;
	}
	struct prof_run run;
	const char *err, *err_file;
	if (prof_run_load_kinds(&run, path, o.binary_path, cli_report_sym_kinds(&o),
				&err, &err_file)) {
		cli_error("cannot read '%s': %s", err_file, err);
		goto out;
	}
	cli_report_print(stdout, &run, &o);
	prof_run_release(&run);
	fprintf(stderr, "heaptrail: leak check written to %s\n", path);
	ret = 0;
out:
	cli_report_opts_release(&o);
	return ret;
}
