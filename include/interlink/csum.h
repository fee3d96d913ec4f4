/* SPDX-License-Identifier: BSD-3-Clause
 * Incremental Internet checksum update (RFC 1624), over raw memory words,
 * so the stored checksum field and the changed bytes never need swapping.
 */
#ifndef INTERLINK_CSUM_H
#define INTERLINK_CSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
	const uint8_t *b = p;
	for (size_t i = 0; i < len; i += 2) {
		uint16_t w;
		memcpy(&w, b + i, 2);
		d->s += w;
	}
}

static inline void il_csum_sub(struct il_csum_delta *d, const void *p, size_t len)
{
	const uint8_t *b = p;
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
