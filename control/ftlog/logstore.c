/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The logger's per-connection state. A connection's records in the shared
 * log (seglog.c) are exactly what the data plane queued for it, plus the
 * shim's FR_READ records, so its state can be rebuilt by applying them in
 * log order (ftl_load_dir), which is what a restarted logger does. The
 * stream of instream bytes is the union of the FR_DATA payloads by
 * sequence number: duplicates and overlaps (client retransmissions) are
 * harmless, holes are tracked (G7).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include "ftlog.h"

uint64_t ftl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t key_hash(const struct ftc_key *k)
{
	uint32_t h = k->cip * 2654435761u ^ k->sip * 2246822519u;
	h ^= ((uint32_t)k->cport << 16 | k->sport) * 3266489917u;
	return h ^ (h >> 15);
}

static bool key_eq(const struct ftc_key *a, const struct ftc_key *b)
{
	return a->cip == b->cip && a->sip == b->sip && a->cport == b->cport &&
	       a->sport == b->sport;
}

struct ftl_conn *ftl_conn_find(struct ftl *l, const struct ftc_key *k)
{
	const uint32_t mask = FTL_IDX_SIZE - 1;

	for (uint32_t i = key_hash(k) & mask; l->idx[i] != 0; i = (i + 1) & mask) {
		struct ftl_conn *c = &l->conns[l->idx[i] - 1];

		if (key_eq(&c->key, k))
			return c;
	}
	return NULL;
}

struct ftl_conn *ftl_conn_new(struct ftl *l, const struct ftc_key *k)
{
	const uint32_t mask = FTL_IDX_SIZE - 1;
	uint32_t i = key_hash(k) & (FTL_MAX_CONNS - 1);

	if (l->n_live == FTL_MAX_CONNS)
		return NULL;
	/* A free slot: the table is at most full, so one is found. */
	while (l->conns[i].used)
		i = (i + 1) & (FTL_MAX_CONNS - 1);
	struct ftl_conn *c = &l->conns[i];
	uint32_t hcap = c->cap_holes, *hs = c->hole_s, *he = c->hole_e;
	uint32_t scap = c->cap_spans;
	struct ftl_span *sp = c->spans;

	memset(c, 0, sizeof(*c));
	c->cap_holes = hcap;
	c->hole_s = hs;
	c->hole_e = he;
	c->cap_spans = scap;
	c->spans = sp;
	c->used = true;
	c->live_pos = l->n_live;
	l->live[l->n_live++] = (uint16_t)i;
	c->key = *k;
	c->owner = -1;
	c->replay_waiter = -1;
	c->state = FC_LIVE;
	uint32_t b = key_hash(k) & mask;

	while (l->idx[b] != 0)
		b = (b + 1) & mask;
	l->idx[b] = (uint16_t)(i + 1);
	return c;
}

/* Take slot s out of the index: the entries after its bucket that probed
 * past it move back, so no lookup meets a hole before its key. */
static void idx_remove(struct ftl *l, uint32_t s)
{
	const uint32_t mask = FTL_IDX_SIZE - 1;
	uint32_t p = key_hash(&l->conns[s].key) & mask;

	while (l->idx[p] != s + 1) {
		if (l->idx[p] == 0)
			return; /* not indexed: nothing to take out */
		p = (p + 1) & mask;
	}
	for (uint32_t j = p;;) {
		j = (j + 1) & mask;
		if (l->idx[j] == 0)
			break;
		uint32_t home = key_hash(&l->conns[l->idx[j] - 1].key) & mask;
		/* It stays where it is if its home lies in (p, j], cyclically. */
		bool stays = p <= j ? (p < home && home <= j) : (p < home || home <= j);

		if (stays)
			continue;
		l->idx[p] = l->idx[j];
		p = j;
	}
	l->idx[p] = 0;
}

void ftl_conn_durable(struct ftl_conn *c)
{
	c->contig_durable = c->contig;
	c->isns_durable = c->have_syn && c->have_synack;
	c->reads_durable = c->reads;
	c->read_total_durable = c->read_total;
}

void ftl_conn_free(struct ftl *l, struct ftl_conn *c)
{
	if (!c->used)
		return;
	/* Swap-remove from the live list. */
	uint16_t last = l->live[--l->n_live];
	l->live[c->live_pos] = last;
	l->conns[last].live_pos = c->live_pos;
	idx_remove(l, (uint32_t)(c - l->conns));
	ftl_log_release(l, c);
	c->used = false;
}

void ftl_free_all(struct ftl *l)
{
	for (uint32_t i = 0; i < FTL_MAX_CONNS; i++) {
		struct ftl_conn *c = &l->conns[i];
		ftl_conn_free(l, c);
		free(c->spans);
		free(c->hole_s);
		free(c->hole_e);
		c->spans = NULL;
		c->hole_s = c->hole_e = NULL;
		c->cap_spans = c->cap_holes = 0;
	}
	ftl_log_close(l);
}

void ftl_conn_end(struct ftl *l, struct ftl_conn *c, uint8_t why)
{
	struct ftc_rec t = {.len = sizeof(t), .type = FR_CLOSED, .key = c->key, .flags = why};

	/* Without room for it a restart would see the connection again and
	 * treat it as crashed: harmless, as it is unknown to the stage. */
	ftl_log_append(l, NULL, &t);
	ftl_conn_free(l, c);
}

void ftl_path(const struct ftl *l, const struct ftc_key *k, const char *ext, char *buf,
	      size_t len)
{
	char a[16], b[16];

	inet_ntop(AF_INET, &k->cip, a, sizeof(a));
	inet_ntop(AF_INET, &k->sip, b, sizeof(b));
	snprintf(buf, len, "%s/%s_%u-%s_%u.%s", l->dir, a, ntohs(k->cport), b, ntohs(k->sport),
		 ext);
}

static void add_range(struct ftl_conn *c, uint32_t s, uint32_t e)
{
	uint32_t i, j, base = c->contig;

	if (!ftc_seq_lt(s, e) || !ftc_seq_lt(base, e))
		return;
	if (ftc_seq_lt(s, base))
		s = base;
	/* Offsets from contig keep the order right across the 2^32 wrap. */
	uint32_t os = s - base, oe = e - base;
	for (i = 0; i < c->n_holes && c->hole_e[i] - base < os; i++)
		;
	/* [i, j) are the ranges [s, e) touches or overlaps: merge them. */
	for (j = i; j < c->n_holes && c->hole_s[j] - base <= oe; j++) {
		if (c->hole_s[j] - base < os)
			os = c->hole_s[j] - base;
		if (c->hole_e[j] - base > oe)
			oe = c->hole_e[j] - base;
	}
	if (i == j) {
		if (c->n_holes == c->cap_holes) {
			uint32_t cap = c->cap_holes ? 2 * c->cap_holes : 16;
			uint32_t *ns = realloc(c->hole_s, cap * sizeof(*ns));
			if (ns)
				c->hole_s = ns;
			uint32_t *ne = ns ? realloc(c->hole_e, cap * sizeof(*ne)) : NULL;
			if (!ns || !ne)
				return; /* the bytes are in the file; a retransmission re-reports them */
			c->hole_e = ne;
			c->cap_holes = cap;
		}
		memmove(c->hole_s + i + 1, c->hole_s + i, (c->n_holes - i) * sizeof(uint32_t));
		memmove(c->hole_e + i + 1, c->hole_e + i, (c->n_holes - i) * sizeof(uint32_t));
		c->n_holes++;
		j = i + 1;
	} else if (j > i + 1) {
		memmove(c->hole_s + i + 1, c->hole_s + j, (c->n_holes - j) * sizeof(uint32_t));
		memmove(c->hole_e + i + 1, c->hole_e + j, (c->n_holes - j) * sizeof(uint32_t));
		c->n_holes -= j - i - 1;
	}
	c->hole_s[i] = base + os;
	c->hole_e[i] = base + oe;
	/* The first range starting at contig moves it. */
	if (c->n_holes && c->hole_s[0] == base) {
		c->contig = c->hole_e[0];
		memmove(c->hole_s, c->hole_s + 1, (c->n_holes - 1) * sizeof(uint32_t));
		memmove(c->hole_e, c->hole_e + 1, (c->n_holes - 1) * sizeof(uint32_t));
		c->n_holes--;
	}
}

/* Apply one record to the connection's state; append it to the write
 * buffer too when `append` (live records; a restart replays the file with
 * append false). */
int ftl_apply(struct ftl *l, struct ftl_conn *c, const struct ftc_rec *r, bool append)
{
	if (append && ftl_log_append(l, c, r))
		return -1;
	l->st.records++;
	switch (r->type) {
	case FR_SYN:
		c->have_syn = true;
		c->client_isn = r->seq;
		c->contig = r->seq + 1;
		break;
	case FR_SYNACK:
		c->have_synack = true;
		c->server_isn = r->seq;
		break;
	case FR_DATA: {
		uint32_t end = r->seq + r->plen + ((r->flags & 0x01) ? 1 : 0);
		if (!c->have_syn)
			break;
		add_range(c, r->seq, end);
		if (r->flags & 0x01) {
			c->have_fin = true;
			c->fin_seq = end - 1;
		}
		if ((r->flags & 0x10) && c->have_synack &&
		    (!c->have_ack || ftc_seq_lt(c->max_ack, r->ack)))
			c->max_ack = r->ack, c->have_ack = true;
		l->st.data_bytes += r->plen;
		break;
	}
	case FR_READ:
		if (r->flags == FTL_READ_TRUNC) {
			/* recovery dropped the reads past aux; recount below */
			c->reads = r->aux;
			c->read_total = r->ack | (uint64_t)r->seq << 32;
		} else {
			c->reads++;
			c->read_total += r->aux;
		}
		break;
	case FR_CRASHED:
		if (c->state == FC_LIVE || c->state == FC_CRASHED)
			c->state = FC_FROZEN;
		if (r->plen && r->plen <= FTC_OUT_TAIL && r->aux == r->plen) {
			memcpy(c->out_tail, r + 1, r->plen);
			c->out_tail_len = (uint8_t)r->plen;
			c->out_tail_end = r->ack;
		}
		break;
	case FR_RECOVERED:
		l->st.recoveries++;
		break;
	default:
		break;
	}
	return 0;
}
