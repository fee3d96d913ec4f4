/* SPDX-License-Identifier: BSD-3-Clause
 *
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of the log's
 * records: SSE4.2's crc32 instruction 8 bytes at a time where the CPU has
 * it (every CPU DPDK 22.11 runs on), a bit at a time otherwise.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ftlog.h"

static uint32_t crc_bits(uint32_t c, const uint8_t *p, size_t n)
{
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p,
							     size_t n)
{
	uint64_t c64 = c;

	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c64 = _mm_crc32_u64(c64, v);
	}
	c = (uint32_t)c64;
	for (; n; n--)
		c = _mm_crc32_u8(c, *p++);
	return c;
}
#endif

uint32_t ftl_crc32c(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;
#if defined(__x86_64__)
	static int have = -1;
	if (have < 0)
		have = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	if (have)
		return ~crc_sse42(c, buf, len);
#endif
	return ~crc_bits(c, buf, len);
}

void ftl_rec_seal(struct ftc_rec *r)
{
	r->crc = 0;
	r->crc = ftl_crc32c(0, r, r->len);
}

bool ftl_rec_crc_ok(const struct ftc_rec *r)
{
	const size_t at = offsetof(struct ftc_rec, crc);
	const uint32_t zero = 0;
	uint32_t c = ftl_crc32c(0, r, at);

	c = ftl_crc32c(c, &zero, sizeof(zero));
	c = ftl_crc32c(c, (const uint8_t *)r + at + sizeof(zero), r->len - at - sizeof(zero));
	return c == r->crc;
}
