/*
 * attach.c — `heaptrail attach PID`, `heaptrail detach PID`,
 * `heaptrail dump PID`: calls into a running process with ptrace alone.
 *
 * One thread of the target is borrowed for the calls, and only it is
 * stopped; the others run on. The thread chosen is one blocked in a
 * system call that waits (read, epoll_wait, poll, nanosleep, accept...,
 * seen in /proc/PID/task/TID/syscall): such a thread holds no allocator
 * or loader lock, so dlopen can run on it. When there is none, a thread
 * waiting on a futex that is no lock of libc's or of the loader (a
 * condition variable, pthread_join) is taken instead. It is seized and
 * interrupted; the calls (dlopen, then the agent's entry points) run on
 * it as a signal handler would, on its own stack, returning into libc's
 * rt_sigreturn, which puts back its registers, extended state and mask
 * (see "the calls" below: every step leaves a thread that can run on if
 * heaptrail dies). The interrupted system call is restarted as the kernel
 * would have (and one the stop made fail with EINTR, as epoll_wait does,
 * is restarted too: the program never sees it).
 *
 * Nothing in the target is written but the thread's stack below its
 * stack pointer, unless allocator functions are named (--alloc-fn...,
 * --options-file, or a built-in profile the program matches): the agent
 * then rewrites their first bytes, with every other thread stopped for
 * the write (src/agent/fnhook.c), and puts them back at the detach.
 */
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

#include "cli/cli.h"
#include "format/options.h"
#include "format/vocab.h"

#define RTLD_NOW_VALUE 2  /* dlfcn.h: RTLD_NOW, and the agent stays local */

#define XSTATE_MAX 16384
#define ERESTART_RESTARTBLOCK_RET (-516)  /* the kernel's: resumed from the restart record */
/* how long a thread waits in the park by itself (see "the calls") */
#define PARK_MS 1000
#define FUTEX_WAIT_PRIVATE_OP 128  /* FUTEX_WAIT | FUTEX_PRIVATE_FLAG */

/* What the CLI traces a process for: its refusal advises each its own
 * way (seize_error). */
enum target_use { USE_ATTACH, USE_DETACH, USE_DUMP, USE_LEAKS, USE_LIVE };

struct target {
	pid_t pid, tid;
	enum target_use use;
	struct user_regs_struct saved;
	unsigned char xstate[XSTATE_MAX];
	size_t xstate_len;
	int memfd;
	uint64_t restorer;      /* libc's rt_sigreturn */
	uint64_t gadget;        /* a `syscall; ret` in libc, for the park (0: none) */
	uint64_t frame;         /* the signal frame, below the thread's stack pointer */
	uint64_t park;          /* the park's frame, below that one (0: no park) */
	int scfd;               /* /proc/PID/task/TID/syscall, while calls run parked */
	bool parked;            /* held at the park after a call (see "the calls") */
	bool step;              /* the next call stepped with PTRACE_SYSCALL */
	uint64_t strings;       /* STRINGS_SPACE above the frame: the calls' strings */
	uint64_t result;        /* where heaptrail_attach_call stores a result */
	uint64_t sigmask;       /* the thread's blocked signals */
	long failed_nr;         /* the last system call that failed in a call, or -1 */
	int failed_err;
	sigset_t oldmask;       /* heaptrail's own, while the thread is borrowed */
	bool masked;
	struct timespec stopped_at;
	double stopped_ms;
	/* the thread was stopped in the program's own code, not in a system
	 * call: it is given back with its registers exactly as they were */
	bool busy;
};

static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---------- reading the target from /proc ---------- */

static char *slurp(const char *path, size_t *len)
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
static const char *status_field(const char *status, const char *key, char *out, size_t cap)
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
static bool process_gone(long pid)
{
	char path[64], buf[16];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = slurp(path, NULL);
	bool gone = !status || (status_field(status, "State", buf, sizeof buf) &&
				(buf[0] == 'Z' || buf[0] == 'X')) ||
		    !status_field(status, "VmSize", buf, sizeof buf);
	free(status);
	return gone;
}

/* An error about process pid, or "process N exited" when it is gone: a
 * process that ends during an attach makes any step fail, and the step's
 * own message would mislead. */
#define target_error(pid, ...)                                                 \
	(process_gone(pid) ? cli_error("process %ld exited", (long)(pid))        \
			   : cli_error(__VA_ARGS__))

/* Whether thread tid of pid is traced now by the agent's own tracer (a
 * leak scan of the process: a task whose parent is pid) or by another
 * heaptrail asking the agent (a dump, a leak check, the live endpoint),
 * which let it go within milliseconds. */
static bool held_briefly(pid_t pid, pid_t tid)
{
	char path[96], buf[32];
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
	char *st = slurp(path, NULL);
	long tracer = st && status_field(st, "TracerPid", buf, sizeof buf) ? atol(buf) : 0;
	free(st);
	if (tracer <= 0)
		return false;
	snprintf(path, sizeof path, "/proc/%ld/status", tracer);
	st = slurp(path, NULL);
	bool ours = st && status_field(st, "PPid", buf, sizeof buf) && atol(buf) == pid;
	ours = ours || (st && status_field(st, "Name", buf, sizeof buf) &&
			!strcmp(buf, "heaptrail"));
	free(st);
	return ours;
}

/* The load address (the mapping at file offset 0) and path of the first
 * module in maps whose path ends in one of suffixes. */
static int find_module(const char *maps, const char *const *suffixes, uint64_t *base, char *path,
		       size_t cap)
{
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi, off;
		char perms[8];
		int pos = 0;
		if (sscanf(l, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perms, &off, &pos) < 4 || !pos)
			continue;
		const char *p = l + pos;
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, "\n");
		if (!n || *p != '/' || off != 0)
			continue;
		for (const char *const *s = suffixes; *s; s++) {
			size_t sl = strlen(*s);
			if (n >= sl && !memcmp(p + n - sl, *s, sl) &&
			    (n == sl || p[n - sl - 1] == '/')) {
				*base = lo;
				snprintf(path, cap, "%.*s", (int)n, p);
				return 0;
			}
		}
	}
	return -1;
}

/* The file a path of /proc/PID/maps names, as we can open it: the kernel
 * writes the path from our root when we can reach the file from it (a
 * process in a chroot, or under `unshare --root`), else from the root of
 * the process's mount namespace (a container that pivoted into its own
 * root), which /proc/PID/root is. */
static void target_path(long pid, const char *path, char *out, size_t cap)
{
	snprintf(out, cap, "/proc/%ld/root%s", pid, path);
	if (access(out, F_OK) && !access(path, F_OK))
		snprintf(out, cap, "%s", path);
}

/* The value of a dynamic symbol in the ELF file at path (an x86-64
 * shared object), or 0. */
static uint64_t elf_symbol(const char *path, const char *name)
{
	size_t len;
	char *img = slurp(path, &len);
	uint64_t found = 0;
	if (!img || len < sizeof(Elf64_Ehdr))
		goto out;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len)
		goto out;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Shdr *str = &sh[sh[i].sh_link];
		if (sh[i].sh_offset + sh[i].sh_size > len || str->sh_offset + str->sh_size > len)
			goto out;
		const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
		size_t n = sh[i].sh_size / sizeof *sym;
		for (size_t k = 1; k < n; k++)
			if (sym[k].st_name < str->sh_size && sym[k].st_shndx != SHN_UNDEF &&
			    sym[k].st_value && !strcmp(img + str->sh_offset + sym[k].st_name, name)) {
				found = sym[k].st_value;
				goto out;
			}
	}
out:
	free(img);
	return found;
}

/* 1 when the executable has no program interpreter (a static binary). */
static int is_static(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/exe", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int interp = 0, ret = -1;
	if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
		for (int i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
			    (ssize_t)sizeof ph)
				break;
			if (ph.p_type == PT_INTERP)
				interp = 1;
		}
		ret = !interp;
	}
	close(fd);
	return ret;
}

/* ---------- the borrowed thread ---------- */

/* System calls a thread waits in without holding a lock of the allocator
 * or of the loader. futex is not among them: a thread waiting for a lock
 * may hold another one. The loader reads files while holding its lock,
 * but a read of a file is not interrupted: a thread is only borrowed when
 * the stop aborted its call (borrow checks the restart code), which
 * happens to waits on pipes, sockets, terminals, timers and locks. */
static int waiting_call(long nr)
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

/* Threads found unfit to borrow (no room on their stack, a mask of
 * their own...), passed over for the rest of the attach. */
struct avoid {
	pid_t tid[16];
	int n;
};

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
static pid_t pick_thread(pid_t pid, const struct avoid *avoid)
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
		maps = slurp(path, NULL);
	}
	for (struct dirent *e; (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || avoided(avoid, tid))
			continue;
		char scpath[160];
		snprintf(scpath, sizeof scpath, "/proc/%d/task/%d/syscall", pid, tid);
		char *s = slurp(scpath, NULL);
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
		if (!futex && nr >= 0 && waiting_call(nr)) {
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
 * just before its Nth: the crash-only test (tests/analyze/test_attach.py,
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
static void stall_point(void)
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

static long pt(int req, pid_t tid, void *addr, void *data)
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

static int mem_rw(struct target *t, uint64_t addr, void *buf, size_t n, bool write)
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

static void note_reaped(pid_t pid, int status)
{
	atomic_store(&reaped_status, status);
	atomic_store(&reaped_pid, (long)pid);
}

bool cli_reaped_exit(pid_t pid, int *status)
{
	if (atomic_load(&reaped_pid) != (long)pid)
		return false;
	*status = atomic_load(&reaped_status);
	return true;
}

/* Waits for the next stop of the borrowed thread. Returns the stop
 * signal, 0 for a ptrace event stop, -1 when the thread is gone (*why
 * says how). Signals that are the program's are kept for later. */
static int wait_stop(struct target *t, int *status)
{
	for (;;) {
		pid_t r = waitpid(t->tid, status, __WALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || WIFEXITED(*status) || WIFSIGNALED(*status)) {
			if (r == t->pid)
				note_reaped(r, *status);
			return -1;
		}
		if (WIFSTOPPED(*status)) {
			if (*status >> 16)
				return 0;
			return WSTOPSIG(*status);
		}
	}
}

static const char *restart_names(long rax)
{
	switch (rax) {
	case -512: case -513: case -514: case -516: return "restart";
	case -EINTR: return "eintr";
	default: return NULL;
	}
}

/* The borrowed thread waits on a futex that is no lock of libc's. */
static bool futex_ok(struct target *t)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", t->pid);
	char *maps = slurp(path, NULL);
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
static bool own_code(const char *maps, uint64_t pc)
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
		bool d = elf_symbol(path, "malloc") != 0;
		if (nchecked < 4) {
			snprintf(checked[nchecked], sizeof checked[0], "%s", path);
			defines[nchecked++] = d;
		}
		return !d;
	}
	return false;
}

/* The address of an rt_sigreturn in the target's libc (glibc's
 * __restore_rt, `mov $15, %rax; syscall`, the restorer of its signal
 * handlers), found in the file's executable segment; 0 when none. And
 * into *gadget, the address of a `syscall; ret` there (0f 05 c3: the end
 * of getpid and its kind), 0 when none: the park (see "the calls"). */
static uint64_t find_restorer(pid_t pid, const char *maps, uint64_t *gadget)
{
	static const char *const libc[] = { "libc.so.6", NULL };
	static const unsigned char code[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	static const unsigned char sysret[] = { 0x0f, 0x05, 0xc3 };
	char path[PATH_MAX], file[PATH_MAX + 32];
	uint64_t base, found = 0;
	size_t len;
	*gadget = 0;
	if (find_module(maps, libc, &base, path, sizeof path))
		return 0;
	target_path(pid, path, file, sizeof file);
	char *img = slurp(file, &len);
	if (!img || len < sizeof(Elf64_Ehdr))
		goto out;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len)
		goto out;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum && !(found && *gadget); i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
		    ph[i].p_offset + ph[i].p_filesz > len)
			continue;
		const unsigned char *s = (const unsigned char *)img + ph[i].p_offset;
		const unsigned char *hit = memmem(s, ph[i].p_filesz, code, sizeof code);
		if (hit && !found)
			found = base + ph[i].p_vaddr + (uint64_t)(hit - s);
		hit = memmem(s, ph[i].p_filesz, sysret, sizeof sysret);
		if (hit && !*gadget)
			*gadget = base + ph[i].p_vaddr + (uint64_t)(hit - s);
	}
out:
	free(img);
	return found;
}

/* ---------- the calls: a signal frame of heaptrail's own ----------
 *
 * heaptrail may die at any moment (a SIGKILL, a CI timeout): the kernel
 * then lets the borrowed thread run on with whatever registers it has.
 * So every state heaptrail puts the thread in is one it can run from
 * alone, and each change is a single write:
 *  - stopped: its registers are its own (a call the stop made fail with
 *    EINTR is set to run again first);
 *  - the frame, below its stack pointer (past the red zone, where a
 *    signal handler's frame would go), holds its registers, its
 *    extended state and its signal mask exactly as the kernel's signal
 *    delivery saves them, with a return address that is libc's
 *    rt_sigreturn (glibc's __restore_rt); writing it changes nothing the
 *    thread uses;
 *  - the park, a second such frame below the first, holds a system call
 *    instead of registers of the thread's: a futex wait of PARK_MS on a
 *    word no one wakes, every signal blocked, made by a `syscall; ret`
 *    of libc's whose ret takes the first frame's return address. A
 *    thread that runs into the park waits there PARK_MS, then goes
 *    through the first frame's rt_sigreturn back to where it was;
 *    writing it changes nothing the thread uses either;
 *  - one PTRACE_SETREGS starts a call (dlopen, or an agent entry point
 *    through heaptrail_attach_call, which stores the result in the
 *    frame's block) that returns into the park's rt_sigreturn: the call
 *    runs to its end, waits in the park and resumes where it was, as
 *    after a signal handler, whether heaptrail is there or not.
 * heaptrail lets the call run without a stop (PTRACE_CONT), watches
 * /proc/PID/task/TID/syscall until the thread waits in the park, and
 * stops it there (PTRACE_INTERRUPT): one round trip a call, however many
 * system calls the call makes. From the park it starts the next call
 * (one PTRACE_SETREGS again), or sends the thread into the first frame's
 * rt_sigreturn (one PTRACE_SETREGS) and lets it go. A heaptrail that dies
 * during a call, or is held up for longer than PARK_MS, costs the thread
 * PARK_MS at most; a thread that left the park by itself is let go as it
 * is (its call's result unknown). Without a `syscall; ret` in libc (and
 * once more for a dlopen that failed, to name the system call that
 * failed), heaptrail follows the call with PTRACE_SYSCALL instead, two
 * stops for each of its system calls, and takes the thread at the entry
 * of the first frame's rt_sigreturn.
 * Nothing is mapped or left behind. No PTRACE_O_EXITKILL;
 * PTRACE_O_TRACESYSGOOD, whose stops leave no signal behind when their
 * tracer is gone. A call runs with every signal blocked (see
 * remote_call), and so does the park: one for the thread waits, pending,
 * until the rt_sigreturn at the end; heaptrail holds no signal back. */

#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4
#define RED_ZONE 128
#define STRINGS_SPACE 16384        /* the calls' strings and the result */
/* room the calls may take below the frame: an attach with --sample 1, a
 * dump and a detach took 22 KiB of a thread's stack below the block */
#define CALL_STACK (128 * 1024)

/* The kernel's x86-64 rt_sigframe (arch/x86/include/asm/sigframe.h). */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp,
		rip, eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
};
struct k_ucontext {
	uint64_t uc_flags, uc_link;
	struct {
		uint64_t sp;
		int32_t flags, pad;
		uint64_t size;
	} uc_stack;
	struct k_sigcontext mc;
	uint64_t sigmask;
};
struct k_rt_sigframe {
	uint64_t pretcode;
	struct k_ucontext uc;
	unsigned char info[128];
};
_Static_assert(sizeof(struct k_sigcontext) == 256, "sigcontext");
_Static_assert(sizeof(struct k_ucontext) == 304, "ucontext");

/* The thread's blocked signals (SigBlk in its status). */
static int thread_sigmask(struct target *t, uint64_t *mask)
{
	char path[96], buf[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", t->pid, t->tid);
	char *status = slurp(path, NULL);
	int ret = -1;
	if (status && status_field(status, "SigBlk", buf, sizeof buf)) {
		char *end;
		*mask = strtoull(buf, &end, 16);
		ret = end > buf ? 0 : -1;
	}
	free(status);
	return ret;
}

/* Whether the thread's call replaced its signal mask for the wait
 * (sigsuspend, ppoll/pselect/epoll_pwait given a mask): SigBlk then shows
 * the temporary mask, not the one to put back. */
static bool swaps_mask(const struct user_regs_struct *r)
{
	switch ((long)r->orig_rax) {
	case SYS_rt_sigsuspend: return true;
	case SYS_ppoll: return r->r10 != 0;
	case SYS_pselect6: return r->r9 != 0;
	case SYS_epoll_pwait: return r->r8 != 0;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2: return r->r8 != 0;
#endif
	default: return false;
	}
}

/* Whether the stack the thread is on has room for the frame and the
 * calls below its stack pointer: the process's stack (it grows) with the
 * frame inside its mapping, or another mapping with CALL_STACK to spare. */
static bool stack_room(struct target *t, uint64_t sp)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", t->pid);
	char *maps = slurp(path, NULL);
	bool ok = false;
	uint64_t need = RED_ZONE + STRINGS_SPACE + XSTATE_MAX + 2048;
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi;
		if (sscanf(l, "%lx-%lx", &lo, &hi) != 2 || sp <= lo || sp > hi)
			continue;
		size_t n = strcspn(l, "\n");
		bool grows = n >= 7 && !memcmp(l + n - 7, "[stack]", 7);
		ok = sp - lo >= need + (grows ? 0 : CALL_STACK);
		break;
	}
	free(maps);
	return ok;
}

/* The registers the thread resumes with when it is let go: a waiting
 * call the stop ended runs again, as the kernel restarts one (the
 * rt_sigreturn at the end of a call disables the kernel's restart, so
 * the frame must hold the restarted state). */
static struct user_regs_struct resume_regs(const struct target *t)
{
	struct user_regs_struct r = t->saved;
	if (!t->busy && (long)r.orig_rax >= 0 && restart_names((long)r.rax)) {
		r.rax = r.orig_rax;
		r.rip -= 2;
		r.orig_rax = (unsigned long long)-1;
	}
	return r;
}

static void fill_context(struct k_sigcontext *m, const struct user_regs_struct *r)
{
	m->r8 = r->r8; m->r9 = r->r9; m->r10 = r->r10; m->r11 = r->r11;
	m->r12 = r->r12; m->r13 = r->r13; m->r14 = r->r14; m->r15 = r->r15;
	m->rdi = r->rdi; m->rsi = r->rsi; m->rbp = r->rbp; m->rbx = r->rbx;
	m->rdx = r->rdx; m->rax = r->rax; m->rcx = r->rcx; m->rsp = r->rsp;
	m->rip = r->rip; m->eflags = r->eflags;
	m->cs = (uint16_t)r->cs;
	m->ss = (uint16_t)r->ss;
}

/* The park's futex word; its timeout 16 bytes above (both in the room
 * of the park's frame's siginfo, which rt_sigreturn does not read). */
static uint64_t park_word(const struct target *t)
{
	return t->park + offsetof(struct k_rt_sigframe, info);
}

/* Writes the park below the frame (see above). Returns 0 or -1. */
static int write_park(struct target *t)
{
	struct k_rt_sigframe p;
	memset(&p, 0, sizeof p);
	t->park = ((t->frame - sizeof p) & ~(uint64_t)15) - 8;
	struct user_regs_struct r = t->saved;
	r.rip = t->gadget;
	r.rsp = t->frame;  /* the ret takes the frame's return address */
	r.rax = SYS_futex;
	r.rdi = park_word(t);
	r.rsi = FUTEX_WAIT_PRIVATE_OP;
	r.rdx = 0;
	r.r10 = park_word(t) + 16;
	r.r8 = r.r9 = 0;
	r.eflags &= ~(0x100ull | 0x400ull | 0x40000ull);  /* TF, DF, AC */
	p.pretcode = t->restorer;
	p.uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	fill_context(&p.uc.mc, &r);
	p.uc.sigmask = ~0ull;
	struct timespec ts = { PARK_MS / 1000, (PARK_MS % 1000) * 1000000L };
	memcpy(p.info + 16, &ts, sizeof ts);
	if (mem_rw(t, t->park, &p, sizeof p, true)) {
		t->park = 0;
		return -1;
	}
	return 0;
}

/* Writes the frame below the thread's stack pointer, and the park below
 * it when libc has the park's `syscall; ret` (see above). Returns 0 or
 * -1. */
static int write_frame(struct target *t)
{
	struct user_regs_struct r = resume_regs(t);
	uint64_t top = (t->saved.rsp - RED_ZONE) & ~(uint64_t)63;
	t->strings = top - STRINGS_SPACE;
	t->result = top - 16;
	uint64_t fp = 0;
	unsigned char *x = t->xstate;
	size_t xlen = t->xstate_len;
	if (xlen >= 512) {
		/* the fxsave area's software bytes: the kernel's ptrace copy
		 * carries them; say them when it did not */
		uint32_t magic1, xsize;
		memcpy(&magic1, x + 464, 4);
		memcpy(&xsize, x + 464 + 16, 4);
		if (xlen > 512 + 64 && (magic1 != FP_XSTATE_MAGIC1 || xsize != xlen)) {
			uint32_t ext = (uint32_t)xlen + 4;
			uint64_t feat;
			memcpy(&feat, x + 512, 8);
			magic1 = FP_XSTATE_MAGIC1;
			xsize = (uint32_t)xlen;
			memcpy(x + 464, &magic1, 4);
			memcpy(x + 468, &ext, 4);
			memcpy(x + 472, &feat, 8);
			memcpy(x + 480, &xsize, 4);
		} else if (xlen <= 512 + 64) {
			memset(x + 464, 0, 48);  /* the legacy area alone */
		}
		uint32_t magic2 = FP_XSTATE_MAGIC2;
		memcpy(x + xlen, &magic2, 4);
		fp = (t->strings - (xlen + 4)) & ~(uint64_t)63;
	}
	uint64_t below = fp ? fp : t->strings;
	struct k_rt_sigframe f;
	memset(&f, 0, sizeof f);
	t->frame = ((below - sizeof f) & ~(uint64_t)15) - 8;  /* as at a function's entry */
	f.pretcode = t->restorer;
	f.uc.uc_flags = (fp && xlen > 512 + 64 ? UC_FP_XSTATE : 0) | UC_SIGCONTEXT_SS |
			UC_STRICT_RESTORE_SS;
	/* uc_stack left invalid (size 0): the thread's sigaltstack stays */
	fill_context(&f.uc.mc, &r);
	f.uc.mc.fpstate = fp;
	f.uc.sigmask = t->sigmask;
	if ((fp && mem_rw(t, fp, x, xlen + 4, true)) || mem_rw(t, t->frame, &f, sizeof f, true))
		return -1;
	return t->gadget ? write_park(t) : 0;
}

/* Checks that the stopped thread can run calls (a stack with room, a
 * mask it can be given back), saves its state and makes it resumable
 * (a wait the stop made fail with EINTR runs again). Returns 0, or -1
 * with the thread still held (give_back or detach it). */
static int hold(struct target *t)
{
	struct iovec iov = { t->xstate, XSTATE_MAX - 64 };
	if (t->busy ? false : swaps_mask(&t->saved))
		return -1;
	if (!stack_room(t, t->saved.rsp) || thread_sigmask(t, &t->sigmask))
		return -1;
	if (pt(PTRACE_GETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov) == 0)
		t->xstate_len = iov.iov_len;
	else if (pt(PTRACE_GETFPREGS, t->tid, 0, t->xstate) == 0)
		t->xstate_len = 512;
	else
		return -1;
	return 0;
}

/* Lets go of a thread stopped but not held. */
static void let_go(struct target *t)
{
	pt(PTRACE_DETACH, t->tid, 0, 0);
	t->tid = 0;
	t->stopped_ms += ms_since(&t->stopped_at);
}

/* Seizes tid and stops it. Returns 0, -1 when it is gone, or -errno. */
static int seize_stop(struct target *t, pid_t tid)
{
	if (pt(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD))
		return errno == ESRCH ? -1 : -errno;
	t->tid = tid;
	clock_gettime(CLOCK_MONOTONIC, &t->stopped_at);
	pt(PTRACE_INTERRUPT, tid, 0, 0);
	int st, sig;
	while ((sig = wait_stop(t, &st)) > 0)
		pt(PTRACE_CONT, tid, 0, (void *)(long)sig);  /* a signal on its way: let it through */
	if (sig < 0 || pt(PTRACE_GETREGS, tid, 0, &t->saved)) {
		if (sig >= 0)
			let_go(t);
		t->tid = 0;
		return -1;
	}
	/* a wait the stop made fail with EINTR (epoll_wait does) runs again
	 * whatever comes next: the program never sees the EINTR */
	if ((long)t->saved.orig_rax >= 0 && (long)t->saved.rax == -EINTR) {
		struct user_regs_struct r = resume_regs(t);
		pt(PTRACE_SETREGS, tid, 0, &r);
	}
	return 0;
}

/* Third choice, for a process whose threads never wait in a system call
 * (CPU loops, spinning): stops each thread in turn and keeps the first
 * one found running the program's own code (see own_code). Returns 0
 * with t->busy set, or -EAGAIN. */
static int borrow_busy(struct target *t)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/maps", t->pid);
	char *maps = slurp(path, NULL);
	snprintf(path, sizeof path, "/proc/%d/task", t->pid);
	DIR *d = maps ? opendir(path) : NULL;
	int found = -EAGAIN;
	for (struct dirent *e; d && found && (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || seize_stop(t, tid))
			continue;
		t->busy = true;
		if ((long)t->saved.orig_rax == -1 && own_code(maps, t->saved.rip) && !hold(t)) {
			found = 0;
			break;
		}
		t->busy = false;
		let_go(t);
	}
	if (d)
		closedir(d);
	free(maps);
	return found;
}

/* Seizes and stops one waiting thread and holds it (see hold). Returns
 * 0, or -errno with the reason printed. */
static int borrow(struct target *t)
{
	struct timespec t0;
	struct avoid unfit = { .n = 0 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int attempt = 0; attempt < 200; attempt++) {
		pid_t tid = pick_thread(t->pid, &unfit);
		if (!tid && process_gone(t->pid))
			break;  /* said below: "process N exited" */
		if (!tid) {
			/* no thread waits: after a short while, take one that
			 * runs the program's own code */
			if (ms_since(&t0) > 300 && borrow_busy(t) == 0)
				return 0;
			if (ms_since(&t0) > 5000)
				break;
			usleep(10000);
			continue;
		}
		int e = seize_stop(t, tid);
		if (e == -1)
			continue;  /* the thread has just ended */
		if (e == -EPERM && held_briefly(t->pid, tid)) {
			usleep(2000);  /* the agent's scan, or another request: for a moment */
			continue;
		}
		if (e)
			return e;
		/* still in the waiting call: the stop aborted it */
		if ((long)t->saved.orig_rax >= 0 &&
		    (waiting_call((long)t->saved.orig_rax) ||
		     ((long)t->saved.orig_rax == SYS_futex && futex_ok(t))) &&
		    restart_names((long)t->saved.rax)) {
			unsigned char insn[2];
			if (!mem_rw(t, t->saved.rip - 2, insn, 2, false) && insn[0] == 0x0f &&
			    insn[1] == 0x05) {
				if (!hold(t))
					return 0;
				if (unfit.n < (int)(sizeof unfit.tid / sizeof unfit.tid[0]))
					unfit.tid[unfit.n++] = tid;
			}
		}
		let_go(t);
		if (attempt > 20)
			usleep(1000);  /* the one found cannot be held: others may come */
	}
	target_error(t->pid, "no thread of process %d could be borrowed safely: none waits in a system "
		  "call (read, poll, epoll_wait, a sleep, a condition variable...) or runs the "
		  "program's own code (not libc's, the loader's or an allocator's) with room on "
		  "its stack", t->pid);
	return -EAGAIN;
}

/* Gives the thread back: it resumes as it was (from the park, through
 * the frame's rt_sigreturn; from the entry of the last call's
 * rt_sigreturn; or from its stop). */
static void give_back(struct target *t)
{
	if (t->parked) {
		/* out of the park, into the frame's rt_sigreturn: as the park's
		 * ret would after its wait (if this fails, the wait ends it) */
		struct user_regs_struct r = t->saved;
		r.rip = t->restorer;
		r.rsp = t->frame + 8;
		r.rax = 0;
		r.orig_rax = (unsigned long long)-1;  /* the park's wait is not restarted */
		pt(PTRACE_SETREGS, t->tid, 0, &r);
		t->parked = false;
	}
	pt(PTRACE_DETACH, t->tid, 0, 0);
	t->stopped_ms += ms_since(&t->stopped_at);
	t->tid = 0;
	t->busy = false;
}

/* A stop of the thread during a call that is not heaptrail's own: 0 to
 * go on (a signal passed on to the kernel, see below), -EFAULT when the
 * call faulted (the fault is delivered and the thread let go: the
 * program would have died of it). */
static int pass_stop(struct target *t, int sig, int resume)
{
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
		pt(PTRACE_DETACH, t->tid, 0, (void *)(long)sig);
		t->tid = 0;
		t->parked = false;
		return -EFAULT;
	}
	/* a signal before the call's own rt_sigreturn has blocked them all:
	 * delivered now (its handler returns to that rt_sigreturn), or
	 * queued again by the kernel when blocked (SIGSTOP is not: it stops
	 * the thread as it would); heaptrail holds none */
	if (pt(resume, t->tid, 0, (void *)(long)(sig > 0 ? sig : 0)))
		return -errno;
	return 0;
}

/* Whether the thread waits in the park now, as /proc/PID/task/TID/syscall
 * says. (Nothing else there tells that a call has ended: a call may wait
 * in a system call on a stack of the agent's own, anywhere.) */
static bool in_park(struct target *t)
{
	char buf[256];
	ssize_t n = pread(t->scfd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	long nr;
	unsigned long a0, sp, pc;
	return sscanf(buf, "%ld %lx %*x %*x %*x %*x %*x %lx %lx", &nr, &a0, &sp, &pc) == 4 &&
	       nr == SYS_futex && a0 == park_word(t) && sp == t->frame && pc == t->gadget + 2;
}

/* Lets a call started by remote_call run (PTRACE_CONT) and stops the
 * thread in the park at its end (see "the calls"). Returns 0 with the
 * thread held there (t->parked), -ESRCH when the thread is gone,
 * -EFAULT when the call faulted, -ETIME when the thread left the park by
 * itself before heaptrail stopped it (it is stopped where it went: let
 * it go as it is). probe: no call, the thread sent into the park alone
 * (try_park): it is looked at every 50 ms, and -ETIME when it went back
 * without waiting there (a seccomp filter refused the wait). */
static int run_to_park(struct target *t, bool probe)
{
	struct timespec t0;
	bool seen;
again:
	if (pt(PTRACE_CONT, t->tid, 0, 0))
		return -errno;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long us = 20;
	for (;;) {
		int st, sig;
		pid_t w = waitpid(t->tid, &st, WNOHANG | __WALL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 || (w > 0 && (WIFEXITED(st) || WIFSIGNALED(st)))) {
			if (w == t->pid)
				note_reaped(w, st);
			return -ESRCH;
		}
		if (w > 0 && WIFSTOPPED(st)) {
			sig = st >> 16 ? 0 : WSTOPSIG(st);
			int e = pass_stop(t, sig, PTRACE_CONT);
			if (e)
				return e;
			continue;
		}
		if ((seen = in_park(t)) || (probe && ms_since(&t0) > 50)) {
			if (seen && !probe)
				stall_point();
			break;
		}
		struct timespec d = { 0, us * 1000 };
		nanosleep(&d, NULL);
		us = us * 3 / 2 > 500 ? 500 : us * 3 / 2;
	}
	if (pt(PTRACE_INTERRUPT, t->tid, 0, 0))
		return -errno;
	for (;;) {
		int st, sig = wait_stop(t, &st);
		if (sig < 0)
			return -ESRCH;
		if (!sig)
			break;  /* the interrupt's stop (or a group stop: where, the registers say) */
		int e = pass_stop(t, sig, PTRACE_CONT);
		if (e)
			return e;
	}
	struct user_regs_struct q;
	if (pt(PTRACE_GETREGS, t->tid, 0, &q))
		return -errno;
	bool waiting = q.rip == t->gadget + 2 && q.rsp == t->frame &&
		       (long)q.orig_rax == SYS_futex && (restart_names((long)q.rax) ||
							 (long)q.rax == -ETIMEDOUT);
	if (probe && !seen && !waiting) {
		/* on its way in (the park's rt_sigreturn, its system call not
		 * made yet: not run yet, on a busy machine), or gone back: the
		 * wait refused */
		if (((q.rip == t->restorer || q.rip == t->restorer + 7) && q.rsp == t->park + 8) ||
		    (q.rip == t->gadget && q.rsp == t->frame))
			goto again;
		return -ETIME;
	}
	/* in the park, or past its wait on the way to the frame's
	 * rt_sigreturn, not into it: the same place to go on from */
	if ((q.rip == t->gadget + 2 && q.rsp == t->frame) ||
	    ((q.rip == t->restorer || q.rip == t->restorer + 7) && q.rsp == t->frame + 8)) {
		t->parked = true;
		return 0;
	}
	return -ETIME;
}

/* Calls fn(a[0], ..., a[5]) in the thread, on its own stack below the
 * frames, returning into the park (or, stepped, into the frame's
 * rt_sigreturn). Returns 0 when the call ended (the thread held in the
 * park, or stopped at that rt_sigreturn), or an error of run_to_park's
 * (-ESRCH, -EFAULT, -ETIME) or -errno. The last system call that failed
 * during a stepped call is in t->failed_nr, t->failed_err. */
static int remote_call(struct target *t, uint64_t fn, const uint64_t a[6])
{
	bool park = t->park && t->scfd >= 0 && !t->step;
	uint64_t ret_to = park ? t->park : t->frame;
	struct user_regs_struct r = t->saved;
	r.rip = fn;
	r.rsp = ret_to;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.rcx = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	r.rax = 0;
	r.eflags &= ~(0x100ull | 0x400ull | 0x40000ull);  /* TF, DF, AC: as for a handler */
	/* The call starts through a frame of its own too, under the others:
	 * an rt_sigreturn into fn with every signal blocked (one that comes
	 * waits until the call's end puts the thread's mask back: heaptrail
	 * holds none) and the initial floating-point state. */
	struct k_rt_sigframe f;
	memset(&f, 0, sizeof f);
	uint64_t setup = (ret_to - 256 - sizeof f) & ~(uint64_t)15;
	f.uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	fill_context(&f.uc.mc, &r);
	f.uc.sigmask = ~0ull;
	if (mem_rw(t, setup, &f, sizeof f, true))
		return -EIO;
	struct user_regs_struct go = t->saved;
	go.rip = t->restorer;
	go.rsp = setup + 8;  /* as after the restorer's return address is taken */
	go.rax = 0;
	go.orig_rax = (unsigned long long)-1;  /* no restart: at a stop in a call, none runs */
	t->failed_nr = -1;
	if (pt(PTRACE_SETREGS, t->tid, 0, &go))
		return -errno;
	t->parked = false;  /* out of the park, if it was there */
	if (park)
		return run_to_park(t, false);
	t->park = 0;  /* the call's stack runs over it: the next calls are stepped too */
	if (pt(PTRACE_SYSCALL, t->tid, 0, 0))
		return -errno;
	for (;;) {
		int st, sig = wait_stop(t, &st);
		if (sig < 0)
			return -ESRCH;
		if (sig == (SIGTRAP | 0x80)) {
			struct user_regs_struct q;
			if (pt(PTRACE_GETREGS, t->tid, 0, &q))
				return -errno;
			if ((long)q.orig_rax == SYS_rt_sigreturn && q.rsp == t->frame + 8 &&
			    (long)q.rax == -ENOSYS)
				return 0;  /* the call has returned */
			if ((long)q.rax < 0 && (long)q.rax > -4096 && (long)q.rax != -ENOSYS) {
				t->failed_nr = (long)q.orig_rax;
				t->failed_err = (int)-(long)q.rax;
			}
			sig = 0;
		}
		int e = pass_stop(t, sig, PTRACE_SYSCALL);
		if (e)
			return e;
	}
}

/* Calls the agent's fn(a0..a3) through its heaptrail_attach_call (at
 * call), which stores the result in the frame's block: *ret. */
static int agent_call(struct target *t, uint64_t call, uint64_t fn, uint64_t a0, uint64_t a1,
		      uint64_t a2, uint64_t a3, uint64_t *ret)
{
	uint64_t unset = 0x5eadbeefdeadull;
	uint64_t a[6] = { fn, a0, a1, a2, a3, t->result };
	if (mem_rw(t, t->result, &unset, 8, true))
		return -EIO;
	int e = remote_call(t, call, a);
	if (!e && (mem_rw(t, t->result, ret, 8, false) || *ret == unset))
		e = -EIO;
	return e;
}

/* ---------- common front: checks and the calls ---------- */

/* Our uid_map, its columns one space apart, when heaptrail runs in a user
 * namespace other than the first (whose map is "0 0 4294967295"); else
 * NULL. Static storage. */
static const char *user_ns_map(void)
{
	static char map[128];
	char *text = slurp("/proc/self/uid_map", NULL);
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
static void seize_error(const struct target *t, int e)
{
	pid_t pid = t->pid;
	char yama[16] = "";
	char *y = slurp("/proc/sys/kernel/yama/ptrace_scope", NULL);
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
		cli_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "1: %s%s", pid, parent_only, one_says[t->use]);
	else if (e == EPERM && scope == 2)
		cli_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "2: only root or CAP_SYS_PTRACE may trace: run heaptrail as root", pid);
	else if (e == EPERM && scope == 3)
		cli_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "3: no process may be traced until the next boot%s", pid,
			  none_says[t->use]);
	else if (e == EPERM && (umap = user_ns_map()))
		cli_error("not permitted to trace process %d: heaptrail runs in a user namespace "
			  "(uid_map %s), whose root has no CAP_SYS_PTRACE over a process outside it: "
			  "run heaptrail in process %d's user namespace (the host's)", pid, umap, pid);
	else if (e == EPERM)
		cli_error("not permitted to trace process %d: it belongs to another user, or is "
			  "already traced (needs the same user or CAP_SYS_PTRACE)", pid);
	else
		target_error(pid, "cannot trace process %d: %s", pid, strerror(e));
}

/* Whether we hold capability cap (CapEff of our status). */
static bool have_cap(int cap)
{
	char buf[32];
	char *status = slurp("/proc/self/status", NULL);
	bool has = status && status_field(status, "CapEff", buf, sizeof buf) &&
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
	cli_error("cannot read %s: it is for process %ld's user alone (uid %u), and so are the "
		  "files its agent writes: heaptrail needs CAP_DAC_READ_SEARCH besides "
		  "CAP_SYS_PTRACE, or to run as that user or root", path, pid, (unsigned)st.st_uid);
	return 1;
}

/* Opens the target for calls; checks what can be checked without
 * touching it. maps is returned (free it). Returns 0 or prints and -1. */
static int open_target(struct target *t, long pid, enum target_use use, char **maps)
{
	char path[96], buf[64];
	memset(t, 0, sizeof *t);
	t->pid = (pid_t)pid;
	t->use = use;
	t->memfd = -1;
	t->scfd = -1;
	for (int i = 0; i < 1000 && held_briefly((pid_t)pid, (pid_t)pid); i++)
		usleep(2000);  /* the agent's scan, or another request, for a moment */
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = slurp(path, NULL);
	if (!status) {
		cli_error("no process %ld", pid);
		return -1;
	}
	if (status_field(status, "State", buf, sizeof buf) && (buf[0] == 'Z' || buf[0] == 'X')) {
		cli_error("process %ld is a zombie (it has exited; its parent has not reaped it)", pid);
		free(status);
		return -1;
	}
	if (status_field(status, "TracerPid", buf, sizeof buf) && strcmp(buf, "0")) {
		cli_error("process %ld is already traced by process %s", pid, buf);
		free(status);
		return -1;
	}
	free(status);
	if (pid == getpid()) {
		cli_error("cannot attach to heaptrail itself");
		return -1;
	}
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	*maps = slurp(path, NULL);
	if (!*maps) {
		if (errno == EACCES || errno == EPERM)
			seize_error(t, EPERM);
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
static bool seccomp_filtered(pid_t pid)
{
	char path[64], sec[16] = "";
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	char *status = slurp(path, NULL);
	if (status)
		status_field(status, "Seccomp", sec, sizeof sec);
	free(status);
	return !strcmp(sec, "2");
}

/* Sends the held thread into the park alone (its rt_sigreturn, then the
 * wait) and stops it there: 0, or an error of run_to_park's (-ETIME:
 * it went back at once, the wait refused). */
static int try_park(struct target *t)
{
	struct user_regs_struct go = t->saved;
	go.rip = t->restorer;
	go.rsp = t->park + 8;  /* as after the call's return took the address */
	go.rax = 0;
	go.orig_rax = (unsigned long long)-1;
	if (pt(PTRACE_SETREGS, t->tid, 0, &go))
		return -errno;
	return run_to_park(t, true);
}

/* Seizes and holds a thread, writes the frame of the calls. Returns 0
 * or prints and -1. */
static int start_calls(struct target *t, const char *maps)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/mem", t->pid);
	/* the signals that ask heaptrail to end wait while it holds the
	 * thread (a SIGKILL cannot: see "the calls" above) */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGQUIT);
	sigaddset(&stop, SIGPIPE);
	t->masked = !sigprocmask(SIG_BLOCK, &stop, &t->oldmask);
	t->restorer = find_restorer(t->pid, maps, &t->gadget);
	if (!t->restorer) {
		target_error(t->pid, "cannot find the signal return (__restore_rt) of the libc of "
			     "process %d", t->pid);
		return -1;
	}
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0 && (errno == EACCES || errno == EPERM)) {
		/* the file is its user's alone: process_vm_writev (mem_rw) */
	} else if (t->memfd < 0) {
		target_error(t->pid, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	int e = borrow(t);
	if (e) {
		if (e != -EAGAIN)
			seize_error(t, -e);
		return -1;
	}
	snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", t->pid, t->tid);
	t->scfd = t->gadget ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (write_frame(t)) {
		target_error(t->pid, "cannot write into the stack of process %d", t->pid);
		return -1;
	}
	/* A seccomp filter may refuse the park's futex wait (the filters of
	 * containers and of systemd allow it: every threaded program needs
	 * it): the thread would go back at once after a call, its result
	 * lost. Under a filter the park is tried alone first; refused, the
	 * thread is borrowed again and the calls are stepped. */
	if (t->scfd >= 0 && seccomp_filtered(t->pid)) {
		e = try_park(t);
		if (e == -ETIME) {
			give_back(t);
			close(t->scfd);
			t->scfd = -1;
			if ((e = borrow(t))) {
				if (e != -EAGAIN)
					seize_error(t, -e);
				return -1;
			}
			e = write_frame(t) ? -EIO : 0;
		}
		if (e) {
			target_error(t->pid, "cannot borrow a thread of process %d: %s", t->pid,
				     strerror(-e));
			return -1;
		}
	}
	return 0;
}

/* The name of a system call a loader makes, for a message. */
static const char *syscall_name(long nr)
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

/* Gives the thread back. */
static void end_calls(struct target *t)
{
	if (t->tid)
		give_back(t);
	if (t->memfd >= 0)
		close(t->memfd);
	t->memfd = -1;
	if (t->scfd >= 0)
		close(t->scfd);
	t->scfd = -1;
	t->park = 0;
	if (t->masked)
		sigprocmask(SIG_SETMASK, &t->oldmask, NULL);
	t->masked = false;
}


#define MEMFD_PREFIX "/memfd:"
#define DELETED " (deleted)"

/* The agent's load address and its file as the target sees it (for one
 * loaded from a memory file, "/memfd:NAME"). */
static int agent_in(const char *maps, uint64_t *base, char *path, size_t cap)
{
	/* the load address is the mapping at offset 0 followed by the
	 * executable one of the same file: a dlopen that failed half-way can
	 * leave the first alone behind */
	const char *name = "/libheaptrail.so";
	size_t nl = strlen(name);
	uint64_t start = 0;
	char first[PATH_MAX] = "";
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi, off;
		char perms[8];
		int pos = 0;
		if (sscanf(l, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perms, &off, &pos) < 4 || !pos)
			continue;
		const char *p = l + pos;
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, "\n");
		/* loaded from a memory file (containers, below): its name */
		if (!strncmp(p, MEMFD_PREFIX, strlen(MEMFD_PREFIX)) && n > strlen(DELETED) &&
		    !memcmp(p + n - strlen(DELETED), DELETED, strlen(DELETED)))
			n -= strlen(DELETED);
		if (*p != '/' || n < nl || n >= sizeof first || memcmp(p + n - nl, name, nl))
			continue;
		if (off == 0) {
			start = lo;
			snprintf(first, sizeof first, "%.*s", (int)n, p);
		} else if (perms[2] == 'x' && first[0] && strlen(first) == n &&
			   !memcmp(first, p, n)) {
			*base = start;
			snprintf(path, cap, "%s", first);
			return 0;
		}
	}
	return -1;
}

/* ---------- a process in other namespaces (containers) ----------
 *
 * A process run by docker, podman or Kubernetes has a root of its own
 * (its mount namespace) and sees itself under another PID (its PID
 * namespace). Attached from the host, or from a container that shares
 * its PID namespace:
 *  - the agent, when the process does not see our file, is copied into a
 *    memory file the process makes (memfd_create, a borrowed call),
 *    loaded with dlopen("/proc/self/fd/M"), and M is closed: nothing is
 *    written into its filesystem. The agent needs libc alone (the
 *    Makefile), which every dynamically linked image has;
 *  - the output directory, when the process does not see ours, is handed
 *    to it as a descriptor: its agent makes a socket pair
 *    (heaptrail_attach_pair), heaptrail takes one end with pidfd_getfd
 *    and sends an O_PATH descriptor of the directory over it
 *    (SCM_RIGHTS), and the agent's start, told output=OUT_PENDING,
 *    receives it and closes the pair. The agent writes through
 *    /proc/self/fd/D, holds D while attached and closes it at the detach;
 *    heaptrail reads what it wrote through /proc/PID/fd/D
 *    (cli_agent_path);
 *  - the files and the records name the PID the user typed (the agent's
 *    `pid` option), not the one the process sees.
 * Both routes need /proc mounted in the process's mount namespace, as
 * every container runtime has it. A heaptrail killed between two of
 * these calls leaves the process a descriptor it never uses (a memory
 * file, or the pending pair) until the agent's next start or stop,
 * which closes them (src/agent/attach.c); the borrowed thread runs on
 * as after any other call. One held up past the park after one of them
 * finds the thread gone back by itself: the attach borrows one again and
 * loads the agent only if it is not mapped yet (do_attach).
 */

/* Whether path names the same file for process pid as for us. */
static bool seen_alike(long pid, const char *path)
{
	char file[PATH_MAX + 32];
	struct stat ours, theirs;
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, path);
	return !stat(path, &ours) && !stat(file, &theirs) && ours.st_dev == theirs.st_dev &&
	       ours.st_ino == theirs.st_ino;
}

/* The PID process pid sees itself under (the last of its NSpid), or pid. */
static long inner_pid(long pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = slurp(path, NULL);
	long inner = pid;
	if (status && status_field(status, "NSpid", buf, sizeof buf)) {
		char *last = strrchr(buf, '\t');
		inner = atol(last ? last + 1 : buf);
	}
	free(status);
	return inner > 0 ? inner : pid;
}

/* Whether /proc is mounted in the mount namespace of process pid. */
static bool proc_mounted_in(long pid)
{
	char path[64];
	struct statfs sf;
	snprintf(path, sizeof path, "/proc/%ld/root/proc", pid);
	return !statfs(path, &sf) && sf.f_type == PROC_SUPER_MAGIC;
}

/* "; its seccomp filter may refuse it" for a process under a seccomp
 * filter, else "". */
static const char *seccomp_may(long pid)
{
	char path[64], sec[16] = "";
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = slurp(path, NULL);
	if (status)
		status_field(status, "Seccomp", sec, sizeof sec);
	free(status);
	return !strcmp(sec, "2") ? "; its seccomp filter may refuse it" : "";
}

/* The descriptor of process pid whose link reads want, or -1. */
static int fd_linked(long pid, const char *want)
{
	char path[64], link[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%ld/fd", pid);
	DIR *d = opendir(path);
	int found = -1;
	for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
		char fd[96];
		snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
		ssize_t n = readlink(fd, link, sizeof link - 1);
		if (n > 0 && (link[n] = 0, !strcmp(link, want)))
			found = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* Whether process pid maps a file named name (as its maps show it). */
static bool mapped(long pid, const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	char *maps = slurp(path, NULL);
	bool found = maps && strstr(maps, name);
	free(maps);
	return found;
}

/* The value of a dynamic symbol of the module loaded at base in process
 * pid, read from its memory through mem_rw (a module loaded from a memory file has no
 * path to read): its dynamic section, whose symbol table ends where the
 * string table starts (GNU ld and lld, as the agent's attach.c reads its
 * own). 0 when not found. */
static uint64_t mem_symbol(long pid, uint64_t base, const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/mem", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct target vm = { .pid = (pid_t)pid, .memfd = fd };  /* for mem_rw */
	uint64_t found = 0, symtab = 0, strtab = 0, strsz = 0, dynat = 0;
	Elf64_Sym *syms = NULL;
	char *strs = NULL;
	Elf64_Ehdr eh;
	if (mem_rw(&vm, base, &eh, sizeof eh, false) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_phnum > 64)
		goto out;
	for (int i = 0; i < eh.e_phnum && !dynat; i++) {
		Elf64_Phdr ph;
		if (mem_rw(&vm, base + eh.e_phoff + (uint64_t)i * sizeof ph, &ph, sizeof ph, false))
			goto out;
		if (ph.p_type == PT_DYNAMIC)
			dynat = base + ph.p_vaddr;
	}
	for (int i = 0; dynat && i < 256; i++) {
		Elf64_Dyn dyn;
		if (mem_rw(&vm, dynat + (uint64_t)i * sizeof dyn, &dyn, sizeof dyn, false) ||
		    dyn.d_tag == DT_NULL)
			break;
		/* the loader relocates these in place, unless the section is
		 * read-only: an unrelocated one is below the load address */
		uint64_t v = dyn.d_un.d_ptr < base ? dyn.d_un.d_ptr + base : dyn.d_un.d_ptr;
		if (dyn.d_tag == DT_SYMTAB)
			symtab = v;
		else if (dyn.d_tag == DT_STRTAB)
			strtab = v;
		else if (dyn.d_tag == DT_STRSZ)
			strsz = dyn.d_un.d_val;
	}
	if (!symtab || strtab <= symtab || strtab - symtab > (4u << 20) || !strsz || strsz > (4u << 20))
		goto out;
	size_t n = (size_t)(strtab - symtab) / sizeof *syms;
	syms = malloc(n * sizeof *syms);
	strs = malloc(strsz + 1);
	if (!syms || !strs ||
	    mem_rw(&vm, symtab, syms, n * sizeof *syms, false) ||
	    mem_rw(&vm, strtab, strs, strsz, false))
		goto out;
	strs[strsz] = 0;
	for (size_t k = 1; k < n && !found; k++)
		if (syms[k].st_name < strsz && syms[k].st_shndx != SHN_UNDEF && syms[k].st_value &&
		    !strcmp(strs + syms[k].st_name, name))
			found = syms[k].st_value;
out:
	if (fd >= 0)
		close(fd);
	free(syms);
	free(strs);
	return found;
}

/* A symbol of the agent loaded at base in process pid, whose file the
 * process sees at path ("/memfd:..." for one loaded from a memory file). */
static uint64_t agent_symbol(long pid, uint64_t base, const char *path, const char *name)
{
	char file[PATH_MAX + 32];
	if (!strncmp(path, MEMFD_PREFIX, strlen(MEMFD_PREFIX)))
		return mem_symbol(pid, base, name);
	target_path(pid, path, file, sizeof file);
	return elf_symbol(file, name);
}

/* Copies the file at from into descriptor fd of process pid (through
 * /proc/PID/fd). Returns 0 or -errno. */
static int copy_into(long pid, int fd, const char *from)
{
	char path[64];
	size_t len;
	char *img = slurp(from, &len);
	snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fd);
	int out = img && len ? open(path, O_WRONLY | O_CLOEXEC) : -1, e = 0;
	if (out < 0)
		e = img && len ? -errno : -EIO;
	for (size_t done = 0; !e && done < len;) {
		ssize_t w = write(out, img + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			e = w < 0 ? -errno : -EIO;
		else
			done += (size_t)w;
	}
	if (out >= 0)
		close(out);
	free(img);
	return e;
}

/* Loads the agent (our file at agent) into the held process through a
 * memory file of its own (see above); libc's memfd_create, dlopen and
 * close at the addresses given. Returns 0 when dlopen ran (whether it
 * loaded the agent, the map says), -ETIME when the thread left the park
 * by itself after one of the three calls (heaptrail held up: it is let
 * go as it is, a memory file it made left for the agent's start to
 * close), or prints and -1. */
static int load_via_memfd(struct target *t, uint64_t create, uint64_t dl, uint64_t close_fn,
			  const char *agent)
{
	long pid = t->pid;
	char name[64], want[96], path[64];
	uint64_t tag = 0;
	if (getrandom(&tag, sizeof tag, 0) != (ssize_t)sizeof tag)
		tag = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	snprintf(name, sizeof name, "heaptrail-%016llx/libheaptrail.so", (unsigned long long)tag);
	snprintf(want, sizeof want, MEMFD_PREFIX "%s" DELETED, name);
	uint64_t a[6] = { t->strings, MFD_CLOEXEC, 0, 0, 0, 0 };
	if (mem_rw(t, t->strings, name, strlen(name) + 1, true)) {
		target_error(pid, "cannot write into process %ld's memory", pid);
		return -1;
	}
	int e = remote_call(t, create, a);
	if (e == -ETIME)
		return e;
	int m = e ? -1 : fd_linked(pid, want);
	if (m < 0) {
		char why[160] = "";
		if (t->failed_nr >= 0)
			snprintf(why, sizeof why, ": %s", strerror(t->failed_err));
		target_error(pid, "process %ld could not make a memory file for the agent "
			     "(memfd_create%s)%s", pid, e ? ": the call failed" : why,
			     seccomp_may(pid));
		return -1;
	}
	int ret = 0;
	e = copy_into(pid, m, agent);
	if (e) {
		target_error(pid, "cannot copy the agent into process %ld's memory file: %s", pid,
			     strerror(-e));
		ret = -1;
	} else {
		snprintf(path, sizeof path, "/proc/self/fd/%d", m);
		a[0] = t->strings;
		a[1] = RTLD_NOW_VALUE;
		if (mem_rw(t, t->strings, path, strlen(path) + 1, true) ||
		    (e = remote_call(t, dl, a))) {
			if (e == -ETIME)
				return e;
			target_error(pid, "the call to dlopen in process %ld failed: %s", pid,
				     strerror(e ? -e : EIO));
			ret = -1;
		} else if (t->park && !mapped(pid, want)) {
			/* once more, stepped, to name the system call that fails */
			t->step = true;
			e = remote_call(t, dl, a);
			t->step = false;
			if (e) {
				target_error(pid, "the call to dlopen in process %ld failed: %s",
					     pid, strerror(-e));
				ret = -1;
			}
		}
	}
	/* the mapping holds the file from now on */
	a[0] = (uint64_t)m;
	a[1] = 0;
	if (t->tid && (e = remote_call(t, close_fn, a)) && !ret) {
		if (e == -ETIME)
			return e;  /* the load is done: the attach goes on */
		target_error(pid, "the call to close in process %ld failed", pid);
		ret = -1;
	}
	return ret;
}

/* The output= the agent's start takes the directory from, sent over the
 * pair its heaptrail_attach_pair made (src/agent/attach.c) */
#define OUT_PENDING "/proc/self/fd/pending"

/* Sends the held process, whose agent is loaded (heaptrail_attach_call at
 * call), a descriptor of the directory dir over a socket pair its agent
 * makes (heaptrail_attach_pair at pair; see above): its start, given
 * OUT_PENDING, receives it and closes the pair, which the agent also
 * closes at its next start or stop when a heaptrail killed meanwhile
 * never started it. Returns 0, or prints and -1 (the pair then is
 * closed by a start that finds nothing, *pending 1). */
static int send_dir(struct target *t, uint64_t call, uint64_t pair, const char *dir,
		    bool *pending)
{
	long pid = t->pid;
	uint64_t at_sv = t->strings, rv = 0;
	int sv[2] = { -1, -1 }, pidfd = -1, end = -1, dfd = -1;
	*pending = false;
	int e = agent_call(t, call, pair, at_sv, 0, 0, 0, &rv);
	if (e == -ETIME) {
		/* the thread went back, a pair perhaps made: the agent closes
		 * it at its next start or stop */
		target_error(pid, "heaptrail_attach_pair ran in process %ld, but its result was lost: "
			     "heaptrail was held up for more than %d ms after it (a machine this "
			     "loaded may need another try)", pid, PARK_MS);
		return -1;
	}
	if (e || (int)rv || mem_rw(t, at_sv, sv, sizeof sv, false)) {
		target_error(pid, "process %ld could not make the socket pair that takes the output "
			     "directory (socketpair%s%s)%s", pid, !e && (int)rv ? ": " : "",
			     !e && (int)rv ? strerror(-(int)rv) : "", seccomp_may(pid));
		return -1;
	}
	*pending = true;
	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	end = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, sv[1], 0);
	dfd = end < 0 ? -1 : open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *why = pidfd < 0 ? "pidfd_open" : end < 0 ? "pidfd_getfd" : dfd < 0 ? "open" : NULL;
	int err = why ? errno : 0;
	if (!why) {
		union {
			struct cmsghdr hdr;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		char one = 'd';
		struct iovec iov = { &one, 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				      .msg_controllen = sizeof ctl.buf };
		memset(ctl.buf, 0, sizeof ctl.buf);
		ctl.hdr.cmsg_level = SOL_SOCKET;
		ctl.hdr.cmsg_type = SCM_RIGHTS;
		ctl.hdr.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&ctl.hdr), &dfd, sizeof dfd);
		if (sendmsg(end, &msg, MSG_NOSIGNAL) != 1) {
			why = "sendmsg";
			err = errno;
		}
	}
	if (dfd >= 0)
		close(dfd);
	if (end >= 0)
		close(end);
	if (pidfd >= 0)
		close(pidfd);
	if (why) {
		cli_error("cannot send the output directory %s to process %ld (%s: %s)", dir, pid,
			  why, strerror(err));
		return -1;
	}
	return 0;
}

/* Calls the agent's entry point name(a0, a1) in pid; *ret its int
 * result. With request (a FMT_SIGVAL_* value), name(request, regs,
 * nregs, wrote) instead, regs the borrowed thread's registers as it was
 * stopped (heaptrail_request), and the path of the file the agent wrote
 * into wrote (FMT_REQUEST_PATH_MAX bytes; "" from an agent that does not
 * say). Returns 0 or prints and -1. */
static int call_agent(long pid, const char *name, const char *s0, const char *s1, int request,
		      int *ret, double *stopped_ms, char *wrote)
{
	struct target t;
	char *maps = NULL, agent[PATH_MAX];
	uint64_t base, rv;
	int result = -1;
	enum target_use use = request ? (request & FMT_SIGVAL_DUMP ? USE_LIVE : USE_LEAKS)
			      : !strncmp(name, "heaptrail_dump", 14) ? USE_DUMP : USE_DETACH;
	if (open_target(&t, pid, use, &maps))
		return -1;
	if (agent_in(maps, &base, agent, sizeof agent)) {
		cli_error("process %ld has no heaptrail agent (start it with `heaptrail run`, or "
			  "`heaptrail attach %ld`)", pid, pid);
		goto out;
	}
	uint64_t fn = agent_symbol(pid, base, agent, name);
	uint64_t call = agent_symbol(pid, base, agent, "heaptrail_attach_call");
	/* heaptrail_dump_request(wrote): an older agent has heaptrail_dump
	 * alone, which does not say where it wrote */
	bool dump_path = !strcmp(name, "heaptrail_dump_request");
	if (dump_path && (!fn || !call || !wrote)) {
		name = "heaptrail_dump";
		fn = agent_symbol(pid, base, agent, name);
		dump_path = false;
	}
	if (wrote)
		wrote[0] = 0;
	if (!fn) {
		target_error(pid, "the agent in process %ld (%s) has no %s: an older heaptrail?", pid,
			     agent, name);
		goto out;
	}
	if (start_calls(&t, maps))
		goto out;
	uint64_t a0 = 0, a1 = 0;
	if (dump_path) {
		/* an empty path for the agent's answer */
		char none = 0;
		a0 = t.strings;
		if (mem_rw(&t, a0, &none, 1, true)) {
			target_error(pid, "cannot write into process %ld's memory", pid);
			goto out;
		}
	}
	if (s0) {
		a0 = t.strings;
		mem_rw(&t, a0, (void *)s0, strlen(s0) + 1, true);
	}
	if (s1) {
		a1 = t.strings + 8192;
		mem_rw(&t, a1, (void *)s1, strlen(s1) + 1, true);
	}
	int e;
	if (call && request) {
		/* heaptrail_request(request, regs, nregs): the registers the
		 * thread was stopped with, roots of a leak check */
		/* one write: the registers, then an empty path for the agent's
		 * answer (wrote) */
		unsigned char in[sizeof t.saved + 1];
		uint64_t regs = t.strings, path = t.strings + sizeof t.saved;
		_Static_assert(sizeof t.saved + FMT_REQUEST_PATH_MAX <= STRINGS_SPACE - 16,
			       "the path fits below the result");
		memcpy(in, &t.saved, sizeof t.saved);
		in[sizeof t.saved] = 0;
		if (mem_rw(&t, regs, in, sizeof in, true))
			e = -EIO;
		else
			e = agent_call(&t, base + call, base + fn, (uint32_t)request, regs,
				       sizeof t.saved / sizeof(uint64_t), wrote ? path : 0, &rv);
		if (wrote && (e || mem_rw(&t, path, wrote, FMT_REQUEST_PATH_MAX, false)))
			wrote[0] = 0;
		if (wrote)
			wrote[FMT_REQUEST_PATH_MAX - 1] = 0;
	} else if (call) {
		e = agent_call(&t, base + call, base + fn, a0, a1, 0, 0, &rv);
		if (dump_path && (e || mem_rw(&t, a0, wrote, FMT_REQUEST_PATH_MAX, false)))
			wrote[0] = 0;
		if (dump_path)
			wrote[FMT_REQUEST_PATH_MAX - 1] = 0;
	} else {
		/* an agent loaded by an older heaptrail: the call runs, its
		 * result goes with the registers the rt_sigreturn puts back */
		uint64_t a[6] = { a0, a1, 0, 0, 0, 0 };
		e = remote_call(&t, base + fn, a);
		rv = 0;
		if (!e)
			fprintf(stderr, "heaptrail: the agent in process %ld is older than heaptrail: "
				"%s ran, its result is not known\n", pid, name);
	}
	if (e == -ETIME) {
		target_error(pid, "%s ran in process %ld, but its result was lost: heaptrail was held "
			     "up for more than %d ms after it (a machine this loaded may need another "
			     "try)", name, pid, PARK_MS);
		goto out;
	} else if (e) {
		target_error(pid, "the call into process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	*ret = (int)(uint32_t)rv;
	result = 0;
out:
	end_calls(&t);
	if (stopped_ms)
		*stopped_ms = t.stopped_ms;
	free(maps);
	return result;
}

/* ---------- attach ---------- */

static const char attach_usage[] =
	"usage: heaptrail attach [options] PID\n"
	"  -o DIR                 where the agent writes its files (default a fresh\n"
	"                         ./heaptrail-attach-PID, -2, -3... when taken)\n"
	"  --sample SIZE|auto     sample every SIZE bytes on average (default auto:\n"
	"                         from 8k, coarser as the heap grows, up to 512k);\n"
	"                         1 tracks every allocation from the attach on\n"
	"  --interval SIZE        write a heap dump every SIZE bytes allocated\n"
	"  --peak                 keep a heap dump of the peak\n"
	"  --every DURATION       write a heap dump every DURATION (default 10s)\n"
	"  --timeline MS          heap timeline period in ms (default 100; 0 off)\n"
	"  --for DURATION         detach by itself after DURATION (final dump)\n"
	"  --http ADDR            serve the live endpoint (pprof, /metrics) on ADDR\n"
	"                         while attached (until --for ends, or until the\n"
	"                         process exits or heaptrail is interrupted)\n"
	"  --http-allow-remote    allow an ADDR beyond loopback (with a warning)\n"
	"  --alloc-fn SPEC, --free-fn SPEC, ... (as `heaptrail run`'s): allocator\n"
	"                         functions hooked by name while attached\n"
	"  --no-builtin-fns       no built-in profile (embedded mimalloc, jemalloc...)\n"
	"  --slots-only           redirect the relocation slots only, not the\n"
	"                         allocator's entry points too: calls through a\n"
	"                         pointer to malloc taken earlier are then missed\n"
	"  --options-file FILE    more options, one per line, as for heaptrail run\n"
	CLI_LIVE_PUSH_HELP;

static int do_attach(long pid, const char *opts, const char *outdir, double *stopped_ms)
{
	struct target t;
	char *maps = NULL, libc[PATH_MAX], agent[PATH_MAX], file[PATH_MAX + 32];
	uint64_t libc_base, rv;
	int ret = 1;
	if (open_target(&t, pid, USE_ATTACH, &maps))
		return 1;
	if (ctl_find_agent(agent, sizeof agent)) {
		cli_error("cannot find the agent library libheaptrail.so next to heaptrail "
			  "(HEAPTRAIL_AGENT names it)");
		goto out;
	}
	char real[PATH_MAX];
	if (realpath(agent, real))
		snprintf(agent, sizeof agent, "%s", real);
	int st = is_static((pid_t)pid);
	static const char *const libcs[] = { "libc.so.6", NULL };
	if (st == 1 || find_module(maps, libcs, &libc_base, libc, sizeof libc)) {
		target_error(pid, "cannot attach to process %ld: it is a static binary (no dynamic "
			     "loader and no libc.so.6 to load the agent with)", pid);
		goto out;
	}
	uint64_t ab;
	char loaded[PATH_MAX];
	bool again = false;
	if (!agent_in(maps, &ab, loaded, sizeof loaded)) {
		snprintf(file, sizeof file, "/proc/%ld/environ", pid);
		size_t n;
		char *env = slurp(file, &n);
		bool preloaded = false;
		for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
			if (!strncmp(env + i, "LD_PRELOAD=", 11) && strstr(env + i, "libheaptrail"))
				preloaded = true;
		free(env);
		if (preloaded) {
			cli_error("process %ld already runs under heaptrail (preloaded): use "
				  "`heaptrail dump %ld`", pid, pid);
			goto out;
		}
		snprintf(agent, sizeof agent, "%s", loaded);  /* the same copy again */
		again = true;
	}
	/* a process in other namespaces (see "containers" above): the agent
	 * from a memory file when it does not see ours (or was given one
	 * before: loaded already), the directory as a descriptor */
	bool in_memory = !strncmp(agent, MEMFD_PREFIX, strlen(MEMFD_PREFIX));
	bool by_memfd = !in_memory && !again && !seen_alike(pid, agent);
	bool by_fd = !seen_alike(pid, outdir);
	if ((by_memfd || by_fd) && !proc_mounted_in(pid)) {
		target_error(pid, "cannot attach to process %ld from outside its mount namespace: /proc "
			     "is not mounted in it (the agent and the output directory reach it "
			     "through /proc/self/fd)", pid);
		goto out;
	}
	target_path(pid, agent, file, sizeof file);
	if (!in_memory && !by_memfd && access(file, R_OK)) {
		/* loaded by path before, and the file is gone from its view */
		target_error(pid, "the agent %s is not visible in the mount namespace of process %ld "
			     "(%s): copy it there and set HEAPTRAIL_AGENT", agent, pid,
			     strerror(errno));
		goto out;
	}
	uint64_t start_off, call_off, pair_off;
	if (in_memory) {
		start_off = mem_symbol(pid, ab, "heaptrail_attach_start");
		call_off = mem_symbol(pid, ab, "heaptrail_attach_call");
		pair_off = mem_symbol(pid, ab, "heaptrail_attach_pair");
	} else {
		const char *from = by_memfd ? agent : file;
		start_off = elf_symbol(from, "heaptrail_attach_start");
		call_off = elf_symbol(from, "heaptrail_attach_call");
		pair_off = elf_symbol(from, "heaptrail_attach_pair");
	}
	target_path(pid, libc, file, sizeof file);
	uint64_t dlopen_off = elf_symbol(file, "dlopen");
	if (!dlopen_off)  /* glibc before 2.34: the loader's private entry */
		dlopen_off = elf_symbol(file, "__libc_dlopen_mode");
	uint64_t memfd_off = by_memfd ? elf_symbol(file, "memfd_create") : 0;
	uint64_t close_off = by_memfd ? elf_symbol(file, "close") : 0;
	if (!dlopen_off || !start_off || !call_off) {
		target_error(pid, "cannot find %s in %s%s",
			     !dlopen_off ? "dlopen" : !start_off ? "heaptrail_attach_start"
							 : "heaptrail_attach_call",
			     dlopen_off ? agent : libc,
			     dlopen_off ? " (loaded by an older heaptrail? that one attaches again)"
					: "");
		goto out;
	}
	if (by_memfd && (!memfd_off || !close_off)) {
		target_error(pid, "cannot find %s in %s (needed to attach across mount namespaces)",
			     !memfd_off ? "memfd_create" : "close", libc);
		goto out;
	}
	if (by_fd && !pair_off) {
		target_error(pid, "the agent in process %ld (%s) has no heaptrail_attach_pair: an "
			     "older heaptrail? it takes no directory from outside its mount "
			     "namespace", pid, agent);
		goto out;
	}
	/* the files and records name the PID given, not the one the process
	 * sees in its own PID namespace */
	char opts_pid[9000];
	long inner = inner_pid(pid);
	snprintf(opts_pid, sizeof opts_pid, "%s%s", opts, inner != pid ? ",pid=" : "");
	if (inner != pid)
		snprintf(opts_pid + strlen(opts_pid), sizeof opts_pid - strlen(opts_pid), "%ld", pid);
	opts = opts_pid;
	if (start_calls(&t, maps))
		goto out;
	if (strlen(agent) >= 4096 || strlen(opts) >= 8192 || strlen(outdir) >= 3072) {
		cli_error("the options are too long for the attach (%zu bytes)", strlen(opts));
		goto out;
	}
	/* s_opts and s_out are written after the load: above the place of
	 * the memory file's name and the pair's, where t.strings is once the
	 * thread has been borrowed again */
	uint64_t s_path = t.strings, s_opts, s_out;
	int e = 0;
	for (int round = 0;; round++) {
		if (by_memfd) {
			e = load_via_memfd(&t, libc_base + memfd_off, libc_base + dlopen_off,
					   libc_base + close_off, agent);
			if (e && e != -ETIME)
				goto out;
		} else if (!in_memory) {
			s_path = t.strings;
			if (mem_rw(&t, s_path, agent, strlen(agent) + 1, true)) {
				target_error(pid, "cannot write into process %ld's memory", pid);
				goto out;
			}
			uint64_t a[6] = { s_path, RTLD_NOW_VALUE, 0, 0, 0, 0 };
			e = remote_call(&t, libc_base + dlopen_off, a);
		}
		if (e != -ETIME || round == 2)
			break;
		/* heaptrail was held up longer than the park: the thread went
		 * back by itself after a call of the load; the start needs one
		 * again, and the load is made again unless it is done (an agent
		 * loaded twice from two memory files would be two agents; a
		 * memory file left open, the agent's start closes) */
		end_calls(&t);
		free(maps);
		snprintf(file, sizeof file, "/proc/%ld/maps", pid);
		maps = slurp(file, NULL);
		if (!maps) {
			target_error(pid, "cannot read the memory map of process %ld", pid);
			goto out;
		}
		if (start_calls(&t, maps))
			goto out;
		if (!agent_in(maps, &ab, loaded, sizeof loaded)) {
			e = 0;
			break;
		}
	}
	if (e == -ETIME) {
		target_error(pid, "heaptrail was held up for more than %d ms after each of 3 calls "
			     "that load the agent into process %ld (a machine this loaded may need "
			     "another try)", PARK_MS, pid);
		goto out;
	} else if (e) {
		target_error(pid, "the call to dlopen in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	s_opts = t.strings + 4096;
	s_out = t.strings + 12288;
	/* dlopen's result went with the call's registers: the map says */
	free(maps);
	snprintf(file, sizeof file, "/proc/%ld/maps", pid);
	maps = slurp(file, NULL);
	if (maps && agent_in(maps, &ab, loaded, sizeof loaded) && t.park && !by_memfd &&
	    !in_memory) {
		/* once more, stepped, to name the system call that fails (the
		 * memory file's dlopen is stepped in load_via_memfd) */
		uint64_t a[6] = { s_path, RTLD_NOW_VALUE, 0, 0, 0, 0 };
		t.step = true;
		e = remote_call(&t, libc_base + dlopen_off, a);
		t.step = false;
		free(maps);
		maps = e ? NULL : slurp(file, NULL);
	}
	if (!maps || agent_in(maps, &ab, loaded, sizeof loaded)) {
		char why[160] = "";
		if (t.failed_nr >= 0)
			snprintf(why, sizeof why, " (its last failed system call: %s: %s)",
				 syscall_name(t.failed_nr), strerror(t.failed_err));
		target_error(pid, "process %ld could not load the agent %s with dlopen%s%s", pid, agent, why,
			  seccomp_may(pid));
		goto out;
	}
	/* the directory, for a process that does not see ours: a descriptor
	 * (s_opts and s_out are above the pair's place in the strings) */
	const char *out_as = by_fd ? OUT_PENDING : outdir;
	bool pending = false;
	if (mem_rw(&t, s_opts, (void *)opts, strlen(opts) + 1, true) ||
	    mem_rw(&t, s_out, (void *)out_as, strlen(out_as) + 1, true)) {
		target_error(pid, "cannot write into process %ld's memory", pid);
		goto out;
	}
	if (by_fd && send_dir(&t, ab + call_off, ab + pair_off, outdir, &pending)) {
		if (pending)  /* the start finds nothing, and closes the pair */
			agent_call(&t, ab + call_off, ab + start_off, s_opts, s_out, 0, 0, &rv);
		goto out;
	}
	/* where the borrowed thread is, which the agent must know before it
	 * rewrites code (allocator functions hooked by name) */
	e = agent_call(&t, ab + call_off, ab + start_off, s_opts, s_out, t.saved.rip, t.saved.rsp,
		       &rv);
	if (e == -ETIME) {
		target_error(pid, "heaptrail_attach_start ran in process %ld, but its result was "
			     "lost: heaptrail was held up for more than %d ms after it (a machine "
			     "this loaded may need another try)", pid, PARK_MS);
		goto out;
	} else if (e) {
		target_error(pid, "the agent's start in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	int r = (int)(uint32_t)rv;
	if (r == -EALREADY) {
		cli_error("process %ld is attached already (`heaptrail detach %ld` first)", pid, pid);
		goto out;
	} else if (r == -EBADMSG && by_fd) {
		target_error(pid, "process %ld could not receive the output directory (recvmsg)%s",
			     pid, seccomp_may(pid));
		goto out;
	} else if (r == -EDEADLK) {
		cli_error("process %ld is still running the start or stop of an earlier heaptrail "
			  "(one that was killed): try again in a moment", pid);
		goto out;
	} else if (r) {
		cli_error("the agent could not start in process %ld: %s", pid, strerror(-r));
		goto out;
	}
	ret = 0;
out:
	end_calls(&t);
	*stopped_ms = t.stopped_ms;
	free(maps);
	return ret;
}

static int parse_pid(const char *s)
{
	long v = cli_parse_count(s, INT_MAX);
	return v > 0 ? (int)v : -1;
}

/* Prints the "note" lines of dir's heaptrail.PID.attach (what the agent
 * had to say during the attach or detach: functions it would not hook,
 * options it ignored), which it keeps out of the program's stderr; only
 * from a record whose `key` time ("attached", "detached") is not before
 * since, so an older record's notes are never shown again. */
static void print_notes(const char *dir, long pid, const char *key, const struct timespec *since)
{
	char rec[PATH_MAX + 64], want[32];
	snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", dir, pid);
	snprintf(want, sizeof want, "\n%s ", key);
	char *text = slurp(rec, NULL), *at, *end;
	if (!text || !(at = strstr(text, want)))
		goto out;
	long long sec = strtoll(at + strlen(want), &end, 10);
	long nsec = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
	if (sec < since->tv_sec || (sec == since->tv_sec && nsec < since->tv_nsec))
		goto out;
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, "note ", 5))
			fprintf(stderr, "heaptrail: %.*s\n", (int)strcspn(l + 5, "\n"), l + 5);
out:
	free(text);
}

static int detach_now(long pid, bool quiet)
{
	int r;
	double ms = 0;
	char dir[PATH_MAX];
	struct timespec since;
	bool has_dir = !cli_attached_dir(pid, dir, sizeof dir);
	clock_gettime(CLOCK_REALTIME, &since);
	/* -EDEADLK: the thread borrowed runs the start of an attach whose
	 * heaptrail was killed, which lasts a moment more: borrow again */
	for (int tries = 0;; tries++) {
		double more = 0;
		if (call_agent(pid, "heaptrail_attach_stop", NULL, NULL, 0, &r, &more, NULL))
			return 1;
		ms += more;
		if (r != -EDEADLK || tries == 100)
			break;
		usleep(20000);
	}
	if (r == -ENOENT) {
		cli_error("process %ld is not attached (started under `heaptrail run`, or detached "
			  "already)", pid);
		return 1;
	}
	if (!quiet)
		fprintf(stderr, "heaptrail: detached from process %ld (thread stopped %.1f ms)\n", pid,
			ms);
	if (has_dir)
		print_notes(dir, pid, "detached", &since);
	return r ? 1 : 0;
}

/* Why dir, holding old (a heaptrail.* file), is refused for an attach to
 * pid. Files of this process's earlier attach are named as such: a new
 * attach starts a new recording (counts from zero, its own timeline and
 * attach record, which would replace the earlier ones), so the two are
 * kept apart rather than mixed. */
static void refuse_used_dir(const char *dir, long pid, const char *old)
{
	char rec[PATH_MAX + 64], when[64] = "";
	snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", dir, pid);
	char *text = slurp(rec, NULL), *at = text ? strstr(text, "\ndetached ") : NULL;
	if (text && !at)
		cli_error("process %ld is attached already, its files in '%s' (`heaptrail detach "
			  "%ld` first)", pid, dir, pid);
	else if (text) {
		time_t sec = (time_t)strtoll(at + 10, NULL, 10);
		struct tm tm;
		if (gmtime_r(&sec, &tm))
			strftime(when, sizeof when, " at %Y-%m-%d %H:%M:%S UTC", &tm);
		cli_error("'%s' holds the recording of process %ld's earlier attach (detached%s); "
			  "a new attach records afresh: give another directory with -o (without "
			  "-o, heaptrail makes a fresh one)", dir, pid, when);
	} else
		cli_error("'%s' holds another run's files (%s): give a fresh directory with -o", dir,
			  old);
	free(text);
}

struct attach_args {
	const char *outdir;
	char opts[1024], fns[4096];
	bool has_sample, has_every, has_timeline;
	uint64_t for_ms;
	long pid;
	struct cli_live_opts lo;
};

static int attach_file_line(int argc, char **argv, void *ctx);

/* The argument at argv[*i] (moving *i past a value it takes): 1 when
 * taken, 0 after --help (printed), -1 after saying why it is refused.
 * in_file: from an options file (no PID there). */
static int attach_arg(int argc, char **argv, int *i, struct attach_args *a, bool in_file)
{
	const char *arg = argv[*i], *v;
	char val[64];
	int r = cli_live_opt(argc, argv, i, &a->lo);
	if (!r)
		r = cli_fn_opt(argc, argv, i, "attach", a->fns, sizeof a->fns);
	if (r)
		return r;
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		fputs(attach_usage, stdout);
		return 0;
	} else if ((v = cli_opt_value(argc, argv, i, "--options-file")) && *v && !in_file) {
		return cli_each_options_line(v, "attach", attach_file_line, a) ? -1 : 1;
	} else if ((v = cli_opt_value(argc, argv, i, "-o"))) {
		a->outdir = v;
	} else if (!strcmp(arg, "--peak")) {
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts), ",peak=1");
	} else if (!strcmp(arg, "--slots-only")) {
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts), ",entries=0");
	} else if ((v = cli_opt_value(argc, argv, i, "--for"))) {
		if (!fmt_opt_duration(v, strlen(v), &a->for_ms) || !a->for_ms) {
			cli_error("attach: bad value for --for: '%s' (want a duration, e.g. 30s)",
				  cli_shown(v));
			return -1;
		}
	} else if ((v = cli_opt_value(argc, argv, i, "--sample")) ||
		   (v = cli_opt_value(argc, argv, i, "--interval")) ||
		   (v = cli_opt_value(argc, argv, i, "--every")) ||
		   (v = cli_opt_value(argc, argv, i, "--timeline"))) {
		char key[16];
		snprintf(key, sizeof key, "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
		const char *why = *v ? ctl_check_profile_value(key, v, val, sizeof val)
				     : "a value is needed";
		if (why) {
			cli_error("attach: bad value for --%s: '%s' (%s)", key, cli_shown(v), why);
			return -1;
		}
		a->has_sample |= !strcmp(key, "sample");
		a->has_every |= !strcmp(key, "every");
		a->has_timeline |= !strcmp(key, "timeline");
		snprintf(a->opts + strlen(a->opts), sizeof a->opts - strlen(a->opts), ",%s=%s", key,
			 val);
	} else if (!in_file && a->pid < 0 && (a->pid = parse_pid(arg)) > 0) {
		;
	} else {
		cli_error(in_file ? "attach: '%s' is not an option of heaptrail attach"
				  : "attach: unexpected argument '%s'", cli_shown(arg));
		if (!in_file)
			fputs(attach_usage, stderr);
		return -1;
	}
	if (v && !*v) {
		cli_error("attach: option '%s' needs a value", cli_shown(arg));
		return -1;
	}
	return 1;
}

/* One line of an options file, as cli_each_options_line gives it. */
static int attach_file_line(int argc, char **argv, void *ctx)
{
	int i = 1;
	int r = attach_arg(argc, argv, &i, ctx, true);
	if (r > 0 && i + 1 < argc) {
		cli_error("attach: '%s %s': one option per line", cli_shown(argv[1]),
			  cli_shown(argv[2]));
		return -1;
	}
	return r > 0 ? 0 : -1;
}

int cmd_attach(int argc, char **argv)
{
	struct attach_args args = { .pid = -1 }, *a = &args;
	for (int i = 1; i < argc; i++) {
		int r = attach_arg(argc, argv, &i, a, false);
		if (r <= 0)
			return r < 0 ? 2 : 0;
	}
	const char *outdir = a->outdir;
	long pid = a->pid;
	uint64_t for_ms = a->for_ms;
	struct cli_live_opts lo = a->lo;
	char *opts = a->opts, *fns = a->fns;
	bool has_sample = a->has_sample, has_every = a->has_every, has_timeline = a->has_timeline;
	if (pid <= 0) {
		fputs(attach_usage, stderr);
		return 2;
	}
	uint64_t id = 0;
	if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
		id = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
	char all[1200 + sizeof a->fns];
	snprintf(all, sizeof all, "%s%s%s,follow_children=0,run=%016llx%s%s",
		 has_sample ? "" : "sample=auto", has_every ? "" : ",every=10s",
		 has_timeline ? "" : ",timeline=100", (unsigned long long)id, opts, fns);
	if (all[0] == ',')
		memmove(all, all + 1, strlen(all));
	/* the directory, absolute: the target's working directory is not ours */
	char dir[PATH_MAX], abs[PATH_MAX], old[256];
	struct stat dst;
	bool made = true;
	int e;
	if (outdir) {
		snprintf(dir, sizeof dir, "%s", outdir);
		made = stat(dir, &dst) != 0;
		e = ctl_make_dir(dir, false);
	} else {
		/* a fresh one, made now: heaptrail-attach-PID, or -2, -3...
		 * when an earlier attach to the process (or anyone) has it */
		snprintf(dir, sizeof dir, "heaptrail-attach-%ld", pid);
		e = ctl_make_dir(dir, true);
		for (int k = 2; e == -EEXIST && k <= 100; k++) {
			snprintf(dir, sizeof dir, "heaptrail-attach-%ld-%d", pid, k);
			e = ctl_make_dir(dir, true);
		}
	}
	if (e) {
		cli_error("cannot make the output directory '%s': %s", dir, strerror(-e));
		return 1;
	}
	if (ctl_other_run_file(dir, old, sizeof old)) {
		refuse_used_dir(dir, pid, old);
		return 1;
	}
	if (!realpath(dir, abs)) {
		cli_error("cannot resolve '%s': %s", dir, strerror(errno));
		return 1;
	}
	/* a target of another user (we are root) must be able to write there */
	char sp[64];
	struct stat pst;
	snprintf(sp, sizeof sp, "/proc/%ld", pid);
	if (!stat(sp, &pst) && pst.st_uid != geteuid() && geteuid() == 0 &&
	    chown(abs, pst.st_uid, pst.st_gid))
		cli_error("cannot give '%s' to the target's user: %s", abs, strerror(errno));
	/* bound first: a bad address must not leave the process attached */
	struct cli_live *live = NULL;
	if ((lo.addr || lo.push) && !(live = cli_live_bind(&lo)))
		return 2;
	double ms = 0;
	struct timespec t0, since;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_REALTIME, &since);
	if (do_attach(pid, all, abs, &ms)) {
		if (made)
			rmdir(abs);  /* made for this attach, and still empty */
		cli_live_stop(live);
		return 1;
	}
	fprintf(stderr, "heaptrail: attached to process %ld in %.1f ms (one thread stopped "
		"%.1f ms); files in %s\n", pid, ms_since(&t0), ms, abs);
	print_notes(abs, pid, "attached", &since);
	if (live) {
		struct cli_agent ag = { .pid = pid };
		snprintf(ag.dir, sizeof ag.dir, "%s", abs);
		size_t clen;
		char *cmd = cli_read_proc(pid, "cmdline", &clen);
		int sr = cli_live_start(live, &ag, cmd);
		free(cmd);
		if (sr) {
			cli_live_stop(live);
			live = NULL;
		}
	}
	if (!for_ms && !live) {
		fprintf(stderr, "heaptrail: `heaptrail detach %ld` stops; `heaptrail growth %s` "
			"ranks what grows\n", pid, abs);
		return 0;
	}
	if (!for_ms) {
		/* serving until the process ends or we are told to stop (it stays
		 * attached: `heaptrail detach PID`) */
		sigset_t set, oldmask;
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, &oldmask);
		struct timespec tick = { 0, 200 * 1000 * 1000 };
		while (kill((pid_t)pid, 0) == 0 && sigtimedwait(&set, NULL, &tick) < 0)
			;
		cli_live_stop(live);
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		fprintf(stderr, "heaptrail: stopped serving; process %ld stays attached (`heaptrail "
			"detach %ld`)\n", pid, pid);
		return 0;
	}
	struct timespec d = { (time_t)(for_ms / 1000), (long)(for_ms % 1000) * 1000000 };
	while (nanosleep(&d, &d) && errno == EINTR)
		;
	cli_live_stop(live);
	if (detach_now(pid, false))
		return 1;
	fprintf(stderr, "heaptrail: next: heaptrail growth %s\n", abs);
	return 0;
}

/* ---------- detach, dump ---------- */

int cmd_detach(int argc, char **argv)
{
	long pid = argc == 2 ? parse_pid(argv[1]) : -1;
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("usage: heaptrail detach PID");
		return 0;
	}
	if (pid <= 0) {
		fputs("usage: heaptrail detach PID\n", stderr);
		return 2;
	}
	return detach_now(pid, false);
}

int cmd_dump(int argc, char **argv)
{
	long pid = argc == 2 ? parse_pid(argv[1]) : -1;
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("usage: heaptrail dump PID   (a heap dump now, preloaded or attached)");
		return 0;
	}
	if (pid <= 0) {
		fputs("usage: heaptrail dump PID\n", stderr);
		return 2;
	}
	int r;
	double ms;
	char wrote[FMT_REQUEST_PATH_MAX], path[FMT_REQUEST_PATH_MAX + 64];
	if (call_agent(pid, "heaptrail_dump_request", NULL, NULL, 0, &r, &ms, wrote))
		return 1;
	if (r == -ENOTCONN) {
		cli_error("process %ld was detached from heaptrail: 'heaptrail attach %ld' to "
			  "record again", pid, pid);
		return 1;
	}
	if (r) {
		cli_error("process %ld could not write a heap dump: %s", pid, strerror(-r));
		return 1;
	}
	if (wrote[0]) {
		struct cli_agent ag = { .pid = pid };
		cli_agent_path(&ag, wrote, path, sizeof path);
		fprintf(stderr, "heaptrail: heap dump written to %s by process %ld (thread stopped "
			"%.1f ms)\n", path, pid, ms);
	} else {
		fprintf(stderr, "heaptrail: heap dump written by process %ld (thread stopped %.1f "
			"ms)\n", pid, ms);
	}
	return 0;
}

void cli_trace_refused(long pid, bool live)
{
	struct target t = { .pid = (pid_t)pid, .use = live ? USE_LIVE : USE_LEAKS };
	seize_error(&t, EPERM);
}

int cli_agent_request(long pid, int value, int *ret, char *wrote)
{
	if (wrote)
		wrote[0] = 0;
	return call_agent(pid, "heaptrail_request", NULL, NULL, value, ret, NULL, wrote);
}

/* The output directory of an attached agent: the directory it holds open
 * (attach.c in the agent) with heaptrail.PID.attach in it. */
int cli_attached_dir(long pid, char *out, size_t cap)
{
	char path[96], link[PATH_MAX], rec[PATH_MAX + 64];
	snprintf(path, sizeof path, "/proc/%ld/fd", pid);
	DIR *d = opendir(path);
	int found = -1;
	if (!d)
		return -1;
	for (struct dirent *e; found && (e = readdir(d));) {
		char fd[160];
		snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
		ssize_t n = readlink(fd, link, sizeof link - 1);
		if (n <= 0 || link[0] != '/')
			continue;
		link[n] = 0;
		snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", link, pid);
		if (!access(rec, F_OK)) {
			snprintf(out, cap, "%s", link);
			found = 0;
		}
	}
	closedir(d);
	return found;
}

/* When the dump at path was written by an attached agent (its directory
 * holds heaptrail.PID.attach), "since attach at TIME UTC" into out, and
 * 0; else -1. */
int cli_attach_label(const char *path, long pid, char *out, size_t cap)
{
	char rec[PATH_MAX + 64];
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path) : 1;
	snprintf(rec, sizeof rec, "%.*s/heaptrail.%ld.attach", dlen, slash ? path : ".", pid);
	char *text = slurp(rec, NULL), *at;
	int ret = -1;
	if (text && (at = strstr(text, "\nattached "))) {
		time_t sec = (time_t)strtoll(at + 10, NULL, 10);
		struct tm tm;
		char when[64];
		if (gmtime_r(&sec, &tm) && strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm)) {
			snprintf(out, cap, "since attach at %s UTC", when);
			ret = 0;
		}
	}
	free(text);
	return ret;
}
