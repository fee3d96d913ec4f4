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

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <interlink/app.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "nak_budget.h"
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

/* Whether history entry idx of group gi holds exactly the bytes of m, by
 * reference or in the arena; *by_ref says which. */
static bool hist_holds(unsigned gi, uint32_t idx, const struct rte_mbuf *m, bool *by_ref)
{
	const struct il_hist_ent *e = il_seq_hist_at(seq, gi, idx);
	const uint8_t *b = e->m != NULL ? rte_pktmbuf_mtod(e->m, const uint8_t *)
					: il_seq_hist_bytes(seq, gi, e);

	*by_ref = e->m != NULL;
	return e->len == m->pkt_len && memcmp(b, rte_pktmbuf_mtod(m, const uint8_t *), e->len) == 0;
}

/* Mbufs the history of group gi holds by reference. */
static unsigned hist_refs(unsigned gi)
{
	unsigned k = 0;
	for (uint32_t i = 0; i < seq->groups[gi].n; i++)
		k += il_seq_hist_at(seq, gi, i)->m != NULL;
	return k;
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
	uint32_t want_idx[3] = {0, 0, 1};
	for (int i = 0; i < 3; i++) {
		const uint8_t *h = rte_pktmbuf_mtod(p[i], uint8_t *) + 42;
		bool by_ref;
		assert_int_equal(il_get64(h + IL_OFF_GLOBAL_SEQ), want_gs[i]);
		assert_int_equal(il_get32(h + IL_OFF_EPOCH), 77);
		assert_int_equal(h[IL_OFF_FLAGS], IL_F_STAMPED);
		assert_true(udp_csum_valid(p[i]));
		/* The history holds the frame as stamped: small frames copied
		 * into the arena (the mbuf is the sender's alone, one reference),
		 * larger ones by reference. */
		assert_true(hist_holds(i == 1 ? 1 : 0, want_idx[i], p[i], &by_ref));
		assert_false(by_ref);
		assert_int_equal(rte_mbuf_refcnt_read(p[i]), 1);
	}
	assert_int_equal(seq->groups[0].next, 6);
	assert_int_equal(seq->groups[1].next, 2);
	assert_int_equal(il_seq_hist_low(seq, 0), 1);
	assert_int_equal(ctr(cl, "drop_unknown_group"), 1);
	/* A drop, not also a DATA frame: kinds and drops add up to pkts_in. */
	assert_int_equal(ctr(cl, "data"), 3);
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
	/* The pool got back every mbuf: small frames are copied. */
	assert_int_equal(hist_refs(1), 0);
	assert_int_equal(before - rte_mempool_avail_count(app.pool), 0);

	/* Frames longer than copy_max (256) are held by reference: 8 of
	 * them fill the history, one more releases the oldest. */
	for (int i = 0; i < 9; i++) {
		p[0] = frame(7400, IL_T_DATA, 2, 3, 200 + i, 1, 300, i & 1);
		assert_int_equal(run(p, 1), 1);
		assert_int_equal(rte_mbuf_refcnt_read(p[0]), 2);
		rte_pktmbuf_free(p[0]);
	}
	assert_int_equal(hist_refs(1), 8);
	assert_int_equal(before - rte_mempool_avail_count(app.pool), 8);
	/* And small ones replace them, giving their mbufs back. */
	for (int i = 0; i < 8; i++)
		p[i] = frame(7400, IL_T_DATA, 2, 3, 300 + i, 1, 1, false);
	rte_pktmbuf_free_bulk(p, run(p, 8));
	assert_int_equal(hist_refs(1), 0);
	assert_int_equal(before - rte_mempool_avail_count(app.pool), 0);
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

/* A sender's flags, epoch, global_seq and stable_seq mean nothing to the
 * appliance: all are overwritten (a forged watermark must never reach a
 * receiver), the UDP checksum follows, and such frames are counted. */
static void test_stamp_overwrites_what_the_sender_forged(void **state)
{
	(void)state;
	static const struct {
		uint8_t flags;
		uint32_t epoch;
		uint64_t gseq, stable;
		bool counted;
	} forged[] = {
		{ IL_F_STABLE_VALID, 0, 0, 1000, true },
		{ 0, 0, 0, 5, false }, /* a sender's own stable_seq: legitimate, cleared */
		{ IL_F_RETRANS | IL_F_RAW, 0, 0, 0, true },
		{ IL_F_STAMPED | IL_F_FIFO_START, 0, 0, 0, true },
		{ 0, 999, 0, 0, true },
		{ 0, 0, 123456, 0, true },
		{ 0, 0, 0, 0, false },
	};
	const unsigned k = sizeof(forged) / sizeof(forged[0]);
	struct rte_mbuf *p[2 * 7];
	uint64_t before = ctr(sq, "restamped_frames"), next = seq->groups[0].next;

	for (unsigned i = 0; i < 2 * k; i++) {
		/* Every case with and without a UDP checksum. */
		p[i] = frame(7400, IL_T_DATA, 1, 7, 1 + i, 1, 13 + i, false);
		uint8_t *f = rte_pktmbuf_mtod(p[i], uint8_t *), *h = f + 42;

		h[IL_OFF_FLAGS] = forged[i % k].flags;
		il_put32(h + IL_OFF_EPOCH, forged[i % k].epoch);
		il_put64(h + IL_OFF_GLOBAL_SEQ, forged[i % k].gseq);
		il_put64(h + IL_OFF_STABLE_SEQ, forged[i % k].stable);
		if (i >= k)
			((struct rte_udp_hdr *)(f + 34))->dgram_cksum = rte_ipv4_udptcp_cksum(
				(struct rte_ipv4_hdr *)(f + 14), (struct rte_udp_hdr *)(f + 34));
	}
	assert_int_equal(run(p, (uint16_t)(2 * k)), 2 * k);
	for (unsigned i = 0; i < 2 * k; i++) {
		const uint8_t *f = rte_pktmbuf_mtod(p[i], uint8_t *), *h = f + 42;

		assert_int_equal(h[IL_OFF_FLAGS], IL_F_STAMPED);
		assert_int_equal(il_get32(h + IL_OFF_EPOCH), seq->epoch);
		assert_int_equal(il_get64(h + IL_OFF_GLOBAL_SEQ), next + i);
		assert_int_equal(il_get64(h + IL_OFF_STABLE_SEQ), 0);
		assert_int_equal(((const struct rte_udp_hdr *)(f + 34))->dgram_cksum != 0, i >= k);
		assert_true(udp_csum_valid(p[i]));
	}
	unsigned counted = 0;
	for (unsigned i = 0; i < k; i++)
		counted += forged[i].counted;
	assert_int_equal(ctr(sq, "restamped_frames") - before, 2 * counted);
	rte_pktmbuf_free_bulk(p, 2 * k);
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

	/* Inside the history: the frames as they were stamped, byte for byte
	 * (copies of what the arena holds). */
	p[0] = nak(1, low + 1, low + 2);
	n = run(p, 1);
	assert_int_equal(n, 0);
	assert_int_equal(io->n_defer, 2);
	for (unsigned i = 0; i < 2; i++) {
		bool by_ref;
		assert_true(hist_holds(0, 1 + i, io->defer[i], &by_ref));
		assert_false(by_ref);
		assert_int_equal(rte_mbuf_refcnt_read(io->defer[i]), 1);
		assert_int_equal(il_get64(rte_pktmbuf_mtod(io->defer[i], uint8_t *) + 42 +
					  IL_OFF_GLOBAL_SEQ), low + 1 + i);
		assert_true(udp_csum_valid(io->defer[i]));
	}
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

/* Frames longer than copy_max stay in the history by reference: a NAK is
 * answered with the very mbuf, one more reference; small and large frames
 * mixed in one answer keep their order. */
static void test_nak_serves_large_frames_by_reference(void **state)
{
	(void)state;
	struct rte_mbuf *p[IL_BURST_CAP];
	struct il_lcore_io *io = nk->io;
	char err[256];
	struct il_cfg *b = il_cfg_load_string("{ rate_pps: 1000000, burst: 1000 }", "t", err,
					      sizeof(err));

	assert_non_null(b);
	assert_int_equal(nk->type->set(nk, b, err, sizeof(err)), 0);
	il_cfg_free(b);
	rte_delay_us_block(1000); /* the bucket keeps its debt: 1 ms refills 1000 */
	free_deferred();
	uint64_t first = seq->groups[1].next;
	for (int i = 0; i < 4; i++)
		p[i] = frame(7400, IL_T_DATA, 2, 9, 400 + i, 1, (i & 1) ? 8 : 600, true);
	rte_pktmbuf_free_bulk(p, run(p, 4));
	p[0] = frame(7400, IL_T_NAK, 2, 0x40004, 0, 0, 0, false);
	il_range_put(rte_pktmbuf_mtod(p[0], uint8_t *) + 42 + IL_HDR_LEN, first, first + 3);
	assert_int_equal(run(p, 1), 0);
	assert_int_equal(io->n_defer, 4);
	for (unsigned i = 0; i < 4; i++) {
		uint32_t idx = seq->groups[1].n - 4 + i;
		bool by_ref;
		assert_true(hist_holds(1, idx, io->defer[i], &by_ref));
		assert_int_equal(by_ref, !(i & 1));
		if (by_ref) {
			assert_ptr_equal(io->defer[i], il_seq_hist_at(seq, 1, idx)->m);
			assert_int_equal(rte_mbuf_refcnt_read(io->defer[i]), 2);
		}
		assert_int_equal(il_get64(rte_pktmbuf_mtod(io->defer[i], uint8_t *) + 42 +
					  IL_OFF_GLOBAL_SEQ), first + i);
	}
	free_deferred();
}

/* A packet a stage makes (here the nak stage's UNAVAIL) starts untagged,
 * whatever its mbuf carried before: a stage after it must not act on stale
 * tags. */
static void test_made_packets_start_untagged(void **state)
{
	(void)state;
	struct il_lcore_io *io = nk->io;
	struct rte_mbuf *p[1];
	static const uint8_t zero[sizeof(struct il_meta)];

	assert_true(tu_pool_dirty(app.pool) > 0);
	free_deferred();
	/* Sequence 1 is long evicted: an UNAVAIL answers (a requester of its
	 * own, so no earlier answer holds this one back). */
	p[0] = frame(7400, IL_T_NAK, 1, 0x30003, 0, 0, 0, false);
	uint8_t *r = rte_pktmbuf_mtod(p[0], uint8_t *) + 42 + IL_HDR_LEN;
	il_put64(r, 1);
	il_put64(r + 8, 1);
	assert_int_equal(run(p, 1), 0);
	assert_int_equal(io->n_defer, 1);
	const uint8_t *u = rte_pktmbuf_mtod(io->defer[0], uint8_t *);
	assert_int_equal(u[42 + IL_OFF_TYPE], IL_T_UNAVAIL);
	assert_memory_equal(il_meta(io->defer[0]), zero, sizeof(zero));
	free_deferred();
}

/* What stages emit goes out after the burst that produced it. With the
 * emit queue full, one more is dropped and counted (tx_full), never put in
 * the port's tx buffer, which goes out before the burst. */
static void test_emit_overflow_never_overtakes_the_burst(void **state)
{
	(void)state;
	struct il_lcore_io *io = nk->io;
	const uint16_t out = 1;
	uint64_t dropped = io->tx_dropped[out], queued = io->tx_queued[out];
	uint16_t buffered = io->txb[out]->length;

	free_deferred();
	for (unsigned i = 0; i < 2 * IL_BURST_CAP; i++)
		il_emit(nk, out, frame(7400, IL_T_DATA, 1, 8, 1 + i, 1, 4, false));
	assert_int_equal(io->n_defer, 2 * IL_BURST_CAP);
	il_emit(nk, out, frame(7400, IL_T_DATA, 1, 8, 999, 1, 4, false));
	assert_int_equal(io->n_defer, 2 * IL_BURST_CAP);
	assert_int_equal(io->txb[out]->length, buffered);
	assert_int_equal(io->tx_dropped[out], dropped + 1);
	assert_int_equal(io->tx_queued[out], queued + 1);
	free_deferred();
}

/* The per-requester budget on a virtual clock (1 tick = 1 us): holds that
 * double, buckets, the repeat finder, and an eviction that only hands over
 * slots worth no more than fresh ones. */
static void test_nak_budget_holds_buckets_and_eviction(void **state)
{
	(void)state;
	struct nak_budget b;
	struct nak_budget_conf c = {.interval_us = 1000, .slots = NAK_WAYS, .rate_pps = 10,
				    .burst = 4, .log_after = 3};
	struct il_tbucket global;
	char err[256];
	bool ovf;

	assert_int_equal(nak_budget_init(&b, &c, 1000000, 42, err, sizeof(err)), 0);
	il_tbucket_init(&global, 1e9, 1e9, 1000000, 0);
	struct nak_requester *a = nak_budget_find(&b, 0x0a010005, 5, 0, &ovf);
	assert_false(ovf);
	assert_ptr_equal(nak_budget_find(&b, 0x0a010005, 5, 0, &ovf), a);

	/* Answered at 0: held for one interval, then twice as long, then 4x. */
	nak_budget_answered(&b, a, 0, false, 10, 17, 0);
	assert_true(nak_budget_held(a, 0, false, 12, 12, 999));
	assert_false(nak_budget_held(a, 1, false, 12, 12, 999)); /* other group */
	assert_false(nak_budget_held(a, 0, true, 12, 12, 999));  /* not an UNAVAIL */
	assert_false(nak_budget_held(a, 0, false, 12, 12, 1000));
	assert_int_equal(nak_budget_held_to(a, 0, 12, 999), 17);
	assert_int_equal(nak_budget_held_to(a, 0, 18, 999), 0);
	assert_int_equal(nak_budget_held_to(a, 0, 12, 1000), 0);
	nak_budget_answered(&b, a, 0, false, 10, 17, 1000);
	assert_true(nak_budget_held(a, 0, false, 17, 17, 2999));
	assert_false(nak_budget_held(a, 0, false, 17, 17, 3000));
	nak_budget_answered(&b, a, 0, false, 10, 17, 3000);
	assert_true(nak_budget_held(a, 0, false, 10, 10, 6999));
	/* UNAVAIL: held only when the whole range was answered. */
	nak_budget_answered(&b, a, 0, true, 1, 5, 3000);
	assert_true(nak_budget_held(a, 0, true, 2, 5, 3001));
	assert_false(nak_budget_held(a, 0, true, 2, 6, 3001));

	/* Asking again for an answered range: reported at the third ask. */
	assert_false(nak_budget_ask(&b, a, 0x0a010005, 5, 0, 1, 12, 13, 3001));
	assert_false(nak_budget_ask(&b, a, 0x0a010005, 5, 0, 1, 12, 13, 3002));
	assert_true(nak_budget_ask(&b, a, 0x0a010005, 5, 0, 1, 12, 13, 3003));
	assert_int_equal(b.notice.seq & 1, 0);
	assert_true(b.notice.seq > 0);
	assert_int_equal(b.notice.ip, 0x0a010005);
	assert_int_equal(b.notice.first, 10);
	assert_int_equal(b.notice.last, 17);

	/* Bucket of 4 frames. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(nak_budget_take(a, &global, 3003), 0);
	assert_int_equal(nak_budget_take(a, &global, 3003), 1);

	/* The one set fills up; a ninth requester shares the overflow slot. */
	struct nak_requester *r[NAK_WAYS];
	r[0] = a;
	for (unsigned i = 1; i < NAK_WAYS; i++) {
		r[i] = nak_budget_find(&b, 0x0a020000 + i, i, 4000, &ovf);
		assert_false(ovf);
		assert_int_equal(nak_budget_take(r[i], &global, 4000), 0);
	}
	struct nak_requester *o = nak_budget_find(&b, 0x0a030001, 99, 5000, &ovf);
	assert_true(ovf);
	assert_ptr_equal(o, &b.slot[NAK_WAYS]);
	/* Idle for 64 intervals but not yet refilled (1 token at 10/s is 100 ms):
	 * still nobody's to take. */
	o = nak_budget_find(&b, 0x0a030001, 99, 4000 + 70000, &ovf);
	assert_true(ovf);
	/* Requester 1 keeps asking: its slot is live and keeps its bucket. */
	assert_ptr_equal(nak_budget_find(&b, 0x0a020001, 1, 150000, &ovf), r[1]);
	assert_int_equal(nak_budget_take(r[1], &global, 150000), 0);
	/* Later, every other slot is cold; the newcomer gets one, not r[1]'s. */
	o = nak_budget_find(&b, 0x0a030001, 99, 160000, &ovf);
	assert_false(ovf);
	assert_ptr_not_equal(o, r[1]);
	assert_int_equal(o->ip, 0x0a030001);
	assert_true(o->bucket.tokens == o->bucket.depth);
	assert_ptr_equal(nak_budget_find(&b, 0x0a020001, 1, 160000, &ovf), r[1]);
	assert_true(r[1]->bucket.tokens < r[1]->bucket.depth);
	nak_budget_free(&b);
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
		 /* The tests below call classify and then a sequencer of their
		  * choice by hand: classify only tags (fused_raw: test_fused_raw.c). */
		 "  classify: { type: classify, fused_raw: false }\n"
		 "  seq_a: { type: sequencer, history: 4 }\n"
		 "  seq_b: { type: sequencer, history: 4, copy_max: 0 }\n"
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

/* Raw insertion where the group's address is not the filter's (the
 * destination, its MAC and both checksums change), for payloads of every
 * length from 4 to 43 bytes, odd ones too, with a UDP checksum and
 * without, four frames a burst: the checksums verify in full, and every
 * frame's history entry holds exactly its bytes, the copied ones (made
 * one frame late, seq.c seq_tally) and those held by reference alike. */
static void test_raw_insertion_steers_and_checksums(void **state)
{
	(void)state;
	struct il_stage *const seqs[] = {sq_a, sq_b};

	for (unsigned k = 0; k < 2; k++) {
		struct il_stage *sq2 = seqs[k];
		const struct il_seq *s2 = sq2->ctx;

		for (unsigned len = 0; len <= 36; len += 4) {
			struct rte_mbuf *p[4];
			uint16_t olen[4];
			const unsigned id = 3 + len % 5;

			for (unsigned i = 0; i < 4; i++) {
				p[i] = frame((uint16_t)(20000 + id), IL_T_DATA, (uint16_t)id, 1 + i, 0, 1,
					     len + i, (i & 1) == 0);
				olen[i] = (uint16_t)p[i]->pkt_len;
			}
			uint16_t n = cl2->type->process(cl2, p, 4);
			assert_int_equal(n, 4);
			assert_int_equal(sq2->type->process(sq2, p, n), 4);
			for (unsigned i = 0; i < 4; i++) {
				const uint8_t *f = rte_pktmbuf_mtod(p[i], const uint8_t *);
				const struct rte_ipv4_hdr *ip = (const void *)(f + 14);
				const uint8_t mac[6] = {0x01, 0x00, 0x5e, 0x02, 0x00, (uint8_t)id};
				bool by_ref;

				assert_int_equal(p[i]->pkt_len, olen[i] + IL_HDR_LEN + IL_MSG_HDR_LEN);
				assert_memory_equal(f, mac, 6);
				assert_int_equal(rte_be_to_cpu_32(ip->dst_addr), 0xef020000u + id);
				assert_int_equal(rte_be_to_cpu_16(ip->total_length), p[i]->pkt_len - 14);
				assert_int_equal(il_get16(f + 38), p[i]->pkt_len - 34);
				assert_int_equal(il_get16(f + 36), app2.il_udp_port);
				assert_int_equal(rte_raw_cksum(ip, 20), 0xffff);
				assert_int_equal(il_get16(f + 40) != 0, (i & 1) == 0);
				assert_true(udp_csum_valid(p[i]));
				assert_int_equal(il_get32(f + 42 + IL_OFF_SENDER_ID), 0x0a000001u + i);
				assert_int_equal(il_get16(f + 42 + IL_HDR_LEN), 4 + len + i);
				const struct il_seq_group *g = &s2->groups[gidx(id)];
				const struct il_hist_ent *e =
					&g->ring[(g->head - 4 + i) & s2->mask];
				const uint8_t *b = e->m != NULL ? rte_pktmbuf_mtod(e->m, const uint8_t *)
							      : il_seq_hist_bytes(s2, gidx(id), e);
				by_ref = e->m != NULL;
				assert_int_equal(by_ref, k == 1);
				assert_int_equal(e->len, p[i]->pkt_len);
				assert_memory_equal(b, f, e->len);
			}
			rte_pktmbuf_free_bulk(p, 4);
		}
	}
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
	/* seq_b copies nothing (copy_max 0): it holds references. */
	const struct il_seq *b_ctx = sq_b->ctx;
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(rte_mbuf_refcnt_read(p[i]), 2);
		assert_ptr_equal(il_seq_hist_at(b_ctx, il_meta(p[i])->group_idx, 0)->m, p[i]);
	}
	assert_null(b_ctx->groups[0].arena);
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
		cmocka_unit_test(test_stamp_overwrites_what_the_sender_forged),
		cmocka_unit_test(test_nak_serves_history_unavail_and_future),
		cmocka_unit_test(test_nak_serves_large_frames_by_reference),
		cmocka_unit_test(test_nak_budget_holds_buckets_and_eviction),
		cmocka_unit_test(test_tx_burst_order_and_drops),
		cmocka_unit_test(test_made_packets_start_untagged),
		cmocka_unit_test(test_emit_overflow_never_overtakes_the_burst),
		cmocka_unit_test(test_raw_filters_hashed),
		cmocka_unit_test(test_state_of_two_sequencers_over_many_groups),
		/* After it: it counts every group's sequence from the start. */
		cmocka_unit_test(test_raw_insertion_steers_and_checksums),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app2);
	il_cfg_free(cfg2);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	return rc;
}
