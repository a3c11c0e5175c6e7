/*
 * modules.c — the list of loaded objects written with every report: path,
 * load bias, address range and GNU build-id, read from the program headers
 * in memory (no file is opened). Objects seen before a dlclose are kept in
 * a registry so a report at exit still names a library that is gone.
 */
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include "agent/agent.h"
#include "format/vocab.h"
#include "agent/modules.h"
#include "agent/writer.h"
#include "agent/buildid.h"
#include "agent/banned.h"

#define MAX_MODULES 4096
#define NAMES_SIZE (1024 * 1024)

struct module {
	uintptr_t base, lo, hi;
	uint32_t name;          /* offset into names */
	char build_id[41];      /* 20 bytes as hex at most kept */
	bool live;              /* seen by the current walk */
};

static struct module *registry;
static char *names;
static size_t nmodules, names_used;
static agent_lock_t modules_lock;

static void exe_path(char *buf, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
	buf[n > 0 ? n : 0] = 0;
}

/* Fills lo/hi and the build-id from the program headers. */
static void describe(struct dl_phdr_info *info, struct module *m)
{
	m->base = info->dlpi_addr;
	m->lo = UINTPTR_MAX;
	m->hi = 0;
	m->build_id[0] = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			uintptr_t a = info->dlpi_addr + ph->p_vaddr;
			if (a < m->lo)
				m->lo = a;
			if (a + ph->p_memsz > m->hi)
				m->hi = a + ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && !m->build_id[0]) {
			uintptr_t p = info->dlpi_addr + ph->p_vaddr;
			agent_build_id_in_notes(p, p + ph->p_memsz, m->build_id, true);
		}
	}
	if (m->lo == UINTPTR_MAX)
		m->lo = 0;
}

static const char *module_name(struct dl_phdr_info *info, char *buf, size_t cap)
{
	if (info->dlpi_name && info->dlpi_name[0])
		return info->dlpi_name;
	exe_path(buf, cap);
	return buf;
}

static int remember(struct dl_phdr_info *info, size_t size, void *arg)
{
	char buf[4096];
	struct module m;
	const char *name = module_name(info, buf, sizeof buf);
	describe(info, &m);
	for (size_t i = 0; i < nmodules; i++)
		if (registry[i].base == m.base && registry[i].lo == m.lo &&
		    agent_streq(names + registry[i].name, name))
			return 0;
	size_t len = agent_strlen(name) + 1;
	if (nmodules == MAX_MODULES || names_used + len > NAMES_SIZE)
		return 0;
	agent_memcpy(names + names_used, name, len);
	m.name = (uint32_t)names_used;
	names_used += len;
	registry[nmodules++] = m;
	return 0;
}

void agent_modules_snapshot(void)
{
	agent_lock(&modules_lock);
	if (!registry) {
		registry = agent_mmap(MAX_MODULES * sizeof *registry);
		names = agent_mmap(NAMES_SIZE);
	}
	if (registry && names)
		dl_iterate_phdr(remember, NULL);
	agent_unlock(&modules_lock);
}

static void write_module(struct agent_writer *w, const struct module *m,
			 const char *name, bool loaded)
{
	agent_put(w, FMT_LEAKS_MODULE " ");
	agent_put_hex(w, m->base);
	agent_put(w, " ");
	agent_put_hex(w, m->lo);
	agent_put(w, " ");
	agent_put_hex(w, m->hi);
	agent_put(w, " ");
	agent_put(w, m->build_id[0] ? m->build_id : "-");
	agent_put(w, loaded ? " " FMT_LEAKS_LOADED " " : " " FMT_LEAKS_UNLOADED " ");
	agent_put_escaped(w, name[0] ? name : "?");
	agent_put(w, "\n");
}

static int write_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	char buf[4096];
	struct module m;
	const char *name = module_name(info, buf, sizeof buf);
	describe(info, &m);
	for (size_t i = 0; i < nmodules; i++)
		if (registry[i].base == m.base && registry[i].lo == m.lo &&
		    agent_streq(names + registry[i].name, name))
			registry[i].live = true;
	write_module(arg, &m, name, true);
	return 0;
}

/* In a child forked from a process with other threads, dl_iterate_phdr
 * may block for ever: glibc does not reset its lock in the child, and
 * another thread may have held it (in dlopen, dlclose or a walk) at the
 * fork. Such a child writes the list as it was just before the fork. */
static bool frozen;

static int remember_live(struct dl_phdr_info *info, size_t size, void *arg)
{
	char buf[4096];
	struct module m;
	const char *name = module_name(info, buf, sizeof buf);
	describe(info, &m);
	remember(info, size, arg);
	for (size_t i = 0; i < nmodules; i++)
		if (registry[i].base == m.base && registry[i].lo == m.lo &&
		    agent_streq(names + registry[i].name, name))
			registry[i].live = true;
	return 0;
}

void agent_modules_fork_prepare(void)
{
	agent_lock(&modules_lock);
	if (!registry) {
		registry = agent_mmap(MAX_MODULES * sizeof *registry);
		names = agent_mmap(NAMES_SIZE);
	}
	if (registry && names) {
		for (size_t i = 0; i < nmodules; i++)
			registry[i].live = false;
		dl_iterate_phdr(remember_live, NULL);
	}
	agent_unlock(&modules_lock);
}

void agent_modules_fork_child(bool threaded)
{
	frozen = threaded;
}

bool agent_modules_frozen(void)
{
	return frozen;
}

void agent_modules_write(struct agent_writer *w)
{
	agent_lock(&modules_lock);
	if (frozen) {
		for (size_t i = 0; i < nmodules; i++)
			write_module(w, &registry[i], names + registry[i].name, registry[i].live);
		agent_unlock(&modules_lock);
		return;
	}
	for (size_t i = 0; i < nmodules; i++)
		registry[i].live = false;
	dl_iterate_phdr(write_loaded, w);
	for (size_t i = 0; i < nmodules; i++)
		if (!registry[i].live)
			write_module(w, &registry[i], names + registry[i].name, false);
	agent_unlock(&modules_lock);
}

bool agent_modules_wait_unlocked(long ms) { return agent_lock_seen_free(&modules_lock, ms); }
void agent_modules_lock(void) { agent_lock(&modules_lock); }
void agent_modules_unlock(void) { agent_unlock(&modules_lock); }
