/*
 * buildid.h — the agent's one reader of GNU build-ids (buildid.c), from
 * ELF images as they are mapped in memory (no file is opened), for the
 * module list (modules.c), the heap profile (heapprofile.c) and the
 * debug files of --alloc-fn (fnfind.c). Hook-safe and signal-safe; reads
 * only within the ranges it is given, and only by copy through the kernel
 * (agent_copy_self): another thread may dlclose the image meanwhile, and
 * a read that finds it gone finds no build-id instead of faulting.
 */
#ifndef HEAPTRAIL_AGENT_BUILDID_H
#define HEAPTRAIL_AGENT_BUILDID_H

#include "agent/agent.h"

/* The build-id among the notes in [p, stop) (a PT_NOTE segment): returns
 * its length in bytes and writes up to 20 of them as hex into hex (41
 * bytes, NUL-terminated); 0, with hex "", when there is none or it cannot
 * be read. pinned: the caller holds the loader's lock (inside
 * dl_iterate_phdr), so the image stays mapped and, where the kernel
 * refuses the copy (seccomp), may be read in place. */
uint32_t agent_build_id_in_notes(uintptr_t p, uintptr_t stop, char *hex, bool pinned);

/* The build-id of the ELF image whose first page is mapped at
 * [start, end) (a line of /proc/self/maps, read without the loader's
 * lock), into hex as above; false when there is none of 1 to 20 bytes
 * within the mapping, when the mapping is gone, or when the kernel
 * refuses the copy. */
bool agent_build_id_of_image(uintptr_t start, uintptr_t end, char *hex);

#endif
