/* SPDX-License-Identifier: BSD-3-Clause
 * Stage tests: a real appliance (EAL --no-huge, net_ring ports, the real
 * pool and stages) whose stages are driven burst by burst.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <interlink/app.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "seq.h"
#include "tu_frame.h"
#include "tu_state.h"

static struct il_app app;
static struct il_stage *cl, *sq, *nk;
static struct il_seq *seq;

static const char *cfg_text =
	"name: stagetest\n"
	"epoch: 77\n"
	"ports:\n"
	"  in: { device: net_ring0 }\n"
	"  out: { device: net_ring1 }\n"
	"groups:\n"
	"  - { id: 1, address: 239.1.1.1 }\n"
	"  - { id: 2, address: 239.1.1.2 }\n"
	"  - { id: 9, address: 239.1.1.9, raw: { dst: 239.1.1.9, port: 9000 } }\n"
	"stages:\n"
	"  classify: { type: classify }\n"
	"  seq: { type: sequencer, history: 8 }\n"
	"  nak: { type: nak, sequencer: seq, tx: out, rate_pps: 1, burst: 5 }\n"
	"pipeline:\n"
	"  - lcore: 1\n"
	"    chains:\n"
	"      - { rx: in, stages: [classify, seq, nak], tx: out }\n";

static struct rte_mbuf *frame(uint16_t dport, uint8_t type, uint16_t group, uint32_t sender,
			      uint64_t sseq, unsigned n, unsigned len, bool csum)
{
	unsigned body = type == IL_T_NAK ? IL_RANGE_LEN : n * (IL_MSG_HDR_LEN + len);
	unsigned plen = (dport == 7400 ? IL_HDR_LEN : 0) + body;
	uint8_t *h = NULL;
	struct rte_mbuf *m = tu_udp_frame(app.pool, 0x0a000000u + sender, 0xef010100u + group,
					  dport, plen, &h);
	assert_non_null(m);
	if (dport == 7400)
		h = il_hdr_put(h, &(struct il_hdr_fields){
					  .type = type, .group_id = group,
					  .msg_count = type == IL_T_DATA ? (uint16_t)n : 0,
					  .sender_id = sender, .sender_seq = sseq });
	if (type == IL_T_DATA || dport != 7400)
		for (unsigned i = 0; i < n; i++, h += len) {
			h = il_rec_put(h, (uint16_t)len);
			memset(h, (int)(i + 1), len);
		}
	if (csum)
		il_udp_csum_set(rte_pktmbuf_mtod(m, uint8_t *) + IL_ETH_HLEN);
	return m;
}

static struct rte_mbuf *nak(uint16_t group, uint64_t first, uint64_t last)
{
	struct rte_mbuf *m = frame(7400, IL_T_NAK, group, 0x10001, 0, 0, 0, false);
	il_range_put(rte_pktmbuf_mtod(m, uint8_t *) + IL_UDP_HDRS_LEN + IL_HDR_LEN, first, last);
	return m;
}

static uint16_t run(struct rte_mbuf **pkts, uint16_t n)
{
	n = cl->type->process(cl, pkts, n);
	n = sq->type->process(sq, pkts, n);
	return nk->type->process(nk, pkts, n);
}

static bool udp_csum_valid(struct rte_mbuf *m)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);
	uint16_t got = udp->dgram_cksum;
	if (got == 0)
		return true;
	udp->dgram_cksum = 0;
	uint16_t want = rte_ipv4_udptcp_cksum(ip, udp);
	udp->dgram_cksum = got;
	return got == want;
}

static uint64_t ctr(const struct il_stage *st, const char *name)
{
	for (unsigned i = 0; i < st->type->n_counters; i++)
		if (!strcmp(st->type->counter_names[i], name))
			return st->ctr[i];
	fail_msg("no counter %s in %s", name, st->name);
	return 0;
}

static void free_deferred(void)
{
	struct il_lcore_io *io = nk->io;
	for (uint16_t i = 0; i < io->n_defer; i++)
		rte_pktmbuf_free(io->defer[i]);
	io->n_defer = 0;
}

static void test_stamps_per_group_and_keeps_history(void **state)
{
	(void)state;
	struct rte_mbuf *p[IL_BURST_CAP];
	uint16_t n = 0;
	p[n++] = frame(7400, IL_T_DATA, 1, 1, 1, 3, 10, true);
	p[n++] = frame(7400, IL_T_DATA, 2, 1, 1, 1, 10, false);
	p[n++] = frame(7400, IL_T_DATA, 1, 2, 1, 2, 7, true);
	p[n++] = frame(7400, IL_T_DATA, 77, 2, 1, 2, 7, true); /* unknown group */
	n = run(p, n);
	assert_int_equal(n, 3);
	uint64_t want_gs[3] = {1, 1, 4};
	for (int i = 0; i < 3; i++) {
		const uint8_t *h = rte_pktmbuf_mtod(p[i], uint8_t *) + 42;
		assert_int_equal(il_get64(h + IL_OFF_GLOBAL_SEQ), want_gs[i]);
		assert_int_equal(il_get32(h + IL_OFF_EPOCH), 77);
		assert_int_equal(h[IL_OFF_FLAGS], IL_F_STAMPED);
		assert_true(udp_csum_valid(p[i]));
		/* One reference in flight, one in the history. */
		assert_int_equal(rte_mbuf_refcnt_read(p[i]), 2);
	}
	assert_int_equal(seq->groups[0].next, 6);
	assert_int_equal(seq->groups[1].next, 2);
	assert_int_equal(il_seq_hist_low(seq, 0), 1);
	assert_int_equal(ctr(cl, "drop_unknown_group"), 1);
	rte_pktmbuf_free_bulk(p, n);
}

static void test_history_evicts_oldest_and_releases_it(void **state)
{
	(void)state;
	struct rte_mbuf *p[IL_BURST_CAP];
	unsigned before = rte_mempool_avail_count(app.pool);
	uint64_t evicted = ctr(sq, "history_evicted");
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 10; i++)
			p[i] = frame(7400, IL_T_DATA, 2, 3, 100 + i, 1, 1, false);
		uint16_t n = run(p, 10);
		rte_pktmbuf_free_bulk(p, n);
	}
	/* 30 more frames of group 2 into 8 slots. */
	assert_int_equal(seq->groups[1].n, 8);
	assert_int_equal(ctr(sq, "history_evicted") - evicted, 30 + 1 - 8);
	assert_int_equal(il_seq_hist_low(seq, 1), seq->groups[1].next - 8);
	/* The pool got back all but the frames the history still holds. */
	assert_int_equal(before - rte_mempool_avail_count(app.pool), 8 - 1);
}

static void test_raw_mode_insertion(void **state)
{
	(void)state;
	struct rte_mbuf *p[IL_BURST_CAP];
	p[0] = frame(9000, IL_T_DATA, 9, 5, 0, 1, 33, true);
	p[1] = frame(9001, IL_T_DATA, 9, 5, 0, 1, 33, true); /* no filter: passes */
	uint16_t len0 = (uint16_t)p[0]->pkt_len;
	uint16_t n = run(p, 2);
	assert_int_equal(n, 2);
	const uint8_t *f = rte_pktmbuf_mtod(p[0], uint8_t *);
	const uint8_t *h = f + 42;
	assert_int_equal(p[0]->pkt_len, len0 + IL_HDR_LEN + IL_MSG_HDR_LEN);
	assert_int_equal(h[IL_OFF_TYPE], IL_T_DATA);
	assert_int_equal(h[IL_OFF_FLAGS], IL_F_STAMPED | IL_F_RAW);
	assert_int_equal(il_get16(h + IL_OFF_GROUP_ID), 9);
	assert_int_equal(il_get32(h + IL_OFF_SENDER_ID), 0x0a000005u);
	assert_int_equal(il_get64(h + IL_OFF_SENDER_SEQ), 1);
	assert_int_equal(il_get64(h + IL_OFF_GLOBAL_SEQ), 1);
	/* The message record wraps the original payload (4 + 33 bytes of it). */
	assert_int_equal(il_get16(h + IL_HDR_LEN), 4 + 33);
	assert_int_equal(il_get16(f + 34 + 2), 7400);
	assert_true(udp_csum_valid(p[0]));
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(f + 14);
	assert_int_equal(rte_ipv4_cksum(ip), ip->hdr_checksum == 0 ? 0 : rte_ipv4_cksum(ip));
	assert_int_equal(rte_raw_cksum(ip, 20), 0xffff);
	/* The other frame is untouched. */
	assert_int_equal(il_get16(rte_pktmbuf_mtod(p[1], uint8_t *) + 36), 9001);
	rte_pktmbuf_free_bulk(p, n);
}

static void test_nak_serves_history_unavail_and_future(void **state)
{
	(void)state;
	struct rte_mbuf *p[IL_BURST_CAP];
	struct il_lcore_io *io = nk->io;
	uint64_t next = seq->groups[0].next; /* group 1 */
	for (int i = 0; i < 12; i++)
		p[i] = frame(7400, IL_T_DATA, 1, 4, 1 + i, 1, 2, false);
	uint16_t n = run(p, 12);
	rte_pktmbuf_free_bulk(p, n);
	uint64_t low = il_seq_hist_low(seq, 0);
	assert_int_equal(low, next + 12 - 8);
	free_deferred();

	/* Inside the history: the frames themselves, one more reference each. */
	p[0] = nak(1, low + 1, low + 2);
	n = run(p, 1);
	assert_int_equal(n, 0);
	assert_int_equal(io->n_defer, 2);
	assert_ptr_equal(io->defer[0], il_seq_hist_at(seq, 0, 1)->m);
	assert_int_equal(rte_mbuf_refcnt_read(io->defer[0]), 2);
	free_deferred();

	/* Straddling the low edge: UNAVAIL for the old part, frames for the rest. */
	p[0] = nak(1, 1, low);
	n = run(p, 1);
	assert_int_equal(io->n_defer, 2);
	const uint8_t *u = rte_pktmbuf_mtod(io->defer[0], uint8_t *);
	assert_int_equal(u[42 + IL_OFF_TYPE], IL_T_UNAVAIL);
	assert_int_equal(il_get64(u + 42 + IL_HDR_LEN), 1);
	assert_int_equal(il_get64(u + 42 + IL_HDR_LEN + 8), low - 1);
	assert_int_equal(il_get64(u + 42 + IL_OFF_GLOBAL_SEQ), low);
	assert_int_equal(il_get32(u + 42 + IL_OFF_SENDER_ID), 0x10001);
	assert_true(udp_csum_valid(io->defer[0]));
	free_deferred();

	/* Beyond what was stamped: counted, ignored. */
	uint64_t fut = ctr(nk, "nak_future");
	p[0] = nak(1, seq->groups[0].next, seq->groups[0].next + 5);
	run(p, 1);
	assert_int_equal(ctr(nk, "nak_future"), fut + 1);
	assert_int_equal(io->n_defer, 0);

	/* The bucket (burst 5, 1 pps) is spent now: the rest is held back, counted. */
	uint64_t limited = ctr(nk, "rate_limited_frames");
	p[0] = nak(1, low, low + 7);
	run(p, 1);
	assert_true(io->n_defer <= 5 - 3);
	assert_int_equal(ctr(nk, "rate_limited_frames"), limited + 1);
	free_deferred();
}

/* A chain's survivors go out in one call, after what was buffered for the
 * port before them; what a full tx ring refuses is freed and counted. The
 * net_ring port's tx ring is its own rx ring (1023 frames). */
static void test_tx_burst_order_and_drops(void **state)
{
	(void)state;
	struct il_lcore_io *io = nk->io;
	const uint16_t out = 1, pid = app.ports[out].port_id;
	struct rte_mbuf *p[IL_BURST_CAP];
	unsigned avail = rte_mempool_avail_count(app.pool);
	uint64_t queued = io->tx_queued[out], dropped = io->tx_dropped[out];
	uint64_t offered = 0, refused = 0;
	uint16_t n;

	for (unsigned i = 0; i < 3; i++)
		p[i] = frame(7400, IL_T_DATA, 1, 7, 1 + i, 1, 4, false);
	struct rte_mbuf *first = p[0], *second = p[1], *third = p[2];
	il_tx(io, out, first); /* buffered, not sent yet */
	il_tx_burst(io, out, p + 1, 2);
	n = rte_eth_rx_burst(pid, 0, p, IL_BURST_CAP);
	assert_int_equal(n, 3);
	assert_ptr_equal(p[0], first);
	assert_ptr_equal(p[1], second);
	assert_ptr_equal(p[2], third);
	rte_pktmbuf_free_bulk(p, n);

	/* Nobody drains the ring: it fills, the rest is refused. */
	for (unsigned round = 0; round < 12; round++) {
		for (unsigned i = 0; i < IL_BURST_CAP; i++)
			p[i] = frame(7400, IL_T_DATA, 1, 7, 10 + i, 1, 4, false);
		il_tx_burst(io, out, p, IL_BURST_CAP);
		offered += IL_BURST_CAP;
	}
	refused = io->tx_dropped[out] - dropped;
	assert_true(refused > 0);
	assert_int_equal(io->tx_queued[out] - queued, 3 + offered);
	unsigned got = 0;
	while ((n = rte_eth_rx_burst(pid, 0, p, IL_BURST_CAP)) > 0) {
		got += n;
		rte_pktmbuf_free_bulk(p, n);
	}
	assert_int_equal(got + refused, offered);
	/* Refused frames went back to the pool. */
	assert_int_equal(rte_mempool_avail_count(app.pool), avail);
}

/* ---- a second appliance: many groups, raw filters, two sequencers ---- */

#define MANY_GROUPS 200
#define MANY_RAW 100 /* groups 1..100 have a raw filter 239.1.1.<id>:20000+<id> */

static struct il_app app2;
static struct il_stage *cl2, *sq_a, *sq_b;

static char *many_groups_config(void)
{
	static char text[32768];
	size_t o = 0;

	o += (size_t)snprintf(text + o, sizeof(text) - o,
			      "name: stagetest2\n"
			      "ports:\n"
			      "  in: { device: net_ring2 }\n"
			      "  out: { device: net_ring3 }\n"
			      "groups:\n");
	for (unsigned id = 1; id <= MANY_GROUPS; id++)
		if (id <= MANY_RAW)
			o += (size_t)snprintf(text + o, sizeof(text) - o,
					      "  - { id: %u, address: 239.2.0.%u, raw: { dst: 239.1.1.%u, "
					      "port: %u } }\n", id, id, id, 20000 + id);
		else
			o += (size_t)snprintf(text + o, sizeof(text) - o,
					      "  - { id: %u, address: 239.2.0.%u }\n", id, id);
	snprintf(text + o, sizeof(text) - o,
		 "stages:\n"
		 "  classify: { type: classify }\n"
		 "  seq_a: { type: sequencer, history: 4 }\n"
		 "  seq_b: { type: sequencer, history: 4 }\n"
		 "pipeline:\n"
		 "  - lcore: 1\n"
		 "    chains:\n"
		 "      - { rx: in, stages: [classify, seq_a], tx: out }\n"
		 "      - { rx: out, stages: [classify, seq_b], tx: in }\n");
	return text;
}

/* Every raw filter steers its own traffic to its group, whatever their
 * number (the filters are hashed); near misses (the filter's address with
 * another port, its port with another address) are not raw. */
static void test_raw_filters_hashed(void **state)
{
	(void)state;
	uint64_t matched = ctr(cl2, "raw_matched");

	for (unsigned id = 1; id <= MANY_RAW; id++) {
		struct rte_mbuf *p[3];
		p[0] = frame((uint16_t)(20000 + id), IL_T_DATA, (uint16_t)id, 5, 0, 1, 8, false);
		p[1] = frame((uint16_t)(20000 + id + 1), IL_T_DATA, (uint16_t)id, 5, 0, 1, 8, false);
		p[2] = frame((uint16_t)(20000 + id), IL_T_DATA, (uint16_t)(id + 1), 5, 0, 1, 8, false);
		assert_int_equal(cl2->type->process(cl2, p, 3), 3);
		assert_int_equal(il_meta(p[0])->kind, IL_K_RAW);
		assert_int_equal(app2.groups[il_meta(p[0])->group_idx].id, id);
		assert_int_equal(il_meta(p[1])->kind, IL_K_NONE);
		assert_int_equal(il_meta(p[2])->kind, IL_K_NONE);
		rte_pktmbuf_free_bulk(p, 3);
	}
	assert_int_equal(ctr(cl2, "raw_matched") - matched, MANY_RAW);
}

static uint16_t gidx(unsigned id)
{
	return (uint16_t)(app2.group_idx_by_id[id] - 1);
}

/* Two sequencer instances over 200 groups: each reports all three values
 * of every group, its own, with no cut-off. */
static void test_state_of_two_sequencers_over_many_groups(void **state)
{
	(void)state;
	static struct tu_state a, b;
	struct rte_mbuf *p[4];
	uint64_t v;

	p[0] = frame(7400, IL_T_DATA, 150, 1, 1, 1, 8, false);
	p[1] = frame(7400, IL_T_DATA, 150, 1, 2, 1, 8, false);
	uint16_t n = cl2->type->process(cl2, p, 2);
	n = sq_a->type->process(sq_a, p, n);
	rte_pktmbuf_free_bulk(p, n);
	p[0] = frame(7400, IL_T_DATA, 7, 1, 1, 1, 8, false);
	p[1] = frame(7400, IL_T_DATA, 150, 1, 3, 1, 8, false);
	n = cl2->type->process(cl2, p, 2);
	n = sq_b->type->process(sq_b, p, n);
	rte_pktmbuf_free_bulk(p, n);

	tu_state_collect(sq_a, &a);
	tu_state_collect(sq_b, &b);
	assert_int_equal(a.n, 3 * MANY_GROUPS);
	assert_int_equal(b.n, 3 * MANY_GROUPS);
	for (unsigned id = 1; id <= MANY_GROUPS; id++) {
		static const char *const keys[] = {"next", "history_low", "history_frames"};
		for (unsigned k = 0; k < 3; k++) {
			assert_true(tu_state_get(&a, gidx(id), keys[k], &v));
			assert_true(tu_state_get(&b, gidx(id), keys[k], &v));
		}
		assert_true(tu_state_get(&a, gidx(id), "next", &v));
		assert_int_equal(v, id == 150 ? 3 : 1);
		assert_true(tu_state_get(&b, gidx(id), "next", &v));
		assert_int_equal(v, id == 150 || id == 7 ? 2 : 1);
	}
	assert_true(tu_state_get(&a, gidx(150), "history_frames", &v));
	assert_int_equal(v, 2);
}

int main(int argc, char **argv)
{
	char err[512];
	(void)argc;
	char *eal[] = {argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0,1",
		       "--file-prefix", "il-stage-test", "--log-level", "lib.eal:error",
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
	struct il_cfg *cfg2 = il_cfg_load_string(many_groups_config(), "test2", err, sizeof(err));
	if (!cfg2 || il_app_configure(&app2, cfg2, err, sizeof(err)) ||
	    il_app_start(&app2, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	cl2 = il_app_stage(&app2, "classify");
	sq_a = il_app_stage(&app2, "seq_a");
	sq_b = il_app_stage(&app2, "seq_b");
	cl = il_app_stage(&app, "classify");
	sq = il_app_stage(&app, "seq");
	nk = il_app_stage(&app, "nak");
	seq = sq->ctx;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stamps_per_group_and_keeps_history),
		cmocka_unit_test(test_history_evicts_oldest_and_releases_it),
		cmocka_unit_test(test_raw_mode_insertion),
		cmocka_unit_test(test_nak_serves_history_unavail_and_future),
		cmocka_unit_test(test_tx_burst_order_and_drops),
		cmocka_unit_test(test_raw_filters_hashed),
		cmocka_unit_test(test_state_of_two_sequencers_over_many_groups),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app2);
	il_cfg_free(cfg2);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	return rc;
}
