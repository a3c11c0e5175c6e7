/*
 * procmaps.h — the agent's one reader of /proc/self/maps (procmaps.c),
 * for the heap profile's build-id lines and the leak scan's regions.
 * Signal-safe and allocation-free: the caller lends the buffer.
 */
#ifndef HEAPTRAIL_AGENT_PROCMAPS_H
#define HEAPTRAIL_AGENT_PROCMAPS_H

#include "agent/agent.h"

/* One line of /proc/self/maps. */
struct agent_maps_line {
	uintptr_t start, end, offset;
	char perms[4];           /* "r-xp" */
	const char *name;        /* the path, "[heap]"..., or "": valid
				    during the callback only */
};

/* Parses one line (without its newline); false when it is not one. */
bool agent_maps_parse(const char *s, struct agent_maps_line *m);

/* Calls fn for each line of /proc/self/maps, in order, reading through
 * buf (cap bytes; a line longer than cap - 1 is cut there). Returns the
 * number of lines, or -1 when the file cannot be opened. */
typedef void agent_maps_fn(const struct agent_maps_line *m, void *arg);
int agent_maps_read(char *buf, size_t cap, agent_maps_fn *fn, void *arg);

#endif
