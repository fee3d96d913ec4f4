/* SPDX-License-Identifier: BSD-3-Clause
 * Prints the wire format as include/interlink/wire.h defines it, as JSON,
 * for the contract test that holds the header, docs/wire-format.md and
 * the Scapy layer to one another; and one frame of every message type as
 * the wire library builds it, with the values it was built from, so that
 * the test dissects the library's bytes with the Scapy layer too.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <interlink/fec_wire.h>
#include <interlink/frame.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#define FIELD(s, f, last)                                                                     \
	printf("    {\"name\": \"%s\", \"offset\": %zu, \"size\": %zu}%s\n", #f,               \
	       offsetof(struct s, f), sizeof(((struct s *)0)->f), last ? "" : ",")

static const struct il_path path = {
	.dst_mac = { 0x01, 0x00, 0x5e, 0x01, 0x01, 0x01 },
	.src_mac = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 },
	.src_ip = 0x0a000001u, /* 10.0.0.1 */
	.dst_ip = 0xef010101u, /* 239.1.1.1 */
	.src_port = 5000,
	.dst_port = IL_UDP_PORT_DEFAULT,
	.ttl = 16,
};

static void hex(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

/* One frame: the header's values, the body's (as JSON text), the bytes. */
static void frame_out(const struct il_hdr_fields *h, const uint8_t *f, const uint8_t *end,
		      const char *body_json, int last)
{
	il_udp_csum_set((uint8_t *)f + IL_ETH_HLEN);
	printf("    {\"type\": \"%s\", \"header\": {\"type\": %u, \"flags\": %u, "
	       "\"group_id\": %u, \"msg_count\": %u, \"sender_id\": %u, \"epoch\": %u, "
	       "\"sender_seq\": %llu, \"global_seq\": %llu, \"stable_seq\": %llu},\n"
	       "     \"body\": %s,\n     \"hex\": \"",
	       il_type_name(h->type), h->type, h->flags, h->group_id, h->msg_count, h->sender_id,
	       h->epoch, (unsigned long long)h->sender_seq, (unsigned long long)h->global_seq,
	       (unsigned long long)h->stable_seq, body_json);
	hex(f, (size_t)(end - f));
	printf("\"}%s\n", last ? "" : ",");
}

/* Every message type built by the library (lib/wire, wire_msg.h). */
static void frames(void)
{
	static uint8_t f[512];
	struct il_hdr_fields h;
	uint8_t *b;

	printf("  \"frames\": [\n");
	/* DATA: the example of docs/wire-format.md */
	h = (struct il_hdr_fields){ .type = IL_T_DATA, .group_id = 1, .msg_count = 2,
				    .sender_id = 3, .sender_seq = 7 };
	b = il_frame_put(f, &path, 0, &h, 2 * IL_MSG_HDR_LEN + 7);
	b = il_rec_put(b, 2);
	memcpy(b, "hi", 2);
	b = il_rec_put(b + 2, 5);
	memcpy(b, "there", 5);
	frame_out(&h, f, b + 5, "{\"msgs\": [\"6869\", \"7468657265\"]}", 0);
	/* NAK and UNAVAIL */
	for (uint8_t t = IL_T_NAK; t <= IL_T_UNAVAIL; t++) {
		h = (struct il_hdr_fields){ .type = t, .group_id = 2, .sender_id = 0x10001,
					    .epoch = 5, .global_seq = t == IL_T_UNAVAIL ? 9 : 0 };
		b = il_range_put(il_frame_put(f, &path, 0, &h, IL_RANGE_LEN), 11, 12);
		frame_out(&h, f, b, "{\"first_seq\": 11, \"last_seq\": 12}", 0);
	}
	/* ACK, both forms */
	h = (struct il_hdr_fields){ .type = IL_T_ACK, .group_id = 2, .sender_id = 0x10001,
				    .epoch = 5, .global_seq = 100 };
	b = il_ack_put(il_frame_put(f, &path, 0, &h, IL_ACK_LEN), 4, 300);
	frame_out(&h, f, b, "{\"view_id\": 4, \"buffer_free\": 300}", 0);
	b = il_ack_tfrc_put(il_frame_put(f, &path, 0, &h, IL_ACK_TFRC_LEN), 4, 0xffffffffu, 99,
			    1500, 25000);
	frame_out(&h, f, b,
		  "{\"view_id\": 4, \"buffer_free\": 4294967295, \"echo_seq\": 99, "
		  "\"delta_us\": 1500, \"loss_ppm\": 25000}", 0);
	/* STABLE */
	h = (struct il_hdr_fields){ .type = IL_T_STABLE, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				    .group_id = 2, .epoch = 5, .global_seq = 101,
				    .stable_seq = 90 };
	b = il_stable_put(il_frame_put(f, &path, 0, &h, IL_STABLE_LEN), 4);
	frame_out(&h, f, b, "{\"view_id\": 4, \"reserved\": 0}", 0);
	/* JOIN, LEAVE, HEARTBEAT */
	for (uint8_t t = IL_T_JOIN; t <= IL_T_HEARTBEAT; t++) {
		h = (struct il_hdr_fields){ .type = t, .group_id = 2, .sender_id = 7, .epoch = 5 };
		b = il_member_put(il_frame_put(f, &path, 0, &h, IL_MEMBER_MSG_LEN),
				  IL_ROLE_SENDER | IL_ROLE_RECEIVER, 3);
		frame_out(&h, f, b, "{\"roles\": 3, \"incarnation\": 3}", 0);
	}
	/* VIEW: two members, one sender */
	h = (struct il_hdr_fields){ .type = IL_T_VIEW, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				    .group_id = 2, .epoch = 5, .global_seq = 50, .stable_seq = 40 };
	b = il_view_put(il_frame_put(f, &path, 0, &h, (uint16_t)il_view_len(2, 1)), 6, 2, 1);
	b = il_view_member_put(b, 7, IL_ROLE_SENDER);
	b = il_view_member_put(b, 0x10001, IL_ROLE_RECEIVER);
	b = il_view_sender_put(b, 7, 33);
	frame_out(&h, f, b,
		  "{\"view_id\": 6, \"members\": [[7, 1], [65537, 2]], \"senders\": [[7, 33]]}",
		  0);
	/* CREDIT, with a resume notice */
	h = (struct il_hdr_fields){ .type = IL_T_CREDIT, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				    .group_id = 2, .sender_id = 7, .epoch = 5, .sender_seq = 30,
				    .global_seq = 101, .stable_seq = 90 };
	b = il_credit_put(il_frame_put(f, &path, 0, &h, IL_CREDIT_LEN), 286, 256, 4000);
	frame_out(&h, f, b, "{\"limit_seq\": 286, \"window\": 256, \"rate_kbps\": 4000}", 0);
	/* FEC_REPAIR: body, a recipe of one id, four payload bytes */
	h = (struct il_hdr_fields){ .type = IL_T_FEC_REPAIR, .group_id = 3, .sender_id = 1,
				    .epoch = 5, .sender_seq = 8 };
	b = il_frame_put(f, &path, 0, &h, (uint16_t)(IL_FEC_REPAIR_HDR_LEN(1) - IL_HDR_LEN + 4));
	b = il_fec_body_put(b, &(struct il_fec_fields){ .code = IL_FEC_CODE_XOR, .layer = 1,
							.rate_r = 8, .rate_c = 3, .count = 1,
							.interleave = 11, .xor_len = 4,
							.len_code = 60, .x_first = 12345 });
	memset(b, 0x11, IL_FEC_ID_LEN + 4);
	frame_out(&h, f, b + IL_FEC_ID_LEN + 4,
		  "{\"code\": 1, \"layer\": 1, \"rate_r\": 8, \"rate_c\": 3, \"count\": 1, "
		  "\"id_len\": 16, \"interleave\": 11, \"xor_len\": 4, \"len_code\": 60, "
		  "\"reserved\": 0, \"x_first\": 12345}",
		  1);
	printf("  ],\n");
	/* A TCP segment as the FT-TCP stage fabricates one (frame.h). */
	static const uint8_t opt[8] = { 2, 4, 0x05, 0xb4, 1, 3, 3, 7 };
	struct il_path tp = path;
	tp.dst_port = 80;
	tp.dst_ip = 0x0a000002u;
	tp.ttl = 64;
	tp.df = true;
	uint16_t n = il_tcp_frame_put(f, &tp, 0, &(struct il_tcp_seg){ .seq = 1000, .ack = 7,
									 .flags = IL_TCP_F_SYN |
										  IL_TCP_F_ACK,
									 .win = 65535, .opt = opt,
									 .optlen = 8 });
	printf("  \"tcp_segment\": {\"seq\": 1000, \"ack\": 7, \"flags\": %u, \"window\": 65535, "
	       "\"hex\": \"", IL_TCP_F_SYN | IL_TCP_F_ACK);
	hex(f, n);
	printf("\"},\n");
}

int main(void)
{
	printf("{\n  \"version\": %d,\n  \"udp_port\": %d,\n", IL_VERSION, IL_UDP_PORT_DEFAULT);
	printf("  \"header_len\": %u,\n  \"msg_header_len\": %u,\n  \"range_len\": %u,\n",
	       IL_HDR_LEN, IL_MSG_HDR_LEN, IL_RANGE_LEN);
	printf("  \"max_msgs_per_frame\": %u,\n  \"nak_max_span\": %u,\n", IL_MAX_MSGS_PER_FRAME,
	       IL_NAK_MAX_SPAN);
	printf("  \"ack_len\": %u,\n  \"ack_tfrc_len\": %u,\n  \"ack_ppm_max\": %u,\n", IL_ACK_LEN,
	       IL_ACK_TFRC_LEN, IL_ACK_PPM_MAX);
	printf("  \"header\": [\n");
	FIELD(il_hdr, version, 0);
	FIELD(il_hdr, type, 0);
	FIELD(il_hdr, hdr_len, 0);
	FIELD(il_hdr, flags, 0);
	FIELD(il_hdr, group_id, 0);
	FIELD(il_hdr, msg_count, 0);
	FIELD(il_hdr, sender_id, 0);
	FIELD(il_hdr, epoch, 0);
	FIELD(il_hdr, sender_seq, 0);
	FIELD(il_hdr, global_seq, 0);
	FIELD(il_hdr, stable_seq, 1);
	printf("  ],\n  \"msg\": [\n");
	FIELD(il_msg, len, 0);
	FIELD(il_msg, msg_flags, 1);
	printf("  ],\n  \"range\": [\n");
	FIELD(il_range, first_seq, 0);
	FIELD(il_range, last_seq, 1);
	printf("  ],\n  \"ack\": [\n");
	FIELD(il_ack, view_id, 0);
	FIELD(il_ack, buffer_free, 1);
	printf("  ],\n  \"ack_tfrc\": [\n");
	FIELD(il_ack_tfrc, view_id, 0);
	FIELD(il_ack_tfrc, buffer_free, 0);
	FIELD(il_ack_tfrc, echo_seq, 0);
	FIELD(il_ack_tfrc, delta_us, 0);
	FIELD(il_ack_tfrc, loss_ppm, 1);
	printf("  ],\n  \"stable\": [\n");
	FIELD(il_stable, view_id, 0);
	FIELD(il_stable, reserved, 1);
	printf("  ],\n  \"member\": [\n");
	FIELD(il_member_msg, roles, 0);
	FIELD(il_member_msg, incarnation, 1);
	printf("  ],\n  \"view\": [\n");
	FIELD(il_view, view_id, 0);
	FIELD(il_view, n_members, 0);
	FIELD(il_view, n_senders, 1);
	printf("  ],\n  \"view_member\": [\n");
	FIELD(il_view_member, member_id, 0);
	FIELD(il_view_member, roles, 1);
	printf("  ],\n  \"view_sender\": [\n");
	FIELD(il_view_sender, sender_id, 0);
	FIELD(il_view_sender, reserved, 0);
	FIELD(il_view_sender, next_sender_seq, 1);
	printf("  ],\n  \"credit\": [\n");
	FIELD(il_credit, limit_seq, 0);
	FIELD(il_credit, window, 0);
	FIELD(il_credit, rate_kbps, 1);
	printf("  ],\n  \"roles\": {\"SENDER\": %u, \"RECEIVER\": %u},\n", IL_ROLE_SENDER,
	       IL_ROLE_RECEIVER);
	printf("  \"types\": {\n");
	for (unsigned t = 1; t < IL_T_COUNT; t++)
		printf("    \"%s\": %u%s\n", il_type_name(t), t, t + 1 < IL_T_COUNT ? "," : "");
	printf("  },\n");
	frames();
	printf("  \"flags\": {\"STAMPED\": %d, \"RETRANS\": %d, \"STABLE_VALID\": %d, "
	       "\"RAW\": %d}\n}\n",
	       IL_F_STAMPED, IL_F_RETRANS, IL_F_STABLE_VALID, IL_F_RAW);
	return 0;
}
