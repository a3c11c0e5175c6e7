/* unbias.c — see unbias.h. */
#include <math.h>

#include "analyze/unbias.h"

double prof_unbias_scale(uint64_t sample, uint64_t count, uint64_t bytes)
{
	if (sample <= 1 || !count || !bytes)
		return 1.0;
	double avg = (double)bytes / (double)count;
	/* -expm1(-x) is 1 - exp(-x) without the cancellation for small x
	 * (tiny blocks, a large S) */
	return 1.0 / -expm1(-avg / (double)sample);
}

void prof_unbias_counts(uint64_t sample, uint64_t count, uint64_t bytes,
			int64_t *out_count, int64_t *out_bytes)
{
	if (!count || !bytes) {
		*out_count = *out_bytes = 0;
		return;
	}
	if (sample <= 1) {
		*out_count = (int64_t)count;
		*out_bytes = (int64_t)bytes;
		return;
	}
	double scale = prof_unbias_scale(sample, count, bytes);
	double c = (double)count * scale, b = (double)bytes * scale;
	*out_count = c < 0x1p62 ? (int64_t)c : INT64_C(1) << 62;
	*out_bytes = b < 0x1p62 ? (int64_t)b : INT64_C(1) << 62;
}
