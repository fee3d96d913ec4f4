/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Interlink wire format: the single source of truth.
 *
 * docs/wire-format.md describes every message and field, and the Scapy
 * layers in python/interlink_scapy/ dissect them; tests/conformance/
 * test_wire_contract.py fails when the three disagree (it compares the
 * output of tools/il-wire-dump, built from this header, with both).
 *
 * Frames are Ethernet / IPv4 / UDP / Interlink header / body. Every
 * multi-byte field is in network byte order. The header is 40 bytes and
 * lands at offset 42 of an untagged frame, so nothing in it is naturally
 * aligned: always access it through the il_getN and il_putN helpers below.
 */
#ifndef INTERLINK_WIRE_H
#define INTERLINK_WIRE_H

#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#ifdef __cplusplus
#define IL_STATIC_ASSERT static_assert
#else
#define IL_STATIC_ASSERT _Static_assert
#endif

#define IL_VERSION 1
/* UDP destination port of native Interlink traffic (configurable). */
#define IL_UDP_PORT_DEFAULT 7400

/* Message types. Numbers are stable forever; reserved ones are
 * documented in docs/wire-format.md with the issue that fills them. */
enum il_type {
	IL_T_DATA = 1,       /* one or more packed application messages */
	IL_T_NAK = 2,        /* receiver asks for a range of global seqs */
	IL_T_UNAVAIL = 3,    /* appliance: range is no longer available */
	IL_T_ACK = 4,        /* reserved: cumulative receiver ACK */
	IL_T_STABLE = 5,     /* reserved: stability watermark (idle) */
	IL_T_JOIN = 6,       /* reserved: member asks to join a group */
	IL_T_LEAVE = 7,      /* reserved: member leaves a group */
	IL_T_HEARTBEAT = 8,  /* reserved: liveness for failure detection */
	IL_T_VIEW = 9,       /* reserved: new view (membership) */
	IL_T_CREDIT = 10,    /* reserved: flow-control credit grant */
	IL_T_FEC_REPAIR = 11, /* reserved: Maelstrom layered-XOR repair */
	IL_T_LEC_REPAIR = 12, /* Ricochet lateral repair (lec_wire.h) */
	IL_T_FTCP_LOG = 13,  /* reserved: FT-TCP log record / logger ack */
	IL_T_EPOCH_REPORT = 14, /* receiver -> appliance: where it stands in an
				 * epoch that a newer one replaces (docs/ha.md) */
	IL_T_COUNT           /* first unassigned number */
};

/* Header flags. */
#define IL_F_STAMPED 0x01      /* epoch and global_seq were set by the appliance */
#define IL_F_RETRANS 0x02      /* reserved: frame is a retransmission */
#define IL_F_STABLE_VALID 0x04 /* stable_seq carries a watermark */
#define IL_F_RAW 0x08          /* header inserted by the appliance (raw mode) */
#define IL_F_FIFO_START 0x10   /* the first frame the appliance stamped of a sender's
				* new incarnation: its FIFO (sender_seq) restarts here */
#define IL_F_AUTH 0x20        /* control messages: the header carries the AUTH
				* option (struct il_auth_opt) at offset 40 */
#define IL_F_KNOWN_MASK 0x3f   /* bits 6..7 are reserved and must be zero */
/* Every flag but AUTH is the appliance's to say: it overwrites all of them
 * on each DATA frame it stamps, whatever the sender put there. */
#define IL_F_APPLIANCE_OWNED 0x1f

/* Common header, 40 bytes. Offsets are part of the contract. */
struct il_hdr {
	uint8_t version;     /*  0: IL_VERSION */
	uint8_t type;        /*  1: enum il_type */
	uint8_t hdr_len;     /*  2: header bytes incl. options, >= 40, multiple of 4 */
	uint8_t flags;       /*  3: IL_F_* */
	uint16_t group_id;   /*  4: group (independent sequence space) */
	uint16_t msg_count;  /*  6: DATA: packed messages; other types: 0 */
	uint32_t sender_id;  /*  8: sending host (raw mode: IPv4 source) */
	uint32_t epoch;      /* 12: sequencer incarnation */
	uint64_t sender_seq; /* 16: per-sender FIFO seq of the first message;
			      * CREDIT: != 0, resume point (re-send from it) */
	uint64_t global_seq; /* 24: per-group global seq of the first message */
	uint64_t stable_seq; /* 32: stability watermark when IL_F_STABLE_VALID;
			      * DATA from a sender: its oldest sender_seq not
			      * known stable (0: not given) */
} __attribute__((packed));

#define IL_HDR_LEN 40u
IL_STATIC_ASSERT(sizeof(struct il_hdr) == IL_HDR_LEN, "il_hdr size");

/* DATA body: msg_count records, back to back, no padding:
 *   u16 len, u16 msg_flags (reserved, zero), then len payload bytes.
 * Message i of a frame has global_seq + i and sender_seq + i. */
struct il_msg {
	uint16_t len;
	uint16_t msg_flags;
} __attribute__((packed));
#define IL_MSG_HDR_LEN 4u
IL_STATIC_ASSERT(sizeof(struct il_msg) == IL_MSG_HDR_LEN, "il_msg size");

/* NAK and UNAVAIL body: an inclusive range of global sequence numbers
 * of group_id. In a NAK, sender_id is the requesting receiver; in an
 * UNAVAIL, sender_id echoes the requester and global_seq holds the
 * oldest sequence the appliance can still retransmit. */
struct il_range {
	uint64_t first_seq;
	uint64_t last_seq;
} __attribute__((packed));
#define IL_RANGE_LEN 16u
IL_STATIC_ASSERT(sizeof(struct il_range) == IL_RANGE_LEN, "il_range size");

/* ---- control messages (issue 5) -------------------------------------
 * Hosts send ACK, JOIN, LEAVE and HEARTBEAT into the appliance's "in"
 * port; the data plane hands them to the control process and does not
 * forward them. The control process answers with VIEW, STABLE and CREDIT,
 * which the data plane multicasts to the group on "out". Sequence numbers
 * in ACK and STABLE are exclusive: "every global_seq below this value". */

/* ACK body. Header: group_id; sender_id = the receiver; global_seq = the
 * receiver's next expected global sequence (all below it are held). */
struct il_ack {
	uint32_t view_id;     /* the view the receiver is in */
	uint32_t buffer_free; /* messages it can still buffer; 0xffffffff: no limit */
} __attribute__((packed));
#define IL_ACK_LEN 8u
IL_STATIC_ASSERT(sizeof(struct il_ack) == IL_ACK_LEN, "il_ack size");

/* ACK body, long form (WAN groups: the TCP-friendly rate, thesis ch. 4).
 * The body's length says which form it is: at least IL_ACK_TFRC_LEN bytes
 * is this one, 8 to 23 the short one above (what follows is ignored).
 * The first 8 bytes are the short form's. The appliance turns echo_seq
 * and delta_us into an RTT sample (thesis Fig. 4.3: RTT = (T_now - T_out)
 * - delta, T_out being when it stamped frame echo_seq), and loss_ppm is
 * the receiver's loss-event rate p (section 4.3.2) for eq. 4.1. */
struct il_ack_tfrc {
	uint32_t view_id;     /* as in il_ack */
	uint32_t buffer_free; /* as in il_ack */
	uint64_t echo_seq;    /* global_seq (header) of the DATA frame delta_us
			       * refers to: one that raised the receiver's highest
			       * sequence, so never a repair; 0: no RTT sample */
	uint32_t delta_us;    /* its hold time: from that frame's arrival to
			       * this ACK's sending, microseconds */
	uint32_t loss_ppm;    /* loss-event rate p x 10^6, 0..10^6; 0: no loss event */
} __attribute__((packed));
#define IL_ACK_TFRC_LEN 24u
IL_STATIC_ASSERT(sizeof(struct il_ack_tfrc) == IL_ACK_TFRC_LEN, "il_ack_tfrc size");
#define IL_ACK_PPM_MAX 1000000u

/* STABLE body. Header: group_id; flags STABLE_VALID; stable_seq = the
 * watermark (every live receiver holds all below it); global_seq = the
 * group's next sequence, so an idle receiver learns of a lost tail. */
struct il_stable {
	uint32_t view_id;
	uint32_t reserved;
} __attribute__((packed));
#define IL_STABLE_LEN 8u
IL_STATIC_ASSERT(sizeof(struct il_stable) == IL_STABLE_LEN, "il_stable size");

/* JOIN, LEAVE and HEARTBEAT body. Header: group_id; sender_id = member. */
#define IL_ROLE_SENDER 0x1u
#define IL_ROLE_RECEIVER 0x2u
struct il_member_msg {
	uint32_t roles;       /* IL_ROLE_* */
	uint32_t incarnation; /* changes at every restart of the member */
} __attribute__((packed));
#define IL_MEMBER_MSG_LEN 8u
IL_STATIC_ASSERT(sizeof(struct il_member_msg) == IL_MEMBER_MSG_LEN, "il_member_msg size");

/* VIEW body: the fixed part, then n_members il_view_member, then n_senders
 * il_view_sender. Header: group_id; global_seq = the view's start: the
 * first global sequence delivered in this view (Fast-Join start point). */
struct il_view {
	uint32_t view_id;
	uint16_t n_members;
	uint16_t n_senders;
} __attribute__((packed));
#define IL_VIEW_LEN 8u
IL_STATIC_ASSERT(sizeof(struct il_view) == IL_VIEW_LEN, "il_view size");

struct il_view_member {
	uint32_t member_id;
	uint32_t roles;
} __attribute__((packed));
#define IL_VIEW_MEMBER_LEN 8u
IL_STATIC_ASSERT(sizeof(struct il_view_member) == IL_VIEW_MEMBER_LEN, "il_view_member size");

/* Each sender's next FIFO sequence at the view's start, in its incarnation
 * (from its last JOIN or HEARTBEAT; 0: not known to the appliance). */
struct il_view_sender {
	uint32_t sender_id;
	uint32_t incarnation;
	uint64_t next_sender_seq;
} __attribute__((packed));
#define IL_VIEW_SENDER_LEN 16u
IL_STATIC_ASSERT(sizeof(struct il_view_sender) == IL_VIEW_SENDER_LEN, "il_view_sender size");

/* CREDIT body. Header: group_id; sender_id = the sender it is for;
 * sender_seq != 0: a resume notice, the sender_seq the sequencer expects
 * next from it (frames from there on were not stamped: send them again). */
struct il_credit {
	uint64_t limit_seq; /* the sender may send sender_seq below this; 0: no grant */
	uint32_t window;    /* the window behind it, in messages */
	uint32_t rate_kbps; /* WAN groups: this sender's share of the TCP-friendly
			     * rate (max-min split); 0: no limit */
} __attribute__((packed));
#define IL_CREDIT_LEN 16u
IL_STATIC_ASSERT(sizeof(struct il_credit) == IL_CREDIT_LEN, "il_credit size");

/* AUTH option: with IL_F_AUTH set, the header is at least IL_AUTH_HDR_LEN
 * bytes and these 28 follow the 40 fixed ones. mac is a keyed BLAKE2b-128
 * of header bytes 0..51 (the fixed header, key_id and counter) followed
 * by everything after the header (the body); options beyond this one and
 * the mac itself are not covered. counter increases with every message
 * of one sender (sender_id), across its restarts (docs/wire-format.md). */
struct il_auth_opt {
	uint32_t key_id;  /* which key of the key file */
	uint64_t counter; /* per sender, strictly increasing: replay window */
	uint8_t mac[16];
} __attribute__((packed));
#define IL_AUTH_OPT_LEN 28u
#define IL_AUTH_MAC_LEN 16u
#define IL_AUTH_HDR_LEN (IL_HDR_LEN + IL_AUTH_OPT_LEN)
#define IL_OFF_AUTH_KEY_ID 40
#define IL_OFF_AUTH_COUNTER 44
#define IL_OFF_AUTH_MAC 52
IL_STATIC_ASSERT(sizeof(struct il_auth_opt) == IL_AUTH_OPT_LEN, "il_auth_opt size");
IL_STATIC_ASSERT(IL_OFF_AUTH_MAC - IL_HDR_LEN == __builtin_offsetof(struct il_auth_opt, mac),
		 "auth mac offset");

/* EPOCH_REPORT body (docs/ha.md, "The cut of the old epoch"). A receiver
 * that sees a newer epoch than its own reports, per group it receives in,
 * where it stands in its own (older) epoch. Header: epoch = the epoch
 * reported on; group_id; sender_id = the receiver; global_seq = its
 * cumulative point in that epoch (it holds every sequence below). */
struct il_epoch_report {
	uint32_t new_epoch;   /* the newer epoch it answers */
	uint32_t view_id;     /* the view it was in */
	uint64_t stable_seen; /* the highest watermark it saw in the reported epoch */
	uint64_t high;        /* one past the highest sequence it holds */
} __attribute__((packed));
#define IL_EPOCH_REPORT_LEN 24u
IL_STATIC_ASSERT(sizeof(struct il_epoch_report) == IL_EPOCH_REPORT_LEN, "il_epoch_report size");

/* Epochs compare in serial-number arithmetic (RFC 1982, 32 bits): a is
 * newer than b when it is ahead by less than 2^31. Epochs are seconds
 * since 1970 or a successor's +1, so this stays right when that wraps. */
static inline int il_epoch_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* Limits the parser enforces. */
#define IL_MAX_MSGS_PER_FRAME 4096u
#define IL_NAK_MAX_SPAN 65536u /* at most this many seqs per NAK */

/* Byte offsets of the fields, for checksum arithmetic and the contract
 * test (keep in step with struct il_hdr; _Static_asserts below). */
#define IL_OFF_VERSION 0
#define IL_OFF_TYPE 1
#define IL_OFF_HDR_LEN 2
#define IL_OFF_FLAGS 3
#define IL_OFF_GROUP_ID 4
#define IL_OFF_MSG_COUNT 6
#define IL_OFF_SENDER_ID 8
#define IL_OFF_EPOCH 12
#define IL_OFF_SENDER_SEQ 16
#define IL_OFF_GLOBAL_SEQ 24
#define IL_OFF_STABLE_SEQ 32

#define IL__OFF_OK(f, o) IL_STATIC_ASSERT(__builtin_offsetof(struct il_hdr, f) == (o), #f)
IL__OFF_OK(version, IL_OFF_VERSION);
IL__OFF_OK(type, IL_OFF_TYPE);
IL__OFF_OK(hdr_len, IL_OFF_HDR_LEN);
IL__OFF_OK(flags, IL_OFF_FLAGS);
IL__OFF_OK(group_id, IL_OFF_GROUP_ID);
IL__OFF_OK(msg_count, IL_OFF_MSG_COUNT);
IL__OFF_OK(sender_id, IL_OFF_SENDER_ID);
IL__OFF_OK(epoch, IL_OFF_EPOCH);
IL__OFF_OK(sender_seq, IL_OFF_SENDER_SEQ);
IL__OFF_OK(global_seq, IL_OFF_GLOBAL_SEQ);
IL__OFF_OK(stable_seq, IL_OFF_STABLE_SEQ);
#undef IL__OFF_OK

/* Unaligned big-endian accessors. */
static inline uint16_t il_get16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return ntohs(v);
}
static inline uint32_t il_get32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}
static inline uint64_t il_get64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}
static inline void il_put16(void *p, uint16_t v)
{
	v = htons(v);
	memcpy(p, &v, 2);
}
static inline void il_put32(void *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}
static inline void il_put64(void *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

/* The Ethernet address of an IPv4 multicast group (RFC 1112: 01:00:5e and
 * the low 23 bits of the address). addr is in host byte order. */
static inline void il_mcast_mac(uint8_t *mac, uint32_t addr)
{
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)((addr >> 16) & 0x7f);
	mac[4] = (uint8_t)(addr >> 8);
	mac[5] = (uint8_t)addr;
}

static inline const char *il_type_name(unsigned t)
{
	switch (t) {
	case IL_T_DATA: return "DATA";
	case IL_T_NAK: return "NAK";
	case IL_T_UNAVAIL: return "UNAVAIL";
	case IL_T_ACK: return "ACK";
	case IL_T_STABLE: return "STABLE";
	case IL_T_JOIN: return "JOIN";
	case IL_T_LEAVE: return "LEAVE";
	case IL_T_HEARTBEAT: return "HEARTBEAT";
	case IL_T_VIEW: return "VIEW";
	case IL_T_CREDIT: return "CREDIT";
	case IL_T_FEC_REPAIR: return "FEC_REPAIR";
	case IL_T_LEC_REPAIR: return "LEC_REPAIR";
	case IL_T_FTCP_LOG: return "FTCP_LOG";
	case IL_T_EPOCH_REPORT: return "EPOCH_REPORT";
	default: return "unknown";
	}
}

#endif /* INTERLINK_WIRE_H */
