/* SPDX-License-Identifier: BSD-3-Clause
 * The Internet checksum (RFC 1071), DPDK-free: whole-header and IPv4
 * pseudo-header sums for the frame builders (frame.h), and the incremental
 * update (RFC 1624) for fields rewritten in place. Both work on raw memory
 * words, so the stored checksum field and the bytes never need swapping.
 */
#ifndef INTERLINK_CSUM_H
#define INTERLINK_CSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Sums len bytes as 16-bit words into sum (an odd last byte as if padded
 * with zero), the way DPDK's rte_raw_cksum does: the builders produce the
 * same bytes as the DPDK helpers they replace. */
static inline uint32_t il_csum_sum(const void *buf, size_t len, uint32_t sum)
{
	const uint8_t *b = (const uint8_t *)buf;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		uint16_t w;

		memcpy(&w, b + i, 2);
		sum += w;
	}
	if (len & 1) {
		uint16_t left = 0;

		memcpy(&left, b + len - 1, 1);
		sum += left;
	}
	return sum;
}

/* The end-around carry: a 32-bit sum folded to 16 bits. */
static inline uint16_t il_csum_fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* The header checksum of the IPv4 header at ip (its IHL), as stored in
 * the header; the checksum field must be zero. */
static inline uint16_t il_ipv4_hdr_csum(const uint8_t *ip)
{
	return (uint16_t)~il_csum_fold(il_csum_sum(ip, (size_t)(ip[0] & 0x0fu) * 4u, 0));
}

/* The UDP or TCP checksum of the datagram behind the IPv4 header at ip,
 * as stored (its checksum field must be zero). The layer-4 length comes
 * from the IPv4 total length. A computed zero is returned as 0xffff for
 * UDP (RFC 768: zero means "no checksum"), as zero for TCP. */
static inline uint16_t il_ipv4_l4_csum(const uint8_t *ip)
{
	size_t ihl = (size_t)(ip[0] & 0x0fu) * 4u;
	uint16_t tot = (uint16_t)(ip[2] << 8 | ip[3]);
	uint8_t pseudo[12];
	uint32_t sum;

	if (tot < ihl)
		return 0;
	memcpy(pseudo, ip + 12, 8); /* source and destination */
	pseudo[8] = 0;
	pseudo[9] = ip[9];
	pseudo[10] = (uint8_t)((tot - ihl) >> 8);
	pseudo[11] = (uint8_t)(tot - ihl);
	sum = (uint32_t)il_csum_fold(il_csum_sum(ip + ihl, tot - ihl, 0)) +
	      il_csum_fold(il_csum_sum(pseudo, sizeof(pseudo), 0));
	uint16_t c = (uint16_t)~(uint16_t)((sum & 0xffff) + (sum >> 16));
	return c == 0 && ip[9] == 17 ? 0xffff : c;
}

/* Whether the UDP or TCP checksum of the datagram behind the IPv4 header
 * at ip verifies (the stored field included, the sum is all ones). */
static inline int il_ipv4_l4_csum_ok(const uint8_t *ip)
{
	size_t ihl = (size_t)(ip[0] & 0x0fu) * 4u;
	uint16_t tot = (uint16_t)(ip[2] << 8 | ip[3]);
	uint8_t pseudo[12];

	if (tot < ihl)
		return 0;
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = ip[9];
	pseudo[10] = (uint8_t)((tot - ihl) >> 8);
	pseudo[11] = (uint8_t)(tot - ihl);
	uint32_t sum = il_csum_sum(ip + ihl, tot - ihl, 0);

	return il_csum_fold(il_csum_sum(pseudo, sizeof(pseudo), sum)) == 0xffff;
}

struct il_csum_delta {
	uint32_t s;
};

/* Start from a checksum field as stored in the packet. */
static inline void il_csum_begin(struct il_csum_delta *d, uint16_t stored)
{
	d->s = (uint16_t)~stored;
}

static inline void il_csum_add16(struct il_csum_delta *d, uint16_t raw)
{
	d->s += raw;
}

static inline void il_csum_sub16(struct il_csum_delta *d, uint16_t raw)
{
	d->s += (uint16_t)~raw;
}

/* Bytes entering (add) or leaving (sub) the checksummed data; len is even
 * and the bytes sit at an even offset of the checksummed region. */
static inline void il_csum_add(struct il_csum_delta *d, const void *p, size_t len)
{
	const uint8_t *b = (const uint8_t *)p;
	for (size_t i = 0; i < len; i += 2) {
		uint16_t w;
		memcpy(&w, b + i, 2);
		d->s += w;
	}
}

static inline void il_csum_sub(struct il_csum_delta *d, const void *p, size_t len)
{
	const uint8_t *b = (const uint8_t *)p;
	for (size_t i = 0; i < len; i += 2) {
		uint16_t w;
		memcpy(&w, b + i, 2);
		d->s += (uint16_t)~w;
	}
}

/* The new stored checksum. */
static inline uint16_t il_csum_end(struct il_csum_delta *d)
{
	uint32_t s = d->s;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* UDP sends a computed zero as 0xffff (zero means "no checksum"). */
static inline uint16_t il_udp_csum_fix(uint16_t c)
{
	return c ? c : 0xffff;
}

#endif
