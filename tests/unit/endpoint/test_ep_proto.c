/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's protocol (endpoint/ep_proto.c) on a detached endpoint:
 * no sockets, no ring; the test hands it datagrams as its socket would
 * and reads what it sends from the tap. Regressions of what the fuzzer
 * found (tests/fuzz/fuzz_ep_rx.c, corpus/ep_rx/regress-*).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ep_priv.h"

#define ME 0x0a000007u
#define SENDER 0x0a000008u
#define EPOCH 100u

static unsigned n_tx;
static uint8_t last_tx[EP_FRAME_MAX];
static size_t last_tx_len;

static void tap(void *arg, const uint8_t *f, size_t len)
{
	(void)arg;
	n_tx++;
	memcpy(last_tx, f, len);
	last_tx_len = len;
}

struct seen {
	unsigned po, uto;
	uint64_t po_g[64], po_sseq[64];
};

static void on_po(void *user, const struct il_ep_msg *m)
{
	struct seen *s = user;

	if (s->po < 64) {
		s->po_g[s->po] = m->global_seq;
		s->po_sseq[s->po] = m->sender_seq;
	}
	s->po++;
}

static void on_uto(void *user, const struct il_ep_msg *m)
{
	struct seen *s = user;

	(void)m;
	s->uto++;
}

static struct il_ep *open_ep(uint32_t window, struct seen *s)
{
	struct il_ep_config cfg;
	struct il_ep_callbacks cb = { .po = on_po, .uto = on_uto };
	char err[256];

	il_ep_config_init(&cfg);
	cfg.member_id = ME;
	cfg.incarnation = 3;
	cfg.rx_window = window;
	struct il_ep *ep = ep_open_detached(&cfg, tap, NULL, err, sizeof(err));
	assert_non_null(ep);
	assert_int_equal(il_ep_join(ep, 1, "239.1.1.1", IL_EP_RECEIVER, &cb, s), 0);
	return ep;
}

static void rx(struct il_ep *ep, const uint8_t *f, size_t len)
{
	ep_rx_datagram(ep, f, len, ep_now_ns());
}

/* A VIEW of group 1 naming us and SENDER, starting at start. */
static void view(struct il_ep *ep, uint64_t start)
{
	uint8_t f[128], *b = f + IL_HDR_LEN;
	struct il_hdr_fields h = { .type = IL_T_VIEW, .group_id = 1, .epoch = EPOCH,
				   .global_seq = start };

	b = il_view_put(b, 1, 2, 0);
	b = il_view_member_put(b, ME, IL_ROLE_RECEIVER);
	b = il_view_member_put(b, SENDER, IL_ROLE_SENDER);
	il_hdr_put(f, &h);
	rx(ep, f, (size_t)(b - f));
	assert_true(il_ep_is_member(ep, 1));
}

static void stable(struct il_ep *ep, uint64_t next, uint64_t wm)
{
	uint8_t f[64];
	struct il_hdr_fields h = { .type = IL_T_STABLE, .group_id = 1, .epoch = EPOCH,
				   .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .global_seq = next, .stable_seq = wm };

	il_stable_put(il_hdr_put(f, &h), 1);
	rx(ep, f, IL_HDR_LEN + IL_STABLE_LEN);
}

/* One DATA frame of n one-byte messages from SENDER. */
static void data(struct il_ep *ep, uint64_t g, uint64_t sseq, unsigned n, uint8_t flags)
{
	uint8_t f[256], *b = f + IL_HDR_LEN;
	struct il_hdr_fields h = { .type = IL_T_DATA, .group_id = 1, .epoch = EPOCH,
				   .flags = IL_F_STAMPED | flags, .msg_count = (uint16_t)n,
				   .sender_id = SENDER, .sender_seq = sseq, .global_seq = g };

	for (unsigned i = 0; i < n; i++) {
		b = il_rec_put(b, 1);
		*b++ = (uint8_t)(sseq + i);
	}
	il_hdr_put(f, &h);
	rx(ep, f, (size_t)(b - f));
}

static void deliver(struct il_ep *ep)
{
	ep_deliver(ep, ep_group(ep, 1));
}

/* A STABLE may announce any next sequence: leaving walked every slot up
 * to it (2^62 of them, practically forever). */
static void test_leave_after_a_stable_far_ahead(void **state)
{
	struct seen s = { 0 };
	struct il_ep *ep = open_ep(64, &s);

	(void)state;
	view(ep, 1);
	data(ep, 1, 1, 3, IL_F_FIFO_START);
	stable(ep, 1ull << 62, 0);
	alarm(10); /* the old code never returns */
	assert_int_equal(il_ep_leave(ep, 1), 0);
	alarm(0);
	il_ep_close(ep);
}

/* With the window full and nothing U-delivered, P-delivery ran on into
 * the slots of the oldest messages and delivered them again under other
 * sequence numbers. */
static void test_po_never_past_the_window(void **state)
{
	struct seen s = { 0 };
	struct il_ep *ep = open_ep(4, &s);

	(void)state;
	view(ep, 1);
	data(ep, 1, 1, 1, IL_F_FIFO_START);
	data(ep, 2, 2, 3, 0);
	stable(ep, 10, 0); /* the group is at 10; nothing stable yet */
	deliver(ep);
	assert_int_equal(s.po, 4);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(s.po_g[i], i + 1);
		assert_int_equal(s.po_sseq[i], i + 1);
	}
	assert_int_equal(s.uto, 0);
	/* Stability frees the window; the rest is asked for and comes. */
	stable(ep, 10, 5);
	deliver(ep);
	assert_int_equal(s.uto, 4);
	data(ep, 5, 5, 4, 0);
	deliver(ep);
	assert_int_equal(s.po, 8);
	assert_int_equal(s.po_g[7], 8);
	il_ep_close(ep);
}

/* A frame whose messages would run past 2^64 - 1 is refused: its last slot
 * lay beyond the window's end, where no release reached it (a leak). */
static void test_data_at_the_end_of_the_sequence_space(void **state)
{
	struct seen s = { 0 };
	struct il_ep *ep = open_ep(64, &s);
	struct il_ep_stats st;

	(void)state;
	view(ep, UINT64_MAX);
	data(ep, UINT64_MAX, 1, 2, IL_F_FIFO_START);
	il_ep_get_stats(ep, &st);
	assert_int_equal(st.rx_bad, 1);
	assert_int_equal(st.data_rx, 0);
	il_ep_close(ep);
}

/* What a detached endpoint sends is what the appliance's parser takes. */
static void test_join_goes_to_the_tap(void **state)
{
	struct seen s = { 0 };
	struct il_parsed p;
	unsigned before = n_tx;
	struct il_ep *ep = open_ep(64, &s);

	(void)state;
	assert_int_equal(n_tx, before + 1);
	assert_int_equal(il_parse_payload(last_tx, (uint32_t)last_tx_len, &p), IL_V_CONTROL);
	assert_int_equal(p.type, IL_T_JOIN);
	assert_int_equal(il_get32(last_tx + IL_OFF_SENDER_ID), ME);
	il_ep_close(ep);
	assert_int_equal(last_tx[IL_OFF_TYPE], IL_T_LEAVE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_goes_to_the_tap),
		cmocka_unit_test(test_leave_after_a_stable_far_ahead),
		cmocka_unit_test(test_po_never_past_the_window),
		cmocka_unit_test(test_data_at_the_end_of_the_sequence_space),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
