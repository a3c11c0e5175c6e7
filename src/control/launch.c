/* launch.c — starting a program under the agent (`heaptrail run`):
 * finding it as execvp would, refusing what the loader would not preload
 * into, the run's id, passing stop signals on to it, waiting for it and
 * its orphans, and ending as it ended. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "format/options.h"
#include "format/vocab.h"

/* Finds PROG the way execvp would; fills path. Returns 0, or -errno. */
int ctl_resolve_prog(const char *prog, char *path, size_t cap)
{
	if (strchr(prog, '/')) {
		snprintf(path, cap, "%s", prog);
		return access(path, F_OK) ? -errno : 0;
	}
	const char *p = getenv("PATH");
	if (!p)
		p = "/usr/local/bin:/usr/bin:/bin";
	while (*p) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		snprintf(path, cap, "%.*s/%s", (int)n, n ? p : ".", prog);
		if (access(path, X_OK) == 0)
			return 0;
		p += n + (e ? 1 : 0);
	}
	return -ENOENT;
}

/* Refuses what the dynamic loader would not preload into: static and
 * set-id binaries. Scripts are fine (their interpreter is dynamic). */
int ctl_check_prog(const char *shown, const char *path)
{
	struct stat st;
	if (stat(path, &st)) {
		ctl_error("cannot run '%s': %s", shown, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode) || access(path, X_OK)) {
		ctl_error("cannot run '%s': %s", shown,
			  S_ISDIR(st.st_mode) ? "is a directory" : "not executable");
		return -1;
	}
	if (st.st_mode & (S_ISUID | S_ISGID)) {
		ctl_error("cannot track '%s': it is set-user-ID or set-group-ID, and the "
			  "loader ignores LD_PRELOAD for such programs", shown);
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;  /* execute-only: let exec decide */
	Elf64_Ehdr eh;
	ssize_t n = read(fd, &eh, sizeof eh);
	int ret = 0;
	if (n == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
	    eh.e_phnum < 4096) {
		int interp = 0;
		for (int i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
			    (ssize_t)sizeof ph)
				break;
			if (ph.p_type == PT_INTERP)
				interp = 1;
		}
		if (!interp) {
			ctl_error("cannot track '%s': it is a static binary (no dynamic loader), "
				  "so the agent cannot be preloaded into it", shown);
			ret = -1;
		}
	}
	close(fd);
	return ret;
}

/* Signals that ask a program to stop: heaptrail passes them on to PROG,
 * so `timeout`, `kill` or a service manager reach it through the wrapper,
 * and heaptrail itself lives on to report and to exit as PROG did. */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])
static struct sigaction forwarded_old[NFORWARDED];
static volatile sig_atomic_t forward_to;

static void forward_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	/* A signal from the terminal (^C, ^\\, hangup) went to the whole
	 * foreground process group, PROG included: sending it again would
	 * deliver it twice. Anything sent by a process (kill, timeout)
	 * was meant for heaptrail's program. */
	if (si->si_code == SI_KERNEL)
		return;
	/* Sent by PROG itself (kill(0, ...) or kill(getppid(), ...)): what it
	 * meant for its parent or its group must not come back to it. */
	if (si->si_code == SI_USER && si->si_pid == (pid_t)forward_to)
		return;
	int e = errno;
	if (forward_to > 0)
		kill((pid_t)forward_to, sig);
	errno = e;
}

/* Installs the forwarder for each signal heaptrail was not started
 * ignoring (an ignored one stays ignored, and PROG inherits that as it
 * would bare). Call with the signals blocked. */
void ctl_forward_install(void)
{
	struct sigaction sa = { .sa_sigaction = forward_signal,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NFORWARDED; i++) {
		sigaction(forwarded[i], NULL, &forwarded_old[i]);
		if (forwarded_old[i].sa_handler != SIG_IGN)
			sigaction(forwarded[i], &sa, NULL);
	}
}

/* Puts back the dispositions heaptrail started with. */
void ctl_forward_restore(void)
{
	for (size_t i = 0; i < NFORWARDED; i++)
		sigaction(forwarded[i], &forwarded_old[i], NULL);
}

void ctl_forward_block(int how, sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < NFORWARDED; i++)
		sigaddset(&set, forwarded[i]);
	sigprocmask(how, &set, old);
}

void ctl_forward_to(pid_t pid)
{
	forward_to = pid;
}

/* The run id every file of this run will name: the one HEAPTRAIL_OPTIONS
 * gives (the last well-formed run=), else a fresh random one, which
 * *added says run.c's child_exec must pass. Chosen before the fork, so the
 * parent reads back only its own processes' reports. */
void ctl_choose_run_id(char id[FMT_RUN_ID_MAX + 1], bool *added)
{
	*added = !fmt_run_id(getenv("HEAPTRAIL_OPTIONS"), id);
	if (!*added)
		return;
	uint64_t r = 0;
	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		r = ((uint64_t)getpid() << 32) ^ (uint64_t)t.tv_sec ^ ((uint64_t)t.tv_nsec << 20);
	}
	snprintf(id, FMT_RUN_ID_MAX + 1, "%016llx", (unsigned long long)r);
}

/* Waits for the child and every orphan handed to us; returns the child's
 * wait status. */
int ctl_wait_all(pid_t child)
{
	int status = 0, st;
	bool reaped = false;
	pid_t p;
	for (;;) {
		/* --http asks the agent by ptrace from the endpoint's thread:
		 * a ptrace stop of the program's main thread is reported to
		 * this wait too (its tracer is a thread of ours), and is the
		 * endpoint's to take. So look first, and take only exits. */
		siginfo_t si;
		si.si_pid = 0;
		if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) < 0) {
			if (errno == EINTR)
				continue;
			break;  /* ECHILD: nothing left */
		}
		if (si.si_code == CLD_TRAPPED || si.si_code == CLD_STOPPED ||
		    si.si_code == CLD_CONTINUED) {
			usleep(1000);
			continue;
		}
		p = waitpid(si.si_pid, &st, WNOHANG);
		if (p <= 0)
			continue;  /* the endpoint's wait took it (see below) */
		if (p == child) {
			reaped = true;
			status = st;
			/* its pid may be reused from now on; a signal now is for
			 * heaptrail (still waiting for orphans, or reporting) */
			forward_to = 0;
			ctl_forward_restore();
		}
	}
	/* it ended while the endpoint held its main thread: the endpoint's
	 * wait reaped it, and kept its status */
	if (!reaped && ctl_reaped_exit(child, &st)) {
		status = st;
		forward_to = 0;
		ctl_forward_restore();
	}
	return status;
}

void ctl_die_like(int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		fflush(NULL);
		signal(sig, SIG_DFL);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
		_exit(128 + sig);
	}
}

