/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Token bucket rate limiter. Tokens are bytes, time is caller-supplied
 * ticks (TSC in the data plane, a virtual clock in tests).
 */
#include <stdio.h>

#include <interlink/impair.h>

int il_tbucket_init(struct il_tbucket *tb, uint64_t rate_bps, uint64_t burst_bytes, uint64_t hz,
		    uint64_t now, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	if (rate_bps == 0) {
		snprintf(err, errlen,
			 "impair: rate limit 'rate_bps' = 0 is invalid; allowed: >= 1 bit/s "
			 "(leave the limiter out for no limit)");
		return -1;
	}
	if (burst_bytes == 0) {
		snprintf(err, errlen,
			 "impair: rate limit 'burst_bytes' = 0 is invalid; allowed: >= 1 byte");
		return -1;
	}
	if (hz == 0) {
		snprintf(err, errlen, "impair: rate limit 'hz' = 0 is invalid; allowed: >= 1");
		return -1;
	}
	*tb = (struct il_tbucket){
		.rate_bps = rate_bps,
		.burst_bytes = burst_bytes,
		.hz = hz,
		/* Start full: a link that was idle could send a burst now. */
		.tokens = (double)burst_bytes,
		.last = now,
	};
	return 0;
}

static inline void tb_refill(struct il_tbucket *tb, uint64_t now)
{
	double t;

	if (now <= tb->last)
		return;
	t = tb->tokens + (double)(now - tb->last) * (double)tb->rate_bps / (8.0 * (double)tb->hz);
	tb->tokens = t < (double)tb->burst_bytes ? t : (double)tb->burst_bytes;
	tb->last = now;
}

/* A packet larger than the bucket could never find enough tokens; it may
 * go once the bucket is full and leaves the bucket in debt instead, so
 * the long-run rate stays exact whatever the packet sizes. */
static inline double tb_need(const struct il_tbucket *tb, uint32_t len)
{
	return len < tb->burst_bytes ? (double)len : (double)tb->burst_bytes;
}

bool il_tbucket_take(struct il_tbucket *tb, uint32_t len, uint64_t now)
{
	tb_refill(tb, now);
	if (tb->tokens < tb_need(tb, len))
		return false;
	tb->tokens -= (double)len;
	return true;
}

uint64_t il_tbucket_ready_at(struct il_tbucket *tb, uint32_t len, uint64_t now)
{
	double deficit, x;
	uint64_t ticks;

	tb_refill(tb, now);
	deficit = tb_need(tb, len) - tb->tokens;
	if (deficit <= 0.0)
		return now;
	/* Round up, and one tick more when exact, so that floating-point
	 * rounding in the refill can never leave the caller a hair short at
	 * the returned time. */
	x = deficit * 8.0 * (double)tb->hz / (double)tb->rate_bps;
	ticks = (uint64_t)x + 1;
	return now + ticks;
}
