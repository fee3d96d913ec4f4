/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's pure parts (ep_core.h): packing of deferred messages,
 * credit accounting, the receive window with gap/NAK bookkeeping, and ACK
 * batching. No I/O and no clock: time is an argument.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/wire.h>

#include "ep_core.h"

void ep_q_init(struct ep_q *q, size_t max_bytes)
{
	memset(q, 0, sizeof(*q));
	q->max = max_bytes;
}

void ep_q_free(struct ep_q *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

/* Room for `need` more bytes at the tail. */
static int q_reserve(struct ep_q *q, size_t need)
{
	if (q->tail + need > q->cap) {
		/* Slide the live part to the front before growing: the head
		 * advances as frames go, so most of the time this is enough. */
		if (q->head > 0) {
			memmove(q->buf, q->buf + q->head, q->tail - q->head);
			q->tail -= q->head;
			q->head = 0;
		}
		if (q->tail + need > q->cap) {
			size_t cap = q->cap ? q->cap : 16384;
			uint8_t *nb;

			while (cap < q->tail + need)
				cap *= 2;
			nb = realloc(q->buf, cap);
			if (nb == NULL)
				return -ENOMEM;
			q->buf = nb;
			q->cap = cap;
		}
	}
	return 0;
}

int ep_q_push(struct ep_q *q, const void *msg, uint16_t len)
{
	size_t need = IL_MSG_HDR_LEN + (size_t)len;

	if (q->tail - q->head + need > q->max)
		return -EAGAIN;
	if (q_reserve(q, need))
		return -ENOMEM;
	il_put16(q->buf + q->tail, len);
	il_put16(q->buf + q->tail + 2, 0);
	memcpy(q->buf + q->tail + IL_MSG_HDR_LEN, msg, len);
	q->tail += need;
	q->n++;
	return 0;
}

int ep_q_append(struct ep_q *q, const uint8_t *recs, size_t bytes, uint64_t n)
{
	if (bytes == 0)
		return 0; /* an empty queue's head may be NULL: nothing to copy */
	if (q_reserve(q, bytes))
		return -ENOMEM;
	memcpy(q->buf + q->tail, recs, bytes);
	q->tail += bytes;
	q->n += n;
	return 0;
}

int64_t ep_go_back(struct ep_q *q, struct ep_q *sent, uint64_t sent_base, uint64_t *next,
		   uint64_t from)
{
	if (from < sent_base || from >= *next || sent->n != *next - sent_base)
		return 0;
	size_t off = sent->head;
	for (uint64_t i = sent_base; i < from; i++)
		off += IL_MSG_HDR_LEN + il_get16(sent->buf + off);
	uint64_t k = *next - from;
	size_t mb = sent->tail - off, qb = q->tail - q->head;
	struct ep_q nq;

	/* Appending bypasses the maximum, which keeps counting: new sends
	 * wait (-EAGAIN) until the re-sent messages are out. */
	ep_q_init(&nq, q->max);
	if (ep_q_append(&nq, sent->buf + off, mb, k) || ep_q_append(&nq, ep_q_head(q), qb, q->n)) {
		ep_q_free(&nq);
		return -ENOMEM;
	}
	ep_q_free(q);
	*q = nq;
	sent->tail = off;
	sent->n -= k;
	*next = from;
	return (int64_t)k;
}

size_t ep_q_span(const struct ep_q *q, size_t room, uint64_t max_msgs, uint16_t *n)
{
	size_t off = q->head, used = 0;
	uint16_t k = 0;

	if (max_msgs > IL_MAX_MSGS_PER_FRAME)
		max_msgs = IL_MAX_MSGS_PER_FRAME;
	while (off < q->tail && k < max_msgs) {
		size_t rec = IL_MSG_HDR_LEN + il_get16(q->buf + off);

		if (used + rec > room)
			break;
		used += rec;
		off += rec;
		k++;
	}
	*n = k;
	return used;
}

void ep_q_pop(struct ep_q *q, size_t bytes, uint16_t n)
{
	q->head += bytes;
	q->n -= n;
	if (q->head == q->tail)
		q->head = q->tail = 0;
}

void ep_credit_init(struct ep_credit *c, bool wait)
{
	memset(c, 0, sizeof(*c));
	c->next = 1;
	c->wait = wait;
}

uint64_t ep_credit_room(const struct ep_credit *c)
{
	if (!c->seen)
		return c->wait ? 0 : UINT64_MAX;
	return c->limit > c->next ? c->limit - c->next : 0;
}

bool ep_credit_grant(struct ep_credit *c, uint64_t limit, uint32_t window)
{
	if (limit > window && limit - window > c->next)
		return false;
	if (!c->seen || limit > c->limit) {
		c->limit = limit;
		c->window = window;
	}
	c->seen = true;
	return true;
}

uint64_t ep_credit_unstable(const struct ep_credit *c)
{
	if (!c->seen)
		return c->next - 1;
	/* limit = stable_next + window at the data plane. */
	uint64_t stable_next = c->limit > c->window ? c->limit - c->window : 1;

	return c->next > stable_next ? c->next - stable_next : 0;
}

int ep_rxw_init(struct ep_rxw *w, uint32_t size)
{
	memset(w, 0, sizeof(*w));
	if (size < 2 || (size & (size - 1)))
		return -EINVAL;
	w->s = calloc(size, sizeof(*w->s));
	if (w->s == NULL)
		return -ENOMEM;
	w->mask = size - 1;
	ep_rxw_reset(w, 1);
	return 0;
}

void ep_rxw_free(struct ep_rxw *w)
{
	free(w->s);
	w->s = NULL;
}

void ep_rxw_reset(struct ep_rxw *w, uint64_t start)
{
	memset(w->s, 0, sizeof(*w->s) * ((size_t)w->mask + 1));
	w->uto = w->po = w->hi = start;
	w->stable = 0;
	w->scanned = start;
	w->ngap = 0;
}

struct ep_slot *ep_rxw_place(struct ep_rxw *w, uint64_t g, bool *dup, bool *overflow)
{
	*dup = *overflow = false;
	if (g < w->po) {
		*dup = true;
		return NULL;
	}
	/* The window runs from the oldest message not yet U-delivered. */
	if (g - w->uto > w->mask) {
		*overflow = true;
		return NULL;
	}
	struct ep_slot *s = ep_rxw_slot(w, g);
	if (s->state != EP_S_EMPTY) {
		*dup = true;
		return NULL;
	}
	if (g + 1 > w->hi)
		w->hi = g + 1;
	return s;
}

uint64_t ep_rxw_free_msgs(const struct ep_rxw *w)
{
	uint64_t used = w->hi - w->uto;

	return used > w->mask ? 0 : (uint64_t)w->mask + 1 - used;
}

/* Not held: empty, or beyond the window (it cannot be held yet). */
static inline bool rxw_missing(struct ep_rxw *w, uint64_t g)
{
	return g - w->uto > w->mask || ep_rxw_slot(w, g)->state == EP_S_EMPTY;
}

static void gap_add(struct ep_rxw *w, uint64_t first, uint64_t last, uint64_t now)
{
	if (w->ngap == EP_GAPS) {
		/* table full: the newest gap grows (its timers are older) */
		w->gap[EP_GAPS - 1].last = last;
		return;
	}
	w->gap[w->ngap++] = (struct ep_gap){ .first = first, .last = last, .disc_ns = now };
}

static void gap_del(struct ep_rxw *w, unsigned i)
{
	memmove(&w->gap[i], &w->gap[i + 1], (w->ngap - i - 1) * sizeof(w->gap[0]));
	w->ngap--;
}

/* Gaps below hi not seen yet; gaps at or below po forgotten. */
static void gaps_update(struct ep_rxw *w, uint64_t now)
{
	uint64_t g = w->scanned > w->po ? w->scanned : w->po;
	uint64_t lim = w->uto + w->mask + 1 < w->hi ? w->uto + w->mask + 1 : w->hi;

	while (g < lim) {
		if (!rxw_missing(w, g)) {
			g++;
			continue;
		}
		uint64_t a = g;

		while (g + 1 < lim && rxw_missing(w, g + 1))
			g++;
		gap_add(w, a, g, now);
		g++;
	}
	if (w->hi > lim && w->scanned < w->hi) /* beyond the window: all missing */
		gap_add(w, lim > w->scanned ? lim : w->scanned, w->hi - 1, now);
	if (w->hi > w->scanned)
		w->scanned = w->hi;
	unsigned k = 0;

	while (k < w->ngap && w->gap[k].last < w->po)
		k++;
	if (k) {
		memmove(&w->gap[0], &w->gap[k], (w->ngap - k) * sizeof(w->gap[0]));
		w->ngap -= k;
	}
	if (w->ngap && w->gap[0].first < w->po)
		w->gap[0].first = w->po;
}

bool ep_rxw_nak_due(struct ep_rxw *w, uint64_t now, uint64_t delay_ns, uint64_t retry_ns,
		    uint64_t max_span, uint64_t *first, uint64_t *last)
{
	gaps_update(w, now);
	for (unsigned i = 0; i < w->ngap; i++) {
		struct ep_gap *x = &w->gap[i];

		if (x->nak_ns ? now - x->nak_ns < retry_ns : now - x->disc_ns < delay_ns)
			continue;
		uint64_t a = x->first, b, end = w->uto + w->mask; /* the window's last */

		while (a <= x->last && !rxw_missing(w, a))
			a++;
		if (a > x->last) { /* all there now */
			gap_del(w, i--);
			continue;
		}
		/* Only what the window can take: a sequence past its end would
		 * come back as an overflow. The rest is asked for once the
		 * window moves up to it. */
		if (a > end)
			continue;
		for (b = a; b < x->last && b < end && b + 1 - a < max_span && rxw_missing(w, b + 1);
		     b++)
			;
		x->first = a;
		if (b < x->last) {
			/* the rest keeps its timers and is reported next */
			if (w->ngap < EP_GAPS) {
				memmove(&w->gap[i + 2], &w->gap[i + 1],
					(w->ngap - i - 1) * sizeof(w->gap[0]));
				w->ngap++;
				w->gap[i + 1] = *x;
				w->gap[i + 1].first = b + 1;
				x->last = b;
			} else {
				/* no room to split: ask for all of it within the
				 * window (what we hold comes again as a duplicate) */
				b = x->last - a + 1 > max_span ? a + max_span - 1 : x->last;
				if (b > end)
					b = end;
			}
		}
		x->nak_ns = now;
		*first = a;
		*last = b;
		return true;
	}
	return false;
}

uint64_t ep_rxw_nak_wait(const struct ep_rxw *w, uint64_t now, uint64_t delay_ns,
			 uint64_t retry_ns)
{
	uint64_t t = UINT64_MAX;

	if (w->scanned < w->hi && w->po < w->hi)
		t = delay_ns; /* a gap not yet found: at least this long */
	for (unsigned i = 0; i < w->ngap; i++) {
		const struct ep_gap *x = &w->gap[i];

		if (x->first - w->uto > w->mask)
			continue; /* beyond the window: not asked for yet (ep_rxw_nak_due) */
		uint64_t due = x->nak_ns ? x->nak_ns + retry_ns : x->disc_ns + delay_ns;
		uint64_t d = due > now ? due - now : 0;

		if (d < t)
			t = d;
	}
	return t;
}

uint64_t ep_rxw_unavail(struct ep_rxw *w, uint64_t first, uint64_t last)
{
	uint64_t n = 0;

	if (first < w->po)
		first = w->po;
	for (uint64_t g = first; g <= last && g - w->uto <= w->mask; g++) {
		struct ep_slot *s = ep_rxw_slot(w, g);

		if (s->state == EP_S_EMPTY) {
			s->state = EP_S_HOLE;
			n++;
		}
		if (g + 1 > w->hi)
			w->hi = g + 1;
	}
	return n;
}

bool ep_ack_due(const struct ep_ack *a, uint64_t po, uint64_t now, unsigned every,
		uint64_t interval_ns, uint64_t idle_ns)
{
	if (!a->sent)
		return true;
	if (po >= a->acked + every)
		return true;
	if (now - a->last_ns >= interval_ns && po != a->acked)
		return true;
	return now - a->last_ns >= idle_ns;
}

/* ---- rate pacing ------------------------------------------------------- */

#define EP_NS_PER_S 1000000000ull

void ep_pace_init(struct ep_pace *p)
{
	memset(p, 0, sizeof(*p));
}

void ep_pace_set(struct ep_pace *p, uint32_t rate_kbps, size_t min_depth, uint64_t now)
{
	if (rate_kbps == p->rate_kbps)
		return;
	bool was_off = p->rate_kbps == 0;
	p->rate_kbps = rate_kbps;
	if (rate_kbps == 0)
		return;
	double rate = (double)rate_kbps * 125.0; /* bytes per second */
	double depth = (double)EP_PACE_DEPTH_NS * rate / (double)EP_NS_PER_S;
	if (depth < (double)min_depth)
		depth = (double)min_depth;
	if (was_off)
		il_tbucket_init(&p->tb, rate, depth, EP_NS_PER_S, now);
	else
		il_tbucket_set_rate(&p->tb, rate, depth, EP_NS_PER_S, now);
}

bool ep_pace_take(struct ep_pace *p, size_t bytes, uint64_t now)
{
	if (p->rate_kbps == 0)
		return true;
	if (!il_tbucket_take(&p->tb, (double)bytes, now)) {
		p->waited++;
		return false;
	}
	return true;
}

uint64_t ep_pace_wait_ns(const struct ep_pace *p, size_t bytes, uint64_t now)
{
	if (p->rate_kbps == 0)
		return 0;
	return il_tbucket_wait(&p->tb, (double)bytes, now);
}
