/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The FT-TCP south-side wrapper (the `ftcp` stage, docs/ft-tcp.md) on a real
 * appliance (EAL --no-huge --no-shconf, net_ring ports, the real pool), driven
 * burst by burst with crafted IPv4/TCP frames; the test plays the logger: it
 * reads the records from the up ring and writes FD_STABLE / FD_CRASH /
 * FD_RECOVER on the down ring. Four stage instances (lazy, eager,
 * conditional, and a lazy one with a larger flow table) protect four server
 * ports, each with its own ring file under /dev/shm (per process, removed at
 * the end).
 *
 *  - handshake: the client SYN logged (FR_SYN) and passed, the SYN-ACK held
 *    until FD_STABLE with the ISNs flag, SACK-permitted and timestamps NOPed
 *    on both with valid checksums;
 *  - client segments logged before they go on; a full up ring drops and
 *    counts them, none passes unlogged; a corrupt one is never logged;
 *  - acks to the client clamped to stable_seq with the right edge kept
 *    (checksums recomputed independently), Lazy's held ack released once
 *    stable >= its ack, Eager's ack per stable_seq move, Conditional's only
 *    after a clamp with no client segment since; made-up acks bounded by the
 *    server TCP's own ack; sequence numbers wrapping past 2^32;
 *  - recovery: closed-window acks and drops, RST to the dead socket,
 *    fabricated SYN (and its retransmission), SYN-ACK absorbed and answered,
 *    delta_seq applied both ways, counters;
 *  - unprotected traffic (ARP, UDP, another TCP port, IPv6, flows opened
 *    before the appliance) passes byte for byte;
 *  - timers: closing flows removed oldest first, none before its linger, at
 *    most FTCP_TICK_BUDGET per poll.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_hash.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <interlink/app.h>

#include "ftcp.h"

#define F_FIN 0x01
#define F_SYN 0x02
#define F_RST 0x04
#define F_PSH 0x08
#define F_ACK 0x10

#define CIP RTE_IPV4(10, 77, 0, 1)
#define SIP RTE_IPV4(10, 77, 0, 2)
static const uint8_t CMAC[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t SMAC[6] = {0x02, 0, 0, 0, 0, 0x02};

/* What Linux puts in a SYN: MSS 1460, SACK-permitted, timestamps, NOP, WS 7. */
static const uint8_t SYN_OPT[20] = {2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x11, 0x22, 0x33, 0x44,
				    0, 0, 0, 0, 1, 3, 3, 7};
/* The same after the stage: SACK-permitted and timestamps became NOPs. */
static const uint8_t SYN_OPT_NOP[20] = {2, 4, 0x05, 0xb4, 1, 1, 1, 1, 1, 1, 1, 1,
					1, 1, 1, 1, 1, 3, 3, 7};

static struct il_app app;
static struct il_cfg *cfg;
static uint16_t P_CLIENT, P_SERVER; /* app port indexes */
static unsigned pool_avail0;

struct tst {
	const char *name;
	uint16_t sport; /* protected server port, host order */
	struct il_stage *st;
	struct ftcp *f;
	struct ftc_ring *ring; /* the logger's own handle */
	char path[96];
};

static struct tst T[4] = {
	{.name = "ftl", .sport = 5001}, /* lazy */
	{.name = "fte", .sport = 5002}, /* eager */
	{.name = "ftc", .sport = 5003}, /* conditional */
	{.name = "ftb", .sport = 5004}, /* lazy, a larger flow table */
};
#define LAZY (&T[0])
#define EAGER (&T[1])
#define COND (&T[2])
#define BULK (&T[3])

/* ---- frames ------------------------------------------------------------ */

struct conn {
	struct tst *t;
	uint16_t cport;
	uint32_t c0, s0; /* ISNs */
};

static struct rte_mbuf *tcp_frame(uint32_t src, uint32_t dst, uint16_t sp, uint16_t dp,
				  const uint8_t *smac, const uint8_t *dmac, uint32_t seq,
				  uint32_t ack, uint8_t flags, uint16_t win, const uint8_t *opt,
				  unsigned optlen, const uint8_t *pay, unsigned plen)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(app.pool);
	unsigned thl = 20 + optlen, len = 14 + 20 + thl + plen;

	assert_non_null(m);
	assert_true(optlen % 4 == 0);
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)len);
	assert_non_null(f);
	memset(f, 0, len);
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x08;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + thl + plen));
	ip->packet_id = rte_cpu_to_be_16(0x1234);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_TCP;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	struct rte_tcp_hdr *t = (struct rte_tcp_hdr *)(ip + 1);
	t->src_port = rte_cpu_to_be_16(sp);
	t->dst_port = rte_cpu_to_be_16(dp);
	t->sent_seq = rte_cpu_to_be_32(seq);
	t->recv_ack = rte_cpu_to_be_32(ack);
	t->data_off = (uint8_t)((thl / 4) << 4);
	t->tcp_flags = flags;
	t->rx_win = rte_cpu_to_be_16(win);
	if (optlen)
		memcpy(t + 1, opt, optlen);
	if (plen)
		memcpy((uint8_t *)(t + 1) + optlen, pay, plen);
	t->cksum = rte_ipv4_udptcp_cksum(ip, t);
	return m;
}

static struct rte_mbuf *c2s(const struct conn *c, uint32_t seq, uint32_t ack, uint8_t flags,
			    uint16_t win, const uint8_t *opt, unsigned optlen, const uint8_t *pay,
			    unsigned plen)
{
	return tcp_frame(CIP, SIP, c->cport, c->t->sport, CMAC, SMAC, seq, ack, flags, win, opt,
			 optlen, pay, plen);
}

static struct rte_mbuf *s2c(const struct conn *c, uint32_t seq, uint32_t ack, uint8_t flags,
			    uint16_t win, const uint8_t *opt, unsigned optlen, const uint8_t *pay,
			    unsigned plen)
{
	return tcp_frame(SIP, CIP, c->t->sport, c->cport, SMAC, CMAC, seq, ack, flags, win, opt,
			 optlen, pay, plen);
}

static void fill(uint8_t *b, unsigned n, uint32_t seed)
{
	for (unsigned i = 0; i < n; i++)
		b[i] = (uint8_t)((seed + i) * 131u + (i >> 8));
}

/* A TCP segment as it left the stage; checksums recomputed here, not with
 * DPDK's helpers: a plain RFC 1071 sum over the pseudo header and segment. */
struct out {
	uint32_t src, dst;
	uint16_t sp, dp;
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t win;
	unsigned thl, plen;
	const uint8_t *opt, *pay;
	bool ip_ok, tcp_ok;
	const uint8_t *dmac, *smac;
};

static uint32_t sum16(const uint8_t *p, unsigned n, uint32_t s)
{
	for (unsigned i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static struct out parse_buf(const uint8_t *f, unsigned len)
{
	struct out o;

	memset(&o, 0, sizeof(o));
	assert_true(len >= 54);
	assert_int_equal(f[12], 0x08);
	assert_int_equal(f[13], 0x00);
	const uint8_t *ip = f + 14;
	assert_int_equal(ip[0], 0x45);
	assert_int_equal(ip[9], IPPROTO_TCP);
	unsigned tot = (unsigned)ip[2] << 8 | ip[3];
	assert_true(tot >= 40 && 14 + tot <= len);
	const uint8_t *t = ip + 20;
	o.dmac = f;
	o.smac = f + 6;
	o.src = (uint32_t)ip[12] << 24 | (uint32_t)ip[13] << 16 | (uint32_t)ip[14] << 8 | ip[15];
	o.dst = (uint32_t)ip[16] << 24 | (uint32_t)ip[17] << 16 | (uint32_t)ip[18] << 8 | ip[19];
	o.ip_ok = fold(sum16(ip, 20, 0)) == 0xffff;
	o.sp = (uint16_t)(t[0] << 8 | t[1]);
	o.dp = (uint16_t)(t[2] << 8 | t[3]);
	o.seq = (uint32_t)t[4] << 24 | (uint32_t)t[5] << 16 | (uint32_t)t[6] << 8 | t[7];
	o.ack = (uint32_t)t[8] << 24 | (uint32_t)t[9] << 16 | (uint32_t)t[10] << 8 | t[11];
	o.thl = (t[12] >> 4) * 4u;
	o.flags = t[13];
	o.win = (uint16_t)(t[14] << 8 | t[15]);
	o.opt = t + 20;
	o.pay = t + o.thl;
	o.plen = tot - 20 - o.thl;
	unsigned l4 = tot - 20;
	uint32_t s = sum16(ip + 12, 8, 0) + IPPROTO_TCP + l4;
	o.tcp_ok = fold(sum16(t, l4, s)) == 0xffff;
	return o;
}

static struct out parse(struct rte_mbuf *m)
{
	assert_int_equal(m->nb_segs, 1);
	return parse_buf(rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m));
}

/* ---- the stage and the logger's side of the ring ------------------------- */

static uint16_t burst(struct tst *t, struct rte_mbuf **p, uint16_t n)
{
	assert_int_equal(t->st->io->n_defer, 0); /* nothing left over from before */
	return t->st->type->process(t->st, p, n);
}

/* What the stage made during the last burst (il_emit), taken off the queue. */
static unsigned emitted(struct tst *t, struct rte_mbuf **out, uint16_t *port)
{
	struct il_lcore_io *io = t->st->io;
	unsigned n = io->n_defer;

	for (unsigned i = 0; i < n; i++) {
		out[i] = io->defer[i];
		port[i] = io->defer_port[i];
	}
	io->n_defer = 0;
	return n;
}

static void free_all(struct rte_mbuf **p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		rte_pktmbuf_free(p[i]);
}

static uint64_t ctr(const struct tst *t, const char *name)
{
	for (unsigned i = 0; i < t->st->type->n_counters; i++)
		if (!strcmp(t->st->type->counter_names[i], name))
			return t->st->ctr[i];
	fail_msg("no counter %s", name);
	return 0;
}

struct rec {
	struct ftc_rec h;
	uint8_t p[2048];
};

/* The logger's read of one record; false if empty. */
static bool up_pop(struct tst *t, struct rec *r)
{
	const struct ftc_rec *x;
	uint32_t len;
	int got = il_shm_rec_next(&t->ring->rx, (const void **)&x, &len);

	assert_true(got >= 0);
	if (got == 0)
		return false;
	assert_true(len == x->len && x->len == ftc_rec_size(x->plen));
	memcpy(&r->h, x, sizeof(*x));
	memcpy(r->p, x + 1, x->plen);
	il_shm_release(&t->ring->rx);
	return true;
}

static struct ftc_key key_of(const struct conn *c)
{
	struct ftc_key k = {rte_cpu_to_be_32(CIP), rte_cpu_to_be_32(SIP),
			    rte_cpu_to_be_16(c->cport), rte_cpu_to_be_16(c->t->sport)};
	return k;
}

/* Pops one record and checks its type, key and seq. */
static void expect_rec(const struct conn *c, struct rec *r, uint16_t type, uint32_t seq)
{
	struct ftc_key k = key_of(c);

	assert_true(up_pop(c->t, r));
	assert_int_equal(r->h.type, type);
	assert_memory_equal(&r->h.key, &k, sizeof(k));
	assert_int_equal(r->h.seq, seq);
}

static void expect_ring_empty(struct tst *t)
{
	struct rec r;
	assert_false(up_pop(t, &r));
}

static void down(const struct conn *c, uint16_t type, uint16_t flags, uint32_t a, uint32_t b)
{
	struct ftc_down d;

	memset(&d, 0, sizeof(d));
	d.type = type;
	d.flags = flags;
	d.key = key_of(c);
	d.a = a;
	d.b = b;
	assert_int_equal(il_shm_send(&c->t->ring->tx, &d, 1), 1);
}

/* Per test: nothing left over from a failed one (emitted packets, records). */
static int fresh(void **state)
{
	struct rte_mbuf *e[2 * IL_BURST_CAP];
	uint16_t port[2 * IL_BURST_CAP];
	struct rec r;

	(void)state;
	free_all(e, emitted(&T[0], e, port)); /* one io for all the stages */
	for (unsigned s = 0; s < RTE_DIM(T); s++)
		while (up_pop(&T[s], &r))
			;
	return 0;
}

/* An empty burst (the stage polls), which handles the down ring. */
static unsigned poll_stage(struct tst *t, struct rte_mbuf **out, uint16_t *port)
{
	struct rte_mbuf *none[1];
	assert_int_equal(burst(t, none, 0), 0);
	return emitted(t, out, port);
}

static void expect_nothing_emitted(struct tst *t)
{
	assert_int_equal(t->st->io->n_defer, 0);
}

/* Sends one frame through the stage; returns whether it went on (it is
 * freed either way) and fills *o with its bytes when it did. */
static bool pass1(struct tst *t, struct rte_mbuf *m, struct out *o, uint8_t *copy, unsigned cap)
{
	struct rte_mbuf *p[1] = {m};
	uint16_t n = burst(t, p, 1);

	if (n == 0)
		return false;
	assert_int_equal(n, 1);
	assert_ptr_equal(p[0], m);
	if (o) {
		unsigned len = rte_pktmbuf_data_len(m);
		assert_non_null(copy);
		assert_true(len <= cap);
		/* Parsed from a copy: *o points into it, not the freed mbuf. */
		memcpy(copy, rte_pktmbuf_mtod(m, uint8_t *), len);
		*o = parse_buf(copy, len);
	}
	rte_pktmbuf_free(m);
	return true;
}

/* The handshake, with the logger acknowledging both ISNs; the SYN-ACK
 * carries a 1024-byte window and window scale 7 (so does the SYN), the
 * client's first ACK is logged. Leaves the ring empty, stable = c0 + 1. */
static void open_conn(struct conn *c)
{
	struct rte_mbuf *e[8];
	uint16_t port[8];
	struct rec r;

	expect_ring_empty(c->t);
	assert_true(pass1(c->t, c2s(c, c->c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), NULL, NULL,
			  0));
	expect_rec(c, &r, FR_SYN, c->c0);
	assert_false(pass1(c->t, s2c(c, c->s0, c->c0 + 1, F_SYN | F_ACK, 1024, SYN_OPT, 20, NULL,
				     0),
			   NULL, NULL, 0));
	expect_rec(c, &r, FR_SYNACK, c->s0);
	expect_nothing_emitted(c->t);
	down(c, FD_STABLE, FD_F_ISNS, c->c0 + 1, 0);
	assert_int_equal(poll_stage(c->t, e, port), 1);
	assert_int_equal(port[0], P_CLIENT);
	struct out o = parse(e[0]);
	assert_int_equal(o.flags, F_SYN | F_ACK);
	assert_int_equal(o.seq, c->s0);
	free_all(e, 1);
	assert_true(pass1(c->t, c2s(c, c->c0 + 1, c->s0 + 1, F_ACK, 502, NULL, 0, NULL, 0), NULL,
			  NULL, 0));
	expect_rec(c, &r, FR_DATA, c->c0 + 1);
	expect_ring_empty(c->t);
}

/* Client data: logged (checked against the record) and passed. */
static void client_data(struct conn *c, uint32_t seq, uint32_t ack, unsigned len)
{
	uint8_t pay[1460], copy[1600];
	struct out o;
	struct rec r;

	assert_true(len <= sizeof(pay));
	fill(pay, len, seq);
	assert_true(pass1(c->t, c2s(c, seq, ack, F_ACK | F_PSH, 502, NULL, 0, pay, len), &o, copy,
			  sizeof(copy)));
	assert_int_equal(o.plen, len);
	expect_rec(c, &r, FR_DATA, seq);
	assert_int_equal(r.h.plen, len);
	assert_memory_equal(r.p, pay, len);
	expect_ring_empty(c->t);
}

/* ---- 1. handshake ------------------------------------------------------- */

static void test_handshake_logged_synack_held_options_nopped(void **state)
{
	(void)state;
	struct conn c = {LAZY, 40001, 0x11223344u, 0xa0000000u};
	struct tst *t = c.t;
	struct rte_mbuf *e[8];
	uint16_t port[8];
	uint8_t copy[256];
	struct out o;
	struct rec r;
	uint64_t held0 = ctr(t, "synack_held"), conns0 = ctr(t, "conns_protected");
	uint64_t toc0 = ctr(t, "acks_to_client");

	expect_ring_empty(t);
	/* The client's SYN: logged with its ISN, MSS, window scale and the
	 * MACs, passed on with SACK-permitted and timestamps NOPed. */
	assert_true(pass1(t, c2s(&c, c.c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_SYN);
	assert_int_equal(o.seq, c.c0);
	assert_int_equal(o.win, 64240);
	assert_int_equal(o.thl, 40);
	assert_memory_equal(o.opt, SYN_OPT_NOP, 20);
	assert_memory_equal(o.smac, CMAC, 6);
	assert_memory_equal(o.dmac, SMAC, 6);
	expect_rec(&c, &r, FR_SYN, c.c0);
	assert_int_equal(r.h.win, 64240);
	assert_int_equal(r.h.flags, F_SYN);
	assert_int_equal(r.h.aux, 1460u | 7u << 16 | 1u << 24);
	assert_int_equal(r.h.plen, 12);
	assert_memory_equal(r.p, CMAC, 6);
	assert_memory_equal(r.p + 6, SMAC, 6);
	assert_int_equal(ctr(t, "conns_protected"), conns0 + 1);
	expect_nothing_emitted(t);

	/* The server's SYN-ACK is logged and held; a retransmission replaces
	 * the held one (logged once). */
	assert_false(pass1(t, s2c(&c, c.s0, c.c0 + 1, F_SYN | F_ACK, 65160, SYN_OPT, 20, NULL, 0),
			   NULL, NULL, 0));
	expect_rec(&c, &r, FR_SYNACK, c.s0);
	assert_int_equal(r.h.aux, 7); /* the server's window scale */
	expect_ring_empty(t);
	expect_nothing_emitted(t);
	assert_false(pass1(t, s2c(&c, c.s0, c.c0 + 1, F_SYN | F_ACK, 65160, SYN_OPT, 20, NULL, 0),
			   NULL, NULL, 0));
	expect_ring_empty(t);
	assert_int_equal(ctr(t, "synack_held"), held0 + 2);

	/* Still held: nothing from the logger yet, then an FD_STABLE without
	 * the ISNs flag. */
	assert_int_equal(poll_stage(t, e, port), 0);
	down(&c, FD_STABLE, 0, c.c0 + 1, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	/* Both ISNs durable: released, once, towards the client. */
	down(&c, FD_STABLE, FD_F_ISNS, c.c0 + 1, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_CLIENT);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.src, SIP);
	assert_int_equal(o.dst, CIP);
	assert_int_equal(o.flags, F_SYN | F_ACK);
	assert_int_equal(o.seq, c.s0);
	assert_int_equal(o.ack, c.c0 + 1);
	assert_int_equal(o.win, 65160);
	assert_int_equal(o.thl, 40);
	assert_memory_equal(o.opt, SYN_OPT_NOP, 20);
	free_all(e, 1);
	assert_int_equal(poll_stage(t, e, port), 0);
	assert_int_equal(ctr(t, "acks_to_client"), toc0 + 1);

	/* The client's ACK completes it: logged, passed, nothing changed. */
	assert_true(pass1(t, c2s(&c, c.c0 + 1, c.s0 + 1, F_ACK, 502, NULL, 0, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_int_equal(o.ack, c.s0 + 1);
	assert_true(o.tcp_ok);
	expect_rec(&c, &r, FR_DATA, c.c0 + 1);
	assert_int_equal(r.h.ack, c.s0 + 1);
	assert_int_equal(r.h.plen, 0);
	expect_ring_empty(t);
}

/* ---- 2. client data logged first; full ring; corrupt segment ------------- */

static void test_client_data_logged_before_passed_full_ring_drops(void **state)
{
	(void)state;
	struct conn c = {LAZY, 40002, 0x00001000u, 0x00500000u};
	struct tst *t = c.t;
	struct rte_mbuf *p[IL_BURST_CAP];
	uint8_t pay[1400], copy[1600];
	struct out o;
	struct rec r;

	open_conn(&c);
	/* One data segment: when the burst returns with it, its record is
	 * already published (the logger can read it). */
	uint64_t segs0 = ctr(t, "segs_logged"), bytes0 = ctr(t, "bytes_logged");
	fill(pay, 100, 7);
	assert_true(pass1(t, c2s(&c, c.c0 + 1, c.s0 + 1, F_ACK | F_PSH, 502, NULL, 0, pay, 100),
			  &o, copy, sizeof(copy)));
	assert_int_equal(o.seq, c.c0 + 1);
	assert_int_equal(o.plen, 100);
	assert_memory_equal(o.pay, pay, 100);
	expect_rec(&c, &r, FR_DATA, c.c0 + 1);
	assert_int_equal(r.h.ack, c.s0 + 1);
	assert_int_equal(r.h.win, 502);
	assert_int_equal(r.h.flags, F_ACK | F_PSH);
	assert_int_equal(r.h.plen, 100);
	assert_memory_equal(r.p, pay, 100);
	expect_ring_empty(t);
	assert_int_equal(ctr(t, "segs_logged"), segs0 + 1);
	assert_int_equal(ctr(t, "bytes_logged"), bytes0 + 100);

	/* A corrupt segment: dropped, never logged. */
	uint64_t bad0 = ctr(t, "drop_bad_csum");
	struct rte_mbuf *m = c2s(&c, c.c0 + 101, c.s0 + 1, F_ACK, 502, NULL, 0, pay, 100);
	rte_pktmbuf_mtod(m, uint8_t *)[14 + 20 + 20 + 5] ^= 0x40;
	assert_false(pass1(t, m, NULL, NULL, 0));
	assert_int_equal(ctr(t, "drop_bad_csum"), bad0 + 1);
	expect_ring_empty(t);

	/* The logger stops reading: 60 segments of 1400 bytes into a 64 KiB
	 * ring. Work out how many fit from the ring's indexes (the ring pads
	 * its end where a record does not fit), then check exactly those went
	 * on. */
	struct il_shm_ring_stats rs;
	const uint32_t size = t->ring->file.geom[0].bytes;
	il_shm_ring_stats(t->ring->up, &rs);
	uint64_t hd = rs.head, tl = rs.tail;
	uint32_t len = ftc_rec_size(1400), mask = size - 1;
	unsigned fit = 0;
	const unsigned N = 60;
	for (unsigned i = 0; i < N; i++) {
		uint32_t room_end = size - (uint32_t)(hd & mask);
		uint32_t need = len + (room_end < len ? room_end : 0);
		if (hd + need - tl > size)
			break;
		hd += need;
		fit++;
	}
	assert_int_equal(size, 1u << 16);
	assert_true(fit > 30 && fit < N);
	uint64_t full0 = ctr(t, "drop_ring_full"), rdrops0 = rs.drops;
	segs0 = ctr(t, "segs_logged");
	uint32_t seq0 = c.c0 + 101;
	unsigned passed = 0;
	for (unsigned b = 0; b < 2; b++) {
		for (unsigned i = 0; i < N / 2; i++) {
			unsigned k = b * (N / 2) + i;
			fill(pay, 1400, k);
			p[i] = c2s(&c, seq0 + k * 1400, c.s0 + 1, F_ACK, 502, NULL, 0, pay, 1400);
		}
		uint16_t n = burst(t, p, N / 2);
		/* The survivors are the first ones, in order. */
		for (unsigned i = 0; i < n; i++) {
			o = parse(p[i]);
			assert_int_equal(o.seq, seq0 + (passed + i) * 1400);
		}
		passed += n;
		free_all(p, n);
		expect_nothing_emitted(t);
	}
	assert_int_equal(passed, fit);
	assert_int_equal(ctr(t, "drop_ring_full"), full0 + (N - fit));
	il_shm_ring_stats(t->ring->up, &rs);
	assert_int_equal(rs.drops, rdrops0 + (N - fit));
	assert_int_equal(ctr(t, "segs_logged"), segs0 + fit);
	/* Everything that went on is in the ring, and nothing else. */
	for (unsigned k = 0; k < fit; k++) {
		expect_rec(&c, &r, FR_DATA, seq0 + k * 1400);
		fill(pay, 1400, k);
		assert_int_equal(r.h.plen, 1400);
		assert_memory_equal(r.p, pay, 1400);
	}
	expect_ring_empty(t);
	/* The client's retransmission of the first dropped one gets through. */
	client_data(&c, seq0 + fit * 1400, c.s0 + 1, 1400);
}

/* ---- 3. clamping and the ack strategies ----------------------------------- */

static void test_lazy_clamps_holds_and_releases(void **state)
{
	(void)state;
	/* The client's sequence space wraps past 2^32 on the way. */
	struct conn c = {LAZY, 40003, 0xfffffc00u, 0x7ffffff0u};
	struct tst *t = c.t;
	const uint32_t c0 = c.c0, s0 = c.s0;
	struct rte_mbuf *e[8];
	uint16_t port[8];
	uint8_t pay[200], copy[1600];
	struct out o;

	open_conn(&c); /* stable = c0 + 1, right edge c0 + 1 + 1024 */
	client_data(&c, c0 + 1, s0 + 1, 1024);

	/* A pure ack above stable_seq is held (Lazy, G6). */
	uint64_t held0 = ctr(t, "acks_held"), cl0 = ctr(t, "acks_clamped");
	uint64_t toc0 = ctr(t, "acks_to_client");
	assert_false(pass1(t, s2c(&c, s0 + 1, c0 + 1025, F_ACK, 500, NULL, 0, NULL, 0), NULL,
			   NULL, 0));
	assert_int_equal(ctr(t, "acks_held"), held0 + 1);
	expect_nothing_emitted(t);

	/* A data segment is sent, clamped: ack = stable_seq, window widened by
	 * what was taken off (1024 bytes = 8 units of 2^7): the right edge is
	 * where TCP put it. */
	fill(pay, 200, 3);
	assert_true(pass1(t, s2c(&c, s0 + 1, c0 + 1025, F_ACK | F_PSH, 500, NULL, 0, pay, 200), &o,
			  copy, sizeof(copy)));
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.seq, s0 + 1);
	assert_int_equal(o.ack, c0 + 1);
	assert_int_equal(o.win, 508);
	assert_int_equal(o.ack + ((uint32_t)o.win << 7), (c0 + 1025) + (500u << 7));
	assert_int_equal(o.plen, 200);
	assert_memory_equal(o.pay, pay, 200);
	assert_int_equal(ctr(t, "acks_clamped"), cl0 + 1);

	/* stable_seq moves, but not up to the held ack: still held. */
	uint64_t bst0 = ctr(t, "bytes_stable");
	down(&c, FD_STABLE, 0, c0 + 513, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	assert_int_equal(ctr(t, "bytes_stable"), bst0 + 512);
	/* stable >= its ack: the held ack is not released behind the data
	 * that overtook it (its seq, s0 + 1, is below what the client has
	 * now: it would answer it with an ack of its own); the made-up ack
	 * the clamp asked for says the same with the newest seq. */
	down(&c, FD_STABLE, 0, c0 + 1025, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_CLIENT);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, s0 + 201);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	assert_int_equal(o.plen, 0);
	free_all(e, 1);
	assert_int_equal(poll_stage(t, e, port), 0);
	assert_int_equal(ctr(t, "acks_to_client"), toc0 + 2);

	/* A pure ack at or below stable_seq goes on at once, unchanged. */
	assert_true(pass1(t, s2c(&c, s0 + 201, c0 + 1025, F_ACK, 500, NULL, 0, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	assert_true(o.tcp_ok);

	/* Lazy's one extra ack: a clamped data segment was TCP's last word
	 * and nothing is held; once stable_seq reaches TCP's ack the stage
	 * says it. 100 bytes clamped: window 64000 + 100 rounded up to 501
	 * units (the edge moves right by 28 bytes, never left). */
	client_data(&c, c0 + 1025, s0 + 201, 100);
	uint64_t gen0 = ctr(t, "acks_generated");
	fill(pay, 50, 9);
	assert_true(pass1(t, s2c(&c, s0 + 201, c0 + 1125, F_ACK | F_PSH, 500, NULL, 0, pay, 50), &o,
			  copy, sizeof(copy)));
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 501);
	assert_true(o.tcp_ok);
	down(&c, FD_STABLE, 0, c0 + 1125, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_CLIENT);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, s0 + 251);
	assert_int_equal(o.ack, c0 + 1125);
	/* 64000 bytes from the new ack would pull the edge left of the one
	 * offered (c0 + 1025 + 501 * 128): widened to it, rounded up. */
	assert_int_equal(o.win, 501);
	assert_memory_equal(o.smac, SMAC, 6);
	assert_memory_equal(o.dmac, CMAC, 6);
	assert_int_equal(o.src, SIP);
	assert_int_equal(o.dst, CIP);
	assert_int_equal(o.sp, t->sport);
	assert_int_equal(o.dp, c.cport);
	free_all(e, 1);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 1);
	/* Said once. */
	down(&c, FD_STABLE, 0, c0 + 1125, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	expect_ring_empty(t);
}

static void test_eager_acks_every_stable_move(void **state)
{
	(void)state;
	struct conn c = {EAGER, 40013, 0x5000u, 0xfffffff0u}; /* the server's wraps */
	struct tst *t = c.t;
	const uint32_t c0 = c.c0, s0 = c.s0;
	struct rte_mbuf *e[8];
	uint16_t port[8];
	uint8_t copy[256];
	struct out o;

	open_conn(&c);
	client_data(&c, c0 + 1, s0 + 1, 1024);
	uint64_t gen0 = ctr(t, "acks_generated"), cl0 = ctr(t, "acks_clamped");

	/* Eager never holds: the pure ack goes on clamped, right edge kept. */
	assert_true(pass1(t, s2c(&c, s0 + 1, c0 + 1025, F_ACK, 500, NULL, 0, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_true(o.tcp_ok);
	assert_int_equal(o.ack, c0 + 1);
	assert_int_equal(o.win, 508);
	assert_int_equal(ctr(t, "acks_clamped"), cl0 + 1);
	expect_nothing_emitted(t);

	/* Each FD_STABLE that moves stable_seq makes one ack at it. */
	down(&c, FD_STABLE, 0, c0 + 513, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_CLIENT);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, s0 + 1);
	assert_int_equal(o.ack, c0 + 513);
	assert_int_equal(o.win, 504); /* edge c0 + 1025 + 500 * 128 */
	assert_int_equal(o.sp, t->sport);
	assert_int_equal(o.dp, c.cport);
	free_all(e, 1);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 1);

	/* Not moving: no ack. Two moves in one burst: one ack, the newest. */
	down(&c, FD_STABLE, 0, c0 + 513, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	down(&c, FD_STABLE, 0, c0 + 769, 0);
	down(&c, FD_STABLE, 0, c0 + 1025, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	free_all(e, 1);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 2);

	/* Logged bytes the server's TCP has not acked: the made-up ack stops
	 * at TCP's own ack (G7). */
	client_data(&c, c0 + 1025, s0 + 1, 512);
	down(&c, FD_STABLE, 0, c0 + 1537, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	free_all(e, 1);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 3);
	expect_ring_empty(t);
}

static void test_conditional_acks_only_after_a_clamp(void **state)
{
	(void)state;
	struct conn c = {COND, 40023, 0x9000u, 0x100u};
	struct tst *t = c.t;
	const uint32_t c0 = c.c0, s0 = c.s0;
	struct rte_mbuf *e[8];
	uint16_t port[8];
	uint8_t pay[100], copy[256];
	struct out o;

	open_conn(&c);
	client_data(&c, c0 + 1, s0 + 1, 1024);
	uint64_t gen0 = ctr(t, "acks_generated");

	/* TCP's ack is clamped (a data segment). */
	fill(pay, 100, 1);
	assert_true(pass1(t, s2c(&c, s0 + 1, c0 + 1025, F_ACK | F_PSH, 500, NULL, 0, pay, 100), &o,
			  copy, sizeof(copy)));
	assert_int_equal(o.ack, c0 + 1);
	assert_int_equal(o.win, 508);
	assert_true(o.tcp_ok);
	/* Not everything passed on is logged yet: no ack. */
	down(&c, FD_STABLE, 0, c0 + 513, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	/* Now it is: one ack. */
	down(&c, FD_STABLE, 0, c0 + 1025, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, s0 + 101);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	free_all(e, 1);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 1);

	/* A clamped pure ack, then a client segment arrives (TCP will ack
	 * again by itself): no made-up ack until stable covers it. */
	client_data(&c, c0 + 1025, s0 + 101, 512);
	assert_true(pass1(t, s2c(&c, s0 + 101, c0 + 1537, F_ACK, 500, NULL, 0, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 504);
	client_data(&c, c0 + 1537, s0 + 101, 100);
	down(&c, FD_STABLE, 0, c0 + 1537, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	down(&c, FD_STABLE, 0, c0 + 1637, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.ack, c0 + 1537); /* TCP's own ack bounds it */
	assert_int_equal(o.win, 500);
	free_all(e, 1);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 2);

	/* TCP's ack not clamped: stable_seq moving makes no ack. */
	assert_true(pass1(t, s2c(&c, s0 + 101, c0 + 1637, F_ACK, 500, NULL, 0, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_int_equal(o.ack, c0 + 1637);
	client_data(&c, c0 + 1637, s0 + 101, 8);
	down(&c, FD_STABLE, 0, c0 + 1645, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 2);
	expect_ring_empty(t);
}

/* ---- 4. recovery -------------------------------------------------------- */

static void test_recovery_fabricated_syn_and_shift(void **state)
{
	(void)state;
	struct conn c = {LAZY, 40004, 0x0abc0000u, 0x00de0000u};
	struct tst *t = c.t;
	const uint32_t c0 = c.c0, s0 = c.s0;
	struct rte_mbuf *e[8];
	uint16_t port[8];
	uint8_t pay[300], copy[1600];
	struct out o;
	struct rec r;

	open_conn(&c);
	client_data(&c, c0 + 1, s0 + 1, 1024);
	down(&c, FD_STABLE, 0, c0 + 1025, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	fill(pay, 200, 5);
	assert_true(pass1(t, s2c(&c, s0 + 1, c0 + 1025, F_ACK | F_PSH, 500, NULL, 0, pay, 200), &o,
			  copy, sizeof(copy)));
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);

	uint64_t rec0 = ctr(t, "recoveries"), fab0 = ctr(t, "fabricated_syns");
	uint64_t rst0 = ctr(t, "rst_to_server"), cwa0 = ctr(t, "closed_window_acks");
	uint64_t dir0 = ctr(t, "drop_in_recovery"), dsd0 = ctr(t, "drop_server_dead");
	uint64_t gen0 = ctr(t, "acks_generated"), toc0 = ctr(t, "acks_to_client");
	uint64_t hir0 = ctr(t, "held_in_recovery"), hp0 = ctr(t, "held_passed");

	/* The server died: an RST to its socket at the seq it expects, and
	 * FR_CRASHED to the logger. */
	down(&c, FD_CRASH, 0, 0, 0);
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_SERVER);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_RST);
	assert_int_equal(o.src, CIP);
	assert_int_equal(o.dst, SIP);
	assert_int_equal(o.sp, c.cport);
	assert_int_equal(o.dp, t->sport);
	assert_int_equal(o.seq, c0 + 1025);
	assert_memory_equal(o.smac, CMAC, 6);
	assert_memory_equal(o.dmac, SMAC, 6);
	free_all(e, 1);
	assert_int_equal(ctr(t, "rst_to_server"), rst0 + 1);
	expect_rec(&c, &r, FR_CRASHED, c0 + 1025);
	expect_ring_empty(t);

	/* The client keeps sending: answered with a closed window at
	 * stable_seq, not logged; its first segment with data is kept for the
	 * new server, others dropped. */
	fill(pay, 100, 11);
	assert_false(pass1(t, c2s(&c, c0 + 1025, s0 + 201, F_ACK | F_PSH, 502, NULL, 0, pay, 100),
			   NULL, NULL, 0));
	assert_int_equal(emitted(t, e, port), 1);
	assert_int_equal(port[0], P_CLIENT);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, s0 + 201);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 0);
	assert_int_equal(o.src, SIP);
	assert_int_equal(o.dp, c.cport);
	free_all(e, 1);
	assert_int_equal(ctr(t, "closed_window_acks"), cwa0 + 1);
	assert_int_equal(ctr(t, "drop_in_recovery"), dir0);
	assert_int_equal(ctr(t, "held_in_recovery"), hir0 + 1);
	/* Further data (not a retransmission of the kept one): dropped. */
	assert_false(pass1(t, c2s(&c, c0 + 1125, s0 + 201, F_ACK | F_PSH, 502, NULL, 0, pay, 100),
			   NULL, NULL, 0));
	assert_int_equal(emitted(t, e, port), 1);
	free_all(e, 1);
	assert_int_equal(ctr(t, "drop_in_recovery"), dir0 + 1);
	/* Its retransmission replaces it (the older copy dropped). */
	assert_false(pass1(t, c2s(&c, c0 + 1025, s0 + 201, F_ACK | F_PSH, 502, NULL, 0, pay, 100),
			   NULL, NULL, 0));
	assert_int_equal(emitted(t, e, port), 1);
	free_all(e, 1);
	assert_int_equal(ctr(t, "drop_in_recovery"), dir0 + 2);
	assert_int_equal(ctr(t, "held_in_recovery"), hir0 + 1);
	assert_int_equal(ctr(t, "closed_window_acks"), cwa0 + 3);
	expect_ring_empty(t);
	/* The dead socket's kernel still talks: reset at its ack, dropped. */
	assert_false(pass1(t, s2c(&c, s0 + 201, c0 + 1025, F_FIN | F_ACK, 500, NULL, 0, NULL, 0),
			   NULL, NULL, 0));
	assert_int_equal(emitted(t, e, port), 1);
	assert_int_equal(port[0], P_SERVER);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_RST);
	assert_int_equal(o.seq, c0 + 1025);
	free_all(e, 1);
	assert_int_equal(ctr(t, "drop_server_dead"), dsd0 + 1);
	assert_int_equal(ctr(t, "rst_to_server"), rst0 + 2);

	/* The restarted server listens: FD_RECOVER with the SYN's ISN (first
	 * unlogged byte - 1, G1) and server_seq. The fabricated SYN carries
	 * the client's MSS and window scale, its window, no SACK/timestamps. */
	const uint32_t isn = c0 + 1024, server_seq = s0 + 201, n0 = 0x33330000u;
	down(&c, FD_RECOVER, 0, isn, server_seq);
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_SERVER);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_SYN);
	assert_int_equal(o.seq, isn);
	assert_int_equal(o.ack, 0);
	assert_int_equal(o.win, 64240);
	assert_int_equal(o.src, CIP);
	assert_int_equal(o.dst, SIP);
	assert_int_equal(o.sp, c.cport);
	assert_int_equal(o.dp, t->sport);
	assert_memory_equal(o.smac, CMAC, 6);
	assert_memory_equal(o.dmac, SMAC, 6);
	static const uint8_t fab_opt[8] = {2, 4, 0x05, 0xb4, 1, 3, 3, 7};
	assert_int_equal(o.thl, 28);
	assert_memory_equal(o.opt, fab_opt, 8);
	uint8_t syn1[128];
	unsigned syn1_len = rte_pktmbuf_data_len(e[0]);
	memcpy(syn1, rte_pktmbuf_mtod(e[0], uint8_t *), syn1_len);
	free_all(e, 1);
	assert_int_equal(ctr(t, "fabricated_syns"), fab0 + 1);
	/* No SYN-ACK within the RTO: the same SYN again. */
	t->f->syn_rto_tsc = 0;
	t->f->next_scan = 0;
	assert_int_equal(poll_stage(t, e, port), 1);
	assert_int_equal(port[0], P_SERVER);
	assert_int_equal(rte_pktmbuf_data_len(e[0]), syn1_len);
	assert_memory_equal(rte_pktmbuf_mtod(e[0], uint8_t *), syn1, syn1_len);
	free_all(e, 1);
	t->f->syn_rto_tsc = UINT64_MAX;
	assert_int_equal(ctr(t, "fabricated_syns"), fab0 + 2);

	/* The new server's SYN-ACK is absorbed; the stage completes the
	 * handshake (ACK to the server) and reopens the client's window at
	 * the old right edge (c0 + 1025 + 500 * 128). */
	assert_false(pass1(t, s2c(&c, n0, isn + 1, F_SYN | F_ACK, 1024, SYN_OPT, 20, NULL, 0),
			   NULL, NULL, 0));
	/* ACK, window update, and three duplicates of it: the client sent
	 * bytes during the outage that it should resend at once; then the
	 * segment kept during the outage, to the new server. */
	assert_int_equal(emitted(t, e, port), 6);
	for (int i = 2; i < 5; i++) {
		assert_int_equal(port[i], P_CLIENT);
		assert_int_equal(rte_pktmbuf_data_len(e[i]), rte_pktmbuf_data_len(e[1]));
		assert_memory_equal(rte_pktmbuf_mtod(e[i], uint8_t *),
				    rte_pktmbuf_mtod(e[1], uint8_t *), rte_pktmbuf_data_len(e[1]));
	}
	assert_int_equal(port[0], P_SERVER);
	o = parse(e[0]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, isn + 1);
	assert_int_equal(o.ack, n0 + 1);
	assert_int_equal(o.win, 502); /* the client's last window */
	assert_int_equal(o.sp, c.cport);
	assert_int_equal(port[1], P_CLIENT);
	o = parse(e[1]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, server_seq);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	assert_int_equal(o.dp, c.cport);
	/* The kept segment: its bytes at the new server's next expected
	 * sequence number, its ack within what the new server has sent. */
	assert_int_equal(port[5], P_SERVER);
	o = parse(e[5]);
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.seq, c0 + 1025);
	assert_int_equal(o.seq, isn + 1);
	assert_int_equal(o.ack, n0 + 1);
	assert_int_equal(o.plen, 100);
	free_all(e, 6);
	expect_rec(&c, &r, FR_RECOVERED, n0);
	expect_rec(&c, &r, FR_DATA, c0 + 1025); /* logged like any segment */
	expect_ring_empty(t);
	assert_int_equal(ctr(t, "held_passed"), hp0 + 1);
	assert_int_equal(ctr(t, "recoveries"), rec0 + 1);
	assert_int_equal(ctr(t, "fabricated_syns"), fab0 + 2);
	assert_int_equal(ctr(t, "acks_generated"), gen0 + 3);
	assert_int_equal(ctr(t, "acks_to_client"), toc0 + 7);
	assert_int_equal(ctr(t, "rst_to_server"), rst0 + 2);

	/* The new server's bytes: seq + delta_seq, delta = server_seq - (n0 + 1). */
	const uint32_t delta = server_seq - (n0 + 1);
	fill(pay, 300, 21);
	assert_true(pass1(t, s2c(&c, n0 + 1, isn + 1, F_ACK | F_PSH, 500, NULL, 0, pay, 300), &o,
			  copy, sizeof(copy)));
	assert_true(o.ip_ok);
	assert_true(o.tcp_ok);
	assert_int_equal(o.seq, n0 + 1 + delta);
	assert_int_equal(o.seq, s0 + 201);
	assert_int_equal(o.ack, c0 + 1025);
	assert_int_equal(o.win, 500);
	assert_memory_equal(o.pay, pay, 300);
	/* The client's acks go back shifted by -delta_seq (logged unshifted),
	 * and never past what the new server has sent. */
	fill(pay, 100, 11);
	assert_true(pass1(t, c2s(&c, c0 + 1025, s0 + 501, F_ACK | F_PSH, 502, NULL, 0, pay, 100),
			  &o, copy, sizeof(copy)));
	assert_true(o.tcp_ok);
	assert_int_equal(o.seq, c0 + 1025);
	assert_int_equal(o.ack, n0 + 301);
	expect_rec(&c, &r, FR_DATA, c0 + 1025);
	assert_int_equal(r.h.ack, s0 + 501);
	assert_int_equal(r.h.plen, 100);
	assert_true(pass1(t, c2s(&c, c0 + 1125, s0 + 601, F_ACK, 502, NULL, 0, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_true(o.tcp_ok);
	assert_int_equal(o.ack, n0 + 301);
	expect_rec(&c, &r, FR_DATA, c0 + 1125);
	expect_ring_empty(t);
	assert_int_equal(ctr(t, "recoveries"), rec0 + 1);
	assert_int_equal(ctr(t, "fabricated_syns"), fab0 + 2);
}

/* Mass recovery (docs/ft-tcp.md): a restarted server's repeated SYN-ACK
 * (its accept queue dropped our ACK) is answered again and never reaches
 * the client; FD_ABANDON resets both sides and ends the flow; a client RST
 * during the outage ends it (FR_CLOSED); a restarted server that dies
 * before its SYN-ACK stops the SYN until the next FD_RECOVER. */
/* An open connection whose server dies: the RST to its socket, FR_CRASHED. */
static void crash_open(struct conn *c, uint32_t c2s_next)
{
	struct rte_mbuf *e[8];
	uint16_t port[8];
	struct rec r;

	down(c, FD_CRASH, 0, 0, 0);
	assert_int_equal(poll_stage(c->t, e, port), 1);
	free_all(e, 1);
	expect_rec(c, &r, FR_CRASHED, c2s_next);
}

static void test_mass_recovery_reack_abandon_reset(void **state)
{
	(void)state;
	struct conn a = {LAZY, 40011, 0x0a110000u, 0x0b220000u};
	struct conn b = {LAZY, 40012, 0x0c330000u, 0x0d440000u};
	struct conn k = {LAZY, 40013, 0x0e550000u, 0x0f660000u};
	struct tst *t = a.t;
	struct rte_mbuf *e[8];
	uint16_t port[8];
	struct out o;
	struct rec r;
	const uint32_t n0 = 0x44440000u;

	uint8_t pay[200], copy[1600];

	open_conn(&a);
	client_data(&a, a.c0 + 1, a.s0 + 1, 100);
	down(&a, FD_STABLE, 0, a.c0 + 101, 0);
	assert_int_equal(poll_stage(t, e, port), 0);
	/* 200 bytes reach the client, whose ack of them is never logged. */
	fill(pay, 200, 3);
	assert_true(pass1(t, s2c(&a, a.s0 + 1, a.c0 + 101, F_ACK | F_PSH, 500, NULL, 0, pay, 200),
			  &o, copy, sizeof(copy)));
	crash_open(&a, a.c0 + 101);
	down(&a, FD_RECOVER, 0, a.c0 + 100, a.s0 + 1); /* server_seq: no ack logged */
	assert_int_equal(poll_stage(t, e, port), 1); /* the fabricated SYN */
	free_all(e, 1);
	assert_false(pass1(t, s2c(&a, n0, a.c0 + 101, F_SYN | F_ACK, 1024, SYN_OPT, 20, NULL, 0),
			   NULL, NULL, 0));
	assert_int_equal(emitted(t, e, port), 2); /* ACK to the server, window update */
	/* The window update's seq is the highest the client saw (not server_seq,
	 * below it): with a lower one the client would not reopen its window. */
	assert_int_equal(port[1], P_CLIENT);
	o = parse(e[1]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.seq, a.s0 + 201);
	assert_true(o.win > 0);
	free_all(e, 2);
	expect_rec(&a, &r, FR_RECOVERED, n0);
	uint64_t re0 = ctr(t, "synack_reacked"), toc0 = ctr(t, "acks_to_client");
	assert_false(pass1(t, s2c(&a, n0, a.c0 + 101, F_SYN | F_ACK, 1024, SYN_OPT, 20, NULL, 0),
			   NULL, NULL, 0));
	assert_int_equal(emitted(t, e, port), 1);
	assert_int_equal(port[0], P_SERVER);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_ACK);
	assert_int_equal(o.seq, a.c0 + 101);
	assert_int_equal(o.ack, n0 + 1);
	free_all(e, 1);
	assert_int_equal(ctr(t, "synack_reacked"), re0 + 1);
	assert_int_equal(ctr(t, "acks_to_client"), toc0);
	expect_ring_empty(t);

	/* Given up: the client gets an RST at what it expects, the new
	 * server's connection one too, and the flow is gone. */
	uint64_t ab0 = ctr(t, "recoveries_abandoned"), fa0 = ctr(t, "flows_active");
	down(&a, FD_ABANDON, 0, FTC_AB_TIMEOUT, 0);
	assert_int_equal(poll_stage(t, e, port), 2);
	assert_int_equal(port[0], P_CLIENT);
	o = parse(e[0]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_RST | F_ACK);
	assert_int_equal(o.seq, a.s0 + 1);
	assert_int_equal(o.ack, a.c0 + 101);
	assert_int_equal(port[1], P_SERVER);
	o = parse(e[1]);
	assert_true(o.tcp_ok);
	assert_int_equal(o.flags, F_RST);
	free_all(e, 2);
	assert_int_equal(ctr(t, "recoveries_abandoned"), ab0 + 1);
	assert_int_equal(ctr(t, "flows_active"), fa0 - 1);
	expect_ring_empty(t);

	/* The client resets during the outage: the flow ends, the logger is
	 * told (FR_CLOSED), nothing goes to the dead server. */
	open_conn(&b);
	crash_open(&b, b.c0 + 1);
	uint64_t cr0 = ctr(t, "recoveries_client_reset");
	assert_false(pass1(t, c2s(&b, b.c0 + 1, b.s0 + 1, F_RST | F_ACK, 0, NULL, 0, NULL, 0), NULL,
			   NULL, 0));
	assert_int_equal(emitted(t, e, port), 0);
	assert_int_equal(ctr(t, "recoveries_client_reset"), cr0 + 1);
	expect_rec(&b, &r, FR_CLOSED, 0);
	expect_ring_empty(t);

	/* The restarted server dies before answering the SYN: FR_CRASHED
	 * again and no more SYNs until the next FD_RECOVER. */
	open_conn(&k);
	crash_open(&k, k.c0 + 1);
	down(&k, FD_RECOVER, 0, k.c0, k.s0 + 1);
	assert_int_equal(poll_stage(t, e, port), 1);
	free_all(e, 1);
	down(&k, FD_CRASH, 0, 0, 0);
	t->f->syn_rto_tsc = 0;
	t->f->next_scan = 0;
	assert_int_equal(poll_stage(t, e, port), 0);
	t->f->syn_rto_tsc = UINT64_MAX;
	expect_rec(&k, &r, FR_CRASHED, k.c0 + 1);
	expect_ring_empty(t);
	down(&k, FD_RECOVER, 0, k.c0, k.s0 + 1);
	assert_int_equal(poll_stage(t, e, port), 1);
	o = parse(e[0]);
	assert_int_equal(o.flags, F_SYN);
	free_all(e, 1);
}

/* FR_CRASHED carries the server's last 32 bytes of output and where they
 * end: across segments, a retransmission adding nothing. */
static void test_crash_record_carries_the_servers_last_output(void **state)
{
	(void)state;
	struct conn a = {LAZY, 40041, 0x3a110000u, 0x3b220000u};
	struct tst *t = a.t;
	uint8_t p1[40], p2[10], want[32], copy[1600];
	struct rte_mbuf *e[8];
	uint16_t port[8];
	struct out o;
	struct rec r;

	open_conn(&a);
	fill(p1, sizeof(p1), 11);
	fill(p2, sizeof(p2), 12);
	assert_true(pass1(t, s2c(&a, a.s0 + 1, a.c0 + 1, F_ACK | F_PSH, 500, NULL, 0, p1, 40), &o,
			  copy, sizeof(copy)));
	assert_true(pass1(t, s2c(&a, a.s0 + 41, a.c0 + 1, F_ACK | F_PSH, 500, NULL, 0, p2, 10), &o,
			  copy, sizeof(copy)));
	assert_true(pass1(t, s2c(&a, a.s0 + 1, a.c0 + 1, F_ACK | F_PSH, 500, NULL, 0, p1, 40), &o,
			  copy, sizeof(copy)));
	down(&a, FD_CRASH, 0, 0, 0);
	assert_int_equal(poll_stage(t, e, port), 1); /* the RST to the dead socket */
	free_all(e, 1);
	expect_rec(&a, &r, FR_CRASHED, a.c0 + 1);
	assert_int_equal(r.h.ack, a.s0 + 51);
	assert_int_equal(r.h.aux, 32);
	assert_int_equal(r.h.plen, 32);
	memcpy(want, p1 + 18, 22);
	memcpy(want + 22, p2, 10);
	assert_memory_equal(r.p, want, 32);
	expect_ring_empty(t);
}

/* A new connection while the crashed server is down: its kernel refuses
 * the SYN (nothing listens) and the refusal is dropped, so the client's
 * retransmitted SYN reaches the restarted server; once that server
 * answers a SYN, refusals pass again. Before any crash they pass. */
static void test_refusal_held_while_the_crashed_server_is_down(void **state)
{
	(void)state;
	struct conn a = {LAZY, 40031, 0x1a110000u, 0x1b220000u};
	struct conn n = {LAZY, 40032, 0x1c330000u, 0x1d440000u};
	struct conn m = {LAZY, 40033, 0x1e550000u, 0x1f660000u};
	struct conn q = {LAZY, 40034, 0x2a770000u, 0x2b880000u};
	struct tst *t = a.t;
	struct rec r;

	t->f->prot_down_until[0] = 0; /* earlier tests' crashes */
	uint64_t h0 = ctr(t, "drop_refusal_in_outage");
	/* No crash: a refusal is the server's answer and reaches the client. */
	assert_true(pass1(t, c2s(&q, q.c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), NULL, NULL, 0));
	expect_rec(&q, &r, FR_SYN, q.c0);
	assert_true(pass1(t, s2c(&q, 0, q.c0 + 1, F_RST | F_ACK, 0, NULL, 0, NULL, 0), NULL, NULL,
			  0));
	assert_int_equal(ctr(t, "drop_refusal_in_outage"), h0);
	expect_rec(&q, &r, FR_CLOSED, 0);

	open_conn(&a);
	crash_open(&a, a.c0 + 1);
	assert_true(pass1(t, c2s(&n, n.c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), NULL, NULL, 0));
	expect_rec(&n, &r, FR_SYN, n.c0);
	assert_false(pass1(t, s2c(&n, 0, n.c0 + 1, F_RST | F_ACK, 0, NULL, 0, NULL, 0), NULL, NULL,
			   0));
	assert_int_equal(ctr(t, "drop_refusal_in_outage"), h0 + 1);
	/* The client's SYN again, now the server is back: answered. */
	assert_true(pass1(t, c2s(&n, n.c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), NULL, NULL, 0));
	expect_rec(&n, &r, FR_SYN, n.c0);
	assert_false(pass1(t, s2c(&n, n.s0, n.c0 + 1, F_SYN | F_ACK, 1024, SYN_OPT, 20, NULL, 0),
			   NULL, NULL, 0)); /* held for its ISNs, as any SYN-ACK */
	expect_rec(&n, &r, FR_SYNACK, n.s0);
	/* Something listens again: the next refusal passes. */
	assert_true(pass1(t, c2s(&m, m.c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), NULL, NULL, 0));
	expect_rec(&m, &r, FR_SYN, m.c0);
	assert_true(pass1(t, s2c(&m, 0, m.c0 + 1, F_RST | F_ACK, 0, NULL, 0, NULL, 0), NULL, NULL,
			  0));
	assert_int_equal(ctr(t, "drop_refusal_in_outage"), h0 + 1);
	expect_rec(&m, &r, FR_CLOSED, 0);
	expect_ring_empty(t);
}

/* ---- 5. unprotected traffic --------------------------------------------- */

static struct rte_mbuf *raw_frame(const uint8_t *b, unsigned len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(app.pool);
	assert_non_null(m);
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)len);
	assert_non_null(d);
	memcpy(d, b, len);
	return m;
}

static void test_unprotected_traffic_untouched(void **state)
{
	(void)state;
	struct conn other = {LAZY, 40005, 0x1000u, 0x2000u};
	struct conn unseen = {LAZY, 40006, 0x3000u, 0x4000u};
	struct rte_mbuf *p[16];
	uint8_t copy[16][256];
	unsigned len[16], n = 0;
	uint8_t pay[64];
	static const uint16_t other_port = 5009;

	fill(pay, sizeof(pay), 77);
	/* ARP request. */
	uint8_t arp[60] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
			   0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 77, 0, 1,
			   0, 0, 0, 0, 0, 0, 10, 77, 0, 2};
	p[n++] = raw_frame(arp, sizeof(arp));
	/* UDP to the protected address and port number. */
	{
		struct rte_mbuf *m = tcp_frame(CIP, SIP, 40005, 5001, CMAC, SMAC, 0, 0, 0, 0, NULL,
					       0, pay, 32);
		uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
		ip->next_proto_id = IPPROTO_UDP;
		ip->total_length = rte_cpu_to_be_16(20 + 8 + 32);
		ip->hdr_checksum = 0;
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		struct rte_udp_hdr *u = (struct rte_udp_hdr *)(ip + 1);
		u->dgram_len = rte_cpu_to_be_16(8 + 32);
		u->dgram_cksum = 0;
		memcpy(u + 1, pay, 32);
		u->dgram_cksum = rte_ipv4_udptcp_cksum(ip, u);
		rte_pktmbuf_trim(m, (uint16_t)(rte_pktmbuf_data_len(m) - (14 + 20 + 8 + 32)));
		p[n++] = m;
	}
	/* TCP to the protected address, another port: SYN, SYN-ACK and data
	 * keep their options and bytes. */
	p[n++] = tcp_frame(CIP, SIP, 40005, other_port, CMAC, SMAC, 1, 0, F_SYN, 64240, SYN_OPT,
			   20, NULL, 0);
	p[n++] = tcp_frame(SIP, CIP, other_port, 40005, SMAC, CMAC, 9, 2, F_SYN | F_ACK, 65160,
			   SYN_OPT, 20, NULL, 0);
	p[n++] = tcp_frame(SIP, CIP, other_port, 40005, SMAC, CMAC, 10, 2, F_ACK, 3, NULL, 0, pay,
			   64);
	/* A protected port's connection that opened before the appliance
	 * (no SYN seen): both directions untouched, nothing logged. */
	p[n++] = c2s(&unseen, 0x3001, 0x4001, F_ACK | F_PSH, 502, NULL, 0, pay, 64);
	p[n++] = s2c(&unseen, 0x4001, 0x30000, F_ACK, 1, NULL, 0, pay, 10);
	/* IPv6 TCP to port 5001. */
	{
		uint8_t v6[14 + 40 + 20];
		memset(v6, 0, sizeof(v6));
		memcpy(v6, SMAC, 6);
		memcpy(v6 + 6, CMAC, 6);
		v6[12] = 0x86;
		v6[13] = 0xdd;
		v6[14] = 0x60;
		v6[19] = 20;
		v6[20] = IPPROTO_TCP;
		v6[21] = 64;
		v6[54] = 40005 >> 8;
		v6[55] = 40005 & 0xff;
		v6[56] = 5001 >> 8;
		v6[57] = 5001 & 0xff;
		v6[66] = 0x50;
		v6[67] = F_SYN;
		p[n++] = raw_frame(v6, sizeof(v6));
	}
	/* An IPv4 fragment carrying TCP to the protected port. */
	{
		struct rte_mbuf *m = c2s(&other, 0x1001, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0);
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(rte_pktmbuf_mtod(m, uint8_t *) + 14);
		ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG);
		ip->hdr_checksum = 0;
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		p[n++] = m;
	}
	struct rte_mbuf *orig[16];
	for (unsigned i = 0; i < n; i++) {
		orig[i] = p[i];
		len[i] = rte_pktmbuf_data_len(p[i]);
		assert_true(len[i] <= sizeof(copy[i]));
		memcpy(copy[i], rte_pktmbuf_mtod(p[i], uint8_t *), len[i]);
	}
	uint64_t before[RTE_DIM(T)][IL_MAX_STAGE_COUNTERS];
	for (unsigned s = 0; s < RTE_DIM(T); s++) {
		memcpy(before[s], T[s].st->ctr, sizeof(before[s]));
		expect_ring_empty(&T[s]);
	}
	/* Through all the stages, as a chain would. */
	uint16_t k = (uint16_t)n;
	for (unsigned s = 0; s < RTE_DIM(T); s++) {
		k = burst(&T[s], p, k);
		expect_nothing_emitted(&T[s]);
	}
	assert_int_equal(k, n);
	for (unsigned i = 0; i < n; i++) {
		assert_ptr_equal(p[i], orig[i]);
		assert_int_equal(rte_pktmbuf_data_len(p[i]), len[i]);
		assert_memory_equal(rte_pktmbuf_mtod(p[i], uint8_t *), copy[i], len[i]);
	}
	free_all(p, n);
	for (unsigned s = 0; s < RTE_DIM(T); s++) {
		expect_ring_empty(&T[s]);
		/* No counter moved, except the logger messages (none here). */
		assert_memory_equal(before[s], T[s].st->ctr, sizeof(before[s]));
	}
}

/* ---- fail-over: the server's address announced from a new MAC ------------ */

static struct rte_mbuf *garp(uint32_t ip, const uint8_t *mac, uint16_t app_port)
{
	uint8_t a[60] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x08, 0x06,
			 0, 1, 0x08, 0, 6, 4, 0, 1};
	uint32_t be = rte_cpu_to_be_32(ip);

	memcpy(a + 6, mac, 6);
	memcpy(a + 22, mac, 6);  /* sender MAC */
	memcpy(a + 28, &be, 4);  /* sender IP */
	memcpy(a + 38, &be, 4);  /* target IP: the same (gratuitous) */
	struct rte_mbuf *m = raw_frame(a, sizeof(a));
	m->port = app.ports[app_port].port_id;
	return m;
}

static void test_failover_arp_moves_server_mac(void **state)
{
	(void)state;
	static const uint8_t NEW[6] = {0x02, 0, 0, 0, 0, 0x09}, EVIL[6] = {0x02, 0, 0, 0, 0, 0x66};
	struct conn c = {LAZY, 40020, 0x51000000u, 0x52000000u};
	uint8_t copy[1600];
	struct out o;

	open_conn(&c);
	client_data(&c, c.c0 + 1, c.s0 + 1, 100);
	/* The client's side cannot move it (it could redirect every flow). */
	assert_true(pass1(LAZY, garp(SIP, EVIL, P_CLIENT), NULL, NULL, 0));
	/* Nor an address that is not protected. */
	assert_true(pass1(LAZY, garp(SIP + 1, EVIL, P_SERVER), NULL, NULL, 0));
	/* Nor an ordinary ARP request (the server's host asking for the
	 * client): only a gratuitous one claims the address. */
	struct rte_mbuf *ask = garp(SIP, EVIL, P_SERVER);
	uint32_t cip_be = rte_cpu_to_be_32(CIP);
	memcpy(rte_pktmbuf_mtod(ask, uint8_t *) + 38, &cip_be, 4);
	assert_true(pass1(LAZY, ask, NULL, NULL, 0));
	assert_int_equal(ctr(LAZY, "server_mac_moves"), 0);
	/* The backup announces the server's address from the server side: the
	 * ARP goes on (the client learns too) and the flow moves. */
	assert_true(pass1(LAZY, garp(SIP, NEW, P_SERVER), NULL, NULL, 0));
	assert_int_equal(ctr(LAZY, "server_mac_moves"), 1);
	/* Every flow of that server in this stage (earlier tests left some). */
	assert_true(ctr(LAZY, "flows_moved") >= 1);
	assert_int_equal(ctr(LAZY, "flows_moved"), ctr(LAZY, "flows_active"));
	/* Said again: nothing moves. */
	assert_true(pass1(LAZY, garp(SIP, NEW, P_SERVER), NULL, NULL, 0));
	assert_int_equal(ctr(LAZY, "server_mac_moves"), 1);
	/* The client's next segment, still addressed to the old MAC, goes to
	 * the new one; everything else about it is as before. */
	uint8_t pay[200];
	struct rec r;
	fill(pay, sizeof(pay), 9);
	assert_true(pass1(LAZY, c2s(&c, c.c0 + 101, c.s0 + 1, F_ACK | F_PSH, 502, NULL, 0, pay,
				    sizeof(pay)),
			  &o, copy, sizeof(copy)));
	assert_memory_equal(o.dmac, NEW, 6);
	assert_memory_equal(o.smac, CMAC, 6);
	assert_true(o.ip_ok && o.tcp_ok);
	assert_int_equal(o.plen, sizeof(pay));
	expect_rec(&c, &r, FR_DATA, c.c0 + 101);
	expect_ring_empty(c.t);
	/* The old host is fenced off: what it still sends for the flow is
	 * dropped and counted; the backup's segments pass. */
	assert_false(pass1(LAZY, s2c(&c, c.s0 + 1, c.c0 + 301, F_ACK, 1024, NULL, 0, NULL, 0),
			   NULL, NULL, 0));
	assert_int_equal(ctr(LAZY, "drop_fenced"), 1);
	assert_true(pass1(LAZY, tcp_frame(SIP, CIP, c.t->sport, c.cport, NEW, CMAC, c.s0 + 1,
					  c.c0 + 1, F_ACK, 1024, NULL, 0, NULL, 0),
			  NULL, NULL, 0));
	assert_int_equal(ctr(LAZY, "drop_fenced"), 1);
	/* A new connection to the server, from a client that still has the
	 * old MAC: its SYN (and the flow) go to the new host. */
	struct conn c2 = {LAZY, 40021, 0x61000000u, 0x62000000u};
	assert_true(pass1(LAZY, c2s(&c2, c2.c0, 0, F_SYN, 64240, SYN_OPT, 20, NULL, 0), &o, copy,
			  sizeof(copy)));
	assert_memory_equal(o.dmac, NEW, 6);
	expect_rec(&c2, &r, FR_SYN, c2.c0);
	assert_memory_equal(r.p + 6, NEW, 6); /* the MACs logged with the SYN */
	/* The other stages' flows are theirs: untouched. */
	assert_int_equal(ctr(EAGER, "server_mac_moves"), 0);
}

/* Every mbuf the test made or the stages emitted is back in the pool, but
 * for the acks a Lazy flow still holds. */
static void test_no_mbuf_leaked(void **state)
{
	(void)state;
	unsigned held = 0;

	for (unsigned s = 0; s < RTE_DIM(T); s++) {
		struct ftcp *f = T[s].f;
		const void *key;
		void *data;
		uint32_t it = 0;
		int32_t pos;
		while ((pos = rte_hash_iterate(f->h, &key, &data, &it)) >= 0)
			held += (f->flows[pos].held_ack != NULL) + (f->flows[pos].held_synack != NULL);
		expect_nothing_emitted(&T[s]);
	}
	assert_int_equal(rte_mempool_avail_count(app.pool) + held, pool_avail0);
}

/* ---- 8. timers ----------------------------------------------------------- */

static bool flow_exists(struct tst *t, uint16_t cport)
{
	struct conn c = {.t = t, .cport = cport};
	struct ftc_key k = key_of(&c);

	return rte_hash_lookup(t->f->h, &k) >= 0;
}

/* Closing flows are removed linger_ms after they closed, oldest first, and
 * a timer tick removes at most FTCP_TICK_BUDGET of them: the rest go on the
 * next polls, so no poll stalls however many fall due at once. */
static void test_closing_flows_expire_oldest_first_within_a_budget(void **state)
{
	struct tst *t = BULK;
	const unsigned n = 3 * FTCP_TICK_BUDGET + 5;
	const uint64_t linger = t->f->linger_tsc, act0 = ctr(t, "flows_active");
	struct rte_mbuf *e[2 * IL_BURST_CAP];
	uint16_t port[2 * IL_BURST_CAP];
	struct conn c = {.t = t, .c0 = 7000, .s0 = 9000};
	struct rec r;
	(void)state;

	/* Each connection refused by the server (RST): closing at once. */
	for (unsigned i = 0; i < n; i++) {
		c.cport = (uint16_t)(30000 + i);
		assert_true(pass1(t, c2s(&c, c.c0, 0, F_SYN, 64240, NULL, 0, NULL, 0), NULL, NULL,
				  0));
		assert_true(pass1(t, s2c(&c, 0, c.c0 + 1, F_RST | F_ACK, 0, NULL, 0, NULL, 0), NULL,
				  NULL, 0));
		expect_rec(&c, &r, FR_SYN, c.c0);
		expect_rec(&c, &r, FR_CLOSED, 0);
	}
	assert_int_equal(ctr(t, "flows_active"), act0 + n);
	/* Not due yet (linger 2 s): a tick removes nothing. */
	t->f->next_scan = 0;
	assert_int_equal(poll_stage(t, e, port), 0);
	assert_int_equal(ctr(t, "flows_active"), act0 + n);

	t->f->linger_tsc = 0;
	t->f->next_scan = 0;
	unsigned polls = 0, gone = 0;
	while (gone < n) {
		assert_int_equal(poll_stage(t, e, port), 0);
		unsigned now_gone = (unsigned)(act0 + n - ctr(t, "flows_active"));
		assert_true(now_gone > gone);
		assert_true(now_gone - gone <= FTCP_TICK_BUDGET);
		/* Oldest first: the first now_gone flows, none after them. */
		assert_false(flow_exists(t, (uint16_t)(30000 + now_gone - 1)));
		if (now_gone < n)
			assert_true(flow_exists(t, (uint16_t)(30000 + now_gone)));
		gone = now_gone;
		polls++;
	}
	assert_int_equal(polls, (n + FTCP_TICK_BUDGET - 1) / FTCP_TICK_BUDGET);
	t->f->linger_tsc = linger;
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
	char err[512], text[4096];
	int rc = 1;
	(void)argc;

	for (unsigned s = 0; s < RTE_DIM(T); s++) {
		snprintf(T[s].path, sizeof(T[s].path), "/dev/shm/ilft-stage-test-%d-%s", (int)getpid(),
			 T[s].name);
		unlink(T[s].path);
	}
	snprintf(text, sizeof(text),
		 "name: ftcpstagetest\n"
		 "ports:\n"
		 "  client: { device: net_ring0 }\n"
		 "  server: { device: net_ring1 }\n"
		 "groups:\n"
		 "  - { id: 1, address: 239.1.1.1 }\n"
		 "stages:\n"
		 "  ftl: { type: ftcp, client_port: client, server_port: server, strategy: lazy,\n"
		 "         ring: %s, ring_size: 65536, max_flows: 64,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5001 } ] }\n"
		 "  fte: { type: ftcp, client_port: client, server_port: server, strategy: eager,\n"
		 "         ring: %s, ring_size: 65536, max_flows: 64,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5002 } ] }\n"
		 "  ftc: { type: ftcp, client_port: client, server_port: server,\n"
		 "         strategy: conditional, ring: %s, ring_size: 65536, max_flows: 64,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5003 } ] }\n"
		 "  ftb: { type: ftcp, client_port: client, server_port: server, strategy: lazy,\n"
		 "         ring: %s, ring_size: 65536, max_flows: 1024,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5004 } ] }\n"
		 "pipeline:\n"
		 "  - lcore: 1\n"
		 "    chains:\n"
		 "      - { rx: client, stages: [ftl, fte, ftc, ftb], tx: server }\n"
		 "      - { rx: server, stages: [ftl, fte, ftc, ftb], tx: client }\n",
		 T[0].path, T[1].path, T[2].path, T[3].path);

	/* --no-shconf: no shared config file to lock, so runs from other
	 * build dirs at the same time do not meet. */
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "-m", "256", "--no-pci",
		       "--file-prefix", "il-ftcp-stage-test",
		       "--lcores", "0,1", "--no-telemetry", "--log-level", "lib.eal:error",
		       "--vdev", "net_ring0", "--vdev", "net_ring1", NULL};
	if (rte_eal_init((int)RTE_DIM(eal) - 1, eal) < 0) {
		fprintf(stderr, "EAL init failed\n");
		goto out;
	}
	cfg = il_cfg_load_string(text, "test", err, sizeof(err));
	if (!cfg || il_app_configure(&app, cfg, err, sizeof(err)) ||
	    il_app_start(&app, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	P_CLIENT = (uint16_t)il_app_port_index(&app, "client");
	P_SERVER = (uint16_t)il_app_port_index(&app, "server");
	for (unsigned s = 0; s < RTE_DIM(T); s++) {
		T[s].st = il_app_stage(&app, T[s].name);
		if (!T[s].st) {
			fprintf(stderr, "no stage %s\n", T[s].name);
			goto out;
		}
		T[s].f = T[s].st->ctx;
		/* Deterministic: the fabricated SYN is resent only when a test
		 * asks for it. */
		T[s].f->syn_rto_tsc = UINT64_MAX;
		T[s].ring = ftc_ring_open(T[s].path, 0, FTC_LOGGER, err, sizeof(err));
		if (!T[s].ring) {
			fprintf(stderr, "%s\n", err);
			goto out;
		}
	}
	pool_avail0 = rte_mempool_avail_count(app.pool);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_handshake_logged_synack_held_options_nopped, fresh),
		cmocka_unit_test_setup(test_client_data_logged_before_passed_full_ring_drops, fresh),
		cmocka_unit_test_setup(test_lazy_clamps_holds_and_releases, fresh),
		cmocka_unit_test_setup(test_eager_acks_every_stable_move, fresh),
		cmocka_unit_test_setup(test_conditional_acks_only_after_a_clamp, fresh),
		cmocka_unit_test_setup(test_recovery_fabricated_syn_and_shift, fresh),
		cmocka_unit_test_setup(test_mass_recovery_reack_abandon_reset, fresh),
		cmocka_unit_test_setup(test_refusal_held_while_the_crashed_server_is_down, fresh),
		cmocka_unit_test_setup(test_crash_record_carries_the_servers_last_output, fresh),
		cmocka_unit_test_setup(test_unprotected_traffic_untouched, fresh),
		cmocka_unit_test_setup(test_failover_arp_moves_server_mac, fresh),
		cmocka_unit_test_setup(test_closing_flows_expire_oldest_first_within_a_budget, fresh),
		cmocka_unit_test_setup(test_no_mbuf_leaked, fresh),
	};
	rc = cmocka_run_group_tests_name("ftcp_stage", tests, NULL, NULL);
	for (unsigned s = 0; s < RTE_DIM(T); s++)
		ftc_ring_close(T[s].ring);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
out:
	for (unsigned s = 0; s < RTE_DIM(T); s++)
		unlink(T[s].path);
	return rc;
}
