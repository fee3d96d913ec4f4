/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's pure parts (endpoint/ep_core.c): packing of deferred
 * messages, the credit window, the receive window's gap and NAK
 * bookkeeping, UNAVAIL holes, and ACK batching.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <interlink/parse.h>
#include <interlink/wire.h>

#include "ep_core.h"

#define US 1000ull
#define MS 1000000ull

/* Packing: records as on the wire, only whole ones, within bytes and count. */
static void test_pack_spans(void **state)
{
	struct ep_q q;
	uint8_t msg[100];
	uint16_t n;

	(void)state;
	ep_q_init(&q, 1 << 20);
	for (unsigned i = 0; i < 100; i++) {
		memset(msg, (int)i, sizeof(msg));
		assert_int_equal(ep_q_push(&q, msg, (uint16_t)(10 + i % 5)), 0);
	}
	assert_int_equal(q.n, 100);
	/* 1432 bytes of body room (MTU 1500 - 28 - 40): records of 14..18 B. */
	size_t bytes = ep_q_span(&q, 1432, UINT64_MAX, &n);
	assert_true(bytes <= 1432);
	assert_true(bytes + 18 > 1432 || n == 100); /* nothing more would fit */
	/* The span is a valid DATA body: the parser's packing check finds no fault (0). */
	assert_int_equal(il_check_packing(ep_q_head(&q), (uint32_t)bytes, n), 0);
	assert_int_equal(il_get16(ep_q_head(&q)), 10);
	assert_int_equal(ep_q_head(&q)[4], 0);
	ep_q_pop(&q, bytes, n);
	assert_int_equal(q.n, 100 - n);
	assert_int_equal(il_get16(ep_q_head(&q)), 10 + n % 5);
	assert_int_equal(ep_q_head(&q)[4], n);
	/* Credit caps the count: 3 messages only. */
	bytes = ep_q_span(&q, 1432, 3, &n);
	assert_int_equal(n, 3);
	assert_int_equal(il_check_packing(ep_q_head(&q), (uint32_t)bytes, n), 0);
	/* No credit, or a record that does not fit: nothing. */
	assert_int_equal(ep_q_span(&q, 1432, 0, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ep_q_span(&q, 8, 10, &n), 0);
	assert_int_equal(n, 0);
	ep_q_free(&q);
}

/* The queue is bounded, and survives growth and sliding with data intact. */
static void test_pack_bound_and_growth(void **state)
{
	struct ep_q q;
	uint8_t msg[1000];
	uint64_t popped = 0, pushed = 0;
	uint16_t n;

	(void)state;
	ep_q_init(&q, 64 * 1004);
	for (unsigned i = 0; i < 64; i++) {
		il_put32(msg, i);
		assert_int_equal(ep_q_push(&q, msg, sizeof(msg)), 0);
	}
	assert_int_equal(ep_q_push(&q, msg, 1), -EAGAIN);
	/* Interleave pops and pushes: messages come out in order. */
	for (unsigned round = 0; round < 500; round++) {
		size_t b = ep_q_span(&q, 1432, UINT64_MAX, &n);
		assert_int_equal(n, 1);
		assert_int_equal(il_get32(ep_q_head(&q) + 4), popped);
		ep_q_pop(&q, b, n);
		popped++;
		il_put32(msg, (uint32_t)(64 + pushed));
		assert_int_equal(ep_q_push(&q, msg, sizeof(msg)), 0);
		pushed++;
	}
	/* Jumbo room: up to 8 such records per frame. */
	assert_int_equal(ep_q_span(&q, 8960, UINT64_MAX, &n), 8 * 1004);
	assert_int_equal(n, 8);
	ep_q_free(&q);
}

/* A sender's record of what it sent: appended frame bodies, trimmed one
 * record at a time from the head, then put back in front of the deferred
 * queue (a new epoch): order and content survive. */
static void test_sent_append_and_rewind(void **state)
{
	struct ep_q sent, q, nq;
	uint8_t msg[20];
	uint16_t n;

	(void)state;
	ep_q_init(&sent, SIZE_MAX);
	ep_q_init(&q, 1 << 20);
	for (unsigned i = 0; i < 10; i++) {
		il_put32(msg, i);
		assert_int_equal(ep_q_push(&q, msg, sizeof(msg)), 0);
	}
	/* Two frames of 4 go out and are remembered. */
	for (int f = 0; f < 2; f++) {
		size_t b = ep_q_span(&q, 1432, 4, &n);
		assert_int_equal(n, 4);
		assert_int_equal(ep_q_append(&sent, ep_q_head(&q), b, n), 0);
		ep_q_pop(&q, b, n);
	}
	assert_int_equal(sent.n, 8);
	/* The first three become stable. */
	for (int i = 0; i < 3; i++) {
		size_t b = ep_q_span(&sent, SIZE_MAX, 1, &n);
		ep_q_pop(&sent, b, n);
	}
	/* Rewind: the five unstable, then the two never sent. */
	ep_q_init(&nq, 1 << 20);
	assert_int_equal(ep_q_append(&nq, ep_q_head(&sent), sent.tail - sent.head, sent.n), 0);
	assert_int_equal(ep_q_append(&nq, ep_q_head(&q), q.tail - q.head, q.n), 0);
	assert_int_equal(nq.n, 7);
	for (uint32_t want = 3; want < 10; want++) {
		size_t b = ep_q_span(&nq, SIZE_MAX, 1, &n);
		assert_int_equal(il_get32(ep_q_head(&nq) + 4), want);
		ep_q_pop(&nq, b, n);
	}
	assert_int_equal(nq.n, 0);
	ep_q_free(&nq);
	ep_q_free(&q);
	ep_q_free(&sent);
}

/* Go-back-N: sender_seq 1..8 sent (messages 0..7), 1..3 known stable
 * (sent_base 4); the appliance says it expects 6: 6..8 go again before
 * the two never sent, 4 and 5 stay remembered, next is 6. */
/* Going back with nothing deferred: the deferred queue never held a record
 * (its buffer is NULL); its head was computed as NULL + 0 and copied from
 * (undefined behaviour the sanitizer builds report). */
static void test_go_back_with_nothing_deferred(void **state)
{
	struct ep_q sent, q;
	uint8_t msg[8] = {0};
	uint64_t next = 4;
	uint16_t n;

	(void)state;
	ep_q_init(&sent, SIZE_MAX);
	ep_q_init(&q, 1 << 20);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(ep_q_push(&sent, msg, sizeof(msg)), 0);
	assert_null(ep_q_head(&q));
	assert_int_equal(ep_go_back(&q, &sent, 1, &next, 2), 2);
	assert_int_equal(next, 2);
	assert_int_equal(q.n, 2);
	assert_int_equal(ep_q_span(&q, SIZE_MAX, 10, &n), 2 * (IL_MSG_HDR_LEN + sizeof(msg)));
	assert_int_equal(n, 2);
	assert_int_equal(ep_q_append(&q, ep_q_head(&sent), 0, 0), 0);
	ep_q_free(&q);
	ep_q_free(&sent);
}

static void test_go_back(void **state)
{
	struct ep_q sent, q;
	uint8_t msg[20];
	uint16_t n;
	uint64_t next = 9, base = 4;

	(void)state;
	ep_q_init(&sent, SIZE_MAX);
	ep_q_init(&q, 1 << 20);
	for (uint32_t i = 3; i < 8; i++) {
		il_put32(msg, i);
		assert_int_equal(ep_q_push(&sent, msg, sizeof(msg)), 0);
	}
	for (uint32_t i = 8; i < 10; i++) {
		il_put32(msg, i);
		assert_int_equal(ep_q_push(&q, msg, sizeof(msg)), 0);
	}
	/* Outside what we hold: nothing happens. */
	assert_int_equal(ep_go_back(&q, &sent, base, &next, 3), 0);
	assert_int_equal(ep_go_back(&q, &sent, base, &next, 9), 0);
	assert_int_equal(next, 9);
	assert_int_equal(ep_go_back(&q, &sent, base, &next, 6), 3);
	assert_int_equal(next, 6);
	assert_int_equal(sent.n, 2);
	assert_int_equal(q.n, 5);
	for (uint32_t want = 5; want < 10; want++) {
		size_t b = ep_q_span(&q, SIZE_MAX, 1, &n);
		assert_int_equal(il_get32(ep_q_head(&q) + 4), want);
		ep_q_pop(&q, b, n);
	}
	for (uint32_t want = 3; want < 5; want++) {
		size_t b = ep_q_span(&sent, SIZE_MAX, 1, &n);
		assert_int_equal(il_get32(ep_q_head(&sent) + 4), want);
		ep_q_pop(&sent, b, n);
	}
	/* All of it: from the oldest unstable (the resend timeout). */
	ep_q_push(&sent, msg, sizeof(msg));
	next = 5;
	base = 4;
	assert_int_equal(ep_go_back(&q, &sent, base, &next, 4), 1);
	assert_int_equal(sent.n, 0);
	assert_int_equal(q.n, 1);
	assert_int_equal(next, 4);
	ep_q_free(&q);
	ep_q_free(&sent);
}

static void test_credit(void **state)
{
	struct ep_credit c;

	(void)state;
	ep_credit_init(&c, true);
	assert_int_equal(ep_credit_room(&c), 0); /* waits for the first grant */
	ep_credit_init(&c, false);
	assert_true(ep_credit_room(&c) > 1000000);
	ep_credit_init(&c, true);
	ep_credit_grant(&c, 1 + 256, 256);
	assert_int_equal(ep_credit_room(&c), 256);
	c.next += 200;
	assert_int_equal(ep_credit_room(&c), 56);
	assert_int_equal(ep_credit_unstable(&c), 200);
	c.next += 56;
	assert_int_equal(ep_credit_room(&c), 0);
	assert_int_equal(ep_credit_unstable(&c), 256); /* never more than the window */
	/* An older grant arriving late changes nothing. */
	ep_credit_grant(&c, 100, 256);
	assert_int_equal(c.limit, 257);
	/* 32 became stable: the window slides by 32. */
	ep_credit_grant(&c, 33 + 256, 256);
	assert_int_equal(ep_credit_room(&c), 32);
	assert_int_equal(ep_credit_unstable(&c), 224);
	/* Window shrinks: limit only grows, the room follows the limit. */
	ep_credit_grant(&c, 300, 64);
	assert_int_equal(ep_credit_room(&c), 300 - 257);
	/* All stable. */
	ep_credit_grant(&c, 257 + 64, 64);
	assert_int_equal(ep_credit_unstable(&c), 0);
	/* A grant meant for a previous incarnation of our member id (it says
	 * 25000 messages are stable; we sent 10): refused, so that we never
	 * count as stable what nobody has. */
	ep_credit_init(&c, true);
	c.next = 11;
	assert_false(ep_credit_grant(&c, 25001 + 256, 256));
	assert_false(c.seen);
	assert_int_equal(ep_credit_room(&c), 0);
	assert_true(ep_credit_grant(&c, 1 + 256, 256));
	assert_int_equal(ep_credit_unstable(&c), 10);
}

static void put(struct ep_rxw *w, uint64_t g)
{
	bool dup, over;
	struct ep_slot *s = ep_rxw_place(w, g, &dup, &over);

	assert_non_null(s);
	s->state = EP_S_MSG;
}

/* Deliver like ep_deliver does, without callbacks. */
static void po_advance(struct ep_rxw *w)
{
	while (w->po < w->hi && ep_rxw_slot(w, w->po)->state != EP_S_EMPTY)
		w->po++;
}

static void test_gap_nak(void **state)
{
	struct ep_rxw w;
	uint64_t f, l, t = 1000 * MS;
	bool dup, over;

	(void)state;
	assert_int_equal(ep_rxw_init(&w, 1000), -EINVAL);
	assert_int_equal(ep_rxw_init(&w, 1024), 0);
	ep_rxw_reset(&w, 100);
	for (uint64_t g = 100; g < 110; g++)
		put(&w, g);
	po_advance(&w);
	assert_int_equal(w.po, 110);
	assert_false(ep_rxw_nak_due(&w, t, 300 * US, 3 * MS, 65536, &f, &l));
	/* 110..114 lost, 115..119 arrive. */
	for (uint64_t g = 115; g < 120; g++)
		put(&w, g);
	po_advance(&w);
	assert_int_equal(w.po, 110);
	/* Not at once (a burst may still be in flight), after the delay. */
	assert_false(ep_rxw_nak_due(&w, t, 300 * US, 3 * MS, 65536, &f, &l));
	assert_false(ep_rxw_nak_due(&w, t + 200 * US, 300 * US, 3 * MS, 65536, &f, &l));
	assert_true(ep_rxw_nak_due(&w, t + 300 * US, 300 * US, 3 * MS, 65536, &f, &l));
	assert_int_equal(f, 110);
	assert_int_equal(l, 114);
	/* The retry timer: not again before 3 ms, then again. */
	assert_false(ep_rxw_nak_due(&w, t + 2 * MS, 300 * US, 3 * MS, 65536, &f, &l));
	assert_true(ep_rxw_nak_due(&w, t + 3300 * US, 300 * US, 3 * MS, 65536, &f, &l));
	/* Part of it repaired: the next NAK, on the gap's own retry timer,
	 * asks only for what is still missing. */
	put(&w, 110);
	put(&w, 111);
	po_advance(&w);
	assert_int_equal(w.po, 112);
	assert_false(ep_rxw_nak_due(&w, t + 4 * MS, 300 * US, 3 * MS, 65536, &f, &l));
	assert_false(ep_rxw_nak_due(&w, t + 6200 * US, 300 * US, 3 * MS, 65536, &f, &l));
	assert_true(ep_rxw_nak_due(&w, t + 6300 * US, 300 * US, 3 * MS, 65536, &f, &l));
	assert_int_equal(f, 112);
	assert_int_equal(l, 114);
	/* Duplicates (a retransmission of what we hold) are refused. */
	assert_null(ep_rxw_place(&w, 105, &dup, &over));
	assert_true(dup);
	assert_null(ep_rxw_place(&w, 116, &dup, &over));
	assert_true(dup);
	for (uint64_t g = 112; g < 115; g++)
		put(&w, g);
	po_advance(&w);
	assert_int_equal(w.po, 120);
	assert_false(ep_rxw_nak_due(&w, t + 10 * MS, 300 * US, 3 * MS, 65536, &f, &l));
	/* A lost tail learnt from STABLE's next sequence; the span is capped. */
	ep_rxw_seen(&w, 200);
	assert_false(ep_rxw_nak_due(&w, t + 11 * MS, 300 * US, 3 * MS, 16, &f, &l));
	assert_true(ep_rxw_nak_due(&w, t + 12 * MS, 300 * US, 3 * MS, 16, &f, &l));
	assert_int_equal(f, 120);
	assert_int_equal(l, 135);
	ep_rxw_free(&w);
}

/* A NAK asks only for what the window can hold: a tail announced far
 * ahead (a STABLE's next sequence) is asked for up to the window's end,
 * not 65536 sequences that would come back as overflows (whose slots are
 * other sequences'). */
static void test_nak_within_the_window(void **state)
{
	struct ep_rxw w;
	uint64_t f, l, t = 1000 * MS, top = 0;
	unsigned naks = 0;

	(void)state;
	assert_int_equal(ep_rxw_init(&w, 16), 0);
	for (uint64_t g = 1; g <= 4; g++)
		put(&w, g);
	put(&w, 8);
	po_advance(&w);
	assert_int_equal(w.po, 5);
	ep_rxw_seen(&w, 1000);
	for (unsigned i = 0; i < 20; i++, t += MS)
		while (ep_rxw_nak_due(&w, t, 300 * US, 3 * MS, 65536, &f, &l)) {
			if (!(f >= w.po && l >= f && l - w.uto <= w.mask))
				fail_msg("NAK %lu..%lu with po %lu uto %lu", (unsigned long)f,
					 (unsigned long)l, (unsigned long)w.po, (unsigned long)w.uto);
			naks++;
		}
	assert_true(naks > 0);
	for (uint64_t g = 5; g <= 7; g++)
		put(&w, g);
	po_advance(&w);
	assert_int_equal(w.po, 9);
	/* All of it U-delivered (as ep_deliver does: slots emptied). */
	for (uint64_t g = 1; g <= 8; g++)
		ep_rxw_slot(&w, g)->state = EP_S_EMPTY;
	w.uto = 9;
	for (unsigned i = 0; i < 20; i++, t += MS)
		while (ep_rxw_nak_due(&w, t, 300 * US, 3 * MS, 65536, &f, &l)) {
			assert_true(f >= w.po && l >= f && l - w.uto <= w.mask);
			if (l > top)
				top = l;
		}
	assert_int_equal(top, 24); /* uto 9 + 16 slots - 1: the window's end, no further */
	ep_rxw_free(&w);
}

/* Ricochet's timers per gap: a gap behind the first one is NAKed its own
 * delay after it was found, not after the first one is repaired; a gap
 * repaired in its middle is asked for in two runs; each retries alone. */
static void test_gaps_have_their_own_timers(void **state)
{
	struct ep_rxw w;
	uint64_t f, l, t = 1000 * MS, d = 100 * MS, r = 50 * MS;

	(void)state;
	assert_int_equal(ep_rxw_init(&w, 1024), 0);
	ep_rxw_reset(&w, 1);
	put(&w, 1);
	put(&w, 4); /* 2, 3 missing, found at t */
	po_advance(&w);
	assert_false(ep_rxw_nak_due(&w, t, d, r, 65536, &f, &l));
	assert_int_equal(ep_rxw_nak_wait(&w, t, d, r), d);
	put(&w, 7); /* 5, 6 missing, found at t + 30 ms */
	assert_false(ep_rxw_nak_due(&w, t + 30 * MS, d, r, 65536, &f, &l));
	assert_int_equal(ep_rxw_nak_wait(&w, t + 30 * MS, d, r), 70 * MS);
	assert_true(ep_rxw_nak_due(&w, t + d, d, r, 65536, &f, &l));
	assert_int_equal(f, 2);
	assert_int_equal(l, 3);
	assert_false(ep_rxw_nak_due(&w, t + d, d, r, 65536, &f, &l));
	/* the second gap on its own delay, although the first is not repaired */
	assert_false(ep_rxw_nak_due(&w, t + 129 * MS, d, r, 65536, &f, &l));
	assert_true(ep_rxw_nak_due(&w, t + 130 * MS, d, r, 65536, &f, &l));
	assert_int_equal(f, 5);
	assert_int_equal(l, 6);
	/* the first retries every 50 ms alone */
	assert_true(ep_rxw_nak_due(&w, t + 150 * MS, d, r, 65536, &f, &l));
	assert_int_equal(f, 2);
	assert_false(ep_rxw_nak_due(&w, t + 150 * MS, d, r, 65536, &f, &l));
	/* 8..19 lost (found at t + 160 ms), then 15 comes back */
	put(&w, 20);
	assert_false(ep_rxw_nak_due(&w, t + 160 * MS, d, r, 65536, &f, &l));
	put(&w, 15);
	assert_true(ep_rxw_nak_due(&w, t + 180 * MS, d, r, 65536, &f, &l));
	assert_int_equal(f, 5); /* the second gap's retry */
	assert_false(ep_rxw_nak_due(&w, t + 180 * MS, d, r, 65536, &f, &l));
	/* at t + 260 ms both retries and the new gap, as two runs */
	static const uint64_t want[4][2] = { { 2, 3 }, { 5, 6 }, { 8, 14 }, { 16, 19 } };
	unsigned n = 0;

	while (ep_rxw_nak_due(&w, t + 260 * MS, d, r, 65536, &f, &l)) {
		assert_true(n < 4);
		assert_int_equal(f, want[n][0]);
		assert_int_equal(l, want[n][1]);
		n++;
	}
	assert_int_equal(n, 4);
	/* repaired: nothing is due, and po moves past */
	for (uint64_t g = 2; g < 20; g++)
		if (g != 4 && g != 7 && g != 15)
			put(&w, g);
	po_advance(&w);
	assert_int_equal(w.po, 21);
	assert_false(ep_rxw_nak_due(&w, t + 500 * MS, d, r, 65536, &f, &l));
	assert_int_equal(w.ngap, 0);
	assert_int_equal(ep_rxw_nak_wait(&w, t + 500 * MS, d, r), UINT64_MAX);
	ep_rxw_free(&w);
}

/* The window is counted from the oldest message not yet U-delivered. */
static void test_window_overflow_and_free(void **state)
{
	struct ep_rxw w;
	bool dup, over;

	(void)state;
	assert_int_equal(ep_rxw_init(&w, 64), 0);
	assert_int_equal(ep_rxw_free_msgs(&w), 64);
	for (uint64_t g = 1; g <= 64; g++)
		put(&w, g);
	po_advance(&w);
	assert_int_equal(ep_rxw_free_msgs(&w), 0);
	assert_null(ep_rxw_place(&w, 65, &dup, &over));
	assert_true(over);
	w.uto = 11; /* ten U-delivered and released */
	for (uint64_t g = 1; g < 11; g++)
		ep_rxw_slot(&w, g)->state = EP_S_EMPTY;
	assert_int_equal(ep_rxw_free_msgs(&w), 10);
	put(&w, 65);
	assert_int_equal(ep_rxw_free_msgs(&w), 9);
	ep_rxw_free(&w);
}

static void test_unavail_holes(void **state)
{
	struct ep_rxw w;
	uint64_t f, l;

	(void)state;
	assert_int_equal(ep_rxw_init(&w, 256), 0);
	ep_rxw_reset(&w, 50);
	put(&w, 50);
	put(&w, 55);
	po_advance(&w);
	/* 51..54 will never come: they become holes; 55 is kept as it is. */
	assert_int_equal(ep_rxw_unavail(&w, 40, 54), 4);
	assert_int_equal(ep_rxw_slot(&w, 55)->state, EP_S_MSG);
	po_advance(&w);
	assert_int_equal(w.po, 56);
	assert_false(ep_rxw_nak_due(&w, 10 * MS, 0, 0, 100, &f, &l));
	ep_rxw_free(&w);
}

static void test_ack_batching(void **state)
{
	struct ep_ack a = { 0 };
	uint64_t t = 5000 * MS;

	(void)state;
	/* The first one goes at once: the control process learns our buffer. */
	assert_true(ep_ack_due(&a, 1, t, 64, 500 * US, 50 * MS));
	ep_ack_sent(&a, 1, t);
	assert_false(ep_ack_due(&a, 1, t + 100 * US, 64, 500 * US, 50 * MS));
	/* Every K messages ... */
	assert_false(ep_ack_due(&a, 64, t + 100 * US, 64, 500 * US, 50 * MS));
	assert_true(ep_ack_due(&a, 65, t + 100 * US, 64, 500 * US, 50 * MS));
	ep_ack_sent(&a, 65, t + 100 * US);
	/* ... or T with something new ... */
	assert_false(ep_ack_due(&a, 70, t + 500 * US, 64, 500 * US, 50 * MS));
	assert_true(ep_ack_due(&a, 70, t + 600 * US, 64, 500 * US, 50 * MS));
	/* ... but nothing new: only the idle refresh. */
	assert_false(ep_ack_due(&a, 65, t + 10 * MS, 64, 500 * US, 50 * MS));
	assert_true(ep_ack_due(&a, 65, t + 51 * MS, 64, 500 * US, 50 * MS));
}

/* The pacer of WAN groups: a token bucket at CREDIT's rate_kbps. */
static void test_pace(void **state)
{
	(void)state;
	struct ep_pace p;
	const uint64_t MSEC = 1000000u;
	uint64_t t = 1000 * MSEC;

	ep_pace_init(&p);
	/* Rate 0: no limit at all. */
	for (int i = 0; i < 1000; i++)
		assert_true(ep_pace_take(&p, 1500, t));
	assert_int_equal(ep_pace_wait_ns(&p, 1500, t), 0);
	/* 8000 kbit/s = 10^6 B/s; depth 5 ms = 5000 B (above two 1500 B frames). */
	ep_pace_set(&p, 8000, 3000, t);
	assert_true(p.tb.depth > 4999 && p.tb.depth < 5001);
	/* It starts full: three 1500 B frames go, the fourth waits 1 ms. */
	for (int i = 0; i < 3; i++)
		assert_true(ep_pace_take(&p, 1500, t));
	assert_false(ep_pace_take(&p, 1500, t));
	assert_int_equal(p.waited, 1);
	uint64_t w = ep_pace_wait_ns(&p, 1500, t);
	assert_in_range(w, 999000, 1001000);
	assert_false(ep_pace_take(&p, 1500, t + w / 2));
	assert_true(ep_pace_take(&p, 1500, t + w));
	/* Over one simulated second, sending whenever allowed: 10^6 B plus
	 * at most the depth, never more. */
	uint64_t sent = 0, start = t + w;
	for (uint64_t now = start; now < start + 1000 * MSEC; now += 20000)
		while (ep_pace_take(&p, 1000, now))
			sent += 1000;
	assert_in_range(sent, 990000, 1000000 + 5000);
	/* A lower rate: tokens capped at the new depth (min_depth here). */
	uint64_t now = start + 2000 * MSEC; /* a long pause fills the bucket */
	ep_pace_set(&p, 80, 3000, now);   /* 10^4 B/s: 5 ms is 50 B < 3000 */
	assert_true(p.tb.depth > 2999 && p.tb.depth < 3001);
	assert_true(ep_pace_take(&p, 3000, now));
	assert_false(ep_pace_take(&p, 100, now));
	assert_in_range(ep_pace_wait_ns(&p, 100, now), 9 * MSEC, 11 * MSEC);
	/* Back to no limit. */
	ep_pace_set(&p, 0, 3000, now);
	assert_true(ep_pace_take(&p, 100000, now));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pack_spans),
		cmocka_unit_test(test_pack_bound_and_growth),
		cmocka_unit_test(test_sent_append_and_rewind),
		cmocka_unit_test(test_go_back),
		cmocka_unit_test(test_go_back_with_nothing_deferred),
		cmocka_unit_test(test_credit),
		cmocka_unit_test(test_gap_nak),
		cmocka_unit_test(test_nak_within_the_window),
		cmocka_unit_test(test_gaps_have_their_own_timers),
		cmocka_unit_test(test_window_overflow_and_free),
		cmocka_unit_test(test_unavail_holes),
		cmocka_unit_test(test_ack_batching),
		cmocka_unit_test(test_pace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
