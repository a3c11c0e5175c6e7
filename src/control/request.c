/* request.c — talking to a running agent (preloaded or attached): its
 * directory, a request made by ptrace in one borrowed thread
 * (ctl_agent_request: no signal is sent to the process), a leak check
 * waited for; and the /proc reads they need. */
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

#include "control/control.h"
#include "format/options.h"
#include "format/vocab.h"

/* Reads /proc/PID/FILE whole (NUL-separated for environ). */
char *ctl_read_proc(long pid, const char *file, size_t *len)
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

const char *ctl_env_get(const char *env, size_t len, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < len; i += strlen(env + i) + 1)
		if (!strncmp(env + i, name, n) && env[i + n] == '=')
			return env + i + n + 1;
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

/* The state letter of pid's main thread ('T': stopped by SIGSTOP or a
 * terminal; 'Z': a zombie), or 0 when it cannot be read (errno). */
static char process_state(long pid)
{
	size_t len;
	char *stat = ctl_read_proc(pid, "stat", &len);
	if (!stat)
		return 0;
	/* "PID (COMM) S ...": COMM may hold anything, the state follows its
	 * last ')' */
	const char *close = strrchr(stat, ')');
	char st = close && close[1] == ' ' ? close[2] : '?';
	free(stat);
	return st;
}

/* The process is gone, or a zombie: no check will come. */
static bool process_ended(long pid)
{
	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return true;
	char st = process_state(pid);
	return st ? st == 'Z' || st == 'X' : errno == ENOENT;
}

/* Asks the agent by ptrace (ctl_agent_request: a borrowed thread runs
 * heaptrail_request; no signal is sent), again while it says it cannot
 * now (the thread was inside the agent or the loader, or a check or dump
 * was under way), for up to timeout_ms. A process someone stopped (kill
 * -STOP, ^Z) is not run by heaptrail: it is asked once it is continued.
 * 0, or -1 with why ("" when the cause was printed already). */
int ctl_agent_ask(const struct ctl_agent *a, int value, long timeout_ms, char *why,
		  size_t whycap, char *wrote)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int r = -EAGAIN;
		if (process_ended(a->pid)) {
			snprintf(why, whycap, "process %ld ended before it answered", a->pid);
			return -1;
		}
		if (process_state(a->pid) != 'T' && ctl_agent_request(a->pid, value, &r, wrote)) {
			snprintf(why, whycap, "%s", "");
			return -1;
		}
		if (r == 0)
			return 0;
		if (r == -ENOTCONN) {
			snprintf(why, whycap, "process %ld was detached from heaptrail: 'heaptrail "
				 "attach %ld' to record again", a->pid, a->pid);
			return -1;
		}
		if (r != -EAGAIN && r != -EBUSY) {
			snprintf(why, whycap, "process %ld could not %s: %s", a->pid,
				 value & FMT_SIGVAL_DUMP ? "write a heap dump" : "run a leak check",
				 strerror(-r));
			return -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= timeout_ms) {
			snprintf(why, whycap, "process %ld %s for %ld ms", a->pid,
				 r == -EBUSY ? "was busy with another check or dump"
					     : "could not be asked (stopped, or inside heaptrail)",
				 timeout_ms);
			return -1;
		}
		usleep(20 * 1000);
	}
}

void ctl_agent_path(const struct ctl_agent *a, const char *wrote, char *path, size_t cap)
{
	static const char given[] = "/proc/self/fd/";
	if (!strncmp(wrote, given, sizeof given - 1)) {
		/* the directory handed to it (attach.c, "containers"): ours,
		 * by its name here when it has one */
		const char *num = wrote + sizeof given - 1;
		size_t k = strspn(num, "0123456789");
		char link[96], dir[PATH_MAX];
		snprintf(link, sizeof link, "/proc/%ld/fd/%.*s", a->pid, (int)k, num);
		ssize_t n = readlink(link, dir, sizeof dir - 1);
		if (n > 0 && dir[0] == '/' && (dir[n] = 0, !access(dir, X_OK)))
			snprintf(path, cap, "%s%s", dir, num + k);
		else
			snprintf(path, cap, "%s%s", link, num + k);
	} else if (wrote[0] == '/')
		snprintf(path, cap, "%s", wrote);
	else  /* its output directory could not be named at start-up */
		snprintf(path, cap, "/proc/%ld/cwd/%s", a->pid, wrote);
}

int ctl_agent_open(long pid, struct ctl_agent *a, bool live)
{
	int ret = -1;
	char *env = NULL, *maps = NULL;
	memset(a, 0, sizeof *a);
	a->pid = pid;
	size_t envlen, mapslen;
	maps = ctl_read_proc(pid, "maps", &mapslen);
	if (!maps) {
		if (errno == ENOENT)
			ctl_error("no process %ld", pid);
		else if (errno == EACCES || errno == EPERM)
			ctl_trace_refused(pid, live);  /* what the request needs too */
		else
			ctl_error("cannot inspect process %ld: %s", pid, strerror(errno));
		goto out;
	}
	if (!*maps && process_ended(pid)) {
		ctl_error("process %ld is a zombie (it has exited; its parent has not reaped it)", pid);
		goto out;
	}
	/* Never signal a process without the agent: the signal would kill it. */
	if (!strstr(maps, "/libheaptrail.so")) {
		ctl_error("process %ld does not run under heaptrail (no libheaptrail.so in its "
			  "memory map)", pid);
		goto out;
	}
	env = ctl_read_proc(pid, "environ", &envlen);
	const char *dir = env ? ctl_env_get(env, envlen, "HEAPTRAIL_OUTPUT") : NULL;
	char cwd_link[64], cwd[PATH_MAX], attached[PATH_MAX];
	if (!dir && !ctl_attached_dir(pid, attached, sizeof attached))
		dir = attached;  /* heaptrail attach: no HEAPTRAIL_OUTPUT */
	const char *preload = env ? ctl_env_get(env, envlen, "LD_PRELOAD") : NULL;
	if (!dir && !(preload && strstr(preload, "libheaptrail"))) {
		/* loaded by an attach, and the directory it holds open while
		 * attached is closed: detached (the agent would refuse too, but
		 * the process is not touched at all) */
		ctl_error("process %ld was detached from heaptrail: 'heaptrail attach %ld' to "
			  "record again", pid, pid);
		goto out;
	}
	if (!dir) {
		/* without an output directory the agent writes into its cwd
		 * (as of its start: each request's answer says where; this
		 * guess serves an older agent, which does not say) */
		snprintf(cwd_link, sizeof cwd_link, "/proc/%ld/cwd", pid);
		ssize_t n = readlink(cwd_link, cwd, sizeof cwd - 1);
		if (n <= 0) {
			ctl_error("cannot find where process %ld writes its files", pid);
			goto out;
		}
		cwd[n] = 0;
		dir = cwd;
	}
	snprintf(a->dir, sizeof a->dir, "%s", dir);
	ret = 0;
out:
	free(env);
	free(maps);
	return ret;
}

int ctl_agent_leak_check(const struct ctl_agent *a, int increased, long timeout_ms,
			 char *path, size_t cap, char *why, size_t whycap)
{
	long pid = a->pid;
	const char *dir = a->dir;
	unsigned before = last_check(dir, pid);
	char wrote[FMT_REQUEST_PATH_MAX];
	if (ctl_agent_ask(a, FMT_SIGVAL_MAGIC | increased, timeout_ms, why, whycap, wrote))
		return -1;
	if (wrote[0]) {
		/* the agent says where: output= as resolved at its start */
		ctl_agent_path(a, wrote, path, cap);
		return 0;
	}
	/* an agent of an older heaptrail: its file in the directory guessed */
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
			snprintf(why, whycap, "process %ld wrote no leak check file in '%s' within "
				 "%ld ms", pid, dir, timeout_ms);
			return -1;
		}
		usleep(20 * 1000);
	}
	return 0;
}

