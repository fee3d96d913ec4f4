/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Helpers for the FEC unit tests: capture emitted repairs and recovered
 * packets, build repairs by hand.
 */
#ifndef IL_FEC_TEST_H
#define IL_FEC_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include <interlink/fec.h>

#include "fec_sim.h"

#define CAP_MSG 2048

struct cap_repair {
	uint8_t msg[CAP_MSG];
	uint32_t len;
	struct il_fec_repair_info info;
	uint64_t at; /* packets added when it was emitted */
};

struct cap {
	struct cap_repair *r;
	unsigned n, max;
	uint64_t added;
};

static inline void cap_init(struct cap *c, unsigned max)
{
	c->r = calloc(max, sizeof(*c->r));
	assert_non_null(c->r);
	c->n = 0;
	c->max = max;
	c->added = 0;
}

static inline void cap_fini(struct cap *c)
{
	free(c->r);
}

static inline void cap_emit(void *arg, const uint8_t *msg, uint32_t len,
			    const struct il_fec_repair_info *info)
{
	struct cap *c = arg;

	assert_true(c->n < c->max);
	assert_true(len <= CAP_MSG);
	memcpy(c->r[c->n].msg, msg, len);
	c->r[c->n].len = len;
	c->r[c->n].info = *info;
	c->r[c->n].at = c->added;
	c->n++;
}

/* Body and recipe of a captured repair. */
static inline const uint8_t *rep_body(const struct cap_repair *r)
{
	return r->msg + r->msg[IL_OFF_HDR_LEN];
}

static inline unsigned rep_count(const struct cap_repair *r)
{
	return rep_body(r)[IL_FEC_OFF_COUNT];
}

static inline void rep_id(const struct cap_repair *r, unsigned k, struct il_fec_id *id)
{
	memcpy(id, rep_body(r) + IL_FEC_BODY_LEN + k * IL_FEC_ID_LEN, IL_FEC_ID_LEN);
}

/* Synthetic ids for encoder-only tests: packet x is named by its source
 * address. */
static inline void synth_id(uint64_t x, struct il_fec_id *id)
{
	memset(id, 0, sizeof(*id));
	id->src = htonl((uint32_t)x);
	id->ip_id = htons((uint16_t)(x * 7));
}

static inline uint64_t synth_x(const struct il_fec_id *id)
{
	return ntohl(id->src);
}

/* Deliveries captured from a decoder. */
struct got {
	uint64_t x[4096];
	uint8_t how[4096];
	uint8_t layer[4096];
	unsigned n;
	uint32_t span_off;
	uint32_t min_len, max_len;
	unsigned bad;
};

static inline void got_deliver(void *arg, const uint8_t *span, uint32_t len,
			       const struct il_fec_recovery *rec)
{
	struct got *g = arg;
	uint8_t expect[2048];
	uint64_t x;

	assert_true(g->n < 4096);
	memcpy(&x, span + g->span_off + 20, 8);
	g->x[g->n] = x;
	g->how[g->n] = rec->how;
	g->layer[g->n] = rec->layer;
	g->n++;
	sim_pkt_build(expect, x, sim_pkt_len(x, g->min_len, g->max_len));
	if (len != g->span_off + sim_pkt_len(x, g->min_len, g->max_len) ||
	    memcmp(span + g->span_off, expect, len - g->span_off) != 0)
		g->bad++;
}

/*
 * A repair built by hand over packets xs[0..n-1] of the sim generator
 * (lengths in [min_len, max_len]), as the encoder would write it for
 * `layer` with the given interleave. Returns the message length.
 */
static inline uint32_t hand_repair(uint8_t *m, const struct il_fec_cfg *cfg, unsigned layer,
				   uint16_t interleave, const uint64_t *xs, unsigned n,
				   uint64_t x_first, uint64_t seq, uint32_t epoch,
				   uint32_t min_len, uint32_t max_len)
{
	uint8_t pkt[2048];
	uint8_t *b = m + IL_HDR_LEN, *ids = b + IL_FEC_BODY_LEN, *pay = ids + n * IL_FEC_ID_LEN;
	uint16_t xl = 0, lc = 0;

	for (unsigned k = 0; k < n; k++) {
		uint32_t len = sim_pkt_len(xs[k], min_len, max_len);

		if (len > xl)
			xl = (uint16_t)len;
	}
	memset(m, 0, IL_HDR_LEN + IL_FEC_BODY_LEN);
	memset(pay, 0, xl);
	for (unsigned k = 0; k < n; k++) {
		uint32_t len = sim_pkt_len(xs[k], min_len, max_len);
		struct il_fec_id id;

		sim_pkt_build(pkt, xs[k], len);
		assert_int_equal(il_fec_id_ipv4(pkt, len, &id), 0);
		memcpy(ids + k * IL_FEC_ID_LEN, &id, IL_FEC_ID_LEN);
		il_xor(pay, pkt, len);
		lc ^= (uint16_t)len;
	}
	m[IL_OFF_VERSION] = IL_VERSION;
	m[IL_OFF_TYPE] = IL_T_FEC_REPAIR;
	m[IL_OFF_HDR_LEN] = IL_HDR_LEN;
	il_put16(m + IL_OFF_GROUP_ID, cfg->link_id);
	il_put32(m + IL_OFF_EPOCH, epoch);
	il_put64(m + IL_OFF_SENDER_SEQ, seq);
	b[IL_FEC_OFF_CODE] = IL_FEC_CODE_XOR;
	b[IL_FEC_OFF_LAYER] = (uint8_t)layer;
	b[IL_FEC_OFF_RATE_R] = cfg->r;
	b[IL_FEC_OFF_RATE_C] = cfg->c;
	b[IL_FEC_OFF_COUNT] = (uint8_t)n;
	b[IL_FEC_OFF_ID_LEN] = IL_FEC_ID_LEN;
	il_put16(b + IL_FEC_OFF_INTERLEAVE, interleave);
	il_put16(b + IL_FEC_OFF_XOR_LEN, xl);
	il_put16(b + IL_FEC_OFF_LEN_CODE, lc);
	il_put64(b + IL_FEC_OFF_X_FIRST, x_first);
	return IL_HDR_LEN + IL_FEC_BODY_LEN + n * IL_FEC_ID_LEN + xl;
}

/* Hand packet x of the generator to the decoder as received. */
static inline enum il_fec_verdict give_data(struct il_fec_dec *d, uint64_t x, uint32_t min_len,
					    uint32_t max_len, uint64_t now)
{
	uint8_t pkt[2048] __attribute__((aligned(64)));
	uint32_t len = sim_pkt_len(x, min_len, max_len);
	struct il_fec_id id;

	sim_pkt_build(pkt, x, len);
	assert_int_equal(il_fec_id_ipv4(pkt, len, &id), 0);
	return il_fec_dec_data(d, &id, pkt, len, now);
}

#endif /* IL_FEC_TEST_H */
