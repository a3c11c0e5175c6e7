/*
 * attach.c — the agent in a process that was started without it.
 *
 * `heaptrail attach PID` (src/control/inject.c) makes one thread of the
 * target call dlopen on this library, then heaptrail_attach_start with
 * the options. The constructor sees that it was loaded late (the agent is
 * not in the global scope: agent_attach_loaded_late) and does nothing; the
 * start here reads the options, takes the program's allocator from the
 * global scope as the real one, starts what the constructor would start,
 * and then redirects the allocator: every GOT slot (JUMP_SLOT or
 * GLOB_DAT relocation) of the allocator's entry points in every loaded
 * module but the loader is pointed at the agent's
 * hook of the same name. The frees first, then the allocations, so a
 * block the agent records is never released behind its back. Then the
 * real allocator's entry points themselves jump to the agent's hooks
 * (entries_prepare below, fnhook.c), all at once with every other
 * thread stopped. Modules
 * loaded later are patched at the program's next dlsym (see "modules
 * loaded after the attach" below). The attach adds no thread.
 *
 * The attach also installs the handlers that write the report of a
 * process killed by a fatal signal (sigchecks.c).
 *
 * heaptrail_attach_stop (heaptrail detach) puts back every slot that
 * still holds the agent's value, allocations first (the entry points
 * still reach the agent meanwhile), then the entry points' first bytes
 * (but free's and realloc's while guarded blocks live: "guarded blocks"
 * below), takes those handlers
 * away, stops the time triggers, writes a final dump and leaves the agent mapped but inert: its
 * code may still be on a stack. Attaching again later starts afresh.
 *
 * A process attached from outside its mount namespace (a container) gets
 * its output directory as a descriptor over a socket pair the agent
 * makes (heaptrail_attach_pair), which the start receives ("what a
 * heaptrail killed half-way leaves" below).
 *
 * Calls through an allocator address the program saved before the attach
 * (a function pointer, a data relocation) reach the agent too: the real
 * allocator's entry points jump to the agent's while attached ("the
 * allocator's entry points" below; config entries=0: the slots only).
 * A free of a block the agent never saw passes through.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/attach.h"
#include "agent/pool.h"
#include "agent/quarantine.h"
#include "agent/config.h"
#include "agent/fnhook.h"
#include "agent/guard.h"
#include "agent/counters.h"
#include "agent/heapprofile.h"
#include "agent/hooks.h"
#include "agent/lifecycle.h"
#include "agent/sample.h"
#include "agent/startup.h"
#include "agent/table.h"
#include "agent/triggers.h"
#include "agent/writer.h"
#include "format/vocab.h"
#include "heaptrail.h"
#include "agent/banned.h"

extern char __ehdr_start[] __attribute__((visibility("hidden")));

/* The entry points redirected. Frees first: see the top of the file. */
enum { FAM_FREE, FAM_ALLOC };
static const struct {
	const char *name;
	int fam;
} names[] = {
	{ "free", FAM_FREE },
	{ "_ZdlPv", FAM_FREE }, { "_ZdaPv", FAM_FREE }, { "_ZdlPvm", FAM_FREE },
	{ "_ZdaPvm", FAM_FREE }, { "_ZdlPvRKSt9nothrow_t", FAM_FREE },
	{ "_ZdaPvRKSt9nothrow_t", FAM_FREE }, { "_ZdlPvSt11align_val_t", FAM_FREE },
	{ "_ZdaPvSt11align_val_t", FAM_FREE }, { "_ZdlPvmSt11align_val_t", FAM_FREE },
	{ "_ZdaPvmSt11align_val_t", FAM_FREE },
	{ "_ZdlPvSt11align_val_tRKSt9nothrow_t", FAM_FREE },
	{ "_ZdaPvSt11align_val_tRKSt9nothrow_t", FAM_FREE },
	{ "malloc", FAM_ALLOC }, { "calloc", FAM_ALLOC }, { "realloc", FAM_ALLOC },
	{ "reallocarray", FAM_ALLOC }, { "posix_memalign", FAM_ALLOC },
	{ "aligned_alloc", FAM_ALLOC }, { "memalign", FAM_ALLOC }, { "valloc", FAM_ALLOC },
	{ "pvalloc", FAM_ALLOC }, { "malloc_usable_size", FAM_ALLOC },
	{ "_Znwm", FAM_ALLOC }, { "_Znam", FAM_ALLOC }, { "_ZnwmRKSt9nothrow_t", FAM_ALLOC },
	{ "_ZnamRKSt9nothrow_t", FAM_ALLOC }, { "_ZnwmSt11align_val_t", FAM_ALLOC },
	{ "_ZnamSt11align_val_t", FAM_ALLOC },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", FAM_ALLOC },
	{ "_ZnamSt11align_val_tRKSt9nothrow_t", FAM_ALLOC },
	{ "dlclose", FAM_ALLOC }, { "dlsym", FAM_ALLOC },
};
#define NNAMES (sizeof names / sizeof names[0])
static uintptr_t mine[NNAMES];   /* the agent's definition of each */

/* A patched slot: where, what it held, which module (its load bias and
 * program headers: a module unloaded since is not written to). */
struct slot {
	uintptr_t *at;
	uintptr_t orig;
	uintptr_t mod_addr;
	const void *mod_phdr;
	uint16_t name;
};
#define MAX_SLOTS 32768
#define MAX_MODS 4096
static struct slot *slots;           /* MAX_SLOTS, mapped at the first attach */
static size_t nslots;
static struct { uintptr_t addr; const void *phdr; } *mods;  /* modules patched */
static size_t nmods;
static int patch_lock;               /* the start, the program's dlsym, the stop */
/* The start and the stop, one at a time: a heaptrail killed during an
 * attach leaves its call to run to its end on the borrowed thread, while
 * the next heaptrail (a detach) calls in on another. */
static int entry_lock;
/* The thread that holds it. heaptrail borrows a thread blocked in a
 * wait, and a thread running the start may wait (the stop of every
 * thread while the entry points' jumps are written): a detach that
 * borrows that very thread must not wait for the call it interrupted,
 * which cannot go on until it returns. */
static atomic_int entry_owner;


static atomic_bool watching;  /* patching modules loaded later */
static unsigned long long seen_adds;  /* the loader's count of loads, when last patched */
static unsigned long long loads_so_far(void);
static struct timespec attached_at;
static uint64_t patched_count;
static uint64_t untracked_at_attach;  /* untracked_frees when it started */
/* The output directory, held open while attached: `heaptrail leaks PID`
 * finds it through /proc/PID/fd (an attached process has no
 * HEAPTRAIL_OUTPUT in its environment). */
static int dir_fd = -1;

/* A process attached from outside its mount namespace (a container) is
 * handed the output directory as a descriptor (src/control/inject.c,
 * "containers"), and told output=/proc/self/fd/N: the files go through
 * that link. The descriptor is the one held open while attached, closed
 * at the detach; the output then names no directory at all, so that
 * nothing is written through a number the program may reuse. Returns N,
 * or -1 when output is not such a link. */
#define GIVEN_DIR "/proc/self/fd/"
#define GIVEN_DIR_CLOSED "/proc/self/fd/-1"
/* output=GIVEN_DIR_PENDING: the directory comes over the pending pair */
#define GIVEN_DIR_PENDING "/proc/self/fd/pending"

static int given_dir_fd(const char *output)
{
	if (!agent_strstarts(output, GIVEN_DIR))
		return -1;
	const char *p = output + sizeof GIVEN_DIR - 1;
	int n = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9' && n < 1 << 20; p++)
		n = n * 10 + (*p - '0');
	return *p ? -1 : n;
}

static void spin_lock(int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* Takes entry_lock; false (nothing taken) when this thread holds it
 * already, in a call that the CLI's call interrupted. */
static bool entry_enter(void)
{
	int me = (int)syscall(SYS_gettid);
	if (atomic_load(&entry_owner) == me)
		return false;
	spin_lock(&entry_lock);
	atomic_store(&entry_owner, me);
	return true;
}

static void entry_leave(void)
{
	atomic_store(&entry_owner, 0);
	spin_unlock(&entry_lock);
}

static void lock(void)
{
	spin_lock(&patch_lock);
}

static void unlock(void)
{
	spin_unlock(&patch_lock);
}

/* A d_ptr of a dynamic entry: glibc relocates most in place, but not in
 * a read-only dynamic section (the vdso's): the unrelocated ones are
 * below the load bias. */
static uintptr_t dyn_ptr(uintptr_t bias, uintptr_t v)
{
	return bias && v < bias ? v + bias : v;
}

struct dyn {
	const ElfW(Sym) *symtab;
	const char *strtab;
	const ElfW(Rela) *rela, *jmprel;
	size_t relasz, jmprelsz, nsyms;
	uintptr_t relro_lo, relro_hi;
};

static bool read_dyn(const struct dl_phdr_info *info, struct dyn *d)
{
	agent_memset(d, 0, sizeof *d);
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			d->relro_lo = info->dlpi_addr + ph->p_vaddr;
			d->relro_hi = d->relro_lo + ph->p_memsz;
		}
	}
	if (!dyn)
		return false;
	uintptr_t b = info->dlpi_addr;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: d->symtab = (const ElfW(Sym) *)dyn_ptr(b, dyn->d_un.d_ptr); break;
		case DT_STRTAB: d->strtab = (const char *)dyn_ptr(b, dyn->d_un.d_ptr); break;
		case DT_RELA: d->rela = (const ElfW(Rela) *)dyn_ptr(b, dyn->d_un.d_ptr); break;
		case DT_RELASZ: d->relasz = dyn->d_un.d_val; break;
		case DT_JMPREL: d->jmprel = (const ElfW(Rela) *)dyn_ptr(b, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: d->jmprelsz = dyn->d_un.d_val; break;
		default: break;
		}
	}
	/* GNU ld and lld put .dynstr right after .dynsym */
	if (d->symtab && d->strtab && (const void *)d->strtab > (const void *)d->symtab)
		d->nsyms = (size_t)((const char *)d->strtab - (const char *)d->symtab) /
			   sizeof(ElfW(Sym));
	return d->symtab && d->strtab;
}

static int name_index(const char *s)
{
	for (size_t i = 0; i < NNAMES; i++)
		if (agent_streq(s, names[i].name))
			return (int)i;
	return -1;
}

static bool is_self(const struct dl_phdr_info *info)
{
	uintptr_t me = (uintptr_t)__ehdr_start;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && me >= a && me < a + ph->p_memsz)
			return true;
	}
	return false;
}

/* The loader (its own free is not the program's: heaptrack learnt that
 * patching it crashes programs) and the vdso. The agent is patched too:
 * loaded with RTLD_LOCAL, its own calls by name (operator delete calls
 * free) would bind to libc's, where preloaded they bind to its own. */
static bool skipped(const struct dl_phdr_info *info)
{
	if (info->dlpi_addr && info->dlpi_addr == (uintptr_t)getauxval(AT_BASE))
		return true;
	return info->dlpi_name && agent_strstarts(info->dlpi_name, "linux-vdso");
}

/* The agent's own definitions, from its dynamic symbol table. */
static int find_mine(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct dyn d;
	if (!is_self(info) || !read_dyn(info, &d))
		return 0;
	for (size_t i = 1; i < d.nsyms; i++) {
		const ElfW(Sym) *s = &d.symtab[i];
		if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC)
			continue;
		int k = name_index(d.strtab + s->st_name);
		if (k >= 0)
			mine[k] = info->dlpi_addr + s->st_value;
	}
	*(bool *)arg = true;
	return 1;
}

/* The first definition of a function in load order (the global scope's
 * order for the modules loaded at start), the agent, the loader and the
 * vdso left out. Not dlsym(RTLD_DEFAULT): in an executable that takes an
 * allocator's address (a non-PIE python3 does) that answers the
 * executable's PLT entry, the canonical address, which jumps through the
 * very slot the attach points at the agent. */
struct def_arg {
	const char *name;
	uintptr_t found;
	uint64_t size;
};

static int find_def(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct def_arg *a = arg;
	struct dyn d;
	if (skipped(info) || is_self(info) || !read_dyn(info, &d))
		return 0;
	for (size_t i = 1; i < d.nsyms; i++) {
		const ElfW(Sym) *s = &d.symtab[i];
		if (s->st_shndx == SHN_UNDEF || !s->st_value ||
		    ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
		    ELF64_ST_BIND(s->st_info) == STB_LOCAL ||
		    !agent_streq(d.strtab + s->st_name, a->name))
			continue;
		a->found = info->dlpi_addr + s->st_value;
		a->size = s->st_size;
		return 1;
	}
	return 0;
}

void *agent_attach_definition(const char *name)
{
	struct def_arg a = { name, 0, 0 };
	dl_iterate_phdr(find_def, &a);
	return (void *)a.found;
}

/* ---------- the allocator's entry points ----------
 * Besides the slots, the real allocator's own functions jump to the
 * agent's (fnentries.c: the allocator's own entry points), so that a call
 * through a pointer the program took before the attach (a table of
 * hooks: libffi, zlib, Lua, libxml2) is seen too. The agent then calls
 * the allocator through trampolines (agent_real), which run each
 * function as it was; a call through a slot reaches the agent once.
 * operator new and delete need none: libstdc++'s call malloc and free
 * through its own slots. malloc_usable_size and reallocarray neither
 * (glibc's reallocarray calls realloc through libc's slot). */
static const struct {
	const char *name;
	size_t real;         /* offsetof(struct agent_real, ...) */
	bool needed, plain;
} entry_names[] = {
	{ "free", offsetof(struct agent_real, free), true, true },
	{ "realloc", offsetof(struct agent_real, realloc), true, false },
	{ "malloc", offsetof(struct agent_real, malloc), false, true },
	{ "calloc", offsetof(struct agent_real, calloc), false, true },
	{ "memalign", offsetof(struct agent_real, memalign), false, false },
	{ "aligned_alloc", offsetof(struct agent_real, aligned_alloc), false, false },
	{ "posix_memalign", offsetof(struct agent_real, posix_memalign), false, false },
	{ "valloc", offsetof(struct agent_real, valloc), false, false },
	{ "pvalloc", offsetof(struct agent_real, pvalloc), false, false },
};
#define NENTRIES (sizeof entry_names / sizeof entry_names[0])

/* Makes the entry points' trampolines and points agent_real at them,
 * before agent_fnhook_install writes the jumps: the agent's own calls
 * then never reach a jump. A trampoline runs its function as it was,
 * jump or none, for good (its page stays after a detach). */
static void entries_prepare(void)
{
	struct agent_entry e[NENTRIES];
	int n = 0;
	for (size_t i = 0; i < NENTRIES; i++) {
		struct def_arg a = { entry_names[i].name, 0, 0 };
		int k = name_index(entry_names[i].name);
		dl_iterate_phdr(find_def, &a);
		uintptr_t want = *(const uintptr_t *)((const char *)&agent_defs + entry_names[i].real);
		if (!a.found || a.found != want || k < 0 || !mine[k]) {
			if (entry_names[i].needed) {
				agent_log("the allocator's entry points are left alone: '",
					  entry_names[i].name, "' is not the one the agent forwards to");
				return;
			}
			continue;
		}
		e[n++] = (struct agent_entry){ entry_names[i].name, a.found, a.size, mine[k],
					       entry_names[i].needed, entry_names[i].plain, 0 };
	}
	if (!agent_fnhook_entries(e, n))
		return;
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < NENTRIES; j++)
			if (e[i].orig && agent_streq(e[i].name, entry_names[j].name))
				__atomic_store_n((uintptr_t *)((char *)&agent_real + entry_names[j].real),
						 e[i].orig, __ATOMIC_RELEASE);
}

/* Writes v into a slot, making a RELRO page writable for the moment. */
static bool slot_write(uintptr_t *at, uintptr_t v, uintptr_t relro_lo, uintptr_t relro_hi)
{
	uintptr_t a = (uintptr_t)at;
	bool ro = a >= relro_lo && a < relro_hi;
	uintptr_t page = a & ~(uintptr_t)4095;
	if (ro && syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_WRITE))
		return false;
	__atomic_store_n(at, v, __ATOMIC_RELEASE);
	if (ro)
		syscall(SYS_mprotect, page, 4096, PROT_READ);
	return true;
}

struct patch_arg {
	int fam;
	bool all;          /* pass over modules patched before too */
};

static bool mod_known(const struct dl_phdr_info *info)
{
	for (size_t i = 0; i < nmods; i++)
		if (mods[i].addr == info->dlpi_addr && mods[i].phdr == info->dlpi_phdr)
			return true;
	return false;
}

static void patch_rels(const struct dl_phdr_info *info, const struct dyn *d,
		       const ElfW(Rela) *r, size_t sz, int fam)
{
	for (size_t i = 0; r && i < sz / sizeof *r; i++) {
		unsigned long type = ELF64_R_TYPE(r[i].r_info), sym = ELF64_R_SYM(r[i].r_info);
		if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !sym)
			continue;
		if (d->nsyms && sym >= d->nsyms)
			continue;
		int k = name_index(d->strtab + d->symtab[sym].st_name);
		if (k < 0 || names[k].fam != fam || !mine[k] || nslots >= MAX_SLOTS)
			continue;
		uintptr_t *at = (uintptr_t *)(info->dlpi_addr + r[i].r_offset);
		uintptr_t cur = __atomic_load_n(at, __ATOMIC_ACQUIRE);
		if (cur == mine[k])
			continue;
		if (!slot_write(at, mine[k], d->relro_lo, d->relro_hi))
			continue;
		slots[nslots++] = (struct slot){ at, cur, info->dlpi_addr, info->dlpi_phdr,
						 (uint16_t)k };
		patched_count++;
	}
}

static int patch_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	const struct patch_arg *pa = arg;
	struct dyn d;
	if (skipped(info) || (!pa->all && mod_known(info)) || !read_dyn(info, &d))
		return 0;
	patch_rels(info, &d, d.jmprel, d.jmprelsz, pa->fam);
	patch_rels(info, &d, d.rela, d.relasz, pa->fam);
	return 0;
}

static int note_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (!skipped(info) && !mod_known(info) && nmods < MAX_MODS) {
		mods[nmods].addr = info->dlpi_addr;
		mods[nmods].phdr = info->dlpi_phdr;
		nmods++;
	}
	return 0;
}

/* Patches the modules not patched yet (all of them: every = true).
 * Nothing after the detach has begun (watching false). */
static void patch_new(bool every)
{
	lock();
	if (!every && !atomic_load(&watching)) {
		unlock();
		return;
	}
	seen_adds = loads_so_far();  /* before: a load meanwhile is seen next time */
	struct patch_arg a = { FAM_FREE, every };
	dl_iterate_phdr(patch_module, &a);
	a.fam = FAM_ALLOC;
	dl_iterate_phdr(patch_module, &a);
	dl_iterate_phdr(note_module, NULL);
	unlock();
}

struct restore_arg {
	int fam;
};

static int restore_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	int fam = ((struct restore_arg *)arg)->fam;
	struct dyn d;
	if (skipped(info) || !read_dyn(info, &d))
		return 0;
	for (size_t i = 0; i < nslots; i++) {
		struct slot *s = &slots[i];
		if (!s->at || s->mod_addr != info->dlpi_addr || s->mod_phdr != info->dlpi_phdr ||
		    names[s->name].fam != fam)
			continue;
		if (__atomic_load_n(s->at, __ATOMIC_ACQUIRE) == mine[s->name])
			slot_write(s->at, s->orig, d.relro_lo, d.relro_hi);
		s->at = NULL;
	}
	return 0;
}

/* Puts every slot back that still holds the agent's value, in a module
 * still loaded: allocations first, then the frees. */
static void restore_all(void)
{
	lock();
	struct restore_arg a = { FAM_ALLOC };
	dl_iterate_phdr(restore_module, &a);
	a.fam = FAM_FREE;
	dl_iterate_phdr(restore_module, &a);
	nslots = 0;
	nmods = 0;
	unlock();
}

/* ---------- modules loaded after the attach ----------
 *
 * No thread watches for them: a second thread would switch glibc's
 * allocator to its multi-threaded paths (arena locks, atomic fastbins)
 * for the rest of the process's life, a cost the program would keep
 * after the detach. And no hook on dlopen: the loader reads dlopen's
 * return address to find the caller's RUNPATH and namespace. Programs
 * reach the code of a module they loaded through dlsym, so the program's
 * dlsym (hooks.c calls us first) patches the modules loaded since the
 * last look; the loader's count of loads (dlpi_adds) tells, from the
 * first module alone, whether there is any. The program's own thread
 * calls dlsym where it may take the loader's locks anyway. */
static int first_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

static unsigned long long loads_so_far(void)
{
	unsigned long long adds = 0;
	dl_iterate_phdr(first_adds, &adds);
	return adds;
}

static void patch_loaded_since(void)
{
	if (!atomic_load(&watching) || loads_so_far() == seen_adds)
		return;
	patch_new(false);
}

/* ---------- the record of the attach ---------- */

static void put_time(struct agent_writer *w, const struct timespec *t)
{
	char buf[32], *e = agent_put_dec(buf, (uint64_t)t->tv_sec);
	*e++ = '.';
	uint64_t ns = (uint64_t)t->tv_nsec;
	for (int i = 8; i >= 0; i--, ns /= 10)
		e[i] = (char)('0' + ns % 10);
	e[9] = 0;
	agent_put(w, buf);
}

/* What the agent had to say during the last attach or detach (refused
 * functions, ignored options): kept out of the program's stderr and put
 * into the record as "note" lines, which the CLI prints. */
static char notes[4096];

/* The notes into w, one "note TEXT" line each. */
static void put_notes(struct agent_writer *w)
{
	for (const char *s = notes; *s;) {
		const char *e = s;
		while (*e && *e != '\n')
			e++;
		char line[1024];
		size_t n = (size_t)(e - s) < sizeof line ? (size_t)(e - s) : sizeof line - 1;
		agent_memcpy(line, s, n);
		line[n] = 0;
		agent_put(w, "note ");
		agent_put(w, line);
		agent_put(w, "\n");
		s = *e ? e + 1 : e;
	}
}

/* Ends the capture; when the record did not take the notes, they go to
 * stderr after all (said somewhere rather than lost). */
static void notes_end(bool recorded)
{
	agent_log_capture(NULL, 0);
	if (recorded)
		return;
	for (char *s = notes; *s;) {
		char *e = s;
		while (*e && *e != '\n')
			e++;
		char c = *e;
		*e = 0;
		agent_log(s, NULL, NULL);
		*e = c;
		s = c ? e + 1 : e;
	}
}

/* heaptrail.PID.attach in the output directory: when the recording
 * started (and ended), so readers can say "since attach", and the notes.
 * Returns whether it was written. */
static bool write_record(bool detached)
{
	struct agent_writer w;
	char name[64], *e = name;
	agent_memcpy(e, "heaptrail.", 10);
	e = agent_put_dec(e + 10, (uint64_t)agent_shown_pid());
	agent_memcpy(e, ".attach", 8);
	if (agent_writer_open(&w, agent_config.output, name))
		return false;
	agent_put(&w, "heaptrail attach 1\n");
	if (agent_config.run_id[0]) {
		agent_put(&w, "run ");
		agent_put(&w, agent_config.run_id);
		agent_put(&w, "\n");
	}
	agent_put(&w, "pid ");
	agent_put_u64(&w, (uint64_t)agent_shown_pid());
	agent_put(&w, "\nsample ");
	agent_put_u64(&w, agent_sampling.period);
	agent_put(&w, "\nattached ");
	put_time(&w, &attached_at);
	agent_put(&w, "\nslots ");
	agent_put_u64(&w, patched_count);
	agent_put(&w, "\n");
	if (detached) {
		struct agent_counts c;
		agent_counters_sum(&c);
		if (agent_sampling.period <= 1) {
			agent_put(&w, "freed_before_attach ");
			agent_put_u64(&w, c.untracked_frees - untracked_at_attach);
			agent_put(&w, "\n");
		}
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		agent_put(&w, "detached ");
		put_time(&w, &now);
		agent_put(&w, "\n");
	}
	put_notes(&w);
	return agent_writer_commit(&w) == 0;
}

/* ---------- what a heaptrail killed half-way leaves (containers) ----------
 *
 * An attach from outside the process's mount namespace (src/control/inject.c,
 * "containers") makes descriptors in the process across several calls:
 * the memory file the agent is loaded from, and a socket pair the output
 * directory comes over. A heaptrail killed between two calls leaves them
 * open; the agent closes them at the next start or stop, whoever calls:
 * the pair is the agent's own (heaptrail_attach_pair keeps it pending
 * until a start takes the directory from it), and the memory files are
 * known by their name. */
static int pending[2] = { -1, -1 };
static uint64_t pending_ino[2];  /* a program may close them and reuse the numbers */

static uint64_t socket_ino(int fd)
{
	struct stat st;
	return fd >= 0 && !fstat(fd, &st) && S_ISSOCK(st.st_mode) ? (uint64_t)st.st_ino : 0;
}

static void close_pending(void)
{
	for (int i = 0; i < 2; i++)
		if (pending[i] >= 0 && pending_ino[i] && socket_ino(pending[i]) == pending_ino[i])
			syscall(SYS_close, pending[i]);
	pending[0] = pending[1] = -1;
}

/* Closes every descriptor of a memory file an attach made for the agent
 * ("/memfd:heaptrail-TAG/libheaptrail.so"): the mapping holds the agent. */
static void close_stale_memfds(void)
{
	static const char head[] = "/memfd:heaptrail-", tail[] = "/libheaptrail.so (deleted)";
	char buf[2048], path[48], link[128];
	long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		long r = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (r <= 0)
			break;
		for (long off = 0; off < r;) {
			struct dirent64_raw { uint64_t ino; int64_t off; unsigned short reclen;
					      unsigned char type; char name[]; } *d = (void *)(buf + off);
			off += d->reclen;
			if (d->name[0] < '0' || d->name[0] > '9')
				continue;
			long n = 0;
			for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
				n = n * 10 + (*c - '0');
			if (n == fd)
				continue;
			agent_strlcpy(path, GIVEN_DIR, sizeof path);
			agent_put_dec(path + sizeof GIVEN_DIR - 1, (uint64_t)n)[0] = 0;
			long len = syscall(SYS_readlink, path, link, sizeof link - 1);
			if (len <= 0)
				continue;
			link[len] = 0;
			size_t tl = sizeof tail - 1;
			if (agent_strstarts(link, head) && (size_t)len > tl &&
			    agent_streq(link + len - tl, tail))
				syscall(SYS_close, n);
		}
	}
	syscall(SYS_close, fd);
}

/* Receives the directory sent over the pending pair (MSG_DONTWAIT: it
 * was sent before the call) and closes the pair. Its name for us,
 * "/proc/self/fd/D", into out. Returns D, or -EBADMSG when none came
 * (nothing sent, recvmsg refused). */
static int take_dir(char *out, size_t cap)
{
	char one, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &one, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			      .msg_controllen = sizeof ctl };
	agent_memset(ctl, 0, sizeof ctl);
	long r = pending[0] < 0 ? -1 : syscall(SYS_recvmsg, pending[0], &msg,
						 MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int d = -1;
	struct cmsghdr *c = r == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		agent_memcpy(&d, CMSG_DATA(c), sizeof d);
	close_pending();
	if (d < 0)
		return -EBADMSG;
	agent_strlcpy(out, GIVEN_DIR, cap);
	agent_put_dec(out + sizeof GIVEN_DIR - 1, (uint64_t)d)[0] = 0;
	return d;
}

/* Makes the pending socket pair (closing one a heaptrail killed before
 * its start left) and stores its ends at sv. Returns 0 or -errno. */
AGENT_API int heaptrail_attach_pair(int *sv)
{
	if (!entry_enter())
		return -EDEADLK;
	close_pending();
	int r = syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pending) ? -errno : 0;
	if (r)
		pending[0] = pending[1] = -1;
	else {
		pending_ino[0] = socket_ino(pending[0]);
		pending_ino[1] = socket_ino(pending[1]);
		sv[0] = pending[0];
		sv[1] = pending[1];
	}
	entry_leave();
	return r;
}

/* ---------- entry points called by heaptrail's injected calls ---------- */

/* Every call heaptrail makes into the agent goes through here: the call
 * returns into an rt_sigreturn that puts back all the thread's registers
 * (src/control/remote.c), so the result is stored at *result, in the block
 * heaptrail wrote below the thread's stack pointer. */
AGENT_API void heaptrail_attach_call(long (*fn)(long, long, long, long), long a0, long a1,
				     long a2, long a3, volatile long *result)
{
	*result = fn(a0, a1, a2, a3);
}

/* Starts recording in a process the agent was just loaded into (or
 * loaded and detached from before). opts: HEAPTRAIL_OPTIONS syntax;
 * output: the directory for the files; pc and sp: where the thread
 * running this call was when heaptrail borrowed it (0: unknown). Returns 0, -EALREADY when already
 * attached, -EPERM when the agent was preloaded, -ENOMEM, -ENOENT when
 * the agent's own entry points cannot be found, -EDEADLK when the thread
 * is inside an earlier start or stop (see entry_owner): borrow another,
 * or try again. */
static int attach_start(const char *opts, const char *output, uintptr_t pc, uintptr_t sp);

AGENT_API int heaptrail_attach_start(const char *opts, const char *output, uintptr_t pc,
				     uintptr_t sp)
{
	char given[48];
	int d = -1, r = 0;
	if (!entry_enter())
		return -EDEADLK;
	close_stale_memfds();
	if (agent_streq(output, GIVEN_DIR_PENDING)) {
		r = d = take_dir(given, sizeof given);
		output = given;
	}
	if (r >= 0) {
		r = attach_start(opts, output, pc, sp);
		if (r && d >= 0)  /* not started: the directory is nobody's */
			syscall(SYS_close, d);
	}
	entry_leave();
	return r;
}

/* ---------- guarded blocks (guard.h) ----------
 * A guarded block is none of the allocator's: its free must reach the
 * agent, at any time, through any pointer to free the program holds. So
 * the guard starts only once the allocator's own free and realloc jump
 * to the agent; and a detach that leaves guarded blocks live keeps those
 * two jumps, pointed at functions that pass every other block straight
 * to the allocator (hooks.h), while the rest goes back. Every
 * guarded page is opened at the detach, so nothing faults after it. */
static void guard_start(void)
{
	if (!agent_config.guard)
		return;
	if (!agent_fnhook_frees_on()) {
		agent_log("guard: off: the allocator's free and realloc could not be hooked, and a "
			  "guarded block must never reach the allocator", NULL, NULL);
		return;
	}
	if (agent_guard_len)
		agent_guard_resume();  /* attached again */
	else
		agent_guard_init();
}

/* At the detach: whether free and realloc must stay hooked, said in a
 * note of the record; they then jump to the agent's functions for after
 * a detach, which record nothing (an attach again points them back). */
static bool guard_stop(void)
{
	int live = agent_guard_retire();
	if (!live)
		return false;
	agent_fnhook_retarget("free", (uintptr_t)agent_free_detached);
	agent_fnhook_retarget("realloc", (uintptr_t)agent_realloc_detached);
	char buf[24];
	agent_put_dec(buf, (uint64_t)live)[0] = 0;
	agent_log("guard: guarded blocks still live at the detach: ", buf,
		  "; free and realloc stay hooked (passing every other block straight "
		  "to the allocator) so that they can be freed");
	return true;
}

static int attach_start(const char *opts, const char *output, uintptr_t pc, uintptr_t sp)
{
	if (!agent_attach_loaded_late())
		return -EPERM;
	int expect = AGENT_NEVER_ATTACHED;
	if (atomic_load(&agent_attach_state) == AGENT_ATTACHED)
		return -EALREADY;
	int busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	int ret = 0;
	bool recorded = false;
	agent_log_capture(notes, sizeof notes);
	if (!slots) {
		slots = agent_mmap(MAX_SLOTS * sizeof *slots);
		mods = agent_mmap(MAX_MODS * sizeof *mods);
		if (!slots || !mods) {
			ret = -ENOMEM;
			goto out;
		}
		bool found = false;
		dl_iterate_phdr(find_mine, &found);
		if (!found || !mine[0]) {
			ret = -ENOENT;
			goto out;
		}
	}
	clock_gettime(CLOCK_REALTIME, &attached_at);
	/* kept by a detach for its guarded blocks: the agent's again before
	 * anything is recorded, so no free of a recorded block passes by */
	agent_fnhook_retarget("free", 0);
	agent_fnhook_retarget("realloc", 0);
	if (atomic_compare_exchange_strong(&agent_attach_state, &expect, AGENT_ATTACHED)) {
		/* the first attach: what the constructor does */
		agent_resolve_global(agent_attach_definition);
		agent_config_load_from(opts, output);
		agent_start_attached();
	} else {
		/* attached again after a detach: start afresh */
		agent_config_load_from(opts, output);
		/* a no-op but for auto when it is the same */
		agent_resample(agent_config.sample, agent_config.sample_auto);
		agent_quarantine_keep();
		agent_tables_lock_all();
		agent_live_clear_locked();
		agent_pool_clear_locked();
		agent_tables_unlock_all();
		agent_reset_cumulative();
		agent_sampling_start();
		agent_set_recording(agent_config.active);
		agent_triggers_start();
		atomic_store(&agent_attach_state, AGENT_ATTACHED);
	}
	struct agent_counts c;
	agent_counters_sum(&c);
	untracked_at_attach = c.untracked_frees;
	atomic_store(&watching, true);
	patch_new(true);
	agent_hooks_on_dlsym(patch_loaded_since);
	if (agent_config.entries)
		entries_prepare();
	agent_fnhook_install(pc, sp);
	guard_start();
	/* after the guard's: SIGSEGV is then the guard's (lifecycle.c) */
	agent_fatal_handlers(true);
	recorded = write_record(false);
	if (dir_fd < 0)
		dir_fd = given_dir_fd(agent_config.output);
	if (dir_fd < 0)
		dir_fd = (int)syscall(SYS_openat, AT_FDCWD,
				      agent_config.output[0] ? agent_config.output : ".",
				      O_PATH | O_DIRECTORY | O_CLOEXEC);
out:
	notes_end(recorded);
	agent_tls.busy = busy;
	return ret;
}

/* Stops recording: puts back the slots, stops the agent's thread and
 * writes the final dump (kind "final") and the attach record. Returns 0,
 * -ENOENT when not attached, -EDEADLK as heaptrail_attach_start. */
static int attach_stop(void);

AGENT_API int heaptrail_attach_stop(void)
{
	if (!entry_enter())
		return -EDEADLK;
	close_pending();
	close_stale_memfds();
	int r = attach_stop();
	entry_leave();
	return r;
}

static void free_real(void *p)
{
	agent_real.free(p);
}

static int attach_stop(void)
{
	if (atomic_load(&agent_attach_state) != AGENT_ATTACHED)
		return -ENOENT;
	int busy = agent_tls.busy;
	agent_tls.busy = AGENT_BUSY_AGENT;
	agent_log_capture(notes, sizeof notes);
	agent_hooks_on_dlsym(NULL);
	atomic_store(&watching, false);  /* a dlsym under way patches no more */
	restore_all();
	agent_fnhook_remove(guard_stop());
	/* the blocks kept since their free go to the allocator now: no free
	 * reaches the agent any more to push them out */
	agent_quarantine_drain(free_real);
	agent_fatal_handlers(false);
	agent_triggers_stop();
	agent_tls.busy = 0;
	agent_dump(NULL, "final");
	agent_tls.busy = AGENT_BUSY_AGENT;
	agent_set_recording(false);
	atomic_store(&agent_attach_state, AGENT_DETACHED);
	notes_end(write_record(true));
	if (dir_fd >= 0)
		syscall(SYS_close, dir_fd);
	if (given_dir_fd(agent_config.output) >= 0)  /* closed now: nothing goes there */
		agent_strlcpy(agent_config.output, GIVEN_DIR_CLOSED, sizeof agent_config.output);
	dir_fd = -1;
	agent_tls.busy = busy;
	return 0;
}
