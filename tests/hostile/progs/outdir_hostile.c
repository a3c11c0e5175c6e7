/*
 * outdir_hostile — attacks the agent's output directory, given as the
 * last argument: "plant DIR VICTIM" plants a symlink to VICTIM at every
 * name the agent writes for this process (reports, leak checks, dumps,
 * timeline, and their temporary names) and then asks for a leak check
 * and a dump; "remove DIR" removes the directory and everything in it.
 * The program then leaks and exits.  The agent must never follow a
 * symlink; VICTIM must stay as it was.
 *
 * Expected: 3,300 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=3300/1
 * @modes none
 */
#include <dirent.h>

#include "hostile.h"

static void plant(const char *dir, const char *victim)
{
	static const char *names[] = {
		"leaks", "check-1.leaks", "check-2.leaks", "timeline",
		"0000.api.heap", "0001.api.heap", "0000.every.heap", "0001.every.heap",
		"0002.every.heap", "0000.final.heap", "0001.final.heap", "peak.heap",
	};
	char path[4096];
	int pid = (int)getpid();
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(path, sizeof path, "%s/heaptrail.%d.%s", dir, pid, names[i]);
		unlink(path);
		if (symlink(victim, path))
			die("symlink %s", path);
		snprintf(path, sizeof path, "%s/heaptrail.%d.%s.tmp.%d", dir, pid, names[i], pid);
		if (symlink(victim, path))
			die("symlink %s", path);
	}
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	char path[4096];
	if (d) {
		for (struct dirent *e; (e = readdir(d));) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	if (rmdir(dir))
		die("rmdir %s", dir);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		die("usage: outdir_hostile plant DIR VICTIM | remove DIR");
	if (!strcmp(argv[1], "plant") && argc > 3) {
		plant(argv[2], argv[3]);
		maybe_leak_check();
		if (heaptrail_dump)
			heaptrail_dump(NULL);
	} else if (!strcmp(argv[1], "remove"))
		remove_dir(argv[2]);
	leak_bytes(3300);
	scrub_stack();
	printf("outdir_hostile: %s done\n", argv[1]);
	return 0;
}
