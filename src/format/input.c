/* input.c — checked opening and reading of input files (see input.h). */
#include "format/input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fmt_input_open(const char *path, uint64_t max, const char **err)
{
	struct stat st;
	/* O_NONBLOCK: opening a FIFO without a writer would wait for one;
	 * O_NOCTTY: a tty must not become our controlling terminal */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	int e;

	if (fd < 0) {
		e = errno;
		*err = strerror(e);
		return -e;
	}
	if (fstat(fd, &st)) {
		e = errno;
		*err = strerror(e);
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		e = EISDIR;
		*err = strerror(e);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		e = EINVAL;
		*err = "not a regular file";
		goto fail;
	}
	if ((uint64_t)st.st_size > max) {
		e = EFBIG;
		*err = "file too large";
		goto fail;
	}
	/* regular files never block; clear the flag for tidiness */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
fail:
	close(fd);
	return -e;
}

FILE *fmt_input_fopen(const char *path, uint64_t max, const char **err)
{
	int fd = fmt_input_open(path, max, err);
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		int e = errno;
		close(fd);
		*err = strerror(e);
		errno = e;
	}
	return f;
}

int fmt_input_read(const char *path, uint64_t max, char **buf, size_t *len,
		   const char **err)
{
	struct stat st;
	size_t cap, got = 0;
	char *b = NULL;
	int ret = 0;
	int fd = fmt_input_open(path, max, err);

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		ret = -errno;
		*err = strerror(errno);
		goto out;
	}
	cap = (size_t)st.st_size + 1;
	b = malloc(cap + 1);
	if (!b) {
		ret = -ENOMEM;
		*err = "out of memory";
		goto out;
	}
	/* read one byte past the size seen, to notice a file that grew */
	for (;;) {
		ssize_t r = read(fd, b + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			*err = strerror(errno);
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (got == cap) {
			if ((uint64_t)cap > max) {
				ret = -EFBIG;
				*err = "file too large";
				goto out;
			}
			size_t ncap = cap * 2 > max + 1 ? (size_t)max + 1 : cap * 2;
			char *nb = realloc(b, ncap + 1);
			if (!nb) {
				ret = -ENOMEM;
				*err = "out of memory";
				goto out;
			}
			b = nb;
			cap = ncap;
		}
	}
	b[got] = 0;
	*buf = b;
	*len = got;
	b = NULL;
out:
	free(b);
	close(fd);
	return ret;
}
