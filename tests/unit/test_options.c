/*
 * test_options — format/options.c: the signal values HEAPTRAIL_OPTIONS
 * takes (numbers and names, refused faults), and the leak-check signal a
 * program's options give, which the agent and `heaptrail leaks PID` must
 * read alike (key=value or key:value, the last well-formed one wins);
 * the run id the agent takes, which `heaptrail run` filters reports by.
 *
 * Prints "ok - ..." / "not ok - ..." per check; exits 1 when one failed.
 */
#include "format/fnspec.h"
#include "format/options.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void expect_int(int got, int want, const char *what)
{
	printf("%s - %s: %d (expected %d)\n", got == want ? "ok" : "not ok", what, got, want);
	if (got != want)
		failures++;
}

struct seen {
	int n;
	char vals[8][64];
};

static void note(const char *key, size_t klen, const char *val, size_t vlen, void *arg)
{
	struct seen *s = arg;
	if (s->n < 8)
		snprintf(s->vals[s->n++], sizeof s->vals[0], "%.*s", (int)vlen, val ? val : "");
}

/* 1 when text parses as a spec of kind. */
static int spec(int kind, const char *text, struct fmt_fnspec *out)
{
	return fmt_fnspec_parse(kind, text, strlen(text), out) == NULL;
}

static int parse(const char *s)
{
	return fmt_signal_parse(s, strlen(s));
}

int main(void)
{
	expect_int(parse("12"), SIGUSR2, "number");
	expect_int(parse("0"), 0, "0 is off");
	expect_int(parse("SIGUSR1"), SIGUSR1, "SIG name");
	expect_int(parse("usr2"), SIGUSR2, "short name, lower case");
	expect_int(parse("SIGRTMIN+3"), SIGRTMIN + 3, "SIGRTMIN+3");
	expect_int(parse("RTMAX-2"), SIGRTMAX - 2, "RTMAX-2");
	expect_int(parse("RTMAX"), SIGRTMAX, "RTMAX");
	expect_int(parse("RTMIN+99"), FMT_SIGNAL_BAD, "RTMIN+99 out of range");
	expect_int(parse("RTMAX+1"), FMT_SIGNAL_BAD, "RTMAX+1");
	expect_int(parse("65"), FMT_SIGNAL_BAD, "65");
	expect_int(parse(""), FMT_SIGNAL_BAD, "empty");
	expect_int(parse("-1"), FMT_SIGNAL_BAD, "-1");
	expect_int(parse("12x"), FMT_SIGNAL_BAD, "12x");
	expect_int(parse("SIG"), FMT_SIGNAL_BAD, "SIG");
	expect_int(parse("bogus"), FMT_SIGNAL_BAD, "bogus");
	static const char *const refused[] = { "11", "SIGSEGV", "7", "bus", "4", "SIGILL", "8",
					       "fpe", "5", "TRAP", "6", "SIGABRT", "31", "sys",
					       "9", "KILL", "19", "SIGSTOP" };
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		char what[64];
		snprintf(what, sizeof what, "%s refused", refused[i]);
		expect_int(parse(refused[i]), FMT_SIGNAL_REFUSED, what);
	}

	expect_int(fmt_leak_check_signal_default(), SIGRTMAX - 2, "default");

	/* a value quoted in a message: control bytes shown as '?', one that
	 * does not fit cut with its length said */
	char shown[FMT_SHOWN_MIN], val[200];
	expect_int(strcmp(fmt_shown(shown, sizeof shown, "a\nb\x1b", 4), "a?b?"), 0,
		   "shown: control bytes");
	memset(val, 'v', sizeof val);
	expect_int((int)strlen(fmt_shown(shown, sizeof shown, val, sizeof shown - 1)),
		   (int)sizeof shown - 1, "shown: cap - 1 bytes kept whole");
	fmt_shown(shown, sizeof shown, val, sizeof val);
	expect_int(strlen(shown) < sizeof shown && strstr(shown, "... (200 bytes)") != NULL, 1,
		   "shown: cut, its length said, within cap");

	/* the run id `heaptrail run` filters its reports by: the agent's */
	char id[FMT_RUN_ID_MAX + 1];
	expect_int((int)fmt_run_id(NULL, id), 0, "run id: no options");
	expect_int((int)fmt_run_id("run=a-B_9,sample=1", id), 5, "run id: given");
	expect_int(strcmp(id, "a-B_9"), 0, "run id: its value");
	expect_int((int)fmt_run_id("run=first,run=bad!", id), 5,
		   "run id: a malformed later one leaves the earlier");
	expect_int((int)fmt_run_id("run:x,xrun=y,run_id=z", id), 1, "run id: key:value, no suffix");
	char long_id[80] = "run=";
	memset(long_id + 4, 'x', 64);
	long_id[68] = 0;
	expect_int((int)fmt_run_id(long_id, id), 0, "run id: 64 characters is too long");

	/* allocator functions (fnspec.h): commas inside parentheses stay in
	 * the value */
	struct seen seen = { 0 };
	fmt_options_each("sample=1,alloc_fn=A(ctx=arg1,size=arg2)->ret,free_fn=F(ptr=arg3),depth=8",
			 note, &seen);
	expect_int(seen.n, 4, "options around two specs");
	expect_int(!strcmp(seen.vals[1], "A(ctx=arg1,size=arg2)->ret"), 1, "alloc_fn's whole value");
	expect_int(!strcmp(seen.vals[2], "F(ptr=arg3)"), 1, "free_fn's whole value");
	expect_int(!strcmp(seen.vals[3], "8"), 1, "the option after them");
	struct fmt_fnspec sp;
	expect_int(spec(FMT_FNK_ALLOC, "AllocSetAlloc(ctx=arg1,size=arg2)->ret", &sp), 1, "alloc spec");
	expect_int(sp.arg[FMT_ROLE_CTX] * 10 + sp.arg[FMT_ROLE_SIZE], 12, "its arguments");
	expect_int(!strcmp(sp.name, "AllocSetAlloc") && sp.ret, 1, "its name and ->ret");
	expect_int(spec(FMT_FNK_ALLOC, "mi_malloc(size=arg1)->ret", &sp), 1, "alloc without ctx");
	expect_int(sp.arg[FMT_ROLE_CTX], 0, "no ctx");
	expect_int(spec(FMT_FNK_ALLOC, "A(ctx=arg1,size=arg2)", &sp), 0, "alloc without ->ret");
	expect_int(spec(FMT_FNK_ALLOC, "A(ctx=arg1)->ret", &sp), 0, "alloc without size");
	expect_int(spec(FMT_FNK_ALLOC, "A(size=arg7)->ret", &sp), 0, "arg7");
	expect_int(spec(FMT_FNK_ALLOC, "A(size=arg0)->ret", &sp), 0, "arg0");
	expect_int(spec(FMT_FNK_ALLOC, "A(size=arg1,size=arg2)->ret", &sp), 0, "a role twice");
	expect_int(spec(FMT_FNK_ALLOC, "A(ptr=arg1,size=arg2)->ret", &sp), 0, "ptr in alloc");
	expect_int(spec(FMT_FNK_ALLOC, "A(size=arg1->ret", &sp), 0, "no ')'");
	expect_int(spec(FMT_FNK_FREE, "F(ctx=arg1,ptr=arg2)", &sp), 1, "free spec");
	expect_int(spec(FMT_FNK_FREE, "F(ctx=arg1,ptr=arg2)->ret", &sp), 0, "free with ->ret");
	expect_int(spec(FMT_FNK_RESET, "R(ctx=arg1)", &sp), 1, "reset spec");
	expect_int(spec(FMT_FNK_RESET, "R", &sp), 0, "reset without ctx");
	expect_int(spec(FMT_FNK_CREATE, "C->ret", &sp), 1, "create without arguments");
	expect_int(spec(FMT_FNK_REALLOC, "R(ptr=arg1,size=arg3)->ret", &sp), 1, "realloc spec");
	expect_int(spec(FMT_FNK_ALLOC, "(size=arg1)->ret", &sp), 0, "no name");
	expect_int(spec(FMT_FNK_ALLOC, "mem::Pool::take(ctx=arg1,size=arg2)->ret", &sp), 1,
		   "a C++ qualified name");
	expect_int(!strcmp(sp.name, "mem::Pool::take"), 1, "its name whole");
	expect_int(spec(FMT_FNK_FREE, "pfree(ctx=*(arg1-8),ptr=arg1)", &sp), 1, "ctx=*(arg1-8)");
	expect_int(sp.arg[FMT_ROLE_CTX] * 1000 + sp.off[FMT_ROLE_CTX] + 100 * sp.deref[FMT_ROLE_CTX],
		   1000 - 8 + 100, "its argument, offset and read");
	expect_int(spec(FMT_FNK_ALLOC, "palloc(ctx=*(ret-8),size=arg1)->ret", &sp), 1,
		   "ctx=*(ret-8)");
	expect_int(sp.arg[FMT_ROLE_CTX], FMT_ARG_RET, "the return value");
	expect_int(spec(FMT_FNK_ALLOC, "a(ctx=*(arg2+16),size=arg1)->ret", &sp), 1, "*(arg2+16)");
	expect_int(sp.off[FMT_ROLE_CTX], 16, "+16");
	expect_int(spec(FMT_FNK_ALLOC, "a(ctx=*(arg2),size=arg1)->ret", &sp), 1, "*(arg2)");
	expect_int(spec(FMT_FNK_FREE, "f(ctx=*(ret-8),ptr=arg1)", &sp), 0, "*(ret) in a free");
	expect_int(spec(FMT_FNK_REALLOC, "r(ctx=*(arg1-8),ptr=arg1,size=arg2)->ret", &sp), 0,
		   "*(argN) in a realloc");
	expect_int(spec(FMT_FNK_ALLOC, "a(ctx=*(arg1-),size=arg1)->ret", &sp), 0, "*(arg1-)");
	expect_int(spec(FMT_FNK_ALLOC, "a(ctx=*(arg1-8,size=arg1)->ret", &sp), 0, "*(arg1-8 unclosed");
	/* the name of a pool first met: name=*(ctx+K) in alloc and realloc only */
	expect_int(spec(FMT_FNK_ALLOC, "palloc(ctx=*(ret-8),size=arg1,name=*(ctx+56))->ret", &sp), 1,
		   "name=*(ctx+56)");
	expect_int(sp.arg[FMT_ROLE_NAME] == FMT_ARG_CTX && sp.deref[FMT_ROLE_NAME] &&
			   sp.off[FMT_ROLE_NAME] == 56 && sp.arg[FMT_ROLE_CTX] == FMT_ARG_RET &&
			   sp.off[FMT_ROLE_CTX] == -8,
		   1, "name=*(ctx+56): its fields");
	expect_int(spec(FMT_FNK_REALLOC, "r(ctx=arg1,ptr=arg2,size=arg3,name=*(ctx))->ret", &sp), 1,
		   "name=*(ctx) in a realloc");
	expect_int(spec(FMT_FNK_ALLOC, "a(size=arg1,name=*(ctx+8))->ret", &sp), 0,
		   "name=*(ctx+8) without ctx");
	expect_int(spec(FMT_FNK_ALLOC, "a(ctx=arg1,size=arg2,name=arg3)->ret", &sp), 0,
		   "an alloc's name=arg3");
	expect_int(spec(FMT_FNK_ALLOC, "a(ctx=*(ctx+8),size=arg2)->ret", &sp), 0, "ctx=*(ctx+8)");
	expect_int(spec(FMT_FNK_CREATE, "c(name=*(ctx+8))->ret", &sp), 0, "a create's *(ctx)");
	expect_int(spec(FMT_FNK_FREE, "f(ctx=arg1,ptr=arg2,name=*(ctx+8))", &sp), 0, "a free's name");
	expect_int(fmt_fn_kind_parse("destroy", 7), FMT_FNK_DESTROY, "kind destroy");
	expect_int(fmt_fn_kind_parse("calloc", 6), -1, "no kind calloc");
	return failures ? 1 : 0;
}
