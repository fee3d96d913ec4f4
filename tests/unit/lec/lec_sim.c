/* SPDX-License-Identifier: BSD-3-Clause
 *
 * In-process LEC network for the tests (see lec_sim.h). Data reach every
 * member of their group (each deciding loss on its own) before the
 * repairs they trigger travel, as multicast data outrun receiver-made
 * repairs on a real network.
 */
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lec_sim.h"

#define QCAP 8192u
#define MAXN 256u

enum { ST_NONE = 0, ST_DATA = 1, ST_RECOVERED = 2, ST_MASK = 3, ST_LOST = 4 };

struct qent {
	struct il_lec_id ids[IL_LEC_MAX_R];
	uint16_t count, len, len_xor;
	uint32_t n;
	uint32_t targets[MAXN];
	uint8_t *payload;
};

struct sim;

struct node {
	struct sim *s;
	uint32_t idx;
	struct il_lec *lec;
	struct il_loss loss;
	uint8_t *state;   /* per message */
	uint32_t *lost_at; /* per message: seen when it was lost */
	uint32_t seen;    /* data messages sent to this node so far */
};

struct sim {
	const struct lsim_cfg *cfg;
	struct lsim_res *res;
	struct node *node;
	struct node app; /* the appliance (cfg->appliance) */
	uint32_t *gsize;
	uint32_t *gmem;     /* groups x nodes: member node indices */
	uint8_t *in_group;  /* nodes x groups */
	uint64_t *gidx;     /* groups x msgs: message index of seq (1-based) */
	uint64_t *gseq;
	struct qent *q;
	uint8_t *qbuf;
	uint32_t qhead, qtail;
	uint8_t *buf;
	uint64_t cur; /* messages sent so far */
	uint64_t *lat;
	uint64_t nlat;
	uint64_t rng;
};

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void lsim_payload(uint8_t *buf, uint16_t group, uint64_t seq, uint32_t len)
{
	uint64_t s = seq * 0x100000001b3ull ^ group;

	for (uint32_t i = 0; i < len; i += 8) {
		uint64_t v = mix(&s);

		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

static uint32_t msg_len(const struct lsim_cfg *c, uint16_t group, uint64_t seq)
{
	uint64_t s = seq ^ (uint64_t)group << 48;

	return c->min_len + (uint32_t)(mix(&s) % (c->max_len - c->min_len + 1));
}

void lsim_cfg_defaults(struct lsim_cfg *sc)
{
	memset(sc, 0, sizeof(*sc));
	sc->nodes = 16;
	sc->groups = 8;
	sc->degree = 4;
	sc->msgs = 20000;
	sc->min_len = 64;
	sc->max_len = 512;
	sc->loss.model = IL_LOSS_BERNOULLI;
	sc->loss.p = 0.05;
	il_lec_cfg_defaults(&sc->lec);
	sc->lec.max_len = 1024;
	sc->lec.max_groups = 64;
	/* the stage's: one bin per group, layers, references, no decoder */
	il_lec_cfg_defaults(&sc->app_lec);
	sc->app_lec.max_len = 1024;
	sc->app_lec.max_groups = 64;
	sc->app_lec.plan = IL_LEC_PLAN_GROUPS;
	sc->app_lec.max_layers = 8;
	sc->app_lec.layer_stride = true;
	sc->app_lec.decode = false;
	sc->app_lec.self_id = IL_LEC_OBSERVER;
	sc->tail = 500;
	sc->msg_ns = 1000;
	sc->seed = 1;
}

static void on_send(void *arg, const struct il_lec_repair *rep, const uint32_t *targets,
		    uint32_t n)
{
	struct node *nd = arg;
	struct sim *s = nd->s;
	uint32_t next = (s->qtail + 1) % QCAP;
	struct qent *e;

	s->res->repairs_sent++;
	s->res->repair_copies += n;

	if (next == s->qhead || n > MAXN) {
		s->res->queue_overflow++;
		return;
	}
	e = &s->q[s->qtail];
	memcpy(e->ids, rep->ids, rep->count * sizeof(rep->ids[0]));
	e->count = rep->count;
	e->len = rep->len;
	e->len_xor = rep->len_xor;
	if (rep->payload)
		memcpy(e->payload, rep->payload, rep->len);
	else /* a decoding node keeps references: the XOR straight into the queue */
		il_lec_repair_xor(rep, e->payload, 0);
	e->n = n;
	memcpy(e->targets, targets, n * sizeof(targets[0]));
	s->qtail = next;
}

static bool counted(const struct sim *s, uint64_t m)
{
	return m + s->cfg->tail < s->cfg->msgs;
}

static void on_recovered(void *arg, const struct il_lec_id *id, const uint8_t *payload,
			 uint32_t len, const struct il_lec_recovery *info)
{
	struct node *nd = arg;
	struct sim *s = nd->s;
	uint64_t m;
	uint8_t *st;

	(void)info;
	if (id->group >= s->cfg->groups || id->seq == 0 || id->seq > s->gseq[id->group]) {
		s->res->bad++;
		return;
	}
	m = s->gidx[(size_t)id->group * s->cfg->msgs + id->seq - 1];
	st = &nd->state[m];
	if (*st & ST_MASK)
		s->res->double_delivery++;
	if (len != msg_len(s->cfg, id->group, id->seq)) {
		s->res->bad++;
	} else {
		lsim_payload(s->buf, id->group, id->seq, len);
		if (memcmp(s->buf, payload, len))
			s->res->bad++;
	}
	*st = (uint8_t)((*st & ~ST_MASK) | ST_RECOVERED);
	s->res->recovered_all++;
	if ((*st & ST_LOST) && counted(s, m)) {
		s->res->recovered++;
		s->lat[s->nlat++] = nd->seen - nd->lost_at[m];
	}
}

static void drain(struct sim *s, uint64_t now)
{
	while (s->qhead != s->qtail) {
		struct qent *e = &s->q[s->qhead];
		struct il_lec_repair rep = {
			.ids = e->ids, .payload = e->payload, .count = e->count,
			.len = e->len, .len_xor = e->len_xor,
		};

		for (uint32_t t = 0; t < e->n; t++) {
			struct node *nd = &s->node[e->targets[t] - 1];

			if (il_loss_drop(&nd->loss)) {
				s->res->repair_copies_lost++;
				continue;
			}
			il_lec_repair(nd->lec, &rep, now);
		}
		s->qhead = (s->qhead + 1) % QCAP;
	}
}

static void assign_groups(struct sim *s)
{
	const struct lsim_cfg *c = s->cfg;

	for (int tries = 0; tries < 1000; tries++) {
		uint32_t minsz = UINT32_MAX;

		memset(s->in_group, 0, (size_t)c->nodes * c->groups);
		memset(s->gsize, 0, sizeof(uint32_t) * c->groups);
		for (uint32_t k = 0; k < c->nodes; k++) {
			for (uint32_t j = 0; j < c->degree;) {
				uint32_t g = (uint32_t)(mix(&s->rng) % c->groups);

				if (s->in_group[(size_t)k * c->groups + g])
					continue;
				s->in_group[(size_t)k * c->groups + g] = 1;
				s->gmem[(size_t)g * c->nodes + s->gsize[g]++] = k;
				j++;
			}
		}
		for (uint32_t g = 0; g < c->groups; g++)
			if (s->gsize[g] < minsz)
				minsz = s->gsize[g];
		if (minsz >= 3)
			return;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The appliance: every group at the peers' rate (the stage's rate: peers). */
static int setup_app(struct sim *s)
{
	const struct lsim_cfg *c = s->cfg;
	struct il_lec_ops ops = { .send = on_send, .recovered = on_recovered, .arg = &s->app };
	struct il_lec_cfg lc = c->app_lec;
	char err[256];

	s->app.s = s;
	lc.r = c->lec.r;
	lc.c = c->lec.c;
	lc.stagger = c->lec.stagger;
	lc.xor_impl = c->lec.xor_impl;
	lc.seed = c->seed * 1000003u;
	s->app.lec = il_lec_create(&lc, &ops, err, sizeof(err));
	if (!s->app.lec) {
		fprintf(stderr, "lsim: appliance: %s\n", err);
		return -1;
	}
	for (uint32_t g = 0; g < c->groups; g++) {
		uint32_t ids[MAXN], k = s->gsize[g];
		double cg = (double)k * (c->lec.c < k - 1 ? c->lec.c : (double)(k - 1));

		if (k < 2)
			continue;
		for (uint32_t i = 0; i < k; i++)
			ids[i] = s->gmem[(size_t)g * c->nodes + i] + 1;
		if (il_lec_group_set(s->app.lec, (uint16_t)g, cg, ids, k, err, sizeof(err))) {
			fprintf(stderr, "lsim: appliance: %s\n", err);
			return -1;
		}
	}
	if (il_lec_apply(s->app.lec, err, sizeof(err))) {
		fprintf(stderr, "lsim: appliance: %s\n", err);
		return -1;
	}
	return 0;
}

static int setup(struct sim *s)
{
	const struct lsim_cfg *c = s->cfg;
	struct il_lec_ops ops = { .send = on_send, .recovered = on_recovered };
	char err[256];

	s->node = calloc(c->nodes, sizeof(*s->node));
	s->gsize = calloc(c->groups, sizeof(uint32_t));
	s->gmem = calloc((size_t)c->groups * c->nodes, sizeof(uint32_t));
	s->in_group = calloc((size_t)c->nodes * c->groups, 1);
	s->gidx = calloc((size_t)c->groups * c->msgs, sizeof(uint64_t));
	s->gseq = calloc(c->groups, sizeof(uint64_t));
	s->q = calloc(QCAP, sizeof(*s->q));
	s->qbuf = calloc(QCAP, c->lec.max_len);
	s->buf = calloc(1, c->lec.max_len);
	s->lat = calloc(c->msgs * c->nodes, sizeof(uint64_t));
	if (!s->node || !s->gsize || !s->gmem || !s->in_group || !s->gidx || !s->gseq || !s->q ||
	    !s->qbuf || !s->buf || !s->lat)
		return -1;
	for (uint32_t i = 0; i < QCAP; i++)
		s->q[i].payload = s->qbuf + (size_t)i * c->lec.max_len;
	assign_groups(s);
	for (uint32_t k = 0; k < c->nodes; k++) {
		struct node *nd = &s->node[k];
		struct il_lec_cfg lc = c->lec;
		struct il_loss_cfg loss = c->loss;

		nd->s = s;
		nd->idx = k;
		lc.self_id = k + 1;
		lc.seed = c->seed * 1000003u + k + 1;
		ops.arg = nd;
		nd->lec = il_lec_create(&lc, &ops, err, sizeof(err));
		loss.seed = c->seed * 7919u + k * 104729u + 17;
		nd->state = calloc(c->msgs, 1);
		nd->lost_at = calloc(c->msgs, sizeof(uint32_t));
		if (!nd->lec || !nd->state || !nd->lost_at || il_loss_init(&nd->loss, &loss, err, sizeof(err))) {
			fprintf(stderr, "lsim: %s\n", err);
			return -1;
		}
		for (uint32_t g = 0; g < c->groups; g++) {
			uint32_t ids[MAXN];

			if (!s->in_group[(size_t)k * c->groups + g])
				continue;
			for (uint32_t i = 0; i < s->gsize[g]; i++)
				ids[i] = s->gmem[(size_t)g * c->nodes + i] + 1;
			if (il_lec_group_set(nd->lec, (uint16_t)g,
					     c->appliance ? IL_LEC_DECODE_ONLY : 0, ids,
					     s->gsize[g], err, sizeof(err))) {
				fprintf(stderr, "lsim: %s\n", err);
				return -1;
			}
		}
		if (il_lec_apply(nd->lec, err, sizeof(err))) {
			fprintf(stderr, "lsim: %s\n", err);
			return -1;
		}
	}
	s->res->footprint = il_lec_footprint(s->node[0].lec);
	return c->appliance ? setup_app(s) : 0;
}

static void teardown(struct sim *s)
{
	il_lec_free(s->app.lec);
	if (s->node) {
		for (uint32_t k = 0; k < s->cfg->nodes; k++) {
			il_lec_free(s->node[k].lec);
			free(s->node[k].state);
			free(s->node[k].lost_at);
		}
	}
	free(s->node);
	free(s->gsize);
	free(s->gmem);
	free(s->in_group);
	free(s->gidx);
	free(s->gseq);
	free(s->q);
	free(s->qbuf);
	free(s->buf);
}

static void sum_stats(struct il_lec_stats *a, const struct il_lec_stats *b)
{
	/* every counter is a uint64_t except the four occupancy gauges */
	_Static_assert(offsetof(struct il_lec_stats, applies) -
				       offsetof(struct il_lec_stats, msgs_live) ==
			       16,
		       "il_lec_stats: four uint32_t gauges between the counters");
	const size_t g0 = offsetof(struct il_lec_stats, msgs_live);
	const size_t g1 = offsetof(struct il_lec_stats, applies);
	const uint8_t *pb = (const uint8_t *)b;
	uint8_t *pa = (uint8_t *)a;

	for (size_t off = 0; off < sizeof(*a); off += 8) {
		uint64_t x, y;

		if (off >= g0 && off < g1)
			continue;
		memcpy(&x, pa + off, 8);
		memcpy(&y, pb + off, 8);
		x += y;
		memcpy(pa + off, &x, 8);
	}
	a->msgs_live += b->msgs_live;
	a->repairs_live += b->repairs_live;
	if (b->msgs_hwm > a->msgs_hwm)
		a->msgs_hwm = b->msgs_hwm;
	if (b->repairs_hwm > a->repairs_hwm)
		a->repairs_hwm = b->repairs_hwm;
}

int lsim_run(const struct lsim_cfg *sc, struct lsim_res *res)
{
	struct sim s = { .cfg = sc, .res = res, .rng = sc->seed };
	uint8_t *payload;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (sc->nodes > MAXN || sc->degree > sc->groups || sc->max_len > sc->lec.max_len ||
	    sc->min_len > sc->max_len || sc->groups > sc->lec.max_groups) {
		fprintf(stderr, "lsim: bad configuration\n");
		return -1;
	}
	payload = calloc(1, sc->lec.max_len);
	if (!payload || setup(&s))
		goto out;
	if (sc->hook)
		sc->hook(0, sc->hook_arg);
	for (uint64_t m = 0; m < sc->msgs; m++) {
		uint16_t g;
		uint64_t now = m * sc->msg_ns;
		struct il_lec_id id = { 0 };
		uint32_t len;

		do
			g = (uint16_t)(mix(&s.rng) % sc->groups);
		while (s.gsize[g] < 2);
		id.group = g;
		id.seq = ++s.gseq[g];
		id.epoch = 1;
		s.gidx[(size_t)g * sc->msgs + id.seq - 1] = m;
		len = msg_len(sc, g, id.seq);
		lsim_payload(payload, g, id.seq, len);
		s.cur = m + 1;
		for (uint32_t i = 0; i < s.gsize[g]; i++) {
			struct node *nd = &s.node[s.gmem[(size_t)g * sc->nodes + i]];
			uint8_t *st = &nd->state[m];

			if (counted(&s, m))
				res->receipts++;
			nd->seen++;
			if (il_loss_drop(&nd->loss)) {
				*st |= ST_LOST;
				nd->lost_at[m] = nd->seen;
				res->lost += counted(&s, m);
				continue;
			}
			switch (il_lec_data(nd->lec, &id, payload, len, NULL, now)) {
			case IL_LEC_NEW:
				if (*st & ST_MASK)
					res->double_delivery++;
				*st = (uint8_t)((*st & ~ST_MASK) | ST_DATA);
				break;
			case IL_LEC_DUP:
				/* recovered before its data arrived: fine */
				if (!(*st & ST_MASK))
					res->bad++;
				break;
			default:
				res->bad++;
				break;
			}
		}
		/* the appliance stamps the frame, then sends it on (above) and
		 * adds it to its bins: its repairs leave after the data */
		if (sc->appliance &&
		    il_lec_data(s.app.lec, &id, payload, len, NULL, now) != IL_LEC_NEW)
			res->bad++;
		drain(&s, now);
	}
	if (sc->hook)
		sc->hook(1, sc->hook_arg);
	for (uint32_t k = 0; k < sc->nodes; k++)
		sum_stats(&res->sum, il_lec_stats(s.node[k].lec));
	if (res->sum.data_new) {
		double held = (double)(res->sum.data_new + res->sum.recovered);

		res->xors_per_msg = (double)res->sum.xor_ops / held;
		res->copies_per_msg = (double)res->sum.copy_ops / held;
	}
	if (s.nlat) {
		double sum = 0;

		qsort(s.lat, s.nlat, sizeof(uint64_t), cmp_u64);
		for (uint64_t i = 0; i < s.nlat; i++)
			sum += (double)s.lat[i];
		res->lat_mean = sum / (double)s.nlat;
		res->lat_p50 = (double)s.lat[s.nlat / 2];
		res->lat_p90 = (double)s.lat[s.nlat * 9 / 10];
	}
	rc = 0;
out:
	teardown(&s);
	free(s.lat);
	free(payload);
	return rc;
}
