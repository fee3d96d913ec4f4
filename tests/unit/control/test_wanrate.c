/* SPDX-License-Identifier: BSD-3-Clause
 * The TCP-friendly rate of WAN groups in the control process
 * (docs/control.md section 12): per receiver a smoothed RTT from the data
 * plane's samples and the p it reports; the group's rate is eq. 4.1 for
 * the slowest live receiver, handed to the data plane in IL_CM_CREDIT.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <interlink/tfrc.h>
#include <interlink/wire.h>

#include "membership.h"

#define MS 1000000ull
#define S_BYTES 1000u

static struct il_cmsg join(uint32_t id, uint32_t roles)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = IL_CM_JOIN;
	m.group = 1;
	m.u.member = (struct il_cm_member){ .receiver = id, .epoch = 9, .seq = 1, .roles = roles,
					    .incarnation = 1 };
	return m;
}

static struct il_cmsg leave(uint32_t id)
{
	struct il_cmsg m = join(id, IL_ROLE_RECEIVER);

	m.type = IL_CM_LEAVE;
	return m;
}

/* An ACK as the data plane passes it up: s_bytes != 0 in WAN groups. */
static struct il_cmsg ack(uint32_t id, uint64_t cum, uint32_t s_bytes, uint64_t rtt_ns,
			  uint32_t ppm)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = IL_CM_ACK;
	m.group = 1;
	m.u.ack = (struct il_cm_ack){ .receiver = id, .epoch = 9, .cum_seq = cum,
				      .buffer_free = UINT32_MAX, .rtt_ns = rtt_ns,
				      .loss_ppm = ppm, .s_bytes = s_bytes };
	return m;
}

static void apply(struct il_mship *ms, struct il_cmsg m)
{
	assert_int_equal(il_mship_apply(ms, &m, 1), 0);
}

static void setup(struct il_mship *ms, uint32_t window)
{
	assert_int_equal(il_mship_init(ms, 9), 0);
	ms->cfg = (struct il_mship_cfg){ .window = window };
}

static uint64_t now_ns = 1; /* the control process's clock, as the tests move it */

/* The CREDITs collected now: their count; *rate the last one's rate. */
static unsigned credits(struct il_mship *ms, uint32_t *rate, uint32_t *window)
{
	struct il_cmsg out[64];
	unsigned n = il_mship_collect_views(ms, out, 64, now_ns), k = 0;

	for (unsigned i = 0; i < n; i++)
		if (out[i].type == IL_CM_CREDIT) {
			assert_int_equal(out[i].group, 1);
			assert_int_equal(out[i].u.credit.epoch, ms->epoch);
			*rate = out[i].u.credit.rate_kbps;
			if (window)
				*window = out[i].u.credit.window;
			k++;
		}
	return k;
}

/* Eq. 4.1 in kbit/s, rounded down, as the group's rate must be. */
static uint32_t eq41_kbps(double rtt_s, double p)
{
	return (uint32_t)floor(il_tfrc_rate(8.0 * S_BYTES, rtt_s, p) / 1000.0);
}

static void test_slowest_receiver_governs(void **state)
{
	(void)state;
	struct il_mship ms;
	uint32_t rate = 12345, w;

	setup(&ms, 64);
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	apply(&ms, join(2, IL_ROLE_RECEIVER));
	apply(&ms, join(3, IL_ROLE_SENDER)); /* senders do not count */
	credits(&ms, &rate, NULL);
	/* RTT 50 ms, p = 1 %; RTT 100 ms, p = 2 %: the second is slower. */
	apply(&ms, ack(1, 1, S_BYTES, 50 * MS, 10000));
	apply(&ms, ack(2, 1, S_BYTES, 100 * MS, 20000));
	const struct il_mgroup *g = il_mship_group(&ms, 1);
	assert_int_equal(g->s_bytes, S_BYTES);
	uint32_t want = eq41_kbps(0.100, 0.02);
	assert_true(want < eq41_kbps(0.050, 0.01));
	assert_int_equal(il_mship_wan_rate(g), want);
	assert_int_equal(credits(&ms, &rate, &w), 1);
	assert_int_equal(rate, want);
	/* About 414 kbit/s for 8 kbit packets at 100 ms and 2 %. */
	assert_in_range(rate, 400, 430);
	/* Nothing new: no CREDIT. */
	assert_int_equal(credits(&ms, &rate, NULL), 0);
	/* The slow receiver leaves: the other governs. */
	apply(&ms, leave(2));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, eq41_kbps(0.050, 0.01));
	il_mship_free(&ms);
}

static void test_rtt_is_smoothed(void **state)
{
	(void)state;
	struct il_mship ms;
	uint32_t rate = 0;

	setup(&ms, 64);
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	assert_int_equal(credits(&ms, &rate, NULL), 0); /* the VIEW */
	apply(&ms, ack(1, 1, S_BYTES, 100 * MS, 10000));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, eq41_kbps(0.100, 0.01));
	/* A 200 ms sample moves the EWMA by 1/8: 112.5 ms. */
	apply(&ms, ack(1, 2, S_BYTES, 200 * MS, 10000));
	const struct il_mgroup *g = il_mship_group(&ms, 1);
	assert_true(fabs(g->m[0].rtt.srtt_ns - 112.5e6) < 1);
	assert_int_equal(g->m[0].rtt.samples, 2);
	assert_int_equal(credits(&ms, &rate, NULL), 1); /* 11 % lower: worth a CREDIT */
	assert_int_equal(rate, eq41_kbps(0.1125, 0.01));
	/* An ACK without a sample (rtt_ns 0) keeps the RTT, updates p. */
	apply(&ms, ack(1, 3, S_BYTES, 0, 40000));
	assert_int_equal(g->m[0].rtt.samples, 2);
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, eq41_kbps(0.1125, 0.04));
	il_mship_free(&ms);
}

static void test_no_loss_slow_start(void **state)
{
	(void)state;
	struct il_mship ms;
	uint32_t rate = 77;

	now_ns = 1;
	setup(&ms, 0); /* no window: every CREDIT here is the rate's */
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	apply(&ms, join(2, IL_ROLE_RECEIVER));
	credits(&ms, &rate, NULL);
	/* No RTT sample yet: nothing to compute a rate from, no limit. */
	apply(&ms, ack(1, 1, S_BYTES, 0, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 0);
	/* p = 0 (no loss event) at both: eq. 4.1 sets no limit, slow start
	 * does (4.3.4): 4 packets per RTT of the farthest receiver. */
	apply(&ms, ack(1, 1, S_BYTES, 30 * MS, 0));
	apply(&ms, ack(2, 1, S_BYTES, 40 * MS, 0));
	const struct il_mgroup *g = il_mship_group(&ms, 1);
	assert_int_equal(il_mship_wan_rate(g), 0);
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, 800); /* 4 x 8 kbit / 40 ms */
	assert_true(g->slow_start);
	/* Within the RTT: unchanged. One RTT later, with the receivers
	 * having got more than the rate: doubled. */
	now_ns += 20 * MS;
	apply(&ms, ack(1, 1001, S_BYTES, 30 * MS, 0));
	apply(&ms, ack(2, 1001, S_BYTES, 40 * MS, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 0);
	now_ns += 20 * MS; /* 1000 messages of 8 kbit in 40 ms: 200 Mbit/s got */
	apply(&ms, ack(2, 1002, S_BYTES, 40 * MS, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, 1600);
	now_ns += 40 * MS;
	apply(&ms, ack(1, 2001, S_BYTES, 30 * MS, 0));
	apply(&ms, ack(2, 2001, S_BYTES, 40 * MS, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, 3200);
	/* The slowest receiver got only 10 messages (2 Mbit/s) in the next
	 * RTT: no more than twice that, not 6400. */
	now_ns += 40 * MS;
	apply(&ms, ack(1, 4001, S_BYTES, 30 * MS, 0));
	apply(&ms, ack(2, 2011, S_BYTES, 40 * MS, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, 4000);
	/* Nothing got through (an idle sender): one packet per RTT. */
	now_ns += 40 * MS;
	apply(&ms, ack(1, 4001, S_BYTES, 30 * MS, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, 200);
	/* A loss event ends it: eq. 4.1 of the receiver that saw it. */
	apply(&ms, ack(1, 4002, S_BYTES, 30 * MS, 10000));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, eq41_kbps(0.030, 0.01));
	assert_false(g->slow_start);
	il_mship_free(&ms);
}

static void test_no_loss_no_limit_without_rtt(void **state)
{
	(void)state;
	struct il_mship ms;
	uint32_t rate = 77;

	now_ns = 1;
	setup(&ms, 0);
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	apply(&ms, join(2, IL_ROLE_RECEIVER));
	credits(&ms, &rate, NULL);
	/* p without any RTT sample yet: cannot be computed, no limit. */
	apply(&ms, ack(2, 1, S_BYTES, 0, 50000));
	assert_int_equal(il_mship_wan_rate(il_mship_group(&ms, 1)), 0);
	assert_int_equal(credits(&ms, &rate, NULL), 0);
	/* Its first sample: eq. 4.1 limits the group. */
	apply(&ms, ack(2, 2, S_BYTES, 30 * MS, 50000));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, eq41_kbps(0.030, 0.05));
	/* Its loss events age out (p reported 0 again): slow start again,
	 * from the larger of 4 s / RTT and the last rate. */
	apply(&ms, ack(2, 3, S_BYTES, 30 * MS, 0));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	assert_int_equal(rate, 1066); /* 4 x 8 kbit / 30 ms > eq. 4.1's 695 */
	assert_true(il_mship_group(&ms, 1)->slow_start);
	il_mship_free(&ms);
}

static void test_not_wan_is_unchanged(void **state)
{
	(void)state;
	struct il_mship ms;
	uint32_t rate = 99, w = 0;

	setup(&ms, 64);
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	assert_int_equal(credits(&ms, &rate, NULL), 0); /* the VIEW carries the window */
	/* An ACK of a group that is not WAN: s_bytes 0, rtt and p ignored
	 * (the data plane sends zeros; even if not, nothing is computed). */
	apply(&ms, ack(1, 1, 0, 10 * MS, 100000));
	const struct il_mgroup *g = il_mship_group(&ms, 1);
	assert_int_equal(g->s_bytes, 0);
	assert_int_equal(g->m[0].rtt.samples, 0);
	assert_int_equal(il_mship_wan_rate(g), 0);
	/* Its window grows once the receiver reported: rate 0 in the CREDIT. */
	assert_int_equal(credits(&ms, &rate, &w), 1);
	assert_int_equal(w, 64);
	assert_int_equal(rate, 0);
	il_mship_free(&ms);
}

static void test_credit_hysteresis_and_epoch(void **state)
{
	(void)state;
	struct il_mship ms;
	uint32_t rate = 0;

	assert_false(il_mship_rate_moved(0, 0));
	assert_true(il_mship_rate_moved(0, 1));
	assert_true(il_mship_rate_moved(1000, 0));
	assert_false(il_mship_rate_moved(1600, 1700)); /* 1/16 of 1600 = 100 */
	assert_true(il_mship_rate_moved(1600, 1701));
	assert_true(il_mship_rate_moved(1600, 1499));

	/* Without a credit window the rate still goes out (views_due). */
	setup(&ms, 0);
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	credits(&ms, &rate, NULL);
	apply(&ms, ack(1, 1, S_BYTES, 40 * MS, 10000));
	assert_int_equal(credits(&ms, &rate, NULL), 1);
	uint32_t first = rate;
	/* A sample 4 % above the mean moves the SRTT 0.5 %: no CREDIT. */
	apply(&ms, ack(1, 2, S_BYTES, 41600000ull, 10000));
	assert_int_equal(credits(&ms, &rate, NULL), 0);
	assert_int_equal(il_mship_group(&ms, 1)->rate_sent, first);
	/* The data plane restarts: its new incarnation has no rate, so the
	 * rate goes out again (after the VIEW of the new epoch). */
	il_mship_new_epoch(&ms, 10, 2);
	unsigned n = credits(&ms, &rate, NULL);
	n += credits(&ms, &rate, NULL);
	assert_int_equal(n, 1);
	assert_true(rate > 0);
	il_mship_free(&ms);
}

static void test_floor_and_ceiling(void **state)
{
	(void)state;
	struct il_mship ms;

	setup(&ms, 64);
	apply(&ms, join(1, IL_ROLE_RECEIVER));
	/* p = 1 and a 10 s RTT: far below 1 kbit/s, still at least 1. */
	apply(&ms, ack(1, 1, S_BYTES, 10000 * MS, 1000000));
	assert_int_equal(il_mship_wan_rate(il_mship_group(&ms, 1)), 1);
	/* 1 ns and 1 ppm: huge, clamped below UINT32_MAX. */
	apply(&ms, leave(1));
	apply(&ms, join(2, IL_ROLE_RECEIVER));
	apply(&ms, ack(2, 1, S_BYTES, 1, 1));
	assert_int_equal(il_mship_wan_rate(il_mship_group(&ms, 1)), UINT32_MAX - 1);
	il_mship_free(&ms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slowest_receiver_governs),
		cmocka_unit_test(test_rtt_is_smoothed),
		cmocka_unit_test(test_no_loss_slow_start),
		cmocka_unit_test(test_no_loss_no_limit_without_rtt),
		cmocka_unit_test(test_not_wan_is_unchanged),
		cmocka_unit_test(test_credit_hysteresis_and_epoch),
		cmocka_unit_test(test_floor_and_ceiling),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
