/* ptrace.c — the borrowed thread (ptrace.h): reading the target from
 * /proc, choosing the thread to borrow, the ptrace primitives, and the
 * checks made before a process is traced (why a trace is refused). */
#include <elf.h>
#include <linux/magic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/ptrace.h"
#include "format/options.h"
#include "format/vocab.h"

double ctl_ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

char *ctl_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap + 1);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

/* The "Key:\tvalue" line of /proc/PID/status, or NULL. */
const char *ctl_status_field(const char *status, const char *key, char *out, size_t cap)
{
	size_t k = strlen(key);
	for (const char *l = status; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, k) && l[k] == ':') {
			const char *v = l + k + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t n = strcspn(v, "\n");
			snprintf(out, cap, "%.*s", (int)n, v);
			return out;
		}
	return NULL;
}

/* Whether process pid has ended, or is ending: a zombie, or exiting with
 * its memory already gone (no VmSize in its status). */
bool ctl_process_gone(long pid)
{
	char path[64], buf[16];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = ctl_read_file(path, NULL);
	bool gone = !status || (ctl_status_field(status, "State", buf, sizeof buf) &&
				(buf[0] == 'Z' || buf[0] == 'X')) ||
		    !ctl_status_field(status, "VmSize", buf, sizeof buf);
	free(status);
	return gone;
}

/* Whether tracer, which traces a thread of pid, is the agent's own
 * tracer (a leak scan of the process: a task whose parent is pid) or
 * another heaptrail asking the agent (a dump, a leak check, the live
 * endpoint): either lets the thread go once done; or a tracer that has
 * just ended. */
static bool tracer_ours(pid_t pid, long tracer)
{
	char path[96], buf[32];
	if (tracer <= 0)
		return false;
	snprintf(path, sizeof path, "/proc/%ld/status", tracer);
	char *st = ctl_read_file(path, NULL);
	if (!st)
		return errno == ENOENT;  /* it has just ended: the thread is let go */
	bool ours = ctl_status_field(st, "PPid", buf, sizeof buf) && atol(buf) == pid;
	ours = ours || (ctl_status_field(st, "Name", buf, sizeof buf) && !strcmp(buf, "heaptrail"));
	free(st);
	return ours;
}

/* The tracer of thread tid of pid, 0 when none, -1 when it cannot be
 * read (the thread is gone). */
static long tracer_of(pid_t pid, pid_t tid)
{
	char path[96], buf[32];
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
	char *st = ctl_read_file(path, NULL);
	long tracer = !st ? -1 : ctl_status_field(st, "TracerPid", buf, sizeof buf) ? atol(buf) : 0;
	free(st);
	return tracer;
}

/* Whether thread tid of pid is held now by the agent's tracer or
 * another heaptrail (tracer_ours). */
bool ctl_held_briefly(pid_t pid, pid_t tid)
{
	return tracer_ours(pid, tracer_of(pid, tid));
}

/* Whether some thread of pid is held now by the agent's tracer or
 * another heaptrail: a thread that waits may be found once it is let go. */
bool ctl_held_by_others(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	DIR *d = opendir(path);
	bool held = false;
	for (struct dirent *e; d && !held && (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		held = tid > 0 && ctl_held_briefly(pid, tid);
	}
	if (d)
		closedir(d);
	return held;
}

/* ---------- the borrowed thread ---------- */

/* System calls a thread waits in without holding a lock of the allocator
 * or of the loader. futex is not among them: a thread waiting for a lock
 * may hold another one. The loader reads files while holding its lock,
 * but a read of a file is not interrupted: a thread is only borrowed when
 * the stop aborted its call (borrow checks the restart code), which
 * happens to waits on pipes, sockets, terminals, timers and locks. */
int ctl_waiting_call(long nr)
{
	switch (nr) {
	case SYS_read: case SYS_poll: case SYS_select: case SYS_nanosleep: case SYS_pause:
	case SYS_accept: case SYS_recvfrom: case SYS_recvmsg: case SYS_wait4:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_ppoll: case SYS_pselect6:
	case SYS_clock_nanosleep: case SYS_accept4: case SYS_rt_sigtimedwait:
	case SYS_rt_sigsuspend: case SYS_waitid: case SYS_recvmmsg:
	case SYS_write: case SYS_writev: case SYS_sendto: case SYS_sendmsg: case SYS_connect:
	case SYS_msgrcv: case SYS_semop: case SYS_semtimedop: case SYS_flock: case SYS_fcntl:
	case SYS_io_getevents: case SYS_pread64: case SYS_readv:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
		return 1;
	default:
		return 0;
	}
}

/* Whether a futex word at addr may be a lock of the allocator or of the
 * loader: inside libc or the loader (main_arena, the loader's lock, the
 * stack cache lock), or in the first page of a 64 MiB-aligned mapping
 * (the header of a malloc thread arena). A thread waiting on any other
 * futex (a condition variable, pthread_join, a program's mutex) holds
 * none of those locks, unless the program calls into its own locks from
 * a constructor that dlopen runs. */
static bool futex_may_be_libc_lock(const char *maps, unsigned long addr)
{
	if ((addr & ~((64ul << 20) - 1)) + 4096 > addr)
		return true;
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi;
		if (sscanf(l, "%lx-%lx", &lo, &hi) != 2 || addr < lo || addr >= hi)
			continue;
		size_t n = strcspn(l, "\n");
		char line[512];
		snprintf(line, sizeof line, "%.*s", (int)n, l);
		return strstr(line, "/libc.so") || strstr(line, "/ld-linux") || strstr(line, "/ld-");
	}
	return true;  /* not mapped: something odd, leave it */
}

static bool avoided(const struct avoid *a, pid_t tid)
{
	for (int i = 0; a && i < a->n; i++)
		if (a->tid[i] == tid)
			return true;
	return false;
}

static pid_t pick_waiting(pid_t pid, const struct avoid *avoid, bool futex, bool any_timeout,
			  bool shun_epoll);

/* Whether a wait in call nr with arguments a would start its timeout
 * again whole after the calls: the rt_sigreturn that ends them leaves the
 * kernel no remaining time to restart it with (nanosleep, poll or a futex
 * wait with a relative timeout; epoll_wait, whose stop already fails it
 * with EINTR). select, ppoll and pselect keep their remaining time in the
 * program's memory; absolute timeouts are unchanged by a restart. */
static bool timeout_restarts(long nr, const unsigned long *a)
{
	switch (nr) {
	case SYS_nanosleep: return true;
	case SYS_clock_nanosleep: return !(a[1] & 1);  /* TIMER_ABSTIME */
	case SYS_poll: return (int)a[2] > 0;
	case SYS_epoll_wait: case SYS_epoll_pwait: return (int)a[3] > 0;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2: return a[3] != 0;
#endif
	case SYS_futex: return (a[1] & 0x7f) == 0 && a[3] != 0;  /* FUTEX_WAIT, relative */
	case SYS_rt_sigtimedwait: return a[2] != 0;
	case SYS_semtimedop: return a[3] != 0;
	case SYS_io_getevents: return a[4] != 0;
	case SYS_recvmmsg: return a[4] != 0;
	default: return false;
	}
}

/* A thread of pid blocked in a waiting system call, or 0. Second
 * choice: one waiting on a futex that is no lock of libc's (see above).
 * Either whose timeout a borrow leaves as it is, before any other. The
 * main thread (the group leader) comes after the others, even those
 * whose timeout starts again whole, epoll_wait's aside (the stop fails it
 * with EINTR, which heaptrail undoes only if it lives): the kernel gives
 * a signal sent to the process to the main thread first, and a borrowed
 * thread blocks every signal while it runs the calls, so a borrowed main
 * thread sends the program's own signals to its other threads meanwhile,
 * one of them perhaps in an epoll_wait that then fails with EINTR
 * (hostile:signal_in_check). */
pid_t ctl_pick_thread(pid_t pid, const struct avoid *avoid)
{
	struct avoid others = avoid ? *avoid : (struct avoid){ .n = 0 };
	pid_t best = 0;
	if (!avoided(&others, pid) && others.n < (int)(sizeof others.tid / sizeof others.tid[0]))
		others.tid[others.n++] = pid;
	for (int pass = 0; pass < 4 && !best; pass++)
		best = pick_waiting(pid, &others, pass & 1, pass >= 2, true);
	for (int pass = 0; pass < 4 && !best; pass++)
		best = pick_waiting(pid, avoid, pass & 1, pass >= 2, false);
	return best;
}

static pid_t pick_waiting(pid_t pid, const struct avoid *avoid, bool futex, bool any_timeout,
			  bool shun_epoll)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	DIR *d = opendir(path);
	pid_t best = 0;
	char *maps = NULL;
	if (!d)
		return 0;
	if (futex) {
		snprintf(path, sizeof path, "/proc/%d/maps", pid);
		maps = ctl_read_file(path, NULL);
	}
	for (struct dirent *e; (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || avoided(avoid, tid))
			continue;
		char scpath[160];
		snprintf(scpath, sizeof scpath, "/proc/%d/task/%d/syscall", pid, tid);
		char *s = ctl_read_file(scpath, NULL);
		long nr = s && *s != 'r' ? strtol(s, NULL, 10) : -1;
		unsigned long a[6] = { 0, ~0ul, 0, 0, 0, 0 }, sp = 0;
		if (nr >= 0)
			sscanf(s, "%*s %lx %lx %lx %lx %lx %lx %lx", &a[0], &a[1], &a[2], &a[3], &a[4],
			       &a[5], &sp);
		unsigned long uaddr = a[0], op = a[1];
		free(s);
		/* a futex word below the stack pointer, where nothing of the
		 * thread's is live: the park of a heaptrail that died or was too
		 * slow (see "the calls"), which ends by itself; a borrow would
		 * write its frames over the word and the timeout it waits on */
		if (nr == SYS_futex && uaddr < sp && sp - uaddr < (1ul << 20))
			continue;
		if (nr >= 0 && !any_timeout && timeout_restarts(nr, a))
			continue;
		if (shun_epoll && (nr == SYS_epoll_wait || nr == SYS_epoll_pwait
#ifdef SYS_epoll_pwait2
				   || nr == SYS_epoll_pwait2
#endif
				   ))
			continue;
		if (!futex && nr >= 0 && ctl_waiting_call(nr)) {
			best = tid;
			break;
		}
		/* FUTEX_WAIT or FUTEX_WAIT_BITSET, private or not */
		if (futex && nr == SYS_futex && maps && ((op & 0x7f) == 0 || (op & 0x7f) == 9) &&
		    !futex_may_be_libc_lock(maps, uaddr)) {
			best = tid;
			break;
		}
	}
	closedir(d);
	free(maps);
	return best;
}

/* Every ptrace request and every write into the target goes through
 * here. HEAPTRAIL_TEST_KILL_AT=N makes heaptrail kill itself (SIGKILL)
 * just before its Nth: the crash-only test (tests/control/test_attach.py,
 * attach:kill) walks N over every step of an attach and a detach. */
static void step_point(void)
{
	static long left = -1;
	if (left < 0) {
		const char *e = getenv("HEAPTRAIL_TEST_KILL_AT");
		left = e && atol(e) > 0 ? atol(e) : LONG_MAX;
	}
	if (--left == 0)
		raise(SIGKILL);
}

/* HEAPTRAIL_TEST_STALL_PARK=K makes heaptrail sleep for longer than the
 * park lasts once its Kth call waits there, before it stops the thread:
 * a heaptrail held up that long (attach:kill and attach:container-stall
 * check what it then does). */
void ctl_stall_point(void)
{
	static long left = -1;
	if (left == -1) {
		const char *e = getenv("HEAPTRAIL_TEST_STALL_PARK");
		left = e && atol(e) > 0 ? atol(e) : LONG_MAX;
	}
	if (left > 0 && --left == 0) {
		struct timespec d = { 0, 0 };
		d.tv_sec = (PARK_MS + 300) / 1000;
		d.tv_nsec = (PARK_MS + 300) % 1000 * 1000000L;
		while (nanosleep(&d, &d) && errno == EINTR)
			;
	}
}

long ctl_pt(int req, pid_t tid, void *addr, void *data)
{
	step_point();
	return ptrace((enum __ptrace_request)req, tid, addr, data);
}

/* Reads or writes n bytes of process pid at addr with process_vm_readv
 * or process_vm_writev, which need the right to trace it and nothing
 * more (its /proc/PID/mem is its user's alone: a heaptrail of another
 * user, with CAP_SYS_PTRACE only, cannot open it). Writable memory only. */
static ssize_t vm_rw(pid_t pid, uint64_t addr, void *buf, size_t n, bool write)
{
	struct iovec local = { buf, n }, remote = { (void *)addr, n };
	return write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
		     : process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

int ctl_mem_rw(struct target *t, uint64_t addr, void *buf, size_t n, bool write)
{
	if (write)
		step_point();
	ssize_t r = t->memfd < 0 ? vm_rw(t->pid, addr, buf, n, write)
		    : write ? pwrite(t->memfd, buf, n, (off_t)addr)
			    : pread(t->memfd, buf, n, (off_t)addr);
	return r == (ssize_t)n ? 0 : -1;
}

/* The borrowed thread was the main thread of a child of ours (`run
 * --http`), and its end was reaped by our wait, not by run's. */
static _Atomic long reaped_pid;
static _Atomic int reaped_status;

void ctl_note_reaped(pid_t pid, int status)
{
	atomic_store(&reaped_status, status);
	atomic_store(&reaped_pid, (long)pid);
}

bool ctl_reaped_exit(pid_t pid, int *status)
{
	if (atomic_load(&reaped_pid) != (long)pid)
		return false;
	*status = atomic_load(&reaped_status);
	return true;
}

/* Waits for the next stop of the borrowed thread. Returns the stop
 * signal, 0 for a ptrace event stop, -1 when the thread is gone (*why
 * says how). Signals that are the program's are kept for later. */
int ctl_wait_stop(struct target *t, int *status)
{
	for (;;) {
		pid_t r = waitpid(t->tid, status, __WALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || WIFEXITED(*status) || WIFSIGNALED(*status)) {
			if (r == t->pid)
				ctl_note_reaped(r, *status);
			return -1;
		}
		if (WIFSTOPPED(*status)) {
			if (*status >> 16)
				return 0;
			return WSTOPSIG(*status);
		}
	}
}

const char *ctl_restart_names(long rax)
{
	switch (rax) {
	case -512: case -513: case -514: case -516: return "restart";
	case -EINTR: return "eintr";
	default: return NULL;
	}
}

/* The borrowed thread waits on a futex that is no lock of libc's. */
bool ctl_futex_ok(struct target *t)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", t->pid);
	char *maps = ctl_read_file(path, NULL);
	unsigned op = (unsigned)t->saved.rsi & 0x7f;
	bool ok = maps && (op == 0 || op == 9) && !futex_may_be_libc_lock(maps, t->saved.rdi);
	free(maps);
	return ok;
}

/* Whether the code at pc is the program's own, where a thread holds no
 * lock that dlopen or the agent's start-up takes: a file-backed
 * executable mapping that is not the C or C++ runtime, the loader, an
 * allocator library, heaptrail's agent, or a module that defines malloc
 * itself (an allocator linked into the program). The loader's locks are
 * recursive, so a thread running a constructor inside dlopen may call it
 * again. */
bool ctl_own_code(const char *maps, uint64_t pc)
{
	static const char *const runtime[] = { "/libc.so", "/ld-linux", "/ld-", "/libstdc++",
		"/libgcc_s", "/libpthread", "/libheaptrail", "/libjemalloc", "/libtcmalloc",
		"/libmimalloc", NULL };
	static char checked[4][PATH_MAX];
	static bool defines[4];
	static int nchecked;
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi;
		char perms[8];
		int pos = 0;
		if (sscanf(l, "%lx-%lx %7s %*s %*s %*s%n", &lo, &hi, perms, &pos) < 3 || !pos ||
		    pc < lo || pc >= hi)
			continue;
		const char *p = l + pos;
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, "\n");
		char path[PATH_MAX];
		if (perms[2] != 'x' || *p != '/' || n >= sizeof path)
			return false;
		snprintf(path, sizeof path, "%.*s", (int)n, p);
		for (const char *const *r = runtime; *r; r++)
			if (strstr(path, *r))
				return false;
		for (int i = 0; i < nchecked; i++)
			if (!strcmp(checked[i], path))
				return !defines[i];
		bool d = ctl_elf_symbol(path, "malloc") != 0;
		if (nchecked < 4) {
			snprintf(checked[nchecked], sizeof checked[0], "%s", path);
			defines[nchecked++] = d;
		}
		return !d;
	}
	return false;
}

/* ---------- common front: checks and the calls ---------- */

/* Our uid_map, its columns one space apart, when heaptrail runs in a user
 * namespace other than the first (whose map is "0 0 4294967295"); else
 * NULL. Static storage. */
static const char *user_ns_map(void)
{
	static char map[128];
	char *text = ctl_read_file("/proc/self/uid_map", NULL);
	size_t n = 0;
	for (const char *p = text; p && *p && n < sizeof map - 1; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n')
			map[n++] = *p;
		else if (n && map[n - 1] != ' ' && p[1])
			map[n++] = ' ';
	while (n && map[n - 1] == ' ')
		n--;
	map[n] = 0;
	free(text);
	return n && strcmp(map, "0 0 4294967295") ? map : NULL;
}

/* Explains a failed PTRACE_SEIZE, with what can be done instead for
 * what the trace was for: under Yama's mode 1 only an ancestor may trace,
 * and `heaptrail run` is one of the program it starts (its --http
 * endpoint asks it), never a `heaptrail leaks` started beside it. */
void ctl_seize_error(const struct target *t, int e)
{
	pid_t pid = t->pid;
	char yama[16] = "";
	char *y = ctl_read_file("/proc/sys/kernel/yama/ptrace_scope", NULL);
	if (y) {
		snprintf(yama, sizeof yama, "%.*s", (int)strcspn(y, "\n"), y);
		free(y);
	}
	/* Yama's modes (Documentation/admin-guide/LSM/Yama.rst) */
	static const char *const parent_only = "only a parent may trace its descendants: run "
					       "heaptrail as root or with CAP_SYS_PTRACE";
	static const char *const one_says[] = {
		[USE_ATTACH] = ", or start the program under `heaptrail run`",
		[USE_DETACH] = ", as the attach was",
		[USE_DUMP] = ", or start the program under `heaptrail run --http ADDR` and ask "
			     "ADDR/debug/pprof/heap",
		[USE_LEAKS] = ", or start the program under `heaptrail run --http ADDR` and ask "
			      "ADDR/debug/heaptrail/leaks",
		[USE_LIVE] = ", or start the program under `heaptrail run --http ADDR`",
	};
	static const char *const none_says[] = {
		[USE_ATTACH] = ": start the program under `heaptrail run` instead",
		[USE_DETACH] = "",
		[USE_DUMP] = ": start the program under `heaptrail run --every DURATION` (or "
			     "--signal) for dumps instead",
		[USE_LEAKS] = ": the leak report comes when the program exits",
		[USE_LIVE] = ": start the program under `heaptrail run --every DURATION` for "
			     "dumps instead",
	};
	int scope = *yama >= '1' && *yama <= '3' && !yama[1] ? *yama - '0' : 0;
	const char *umap;
	if (e == EPERM && scope == 1)
		ctl_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "1: %s%s", pid, parent_only, one_says[t->use]);
	else if (e == EPERM && scope == 2)
		ctl_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "2: only root or CAP_SYS_PTRACE may trace: run heaptrail as root", pid);
	else if (e == EPERM && scope == 3)
		ctl_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "3: no process may be traced until the next boot%s", pid,
			  none_says[t->use]);
	else if (e == EPERM && (umap = user_ns_map()))
		ctl_error("not permitted to trace process %d: heaptrail runs in a user namespace "
			  "(uid_map %s), whose root has no CAP_SYS_PTRACE over a process outside it: "
			  "run heaptrail in process %d's user namespace (the host's)", pid, umap, pid);
	else if (e == EPERM)
		ctl_error("not permitted to trace process %d: it belongs to another user, or is "
			  "already traced (needs the same user or CAP_SYS_PTRACE)", pid);
	else
		target_error(pid, "cannot trace process %d: %s", pid, strerror(e));
}

/* Whether we hold capability cap (CapEff of our status). */
static bool have_cap(int cap)
{
	char buf[32];
	char *status = ctl_read_file("/proc/self/status", NULL);
	bool has = status && ctl_status_field(status, "CapEff", buf, sizeof buf) &&
		   (strtoull(buf, NULL, 16) >> cap & 1);
	free(status);
	return has;
}

/* A heaptrail of another user than process pid's, with CAP_SYS_PTRACE but
 * neither CAP_DAC_READ_SEARCH nor CAP_DAC_OVERRIDE (a tool given the one
 * capability), may trace it but not read what says which thread to borrow:
 * /proc/PID/task/TID/syscall is its user's alone (mode 0400), as are the
 * files its agent writes (0600). Says so in one line: 1; else 0. */
static int dac_refuses(long pid)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%ld/syscall", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != EACCES || stat(path, &st) || st.st_uid == geteuid() ||
	    !have_cap(19) /* CAP_SYS_PTRACE */ || have_cap(2) /* CAP_DAC_READ_SEARCH */ ||
	    have_cap(1) /* CAP_DAC_OVERRIDE */)
		return 0;
	ctl_error("cannot read %s: it is for process %ld's user alone (uid %u), and so are the "
		  "files its agent writes: heaptrail needs CAP_DAC_READ_SEARCH besides "
		  "CAP_SYS_PTRACE, or to run as that user or root", path, pid, (unsigned)st.st_uid);
	return 1;
}

/* Opens the target for calls; checks what can be checked without
 * touching it. maps is returned (free it). Returns 0 or prints and -1. */
int ctl_open_target(struct target *t, long pid, enum target_use use, char **maps)
{
	char path[96], buf[64];
	memset(t, 0, sizeof *t);
	t->pid = (pid_t)pid;
	t->use = use;
	t->memfd = -1;
	t->scfd = -1;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		snprintf(path, sizeof path, "/proc/%ld/status", pid);
		char *status = ctl_read_file(path, NULL);
		if (!status) {
			ctl_error("no process %ld", pid);
			return -1;
		}
		if (ctl_status_field(status, "State", buf, sizeof buf) &&
		    (buf[0] == 'Z' || buf[0] == 'X')) {
			ctl_error("process %ld is a zombie (it has exited; its parent has not reaped "
				  "it)", pid);
			free(status);
			return -1;
		}
		long tracer = ctl_status_field(status, "TracerPid", buf, sizeof buf) ? atol(buf) : 0;
		free(status);
		if (!tracer)
			break;
		/* the agent's scan, or another request: read again until it
		 * lets go (read once, a heaptrail that took the thread after a
		 * look found it free would be "already tracing" it) */
		if (!tracer_ours((pid_t)pid, tracer)) {
			ctl_error("process %ld is already traced by process %ld", pid, tracer);
			return -1;
		}
		if (ctl_ms_since(&t0) > HELD_WAIT_MS) {
			ctl_error("process %ld stayed held by heaptrail process %ld for %d s (a "
				  "leak check or dump that long; try again)", pid, tracer,
				  HELD_WAIT_MS / 1000);
			return -1;
		}
		usleep(2000);
	}
	if (pid == getpid()) {
		ctl_error("cannot attach to heaptrail itself");
		return -1;
	}
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	*maps = ctl_read_file(path, NULL);
	if (!*maps) {
		if (errno == EACCES || errno == EPERM)
			ctl_seize_error(t, EPERM);
		else
			target_error(pid, "cannot read /proc/%ld/maps: %s", pid, strerror(errno));
		return -1;
	}
	if (!**maps) {
		target_error(pid, "process %ld has no memory map (a kernel thread?)", pid);
		free(*maps);
		return -1;
	}
	if (dac_refuses(pid)) {
		free(*maps);
		return -1;
	}
	return 0;
}

/* Whether pid runs under a seccomp filter. */
bool ctl_seccomp_filtered(pid_t pid)
{
	char path[64], sec[16] = "";
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	char *status = ctl_read_file(path, NULL);
	if (status)
		ctl_status_field(status, "Seccomp", sec, sizeof sec);
	free(status);
	return !strcmp(sec, "2");
}

/* The name of a system call a loader makes, for a message. */
const char *ctl_syscall_name(long nr)
{
	static char buf[32];
	switch (nr) {
	case SYS_openat: return "openat";
	case SYS_open: return "open";
	case SYS_mmap: return "mmap";
	case SYS_mprotect: return "mprotect";
	case SYS_read: return "read";
	case SYS_pread64: return "pread64";
	case SYS_newfstatat: return "newfstatat";
	case SYS_fstat: return "fstat";
	default:
		snprintf(buf, sizeof buf, "system call %ld", nr);
		return buf;
	}
}

void ctl_trace_refused(long pid, bool live)
{
	struct target t = { .pid = (pid_t)pid, .use = live ? USE_LIVE : USE_LEAKS };
	ctl_seize_error(&t, EPERM);
}
