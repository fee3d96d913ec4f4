/* SPDX-License-Identifier: BSD-3-Clause
 * classify's fused raw path against the staged one, frame by frame: two
 * chains of one appliance, classify -> sequencer with the fused path
 * (classify stamps raw-mode frames by the sequencer's code) and with
 * `fused_raw: false` (the sequencer stage stamps them), run by the
 * appliance's chain runner on copies of the same bursts. Every frame's
 * bytes and tags, every history entry and every counter must agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <rte_eal.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/csum.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "seq.h"
#include "tu_frame.h"

static struct il_app app;
static struct il_stage *cl[2], *sq[2]; /* [0] fused, [1] staged */

/* Group 5 steers (its filter's address is not the group's), group 6 does
 * not; group 1 is native. Frames up to 64 bytes are copied into the
 * arena, longer ones held by reference. cl_f is also in a chain without
 * a sequencer after it (as the default configuration's classify is, in
 * the chain from "out"): there it only tags. */
static const char *cfg_text =
	"name: fusedtest\n"
	"ports:\n"
	"  a: { device: net_ring0 }\n"
	"  b: { device: net_ring1 }\n"
	"  c: { device: net_ring2 }\n"
	"  d: { device: net_ring3 }\n"
	"groups:\n"
	"  - { id: 1, address: 239.1.1.1 }\n"
	"  - { id: 5, address: 239.2.0.5, raw: { dst: 239.1.1.5, port: 9005 } }\n"
	"  - { id: 6, address: 239.1.1.6, raw: { dst: 239.1.1.6, port: 9006 } }\n"
	"stages:\n"
	"  cl_f: { type: classify }\n"
	"  seq_f: { type: sequencer, history: 16, copy_max: 64 }\n"
	"  cl_s: { type: classify, fused_raw: false }\n"
	"  seq_s: { type: sequencer, history: 16, copy_max: 64 }\n"
	"  nak_f: { type: nak, sequencer: seq_f, tx: c }\n"
	"pipeline:\n"
	"  - lcore: 1\n"
	"    chains:\n"
	"      - { rx: a, stages: [cl_f, seq_f], tx: b }\n"
	"      - { rx: b, stages: [cl_s, seq_s], tx: a }\n"
	"      - { rx: c, stages: [cl_f, nak_f], tx: d }\n";

static uint32_t rnd_state = 12345;

static uint32_t rnd(uint32_t n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % n;
}

enum shape {
	RAW_STEER, RAW_SAME, RAW_PADDED, RAW_TOO_BIG, RAW_NO_HEADROOM, RAW_MULTISEG,
	NATIVE, NAK, OTHER_UDP, N_SHAPES
};

/* One frame of the given shape, from one of five sources. */
static struct rte_mbuf *make(enum shape s)
{
	const unsigned sender = 1 + rnd(5);
	const bool csum = rnd(2) != 0;
	unsigned group = s == RAW_SAME ? 6 : 5, dport = 9000 + group, plen = rnd(80);
	uint8_t *pl;

	if (s == NATIVE || s == NAK) {
		group = rnd(2) ? 1 : 5; /* group 5 takes native frames too */
		dport = 7400;
		plen = IL_HDR_LEN + (s == NAK ? IL_RANGE_LEN : IL_MSG_HDR_LEN + 1 + rnd(40));
	} else if (s == OTHER_UDP) {
		dport = 9999;
	} else if (s == RAW_TOO_BIG) {
		plen = app.frame_max - IL_UDP_HDRS_LEN - rnd(30);
	}
	struct rte_mbuf *m = tu_udp_frame(app.pool, 0x0a000000u + sender,
					  0xef010100u + group, (uint16_t)dport, plen, &pl);
	assert_non_null(m);
	if (s == NATIVE || s == NAK) {
		uint8_t *b = il_hdr_put(pl, &(struct il_hdr_fields){
						    .type = s == NAK ? IL_T_NAK : IL_T_DATA,
						    .group_id = (uint16_t)group,
						    .msg_count = s == NAK ? 0 : 1,
						    .sender_id = sender, .sender_seq = 0});
		if (s == NAK) {
			il_range_put(b, 1, 2);
		} else {
			unsigned n = plen - IL_HDR_LEN - IL_MSG_HDR_LEN;
			b = il_rec_put(b, (uint16_t)n);
			memset(b, 0x33, n);
		}
	} else {
		for (unsigned i = 0; i < plen; i++)
			pl[i] = (uint8_t)rnd(256);
	}
	if (csum)
		il_udp_csum_set(rte_pktmbuf_mtod(m, uint8_t *) + IL_ETH_HLEN);
	if (s == RAW_PADDED) /* Ethernet padding after the datagram */
		memset(rte_pktmbuf_append(m, (uint16_t)(1 + rnd(20))), 0, 1);
	if (s == RAW_NO_HEADROOM) {
		uint16_t to = (uint16_t)rnd(IL_HDR_LEN + IL_MSG_HDR_LEN);
		memmove((uint8_t *)m->buf_addr + to, rte_pktmbuf_mtod(m, uint8_t *), m->data_len);
		m->data_off = to;
	}
	if (s == RAW_MULTISEG) {
		struct rte_mbuf *t = rte_pktmbuf_alloc(app.pool);
		uint16_t k = (uint16_t)(1 + rnd(8));
		assert_non_null(t);
		memcpy(rte_pktmbuf_append(t, k),
		       rte_pktmbuf_mtod_offset(m, uint8_t *, m->data_len - k), k);
		rte_pktmbuf_trim(m, k);
		assert_int_equal(rte_pktmbuf_chain(m, t), 0);
	}
	return m;
}

/* A copy with the same layout: headroom, segments, bytes. */
static struct rte_mbuf *dup(const struct rte_mbuf *m)
{
	struct rte_mbuf *head = NULL, *prev = NULL;

	for (const struct rte_mbuf *s = m; s != NULL; s = s->next) {
		struct rte_mbuf *c = rte_pktmbuf_alloc(app.pool);
		assert_non_null(c);
		c->data_off = s->data_off;
		memcpy(rte_pktmbuf_mtod(c, uint8_t *), rte_pktmbuf_mtod(s, const uint8_t *),
		       s->data_len);
		c->data_len = s->data_len;
		c->pkt_len = s->data_len;
		if (head == NULL)
			head = c;
		else
			assert_int_equal(rte_pktmbuf_chain(head, c), 0);
		prev = c;
	}
	(void)prev;
	return head;
}

static void same_frame(const struct rte_mbuf *a, const struct rte_mbuf *b)
{
	static uint8_t ba[16384], bb[16384];
	const struct il_meta *ma = il_meta((struct rte_mbuf *)(uintptr_t)a);
	const struct il_meta *mb = il_meta((struct rte_mbuf *)(uintptr_t)b);

	assert_int_equal(a->pkt_len, b->pkt_len);
	assert_int_equal(a->data_off, b->data_off);
	assert_int_equal(a->nb_segs, b->nb_segs);
	assert_memory_equal(rte_pktmbuf_read(a, 0, a->pkt_len, ba),
			    rte_pktmbuf_read(b, 0, b->pkt_len, bb), a->pkt_len);
	assert_int_equal(ma->kind, mb->kind);
	if (ma->kind != IL_K_NONE) {
		assert_int_equal(ma->l3_off, mb->l3_off);
		assert_int_equal(ma->l4_off, mb->l4_off);
		assert_int_equal(ma->il_off, mb->il_off);
		assert_int_equal(ma->group_idx, mb->group_idx);
	}
}

static void same_history(void)
{
	const struct il_seq *f = sq[0]->ctx, *s = sq[1]->ctx;

	for (unsigned gi = 0; gi < app.n_groups; gi++) {
		const struct il_seq_group *gf = &f->groups[gi], *gs = &s->groups[gi];

		assert_int_equal(gf->next, gs->next);
		assert_int_equal(gf->n, gs->n);
		assert_int_equal(gf->head, gs->head);
		assert_int_equal(gf->stamped_frames, gs->stamped_frames);
		for (uint32_t i = 0; i < gf->n; i++) {
			const struct il_hist_ent *ef = il_seq_hist_at(f, gi, i);
			const struct il_hist_ent *es = il_seq_hist_at(s, gi, i);
			assert_int_equal(ef->first, es->first);
			assert_int_equal(ef->count, es->count);
			assert_int_equal(ef->len, es->len);
			assert_int_equal(ef->sender, es->sender);
			assert_int_equal(ef->sender_seq, es->sender_seq);
			assert_int_equal(ef->m == NULL, es->m == NULL);
			const uint8_t *bf = ef->m ? rte_pktmbuf_mtod(ef->m, const uint8_t *)
						  : il_seq_hist_bytes(f, gi, ef);
			const uint8_t *bs = es->m ? rte_pktmbuf_mtod(es->m, const uint8_t *)
						  : il_seq_hist_bytes(s, gi, es);
			assert_memory_equal(bf, bs, ef->len);
		}
	}
}

/* The counters of both chains' stages, as they were at the start of a
 * test: what each chain added since must agree. */
static uint64_t ctr0[2][2][IL_MAX_STAGE_COUNTERS]; /* [classify, seq][fused, staged] */

static void counters_mark(void)
{
	for (unsigned k = 0; k < 2; k++) {
		memcpy(ctr0[0][k], cl[k]->ctr, sizeof(ctr0[0][k]));
		memcpy(ctr0[1][k], sq[k]->ctr, sizeof(ctr0[1][k]));
	}
}

static void same_counters(void)
{
	for (unsigned s = 0; s < 2; s++) {
		const struct il_stage *a = s ? sq[0] : cl[0], *b = s ? sq[1] : cl[1];
		for (unsigned i = 0; i < a->type->n_counters; i++) {
			uint64_t da = a->ctr[i] - ctr0[s][0][i], db = b->ctr[i] - ctr0[s][1][i];
			if (da != db)
				fail_msg("%s counter %s: fused %lu, staged %lu", a->type->name,
					 a->type->counter_names[i], (unsigned long)da,
					 (unsigned long)db);
		}
	}
}

/* Chain k as the poll loop runs it: io->rx_port names the chain (port a
 * or b). */
static struct il_chain chain_of(unsigned k)
{
	struct il_chain ch;

	memset(&ch, 0, sizeof(ch));
	ch.n_stages = 2;
	ch.stages[0] = cl[k];
	ch.stages[1] = sq[k];
	cl[k]->io->rx_port = (uint16_t)k;
	return ch;
}

static void test_fused_is_bound(void **state)
{
	(void)state;
	/* The fused chain's sequencer is not even called for a burst of raw
	 * frames only; the staged one is. */
	struct rte_mbuf *p[2][4];
	uint64_t in0 = sq[0]->pkts_in, in1 = sq[1]->pkts_in;

	counters_mark();

	for (unsigned i = 0; i < 4; i++) {
		p[0][i] = make(RAW_STEER);
		p[1][i] = dup(p[0][i]);
	}
	for (unsigned k = 0; k < 2; k++) {
		struct il_chain ch = chain_of(k);
		assert_int_equal(il_chain_stages(cl[k]->io, &ch, p[k], 4), 4);
	}
	assert_int_equal(sq[0]->pkts_in - in0, 0);
	assert_int_equal(sq[1]->pkts_in - in1, 4);
	for (unsigned i = 0; i < 4; i++)
		same_frame(p[0][i], p[1][i]);
	same_history();
	same_counters();
	for (unsigned k = 0; k < 2; k++)
		rte_pktmbuf_free_bulk(p[k], 4);

	/* The same classify in the chain from port c (no sequencer after
	 * it) tags raw frames and stamps nothing. */
	uint64_t next = ((const struct il_seq *)sq[0]->ctx)->groups[1].next;
	for (unsigned i = 0; i < 4; i++)
		p[0][i] = make(RAW_STEER);
	cl[0]->io->rx_port = 2;
	assert_int_equal(cl[0]->type->process(cl[0], p[0], 4), 4);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(il_meta(p[0][i])->kind, IL_K_RAW);
	assert_int_equal(((const struct il_seq *)sq[0]->ctx)->groups[1].next, next);
	rte_pktmbuf_free_bulk(p[0], 4);
}

/* Bursts of raw frames only (the fused chain never calls its sequencer)
 * and mixed ones (native DATA stops the fused path for the rest of the
 * burst; the sequencer passes on what classify stamped), with every kind
 * of frame the raw path drops. */
static void test_fused_matches_staged(void **state)
{
	(void)state;
	struct rte_mbuf *p[2][IL_BURST];

	counters_mark();
	for (unsigned b = 0; b < 400; b++) {
		const bool raw_only = rnd(2) == 0;
		const unsigned n = 1 + rnd(IL_BURST);

		for (unsigned i = 0; i < n; i++) {
			enum shape s = raw_only ? (enum shape)rnd(RAW_TOO_BIG)
						: (enum shape)rnd(N_SHAPES);
			if (rnd(8) == 0 && s != NATIVE)
				s = RAW_STEER;
			p[0][i] = make(s);
			p[1][i] = dup(p[0][i]);
		}
		uint16_t got[2];
		for (unsigned k = 0; k < 2; k++) {
			struct il_chain ch = chain_of(k);
			got[k] = il_chain_stages(cl[k]->io, &ch, p[k], (uint16_t)n);
		}
		assert_int_equal(got[0], got[1]);
		for (unsigned i = 0; i < got[0]; i++)
			same_frame(p[0][i], p[1][i]);
		same_history();
		same_counters();
		for (unsigned k = 0; k < 2; k++)
			rte_pktmbuf_free_bulk(p[k], got[k]);
	}
	/* Every shape came through: frames stamped both ways, and drops. */
	const uint64_t *c0 = ctr0[1][1];
	assert_true(sq[1]->ctr[SEQ_C_RAW_INSERTED] - c0[SEQ_C_RAW_INSERTED] > 1000);
	assert_true(sq[1]->ctr[SEQ_C_DROP_RAW_TOO_BIG] - c0[SEQ_C_DROP_RAW_TOO_BIG] > 0);
	assert_true(sq[1]->ctr[SEQ_C_DROP_NO_HEADROOM] - c0[SEQ_C_DROP_NO_HEADROOM] > 0);
	assert_true(sq[1]->ctr[SEQ_C_STAMPED_FRAMES] - c0[SEQ_C_STAMPED_FRAMES] >
		    sq[1]->ctr[SEQ_C_RAW_INSERTED] - c0[SEQ_C_RAW_INSERTED]);
}

int main(int argc, char **argv)
{
	char err[512];
	(void)argc;
	char *eal[] = {argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0,1",
		       "--file-prefix", "il-fused-test", "--log-level", "lib.eal:error",
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
	cl[0] = il_app_stage(&app, "cl_f");
	sq[0] = il_app_stage(&app, "seq_f");
	cl[1] = il_app_stage(&app, "cl_s");
	sq[1] = il_app_stage(&app, "seq_s");
	/* Every mbuf's tags as junk, IL_SEQ_FUSED in `spare` included: a
	 * stale mark must never keep a frame from being stamped. */
	tu_pool_dirty_with(app.pool, 0xff);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fused_is_bound),
		cmocka_unit_test(test_fused_matches_staged),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	return rc;
}
