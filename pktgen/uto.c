/* SPDX-License-Identifier: BSD-3-Clause
 * --uto: the emulated senders and receivers speak the appliance's UTO
 * control protocol (docs/control.md 9-12, the frames of include/interlink/
 * wire.h), as il-uto-members and libinterlink do:
 *
 *   - every receiver JOINs each group as a receiver (id 0x10000 + r, the id
 *     its NAKs carry), every sender as a sender (its sender_id), and the run
 *     starts once a VIEW of every group names all of them;
 *   - receivers send cumulative ACKs (global_seq = their next expected, all
 *     below it held) every --ack-every messages or --ack-us microseconds,
 *     buffer_free 0xffffffff (no limit), and every member a HEARTBEAT each
 *     --heartbeat-ms; a VIEW without a member that was in one makes it join
 *     again (counted: exclusions), a receiver as a new incarnation, a
 *     sender as the same one (its numbering goes on);
 *   - senders send sender_seq below their CREDIT's limit_seq (instead of
 *     pktgen's own --window), at its rate_kbps when that is not 0, and go
 *     back to a resume notice's sender_seq (go-back-N);
 *   - from receiver 0's deliveries (which sender_seq got which global_seq)
 *     and the watermark (STABLE, DATA's stable_seq) each sender counts its
 *     messages not known stable: max_unstable, which the credit bounds.
 *
 * Not handled: an appliance restart (new epoch) mid-run.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "pktgen.h"

#define RCV_ID(r) (0x10000u + (r))
#define JOIN_EVERY_MS 50
#define ACK_KEEPALIVE_MS 50

int pg_uto_init(struct pg_state *s)
{
	struct pg_uto *u = &s->uto;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	/* A new incarnation every run: the sequencer forgets the FIFO state
	 * of the senders' previous runs (docs/control.md 12). */
	u->incarnation = (uint32_t)(ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u) ^
			 ((uint32_t)getpid() << 16);
	if (!u->incarnation)
		u->incarnation = 1;
	for (unsigned r = 0; r < s->c.receivers; r++)
		for (unsigned g = 0; g < s->c.groups; g++)
			u->r[r][g].inc = u->incarnation;
	for (unsigned i = 0; i < s->c.senders; i++)
		for (unsigned g = 0; g < s->c.groups; g++) {
			struct pg_uto_snd *us = &u->s[i][g];
			us->stable_next = 1;
			us->inc = u->incarnation;
			us->ring = calloc(PG_UTO_RING, sizeof(*us->ring));
			if (!us->ring)
				return -1;
		}
	return 0;
}

static void flush(struct pg_state *s)
{
	struct pg_uto *u = &s->uto;
	unsigned off = 0;

	for (unsigned i = 0; i < u->nq; i++)
		pg_auth_seal(s, u->q[i]); /* --auth-keys: the body is in place now */
	for (int tries = 0; off < u->nq && tries < 64; tries++)
		off += rte_eth_tx_burst(s->tx_port, 0, u->q + off, (uint16_t)(u->nq - off));
	if (off < u->nq) {
		u->ctl_tx_fail += u->nq - off;
		rte_pktmbuf_free_bulk(u->q + off, u->nq - off);
	}
	u->nq = 0;
}

/* A control frame into the appliance's "in" port, header h in our epoch;
 * the body follows the header, returned for the caller to fill (NULL: no
 * mbuf). */
static uint8_t *ctl_frame(struct pg_state *s, unsigned gi, struct il_hdr_fields h,
			  uint32_t src_ip, unsigned body)
{
	struct pg_uto *u = &s->uto;
	struct rte_mbuf *m;

	if (u->nq == RTE_DIM(u->q))
		flush(s);
	h.epoch = u->epoch;
	uint8_t *b = pg_ctl_frame(s, &m, gi, h, src_ip, 7000, body);
	if (!b) {
		u->ctl_tx_fail++;
		return NULL;
	}
	u->q[u->nq++] = m;
	return b;
}

static void send_member(struct pg_state *s, uint8_t type, unsigned gi, uint32_t id,
			uint32_t roles, uint32_t inc)
{
	uint32_t ip = roles == IL_ROLE_RECEIVER ? 0x0a010000u | (id - RCV_ID(0) + 1)
						: 0x0a000000u | id;
	uint8_t *b = ctl_frame(s, gi, (struct il_hdr_fields){ .type = type, .sender_id = id }, ip,
			       IL_MEMBER_MSG_LEN);
	if (!b)
		return;
	il_member_put(b, roles, inc);
	if (type == IL_T_JOIN)
		s->uto.joins_tx++;
	else if (type == IL_T_HEARTBEAT)
		s->uto.hb_tx++;
	else if (type == IL_T_LEAVE)
		s->uto.leaves_tx++;
}

static void send_ack(struct pg_state *s, unsigned r, unsigned gi, uint64_t now)
{
	struct pg_uto_rcv *ur = &s->uto.r[r][gi];
	uint64_t next = s->rx[r].g[gi].next;
	uint8_t *b = ctl_frame(s, gi,
			       (struct il_hdr_fields){ .type = IL_T_ACK, .sender_id = RCV_ID(r),
						       .global_seq = next },
			       0x0a010000u | (r + 1), IL_ACK_LEN);
	if (!b)
		return;
	il_ack_put(b, ur->view_id, 0xffffffffu); /* no buffer limit */
	ur->acked = next;
	ur->last_ack = now;
	s->uto.acks_tx++;
}

void pg_uto_poll(struct pg_state *s, uint64_t now)
{
	struct pg_uto *u = &s->uto;
	const struct pg_conf *c = &s->c;
	const uint64_t hz = s->hz;
	const uint64_t hb = (uint64_t)(c->hb_ms * (double)hz / 1e3);
	const uint64_t ack_t = (uint64_t)(c->ack_us * (double)hz / 1e6);
	const uint64_t join_t = hz / 1000 * JOIN_EVERY_MS, keep = hz / 1000 * ACK_KEEPALIVE_MS;

	for (unsigned r = 0; r < c->receivers; r++)
		for (unsigned gi = 0; gi < c->groups; gi++) {
			struct pg_uto_rcv *ur = &u->r[r][gi];
			if (!ur->member) {
				if (now - ur->last_join >= join_t) {
					send_member(s, IL_T_JOIN, gi, RCV_ID(r), IL_ROLE_RECEIVER, ur->inc);
					ur->last_join = ur->last_hb = now;
				}
				continue;
			}
			if (now - ur->last_hb >= hb) {
				send_member(s, IL_T_HEARTBEAT, gi, RCV_ID(r), IL_ROLE_RECEIVER, ur->inc);
				ur->last_hb = now;
			}
			uint64_t next = s->rx[r].g[gi].next;
			if (next >= ur->acked + c->ack_every ||
			    (next != ur->acked && now - ur->last_ack >= ack_t) ||
			    now - ur->last_ack >= keep)
				send_ack(s, r, gi, now);
		}
	for (unsigned i = 0; i < c->senders; i++)
		for (unsigned gi = 0; gi < c->groups; gi++) {
			if (!u->s[i][gi].member) {
				if (now - u->snd_last_join[i][gi] >= join_t) {
					send_member(s, IL_T_JOIN, gi, i + 1, IL_ROLE_SENDER, u->s[i][gi].inc);
					u->snd_last_join[i][gi] = u->snd_last_hb[i][gi] = now;
				}
			} else if (now - u->snd_last_hb[i][gi] >= hb) {
				send_member(s, IL_T_HEARTBEAT, gi, i + 1, IL_ROLE_SENDER, u->s[i][gi].inc);
				u->snd_last_hb[i][gi] = now;
			}
		}
	if (u->nq)
		flush(s);
}

static void learn_epoch(struct pg_uto *u, const uint8_t *h)
{
	uint32_t e = il_get32(h + IL_OFF_EPOCH);

	if (!u->have_epoch) {
		u->epoch = e;
		u->have_epoch = true;
	} else if (il_epoch_after(u->epoch, e)) {
		/* A frame of an older epoch (an appliance of a pair that was
		 * replaced, docs/ha.md): ignored, counted. */
		u->stale_epoch++;
	}
}

static void on_view(struct pg_state *s, unsigned gi, const uint8_t *h, const uint8_t *b,
		    unsigned blen)
{
	struct pg_uto *u = &s->uto;
	const struct pg_conf *c = &s->c;
	struct il_view_body v;

	if (il_view_get(b, blen, &v) != 0)
		return;
	uint64_t start = il_get64(h + IL_OFF_GLOBAL_SEQ);

	u->views_rx++;
	for (unsigned r = 0; r < c->receivers; r++) {
		struct pg_uto_rcv *ur = &u->r[r][gi];
		if (il_view_has(&v, RCV_ID(r))) {
			if (!ur->joined && start) {
				/* Fast-Join: the stream starts at the view's start,
				 * each sender's at its entry. */
				struct pg_rgroup *rg = &s->rx[r].g[gi];
				rg->next = start;
				if (rg->hi < start)
					rg->hi = start;
				for (unsigned k = 0; k < v.n_senders; k++) {
					uint32_t id = il_view_sender_id(&v, k);
					if (id >= 1 && id <= c->senders)
						rg->sender_next[id] = il_view_sender_next(&v, k);
				}
			}
			ur->joined = true;
			ur->member = true;
			ur->view_id = v.view_id;
		} else if (ur->member) {
			/* Excluded (it is alive): join again as a new incarnation. */
			ur->member = false;
			ur->last_join = 0;
			ur->inc++;
			u->exclusions++;
		}
	}
	for (unsigned i = 0; i < c->senders; i++) {
		bool in = il_view_has(&v, i + 1);
		if (!in && u->s[i][gi].member) {
			/* Rejoin with the same incarnation: the sequencer goes
			 * on with this sender's numbering (a new incarnation
			 * would restart its FIFO, docs/control.md 12). */
			u->exclusions++;
			u->snd_last_join[i][gi] = 0;
		}
		u->s[i][gi].member = in;
	}
}

static void on_credit(struct pg_state *s, unsigned gi, const uint8_t *h, const uint8_t *b,
		      unsigned blen)
{
	struct pg_uto *u = &s->uto;
	uint32_t id = il_get32(h + IL_OFF_SENDER_ID);
	uint64_t rs = il_get64(h + IL_OFF_SENDER_SEQ);
	struct il_credit_body cr;

	if (il_credit_get(b, blen, &cr) != 0 || id < 1 || id > s->c.senders)
		return;
	struct pg_uto_snd *us = &u->s[id - 1][gi];
	struct pg_sender *snd = &s->senders[id - 1];

	u->credits_rx++;
	if (cr.limit_seq) {
		u->credited = true;
		us->credited = true;
		if (cr.limit_seq > us->limit)
			us->limit = cr.limit_seq;
	}
	if (cr.window > u->credit_window)
		u->credit_window = cr.window;
	us->rate_kbps = cr.rate_kbps;
	if (cr.rate_kbps)
		u->rate_kbps = cr.rate_kbps;
	if (rs) {
		/* A resume notice: nothing from rs on was stamped: go back. */
		u->resumes_rx++;
		if (rs < snd->seq[gi] && rs >= us->stable_next) {
			uint64_t back = snd->seq[gi] - rs;
			snd->seq[gi] = rs;
			snd->sent_msgs -= back;
			s->group_sent[gi] -= back;
			s->tx_msgs -= back;
			u->resumed_msgs += back;
		}
	}
}

bool pg_uto_on_control(struct pg_state *s, unsigned gi, const uint8_t *h, unsigned type,
		       unsigned hdr_len, unsigned body_len, uint64_t now)
{
	struct pg_uto *u = &s->uto;
	(void)now;
	if (type != IL_T_VIEW && type != IL_T_CREDIT && type != IL_T_STABLE)
		return false;
	learn_epoch(u, h);
	if (il_get32(h + IL_OFF_EPOCH) != u->epoch)
		return true; /* another epoch: not handled */
	switch (type) {
	case IL_T_VIEW:
		on_view(s, gi, h, h + hdr_len, body_len);
		break;
	case IL_T_CREDIT:
		on_credit(s, gi, h, h + hdr_len, body_len);
		break;
	case IL_T_STABLE:
		u->stable_rx++;
		if ((h[IL_OFF_FLAGS] & IL_F_STABLE_VALID) &&
		    il_get64(h + IL_OFF_STABLE_SEQ) > u->wm[gi])
			u->wm[gi] = il_get64(h + IL_OFF_STABLE_SEQ);
		break;
	}
	return true;
}

void pg_uto_on_data(struct pg_state *s, unsigned gi, const uint8_t *h)
{
	struct pg_uto *u = &s->uto;
	learn_epoch(u, h);
	if ((h[IL_OFF_FLAGS] & IL_F_STABLE_VALID) && il_get32(h + IL_OFF_EPOCH) == u->epoch &&
	    il_get64(h + IL_OFF_STABLE_SEQ) > u->wm[gi])
		u->wm[gi] = il_get64(h + IL_OFF_STABLE_SEQ);
}

void pg_uto_delivered(struct pg_state *s, unsigned gi, uint32_t id, uint64_t sseq,
		      uint64_t gseq)
{
	struct pg_uto_rec *e = &s->uto.s[id - 1][gi].ring[sseq & (PG_UTO_RING - 1)];
	e->sseq = sseq;
	e->gseq = gseq;
}

/* Move stable_next over what the watermark covers. */
static void settle(struct pg_state *s, struct pg_uto_snd *us, uint64_t next, unsigned gi)
{
	const uint64_t wm = s->uto.wm[gi];
	while (us->stable_next < next) {
		const struct pg_uto_rec *e = &us->ring[us->stable_next & (PG_UTO_RING - 1)];
		if (e->sseq != us->stable_next || e->gseq >= wm)
			break;
		us->stable_next++;
	}
}

unsigned pg_uto_allow(struct pg_state *s, struct pg_sender *snd, unsigned gi, unsigned msgs,
		      uint64_t now)
{
	struct pg_uto *u = &s->uto;
	struct pg_uto_snd *us = &u->s[snd->id - 1][gi];
	uint64_t seq = snd->seq[gi];
	unsigned k = msgs;

	if (!us->member)
		return 0;
	if (u->credited) {
		uint64_t room = us->limit > seq ? us->limit - seq : 0;
		if (room < k)
			k = (unsigned)room;
		if (!k) {
			if (!us->blk_since)
				us->blk_since = now;
			return 0;
		}
	}
	if (us->blk_since) {
		u->blocked_tsc += now - us->blk_since;
		us->blk_since = 0;
	}
	if (us->rate_kbps && now < us->next_tx_tsc)
		return 0;
	return k;
}

void pg_uto_sent(struct pg_state *s, struct pg_sender *snd, unsigned gi, unsigned len,
		 uint64_t now)
{
	struct pg_uto_snd *us = &s->uto.s[snd->id - 1][gi];
	uint64_t next = snd->seq[gi];

	if (us->rate_kbps) {
		/* frame bits at rate_kbps, from now or the previous frame's due
		 * time if later (no credit for idle time) */
		uint64_t base = us->next_tx_tsc > now ? us->next_tx_tsc : now;
		us->next_tx_tsc = base + (uint64_t)((double)len * 8.0 * (double)s->hz /
						    ((double)us->rate_kbps * 1000.0));
	}
	settle(s, us, next, gi);
	if (next - us->stable_next > us->max_unstable)
		us->max_unstable = next - us->stable_next;
}

uint64_t pg_uto_max_unstable(const struct pg_state *s)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < s->c.senders; i++)
		for (unsigned g = 0; g < s->c.groups; g++)
			if (s->uto.s[i][g].max_unstable > m)
				m = s->uto.s[i][g].max_unstable;
	return m;
}

static bool all_named(const struct pg_state *s, char *why, size_t n)
{
	const struct pg_uto *u = &s->uto;
	for (unsigned gi = 0; gi < s->c.groups; gi++) {
		for (unsigned r = 0; r < s->c.receivers; r++)
			if (!u->r[r][gi].member) {
				snprintf(why, n, "no VIEW of group %u names receiver %u (member id "
					 "0x%x)", s->c.group_base + gi, r, RCV_ID(r));
				return false;
			}
		for (unsigned i = 0; i < s->c.senders; i++)
			if (!u->s[i][gi].member) {
				snprintf(why, n, "no VIEW of group %u names sender %u",
					 s->c.group_base + gi, i + 1);
				return false;
			}
	}
	return true;
}

static void rx_some(struct pg_state *s)
{
	struct rte_mbuf *rx[PG_BURST];
	uint16_t k = rte_eth_rx_burst(s->rx_port, 0, rx, PG_BURST);
	if (k)
		pg_receive_burst(s, rx, k);
}

int pg_uto_join(struct pg_state *s)
{
	struct pg_uto *u = &s->uto;
	const uint64_t hz = s->hz, t0 = rte_rdtsc();
	char why[160];

	u->started = true;
	for (;;) {
		uint64_t now = rte_rdtsc();
		rx_some(s);
		pg_uto_poll(s, now);
		if (all_named(s, why, sizeof(why)))
			break;
		if ((double)(now - t0) / (double)hz >= s->c.view_wait_s) {
			fprintf(stderr, "interlink-pktgen: --uto: %s after %g s (%" PRIu64
				" VIEWs seen, %s; is interlink-control running beside a "
				"'control' stage, and do --group-base/--udp-port match the "
				"appliance?)\n", why, s->c.view_wait_s, u->views_rx,
				u->have_epoch ? "frames from the appliance seen"
					      : "nothing from the appliance");
			return -1;
		}
		if (s->quit)
			return -1;
		usleep(100);
	}
	/* Then a first CREDIT for every sender, if the group has a window. */
	const uint64_t t1 = rte_rdtsc();
	for (;;) {
		uint64_t now = rte_rdtsc();
		bool all = true;
		rx_some(s);
		pg_uto_poll(s, now);
		for (unsigned i = 0; i < s->c.senders; i++)
			for (unsigned gi = 0; gi < s->c.groups; gi++)
				all = all && u->s[i][gi].credited;
		if (all)
			break;
		if ((double)(now - t1) / (double)hz >= s->c.credit_wait_s) {
			if (!u->credited && !s->c.quiet)
				printf("interlink-pktgen: --uto: no CREDIT within %g s: no window "
				       "(interlink-control without --window?); senders are not "
				       "flow-controlled\n", s->c.credit_wait_s);
			break;
		}
		if (s->quit)
			return -1;
		usleep(100);
	}
	if (!s->c.quiet) {
		printf("interlink-pktgen: --uto: %u receivers and %u senders in the views of %u "
		       "groups (epoch %u) after %.1f ms\n", s->c.receivers, s->c.senders,
		       s->c.groups, u->epoch, (double)(rte_rdtsc() - t0) * 1e3 / (double)hz);
		fflush(stdout);
	}
	return 0;
}

bool pg_uto_finish(struct pg_state *s, double secs)
{
	struct pg_uto *u = &s->uto;
	const uint64_t hz = s->hz, t0 = rte_rdtsc();
	bool stable = false;

	for (unsigned r = 0; r < s->c.receivers; r++)
		for (unsigned gi = 0; gi < s->c.groups; gi++)
			if (u->r[r][gi].member)
				send_ack(s, r, gi, t0);
	for (;;) {
		uint64_t now = rte_rdtsc();
		rx_some(s);
		pg_uto_poll(s, now);
		stable = true;
		for (unsigned gi = 0; gi < s->c.groups; gi++)
			if (u->wm[gi] <= s->group_sent[gi])
				stable = false;
		if (stable || s->quit || (double)(now - t0) / (double)hz >= secs)
			break;
		usleep(100);
	}
	uint64_t end = rte_rdtsc();
	for (unsigned i = 0; i < s->c.senders; i++)
		for (unsigned gi = 0; gi < s->c.groups; gi++)
			if (u->s[i][gi].blk_since) {
				u->blocked_tsc += end - u->s[i][gi].blk_since;
				u->s[i][gi].blk_since = 0;
			}
	for (unsigned r = 0; r < s->c.receivers; r++)
		for (unsigned gi = 0; gi < s->c.groups; gi++)
			send_member(s, IL_T_LEAVE, gi, RCV_ID(r), IL_ROLE_RECEIVER, u->r[r][gi].inc);
	for (unsigned i = 0; i < s->c.senders; i++)
		for (unsigned gi = 0; gi < s->c.groups; gi++)
			send_member(s, IL_T_LEAVE, gi, i + 1, IL_ROLE_SENDER, u->s[i][gi].inc);
	flush(s);
	return stable;
}
