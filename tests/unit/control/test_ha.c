/* SPDX-License-Identifier: BSD-3-Clause
 * The pure parts of a pair's control process (docs/ha.md): the etcd
 * values' JSON (P/epoch, P/view/<g>), the pair heartbeat's datagram, and
 * the membership's side of it: a view change is handed out only to be
 * committed, and no watermark leaves before the commit (a receiver
 * removed from the minimum must be removed in etcd first); a takeover
 * starts the new epoch from the committed views with the old one's cut.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <interlink/wire.h>

#include "ha_pair.h"
#include "ha_record.h"
#include "membership.h"

#define MS 1000000ull

static void record_round_trip(void **state)
{
	struct ha_record r = { .exists = true, .epoch = 1795000000, .prev = 1794999999,
			       .cut_set = true, .views = 7, .nonce = 42 }, back;
	char err[128];

	(void)state;
	strcpy(r.owner, "a");
	ha_cut_put(&r.cut, 1, 8831);
	ha_cut_put(&r.cut, 65535, 1);
	ha_cut_put(&r.cut, 1, 8832); /* replaces */
	char *j = ha_record_json(&r);
	assert_non_null(j);
	assert_int_equal(ha_record_parse(j, strlen(j), &back, err, sizeof(err)), 0);
	assert_true(back.exists && back.cut_set && !back.final_set);
	assert_int_equal(back.epoch, r.epoch);
	assert_int_equal(back.prev, r.prev);
	assert_string_equal(back.owner, "a");
	assert_int_equal(back.views, 7);
	assert_int_equal(back.nonce, 42);
	assert_int_equal(back.cut.n, 2);
	uint64_t c;
	assert_true(ha_cut_get(&back.cut, 1, &c) && c == 8832);
	assert_true(ha_cut_get(&back.cut, 65535, &c) && c == 1);
	assert_false(ha_cut_get(&back.cut, 2, &c));
	free(j);

	/* A takeover whose cut is not known yet; then a hand-over. */
	r.cut_set = false;
	r.final_set = true;
	ha_cut_put(&r.final, 3, 99);
	strcpy(r.to, "b");
	j = ha_record_json(&r);
	assert_non_null(strstr(j, "\"cut\":null"));
	assert_int_equal(ha_record_parse(j, strlen(j), &back, err, sizeof(err)), 0);
	assert_true(!back.cut_set && back.final_set);
	assert_string_equal(back.to, "b");
	assert_true(ha_cut_get(&back.final, 3, &c) && c == 99);
	free(j);
}

static void record_refused(void **state)
{
	static const char *const bad[] = {
		"", "[]", "{\"owner\":\"a\"}", "{\"epoch\":0,\"owner\":\"a\"}",
		"{\"epoch\":5}", "{\"epoch\":5,\"owner\":\"a-name-longer-than-16\"}",
		"{\"epoch\":5,\"owner\":\"a\",\"cut\":{\"x\":1}}",
		"{\"epoch\":5,\"owner\":\"a\",\"cut\":{\"70000\":1}}",
		"{\"epoch\":5,\"owner\":\"a\",\"cut\":{\"1\":-1}}", "{\"epoch\":5,",
	};
	struct ha_record r;
	char err[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ha_record_parse(bad[i], strlen(bad[i]), &r, err, sizeof(err)), -1);
}

static void view_round_trip(void **state)
{
	struct ha_member m[3] = { { 101, 2, 7 }, { 1, 1, 9 }, { 0xffffffffu, 3, 0 } };
	struct ha_view v = { .group = 4, .epoch = 77, .view_id = 12, .n = 3, .m = m }, back;
	char err[128];

	(void)state;
	char *j = ha_view_json(&v);
	assert_int_equal(ha_view_parse(j, strlen(j), 4, &back, err, sizeof(err)), 0);
	assert_int_equal(back.group, 4);
	assert_int_equal(back.epoch, 77);
	assert_int_equal(back.view_id, 12);
	assert_int_equal(back.n, 3);
	assert_memory_equal(back.m, m, sizeof(m));
	ha_view_free(&back);
	free(j);
	const char *bad = "{\"epoch\":1,\"members\":[[1,2]]}";
	assert_int_equal(ha_view_parse(bad, strlen(bad), 1, &back, err, sizeof(err)), -1);
	assert_null(back.m);
}

static void heartbeat(void **state)
{
	struct hb_msg m = { .flags = HB_F_DP_ALIVE | HB_F_TRANSMITTING, .epoch = 1795000001,
			    .role = HB_ACTIVE_SERVING, .rev = 1234567, .counter = 99,
			    .sent_ns = 1ull << 50, .echo_ns = 3 }, back;
	uint8_t b[HB_LEN];
	struct sockaddr_in sa;

	(void)state;
	strcpy(m.node, "sixteen-chars-ok");
	hb_encode(&m, b);
	assert_memory_equal(b, "ILHB", 4);
	assert_int_equal(b[5], HB_VERSION);
	assert_int_equal(hb_decode(b, HB_LEN, &back), 0);
	assert_string_equal(back.node, m.node);
	assert_int_equal(back.flags, m.flags);
	assert_int_equal(back.epoch, m.epoch);
	assert_int_equal(back.role, m.role);
	assert_int_equal(back.rev, m.rev);
	assert_int_equal(back.counter, 99);
	assert_int_equal(back.sent_ns, 1ull << 50);
	assert_int_equal(back.echo_ns, 3);
	assert_int_equal(hb_decode(b, HB_LEN - 1, &back), -1);
	b[0] = 'X';
	assert_int_equal(hb_decode(b, HB_LEN, &back), -1);
	assert_int_equal(hb_addr("127.0.0.1:7411", &sa), 0);
	assert_int_equal(ntohs(sa.sin_port), 7411);
	assert_int_equal(hb_addr("127.0.0.1", &sa), -1);
	assert_int_equal(hb_addr("127.0.0.1:0", &sa), -1);
	assert_int_equal(hb_addr("x:1", &sa), -1);
}

static struct il_cmsg member(uint16_t type, uint32_t id, uint32_t roles, uint64_t seq,
			     uint32_t epoch)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.group = 1;
	m.u.member = (struct il_cm_member){ .receiver = id, .epoch = epoch, .seq = seq,
					    .roles = roles, .incarnation = 1 };
	return m;
}

static struct il_cmsg ack(uint32_t id, uint64_t cum, uint32_t epoch)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = IL_CM_ACK;
	m.group = 1;
	m.u.ack = (struct il_cm_ack){ .receiver = id, .epoch = epoch, .cum_seq = cum,
				      .buffer_free = UINT32_MAX };
	return m;
}

static unsigned wms(struct il_mship *ms, uint64_t *wm)
{
	struct il_cmsg out[8];
	unsigned n = il_mship_collect(ms, out, 8);

	il_mship_published(ms, out, n);
	if (n)
		*wm = out[0].u.wm.stable_seq;
	return n;
}

/* A receiver that leaves may not stop holding the watermark back until
 * its removal is committed (docs/ha.md, 6.3: every receiver of the last
 * committed view was counted by every watermark published); a joiner
 * holds nothing back (counting it only lowers the minimum), so a minority
 * that cannot commit its VIEW still delivers. */
static void watermark_waits_for_the_commit(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[64], m;
	uint64_t wm = 0;

	(void)state;
	assert_int_equal(il_mship_init(&ms, 9), 0);
	ms.cfg = (struct il_mship_cfg){ .exclude_ns = 500 * MS, .commit_views = true };
	m = member(IL_CM_JOIN, 10, IL_ROLE_RECEIVER, 1, 9);
	il_mship_apply(&ms, &m, 1);
	m = member(IL_CM_JOIN, 11, IL_ROLE_RECEIVER, 1, 9);
	il_mship_apply(&ms, &m, 1);
	assert_true(il_mship_collect_views(&ms, out, 64, 3) >= 2);
	/* Joins handed out, not committed: the watermark goes on. */
	m = ack(10, 50, 9);
	il_mship_apply(&ms, &m, 4);
	m = ack(11, 20, 9);
	il_mship_apply(&ms, &m, 4);
	assert_int_equal(wms(&ms, &wm), 1);
	assert_int_equal(wm, 20);
	il_mship_views_committed(&ms);
	/* 11 leaves: the minimum would jump to 50, but only after the commit. */
	m = member(IL_CM_LEAVE, 11, IL_ROLE_RECEIVER, 0, 9);
	il_mship_apply(&ms, &m, 5);
	assert_int_equal(wms(&ms, &wm), 0);
	assert_true(il_mship_collect_views(&ms, out, 64, 6) >= 2);
	assert_int_equal(wms(&ms, &wm), 0);
	/* A joiner meanwhile changes nothing of that. */
	m = member(IL_CM_JOIN, 12, IL_ROLE_RECEIVER, 60, 9);
	il_mship_apply(&ms, &m, 7);
	assert_int_equal(wms(&ms, &wm), 0);
	il_mship_views_committed(&ms);
	assert_int_equal(wms(&ms, &wm), 1);
	assert_int_equal(wm, 50);
	/* A sender that leaves holds nothing back either. */
	m = member(IL_CM_JOIN, 13, IL_ROLE_SENDER, 60, 9);
	il_mship_apply(&ms, &m, 8);
	assert_true(il_mship_collect_views(&ms, out, 64, 9) >= 2);
	il_mship_views_committed(&ms);
	m = member(IL_CM_LEAVE, 13, IL_ROLE_SENDER, 0, 9);
	il_mship_apply(&ms, &m, 10);
	m = ack(10, 70, 9);
	il_mship_apply(&ms, &m, 10);
	m = ack(12, 65, 9);
	il_mship_apply(&ms, &m, 10);
	assert_int_equal(wms(&ms, &wm), 1);
	assert_int_equal(wm, 65);
	il_mship_free(&ms);
}

static void takeover_starts_from_the_committed_views(void **state)
{
	struct il_mship ms;
	struct il_cmsg out[64];
	const struct il_mship_seed_member mem[] = { { 10, IL_ROLE_RECEIVER, 3 },
						    { 20, IL_ROLE_SENDER, 4 } };
	const struct il_mship_seed seed = { .group = 1, .view_id = 6, .has_cut = true,
					    .cut = 8831, .n = 2, .m = mem };

	(void)state;
	assert_int_equal(il_mship_init(&ms, 0), 0);
	ms.cfg.commit_views = true;
	il_mship_takeover(&ms, 1795000002, 1795000001, &seed, 1, 1);
	unsigned n = il_mship_collect_views(&ms, out, 64, 2);
	/* The final watermark of the old epoch first, then the first view. */
	assert_true(n >= 3);
	assert_int_equal(out[0].type, IL_CM_WATERMARK);
	assert_int_equal(out[0].u.wm.epoch, 1795000001);
	assert_int_equal(out[0].u.wm.stable_seq, 8831);
	assert_int_equal(out[1].type, IL_CM_VIEW);
	assert_int_equal(out[1].u.view.epoch, 1795000002);
	assert_int_equal(out[1].u.view.view_id, 7);
	assert_int_equal(out[1].u.view.start_seq, 1);
	assert_int_equal(out[1].u.view.n_members, 2);
	assert_int_equal(out[2].u.vm.m[0].id, 10);
	assert_int_equal(out[2].u.vm.m[1].id, 20);
	/* ACKs of the old epoch count for nothing; the new one's do. */
	struct il_cmsg m = ack(10, 9000, 1795000001);
	assert_int_equal(il_mship_apply(&ms, &m, 3), 1);
	il_mship_views_committed(&ms);
	m = ack(10, 5, 1795000002);
	assert_int_equal(il_mship_apply(&ms, &m, 3), 0);
	uint64_t wm = 0;
	assert_int_equal(wms(&ms, &wm), 1);
	assert_int_equal(wm, 5);
	il_mship_free(&ms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(record_round_trip),
		cmocka_unit_test(record_refused),
		cmocka_unit_test(view_round_trip),
		cmocka_unit_test(heartbeat),
		cmocka_unit_test(watermark_waits_for_the_commit),
		cmocka_unit_test(takeover_starts_from_the_committed_views),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
