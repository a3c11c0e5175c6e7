/*
 * preload_cleared — a child re-executes this program with LD_PRELOAD
 * removed from its environment (as sandboxes and sudo-like tools do):
 * it runs without the agent, leaks, prints and exits 2; the parent
 * prints its status.  Nothing may wait for a report the child will
 * never write.
 *
 * Expected: root 20 bytes in 1 block definitely lost; exit 0.
 *
 * @kinds 0 definitely_lost=20/1
 * @vg
 */
#include <sys/wait.h>

#include "hostile.h"

extern char **environ;

int main(int argc, char **argv)
{
	if (argc > 1) {
		leak_bytes(33);
		printf("child: LD_PRELOAD %s\n", getenv("LD_PRELOAD") ? "set" : "unset");
		return 2;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char *env[256];
		int n = 0;
		for (char **e = environ; *e && n < 255; e++)
			if (strncmp(*e, "LD_PRELOAD=", 11))
				env[n++] = *e;
		env[n] = NULL;
		char *args[] = { "/proc/self/exe", "child", NULL };
		execve(args[0], args, env);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("parent: child exited %d\n", WEXITSTATUS(st));
	leak_bytes(20);
	scrub_stack();
	return 0;
}
