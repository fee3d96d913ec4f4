/* SPDX-License-Identifier: BSD-3-Clause
 * nak_budget: what the NAK server owes each requester. A fixed-size table,
 * hashed on (source address, member id), holds for every requester a token
 * bucket in frames (retransmissions and UNAVAIL answers alike) and the last
 * few ranges it was answered, so that a range already answered within the
 * repair interval is not answered again for the same requester, and a
 * requester that keeps asking for one range is noticed.
 *
 * Eviction: a slot is replaced only when it is cold, that is its bucket has
 * refilled to full and every range it remembers is past its hold. A cold
 * slot is worth exactly what a new one is (a full bucket, no memory), so
 * cycling through identities earns a spoofer nothing: over any T seconds a
 * slot answers at most burst + rate x T frames, whoever holds it. A new
 * requester that finds its set full of live slots shares one overflow slot
 * with every other such requester (one bucket for all of them).
 *
 * Everything here runs on the NAK stage's lcore: no allocation after
 * nak_budget_init, no locks; the notice is the one value another thread
 * (the main loop) reads.
 */
#ifndef IL_NAK_BUDGET_H
#define IL_NAK_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <interlink/tbucket.h>

#define NAK_RECENT 4      /* ranges remembered per requester */
#define NAK_WAYS 8        /* slots per hash set */
#define NAK_BACKOFF_MAX 6 /* a range re-sent again and again: hold up to interval << 6 */

struct nak_range {
	uint64_t first, last; /* sequences answered */
	uint64_t until;       /* TSC before which they are not answered again */
	uint32_t resends;     /* answered again after a hold ran out, in a row */
	uint32_t asks;        /* later NAKs that asked for them again */
	uint16_t group_idx;
	uint8_t unavail; /* an UNAVAIL answer, not retransmitted frames */
	uint8_t used;
};

struct nak_requester {
	uint32_t ip;     /* IPv4 source of its NAKs, host order */
	uint32_t member; /* sender_id of its NAKs */
	uint64_t last;   /* TSC of its last NAK */
	uint8_t used;
	struct il_tbucket bucket;
	struct nak_range recent[NAK_RECENT];
};

/* The last requester found asking for one range again and again, for the
 * main loop to log. One writer (the lcore), one reader; `seq` is odd while
 * the writer is in the middle. */
struct nak_notice {
	uint32_t seq;
	uint32_t ip, member;
	uint16_t group_id;
	uint64_t first, last;
	uint32_t asks, resends;
	uint64_t events; /* such findings since start, logged or not */
};

struct nak_budget_conf {
	uint64_t interval_us; /* repair interval */
	uint64_t slots;       /* power of two, >= NAK_WAYS */
	uint64_t rate_pps, burst;
	uint64_t log_after; /* asks for one range before the requester is reported */
};

struct nak_budget {
	struct nak_requester *slot; /* n_slots + 1: the last one is the overflow slot */
	uint32_t n_slots, set_mask;
	uint64_t seed;
	uint64_t hz, interval, cold;
	double rate, depth;
	uint32_t log_after;
	uint64_t next_notice; /* TSC: at most one notice a second */
	struct nak_notice notice;
	uint64_t notice_read; /* reader side: the last seq it printed */
};

int nak_budget_init(struct nak_budget *b, const struct nak_budget_conf *c, uint64_t hz,
		    uint64_t seed, char *err, size_t errlen);
void nak_budget_free(struct nak_budget *b);

/* The requester's slot (found, new, or the overflow slot: *overflow set). */
struct nak_requester *nak_budget_find(struct nak_budget *b, uint32_t ip, uint32_t member,
				      uint64_t now, bool *overflow);

/* A NAK of r asks for [first, last] of group gi: counts the asks of every
 * range it already had answered that this one overlaps; true when one of
 * them reaches the reporting threshold (then a notice is published, at most
 * one a second). */
bool nak_budget_ask(struct nak_budget *b, struct nak_requester *r, uint32_t ip, uint32_t member,
		    unsigned gi, uint16_t group_id, uint64_t first, uint64_t last, uint64_t now);

/* Was sequence seq of group gi answered to r within its hold? For UNAVAIL,
 * [seq, last] must lie in one answered range. */
static inline bool nak_budget_held(const struct nak_requester *r, unsigned gi, bool unavail,
				   uint64_t seq, uint64_t last, uint64_t now)
{
	for (unsigned i = 0; i < NAK_RECENT; i++) {
		const struct nak_range *x = &r->recent[i];
		if (x->used && x->group_idx == gi && x->unavail == unavail && now < x->until &&
		    x->first <= seq && last <= x->last)
			return true;
	}
	return false;
}

/* For frames: the last sequence of the answered range that holds seq (the
 * caller skips to the frame after it), 0 if none does. */
static inline uint64_t nak_budget_held_to(const struct nak_requester *r, unsigned gi, uint64_t seq,
					  uint64_t now)
{
	for (unsigned i = 0; i < NAK_RECENT; i++) {
		const struct nak_range *x = &r->recent[i];
		if (x->used && x->group_idx == gi && !x->unavail && now < x->until &&
		    x->first <= seq && seq <= x->last)
			return x->last;
	}
	return 0;
}

/* Remember that [first, last] of group gi was answered to r now. */
void nak_budget_answered(struct nak_budget *b, struct nak_requester *r, unsigned gi, bool unavail,
			 uint64_t first, uint64_t last, uint64_t now);

/* One frame out for r, if both r's bucket and the stage-wide one have a
 * token: 0 taken from both, 1 r's bucket is empty, 2 the stage's is. */
static inline int nak_budget_take(struct nak_requester *r, struct il_tbucket *global,
				  uint64_t now)
{
	il_tbucket_refill(&r->bucket, now);
	if (r->bucket.tokens < il_tbucket_need(&r->bucket, 1.0))
		return 1;
	if (!il_tbucket_take(global, 1.0, now))
		return 2;
	r->bucket.tokens -= 1.0;
	return 0;
}

/* Reader side (main loop): print the notice if there is a new one. */
void nak_budget_log(struct nak_budget *b, const char *stage, FILE *out);

#endif
