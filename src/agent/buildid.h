/*
 * buildid.h — the agent's one reader of GNU build-ids (buildid.c), from
 * ELF images as they are mapped in memory (no file is opened), for the
 * module list (modules.c) and the heap profile (heapprofile.c).
 * Hook-safe and signal-safe; reads only within the ranges it is given.
 */
#ifndef HEAPTRAIL_AGENT_BUILDID_H
#define HEAPTRAIL_AGENT_BUILDID_H

#include "agent/agent.h"

/* The build-id among the notes in [p, stop) (a PT_NOTE segment): returns
 * its length in bytes and writes up to 20 of them as hex into hex (41
 * bytes, NUL-terminated); 0, with hex "", when there is none. */
uint32_t agent_build_id_in_notes(uintptr_t p, uintptr_t stop, char *hex);

/* The build-id of the ELF image whose first page is mapped at
 * [start, end), into hex as above; false when there is none of 1 to 20
 * bytes within the mapping. */
bool agent_build_id_of_image(uintptr_t start, uintptr_t end, char *hex);

#endif
