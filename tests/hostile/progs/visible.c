/*
 * visible — what a program can see of the agent: the fd its first open()
 * gets, how many threads it has, whether unshare(CLONE_NEWUSER) works
 * (it fails with EINVAL in a multithreaded process).  Under heaptrail,
 * in every mode (the timeline and `every` included), it must see what it
 * sees bare.
 *
 * Expected: nothing lost.
 *
 * @kinds 0
 * @vg
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>

#include "hostile.h"

int main(void)
{
	nap_ms(150);	/* the agent's timer thread has started by now */
	int fd = open("/dev/null", O_RDONLY);
	printf("visible: first open() -> %d\n", fd);
	close(fd);
	int threads = 0;
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *e; (e = readdir(d));)
		threads += e->d_name[0] != '.';
	closedir(d);
	printf("visible: %d thread(s)\n", threads);
	int rc = unshare(CLONE_NEWUSER);
	printf("visible: unshare(CLONE_NEWUSER) -> %s\n",
	       rc == 0 ? "0" : errno == EINVAL ? "EINVAL" : errno == EPERM ? "EPERM" : "other error");
	return 0;
}
