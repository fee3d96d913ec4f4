/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Reed-Solomon arithmetic for the RS mode, over ISA-L's GF(2^8).
 *
 * The generator is ISA-L's systematic Cauchy matrix rather than the
 * Vandermonde one the paper's comparison used (Rizzo's code): every
 * square submatrix of a Cauchy matrix is invertible, so any r of the r+c
 * symbols decode for every (r, c) we accept, while ISA-L documents its
 * Vandermonde generator as safe only for some sizes. Both are MDS codes
 * where they apply, so recovery is the same.
 *
 * A block may hold fewer than r packets (staggered first firings, flush):
 * the missing columns count as zero packets, which keeps the code MDS
 * because any subset of Cauchy columns is again a Cauchy matrix.
 */
#include <string.h>

#include <isa-l/erasure_code.h>

#include "fec_internal.h"

void fec_gf_init(struct fec_gf *g, unsigned r, unsigned c)
{
	uint8_t a[(IL_FEC_MAX_R + IL_FEC_MAX_C) * IL_FEC_MAX_R];
	uint8_t rows[IL_FEC_MAX_C * IL_FEC_MAX_R];

	memset(g, 0, sizeof(*g));
	g->r = (uint8_t)r;
	g->c = (uint8_t)c;
	gf_gen_cauchy1_matrix(a, (int)(r + c), (int)r);
	for (unsigned j = 0; j < c; j++)
		for (unsigned k = 0; k < r; k++) {
			g->coef[j][k] = a[(r + j) * r + k];
			rows[j * r + k] = a[(r + j) * r + k];
		}
	ec_init_tables((int)r, (int)c, rows, g->tbls);
}

uint8_t fec_gf_mul(uint8_t a, uint8_t b)
{
	return gf_mul(a, b);
}

void fec_gf_mad(const struct fec_gf *g, unsigned k, const uint8_t *data, uint32_t len,
		uint8_t **parity, const uint8_t *rows, unsigned n, bool ref)
{
	/* ISA-L lays the tables out row by row, r columns of 32 bytes each:
	 * the tables of consecutive rows are consecutive, so a run of rows
	 * is one call. */
	unsigned i = 0;

	while (i < n) {
		unsigned run = 1;
		uint8_t *tb = (uint8_t *)(uintptr_t)g->tbls + 32u * g->r * rows[i];

		while (i + run < n && rows[i + run] == rows[i] + run)
			run++;
		if (ref)
			ec_encode_data_update_base((int)len, g->r, (int)run, (int)k, tb,
						   (uint8_t *)(uintptr_t)data, parity + i);
		else
			ec_encode_data_update((int)len, g->r, (int)run, (int)k, tb,
					      (uint8_t *)(uintptr_t)data, parity + i);
		i += run;
	}
}

int fec_gf_solve(const struct fec_gf *g, unsigned m, const uint8_t *rows, const uint8_t *cols,
		 uint8_t *const *in, const uint16_t *lc, uint32_t len, uint8_t **out,
		 uint16_t *out_len, bool ref)
{
	uint8_t a[IL_FEC_MAX_C * IL_FEC_MAX_C], inv[IL_FEC_MAX_C * IL_FEC_MAX_C];
	uint8_t tbls[IL_FEC_MAX_C * IL_FEC_MAX_C * 32];

	for (unsigned i = 0; i < m; i++)
		for (unsigned j = 0; j < m; j++)
			a[i * m + j] = g->coef[rows[i]][cols[j]];
	if (gf_invert_matrix(a, inv, (int)m) != 0)
		return -1;
	ec_init_tables((int)m, (int)m, inv, tbls);
	if (ref)
		ec_encode_data_base((int)len, (int)m, (int)m, tbls, (uint8_t **)(uintptr_t)in, out);
	else
		ec_encode_data((int)len, (int)m, (int)m, tbls, (uint8_t **)(uintptr_t)in, out);
	/* The lengths were coded byte by byte with the same rows. */
	for (unsigned j = 0; j < m; j++) {
		uint8_t hi = 0, lo = 0;

		for (unsigned i = 0; i < m; i++) {
			hi ^= gf_mul(inv[j * m + i], (uint8_t)(lc[i] >> 8));
			lo ^= gf_mul(inv[j * m + i], (uint8_t)lc[i]);
		}
		out_len[j] = (uint16_t)(hi << 8 | lo);
	}
	return 0;
}
