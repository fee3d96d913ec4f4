/* SPDX-License-Identifier: BSD-3-Clause
 * Shards (docs/scaling.md section 1): groups assigned to lcores by hash or
 * by config, the config checked at start, and strays handed over to their
 * owner through the hand-over rings, stamped there in order, counted; a
 * full ring counts its drops. A real appliance (EAL --no-huge, net_ring
 * ports with two queues) whose chains are driven burst by burst.
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
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "tu_frame.h"

static struct il_app app, cfg_app;

/* Group 1 is shard 0's, group 2 shard 1's (config), group 3 by hash. */
static const char *cfg_text =
	"name: shardtest\n"
	"epoch: 5\n"
	"ports:\n"
	"  in: { device: net_ring0, queues: 2 }\n"
	"  out: { device: net_ring1, queues: 2 }\n"
	"shards: { lcores: [1, 2], assign: config, handoff_slots: 8 }\n"
	"groups:\n"
	"  - { id: 1, address: 239.1.1.1, shard: 0 }\n"
	"  - { id: 2, address: 239.1.1.2, shard: 1 }\n"
	"  - { id: 3, address: 239.1.1.3 }\n"
	"stages:\n"
	"  classify: { type: classify }\n"
	"  seq: { type: sequencer, history: 8 }\n"
	"  nak: { type: nak, sequencer: seq, tx: out }\n"
	"pipeline:\n"
	"  - lcore: 1\n"
	"    chains:\n"
	"      - { rx: in, stages: [classify, seq, nak], tx: out }\n";

static struct rte_mbuf *data(uint16_t group, uint32_t sender, uint64_t sseq)
{
	uint8_t *h = NULL;
	struct rte_mbuf *m = tu_udp_frame(app.pool, 0x0a000000u + sender, 0xef010100u + group,
					  7400, IL_HDR_LEN + IL_MSG_HDR_LEN + 8, &h);
	assert_non_null(m);
	h = il_hdr_put(h, &(struct il_hdr_fields){ .type = IL_T_DATA, .group_id = group,
						   .msg_count = 1, .sender_id = sender,
						   .sender_seq = sseq });
	h = il_rec_put(h, 8);
	memset(h, (int)sseq, 8);
	return m;
}

static struct rte_mbuf *nak(uint16_t group, uint64_t first, uint64_t last)
{
	uint8_t *h = NULL;
	struct rte_mbuf *m = tu_udp_frame(app.pool, 0x0a000063u, 0xef010100u + group, 7400,
					  IL_HDR_LEN + IL_RANGE_LEN, &h);
	assert_non_null(m);
	h = il_hdr_put(h, &(struct il_hdr_fields){ .type = IL_T_NAK, .group_id = group,
						   .sender_id = 99 });
	il_range_put(h, first, last);
	return m;
}

static const uint8_t *il_hdr_of(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, const uint8_t *) + IL_UDP_HDRS_LEN;
}

static uint64_t ctr(const char *stage, const char *name)
{
	const struct il_stage *st = il_app_stage(&app, stage);

	assert_non_null(st);
	for (unsigned c = 0; c < st->type->n_counters; c++)
		if (!strcmp(st->type->counter_names[c], name))
			return st->ctr[c];
	fail_msg("no counter %s.%s", stage, name);
	return 0;
}

/* What shard `q` sent on port "out" (net_ring: tx queue q loops back to
 * rx queue q). */
static uint16_t out_frames(uint16_t q, struct rte_mbuf **pkts)
{
	return rte_eth_rx_burst(app.ports[il_app_port_index(&app, "out")].port_id, q, pkts,
				IL_BURST);
}

static void test_assignment_by_config_and_by_hash(void **state)
{
	(void)state;
	assert_int_equal(app.n_shards, 2);
	assert_int_equal(app.groups[0].shard, 0);
	assert_int_equal(app.groups[1].shard, 1);
	/* A group that names no shard follows its address, as RSS would. */
	assert_int_equal(app.groups[2].shard, il_shard_of_addr(0xef010103u, 2));
	/* The hash spreads addresses over both shards, and agrees with
	 * DPDK's Toeplitz (rte_softrss) with the default key. */
	unsigned per[2] = {0, 0};
	for (uint32_t a = 0; a < 64; a++)
		per[il_shard_of_addr(0xef010100u + a, 2)]++;
	assert_true(per[0] > 16 && per[1] > 16);
	uint32_t t = 0xef010105u;
	assert_int_equal(il_shard_of_addr(t, 2),
			 (rte_softrss(&t, 1, il_shard_rss_key) % IL_SHARD_RETA_SIZE) % 2);
	/* Each shard has its own stage instances, and its own queues. */
	assert_non_null(il_app_stage(&app, "seq@1"));
	assert_non_null(il_app_stage(&app, "nak@1"));
	assert_int_equal(app.n_workers, 2);
	assert_int_equal(app.workers[1].lcore_id, 2);
	assert_int_equal(app.workers[1].chains[0].rx_queue, 1);
	assert_ptr_not_equal(app.workers[1].chains[0].stages[1], app.workers[0].chains[0].stages[1]);
	/* The sequencer of a shard keeps state for its own groups only. */
	const struct il_stage *s0 = il_app_stage(&app, "seq"), *s1 = il_app_stage(&app, "seq@1");
	assert_int_equal(s0->type->mbufs_held(s0), 8 * (1 + (app.groups[2].shard == 0)));
	assert_int_equal(s1->type->mbufs_held(s1), 8 * (1 + (app.groups[2].shard == 1)));
}

static void expect_error(const char *text, const char *needle, bool precheck)
{
	char err[512] = "";
	struct il_cfg *cfg = il_cfg_load_string(text, "bad", err, sizeof(err));

	assert_non_null(cfg);
	memset(&cfg_app, 0, sizeof(cfg_app));
	int rc = il_app_configure(&cfg_app, cfg, err, sizeof(err));
	if (rc == 0 && precheck)
		rc = il_app_precheck(&cfg_app, err, sizeof(err));
	if (rc == 0 || strstr(err, needle) == NULL)
		fail_msg("expected an error with \"%s\", got rc %d: %s", needle, rc, err);
	il_cfg_free(cfg);
}

#define BASE "ports: { in: { device: net_ring2 }, out: { device: net_ring3 } }\n" \
	"stages: { classify: { type: classify }, seq: { type: sequencer } }\n"
#define PIPE "pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify, seq], tx: out } ] } ]\n"

static void test_config_errors_name_the_key(void **state)
{
	(void)state;
	expect_error(BASE PIPE "shards: { lcores: [1, 2, 1] }\n"
		     "groups: [ { id: 1, address: 239.1.1.1 } ]\n",
		     "'shards.lcores': lcore 1 is listed twice", false);
	expect_error(BASE PIPE "shards: { lcores: [1, 2], assign: config }\n"
		     "groups: [ { id: 1, address: 239.1.1.1, shard: 2 } ]\n",
		     "'groups[0].shard': 2 is not a shard (shards.lcores has 2 entries: 0..1)",
		     false);
	expect_error(BASE PIPE "shards: { lcores: [1, 2] }\n"
		     "groups: [ { id: 1, address: 239.1.1.1, shard: 1 } ]\n",
		     "'groups[0].shard': groups name their shard only with 'shards.assign: config'",
		     false);
	expect_error(BASE PIPE "groups: [ { id: 1, address: 239.1.1.1, shard: 0 } ]\n",
		     "'groups[0].shard': there are no shards", false);
	expect_error(BASE PIPE "shards: { lcores: [1, 2], assign: rss }\n"
		     "groups: [ { id: 1, address: 239.1.1.1 } ]\n", "shards.assign", false);
	expect_error(BASE PIPE "shards: { lcores: [1, 2], handoff_slots: 1000 }\n"
		     "groups: [ { id: 1, address: 239.1.1.1 } ]\n",
		     "'shards.handoff_slots': 1000 is not a power of two", false);
	expect_error("ports: { in: { device: net_ring2, queues: 3 }, out: { device: net_ring3 } }\n"
		     "stages: { classify: { type: classify } }\n" PIPE
		     "shards: { lcores: [1, 2] }\ngroups: [ { id: 1, address: 239.1.1.1 } ]\n",
		     "'ports.in.queues': 3; with 2 shards a port has 1 queue", false);
	expect_error("ports: { in: { device: net_ring2, queues: 2 }, out: { device: net_ring3 } }\n"
		     "stages: { classify: { type: classify } }\n" PIPE
		     "groups: [ { id: 1, address: 239.1.1.1 } ]\n",
		     "'ports.in.queues': 2 queues need shards", false);
	expect_error(BASE "shards: { lcores: [1, 2] }\ngroups: [ { id: 1, address: 239.1.1.1 } ]\n"
		     "pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify], tx: out } ] },\n"
		     "  { lcore: 2, chains: [ { rx: out, stages: [classify], tx: in } ] } ]\n",
		     "with shards it places one lcore", true);
	expect_error(BASE "shards: { lcores: [2, 1] }\ngroups: [ { id: 1, address: 239.1.1.1 } ]\n"
		     PIPE, "shards.lcores[0] = 2", true);
	expect_error("ports: { in: { device: net_ring2 }, out: { device: net_ring3 } }\n"
		     "stages: { classify: { type: classify }, imp: { type: impair } }\n"
		     "shards: { lcores: [1, 2] }\ngroups: [ { id: 1, address: 239.1.1.1 } ]\n"
		     "pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify, imp], tx: out } ] } ]\n",
		     "stage 'imp' is of type 'impair', which does not run in shards yet", true);
}

/* An lcore EAL does not run is an error at start, naming the key. */
static void test_unknown_lcore_refused_at_start(void **state)
{
	char err[512] = "";
	static struct il_app bad;
	struct il_cfg *cfg = il_cfg_load_string(
		BASE PIPE "shards: { lcores: [1, 5] }\n"
		"groups: [ { id: 1, address: 239.1.1.1 } ]\n", "bad", err, sizeof(err));

	(void)state;
	assert_non_null(cfg);
	assert_int_equal(il_app_configure(&bad, cfg, err, sizeof(err)), 0);
	assert_int_not_equal(il_app_start(&bad, err, sizeof(err)), 0);
	if (!strstr(err, "'shards.lcores[1]': 5 is not a worker lcore"))
		fail_msg("%s", err);
	/* The stages it made stay allocated: the process ends with the test. */
}

static void test_strays_handed_over_stamped_in_order_and_counted(void **state)
{
	struct il_worker *w0 = &app.workers[0], *w1 = &app.workers[1];
	struct rte_mbuf *pkts[IL_BURST_CAP], *out[IL_BURST];
	struct rte_mempool *pool0 = app.shards[0]->pool, *pool1 = app.shards[1]->pool;
	unsigned avail0 = rte_mempool_avail_count(pool0);
	uint16_t n = 0;

	(void)state;
	/* A pool per shard; the appliance's (single-queue ports, frames made
	 * outside a shard) is shard 0's. */
	assert_non_null(pool0);
	assert_non_null(pool1);
	assert_ptr_not_equal(pool0, pool1);
	assert_ptr_equal(app.pool, pool0);
	assert_ptr_equal(il_app_stage(&app, "nak@1")->pool, pool1);
	assert_ptr_equal(il_app_stage(&app, "nak")->pool, pool0);
	/* Shard 0 receives frames of group 1 (its own) and group 2 (shard
	 * 1's), interleaved, from two senders. */
	for (unsigned i = 0; i < 3; i++) {
		pkts[n++] = data(1, 7, i + 1);
		pkts[n++] = data(2, 8, 2 * i + 1);
		pkts[n++] = data(2, 9, 2 * i + 2);
	}
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, n);
	assert_int_equal(n, 3);
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *h = il_hdr_of(pkts[i]);
		assert_int_equal(il_get16(h + IL_OFF_GROUP_ID), 1);
		assert_int_equal(il_get64(h + IL_OFF_GLOBAL_SEQ), i + 1);
	}
	rte_pktmbuf_free_bulk(pkts, n);
	assert_int_equal(app.shards[0]->handoff_out, 6);
	assert_int_equal(app.shards[0]->drop_handoff_full, 0);
	assert_int_equal(ctr("seq", "stamped_msgs"), 3);
	assert_int_equal(ctr("seq@1", "stamped_msgs"), 0);

	/* Shard 1 takes them over, copied into its own pool (the originals
	 * go back to shard 0's at once), stamps them in the order they came,
	 * and sends them on its own queue. */
	assert_int_equal(il_shard_drain(&app, w1), 6);
	assert_int_equal(rte_mempool_avail_count(pool0), avail0);
	assert_int_equal(app.shards[1]->handoff_in, 6);
	assert_int_equal(ctr("seq@1", "stamped_msgs"), 6);
	rte_eth_tx_buffer_flush(w1->io.port_id[1], w1->io.txq[1], w1->io.txb[1]);
	assert_int_equal(out_frames(0, out), 0);
	n = out_frames(1, out);
	assert_int_equal(n, 6);
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *h = il_hdr_of(out[i]);
		assert_int_equal(il_get16(h + IL_OFF_GROUP_ID), 2);
		assert_int_equal(il_get64(h + IL_OFF_GLOBAL_SEQ), i + 1);
		assert_int_equal(il_get32(h + IL_OFF_EPOCH), 5);
		/* per-sender order kept: sender 8 then 9 alternate as sent */
		assert_int_equal(il_get32(h + IL_OFF_SENDER_ID), 8 + (i & 1));
		assert_ptr_equal(out[i]->pool, pool1);
	}
	rte_pktmbuf_free_bulk(out, n);

	/* A NAK for group 2 that lands on shard 0 is served by shard 1 from
	 * its own history: the very frame it stamped as global sequence 2. */
	pkts[0] = nak(2, 2, 2);
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, 1);
	assert_int_equal(n, 0);
	assert_int_equal(app.shards[0]->handoff_out, 7);
	assert_int_equal(il_shard_drain(&app, w1), 1);
	assert_int_equal(ctr("nak@1", "naks"), 1);
	assert_int_equal(ctr("nak", "naks"), 0);
	assert_int_equal(ctr("nak@1", "retransmitted_frames"), 1);
	rte_eth_tx_buffer_flush(w1->io.port_id[1], w1->io.txq[1], w1->io.txb[1]);
	n = out_frames(1, out);
	assert_int_equal(n, 1);
	assert_int_equal(il_get64(il_hdr_of(out[0]) + IL_OFF_GLOBAL_SEQ), 2);
	assert_int_equal(il_get32(il_hdr_of(out[0]) + IL_OFF_SENDER_ID), 9);
	/* the retransmission is made from the owner's pool too */
	assert_ptr_equal(out[0]->pool, pool1);
	rte_pktmbuf_free_bulk(out, n);
	assert_int_equal(rte_mempool_avail_count(pool0), avail0);
	assert_int_equal(app.shards[1]->drop_handoff_nombuf, 0);
}

/* The owner's pool empty when a stray arrives: it cannot be copied in, so
 * it is freed (back to the sender's pool) and counted, never kept in the
 * sender's pool by the owner. */
static void test_stray_with_its_owners_pool_empty_is_counted(void **state)
{
	struct il_worker *w0 = &app.workers[0], *w1 = &app.workers[1];
	struct rte_mempool *pool0 = app.shards[0]->pool, *pool1 = app.shards[1]->pool;
	struct rte_mbuf *pkts[IL_BURST_CAP], **hoard;
	uint64_t stamped1 = ctr("seq@1", "stamped_msgs");
	unsigned avail0 = rte_mempool_avail_count(pool0), n_hoard = 0;
	uint16_t n = 0;

	(void)state;
	hoard = calloc(pool1->size + 1, sizeof(*hoard)); /* and the NULL that ends it */
	assert_non_null(hoard);
	while ((hoard[n_hoard] = rte_pktmbuf_alloc(pool1)) != NULL)
		n_hoard++;
	for (unsigned i = 0; i < 3; i++)
		pkts[n++] = data(2, 8, 200 + i);
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, n);
	assert_int_equal(n, 0);
	assert_int_equal(il_shard_drain(&app, w1), 3);
	assert_int_equal(app.shards[1]->drop_handoff_nombuf, 3);
	assert_int_equal(ctr("seq@1", "stamped_msgs"), stamped1);
	assert_int_equal(rte_mempool_avail_count(pool0), avail0);
	for (unsigned i = 0; i < n_hoard; i++)
		rte_pktmbuf_free(hoard[i]);
	free(hoard);
}

/* The owner's ring full: the stray is freed and counted, never silent. */
static void test_full_handoff_ring_counts_its_drops(void **state)
{
	struct il_worker *w0 = &app.workers[0], *w1 = &app.workers[1];
	struct rte_mbuf *pkts[IL_BURST_CAP], *out[IL_BURST];
	uint64_t out0 = app.shards[0]->handoff_out, in1 = app.shards[1]->handoff_in;
	uint64_t stamped1 = ctr("seq@1", "stamped_msgs");
	unsigned cap = rte_ring_get_capacity(app.shards[0]->out[1]);
	uint16_t n = 0;

	(void)state;
	assert_int_equal(cap, 7); /* 8 slots */
	for (unsigned i = 0; i < 20; i++)
		pkts[n++] = data(2, 8, 100 + i);
	n = il_chain_stages(&w0->io, &w0->chains[0], pkts, n);
	assert_int_equal(n, 0);
	assert_int_equal(app.shards[0]->handoff_out - out0, cap);
	assert_int_equal(app.shards[0]->drop_handoff_full, 20 - cap);
	assert_int_equal(il_shard_drain(&app, w1), cap);
	assert_int_equal(app.shards[1]->handoff_in - in1, cap);
	assert_int_equal(ctr("seq@1", "stamped_msgs") - stamped1, cap);
	rte_eth_tx_buffer_flush(w1->io.port_id[1], w1->io.txq[1], w1->io.txb[1]);
	n = out_frames(1, out);
	assert_int_equal(n, cap);
	rte_pktmbuf_free_bulk(out, n);
}

int main(int argc, char **argv)
{
	char err[512];
	(void)argc;
	char *eal[] = {argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0@0,1@0,2@0",
		       "--file-prefix", "il-shard-test", "--log-level", "lib.eal:error",
		       "--vdev", "net_ring0", "--vdev", "net_ring1", "--vdev", "net_ring2",
		       "--vdev", "net_ring3", NULL};
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
		cmocka_unit_test(test_assignment_by_config_and_by_hash),
		cmocka_unit_test(test_config_errors_name_the_key),
		cmocka_unit_test(test_strays_handed_over_stamped_in_order_and_counted),
		cmocka_unit_test(test_full_handoff_ring_counts_its_drops),
		cmocka_unit_test(test_stray_with_its_owners_pool_empty_is_counted),
		cmocka_unit_test(test_unknown_lcore_refused_at_start),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app);
	il_cfg_free(cfg);
	return rc;
}
