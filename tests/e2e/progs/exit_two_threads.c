/*
 * exit_two_threads — two threads call exit() at the same moment while
 * main waits. Exactly one of the two exits may run (glibc before 2.41
 * lets both run the exit handlers at once, and the first to reach
 * _exit used to kill the other in the middle of heaptrail's report, so
 * no report was left); the agent's exit() hook makes the second caller
 * wait, as glibc 2.41 does.
 *
 * The threads exit only once main is blocked in pause(): under load a
 * thread could otherwise reach exit() while main was still inside
 * pthread_create, whose live frames may still hold the start of the
 * second thread's DTV, making it "still reachable" where valgrind (which
 * runs main on to pause() first) says "possibly lost".
 *
 *   lose_one  64/1 definitely lost (its pointer is overwritten)
 *
 * Expected (valgrind memcheck, Debian 12):
 *   definitely lost 64/1; possibly lost 544/2: the two live threads' DTVs
 *   (pointed to past their start), 32 bytes bigger each under heaptrail
 *   in use at exit: 608 bytes in 3 blocks
 *
 * @proc 0 exit=0 in_use=608/3
 * @kinds 0 definitely_lost=64/1 possibly_lost=544/2
 * @leak 0 lose_one 64/1 definitely_lost
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static pthread_barrier_t barrier;
static char main_syscall[64]; /* /proc/self/task/TID/syscall of main */

/* Whether main is blocked in pause(): the file's first field is the
 * number of the system call a thread is blocked in. */
static int main_in_pause(void)
{
	char buf[32];
	int fd = open(main_syscall, O_RDONLY);
	if (fd < 0)
		return 1; /* no /proc: nothing to wait for */
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	return atoi(buf) == SYS_pause && buf[0] != '-';
}

NOINLINE void lose_one(void)
{
	char *p = malloc(64); /* @site lose_one */
	memset(p, 1, 64);
	KEEP(p);
}

static void *leave(void *arg)
{
	(void)arg;
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 10000 && !main_in_pause(); i++)
		nanosleep(&ms, NULL);
	pthread_barrier_wait(&barrier);
	exit(0);
}

int main(void)
{
	pthread_t a, b;
	lose_one();
	snprintf(main_syscall, sizeof main_syscall, "/proc/self/task/%ld/syscall",
		 (long)syscall(SYS_gettid));
	if (write(1, "go\n", 3) != 3)
		return 1;
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&a, NULL, leave, NULL);
	pthread_create(&b, NULL, leave, NULL);
	for (;;)
		pause();
}
