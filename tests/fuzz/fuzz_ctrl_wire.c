/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: every Interlink message body as the data plane and
 * libinterlink read it (the wire library's readers, which the control,
 * nak, fec and lec stages and ep_proto.c / ep_lec.c call after the
 * parser), and the AUTH
 * option (lib/auth) on the same bytes.
 *
 * The input is one UDP payload. Whatever the parser accepts is read with
 * the reader of its type, and each reader must agree with its builder:
 * the fields read, built again, give the same bytes back (reserved fields
 * aside). The same payload in an Ethernet/IPv4/UDP frame must get the same
 * verdict from the frame parser. A control message signed (or sealed) with
 * a key of the ring must verify once, then be a replay; a byte the MAC
 * covers, changed, must make it fail; and the sealed message must still
 * parse as the same message.
 *
 * Unlike the other targets' harnesses, this one is instrumented: the
 * readers and builders under test are static inline and live in it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/auth.h>
#include <interlink/frame.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "fz.h"

static struct il_auth_keyring ring;
static struct il_auth_replay *replay;
#define REPLAY_SLOTS 16u

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ring.n = 2;
	ring.k[0].id = 7;
	ring.k[1].id = 9;
	for (unsigned i = 0; i < IL_AUTH_KEY_LEN; i++) {
		ring.k[0].key[i] = (uint8_t)(0x40 + i);
		ring.k[1].key[i] = (uint8_t)(0x90 ^ i);
	}
	replay = malloc(il_auth_replay_bytes(REPLAY_SLOTS));
	if (replay == NULL)
		abort();
	return 0;
}

/* The body of an accepted message, read with its type's reader and built
 * again from what was read. */
static void body_round_trip(uint8_t type, const uint8_t *b, uint32_t bl)
{
	uint8_t o[64];

	switch (type) {
	case IL_T_ACK: {
		struct il_ack_body a;
		int rc = il_ack_get(b, bl, &a);

		FZ_CHECK((rc == 0) == (bl >= IL_ACK_LEN), "ack len %u rc %d", bl, rc);
		if (rc)
			break;
		FZ_CHECK(a.tfrc == (bl >= IL_ACK_TFRC_LEN), "ack form, len %u", bl);
		FZ_CHECK(a.loss_ppm <= IL_ACK_PPM_MAX, "loss_ppm %u", a.loss_ppm);
		if (!a.tfrc) {
			il_ack_put(o, a.view_id, a.buffer_free);
			FZ_CHECK(!memcmp(o, b, IL_ACK_LEN), "short ack round trip");
			FZ_CHECK(a.echo_seq == 0 && a.delta_us == 0 && a.loss_ppm == 0, "short ack");
			break;
		}
		il_ack_tfrc_put(o, a.view_id, a.buffer_free, a.echo_seq, a.delta_us, a.loss_ppm);
		FZ_CHECK(!memcmp(o, b, 20), "long ack round trip");
		FZ_CHECK(il_get32(b + 20) > IL_ACK_PPM_MAX ? a.loss_ppm == IL_ACK_PPM_MAX
							    : !memcmp(o + 20, b + 20, 4),
			 "loss_ppm %u from %u", a.loss_ppm, il_get32(b + 20));
		break;
	}
	case IL_T_STABLE: {
		uint32_t view;
		int rc = il_stable_get(b, bl, &view);

		FZ_CHECK((rc == 0) == (bl >= IL_STABLE_LEN), "stable len %u", bl);
		if (rc == 0) {
			il_stable_put(o, view);
			FZ_CHECK(!memcmp(o, b, 4), "stable round trip");
		}
		break;
	}
	case IL_T_JOIN:
	case IL_T_LEAVE:
	case IL_T_HEARTBEAT: {
		struct il_member_body m;
		int rc = il_member_get(b, bl, &m);

		FZ_CHECK((rc == 0) == (bl >= IL_MEMBER_MSG_LEN), "member len %u", bl);
		if (rc == 0) {
			il_member_put(o, m.roles, m.incarnation);
			FZ_CHECK(!memcmp(o, b, IL_MEMBER_MSG_LEN), "member round trip");
		}
		break;
	}
	case IL_T_CREDIT: {
		struct il_credit_body c;
		int rc = il_credit_get(b, bl, &c);

		FZ_CHECK((rc == 0) == (bl >= IL_CREDIT_LEN), "credit len %u", bl);
		if (rc == 0) {
			il_credit_put(o, c.limit_seq, c.window, c.rate_kbps);
			FZ_CHECK(!memcmp(o, b, IL_CREDIT_LEN), "credit round trip");
		}
		break;
	}
	case IL_T_NAK:
	case IL_T_UNAVAIL: {
		struct il_range_body r;
		int rc = il_range_get(b, bl, &r);

		FZ_CHECK((rc == 0) == (bl >= IL_RANGE_LEN), "range len %u", bl);
		if (rc)
			break;
		il_range_put(o, r.first_seq, r.last_seq);
		FZ_CHECK(!memcmp(o, b, IL_RANGE_LEN), "range round trip");
		/* What the parser promised the nak stage. */
		if (type == IL_T_NAK)
			FZ_CHECK(r.first_seq != 0 && r.last_seq >= r.first_seq &&
					 r.last_seq - r.first_seq < IL_NAK_MAX_SPAN,
				 "NAK range %lu..%lu passed the parser",
				 (unsigned long)r.first_seq, (unsigned long)r.last_seq);
		break;
	}
	case IL_T_VIEW: {
		struct il_view_body v;
		int rc = il_view_get(b, bl, &v);

		if (bl < IL_VIEW_LEN) {
			FZ_CHECK(rc != 0, "view of %u bytes read", bl);
			break;
		}
		uint16_t nm = il_get16(b + 4), ns = il_get16(b + 6);
		FZ_CHECK((rc == 0) == (bl >= il_view_len(nm, ns)), "view len %u for %u+%u", bl,
			 nm, ns);
		if (rc)
			break;
		/* Every entry of both lists, rebuilt in place of a copy. */
		uint32_t vl = il_view_len(v.n_members, v.n_senders);
		uint8_t *c = malloc(vl);

		if (c == NULL)
			abort();
		uint8_t *w = il_view_put(c, v.view_id, v.n_members, v.n_senders);
		for (unsigned i = 0; i < v.n_members; i++)
			w = il_view_member_put(w, il_view_member_id(&v, i), il_view_member_roles(&v, i));
		for (unsigned i = 0; i < v.n_senders; i++)
			w = il_view_sender_put(w, il_view_sender_id(&v, i), il_view_sender_inc(&v, i),
					       il_view_sender_next(&v, i));
		FZ_CHECK((uint32_t)(w - c) == vl && !memcmp(c, b, vl), "view round trip");
		free(c);
		if (v.n_members)
			FZ_CHECK(il_view_has(&v, il_view_member_id(&v, v.n_members - 1)),
				 "view_has");
		break;
	}
	case IL_T_FEC_REPAIR: {
		struct il_fec_fields f;
		int rc = il_fec_body_get(b, bl, &f);

		FZ_CHECK((rc == 0) == (bl >= IL_FEC_BODY_LEN), "fec body len %u", bl);
		if (rc)
			break;
		il_fec_body_put(o, &f);
		FZ_CHECK(!memcmp(o, b, IL_FEC_OFF_ID_LEN) &&
				 !memcmp(o + IL_FEC_OFF_INTERLEAVE, b + IL_FEC_OFF_INTERLEAVE, 6) &&
				 !memcmp(o + IL_FEC_OFF_X_FIRST, b + IL_FEC_OFF_X_FIRST, 8),
			 "fec body round trip");
		break;
	}
	case IL_T_LEC_REPAIR: {
		struct il_lec_body_view v;
		int rc = il_lec_body_get(b, bl, &v);

		if (bl < IL_LEC_BODY_LEN) {
			FZ_CHECK(rc != 0, "LEC body of %u bytes read", bl);
			break;
		}
		uint8_t n = b[IL_LEC_OFF_COUNT];
		uint16_t pl = il_get16(b + IL_LEC_OFF_LEN);
		bool whole = b[IL_LEC_OFF_ID_LEN] == IL_LEC_ID_LEN && n >= 1 &&
			     n <= IL_LEC_WIRE_MAX_IDS && pl >= 1 &&
			     bl == IL_LEC_BODY_LEN + (uint32_t)n * IL_LEC_ID_LEN + pl;
		FZ_CHECK((rc == 0) == whole, "LEC body judged %d", rc);
		if (rc)
			break;
		/* The fields and every id, built again; the payload is where
		 * the body ends. */
		il_lec_body_put(o, &v.f);
		FZ_CHECK(!memcmp(o, b, IL_LEC_BODY_LEN), "LEC body round trip");
		for (unsigned i = 0; i < v.f.count; i++) {
			uint16_t group, reserved;
			uint32_t epoch;
			uint64_t seq;

			il_lec_id_at(&v, i, &group, &reserved, &epoch, &seq);
			il_lec_id_put(o, group, epoch, seq);
			const uint8_t *id = v.ids + (size_t)i * IL_LEC_ID_LEN;
			FZ_CHECK(!memcmp(o, id, 2) && il_get16(id + 2) == reserved &&
					 !memcmp(o + 4, id + 4, 12),
				 "LEC id %u round trip", i);
		}
		FZ_CHECK(v.payload + v.f.len == b + bl, "LEC payload does not end the body");
		break;
	}
	default:
		break;
	}
}

/* The payload in a frame: the frame parser must judge it as the payload
 * parser did, with the same fields. */
static void frame_agrees(const uint8_t *m, uint32_t len, enum il_verdict v,
			 const struct il_parsed *p)
{
	static const struct il_path path = { .dst_mac = {1, 0, 0x5e, 1, 1, 1},
					     .src_mac = {2, 0, 0, 0, 0, 1},
					     .src_ip = 0x0a000001, .dst_ip = 0xef010101,
					     .src_port = 5000, .dst_port = IL_UDP_PORT_DEFAULT,
					     .ttl = 16 };
	struct il_parsed q;

	if (len > UINT16_MAX - IL_IPV4_HLEN - IL_UDP_HLEN)
		return;
	uint8_t *f = malloc(IL_UDP_HDRS_LEN + len);
	if (f == NULL)
		abort();
	memcpy(il_udp_frame_put(f, &path, 1, (uint16_t)len), m, len);
	enum il_verdict w = il_parse_frame(f, IL_UDP_HDRS_LEN + len, IL_UDP_PORT_DEFAULT, &q);
	FZ_CHECK(w == v, "frame verdict %d, payload verdict %d", w, v);
	if (v < IL_V_DROP_FIRST)
		FZ_CHECK(q.il_off == IL_UDP_HDRS_LEN && q.payload_len == len &&
				 q.type == p->type && q.hdr_len == p->hdr_len &&
				 q.group_id == p->group_id && q.msg_count == p->msg_count,
			 "frame and payload parsers disagree");
	free(f);
}

/* A control message signed with a key of the ring: it verifies once,
 * then is a replay; any byte the MAC covers, changed, fails it. */
static void sign_and_check(const uint8_t *m, uint32_t len, const struct il_parsed *p,
			   uint8_t flip_sel, uint64_t ctr)
{
	const struct il_auth_key *k = &ring.k[flip_sel & 1];
	uint8_t *s = malloc(len + IL_AUTH_OPT_LEN);
	uint32_t sl = len;
	struct il_parsed q;

	if (s == NULL)
		abort();
	memcpy(s, m, len);
	if (ctr == 0)
		ctr = 1;
	if (m[IL_OFF_FLAGS] & IL_F_AUTH) {
		il_auth_sign(k, ctr, s, len);
	} else {
		sl = il_auth_seal(k, ctr, s, len);
		FZ_CHECK(sl == len + IL_AUTH_OPT_LEN, "seal length");
		if (p->hdr_len != IL_HDR_LEN) {
			/* Options of our own would follow the AUTH option's
			 * place: a sealed message only makes sense from a
			 * plain 40-byte header (what every builder makes). */
			free(s);
			return;
		}
		FZ_CHECK(!memcmp(s + IL_AUTH_HDR_LEN, m + IL_HDR_LEN, len - IL_HDR_LEN),
			 "seal moved the body wrongly");
	}
	enum il_verdict v = il_parse_payload(s, sl, &q);
	FZ_CHECK(v == (p->type == IL_T_NAK ? IL_V_NAK : IL_V_CONTROL) && q.type == p->type &&
			 q.group_id == p->group_id,
		 "signed message parsed as %d", v);
	il_auth_replay_init(replay, REPLAY_SLOTS);
	FZ_CHECK(il_auth_verify(&ring, replay, s, sl) == IL_AUTH_OK, "own signature refused");
	FZ_CHECK(il_auth_verify(&ring, replay, s, sl) == IL_AUTH_REPLAY, "replay accepted");
	FZ_CHECK(il_auth_verify(&ring, NULL, s, sl) == IL_AUTH_OK, "no replay check");
	/* A covered byte: the fixed header with key id and counter, or the body. */
	uint32_t hl = s[IL_OFF_HDR_LEN], body = sl - hl;
	uint32_t pick = (uint32_t)(ctr % (IL_OFF_AUTH_MAC + IL_AUTH_MAC_LEN + body));
	uint32_t at = pick < IL_OFF_AUTH_MAC + IL_AUTH_MAC_LEN ? pick
							       : hl + pick - IL_OFF_AUTH_MAC -
									 IL_AUTH_MAC_LEN;
	s[at] ^= (uint8_t)(1u << (flip_sel >> 5));
	FZ_CHECK(il_auth_verify(&ring, NULL, s, sl) == IL_AUTH_BAD_MAC,
		 "byte %u changed, still verifies", at);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct il_parsed p;

	if (size > UINT16_MAX)
		return 0;
	/* Exact-size heap copy: ASan sees any read past the datagram. */
	uint8_t *m = malloc(size ? size : 1);
	if (m == NULL)
		abort();
	memcpy(m, data, size);
	uint32_t len = (uint32_t)size;
	enum il_verdict v = il_parse_payload(m, len, &p);

	FZ_CHECK(v < IL_V_COUNT && v != IL_V_PASS && v != IL_V_UDP, "verdict %d", v);
	frame_agrees(m, len, v, &p);
	/* A message of a foreign key, or not signed: never verifies. */
	il_auth_replay_init(replay, REPLAY_SLOTS);
	enum il_auth_verdict av = il_auth_verify(&ring, replay, m, len);
	if (v >= IL_V_DROP_FIRST) {
		free(m);
		return 0;
	}
	FZ_CHECK(p.payload_len == len && p.hdr_len >= IL_HDR_LEN && p.hdr_len <= len &&
			 p.hdr_len % 4 == 0,
		 "accepted with hdr_len %u of %u", p.hdr_len, len);
	if (av == IL_AUTH_OK)
		FZ_CHECK((m[IL_OFF_FLAGS] & IL_F_AUTH) && p.hdr_len >= IL_AUTH_HDR_LEN,
			 "verified without the option");
	/* The header's fields, built again. */
	struct il_hdr_fields h;
	uint8_t o[IL_HDR_LEN];

	il_hdr_get(m, &h);
	il_hdr_put(o, &h);
	FZ_CHECK(!memcmp(o, m, IL_OFF_HDR_LEN) &&
			 !memcmp(o + IL_OFF_FLAGS, m + IL_OFF_FLAGS, IL_HDR_LEN - IL_OFF_FLAGS),
		 "header round trip");
	body_round_trip(p.type, m + p.hdr_len, len - p.hdr_len);
	if (v == IL_V_DATA) {
		/* The records the parser counted, walked as libinterlink does. */
		uint32_t off = p.hdr_len;

		for (unsigned i = 0; i < p.msg_count; i++) {
			FZ_CHECK(off + IL_MSG_HDR_LEN <= len, "record %u header past the end", i);
			off += IL_MSG_HDR_LEN + il_get16(m + off);
			FZ_CHECK(off <= len, "record %u past the end", i);
		}
		FZ_CHECK(off == len, "bytes after the last record");
	} else if (len <= 4096) {
		sign_and_check(m, len, &p, m[len - 1],
			       il_get64(m + IL_OFF_STABLE_SEQ) ^ il_get64(m + IL_OFF_SENDER_SEQ));
	}
	free(m);
	return 0;
}
