/* inject.c — the agent in a running process (ptrace.h): loaded into it
 * (`heaptrail attach`, by path or, in a container, from a memory file),
 * and its entry points called (detach, dump, requests). */
#include <elf.h>
#include <linux/magic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/ptrace.h"
#include "format/options.h"
#include "format/vocab.h"

/* ---------- a process in other namespaces (containers) ----------
 *
 * A process run by docker, podman or Kubernetes has a root of its own
 * (its mount namespace) and sees itself under another PID (its PID
 * namespace). Attached from the host, or from a container that shares
 * its PID namespace:
 *  - the agent, when the process does not see our file, is copied into a
 *    memory file the process makes (memfd_create, a borrowed call),
 *    loaded with dlopen("/proc/self/fd/M"), and M is closed: nothing is
 *    written into its filesystem. The agent needs libc alone (the
 *    Makefile), which every dynamically linked image has;
 *  - the output directory, when the process does not see ours, is handed
 *    to it as a descriptor: its agent makes a socket pair
 *    (heaptrail_attach_pair), heaptrail takes one end with pidfd_getfd
 *    and sends an O_PATH descriptor of the directory over it
 *    (SCM_RIGHTS), and the agent's start, told output=OUT_PENDING,
 *    receives it and closes the pair. The agent writes through
 *    /proc/self/fd/D, holds D while attached and closes it at the detach;
 *    heaptrail reads what it wrote through /proc/PID/fd/D
 *    (ctl_agent_path);
 *  - the files and the records name the PID the user typed (the agent's
 *    `pid` option), not the one the process sees.
 * Both routes need /proc mounted in the process's mount namespace, as
 * every container runtime has it. A heaptrail killed between two of
 * these calls leaves the process a descriptor it never uses (a memory
 * file, or the pending pair) until the agent's next start or stop,
 * which closes them (src/agent/attach.c); the borrowed thread runs on
 * as after any other call. One held up past the park after one of them
 * finds the thread gone back by itself: the attach borrows one again and
 * loads the agent only if it is not mapped yet (ctl_attach).
 */

/* Whether path names the same file for process pid as for us. */
static bool seen_alike(long pid, const char *path)
{
	char file[PATH_MAX + 32];
	struct stat ours, theirs;
	snprintf(file, sizeof file, "/proc/%ld/root%s", pid, path);
	return !stat(path, &ours) && !stat(file, &theirs) && ours.st_dev == theirs.st_dev &&
	       ours.st_ino == theirs.st_ino;
}

/* The PID process pid sees itself under (the last of its NSpid), or pid. */
static long inner_pid(long pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = ctl_read_file(path, NULL);
	long inner = pid;
	if (status && ctl_status_field(status, "NSpid", buf, sizeof buf)) {
		char *last = strrchr(buf, '\t');
		inner = atol(last ? last + 1 : buf);
	}
	free(status);
	return inner > 0 ? inner : pid;
}

/* Whether /proc is mounted in the mount namespace of process pid. */
static bool proc_mounted_in(long pid)
{
	char path[64];
	struct statfs sf;
	snprintf(path, sizeof path, "/proc/%ld/root/proc", pid);
	return !statfs(path, &sf) && sf.f_type == PROC_SUPER_MAGIC;
}

/* "; its seccomp filter may refuse it" for a process under a seccomp
 * filter, else "". */
static const char *seccomp_may(long pid)
{
	char path[64], sec[16] = "";
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	char *status = ctl_read_file(path, NULL);
	if (status)
		ctl_status_field(status, "Seccomp", sec, sizeof sec);
	free(status);
	return !strcmp(sec, "2") ? "; its seccomp filter may refuse it" : "";
}

/* The descriptor of process pid whose link reads want, or -1. */
static int fd_linked(long pid, const char *want)
{
	char path[64], link[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%ld/fd", pid);
	DIR *d = opendir(path);
	int found = -1;
	for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
		char fd[96];
		snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
		ssize_t n = readlink(fd, link, sizeof link - 1);
		if (n > 0 && (link[n] = 0, !strcmp(link, want)))
			found = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* Whether process pid maps a file named name (as its maps show it). */
static bool mapped(long pid, const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	char *maps = ctl_read_file(path, NULL);
	bool found = maps && strstr(maps, name);
	free(maps);
	return found;
}

/* Copies the file at from into descriptor fd of process pid (through
 * /proc/PID/fd). Returns 0 or -errno. */
static int copy_into(long pid, int fd, const char *from)
{
	char path[64];
	size_t len;
	char *img = ctl_read_file(from, &len);
	snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fd);
	int out = img && len ? open(path, O_WRONLY | O_CLOEXEC) : -1, e = 0;
	if (out < 0)
		e = img && len ? -errno : -EIO;
	for (size_t done = 0; !e && done < len;) {
		ssize_t w = write(out, img + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			e = w < 0 ? -errno : -EIO;
		else
			done += (size_t)w;
	}
	if (out >= 0)
		close(out);
	free(img);
	return e;
}

/* Loads the agent (our file at agent) into the held process through a
 * memory file of its own (see above); libc's memfd_create, dlopen and
 * close at the addresses given. Returns 0 when dlopen ran (whether it
 * loaded the agent, the map says), -ETIME when the thread left the park
 * by itself after one of the three calls (heaptrail held up: it is let
 * go as it is, a memory file it made left for the agent's start to
 * close), or prints and -1. */
static int load_via_memfd(struct target *t, uint64_t create, uint64_t dl, uint64_t close_fn,
			  const char *agent)
{
	long pid = t->pid;
	char name[64], want[96], path[64];
	uint64_t tag = 0;
	if (getrandom(&tag, sizeof tag, 0) != (ssize_t)sizeof tag)
		tag = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	snprintf(name, sizeof name, "heaptrail-%016llx/libheaptrail.so", (unsigned long long)tag);
	snprintf(want, sizeof want, MEMFD_PREFIX "%s" DELETED, name);
	uint64_t a[6] = { t->strings, MFD_CLOEXEC, 0, 0, 0, 0 };
	if (ctl_mem_rw(t, t->strings, name, strlen(name) + 1, true)) {
		target_error(pid, "cannot write into process %ld's memory", pid);
		return -1;
	}
	int e = ctl_remote_call(t, create, a);
	if (e == -ETIME)
		return e;
	int m = e ? -1 : fd_linked(pid, want);
	if (m < 0) {
		char why[160] = "";
		if (t->failed_nr >= 0)
			snprintf(why, sizeof why, ": %s", strerror(t->failed_err));
		target_error(pid, "process %ld could not make a memory file for the agent "
			     "(memfd_create%s)%s", pid, e ? ": the call failed" : why,
			     seccomp_may(pid));
		return -1;
	}
	int ret = 0;
	e = copy_into(pid, m, agent);
	if (e) {
		target_error(pid, "cannot copy the agent into process %ld's memory file: %s", pid,
			     strerror(-e));
		ret = -1;
	} else {
		snprintf(path, sizeof path, "/proc/self/fd/%d", m);
		a[0] = t->strings;
		a[1] = RTLD_NOW_VALUE;
		if (ctl_mem_rw(t, t->strings, path, strlen(path) + 1, true) ||
		    (e = ctl_remote_call(t, dl, a))) {
			if (e == -ETIME)
				return e;
			target_error(pid, "the call to dlopen in process %ld failed: %s", pid,
				     strerror(e ? -e : EIO));
			ret = -1;
		} else if (t->park && !mapped(pid, want)) {
			/* once more, stepped, to name the system call that fails */
			t->step = true;
			e = ctl_remote_call(t, dl, a);
			t->step = false;
			if (e) {
				target_error(pid, "the call to dlopen in process %ld failed: %s",
					     pid, strerror(-e));
				ret = -1;
			}
		}
	}
	/* the mapping holds the file from now on */
	a[0] = (uint64_t)m;
	a[1] = 0;
	if (t->tid && (e = ctl_remote_call(t, close_fn, a)) && !ret) {
		if (e == -ETIME)
			return e;  /* the load is done: the attach goes on */
		target_error(pid, "the call to close in process %ld failed", pid);
		ret = -1;
	}
	return ret;
}

/* The output= the agent's start takes the directory from, sent over the
 * pair its heaptrail_attach_pair made (src/agent/attach.c) */
#define OUT_PENDING "/proc/self/fd/pending"

/* Sends the held process, whose agent is loaded (heaptrail_attach_call at
 * call), a descriptor of the directory dir over a socket pair its agent
 * makes (heaptrail_attach_pair at pair; see above): its start, given
 * OUT_PENDING, receives it and closes the pair, which the agent also
 * closes at its next start or stop when a heaptrail killed meanwhile
 * never started it. Returns 0, or prints and -1 (the pair then is
 * closed by a start that finds nothing, *pending 1). */
static int send_dir(struct target *t, uint64_t call, uint64_t pair, const char *dir,
		    bool *pending)
{
	long pid = t->pid;
	uint64_t at_sv = t->strings, rv = 0;
	int sv[2] = { -1, -1 }, pidfd = -1, end = -1, dfd = -1;
	*pending = false;
	int e = ctl_agent_call(t, call, pair, at_sv, 0, 0, 0, &rv);
	if (e == -ETIME) {
		/* the thread went back, a pair perhaps made: the agent closes
		 * it at its next start or stop */
		target_error(pid, "heaptrail_attach_pair ran in process %ld, but its result was lost: "
			     "heaptrail was held up for more than %d ms after it (a machine this "
			     "loaded may need another try)", pid, PARK_MS);
		return -1;
	}
	if (e || (int)rv || ctl_mem_rw(t, at_sv, sv, sizeof sv, false)) {
		target_error(pid, "process %ld could not make the socket pair that takes the output "
			     "directory (socketpair%s%s)%s", pid, !e && (int)rv ? ": " : "",
			     !e && (int)rv ? strerror(-(int)rv) : "", seccomp_may(pid));
		return -1;
	}
	*pending = true;
	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	end = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, sv[1], 0);
	dfd = end < 0 ? -1 : open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *why = pidfd < 0 ? "pidfd_open" : end < 0 ? "pidfd_getfd" : dfd < 0 ? "open" : NULL;
	int err = why ? errno : 0;
	if (!why) {
		union {
			struct cmsghdr hdr;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		char one = 'd';
		struct iovec iov = { &one, 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				      .msg_controllen = sizeof ctl.buf };
		memset(ctl.buf, 0, sizeof ctl.buf);
		ctl.hdr.cmsg_level = SOL_SOCKET;
		ctl.hdr.cmsg_type = SCM_RIGHTS;
		ctl.hdr.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&ctl.hdr), &dfd, sizeof dfd);
		if (sendmsg(end, &msg, MSG_NOSIGNAL) != 1) {
			why = "sendmsg";
			err = errno;
		}
	}
	if (dfd >= 0)
		close(dfd);
	if (end >= 0)
		close(end);
	if (pidfd >= 0)
		close(pidfd);
	if (why) {
		ctl_error("cannot send the output directory %s to process %ld (%s: %s)", dir, pid,
			  why, strerror(err));
		return -1;
	}
	return 0;
}

/* Calls the agent's entry point name(a0, a1) in pid; *ret its int
 * result. With request (a FMT_SIGVAL_* value), name(request, regs,
 * nregs, wrote) instead, regs the borrowed thread's registers as it was
 * stopped (heaptrail_request), and the path of the file the agent wrote
 * into wrote (FMT_REQUEST_PATH_MAX bytes; "" from an agent that does not
 * say). Returns 0 or prints and -1. */
int ctl_call_agent(long pid, const char *name, const char *s0, const char *s1, int request,
		   int *ret, double *stopped_ms, char *wrote)
{
	struct target t;
	char *maps = NULL, agent[PATH_MAX];
	uint64_t base, rv;
	int result = -1;
	enum target_use use = request ? (request & FMT_SIGVAL_DUMP ? USE_LIVE : USE_LEAKS)
			      : !strncmp(name, "heaptrail_dump", 14) ? USE_DUMP : USE_DETACH;
	if (ctl_open_target(&t, pid, use, &maps))
		return -1;
	if (ctl_agent_in(maps, &base, agent, sizeof agent)) {
		ctl_error("process %ld has no heaptrail agent (start it with `heaptrail run`, or "
			  "`heaptrail attach %ld`)", pid, pid);
		goto out;
	}
	uint64_t fn = ctl_agent_symbol(pid, base, agent, name);
	uint64_t call = ctl_agent_symbol(pid, base, agent, "heaptrail_attach_call");
	/* heaptrail_dump_request(wrote): an older agent has heaptrail_dump
	 * alone, which does not say where it wrote */
	bool dump_path = !strcmp(name, "heaptrail_dump_request");
	if (dump_path && (!fn || !call || !wrote)) {
		name = "heaptrail_dump";
		fn = ctl_agent_symbol(pid, base, agent, name);
		dump_path = false;
	}
	if (wrote)
		wrote[0] = 0;
	if (!fn) {
		target_error(pid, "the agent in process %ld (%s) has no %s: an older heaptrail?", pid,
			     agent, name);
		goto out;
	}
	if (ctl_start_calls(&t, maps))
		goto out;
	uint64_t a0 = 0, a1 = 0;
	if (dump_path) {
		/* an empty path for the agent's answer */
		char none = 0;
		a0 = t.strings;
		if (ctl_mem_rw(&t, a0, &none, 1, true)) {
			target_error(pid, "cannot write into process %ld's memory", pid);
			goto out;
		}
	}
	if (s0) {
		a0 = t.strings;
		ctl_mem_rw(&t, a0, (void *)s0, strlen(s0) + 1, true);
	}
	if (s1) {
		a1 = t.strings + 8192;
		ctl_mem_rw(&t, a1, (void *)s1, strlen(s1) + 1, true);
	}
	int e;
	if (call && request) {
		/* heaptrail_request(request, regs, nregs): the registers the
		 * thread was stopped with, roots of a leak check */
		/* one write: the registers, then an empty path for the agent's
		 * answer (wrote) */
		unsigned char in[sizeof t.saved + 1];
		uint64_t regs = t.strings, path = t.strings + sizeof t.saved;
		_Static_assert(sizeof t.saved + FMT_REQUEST_PATH_MAX <= STRINGS_SPACE - 16,
			       "the path fits below the result");
		memcpy(in, &t.saved, sizeof t.saved);
		in[sizeof t.saved] = 0;
		if (ctl_mem_rw(&t, regs, in, sizeof in, true))
			e = -EIO;
		else
			e = ctl_agent_call(&t, base + call, base + fn, (uint32_t)request, regs,
					   sizeof t.saved / sizeof(uint64_t), wrote ? path : 0, &rv);
		if (wrote && (e || ctl_mem_rw(&t, path, wrote, FMT_REQUEST_PATH_MAX, false)))
			wrote[0] = 0;
		if (wrote)
			wrote[FMT_REQUEST_PATH_MAX - 1] = 0;
	} else if (call) {
		e = ctl_agent_call(&t, base + call, base + fn, a0, a1, 0, 0, &rv);
		if (dump_path && (e || ctl_mem_rw(&t, a0, wrote, FMT_REQUEST_PATH_MAX, false)))
			wrote[0] = 0;
		if (dump_path)
			wrote[FMT_REQUEST_PATH_MAX - 1] = 0;
	} else {
		/* an agent loaded by an older heaptrail: the call runs, its
		 * result goes with the registers the rt_sigreturn puts back */
		uint64_t a[6] = { a0, a1, 0, 0, 0, 0 };
		e = ctl_remote_call(&t, base + fn, a);
		rv = 0;
		if (!e)
			fprintf(stderr, "heaptrail: the agent in process %ld is older than heaptrail: "
				"%s ran, its result is not known\n", pid, name);
	}
	if (e == -ETIME) {
		target_error(pid, "%s ran in process %ld, but its result was lost: heaptrail was held "
			     "up for more than %d ms after it (a machine this loaded may need another "
			     "try)", name, pid, PARK_MS);
		goto out;
	} else if (e) {
		target_error(pid, "the call into process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	*ret = (int)(uint32_t)rv;
	result = 0;
out:
	ctl_end_calls(&t);
	if (stopped_ms)
		*stopped_ms = t.stopped_ms;
	free(maps);
	return result;
}

int ctl_attach(long pid, const char *opts, const char *outdir, double *stopped_ms)
{
	struct target t;
	char *maps = NULL, libc[PATH_MAX], agent[PATH_MAX], file[PATH_MAX + 32];
	uint64_t libc_base, rv;
	int ret = 1;
	if (ctl_open_target(&t, pid, USE_ATTACH, &maps))
		return 1;
	if (ctl_find_agent(agent, sizeof agent)) {
		ctl_error("cannot find the agent library libheaptrail.so next to heaptrail "
			  "(HEAPTRAIL_AGENT names it)");
		goto out;
	}
	char real[PATH_MAX];
	if (realpath(agent, real))
		snprintf(agent, sizeof agent, "%s", real);
	int st = ctl_is_static((pid_t)pid);
	static const char *const libcs[] = { "libc.so.6", NULL };
	if (st == 1) {
		target_error(pid, "cannot attach to process %ld: it is a static binary (no dynamic "
			     "loader and no libc.so.6 to load the agent with)", pid);
		goto out;
	}
	if (ctl_find_module(maps, libcs, &libc_base, libc, sizeof libc)) {
		/* dynamic, yet no libc mapped: caught between its exec and its
		 * loader's work (or its maps torn down on the way out) */
		target_error(pid, "cannot attach to process %ld yet: libc.so.6 is not loaded in it "
			     "(it is starting); try again", pid);
		goto out;
	}
	uint64_t ab;
	char loaded[PATH_MAX];
	bool again = false;
	if (!ctl_agent_in(maps, &ab, loaded, sizeof loaded)) {
		snprintf(file, sizeof file, "/proc/%ld/environ", pid);
		size_t n;
		char *env = ctl_read_file(file, &n);
		bool preloaded = false;
		for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
			if (!strncmp(env + i, "LD_PRELOAD=", 11) && strstr(env + i, "libheaptrail"))
				preloaded = true;
		free(env);
		if (preloaded) {
			ctl_error("process %ld already runs under heaptrail (preloaded): use "
				  "`heaptrail dump %ld`", pid, pid);
			goto out;
		}
		snprintf(agent, sizeof agent, "%s", loaded);  /* the same copy again */
		again = true;
	}
	/* a process in other namespaces (see "containers" above): the agent
	 * from a memory file when it does not see ours (or was given one
	 * before: loaded already), the directory as a descriptor */
	bool in_memory = !strncmp(agent, MEMFD_PREFIX, strlen(MEMFD_PREFIX));
	bool by_memfd = !in_memory && !again && !seen_alike(pid, agent);
	bool by_fd = !seen_alike(pid, outdir);
	if ((by_memfd || by_fd) && !proc_mounted_in(pid)) {
		target_error(pid, "cannot attach to process %ld from outside its mount namespace: /proc "
			     "is not mounted in it (the agent and the output directory reach it "
			     "through /proc/self/fd)", pid);
		goto out;
	}
	ctl_target_path(pid, agent, file, sizeof file);
	if (!in_memory && !by_memfd && access(file, R_OK)) {
		/* loaded by path before, and the file is gone from its view */
		target_error(pid, "the agent %s is not visible in the mount namespace of process %ld "
			     "(%s): copy it there and set HEAPTRAIL_AGENT", agent, pid,
			     strerror(errno));
		goto out;
	}
	uint64_t start_off, call_off, pair_off;
	if (in_memory) {
		start_off = ctl_mem_symbol(pid, ab, "heaptrail_attach_start");
		call_off = ctl_mem_symbol(pid, ab, "heaptrail_attach_call");
		pair_off = ctl_mem_symbol(pid, ab, "heaptrail_attach_pair");
	} else {
		const char *from = by_memfd ? agent : file;
		start_off = ctl_elf_symbol(from, "heaptrail_attach_start");
		call_off = ctl_elf_symbol(from, "heaptrail_attach_call");
		pair_off = ctl_elf_symbol(from, "heaptrail_attach_pair");
	}
	ctl_target_path(pid, libc, file, sizeof file);
	uint64_t dlopen_off = ctl_elf_symbol(file, "dlopen");
	if (!dlopen_off)  /* glibc before 2.34: the loader's private entry */
		dlopen_off = ctl_elf_symbol(file, "__libc_dlopen_mode");
	uint64_t memfd_off = by_memfd ? ctl_elf_symbol(file, "memfd_create") : 0;
	uint64_t close_off = by_memfd ? ctl_elf_symbol(file, "close") : 0;
	if (!dlopen_off || !start_off || !call_off) {
		target_error(pid, "cannot find %s in %s%s",
			     !dlopen_off ? "dlopen" : !start_off ? "heaptrail_attach_start"
							 : "heaptrail_attach_call",
			     dlopen_off ? agent : libc,
			     dlopen_off ? " (loaded by an older heaptrail? that one attaches again)"
					: "");
		goto out;
	}
	if (by_memfd && (!memfd_off || !close_off)) {
		target_error(pid, "cannot find %s in %s (needed to attach across mount namespaces)",
			     !memfd_off ? "memfd_create" : "close", libc);
		goto out;
	}
	if (by_fd && !pair_off) {
		target_error(pid, "the agent in process %ld (%s) has no heaptrail_attach_pair: an "
			     "older heaptrail? it takes no directory from outside its mount "
			     "namespace", pid, agent);
		goto out;
	}
	/* the files and records name the PID given, not the one the process
	 * sees in its own PID namespace */
	char opts_pid[9000];
	long inner = inner_pid(pid);
	snprintf(opts_pid, sizeof opts_pid, "%s%s", opts, inner != pid ? ",pid=" : "");
	if (inner != pid)
		snprintf(opts_pid + strlen(opts_pid), sizeof opts_pid - strlen(opts_pid), "%ld", pid);
	opts = opts_pid;
	if (ctl_start_calls(&t, maps))
		goto out;
	if (strlen(agent) >= 4096 || strlen(opts) >= 8192 || strlen(outdir) >= 3072) {
		ctl_error("the options are too long for the attach (%zu bytes)", strlen(opts));
		goto out;
	}
	/* s_opts and s_out are written after the load: above the place of
	 * the memory file's name and the pair's, where t.strings is once the
	 * thread has been borrowed again */
	uint64_t s_path = t.strings, s_opts, s_out;
	int e = 0;
	for (int round = 0;; round++) {
		if (by_memfd) {
			e = load_via_memfd(&t, libc_base + memfd_off, libc_base + dlopen_off,
					   libc_base + close_off, agent);
			if (e && e != -ETIME)
				goto out;
		} else if (!in_memory) {
			s_path = t.strings;
			if (ctl_mem_rw(&t, s_path, agent, strlen(agent) + 1, true)) {
				target_error(pid, "cannot write into process %ld's memory", pid);
				goto out;
			}
			uint64_t a[6] = { s_path, RTLD_NOW_VALUE, 0, 0, 0, 0 };
			e = ctl_remote_call(&t, libc_base + dlopen_off, a);
		}
		if (e != -ETIME || round == 2)
			break;
		/* heaptrail was held up longer than the park: the thread went
		 * back by itself after a call of the load; the start needs one
		 * again, and the load is made again unless it is done (an agent
		 * loaded twice from two memory files would be two agents; a
		 * memory file left open, the agent's start closes) */
		ctl_end_calls(&t);
		free(maps);
		snprintf(file, sizeof file, "/proc/%ld/maps", pid);
		maps = ctl_read_file(file, NULL);
		if (!maps) {
			target_error(pid, "cannot read the memory map of process %ld", pid);
			goto out;
		}
		if (ctl_start_calls(&t, maps))
			goto out;
		if (!ctl_agent_in(maps, &ab, loaded, sizeof loaded)) {
			e = 0;
			break;
		}
	}
	if (e == -ETIME) {
		target_error(pid, "heaptrail was held up for more than %d ms after each of 3 calls "
			     "that load the agent into process %ld (a machine this loaded may need "
			     "another try)", PARK_MS, pid);
		goto out;
	} else if (e) {
		target_error(pid, "the call to dlopen in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	s_opts = t.strings + 4096;
	s_out = t.strings + 12288;
	/* dlopen's result went with the call's registers: the map says */
	free(maps);
	snprintf(file, sizeof file, "/proc/%ld/maps", pid);
	maps = ctl_read_file(file, NULL);
	if (maps && ctl_agent_in(maps, &ab, loaded, sizeof loaded) && t.park && !by_memfd &&
	    !in_memory) {
		/* once more, stepped, to name the system call that fails (the
		 * memory file's dlopen is stepped in load_via_memfd) */
		uint64_t a[6] = { s_path, RTLD_NOW_VALUE, 0, 0, 0, 0 };
		t.step = true;
		e = ctl_remote_call(&t, libc_base + dlopen_off, a);
		t.step = false;
		free(maps);
		maps = e ? NULL : ctl_read_file(file, NULL);
	}
	if (!maps || ctl_agent_in(maps, &ab, loaded, sizeof loaded)) {
		char why[160] = "";
		if (t.failed_nr >= 0)
			snprintf(why, sizeof why, " (its last failed system call: %s: %s)",
				 ctl_syscall_name(t.failed_nr), strerror(t.failed_err));
		target_error(pid, "process %ld could not load the agent %s with dlopen%s%s", pid, agent, why,
			  seccomp_may(pid));
		goto out;
	}
	/* the directory, for a process that does not see ours: a descriptor
	 * (s_opts and s_out are above the pair's place in the strings) */
	const char *out_as = by_fd ? OUT_PENDING : outdir;
	bool pending = false;
	if (ctl_mem_rw(&t, s_opts, (void *)opts, strlen(opts) + 1, true) ||
	    ctl_mem_rw(&t, s_out, (void *)out_as, strlen(out_as) + 1, true)) {
		target_error(pid, "cannot write into process %ld's memory", pid);
		goto out;
	}
	if (by_fd && send_dir(&t, ab + call_off, ab + pair_off, outdir, &pending)) {
		if (pending)  /* the start finds nothing, and closes the pair */
			ctl_agent_call(&t, ab + call_off, ab + start_off, s_opts, s_out, 0, 0, &rv);
		goto out;
	}
	/* where the borrowed thread is, which the agent must know before it
	 * rewrites code (allocator functions hooked by name) */
	e = ctl_agent_call(&t, ab + call_off, ab + start_off, s_opts, s_out, t.saved.rip, t.saved.rsp,
			   &rv);
	if (e == -ETIME) {
		target_error(pid, "heaptrail_attach_start ran in process %ld, but its result was "
			     "lost: heaptrail was held up for more than %d ms after it (a machine "
			     "this loaded may need another try)", pid, PARK_MS);
		goto out;
	} else if (e) {
		target_error(pid, "the agent's start in process %ld failed: %s", pid, strerror(-e));
		goto out;
	}
	int r = (int)(uint32_t)rv;
	if (r == -EALREADY) {
		ctl_error("process %ld is attached already (`heaptrail detach %ld` first)", pid, pid);
		goto out;
	} else if (r == -EBADMSG && by_fd) {
		target_error(pid, "process %ld could not receive the output directory (recvmsg)%s",
			     pid, seccomp_may(pid));
		goto out;
	} else if (r == -EDEADLK) {
		ctl_error("process %ld is still running the start or stop of an earlier heaptrail "
			  "(one that was killed): try again in a moment", pid);
		goto out;
	} else if (r) {
		ctl_error("the agent could not start in process %ld: %s", pid, strerror(-r));
		goto out;
	}
	ret = 0;
out:
	ctl_end_calls(&t);
	*stopped_ms = t.stopped_ms;
	free(maps);
	return ret;
}

int ctl_agent_request(long pid, int value, int *ret, char *wrote)
{
	if (wrote)
		wrote[0] = 0;
	return ctl_call_agent(pid, "heaptrail_request", NULL, NULL, value, ret, NULL, wrote);
}

/* The output directory of an attached agent: the directory it holds open
 * (attach.c in the agent) with heaptrail.PID.attach in it. */
int ctl_attached_dir(long pid, char *out, size_t cap)
{
	char path[96], link[PATH_MAX], rec[PATH_MAX + 64];
	snprintf(path, sizeof path, "/proc/%ld/fd", pid);
	DIR *d = opendir(path);
	int found = -1;
	if (!d)
		return -1;
	for (struct dirent *e; found && (e = readdir(d));) {
		char fd[160];
		snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
		ssize_t n = readlink(fd, link, sizeof link - 1);
		if (n <= 0 || link[0] != '/')
			continue;
		link[n] = 0;
		snprintf(rec, sizeof rec, "%s/heaptrail.%ld.attach", link, pid);
		if (!access(rec, F_OK)) {
			snprintf(out, cap, "%s", link);
			found = 0;
		}
	}
	closedir(d);
	return found;
}
