/* HEAPTRAIL_OPTIONS pieces shared by the agent and the CLI (options.h).
 * No allocation, no libc beyond signal numbers: linked into the agent. */
#include "format/options.h"

#include <signal.h>
#include <stdint.h>
#include "agent/banned.h"   /* linked into the agent: held to its rules */

static const struct {
	const char *name;
	int sig;
} sig_names[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ILL", SIGILL },
	{ "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "IOT", SIGIOT }, { "BUS", SIGBUS },
	{ "FPE", SIGFPE }, { "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },
	{ "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT },
	{ "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
	{ "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH },
	{ "IO", SIGIO }, { "POLL", SIGPOLL }, { "PWR", SIGPWR }, { "SYS", SIGSYS },
};

bool fmt_signal_usable(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP:
	case SIGSYS: case SIGABRT: case SIGKILL: case SIGSTOP:
		return false;
	}
	return sig > 0 && sig <= SIGRTMAX;
}

static char upper(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
}

/* s[0..n) equals word, ignoring case. */
static bool same_word(const char *s, size_t n, const char *word)
{
	size_t i = 0;
	for (; i < n && word[i]; i++)
		if (upper(s[i]) != word[i])
			return false;
	return i == n && !word[i];
}

/* A decimal number of at most 3 digits; -1 when s[0..n) is not one. */
static int small_num(const char *s, size_t n)
{
	int v = 0;
	if (!n || n > 3)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int by_name(const char *s, size_t n)
{
	if (n > 3 && same_word(s, 3, "SIG")) {
		s += 3;
		n -= 3;
	}
	for (size_t i = 0; i < sizeof sig_names / sizeof sig_names[0]; i++)
		if (same_word(s, n, sig_names[i].name))
			return sig_names[i].sig;
	if (n >= 5 && (same_word(s, 5, "RTMIN") || same_word(s, 5, "RTMAX"))) {
		bool min = upper(s[4]) == 'N';
		int base = min ? SIGRTMIN : SIGRTMAX;
		if (n == 5)
			return base;
		int off = small_num(s + 6, n - 6);
		if (off < 0 || s[5] != (min ? '+' : '-'))
			return FMT_SIGNAL_BAD;
		int sig = min ? base + off : base - off;
		return sig >= SIGRTMIN && sig <= SIGRTMAX ? sig : FMT_SIGNAL_BAD;
	}
	return FMT_SIGNAL_BAD;
}

int fmt_signal_parse(const char *s, size_t n)
{
	int sig = small_num(s, n);
	if (sig == 0)
		return 0;
	if (sig < 0)
		sig = by_name(s, n);
	else if (sig > SIGRTMAX)
		return FMT_SIGNAL_BAD;
	if (sig < 0)
		return sig;
	return fmt_signal_usable(sig) ? sig : FMT_SIGNAL_REFUSED;
}

void fmt_options_each(const char *opts,
		      void (*fn)(const char *key, size_t klen, const char *val, size_t vlen,
				 void *arg),
		      void *arg)
{
	const char *s = opts;
	while (s && *s) {
		/* a comma inside parentheses belongs to the value (alloc_fn=F(a,b)) */
		const char *e = s;
		int depth = 0;
		for (; *e && (*e != ',' || depth > 0); e++)
			depth += *e == '(' ? 1 : *e == ')' && depth > 0 ? -1 : 0;
		if (e > s) {
			size_t len = (size_t)(e - s), klen = 0;
			while (klen < len && s[klen] != '=' && s[klen] != ':')
				klen++;
			if (klen < len)
				fn(s, klen, s + klen + 1, len - klen - 1, arg);
			else
				fn(s, len, NULL, 0, arg);
		}
		s = *e ? e + 1 : e;
	}
}

int fmt_leak_check_signal_default(void)
{
	return SIGRTMAX - 2;
}

char *fmt_shown(char *out, size_t cap, const char *s, size_t n)
{
	/* "... (" + up to 20 digits + " bytes)" + NUL */
	size_t keep = n < cap ? n : cap - 34, i;
	for (i = 0; i < keep; i++) {
		unsigned char c = (unsigned char)s[i];
		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (keep < n) {
		static const char cut[] = "... (", unit[] = " bytes)";
		char dec[24];
		int d = 0;
		size_t v = n;
		do
			dec[d++] = (char)('0' + v % 10);
		while ((v /= 10));
		for (size_t k = 0; cut[k]; k++)
			out[i++] = cut[k];
		while (d)
			out[i++] = dec[--d];
		for (size_t k = 0; unit[k]; k++)
			out[i++] = unit[k];
	}
	out[i] = 0;
	return out;
}

bool fmt_run_id_ok(const char *s, size_t n)
{
	if (!n || n > FMT_RUN_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

static void run_id_one(const char *key, size_t klen, const char *val, size_t vlen, void *arg)
{
	char *out = arg;
	if (!val || klen != 3 || key[0] != 'r' || key[1] != 'u' || key[2] != 'n' ||
	    !fmt_run_id_ok(val, vlen))
		return;
	for (size_t i = 0; i < vlen; i++)
		out[i] = val[i];
	out[vlen] = 0;
}

size_t fmt_run_id(const char *opts, char out[FMT_RUN_ID_MAX + 1])
{
	size_t n = 0;
	out[0] = 0;
	fmt_options_each(opts, run_id_one, out);
	while (out[n])
		n++;
	return n;
}

bool fmt_opt_num(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > max / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

bool fmt_opt_size(const char *s, size_t n, uint64_t *out)
{
	uint64_t mult = 1, v;
	if (n > 1) {
		switch (s[n - 1] | 32) {
		case 'k': mult = 1ull << 10; n--; break;
		case 'm': mult = 1ull << 20; n--; break;
		case 'g': mult = 1ull << 30; n--; break;
		}
	}
	if (!fmt_opt_num(s, n, (1ull << 50) / mult, &v))
		return false;
	*out = v * mult;
	return true;
}

bool fmt_opt_duration(const char *s, size_t n, uint64_t *out)
{
	uint64_t mult = 1000, v;
	if (n > 2 && s[n - 2] == 'm' && s[n - 1] == 's') {
		mult = 1;
		n -= 2;
	} else if (n > 1 && s[n - 1] == 's') {
		n--;
	} else if (n > 1 && s[n - 1] == 'm') {
		mult = 60000;
		n--;
	}
	if (!fmt_opt_num(s, n, 1ull << 40, &v))
		return false;
	*out = v * mult;
	return true;
}
