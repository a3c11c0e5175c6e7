/*
 * init_signals — a child that is the init (PID 1) of a PID namespace of
 * its own, as a container's program is.  The kernel kills an init only
 * by SIGKILL or a fault, not by a signal it leaves at SIG_DFL (from
 * inside its namespace or from outside): the child sends itself SIGTERM
 * and SIGHUP, the parent sends it SIGINT, and it writes into a closed
 * pipe (EPIPE, no death); it lives on, leaks and exits 0.  A handler of
 * the agent's on SIGTERM once wrote a "killed by signal 15" report there,
 * before the leak, and then none at the real exit.
 *
 * Expected: each process (the child's pid is 1, its parent outside its
 * namespace, so both count as roots) leaks 3,333 bytes in 1 block, and
 * the child reports its exit, status 0.
 *
 * @kinds 0 definitely_lost=3333/1
 * @root
 * @modes exact sample
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include "hostile.h"

static void child(int ready, int go)
{
	if (getpid() != 1)
		die("not the init of a PID namespace");
	kill(1, SIGTERM);
	raise(SIGHUP);
	int fd[2];
	if (pipe(fd) != 0)
		die("pipe");
	close(fd[0]);
	if (write(fd[1], "x", 1) >= 0 || errno != EPIPE)
		die("write into a closed pipe did not fail with EPIPE");
	char c;
	if (write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
		die("pipe to the parent");
	leak_bytes(3333);
	scrub_stack();
	exit(0);
}

int main(void)
{
	if (unshare(CLONE_NEWPID) != 0)
		die("unshare(CLONE_NEWPID)");
	int ready[2], go[2];
	if (pipe(ready) != 0 || pipe(go) != 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		child(ready[1], go[0]);
	char c;
	if (read(ready[0], &c, 1) != 1)
		die("the child ended before it was ready");
	kill(pid, SIGINT);  /* from outside its namespace */
	nap_ms(50);
	if (write(go[1], "g", 1) != 1)
		die("write");
	int st;
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	leak_bytes(3333);
	scrub_stack();
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		say("init_signals: PID 1 survived SIGTERM, SIGHUP, SIGINT and SIGPIPE, exit 0\n");
	else
		say("init_signals: PID 1 did not exit 0\n");
	return 0;
}
