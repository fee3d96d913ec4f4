/* SPDX-License-Identifier: BSD-3-Clause
 * nak_budget: per-requester budgets and memory of the NAK server (see
 * nak_budget.h for the eviction rule and why a spoofer gains nothing by it).
 */
#include <string.h>

#include <rte_malloc.h>

#include <interlink/err.h>

#include "nak_budget.h"

int nak_budget_init(struct nak_budget *b, const struct nak_budget_conf *c, uint64_t hz,
		    uint64_t seed, char *err, size_t errlen)
{
	memset(b, 0, sizeof(*b));
	b->slot = rte_zmalloc("il_nak_requesters", (c->slots + 1) * sizeof(*b->slot),
			      RTE_CACHE_LINE_SIZE);
	if (!b->slot)
		return ERR("out of memory for %lu NAK requesters", (unsigned long)c->slots);
	b->n_slots = (uint32_t)c->slots;
	b->set_mask = (uint32_t)(c->slots / NAK_WAYS - 1);
	b->seed = seed;
	b->hz = hz;
	b->interval = c->interval_us * hz / 1000000u;
	if (!b->interval)
		b->interval = 1;
	b->cold = b->interval << NAK_BACKOFF_MAX;
	b->rate = (double)c->rate_pps;
	b->depth = (double)c->burst;
	b->log_after = (uint32_t)c->log_after;
	il_tbucket_init(&b->slot[b->n_slots].bucket, b->rate, b->depth, hz, 0);
	b->slot[b->n_slots].used = 1;
	return 0;
}

void nak_budget_free(struct nak_budget *b)
{
	rte_free(b->slot);
	b->slot = NULL;
}

/* The set a key lands in: a keyed mix, so that where a key goes is not
 * known outside this process (the seed is drawn at start). */
static inline uint32_t set_of(const struct nak_budget *b, uint32_t ip, uint32_t member)
{
	uint64_t x = (((uint64_t)ip << 32) | member) ^ b->seed;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x & b->set_mask;
}

/* Cold: nothing it would get that a fresh slot would not (see the header). */
static bool is_cold(struct nak_budget *b, struct nak_requester *r, uint64_t now)
{
	if (now - r->last < b->cold)
		return false;
	il_tbucket_refill(&r->bucket, now);
	return r->bucket.tokens >= r->bucket.depth;
}

struct nak_requester *nak_budget_find(struct nak_budget *b, uint32_t ip, uint32_t member,
				      uint64_t now, bool *overflow)
{
	struct nak_requester *set = &b->slot[(size_t)set_of(b, ip, member) * NAK_WAYS];
	struct nak_requester *victim = NULL;

	*overflow = false;
	for (unsigned i = 0; i < NAK_WAYS; i++) {
		struct nak_requester *r = &set[i];
		if (r->used && r->ip == ip && r->member == member) {
			r->last = now;
			return r;
		}
	}
	for (unsigned i = 0; i < NAK_WAYS && !victim; i++)
		if (!set[i].used)
			victim = &set[i];
	for (unsigned i = 0; i < NAK_WAYS && !victim; i++)
		if (is_cold(b, &set[i], now))
			victim = &set[i];
	if (!victim) {
		victim = &b->slot[b->n_slots];
		victim->last = now;
		*overflow = true;
		return victim;
	}
	memset(victim, 0, sizeof(*victim));
	victim->used = 1;
	victim->ip = ip;
	victim->member = member;
	victim->last = now;
	il_tbucket_init(&victim->bucket, b->rate, b->depth, b->hz, now);
	return victim;
}

static void publish(struct nak_budget *b, const struct nak_range *x, uint32_t ip,
		    uint32_t member, uint16_t group_id, uint64_t now)
{
	struct nak_notice *n = &b->notice;
	uint32_t s = __atomic_load_n(&n->seq, __ATOMIC_RELAXED);

	n->events++;
	if (now < b->next_notice)
		return;
	b->next_notice = now + b->hz;
	__atomic_store_n(&n->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	n->ip = ip;
	n->member = member;
	n->group_id = group_id;
	n->first = x->first;
	n->last = x->last;
	n->asks = x->asks;
	n->resends = x->resends;
	__atomic_store_n(&n->seq, s + 2, __ATOMIC_RELEASE);
}

bool nak_budget_ask(struct nak_budget *b, struct nak_requester *r, uint32_t ip, uint32_t member,
		    unsigned gi, uint16_t group_id, uint64_t first, uint64_t last, uint64_t now)
{
	bool stuck = false;

	for (unsigned i = 0; i < NAK_RECENT; i++) {
		struct nak_range *x = &r->recent[i];
		if (!x->used || x->group_idx != gi || x->last < first || x->first > last)
			continue;
		if (++x->asks == b->log_after) {
			stuck = true;
			publish(b, x, ip, member, group_id, now);
		}
	}
	return stuck;
}

void nak_budget_answered(struct nak_budget *b, struct nak_requester *r, unsigned gi, bool unavail,
			 uint64_t first, uint64_t last, uint64_t now)
{
	struct nak_range *x = NULL, *oldest = &r->recent[0];

	for (unsigned i = 0; i < NAK_RECENT; i++) {
		struct nak_range *y = &r->recent[i];
		if (y->used && y->group_idx == gi && y->unavail == unavail &&
		    y->last >= first && y->first <= last) {
			x = y;
			break;
		}
		if (!y->used || (oldest->used && y->until < oldest->until))
			oldest = y;
	}
	if (x) {
		/* Asked and answered again after its hold: hold it longer each
		 * time, so a requester that never receives costs less and less. */
		if (x->resends < UINT32_MAX)
			x->resends++;
		if (first < x->first)
			x->first = first;
		if (last > x->last)
			x->last = last;
	} else {
		x = oldest;
		*x = (struct nak_range){.used = 1, .group_idx = (uint16_t)gi,
					.unavail = unavail, .first = first, .last = last};
	}
	unsigned shift = x->resends < NAK_BACKOFF_MAX ? x->resends : NAK_BACKOFF_MAX;
	x->until = now + (b->interval << shift);
}

void nak_budget_log(struct nak_budget *b, const char *stage, FILE *out)
{
	const struct nak_notice *n = &b->notice;
	struct nak_notice c;
	uint32_t s = __atomic_load_n(&n->seq, __ATOMIC_ACQUIRE);

	if ((s & 1) || s == b->notice_read)
		return;
	memcpy(&c, n, sizeof(c));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&n->seq, __ATOMIC_RELAXED) != s)
		return; /* written meanwhile: the next call reads it */
	b->notice_read = s;
	fprintf(out,
		"interlink: warning: stage '%s': receiver %u.%u.%u.%u (member id %u, 0x%08x) keeps "
		"asking for group %u seqs %lu..%lu: %u NAKs for a range it was answered, "
		"answered again %u times (%lu such findings since start); a receiver that drops "
		"what it receives (bad UDP checksums from checksum offload) does this\n",
		stage, c.ip >> 24, (c.ip >> 16) & 0xff, (c.ip >> 8) & 0xff, c.ip & 0xff, c.member,
		c.member, c.group_id, (unsigned long)c.first, (unsigned long)c.last, c.asks,
		c.resends, (unsigned long)c.events);
	fflush(out);
}
