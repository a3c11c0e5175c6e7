/*
 * check.h — what every C unit test shares: check() prints "ok - WHAT" or
 * "not ok - WHAT" (TAP's words) and counts the failures; main returns
 * failures ? 1 : 0. rnd() is a xorshift with a fixed seed, so a failure
 * comes back on every run.
 */
#ifndef HEAPTRAIL_TESTS_UNIT_CHECK_H
#define HEAPTRAIL_TESTS_UNIT_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

static int failures;

__attribute__((format(printf, 2, 3), unused)) static void check(bool ok, const char *fmt, ...)
{
	va_list ap;
	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	failures += !ok;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;

__attribute__((unused)) static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#endif
