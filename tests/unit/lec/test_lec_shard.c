/* SPDX-License-Identifier: BSD-3-Clause
 * The `lec` stage in shards (docs/scaling.md, docs/lec.md): each shard's
 * copy protects the groups its shard owns. A real appliance (EAL
 * --no-huge, net_ring ports with two queues, two shards) whose chains are
 * driven burst by burst: frames of shard 1's group that land on shard 0
 * are handed over with their VIEW and their members' HEARTBEATs, and the
 * repairs each copy builds name its own shard's frames only, go to its
 * group's members, and leave on its own shard's queue. The same with a
 * repair lcore per shard (their services called here, burst by burst).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/lec_wire.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "lec_stage_frames.h"

static struct il_app app;

static const char *cfg_text =
	"name: lecshardtest\n"
	"epoch: 9\n"
	"ports:\n"
	"  in: { device: net_ring0, queues: 2 }\n"
	"  out: { device: net_ring1, queues: 2 }\n"
	"shards: { lcores: [1, 2], assign: config }\n"
	"groups:\n"
	"  - { id: 1, address: 239.1.1.1, shard: 0 }\n"
	"  - { id: 2, address: 239.1.1.2, shard: 1 }\n"
	"  - { id: 3, address: 239.1.1.3, shard: 0 }\n"
	"  - { id: 4, address: 239.1.1.4, shard: 1 }\n"
	"stages:\n"
	"  classify: { type: classify }\n"
	"  seq: { type: sequencer, history: 256 }\n"
	"  lec: { type: lec, tx: in, r: 4, c: 5, plan: regions, rate: node, repairs_to: members,\n"
	"         groups: [1, 2] }\n"
	"  leco: { type: lec, tx: in, r: 4, c: 5, plan: regions, rate: node, repairs_to: members,\n"
	"          groups: [3, 4], repair_lcore: [3, 4], repair_ring: 64 }\n"
	"pipeline:\n"
	"  - lcore: 1\n"
	"    chains:\n"
	"      - { rx: in, stages: [classify, seq, lec, leco], tx: out }\n";

static uint64_t ctr(const char *stage, const char *name)
{
	const struct il_stage *st = il_app_stage(&app, stage);

	assert_non_null(st);
	for (unsigned i = 0; i < st->type->n_counters; i++)
		if (!strcmp(st->type->counter_names[i], name))
			return st->ctr[i];
	fail_msg("no counter %s.%s", stage, name);
	return 0;
}

static struct rte_mbuf *heartbeat(uint16_t group, uint32_t id)
{
	return lsf_heartbeat(app.pool, group, id);
}

static struct rte_mbuf *view(uint16_t group, const uint32_t *ids, unsigned n)
{
	return lsf_view(app.pool, group, 1, ids, n, 0);
}

static struct rte_mbuf *data(uint16_t group, uint64_t sseq)
{
	uint8_t *b;
	struct rte_mbuf *m = lsf_msg(app.pool, 0x0a000263u, group, IL_T_DATA, 99,
				     IL_MSG_HDR_LEN + 40, &b);

	il_put16(b - IL_HDR_LEN + IL_OFF_MSG_COUNT, 1);
	il_put64(b - IL_HDR_LEN + IL_OFF_SENDER_SEQ, sseq);
	b = il_rec_put(b, 40);
	memset(b, (int)(group * 16 + sseq), 40);
	return m;
}

/* A repair: to a member of `group` (10.0.1.<id>), naming frames of `group`
 * stamped by its owner (global sequences 1..16, epoch 9). */
static void check_repair(struct rte_mbuf *m, uint16_t group, unsigned first_member,
			 unsigned shard)
{
	static uint8_t buf[2048];
	const uint8_t *f = rte_pktmbuf_read(m, 0, m->pkt_len, buf);
	struct il_parsed pr;
	struct il_lec_body_view v = { 0 };

	assert_non_null(f);
	assert_int_equal(il_parse_frame(f, m->pkt_len, 7400, &pr), IL_V_CONTROL);
	assert_int_equal(pr.type, IL_T_LEC_REPAIR);
	assert_true(pr.dst_ip >= 0x0a000100u + first_member &&
		    pr.dst_ip < 0x0a000100u + first_member + 4);
	assert_int_equal(il_lec_body_get(f + pr.il_off + IL_HDR_LEN, pr.payload_len - IL_HDR_LEN,
					 &v), 0);
	assert_int_equal(v.f.count, 4);
	for (unsigned k = 0; k < v.f.count; k++) {
		uint16_t g, res;
		uint32_t e;
		uint64_t s;

		il_lec_id_at(&v, k, &g, &res, &e, &s);
		assert_int_equal(g, group);
		assert_int_equal(e, 9);
		assert_true(s >= 1 && s <= 16);
	}
	assert_ptr_equal(m->pool, app.shards[shard]->pool);
}

static void test_each_shard_protects_its_own_groups(void **state)
{
	static const uint32_t m1[] = { 11, 12, 13, 14 }, m2[] = { 21, 22, 23, 24 };
	struct il_worker *w0 = &app.workers[0], *w1 = &app.workers[1];
	struct rte_mbuf *pkts[IL_BURST_CAP], *got[IL_BURST];
	const uint16_t in = (uint16_t)il_app_port_index(&app, "in");
	uint16_t n = 0;

	(void)state;
	assert_non_null(il_app_stage(&app, "lec@1"));
	/* Everything lands on shard 0: the views, the members' HEARTBEATs,
	 * and 16 DATA frames of each group, interleaved. */
	pkts[n++] = view(1, m1, 4);
	pkts[n++] = view(2, m2, 4);
	for (unsigned i = 0; i < 4; i++) {
		pkts[n++] = heartbeat(1, m1[i]);
		pkts[n++] = heartbeat(2, m2[i]);
	}
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, n);
	rte_pktmbuf_free_bulk(pkts, n);
	assert_int_equal(il_shard_drain(&app, w1), 5); /* group 2's view and HEARTBEATs */
	n = 0;
	for (unsigned i = 0; i < 16; i++) {
		pkts[n++] = data(1, i + 1);
		pkts[n++] = data(2, i + 1);
	}
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, n);
	assert_int_equal(n, 16); /* group 1's; group 2's went to shard 1 */
	rte_pktmbuf_free_bulk(pkts, n);

	/* shard 0's copy: group 1 only, its four members, 4 repairs x 4 */
	assert_int_equal(ctr("lec", "protected"), 16);
	assert_int_equal(ctr("lec", "addr_learnt"), 4);
	assert_int_equal(ctr("lec", "views"), 1);
	assert_int_equal(w0->io.n_defer, 16);
	for (uint16_t i = 0; i < w0->io.n_defer; i++) {
		assert_int_equal(w0->io.defer_port[i], in);
		check_repair(w0->io.defer[i], 1, 11, 0);
		rte_pktmbuf_free(w0->io.defer[i]);
	}
	w0->io.n_defer = 0;

	/* shard 1 takes group 2's frames over and protects them: its repairs
	 * leave on its own queue of "in" */
	assert_int_equal(il_shard_drain(&app, w1), 16);
	assert_int_equal(ctr("lec@1", "protected"), 16);
	assert_int_equal(ctr("lec@1", "addr_learnt"), 4);
	assert_int_equal(ctr("lec@1", "views"), 1);
	assert_int_equal(ctr("lec", "data_frames"), 16);
	assert_int_equal(ctr("lec@1", "data_frames"), 16);
	rte_eth_tx_buffer_flush(w1->io.port_id[in], w1->io.txq[in], w1->io.txb[in]);
	n = rte_eth_rx_burst(app.ports[in].port_id, 0, got, IL_BURST);
	assert_int_equal(n, 0);
	n = rte_eth_rx_burst(app.ports[in].port_id, 1, got, IL_BURST);
	assert_int_equal(n, 16);
	for (uint16_t i = 0; i < n; i++)
		check_repair(got[i], 2, 21, 1);
	rte_pktmbuf_free_bulk(got, n);
}

/* A repair lcore per shard (repair_lcore: [3, 4]): each shard's copy hands
 * its own groups' frames to its own repair lcore; what comes back leaves
 * from the shard's lcore, on its queue. */
static void test_a_repair_lcore_per_shard(void **state)
{
	static const uint32_t m3[] = { 31, 32, 33, 34 }, m4[] = { 41, 42, 43, 44 };
	struct il_worker *w0 = &app.workers[0], *w1 = &app.workers[1];
	struct il_stage *o0 = il_app_stage(&app, "leco"), *o1 = il_app_stage(&app, "leco@1");
	struct rte_mbuf *pkts[IL_BURST_CAP];
	/* (the first test's frames were handed over too: a copy hands over
	 * every DATA, control and NAK frame, and its repair lcore sorts them) */
	const uint64_t h0 = ctr("leco", "handed_over"), h1 = ctr("leco@1", "handed_over");
	uint16_t n = 0;

	(void)state;
	assert_non_null(o1);
	assert_true(o0->has_service && o1->has_service);
	assert_int_equal(o0->service_lcore, 3);
	assert_int_equal(o1->service_lcore, 4);
	pkts[n++] = view(3, m3, 4);
	pkts[n++] = view(4, m4, 4);
	for (unsigned i = 0; i < 4; i++) {
		pkts[n++] = heartbeat(3, m3[i]);
		pkts[n++] = heartbeat(4, m4[i]);
	}
	for (unsigned i = 0; i < 16; i++) {
		pkts[n++] = data(3, i + 1);
		pkts[n++] = data(4, i + 1);
	}
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, n);
	rte_pktmbuf_free_bulk(pkts, n);
	assert_int_equal(il_shard_drain(&app, w1), 21); /* group 4's view, HEARTBEATs, DATA */
	assert_int_equal(ctr("leco", "handed_over") - h0, 21);
	assert_int_equal(ctr("leco@1", "handed_over") - h1, 21);
	assert_int_equal(ctr("leco", "repairs"), 0); /* nothing built on the shards' lcores */
	/* the repair lcores' work, then each shard's next poll sends it */
	while (o0->type->service(o0) | o1->type->service(o1))
		;
	assert_int_equal(ctr("leco", "protected"), 16);
	assert_int_equal(ctr("leco@1", "protected"), 16);
	w0->io.n_defer = 0;
	w1->io.n_defer = 0;
	il_chain_stages(&w0->io, &w0->chains[0], pkts, 0);
	il_chain_stages(&w1->io, &w1->chains[0], pkts, 0);
	assert_int_equal(w0->io.n_defer, 16);
	assert_int_equal(w1->io.n_defer, 16);
	for (uint16_t i = 0; i < 16; i++) {
		check_repair(w0->io.defer[i], 3, 31, 0);
		check_repair(w1->io.defer[i], 4, 41, 1);
		rte_pktmbuf_free(w0->io.defer[i]);
		rte_pktmbuf_free(w1->io.defer[i]);
	}
	w0->io.n_defer = 0;
	w1->io.n_defer = 0;
}

static void test_repair_lcore_errors_in_shards(void **state)
{
	char err[512] = "";
	static struct il_app bad;
	struct il_cfg *cfg = il_cfg_load_string(
		"ports: { in: { device: net_ring2 }, out: { device: net_ring3 } }\n"
		"shards: { lcores: [1, 2] }\n"
		"groups: [ { id: 1, address: 239.1.1.1 } ]\n"
		"stages: { classify: { type: classify }, seq: { type: sequencer },\n"
		"          lec: { type: lec, tx: in, repair_lcore: 3 } }\n"
		"pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify, seq, lec], "
		"tx: out } ] } ]\n", "bad", err, sizeof(err));

	(void)state;
	assert_non_null(cfg);
	int rc = il_app_configure(&bad, cfg, err, sizeof(err));
	if (rc == 0)
		rc = il_app_start(&bad, err, sizeof(err));
	if (rc == 0 || strstr(err, "'stages.lec.repair_lcore': in shards, a list of 2 lcores, "
			      "one per shard") == NULL)
		fail_msg("expected the repair_lcore error, got rc %d: %s", rc, err);
	il_cfg_free(cfg);
}

int main(int argc, char **argv)
{
	char err[512];
	(void)argc;
	char *eal[] = { argv[0], "--no-huge", "-m", "512", "--no-pci", "--lcores",
			"0@0,1@0,2@0,3@0,4@0",
			"--file-prefix", "il-lec-shard-test", "--log-level", "lib.eal:error",
			"--vdev", "net_ring0", "--vdev", "net_ring1", "--vdev", "net_ring2",
			"--vdev", "net_ring3", NULL };
	if (rte_eal_init(19, eal) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	struct il_cfg *cfg = il_cfg_load_string(cfg_text, "test", err, sizeof(err));
	if (!cfg || il_app_configure(&app, cfg, err, sizeof(err)) ||
	    il_app_start(&app, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_shard_protects_its_own_groups),
		cmocka_unit_test(test_a_repair_lcore_per_shard),
		cmocka_unit_test(test_repair_lcore_errors_in_shards),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	return rc;
}
