/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The envelope of every frame Interlink makes: Ethernet, IPv4 (no
 * options) and UDP or TCP headers, written in one place (part of the
 * il_wire library, DPDK-free). wire_build.h puts the Interlink header and
 * bodies inside; parse.h reads them back.
 *
 * Everything here is static inline: the generator's templates, FEC repairs
 * and fabricated TCP segments are built per packet, and the compiler folds
 * a builder called with constants into the same stores as hand-written
 * code. Addresses and ports are passed in host byte order.
 */
#ifndef INTERLINK_FRAME_H
#define INTERLINK_FRAME_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <interlink/csum.h>
#include <interlink/wire.h>

#define IL_ETH_HLEN 14u
#define IL_VLAN_HLEN 4u
#define IL_IPV4_HLEN 20u /* without options, as every frame made here */
#define IL_UDP_HLEN 8u
#define IL_TCP_HLEN 20u  /* without options */
/* Ethernet + IPv4 + UDP: where the UDP payload (the Interlink header)
 * starts in an untagged frame. */
#define IL_UDP_HDRS_LEN (IL_ETH_HLEN + IL_IPV4_HLEN + IL_UDP_HLEN)

#define IL_ETHERTYPE_IPV4 0x0800u
#define IL_ETHERTYPE_VLAN 0x8100u
#define IL_IPPROTO_TCP 6u
#define IL_IPPROTO_UDP 17u
#define IL_IPV4_DF 0x4000u   /* don't fragment, in the flags/offset word */
#define IL_IPV4_MF 0x2000u   /* more fragments */
#define IL_IPV4_OFF_MASK 0x1fffu

#define IL_TCP_F_FIN 0x01u
#define IL_TCP_F_SYN 0x02u
#define IL_TCP_F_RST 0x04u
#define IL_TCP_F_ACK 0x10u

/* Where a frame goes: its Ethernet addresses, IPv4 addresses and UDP (or
 * TCP) ports, and the IPv4 fields that differ between the frames we make
 * (TTL, don't-fragment). */
struct il_path {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	uint32_t src_ip;
	uint32_t dst_ip;
	uint16_t src_port;
	uint16_t dst_port;
	uint8_t ttl;
	bool df;
};

/* To the IPv4 multicast group addr: its address and Ethernet address. */
static inline void il_path_mcast(struct il_path *p, uint32_t addr)
{
	p->dst_ip = addr;
	il_mcast_mac(p->dst_mac, addr);
}

/* Ethernet header; returns what follows it. */
static inline uint8_t *il_eth_put(uint8_t *f, const uint8_t *dst, const uint8_t *src,
				  uint16_t ethertype)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	il_put16(f + 12, ethertype);
	return f + IL_ETH_HLEN;
}

/* Stores the header checksum of the IPv4 header at ip, one without
 * options as every header made here (its checksum field zero). The fixed
 * length lets the compiler unroll the sum. */
static inline void il_ipv4_csum_store(uint8_t *ip)
{
	uint16_t c = (uint16_t)~il_csum_fold(il_csum_sum(ip, IL_IPV4_HLEN, 0));

	memcpy(ip + 10, &c, 2);
}

/* IPv4 header without options (TOS 0) in front of l4_len bytes of
 * protocol proto, checksum included; returns what follows it. */
static inline uint8_t *il_ipv4_put(uint8_t *ip, const struct il_path *p, uint8_t proto,
				   uint16_t ip_id, uint16_t l4_len)
{
	ip[0] = 0x45;
	ip[1] = 0;
	il_put16(ip + 2, (uint16_t)(IL_IPV4_HLEN + l4_len));
	il_put16(ip + 4, ip_id);
	il_put16(ip + 6, p->df ? IL_IPV4_DF : 0);
	ip[8] = p->ttl;
	ip[9] = proto;
	il_put16(ip + 10, 0);
	il_put32(ip + 12, p->src_ip);
	il_put32(ip + 16, p->dst_ip);
	il_ipv4_csum_store(ip);
	return ip + IL_IPV4_HLEN;
}

/* UDP header in front of plen payload bytes, no checksum (zero: allowed
 * over IPv4; il_udp_csum_set adds one once the payload is in place). */
static inline uint8_t *il_udp_put(uint8_t *u, const struct il_path *p, uint16_t plen)
{
	il_put16(u, p->src_port);
	il_put16(u + 2, p->dst_port);
	il_put16(u + 4, (uint16_t)(IL_UDP_HLEN + plen));
	il_put16(u + 6, 0);
	return u + IL_UDP_HLEN;
}

/* Ethernet + IPv4 + UDP in front of a UDP payload of plen bytes: the 42
 * bytes at f. Returns the payload (f + IL_UDP_HDRS_LEN). */
static inline uint8_t *il_udp_frame_put(uint8_t *f, const struct il_path *p, uint16_t ip_id,
					uint16_t plen)
{
	uint8_t *ip = il_eth_put(f, p->dst_mac, p->src_mac, IL_ETHERTYPE_IPV4);

	return il_udp_put(il_ipv4_put(ip, p, IL_IPPROTO_UDP, ip_id,
				      (uint16_t)(IL_UDP_HLEN + plen)), p, plen);
}

/* A frame made by il_udp_frame_put (a template) gets a payload of plen
 * bytes: IPv4 total length and checksum, UDP length. The UDP checksum is
 * left as it was (zero in a template). */
static inline void il_udp_frame_set_len(uint8_t *f, uint16_t plen)
{
	uint8_t *ip = f + IL_ETH_HLEN;

	il_put16(ip + 2, (uint16_t)(IL_IPV4_HLEN + IL_UDP_HLEN + plen));
	il_put16(ip + 10, 0);
	il_ipv4_csum_store(ip);
	il_put16(ip + IL_IPV4_HLEN + 4, (uint16_t)(IL_UDP_HLEN + plen));
}

/* Stores the layer-4 checksum (its field at csum_off of the UDP or TCP
 * header) of the datagram behind the IPv4 header at ip. */
static inline void il_l4_csum_store(uint8_t *ip, unsigned csum_off)
{
	uint8_t *c = ip + (ip[0] & 0x0fu) * 4u + csum_off;
	uint16_t v;

	il_put16(c, 0);
	v = il_ipv4_l4_csum(ip);
	memcpy(c, &v, 2);
}

/* The UDP checksum of the datagram behind the IPv4 header at ip, over the
 * payload as it is now. */
static inline void il_udp_csum_set(uint8_t *ip)
{
	il_l4_csum_store(ip, 6);
}

/* The TCP checksum of the segment behind the IPv4 header at ip. */
static inline void il_tcp_csum_set(uint8_t *ip)
{
	il_l4_csum_store(ip, 16);
}

/* The fields of a TCP segment we make (no payload). */
struct il_tcp_seg {
	uint32_t seq;
	uint32_t ack;
	uint8_t flags;      /* IL_TCP_F_* */
	uint16_t win;       /* the window field as sent (already scaled) */
	const uint8_t *opt; /* options, optlen bytes (a multiple of 4) */
	uint8_t optlen;
};

/* Length of the frame il_tcp_frame_put makes. */
static inline uint16_t il_tcp_frame_len(const struct il_tcp_seg *s)
{
	return (uint16_t)(IL_ETH_HLEN + IL_IPV4_HLEN + IL_TCP_HLEN + s->optlen);
}

/* A TCP segment without payload: Ethernet, IPv4, TCP with its options,
 * both checksums. Returns the frame's length. */
static inline uint16_t il_tcp_frame_put(uint8_t *f, const struct il_path *p, uint16_t ip_id,
					const struct il_tcp_seg *s)
{
	uint8_t *ip = il_eth_put(f, p->dst_mac, p->src_mac, IL_ETHERTYPE_IPV4);
	uint16_t thl = (uint16_t)(IL_TCP_HLEN + s->optlen);
	uint8_t *t = il_ipv4_put(ip, p, IL_IPPROTO_TCP, ip_id, thl);

	il_put16(t, p->src_port);
	il_put16(t + 2, p->dst_port);
	il_put32(t + 4, s->seq);
	il_put32(t + 8, s->ack);
	t[12] = (uint8_t)((thl / 4) << 4);
	t[13] = s->flags;
	il_put16(t + 14, s->win);
	il_put16(t + 16, 0);
	il_put16(t + 18, 0); /* urgent pointer */
	if (s->optlen)
		memcpy(t + IL_TCP_HLEN, s->opt, s->optlen);
	il_tcp_csum_set(ip);
	return il_tcp_frame_len(s);
}

#endif /* INTERLINK_FRAME_H */
