/* SPDX-License-Identifier: BSD-3-Clause */
#include <interlink/tbucket.h>

void il_tbucket_init(struct il_tbucket *tb, double rate, double depth, uint64_t hz, uint64_t now)
{
	*tb = (struct il_tbucket){
		.tokens = depth,
		.depth = depth,
		.per_tick = rate / (double)hz,
		.last = now,
	};
}

void il_tbucket_set_rate(struct il_tbucket *tb, double rate, double depth, uint64_t hz,
			 uint64_t now)
{
	il_tbucket_refill(tb, now);
	tb->per_tick = rate / (double)hz;
	tb->depth = depth;
	if (tb->tokens > depth)
		tb->tokens = depth;
	if (now > tb->last)
		tb->last = now;
}

uint64_t il_tbucket_wait(const struct il_tbucket *tb, double n, uint64_t now)
{
	double have = tb->tokens, deficit;

	if (now > tb->last) {
		have += (double)(now - tb->last) * tb->per_tick;
		if (have > tb->depth)
			have = tb->depth;
	}
	deficit = il_tbucket_need(tb, n) - have;
	if (deficit <= 0.0)
		return 0;
	return (uint64_t)(deficit / tb->per_tick) + 1;
}
