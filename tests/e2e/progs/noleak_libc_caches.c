/*
 * noleak_libc_caches — frees everything it allocates, but makes libc
 * fill the caches it keeps for the life of the process (noleak_libc
 * covers locale, stdio, NSS passwd and threads): dlopen and dlclose of
 * a system library, dlerror after a failed dlopen, time zones (TZ set
 * with setenv, then localtime and strftime), gettext's domain bindings,
 * iconv and its gconv modules, NSS group lookups, regex, and wide-char
 * stdio on a memory stream.  libc points at what it keeps from its own
 * data, and __libc_freeres releases it at exit: nothing is lost, and
 * nothing at all is in use.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   in use at exit: 0 bytes in 0 blocks
 *
 * @link -ldl
 * @proc 0 exit=0 in_use=0/0
 * @kinds 0
 * @usage-varies gconv, NSS and time-zone loading differ under valgrind
 *   (542 allocations here, 546 there)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <grp.h>
#include <iconv.h>
#include <libintl.h>
#include <locale.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "kinds.h"

static int use_dlopen(void)
{
	void *h = dlopen("libm.so.6", RTLD_NOW);
	double (*cosine)(double);
	int ok;

	if (!h)
		return 0;
	cosine = (double (*)(double))dlsym(h, "cos");
	ok = cosine && cosine(0.0) == 1.0;
	dlclose(h);
	return ok;
}

static int use_dlerror(void)
{
	void *h = dlopen("libheaptrail-no-such-library.so", RTLD_NOW);
	const char *err = dlerror();

	if (h)
		dlclose(h);
	return err != NULL && strstr(err, "no-such-library") != NULL;
}

static int use_timezone(void)
{
	time_t t = 86400 * 365;
	struct tm tm;
	char buf[64];

	if (setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1))
		return 0;
	tzset();
	if (!localtime_r(&t, &tm))
		return 0;
	return strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M %Z", &tm) > 0 &&
	       strcmp(buf, "1971-01-01 01:00 CET") == 0;
}

static int use_gettext(void)
{
	const char *s;

	bindtextdomain("heaptrail-test", "/nonexistent/locale");
	textdomain("heaptrail-test");
	s = gettext("untranslated");
	return strcmp(s, "untranslated") == 0;
}

static int use_iconv(void)
{
	iconv_t cd = iconv_open("UTF-16LE", "ISO-8859-1");
	char in[] = "caf\xe9", out[32];
	char *ip = in, *op = out;
	size_t il = 4, ol = sizeof(out);
	int ok;

	if (cd == (iconv_t)-1)
		return 0;
	ok = iconv(cd, &ip, &il, &op, &ol) != (size_t)-1 && ol == 24;
	iconv_close(cd);
	return ok;
}

static int use_groups(void)
{
	struct group *g = getgrgid(0);

	return g != NULL && getgrnam("root") != NULL;
}

static int use_regex(void)
{
	regex_t re;
	regmatch_t m[2];
	int ok;

	if (regcomp(&re, "^([a-z]+)-[0-9]+$", REG_EXTENDED))
		return 0;
	ok = regexec(&re, "heap-42", 2, m, 0) == 0 && m[1].rm_eo == 4;
	regfree(&re);
	return ok;
}

static int use_wide_memstream(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int ok;

	if (!f)
		return 0;
	fprintf(f, "%ls and %d", L"wide text", 42);
	fclose(f);
	ok = strcmp(buf, "wide text and 42") == 0;
	free(buf);
	return ok;
}

int main(void)
{
	setlocale(LC_ALL, "");
	printf("dlopen: %d\n", use_dlopen());
	printf("dlerror: %d\n", use_dlerror());
	printf("time zone: %d\n", use_timezone());
	printf("gettext: %d\n", use_gettext());
	printf("iconv: %d\n", use_iconv());
	printf("groups: %d\n", use_groups());
	printf("regex: %d\n", use_regex());
	printf("memstream: %d\n", use_wide_memstream());
	scrub_stack();
	return 0;
}
