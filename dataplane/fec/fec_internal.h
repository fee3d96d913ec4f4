/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Internals shared by the FEC encoder and decoder (not installed).
 */
#ifndef IL_FEC_INTERNAL_H
#define IL_FEC_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include <interlink/fec.h>
#include <interlink/wire_msg.h>

#define FEC_ALIGN 64u /* buffers start on a cache line (ISA-L wants 32) */

static inline uint32_t fec_round_up(uint32_t v, uint32_t a)
{
	return (v + a - 1) / a * a;
}

/* Longest span the codec accepts. */
static inline uint32_t fec_max_span(const struct il_fec_cfg *cfg)
{
	return (uint32_t)cfg->lan_mtu + cfg->span_extra;
}

/* Bytes of one payload buffer: the longest span, rounded to a cache line. */
static inline uint32_t fec_slot_size(const struct il_fec_cfg *cfg)
{
	return fec_round_up(fec_max_span(cfg), FEC_ALIGN);
}

static inline unsigned fec_layers(const struct il_fec_cfg *cfg)
{
	return cfg->code == IL_FEC_CODE_RS ? 1 : cfg->c;
}

static inline unsigned fec_max_interleave(const struct il_fec_cfg *cfg)
{
	unsigned m = 0;

	for (unsigned l = 0; l < fec_layers(cfg); l++)
		if (cfg->interleave[l] > m)
			m = cfg->interleave[l];
	return m;
}

/* Encoder packets after packet x by which every repair holding x has
 * been sent: the last bin holding x fills (r-1)*i later, and a delayed
 * repair waits i more. */
static inline uint64_t fec_settle_span(const struct il_fec_cfg *cfg)
{
	uint64_t i = fec_max_interleave(cfg);

	return (uint64_t)(cfg->r - 1) * i + (cfg->delay_xor ? i : 0) + 1;
}

/* First firing size of bin b in a layer of interleave i (fec_enc.c). */
uint16_t fec_first_target(unsigned b, unsigned i, unsigned r);

/* One allocation per codec object, zeroed, from cfg->alloc or libc. */
void *fec_alloc(const struct il_fec_cfg *cfg, size_t size);
void fec_free(const struct il_fec_cfg *cfg, void *p);

/* dst ^= src, one source, own length; ISA-L when impl says so and both
 * are aligned, the AVX2 kernel for AVX2. Returns true when SIMD did it. */
bool fec_xor1(unsigned impl, void *dst, const void *src, uint32_t len);

/* Whether this CPU runs the AVX2 kernel; the impl that runs for impl
 * (AVX2 becomes ISAL on a CPU without it). */
bool fec_cpu_avx2(void);
unsigned fec_impl_in_force(unsigned impl);

/* dst[k] ^= src for k < n, len bytes, any alignment: one pass over src
 * (AVX2), or plain C per bin without it (returns false then). */
bool fec_xor_multi(uint8_t *const *dst, unsigned n, const void *src, uint32_t len);

/* fec_xor_multi (n may be 0) that also returns il_fec_payload_check of
 * src[off, len) (off <= len), summed from the same pass over src. */
uint32_t fec_xor_multi_check(uint8_t *const *dst, unsigned n, const void *src, uint32_t len,
			     uint32_t off);

/* ---- Reed-Solomon coefficients ----------------------------------------- */

/* Parity row j, data column k of the systematic Cauchy generator. */
struct fec_gf {
	uint8_t r, c;
	uint8_t coef[IL_FEC_MAX_C][IL_FEC_MAX_R];
	/* ec_init_tables() output for the c x r parity rows. */
	uint8_t tbls[IL_FEC_MAX_C * IL_FEC_MAX_R * 32] __attribute__((aligned(64)));
};

void fec_gf_init(struct fec_gf *g, unsigned r, unsigned c);

/* parity_j ^= coef[j][k] * data over len bytes for the rows j in
 * rows[0..n-1]; ref selects ISA-L's base (plain C) version. */
void fec_gf_mad(const struct fec_gf *g, unsigned k, const uint8_t *data, uint32_t len,
		uint8_t **parity, const uint8_t *rows, unsigned n, bool ref);

/* GF(2^8) product. */
uint8_t fec_gf_mul(uint8_t a, uint8_t b);

/* Solve for m missing data columns cols[] from m reduced parities of rows
 * rows[] (in[] of len bytes, lens lc[]), writing out[] and out_len[].
 * -1 when the m x m matrix is singular (cannot happen with Cauchy). */
int fec_gf_solve(const struct fec_gf *g, unsigned m, const uint8_t *rows, const uint8_t *cols,
		 uint8_t *const *in, const uint16_t *lc, uint32_t len, uint8_t **out,
		 uint16_t *out_len, bool ref);

#endif /* IL_FEC_INTERNAL_H */
