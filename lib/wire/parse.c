/* SPDX-License-Identifier: BSD-3-Clause
 * The frame parser (include/interlink/parse.h): Ethernet [802.1Q] / IPv4 /
 * UDP, then the Interlink layer, which also stands alone for a UDP payload
 * that a kernel socket handed over (il_parse_payload).
 */
#include <interlink/frame.h>
#include <interlink/parse.h>
#include <interlink/wire.h>


const char *const il_verdict_names[IL_V_COUNT] = {
	[IL_V_PASS] = "pass",
	[IL_V_UDP] = "udp",
	[IL_V_DATA] = "data",
	[IL_V_NAK] = "nak",
	[IL_V_CONTROL] = "control",
	[IL_V_DROP_SHORT] = "drop_short_frame",
	[IL_V_DROP_BAD_IP] = "drop_bad_ip",
	[IL_V_DROP_FRAGMENT] = "drop_fragment",
	[IL_V_DROP_BAD_UDP_LEN] = "drop_bad_udp_len",
	[IL_V_DROP_VERSION] = "drop_bad_version",
	[IL_V_DROP_HDR_LEN] = "drop_bad_hdr_len",
	[IL_V_DROP_TYPE] = "drop_unknown_type",
	[IL_V_DROP_FLAGS] = "drop_bad_flags",
	[IL_V_DROP_TRUNCATED] = "drop_truncated_packing",
	[IL_V_DROP_PACKING] = "drop_bad_packing",
	[IL_V_DROP_BAD_NAK] = "drop_bad_nak",
};

enum il_verdict il_check_packing(const uint8_t *body, uint32_t body_len, uint16_t msg_count)
{
	uint32_t off = 0;

	if (msg_count == 0 || msg_count > IL_MAX_MSGS_PER_FRAME)
		return IL_V_DROP_PACKING;
	for (uint16_t i = 0; i < msg_count; i++) {
		if (body_len - off < IL_MSG_HDR_LEN)
			return IL_V_DROP_TRUNCATED;
		uint32_t mlen = il_get16(body + off);
		off += IL_MSG_HDR_LEN;
		if (body_len - off < mlen)
			return IL_V_DROP_TRUNCATED;
		off += mlen;
	}
	return off == body_len ? 0 : IL_V_DROP_PACKING;
}

/* The Interlink layer: the header at h and its body, plen bytes in all
 * (the whole UDP payload). Fills type, hdr_len, group_id and msg_count. */
static inline enum il_verdict parse_il(const uint8_t *h, uint32_t plen, struct il_parsed *p)
{
	if (plen < 4)
		return IL_V_DROP_SHORT;
	if (h[IL_OFF_VERSION] != IL_VERSION)
		return IL_V_DROP_VERSION;
	uint32_t hl = h[IL_OFF_HDR_LEN];
	if (hl < IL_HDR_LEN || (hl & 3u))
		return IL_V_DROP_HDR_LEN;
	if (plen < IL_HDR_LEN)
		return IL_V_DROP_SHORT;
	if (hl > plen)
		return IL_V_DROP_HDR_LEN;
	uint8_t type = h[IL_OFF_TYPE];
	if (type == 0 || type >= IL_T_COUNT)
		return IL_V_DROP_TYPE;
	if (h[IL_OFF_FLAGS] & ~IL_F_KNOWN_MASK)
		return IL_V_DROP_FLAGS;
	/* AUTH is for control messages, and needs room for its option. DATA
	 * is stamped in flight, so no MAC of the sender's could cover it. */
	if (h[IL_OFF_FLAGS] & IL_F_AUTH) {
		if (type == IL_T_DATA)
			return IL_V_DROP_FLAGS;
		if (hl < IL_AUTH_HDR_LEN)
			return IL_V_DROP_HDR_LEN;
	}
	p->type = type;
	p->hdr_len = (uint8_t)hl;
	p->group_id = il_get16(h + IL_OFF_GROUP_ID);
	p->msg_count = il_get16(h + IL_OFF_MSG_COUNT);

	switch (type) {
	case IL_T_DATA: {
		enum il_verdict v = il_check_packing(h + hl, plen - hl, p->msg_count);
		return v ? v : IL_V_DATA;
	}
	case IL_T_NAK: {
		if (plen - hl < IL_RANGE_LEN)
			return IL_V_DROP_BAD_NAK;
		uint64_t first = il_get64(h + hl);
		uint64_t last = il_get64(h + hl + 8);
		if (first == 0 || last < first || last - first >= IL_NAK_MAX_SPAN)
			return IL_V_DROP_BAD_NAK;
		return IL_V_NAK;
	}
	default:
		return IL_V_CONTROL;
	}
}

/* The common cases in few loads: untagged IPv4 without options, UDP,
 * unfragmented; then either a version-1 DATA header of 40 bytes with no
 * reserved flags and one message, to the Interlink port (IL_V_DATA), or
 * any datagram to another port (IL_V_UDP: a raw-mode candidate). Returns
 * the verdict, or IL_V_PASS for "not decided here": anything else, valid
 * or not, takes the general path below, which gives the same answers for
 * these frames (test_parse.c checks it field by field). */
static inline enum il_verdict fast_path(const uint8_t *f, uint32_t len, uint16_t il_port,
					struct il_parsed *p)
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

enum il_verdict il_parse_frame(const uint8_t *f, uint32_t len, uint16_t il_port,
			       struct il_parsed *p)
{
	uint32_t off = IL_ETH_HLEN;
	enum il_verdict fast = fast_path(f, len, il_port, p);

	if (fast != IL_V_PASS)
		return fast;

	if (len < IL_ETH_HLEN)
		return IL_V_DROP_SHORT;
	uint16_t et = il_get16(f + 12);
	if (et == IL_ETHERTYPE_VLAN) {
		if (len < IL_ETH_HLEN + IL_VLAN_HLEN)
			return IL_V_DROP_SHORT;
		et = il_get16(f + 16);
		off += IL_VLAN_HLEN;
	}
	if (et != IL_ETHERTYPE_IPV4)
		return IL_V_PASS;

	if (len < off + 20)
		return IL_V_DROP_SHORT;
	const uint8_t *ip = f + off;
	if ((ip[0] >> 4) != 4)
		return IL_V_PASS; /* not really IPv4: not ours to judge */
	uint32_t ihl = (ip[0] & 0x0fu) * 4u;
	uint32_t tot = il_get16(ip + 2);
	if (ihl < 20 || tot < ihl || len < off + ihl)
		return IL_V_DROP_BAD_IP;
	if (ip[9] != IL_IPPROTO_UDP)
		return IL_V_PASS;
	uint16_t frag = il_get16(ip + 6);
	if (frag & IL_IPV4_OFF_MASK)
		return IL_V_PASS; /* a non-first fragment carries no UDP header */
	if (len < off + tot)
		return IL_V_DROP_SHORT;

	p->l3_off = (uint16_t)off;
	p->l4_off = (uint16_t)(off + ihl);
	p->dst_ip = il_get32(ip + 16);
	if (tot - ihl < IL_UDP_HLEN)
		return IL_V_PASS; /* no UDP header to read a port from: not ours */
	const uint8_t *udp = ip + ihl;
	uint32_t ulen = il_get16(udp + 4);
	p->dst_port = il_get16(udp + 2);
	if (ulen < IL_UDP_HLEN || ulen != tot - ihl) {
		/* A UDP length we cannot trust: drop only if it is ours. */
		return p->dst_port == il_port ? IL_V_DROP_BAD_UDP_LEN : IL_V_PASS;
	}
	p->udp_len = (uint16_t)ulen;
	p->il_off = (uint16_t)(p->l4_off + IL_UDP_HLEN);
	p->payload_len = (uint16_t)(ulen - IL_UDP_HLEN);
	if (p->dst_port != il_port)
		return (frag & IL_IPV4_MF) ? IL_V_PASS : IL_V_UDP;
	if (frag & IL_IPV4_MF)
		return IL_V_DROP_FRAGMENT;

	return parse_il(f + p->il_off, p->payload_len, p);
}

enum il_verdict il_parse_payload(const uint8_t *h, uint32_t len, struct il_parsed *p)
{
	p->l3_off = p->l4_off = p->il_off = 0;
	p->dst_ip = 0;
	p->dst_port = 0;
	if (len > UINT16_MAX - IL_UDP_HLEN)
		return IL_V_DROP_BAD_UDP_LEN; /* no UDP datagram is that long */
	p->udp_len = (uint16_t)(len + IL_UDP_HLEN);
	p->payload_len = (uint16_t)len;
	return parse_il(h, len, p);
}
