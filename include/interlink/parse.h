/* SPDX-License-Identifier: BSD-3-Clause
 * Frame parser (part of the il_wire library): Ethernet [802.1Q] / IPv4 /
 * UDP / Interlink, or the Interlink layer alone on a UDP payload. Pure
 * functions over bytes (no DPDK), so the fuzzer and the unit tests drive
 * them directly. They give a verdict; wire_msg.h reads the fields of what
 * they accepted.
 */
#ifndef INTERLINK_PARSE_H
#define INTERLINK_PARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <interlink/wire.h>

/* What a frame is. Values below IL_V_DROP_FIRST are accepted. */
enum il_verdict {
	IL_V_PASS = 0,     /* not Interlink: pass through untouched */
	IL_V_UDP,          /* IPv4/UDP, not the Interlink port: raw-mode candidate */
	IL_V_DATA,         /* valid native DATA */
	IL_V_NAK,          /* valid NAK */
	IL_V_CONTROL,      /* valid Interlink message of another known type */
	IL_V_DROP_FIRST,
	IL_V_DROP_SHORT = IL_V_DROP_FIRST, /* frame shorter than its headers */
	IL_V_DROP_BAD_IP,      /* bad IHL or total length */
	IL_V_DROP_FRAGMENT,    /* fragmented Interlink datagram */
	IL_V_DROP_BAD_UDP_LEN, /* UDP length disagrees with IP or frame */
	IL_V_DROP_VERSION,     /* unknown Interlink version */
	IL_V_DROP_HDR_LEN,     /* header length < 40, not /4, or past the end */
	IL_V_DROP_TYPE,        /* unknown message type */
	IL_V_DROP_FLAGS,       /* reserved flag bits set */
	IL_V_DROP_TRUNCATED,   /* packed messages run past the datagram */
	IL_V_DROP_PACKING,     /* bad msg_count or bytes left after the last message */
	IL_V_DROP_BAD_NAK,     /* NAK body short, reversed or too wide */
	IL_V_COUNT
};

extern const char *const il_verdict_names[IL_V_COUNT];

struct il_parsed {
	uint16_t l3_off;      /* IPv4 header */
	uint16_t l4_off;      /* UDP header */
	uint16_t il_off;      /* UDP payload (the Interlink header, if any) */
	uint16_t udp_len;     /* from the UDP header, incl. its 8 bytes */
	uint16_t payload_len; /* UDP payload bytes */
	uint8_t type;         /* Interlink type when DATA/NAK/CONTROL */
	uint8_t hdr_len;
	uint16_t msg_count;
	uint16_t group_id;
	uint32_t dst_ip;      /* host order */
	uint16_t dst_port;    /* host order */
};

/* The common cases in few loads: untagged IPv4 without options, UDP,
 * unfragmented; then either a version-1 DATA header of 40 bytes with no
 * reserved flags and one message, to the Interlink port (IL_V_DATA), or
 * any datagram to another port (IL_V_UDP: a raw-mode candidate). Returns
 * the verdict, or IL_V_PASS for "not decided here": anything else, valid
 * or not, takes the general path (il_parse_frame_general), which gives the
 * same answers for these frames (test_parse.c checks it field by field).
 * Inline, so that the data plane's classify runs it in its own loop, the
 * fields in registers and not through a call; il_parse_frame is the two
 * in turn. */
static inline enum il_verdict il_parse_frame_fast(const uint8_t *f, uint32_t len,
						   uint16_t il_port, struct il_parsed *p)
{
	uint32_t w, ipw;
	uint16_t tot, ulen, dport, mlen;

	if (len < 42)
		return IL_V_PASS;
	memcpy(&w, f + 12, 4);       /* ethertype, version/IHL, TOS */
	memcpy(&ipw, f + 14 + 6, 4); /* flags/fragment offset, TTL, protocol */
	/* 08 00 45 xx; fragment bits (not DF) clear; protocol 17. */
	if ((w & 0x00ffffffu) != 0x00450008u || (ipw & 0xff00ff3fu) != 0x11000000u)
		return IL_V_PASS;
	tot = il_get16(f + 16);
	ulen = il_get16(f + 38);
	dport = il_get16(f + 36);
	if (ulen != (uint16_t)(tot - 20) || ulen < 8 || len < 14u + tot)
		return IL_V_PASS;
	p->l3_off = 14;
	p->l4_off = 34;
	p->il_off = 42;
	p->udp_len = ulen;
	p->payload_len = (uint16_t)(ulen - 8);
	p->dst_ip = il_get32(f + 30);
	p->dst_port = dport;
	if (dport != il_port)
		return IL_V_UDP;
	if (ulen < 8 + IL_HDR_LEN + IL_MSG_HDR_LEN)
		return IL_V_PASS;
	const uint8_t *h = f + 42;
	memcpy(&w, h, 4); /* version, type, hdr_len, flags */
	if ((w & 0xf0ffffffu) != (IL_VERSION | IL_T_DATA << 8 | IL_HDR_LEN << 16))
		return IL_V_PASS;
	if (il_get16(h + IL_OFF_MSG_COUNT) != 1)
		return IL_V_PASS;
	mlen = il_get16(h + IL_HDR_LEN);
	if ((uint32_t)mlen + 8 + IL_HDR_LEN + IL_MSG_HDR_LEN != ulen)
		return IL_V_PASS;
	p->type = IL_T_DATA;
	p->hdr_len = IL_HDR_LEN;
	p->msg_count = 1;
	p->group_id = il_get16(h + IL_OFF_GROUP_ID);
	return IL_V_DATA;
}

enum il_verdict il_parse_frame(const uint8_t *frame, uint32_t len, uint16_t il_port,
			       struct il_parsed *out);

/* What il_parse_frame does when il_parse_frame_fast did not decide. */
enum il_verdict il_parse_frame_general(const uint8_t *frame, uint32_t len, uint16_t il_port,
				       struct il_parsed *out);

/* The Interlink layer alone: h is a whole UDP payload of len bytes, as a
 * kernel socket delivers it. The same checks and verdicts as
 * il_parse_frame gives the payload of a frame to the Interlink port
 * (IL_V_DATA, IL_V_NAK, IL_V_CONTROL, IL_V_DROP_SHORT for a payload too
 * short for the header, and the drops from IL_V_DROP_VERSION on);
 * il_off, l3_off, l4_off, dst_ip and dst_port are 0. */
enum il_verdict il_parse_payload(const uint8_t *h, uint32_t len, struct il_parsed *out);

/* Validates packed DATA records: 0 or an IL_V_DROP_* verdict. */
enum il_verdict il_check_packing(const uint8_t *body, uint32_t body_len, uint16_t msg_count);

#endif
