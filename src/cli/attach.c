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
 * condition variable, pthread_join) is taken instead. It is seized and interrupted;
 * its registers and extended (xsave) state are saved; a private page is
 * mapped by running the thread's own `syscall` instruction again with
 * mmap's arguments; the calls (dlopen, then the agent's entry points) run
 * on that page as a stack, with return address 0, so the return faults
 * and stops the thread; then the page is unmapped and every register is
 * put back. The interrupted system call is restarted as the kernel would
 * have (and one the stop made fail with EINTR, as epoll_wait does, is
 * restarted too: the program never sees it).
 *
 * Nothing in the target is written but the private page, which is gone
 * afterwards, unless allocator functions are named (--alloc-fn...,
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

#define PAGE_SIZE_INJ (256 * 1024)   /* strings at the bottom, stack above */
#define XSTATE_MAX 16384
#define ERESTART_RESTARTBLOCK_RET (-516)  /* the kernel's: resumed from the restart record */

struct target {
	pid_t pid, tid;
	struct user_regs_struct saved;
	unsigned char xstate[XSTATE_MAX];
	size_t xstate_len;
	int memfd;
	uint64_t page;
	sigset_t oldmask;       /* heaptrail's own, while the thread is borrowed */
	bool masked;
	/* signals that arrived for the thread during the calls, delivered when
	 * it is given back, with their siginfo (see give_back) */
	int pending[16];
	siginfo_t pending_info[16];  /* as they came (sender, sigqueue value) */
	int npending;
	bool sigstop;           /* stopped to take a signal (not an event stop) */
	bool signalled;         /* a signal stopped it during our calls */
	struct timespec stopped_at;
	double stopped_ms;
	/* the thread was stopped in the program's own code, not in a system
	 * call: calls run libc's syscall instruction at sysinsn, and it is
	 * given back with its registers exactly as they were */
	bool busy;
	uint64_t sysinsn;
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

static pid_t pick_waiting(pid_t pid, pid_t avoid, bool futex);

/* A thread of pid blocked in a waiting system call, or 0. Second
 * choice: one waiting on a futex that is no lock of libc's (see above). */
static pid_t pick_thread(pid_t pid, pid_t avoid)
{
	pid_t best = pick_waiting(pid, avoid, false);
	return best ? best : pick_waiting(pid, avoid, true);
}

static pid_t pick_waiting(pid_t pid, pid_t avoid, bool futex)
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
		if (tid <= 0 || tid == avoid)
			continue;
		char sp[160];
		snprintf(sp, sizeof sp, "/proc/%d/task/%d/syscall", pid, tid);
		char *s = slurp(sp, NULL);
		long nr = s && *s != 'r' ? strtol(s, NULL, 10) : -1;
		unsigned long uaddr = 0, op = ~0ul;
		if (futex && nr == SYS_futex)
			sscanf(s, "%*s %lx %lx", &uaddr, &op);
		free(s);
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

static int mem_rw(struct target *t, uint64_t addr, void *buf, size_t n, bool write)
{
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

/* The address of a syscall instruction in the target's libc (inside its
 * syscall() function), for a thread that was not stopped in one; 0 when
 * not found. */
static uint64_t find_sysinsn(struct target *t, const char *maps)
{
	static const char *const libc[] = { "libc.so.6", NULL };
	char path[PATH_MAX];
	uint64_t base, fn;
	if (find_module(maps, libc, &base, path, sizeof path) ||
	    !(fn = elf_symbol(path, "syscall")))
		return 0;
	unsigned char code[64];
	if (mem_rw(t, base + fn, code, sizeof code, false))
		return 0;
	for (size_t i = 0; i + 1 < sizeof code; i++)
		if (code[i] == 0x0f && code[i + 1] == 0x05)
			return base + fn + i;
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
	uint64_t sysinsn = maps ? find_sysinsn(t, maps) : 0;
	snprintf(path, sizeof path, "/proc/%d/task", t->pid);
	DIR *d = sysinsn ? opendir(path) : NULL;
	int found = -EAGAIN;
	for (struct dirent *e; d && found && (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || ptrace(PTRACE_SEIZE, tid, 0, 0))
			continue;
		t->tid = tid;
		clock_gettime(CLOCK_MONOTONIC, &t->stopped_at);
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		int st, sig;
		while ((sig = wait_stop(t, &st)) > 0)
			ptrace(PTRACE_CONT, tid, 0, sig);
		if (sig < 0) {
			t->tid = 0;
			continue;
		}
		if (!ptrace(PTRACE_GETREGS, tid, 0, &t->saved) &&
		    (long)t->saved.orig_rax == -1 && own_code(maps, t->saved.rip)) {
			struct iovec iov = { t->xstate, sizeof t->xstate };
			if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0)
				t->xstate_len = iov.iov_len;
			t->busy = true;
			t->sysinsn = sysinsn;
			found = 0;
			break;
		}
		ptrace(PTRACE_DETACH, tid, 0, 0);
		t->tid = 0;
		t->stopped_ms += ms_since(&t->stopped_at);
	}
	if (d)
		closedir(d);
	free(maps);
	return found;
}

/* Seizes and stops one waiting thread; fills t->saved. Returns 0, or
 * -errno with the reason printed. */
static int borrow(struct target *t)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int attempt = 0; attempt < 200; attempt++) {
		pid_t tid = pick_thread(t->pid, 0);
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
		if (ptrace(PTRACE_SEIZE, tid, 0, 0)) {
			int e = errno;
			if (e == ESRCH)
				continue;  /* the thread has just ended */
			if (e == EPERM && held_briefly(t->pid, tid)) {
				usleep(2000);  /* for a moment */
				continue;
			}
			return -e;
		}
		t->tid = tid;
		clock_gettime(CLOCK_MONOTONIC, &t->stopped_at);
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		int st, sig;
		while ((sig = wait_stop(t, &st)) > 0) {
			/* a signal on its way to the thread: let it through first */
			ptrace(PTRACE_CONT, tid, 0, sig);
		}
		if (sig < 0) {
			t->tid = 0;
			continue;
		}
		if (ptrace(PTRACE_GETREGS, tid, 0, &t->saved)) {
			ptrace(PTRACE_DETACH, tid, 0, 0);
			t->tid = 0;
			continue;
		}
		/* still in the waiting call: the stop aborted it */
		if ((long)t->saved.orig_rax >= 0 &&
		    (waiting_call((long)t->saved.orig_rax) ||
		     ((long)t->saved.orig_rax == SYS_futex && futex_ok(t))) &&
		    restart_names((long)t->saved.rax)) {
			unsigned char insn[2];
			if (!mem_rw(t, t->saved.rip - 2, insn, 2, false) && insn[0] == 0x0f &&
			    insn[1] == 0x05) {
				struct iovec iov = { t->xstate, sizeof t->xstate };
				if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0)
					t->xstate_len = iov.iov_len;
				return 0;
			}
		}
		ptrace(PTRACE_DETACH, tid, 0, 0);
		t->tid = 0;
		t->stopped_ms += ms_since(&t->stopped_at);
	}
	cli_error("no thread of process %d could be borrowed safely: none waits in a system "
		  "call (read, poll, epoll_wait, a sleep, a condition variable...) or runs the "
		  "program's own code (not libc's, the loader's or an allocator's)", t->pid);
	return -EAGAIN;
}

/* A signal for the thread, held while it runs our calls (a standard
 * signal pending twice is delivered once, as the kernel does). */
static void keep_signal(struct target *t, int sig)
{
	t->signalled = true;
	for (int i = 0; i < t->npending; i++)
		if (t->pending[i] == sig && sig < SIGRTMIN)
			return;
	if (t->npending < (int)(sizeof t->pending / sizeof t->pending[0])) {
		siginfo_t *si = &t->pending_info[t->npending];
		if (ptrace(PTRACE_GETSIGINFO, t->tid, 0, si) || si->si_signo != sig) {
			memset(si, 0, sizeof *si);
			si->si_signo = sig;
			si->si_code = SI_TKILL;
		}
		t->pending[t->npending++] = sig;
	}
}

/* Gives the thread back as it was; its interrupted call starts again. */
static void give_back(struct target *t)
{
	struct user_regs_struct r = t->saved;
	if (!t->busy && ((long)r.rax == -EINTR || ((long)r.rax == ERESTART_RESTARTBLOCK_RET && t->signalled))) {
		/* the stop itself made the call fail (epoll_wait does):
		 * run it again rather than let the program see EINTR. And a
		 * call the kernel resumes from the thread's restart record
		 * (-ERESTART_RESTARTBLOCK: nanosleep, poll, a futex wait with
		 * a timeout) when a signal woke our calls meanwhile: a wait
		 * of theirs it cut short wrote that record, so the call
		 * starts again, with its whole timeout */
		r.rax = r.orig_rax;
		r.rip -= 2;
		r.orig_rax = (unsigned long long)-1;
	}
	if (t->xstate_len) {
		struct iovec iov = { t->xstate, t->xstate_len };
		ptrace(PTRACE_SETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov);
	}
	ptrace(PTRACE_SETREGS, t->tid, 0, &r);
	/* the signals kept keep their siginfo (a leak check request by
	 * sigqueue is told by its value): the first is delivered by the
	 * detach from a signal stop, the others queued again to the thread
	 * (a sigqueue'd one whole; a kill's or tgkill's as a tgkill of ours) */
	int first = 0;
	if (t->npending && t->sigstop &&
	    !ptrace(PTRACE_SETSIGINFO, t->tid, 0, &t->pending_info[0]))
		first = 1;
	ptrace(PTRACE_DETACH, t->tid, 0, first ? t->pending[0] : 0);
	for (int i = first; i < t->npending; i++) {
		siginfo_t *si = &t->pending_info[i];
		if (si->si_code >= 0 || si->si_code == SI_TKILL ||
		    syscall(SYS_rt_tgsigqueueinfo, t->pid, t->tid, t->pending[i], si))
			syscall(SYS_tgkill, t->pid, t->tid, t->pending[i]);
	}
	t->npending = 0;
	t->sigstop = false;
	t->signalled = false;
	t->stopped_ms += ms_since(&t->stopped_at);
	t->tid = 0;
	t->busy = false;
}

/* Runs the system call nr in the thread (its own syscall instruction).
 * Returns the result (-errno on failure); *gone when the thread died. */
static long remote_syscall(struct target *t, long nr, const long *a, int *gone)
{
	struct user_regs_struct r = t->saved;
	r.rip = t->busy ? t->sysinsn : t->saved.rip - 2;
	r.rax = (unsigned long long)nr;
	r.orig_rax = (unsigned long long)-1;
	r.rdi = (unsigned long long)a[0];
	r.rsi = (unsigned long long)a[1];
	r.rdx = (unsigned long long)a[2];
	r.r10 = (unsigned long long)a[3];
	r.r8 = (unsigned long long)a[4];
	r.r9 = (unsigned long long)a[5];
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r) || ptrace(PTRACE_SINGLESTEP, t->tid, 0, 0))
		return -errno;
	int st, sig;
	while ((sig = wait_stop(t, &st)) != SIGTRAP) {
		if (sig < 0) {
			*gone = 1;
			return -ESRCH;
		}
		if (sig > 0)
			keep_signal(t, sig);
		ptrace(PTRACE_SINGLESTEP, t->tid, 0, 0);
	}
	t->sigstop = true;
	if (ptrace(PTRACE_GETREGS, t->tid, 0, &r))
		return -errno;
	return (long)r.rax;
}

/* Calls fn(a0, a1, a2, a3) in the thread on the private page; returns rax. */
static int remote_call4(struct target *t, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t a2,
			uint64_t a3, uint64_t *ret)
{
	struct user_regs_struct r = t->saved;
	uint64_t sp = (t->page + PAGE_SIZE_INJ - 64) & ~(uint64_t)15;
	uint64_t zero = 0;
	sp -= 8;  /* the return address: 0, which faults and stops the thread */
	if (mem_rw(t, sp, &zero, 8, true))
		return -EIO;
	r.rip = fn;
	r.rsp = sp;
	r.rdi = a0;
	r.rsi = a1;
	r.rdx = a2;
	r.rcx = a3;
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1;
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r) || ptrace(PTRACE_CONT, t->tid, 0, 0))
		return -errno;
	int st, sig;
	for (;;) {
		sig = wait_stop(t, &st);
		if (sig < 0)
			return -ESRCH;
		if (sig == SIGSEGV && !ptrace(PTRACE_GETREGS, t->tid, 0, &r) && r.rip == 0) {
			t->sigstop = true;
			break;
		}
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
			/* a fault inside the call: deliver it (the program would
			 * have died of it anyway) */
			ptrace(PTRACE_DETACH, t->tid, 0, sig);
			t->tid = 0;
			return -EFAULT;
		}
		if (sig > 0)
			keep_signal(t, sig);
		ptrace(PTRACE_CONT, t->tid, 0, 0);
	}
	*ret = r.rax;
	return 0;
}

static int remote_call(struct target *t, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t *ret)
{
	return remote_call4(t, fn, a0, a1, 0, 0, ret);
}

static void read_string(struct target *t, uint64_t addr, char *out, size_t cap)
{
	out[0] = 0;
	if (!addr || mem_rw(t, addr, out, cap - 1, false)) {
		/* shorter than cap near the end of a mapping: byte by byte */
		size_t i = 0;
		for (; addr && i < cap - 1 && !mem_rw(t, addr + i, out + i, 1, false) && out[i]; i++)
			;
		out[i] = 0;
	}
	out[cap - 1] = 0;
}

/* ---------- common front: checks and the calls ---------- */

/* Explains a failed PTRACE_SEIZE. */
static void seize_error(pid_t pid, int e)
{
	char yama[16] = "";
	char *y = slurp("/proc/sys/kernel/yama/ptrace_scope", NULL);
	if (y) {
		snprintf(yama, sizeof yama, "%.*s", (int)strcspn(y, "\n"), y);
		free(y);
	}
	/* Yama's modes (Documentation/admin-guide/LSM/Yama.rst) */
	static const char *const scope_says[] = {
		[1] = "only a parent may trace its descendants: run heaptrail as root or "
		      "with CAP_SYS_PTRACE, or start the program under `heaptrail run`",
		[2] = "only root or CAP_SYS_PTRACE may trace: run heaptrail as root",
		[3] = "no process may be traced until the next boot: start the program "
		      "under `heaptrail run` instead",
	};
	int scope = *yama >= '1' && *yama <= '3' && !yama[1] ? *yama - '0' : 0;
	if (e == EPERM && scope)
		cli_error("not permitted to trace process %d: /proc/sys/kernel/yama/ptrace_scope is "
			  "%d: %s", pid, scope, scope_says[scope]);
	else if (e == EPERM)
		cli_error("not permitted to trace process %d: it belongs to another user, or is "
			  "already traced (needs the same user or CAP_SYS_PTRACE)", pid);
	else
		cli_error("cannot trace process %d: %s", pid, strerror(e));
}

/* Opens the target for calls; checks what can be checked without
 * touching it. maps is returned (free it). Returns 0 or prints and -1. */
static int open_target(struct target *t, long pid, char **maps)
{
	char path[96], buf[64];
	memset(t, 0, sizeof *t);
	t->pid = (pid_t)pid;
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
			seize_error((pid_t)pid, EPERM);
		else
			cli_error("cannot read /proc/%ld/maps: %s", pid, strerror(errno));
		return -1;
	}
	if (!**maps) {
		cli_error("process %ld has no memory map (a kernel thread?)", pid);
		free(*maps);
		return -1;
	}
	return 0;
}

/* Seizes a thread, maps the private page. Returns 0 or prints and -1. */
static int start_calls(struct target *t)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/mem", t->pid);
	/* a heaptrail killed while it holds the thread would leave it running
	 * our call's registers: the signals that ask it to end wait */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGQUIT);
	sigaddset(&stop, SIGPIPE);
	t->masked = !sigprocmask(SIG_BLOCK, &stop, &t->oldmask);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0) {
		cli_error("cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	int e = borrow(t);
	if (e) {
		if (e != -EAGAIN)
			seize_error(t->pid, -e);
		return -1;
	}
	long a[6] = { 0, PAGE_SIZE_INJ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0 };
	int gone = 0;
	long r = remote_syscall(t, SYS_mmap, a, &gone);
	if (gone) {
		cli_error("process %d ended during the attach", t->pid);
		t->tid = 0;
		return -1;
	}
	if (r < 0 && r > -4096) {
		char st[64] = "", *status;
		snprintf(path, sizeof path, "/proc/%d/status", t->pid);
		status = slurp(path, NULL);
		status_field(status, "Seccomp", st, sizeof st);
		free(status);
		give_back(t);
		if (!strcmp(st, "2"))
			cli_error("the seccomp filter of process %d refuses mmap (%s): cannot load the "
				  "agent", t->pid, strerror((int)-r));
		else
			cli_error("mmap in process %d failed: %s", t->pid, strerror((int)-r));
		return -1;
	}
	t->page = (uint64_t)r;
	return 0;
}

/* Unmaps the page and gives the thread back. */
static void end_calls(struct target *t)
{
	if (t->tid && t->page) {
		long a[6] = { (long)t->page, PAGE_SIZE_INJ, 0, 0, 0, 0 };
		int gone = 0;
		remote_syscall(t, SYS_munmap, a, &gone);
		if (gone)
			t->tid = 0;
	}
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
	static const char *const names[] = { "libheaptrail.so", NULL };
	return find_module(maps, names, base, path, cap);
}

/* Calls the agent's entry point name(a0, a1) in pid; *ret its int
 * result. With request (a FMT_SIGVAL_* value), name(request, regs,
 * nregs) instead, regs the borrowed thread's registers as it was stopped
 * (heaptrail_request). Returns 0 or prints and -1. */
static int call_agent(long pid, const char *name, const char *s0, const char *s1, int request,
		      int *ret, double *stopped_ms)
{
	struct target t;
	char *maps = NULL, agent[PATH_MAX], file[PATH_MAX + 32];
	uint64_t base, rv;
	int result = -1;
	if (open_target(&t, pid, &maps))
		return -1;
	if (agent_in(maps, &base, agent, sizeof agent)) {
		cli_error("process %ld has no heaptrail agent (start it with `heaptrail run`, or "
			  "`heaptrail attach %ld`)", pid, pid);
		goto out;
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, agent);
	uint64_t fn = elf_symbol(file, name);
	if (!fn) {
		cli_error("the agent in process %ld (%s) has no %s: an older heaptrail?", pid, agent,
			  name);
		goto out;
	}
	if (start_calls(&t))
		goto out;
	uint64_t a0 = 0, a1 = 0;
	if (s0) {
		a0 = t.page;
		mem_rw(&t, a0, (void *)s0, strlen(s0) + 1, true);
	}
	if (s1) {
		a1 = t.page + 8192;
		mem_rw(&t, a1, (void *)s1, strlen(s1) + 1, true);
	}
	int e;
	if (request) {
		uint64_t regs = t.page + 16384;
		mem_rw(&t, regs, &t.saved, sizeof t.saved, true);
		e = remote_call4(&t, base + fn, (uint32_t)request, regs,
				 sizeof t.saved / sizeof(uint64_t), 0, &rv);
	} else {
		e = remote_call(&t, base + fn, a0, a1, &rv);
	}
	if (e) {
		cli_error("the call into process %ld failed: %s", pid, strerror(-e));
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
	"                         ./heaptrail-attach-PID)\n"
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
	"  --options-file FILE    more options, one per line, as for heaptrail run\n"
	CLI_LIVE_PUSH_HELP;

static int do_attach(long pid, const char *opts, const char *outdir, double *stopped_ms)
{
	struct target t;
	char *maps = NULL, libc[PATH_MAX], agent[PATH_MAX], file[PATH_MAX + 32];
	uint64_t libc_base, rv;
	int ret = 1;
	if (open_target(&t, pid, &maps))
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
		cli_error("cannot attach to process %ld: it is a static binary (no dynamic loader "
			  "and no libc.so.6 to load the agent with)", pid);
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
		cli_error("the agent %s is not visible in the mount namespace of process %ld "
			  "(%s): copy it there and set HEAPTRAIL_AGENT", agent, pid, strerror(errno));
		goto out;
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, outdir);
	struct stat ours, theirs;
	if (stat(file, &theirs) || stat(outdir, &ours) || ours.st_dev != theirs.st_dev ||
	    ours.st_ino != theirs.st_ino) {
		cli_error("the output directory %s is not the same in the mount namespace of "
			  "process %ld: give one it sees with -o", outdir, pid);
		goto out;
	}
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, agent);
	uint64_t start_off = elf_symbol(file, "heaptrail_attach_start");
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, libc);
	uint64_t dlopen_off = elf_symbol(file, "dlopen");
	int old_dlopen = 0;
	if (!dlopen_off) {  /* glibc before 2.34: the loader's private entry */
		dlopen_off = elf_symbol(file, "__libc_dlopen_mode");
		old_dlopen = 1;
	}
	uint64_t dlerror_off = old_dlopen ? 0 : elf_symbol(file, "dlerror");
	if (!dlopen_off || !start_off) {
		cli_error("cannot find %s in %s", dlopen_off ? "heaptrail_attach_start" : "dlopen",
			  dlopen_off ? agent : libc);
		goto out;
	}
	if (start_calls(&t))
		goto out;
	uint64_t s_path = t.page, s_opts = t.page + 8192, s_out = t.page + 16384;
	if (mem_rw(&t, s_path, agent, strlen(agent) + 1, true) ||
	    mem_rw(&t, s_opts, (void *)opts, strlen(opts) + 1, true) ||
	    mem_rw(&t, s_out, (void *)outdir, strlen(outdir) + 1, true)) {
		cli_error("cannot write into process %ld's memory", pid);
		goto out;
	}
	int e = remote_call(&t, libc_base + dlopen_off, s_path, RTLD_NOW_VALUE, &rv);
	if (e) {
		cli_error("the call to dlopen in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	if (!rv) {
		char why[512] = "unknown error";
		uint64_t msg;
		if (dlerror_off && !remote_call(&t, libc_base + dlerror_off, 0, 0, &msg) && msg)
			read_string(&t, msg, why, sizeof why);
		cli_error("process %ld could not load the agent: %s", pid, why);
		goto out;
	}
	free(maps);
	snprintf(file, sizeof file, "/proc/%ld/maps", pid);
	maps = slurp(file, NULL);
	if (!maps || agent_in(maps, &ab, loaded, sizeof loaded)) {
		cli_error("the agent loaded into process %ld is not in its memory map", pid);
		goto out;
	}
	/* where the borrowed thread is, which the agent must know before it
	 * rewrites code (allocator functions hooked by name) */
	e = remote_call4(&t, ab + start_off, s_opts, s_out, t.saved.rip, t.saved.rsp, &rv);
	if (e) {
		cli_error("the agent's start in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	int r = (int)(uint32_t)rv;
	if (r == -EALREADY) {
		cli_error("process %ld is attached already (`heaptrail detach %ld` first)", pid, pid);
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

static int detach_now(long pid, bool quiet)
{
	int r;
	double ms = 0;
	if (call_agent(pid, "heaptrail_attach_stop", NULL, NULL, 0, &r, &ms))
		return 1;
	if (r == -ENOENT) {
		cli_error("process %ld is not attached (started under `heaptrail run`, or detached "
			  "already)", pid);
		return 1;
	}
	if (!quiet)
		fprintf(stderr, "heaptrail: detached from process %ld (thread stopped %.1f ms)\n", pid,
			ms);
	return r ? 1 : 0;
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
	} else if ((v = cli_opt_value(argc, argv, i, "--for"))) {
		if (!fmt_opt_duration(v, strlen(v), &a->for_ms) || !a->for_ms) {
			cli_error("attach: bad value for --for: '%s' (want a duration, e.g. 30s)", v);
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
			cli_error("attach: bad value for --%s: '%s' (%s)", key, v, why);
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
				  : "attach: unexpected argument '%s'", arg);
		if (!in_file)
			fputs(attach_usage, stderr);
		return -1;
	}
	if (v && !*v) {
		cli_error("attach: option '%s' needs a value", arg);
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
		cli_error("attach: '%s %s': one option per line", argv[1], argv[2]);
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
	if (outdir)
		snprintf(dir, sizeof dir, "%s", outdir);
	else
		snprintf(dir, sizeof dir, "heaptrail-attach-%ld", pid);
	struct stat dst;
	bool made = stat(dir, &dst) != 0;
	int e = cli_make_dir(dir, !outdir);
	if (e) {
		cli_error("cannot make the output directory '%s': %s", dir, strerror(-e));
		return 1;
	}
	if (cli_other_run_file(dir, old, sizeof old)) {
		cli_error("'%s' holds another run's files (%s): give a fresh directory with -o", dir,
			  old);
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
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (do_attach(pid, all, abs, &ms)) {
		if (made)
			rmdir(abs);  /* made for this attach, and still empty */
		cli_live_stop(live);
		return 1;
	}
	fprintf(stderr, "heaptrail: attached to process %ld in %.1f ms (one thread stopped "
		"%.1f ms); files in %s\n", pid, ms_since(&t0), ms, abs);
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
	if (call_agent(pid, "heaptrail_dump", NULL, NULL, 0, &r, &ms))
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

int cli_agent_request(long pid, int value, int *ret)
{
	return call_agent(pid, "heaptrail_request", NULL, NULL, value, ret, NULL);
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
