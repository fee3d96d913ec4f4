/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's protocol (endpoint/ep_proto.c) on a detached endpoint:
 * no sockets, no ring; the test hands it datagrams as its socket would
 * and reads what it sends from the tap. Regressions of what the fuzzer
 * found (tests/fuzz/fuzz_ep_rx.c, corpus/ep_rx/regress-*).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <interlink/auth.h>
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

/* An endpoint without sockets, member ME, its frames to tap. */
static struct il_ep *open_detached(uint32_t window)
{
	struct il_ep_config cfg;
	char err[256];

	il_ep_config_init(&cfg);
	cfg.member_id = ME;
	cfg.incarnation = 3;
	cfg.rx_window = window;
	struct il_ep *ep = ep_open_detached(&cfg, tap, NULL, err, sizeof(err));
	assert_non_null(ep);
	return ep;
}

static struct il_ep *open_ep(uint32_t window, struct seen *s)
{
	struct il_ep_callbacks cb = { .po = on_po, .uto = on_uto };
	struct il_ep *ep = open_detached(window);

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

/* ---- a newer epoch: senders send again (docs/ha.md, 6.4) ---------------- */

static unsigned n_data_tx; /* DATA frames the endpoint sent */

static void tap_data(void *arg, const uint8_t *f, size_t len)
{
	tap(arg, f, len);
	if (len > IL_OFF_TYPE && f[IL_OFF_TYPE] == IL_T_DATA)
		n_data_tx++;
}

/* Group 1 with our roles, a VIEW of EPOCH naming us with them, three
 * messages sent. */
static struct il_ep *open_sender(uint32_t roles, struct seen *s)
{
	struct il_ep_config cfg;
	struct il_ep_callbacks cb = { .po = on_po, .uto = on_uto };
	char err[256];
	uint8_t f[128], *b = f + IL_HDR_LEN;
	struct il_hdr_fields h = { .type = IL_T_VIEW, .group_id = 1, .epoch = EPOCH,
				   .global_seq = 1 };

	il_ep_config_init(&cfg);
	cfg.member_id = ME;
	cfg.incarnation = 3;
	cfg.wait_credit = false; /* flow control is not what this is about */
	struct il_ep *ep = ep_open_detached(&cfg, tap_data, NULL, err, sizeof(err));
	assert_non_null(ep);
	assert_int_equal(il_ep_join(ep, 1, "239.1.1.1", roles, &cb, s), 0);
	b = il_view_put(b, 1, 1, 0);
	b = il_view_member_put(b, ME, (uint8_t)((roles & IL_EP_SENDER ? IL_ROLE_SENDER : 0) |
						(roles & IL_EP_RECEIVER ? IL_ROLE_RECEIVER : 0)));
	il_hdr_put(f, &h);
	rx(ep, f, (size_t)(b - f));
	assert_true(il_ep_is_member(ep, 1));
	n_data_tx = 0;
	for (uint8_t i = 0; i < 3; i++)
		assert_int_equal(il_ep_send(ep, 1, &i, 1), 0);
	assert_int_equal(n_data_tx, 3);
	return ep;
}

/* The new epoch's first frame (its announcement: a STABLE of epoch e). */
static void announce(struct il_ep *ep, uint32_t e)
{
	uint8_t f[64];
	struct il_hdr_fields h = { .type = IL_T_STABLE, .group_id = 1, .epoch = e,
				   .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .global_seq = 1, .stable_seq = 0 };

	il_stable_put(il_hdr_put(f, &h), 1);
	rx(ep, f, IL_HDR_LEN + IL_STABLE_LEN);
}

/* A member that only sends puts its unstable messages back in front of its
 * queue at the announcement and sends them again at once, from sender_seq
 * 1, without waiting for the old epoch's final watermark; once per newer
 * epoch, again for an even newer one. */
static void test_a_sender_sends_again_at_the_announcement(void **state)
{
	struct seen s = { 0 };
	struct il_ep *ep = open_sender(IL_EP_SENDER, &s);

	(void)state;
	announce(ep, EPOCH + 1);
	assert_true(ep->awaiting);
	ep_timers(ep, ep_now_ns());
	assert_int_equal(n_data_tx, 4); /* the three again, packed in one frame */
	assert_int_equal(last_tx[IL_OFF_TYPE], IL_T_DATA);
	assert_int_equal(il_get64(last_tx + IL_OFF_SENDER_SEQ), 1);
	assert_int_equal(il_get16(last_tx + IL_OFF_MSG_COUNT), 3);
	/* A second frame of the same epoch: nothing again. */
	announce(ep, EPOCH + 1);
	ep_timers(ep, ep_now_ns());
	assert_int_equal(n_data_tx, 4);
	/* An even newer epoch before the cut: into that one too. */
	announce(ep, EPOCH + 2);
	ep_timers(ep, ep_now_ns());
	assert_int_equal(n_data_tx, 5);
	assert_int_equal(il_get64(last_tx + IL_OFF_SENDER_SEQ), 1);
	il_ep_close(ep);
}

/* A member that also receives waits for the final watermark (its cut may
 * be incomplete, and it then rejoins as a new incarnation). */
static void test_a_receiving_sender_waits_for_the_cut(void **state)
{
	struct seen s = { 0 };
	struct il_ep *ep = open_sender(IL_EP_SENDER | IL_EP_RECEIVER, &s);

	(void)state;
	announce(ep, EPOCH + 1);
	assert_true(ep->awaiting);
	ep_timers(ep, ep_now_ns());
	assert_int_equal(n_data_tx, 3);
	il_ep_close(ep);
}

/* ---- authenticated control traffic -------------------------------------- */

static const struct il_auth_key KEY = { .id = 7, .key = "0123456789abcdef0123456789abcde" };
static uint64_t appliance_ctr = 1000;

static void key_file(char *path, size_t len, const struct il_auth_key *k, mode_t mode)
{
	snprintf(path, len, "/tmp/il-ep-proto-keys-%d", (int)getpid());
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "# test\n%u ", k->id);
	for (unsigned i = 0; i < IL_AUTH_KEY_LEN; i++)
		fprintf(f, "%02x", k->key[i]);
	fprintf(f, "\n");
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* What the appliance's stages send, signed (or not) by the test. */
static size_t signed_view(uint8_t *f, uint32_t epoch, const struct il_auth_key *k)
{
	uint8_t *b = f + IL_HDR_LEN;
	struct il_hdr_fields h = { .type = IL_T_VIEW, .group_id = 1, .epoch = epoch,
				   .global_seq = 1 };

	b = il_view_put(b, 1, 1, 0);
	b = il_view_member_put(b, ME, IL_ROLE_RECEIVER);
	il_hdr_put(f, &h);
	size_t len = (size_t)(b - f);
	return k ? il_auth_seal(k, ++appliance_ctr, f, (uint32_t)len) : len;
}

static size_t signed_stable(uint8_t *f, uint32_t epoch, uint64_t next, uint64_t wm,
			    const struct il_auth_key *k)
{
	struct il_hdr_fields h = { .type = IL_T_STABLE, .group_id = 1, .epoch = epoch,
				   .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .global_seq = next, .stable_seq = wm };

	il_stable_put(il_hdr_put(f, &h), 1);
	return k ? il_auth_seal(k, ++appliance_ctr, f, IL_HDR_LEN + IL_STABLE_LEN)
		 : IL_HDR_LEN + IL_STABLE_LEN;
}

static struct il_ep *open_auth_ep(struct seen *s, char *path)
{
	struct il_ep_callbacks cb = { .po = on_po, .uto = on_uto };
	char err[256];
	struct il_ep *ep = open_detached(64);

	key_file(path, 128, &KEY, 0600);
	assert_int_equal(il_ep_set_auth(ep, path, 0, err, sizeof(err)), 0);
	assert_int_equal(il_ep_join(ep, 1, "239.1.1.1", IL_EP_RECEIVER, &cb, s), 0);
	return ep;
}

/* Our JOIN goes signed; the appliance's VIEW is taken only signed with a
 * known key, once; a forged STABLE (another key) changes nothing. */
static void test_auth_signs_ours_and_checks_the_appliances(void **state)
{
	struct il_auth_keyring ring = { .n = 1, .k = { KEY } };
	struct il_auth_key other = KEY;
	struct il_ep_auth_stats as;
	struct seen s = { 0 };
	uint8_t f[256];
	char path[128], err[256];
	size_t len;

	(void)state;
	struct il_ep *ep = open_auth_ep(&s, path);
	assert_int_equal(last_tx[IL_OFF_TYPE], IL_T_JOIN);
	assert_true(last_tx[IL_OFF_FLAGS] & IL_F_AUTH);
	assert_int_equal(last_tx[IL_OFF_HDR_LEN], IL_AUTH_HDR_LEN);
	assert_int_equal(il_auth_verify(&ring, NULL, last_tx, (uint32_t)last_tx_len), IL_AUTH_OK);
	assert_int_equal(il_ep_set_auth(ep, path, 0, err, sizeof(err)), -EBUSY);
	/* Unsigned, then under another key: dropped, still joining. */
	rx(ep, f, signed_view(f, EPOCH, NULL));
	other.key[0] ^= 1;
	rx(ep, f, signed_view(f, EPOCH, &other));
	assert_false(il_ep_is_member(ep, 1));
	il_ep_get_auth_stats(ep, &as);
	assert_int_equal(as.bad_mac, 2);
	/* Signed: taken; the same frame again: a replay. */
	len = signed_view(f, EPOCH, &KEY);
	rx(ep, f, len);
	assert_true(il_ep_is_member(ep, 1));
	rx(ep, f, len);
	il_ep_get_auth_stats(ep, &as);
	assert_int_equal(as.verified_rx, 1);
	assert_int_equal(as.replay, 1);
	/* A forged watermark does not make anything stable. */
	data(ep, 1, 1, 2, IL_F_FIFO_START);
	rx(ep, f, signed_stable(f, EPOCH, 3, 3, &other));
	deliver(ep);
	assert_int_equal(s.po, 2);
	assert_int_equal(s.uto, 0);
	rx(ep, f, signed_stable(f, EPOCH, 3, 3, &KEY));
	deliver(ep);
	assert_int_equal(s.uto, 2);
	/* Our ACKs and the LEAVE are signed too. */
	il_ep_close(ep);
	assert_int_equal(last_tx[IL_OFF_TYPE], IL_T_LEAVE);
	assert_int_equal(il_auth_verify(&ring, NULL, last_tx, (uint32_t)last_tx_len), IL_AUTH_OK);
	unlink(path);
}

/* Frames of a new epoch are held until the old one's final watermark; when
 * they are handled then, their MAC was checked already: checked again they
 * would be replays, and the new epoch's view lost. */
static void test_auth_frames_held_across_an_epoch_are_checked_once(void **state)
{
	struct il_ep_auth_stats as;
	struct seen s = { 0 };
	uint8_t f[256];
	char path[128];

	(void)state;
	struct il_ep *ep = open_auth_ep(&s, path);
	rx(ep, f, signed_view(f, EPOCH, &KEY));
	assert_true(il_ep_is_member(ep, 1));
	/* The appliance restarted: its new epoch's STABLE comes first, held. */
	rx(ep, f, signed_stable(f, EPOCH + 1, 1, 0, &KEY));
	assert_int_equal(ep->n_held, 1);
	/* The old epoch's final watermark: the held frame is handled now. */
	rx(ep, f, signed_stable(f, EPOCH, 0, 1, &KEY));
	assert_int_equal(ep->epoch, EPOCH + 1);
	il_ep_get_auth_stats(ep, &as);
	assert_int_equal(as.replay, 0);
	assert_int_equal(as.bad_mac, 0);
	assert_int_equal(as.verified_rx, 3);
	il_ep_close(ep);
	unlink(path);
}

/* A key file others may read is refused, naming it. */
static void test_auth_key_file_checked(void **state)
{
	struct il_ep_config cfg;
	char path[128], err[512];

	(void)state;
	il_ep_config_init(&cfg);
	cfg.member_id = ME;
	struct il_ep *ep = ep_open_detached(&cfg, tap, NULL, err, sizeof(err));
	assert_non_null(ep);
	key_file(path, sizeof(path), &KEY, 0644);
	assert_int_equal(il_ep_set_auth(ep, path, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "mode 0644"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(il_ep_set_auth(ep, path, 8, err, sizeof(err)), -ENOENT);
	assert_int_equal(il_ep_set_auth(ep, path, 7, err, sizeof(err)), 0);
	il_ep_close(ep);
	unlink(path);
}

/* Up to IL_EP_MAX_GROUPS groups at once, each found by its id (a VIEW of
 * the 100th makes us a member of that one alone); one more is refused;
 * a slot freed by a leave is taken again, and the loops' bound shrinks
 * back as the highest ones leave. */
static void test_many_groups(void **state)
{
	char addr[32];
	struct seen s = { 0 };
	struct il_ep_callbacks cb = { .po = on_po, .uto = on_uto };

	(void)state;
	struct il_ep *ep = open_detached(64);
	for (unsigned i = 0; i < IL_EP_MAX_GROUPS; i++) {
		snprintf(addr, sizeof(addr), "239.2.%u.%u", i / 200, i % 200 + 1);
		assert_int_equal(il_ep_join(ep, (uint16_t)(1000 + 7 * i), addr,
					    IL_EP_RECEIVER | (i % 2 ? IL_EP_SENDER : 0), &cb, &s), 0);
	}
	assert_int_equal(ep->n_slots, IL_EP_MAX_GROUPS);
	assert_int_equal(il_ep_join(ep, 60000, "239.3.0.1", IL_EP_RECEIVER, &cb, &s), -ENOSPC);
	assert_int_equal(il_ep_join(ep, 1000 + 7 * 5, "239.3.0.1", IL_EP_RECEIVER, &cb, &s),
			 -EEXIST);
	for (unsigned i = 0; i < IL_EP_MAX_GROUPS; i++) {
		struct ep_group *g = ep_group(ep, (uint16_t)(1000 + 7 * i));
		assert_non_null(g);
		assert_int_equal(g->id, 1000 + 7 * i);
		assert_int_equal(g->roles & IL_EP_SENDER, i % 2 ? IL_EP_SENDER : 0);
	}
	assert_null(ep_group(ep, 1001));
	/* A VIEW of the 100th group makes us a member of it alone. */
	uint8_t f[128], *b = f + IL_HDR_LEN;
	const uint16_t gid = 1000 + 7 * 99;
	struct il_hdr_fields h = { .type = IL_T_VIEW, .group_id = gid, .epoch = EPOCH,
				   .global_seq = 1 };
	b = il_view_put(b, 1, 1, 0);
	b = il_view_member_put(b, ME, IL_ROLE_RECEIVER | IL_ROLE_SENDER);
	il_hdr_put(f, &h);
	rx(ep, f, (size_t)(b - f));
	assert_true(il_ep_is_member(ep, gid));
	assert_false(il_ep_is_member(ep, gid - 7));
	assert_false(il_ep_is_member(ep, gid + 7));
	/* Leave one in the middle: its slot is the next join's. */
	assert_int_equal(il_ep_leave(ep, 1000 + 7 * 40), 0);
	assert_null(ep_group(ep, 1000 + 7 * 40));
	assert_int_equal(il_ep_leave(ep, 1000 + 7 * 40), -ENOENT);
	assert_int_equal(il_ep_join(ep, 60000, "239.3.0.1", IL_EP_RECEIVER, &cb, &s), 0);
	assert_ptr_equal(ep_group(ep, 60000), &ep->g[40]);
	/* The highest ones leave: the bound follows. */
	for (unsigned i = IL_EP_MAX_GROUPS; i-- > 50;)
		assert_int_equal(il_ep_leave(ep, (uint16_t)(1000 + 7 * i)), 0);
	assert_int_equal(ep->n_slots, 50);
	assert_true(ep_group(ep, 1000 + 7 * 49) == &ep->g[49]);
	il_ep_close(ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_goes_to_the_tap),
		cmocka_unit_test(test_leave_after_a_stable_far_ahead),
		cmocka_unit_test(test_po_never_past_the_window),
		cmocka_unit_test(test_data_at_the_end_of_the_sequence_space),
		cmocka_unit_test(test_auth_signs_ours_and_checks_the_appliances),
		cmocka_unit_test(test_a_sender_sends_again_at_the_announcement),
		cmocka_unit_test(test_a_receiving_sender_waits_for_the_cut),
		cmocka_unit_test(test_auth_frames_held_across_an_epoch_are_checked_once),
		cmocka_unit_test(test_auth_key_file_checked),
		cmocka_unit_test(test_many_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
