/* SPDX-License-Identifier: BSD-3-Clause
 * The `lec` stage (appliance-side LEC, docs/lec.md) through mbufs: a real
 * appliance (EAL --no-huge, net_ring ports, the real pool) whose classify,
 * sequencer and lec stages are driven burst by burst. Views arrive as VIEW
 * frames, members' addresses as their HEARTBEATs; every repair the stage
 * emits is parsed with the wire library and its XOR checked byte for byte
 * against the stamped frames its ids name.
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
#include <interlink/lec_wire.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "lec_stage_frames.h"
#include "seq.h"

static struct il_app app;
static struct il_stage *cl, *sq, *lc, *lp, *lo;

/* r = 4 so that bins fill quickly; c = 5 (capped at a group's size).
 * "lec" runs Algorithm 1 at one node's rate; "lecp" the defaults (one bin
 * per group, each member as many repairs as its peers would send it), both
 * with a unicast copy per target (repairs_to: members; to the group's
 * address: tests/conformance/test_lec_stage.py). */
static const char *cfg_text =
	"name: lecstagetest\n"
	"epoch: 77\n"
	"ports:\n"
	"  in: { device: net_ring0 }\n"
	"  out: { device: net_ring1 }\n"
	"groups:\n"
	"  - { id: 1, address: 239.1.1.1 }\n"
	"  - { id: 2, address: 239.1.1.2 }\n"
	"  - { id: 3, address: 239.1.1.3 }\n"
	"  - { id: 4, address: 239.1.1.4 }\n"
	"  - { id: 5, address: 239.1.1.5 }\n"
	"stages:\n"
	"  classify: { type: classify }\n"
	"  seq: { type: sequencer, history: 1024 }\n"
	"  lec: { type: lec, tx: in, r: 4, c: 5, plan: regions, rate: node, groups: [1, 2, 3],\n"
	"         repairs_to: members }\n"
	"  lecp: { type: lec, tx: in, r: 4, c: 5, groups: [5], repairs_to: members }\n"
	/* as "lec", for group 4, with a repair lcore (the tests call its
	 * service on this thread) and rings of 64 */
	"  leco: { type: lec, tx: in, r: 4, c: 5, plan: regions, rate: node, groups: [4],\n"
	"          repairs_to: members, repair_lcore: 2, repair_ring: 64 }\n"
	"pipeline:\n"
	"  - lcore: 1\n"
	"    chains:\n"
	"      - { rx: in, stages: [classify, seq, lec, lecp, leco], tx: out }\n";

/* Stamped frames kept by (group, global_seq), as receivers get them. */
#define MAXF 4096
static struct {
	uint16_t group;
	uint64_t seq;
	uint16_t len;
	uint8_t b[1500];
} kept[MAXF];
static unsigned nkept;

static uint64_t ctr_of(const struct il_stage *st, const char *name)
{
	for (unsigned i = 0; i < st->type->n_counters; i++)
		if (!strcmp(st->type->counter_names[i], name))
			return st->ctr[i];
	fail_msg("no counter %s", name);
	return 0;
}

static uint64_t ctr(const char *name)
{
	return ctr_of(lc, name);
}

static struct rte_mbuf *msg_frame(uint32_t src, uint16_t group, uint8_t type, uint32_t sender,
				  unsigned body, uint8_t **b)
{
	return lsf_msg(app.pool, src, group, type, sender, body, b);
}

/* A member's HEARTBEAT from its host: source MAC 02:00:00:00:00:<id>, IP 10.0.1.<id>. */
static struct rte_mbuf *heartbeat(uint16_t group, uint32_t id)
{
	return lsf_heartbeat(app.pool, group, id);
}

/* a sender alone, 99, besides the receivers: it gets no repairs */
static struct rte_mbuf *view(uint16_t group, uint32_t view_id, const uint32_t *ids, unsigned n)
{
	return lsf_view(app.pool, group, view_id, ids, n, 99);
}

static struct rte_mbuf *data(uint16_t group, uint32_t sender, uint64_t sseq, unsigned len)
{
	uint8_t *b;
	struct rte_mbuf *m = msg_frame(0x0a000200u + sender, group, IL_T_DATA, sender,
				       IL_MSG_HDR_LEN + len, &b);
	uint8_t *h = b - IL_HDR_LEN;

	il_put16(h + IL_OFF_MSG_COUNT, 1);
	il_put64(h + IL_OFF_SENDER_SEQ, sseq);
	b = il_rec_put(b, (uint16_t)len);
	for (unsigned i = 0; i < len; i++)
		b[i] = (uint8_t)(sseq * 31 + i * 7 + group);
	return m;
}

/* The stamped DATA frames of a burst that went on, as receivers get them. */
static void keep_stamped(struct rte_mbuf *const *p, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *f = rte_pktmbuf_mtod(p[i], const uint8_t *);
		struct il_parsed pr;

		if (il_parse_frame(f, rte_pktmbuf_data_len(p[i]), 7400, &pr) == IL_V_DATA &&
		    nkept < MAXF) {
			kept[nkept].group = pr.group_id;
			kept[nkept].seq = il_get64(f + pr.il_off + IL_OFF_GLOBAL_SEQ);
			kept[nkept].len = pr.payload_len;
			memcpy(kept[nkept].b, f + pr.il_off, pr.payload_len);
			nkept++;
		}
	}
}

/* Through classify, seq and lec; the survivors are kept (as stamped) and
 * freed; what the stage emitted is returned in out[] (caller frees). */
static unsigned run(struct rte_mbuf **p, uint16_t n, struct rte_mbuf **out)
{
	struct il_lcore_io *io = lc->io;
	unsigned k = 0;

	n = cl->type->process(cl, p, n);
	n = sq->type->process(sq, p, n);
	n = lc->type->process(lc, p, n);
	n = lp->type->process(lp, p, n);
	keep_stamped(p, n);
	rte_pktmbuf_free_bulk(p, n);
	for (uint16_t i = 0; i < io->n_defer; i++) {
		assert_int_equal(io->defer_port[i], 0); /* out of "in", where the hosts are */
		out[k++] = io->defer[i];
	}
	io->n_defer = 0;
	return k;
}

static const uint8_t *kept_frame(uint16_t group, uint64_t seq, uint16_t *len)
{
	for (unsigned i = 0; i < nkept; i++)
		if (kept[i].group == group && kept[i].seq == seq) {
			*len = kept[i].len;
			return kept[i].b;
		}
	return NULL;
}

struct rep {
	uint32_t dst_ip;
	uint8_t dst_mac[6];
	unsigned count;
	uint16_t groups[32];
	uint64_t seqs[32];
};

/* A repair as a receiver reads it: addressed, exact, and its payload the
 * XOR of the stamped frames its ids name. */
static void check_repair(struct rte_mbuf *m, struct rep *out)
{
	static uint8_t buf[2048];
	/* whole, whether one mbuf or headers chained to the shared message */
	const uint8_t *f = rte_pktmbuf_read(m, 0, m->pkt_len, buf);
	struct il_parsed pr;
	struct il_lec_body_view v;
	uint8_t x[1500] = { 0 };
	uint16_t maxlen = 0, lx = 0;

	assert_non_null(f);
	assert_int_equal(il_parse_frame(f, m->pkt_len, 7400, &pr), IL_V_CONTROL);
	assert_int_equal(pr.type, IL_T_LEC_REPAIR);
	const uint8_t *h = f + pr.il_off;
	assert_int_equal(il_get32(h + IL_OFF_SENDER_ID), 0);
	assert_int_equal(il_lec_body_get(h + IL_HDR_LEN, pr.payload_len - IL_HDR_LEN, &v), 0);
	assert_int_equal(v.f.origin, IL_LEC_ORIGIN_APPLIANCE);
	assert_int_equal(v.f.rate_r, 4);
	assert_int_equal(il_get16(h + IL_OFF_GROUP_ID), il_get16(v.ids));
	for (unsigned k = 0; k < v.f.count; k++) {
		uint16_t g, res, len = 0;
		uint32_t e;
		uint64_t s;

		il_lec_id_at(&v, k, &g, &res, &e, &s);
		assert_int_equal(res, 0);
		assert_int_equal(e, 77);
		const uint8_t *fr = kept_frame(g, s, &len);
		assert_non_null(fr);
		for (unsigned i = 0; i < len; i++)
			x[i] ^= fr[i];
		if (len > maxlen)
			maxlen = len;
		lx ^= len;
		out->groups[k] = g;
		out->seqs[k] = s;
	}
	assert_int_equal(v.f.len, maxlen);
	assert_int_equal(v.f.len_xor, lx);
	assert_memory_equal(v.payload, x, maxlen);
	out->count = v.f.count;
	out->dst_ip = pr.dst_ip;
	memcpy(out->dst_mac, f, 6);
	/* from the appliance, to the member's unicast address and port 7400 */
	assert_int_equal(il_get32(f + pr.l3_off + 12), app.appliance_ip);
	assert_int_equal(pr.dst_port, 7400);
}

static void reset(void)
{
	nkept = 0;
}

/* One group, four receivers: one region, one bin, every repair to all
 * four (c = 5 is capped at 4), the XOR exact, no reference kept. */
static void test_one_group_repairs_are_exact_and_addressed(void **state)
{
	static const uint32_t ids[] = { 11, 12, 13, 14 };
	struct rte_mbuf *p[IL_BURST_CAP], *out[2 * IL_BURST_CAP], *sent[64];
	struct rep r;
	unsigned n = 0, nout, copies[15] = { 0 };

	(void)state;
	reset();
	p[n++] = view(1, 1, ids, 4);
	for (unsigned i = 0; i < 4; i++)
		p[n++] = heartbeat(1, ids[i]);
	assert_int_equal(run(p, (uint16_t)n, out), 0);
	assert_int_equal(ctr("addr_learnt"), 4);
	assert_int_equal(ctr("views"), 1);
	uint64_t before = ctr("repair_copies");

	for (unsigned b = 0; b < 2; b++) {
		for (unsigned i = 0; i < 32; i++) {
			p[i] = data(1, 5, b * 32 + i + 1, 20 + (b * 32 + i) * 13 % 900);
			sent[b * 32 + i] = p[i];
			rte_mbuf_refcnt_update(p[i], 1); /* ours, to look at after */
		}
		nout = run(p, 32, out);
		assert_int_equal(nout, 32); /* 8 repairs x 4 members */
		for (unsigned k = 0; k < nout; k++) {
			check_repair(out[k], &r);
			assert_int_equal(r.count, 4);
			assert_true(r.dst_ip >= 0x0a00010bu && r.dst_ip <= 0x0a00010eu);
			assert_int_equal(r.dst_mac[5], r.dst_ip & 0xff);
			copies[r.dst_ip & 0xff]++;
			rte_pktmbuf_free(out[k]);
		}
	}
	for (unsigned i = 11; i <= 14; i++)
		assert_int_equal(copies[i], 16);
	assert_int_equal(ctr("repair_copies") - before, 64);
	/* every bin fired: the stage holds no reference (ours remains, and the
	 * history's for frames longer than its copy_max: it copies the others) */
	const struct il_seq *sq = il_app_stage(&app, "seq")->ctx;
	for (unsigned i = 0; i < 64; i++) {
		unsigned held = 0;
		for (unsigned gi = 0; gi < app.n_groups; gi++)
			for (uint32_t k = 0; k < sq->groups[gi].n; k++)
				held += il_seq_hist_at(sq, gi, k)->m == sent[i];
		assert_int_equal(rte_mbuf_refcnt_read(sent[i]), 1 + held);
		assert_int_equal(held, sent[i]->pkt_len > sq->copy_max);
		rte_pktmbuf_free(sent[i]);
	}
}

/* Two overlapping groups: regions {21} (group 2), {22, 23} (2 and 3),
 * {24} (3). A repair holds only frames of groups its target is in, and
 * the composite bin of {2, 3} serves 22 and 23. */
static void test_composite_repairs_only_to_members_of_all_their_groups(void **state)
{
	static const uint32_t a[] = { 21, 22, 23 }, b[] = { 22, 23, 24 };
	struct rte_mbuf *p[IL_BURST_CAP], *out[2 * IL_BURST_CAP];
	struct rep r;
	unsigned n = 0, mixed = 0, total = 0;

	(void)state;
	reset();
	p[n++] = view(2, 1, a, 3);
	p[n++] = view(3, 1, b, 3);
	for (unsigned i = 21; i <= 24; i++)
		p[n++] = heartbeat(i <= 23 ? 2 : 3, i);
	assert_int_equal(run(p, (uint16_t)n, out), 0);
	for (unsigned round = 0; round < 8; round++) {
		for (unsigned i = 0; i < 32; i++)
			p[i] = data((uint16_t)(2 + i % 2), 6, round * 16 + i / 2 + 1, 100 + i);
		unsigned nout = run(p, 32, out);

		for (unsigned k = 0; k < nout; k++) {
			uint32_t t = 0;

			check_repair(out[k], &r);
			t = r.dst_ip & 0xff;
			bool g2 = false, g3 = false;

			for (unsigned j = 0; j < r.count; j++) {
				g2 |= r.groups[j] == 2;
				g3 |= r.groups[j] == 3;
			}
			if (g2)
				assert_true(t == 21 || t == 22 || t == 23);
			if (g3)
				assert_true(t == 22 || t == 23 || t == 24);
			mixed += g2 && g3;
			total++;
			rte_pktmbuf_free(out[k]);
		}
	}
	assert_true(total > 0);
	assert_true(mixed > 0); /* the composite bin {2, 3} */
	struct il_stage *s = lc;
	(void)s;
}

/* What the stage does not protect passes unchanged and is counted: a
 * group it is not configured for, a group without a view yet, a frame too
 * long for a repair; a target whose address it has not learnt. */
static void test_unprotected_and_unknown_addresses_are_counted(void **state)
{
	static const uint32_t ids[] = { 31, 32 };
	struct rte_mbuf *p[IL_BURST_CAP], *out[2 * IL_BURST_CAP];
	unsigned n = 0;
	uint64_t unprot = ctr("unprotected"), too_long = ctr("too_long"),
		 no_addr = ctr("drop_no_addr");

	(void)state;
	reset();
	p[n++] = data(4, 7, 1, 50); /* group 4: not in `groups` */
	p[n++] = data(1, 7, 1000, 1400); /* too long for a repair of r = 4 */
	assert_int_equal(run(p, (uint16_t)n, out), 0);
	assert_int_equal(ctr("unprotected") - unprot, 1);
	assert_int_equal(ctr("too_long") - too_long, 1);
	/* group 1 again, now with members whose addresses are not known */
	n = 0;
	p[n++] = view(1, 2, ids, 2);
	for (unsigned i = 0; i < 8; i++)
		p[n++] = data(1, 7, 1001 + i, 64);
	unsigned nout = run(p, (uint16_t)n, out);
	assert_int_equal(nout, 0);
	assert_int_equal(ctr("drop_no_addr") - no_addr, 4); /* 2 repairs x 2 members */
}

/* The defaults (plan groups, rate peers): a group of four receivers, c =
 * 5: each member owed min(5, 3) = 3 repairs of every frame, as its three
 * peers would send it. Three layers of the group's bin, every repair to
 * all four members, each exact; every frame in three different repairs
 * to each member, with other companions: layer_stride (the default) deals
 * layer j's frames over j + 1 instances, so at r = 4 the three repairs of
 * a frame have no other frame in common. In order (the layers' rounds
 * only out of phase, boundaries 0, 1 and 2 of 4) half the frames would
 * share all three repairs with a neighbour, and a member that lost both
 * could rebuild neither (docs/lec.md, "Layers in order"). */
static void test_peers_rate_layers(void **state)
{
	static const uint32_t ids[] = { 51, 52, 53, 54 };
	struct rte_mbuf *p[IL_BURST_CAP], *out[2 * IL_BURST_CAP];
	static uint8_t inc[5][65];
	static uint64_t with[5][65][3]; /* the frames of each of its repairs */
	struct rep r;
	unsigned n = 0;

	(void)state;
	reset();
	p[n++] = view(5, 1, ids, 4);
	for (unsigned i = 0; i < 4; i++)
		p[n++] = heartbeat(5, ids[i]);
	assert_int_equal(run(p, (uint16_t)n, out), 0);
	for (unsigned b = 0; b < 2; b++) {
		for (unsigned i = 0; i < 32; i++)
			p[i] = data(5, 8, b * 32 + i + 1, 40 + i * 29);
		unsigned nout = run(p, 32, out);

		assert_true(nout > 0);
		for (unsigned k = 0; k < nout; k++) {
			unsigned t;

			check_repair(out[k], &r);
			t = (r.dst_ip & 0xff) - 50;
			assert_true(t >= 1 && t <= 4);
			for (unsigned j = 0; j < r.count; j++) {
				/* stamped global sequences of group 5 start at 1 */
				uint64_t s = r.seqs[j];

				assert_int_equal(r.groups[j], 5);
				assert_true(s >= 1 && s <= 64);
				assert_true(inc[t][s] < 3);
				for (unsigned q = 0; q < r.count; q++)
					with[t][s][inc[t][s]] |= 1ull << (r.seqs[q] - 1);
				inc[t][s]++;
			}
			rte_pktmbuf_free(out[k]);
		}
	}
	/* the frames whose rounds have all ended (layer 2's span 12 frames) */
	for (unsigned t = 1; t <= 4; t++)
		for (unsigned s = 4; s <= 40; s++) {
			const uint64_t *w = with[t][s];

			assert_int_equal(inc[t][s], 3);
			assert_int_not_equal(w[0], w[1]);
			assert_int_not_equal(w[1], w[2]);
			assert_int_not_equal(w[0], w[2]);
			assert_int_equal(w[0] & w[1] & w[2], 1ull << (s - 1));
		}
}

/* With a repair lcore: the chain lcore's part (front) hands frames over;
 * the repair lcore's (its service, called here) builds; the next poll of
 * the chain lcore sends what it handed back. Returns the repairs emitted. */
static unsigned run_o(struct rte_mbuf **p, uint16_t n, struct rte_mbuf **out, bool serve)
{
	struct il_lcore_io *io = lo->io;
	unsigned k = 0;

	n = cl->type->process(cl, p, n);
	n = sq->type->process(sq, p, n);
	assert_int_equal(lo->type->process(lo, p, n), n); /* everything passes */
	keep_stamped(p, n);
	rte_pktmbuf_free_bulk(p, n); /* tx completion: the frames' other reference */
	if (serve) {
		while (lo->type->service(lo))
			;
		lo->type->process(lo, p, 0); /* the chain lcore's next poll */
	}
	for (uint16_t i = 0; i < io->n_defer; i++) {
		assert_int_equal(io->defer_port[i], 0);
		out[k++] = io->defer[i];
	}
	io->n_defer = 0;
	return k;
}

/* The one-group case of the first test through a repair lcore: the same
 * repairs (8 of 4 frames, each to all four members, exact), every frame
 * handed over once, and no reference left behind once the bins fired:
 * the bins took over the reference the chain lcore handed over. */
static void test_repair_lcore_builds_the_same_repairs(void **state)
{
	static const uint32_t ids[] = { 41, 42, 43, 44 };
	struct rte_mbuf *p[IL_BURST_CAP], *out[2 * IL_BURST_CAP], *sent[64];
	struct rep r;
	unsigned n = 0, copies[45] = { 0 };
	const struct il_seq *sqc = sq->ctx;

	(void)state;
	reset();
	p[n++] = view(4, 1, ids, 4);
	for (unsigned i = 0; i < 4; i++)
		p[n++] = heartbeat(4, ids[i]);
	assert_int_equal(run_o(p, (uint16_t)n, out, true), 0);
	assert_int_equal(ctr_of(lo, "handed_over"), 5);
	assert_int_equal(ctr_of(lo, "addr_learnt"), 4);
	assert_int_equal(ctr_of(lo, "views"), 1);
	for (unsigned b = 0; b < 2; b++) {
		for (unsigned i = 0; i < 32; i++) {
			p[i] = data(4, 5, b * 32 + i + 1, 20 + (b * 32 + i) * 13 % 900);
			sent[b * 32 + i] = p[i];
			rte_mbuf_refcnt_update(p[i], 1); /* ours, to look at after */
		}
		/* the front alone emits nothing: the repairs are the repair lcore's */
		assert_int_equal(run_o(p, 32, out, false), 0);
		assert_int_equal(ctr_of(lo, "repairs"), b * 8);
		unsigned nout = run_o(p, 0, out, true);

		assert_int_equal(nout, 32); /* 8 repairs x 4 members */
		for (unsigned k = 0; k < nout; k++) {
			check_repair(out[k], &r);
			assert_int_equal(r.count, 4);
			assert_true(r.dst_ip >= 0x0a000129u && r.dst_ip <= 0x0a00012cu);
			copies[r.dst_ip & 0xff]++;
			rte_pktmbuf_free(out[k]);
		}
	}
	for (unsigned i = 41; i <= 44; i++)
		assert_int_equal(copies[i], 16);
	assert_int_equal(ctr_of(lo, "handed_over"), 5 + 64);
	assert_int_equal(ctr_of(lo, "protected"), 64);
	assert_int_equal(ctr_of(lo, "drop_repair_lcore_busy"), 0);
	for (unsigned i = 0; i < 64; i++) {
		unsigned held = 0;

		for (unsigned gi = 0; gi < app.n_groups; gi++)
			for (uint32_t k = 0; k < sqc->groups[gi].n; k++)
				held += il_seq_hist_at(sqc, gi, k)->m == sent[i];
		assert_int_equal(rte_mbuf_refcnt_read(sent[i]), 1 + held);
		rte_pktmbuf_free(sent[i]);
	}
}

/* A repair lcore that falls behind: what finds its ring (64 slots) full
 * goes on unprotected and counted, every frame still forwarded; once it
 * catches up it builds the repairs of what it got. */
static void test_repair_lcore_busy_frames_pass_unprotected(void **state)
{
	struct rte_mbuf *p[IL_BURST_CAP], *out[2 * IL_BURST_CAP];
	const uint64_t busy = ctr_of(lo, "drop_repair_lcore_busy"),
		       handed = ctr_of(lo, "handed_over"), prot = ctr_of(lo, "protected");

	(void)state;
	reset();
	for (unsigned b = 0; b < 3; b++) {
		for (unsigned i = 0; i < 32; i++)
			p[i] = data(4, 6, b * 32 + i + 1, 64);
		assert_int_equal(run_o(p, 32, out, false), 0);
	}
	assert_int_equal(ctr_of(lo, "handed_over") - handed, 64);
	assert_int_equal(ctr_of(lo, "drop_repair_lcore_busy") - busy, 32);
	unsigned nout = run_o(p, 0, out, true);

	assert_int_equal(ctr_of(lo, "protected") - prot, 64);
	assert_int_equal(nout, 64); /* 16 repairs x 4 members */
	for (unsigned k = 0; k < nout; k++)
		rte_pktmbuf_free(out[k]);
}

int main(int argc, char **argv)
{
	char err[512];
	(void)argc;
	char *eal[] = { argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0@0,1@0,2@0",
			"--file-prefix", "il-lec-stage-test", "--log-level", "lib.eal:error",
			"--vdev", "net_ring0", "--vdev", "net_ring1", NULL };
	if (rte_eal_init(15, eal) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	struct il_cfg *cfg = il_cfg_load_string(cfg_text, "test", err, sizeof(err));
	if (!cfg || il_app_configure(&app, cfg, err, sizeof(err)) ||
	    il_app_start(&app, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	cl = il_app_stage(&app, "classify");
	sq = il_app_stage(&app, "seq");
	lc = il_app_stage(&app, "lec");
	lp = il_app_stage(&app, "lecp");
	lo = il_app_stage(&app, "leco");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_group_repairs_are_exact_and_addressed),
		cmocka_unit_test(test_composite_repairs_only_to_members_of_all_their_groups),
		cmocka_unit_test(test_unprotected_and_unknown_addresses_are_counted),
		cmocka_unit_test(test_peers_rate_layers),
		cmocka_unit_test(test_repair_lcore_builds_the_same_repairs),
		cmocka_unit_test(test_repair_lcore_busy_frames_pass_unprotected),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	return rc;
}
