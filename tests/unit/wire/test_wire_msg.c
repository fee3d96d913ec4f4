/* SPDX-License-Identifier: BSD-3-Clause
 * The wire library's builders and readers: every message built into a
 * frame, parsed and read back; the bytes docs/wire-format.md gives; and
 * Ethernet/IPv4/UDP/TCP envelopes against frames Scapy built (an
 * implementation of its own), checksums included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <interlink/frame.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

static uint8_t f[2048];

static void hex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

/* The appliance's own frames to a group, as the UNAVAIL example below. */
static struct il_path group_path(void)
{
	struct il_path p = { .src_mac = { 0x02, 0, 0, 0, 0, 0x01 },
			     .src_ip = 0xc0000201u, /* 192.0.2.1 */
			     .src_port = 7400, .dst_port = 7401, .ttl = 16 };

	il_path_mcast(&p, 0xef010101u); /* 239.1.1.1 */
	return p;
}

/* Sum of a region as 16-bit words, folded: 0xffff when it checks. */
static uint16_t ref_sum(const uint8_t *b, size_t len, uint32_t s)
{
	for (size_t i = 0; i < len; i += 2)
		s += (uint32_t)(b[i] << 8 | (i + 1 < len ? b[i + 1] : 0));
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* docs/wire-format.md, "Examples": the DATA frame as a sender sends it. */
static void test_doc_example(void **state)
{
	static const char *doc =
		"0101280000010002" "0000000300000000" "0000000000000007" "0000000000000000"
		"0000000000000000" "000200006869" "00050000" "7468657265";
	uint8_t want[55], *r;

	(void)state;
	hex(doc, want, sizeof(want));
	memset(f, 0xaa, sizeof(f));
	r = il_hdr_put(f, &(struct il_hdr_fields){ .type = IL_T_DATA, .group_id = 1, .msg_count = 2,
						   .sender_id = 3, .sender_seq = 7 });
	r = il_rec_put(r, 2);
	memcpy(r, "hi", 2);
	r = il_rec_put(r + 2, 5);
	memcpy(r, "there", 5);
	assert_int_equal(r + 5 - f, sizeof(want));
	assert_memory_equal(f, want, sizeof(want));
	/* and it is a valid payload */
	struct il_parsed p;
	assert_int_equal(il_parse_payload(f, sizeof(want), &p), IL_V_DATA);
	assert_int_equal(p.msg_count, 2);
}

/* An UNAVAIL frame against Scapy's bytes: Ethernet to the group's MAC,
 * IPv4 (TTL 16, id 0, no DF) with its checksum, UDP without one. */
static void test_envelope_known_bytes(void **state)
{
	static const char *scapy =
		"01005e010101020000000001080045000054000000001011f895c0000201ef0101011ce81ce9"
		"0040ea04010328000007000000000003000000050000000000000000000000000000006400"
		"00000000000000000000000000000a0000000000000014";
	struct il_path p = group_path();
	uint8_t want[98];

	(void)state;
	hex(scapy, want, sizeof(want));
	memset(f, 0xaa, sizeof(f));
	uint8_t *b = il_frame_put(f, &p, 0,
				  &(struct il_hdr_fields){ .type = IL_T_UNAVAIL, .group_id = 7,
							   .sender_id = 3, .epoch = 5,
							   .global_seq = 100 },
				  IL_RANGE_LEN);
	assert_ptr_equal(b, f + IL_UDP_HDRS_LEN + IL_HDR_LEN);
	il_range_put(b, 10, 20);
	/* Scapy filled the UDP checksum; ours is added on request. */
	il_udp_csum_set(f + IL_ETH_HLEN);
	assert_memory_equal(f, want, sizeof(want));
	assert_int_equal(ref_sum(f + 14, 20, 0), 0xffff);
	assert_true(il_ipv4_l4_csum_ok(f + IL_ETH_HLEN));
	f[60] ^= 1;
	assert_false(il_ipv4_l4_csum_ok(f + IL_ETH_HLEN));
}

/* A fabricated SYN (FT-TCP) against Scapy's bytes: DF, TTL 64, options. */
static void test_tcp_known_bytes(void **state)
{
	static const char *scapy =
		"020000000002020000000003080045000030000040004006"
		"26c60a0000010a0000029c400050000003e8000000007002ffffcf9d0000020405b401030307";
	static const uint8_t opt[8] = { 2, 4, 0x05, 0xb4, 1, 3, 3, 7 };
	struct il_path p = { .dst_mac = { 2, 0, 0, 0, 0, 2 }, .src_mac = { 2, 0, 0, 0, 0, 3 },
			     .src_ip = 0x0a000001u, .dst_ip = 0x0a000002u, .src_port = 40000,
			     .dst_port = 80, .ttl = 64, .df = true };
	struct il_tcp_seg s = { .seq = 1000, .flags = IL_TCP_F_SYN, .win = 65535, .opt = opt,
				.optlen = 8 };
	uint8_t want[62];

	(void)state;
	hex(scapy, want, sizeof(want));
	memset(f, 0xaa, sizeof(f));
	assert_int_equal(il_tcp_frame_len(&s), sizeof(want));
	assert_int_equal(il_tcp_frame_put(f, &p, 0, &s), sizeof(want));
	assert_memory_equal(f, want, sizeof(want));
	assert_true(il_ipv4_l4_csum_ok(f + IL_ETH_HLEN));
}

/* Checksums at their edges: odd lengths, and the computed zero that UDP
 * sends as 0xffff and TCP as 0. */
static void test_checksum_edges(void **state)
{
	struct il_path p = group_path();

	(void)state;
	for (uint16_t plen = 0; plen < 9; plen++) {
		memset(f, 0, sizeof(f));
		uint8_t *b = il_udp_frame_put(f, &p, 77, plen);
		for (uint16_t i = 0; i < plen; i++)
			b[i] = (uint8_t)(0x31 * (i + 1));
		il_udp_csum_set(f + IL_ETH_HLEN);
		assert_true(il_ipv4_l4_csum_ok(f + IL_ETH_HLEN));
		assert_int_equal(il_get16(f + 18), 77); /* the IPv4 id */
	}
	/* Choose the last payload word so that the sum is all ones. */
	memset(f, 0, sizeof(f));
	uint8_t *b = il_udp_frame_put(f, &p, 0, 4);
	b[0] = 0x12;
	b[1] = 0x34;
	il_udp_csum_set(f + IL_ETH_HLEN);
	memcpy(b + 2, f + 40, 2); /* the checksum of a zero word there */
	il_udp_csum_set(f + IL_ETH_HLEN);
	assert_int_equal(il_get16(f + 40), 0xffff);
	assert_true(il_ipv4_l4_csum_ok(f + IL_ETH_HLEN));
}

/* A template built for no payload, then given one, is the frame built for
 * that payload directly (the generator's per-frame path). */
static void test_template_set_len(void **state)
{
	struct il_path p = group_path();
	uint8_t direct[IL_UDP_HDRS_LEN];

	(void)state;
	p.df = true;
	il_udp_frame_put(direct, &p, 0, 300);
	memset(f, 0, sizeof(f));
	il_udp_frame_put(f, &p, 0, 0);
	il_udp_frame_set_len(f, 300);
	assert_memory_equal(f, direct, sizeof(direct));
	il_udp_frame_set_len(f, 300); /* idempotent: the checksum field is redone */
	assert_memory_equal(f, direct, sizeof(direct));
	assert_int_equal(f[20], 0x40); /* DF */
}

/* A whole frame with header h and room for a body of blen bytes, to the
 * Interlink port; returns the body. */
static uint8_t *frame_with(const struct il_hdr_fields *h, uint16_t blen)
{
	struct il_path p = group_path();

	memset(f, 0xcc, sizeof(f));
	p.dst_port = IL_UDP_PORT_DEFAULT;
	return il_frame_put(f, &p, 0, h, blen);
}

/* Parsed as a frame and as a payload, it is what was built. */
static void check_parsed(const struct il_hdr_fields *h, uint16_t blen, enum il_verdict want)
{
	struct il_hdr_fields got;
	struct il_parsed p, q;
	uint32_t len = IL_UDP_HDRS_LEN + IL_HDR_LEN + blen;

	il_udp_csum_set(f + IL_ETH_HLEN);
	assert_int_equal(il_parse_frame(f, len, IL_UDP_PORT_DEFAULT, &p), want);
	assert_int_equal(p.il_off, IL_UDP_HDRS_LEN);
	assert_int_equal(p.payload_len, IL_HDR_LEN + blen);
	assert_int_equal(p.type, h->type);
	assert_int_equal(p.hdr_len, IL_HDR_LEN);
	assert_int_equal(p.group_id, h->group_id);
	assert_int_equal(p.msg_count, h->msg_count);
	assert_int_equal(p.dst_ip, 0xef010101u);
	assert_int_equal(il_parse_payload(f + p.il_off, p.payload_len, &q), want);
	assert_int_equal(q.type, p.type);
	assert_int_equal(q.group_id, p.group_id);
	assert_int_equal(q.payload_len, p.payload_len);
	memset(&got, 0x77, sizeof(got));
	il_hdr_get(f + p.il_off, &got);
	assert_int_equal(got.type, h->type);
	assert_int_equal(got.flags, h->flags);
	assert_int_equal(got.group_id, h->group_id);
	assert_int_equal(got.msg_count, h->msg_count);
	assert_int_equal(got.sender_id, h->sender_id);
	assert_int_equal(got.epoch, h->epoch);
	assert_int_equal(got.sender_seq, h->sender_seq);
	assert_int_equal(got.global_seq, h->global_seq);
	assert_int_equal(got.stable_seq, h->stable_seq);
	assert_int_equal(ref_sum(f + 14, 20, 0), 0xffff);
	assert_true(il_ipv4_l4_csum_ok(f + IL_ETH_HLEN));
}

static void test_data_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_DATA, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .group_id = 3, .msg_count = 3, .sender_id = 0x01020304,
				   .epoch = 0x0a0b0c0d, .sender_seq = 0x1122334455667788ull,
				   .global_seq = 0x99aabbccddeeff01ull, .stable_seq = 42 };
	uint16_t blen = 3 * IL_MSG_HDR_LEN + 1 + 2 + 3;

	(void)state;
	uint8_t *r = frame_with(&h, blen);
	for (uint16_t i = 1; i <= 3; i++) {
		r = il_rec_put(r, i);
		memset(r, 'a' + i, i);
		r += i;
	}
	check_parsed(&h, blen, IL_V_DATA);
	/* the template's per-frame fields */
	il_hdr_set_data(f + IL_UDP_HDRS_LEN, 1, 99);
	assert_int_equal(il_get16(f + IL_UDP_HDRS_LEN + IL_OFF_MSG_COUNT), 1);
	assert_int_equal(il_get64(f + IL_UDP_HDRS_LEN + IL_OFF_SENDER_SEQ), 99);
}

/* The raw-mode header from a template: the same 44 bytes as il_hdr_put
 * and il_rec_put, and the sum it returns is the sum of those bytes. */
static void test_hdr1_from_template(void **state)
{
	(void)state;
	static const uint64_t seqs[][3] = {
		{1, 1, 0}, {0xfedcba9876543210ull, 0x0123456789abcdefull, 0xffffffffffffffffull},
		{77, 1ull << 40, 12345},
	};
	for (unsigned i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		struct il_hdr_fields f = { .type = IL_T_DATA, .flags = IL_F_STAMPED | IL_F_RAW,
					   .group_id = (uint16_t)(100 + i), .msg_count = 1,
					   .sender_id = 0xc6120001u + i, .epoch = 0x5a5a0000u + i,
					   .sender_seq = seqs[i][0], .global_seq = seqs[i][1],
					   .stable_seq = seqs[i][2] };
		uint8_t want[IL_HDR_LEN + IL_MSG_HDR_LEN], got[sizeof(want)];
		struct il_hdr1_tmpl t;
		uint32_t src;

		il_rec_put(il_hdr_put(want, &f), (uint16_t)(18 + i));
		il_hdr1_tmpl_init(&t, &(struct il_hdr_fields){ .type = f.type, .flags = f.flags,
				  .group_id = f.group_id, .msg_count = 1, .epoch = f.epoch });
		il_put32(&src, f.sender_id); /* as an IPv4 source address sits in memory */
		uint64_t sum = il_hdr1_put(got, &t, src, f.sender_seq, f.global_seq, f.stable_seq,
					   (uint16_t)(18 + i));
		assert_memory_equal(got, want, sizeof(want));
		uint32_t plain = il_csum_sum(want, sizeof(want), 0);
		sum = (sum & 0xffffffffu) + (sum >> 32);
		assert_int_equal(il_csum_fold((uint32_t)((sum & 0xffffffffu) + (sum >> 32))),
				 il_csum_fold(plain));
	}
}

static void test_range_round_trip(void **state)
{
	struct il_range_body r;

	(void)state;
	for (uint8_t t = IL_T_NAK; t <= IL_T_UNAVAIL; t++) {
		struct il_hdr_fields h = { .type = t, .group_id = 9, .sender_id = 0x10000,
					   .epoch = 7, .global_seq = t == IL_T_UNAVAIL ? 5 : 0 };
		il_range_put(frame_with(&h, IL_RANGE_LEN), 100, 163);
		check_parsed(&h, IL_RANGE_LEN, t == IL_T_NAK ? IL_V_NAK : IL_V_CONTROL);
		assert_int_equal(il_range_get(f + 82, IL_RANGE_LEN, &r), 0);
		assert_int_equal(r.first_seq, 100);
		assert_int_equal(r.last_seq, 163);
		assert_int_equal(il_range_get(f + 82, IL_RANGE_LEN - 1, &r), -1);
	}
}

static void test_ack_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_ACK, .group_id = 1, .sender_id = 0x10001,
				   .epoch = 8, .global_seq = 1234 };
	struct il_ack_body a;

	(void)state;
	uint8_t *e = il_ack_put(frame_with(&h, IL_ACK_LEN), 4, 300);
	assert_ptr_equal(e, f + 82 + IL_ACK_LEN);
	check_parsed(&h, IL_ACK_LEN, IL_V_CONTROL);
	assert_int_equal(il_ack_get(f + 82, IL_ACK_LEN, &a), 0);
	assert_false(a.tfrc);
	assert_int_equal(a.view_id, 4);
	assert_int_equal(a.buffer_free, 300);

	e = il_ack_tfrc_put(frame_with(&h, IL_ACK_TFRC_LEN), 4, 0xffffffffu,
			    0x0102030405060708ull, 1500, 25000);
	assert_ptr_equal(e, f + 82 + IL_ACK_TFRC_LEN);
	check_parsed(&h, IL_ACK_TFRC_LEN, IL_V_CONTROL);
	assert_int_equal(il_ack_get(f + 82, IL_ACK_TFRC_LEN, &a), 0);
	assert_true(a.tfrc);
	assert_int_equal(a.buffer_free, 0xffffffffu);
	assert_int_equal(a.echo_seq, 0x0102030405060708ull);
	assert_int_equal(a.delta_us, 1500);
	assert_int_equal(a.loss_ppm, 25000);
	/* the long form begins with the short one */
	assert_int_equal(il_ack_get(f + 82, IL_ACK_LEN, &a), 0);
	assert_false(a.tfrc);
	assert_int_equal(a.view_id, 4);
}

/* ACK bodies read by length: the short form, the long form (WAN groups). */
static void test_ack_forms(void **state)
{
	uint8_t b[32];
	struct il_ack_body a;

	(void)state;
	memset(b, 0xee, sizeof(b));
	il_put32(b, 7);
	il_put32(b + 4, 300);
	/* Too short for either form. */
	assert_int_equal(il_ack_get(b, IL_ACK_LEN - 1, &a), -1);
	assert_int_equal(il_ack_get(b, 0, &a), -1);
	/* The short form, and anything 8..23 bytes long is read as it. */
	for (uint32_t len = IL_ACK_LEN; len < IL_ACK_TFRC_LEN; len++) {
		memset(&a, 0x55, sizeof(a));
		assert_int_equal(il_ack_get(b, len, &a), 0);
		assert_int_equal(a.view_id, 7);
		assert_int_equal(a.buffer_free, 300);
		assert_false(a.tfrc);
		assert_int_equal(a.echo_seq, 0);
		assert_int_equal(a.delta_us, 0);
		assert_int_equal(a.loss_ppm, 0);
	}
	/* Longer than the long form: the long form, trailing bytes ignored. */
	il_put32(b + 20, 25000);
	assert_int_equal(il_ack_get(b, sizeof(b), &a), 0);
	assert_true(a.tfrc);
	assert_int_equal(a.loss_ppm, 25000);
	/* p is a probability: more than 10^6 ppm is clamped. */
	il_put32(b + 20, 0xffffffffu);
	assert_int_equal(il_ack_get(b, IL_ACK_TFRC_LEN, &a), 0);
	assert_int_equal(a.loss_ppm, IL_ACK_PPM_MAX);
	/* The long form's first 8 bytes are the short form's. */
	assert_int_equal(offsetof(struct il_ack_tfrc, view_id), offsetof(struct il_ack, view_id));
	assert_int_equal(offsetof(struct il_ack_tfrc, buffer_free),
			 offsetof(struct il_ack, buffer_free));
}

static void test_stable_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_STABLE, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .group_id = 2, .epoch = 3, .global_seq = 50, .stable_seq = 40 };
	uint32_t v = 0;

	(void)state;
	il_stable_put(frame_with(&h, IL_STABLE_LEN), 6);
	check_parsed(&h, IL_STABLE_LEN, IL_V_CONTROL);
	assert_int_equal(il_stable_get(f + 82, IL_STABLE_LEN, &v), 0);
	assert_int_equal(v, 6);
	assert_int_equal(il_get32(f + 82 + 4), 0); /* reserved */
	assert_int_equal(il_stable_get(f + 82, IL_STABLE_LEN - 1, &v), -1);
}

static void test_member_round_trip(void **state)
{
	struct il_member_body m;

	(void)state;
	for (uint8_t t = IL_T_JOIN; t <= IL_T_HEARTBEAT; t++) {
		struct il_hdr_fields h = { .type = t, .group_id = 4, .sender_id = 77, .epoch = 1 };
		il_member_put(frame_with(&h, IL_MEMBER_MSG_LEN),
			      IL_ROLE_SENDER | IL_ROLE_RECEIVER, 0xfeedu + t);
		check_parsed(&h, IL_MEMBER_MSG_LEN, IL_V_CONTROL);
		assert_int_equal(il_member_get(f + 82, IL_MEMBER_MSG_LEN, &m), 0);
		assert_int_equal(m.roles, IL_ROLE_SENDER | IL_ROLE_RECEIVER);
		assert_int_equal(m.incarnation, 0xfeedu + t);
		assert_int_equal(il_member_get(f + 82, IL_MEMBER_MSG_LEN - 1, &m), -1);
	}
}

static void test_credit_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_CREDIT, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .group_id = 5, .sender_id = 2, .epoch = 9, .sender_seq = 17,
				   .global_seq = 100, .stable_seq = 90 };
	struct il_credit_body c;

	(void)state;
	il_credit_put(frame_with(&h, IL_CREDIT_LEN), 0x123456789aull, 256,
		      4000);
	check_parsed(&h, IL_CREDIT_LEN, IL_V_CONTROL);
	assert_int_equal(il_credit_get(f + 82, IL_CREDIT_LEN, &c), 0);
	assert_int_equal(c.limit_seq, 0x123456789aull);
	assert_int_equal(c.window, 256);
	assert_int_equal(c.rate_kbps, 4000);
	assert_int_equal(il_credit_get(f + 82, IL_CREDIT_LEN - 1, &c), -1);
}

static void test_view_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_VIEW, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				   .group_id = 6, .epoch = 2, .global_seq = 77 };
	uint16_t blen = (uint16_t)il_view_len(3, 2);
	struct il_view_body v = { 0 };

	(void)state;
	assert_int_equal(blen, 8 + 3 * 8 + 2 * 16);
	uint8_t *b = il_view_put(frame_with(&h, blen), 11, 3, 2);
	for (uint32_t i = 0; i < 3; i++)
		b = il_view_member_put(b, 100 + i, i == 0 ? IL_ROLE_SENDER : IL_ROLE_RECEIVER);
	b = il_view_sender_put(b, 100, 3, 55);
	b = il_view_sender_put(b, 200, 0, 1);
	assert_ptr_equal(b, f + 82 + blen);
	check_parsed(&h, blen, IL_V_CONTROL);
	assert_int_equal(il_view_get(f + 82, blen, &v), 0);
	assert_int_equal(v.view_id, 11);
	assert_int_equal(v.n_members, 3);
	assert_int_equal(v.n_senders, 2);
	assert_int_equal(il_view_member_id(&v, 2), 102);
	assert_int_equal(il_view_member_roles(&v, 0), IL_ROLE_SENDER);
	assert_int_equal(il_view_member_roles(&v, 1), IL_ROLE_RECEIVER);
	assert_true(il_view_has(&v, 101));
	assert_false(il_view_has(&v, 200));
	assert_int_equal(il_view_sender_id(&v, 1), 200);
	assert_int_equal(il_view_sender_next(&v, 0), 55);
	assert_int_equal(il_view_sender_inc(&v, 0), 3);
	assert_int_equal(il_view_sender_inc(&v, 1), 0);
	/* the lists must fit */
	assert_int_equal(il_view_get(f + 82, blen - 1, &v), -1);
	assert_int_equal(il_view_get(f + 82, IL_VIEW_LEN - 1, &v), -1);
}

static void test_fec_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_FEC_REPAIR, .group_id = 12, .sender_id = 3,
				   .epoch = 4, .sender_seq = 5 };
	struct il_fec_fields in = { .code = IL_FEC_CODE_XOR, .layer = 2, .rate_r = 8,
				    .rate_c = 3, .count = 2, .interleave = 19, .xor_len = 6,
				    .len_code = 0xabcd, .x_first = 0x0102030405ull };
	struct il_fec_fields out;
	uint16_t blen = (uint16_t)(IL_FEC_REPAIR_HDR_LEN(2) - IL_HDR_LEN + 6);

	(void)state;
	uint8_t *b = frame_with(&h, blen);
	uint8_t *ids = il_fec_body_put(b, &in);
	assert_ptr_equal(ids, b + IL_FEC_BODY_LEN);
	memset(ids, 0x5a, 2 * IL_FEC_ID_LEN + 6);
	check_parsed(&h, blen, IL_V_CONTROL);
	assert_int_equal(b[IL_FEC_OFF_ID_LEN], IL_FEC_ID_LEN);
	assert_int_equal(il_get32(b + IL_FEC_OFF_RESERVED), 0);
	assert_int_equal(il_fec_body_get(b, blen, &out), 0);
	assert_int_equal(out.code, in.code);
	assert_int_equal(out.layer, in.layer);
	assert_int_equal(out.rate_r, in.rate_r);
	assert_int_equal(out.rate_c, in.rate_c);
	assert_int_equal(out.count, in.count);
	assert_int_equal(out.id_len, IL_FEC_ID_LEN);
	assert_int_equal(out.interleave, in.interleave);
	assert_int_equal(out.xor_len, in.xor_len);
	assert_int_equal(out.len_code, in.len_code);
	assert_int_equal(out.x_first, in.x_first);
	assert_int_equal(il_fec_body_get(b, IL_FEC_BODY_LEN - 1, &out), -1);
}

static void test_lec_round_trip(void **state)
{
	struct il_hdr_fields h = { .type = IL_T_LEC_REPAIR, .group_id = 7, .sender_id = 0x10003,
				   .sender_seq = 9 };
	struct il_lec_fields in = { .count = 2, .rate_r = 8, .origin = IL_LEC_ORIGIN_APPLIANCE,
				    .len = 5, .len_xor = 0x0102 };
	struct il_lec_body_view v;
	uint16_t blen = (uint16_t)(IL_LEC_REPAIR_LEN(2, 5) - IL_HDR_LEN);
	uint16_t g, res;
	uint32_t e;
	uint64_t s;

	(void)state;
	uint8_t *b = frame_with(&h, blen);
	uint8_t *p = il_lec_body_put(b, &in);
	assert_ptr_equal(p, b + IL_LEC_BODY_LEN);
	p = il_lec_id_put(p, 7, 0x01020304u, 0x1122334455667788ull);
	p = il_lec_id_put(p, 9, 5, 1);
	memcpy(p, "abcde", 5);
	check_parsed(&h, blen, IL_V_CONTROL);
	/* the id's bytes as docs/wire-format.md lays them out */
	static const uint8_t id0[16] = { 0, 7, 0, 0, 1, 2, 3, 4,
					 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88 };
	assert_memory_equal(b + IL_LEC_BODY_LEN, id0, 16);
	assert_int_equal(il_lec_body_get(b, blen, &v), 0);
	assert_int_equal(v.f.count, 2);
	assert_int_equal(v.f.id_len, IL_LEC_ID_LEN);
	assert_int_equal(v.f.rate_r, 8);
	assert_int_equal(v.f.origin, IL_LEC_ORIGIN_APPLIANCE);
	assert_int_equal(v.f.len, 5);
	assert_int_equal(v.f.len_xor, 0x0102);
	assert_memory_equal(v.payload, "abcde", 5);
	il_lec_id_at(&v, 1, &g, &res, &e, &s);
	assert_int_equal(g, 9);
	assert_int_equal(res, 0);
	assert_int_equal(e, 5);
	assert_int_equal(s, 1);
	/* exact length only; the counts and id length in range */
	assert_int_equal(il_lec_body_get(b, blen - 1, &v), -1);
	assert_int_equal(il_lec_body_get(b, blen + 1, &v), -1);
	assert_int_equal(il_lec_body_get(b, IL_LEC_BODY_LEN - 1, &v), -1);
	b[IL_LEC_OFF_ID_LEN] = 12;
	assert_int_equal(il_lec_body_get(b, blen, &v), -1);
	b[IL_LEC_OFF_ID_LEN] = IL_LEC_ID_LEN;
	b[IL_LEC_OFF_COUNT] = 0;
	assert_int_equal(il_lec_body_get(b, blen - 2 * IL_LEC_ID_LEN, &v), -1);
	b[IL_LEC_OFF_COUNT] = IL_LEC_WIRE_MAX_IDS + 1;
	assert_int_equal(il_lec_body_get(b, IL_LEC_BODY_LEN + (IL_LEC_WIRE_MAX_IDS + 1) *
						    IL_LEC_ID_LEN + 5, &v), -1);
	b[IL_LEC_OFF_COUNT] = 2;
	il_put16(b + IL_LEC_OFF_LEN, 0);
	assert_int_equal(il_lec_body_get(b, blen - 5, &v), -1);
	assert_int_equal(IL_LEC_MAX_FRAME(1472u, 8u), 1472 - 40 - 8 - 128);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doc_example),
		cmocka_unit_test(test_envelope_known_bytes),
		cmocka_unit_test(test_tcp_known_bytes),
		cmocka_unit_test(test_checksum_edges),
		cmocka_unit_test(test_template_set_len),
		cmocka_unit_test(test_data_round_trip),
		cmocka_unit_test(test_hdr1_from_template),
		cmocka_unit_test(test_range_round_trip),
		cmocka_unit_test(test_ack_round_trip),
		cmocka_unit_test(test_ack_forms),
		cmocka_unit_test(test_stable_round_trip),
		cmocka_unit_test(test_member_round_trip),
		cmocka_unit_test(test_credit_round_trip),
		cmocka_unit_test(test_view_round_trip),
		cmocka_unit_test(test_fec_round_trip),
		cmocka_unit_test(test_lec_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
