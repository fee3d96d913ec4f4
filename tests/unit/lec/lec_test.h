/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Helpers for the LEC unit tests: capture the repairs an instance sends
 * and the messages it recovers; build repairs by hand.
 */
#ifndef IL_LEC_TEST_H
#define IL_LEC_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <interlink/lec.h>

#define T_MAXLEN 2048
#define T_MAXTGT 64

struct t_repair {
	struct il_lec_id ids[IL_LEC_MAX_R];
	uint8_t payload[T_MAXLEN];
	uint16_t count, len, len_xor;
	uint32_t targets[T_MAXTGT];
	uint32_t n;
};

struct t_recovery {
	struct il_lec_id id;
	uint8_t payload[T_MAXLEN];
	uint32_t len;
	struct il_lec_recovery info;
};

struct t_cap {
	struct t_repair *rep;
	uint32_t nrep, maxrep;
	struct t_recovery *rec;
	uint32_t nrec, maxrec;
	/* optional per-repair hook, for tests that count without keeping */
	void (*on_repair)(struct t_cap *c, const struct il_lec_repair *rep,
			  const uint32_t *targets, uint32_t n);
	void *user;
};

static void t_send(void *arg, const struct il_lec_repair *rep, const uint32_t *targets,
		   uint32_t n)
{
	struct t_cap *c = arg;
	struct t_repair *r;

	if (c->on_repair)
		c->on_repair(c, rep, targets, n);
	if (c->nrep == c->maxrep)
		return;
	r = &c->rep[c->nrep++];
	assert_true(rep->count <= IL_LEC_MAX_R);
	assert_true(rep->len <= T_MAXLEN);
	memcpy(r->ids, rep->ids, rep->count * sizeof(rep->ids[0]));
	if (rep->payload) {
		memcpy(r->payload, rep->payload, rep->len);
	} else {
		/* defer_xor: XOR the messages here, at their offset from a
		 * 32-byte boundary (ISA-L, junk before) when they share one */
		static uint8_t buf[T_MAXLEN + 128] __attribute__((aligned(64)));
		uint8_t *dst = buf + 64 + ((uintptr_t)rep->src[0] & 31);

		memset(buf, 0xa5, sizeof(buf));
		il_lec_repair_xor(rep, dst, 31);
		memcpy(r->payload, dst, rep->len);
		/* nothing written past the repair */
		for (uint32_t k = rep->len; k < rep->len + 32u && 64 + 31 + k < sizeof(buf); k++)
			assert_int_equal(dst[k], 0xa5);
	}
	r->count = rep->count;
	r->len = rep->len;
	r->len_xor = rep->len_xor;
	r->n = n < T_MAXTGT ? n : T_MAXTGT;
	memcpy(r->targets, targets, r->n * sizeof(targets[0]));
}

static void t_recovered(void *arg, const struct il_lec_id *id, const uint8_t *payload,
			uint32_t len, const struct il_lec_recovery *info)
{
	struct t_cap *c = arg;
	struct t_recovery *r;

	assert_true(c->nrec < c->maxrec);
	assert_true(len <= T_MAXLEN);
	r = &c->rec[c->nrec++];
	r->id = *id;
	memcpy(r->payload, payload, len);
	r->len = len;
	r->info = *info;
}

static inline void t_cap_init(struct t_cap *c, uint32_t maxrep, uint32_t maxrec)
{
	memset(c, 0, sizeof(*c));
	c->rep = calloc(maxrep ? maxrep : 1, sizeof(*c->rep));
	c->rec = calloc(maxrec ? maxrec : 1, sizeof(*c->rec));
	assert_non_null(c->rep);
	assert_non_null(c->rec);
	c->maxrep = maxrep;
	c->maxrec = maxrec;
}

static inline void t_cap_free(struct t_cap *c)
{
	free(c->rep);
	free(c->rec);
}

static inline struct il_lec *t_lec(const struct il_lec_cfg *cfg, struct t_cap *c)
{
	struct il_lec_ops ops = { .send = t_send, .recovered = t_recovered, .arg = c };
	char err[256];
	struct il_lec *l = il_lec_create(cfg, &ops, err, sizeof(err));

	if (!l)
		fprintf(stderr, "il_lec_create: %s\n", err);
	assert_non_null(l);
	return l;
}

static inline void t_group(struct il_lec *l, uint16_t group, double c, const uint32_t *m,
			   uint32_t n)
{
	char err[256];
	int rc = il_lec_group_set(l, group, c, m, n, err, sizeof(err));

	if (rc)
		fprintf(stderr, "il_lec_group_set: %s\n", err);
	assert_int_equal(rc, 0);
}

static inline void t_apply(struct il_lec *l)
{
	char err[256];
	int rc = il_lec_apply(l, err, sizeof(err));

	if (rc)
		fprintf(stderr, "il_lec_apply: %s\n", err);
	assert_int_equal(rc, 0);
}

static inline struct il_lec_id t_id(uint16_t group, uint64_t seq)
{
	struct il_lec_id id = { .seq = seq, .epoch = 7, .group = group };

	return id;
}

/* Payload of (group, seq): deterministic bytes, length given. */
static inline void t_payload(uint8_t *buf, uint16_t group, uint64_t seq, uint32_t len)
{
	uint64_t s = seq * 0x9e3779b97f4a7c15ull + group;

	for (uint32_t i = 0; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		buf[i] = (uint8_t)s;
	}
}

static inline uint32_t t_len(uint64_t seq)
{
	return 40 + (uint32_t)(seq * 37 % 700);
}

/* Hand in message (group, seq) as data. */
static inline enum il_lec_verdict t_data(struct il_lec *l, uint16_t group, uint64_t seq,
					 uint64_t now)
{
	uint8_t buf[T_MAXLEN];
	struct il_lec_id id = t_id(group, seq);
	uint32_t len = t_len(seq);

	t_payload(buf, group, seq, len);
	return il_lec_data(l, &id, buf, len, NULL, now);
}

/* A repair over the given messages, built the way the encoder does. */
static inline void t_build(struct t_repair *r, const struct il_lec_id *ids, unsigned n)
{
	uint8_t buf[T_MAXLEN];

	memset(r, 0, sizeof(*r));
	r->count = (uint16_t)n;
	for (unsigned k = 0; k < n; k++) {
		uint32_t len = t_len(ids[k].seq);

		r->ids[k] = ids[k];
		t_payload(buf, ids[k].group, ids[k].seq, len);
		il_xor(r->payload, buf, len);
		if (len > r->len)
			r->len = (uint16_t)len;
		r->len_xor ^= (uint16_t)len;
	}
}

static inline enum il_lec_result t_repair_in(struct il_lec *l, const struct t_repair *r,
					     uint64_t now)
{
	struct il_lec_repair rep = {
		.ids = r->ids, .payload = r->payload, .count = r->count,
		.len = r->len, .len_xor = r->len_xor,
	};

	return il_lec_repair(l, &rep, now);
}

/* The recovery checks out: right length and bytes. */
static inline void t_check_recovery(const struct t_recovery *r)
{
	uint8_t buf[T_MAXLEN];

	assert_int_equal(r->len, t_len(r->id.seq));
	t_payload(buf, r->id.group, r->id.seq, r->len);
	assert_memory_equal(buf, r->payload, r->len);
}

#endif /* IL_LEC_TEST_H */
