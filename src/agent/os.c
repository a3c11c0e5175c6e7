/* os.c — the few OS and string helpers the agent needs, without libc's
 * allocating or locale-aware functions. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/banned.h"

/* Every mapping the agent makes is remembered here, so the leak scan can
 * leave the agent's own memory out (the live table holds the address of
 * every block). Slots are claimed and released with atomics: no lock, so
 * no fork hazard. A full registry only weakens the scan, never breaks
 * allocation. */
#define MAX_MAPS 16384
static struct {
	_Atomic uintptr_t start;
	size_t len;
} maps[MAX_MAPS];

static void maps_add(uintptr_t start, size_t len)
{
	for (int i = 0; i < MAX_MAPS; i++) {
		uintptr_t zero = 0;
		if (!atomic_load_explicit(&maps[i].start, memory_order_relaxed) &&
		    atomic_compare_exchange_strong(&maps[i].start, &zero, start)) {
			maps[i].len = len;
			return;
		}
	}
}

static void maps_remove(uintptr_t start)
{
	for (int i = 0; i < MAX_MAPS; i++)
		if (atomic_load_explicit(&maps[i].start, memory_order_relaxed) == start) {
			maps[i].len = 0;
			atomic_store(&maps[i].start, 0);
			return;
		}
}

size_t agent_mmap_ranges(uintptr_t *starts, size_t *lens, size_t cap)
{
	size_t n = 0;
	for (int i = 0; i < MAX_MAPS && n < cap; i++) {
		uintptr_t s = atomic_load(&maps[i].start);
		if (s && maps[i].len) {
			starts[n] = s;
			lens[n++] = maps[i].len;
		}
	}
	return n;
}

_Atomic uint64_t agent_mapped_bytes;

void *agent_mmap(size_t len)
{
	/* the system call itself: the agent's mmap (mmaphooks.c) is the program's */
	long r = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r < 0)
		return NULL;
	void *p = (void *)r;
	maps_add((uintptr_t)p, len);
	agent_add_shared(&agent_mapped_bytes, len);
	return p;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23     /* Linux 5.14 */
#endif

/* A table that every allocation and free reads at a random place: with
 * 4 KiB pages, one of tens of MiB misses the TLB on nearly every access,
 * a page walk on top of the cache miss. So from 2 MiB on it is aligned to
 * 2 MiB (a huge page needs an aligned 2 MiB inside the mapping) and asked
 * to be huge pages (MADV_HUGEPAGE: granted where THP is "always" or
 * "madvise"; where it is "never" the pages stay 4 KiB and only the TLB
 * misses remain). Then it is faulted in for writing: left to the first
 * access, a read (every lookup reads before it writes) maps the shared
 * zero page, huge or not, and the write after it faults again and since
 * Linux 5.8 gets a 4 KiB page, never a huge one. The pages would all be
 * touched soon anyway: blocks land at random all over the table. Not
 * MAP_HUGETLB: those pages come from a pool an administrator reserves for
 * the program's own use. */
void *agent_mmap_table(size_t len)
{
	const size_t huge = 2u << 20;
	if (len < huge)
		return agent_mmap(len);
	long r = syscall(SYS_mmap, NULL, len + huge, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r < 0)
		return NULL;
	uintptr_t start = (uintptr_t)r, a = (start + huge - 1) & ~(uintptr_t)(huge - 1);
	uintptr_t end = (a + len + 4095) & ~(uintptr_t)4095, mend = start + len + huge;
	if (a > start)
		syscall(SYS_munmap, start, a - start);
	if (mend > end)
		syscall(SYS_munmap, end, mend - end);
	syscall(SYS_madvise, a, len, MADV_HUGEPAGE);        /* hints: a failure */
	syscall(SYS_madvise, a, len, MADV_POPULATE_WRITE);  /* changes nothing */
	maps_add(a, len);
	agent_add_shared(&agent_mapped_bytes, len);
	return (void *)a;
}

void agent_munmap(void *p, size_t len)
{
	if (p) {
		maps_remove((uintptr_t)p);
		syscall(SYS_munmap, p, len);
		agent_add_shared(&agent_mapped_bytes, -(uint64_t)len);
	}
}

/* agent_switch_stack(arg, fn, top): calls fn(arg) with the stack pointer
 * at top (16-byte aligned), then comes back to the caller's stack. rbp
 * keeps the caller's stack pointer (callee-saved, so fn preserves it) and
 * is the CFA register, so an unwinder can walk out of fn. */
__asm__(".text\n"
	/* global (and hidden): with LTO the caller may land in another
	 * partition, where a local symbol is not seen */
	".globl agent_switch_stack\n"
	".hidden agent_switch_stack\n"
	".type agent_switch_stack, @function\n"
	".p2align 4\n"
	"agent_switch_stack:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	push %rbp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	.cfi_rel_offset %rbp, 0\n"
	"	mov %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	mov %rdx, %rsp\n"
	"	call *%rsi\n"
	"	mov %rbp, %rsp\n"
	"	.cfi_def_cfa_register %rsp\n"
	"	pop %rbp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	.cfi_restore %rbp\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size agent_switch_stack, .-agent_switch_stack\n");
long agent_switch_stack(void *arg, long (*fn)(void *), uintptr_t top)
	__attribute__((visibility("hidden")));

#define OWN_STACK_SIZE (1ul << 20)
#define OWN_STACK_GUARD 4096ul

long agent_call_on_own_stack(long (*fn)(void *), void *arg)
{
	size_t len = OWN_STACK_SIZE + OWN_STACK_GUARD;
	char *base = agent_mmap(len);
	if (!base || mprotect(base, OWN_STACK_GUARD, PROT_NONE)) {
		agent_munmap(base, len);
		agent_log("cannot map a stack of its own: ", "report or check skipped", NULL);
		return -ENOMEM;
	}
	long r = agent_switch_stack(arg, fn, ((uintptr_t)base + len) & ~(uintptr_t)15);
	agent_munmap(base, len);
	return r;
}

size_t agent_strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

bool agent_streq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

bool agent_strstarts(const char *s, const char *prefix)
{
	while (*prefix)
		if (*s++ != *prefix++)
			return false;
	return true;
}

char *agent_put_dec_width(char *dst, uint64_t v, int width)
{
	char digits[24];
	int k = 0;
	do
		digits[k++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (k < width && k < (int)sizeof digits)
		digits[k++] = '0';
	while (k)
		*dst++ = digits[--k];
	*dst = 0;
	return dst;
}

char *agent_put_dec(char *dst, uint64_t v)
{
	return agent_put_dec_width(dst, v, 1);
}

/* The clock the dumps and the timeline count from: set at start-up and
 * again in a forked child (agent_triggers_start). */
static struct timespec started;

void agent_clock_start(void)
{
	clock_gettime(CLOCK_MONOTONIC, &started);
}

uint64_t agent_ms_since_start(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	/* in ns first: a negative nanosecond difference must not round
	 * towards zero (two readings 1 ms apart would get the same ms) */
	int64_t ns = (int64_t)(now.tv_sec - started.tv_sec) * 1000000000 +
		     (int64_t)(now.tv_nsec - started.tv_nsec);
	return ns > 0 ? (uint64_t)ns / 1000000 : 0;
}

size_t agent_strlcpy(char *dst, const char *src, size_t cap)
{
	size_t n = agent_strlen(src);
	size_t k = n < cap - 1 ? n : cap - 1;
	agent_memcpy(dst, src, k);
	dst[k] = 0;
	return n;
}

void agent_memcpy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);  /* libc's memcpy never allocates */
}

int agent_memcmp(const void *a, const void *b, size_t n)
{
	return memcmp(a, b, n);  /* libc's, pure */
}

void agent_memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;
	while (n--)
		*d++ = (unsigned char)c;
}

ssize_t agent_copy_self(void *to, uintptr_t from, size_t n)
{
	int saved = errno;
	struct iovec local = { to, n }, remote = { (void *)from, n };
	/* getpid(), not agent_pid: a child forked by a raw system call (no
	 * atfork handler ran) would read its parent's memory */
	long r = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL);
	if (r < 0)
		r = -errno;
	errno = saved;
	return r;
}

ssize_t agent_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	ssize_t r;
	while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return n ? (ssize_t)n : -1;
}

uint64_t agent_rss_bytes(bool anon)
{
	char buf[128];
	if (agent_read_small("/proc/self/statm", buf, sizeof buf) < 0)
		return 0;
	/* size resident shared ...: in pages */
	uint64_t f[3] = { 0, 0, 0 };
	const char *p = buf;
	for (int i = 0; i < 3; i++) {
		for (; *p >= '0' && *p <= '9'; p++)
			f[i] = f[i] * 10 + (uint64_t)(*p - '0');
		if (*p == ' ')
			p++;
	}
	uint64_t pages = anon ? (f[1] > f[2] ? f[1] - f[2] : 0) : f[1];
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* capture and capture_cap belong to the thread capture_tid names: other
 * threads read only capture_tid (0: nobody captures) */
static char *capture;
static size_t capture_cap;
static _Atomic pid_t capture_tid;

void agent_log_capture(char *buf, size_t cap)
{
	if (!buf) {
		atomic_store(&capture_tid, 0);
		capture = NULL;
		return;
	}
	buf[0] = 0;
	capture = buf;
	capture_cap = cap;
	atomic_store(&capture_tid, agent_gettid());
}

/* line (n bytes, with its newline) onto the capture, or "..." when full */
static void capture_line(const char *line, size_t n)
{
	static const char more[] = "(more messages dropped)\n";
	size_t have = agent_strlen(capture);
	if (have + n + sizeof more <= capture_cap) {
		agent_memcpy(capture + have, line, n);
		capture[have + n] = 0;
	} else if (have + sizeof more <= capture_cap &&
		   (have < sizeof more - 1 ||
		    agent_memcmp(capture + have - (sizeof more - 1), more, sizeof more - 1))) {
		agent_memcpy(capture + have, more, sizeof more);
	}
}

void agent_log(const char *a, const char *b, const char *c)
{
	static const char prefix[] = "heaptrail: ";
	char line[1024];
	size_t n = agent_strlcpy(line, prefix, sizeof line);
	const char *parts[] = { a, b, c };
	for (int i = 0; i < 3; i++)
		if (parts[i] && n < sizeof line - 2)
			n += agent_strlcpy(line + n, parts[i], sizeof line - 1 - n);
	if (n > sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	pid_t tid = atomic_load_explicit(&capture_tid, memory_order_relaxed);
	if (tid && tid == agent_gettid()) {
		capture_line(line + sizeof prefix - 1, n - (sizeof prefix - 1));
		return;
	}
	ssize_t r = write(2, line, n);
	(void)r;
}

const char *agent_strerror(int e)
{
	switch (e) {
	case ENOSPC: return "no space left on device";
	case EDQUOT: return "disk quota exceeded";
	case EACCES: return "permission denied";
	case EPERM: return "operation not permitted";
	case EROFS: return "read-only file system";
	case ENOENT: return "no such file or directory";
	case ENOTDIR: return "not a directory";
	case EISDIR: return "is a directory";
	case EMFILE: return "too many open files";
	case ENFILE: return "too many open files in system";
	case ENAMETOOLONG: return "file name too long";
	case ELOOP: return "too many levels of symbolic links";
	case EEXIST: return "file exists";
	case EFBIG: return "file too large";
	case ENOMEM: return "out of memory";
	case EIO: return "input/output error";
	case EXDEV: return "not on the same file system";
	case EBUSY: return "busy";
	case ESTALE: return "stale file handle";
	default: return "error";
	}
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void agent_nap_us(long us)
{
	int saved = errno, word = 0;
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
	errno = saved;
}

bool agent_lock_seen_free(agent_lock_t *l, long ms)
{
	for (long waited = 0; atomic_load_explicit(&l->v, memory_order_relaxed); waited++) {
		if (waited >= ms)
			return false;
		agent_nap_us(1000);
	}
	return true;
}

AGENT_NOINLINE void agent_lock_slow(agent_lock_t *l)
{
	for (int spins = 0;; spins++) {
		if (!atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
			return;
		while (atomic_load_explicit(&l->v, memory_order_relaxed)) {
			if (spins++ > 100)
				sched_yield();
			else
				cpu_relax();
		}
	}
}

/* ---------- scratch arenas ---------- */

size_t agent_arena_need(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

bool agent_arena_init(struct agent_arena *a, size_t len)
{
	a->len = len;
	a->used = 0;
	a->base = agent_mmap(len);
	return a->base != NULL;
}

void *agent_arena_take(struct agent_arena *a, size_t n)
{
	n = agent_arena_need(n);
	if (!a->base || n > a->len - a->used)
		return NULL;
	void *p = a->base + a->used;
	a->used += n;
	return p;
}

void agent_arena_release(struct agent_arena *a)
{
	if (a->base)
		agent_munmap(a->base, a->len);
	a->base = NULL;
	a->len = a->used = 0;
}

int agent_thread_count(void)
{
	char buf[4096];
	int n = 0;
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		long r = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (r <= 0)
			break;
		for (long off = 0; off < r;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			if (d->d_name[0] != '.')
				n++;
			off += d->d_reclen;
		}
	}
	close(fd);
	return n;
}
