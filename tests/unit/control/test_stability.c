/* SPDX-License-Identifier: BSD-3-Clause
 * Stability watermark: minimum over live receivers, advancing when the
 * slowest leaves, never moving backward; and the membership layer that
 * feeds it and coalesces what it publishes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "membership.h"
#include "stability.h"

static void test_min_over_live(void **state)
{
	struct il_stab s;

	(void)state;
	il_stab_init(&s, 1, 0);
	/* No receiver: nothing to compute, the watermark stays. */
	assert_false(il_stab_update(&s));
	assert_int_equal(s.watermark, 0);
	assert_int_equal(il_stab_add(&s, 10, 0), 0);
	assert_int_equal(il_stab_add(&s, 11, 0), 0);
	assert_int_equal(il_stab_add(&s, 12, 0), 0);
	assert_int_equal(il_stab_add(&s, 11, 0), 1);
	assert_int_equal(il_stab_ack(&s, 10, 100), 0);
	assert_int_equal(il_stab_ack(&s, 11, 50), 0);
	/* 12 has acked nothing: the minimum is 0. */
	assert_false(il_stab_update(&s));
	assert_int_equal(il_stab_ack(&s, 12, 70), 0);
	assert_true(il_stab_update(&s));
	assert_int_equal(s.watermark, 50);
	assert_int_equal(il_stab_ack(&s, 11, 90), 0);
	assert_true(il_stab_update(&s));
	assert_int_equal(s.watermark, 70);
	/* Nothing new: no advance reported. */
	assert_false(il_stab_update(&s));
	assert_int_equal(s.advances, 2);
	il_stab_free(&s);
}

static void test_leave_lets_it_advance(void **state)
{
	struct il_stab s;
	uint64_t cum;

	(void)state;
	il_stab_init(&s, 1, 0);
	il_stab_add(&s, 1, 0);
	il_stab_add(&s, 2, 0);
	il_stab_add(&s, 3, 0);
	il_stab_ack(&s, 1, 500);
	il_stab_ack(&s, 2, 20); /* the straggler */
	il_stab_ack(&s, 3, 300);
	assert_true(il_stab_update(&s));
	assert_int_equal(s.watermark, 20);
	assert_true(il_stab_remove(&s, 2));
	assert_false(il_stab_remove(&s, 2));
	assert_true(il_stab_update(&s));
	assert_int_equal(s.watermark, 300);
	assert_false(il_stab_get(&s, 2, &cum));
	assert_true(il_stab_get(&s, 1, &cum));
	assert_int_equal(cum, 500);
	/* Its late ACKs are ignored and counted. */
	assert_int_equal(il_stab_ack(&s, 2, 1000), -1);
	assert_int_equal(s.acks_unknown, 1);
	/* The last receiver leaving freezes the watermark where it is. */
	il_stab_remove(&s, 1);
	il_stab_remove(&s, 3);
	assert_false(il_stab_update(&s));
	assert_int_equal(s.watermark, 300);
	il_stab_free(&s);
}

static void test_never_backward(void **state)
{
	struct il_stab s;
	uint64_t cum;

	(void)state;
	il_stab_init(&s, 1, 0);
	il_stab_add(&s, 1, 0);
	il_stab_ack(&s, 1, 100);
	assert_true(il_stab_update(&s));
	/* A reordered, older cumulative ACK: ignored. */
	assert_int_equal(il_stab_ack(&s, 1, 60), 1);
	assert_int_equal(s.acks_stale, 1);
	assert_false(il_stab_update(&s));
	assert_int_equal(s.watermark, 100);
	/* A joiner that claims to start below the watermark starts at it. */
	assert_int_equal(il_stab_add(&s, 2, 10), 0);
	assert_true(il_stab_get(&s, 2, &cum));
	assert_int_equal(cum, 100);
	assert_false(il_stab_update(&s));
	assert_int_equal(s.watermark, 100);
	/* A joiner ahead of everyone does not hold the others back... */
	assert_int_equal(il_stab_add(&s, 3, 5000), 0);
	il_stab_ack(&s, 1, 200);
	il_stab_ack(&s, 2, 150);
	assert_true(il_stab_update(&s));
	assert_int_equal(s.watermark, 150);
	/* ...and a random walk of ACKs and membership changes never sees
	 * the watermark fall. */
	srand(7);
	for (unsigned i = 0; i < 100000; i++) {
		uint32_t id = (uint32_t)(rand() % 8);
		uint64_t before = s.watermark;

		switch (rand() % 10) {
		case 0:
			il_stab_add(&s, id, s.watermark + (uint64_t)(rand() % 50));
			break;
		case 1:
			il_stab_remove(&s, id);
			break;
		default:
			if (il_stab_get(&s, id, &cum)) {
				uint64_t d = (uint64_t)(rand() % 20);

				/* Some steps back (stale), most forward. */
				il_stab_ack(&s, id, d < 5 && cum >= d ? cum - d : cum + d);
			}
			break;
		}
		il_stab_update(&s);
		assert_true(s.watermark >= before);
		for (unsigned k = 0; k < s.n; k++)
			assert_true(s.rcv[k].cum >= s.watermark);
	}
	il_stab_reset(&s, 2);
	assert_int_equal(s.watermark, 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(s.epoch, 2);
	il_stab_free(&s);
}

static struct il_cmsg msg(uint16_t type, uint16_t group, uint32_t rcv, uint32_t epoch,
			  uint64_t seq)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.group = group;
	if (type == IL_CM_ACK) {
		m.u.ack.receiver = rcv;
		m.u.ack.epoch = epoch;
		m.u.ack.cum_seq = seq;
	} else {
		m.u.member.receiver = rcv;
		m.u.member.epoch = epoch;
		m.u.member.seq = seq;
	}
	return m;
}

static void apply(struct il_mship *ms, uint16_t type, uint16_t g, uint32_t r, uint64_t seq,
		  int want)
{
	struct il_cmsg m = msg(type, g, r, ms->epoch, seq);

	assert_int_equal(il_mship_apply(ms, &m, 1), want);
}

static void test_membership_publish(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[4], m;
	unsigned n;

	(void)state;
	assert_int_equal(il_mship_init(&ms, 5), 0);
	apply(&ms, IL_CM_JOIN, 1, 100, 0, 0);
	apply(&ms, IL_CM_JOIN, 1, 101, 0, 0);
	apply(&ms, IL_CM_JOIN, 1, 101, 0, 1); /* repeat: refresh only */
	apply(&ms, IL_CM_JOIN, 2, 100, 40, 0);
	apply(&ms, IL_CM_ACK, 1, 100, 30, 0);
	apply(&ms, IL_CM_ACK, 1, 101, 20, 0);
	apply(&ms, IL_CM_HEARTBEAT, 1, 101, 0, 0);
	apply(&ms, IL_CM_HEARTBEAT, 1, 999, 0, 1);
	apply(&ms, IL_CM_ACK, 3, 100, 30, 1); /* no such group */
	/* Group 1 at 20, group 2 at its joiner's start, 40. */
	n = il_mship_collect(&ms, out, 4);
	assert_int_equal(n, 2);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(out[i].type, IL_CM_WATERMARK);
		assert_int_equal(out[i].u.wm.epoch, 5);
		assert_int_equal(out[i].u.wm.stable_seq, out[i].group == 1 ? 20 : 40);
		assert_int_equal(out[i].u.wm.receivers, out[i].group == 1 ? 2 : 1);
	}
	/* Nothing accepted by the ring: both come out again. */
	il_mship_published(&ms, out, 0);
	assert_int_equal(il_mship_collect(&ms, out, 4), 2);
	il_mship_published(&ms, out, 2);
	assert_int_equal(il_mship_collect(&ms, out, 4), 0);
	assert_int_equal(ms.st.published, 2);

	/* Several moves while the ring is full coalesce into the latest. */
	apply(&ms, IL_CM_ACK, 1, 101, 25, 0);
	n = il_mship_collect(&ms, out, 4);
	assert_int_equal(n, 1);
	il_mship_published(&ms, out, 0);
	apply(&ms, IL_CM_ACK, 1, 101, 28, 0);
	apply(&ms, IL_CM_ACK, 1, 101, 29, 0);
	n = il_mship_collect(&ms, out, 4);
	assert_int_equal(n, 1);
	assert_int_equal(out[0].u.wm.stable_seq, 29);
	il_mship_published(&ms, out, 1);
	/* The slow one leaves: the watermark jumps to the other's ACK. */
	apply(&ms, IL_CM_LEAVE, 1, 101, 0, 0);
	apply(&ms, IL_CM_LEAVE, 1, 101, 0, 1);
	n = il_mship_collect(&ms, out, 4);
	assert_int_equal(n, 1);
	assert_int_equal(out[0].u.wm.stable_seq, 30);
	assert_int_equal(out[0].u.wm.receivers, 1);
	il_mship_published(&ms, out, 1);
	assert_int_equal(il_mship_group(&ms, 1)->view_id, 3);

	/* Another epoch's messages are not mixed in. */
	m = msg(IL_CM_ACK, 1, 100, 4, 1000);
	assert_int_equal(il_mship_apply(&ms, &m, 1), 1);
	assert_int_equal(ms.st.wrong_epoch, 1);
	m = msg(IL_CM_WATERMARK, 1, 0, 5, 0);
	assert_int_equal(il_mship_apply(&ms, &m, 1), -1);
	/* Data-plane restart: forget everything. */
	il_mship_reset(&ms, 6);
	assert_null(il_mship_group(&ms, 1));
	assert_int_equal(il_mship_collect(&ms, out, 4), 0);
	il_mship_free(&ms);
}

static void test_many_groups_limited_output(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[8];
	unsigned total = 0, n;

	(void)state;
	assert_int_equal(il_mship_init(&ms, 1), 0);
	for (uint16_t g = 0; g < 100; g++) {
		apply(&ms, IL_CM_JOIN, g, 7, 0, 0);
		apply(&ms, IL_CM_ACK, g, 7, 1000u + g, 0);
	}
	/* Eight at a time, each group exactly once. */
	while ((n = il_mship_collect(&ms, out, 8)) > 0) {
		for (unsigned i = 0; i < n; i++)
			assert_int_equal(out[i].u.wm.stable_seq, 1000u + out[i].group);
		il_mship_published(&ms, out, n);
		total += n;
		assert_true(total <= 100);
	}
	assert_int_equal(total, 100);
	il_mship_free(&ms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_min_over_live),
		cmocka_unit_test(test_leave_lets_it_advance),
		cmocka_unit_test(test_never_backward),
		cmocka_unit_test(test_membership_publish),
		cmocka_unit_test(test_many_groups_limited_output),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
