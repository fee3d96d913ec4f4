/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Stage `ftcp`: the FT-TCP south-side wrapper (Alvisi et al., "Wrapping
 * server-side TCP to mask connection failures"), for the connections to
 * the configured server addresses and ports. It sits in both chains of a
 * bump in the wire (clients <-> servers) and decides the direction of a
 * segment from its addresses.
 *
 *  client -> server: checksum verified, copied to the logger's ring (a full
 *    ring drops the segment: TCP retransmits it, no unlogged byte goes on),
 *    ack shifted by -delta_seq.
 *  server -> client: seq shifted by +delta_seq, ack clamped to stable_seq
 *    with the window widened so its right edge stays put; the SYN-ACK is
 *    held until both ISNs are logged; a FIN or RST the shim did not
 *    announce is dropped (a killed server's kernel sends them).
 *  recovery: closed-window acks to the client, an RST to the dead server
 *    socket, a fabricated SYN to the restarted server whose SYN-ACK is
 *    absorbed and answered; until it listens again, its kernel's refusal
 *    of a new connection is dropped (the client's next SYN gets through).
 *
 * SACK and timestamps are removed from the handshake (options become NOPs):
 * a restarted server would otherwise need TSval offsets and SACK block
 * translation; docs/ft-tcp.md explains the trade.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_hash.h>
#include <rte_ip.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include <interlink/app.h>
#include <interlink/csum.h>
#include <interlink/frame.h>
#include <interlink/stage.h>

#include "ftcp.h"

#include "ftcp_pkt.h"
#include "ftcp_timer.h"

static inline uint64_t tsc_us(const struct ftcp *f, uint64_t dt)
{
	return dt * 1000000 / f->hz;
}

/* ---- logger ring ----------------------------------------------------- */

static void wake_logger(struct ftcp *f)
{
	if (!f->pend)
		return;
	il_shm_publish(&f->ring->tx);
	f->pend = false;
	if (f->wake_fd >= 0 && il_shm_wake_due(&f->ring->tx)) {
		char b = 1;
		/* One datagram per logger sleep; never blocks, harmless if the
		 * logger is down (it drains the ring when it comes back). */
		(void)sendto(f->wake_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
			     (struct sockaddr *)&f->wake_addr, sizeof(f->wake_addr));
	}
}

static bool log_rec(struct ftcp *f, const struct ftc_key *k, uint16_t type, uint32_t seq,
		    uint32_t ack, uint16_t win, uint8_t flags, uint32_t aux, const void *p,
		    uint32_t plen)
{
	uint32_t len = ftc_rec_size(plen);
	struct ftc_rec *r;

	if (!f->ring)
		return false;
	/* A full ring counts the drop in the ring's own counter. */
	r = il_shm_reserve(&f->ring->tx, len);
	if (!r)
		return false;
	r->len = len;
	r->type = type;
	r->plen = (uint16_t)plen;
	r->key = *k;
	r->seq = seq;
	r->ack = ack;
	r->win = win;
	r->flags = flags;
	r->spare = 0;
	r->aux = aux;
	r->ts_ns = 0;
	if (plen)
		memcpy(r + 1, p, plen);
	/* Published once per burst (wake_logger), not per record. */
	f->pend = true;
	return true;
}

/* ---- packets the stage makes ------------------------------------------ */

static void make_seg(struct il_stage *st, struct ftcp_flow *fl, bool to_server, uint32_t seq,
		     uint32_t ack, uint8_t flags, uint16_t win, const uint8_t *opt,
		     uint8_t optlen)
{
	struct ftcp *f = st->ctx;
	const struct ftc_key *k = &fl->key;
	struct rte_mbuf *m = il_pktmbuf_alloc(f->app->pool);
	struct il_path p = {
		.src_ip = rte_be_to_cpu_32(to_server ? k->cip : k->sip),
		.dst_ip = rte_be_to_cpu_32(to_server ? k->sip : k->cip),
		.src_port = rte_be_to_cpu_16(to_server ? k->cport : k->sport),
		.dst_port = rte_be_to_cpu_16(to_server ? k->sport : k->cport),
		.ttl = 64,
		.df = true,
	};
	struct il_tcp_seg ts = { .seq = seq, .ack = ack, .flags = flags, .win = win,
				 .opt = opt, .optlen = optlen };

	if (!m) {
		st->ctr[C_DROP_NO_MBUF]++;
		return;
	}
	memcpy(p.dst_mac, to_server ? fl->smac : fl->cmac, 6);
	memcpy(p.src_mac, to_server ? fl->cmac : fl->smac, 6);
	il_tcp_frame_put((uint8_t *)rte_pktmbuf_append(m, il_tcp_frame_len(&ts)), &p, 0, &ts);
	il_emit(st, to_server ? f->sport : f->cport, m);
}

/* An ack to the client that TCP did not send: Eager/Conditional, and the
 * window update that ends recovery. Seq and window are the latest the
 * server sent (digest G6), the right edge kept. */
static void gen_ack(struct il_stage *st, struct ftcp_flow *fl)
{
	/* Never past the server TCP's own ack either: bytes can be logged
	 * that TCP dropped (out of its window), and acking them would stop
	 * the client from ever resending them (G7). */
	uint32_t ack = ftc_seq_min(fl->stable_seq, fl->last_asn);
	uint32_t edge = fl->last_asn + fl->last_win_bytes;
	uint64_t w = ftc_seq_lt(ack, edge) ? edge - ack : 0;

	make_seg(st, fl, false, fl->seq_hi, ack, IL_TCP_F_ACK, edge_window(fl, ack, w), NULL, 0);
	st->ctr[C_ACKS_GENERATED]++;
	st->ctr[C_ACKS_TO_CLIENT]++;
}

static void send_fab_syn(struct il_stage *st, struct ftcp_flow *fl)
{
	struct ftcp *f = st->ctx;
	uint8_t opt[8] = {2, 4, (uint8_t)(fl->mss >> 8), (uint8_t)fl->mss, 1, 1, 1, 0};

	/* The client's original options (minus SACK and timestamps), so the
	 * new server TCP sees the same MSS and window scale (G8). */
	if (fl->has_cws) {
		opt[5] = 3;
		opt[6] = 3;
		opt[7] = fl->cws;
		opt[4] = 1;
	}
	make_seg(st, fl, true, fl->fab_isn, 0, IL_TCP_F_SYN, fl->syn_win, opt, 8);
	fl->syn_sent = true;
	fl->syn_tsc = rte_rdtsc();
	ftl_append(f, (int32_t)(fl - f->flows), FTL_SYN);
	st->ctr[C_FAB_SYNS]++;
}

/* ---- flows ------------------------------------------------------------ */

static struct ftcp_flow *flow_get(struct ftcp *f, const struct ftc_key *k)
{
	int32_t pos = rte_hash_lookup(f->h, k);
	return pos < 0 ? NULL : &f->flows[pos];
}

static void flow_del(struct il_stage *st, struct ftcp_flow *fl)
{
	struct ftcp *f = st->ctx;
	uint32_t lag = fl->c2s_next - fl->stable_seq;

	if (fl->state != FT_SYN && ftc_seq_lt(fl->stable_seq, fl->c2s_next) &&
	    st->ctr[C_LAG_BYTES] >= lag)
		st->ctr[C_LAG_BYTES] -= lag;
	rte_pktmbuf_free(fl->held_synack);
	rte_pktmbuf_free(fl->held_ack);
	if (fl->held_rec) /* its recovery never completed */
		il_drop(st, C_DROP_IN_RECOVERY, fl->held_rec);
	ftl_unlink_all(f, (int32_t)(fl - f->flows));
	rte_hash_del_key(f->h, &fl->key);
	memset(fl, 0, sizeof(*fl));
	st->ctr[C_FLOWS_ACTIVE]--;
}

static void flow_closing(struct il_stage *st, struct ftcp_flow *fl)
{
	struct ftcp *f = st->ctx;

	if (fl->state == FT_CLOSING)
		return;
	fl->state = FT_CLOSING;
	fl->close_tsc = rte_rdtsc();
	ftl_append(f, (int32_t)(fl - f->flows), FTL_CLOSING);
	/* Compaction request; if the ring is full the logger's own close
	 * rule (FIN seen both ways) still compacts it. */
	log_rec(f, &fl->key, FR_CLOSED, 0, 0, 0, 0, 0, NULL, 0);
}

static void stable_advance(struct il_stage *st, struct ftcp_flow *fl, uint32_t a)
{
	struct ftcp *f = st->ctx;
	uint32_t adv, old = fl->stable_seq;

	if (!ftc_seq_lt(old, a))
		return;
	fl->stable_seq = a;
	adv = a - old;
	st->ctr[C_BYTES_STABLE] += adv;
	if (st->ctr[C_LAG_BYTES] >= adv)
		st->ctr[C_LAG_BYTES] -= adv;
	else
		st->ctr[C_LAG_BYTES] = 0;
	if (fl->lag_tsc && ftc_seq_le(fl->lag_seq, a)) {
		uint64_t us = tsc_us(f, rte_rdtsc() - fl->lag_tsc);
		st->ctr[C_LAG_US_LAST] = us;
		if (us > st->ctr[C_LAG_US_MAX])
			st->ctr[C_LAG_US_MAX] = us;
		fl->lag_tsc = 0;
	}
	if ((fl->state != FT_EST && fl->state != FT_CLOSING) || fl->post_pending ||
	    f->strategy == FTCP_BASIC)
		return;
	if (f->n_post < RTE_DIM(f->post)) {
		fl->post_pending = true;
		f->post[f->n_post++] = (int32_t)(fl - f->flows);
	}
}

static void post_burst(struct il_stage *st)
{
	struct ftcp *f = st->ctx;

	for (uint16_t i = 0; i < f->n_post; i++) {
		struct ftcp_flow *fl = &f->flows[f->post[i]];

		if (!fl->post_pending)
			continue;
		fl->post_pending = false;
		if (fl->state != FT_EST && fl->state != FT_CLOSING)
			continue;
		switch (f->strategy) {
		case FTCP_LAZY:
			if (fl->held_ack && ftc_seq_le(fl->held_asn, fl->stable_seq)) {
				il_emit(st, f->cport, fl->held_ack);
				fl->held_ack = NULL;
				fl->clamped_pending = false;
				st->ctr[C_ACKS_TO_CLIENT]++;
			} else if (!fl->held_ack && fl->clamped_pending &&
				   ftc_seq_le(fl->last_asn, fl->stable_seq)) {
				/* A clamped data or FIN segment was TCP's last
				 * word: with nothing held, say it once the log
				 * caught up, or a server that has finished (the
				 * client's FIN in its ack) would never be heard
				 * acking it and the client's retransmitted FIN
				 * would meet a closed socket's RST. */
				fl->clamped_pending = false;
				gen_ack(st, fl);
			}
			break;
		case FTCP_EAGER:
			gen_ack(st, fl);
			break;
		case FTCP_CONDITIONAL:
			/* Only when TCP's own ack was clamped and nothing arrived
			 * since (a later arrival makes TCP ack again anyway). */
			if (fl->clamped_pending && ftc_seq_le(fl->c2s_next, fl->stable_seq)) {
				fl->clamped_pending = false;
				gen_ack(st, fl);
			}
			break;
		default:
			break;
		}
	}
	f->n_post = 0;
}

/* The server's newest output bytes [seq, seq + n) (client-visible seq):
 * the last FTC_OUT_TAIL of the stream are kept, for FR_CRASHED. A
 * retransmission adds nothing; a gap starts the window over. */
static void tail_note(struct ftcp_flow *fl, uint32_t seq, const uint8_t *p, uint32_t n)
{
	uint32_t end = seq + n, keep = FTC_OUT_TAIL;
	uint8_t buf[2 * FTC_OUT_TAIL];
	uint32_t have = 0;

	if (!n || (fl->out_tail_len && !ftc_seq_lt(fl->out_tail_end, end)))
		return;
	if (fl->out_tail_len && !ftc_seq_lt(fl->out_tail_end, seq)) {
		/* Contiguous with what is kept: the new bytes follow it. */
		uint32_t add = end - fl->out_tail_end;
		p += n - add;
		n = add;
		have = fl->out_tail_len;
		memcpy(buf, fl->out_tail, have);
	}
	if (n >= keep) {
		memcpy(fl->out_tail, p + n - keep, keep);
		fl->out_tail_len = (uint8_t)keep;
	} else {
		memcpy(buf + have, p, n);
		have += n;
		uint32_t k = have < keep ? have : keep;
		memcpy(fl->out_tail, buf + have - k, k);
		fl->out_tail_len = (uint8_t)k;
	}
	fl->out_tail_end = end;
}

/* FR_CRASHED: seq = the instream's end, ack = the end of the output tail
 * kept, aux = its length, the tail as payload. */
static bool log_crashed(struct ftcp *f, struct ftcp_flow *fl)
{
	return log_rec(f, &fl->key, FR_CRASHED, fl->c2s_next, fl->out_tail_end, 0, 0,
		       fl->out_tail_len, fl->out_tail, fl->out_tail_len);
}

/* The protect entry of a flow's server (address and port), -1: none. */
static int prot_index(const struct ftcp *f, const struct ftc_key *k)
{
	for (unsigned p = 0; p < f->n_protect; p++)
		if (f->prot_ip[p] == k->sip && f->prot_port[p] == k->sport)
			return (int)p;
	return -1;
}

static void on_down(struct il_stage *st, const struct ftc_down *d)
{
	struct ftcp *f = st->ctx;
	struct ftcp_flow *fl = flow_get(f, &d->key);

	st->ctr[C_LOGGER_MSGS]++;
	if (!fl)
		return;
	switch (d->type) {
	case FD_STABLE:
		if ((d->flags & FD_F_ISNS) && !fl->isns_logged) {
			fl->isns_logged = true;
			if (fl->state == FT_SYNACK_HELD && fl->held_synack) {
				il_emit(st, f->cport, fl->held_synack);
				fl->held_synack = NULL;
				fl->state = FT_EST;
				st->ctr[C_ACKS_TO_CLIENT]++;
			}
		}
		if (fl->state != FT_SYN && fl->state != FT_SYNACK_HELD)
			stable_advance(st, fl, d->a);
		break;
	case FD_CRASH:
		if (fl->state == FT_RECOVERING) {
			/* The restarted server died before it accepted the
			 * fabricated connection: wait for the next FD_RECOVER. */
			fl->syn_sent = false;
			ftl_unlink(f, (int32_t)(fl - f->flows), ftl_slot[FTL_SYN]); /* no more SYNs */
			fl->crash_rec_pending = !log_crashed(f, fl);
			if (fl->crash_rec_pending)
				ftl_append(f, (int32_t)(fl - f->flows), FTL_CRASH);
			break;
		}
		if (fl->state != FT_EST && fl->state != FT_SYNACK_HELD)
			break;
		if (f->refusal_hold_tsc) {
			int p = prot_index(f, &fl->key);
			if (p >= 0)
				f->prot_down_until[p] = rte_rdtsc() + f->refusal_hold_tsc;
		}
		fl->state = FT_RECOVERING;
		fl->rec_tsc = rte_rdtsc();
		fl->syn_sent = false;
		rte_pktmbuf_free(fl->held_ack);
		fl->held_ack = NULL;
		rte_pktmbuf_free(fl->held_synack);
		fl->held_synack = NULL;
		/* Kill the dead process's socket so the fabricated SYN meets the
		 * listener, not a lingering FIN_WAIT socket (seq = its rcv_nxt). */
		make_seg(st, fl, true, fl->c2s_next, 0, IL_TCP_F_RST, 0, NULL, 0);
		st->ctr[C_RST_TO_SERVER]++;
		fl->crash_rec_pending = !log_crashed(f, fl);
		if (fl->crash_rec_pending)
			ftl_append(f, (int32_t)(fl - f->flows), FTL_CRASH);
		break;
	case FD_RECOVER:
		if (fl->state != FT_RECOVERING)
			break;
		fl->fab_isn = d->a;
		fl->server_seq = d->b;
		send_fab_syn(st, fl);
		break;
	case FD_CLOSE_OK:
		fl->close_ok = true;
		break;
	case FD_ABANDON:
		/* The logger gave the connection up (docs/ft-tcp.md, mass
		 * recovery): the client is told at once instead of waiting on a
		 * closed window, and a fabricated connection is reset too. */
		make_seg(st, fl, false, fl->out_nxt, fl->stable_seq, IL_TCP_F_RST | IL_TCP_F_ACK, 0, NULL,
			 0);
		if (fl->syn_sent || fl->recovered) {
			make_seg(st, fl, true, fl->c2s_next, 0, IL_TCP_F_RST, 0, NULL, 0);
			st->ctr[C_RST_TO_SERVER]++;
		}
		st->ctr[C_RECOVERIES_ABANDONED]++;
		flow_del(st, fl);
		break;
	default:
		break;
	}
}

/* ---- the two directions -------------------------------------------- */

/* Returns true if the packet goes on. */
static bool from_client(struct il_stage *st, struct rte_mbuf *m, struct seg *s)
{
	struct ftcp *f = st->ctx;
	struct ftc_key k = {s->ip->src_addr, s->ip->dst_addr, s->tcp->src_port,
			    s->tcp->dst_port};
	struct ftcp_flow *fl;
	uint32_t end;

	if (!csum_ok(s)) {
		/* Never log (or let TCP ack) a corrupt segment (G7). */
		il_drop(st, C_DROP_BAD_CSUM, m);
		return false;
	}
	fl = flow_get(f, &k);
	if ((s->flags & (IL_TCP_F_SYN | IL_TCP_F_ACK)) == IL_TCP_F_SYN) {
		uint16_t mss = 536;
		uint8_t ws = 0;
		bool has_ws = false, changed;
		int32_t pos;

		if (fl && fl->client_isn == s->seq && fl->state <= FT_EST) {
			changed = opts_scan(s, NULL, NULL, NULL);
		} else {
			if (fl)
				flow_del(st, fl);
			pos = rte_hash_add_key(f->h, &k);
			if (pos < 0) {
				il_drop(st, C_DROP_FLOW_TABLE_FULL, m);
				return false;
			}
			fl = &f->flows[pos];
			memset(fl, 0, sizeof(*fl));
			fl->key = k;
			fl->state = FT_SYN;
			st->ctr[C_FLOWS_ACTIVE]++;
			changed = opts_scan(s, &mss, &ws, &has_ws);
			fl->client_isn = s->seq;
			fl->mss = mss;
			fl->cws = ws;
			fl->has_cws = has_ws;
			fl->syn_win = rte_be_to_cpu_16(s->tcp->rx_win);
			fl->last_cwin = fl->syn_win;
			fl->stable_seq = s->seq + 1;
			fl->c2s_next = fl->c_seen = s->seq + 1;
			memcpy(fl->cmac, &s->eth->src_addr, 6);
			memcpy(fl->smac, &s->eth->dst_addr, 6);
			/* A server that failed over: its new host, whatever
			 * the client's ARP cache says (arp_learn). */
			for (unsigned p = 0; p < f->n_protect; p++)
				if (f->prot_known[p] && f->prot_ip[p] == k.sip &&
				    memcmp(fl->smac, f->prot_mac[p], 6) != 0) {
					memcpy(fl->smac, f->prot_mac[p], 6);
					fl->moved = true;
				}
			st->ctr[C_CONNS]++;
		}
		if (changed)
			full_csum(s);
		uint8_t macs[12];
		memcpy(macs, fl->cmac, 6);
		memcpy(macs + 6, fl->smac, 6);
		if (!log_rec(f, &k, FR_SYN, s->seq, 0, fl->syn_win, s->flags,
			     (uint32_t)fl->mss | (uint32_t)fl->cws << 16 |
				     (uint32_t)fl->has_cws << 24,
			     macs, 12)) {
			il_drop(st, C_DROP_RING_FULL, m);
			return false;
		}
		memcpy(&s->eth->dst_addr, fl->smac, 6); /* see below */
		return true;
	}
	if (!fl)
		return true; /* not a connection we saw open: leave it alone */
	end = s->seq + s->plen + ((s->flags & IL_TCP_F_FIN) ? 1 : 0);
	if (ftc_seq_lt(fl->c_seen, end))
		fl->c_seen = end;
	if (fl->state == FT_RECOVERING) {
		if (s->flags & IL_TCP_F_RST) {
			/* The client gave up during the outage: nothing to
			 * recover (the logger drops the log). */
			if (fl->syn_sent)
				make_seg(st, fl, true, fl->fab_isn + 1, 0, IL_TCP_F_RST, 0, NULL, 0);
			st->ctr[C_RECOVERIES_CLIENT_RESET]++;
			flow_closing(st, fl);
			il_drop(st, C_DROP_IN_RECOVERY, m);
			return false;
		}
		/* Keep the client waiting, not retransmitting into the void:
		 * a closed window at stable_seq (Sec. IV-E step 1). */
		make_seg(st, fl, false, fl->seq_hi, fl->stable_seq, IL_TCP_F_ACK, 0, NULL, 0);
		st->ctr[C_CLOSED_WINDOW_ACKS]++;
		st->ctr[C_ACKS_TO_CLIENT]++;
		/* Its first segment with data is kept for the new server (a
		 * retransmission of it replaces it): a request sent into the
		 * outage reaches the restarted server as soon as it is up,
		 * not at the client's next RTO, which its backoff during the
		 * outage may have put seconds away. */
		if ((s->plen || (s->flags & IL_TCP_F_FIN)) &&
		    (!fl->held_rec || fl->held_rec_seq == s->seq)) {
			if (fl->held_rec)
				il_drop(st, C_DROP_IN_RECOVERY, fl->held_rec);
			else
				st->ctr[C_HELD_IN_RECOVERY]++;
			fl->held_rec = m;
			fl->held_rec_seq = s->seq;
			return false;
		}
		il_drop(st, C_DROP_IN_RECOVERY, m);
		return false;
	}
	if (!log_rec(f, &k, FR_DATA, s->seq, s->ack, rte_be_to_cpu_16(s->tcp->rx_win), s->flags,
		     0, s->payload, s->plen)) {
		il_drop(st, C_DROP_RING_FULL, m);
		return false;
	}
	st->ctr[C_SEGS_LOGGED]++;
	st->ctr[C_BYTES_LOGGED] += s->plen;
	/* To the host that serves the flow now (a backup after fail-over,
	 * arp_learn), whatever the client's ARP cache says. */
	memcpy(&s->eth->dst_addr, fl->smac, 6);
	fl->last_cwin = rte_be_to_cpu_16(s->tcp->rx_win);
	end = s->seq + s->plen + ((s->flags & IL_TCP_F_FIN) ? 1 : 0);
	if (ftc_seq_lt(fl->c2s_next, end) && fl->state != FT_SYN) {
		st->ctr[C_LAG_BYTES] += end - fl->c2s_next;
		fl->c2s_next = end;
		if (!fl->lag_tsc) {
			fl->lag_tsc = rte_rdtsc();
			fl->lag_seq = end;
		}
	}
	if (s->flags & IL_TCP_F_ACK) {
		/* After recovery the client may ack bytes the new server has not
		 * regenerated yet (they reached the client before the crash but
		 * their ack was never logged). Linux ignores an ack of unsent
		 * data, so the server would stall at its initial window: ack
		 * only what it has sent, which the client does hold. */
		uint32_t a = s->ack - fl->delta_seq;
		if (fl->state == FT_EST && ftc_seq_lt(fl->srv_nxt, a))
			a = fl->srv_nxt;
		set32(s->tcp, OFF_ACK, a);
	}
	if (s->flags & IL_TCP_F_FIN)
		fl->fin_c = true;
	if (s->flags & IL_TCP_F_RST)
		flow_closing(st, fl);
	else if (fl->fin_c && fl->fin_s)
		flow_closing(st, fl);
	return true;
}

/* The segment kept during the outage goes to the new server now, as if it
 * had just come: logged, its ack translated. */
static void pass_held(struct il_stage *st, struct ftcp_flow *fl)
{
	struct ftcp *f = st->ctx;
	struct rte_mbuf *h = fl->held_rec;
	struct seg hs;

	if (!h)
		return;
	fl->held_rec = NULL;
	if (!seg_parse(h, &hs)) { /* it parsed when it came */
		il_drop(st, C_DROP_IN_RECOVERY, h);
		return;
	}
	if (from_client(st, h, &hs)) {
		st->ctr[C_HELD_PASSED]++;
		il_emit(st, f->sport, h);
	}
}

static bool from_server(struct il_stage *st, struct rte_mbuf *m, struct seg *s)
{
	struct ftcp *f = st->ctx;
	struct ftc_key k = {s->ip->dst_addr, s->ip->src_addr, s->tcp->dst_port,
			    s->tcp->src_port};
	struct ftcp_flow *fl = flow_get(f, &k);
	uint32_t end;

	if (!fl)
		return true;
	if (unlikely(fl->moved) && memcmp(&s->eth->src_addr, fl->smac, 6) != 0) {
		/* The host this flow failed over from: it must not speak for
		 * the connection any more. */
		il_drop(st, C_DROP_FENCED, m);
		return false;
	}
	if ((s->flags & (IL_TCP_F_SYN | IL_TCP_F_ACK)) == (IL_TCP_F_SYN | IL_TCP_F_ACK)) {
		uint8_t ws = 0;
		bool has_ws = false;
		int p;

		/* Something listens again: refusals are the server's word. */
		if (f->refusal_hold_tsc && (p = prot_index(f, &k)) >= 0)
			f->prot_down_until[p] = 0;

		if (fl->state == FT_RECOVERING && fl->syn_sent) {
			/* The restarted server answers the fabricated SYN:
			 * absorb it, finish its handshake, reopen the client's
			 * window (Sec. IV-E step 4; delta per G4). */
			opts_scan(s, NULL, &ws, &has_ws);
			fl->sws_cur = has_ws ? ws : 0;
			fl->delta_seq = fl->server_seq - (s->seq + 1);
			fl->last_asn = s->ack;
			fl->last_win_bytes = rte_be_to_cpu_16(s->tcp->rx_win);
			make_seg(st, fl, true, fl->fab_isn + 1, s->seq + 1, IL_TCP_F_ACK, fl->last_cwin,
				 NULL, 0);
			fl->state = FT_EST;
			fl->recovered = true;
			fl->new_isn = s->seq;
			fl->out_nxt = fl->server_seq;
			fl->srv_nxt = s->seq + 1;
			fl->crash_rec_pending = false;
			ftl_unlink_all(f, (int32_t)(fl - f->flows)); /* nothing due any more */
			log_rec(f, &k, FR_RECOVERED, s->seq, 0, 0, 0, 0, NULL, 0);
			gen_ack(st, fl);
			st->ctr[C_ACKS_GENERATED]--; /* a window update, counted below */
			/* The client holds bytes nobody acknowledged (dropped
			 * during the outage): three duplicates of that ack make
			 * it retransmit them at once (fast retransmit) instead of
			 * at its next RTO, at least 200 ms away. Without SACK
			 * this works when more than one segment is outstanding;
			 * a lone one is the segment kept during the outage,
			 * passed on below (pass_held). */
			if (ftc_seq_lt(ftc_seq_min(fl->stable_seq, fl->last_asn), fl->c_seen))
				for (int i = 0; i < 3; i++)
					gen_ack(st, fl);
			pass_held(st, fl);
			st->ctr[C_RECOVERIES]++;
			st->ctr[C_RECOVERY_US_LAST] = tsc_us(f, rte_rdtsc() - fl->rec_tsc);
			st->ctr[C_RECOVERY_US_TOTAL] += st->ctr[C_RECOVERY_US_LAST];
			rte_pktmbuf_free(m);
			return false;
		}
		if (fl->recovered && fl->state == FT_EST && s->seq == fl->new_isn) {
			/* The restarted server sent its SYN-ACK again: our ACK
			 * did not make it into its accept queue (it was full,
			 * the ACK was dropped). Say it again; the client must
			 * never see this SYN-ACK. */
			make_seg(st, fl, true, fl->fab_isn + 1, s->seq + 1, IL_TCP_F_ACK, fl->last_cwin,
				 NULL, 0);
			st->ctr[C_SYNACK_REACKED]++;
			rte_pktmbuf_free(m);
			return false;
		}
		if (fl->state == FT_SYN || fl->state == FT_SYNACK_HELD) {
			if (opts_scan(s, NULL, &ws, &has_ws))
				full_csum(s);
			fl->server_isn = s->seq;
			fl->sws_orig = fl->sws_cur = (has_ws && fl->has_cws) ? ws : 0;
			fl->out_nxt = fl->srv_nxt = fl->seq_hi = s->seq + 1;
			fl->max_edge = s->ack + rte_be_to_cpu_16(s->tcp->rx_win);
			fl->have_edge = true;
			fl->last_asn = s->ack;
			fl->last_win_bytes = rte_be_to_cpu_16(s->tcp->rx_win);
			if (fl->state == FT_SYN &&
			    !log_rec(f, &k, FR_SYNACK, s->seq, s->ack, 0, s->flags, fl->sws_orig,
				     NULL, 0)) {
				il_drop(st, C_DROP_RING_FULL, m);
				return false;
			}
			if (fl->isns_logged) {
				fl->state = FT_EST;
				st->ctr[C_ACKS_TO_CLIENT]++;
				return true;
			}
			/* Held until both ISNs are durable (Sec. IV-B). */
			rte_pktmbuf_free(fl->held_synack);
			fl->held_synack = m;
			fl->state = FT_SYNACK_HELD;
			st->ctr[C_SYNACK_HELD]++;
			return false;
		}
	}
	if (fl->state == FT_RECOVERING) {
		/* The dead process's socket still talks: reset it at the
		 * sequence number it expects (its ack). */
		if (!(s->flags & IL_TCP_F_RST) && (s->flags & IL_TCP_F_ACK)) {
			make_seg(st, fl, true, s->ack, 0, IL_TCP_F_RST, 0, NULL, 0);
			st->ctr[C_RST_TO_SERVER]++;
		}
		il_drop(st, C_DROP_SERVER_DEAD, m);
		return false;
	}
	if (fl->state == FT_SYN || fl->state == FT_SYNACK_HELD) {
		if (s->flags & IL_TCP_F_RST) { /* refused: the port is closed */
			int p = prot_index(f, &k);
			if (fl->state == FT_SYN && p >= 0 && f->prot_down_until[p] &&
			    rte_rdtsc() < f->prot_down_until[p]) {
				/* ... because its server crashed and is not back
				 * yet: the client's next SYN may find it. */
				il_drop(st, C_DROP_REFUSAL_IN_OUTAGE, m);
				return false;
			}
			flow_closing(st, fl);
		}
		return true;
	}
	if (!fl->close_ok && fl->state != FT_CLOSING && (s->flags & (IL_TCP_F_FIN | IL_TCP_F_RST))) {
		/* A FIN or RST the shim did not announce comes from a killed
		 * process's kernel: the client must never see it (Sec. VI-A). */
		il_drop(st, (s->flags & IL_TCP_F_RST) ? C_DROP_UNANNOUNCED_RST : C_DROP_UNANNOUNCED_FIN,
			m);
		return false;
	}
	if (fl->delta_seq)
		set32(s->tcp, OFF_SEQ, s->seq + fl->delta_seq);
	tail_note(fl, s->seq + fl->delta_seq, s->payload, s->plen);
	end = s->seq + s->plen + ((s->flags & IL_TCP_F_FIN) ? 1 : 0);
	if (ftc_seq_lt(fl->srv_nxt, end))
		fl->srv_nxt = end;
	end += fl->delta_seq;
	if (ftc_seq_lt(fl->out_nxt, end))
		fl->out_nxt = end;
	if (ftc_seq_lt(fl->seq_hi, end))
		fl->seq_hi = end;
	if (s->flags & IL_TCP_F_RST) {
		flow_closing(st, fl);
		return true;
	}
	if (s->flags & IL_TCP_F_FIN)
		fl->fin_s = true;
	if (s->flags & IL_TCP_F_ACK) {
		uint32_t asn = s->ack;
		uint64_t wb = (uint64_t)rte_be_to_cpu_16(s->tcp->rx_win) << fl->sws_cur;
		bool pure = s->plen == 0 && !(s->flags & (IL_TCP_F_SYN | IL_TCP_F_FIN | IL_TCP_F_RST));

		fl->last_asn = asn;
		fl->last_win_bytes = (uint32_t)(wb > UINT32_MAX ? UINT32_MAX : wb);
		if (ftc_seq_lt(fl->stable_seq, asn)) {
			if (f->strategy == FTCP_LAZY && pure) {
				/* Lazy (G6): hold until stable_seq >= its ack;
				 * only the newest is kept. */
				set_win(s->tcp, edge_window(fl, asn, wb));
				rte_pktmbuf_free(fl->held_ack);
				fl->held_ack = m;
				fl->held_asn = asn;
				st->ctr[C_ACKS_HELD]++;
				return false;
			}
			/* min(asn, stable_seq) with the right edge kept (G7). */
			wb += asn - fl->stable_seq;
			set32(s->tcp, OFF_ACK, fl->stable_seq);
			st->ctr[C_ACKS_CLAMPED]++;
			fl->clamped_pending = true;
			asn = fl->stable_seq;
		}
		if (fl->held_ack && !pure) {
			/* Lazy's held pure ack is older than this segment (its
			 * seq is below a FIN or data that goes now): released
			 * later it would reach the client behind them, which
			 * answers an old seq with an ack, and a server socket
			 * closed meanwhile resets. The made-up ack that
			 * clamped_pending asks for says the same, newer. */
			rte_pktmbuf_free(fl->held_ack);
			fl->held_ack = NULL;
		}
		if (fl->held_ack && ftc_seq_le(fl->held_asn, asn)) {
			/* Superseded by this segment's ack: sending it later
			 * would make the client's ack go backwards. */
			rte_pktmbuf_free(fl->held_ack);
			fl->held_ack = NULL;
		}
		uint16_t field = edge_window(fl, asn, wb);
		if (field != rte_be_to_cpu_16(s->tcp->rx_win))
			set_win(s->tcp, field);
		st->ctr[C_ACKS_TO_CLIENT]++;
	}
	if (fl->fin_c && fl->fin_s)
		flow_closing(st, fl);
	return true;
}

/* Fail-over to a backup host (docs/ft-tcp.md): the backup claims a
 * protected server's address with a gratuitous ARP (sender and target
 * address the same) from the server side. Its MAC address becomes the one
 * every flow of that server is sent to: the stage's own segments (the
 * fabricated SYN, acks) and the client's segments, whose destination MAC
 * is rewritten (the client's ARP cache may still name the dead host); and
 * the only one a moved flow takes segments from (the old host, should it
 * come back, is fenced off). New connections to that address go there too
 * (from_client). ARP from the client side, and ordinary ARP (a host asking
 * for or answering about another address), move nothing. */
static void arp_learn(struct il_stage *st, struct rte_mbuf *m)
{
	struct ftcp *f = st->ctx;
	const uint8_t *a;
	uint32_t spa;

	if (m->port != f->app->ports[f->sport].port_id || rte_pktmbuf_data_len(m) < 14 + 28)
		return;
	a = rte_pktmbuf_mtod(m, const uint8_t *);
	if (a[12] != 0x08 || a[13] != 0x06)
		return;
	a += 14;
	/* Ethernet/IPv4 ARP only: htype 1, ptype 0x0800, hlen 6, plen 4. */
	if (a[0] != 0 || a[1] != 1 || a[2] != 0x08 || a[3] != 0 || a[4] != 6 || a[5] != 4)
		return;
	memcpy(&spa, a + 14, 4);
	if (memcmp(a + 14, a + 24, 4) != 0)
		return; /* not gratuitous */
	bool prot = false;
	for (unsigned p = 0; p < f->n_protect; p++)
		if (f->prot_ip[p] == spa) {
			prot = true;
			memcpy(f->prot_mac[p], a + 8, 6);
			f->prot_known[p] = true;
		}
	if (!prot)
		return;
	const void *key;
	void *data;
	uint32_t it = 0, moved = 0;
	int32_t pos;

	while ((pos = rte_hash_iterate(f->h, &key, &data, &it)) >= 0) {
		struct ftcp_flow *fl = &f->flows[pos];

		if (fl->key.sip == spa && memcmp(fl->smac, a + 8, 6) != 0) {
			memcpy(fl->smac, a + 8, 6);
			fl->moved = true;
			moved++;
		}
	}
	if (moved) {
		st->ctr[C_SERVER_MAC_MOVES]++;
		st->ctr[C_FLOWS_MOVED] += moved;
	}
}

/* The timer tick: what fell due, in deadline order, at most budget flows.
 * Returns true if that cut it short (the next poll goes on). */
static bool tick_due(struct il_stage *st, uint64_t now, unsigned budget)
{
	struct ftcp *f = st->ctx;
	int32_t pos;

	while ((pos = f->due[FTL_CLOSING].head) != FTL_NIL) {
		struct ftcp_flow *fl = &f->flows[pos];

		if (now - fl->close_tsc <= f->linger_tsc || fl->close_tsc > now)
			break;
		if (budget-- == 0)
			return true;
		flow_del(st, fl);
	}
	while ((pos = f->due[FTL_CRASH].head) != FTL_NIL) {
		struct ftcp_flow *fl = &f->flows[pos];

		if (budget-- == 0)
			return true;
		if (!log_crashed(f, fl))
			break; /* the ring is still full: the rest would fail too */
		fl->crash_rec_pending = false;
		ftl_unlink(f, pos, ftl_slot[FTL_CRASH]);
	}
	while ((pos = f->due[FTL_SYN].head) != FTL_NIL) {
		struct ftcp_flow *fl = &f->flows[pos];

		/* A SYN re-sent by this tick went to the tail, stamped after now. */
		if (now - fl->syn_tsc <= f->syn_rto_tsc || fl->syn_tsc > now)
			break;
		if (budget-- == 0)
			return true;
		send_fab_syn(st, fl); /* and back to the tail */
	}
	return false;
}

uint16_t ftcp_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct ftcp *f = st->ctx;
	struct ftc_down d[32];
	unsigned nd;
	uint16_t out = 0;
	uint64_t now;

	/* Logger messages first: a CLOSE_OK published before the shim closed
	 * is seen before the FIN it allows. */
	if (f->ring)
		while ((nd = il_shm_recv(&f->ring->rx, d, 32)) > 0)
			for (unsigned i = 0; i < nd; i++)
				on_down(st, &d[i]);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct seg s;
		bool keep = true;

		if (seg_parse(m, &s)) {
			for (unsigned p = 0; p < f->n_protect; p++) {
				if (s.ip->dst_addr == f->prot_ip[p] &&
				    s.tcp->dst_port == f->prot_port[p]) {
					keep = from_client(st, m, &s);
					break;
				}
				if (s.ip->src_addr == f->prot_ip[p] &&
				    s.tcp->src_port == f->prot_port[p]) {
					keep = from_server(st, m, &s);
					break;
				}
			}
		} else {
			arp_learn(st, m); /* and it goes on: the client learns too */
		}
		if (keep)
			pkts[out++] = m;
	}
	if (f->n_post)
		post_burst(st);
	now = rte_rdtsc();
	if (now >= f->next_scan) {
		/* Once per 10 ms; sooner while a tick had more due than its
		 * budget (a burst of closes, a crash with many flows). */
		bool more = tick_due(st, now, FTCP_TICK_BUDGET);

		f->next_scan = more ? now : now + f->hz / 100;
	}
	if (f->ring)
		wake_logger(f);
	return out;
}
