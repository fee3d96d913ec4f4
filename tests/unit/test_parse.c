/* SPDX-License-Identifier: BSD-3-Clause
 * Parser unit tests: every verdict, at its boundary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <interlink/parse.h>
#include <interlink/wire.h>

static uint8_t f[2048];

/* Ethernet/IPv4/UDP to dport with an Interlink DATA of n messages of len each. */
static uint32_t build(uint16_t dport, unsigned n, unsigned len)
{
	uint32_t plen = IL_HDR_LEN + n * (IL_MSG_HDR_LEN + len);
	memset(f, 0, sizeof(f));
	f[12] = 0x08;
	uint8_t *ip = f + 14;
	ip[0] = 0x45;
	il_put16(ip + 2, (uint16_t)(20 + 8 + plen));
	ip[8] = 16;
	ip[9] = 17;
	il_put32(ip + 16, 0xef010101u);
	uint8_t *udp = ip + 20;
	il_put16(udp, 5000);
	il_put16(udp + 2, dport);
	il_put16(udp + 4, (uint16_t)(8 + plen));
	uint8_t *h = udp + 8;
	h[0] = IL_VERSION;
	h[1] = IL_T_DATA;
	h[2] = IL_HDR_LEN;
	il_put16(h + IL_OFF_GROUP_ID, 9);
	il_put16(h + IL_OFF_MSG_COUNT, (uint16_t)n);
	uint8_t *r = h + IL_HDR_LEN;
	for (unsigned i = 0; i < n; i++, r += IL_MSG_HDR_LEN + len)
		il_put16(r, (uint16_t)len);
	return 42 + plen;
}

static enum il_verdict parse(uint32_t len, struct il_parsed *p)
{
	return il_parse_frame(f, len, IL_UDP_PORT_DEFAULT, p);
}

static void test_valid_data(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7400, 3, 10);
	assert_int_equal(parse(len, &p), IL_V_DATA);
	assert_int_equal(p.l3_off, 14);
	assert_int_equal(p.l4_off, 34);
	assert_int_equal(p.il_off, 42);
	assert_int_equal(p.msg_count, 3);
	assert_int_equal(p.group_id, 9);
	assert_int_equal(p.dst_ip, 0xef010101u);
	/* Ethernet padding after the datagram is fine. */
	assert_int_equal(parse(len + 20, &p), IL_V_DATA);
}

static void test_vlan_and_ip_options(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7400, 1, 4);
	memmove(f + 18, f + 14, len - 14);
	f[12] = 0x81;
	f[13] = 0x00;
	f[16] = 0x08;
	f[17] = 0x00;
	assert_int_equal(parse(len + 4, &p), IL_V_DATA);
	assert_int_equal(p.il_off, 46);
	/* IPv4 with 4 bytes of options. */
	len = build(7400, 1, 4);
	memmove(f + 38, f + 34, len - 34);
	f[14] = 0x46;
	il_put16(f + 16, (uint16_t)(il_get16(f + 16) + 4));
	assert_int_equal(parse(len + 4, &p), IL_V_DATA);
	assert_int_equal(p.il_off, 46);
}

static void test_not_ours(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7401, 1, 4);
	assert_int_equal(parse(len, &p), IL_V_UDP);
	assert_int_equal(p.dst_port, 7401);
	f[12] = 0x86; /* IPv6 ethertype */
	f[13] = 0xdd;
	assert_int_equal(parse(len, &p), IL_V_PASS);
	len = build(7400, 1, 4);
	f[14 + 9] = 6; /* TCP */
	assert_int_equal(parse(len, &p), IL_V_PASS);
	len = build(7400, 1, 4);
	il_put16(f + 14 + 6, 0x0010); /* non-first fragment */
	assert_int_equal(parse(len, &p), IL_V_PASS);
	len = build(7400, 1, 4);
	il_put16(f + 14 + 6, 0x2000); /* first fragment of ours */
	assert_int_equal(parse(len, &p), IL_V_DROP_FRAGMENT);
}

static void test_short_and_lengths(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7400, 1, 4);
	assert_int_equal(parse(13, &p), IL_V_DROP_SHORT);
	assert_int_equal(parse(30, &p), IL_V_DROP_SHORT);
	assert_int_equal(parse(len - 1, &p), IL_V_DROP_SHORT); /* IP total > frame */
	f[14] = 0x44; /* IHL 16 bytes */
	assert_int_equal(parse(len, &p), IL_V_DROP_BAD_IP);
	len = build(7400, 1, 4);
	il_put16(f + 38, (uint16_t)(il_get16(f + 38) + 1)); /* UDP len != IP len */
	assert_int_equal(parse(len, &p), IL_V_DROP_BAD_UDP_LEN);
	len = build(7401, 1, 4);
	il_put16(f + 38, 3); /* someone else's broken UDP: not ours to drop */
	assert_int_equal(parse(len, &p), IL_V_PASS);
}

static void test_header_checks(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7400, 2, 4);
	f[42] = 2;
	assert_int_equal(parse(len, &p), IL_V_DROP_VERSION);
	len = build(7400, 2, 4);
	f[44] = 36;
	assert_int_equal(parse(len, &p), IL_V_DROP_HDR_LEN);
	f[44] = 42;
	assert_int_equal(parse(len, &p), IL_V_DROP_HDR_LEN);
	f[44] = 252;
	assert_int_equal(parse(len, &p), IL_V_DROP_HDR_LEN);
	len = build(7400, 2, 4);
	f[43] = 0;
	assert_int_equal(parse(len, &p), IL_V_DROP_TYPE);
	f[43] = IL_T_COUNT;
	assert_int_equal(parse(len, &p), IL_V_DROP_TYPE);
	f[43] = IL_T_ACK;
	assert_int_equal(parse(len, &p), IL_V_CONTROL);
	len = build(7400, 2, 4);
	f[45] = 0x20;
	assert_int_equal(parse(len, &p), IL_V_DROP_FLAGS);
	f[45] = IL_F_KNOWN_MASK;
	assert_int_equal(parse(len, &p), IL_V_DATA);
}

static void test_packing(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7400, 3, 5);
	/* Claim one more message than there is. */
	il_put16(f + 42 + IL_OFF_MSG_COUNT, 4);
	assert_int_equal(parse(len, &p), IL_V_DROP_TRUNCATED);
	/* One fewer: bytes left over. */
	il_put16(f + 42 + IL_OFF_MSG_COUNT, 2);
	assert_int_equal(parse(len, &p), IL_V_DROP_PACKING);
	il_put16(f + 42 + IL_OFF_MSG_COUNT, 0);
	assert_int_equal(parse(len, &p), IL_V_DROP_PACKING);
	/* A length that runs past the end. */
	len = build(7400, 3, 5);
	il_put16(f + 42 + IL_HDR_LEN + 2 * 9, 6);
	assert_int_equal(parse(len, &p), IL_V_DROP_TRUNCATED);
	/* Zero-length messages are fine. */
	len = build(7400, 4, 0);
	assert_int_equal(parse(len, &p), IL_V_DATA);
	assert_int_equal(il_check_packing(f + 82, 0, 1), IL_V_DROP_TRUNCATED);
	assert_int_equal(il_check_packing(f + 82, 4, IL_MAX_MSGS_PER_FRAME + 1), IL_V_DROP_PACKING);
}

static void test_nak(void **state)
{
	(void)state;
	struct il_parsed p;
	uint32_t len = build(7400, 0, 0);
	/* Turn it into a NAK: header + range. */
	f[43] = IL_T_NAK;
	il_put16(f + 42 + IL_OFF_MSG_COUNT, 0);
	il_put64(f + 82, 5);
	il_put64(f + 90, 9);
	len += IL_RANGE_LEN;
	il_put16(f + 16, (uint16_t)(len - 14));
	il_put16(f + 38, (uint16_t)(len - 34));
	assert_int_equal(parse(len, &p), IL_V_NAK);
	il_put64(f + 90, 4);
	assert_int_equal(parse(len, &p), IL_V_DROP_BAD_NAK);
	il_put64(f + 82, 0);
	assert_int_equal(parse(len, &p), IL_V_DROP_BAD_NAK);
	il_put64(f + 82, 1);
	il_put64(f + 90, IL_NAK_MAX_SPAN);
	assert_int_equal(parse(len, &p), IL_V_NAK);
	il_put64(f + 90, IL_NAK_MAX_SPAN + 1);
	assert_int_equal(parse(len, &p), IL_V_DROP_BAD_NAK);
	/* A body shorter than a range. */
	il_put16(f + 16, (uint16_t)(len - 14 - 1));
	il_put16(f + 38, (uint16_t)(len - 34 - 1));
	assert_int_equal(parse(len - 1, &p), IL_V_DROP_BAD_NAK);
}

/* ACK bodies: the short form, the long form (WAN groups) told by length. */
static void test_ack_forms(void **state)
{
	(void)state;
	uint8_t b[32];
	struct il_ack_body a;

	memset(b, 0xee, sizeof(b));
	il_put32(b, 7);
	il_put32(b + 4, 300);
	/* Too short for either form. */
	assert_int_equal(il_parse_ack(b, IL_ACK_LEN - 1, &a), -1);
	assert_int_equal(il_parse_ack(b, 0, &a), -1);
	/* The short form, and anything 8..23 bytes long is read as it. */
	for (uint32_t len = IL_ACK_LEN; len < IL_ACK_TFRC_LEN; len++) {
		memset(&a, 0x55, sizeof(a));
		assert_int_equal(il_parse_ack(b, len, &a), 0);
		assert_int_equal(a.view_id, 7);
		assert_int_equal(a.buffer_free, 300);
		assert_false(a.tfrc);
		assert_int_equal(a.echo_seq, 0);
		assert_int_equal(a.delta_us, 0);
		assert_int_equal(a.loss_ppm, 0);
	}
	/* The long form. */
	il_put64(b + 8, 0x0102030405060708ull);
	il_put32(b + 16, 1234567);
	il_put32(b + 20, 25000);
	assert_int_equal(il_parse_ack(b, IL_ACK_TFRC_LEN, &a), 0);
	assert_true(a.tfrc);
	assert_int_equal(a.view_id, 7);
	assert_int_equal(a.buffer_free, 300);
	assert_int_equal(a.echo_seq, 0x0102030405060708ull);
	assert_int_equal(a.delta_us, 1234567);
	assert_int_equal(a.loss_ppm, 25000);
	/* Longer still: the long form, trailing bytes ignored. */
	assert_int_equal(il_parse_ack(b, sizeof(b), &a), 0);
	assert_true(a.tfrc);
	assert_int_equal(a.loss_ppm, 25000);
	/* p is a probability: more than 10^6 ppm is clamped. */
	il_put32(b + 20, 0xffffffffu);
	assert_int_equal(il_parse_ack(b, IL_ACK_TFRC_LEN, &a), 0);
	assert_int_equal(a.loss_ppm, IL_ACK_PPM_MAX);
	/* The long form's first 8 bytes are the short form's. */
	assert_int_equal(offsetof(struct il_ack_tfrc, view_id), offsetof(struct il_ack, view_id));
	assert_int_equal(offsetof(struct il_ack_tfrc, buffer_free),
			 offsetof(struct il_ack, buffer_free));
}

static void test_verdict_names(void **state)
{
	(void)state;
	for (unsigned v = 0; v < IL_V_COUNT; v++) {
		assert_non_null(il_verdict_names[v]);
		/* Every drop verdict is a counter whose name says so. */
		assert_int_equal(v >= IL_V_DROP_FIRST, strncmp(il_verdict_names[v], "drop_", 5) == 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_data),   cmocka_unit_test(test_vlan_and_ip_options),
		cmocka_unit_test(test_not_ours),     cmocka_unit_test(test_short_and_lengths),
		cmocka_unit_test(test_header_checks), cmocka_unit_test(test_packing),
		cmocka_unit_test(test_nak),          cmocka_unit_test(test_verdict_names),
		cmocka_unit_test(test_ack_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
