/* procmaps.c — reads /proc/self/maps with plain system calls into a
 * buffer the caller lends (see procmaps.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/procmaps.h"
#include "agent/banned.h"

static uintptr_t parse_hex(const char **s)
{
	uintptr_t v = 0;
	for (;; ++*s) {
		char c = **s;
		if (c >= '0' && c <= '9')
			v = v << 4 | (uintptr_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uintptr_t)(c - 'a' + 10);
		else
			return v;
	}
}

bool agent_maps_parse(const char *s, struct agent_maps_line *m)
{
	m->start = parse_hex(&s);
	if (*s++ != '-')
		return false;
	m->end = parse_hex(&s);
	if (*s++ != ' ')
		return false;
	for (int i = 0; i < 4; i++)
		if (!(m->perms[i] = *s++))
			return false;
	if (*s++ != ' ')
		return false;
	m->offset = parse_hex(&s);
	/* skip the device and the inode; the rest is the name */
	for (int field = 0; field < 2 && *s; field++) {
		while (*s == ' ')
			s++;
		while (*s && *s != ' ')
			s++;
	}
	while (*s == ' ')
		s++;
	m->name = s;
	return true;
}

static int parse_and_call(char *line, agent_maps_fn *fn, void *arg)
{
	struct agent_maps_line m;
	if (!agent_maps_parse(line, &m))
		return 0;
	fn(&m, arg);
	return 1;
}

int agent_maps_read(char *buf, size_t cap, agent_maps_fn *fn, void *arg)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t have = 0;
	int n = 0;
	bool cut = false;  /* the rest of a line too long for buf: skipped */
	for (;;) {
		ssize_t r = read(fd, buf + have, cap - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = (char *)__builtin_memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = 0;
			if (!cut)
				n += parse_and_call(line, fn, arg);
			cut = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		__builtin_memmove(buf, line, have);  /* overlapping */
		if (have == cap - 1) {
			if (!cut)
				n += parse_and_call(buf, fn, arg);
			cut = true;
			have = 0;
		}
	}
	close(fd);
	return n;
}
