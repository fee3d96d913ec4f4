/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include <interlink/xor.h>

void il_xor(void *dst, const void *src, uint32_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	uint32_t i = 0;

	/* 64-bit words through memcpy: any alignment, and the compiler
	 * vectorises the loop. */
	for (; i + 8 <= len; i += 8) {
		uint64_t a, b;

		memcpy(&a, d + i, 8);
		memcpy(&b, s + i, 8);
		a ^= b;
		memcpy(d + i, &a, 8);
	}
	for (; i < len; i++)
		d[i] ^= s[i];
}
