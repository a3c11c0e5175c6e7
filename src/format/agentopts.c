/* agentopts.c — HEAPTRAIL_OPTIONS value syntax (see agentopts.h). */
#include "format/agentopts.h"

#include <signal.h>

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

bool fmt_opt_signal(const char *s, size_t n, uint64_t *out)
{
	uint64_t v;
	if (!fmt_opt_num(s, n, 64, &v) || v == SIGKILL || v == SIGSTOP)
		return false;
	*out = v;
	return true;
}

bool fmt_opts_last(const char *opts, const char *key,
		   bool (*valid)(const char *s, size_t n, uint64_t *out), uint64_t *out)
{
	size_t klen = 0;
	bool found = false;
	while (key[klen])
		klen++;
	for (const char *s = opts; s && *s;) {
		const char *e = s;
		size_t k = 0;
		while (*e && *e != ',')
			e++;
		while (s + k < e && s[k] != '=' && s[k] != ':')
			k++;
		if (k == klen && s + k < e) {
			size_t i = 0;
			while (i < k && s[i] == key[i])
				i++;
			if (i == k && valid(s + k + 1, (size_t)(e - s - k - 1), out))
				found = true;
		}
		s = *e ? e + 1 : e;
	}
	return found;
}
