/*
 * lifecycle.c — start-up, fork, and the report at exit.
 *
 * Start-up happens in two steps. The first allocation of the process
 * (which can come before any constructor) resolves the real allocator and
 * sets up what tracking needs (agent_init_early). The constructor then
 * reads the options, registers the fork handlers and, with
 * follow_children=0, removes the agent from LD_PRELOAD.
 *
 * The exit report is written as late as the process allows, so that
 * every destructor has had its chance to free: the agent's destructor
 * (run by _dl_fini, itself the last exit handler) registers one more exit
 * handler, which glibc runs after _dl_fini returns. That handler receives
 * the exit status, releases libc's and libstdc++'s one-time caches as
 * valgrind does (only when no other thread is left to use them), and
 * writes heaptrail.PID.leaks. _exit, which skips all of this, writes the
 * report from its hook.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "format/leakfile.h"
#include "agent/banned.h"

atomic_int agent_state;
pid_t agent_pid;
uintptr_t agent_self_lo, agent_self_hi;
struct agent_totals agent_totals;

extern char __ehdr_start[] __attribute__((visibility("hidden")));
extern char _etext[] __attribute__((visibility("hidden")));

static void (*libc_freeres)(void);
static bool reports_enabled = true;
static atomic_int reported;

void agent_modules_lock(void);
void agent_modules_unlock(void);

void agent_init_early(void)
{
	agent_self_lo = (uintptr_t)__ehdr_start;
	agent_self_hi = (uintptr_t)_etext;
	agent_pid = getpid();
}

/* ---------- fork ---------- */

static void fork_prepare(void)
{
	agent_hooks_fork_prepare();
	agent_modules_lock();
	agent_tables_lock_all();
}

static void fork_parent(void)
{
	agent_tables_unlock_all();
	agent_modules_unlock();
	agent_hooks_fork_done();
}

static void fork_child(void)
{
	agent_tables_unlock_all();
	agent_modules_unlock();
	agent_pid = getpid();
	atomic_store(&reported, 0);
	if (!agent_config.follow_children)
		reports_enabled = false;
	agent_hooks_fork_done();
}

/* ---------- follow_children=0 ---------- */

/* Removes every LD_PRELOAD entry naming libheaptrail from the environment,
 * in place, so programs this one execs run without the agent. */
static void drop_self_from_preload(void)
{
	extern char **environ;
	for (char **e = environ; e && *e; e++) {
		if (!agent_strstarts(*e, "LD_PRELOAD="))
			continue;
		char *src = *e + 11, *dst = src;
		while (*src) {
			char *tok = src;
			while (*src && *src != ':' && *src != ' ')
				src++;
			size_t n = (size_t)(src - tok);
			bool ours = false;
			for (size_t i = 0; i + 12 <= n; i++)
				if (agent_strstarts(tok + i, "libheaptrail"))
					ours = true;
			if (n && !ours) {
				if (dst != *e + 11)
					*dst++ = ':';
				for (size_t i = 0; i < n; i++)
					*dst++ = tok[i];
			}
			if (*src)
				src++;
		}
		*dst = 0;
	}
}

/* ---------- constructor / destructor ---------- */

__attribute__((constructor)) static void agent_constructor(void)
{
	agent_ensure_ready();
	agent_tls.busy = 1;
	agent_config_load();
	if (!agent_config.follow_children)
		drop_self_from_preload();
	libc_freeres = (void (*)(void))dlsym(RTLD_DEFAULT, "__libc_freeres");
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	agent_tls.busy = 0;
}

static void late_report(int status, void *arg)
{
	agent_report_exit(status & 0xff);
}

__attribute__((destructor)) static void agent_destructor(void)
{
	if (getpid() != agent_pid)
		return;
	if (on_exit(late_report, NULL) != 0)
		agent_report_exit(-1);
}

/* ---------- the report ---------- */

static int count_threads(void)
{
	char buf[4096];
	int n = 0;
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		long r = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (r <= 0)
			break;
		for (long off = 0; off < r;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			if (d->d_name[0] != '.')
				n++;
			off += d->d_reclen;
		}
	}
	close(fd);
	return n;
}

static bool release_caches(void)
{
	if (!agent_config.freeres || count_threads() != 1)
		return false;
	agent_tls.busy = 1;
	void (*cxx_freeres)(void) =
		(void (*)(void))dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv");
	agent_tls.busy = 0;
	/* With busy clear, what they free is forgotten by the tables. */
	if (cxx_freeres)
		cxx_freeres();
	if (libc_freeres)
		libc_freeres();
	return true;
}

/* Writes /proc/self/cmdline as "arg" lines. */
static void write_args(struct agent_writer *w)
{
	char buf[8192];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = 0, r;
	while (n < (ssize_t)sizeof buf - 1 &&
	       (r = read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0)
		n += r;
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	for (ssize_t i = 0; i < n;) {
		agent_put(w, "arg ");
		agent_put_escaped(w, buf + i);
		agent_put(w, "\n");
		i += (ssize_t)agent_strlen(buf + i) + 1;
	}
}

static void write_line_u64(struct agent_writer *w, const char *key, uint64_t v)
{
	agent_put(w, key);
	agent_put(w, " ");
	agent_put_u64(w, v);
	agent_put(w, "\n");
}

static void write_leaks(struct agent_writer *w, int status, bool freeres)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;

	agent_put(w, FMT_LEAKS_MAGIC " 1\n");
	write_line_u64(w, "pid", (uint64_t)getpid());
	write_line_u64(w, "ppid", (uint64_t)getppid());
	agent_put(w, "exe ");
	agent_put_escaped(w, exe[0] ? exe : "?");
	agent_put(w, "\n");
	write_args(w);
	if (status >= 0)
		write_line_u64(w, "exit status", (uint64_t)status);
	else
		agent_put(w, "exit unknown\n");
	agent_put(w, "totals ");
	agent_put_u64(w, agent_totals.allocs);
	agent_put(w, " ");
	agent_put_u64(w, agent_totals.frees);
	agent_put(w, " ");
	agent_put_u64(w, agent_totals.bytes_allocated);
	agent_put(w, " ");
	agent_put_u64(w, agent_totals.live_bytes);
	agent_put(w, " ");
	agent_put_u64(w, agent_totals.live_blocks);
	agent_put(w, "\n");
	write_line_u64(w, "dropped", agent_totals.dropped);
	agent_put(w, freeres ? "freeres yes\n" : "freeres no\n");
	agent_modules_write(w);

	uint32_t count = agent_stack_count();
	for (uint32_t id = 1; id <= count; id++) {
		struct agent_stack *s = agent_stack_get(id);
		if (!s->live_blocks)
			continue;
		agent_put(w, "stack ");
		agent_put_u64(w, id);
		agent_put(w, " ");
		agent_put(w, fmt_alloc_fn_names[s->fn]);
		const uintptr_t *pcs = agent_stack_pcs(s);
		for (int i = 0; i < s->depth; i++) {
			agent_put(w, " ");
			agent_put_hex(w, pcs[i]);
		}
		agent_put(w, "\nrecord in_use ");
		agent_put_u64(w, s->live_bytes);
		agent_put(w, " ");
		agent_put_u64(w, s->live_blocks);
		agent_put(w, " ");
		agent_put_u64(w, id);
		agent_put(w, "\n");
	}
	agent_put(w, "end\n");
}

void agent_report_exit(int status)
{
	if (!reports_enabled || atomic_exchange(&reported, 1))
		return;
	bool freeres = release_caches();
	int saved_busy = agent_tls.busy;
	agent_tls.busy = 1;
	agent_set_recording(false);

	char name[64];
	size_t n = agent_strlcpy(name, "heaptrail.", sizeof name);
	uint64_t pid = (uint64_t)getpid(), div = 1;
	while (pid / div >= 10)
		div *= 10;
	for (; div; div /= 10)
		name[n++] = (char)('0' + pid / div % 10);
	agent_strlcpy(name + n, ".leaks", sizeof name - n);

	struct agent_writer w;
	int err = agent_writer_open(&w, agent_config.output, name);
	if (err == 0) {
		write_leaks(&w, status, freeres);
		err = agent_writer_commit(&w);
	}
	if (err)
		agent_log("cannot write the report into '",
			  agent_config.output[0] ? agent_config.output : ".", "'");
	agent_tls.busy = saved_busy;
}
