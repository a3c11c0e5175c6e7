/* main.c — heaptrail's entry point: one table of subcommands. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/control.h"
#include "format/fnspec.h"
#include "format/options.h"
#include "render/render.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{ "run", cmd_run, "run a program under the agent and report what it left allocated" },
	{ "report", cmd_report, "print the report of a saved run again (text or --json)" },
	{ "attach", cmd_attach, "start recording in a running process (ptrace), without a restart" },
	{ "detach", cmd_detach, "stop recording in an attached process; it runs on untouched" },
	{ "dump", cmd_dump, "write a heap dump of a process under heaptrail, now" },
	{ "serve", cmd_serve, "serve pprof and Prometheus endpoints over HTTP for a process, live" },
	{ "leaks", cmd_leaks, "run a leak check in a process started under heaptrail, now" },
	{ "growth", cmd_growth, "rank the sites whose live bytes grow across a run's dumps" },
	{ "top", cmd_top, "the functions holding the most memory in a heap dump" },
	{ "diff", cmd_diff, "what grew and what shrank between two heap dumps" },
	{ "flame", cmd_flame, "an interactive flame graph (SVG) of a heap dump" },
	{ "collapsed", cmd_collapsed, "a heap dump as folded stacks, for flamegraph.pl and speedscope" },
	{ "pprof", cmd_pprof, "a heap dump as a pprof profile (.pb.gz)" },
	{ "timeline", cmd_timeline, "the heap over time, with the top sites at the peak" },
	{ "callgraph", cmd_callgraph, "a heap dump's call graph in Graphviz dot" },
	{ "html", cmd_html, "one self-contained HTML page of a run: leaks, growth, timeline, flame" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: heaptrail <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(out, "\n'heaptrail <command> --help' describes a command's options.\n");
}

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctl_verror(fmt, ap);
	va_end(ap);
}

const char *cli_shown(const char *v)
{
	static char ring[4][200];
	static unsigned next;
	char *out = ring[next++ % 4];
	return v ? fmt_shown(out, sizeof ring[0], v, strlen(v)) : "";
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (!strcmp(argv[*i], name)) {
		if (*i + 1 >= argc)
			return "";
		return argv[++*i];
	}
	return NULL;
}

int cli_each_options_line(const char *path, const char *cmd,
			  int (*fn)(int argc, char **argv, void *ctx), void *ctx)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		cli_error("%s: cannot read the options file '%s': %s", cmd, path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int ret = 0;
	while (!ret && (len = getline(&line, &cap, f)) >= 0) {
		char *s = line, *e = line + len;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*e = 0;
		if (s == e || *s == '#')
			continue;
		/* "--flag VALUE": the value is the rest of the line, spaces and all */
		char *argv[4] = { (char *)cmd, s, NULL, NULL };
		char *sp = s + strcspn(s, " \t");
		if (*sp) {
			*sp++ = 0;
			while (*sp == ' ' || *sp == '\t')
				sp++;
			argv[2] = sp;
		}
		ret = fn(argv[2] ? 3 : 2, argv, ctx);
	}
	if (!ret && ferror(f)) {
		cli_error("%s: cannot read the options file '%s': %s", cmd, path, strerror(errno));
		ret = -1;
	}
	free(line);
	fclose(f);
	return ret;
}

int cli_fn_opt(int argc, char **argv, int *i, const char *cmd, char *fns, size_t cap)
{
	for (int k = 0; k < FMT_FNK_COUNT; k++) {
		char flag[32];
		snprintf(flag, sizeof flag, "--%s-fn", fmt_fn_kind_names[k]);
		const char *v = cli_opt_value(argc, argv, i, flag);
		if (!v)
			continue;
		struct fmt_fnspec spec;
		const char *why = v[0] ? fmt_fnspec_parse(k, v, strlen(v), &spec) : "a spec is needed";
		size_t n = strlen(fns);
		if (!why && n + strlen(v) + 16 >= cap)
			why = "too many allocator functions";
		if (why) {
			cli_error("%s: bad %s '%s': %s", cmd, flag, cli_shown(v), why);
			return -1;
		}
		snprintf(fns + n, cap - n, ",%s_fn=%s", fmt_fn_kind_names[k], v);
		return 1;
	}
	if (!strcmp(argv[*i], "--no-builtin-fns")) {
		strncat(fns, ",builtin_fns=0", cap - strlen(fns) - 1);
		return 1;
	}
	return 0;
}

int cli_live_opt(int argc, char **argv, int *i, struct ctl_live_opts *o)
{
	const char *v;
	if ((v = cli_opt_value(argc, argv, i, "--http"))) {
		if (!*v) {
			cli_error("--http needs an address (127.0.0.1:6060, or a unix socket path)");
			return -1;
		}
		o->addr = v;
		return 1;
	}
	if (!strcmp(argv[*i], "--http-allow-remote")) {
		o->public_ok = true;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--push"))) {
		if (strncmp(v, "http://", 7)) {
			cli_error("--push: want an http:// URL (Pyroscope's server), not '%s'", v);
			return -1;
		}
		o->push = v;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--push-name"))) {
		if (!*v || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "0123456789._-") != strlen(v)) {
			cli_error("--push-name: want letters, digits, '.', '_' or '-', not '%s'", v);
			return -1;
		}
		o->push_name = v;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--push-every"))) {
		uint64_t ms;
		if (!fmt_opt_duration(v, strlen(v), &ms) || ms < 100 || ms > 86400000) {
			cli_error("--push-every: want a duration from 100ms to 24h, not '%s'", v);
			return -1;
		}
		o->push_every_ms = (long)ms;
		return 1;
	}
	return 0;
}

void cli_report_opts_init(struct cli_report_opts *o)
{
	memset(o, 0, sizeof *o);
	o->shown = PROF_KINDS_DEFAULT_SHOWN;
	o->errors = PROF_KINDS_DEFAULT_SHOWN;
}

int cli_report_opt(int argc, char **argv, int *i, struct cli_report_opts *o)
{
	const char *v, *err;
	int line;
	if ((v = cli_opt_value(argc, argv, i, "--show-leak-kinds"))) {
		if (prof_kinds_parse(v, &o->shown)) {
			cli_error("--show-leak-kinds: unknown kind in '%s'", cli_shown(v));
			return -1;
		}
	} else if ((v = cli_opt_value(argc, argv, i, "--errors-for-leak-kinds"))) {
		if (prof_kinds_parse(v, &o->errors)) {
			cli_error("--errors-for-leak-kinds: unknown kind in '%s'", cli_shown(v));
			return -1;
		}
	} else if ((v = cli_opt_value(argc, argv, i, "--suppressions"))) {
		if (prof_supps_load(&o->supps, v, &err, &line)) {
			if (line)
				cli_error("%s:%d: %s", v, line, err);
			else
				cli_error("cannot read suppressions '%s': %s", v, err);
			return -1;
		}
	} else if ((v = cli_opt_value(argc, argv, i, "--binary-path"))) {
		o->binary_path = v;
	} else if ((v = cli_opt_value(argc, argv, i, "--pool"))) {
		o->pool = v;
	} else if (!strcmp(argv[*i], "--json")) {
		o->json = true;
	} else if (!strcmp(argv[*i], "--gen-suppressions") ||
		   !strcmp(argv[*i], "--gen-suppressions=yes")) {
		o->gen_suppressions = true;
	} else {
		return 0;
	}
	if (v && !*v) {
		cli_error("option '%s' needs a value", cli_shown(argv[*i]));
		return -1;
	}
	return 1;
}

unsigned cli_report_sym_kinds(const struct cli_report_opts *o)
{
	return o->json || o->supps.n ? PROF_KINDS_ALL : o->shown;
}

void cli_report_apply(const struct cli_report_opts *o, struct prof_run *run)
{
	for (size_t i = 0; i < run->nprocs; i++) {
		if (o->pool)
			prof_process_filter_pool(&run->procs[i], o->pool);
		prof_supps_apply(&o->supps, &run->procs[i]);
	}
}

void cli_report_print(FILE *out, struct prof_run *run, const struct cli_report_opts *o)
{
	cli_report_apply(o, run);
	if (o->json)
		render_json(out, run, &(struct render_json_opts){
			.suppressions = o->gen_suppressions });
	else
		render_text(out, run, &(struct render_text_opts){
			.kinds = o->shown, .gen_suppressions = o->gen_suppressions,
			.supps = &o->supps });
}

void cli_report_opts_release(struct cli_report_opts *o)
{
	prof_supps_release(&o->supps);
}

static int write_all(int fd, const char *data, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (size_t)w;
	}
	return 0;
}

/* A path that is not a regular file (a FIFO, /dev/null, a terminal):
 * written through, as a shell's '>' would; never replaced by a file. */
static int write_through(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	int ret = write_all(fd, data, len);
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

int cli_write_file(const char *path, const char *data, size_t len)
{
	struct stat st;
	char *real = NULL;
	bool exists = !lstat(path, &st);
	if (exists && S_ISLNK(st.st_mode)) {
		/* -o a symlink: the file it names gets the output (renamed into
		 * place beside it), not the link replaced by a file */
		real = realpath(path, NULL);
		if (!real)
			return -errno;
		path = real;
		exists = !lstat(path, &st);
	}
	int ret = 0;
	if (exists && !S_ISREG(st.st_mode)) {
		ret = S_ISDIR(st.st_mode) ? -EISDIR : write_through(path, data, len);
		free(real);
		return ret;
	}
	size_t n = strlen(path) + 16;
	char *tmp = malloc(n);
	if (!tmp) {
		free(real);
		return -ENOMEM;
	}
	/* An unpredictable name created O_EXCL (mkostemp), so nobody can plant
	 * a symlink there; the file appears under path whole or not at all. */
	snprintf(tmp, n, "%s.XXXXXX", path);
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	/* mkostemp makes it 0600, and it stays so whatever the umask: a
	 * report holds the program's argv, a profile its function names */
	ret = write_all(fd, data, len);
	if (!ret && fsync(fd) && errno != EINVAL && errno != EROFS)
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
out:
	free(tmp);
	free(real);
	return ret;
}

int cli_output_ok(const char *path)
{
	struct stat st;
	char *copy = strdup(path);
	int ret = 0;
	if (!copy)
		return -ENOMEM;
	if (stat(dirname(copy), &st))
		ret = -errno;
	else if (!S_ISDIR(st.st_mode))
		ret = -ENOTDIR;
	else if (!stat(path, &st) && S_ISDIR(st.st_mode))
		ret = -EISDIR;
	free(copy);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	cli_error("unknown command '%s' (try 'heaptrail --help')", cli_shown(argv[1]));
	return 2;
}
