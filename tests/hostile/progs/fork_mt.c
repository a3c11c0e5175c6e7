/*
 * fork_mt — fork from a multithreaded program: 4 threads allocate and
 * free in a loop while the main thread forks 20 children; each child
 * allocates, leaks 300 bytes and exits through exit() (writing its
 * report), then the threads stop.  The forked child of a multithreaded
 * program once hung for ever in its exit report.
 *
 * Expected: root process 1,000 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=1000/1
 * @vg
 * @leaks-calls
 * @timeout 30
 * (21 reports to symbolize: about 1.5 s of CPU, more on a loaded machine)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "hostile.h"

static atomic_int stop;

static void *spin(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = malloc(48);
		KEEP(p);
		free(p);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, spin, NULL))
			die("pthread_create");
	int ok = 0;
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			leak_bytes(300);
			scrub_stack();
			exit(3);
		}
		int st;
		if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 3)
			ok++;
		nap_ms(20);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	leak_bytes(1000);
	scrub_stack();
	printf("fork_mt: %d of 20 children exited 3\n", ok);
	return 0;
}
