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

enum il_verdict il_parse_frame(const uint8_t *frame, uint32_t len, uint16_t il_port,
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
