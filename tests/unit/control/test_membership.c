/* SPDX-License-Identifier: BSD-3-Clause
 * Membership (issue 5): the two failure detectors, views and their
 * Fast-Join start point, rejoin with a new incarnation, credit windows
 * shrunk by receivers' buffers, a new data-plane epoch, a control restart
 * (RESYNC) and the grace given while the data plane is silent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <interlink/wire.h>

#include "membership.h"

#define MS 1000000ull

static struct il_cmsg member(uint16_t type, uint32_t id, uint32_t roles, uint32_t inc,
			     uint64_t seq, uint64_t rx_ns)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.group = 1;
	m.u.member = (struct il_cm_member){ .receiver = id, .epoch = 9, .seq = seq,
					    .rx_ns = rx_ns, .roles = roles, .incarnation = inc };
	return m;
}

static struct il_cmsg ack(uint32_t id, uint64_t cum, uint32_t free)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = IL_CM_ACK;
	m.group = 1;
	m.u.ack = (struct il_cm_ack){ .receiver = id, .epoch = 9, .cum_seq = cum,
				      .buffer_free = free };
	return m;
}

static int apply(struct il_mship *ms, struct il_cmsg m, uint64_t now)
{
	return il_mship_apply(ms, &m, now);
}

static void setup(struct il_mship *ms, uint32_t window)
{
	assert_int_equal(il_mship_init(ms, 9), 0);
	ms->cfg = (struct il_mship_cfg){ .suspect_ns = 100 * MS, .exclude_ns = 500 * MS,
					 .window = window };
}

/* Collect what is due and return the VIEW's member ids in ids[]. */
static unsigned collect_view(struct il_mship *ms, struct il_cm_view *v, uint32_t *ids)
{
	struct il_cmsg out[64];
	unsigned n = il_mship_collect_views(ms, out, 64, 1), k = 0;
	bool seen = false;

	for (unsigned i = 0; i < n; i++) {
		if (out[i].type == IL_CM_VIEW) {
			*v = out[i].u.view;
			seen = true;
		} else if (out[i].type == IL_CM_VIEW_MEMBERS) {
			assert_int_equal(out[i].u.vm.index, k);
			for (unsigned j = 0; j < out[i].u.vm.count; j++)
				ids[k++] = out[i].u.vm.m[j].id;
		}
	}
	assert_true(seen);
	assert_int_equal(k, v->n_members);
	return k;
}

static void test_two_detectors(void **state)
{
	struct il_mship ms;
	struct il_cm_view v;
	uint32_t ids[16];

	(void)state;
	setup(&ms, 0);
	assert_int_equal(apply(&ms, member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 10, 0), 0), 0);
	assert_int_equal(apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 10, 0), 0), 0);
	assert_int_equal(collect_view(&ms, &v, ids), 2);
	assert_int_equal(v.view_id, 2);
	assert_int_equal(v.start_seq, 10);
	assert_int_equal(v.reason, IL_VR_JOIN);

	/* 2 keeps talking (the data plane's arrival stamp counts, not ours),
	 * 1 falls silent: suspected at 100 ms, which changes nothing... */
	for (uint64_t t = 20; t <= 140; t += 20) {
		apply(&ms, member(IL_CM_HEARTBEAT, 2, 0, 1, 0, t * MS), t * MS + 50 * MS);
		il_mship_tick(&ms, t * MS);
	}
	assert_int_equal(ms.st.suspicions, 1);
	assert_true(il_mship_group(&ms, 1)->m[0].suspected);
	assert_int_equal(il_mship_collect_views(&ms, (struct il_cmsg[8]){ 0 }, 8, 1), 0);
	/* ...a heartbeat clears it (a false suspicion)... */
	apply(&ms, member(IL_CM_HEARTBEAT, 1, 0, 1, 0, 150 * MS), 150 * MS);
	il_mship_tick(&ms, 160 * MS);
	assert_int_equal(ms.st.false_suspicions, 1);
	assert_false(il_mship_group(&ms, 1)->m[0].suspected);
	/* ...and only the slow detector excludes: a view change. */
	for (uint64_t t = 200; t <= 660; t += 20) {
		apply(&ms, member(IL_CM_HEARTBEAT, 2, 0, 1, 0, t * MS), t * MS);
		il_mship_tick(&ms, t * MS);
		if (t < 640)
			assert_int_equal(ms.st.exclusions, 0);
	}
	assert_int_equal(ms.st.exclusions, 1);
	assert_int_equal(ms.st.last_excluded, 1);
	assert_int_equal(collect_view(&ms, &v, ids), 1);
	assert_int_equal(ids[0], 2);
	assert_int_equal(v.view_id, 3);
	assert_int_equal(v.reason, IL_VR_EXCLUDE);
	assert_int_equal(v.start_seq, 0); /* no joiner: the data plane's next */
	/* Its ACKs and heartbeats are a stranger's now. */
	assert_int_equal(apply(&ms, member(IL_CM_HEARTBEAT, 1, 0, 1, 0, 0), 700 * MS), 1);
	/* A LEAVE is a view change at once, no detector involved. */
	assert_int_equal(apply(&ms, member(IL_CM_LEAVE, 2, 0, 1, 0, 0), 710 * MS), 0);
	collect_view(&ms, &v, ids);
	assert_int_equal(v.n_members, 0);
	assert_int_equal(v.view_id, 4);
	assert_int_equal(v.reason, IL_VR_LEAVE);
	assert_int_equal(apply(&ms, member(IL_CM_LEAVE, 2, 0, 1, 0, 0), 720 * MS), 1);
	il_mship_free(&ms);
}

static void test_exclusion_lets_the_watermark_advance(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[8];

	(void)state;
	setup(&ms, 0);
	apply(&ms, member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	apply(&ms, ack(1, 50, UINT32_MAX), 0);
	apply(&ms, ack(2, 20, UINT32_MAX), 0);
	assert_int_equal(il_mship_collect(&ms, out, 8), 1);
	assert_int_equal(out[0].u.wm.stable_seq, 20);
	il_mship_published(&ms, out, 1);
	apply(&ms, ack(1, 90, UINT32_MAX), 400 * MS);
	il_mship_tick(&ms, 600 * MS); /* 2 silent since 0: out */
	assert_int_equal(il_mship_collect(&ms, out, 8), 1);
	assert_int_equal(out[0].u.wm.stable_seq, 90);
	assert_int_equal(out[0].u.wm.receivers, 1);
	il_mship_free(&ms);
}

static void test_joiners_start_point_and_rejoin(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[8];
	struct il_cm_view v;
	uint32_t ids[16];
	uint64_t cum;

	(void)state;
	setup(&ms, 0);
	apply(&ms, member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 7, IL_ROLE_SENDER, 1, 1, 0), 0);
	collect_view(&ms, &v, ids);
	apply(&ms, ack(1, 300, UINT32_MAX), 0);
	il_mship_collect(&ms, out, 8);
	il_mship_published(&ms, out, 1);
	/* Two joiners in one batch: one view, starting at the earlier join
	 * point, and both are counted from there. */
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 400, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 3, IL_ROLE_RECEIVER, 1, 420, 0), 0);
	assert_int_equal(collect_view(&ms, &v, ids), 4);
	assert_int_equal(v.start_seq, 400);
	assert_true(il_stab_get(&il_mship_group(&ms, 1)->stab, 2, &cum));
	assert_int_equal(cum, 400);
	assert_true(il_stab_get(&il_mship_group(&ms, 1)->stab, 3, &cum));
	assert_int_equal(cum, 400);
	/* A sender is in the view but not in the watermark. */
	assert_false(il_stab_get(&il_mship_group(&ms, 1)->stab, 7, &cum));
	/* The same incarnation again: a retry. No view change. One sent within
	 * 20 ms of the VIEW crossed it on the way: nothing. A later one means
	 * the VIEW that named it was lost, so the view in force goes again
	 * (same id, no members: the data plane has them), at most once per
	 * 20 ms. */
	uint64_t view_id = v.view_id;
	assert_int_equal(apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 900, 0), 5 * MS),
			 1);
	assert_int_equal(il_mship_collect_views(&ms, out, 8, 5 * MS), 0);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 900, 0), 25 * MS);
	assert_int_equal(il_mship_collect_views(&ms, out, 8, 25 * MS), 1);
	assert_int_equal(out[0].type, IL_CM_VIEW);
	assert_int_equal(out[0].flags, IL_CMF_REPEAT);
	assert_int_equal(out[0].u.view.view_id, view_id);
	assert_int_equal(ms.st.view_repeats, 1);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 900, 0), 35 * MS);
	assert_int_equal(il_mship_collect_views(&ms, out, 8, 35 * MS), 0);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 900, 0), 46 * MS);
	assert_int_equal(il_mship_collect_views(&ms, out, 8, 46 * MS), 1);
	assert_int_equal(out[0].flags, IL_CMF_REPEAT);
	/* A retry while a view change is due: the new view goes, no repeat. */
	apply(&ms, member(IL_CM_JOIN, 4, IL_ROLE_RECEIVER, 1, 910, 0), 60 * MS);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 900, 0), 60 * MS);
	assert_int_equal(collect_view(&ms, &v, ids), 5);
	assert_int_equal(ms.st.view_repeats, 2);
	apply(&ms, member(IL_CM_LEAVE, 4, IL_ROLE_RECEIVER, 1, 920, 0), 61 * MS);
	assert_int_equal(collect_view(&ms, &v, ids), 4);
	/* A new incarnation: it restarted, it starts again at its join. */
	apply(&ms, ack(2, 500, UINT32_MAX), 0);
	assert_int_equal(apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 2, 950, 0), 0), 0);
	assert_int_equal(ms.st.rejoins, 1);
	assert_int_equal(collect_view(&ms, &v, ids), 4);
	assert_int_equal(v.start_seq, 950);
	assert_true(il_stab_get(&il_mship_group(&ms, 1)->stab, 2, &cum));
	assert_int_equal(cum, 950);
	il_mship_free(&ms);
}

static uint32_t window_after(struct il_mship *ms)
{
	struct il_cmsg out[16];
	unsigned n = il_mship_collect_views(ms, out, 16, 1);
	uint32_t w = UINT32_MAX;

	for (unsigned i = 0; i < n; i++)
		if (out[i].type == IL_CM_CREDIT)
			w = out[i].u.credit.window;
		else if (out[i].type == IL_CM_VIEW)
			w = out[i].u.view.window;
	return w;
}

static void test_credit_window(void **state)
{
	struct il_mship ms;

	(void)state;
	setup(&ms, 256);
	apply(&ms, member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 7, IL_ROLE_SENDER, 1, 1, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 8, IL_ROLE_SENDER, 1, 1, 0), 0);
	/* Until both receivers reported their buffers: one step (W/8). */
	assert_int_equal(window_after(&ms), 32);
	apply(&ms, ack(1, 1, 100000), 0);
	assert_int_equal(window_after(&ms), UINT32_MAX); /* unchanged: nothing sent */
	apply(&ms, ack(2, 1, 100000), 0);
	assert_int_equal(window_after(&ms), 256);
	/* Receiver 2 fills up: 300 free for 2 senders = 150, down to a step
	 * (128); small wobbles cost no CREDIT. */
	apply(&ms, ack(2, 1, 300), 0);
	assert_int_equal(window_after(&ms), 128);
	apply(&ms, ack(2, 1, 290), 0);
	assert_int_equal(window_after(&ms), UINT32_MAX);
	/* Full: never 0, or nothing would ever drain. */
	apply(&ms, ack(2, 1, 0), 0);
	assert_int_equal(window_after(&ms), 1);
	apply(&ms, ack(2, 1, 1u << 20), 0);
	assert_int_equal(window_after(&ms), 256);
	assert_true(ms.st.credits >= 3);
	il_mship_free(&ms);
}

static void test_new_epoch_keeps_members(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[16];
	uint32_t ids[16];
	unsigned n;

	(void)state;
	setup(&ms, 0);
	apply(&ms, member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	apply(&ms, member(IL_CM_JOIN, 2, IL_ROLE_RECEIVER, 1, 1, 0), 0);
	il_mship_collect_views(&ms, out, 16, 1);
	apply(&ms, ack(1, 70, UINT32_MAX), 0);
	apply(&ms, ack(2, 60, UINT32_MAX), 0);
	/* 50 was published; the receivers hold 60 by now. */
	il_mship_new_epoch(&ms, 10, 5000 * MS);
	n = il_mship_collect_views(&ms, out, 16, 1);
	assert_int_equal(n, 3);
	assert_int_equal(out[0].type, IL_CM_WATERMARK);
	assert_int_equal(out[0].u.wm.epoch, 9);
	assert_int_equal(out[0].u.wm.stable_seq, 60);
	assert_int_equal(out[1].type, IL_CM_VIEW);
	assert_int_equal(out[1].u.view.epoch, 10);
	assert_int_equal(out[1].u.view.start_seq, 1);
	assert_int_equal(out[1].u.view.reason, IL_VR_EPOCH);
	assert_int_equal(out[1].u.view.n_members, 2);
	(void)ids;
	/* Stability restarts: nothing is stable in the new epoch yet, and the
	 * old epoch's ACKs are ignored. */
	assert_int_equal(il_mship_group(&ms, 1)->stab.watermark, 0);
	assert_int_equal(apply(&ms, ack(1, 80, UINT32_MAX), 0), 1);
	/* Nobody could be heard while the data plane was down: not excluded. */
	il_mship_tick(&ms, 5400 * MS);
	assert_int_equal(ms.st.exclusions, 0);
	il_mship_free(&ms);
}

static void test_resync_after_control_restart(void **state)
{
	struct il_mship ms;
	struct il_cmsg m, out[16];

	(void)state;
	setup(&ms, 64);
	memset(&m, 0, sizeof(m));
	m.type = IL_CM_RESYNC;
	m.group = 1;
	m.u.resync = (struct il_cm_resync){ .epoch = 9, .view_id = 41, .stable_seq = 500,
					    .window = 64, .n_members = 2 };
	assert_int_equal(il_mship_apply(&ms, &m, 0), 0);
	m = member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 520, 0);
	m.flags = IL_CMF_RESYNC;
	assert_int_equal(il_mship_apply(&ms, &m, 0), 0);
	m = member(IL_CM_JOIN, 7, IL_ROLE_SENDER, 1, 500, 0);
	m.flags = IL_CMF_RESYNC;
	assert_int_equal(il_mship_apply(&ms, &m, 0), 0);
	apply(&ms, ack(1, 520, 100000), 0);
	/* The view goes on as it was: no VIEW, same id, no CREDIT either. */
	assert_int_equal(il_mship_collect_views(&ms, out, 16, 1), 0);
	assert_int_equal(il_mship_group(&ms, 1)->view_id, 41);
	/* The watermark picks up where the old process left it. */
	assert_int_equal(il_mship_collect(&ms, out, 16), 1);
	assert_int_equal(out[0].u.wm.stable_seq, 520);
	/* A RESYNC of another epoch is not mixed in. */
	m.type = IL_CM_RESYNC;
	m.u.resync.epoch = 3;
	assert_int_equal(il_mship_apply(&ms, &m, 0), 1);
	il_mship_free(&ms);
}

static void test_grace_while_the_data_plane_is_silent(void **state)
{
	struct il_mship ms;

	(void)state;
	setup(&ms, 0);
	apply(&ms, member(IL_CM_JOIN, 1, IL_ROLE_RECEIVER, 1, 1, 0), 100 * MS);
	/* The data plane was silent from 150 ms to 1150 ms: that second is not
	 * the member's silence, the 50 ms before it and what follows are. */
	il_mship_grace(&ms, 1000 * MS, 1150 * MS);
	il_mship_tick(&ms, 1500 * MS);
	assert_int_equal(ms.st.exclusions, 0);
	il_mship_tick(&ms, 1620 * MS);
	assert_int_equal(ms.st.exclusions, 1);
	il_mship_free(&ms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_detectors),
		cmocka_unit_test(test_exclusion_lets_the_watermark_advance),
		cmocka_unit_test(test_joiners_start_point_and_rejoin),
		cmocka_unit_test(test_credit_window),
		cmocka_unit_test(test_new_epoch_keeps_members),
		cmocka_unit_test(test_resync_after_control_restart),
		cmocka_unit_test(test_grace_while_the_data_plane_is_silent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
