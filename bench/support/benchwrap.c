/*
 * benchwrap — runs one benchmarked command for bench/run: with a time
 * limit, with extra environment for the command only (so the wrapper
 * itself is never preloaded), and records the peak RSS.
 *
 *   benchwrap [-t SECONDS] [-m FILE] [-e NAME=VALUE]... -- PROG [ARGS...]
 *
 * The command runs in its own process group; when the limit passes the
 * whole group is killed (heaptrack's helper and gcc's children too) and
 * benchwrap exits 124, as timeout(1) does. Otherwise it exits with the
 * command's status (128 + signal when it was killed by one).
 *
 * -m appends one line to FILE: "<peak RSS in KiB> <exit status>", or
 * "timeout" when the limit passed. The peak is ru_maxrss of
 * RUSAGE_CHILDREN: the largest resident set of any process of the command
 * that was waited for (for gcc, cc1; for heaptrack, the larger of the
 * program and heaptrack's interpreter), not a sum.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;
static pid_t child;

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
	kill(-child, SIGKILL);
}

static void usage(void)
{
	fprintf(stderr, "usage: benchwrap [-t SECONDS] [-m FILE] [-e NAME=VALUE]... -- PROG [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *rss_file = NULL;
	unsigned limit = 0;
	int opt;
	char **env = calloc((size_t)argc, sizeof *env);
	int nenv = 0;

	while ((opt = getopt(argc, argv, "+t:m:e:")) != -1) {
		switch (opt) {
		case 't':
			limit = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'm':
			rss_file = optarg;
			break;
		case 'e':
			if (!strchr(optarg, '='))
				usage();
			env[nenv++] = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();

	child = fork();
	if (child < 0) {
		perror("benchwrap: fork");
		return 125;
	}
	if (child == 0) {
		setpgid(0, 0);
		for (int i = 0; i < nenv; i++)
			putenv(env[i]);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "benchwrap: cannot run '%s': %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	setpgid(child, child);	/* also here, so the alarm never misses the group */

	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	if (limit)
		alarm(limit);

	int status;
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			perror("benchwrap: waitpid");
			return 125;
		}
	}
	alarm(0);
	/* the group may outlive its leader (a background helper): end it */
	kill(-child, SIGKILL);

	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (timed_out)
		code = 124;
	if (rss_file) {
		struct rusage ru;
		getrusage(RUSAGE_CHILDREN, &ru);
		FILE *f = fopen(rss_file, "a");
		if (!f) {
			fprintf(stderr, "benchwrap: cannot open '%s': %s\n", rss_file, strerror(errno));
			return 125;
		}
		if (timed_out)
			fprintf(f, "timeout\n");
		else
			fprintf(f, "%ld %d\n", ru.ru_maxrss, code);
		fclose(f);
	}
	return code;
}
