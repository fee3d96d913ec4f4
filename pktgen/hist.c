/* SPDX-License-Identifier: BSD-3-Clause
 * Log-linear latency histogram: values below 2^SUB land in exact buckets,
 * above that each power of two is split in 2^SUB buckets, so any quantile
 * is reported within 1/2^SUB of the true value, in constant memory.
 */
#include <string.h>

#include "pgutil.h"

static inline unsigned bucket_of(uint64_t v)
{
	const unsigned sub = 1u << HIST_SUB_BITS;
	if (v < sub)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS */
	unsigned shift = msb - HIST_SUB_BITS;
	unsigned idx = (shift + 1) * sub + (unsigned)((v >> shift) & (sub - 1));
	return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* Upper edge of a bucket, the value reported for it. */
static inline uint64_t bucket_top(unsigned idx)
{
	const unsigned sub = 1u << HIST_SUB_BITS;
	if (idx < sub)
		return idx;
	unsigned shift = idx / sub - 1;
	uint64_t base = ((uint64_t)sub | (idx & (sub - 1))) << shift;
	return base + ((1ull << shift) - 1);
}

void pg_hist_add(struct pg_hist *h, uint64_t v)
{
	h->b[bucket_of(v)]++;
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

uint64_t pg_hist_quantile(const struct pg_hist *h, double q)
{
	if (!h->count)
		return 0;
	uint64_t want = (uint64_t)(q * (double)h->count);
	if (want >= h->count)
		want = h->count - 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen > want) {
			uint64_t top = bucket_top(i);
			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}

void pg_hist_merge(struct pg_hist *into, const struct pg_hist *from)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		into->b[i] += from->b[i];
	into->count += from->count;
	into->sum += from->sum;
	if (from->max > into->max)
		into->max = from->max;
}
