/* svg.c — what the SVG renderers share: XML-safe text and byte counts. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "render/render.h"

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when the
 * bytes there are not one. Overlong forms and surrogates count as
 * invalid, as an XML parser would reject them. */
static size_t u8seq(const unsigned char *s)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
	if (!n || c > 0xf4)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

size_t render_utf8_len(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
		size_t k = u8seq(p);
		p += k ? k : 1;
	}
	return n;
}

void render_xml(FILE *out, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t n = 0; *p && (!max || n < max); n++) {
		size_t k = u8seq(p);
		if (!k || (*p < 0x20 && *p != '\t')) {
			/* XML 1.0 allows neither control characters nor broken UTF-8 */
			fputc('?', out);
			p++;
			continue;
		}
		switch (*p) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default: fwrite(p, 1, k, out);
		}
		p += k;
	}
}

const char *render_bytes(char *buf, size_t cap, int64_t v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double x = (double)v, a = x < 0 ? -x : x;
	int u = 0;
	while (a >= 1024 && u < 5) {
		a /= 1024;
		x /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, cap, "%" PRId64 " B", v);
	else
		snprintf(buf, cap, "%.2f %s", x, units[u]);
	return buf;
}
