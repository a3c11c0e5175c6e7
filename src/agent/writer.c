/*
 * writer.c — buffered file output with plain syscalls.
 *
 * Every file the agent writes is created here, the same way: under an
 * unpredictable temporary name in the target directory (".heaptrail-tmp-"
 * and 16 hex digits from getrandom), with O_CREAT|O_EXCL|O_NOFOLLOW and
 * mode 0600 whatever the umask, then renamed into place by
 * agent_writer_commit. So:
 *  - whoever else can write to the directory cannot make the program
 *    write through a planted symlink or into a file of theirs: O_EXCL
 *    never opens an existing name, and rename(2) replaces a symlink at
 *    the final name instead of following it;
 *  - a reader never sees half a file: the final name appears whole, and
 *    a temporary name (left behind only by SIGKILL or a crash) starts
 *    with a dot and ends in neither .leaks, .heap nor .timeline, so no
 *    pattern the CLI reads matches it;
 *  - heap dumps and reports, which hold addresses, paths and command
 *    lines, are readable by their owner only.
 * A process whose soft RLIMIT_NOFILE leaves no free descriptor gets its
 * soft limit raised to the hard one for the time the file is open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* rename */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "format/vocab.h"
#include "agent/writer.h"
#include "agent/banned.h"

#define WBUF (64 * 1024)
#define TMP_PREFIX FMT_TMP_PREFIX

/* 64 unpredictable bits: getrandom when the kernel has it, else what
 * varies (the cycle counter, the pid, an address), which O_EXCL keeps
 * safe: a guessed name only makes the open retry. */
static uint64_t random_u64(void)
{
	static _Atomic uint64_t counter;
	uint64_t v = 0;
	if (syscall(SYS_getrandom, &v, sizeof v, 1 /* GRND_NONBLOCK */) == (long)sizeof v)
		return v;
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	v = ((uint64_t)hi << 32 | lo) ^ (uint64_t)getpid() << 40 ^ (uintptr_t)&v ^
	    atomic_fetch_add(&counter, 0x9e3779b97f4a7c15ull);
	v ^= v >> 31;
	v *= 0xbf58476d1ce4e5b9ull;
	return v ^ (v >> 29);
}

/* dir + "/" + name into out (name alone when dir is ""); false when it
 * does not fit. */
static bool join(char *out, size_t cap, const char *dir, const char *name)
{
	size_t d = agent_strlen(dir), n = agent_strlen(name);
	if (d + n + 2 > cap)
		return false;
	agent_memcpy(out, dir, d);
	if (d && dir[d - 1] != '/')
		out[d++] = '/';
	agent_memcpy(out + d, name, n + 1);
	return true;
}

int agent_open_exclusive(const char *dir, char *tmp, size_t cap, struct agent_rlimit_raise *lim)
{
	char name[40];
	lim->raised = false;
	for (int tries = 0; tries < 16; tries++) {
		size_t n = agent_strlcpy(name, TMP_PREFIX, sizeof name);
		uint64_t r = random_u64();
		for (int i = 0; i < 16; i++)
			name[n++] = "0123456789abcdef"[(r >> (4 * i)) & 15];
		name[n] = 0;
		if (!join(tmp, cap, dir, name))
			return -ENAMETOOLONG;
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			/* exactly 0600: a umask of 0777 must not leave the owner
			 * unable to read it */
			fchmod(fd, 0600);
			return fd;
		}
		int e = errno;
		if (e == EMFILE && !lim->raised && agent_rlimit_raise(lim)) {
			tries--;
			continue;
		}
		if (e != EEXIST && e != EINTR) {
			agent_rlimit_restore(lim);
			return -e;
		}
	}
	agent_rlimit_restore(lim);
	return -EEXIST;
}

/* No descriptor left under the soft limit (a program that set it to 3,
 * say): borrow up to the hard limit. */
bool agent_rlimit_raise(struct agent_rlimit_raise *lim)
{
	struct rlimit rl;
	if (lim->raised || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return false;
	lim->old = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return false;
	lim->raised = true;
	return true;
}

void agent_rlimit_restore(struct agent_rlimit_raise *lim)
{
	struct rlimit rl;
	if (lim->raised && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = lim->old;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	lim->raised = false;
}

int agent_writer_open(struct agent_writer *w, const char *dir, const char *name)
{
	agent_memset(w, 0, sizeof *w);
	w->fd = -1;
	if (!join(w->path, sizeof w->path, dir, name))
		return -ENAMETOOLONG;
	w->buf = agent_mmap(WBUF);
	if (!w->buf)
		return -ENOMEM;
	w->cap = WBUF;
	w->fd = agent_open_exclusive(dir, w->tmp, sizeof w->tmp, &w->lim);
	if (w->fd < 0) {
		int e = w->fd;
		agent_munmap(w->buf, WBUF);
		w->buf = NULL;
		w->fd = -1;
		return e;
	}
	struct stat st;
	if (fstat(w->fd, &st) == 0) {
		w->dev = (uint64_t)st.st_dev;
		w->ino = (uint64_t)st.st_ino;
	}
	return 0;
}

int agent_writer_open_path(struct agent_writer *w, const char *path)
{
	const char *slash = NULL;
	for (const char *p = path; *p; p++)
		if (*p == '/')
			slash = p;
	if (!slash)
		return agent_writer_open(w, "", path);
	char dir[4096];
	size_t n = (size_t)(slash - path);
	if (n >= sizeof dir)
		return -ENAMETOOLONG;
	agent_memcpy(dir, path, n);
	dir[n] = 0;
	return agent_writer_open(w, n ? dir : "/", slash + 1);
}

static void flush(struct agent_writer *w)
{
	size_t off = 0;
	while (off < w->len && !w->failed) {
		ssize_t r = write(w->fd, w->buf + off, w->len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->failed = true;
			w->err = r < 0 ? errno : ENOSPC;
		} else
			off += (size_t)r;
	}
	w->len = 0;
}

static void put_mem(struct agent_writer *w, const char *s, size_t n)
{
	while (n) {
		if (w->len == w->cap)
			flush(w);
		size_t k = w->cap - w->len < n ? w->cap - w->len : n;
		agent_memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
}

void agent_put(struct agent_writer *w, const char *s)
{
	put_mem(w, s, agent_strlen(s));
}

void agent_put_u64(struct agent_writer *w, uint64_t v)
{
	char tmp[24];
	put_mem(w, tmp, (size_t)(agent_put_dec(tmp, v) - tmp));
}

void agent_put_hex(struct agent_writer *w, uint64_t v)
{
	char tmp[20];
	int k = 0;
	do
		tmp[k++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4));
	put_mem(w, "0x", 2);
	while (k)
		put_mem(w, &tmp[--k], 1);
}

void agent_put_file(struct agent_writer *w, const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		put_mem(w, buf, (size_t)r);
	}
	close(fd);
}

void agent_put_escaped(struct agent_writer *w, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= 0x20 || c >= 0x7f || c == '%') {
			char e[3] = { '%', "0123456789ABCDEF"[c >> 4], "0123456789ABCDEF"[c & 15] };
			put_mem(w, e, 3);
		} else {
			put_mem(w, (const char *)&c, 1);
		}
	}
}

int agent_writer_commit(struct agent_writer *w)
{
	int err = 0;
	flush(w);
	if (w->failed)
		err = -(w->err ? w->err : EIO);
	if (close(w->fd) != 0 && !err)
		err = -errno;
	if (!err && rename(w->tmp, w->path) != 0)
		err = -errno;
	if (err)
		unlink(w->tmp);
	agent_rlimit_restore(&w->lim);
	agent_munmap(w->buf, w->cap);
	w->buf = NULL;
	w->fd = -1;
	return err;
}
