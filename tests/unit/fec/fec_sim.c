/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The lossy-link harness of fec_sim.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "fec_sim.h"

#define LAT_NONE UINT32_MAX

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint32_t sim_pkt_len(uint64_t x, uint32_t min_len, uint32_t max_len)
{
	if (max_len <= min_len)
		return min_len;
	return min_len + (uint32_t)(mix64(x ^ 0x5bd1e995ull) % (max_len - min_len + 1));
}

void sim_pkt_build(uint8_t *b, uint64_t x, uint32_t len)
{
	uint32_t sum = 0;

	memset(b, 0, 28);
	b[0] = 0x45;
	il_put16(b + 2, (uint16_t)len);
	/* The IP id wraps every 65536 packets, as it would for one fast
	 * flow: the payload check keeps the ids distinct. */
	il_put16(b + 4, (uint16_t)x);
	il_put16(b + 6, 0x4000);
	b[8] = 64;
	b[9] = 17;
	il_put32(b + 12, 0x0a000001);
	il_put32(b + 16, 0x0a000100 | (uint32_t)(x % 4));
	for (unsigned i = 0; i < 20; i += 2)
		sum += il_get16(b + i);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	il_put16(b + 10, (uint16_t)~sum);
	memcpy(b + 20, &x, 8);
	for (uint32_t i = 28; i < len; i += 8) {
		uint64_t v = mix64(x * 0x100000001b3ull + i);
		uint32_t n = len - i < 8 ? len - i : 8;

		memcpy(b + i, &v, n);
	}
}

void sim_cfg_defaults(struct sim_cfg *sc)
{
	memset(sc, 0, sizeof(*sc));
	il_fec_cfg_defaults(&sc->fec);
	sc->loss.model = IL_LOSS_NONE;
	sc->npkts = 100000;
	sc->min_len = 40;
	sc->max_len = 100;
	sc->link_ns = 1000;
}

struct sim {
	const struct sim_cfg *sc;
	struct sim_res *res;
	struct il_fec_enc *enc;
	struct il_fec_dec *dec;
	struct il_loss loss, loss2;
	uint64_t link_pos;
	uint64_t x_now; /* newest data packet sent */
	uint8_t *lost;  /* per data packet: 1 lost, 2 recovered */
	uint32_t *lat;  /* per data packet: recovery latency */
	uint64_t *lost_at; /* link position of each lost data packet */
	uint8_t *link_lost;
	uint64_t link_cap;
	uint8_t *expect;
};

static bool link_drop(struct sim *s)
{
	bool a = il_loss_drop(&s->loss);
	bool b = s->sc->use_loss2 ? il_loss_drop(&s->loss2) : false;
	bool drop = a || b;

	if (s->link_pos < s->link_cap)
		s->link_lost[s->link_pos] = drop;
	s->link_pos++;
	s->res->link_pkts++;
	return drop;
}

static uint64_t now_ns(const struct sim *s)
{
	return s->link_pos * s->sc->link_ns;
}

static void on_repair(void *arg, const uint8_t *msg, uint32_t len,
		      const struct il_fec_repair_info *info)
{
	struct sim *s = arg;

	(void)info;
	s->res->repairs_sent++;
	if (len > s->res->max_repair_len)
		s->res->max_repair_len = len;
	if (link_drop(s)) {
		s->res->repairs_lost++;
		return;
	}
	il_fec_dec_repair(s->dec, msg, len, now_ns(s));
}

static void on_recover(void *arg, const uint8_t *span, uint32_t len,
		       const struct il_fec_recovery *rec)
{
	struct sim *s = arg;
	uint32_t off = s->sc->fec.span_extra;
	uint64_t x;

	(void)rec;
	if (len < off + 28) {
		s->res->bad_recovered++;
		return;
	}
	memcpy(&x, span + off + 20, 8);
	if (x >= s->sc->npkts || s->lost[x] != 1) {
		s->res->dup_recovered++;
		return;
	}
	sim_pkt_build(s->expect, x, sim_pkt_len(x, s->sc->min_len, s->sc->max_len));
	if (len != off + sim_pkt_len(x, s->sc->min_len, s->sc->max_len) ||
	    memcmp(span + off, s->expect, len - off) != 0) {
		s->res->bad_recovered++;
		return;
	}
	s->lost[x] = 2;
	s->lat[x] = (uint32_t)(s->x_now - x);
	s->res->recovered++;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void pct(uint32_t *v, uint64_t n, double *mean, double *p50, double *p99, double *max)
{
	double sum = 0;

	if (n == 0) {
		*mean = 0;
		if (p50)
			*p50 = 0;
		if (p99)
			*p99 = 0;
		if (max)
			*max = 0;
		return;
	}
	qsort(v, n, sizeof(*v), cmp_u32);
	for (uint64_t i = 0; i < n; i++)
		sum += v[i];
	*mean = sum / (double)n;
	if (p50)
		*p50 = v[n / 2];
	if (p99)
		*p99 = v[(n * 99) / 100];
	if (max)
		*max = v[n - 1];
}

/* Length of the run of lost link packets around position pos. */
static uint64_t run_len(const struct sim *s, uint64_t pos)
{
	uint64_t a = pos, b = pos;

	while (a > 0 && s->link_lost[a - 1])
		a--;
	while (b + 1 < s->link_cap && s->link_lost[b + 1])
		b++;
	return b - a + 1;
}

static void summarize(struct sim *s)
{
	struct sim_res *res = s->res;
	uint64_t n = s->sc->npkts, na = 0, ns = 0, nl = 0;
	uint32_t *all = malloc(sizeof(uint32_t) * (res->recovered + 1));
	uint32_t *sing = malloc(sizeof(uint32_t) * (res->recovered + 1));
	uint32_t *lng = malloc(sizeof(uint32_t) * (res->recovered + 1));

	if (!all || !sing || !lng) {
		free(all);
		free(sing);
		free(lng);
		return;
	}
	for (uint64_t x = 0; x < n; x++) {
		uint64_t run;

		if (!s->lost[x])
			continue;
		run = run_len(s, s->lost_at[x]);
		if (run == 1)
			res->lost_single++;
		if (s->sc->long_run && run >= s->sc->long_run)
			res->lost_long++;
		if (s->lost[x] != 2)
			continue;
		all[na++] = s->lat[x];
		if (run == 1) {
			res->rec_single++;
			sing[ns++] = s->lat[x];
		}
		if (s->sc->long_run && run >= s->sc->long_run) {
			res->rec_long++;
			lng[nl++] = s->lat[x];
		}
	}
	pct(all, na, &res->lat_mean, &res->lat_p50, &res->lat_p99, &res->lat_max);
	pct(sing, ns, &res->lat_single_mean, NULL, &res->lat_single_p99, &res->lat_single_max);
	pct(lng, nl, &res->lat_long_mean, NULL, NULL, NULL);
	free(all);
	free(sing);
	free(lng);
}

int sim_run(const struct sim_cfg *sc, struct sim_res *res)
{
	char err[512];
	struct sim s = { .sc = sc, .res = res };
	uint32_t off = sc->fec.span_extra;
	uint8_t *pkt;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	s.link_cap = sc->npkts * (1 + (uint64_t)sc->fec.c) + 100000;
	s.lost = calloc(sc->npkts, 1);
	s.lat = malloc(sizeof(uint32_t) * sc->npkts);
	s.lost_at = malloc(sizeof(uint64_t) * sc->npkts);
	s.link_lost = calloc(s.link_cap, 1);
	s.expect = aligned_alloc(64, 65536);
	pkt = aligned_alloc(64, 65536 + 64);
	if (!s.lost || !s.lat || !s.lost_at || !s.link_lost || !s.expect || !pkt) {
		fprintf(stderr, "sim: out of memory\n");
		goto out;
	}
	if (il_loss_init(&s.loss, &sc->loss, err, sizeof(err)) != 0 ||
	    (sc->use_loss2 && il_loss_init(&s.loss2, &sc->loss2, err, sizeof(err)) != 0)) {
		fprintf(stderr, "sim: %s\n", err);
		goto out;
	}
	s.enc = il_fec_enc_create(&sc->fec, on_repair, &s, err, sizeof(err));
	if (!s.enc) {
		fprintf(stderr, "sim: %s\n", err);
		goto out;
	}
	s.dec = il_fec_dec_create(&sc->fec, on_recover, &s, err, sizeof(err));
	if (!s.dec) {
		fprintf(stderr, "sim: %s\n", err);
		goto out;
	}
	res->enc_bytes = il_fec_enc_footprint(s.enc);
	res->dec_bytes = il_fec_dec_footprint(s.dec);
	memset(pkt, 0xee, off);
	if (sc->hook)
		sc->hook(0, sc->hook_arg);

	for (uint64_t x = 0; x < sc->npkts; x++) {
		uint32_t len = sim_pkt_len(x, sc->min_len, sc->max_len);
		struct il_fec_id id;

		sim_pkt_build(pkt + off, x, len);
		if (il_fec_id_ipv4(pkt + off, len, &id) != 0) {
			fprintf(stderr, "sim: bad packet %llu\n", (unsigned long long)x);
			goto out;
		}
		s.x_now = x;
		res->data_sent++;
		if (link_drop(&s)) {
			res->data_lost++;
			s.lost[x] = 1;
			s.lost_at[x] = s.link_pos - 1;
		} else {
			il_fec_dec_data(s.dec, &id, pkt, off + len, now_ns(&s));
		}
		/* The packet leaves first, then the repairs it completes. */
		il_fec_enc_add(s.enc, &id, pkt, off + len);
	}
	il_fec_enc_flush(s.enc, true);
	if (sc->hook)
		sc->hook(1, sc->hook_arg);
	res->enc = *il_fec_enc_stats(s.enc);
	res->dec = *il_fec_dec_stats(s.dec);
	if (s.link_pos < s.link_cap)
		s.link_cap = s.link_pos;
	summarize(&s);
	rc = 0;
out:
	il_fec_dec_free(s.dec);
	il_fec_enc_free(s.enc);
	free(s.lost);
	free(s.lat);
	free(s.lost_at);
	free(s.link_lost);
	free(s.expect);
	free(pkt);
	return rc;
}
