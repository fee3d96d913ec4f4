/* SPDX-License-Identifier: BSD-3-Clause
 * TSC pacing. Departure times are kept in double-precision ticks and
 * advanced by each frame's exact cost, so rounding never accumulates:
 * over a second at any rate the count is within one frame of the target
 * (the unit test checks this on a virtual clock).
 */
#include "pgutil.h"

/* Forgiven lateness: 64 frames' worth, but at least 10 ms. On a shared
 * machine the generator loses its CPU for milliseconds at a time; what it
 * could not send then is sent right after (bursts of PG_BURST, as fast as
 * the port takes them), so the rate over a second stays exact. A stall
 * longer than that (a stopped process) is forgiven rather than flooded. */
#define PACE_LAG_FRAMES 64.0
#define PACE_LAG_MIN_S 10e-3

void pg_pace_init(struct pg_pace *p, uint64_t hz, double pps, double bps, uint64_t now)
{
	p->per_frame = 0;
	p->per_bit = 0;
	p->on = pps > 0 || bps > 0;
	if (pps > 0)
		p->per_frame = (double)hz / pps;
	else if (bps > 0)
		p->per_bit = (double)hz / bps;
	p->next = (double)now;
	/* in bps mode the lag is counted in 64-byte frames */
	double unit = p->per_frame > 0 ? p->per_frame : p->per_bit * pg_wire_bits(60);
	p->max_lag = PACE_LAG_FRAMES * unit;
	if (p->max_lag < PACE_LAG_MIN_S * (double)hz)
		p->max_lag = PACE_LAG_MIN_S * (double)hz;
}

static inline double cost(const struct pg_pace *p, unsigned frame_len)
{
	return p->per_frame > 0 ? p->per_frame : p->per_bit * pg_wire_bits(frame_len);
}

unsigned pg_pace_due(struct pg_pace *p, uint64_t now, unsigned frame_len, unsigned max)
{
	if (!p->on)
		return max;
	double t = (double)now;
	if (t - p->next > p->max_lag)
		p->next = t - p->max_lag;
	if (t < p->next)
		return 0;
	double c = cost(p, frame_len);
	double k = (t - p->next) / c + 1.0;
	return k >= max ? max : (unsigned)k;
}

void pg_pace_charge(struct pg_pace *p, unsigned frame_len)
{
	if (p->on)
		p->next += cost(p, frame_len);
}

void pg_pace_set_lag(struct pg_pace *p, uint64_t hz, double seconds)
{
	p->max_lag = seconds * (double)hz;
}
