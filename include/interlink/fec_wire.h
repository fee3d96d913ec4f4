/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Wire format of Maelstrom FEC repairs (docs/fec.md, "Wire format").
 *
 * A repair travels between the two appliances of a link pair as one UDP
 * datagram: the 40-byte Interlink header (wire.h) with type
 * IL_T_FEC_REPAIR, then the FEC body below, then `count` packet ids (the
 * recipe), then `xor_len` payload bytes. Nothing else follows: the
 * datagram length is exact. Every multi-byte field is in network byte
 * order; a repair lands at no particular alignment in a frame, so read
 * it with memcpy or the il_getN helpers.
 *
 * Interlink header fields in a repair:
 *   group_id   = link id of the appliance pair (config fec.link_id)
 *   msg_count  = 0
 *   sender_id  = encoding appliance (config fec.sender_id)
 *   epoch      = encoder incarnation; packet numbers (x_first) restart at
 *                0 with every new epoch
 *   sender_seq = repair sequence number of this encoder, from 0, so the
 *                peer can count lost repairs
 *   global_seq, stable_seq, flags = 0
 */
#ifndef INTERLINK_FEC_WIRE_H
#define INTERLINK_FEC_WIRE_H

#include <stdint.h>

#include <interlink/wire.h>

/* Codes (il_fec_body.code). */
#define IL_FEC_CODE_XOR 1 /* layered interleaving: payload = XOR of the recipe */
#define IL_FEC_CODE_RS 2  /* Reed-Solomon parity row `layer` over the recipe */

/*
 * One recipe entry: the transparent identity of an IPv4 packet, the tuple
 * of the Maelstrom paper (source, destination, IP id, IP total length,
 * checksum over the IP payload). Addresses, id and length are copied
 * verbatim from the IPv4 header; csum is the Interlink payload check
 * (docs/fec.md, "Packet identity"), sent big-endian.
 */
struct il_fec_id_wire {
	uint32_t src;    /*  0 */
	uint32_t dst;    /*  4 */
	uint16_t ip_id;  /*  8 */
	uint16_t ip_len; /* 10 */
	uint32_t csum;   /* 12 */
} __attribute__((packed));
#define IL_FEC_ID_LEN 16u
IL_STATIC_ASSERT(sizeof(struct il_fec_id_wire) == IL_FEC_ID_LEN, "il_fec_id_wire size");

/* FEC body, right after the Interlink header (at il_hdr.hdr_len). */
struct il_fec_body {
	uint8_t code;        /*  0: IL_FEC_CODE_* */
	uint8_t layer;       /*  1: XOR: layer 0..c-1; RS: parity row 0..c-1 */
	uint8_t rate_r;      /*  2: r of the encoder */
	uint8_t rate_c;      /*  3: c of the encoder */
	uint8_t count;       /*  4: packets in the recipe, 1..r */
	uint8_t id_len;      /*  5: bytes per recipe entry, IL_FEC_ID_LEN */
	uint16_t interleave; /*  6: interleave of the layer (RS: of the blocks) */
	uint16_t xor_len;    /*  8: payload bytes: the longest packet of the recipe */
	uint16_t len_code;   /* 10: XOR: XOR of the packet lengths;
	                      *     RS: parity row applied to the lengths */
	uint32_t reserved;   /* 12: zero */
	uint64_t x_first;    /* 16: encoder packet number of recipe[0]; recipe[k]
	                      *     is packet x_first + k * interleave */
} __attribute__((packed));
#define IL_FEC_BODY_LEN 24u
IL_STATIC_ASSERT(sizeof(struct il_fec_body) == IL_FEC_BODY_LEN, "il_fec_body size");

#define IL_FEC_OFF_CODE 0
#define IL_FEC_OFF_LAYER 1
#define IL_FEC_OFF_RATE_R 2
#define IL_FEC_OFF_RATE_C 3
#define IL_FEC_OFF_COUNT 4
#define IL_FEC_OFF_ID_LEN 5
#define IL_FEC_OFF_INTERLEAVE 6
#define IL_FEC_OFF_XOR_LEN 8
#define IL_FEC_OFF_LEN_CODE 10
#define IL_FEC_OFF_RESERVED 12
#define IL_FEC_OFF_X_FIRST 16

#define IL__FEC_OFF_OK(f, o) \
	IL_STATIC_ASSERT(__builtin_offsetof(struct il_fec_body, f) == (o), #f)
IL__FEC_OFF_OK(code, IL_FEC_OFF_CODE);
IL__FEC_OFF_OK(layer, IL_FEC_OFF_LAYER);
IL__FEC_OFF_OK(rate_r, IL_FEC_OFF_RATE_R);
IL__FEC_OFF_OK(rate_c, IL_FEC_OFF_RATE_C);
IL__FEC_OFF_OK(count, IL_FEC_OFF_COUNT);
IL__FEC_OFF_OK(id_len, IL_FEC_OFF_ID_LEN);
IL__FEC_OFF_OK(interleave, IL_FEC_OFF_INTERLEAVE);
IL__FEC_OFF_OK(xor_len, IL_FEC_OFF_XOR_LEN);
IL__FEC_OFF_OK(len_code, IL_FEC_OFF_LEN_CODE);
IL__FEC_OFF_OK(reserved, IL_FEC_OFF_RESERVED);
IL__FEC_OFF_OK(x_first, IL_FEC_OFF_X_FIRST);
#undef IL__FEC_OFF_OK

IL_STATIC_ASSERT(__builtin_offsetof(struct il_fec_id_wire, ip_id) == 8, "id ip_id");
IL_STATIC_ASSERT(__builtin_offsetof(struct il_fec_id_wire, csum) == 12, "id csum");

/* Bytes a repair adds in front of its payload: Interlink header, FEC
 * body and a recipe of `count` ids. */
#define IL_FEC_REPAIR_HDR_LEN(count) (IL_HDR_LEN + IL_FEC_BODY_LEN + (count) * IL_FEC_ID_LEN)

/* IPv4 (no options) + UDP headers that carry a repair across the link. */
#define IL_FEC_IP_UDP_LEN 28u

#endif /* INTERLINK_FEC_WIRE_H */
