/* SPDX-License-Identifier: BSD-3-Clause
 * Helpers of the libFuzzer targets: an input read as a stream of fields
 * (what is missing reads as zero, so every input is a valid program), and
 * a check that aborts with a message, so a broken invariant is a finding
 * with a reason.
 */
#ifndef IL_FUZZ_FZ_H
#define IL_FUZZ_FZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The harness itself is not what is fuzzed: no coverage callbacks in it
 * (clang's -fsanitize=fuzzer would trace every comparison of the input
 * reader), so the executions go to the code under test. */
#define FZ_HARNESS __attribute__((no_sanitize("coverage")))

struct fz {
	const uint8_t *p;
	size_t n;
};

FZ_HARNESS static inline uint8_t fz_u8(struct fz *z)
{
	if (z->n == 0)
		return 0;
	z->n--;
	return *z->p++;
}

FZ_HARNESS static inline uint16_t fz_u16(struct fz *z)
{
	return (uint16_t)(fz_u8(z) | (uint16_t)fz_u8(z) << 8);
}

FZ_HARNESS static inline uint32_t fz_u32(struct fz *z)
{
	return fz_u16(z) | (uint32_t)fz_u16(z) << 16;
}

FZ_HARNESS static inline uint64_t fz_u64(struct fz *z)
{
	return fz_u32(z) | (uint64_t)fz_u32(z) << 32;
}

/* Up to want bytes of the input (fewer at its end): where they are. */
FZ_HARNESS static inline const uint8_t *fz_bytes(struct fz *z, size_t want, size_t *got)
{
	const uint8_t *p = z->p;

	*got = want < z->n ? want : z->n;
	z->p += *got;
	z->n -= *got;
	return p;
}

/* A chunk: a 16-bit length (at most max), then that many bytes. */
FZ_HARNESS static inline const uint8_t *fz_chunk(struct fz *z, size_t max, size_t *got)
{
	size_t want = fz_u16(z);

	return fz_bytes(z, want > max ? want % (max + 1) : want, got);
}

#define FZ_CHECK(cond, ...)                                                          \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, \
				#cond);                                              \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			abort();                                                     \
		}                                                                    \
	} while (0)

#endif
