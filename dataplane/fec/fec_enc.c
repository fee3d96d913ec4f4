/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Maelstrom encoder: layered interleaving (NSDI 2008, §4.3) and the
 * Reed-Solomon mode at the same (r, c).
 *
 * Every packet gets a number x from a counter and goes into bin x mod i
 * of every layer. A bin is a repair under construction: the running XOR
 * of its packets and their ids. It fires when it holds `target` packets:
 * r, except the first time when staggered (fec_first_target). Firing
 * writes the repair's headers in front of the payload buffer, so the
 * message handed to the emit callback is one contiguous run of bytes.
 *
 * Each bin buffer is laid out as
 *     [ header room | payload (slot bytes, 64-byte aligned) ]
 * and the recipe ids are written as packets arrive, right-aligned to the
 * bin's target so that the headers of a full bin end exactly where the
 * ids begin.
 *
 * RS mode uses one layer (interleave[0]) whose bins hold c parity
 * buffers, one per parity row, each updated with ISA-L's
 * ec_encode_data_update as packets arrive.
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <isa-l/erasure_code.h>

#include "fec_internal.h"

struct enc_bin {
	uint8_t *buf[IL_FEC_MAX_C]; /* payloads; XOR uses buf[0] */
	uint64_t x_first;
	uint16_t n;        /* packets in the bin */
	uint16_t target;   /* fire at this many */
	uint16_t xor_len;  /* longest span in the bin */
	uint16_t dirty;    /* payload bytes at and past this are zero */
	uint16_t len_code[IL_FEC_MAX_C];
	bool parked;       /* delay_xor: fired, sent when the bin next fills */
};

struct enc_layer {
	uint16_t i;   /* interleave: number of bins */
	uint16_t pos; /* bin of the next packet: x mod i without a division */
	struct enc_bin *bins;
};

struct il_fec_enc {
	struct il_fec_cfg cfg;
	il_fec_emit_fn emit;
	void *arg;
	struct il_fec_enc_stats st;
	unsigned nlayers;
	unsigned rows; /* payloads per bin: 1 (XOR) or c (RS) */
	unsigned impl; /* cfg.xor_impl as it runs on this CPU */
	uint32_t hdr_room;
	uint32_t slot;
	uint64_t x;   /* next packet number */
	uint64_t seq; /* next repair sequence number */
	size_t footprint;
	struct enc_layer layer[IL_FEC_MAX_C];
	/* ISAL: tables of the coefficient 1, one per layer, for
	 * ec_encode_data_update: multiplying by 1 and adding in GF(2^8) is
	 * XOR, so one call XORs a packet into all its bins in one pass. */
	uint8_t ones_tbls[IL_FEC_MAX_C * 32] __attribute__((aligned(64)));
	struct fec_gf gf; /* RS only */
};

/*
 * First firing size of bin b (0-based) in a layer of interleave i,
 * Maelstrom §4.3.1, with the paper's bins numbered from 1 (k = b + 1):
 *   i >= r: k mod r, where 0 means r, so in each run of i packets about
 *           i/r bins fire, at sizes 1, 2, ..., r during the first r*i;
 *   i <  r: k * r / i, rounded to the nearest integer in 1..r (r = 4,
 *           i = 2 gives 2 and 4).
 * After its first firing a bin always fires at r.
 */
uint16_t fec_first_target(unsigned b, unsigned i, unsigned r)
{
	unsigned k = b + 1, s;

	if (i >= r) {
		s = k % r;
		return (uint16_t)(s ? s : r);
	}
	s = (k * r + i / 2) / i;
	if (s < 1)
		s = 1;
	if (s > r)
		s = r;
	return (uint16_t)s;
}

/* Bins of all layers, rows per bin, and the bytes the encoder takes. */
static size_t enc_size(const struct il_fec_cfg *cfg, size_t *nbins_out, size_t *off_out)
{
	unsigned nlayers = fec_layers(cfg), rows = cfg->code == IL_FEC_CODE_RS ? cfg->c : 1;
	size_t nbins = 0, off = fec_round_up(sizeof(struct il_fec_enc), FEC_ALIGN);

	for (unsigned l = 0; l < nlayers; l++)
		nbins += cfg->interleave[l];
	*nbins_out = nbins;
	*off_out = off;
	return off + fec_round_up((uint32_t)(nbins * sizeof(struct enc_bin)), FEC_ALIGN) +
	       nbins * rows * (size_t)(fec_round_up(IL_FEC_REPAIR_HDR_LEN(cfg->r), FEC_ALIGN) +
				       fec_slot_size(cfg));
}

/* The encoder as create() makes it, in the size bytes at e: every bin
 * empty, counters zero (also what il_fec_enc_reset() puts back). */
static void enc_init(struct il_fec_enc *e, const struct il_fec_cfg *cfg, il_fec_emit_fn emit,
		     void *arg)
{
	size_t nbins, off, size = enc_size(cfg, &nbins, &off);
	unsigned nlayers = fec_layers(cfg), rows = cfg->code == IL_FEC_CODE_RS ? cfg->c : 1;
	uint32_t hdr_room = fec_round_up(IL_FEC_REPAIR_HDR_LEN(cfg->r), FEC_ALIGN);
	uint32_t slot = fec_slot_size(cfg);
	uint8_t *base;

	memset(e, 0, size);
	e->cfg = *cfg;
	e->emit = emit;
	e->arg = arg;
	e->nlayers = nlayers;
	e->rows = rows;
	e->impl = fec_impl_in_force(cfg->xor_impl);
	e->hdr_room = hdr_room;
	e->slot = slot;
	e->footprint = size;
	if (cfg->code == IL_FEC_CODE_RS) {
		fec_gf_init(&e->gf, cfg->r, cfg->c);
	} else {
		uint8_t ones[IL_FEC_MAX_C];

		memset(ones, 1, sizeof(ones));
		ec_init_tables(1, cfg->c, ones, e->ones_tbls);
	}

	base = (uint8_t *)e;
	{
		struct enc_bin *bins = (struct enc_bin *)(base + off);
		uint8_t *buf = base + off +
			       fec_round_up((uint32_t)(nbins * sizeof(struct enc_bin)), FEC_ALIGN);

		for (unsigned l = 0; l < nlayers; l++) {
			struct enc_layer *L = &e->layer[l];

			L->i = cfg->interleave[l];
			L->bins = bins;
			for (unsigned b = 0; b < L->i; b++) {
				struct enc_bin *bin = &bins[b];

				for (unsigned j = 0; j < rows; j++) {
					bin->buf[j] = buf + hdr_room;
					buf += hdr_room + slot;
				}
				bin->target = cfg->stagger ? fec_first_target(b, L->i, cfg->r)
							   : cfg->r;
			}
			bins += L->i;
		}
	}
}

struct il_fec_enc *il_fec_enc_create(const struct il_fec_cfg *cfg, il_fec_emit_fn emit,
				     void *arg, char *err, size_t errlen)
{
	struct il_fec_enc *e;
	size_t nbins, off, size;

	if (il_fec_cfg_check(cfg, err, errlen, NULL, 0) != 0)
		return NULL;
	if (!emit) {
		snprintf(err, errlen, "fec: encoder needs an emit callback");
		return NULL;
	}
	size = enc_size(cfg, &nbins, &off);
	e = fec_alloc(cfg, size);
	if (!e) {
		snprintf(err, errlen, "fec: cannot allocate %zu bytes for the encoder", size);
		return NULL;
	}
	enc_init(e, cfg, emit, arg);
	return e;
}

void il_fec_enc_reset(struct il_fec_enc *e)
{
	struct il_fec_cfg cfg = e->cfg;

	enc_init(e, &cfg, e->emit, e->arg);
}

void il_fec_enc_free(struct il_fec_enc *e)
{
	if (e) {
		struct il_fec_cfg cfg = e->cfg;

		fec_free(&cfg, e);
	}
}

const struct il_fec_enc_stats *il_fec_enc_stats(const struct il_fec_enc *e)
{
	return &e->st;
}

size_t il_fec_enc_footprint(const struct il_fec_enc *e)
{
	return e->footprint;
}

static void put_headers(const struct il_fec_enc *e, uint8_t *h, unsigned layer,
			const struct enc_bin *b, unsigned row)
{
	const struct il_hdr_fields hf = { .type = IL_T_FEC_REPAIR,
					  .group_id = e->cfg.link_id,
					  .sender_id = e->cfg.sender_id,
					  .epoch = e->cfg.epoch,
					  .sender_seq = e->seq };
	const struct il_fec_fields ff = { .code = e->cfg.code,
					  .layer = (uint8_t)(e->rows > 1 ? row : layer),
					  .rate_r = e->cfg.r,
					  .rate_c = e->cfg.c,
					  .count = (uint8_t)b->n,
					  .interleave = e->layer[layer].i,
					  .xor_len = b->xor_len,
					  .len_code = b->len_code[row],
					  .x_first = b->x_first };

	il_fec_body_put(il_hdr_put(h, &hf), &ff);
}

/* Send the repair(s) of bin b and empty it. */
static void bin_send(struct il_fec_enc *e, unsigned layer, struct enc_bin *b)
{
	unsigned n = b->n;
	uint32_t idlen = n * IL_FEC_ID_LEN;

	/* A short recipe (flush) ends before the payload like a full one. */
	if (n < b->target)
		memmove(b->buf[0] - idlen, b->buf[0] - (size_t)b->target * IL_FEC_ID_LEN, idlen);
	for (unsigned j = 0; j < e->rows; j++) {
		uint8_t *msg = b->buf[j] - IL_FEC_REPAIR_HDR_LEN(n);
		uint32_t len = IL_FEC_REPAIR_HDR_LEN(n) + b->xor_len;
		struct il_fec_repair_info info = {
			.layer = (uint8_t)(e->rows > 1 ? j : layer),
			.count = (uint8_t)n,
			.interleave = e->layer[layer].i,
			.x_first = b->x_first,
			.seq = e->seq,
		};

		if (j > 0)
			memcpy(b->buf[j] - idlen, b->buf[0] - idlen, idlen);
		put_headers(e, msg, layer, b, j);
		e->seq++;
		e->st.repairs[info.layer]++;
		e->st.repair_bytes += len;
		e->emit(e->arg, msg, len, &info);
	}
	b->dirty = b->xor_len;
	b->n = 0;
	b->target = e->cfg.r;
	b->parked = false;
}

static inline void bin_full(struct il_fec_enc *e, unsigned layer, struct enc_bin *b)
{
	/* Delayed, the repair leaves when this bin gets its next packet, i
	 * packets later, so a burst that takes the last packet of the bin
	 * does not also take the repair sent right behind it. */
	if (e->cfg.delay_xor)
		b->parked = true;
	else
		bin_send(e, layer, b);
}

static inline struct enc_bin *next_bin(struct il_fec_enc *e, unsigned l)
{
	struct enc_layer *L = &e->layer[l];
	struct enc_bin *b = &L->bins[L->pos];

	if (++L->pos == L->i)
		L->pos = 0;
	if (b->parked)
		bin_send(e, l, b);
	return b;
}

static inline void put_id(struct enc_bin *b, const struct il_fec_id *id)
{
	memcpy(b->buf[0] - (size_t)(b->target - b->n) * IL_FEC_ID_LEN, id, IL_FEC_ID_LEN);
	b->n++;
}

/* ISA-L's multiply-accumulate falls back to byte-wise C under 64 bytes:
 * the plain XOR loop is faster there. */
#define MAD_MIN_LEN 64

/* FEC_NO_CHECK: the id comes with its payload check; else the check of
 * span[check_off, len) goes into id->csum, computed by the pass that XORs
 * the span into the bins where the kernel does both (AVX2). */
#define FEC_NO_CHECK UINT32_MAX

static void add_xor(struct il_fec_enc *e, struct il_fec_id *id, const uint8_t *span,
		    uint32_t len, uint64_t x, uint32_t check_off)
{
	struct enc_bin *bins[IL_FEC_MAX_C];
	uint8_t *acc[IL_FEC_MAX_C];
	bool one_pass = (e->impl == IL_FEC_XOR_ISAL && len >= MAD_MIN_LEN) ||
			e->impl == IL_FEC_XOR_AVX2;
	unsigned nacc = 0;

	for (unsigned l = 0; l < e->nlayers; l++) {
		struct enc_bin *b = next_bin(e, l);

		bins[l] = b;
		if (b->n == 0) {
			/* The first packet is copied rather than XORed into
			 * zeros; only the bytes a longer earlier repair left
			 * behind need clearing. */
			b->x_first = x;
			memcpy(b->buf[0], span, len);
			if (len < b->dirty)
				memset(b->buf[0] + len, 0, b->dirty - len);
			b->xor_len = (uint16_t)len;
			b->len_code[0] = (uint16_t)len;
			continue;
		}
		if (one_pass)
			acc[nacc++] = b->buf[0];
		else
			fec_xor1(e->impl, b->buf[0], span, len);
		if (len > b->xor_len)
			b->xor_len = (uint16_t)len;
		b->len_code[0] ^= (uint16_t)len;
	}
	if (check_off != FEC_NO_CHECK && e->impl == IL_FEC_XOR_AVX2) {
		id->csum = htonl(fec_xor_multi_check(acc, nacc, span, len, check_off));
		nacc = 0;
	} else if (check_off != FEC_NO_CHECK) {
		id->csum = htonl(il_fec_payload_check(span + check_off, len - check_off));
	}
	if (nacc && e->impl == IL_FEC_XOR_AVX2)
		fec_xor_multi(acc, nacc, span, len);
	else if (nacc)
		ec_encode_data_update((int)len, 1, (int)nacc, 0, e->ones_tbls,
				      (uint8_t *)(uintptr_t)span, acc);
	for (unsigned l = 0; l < e->nlayers; l++) {
		put_id(bins[l], id);
		if (bins[l]->n == bins[l]->target)
			bin_full(e, l, bins[l]);
	}
}

static void add_rs(struct il_fec_enc *e, const struct il_fec_id *id, const uint8_t *span,
		   uint32_t len, uint64_t x)
{
	static const uint8_t all_rows[IL_FEC_MAX_C] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	struct enc_bin *b = next_bin(e, 0);
	unsigned k = b->n;

	if (k == 0) {
		b->x_first = x;
		for (unsigned j = 0; j < e->rows; j++) {
			memset(b->buf[j], 0, b->dirty);
			b->len_code[j] = 0;
		}
		b->xor_len = 0;
	}
	fec_gf_mad(&e->gf, k, span, len, b->buf, all_rows, e->rows,
		   e->impl == IL_FEC_XOR_REF);
	/* Lengths are coded like two more payload bytes, so the decoder
	 * gets each recovered packet's exact length back. */
	for (unsigned j = 0; j < e->rows; j++) {
		uint8_t co = e->gf.coef[j][k];

		b->len_code[j] ^= (uint16_t)(fec_gf_mul(co, (uint8_t)(len >> 8)) << 8 |
					     fec_gf_mul(co, (uint8_t)len));
	}
	if (len > b->xor_len)
		b->xor_len = (uint16_t)len;
	put_id(b, id);
	if (b->n == b->target)
		bin_full(e, 0, b);
}

static int enc_add(struct il_fec_enc *e, struct il_fec_id *id, const void *span, uint32_t len,
		   uint32_t check_off)
{
	uint64_t x;

	if (len == 0) {
		e->st.empty++;
		return -1;
	}
	if (len > fec_max_span(&e->cfg)) {
		e->st.too_long++;
		return -1;
	}
	x = e->x++;
	e->st.packets++;
	e->st.bytes += len;
	if (e->cfg.xor_impl == IL_FEC_XOR_ISAL_XORGEN && ((uintptr_t)span & 31) != 0 &&
	    e->cfg.code == IL_FEC_CODE_XOR)
		e->st.unaligned++;
	if (e->cfg.code == IL_FEC_CODE_RS) {
		if (check_off != FEC_NO_CHECK)
			id->csum = htonl(il_fec_payload_check((const uint8_t *)span + check_off,
							      len - check_off));
		add_rs(e, id, span, len, x);
	} else {
		add_xor(e, id, span, len, x, check_off);
	}
	return 0;
}

int il_fec_enc_add(struct il_fec_enc *e, const struct il_fec_id *id, const void *span,
		   uint32_t len)
{
	struct il_fec_id own = *id;

	return enc_add(e, &own, span, len, FEC_NO_CHECK);
}

int il_fec_enc_add_checked(struct il_fec_enc *e, struct il_fec_id *id, const void *span,
			   uint32_t len, uint32_t check_off)
{
	if (check_off > len)
		return -1;
	return enc_add(e, id, span, len, check_off);
}

void il_fec_enc_flush(struct il_fec_enc *e, bool partial)
{
	for (unsigned l = 0; l < e->nlayers; l++) {
		struct enc_layer *L = &e->layer[l];

		for (unsigned b = 0; b < L->i; b++) {
			struct enc_bin *bin = &L->bins[b];

			if (bin->parked || (partial && bin->n > 0)) {
				e->st.flushed += e->rows;
				bin_send(e, l, bin);
			}
		}
	}
}
