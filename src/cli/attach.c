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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/stat.h>
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
	uint64_t frame;         /* the signal frame, below the thread's stack pointer */
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

static pid_t pick_waiting(pid_t pid, const struct avoid *avoid, bool futex, bool any_timeout);

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
 * Either whose timeout a borrow leaves as it is, before any other. */
static pid_t pick_thread(pid_t pid, const struct avoid *avoid)
{
	pid_t best = 0;
	for (int pass = 0; pass < 4 && !best; pass++)
		best = pick_waiting(pid, avoid, pass & 1, pass >= 2);
	return best;
}

static pid_t pick_waiting(pid_t pid, const struct avoid *avoid, bool futex, bool any_timeout)
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
		char sp[160];
		snprintf(sp, sizeof sp, "/proc/%d/task/%d/syscall", pid, tid);
		char *s = slurp(sp, NULL);
		long nr = s && *s != 'r' ? strtol(s, NULL, 10) : -1;
		unsigned long a[6] = { 0, ~0ul, 0, 0, 0, 0 };
		if (nr >= 0)
			sscanf(s, "%*s %lx %lx %lx %lx %lx %lx", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]);
		unsigned long uaddr = a[0], op = a[1];
		free(s);
		if (nr >= 0 && !any_timeout && timeout_restarts(nr, a))
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

static long pt(int req, pid_t tid, void *addr, void *data)
{
	step_point();
	return ptrace((enum __ptrace_request)req, tid, addr, data);
}

static int mem_rw(struct target *t, uint64_t addr, void *buf, size_t n, bool write)
{
	if (write)
		step_point();
	ssize_t r = write ? pwrite(t->memfd, buf, n, (off_t)addr) : pread(t->memfd, buf, n, (off_t)addr);
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
 * handlers), found in the file's executable segment; 0 when none. */
static uint64_t find_restorer(pid_t pid, const char *maps)
{
	static const char *const libc[] = { "libc.so.6", NULL };
	static const unsigned char code[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	char path[PATH_MAX], file[PATH_MAX + 32];
	uint64_t base, found = 0;
	size_t len;
	if (find_module(maps, libc, &base, path, sizeof path))
		return 0;
	snprintf(file, sizeof file, "/proc/%d/root%s", pid, path);
	char *img = slurp(file, &len);
	if (!img || len < sizeof(Elf64_Ehdr))
		goto out;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len)
		goto out;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum && !found; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
		    ph[i].p_offset + ph[i].p_filesz > len)
			continue;
		const unsigned char *s = (const unsigned char *)img + ph[i].p_offset;
		const unsigned char *hit = memmem(s, ph[i].p_filesz, code, sizeof code);
		if (hit)
			found = base + ph[i].p_vaddr + (uint64_t)(hit - s);
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
 *  - one PTRACE_SETREGS starts a call (dlopen, or an agent entry point
 *    through heaptrail_attach_call, which stores the result in the
 *    frame's block): the call runs to its end and returns into the
 *    rt_sigreturn, which puts every register, the extended state and the
 *    mask back: the thread resumes where it was, as after a signal
 *    handler, whether heaptrail is there or not.
 * heaptrail follows the call with PTRACE_SYSCALL and takes the thread at
 * the entry of that rt_sigreturn: there it starts the next call (one
 * PTRACE_SETREGS again) or lets it go. Nothing is mapped or left behind.
 * No PTRACE_O_EXITKILL; PTRACE_O_TRACESYSGOOD, whose stops leave no
 * signal behind when their tracer is gone. A call runs with every signal
 * blocked (see remote_call): one for the thread waits, pending, until
 * the rt_sigreturn at its end; heaptrail holds no signal back. */

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
	uint64_t need = RED_ZONE + STRINGS_SPACE + XSTATE_MAX + 1024;
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

/* Writes the frame below the thread's stack pointer (see above).
 * Returns 0 or -1. */
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
	return 0;
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

/* Gives the thread back: it resumes as it was (from the entry of the
 * last call's rt_sigreturn, or from its stop). */
static void give_back(struct target *t)
{
	pt(PTRACE_DETACH, t->tid, 0, 0);
	t->stopped_ms += ms_since(&t->stopped_at);
	t->tid = 0;
	t->busy = false;
}

/* Calls fn(a[0], ..., a[5]) in the thread, on its own stack below the
 * frame, returning into the frame's rt_sigreturn. Returns 0 when the
 * call ended (stopped at that rt_sigreturn), -ESRCH when the thread is
 * gone, -EFAULT when the call faulted (the fault is delivered: the
 * program would have died of it). The last system call that failed
 * during the call is in t->failed_nr, t->failed_err. */
static int remote_call(struct target *t, uint64_t fn, const uint64_t a[6])
{
	struct user_regs_struct r = t->saved;
	r.rip = fn;
	r.rsp = t->frame;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.rcx = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	r.rax = 0;
	r.eflags &= ~(0x100ull | 0x400ull | 0x40000ull);  /* TF, DF, AC: as for a handler */
	/* The call starts through a frame of its own too, under the other:
	 * an rt_sigreturn into fn with every signal blocked (one that comes
	 * waits until the call's end puts the thread's mask back: heaptrail
	 * holds none) and the initial floating-point state. */
	struct k_rt_sigframe f;
	memset(&f, 0, sizeof f);
	uint64_t setup = (t->frame - 256 - sizeof f) & ~(uint64_t)15;
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
	if (pt(PTRACE_SETREGS, t->tid, 0, &go) || pt(PTRACE_SYSCALL, t->tid, 0, 0))
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
		} else if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
			pt(PTRACE_DETACH, t->tid, 0, (void *)(long)sig);
			t->tid = 0;
			return -EFAULT;
		}
		/* a signal before the call's own rt_sigreturn has blocked them
		 * all: delivered now (its handler returns to that rt_sigreturn),
		 * or queued again by the kernel when blocked; heaptrail holds none */
		pt(PTRACE_SYSCALL, t->tid, 0, (void *)(long)(sig > 0 ? sig : 0));
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
	else if (e == EPERM)
		cli_error("not permitted to trace process %d: it belongs to another user, or is "
			  "already traced (needs the same user or CAP_SYS_PTRACE)", pid);
	else
		target_error(pid, "cannot trace process %d: %s", pid, strerror(e));
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
		cli_error("process %ld has no memory map (a kernel thread?)", pid);
		free(*maps);
		return -1;
	}
	return 0;
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
	t->restorer = find_restorer(t->pid, maps);
	if (!t->restorer) {
		target_error(t->pid, "cannot find the signal return (__restore_rt) of the libc of "
			     "process %d", t->pid);
		return -1;
	}
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0) {
		target_error(t->pid, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	int e = borrow(t);
	if (e) {
		if (e != -EAGAIN)
			seize_error(t, -e);
		return -1;
	}
	if (write_frame(t)) {
		target_error(t->pid, "cannot write into the stack of process %d", t->pid);
		return -1;
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
	if (t->masked)
		sigprocmask(SIG_SETMASK, &t->oldmask, NULL);
	t->masked = false;
}


/* The agent's load address and its file as the target sees it. */
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
	char *maps = NULL, agent[PATH_MAX], file[PATH_MAX + 32];
	uint64_t base, rv;
	int result = -1;
	enum target_use use = request ? (request & FMT_SIGVAL_DUMP ? USE_LIVE : USE_LEAKS)
			      : !strcmp(name, "heaptrail_dump") ? USE_DUMP : USE_DETACH;
	if (open_target(&t, pid, use, &maps))
		return -1;
	if (agent_in(maps, &base, agent, sizeof agent)) {
		cli_error("process %ld has no heaptrail agent (start it with `heaptrail run`, or "
			  "`heaptrail attach %ld`)", pid, pid);
		goto out;
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, agent);
	uint64_t fn = elf_symbol(file, name), call = elf_symbol(file, "heaptrail_attach_call");
	if (!fn) {
		target_error(pid, "the agent in process %ld (%s) has no %s: an older heaptrail?", pid,
			     agent, name);
		goto out;
	}
	if (start_calls(&t, maps))
		goto out;
	uint64_t a0 = 0, a1 = 0;
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
	if (e) {
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
	if (cli_find_agent(agent, sizeof agent)) {
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
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, agent);
	if (access(file, R_OK)) {
		target_error(pid, "the agent %s is not visible in the mount namespace of process %ld "
			     "(%s): copy it there and set HEAPTRAIL_AGENT", agent, pid,
			     strerror(errno));
		goto out;
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, outdir);
	struct stat ours, theirs;
	if (stat(file, &theirs) || stat(outdir, &ours) || ours.st_dev != theirs.st_dev ||
	    ours.st_ino != theirs.st_ino) {
		target_error(pid, "the output directory %s is not the same in the mount namespace "
			     "of process %ld: give one it sees with -o", outdir, pid);
		goto out;
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, agent);
	uint64_t start_off = elf_symbol(file, "heaptrail_attach_start");
	uint64_t call_off = elf_symbol(file, "heaptrail_attach_call");
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, libc);
	uint64_t dlopen_off = elf_symbol(file, "dlopen");
	if (!dlopen_off)  /* glibc before 2.34: the loader's private entry */
		dlopen_off = elf_symbol(file, "__libc_dlopen_mode");
	if (!dlopen_off || !start_off || !call_off) {
		target_error(pid, "cannot find %s in %s%s",
			     !dlopen_off ? "dlopen" : !start_off ? "heaptrail_attach_start"
							 : "heaptrail_attach_call",
			     dlopen_off ? agent : libc,
			     dlopen_off ? " (loaded by an older heaptrail? that one attaches again)"
					: "");
		goto out;
	}
	if (start_calls(&t, maps))
		goto out;
	uint64_t s_path = t.strings, s_opts = t.strings + 4096, s_out = t.strings + 12288;
	if (strlen(agent) >= 4096 || strlen(opts) >= 8192 || strlen(outdir) >= 3072) {
		cli_error("the options are too long for the attach (%zu bytes)", strlen(opts));
		goto out;
	}
	if (mem_rw(&t, s_path, agent, strlen(agent) + 1, true) ||
	    mem_rw(&t, s_opts, (void *)opts, strlen(opts) + 1, true) ||
	    mem_rw(&t, s_out, (void *)outdir, strlen(outdir) + 1, true)) {
		target_error(pid, "cannot write into process %ld's memory", pid);
		goto out;
	}
	uint64_t a[6] = { s_path, RTLD_NOW_VALUE, 0, 0, 0, 0 };
	int e = remote_call(&t, libc_base + dlopen_off, a);
	if (e) {
		target_error(pid, "the call to dlopen in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	/* dlopen's result went with the call's registers: the map says */
	free(maps);
	snprintf(file, sizeof file, "/proc/%ld/maps", pid);
	maps = slurp(file, NULL);
	if (!maps || agent_in(maps, &ab, loaded, sizeof loaded)) {
		char why[160] = "", sec[16] = "", *status;
		if (t.failed_nr >= 0)
			snprintf(why, sizeof why, " (its last failed system call: %s: %s)",
				 syscall_name(t.failed_nr), strerror(t.failed_err));
		snprintf(file, sizeof file, "/proc/%ld/status", pid);
		status = slurp(file, NULL);
		status_field(status, "Seccomp", sec, sizeof sec);
		free(status);
		target_error(pid, "process %ld could not load the agent %s with dlopen%s%s", pid, agent, why,
			  !strcmp(sec, "2") ? "; its seccomp filter may refuse it" : "");
		goto out;
	}
	/* where the borrowed thread is, which the agent must know before it
	 * rewrites code (allocator functions hooked by name) */
	e = agent_call(&t, ab + call_off, ab + start_off, s_opts, s_out, t.saved.rip, t.saved.rsp,
		       &rv);
	if (e) {
		target_error(pid, "the agent's start in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	int r = (int)(uint32_t)rv;
	if (r == -EALREADY) {
		cli_error("process %ld is attached already (`heaptrail detach %ld` first)", pid, pid);
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
		const char *why = *v ? cli_check_profile_value(key, v, val, sizeof val)
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
		e = cli_make_dir(dir, false);
	} else {
		/* a fresh one, made now: heaptrail-attach-PID, or -2, -3...
		 * when an earlier attach to the process (or anyone) has it */
		snprintf(dir, sizeof dir, "heaptrail-attach-%ld", pid);
		e = cli_make_dir(dir, true);
		for (int k = 2; e == -EEXIST && k <= 100; k++) {
			snprintf(dir, sizeof dir, "heaptrail-attach-%ld-%d", pid, k);
			e = cli_make_dir(dir, true);
		}
	}
	if (e) {
		cli_error("cannot make the output directory '%s': %s", dir, strerror(-e));
		return 1;
	}
	if (cli_other_run_file(dir, old, sizeof old)) {
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
	if (call_agent(pid, "heaptrail_dump", NULL, NULL, 0, &r, &ms, NULL))
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
	fprintf(stderr, "heaptrail: heap dump written by process %ld (thread stopped %.1f ms)\n",
		pid, ms);
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
