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

#include <interlink/auth.h>
#include <interlink/fec_wire.h>
#include <interlink/frame.h>
#include <interlink/json.h>
#include <interlink/lec_wire.h>
#include <interlink/version.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

static void field(struct il_json *j, const char *name, size_t offset, size_t size)
{
	il_json_obj(j, NULL);
	il_json_str(j, "name", name);
	il_json_u64(j, "offset", offset);
	il_json_u64(j, "size", size);
	il_json_end(j);
}

#define FIELD(j, s, f) field(j, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f))

static const struct il_path path = {
	.dst_mac = { 0x01, 0x00, 0x5e, 0x01, 0x01, 0x01 },
	.src_mac = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 },
	.src_ip = 0x0a000001u, /* 10.0.0.1 */
	.dst_ip = 0xef010101u, /* 239.1.1.1 */
	.src_port = 5000,
	.dst_port = IL_UDP_PORT_DEFAULT,
	.ttl = 16,
};

/* The bytes of a frame as one hex string member. */
static void hex(struct il_json *j, const char *key, const uint8_t *b, size_t n)
{
	static char buf[2 * 512 + 1];

	for (size_t i = 0; i < n && i < 512; i++)
		snprintf(buf + 2 * i, 3, "%02x", b[i]);
	buf[2 * (n < 512 ? n : 512)] = '\0';
	il_json_str(j, key, buf);
}

/* A JOIN as the wire library signs it (lib/auth), before and after, with
 * the key: the contract test signs the first with its own BLAKE2b and
 * must get the second, byte for byte. */
static void auth_example(struct il_json *j)
{
	struct il_auth_key k = { .id = 7 };
	struct il_hdr_fields h = { .type = IL_T_JOIN, .group_id = 2, .sender_id = 0x0a000011,
				   .epoch = 5 };
	uint8_t f[256];
	uint32_t len;

	for (unsigned i = 0; i < IL_AUTH_KEY_LEN; i++)
		k.key[i] = (uint8_t)(0xa0 + i);
	il_member_put(il_frame_put(f, &path, 0, &h, IL_MEMBER_MSG_LEN), IL_ROLE_RECEIVER, 9);
	len = IL_UDP_HDRS_LEN + IL_HDR_LEN + IL_MEMBER_MSG_LEN;
	il_json_obj(j, "auth_example");
	hex(j, "key", k.key, IL_AUTH_KEY_LEN);
	il_json_u64(j, "key_id", k.id);
	il_json_u64(j, "counter", 0x1122334455667788ull);
	hex(j, "unsigned", f, len);
	len = il_auth_seal_frame(&k, 0x1122334455667788ull, f, len);
	hex(j, "signed", f, len);
	il_json_end(j);
}

/* One frame: the header's values, then the body's (the caller writes
 * them), then the bytes (frame_end). */
static void frame_begin(struct il_json *j, const struct il_hdr_fields *h)
{
	il_json_obj(j, NULL);
	il_json_str(j, "type", il_type_name(h->type));
	il_json_obj(j, "header");
	il_json_u64(j, "type", h->type);
	il_json_u64(j, "flags", h->flags);
	il_json_u64(j, "group_id", h->group_id);
	il_json_u64(j, "msg_count", h->msg_count);
	il_json_u64(j, "sender_id", h->sender_id);
	il_json_u64(j, "epoch", h->epoch);
	il_json_u64(j, "sender_seq", h->sender_seq);
	il_json_u64(j, "global_seq", h->global_seq);
	il_json_u64(j, "stable_seq", h->stable_seq);
	il_json_end(j);
	il_json_obj(j, "body");
}

static void frame_end(struct il_json *j, const uint8_t *f, const uint8_t *end)
{
	il_udp_csum_set((uint8_t *)f + IL_ETH_HLEN);
	il_json_end(j); /* body */
	hex(j, "hex", f, (size_t)(end - f));
	il_json_end(j);
}

static void pair(struct il_json *j, uint64_t a, uint64_t b)
{
	il_json_arr(j, NULL);
	il_json_u64(j, NULL, a);
	il_json_u64(j, NULL, b);
	il_json_end(j);
}

/* Every message type built by the library (lib/wire, wire_msg.h). */
static void frames(struct il_json *j)
{
	static uint8_t f[512];
	struct il_hdr_fields h;
	uint8_t *b;

	il_json_arr(j, "frames");
	/* DATA: the example of docs/wire-format.md */
	h = (struct il_hdr_fields){ .type = IL_T_DATA, .group_id = 1, .msg_count = 2,
				    .sender_id = 3, .sender_seq = 7 };
	b = il_frame_put(f, &path, 0, &h, 2 * IL_MSG_HDR_LEN + 7);
	b = il_rec_put(b, 2);
	memcpy(b, "hi", 2);
	b = il_rec_put(b + 2, 5);
	memcpy(b, "there", 5);
	frame_begin(j, &h);
	il_json_arr(j, "msgs");
	il_json_str(j, NULL, "6869");
	il_json_str(j, NULL, "7468657265");
	il_json_end(j);
	frame_end(j, f, b + 5);
	/* NAK and UNAVAIL */
	for (uint8_t t = IL_T_NAK; t <= IL_T_UNAVAIL; t++) {
		h = (struct il_hdr_fields){ .type = t, .group_id = 2, .sender_id = 0x10001,
					    .epoch = 5, .global_seq = t == IL_T_UNAVAIL ? 9 : 0 };
		b = il_range_put(il_frame_put(f, &path, 0, &h, IL_RANGE_LEN), 11, 12);
		frame_begin(j, &h);
		il_json_u64(j, "first_seq", 11);
		il_json_u64(j, "last_seq", 12);
		frame_end(j, f, b);
	}
	/* ACK, both forms */
	h = (struct il_hdr_fields){ .type = IL_T_ACK, .group_id = 2, .sender_id = 0x10001,
				    .epoch = 5, .global_seq = 100 };
	b = il_ack_put(il_frame_put(f, &path, 0, &h, IL_ACK_LEN), 4, 300);
	frame_begin(j, &h);
	il_json_u64(j, "view_id", 4);
	il_json_u64(j, "buffer_free", 300);
	frame_end(j, f, b);
	b = il_ack_tfrc_put(il_frame_put(f, &path, 0, &h, IL_ACK_TFRC_LEN), 4, 0xffffffffu, 99,
			    1500, 25000);
	frame_begin(j, &h);
	il_json_u64(j, "view_id", 4);
	il_json_u64(j, "buffer_free", 0xffffffffu);
	il_json_u64(j, "echo_seq", 99);
	il_json_u64(j, "delta_us", 1500);
	il_json_u64(j, "loss_ppm", 25000);
	frame_end(j, f, b);
	/* STABLE */
	h = (struct il_hdr_fields){ .type = IL_T_STABLE, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				    .group_id = 2, .epoch = 5, .global_seq = 101,
				    .stable_seq = 90 };
	b = il_stable_put(il_frame_put(f, &path, 0, &h, IL_STABLE_LEN), 4);
	frame_begin(j, &h);
	il_json_u64(j, "view_id", 4);
	il_json_u64(j, "reserved", 0);
	frame_end(j, f, b);
	/* JOIN, LEAVE, HEARTBEAT */
	for (uint8_t t = IL_T_JOIN; t <= IL_T_HEARTBEAT; t++) {
		h = (struct il_hdr_fields){ .type = t, .group_id = 2, .sender_id = 7, .epoch = 5 };
		b = il_member_put(il_frame_put(f, &path, 0, &h, IL_MEMBER_MSG_LEN),
				  IL_ROLE_SENDER | IL_ROLE_RECEIVER, 3);
		frame_begin(j, &h);
		il_json_u64(j, "roles", IL_ROLE_SENDER | IL_ROLE_RECEIVER);
		il_json_u64(j, "incarnation", 3);
		frame_end(j, f, b);
	}
	/* VIEW: two members, one sender */
	h = (struct il_hdr_fields){ .type = IL_T_VIEW, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				    .group_id = 2, .epoch = 5, .global_seq = 50, .stable_seq = 40 };
	b = il_view_put(il_frame_put(f, &path, 0, &h, (uint16_t)il_view_len(2, 1)), 6, 2, 1);
	b = il_view_member_put(b, 7, IL_ROLE_SENDER);
	b = il_view_member_put(b, 0x10001, IL_ROLE_RECEIVER);
	b = il_view_sender_put(b, 7, 4, 33);
	frame_begin(j, &h);
	il_json_u64(j, "view_id", 6);
	il_json_arr(j, "members");
	pair(j, 7, IL_ROLE_SENDER);
	pair(j, 0x10001, IL_ROLE_RECEIVER);
	il_json_end(j);
	il_json_arr(j, "senders"); /* [id, incarnation, next_sender_seq] */
	il_json_arr(j, NULL);
	il_json_u64(j, NULL, 7);
	il_json_u64(j, NULL, 4);
	il_json_u64(j, NULL, 33);
	il_json_end(j);
	il_json_end(j);
	frame_end(j, f, b);
	/* CREDIT, with a resume notice */
	h = (struct il_hdr_fields){ .type = IL_T_CREDIT, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				    .group_id = 2, .sender_id = 7, .epoch = 5, .sender_seq = 30,
				    .global_seq = 101, .stable_seq = 90 };
	b = il_credit_put(il_frame_put(f, &path, 0, &h, IL_CREDIT_LEN), 286, 256, 4000);
	frame_begin(j, &h);
	il_json_u64(j, "limit_seq", 286);
	il_json_u64(j, "window", 256);
	il_json_u64(j, "rate_kbps", 4000);
	frame_end(j, f, b);
	/* EPOCH_REPORT: receiver 0x10001 stands at 77 in epoch 5, answering 9 */
	h = (struct il_hdr_fields){ .type = IL_T_EPOCH_REPORT, .group_id = 2,
				    .sender_id = 0x10001, .epoch = 5, .global_seq = 77 };
	b = il_epoch_report_put(il_frame_put(f, &path, 0, &h, IL_EPOCH_REPORT_LEN), 9, 4, 70, 80);
	frame_begin(j, &h);
	il_json_u64(j, "new_epoch", 9);
	il_json_u64(j, "view_id", 4);
	il_json_u64(j, "stable_seen", 70);
	il_json_u64(j, "high", 80);
	frame_end(j, f, b);
	/* FEC_REPAIR: body, a recipe of one id, four payload bytes */
	const struct il_fec_fields ff = { .code = IL_FEC_CODE_XOR, .layer = 1, .rate_r = 8,
					  .rate_c = 3, .count = 1, .interleave = 11,
					  .xor_len = 4, .len_code = 60, .x_first = 12345 };

	h = (struct il_hdr_fields){ .type = IL_T_FEC_REPAIR, .group_id = 3, .sender_id = 1,
				    .epoch = 5, .sender_seq = 8 };
	b = il_frame_put(f, &path, 0, &h, (uint16_t)(IL_FEC_REPAIR_HDR_LEN(1) - IL_HDR_LEN + 4));
	b = il_fec_body_put(b, &ff);
	memset(b, 0x11, IL_FEC_ID_LEN + 4);
	frame_begin(j, &h);
	il_json_u64(j, "code", ff.code);
	il_json_u64(j, "layer", ff.layer);
	il_json_u64(j, "rate_r", ff.rate_r);
	il_json_u64(j, "rate_c", ff.rate_c);
	il_json_u64(j, "count", ff.count);
	il_json_u64(j, "id_len", IL_FEC_ID_LEN);
	il_json_u64(j, "interleave", ff.interleave);
	il_json_u64(j, "xor_len", ff.xor_len);
	il_json_u64(j, "len_code", ff.len_code);
	il_json_u64(j, "reserved", 0);
	il_json_u64(j, "x_first", ff.x_first);
	frame_end(j, f, b + IL_FEC_ID_LEN + 4);
	/* LEC_REPAIR: two ids (groups 3 and 4), five payload bytes */
	const struct il_lec_fields lf = { .count = 2, .rate_r = 8,
					  .origin = IL_LEC_ORIGIN_MEMBER, .len = 5,
					  .len_xor = 0x0203 };

	h = (struct il_hdr_fields){ .type = IL_T_LEC_REPAIR, .group_id = 3,
				    .sender_id = 0x10002, .sender_seq = 17 };
	b = il_frame_put(f, &path, 0, &h, (uint16_t)(IL_LEC_REPAIR_LEN(2, 5) - IL_HDR_LEN));
	b = il_lec_body_put(b, &lf);
	b = il_lec_id_put(b, 3, 5, 1001);
	b = il_lec_id_put(b, 4, 5, 77);
	memcpy(b, "\x01\x02\x03\x04\x05", 5);
	frame_begin(j, &h);
	il_json_u64(j, "count", lf.count);
	il_json_u64(j, "id_len", IL_LEC_ID_LEN);
	il_json_u64(j, "rate_r", lf.rate_r);
	il_json_u64(j, "origin", lf.origin);
	il_json_u64(j, "len", lf.len);
	il_json_u64(j, "len_xor", lf.len_xor);
	il_json_arr(j, "ids"); /* [group, epoch, seq] */
	il_json_arr(j, NULL);
	il_json_u64(j, NULL, 3);
	il_json_u64(j, NULL, 5);
	il_json_u64(j, NULL, 1001);
	il_json_end(j);
	il_json_arr(j, NULL);
	il_json_u64(j, NULL, 4);
	il_json_u64(j, NULL, 5);
	il_json_u64(j, NULL, 77);
	il_json_end(j);
	il_json_end(j);
	il_json_str(j, "data", "0102030405");
	frame_end(j, f, b + 5);
	il_json_end(j);

	/* A TCP segment as the FT-TCP stage fabricates one (frame.h). */
	static const uint8_t opt[8] = { 2, 4, 0x05, 0xb4, 1, 3, 3, 7 };
	const struct il_tcp_seg ts = { .seq = 1000, .ack = 7, .flags = IL_TCP_F_SYN | IL_TCP_F_ACK,
				       .win = 65535, .opt = opt, .optlen = 8 };
	struct il_path tp = path;

	tp.dst_port = 80;
	tp.dst_ip = 0x0a000002u;
	tp.ttl = 64;
	tp.df = true;
	uint16_t n = il_tcp_frame_put(f, &tp, 0, &ts);

	il_json_obj(j, "tcp_segment");
	il_json_u64(j, "seq", ts.seq);
	il_json_u64(j, "ack", ts.ack);
	il_json_u64(j, "flags", ts.flags);
	il_json_u64(j, "window", ts.win);
	hex(j, "hex", f, n);
	il_json_end(j);
}

int main(int argc, char **argv)
{
	struct il_json js, *j = &js;

	if (argc > 1 && strcmp(argv[1], "--version") == 0)
		return il_print_version("il-wire-dump");

	il_json_begin(j, stdout, 2);
	il_json_obj(j, NULL);
	il_json_i64(j, "version", IL_VERSION);
	il_json_i64(j, "udp_port", IL_UDP_PORT_DEFAULT);
	il_json_u64(j, "header_len", IL_HDR_LEN);
	il_json_u64(j, "msg_header_len", IL_MSG_HDR_LEN);
	il_json_u64(j, "range_len", IL_RANGE_LEN);
	il_json_u64(j, "max_msgs_per_frame", IL_MAX_MSGS_PER_FRAME);
	il_json_u64(j, "nak_max_span", IL_NAK_MAX_SPAN);
	il_json_u64(j, "ack_len", IL_ACK_LEN);
	il_json_u64(j, "ack_tfrc_len", IL_ACK_TFRC_LEN);
	il_json_u64(j, "ack_ppm_max", IL_ACK_PPM_MAX);
	il_json_arr(j, "header");
	FIELD(j, il_hdr, version);
	FIELD(j, il_hdr, type);
	FIELD(j, il_hdr, hdr_len);
	FIELD(j, il_hdr, flags);
	FIELD(j, il_hdr, group_id);
	FIELD(j, il_hdr, msg_count);
	FIELD(j, il_hdr, sender_id);
	FIELD(j, il_hdr, epoch);
	FIELD(j, il_hdr, sender_seq);
	FIELD(j, il_hdr, global_seq);
	FIELD(j, il_hdr, stable_seq);
	il_json_end(j);
	il_json_arr(j, "msg");
	FIELD(j, il_msg, len);
	FIELD(j, il_msg, msg_flags);
	il_json_end(j);
	il_json_arr(j, "range");
	FIELD(j, il_range, first_seq);
	FIELD(j, il_range, last_seq);
	il_json_end(j);
	il_json_arr(j, "ack");
	FIELD(j, il_ack, view_id);
	FIELD(j, il_ack, buffer_free);
	il_json_end(j);
	il_json_arr(j, "ack_tfrc");
	FIELD(j, il_ack_tfrc, view_id);
	FIELD(j, il_ack_tfrc, buffer_free);
	FIELD(j, il_ack_tfrc, echo_seq);
	FIELD(j, il_ack_tfrc, delta_us);
	FIELD(j, il_ack_tfrc, loss_ppm);
	il_json_end(j);
	il_json_arr(j, "stable");
	FIELD(j, il_stable, view_id);
	FIELD(j, il_stable, reserved);
	il_json_end(j);
	il_json_arr(j, "member");
	FIELD(j, il_member_msg, roles);
	FIELD(j, il_member_msg, incarnation);
	il_json_end(j);
	il_json_arr(j, "epoch_report");
	FIELD(j, il_epoch_report, new_epoch);
	FIELD(j, il_epoch_report, view_id);
	FIELD(j, il_epoch_report, stable_seen);
	FIELD(j, il_epoch_report, high);
	il_json_end(j);
	il_json_arr(j, "view");
	FIELD(j, il_view, view_id);
	FIELD(j, il_view, n_members);
	FIELD(j, il_view, n_senders);
	il_json_end(j);
	il_json_arr(j, "view_member");
	FIELD(j, il_view_member, member_id);
	FIELD(j, il_view_member, roles);
	il_json_end(j);
	il_json_arr(j, "view_sender");
	FIELD(j, il_view_sender, sender_id);
	FIELD(j, il_view_sender, incarnation);
	FIELD(j, il_view_sender, next_sender_seq);
	il_json_end(j);
	il_json_arr(j, "auth");
	FIELD(j, il_auth_opt, key_id);
	FIELD(j, il_auth_opt, counter);
	FIELD(j, il_auth_opt, mac);
	il_json_end(j);
	il_json_arr(j, "lec_body");
	FIELD(j, il_lec_body, count);
	FIELD(j, il_lec_body, id_len);
	FIELD(j, il_lec_body, rate_r);
	FIELD(j, il_lec_body, origin);
	FIELD(j, il_lec_body, len);
	FIELD(j, il_lec_body, len_xor);
	il_json_end(j);
	il_json_arr(j, "lec_id");
	FIELD(j, il_lec_id_wire, group);
	FIELD(j, il_lec_id_wire, reserved);
	FIELD(j, il_lec_id_wire, epoch);
	FIELD(j, il_lec_id_wire, seq);
	il_json_end(j);
	il_json_obj(j, "lec_origins");
	il_json_u64(j, "MEMBER", IL_LEC_ORIGIN_MEMBER);
	il_json_u64(j, "APPLIANCE", IL_LEC_ORIGIN_APPLIANCE);
	il_json_end(j);
	il_json_u64(j, "lec_max_ids", IL_LEC_WIRE_MAX_IDS);
	il_json_arr(j, "credit");
	FIELD(j, il_credit, limit_seq);
	FIELD(j, il_credit, window);
	FIELD(j, il_credit, rate_kbps);
	il_json_end(j);
	il_json_obj(j, "roles");
	il_json_u64(j, "SENDER", IL_ROLE_SENDER);
	il_json_u64(j, "RECEIVER", IL_ROLE_RECEIVER);
	il_json_end(j);
	il_json_obj(j, "types");
	for (unsigned t = 1; t < IL_T_COUNT; t++)
		il_json_u64(j, il_type_name(t), t);
	il_json_end(j);
	frames(j);
	il_json_obj(j, "flags");
	il_json_i64(j, "STAMPED", IL_F_STAMPED);
	il_json_i64(j, "RETRANS", IL_F_RETRANS);
	il_json_i64(j, "STABLE_VALID", IL_F_STABLE_VALID);
	il_json_i64(j, "RAW", IL_F_RAW);
	il_json_i64(j, "FIFO_START", IL_F_FIFO_START);
	il_json_i64(j, "AUTH", IL_F_AUTH);
	il_json_end(j);
	auth_example(j);
	il_json_end(j);
	return il_json_finish(j) ? 1 : 0;
}
