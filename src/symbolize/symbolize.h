/*
 * symbolize — program counters to source frames, for the CLI only.
 *
 * Built on elfutils' libdwfl: each module recorded by the agent (path, load
 * bias, build-id) is found by its recorded address range, so a dump taken
 * in another process, or of a library that was dlclose'd before exit,
 * still resolves. A module file is opened once per CLI process, whatever
 * the number of symbolizers (processes of a run) that name it, and each
 * of its pcs is resolved once. Separate debug info is found the standard
 * way (build-id under /usr/lib/debug/.build-id, .gnu_debuglink), and names
 * are demangled (C++ and Rust, legacy and v0).
 *
 * Invariants: every string and frame handed out stays valid until
 * sym_free() (strings: until the CLI process ends); not thread-safe.
 * Never prints; problems (a missing file, a build-id that does not match)
 * are remembered per module and can be listed with sym_warnings().
 */
#ifndef HEAPTRAIL_SYMBOLIZE_H
#define HEAPTRAIL_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One loaded object as the agent saw it. */
struct sym_module {
	const char *path;     /* absolute path of the file on disk */
	const char *build_id; /* lower-case hex, or NULL when unknown */
	uint64_t base;        /* load bias (dlpi_addr): file vaddr + base = runtime address */
	uint64_t lo, hi;      /* runtime address range [lo, hi) of its PT_LOAD segments */
};

/* One source-level frame. A pc inside inlined code yields several frames,
 * innermost first; all but the last have inlined = true. */
struct sym_frame {
	uint64_t pc;          /* the address that was looked up */
	const char *function; /* demangled; "??" when unknown */
	const char *file;     /* source file, or NULL when there is no line info */
	int line;             /* 0 when unknown */
	const char *module;   /* path of the module, or NULL when pc is in none */
	bool inlined;
};

struct symbolizer;

/* Creates a session over n modules (copied: the caller keeps ownership of
 * mods). binary_path, when not NULL, is a colon-separated list of
 * directories searched first for a module's file by its base name (like
 * PPROF_BINARY_PATH), for dumps taken on another machine.
 * Returns NULL only when out of memory. */
struct symbolizer *sym_new(const struct sym_module *mods, size_t n,
			   const char *binary_path);

/* Resolves a return address (the lookup is done at pc - 1, inside the call
 * instruction). Sets *frames to an array owned by the symbolizer and
 * returns its length (>= 1: an unknown pc gives one frame whose function
 * is "??" and whose module is set when the pc falls in one). */
size_t sym_resolve(struct symbolizer *s, uint64_t pc,
		   const struct sym_frame **frames);

/* Demangles a C++ or Rust symbol; returns a string owned by the caller
 * (malloc'd), or NULL when name is not mangled. Rust legacy hashes
 * (::h0123456789abcdef) are dropped. */
char *sym_demangle(const char *name);

/* Human-readable notes collected so far (e.g. "no debug info for
 * '/usr/bin/x'"), one per problem module. Owned by the symbolizer. */
size_t sym_warnings(const struct symbolizer *s, const char *const **out);

void sym_free(struct symbolizer *s);

/* The file to open for a module recorded as path: its base name in the
 * first directory of binary_path (colon-separated) that has it, else the
 * whole path under the first that has it (a directory that is a root: a
 * container's), else path itself. Caller frees; NULL on OOM. */
char *sym_locate(const char *path, const char *binary_path);

/* binary_path for the files a process recorded, whose PID is pid: with
 * /proc/PID/root after it while the process runs with a root other than
 * ours (a container: the paths it recorded are under its root), else
 * binary_path itself ("" for NULL). Caller frees; NULL on OOM. */
char *sym_process_path(long pid, const char *binary_path);

/* For a mapping [map_start, map_end) of file at map_offset (a line of
 * /proc/PID/maps): the load bias of the file (runtime address minus file
 * virtual address), and its GNU build-id as lower-case hex in build_id
 * ("" when it has none; build_id may be NULL). Returns 0, -errno when the
 * file cannot be opened, or -ENOEXEC when it is not an ELF file or no
 * segment starts in that mapping (the bias is then unknown, but build_id
 * is still filled when readable). */
int sym_elf_info(const char *file, uint64_t map_start, uint64_t map_end, uint64_t map_offset,
		 uint64_t *bias, char *build_id, size_t cap);

#endif
