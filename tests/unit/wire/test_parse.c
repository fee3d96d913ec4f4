/* SPDX-License-Identifier: BSD-3-Clause
 * Parser unit tests: every verdict, at its boundary, for a frame and for
 * the Interlink layer on a UDP payload alone.
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

/* The fast path (untagged frames) and the general one (the same frame
 * behind an 802.1Q tag, which only the general path takes) must agree on
 * every frame: each header byte of a native DATA frame and of a UDP frame
 * to another port set to a few values in turn, at a few lengths. */
static void test_fast_path_agrees_with_general(void **state)
{
	(void)state;
	static const uint8_t vals[] = {0x00, 0x01, 0x07, 0x08, 0x11, 0x1c, 0x1d, 0x20,
				       0x28, 0x45, 0x46, 0x80, 0xff};
	static uint8_t t[2048 + 4];
	unsigned checked = 0;

	for (unsigned kind = 0; kind < 2; kind++)
		for (unsigned off = 12; off < 42 + 8; off++)
			for (unsigned v = 0; v <= sizeof(vals); v++)
				for (int dl = -2; dl <= 2; dl++) {
					uint32_t len = build(kind ? 9000 : 7400, 1, 18);
					if (v < sizeof(vals))
						f[off] = vals[v];
					len = (uint32_t)((int)len + dl);
					struct il_parsed a, b;
					enum il_verdict va = parse(len, &a);
					memcpy(t, f, 12);
					t[12] = 0x81;
					t[13] = 0x00;
					t[14] = 0x00;
					t[15] = 0x05;
					memcpy(t + 16, f + 12, len - 12);
					enum il_verdict vb = il_parse_frame(t, len + 4,
									    IL_UDP_PORT_DEFAULT, &b);
					assert_int_equal(va, vb);
					checked++;
					if (va != IL_V_UDP && va != IL_V_DATA)
						continue;
					assert_int_equal(a.l4_off + 4, b.l4_off);
					assert_int_equal(a.il_off + 4, b.il_off);
					assert_int_equal(a.udp_len, b.udp_len);
					assert_int_equal(a.payload_len, b.payload_len);
					assert_int_equal(a.dst_ip, b.dst_ip);
					assert_int_equal(a.dst_port, b.dst_port);
					if (va == IL_V_DATA) {
						assert_int_equal(a.group_id, b.group_id);
						assert_int_equal(a.msg_count, b.msg_count);
						assert_int_equal(a.hdr_len, b.hdr_len);
					}
				}
	assert_true(checked > 1000);
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
	f[45] = 0x40;
	assert_int_equal(parse(len, &p), IL_V_DROP_FLAGS);
	f[45] = IL_F_APPLIANCE_OWNED;
	assert_int_equal(parse(len, &p), IL_V_DATA);
	/* AUTH: never on DATA; on a control message only with its option. */
	f[45] = IL_F_AUTH;
	assert_int_equal(parse(len, &p), IL_V_DROP_FLAGS);
	f[43] = IL_T_ACK;
	assert_int_equal(parse(len, &p), IL_V_DROP_HDR_LEN);
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

/* The Interlink layer on a UDP payload alone (kernel sockets) gives the
 * verdict the frame parser gives that payload in a frame, at every byte
 * and length: frames with one byte of the header or body changed at a
 * time, then every shorter length. */
static void test_payload_layer(void **state)
{
	static const uint8_t vals[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x0c, 0x10,
					0x24, 0x28, 0x2c, 0x80, 0xfe, 0xff };
	uint8_t pl[256];
	(void)state;

	for (unsigned kind = 0; kind < 2; kind++) {
		uint32_t len = build(7400, kind ? 1 : 3, kind ? 0 : 5);
		uint32_t plen = len - 42;

		if (kind) { /* a NAK */
			f[43] = IL_T_NAK;
			il_put16(f + 42 + IL_OFF_MSG_COUNT, 0);
			il_put64(f + 82, 5);
			il_put64(f + 90, 9);
			len = 42 + IL_HDR_LEN + IL_RANGE_LEN;
			plen = len - 42;
			il_put16(f + 16, (uint16_t)(len - 14));
			il_put16(f + 38, (uint16_t)(len - 34));
		}
		memcpy(pl, f + 42, plen);
		for (uint32_t i = 0; i < plen; i++)
			for (unsigned k = 0; k < sizeof(vals); k++) {
				struct il_parsed a, b;

				memcpy(f + 42, pl, plen);
				f[42 + i] = vals[k];
				enum il_verdict va = parse(len, &a);
				enum il_verdict vb = il_parse_payload(f + 42, plen, &b);
				assert_int_equal(va, vb);
				if (va < IL_V_DROP_FIRST) {
					assert_int_equal(a.type, b.type);
					assert_int_equal(a.hdr_len, b.hdr_len);
					assert_int_equal(a.group_id, b.group_id);
					assert_int_equal(a.msg_count, b.msg_count);
					assert_int_equal(a.payload_len, b.payload_len);
					assert_int_equal(b.il_off, 0);
				}
			}
		memcpy(f + 42, pl, plen);
		for (uint32_t l = 0; l <= plen; l++) {
			struct il_parsed a, b;

			/* The same payload cut to l bytes, in a frame and alone. */
			il_put16(f + 16, (uint16_t)(28 + l));
			il_put16(f + 38, (uint16_t)(8 + l));
			assert_int_equal(parse(42 + l, &a), il_parse_payload(f + 42, l, &b));
		}
	}
	/* Longer than any UDP datagram. */
	struct il_parsed p;
	assert_int_equal(il_parse_payload(f + 42, 65536, &p), IL_V_DROP_BAD_UDP_LEN);
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
		cmocka_unit_test(test_fast_path_agrees_with_general),
		cmocka_unit_test(test_header_checks), cmocka_unit_test(test_packing),
		cmocka_unit_test(test_nak),          cmocka_unit_test(test_verdict_names),
		cmocka_unit_test(test_payload_layer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
