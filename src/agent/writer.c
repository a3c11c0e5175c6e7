/*
 * writer.c — buffered file output with plain syscalls. A file is written
 * under a temporary name in the target directory and renamed into place by
 * agent_writer_commit, so a reader never sees half a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* rename */
#include <unistd.h>

#include "agent/agent.h"
#include "agent/banned.h"

#define WBUF (64 * 1024)

static void put_num(char *dst, size_t *n, uint64_t v)
{
	char tmp[24];
	int k = 0;
	do
		tmp[k++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (k)
		dst[(*n)++] = tmp[--k];
	dst[*n] = 0;
}

int agent_writer_open(struct agent_writer *w, const char *dir, const char *name)
{
	size_t n = 0;
	agent_memset(w, 0, sizeof *w);
	w->fd = -1;
	if (agent_strlen(dir) + agent_strlen(name) + 64 > sizeof w->path)
		return -ENAMETOOLONG;
	if (*dir) {
		n = agent_strlcpy(w->path, dir, sizeof w->path);
		w->path[n++] = '/';
	}
	n += agent_strlcpy(w->path + n, name, sizeof w->path - n);
	agent_memcpy(w->tmp, w->path, n);
	size_t t = n;
	agent_strlcpy(w->tmp + t, ".tmp.", sizeof w->tmp - t);
	t += 5;
	put_num(w->tmp, &t, (uint64_t)getpid());
	w->buf = agent_mmap(WBUF);
	if (!w->buf)
		return -ENOMEM;
	w->cap = WBUF;
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		int e = errno;
		agent_munmap(w->buf, WBUF);
		w->buf = NULL;
		return -e;
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
		if (r <= 0)
			w->failed = true;
		else
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
	size_t n = 0;
	put_num(tmp, &n, v);
	put_mem(w, tmp, n);
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
		err = -EIO;
	if (close(w->fd) != 0 && !err)
		err = -errno;
	if (!err && rename(w->tmp, w->path) != 0)
		err = -errno;
	if (err)
		unlink(w->tmp);
	agent_munmap(w->buf, w->cap);
	w->buf = NULL;
	w->fd = -1;
	return err;
}
