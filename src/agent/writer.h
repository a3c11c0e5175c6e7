/*
 * writer.h — files written with plain system calls into a buffer the
 * agent owns, under an unpredictable temporary name, then renamed into
 * place (writer.c). Layer 0.
 */
#ifndef HEAPTRAIL_AGENT_WRITER_H
#define HEAPTRAIL_AGENT_WRITER_H

#include "agent/agent.h"

/* A soft RLIMIT_NOFILE raised to the hard one while a file is open. */
struct agent_rlimit_raise {
	bool raised;
	uint64_t old;
};
struct agent_writer {
	int fd;
	char *buf;
	size_t len, cap;
	bool failed;
	int err;                 /* errno of the first failed write */
	uint64_t dev, ino;       /* of the file written */
	struct agent_rlimit_raise lim;
	char tmp[4352], path[4352];
};
/* Creates a new file in dir ("" = the current directory) at an
 * unpredictable temporary name (written into tmp), O_EXCL|O_NOFOLLOW,
 * mode 0600; raises the soft RLIMIT_NOFILE when no descriptor is left
 * (undo with agent_rlimit_restore once the file is closed). Returns the
 * descriptor or -errno. Signal-safe. */
int agent_open_exclusive(const char *dir, char *tmp, size_t cap, struct agent_rlimit_raise *lim);
/* Raises the soft RLIMIT_NOFILE to the hard one (false when it cannot);
 * agent_rlimit_restore puts it back. Signal-safe. */
bool agent_rlimit_raise(struct agent_rlimit_raise *lim);
void agent_rlimit_restore(struct agent_rlimit_raise *lim);
/* Opens dir/name via a temporary name (agent_open_exclusive). Returns 0
 * or -errno. */
int agent_writer_open(struct agent_writer *w, const char *dir, const char *name);
/* The same for a whole path. */
int agent_writer_open_path(struct agent_writer *w, const char *path);
/* Copies the file at path (e.g. /proc/self/maps) into the output. */
void agent_put_file(struct agent_writer *w, const char *path);
void agent_put(struct agent_writer *w, const char *s);
void agent_put_u64(struct agent_writer *w, uint64_t v);
void agent_put_hex(struct agent_writer *w, uint64_t v);
void agent_put_escaped(struct agent_writer *w, const char *s);
/* Flushes, fsyncs nothing, closes and renames into place. Returns 0 or
 * -errno; on failure the temporary file is removed. */
int agent_writer_commit(struct agent_writer *w);

#endif
