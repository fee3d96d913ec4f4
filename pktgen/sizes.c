/* SPDX-License-Identifier: BSD-3-Clause
 * Size distributions for messages and frames: fixed, uniform over a range,
 * or Simple IMIX (7:4:1 of 64, 570 and 1518-byte frames). IMIX is drawn as
 * shuffled cycles of 12, so any 12 consecutive frames have the exact mix
 * and the mean is exact over every cycle, not just in the long run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgutil.h"

static uint64_t xs_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static void imix_shuffle(struct pg_sizes *sz)
{
	unsigned i = 0;
	for (; i < 7; i++)
		sz->imix_cycle[i] = PG_IMIX_SMALL;
	for (; i < 11; i++)
		sz->imix_cycle[i] = PG_IMIX_MID;
	sz->imix_cycle[11] = PG_IMIX_LARGE;
	for (i = 11; i > 0; i--) {
		unsigned j = (unsigned)(xs_next(&sz->rng) % (i + 1));
		unsigned t = sz->imix_cycle[i];
		sz->imix_cycle[i] = sz->imix_cycle[j];
		sz->imix_cycle[j] = t;
	}
	sz->imix_pos = 0;
}

int pg_sizes_parse(struct pg_sizes *sz, const char *spec, uint64_t seed, char *err, size_t len)
{
	unsigned a, b;
	char tail;

	memset(sz, 0, sizeof(*sz));
	/* xorshift must not start at zero */
	sz->rng = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
	if (!sz->rng)
		sz->rng = 1;
	if (!strcmp(spec, "imix")) {
		sz->kind = PG_SIZE_IMIX;
		sz->lo = PG_IMIX_SMALL;
		sz->hi = PG_IMIX_LARGE;
		imix_shuffle(sz);
		return 0;
	}
	if (sscanf(spec, "%u-%u%c", &a, &b, &tail) == 2) {
		if (a > b || b > 65535) {
			snprintf(err, len, "size range '%s': want A-B with A <= B <= 65535", spec);
			return -1;
		}
		sz->kind = a == b ? PG_SIZE_FIXED : PG_SIZE_RANGE;
		sz->lo = a;
		sz->hi = b;
		return 0;
	}
	if (sscanf(spec, "%u%c", &a, &tail) == 1 && a <= 65535) {
		sz->kind = PG_SIZE_FIXED;
		sz->lo = sz->hi = a;
		return 0;
	}
	snprintf(err, len, "size '%s': want N, A-B or imix", spec);
	return -1;
}

unsigned pg_sizes_next(struct pg_sizes *sz)
{
	switch (sz->kind) {
	case PG_SIZE_RANGE:
		return sz->lo + (unsigned)(xs_next(&sz->rng) % (sz->hi - sz->lo + 1));
	case PG_SIZE_IMIX:
		if (sz->imix_pos == 12)
			imix_shuffle(sz);
		return sz->imix_cycle[sz->imix_pos++];
	case PG_SIZE_FIXED:
	default:
		return sz->lo;
	}
}

double pg_sizes_mean(const struct pg_sizes *sz)
{
	if (sz->kind == PG_SIZE_IMIX)
		return (7.0 * PG_IMIX_SMALL + 4.0 * PG_IMIX_MID + PG_IMIX_LARGE) / 12.0;
	return (sz->lo + sz->hi) / 2.0;
}

unsigned pg_sizes_max(const struct pg_sizes *sz)
{
	return sz->hi;
}
