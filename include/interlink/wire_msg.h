/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Interlink messages (part of the il_wire library, DPDK-free): the common
 * header and every body of wire.h, fec_wire.h and lec_wire.h, each with its builder
 * (_put) and its reader (_get) side by side, and a whole Ethernet/IPv4/
 * UDP/Interlink frame in one call. Whether a frame or a UDP payload is a
 * valid message at all is parse.h's verdict; the readers here assume it.
 *
 * Every builder writes every byte of what it builds (reserved fields as
 * zero), so a buffer needs no clearing first, and returns the byte after
 * it. A body reader checks the body's length and returns 0, or -1 for a
 * body too short for its type. All static inline: the sequencer's raw-mode
 * header, FEC repairs and the generator's templates are built per packet,
 * and a header built from a compound literal compiles to the same stores
 * as field-by-field code.
 */
#ifndef INTERLINK_WIRE_MSG_H
#define INTERLINK_WIRE_MSG_H

#include <stdbool.h>

#include <stdint.h>

#include <interlink/fec_wire.h>
#include <interlink/frame.h>
#include <interlink/lec_wire.h>
#include <interlink/wire.h>

/* The common header's fields, host byte order. version and hdr_len are
 * not here: a builder writes IL_VERSION and IL_HDR_LEN. */
struct il_hdr_fields {
	uint8_t type;        /* enum il_type */
	uint8_t flags;       /* IL_F_* */
	uint16_t group_id;
	uint16_t msg_count;
	uint32_t sender_id;
	uint32_t epoch;
	uint64_t sender_seq;
	uint64_t global_seq;
	uint64_t stable_seq;
};

/* The 40-byte header; returns the body. */
static inline uint8_t *il_hdr_put(uint8_t *h, const struct il_hdr_fields *f)
{
	h[IL_OFF_VERSION] = IL_VERSION;
	h[IL_OFF_TYPE] = f->type;
	h[IL_OFF_HDR_LEN] = IL_HDR_LEN;
	h[IL_OFF_FLAGS] = f->flags;
	il_put16(h + IL_OFF_GROUP_ID, f->group_id);
	il_put16(h + IL_OFF_MSG_COUNT, f->msg_count);
	il_put32(h + IL_OFF_SENDER_ID, f->sender_id);
	il_put32(h + IL_OFF_EPOCH, f->epoch);
	il_put64(h + IL_OFF_SENDER_SEQ, f->sender_seq);
	il_put64(h + IL_OFF_GLOBAL_SEQ, f->global_seq);
	il_put64(h + IL_OFF_STABLE_SEQ, f->stable_seq);
	return h + IL_HDR_LEN;
}

/* The header's fields (the body starts at h[IL_OFF_HDR_LEN]). */
static inline void il_hdr_get(const uint8_t *h, struct il_hdr_fields *f)
{
	f->type = h[IL_OFF_TYPE];
	f->flags = h[IL_OFF_FLAGS];
	f->group_id = il_get16(h + IL_OFF_GROUP_ID);
	f->msg_count = il_get16(h + IL_OFF_MSG_COUNT);
	f->sender_id = il_get32(h + IL_OFF_SENDER_ID);
	f->epoch = il_get32(h + IL_OFF_EPOCH);
	f->sender_seq = il_get64(h + IL_OFF_SENDER_SEQ);
	f->global_seq = il_get64(h + IL_OFF_GLOBAL_SEQ);
	f->stable_seq = il_get64(h + IL_OFF_STABLE_SEQ);
}

/* The fields a DATA frame changes per frame when it starts as a copy of a
 * template header (the generator's senders). */
static inline void il_hdr_set_data(uint8_t *h, uint16_t msg_count, uint64_t sender_seq)
{
	il_put16(h + IL_OFF_MSG_COUNT, msg_count);
	il_put64(h + IL_OFF_SENDER_SEQ, sender_seq);
}

/* An Interlink message in an untagged Ethernet/IPv4/UDP frame: the 42
 * bytes of il_udp_frame_put, then the header, for a body of body_len
 * bytes. Returns the body, for the caller to fill; a UDP checksum, if
 * wanted, comes after (il_udp_csum_set(f + IL_ETH_HLEN)). The frame is
 * IL_UDP_HDRS_LEN + IL_HDR_LEN + body_len bytes long. */
static inline uint8_t *il_frame_put(uint8_t *f, const struct il_path *p, uint16_t ip_id,
				    const struct il_hdr_fields *h, uint16_t body_len)
{
	return il_hdr_put(il_udp_frame_put(f, p, ip_id, (uint16_t)(IL_HDR_LEN + body_len)), h);
}

/* ---- bodies --------------------------------------------------------- */

/* DATA: one message record's 4 bytes (len, msg_flags 0); the len payload
 * bytes follow. */
static inline uint8_t *il_rec_put(uint8_t *r, uint16_t len)
{
	il_put16(r, len);
	il_put16(r + 2, 0);
	return r + IL_MSG_HDR_LEN;
}

/* A DATA header with one message record, built per frame from a template
 * of the fields that do not change between frames of one group (the
 * sequencer's raw mode: version, type, flags, group, count, epoch, made
 * once by il_hdr_put). The sender id comes as it sits in memory (the raw
 * frame's IPv4 source address). Writes the 44 bytes with 64-bit stores
 * and returns their one's-complement sum as memory-order 32-bit words,
 * unfolded, for an incremental UDP checksum (RFC 1624). */
struct il_hdr1_tmpl {
	uint64_t w0;        /* bytes 0..7: version .. msg_count */
	uint32_t epoch;     /* bytes 12..15, as stored */
	uint64_t fixed_sum; /* the sum of w0 and epoch: the same for every frame */
};

static inline uint64_t il_sum64w(uint64_t w)
{
	return (w & 0xffffffffu) + (w >> 32);
}

static inline void il_hdr1_tmpl_init(struct il_hdr1_tmpl *t, const struct il_hdr_fields *f)
{
	uint8_t h[IL_HDR_LEN];

	il_hdr_put(h, f);
	memcpy(&t->w0, h, 8);
	memcpy(&t->epoch, h + IL_OFF_EPOCH, 4);
	t->fixed_sum = il_sum64w(t->w0) + t->epoch;
}

static inline uint64_t il_hdr1_put(uint8_t *h, const struct il_hdr1_tmpl *t, uint32_t sender_raw,
				   uint64_t sender_seq, uint64_t global_seq, uint64_t stable_seq,
				   uint16_t rec_len)
{
	uint64_t w1 = (uint64_t)t->epoch << 32 | sender_raw; /* little-endian host */
	uint64_t w2 = __builtin_bswap64(sender_seq);
	uint64_t w3 = __builtin_bswap64(global_seq);
	uint64_t w4 = __builtin_bswap64(stable_seq);
	uint32_t r = htons(rec_len); /* msg_flags 0 */

	IL_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "w1 assumes a little-endian host");
	memcpy(h, &t->w0, 8);
	memcpy(h + 8, &w1, 8);
	memcpy(h + 16, &w2, 8);
	memcpy(h + 24, &w3, 8);
	memcpy(h + 32, &w4, 8);
	memcpy(h + IL_HDR_LEN, &r, 4);
	/* w1's epoch half is in fixed_sum: only the sender's address here. */
	return t->fixed_sum + sender_raw + il_sum64w(w2) + il_sum64w(w3) + il_sum64w(w4) + r;
}

/* NAK and UNAVAIL: the inclusive range. */
static inline uint8_t *il_range_put(uint8_t *b, uint64_t first, uint64_t last)
{
	il_put64(b, first);
	il_put64(b + 8, last);
	return b + IL_RANGE_LEN;
}

struct il_range_body {
	uint64_t first_seq, last_seq;
};

static inline int il_range_get(const uint8_t *b, uint32_t len, struct il_range_body *r)
{
	if (len < IL_RANGE_LEN)
		return -1;
	r->first_seq = il_get64(b);
	r->last_seq = il_get64(b + 8);
	return 0;
}

/* ACK, short form. */
static inline uint8_t *il_ack_put(uint8_t *b, uint32_t view_id, uint32_t buffer_free)
{
	il_put32(b, view_id);
	il_put32(b + 4, buffer_free);
	return b + IL_ACK_LEN;
}

/* ACK, long form (WAN groups): the short form, then the RTT echo and the
 * loss-event rate. */
static inline uint8_t *il_ack_tfrc_put(uint8_t *b, uint32_t view_id, uint32_t buffer_free,
				       uint64_t echo_seq, uint32_t delta_us, uint32_t loss_ppm)
{
	il_ack_put(b, view_id, buffer_free);
	il_put64(b + 8, echo_seq);
	il_put32(b + 16, delta_us);
	il_put32(b + 20, loss_ppm);
	return b + IL_ACK_TFRC_LEN;
}

/* An ACK body in either form (wire.h: the length says which). */
struct il_ack_body {
	uint32_t view_id, buffer_free;
	bool tfrc;         /* the long form: the three fields below are set */
	uint64_t echo_seq; /* 0: no RTT sample */
	uint32_t delta_us;
	uint32_t loss_ppm; /* clamped to IL_ACK_PPM_MAX */
};

/* -1 for a body shorter than IL_ACK_LEN; 8 to 23 bytes are the short
 * form (what follows the first 8 is ignored), 24 or more the long one. */
static inline int il_ack_get(const uint8_t *b, uint32_t len, struct il_ack_body *a)
{
	if (len < IL_ACK_LEN)
		return -1;
	a->view_id = il_get32(b);
	a->buffer_free = il_get32(b + 4);
	a->tfrc = len >= IL_ACK_TFRC_LEN;
	if (!a->tfrc) {
		a->echo_seq = 0;
		a->delta_us = a->loss_ppm = 0;
		return 0;
	}
	a->echo_seq = il_get64(b + 8);
	a->delta_us = il_get32(b + 16);
	a->loss_ppm = il_get32(b + 20);
	if (a->loss_ppm > IL_ACK_PPM_MAX)
		a->loss_ppm = IL_ACK_PPM_MAX;
	return 0;
}

static inline uint8_t *il_stable_put(uint8_t *b, uint32_t view_id)
{
	il_put32(b, view_id);
	il_put32(b + 4, 0);
	return b + IL_STABLE_LEN;
}

static inline int il_stable_get(const uint8_t *b, uint32_t len, uint32_t *view_id)
{
	if (len < IL_STABLE_LEN)
		return -1;
	*view_id = il_get32(b);
	return 0;
}

/* JOIN, LEAVE and HEARTBEAT. */
static inline uint8_t *il_member_put(uint8_t *b, uint32_t roles, uint32_t incarnation)
{
	il_put32(b, roles);
	il_put32(b + 4, incarnation);
	return b + IL_MEMBER_MSG_LEN;
}

struct il_member_body {
	uint32_t roles, incarnation;
};

static inline int il_member_get(const uint8_t *b, uint32_t len, struct il_member_body *m)
{
	if (len < IL_MEMBER_MSG_LEN)
		return -1;
	m->roles = il_get32(b);
	m->incarnation = il_get32(b + 4);
	return 0;
}

static inline uint8_t *il_credit_put(uint8_t *b, uint64_t limit_seq, uint32_t window,
				     uint32_t rate_kbps)
{
	il_put64(b, limit_seq);
	il_put32(b + 8, window);
	il_put32(b + 12, rate_kbps);
	return b + IL_CREDIT_LEN;
}

struct il_credit_body {
	uint64_t limit_seq; /* 0: no grant */
	uint32_t window;
	uint32_t rate_kbps; /* 0: no limit */
};

static inline int il_credit_get(const uint8_t *b, uint32_t len, struct il_credit_body *c)
{
	if (len < IL_CREDIT_LEN)
		return -1;
	c->limit_seq = il_get64(b);
	c->window = il_get32(b + 8);
	c->rate_kbps = il_get32(b + 12);
	return 0;
}

/* EPOCH_REPORT (docs/ha.md): the header carries the reported epoch, the
 * group, the receiver (sender_id) and its cumulative point (global_seq). */
static inline uint8_t *il_epoch_report_put(uint8_t *b, uint32_t new_epoch, uint32_t view_id,
					   uint64_t stable_seen, uint64_t high)
{
	il_put32(b, new_epoch);
	il_put32(b + 4, view_id);
	il_put64(b + 8, stable_seen);
	il_put64(b + 16, high);
	return b + IL_EPOCH_REPORT_LEN;
}

struct il_epoch_report_body {
	uint32_t new_epoch, view_id;
	uint64_t stable_seen, high;
};

static inline int il_epoch_report_get(const uint8_t *b, uint32_t len,
				      struct il_epoch_report_body *r)
{
	if (len < IL_EPOCH_REPORT_LEN)
		return -1;
	r->new_epoch = il_get32(b);
	r->view_id = il_get32(b + 4);
	r->stable_seen = il_get64(b + 8);
	r->high = il_get64(b + 16);
	return 0;
}

/* VIEW: the fixed part, then n_members il_view_member_put, then n_senders
 * il_view_sender_put. */
static inline uint32_t il_view_len(uint16_t n_members, uint16_t n_senders)
{
	return IL_VIEW_LEN + (uint32_t)n_members * IL_VIEW_MEMBER_LEN +
	       (uint32_t)n_senders * IL_VIEW_SENDER_LEN;
}

static inline uint8_t *il_view_put(uint8_t *b, uint32_t view_id, uint16_t n_members,
				   uint16_t n_senders)
{
	il_put32(b, view_id);
	il_put16(b + 4, n_members);
	il_put16(b + 6, n_senders);
	return b + IL_VIEW_LEN;
}

static inline uint8_t *il_view_member_put(uint8_t *b, uint32_t member_id, uint32_t roles)
{
	il_put32(b, member_id);
	il_put32(b + 4, roles);
	return b + IL_VIEW_MEMBER_LEN;
}

static inline uint8_t *il_view_sender_put(uint8_t *b, uint32_t sender_id,
					  uint32_t incarnation, uint64_t next_sender_seq)
{
	il_put32(b, sender_id);
	il_put32(b + 4, incarnation);
	il_put64(b + 8, next_sender_seq);
	return b + IL_VIEW_SENDER_LEN;
}

/* A VIEW as read: the fixed part and where its lists are. */
struct il_view_body {
	uint32_t view_id;
	uint16_t n_members, n_senders;
	const uint8_t *members; /* n_members entries: il_view_member_at */
	const uint8_t *senders; /* n_senders entries: il_view_sender_at */
};

/* -1 unless the fixed part and both lists fit in len bytes. */
static inline int il_view_get(const uint8_t *b, uint32_t len, struct il_view_body *v)
{
	if (len < IL_VIEW_LEN)
		return -1;
	v->view_id = il_get32(b);
	v->n_members = il_get16(b + 4);
	v->n_senders = il_get16(b + 6);
	if (len < il_view_len(v->n_members, v->n_senders))
		return -1;
	v->members = b + IL_VIEW_LEN;
	v->senders = v->members + (uint32_t)v->n_members * IL_VIEW_MEMBER_LEN;
	return 0;
}

static inline uint32_t il_view_member_id(const struct il_view_body *v, unsigned i)
{
	return il_get32(v->members + (size_t)i * IL_VIEW_MEMBER_LEN);
}

static inline uint32_t il_view_member_roles(const struct il_view_body *v, unsigned i)
{
	return il_get32(v->members + (size_t)i * IL_VIEW_MEMBER_LEN + 4);
}

/* Whether member_id is among the view's members. */
static inline bool il_view_has(const struct il_view_body *v, uint32_t member_id)
{
	for (unsigned i = 0; i < v->n_members; i++)
		if (il_view_member_id(v, i) == member_id)
			return true;
	return false;
}

static inline uint32_t il_view_sender_id(const struct il_view_body *v, unsigned i)
{
	return il_get32(v->senders + (size_t)i * IL_VIEW_SENDER_LEN);
}

/* The sender's incarnation the appliance knows (0: none yet). */
static inline uint32_t il_view_sender_inc(const struct il_view_body *v, unsigned i)
{
	return il_get32(v->senders + (size_t)i * IL_VIEW_SENDER_LEN + 4);
}

static inline uint64_t il_view_sender_next(const struct il_view_body *v, unsigned i)
{
	return il_get64(v->senders + (size_t)i * IL_VIEW_SENDER_LEN + 8);
}

/* FEC_REPAIR: the body's fields, host byte order (fec_wire.h). The
 * builder writes id_len as IL_FEC_ID_LEN and reserved as zero. */
struct il_fec_fields {
	uint8_t code;
	uint8_t layer;
	uint8_t rate_r;
	uint8_t rate_c;
	uint8_t count;
	uint8_t id_len; /* as read; ignored by the builder */
	uint16_t interleave;
	uint16_t xor_len;
	uint16_t len_code;
	uint64_t x_first;
};

/* The FEC body; the recipe (count ids) and the payload follow it. */
static inline uint8_t *il_fec_body_put(uint8_t *b, const struct il_fec_fields *f)
{
	b[IL_FEC_OFF_CODE] = f->code;
	b[IL_FEC_OFF_LAYER] = f->layer;
	b[IL_FEC_OFF_RATE_R] = f->rate_r;
	b[IL_FEC_OFF_RATE_C] = f->rate_c;
	b[IL_FEC_OFF_COUNT] = f->count;
	b[IL_FEC_OFF_ID_LEN] = IL_FEC_ID_LEN;
	il_put16(b + IL_FEC_OFF_INTERLEAVE, f->interleave);
	il_put16(b + IL_FEC_OFF_XOR_LEN, f->xor_len);
	il_put16(b + IL_FEC_OFF_LEN_CODE, f->len_code);
	il_put32(b + IL_FEC_OFF_RESERVED, 0);
	il_put64(b + IL_FEC_OFF_X_FIRST, f->x_first);
	return b + IL_FEC_BODY_LEN;
}

/* The fixed part only: whether the recipe and payload fit, and what the
 * fields mean for a decoder, is the decoder's to judge. */
static inline int il_fec_body_get(const uint8_t *b, uint32_t len, struct il_fec_fields *f)
{
	if (len < IL_FEC_BODY_LEN)
		return -1;
	f->code = b[IL_FEC_OFF_CODE];
	f->layer = b[IL_FEC_OFF_LAYER];
	f->rate_r = b[IL_FEC_OFF_RATE_R];
	f->rate_c = b[IL_FEC_OFF_RATE_C];
	f->count = b[IL_FEC_OFF_COUNT];
	f->id_len = b[IL_FEC_OFF_ID_LEN];
	f->interleave = il_get16(b + IL_FEC_OFF_INTERLEAVE);
	f->xor_len = il_get16(b + IL_FEC_OFF_XOR_LEN);
	f->len_code = il_get16(b + IL_FEC_OFF_LEN_CODE);
	f->x_first = il_get64(b + IL_FEC_OFF_X_FIRST);
	return 0;
}

/* LEC_REPAIR: the body's fields, host byte order (lec_wire.h). The
 * builder writes id_len as IL_LEC_ID_LEN. */
struct il_lec_fields {
	uint8_t count;
	uint8_t id_len; /* as read; ignored by the builder */
	uint8_t rate_r;
	uint8_t origin;
	uint16_t len;
	uint16_t len_xor;
};

/* The LEC body; the ids (il_lec_id_put) and the payload follow it. */
static inline uint8_t *il_lec_body_put(uint8_t *b, const struct il_lec_fields *f)
{
	b[IL_LEC_OFF_COUNT] = f->count;
	b[IL_LEC_OFF_ID_LEN] = IL_LEC_ID_LEN;
	b[IL_LEC_OFF_RATE_R] = f->rate_r;
	b[IL_LEC_OFF_ORIGIN] = f->origin;
	il_put16(b + IL_LEC_OFF_LEN, f->len);
	il_put16(b + IL_LEC_OFF_LEN_XOR, f->len_xor);
	return b + IL_LEC_BODY_LEN;
}

static inline uint8_t *il_lec_id_put(uint8_t *b, uint16_t group, uint32_t epoch, uint64_t seq)
{
	il_put16(b, group);
	il_put16(b + 2, 0);
	il_put32(b + 4, epoch);
	il_put64(b + 8, seq);
	return b + IL_LEC_ID_LEN;
}

/* A LEC body as read: its fields and where its ids and payload are. */
struct il_lec_body_view {
	struct il_lec_fields f;
	const uint8_t *ids;     /* f.count entries: il_lec_id_at */
	const uint8_t *payload; /* f.len bytes */
};

/* -1 unless the body is whole and exact: id_len IL_LEC_ID_LEN, count
 * 1..IL_LEC_WIRE_MAX_IDS, len at least 1, and len bytes of payload
 * ending the datagram. What the ids mean is the decoder's to judge. */
static inline int il_lec_body_get(const uint8_t *b, uint32_t len, struct il_lec_body_view *v)
{
	v->ids = v->payload = NULL;
	if (len < IL_LEC_BODY_LEN)
		return -1;
	v->f.count = b[IL_LEC_OFF_COUNT];
	v->f.id_len = b[IL_LEC_OFF_ID_LEN];
	v->f.rate_r = b[IL_LEC_OFF_RATE_R];
	v->f.origin = b[IL_LEC_OFF_ORIGIN];
	v->f.len = il_get16(b + IL_LEC_OFF_LEN);
	v->f.len_xor = il_get16(b + IL_LEC_OFF_LEN_XOR);
	if (v->f.id_len != IL_LEC_ID_LEN || v->f.count == 0 ||
	    v->f.count > IL_LEC_WIRE_MAX_IDS || v->f.len == 0 ||
	    len != IL_LEC_BODY_LEN + (uint32_t)v->f.count * IL_LEC_ID_LEN + v->f.len)
		return -1;
	v->ids = b + IL_LEC_BODY_LEN;
	v->payload = v->ids + (uint32_t)v->f.count * IL_LEC_ID_LEN;
	return 0;
}

/* Id i of a body read by il_lec_body_get (reserved: what the sender put
 * there, 0 when well-formed). */
static inline void il_lec_id_at(const struct il_lec_body_view *v, unsigned i, uint16_t *group,
				uint16_t *reserved, uint32_t *epoch, uint64_t *seq)
{
	const uint8_t *p = v->ids + (size_t)i * IL_LEC_ID_LEN;

	*group = il_get16(p);
	*reserved = il_get16(p + 2);
	*epoch = il_get32(p + 4);
	*seq = il_get64(p + 8);
}

#endif /* INTERLINK_WIRE_MSG_H */
