/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Wire format of Ricochet lateral repairs, LEC_REPAIR (docs/lec.md and
 * docs/wire-format.md, "LEC_REPAIR body").
 *
 * What LEC protects is a stamped DATA frame as every receiver gets it:
 * the UDP payload from the Interlink header to the end of the last
 * packed message. Its id is (epoch, group, global_seq of its first
 * message), which no other frame of the group shares, and a NAK
 * retransmission is the same frame byte for byte.
 *
 * A repair is one UDP datagram to one member (unicast, port 7400): the
 * 40-byte Interlink header with type IL_T_LEC_REPAIR, the LEC body below,
 * `count` ids, then `len` payload bytes, the XOR of the covered frames,
 * each zero-padded to the longest. Nothing else follows: the datagram
 * length is exact. Every multi-byte field is in network byte order; read
 * it with the il_getN helpers (wire_msg.h has the builders and readers).
 *
 * Interlink header fields in a repair:
 *   group_id   = the group of its first id (for filters and tools; the
 *                ids name the groups)
 *   msg_count  = 0
 *   sender_id  = the member that made it; 0 when the appliance did
 *   epoch      = 0 (each id carries its own)
 *   sender_seq = its maker's repair number, from 1 (lost repairs can be
 *                counted by the receiver of a steady stream)
 *   global_seq, stable_seq, flags = 0 (AUTH is allowed)
 */
#ifndef INTERLINK_LEC_WIRE_H
#define INTERLINK_LEC_WIRE_H

#include <stdint.h>

#include <interlink/wire.h>

#define IL_LEC_ORIGIN_MEMBER 0    /* receiver-side LEC: a member made it */
#define IL_LEC_ORIGIN_APPLIANCE 1 /* appliance-side LEC: the `lec` stage */
#define IL_LEC_WIRE_MAX_IDS 32    /* ids in one repair (IL_LEC_MAX_R) */

/* One id: a DATA frame of the group. */
struct il_lec_id_wire {
	uint16_t group;    /*  0 */
	uint16_t reserved; /*  2: zero */
	uint32_t epoch;    /*  4: the sequencer incarnation that stamped it */
	uint64_t seq;      /*  8: global_seq of the frame (its first message) */
} __attribute__((packed));
#define IL_LEC_ID_LEN 16u
IL_STATIC_ASSERT(sizeof(struct il_lec_id_wire) == IL_LEC_ID_LEN, "il_lec_id_wire size");

/* LEC body, right after the Interlink header (at il_hdr.hdr_len). */
struct il_lec_body {
	uint8_t count;    /* 0: ids that follow, 1..IL_LEC_WIRE_MAX_IDS */
	uint8_t id_len;   /* 1: bytes per id, IL_LEC_ID_LEN */
	uint8_t rate_r;   /* 2: r of the maker (count < r: a bin flushed early) */
	uint8_t origin;   /* 3: IL_LEC_ORIGIN_* */
	uint16_t len;     /* 4: payload bytes: the longest frame covered */
	uint16_t len_xor; /* 6: XOR of the covered frames' lengths */
} __attribute__((packed));
#define IL_LEC_BODY_LEN 8u
IL_STATIC_ASSERT(sizeof(struct il_lec_body) == IL_LEC_BODY_LEN, "il_lec_body size");

#define IL_LEC_OFF_COUNT 0
#define IL_LEC_OFF_ID_LEN 1
#define IL_LEC_OFF_RATE_R 2
#define IL_LEC_OFF_ORIGIN 3
#define IL_LEC_OFF_LEN 4
#define IL_LEC_OFF_LEN_XOR 6

#define IL__LEC_OFF_OK(f, o) \
	IL_STATIC_ASSERT(__builtin_offsetof(struct il_lec_body, f) == (o), #f)
IL__LEC_OFF_OK(count, IL_LEC_OFF_COUNT);
IL__LEC_OFF_OK(id_len, IL_LEC_OFF_ID_LEN);
IL__LEC_OFF_OK(rate_r, IL_LEC_OFF_RATE_R);
IL__LEC_OFF_OK(origin, IL_LEC_OFF_ORIGIN);
IL__LEC_OFF_OK(len, IL_LEC_OFF_LEN);
IL__LEC_OFF_OK(len_xor, IL_LEC_OFF_LEN_XOR);
#undef IL__LEC_OFF_OK
IL_STATIC_ASSERT(__builtin_offsetof(struct il_lec_id_wire, epoch) == 4, "lec id epoch");
IL_STATIC_ASSERT(__builtin_offsetof(struct il_lec_id_wire, seq) == 8, "lec id seq");

/* The UDP payload of a repair of `count` ids and `len` payload bytes. */
#define IL_LEC_REPAIR_LEN(count, len) \
	(IL_HDR_LEN + IL_LEC_BODY_LEN + (count) * IL_LEC_ID_LEN + (len))

/* The longest DATA frame (UDP payload) whose repairs of r ids fit a UDP
 * payload of udp_max bytes (mtu - 28): what LEC can protect. Senders of
 * groups with LEC leave this room (docs/lec.md, "Frames and MTU"). */
#define IL_LEC_MAX_FRAME(udp_max, r) \
	((udp_max) - IL_HDR_LEN - IL_LEC_BODY_LEN - (r) * IL_LEC_ID_LEN)

#endif /* INTERLINK_LEC_WIRE_H */
