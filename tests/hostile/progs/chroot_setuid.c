/*
 * chroot_setuid — chroot into an empty directory, then drop to uid/gid
 * 65534, then exit: the output directory is out of reach and not
 * writable.  The report must still be written (the agent kept a way to
 * it) or the run must fail (@ci).  Needs root.
 *
 * Expected: 5,000 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=5000/1
 * @ci
 * @unwritable
 * @root
 */
#include <grp.h>
#include <sys/stat.h>

#include "hostile.h"

int main(void)
{
	char dir[] = "/tmp/hostile-chroot-XXXXXX";
	if (!mkdtemp(dir))
		die("mkdtemp");
	leak_bytes(5000);
	scrub_stack();
	printf("chroot_setuid: chroot and setuid 65534\n");
	fflush(stdout);
	/* into it, remove it (nothing is left in /tmp), then make it the root */
	if (chdir(dir) || rmdir(dir) || chroot("."))
		die("chroot");
	gid_t g = 65534;
	if (setgroups(1, &g) || setgid(65534) || setuid(65534))
		die("setuid");
	return 0;
}
