/* agentopts.c — finding the agent library, checking the options handed
 * to it, and the output directory of a run (`heaptrail run`, `heaptrail
 * attach`); and the layer's error line (ctl_error). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/control.h"
#include "format/options.h"
#include "format/vocab.h"

void ctl_verror(const char *fmt, va_list ap)
{
	fflush(stdout);
	fputs("heaptrail: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void ctl_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctl_verror(fmt, ap);
	va_end(ap);
}

/* Signals a dump trigger must not take: those that mean a fault (a
 * handler that returns would run the faulting instruction again, dumping
 * for ever), those that cannot be caught, and the two the agent uses
 * itself (scan stop and leak check). */
/* Checks a profiling flag's value as the agent will read it (the same
 * parsers), so a typo stops here rather than as a complaint on the
 * program's stderr once it runs. Writes the value to hand the agent into
 * out. Returns NULL, or why the value is bad. */
const char *ctl_check_profile_value(const char *key, const char *v, char *out, size_t cap)
{
	size_t n = strlen(v);
	uint64_t x;
	snprintf(out, cap, "%s", v);
	if (!strcmp(key, "sample")) {
		if (!strcmp(v, "auto"))
			return NULL;
		if (!fmt_opt_size(v, n, &x) || x == 0)
			return "want 'auto' or a size in bytes from 1 to 2^50, e.g. 1, 4096, 512k, 1m";
	} else if (!strcmp(key, "guard")) {
		if (!fmt_opt_size(v, n, &x) || x == 0)
			return "want a size in bytes, e.g. 1m, 64k, 1 (every allocation)";
	} else if (!strcmp(key, "interval")) {
		if (!fmt_opt_size(v, n, &x) || x == 0)
			return "want a size in bytes, e.g. 64m, 1g";
	} else if (!strcmp(key, "every")) {
		if (!fmt_opt_duration(v, n, &x) || x == 0)
			return "want a duration, e.g. 10s, 500ms, 2m";
	} else if (!strcmp(key, "timeline")) {
		if (!fmt_opt_num(v, n, 3600000, &x))
			return "want a period in milliseconds from 0 (off) to 3600000";
	} else if (!strcmp(key, "signal")) {
		int sig = fmt_signal_parse(v, n);
		if (sig == FMT_SIGNAL_REFUSED)
			return "a fault signal or one that cannot be caught";
		if (sig <= 0)
			return "want a signal number or name, e.g. USR2 or 12";
		if (sig == fmt_leak_check_signal_default() || sig == SIGRTMAX - 1)
			return "a signal heaptrail uses itself";
		snprintf(out, cap, "%d", sig);
	}
	return NULL;
}

/* The agent: next to this executable (build tree), or in ../lib/heaptrail
 * (installed); HEAPTRAIL_AGENT overrides both. */
int ctl_find_agent(char *out, size_t cap)
{
	const char *env = getenv("HEAPTRAIL_AGENT");
	char self[PATH_MAX];
	if (env && *env) {
		snprintf(out, cap, "%s", env);
		return access(out, R_OK) == 0 ? 0 : -1;
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	*slash = 0;
	snprintf(out, cap, "%s/libheaptrail.so", self);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, cap, "%s/../lib/heaptrail/libheaptrail.so", self);
	return access(out, R_OK) == 0 ? 0 : -1;
}

/* Makes the parents of dir as needed (0755, like mkdir -p), and dir
 * itself with 0700 unless it exists. fresh: dir must not exist yet (the
 * default directory, named after the pid: one that is already there, or a
 * symlink, was made by someone else). Returns 0 or -errno (-EEXIST for a
 * fresh dir that exists). */
int ctl_make_dir(const char *dir, bool fresh)
{
	char tmp[PATH_MAX];
	struct stat st;
	snprintf(tmp, sizeof tmp, "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700)) {
		if (errno != EEXIST || fresh)
			return -errno;
		if (stat(tmp, &st))
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	return access(tmp, W_OK | X_OK) ? -errno : 0;
}

/* The first file in dir that an earlier run's agent wrote (its names all
 * start "heaptrail."), copied into name; 0 when there is none. Such files
 * would be read as this run's: a run directory belongs to one run. */
int ctl_other_run_file(const char *dir, char *name, size_t cap)
{
	DIR *d = opendir(dir);
	int found = 0;
	if (!d)
		return 0;
	for (struct dirent *e; !found && (e = readdir(d));)
		if (!strncmp(e->d_name, FMT_FILE_PREFIX ".", FMT_LEN(FMT_FILE_PREFIX "."))) {
			snprintf(name, cap, "%s", e->d_name);
			found = 1;
		}
	closedir(d);
	return found;
}

long ctl_parse_count(const char *s, long max)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	return v;
}

