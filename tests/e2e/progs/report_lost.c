/*
 * report_lost — the exit report cannot be written; the run must fail
 * (used by the cli:report-lost test; also in briefs/repro as
 * life-report-lost.c).
 *
 * Leaks 100 bytes, then makes the agent's exit report impossible, by the
 * mode in argv[1]:
 *   rlimit3  RLIMIT_NOFILE soft and hard 3: no descriptor for any file
 *   soft3    soft 3, hard unchanged: the agent borrows up to the hard
 *            limit, so the report IS written (control case)
 *   rmdir    removes the (empty) output directory $HEAPTRAIL_OUTPUT
 *   setuid   (root) setuid(65534) with a 0700 output directory
 *   chroot   (root) chroot into an empty directory
 *   full     fills $HEAPTRAIL_OUTPUT (mount a tiny tmpfs there first:
 *            mount -t tmpfs -o size=64k none DIR)
 * It prints "done MODE" and exits 0.
 *
 * Run:  cc -O0 -g life-report-lost.c -o rl
 *       heaptrail run -o DIR --error-exitcode=42 -- ./rl rlimit3; echo $?
 * Correct: stderr has "heaptrail: cannot write the leak report
 * 'DIR/heaptrail.PID.leaks': <reason>" and the status is 42 (before the
 * fix: "no report from", status 0 — CI passes a leaking program). With
 * soft3 the report is written and the status is 42 because of the leak.
 * Bare (no heaptrail) every mode prints "done MODE" and exits 0.
 *
 * @cli-only
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "rlimit3";
	const char *dir = getenv("HEAPTRAIL_OUTPUT");
	char *volatile leak = malloc(100);
	memset(leak, 1, 100);
	leak = NULL;
	printf("done %s\n", mode);
	fflush(stdout);
	if (!strcmp(mode, "rlimit3") || !strcmp(mode, "soft3")) {
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = 3;
		if (!strcmp(mode, "rlimit3"))
			rl.rlim_max = 3;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			perror("setrlimit");
	} else if (!strcmp(mode, "rmdir") && dir) {
		if (rmdir(dir))
			perror("rmdir");
	} else if (!strcmp(mode, "setuid") && dir) {
		chmod(dir, 0700);
		if (setgid(65534) || setuid(65534))
			perror("setuid");
	} else if (!strcmp(mode, "chroot")) {
		char tmpl[] = "/tmp/life-chroot-XXXXXX";
		/* a removed directory as the root: nothing is left in /tmp */
		if (!mkdtemp(tmpl) || chdir(tmpl) || rmdir(tmpl) || chroot("."))
			perror("chroot");
	} else if (!strcmp(mode, "full") && dir) {
		char path[4096], buf[4096];
		memset(buf, 'x', sizeof buf);
		snprintf(path, sizeof path, "%s/filler", dir);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		while (fd >= 0 && write(fd, buf, sizeof buf) > 0)
			;
		if (fd >= 0)
			close(fd);
	}
	return 0;
}
