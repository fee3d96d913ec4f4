/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The token bucket, the one every rate limit in the project uses: the
 * NAK server's retransmission budget (frames), the impairment stage's link
 * rate (bytes) and libinterlink's pacing of WAN senders (bytes).
 *
 * Tokens are whatever the caller counts; the clock is the caller's too
 * (TSC ticks in the data plane, nanoseconds in libinterlink, a virtual
 * clock in tests): every call takes `now`, nothing here reads a clock.
 * Counts are doubles so that any rate is exact over time whatever the
 * ratio of rate to clock (a TSC tick is a fraction of a byte at 1 Gbit/s).
 */
#ifndef INTERLINK_TBUCKET_H
#define INTERLINK_TBUCKET_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct il_tbucket {
	double tokens;   /* available at `last`; below 0 after an oversize take */
	double depth;    /* the bucket's size */
	double per_tick; /* refill rate: tokens per clock tick */
	uint64_t last;   /* clock of the last refill */
};

/* rate: tokens per second (> 0); depth: tokens (> 0); hz: clock ticks per
 * second (> 0). The bucket starts full: a link that was idle may send a
 * burst now. Callers validate their configuration (naming their keys). */
void il_tbucket_init(struct il_tbucket *tb, double rate, double depth, uint64_t hz, uint64_t now);

/* A new rate and depth from now on: what the old rate earned until now is
 * kept, capped at the new depth. */
void il_tbucket_set_rate(struct il_tbucket *tb, double rate, double depth, uint64_t hz,
			 uint64_t now);

static inline void il_tbucket_refill(struct il_tbucket *tb, uint64_t now)
{
	double t;

	if (now <= tb->last)
		return;
	t = tb->tokens + (double)(now - tb->last) * tb->per_tick;
	tb->tokens = t < tb->depth ? t : tb->depth;
	tb->last = now;
}

/* What must be there before n may go: n, or a full bucket when n is larger
 * than the bucket (it could never find n tokens); such a take leaves the
 * bucket in debt, so the long-run rate stays exact whatever the sizes. */
static inline double il_tbucket_need(const struct il_tbucket *tb, double n)
{
	return n < tb->depth ? n : tb->depth;
}

/* Take n tokens if they are there at now; false (nothing taken) if not. */
static inline bool il_tbucket_take(struct il_tbucket *tb, double n, uint64_t now)
{
	il_tbucket_refill(tb, now);
	if (tb->tokens < il_tbucket_need(tb, n))
		return false;
	tb->tokens -= n;
	return true;
}

/* Clock ticks from now until n tokens will be there: 0 if they are now.
 * Rounded up and one tick more, so that floating-point rounding in the
 * refill can never leave a take at now + wait a hair short. */
uint64_t il_tbucket_wait(const struct il_tbucket *tb, double n, uint64_t now);

#ifdef __cplusplus
}
#endif

#endif
