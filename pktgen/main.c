/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen: drives the appliance with emulated senders and checks
 * what its emulated receivers get. One poll loop: build and send a burst,
 * receive a burst, NAK what is missing, print a status line each second.
 * Exit status: 0 when every receiver got every message in one agreed
 * order with per-sender FIFO intact; 1 otherwise; 2 for usage errors.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include <interlink/json.h>
#include <interlink/port.h>
#include <interlink/memif_guard.h>
#include <interlink/wire.h>

#include "pktgen.h"

static struct pg_state S;

static void on_signal(int sig)
{
	(void)sig;
	S.quit = true;
}

static uint16_t port_of(const char *dev)
{
	char name[IL_DEVARGS_LEN];
	uint16_t id;
	if (il_port_dev_name(dev, name, sizeof(name)) || rte_eth_dev_get_port_by_name(name, &id)) {
		fprintf(stderr, "interlink-pktgen: device '%s' did not probe\n", dev);
		exit(2);
	}
	return id;
}

static void setup_port(uint16_t port)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	uint16_t nq = (uint16_t)S.c.queues;
	bool bad = rte_eth_dev_configure(port, nq, nq, &conf) != 0;
	for (uint16_t q = 0; q < nq && !bad; q++)
		bad = rte_eth_rx_queue_setup(port, q, 4096, 0, NULL, S.pool) ||
		      rte_eth_tx_queue_setup(port, q, 4096, 0, NULL);
	if (bad || rte_eth_dev_start(port)) {
		fprintf(stderr, "interlink-pktgen: cannot set up port %u (%u queues)\n", port, nq);
		exit(2);
	}
	rte_eth_promiscuous_enable(port);
}

struct totals {
	uint64_t delivered, gaps, repaired, naks, dups, unrec, fifo, overrun, injected;
};

static void totals(struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned r = 0; r < S.c.receivers; r++) {
		t->injected += S.rx[r].injected_drops;
		for (unsigned g = 0; g < S.c.groups; g++) {
			const struct pg_rgroup *rg = &S.rx[r].g[g];
			t->delivered += rg->delivered;
			t->gaps += rg->gaps;
			t->repaired += rg->gaps_repaired;
			t->naks += rg->naks_sent;
			t->dups += rg->dups;
			t->unrec += rg->unrecoverable;
			t->fifo += rg->fifo_violations;
			t->overrun += rg->overrun;
		}
	}
}

/* Receivers whose (count, hash) of a group differs from receiver 0's. */
static unsigned disagreements(void)
{
	unsigned d = 0;
	for (unsigned g = 0; g < S.c.groups; g++)
		for (unsigned r = 1; r < S.c.receivers; r++)
			if (S.rx[r].g[g].hash != S.rx[0].g[g].hash ||
			    S.rx[r].g[g].delivered != S.rx[0].g[g].delivered)
				d++;
	return d;
}

static uint64_t seq_missing(void)
{
	uint64_t m = 0;
	for (unsigned r = 0; r < S.c.receivers; r++)
		if (S.rx[r].cnt_missing > m)
			m = S.rx[r].cnt_missing;
	return m;
}

static uint64_t seq_reordered(void)
{
	uint64_t m = 0;
	for (unsigned r = 0; r < S.c.receivers; r++)
		m += S.rx[r].cnt_reordered;
	return m;
}

/* Count mode: frames offered (taken or refused by the port) that never
 * came back. */
static uint64_t lost(void)
{
	uint64_t offered = S.tx_frames + S.tx_refused;
	return offered > S.rx_data ? offered - S.rx_data : 0;
}

static bool count_ok(void)
{
	if (S.c.listen && !S.rx_data)
		return false; /* nothing came: the other generator did not reach us */
	return !lost() && !seq_missing() && !seq_reordered();
}

static const char *mode_name(void)
{
	return S.c.mode == PG_RAW ? "raw" : S.c.mode == PG_PCAP ? "pcap" : "native";
}

static void summary(FILE *out, const char *json, double send_s, double total_s, bool complete)
{
	struct totals t;
	struct pg_hist lat;
	double us = 1e6 / (double)S.hz;
	uint64_t sent_all = 0;
	unsigned dis = disagreements();
	const bool count = S.c.check == PG_CHECK_COUNT;
	const uint64_t offered = S.tx_frames + S.tx_refused;
	const double mpps = send_s > 0 ? (double)S.tx_frames / send_s / 1e6 : 0.0;
	const double offered_mpps = send_s > 0 ? (double)offered / send_s / 1e6 : 0.0;
	const double rx_mpps = send_s > 0 ? (double)S.rx_data / send_s / 1e6 : 0.0;
	/* wire bits: each frame plus FCS, preamble and inter-frame gap */
	const double gbps = send_s > 0 ? ((double)S.tx_bytes + (double)S.tx_frames *
				 (PG_FCS + PG_WIRE_EXTRA)) * 8 / send_s / 1e9 : 0.0;
	bool ok;

	totals(&t);
	memset(&lat, 0, sizeof(lat));
	if (count)
		pg_hist_merge(&lat, &S.lat_count);
	for (unsigned r = 0; r < S.c.receivers; r++)
		pg_hist_merge(&lat, &S.rx[r].lat);
	for (unsigned g = 0; g < S.c.groups; g++)
		sent_all += S.group_sent[g];
	ok = (count ? count_ok() : complete && !dis && !t.fifo && !t.unrec) && !S.link_lost;
	if (out) {
		fprintf(out, "\n==== interlink-pktgen summary ====\n");
		fprintf(out, "sent               %" PRIu64 " messages in %" PRIu64 " frames (%s) from %u senders "
		       "to %u groups in %.2f s: %.3f Mpps, %.3f Gbit/s on the wire\n", S.tx_msgs,
		       S.tx_frames, mode_name(), S.c.mode == PG_PCAP ? 1 : S.c.senders, S.c.groups, send_s,
		       mpps, gbps);
		if (S.tx_refused || S.c.tx_drop)
			fprintf(out, "offered            %" PRIu64 " frames (%.3f Mpps), %" PRIu64
			       " refused by the port and lost\n", offered, offered_mpps, S.tx_refused);
		fprintf(out, "received           %" PRIu64 " frames (%" PRIu64 " other, %" PRIu64 " UNAVAIL, %" PRIu64
		       " unstamped)\n", S.rx_frames, S.rx_other, S.rx_unavail, S.rx_bad);
		if (count) {
			fprintf(out, "count check        %" PRIu64 " data frames back (%.3f Mpps), %" PRIu64
			       " lost; sequence: %" PRIu64 " missing, %" PRIu64 " out of order; %u "
			       "receivers; %" PRIu64 " stale (sent before this run)\n", S.rx_data, rx_mpps,
			       lost(), seq_missing(), seq_reordered(), S.c.receivers, S.rx_stale);
		} else {
			fprintf(out, "receivers          %u, each expecting %" PRIu64 " messages; delivered %"
			       PRIu64 " of %" PRIu64 "\n", S.c.receivers, sent_all, t.delivered,
			       sent_all * S.c.receivers);
			fprintf(out, "order disagreements %u   FIFO violations %" PRIu64 "   unrecoverable %" PRIu64
			       "\n", dis, t.fifo, t.unrec);
			fprintf(out, "gaps               %" PRIu64 " detected, %" PRIu64 " repaired; %" PRIu64
			       " NAKs sent (%" PRIu64 " failed); %" PRIu64 " duplicates; %" PRIu64
			       " injected losses; %" PRIu64 " reorder overruns\n",
			       t.gaps, t.repaired, S.naks_tx, S.naks_tx_fail, t.dups, t.injected, t.overrun);
		}
		if (S.c.uto) {
			const struct pg_uto *u = &S.uto;
			fprintf(out, "uto                %" PRIu64 " ACKs, %" PRIu64 " heartbeats, %" PRIu64
				" JOINs sent; %" PRIu64 " views, %" PRIu64 " credits (window %u, rate %u "
				"kbit/s), %" PRIu64 " STABLEs received\n", u->acks_tx, u->hb_tx,
				u->joins_tx, u->views_rx, u->credits_rx, u->credit_window, u->rate_kbps,
				u->stable_rx);
			fprintf(out, "uto senders        %.3f s blocked on credit (%" PRIu64 " stalls); max "
				"unstable %" PRIu64 "; %" PRIu64 " resumes (%" PRIu64 " messages re-sent); %"
				PRIu64 " exclusions; all stable: %s\n", (double)u->blocked_tsc / (double)S.hz,
				u->blocked_stalls, pg_uto_max_unstable(&S), u->resumes_rx, u->resumed_msgs,
				u->exclusions, S.uto_stable ? "yes" : "no");
		}
		fprintf(out, "latency (us)       p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (%" PRIu64
		       " samples)\n",
		       (double)pg_hist_quantile(&lat, 0.5) * us, (double)pg_hist_quantile(&lat, 0.9) * us,
		       (double)pg_hist_quantile(&lat, 0.99) * us,
		       (double)pg_hist_quantile(&lat, 0.999) * us, (double)lat.max * us, lat.count);
		if (!count) {
			fprintf(out, "per group hashes  ");
			for (unsigned g = 0; g < S.c.groups; g++)
				fprintf(out, " g%u=%016" PRIx64, S.c.group_base + g, S.rx[0].g[g].hash);
			fprintf(out, "\n");
		}
		if (S.link_lost)
			fprintf(out, "result             FAIL: the %s link was lost during the run\n",
				S.link_lost);
		else
			fprintf(out, "result             %s\n",
				ok ? count ? "PASS: every frame back, in sequence"
					   : "PASS: one order, nothing missing"
				   : "FAIL");
		fflush(out);
	}
	if (!json)
		return;
	FILE *j = strcmp(json, "-") ? fopen(json, "w") : stdout;
	if (!j) {
		perror(json);
		return;
	}
	struct il_json js;
	il_json_begin(&js, j, 1);
	il_json_obj(&js, NULL);
	il_json_str(&js, "mode", mode_name());
	il_json_str(&js, "check", count ? "count" : "full");
	il_json_u64(&js, "senders", S.c.senders);
	il_json_u64(&js, "receivers", S.c.receivers);
	il_json_u64(&js, "groups", S.c.groups);
	il_json_bool(&js, "pass", ok);
	il_json_str(&js, "link_lost", S.link_lost ? S.link_lost : "");
	il_json_u64(&js, "sent_msgs", S.tx_msgs);
	il_json_u64(&js, "sent_frames", S.tx_frames);
	il_json_fixed(&js, "send_s", send_s, 6);
	il_json_fixed(&js, "total_s", total_s, 6);
	il_json_fixed(&js, "tx_mpps", mpps, 6);
	il_json_fixed(&js, "tx_gbps", gbps, 6);
	il_json_u64(&js, "tx_bytes", S.tx_bytes);
	il_json_u64(&js, "offered_frames", offered);
	il_json_fixed(&js, "offered_mpps", offered_mpps, 6);
	il_json_u64(&js, "tx_refused", S.tx_refused);
	il_json_u64(&js, "tx_retry", S.tx_retry);
	il_json_u64(&js, "rx_frames", S.rx_frames);
	il_json_u64(&js, "rx_data", S.rx_data);
	il_json_u64(&js, "rx_other", S.rx_other);
	il_json_fixed(&js, "rx_mpps", rx_mpps, 6);
	il_json_u64(&js, "lost", count ? lost() : 0);
	il_json_u64(&js, "seq_missing", seq_missing());
	il_json_u64(&js, "seq_reordered", seq_reordered());
	il_json_u64(&js, "rx_stale", S.rx_stale);
	il_json_u64(&js, "delivered", t.delivered);
	il_json_u64(&js, "expected", sent_all * S.c.receivers);
	il_json_bool(&js, "complete", complete);
	il_json_u64(&js, "disagreements", dis);
	il_json_u64(&js, "fifo_violations", t.fifo);
	il_json_u64(&js, "unrecoverable", t.unrec);
	il_json_u64(&js, "gaps", t.gaps);
	il_json_u64(&js, "gaps_repaired", t.repaired);
	il_json_u64(&js, "naks", S.naks_tx);
	il_json_u64(&js, "naks_failed", S.naks_tx_fail);
	il_json_u64(&js, "auth_signed", S.auth_signed);
	il_json_u64(&js, "auth_bad_mac", S.auth_bad_mac);
	il_json_u64(&js, "auth_replay", S.auth_replay);
	il_json_u64(&js, "duplicates", t.dups);
	il_json_u64(&js, "injected_losses", t.injected);
	il_json_u64(&js, "overruns", t.overrun);
	il_json_u64(&js, "captured", S.cap.n);
	if (S.c.uto) {
		const struct pg_uto *u = &S.uto;
		il_json_obj(&js, "uto");
		il_json_u64(&js, "acks", u->acks_tx);
		il_json_u64(&js, "heartbeats", u->hb_tx);
		il_json_u64(&js, "joins", u->joins_tx);
		il_json_u64(&js, "leaves", u->leaves_tx);
		il_json_u64(&js, "views", u->views_rx);
		il_json_u64(&js, "credits", u->credits_rx);
		il_json_u64(&js, "stables", u->stable_rx);
		il_json_u64(&js, "credit_window", u->credit_window);
		il_json_u64(&js, "rate_kbps", u->rate_kbps);
		il_json_fixed(&js, "blocked_s", (double)u->blocked_tsc / (double)S.hz, 6);
		il_json_u64(&js, "blocked_stalls", u->blocked_stalls);
		il_json_u64(&js, "max_unstable", pg_uto_max_unstable(&S));
		il_json_u64(&js, "resumes", u->resumes_rx);
		il_json_u64(&js, "stale_epoch", u->stale_epoch);
		il_json_u64(&js, "resumed_msgs", u->resumed_msgs);
		il_json_u64(&js, "exclusions", u->exclusions);
		il_json_u64(&js, "ctl_tx_fail", u->ctl_tx_fail);
		il_json_u64(&js, "epoch", u->epoch);
		il_json_bool(&js, "all_stable", S.uto_stable);
		il_json_arr(&js, "watermark");
		for (unsigned g = 0; g < S.c.groups; g++)
			il_json_u64(&js, NULL, u->wm[g]);
		il_json_end(&js);
		il_json_arr(&js, "group_sent");
		for (unsigned g = 0; g < S.c.groups; g++)
			il_json_u64(&js, NULL, S.group_sent[g]);
		il_json_end(&js);
		il_json_end(&js);
	}
	il_json_obj(&js, "latency_us");
	il_json_fixed(&js, "p50", (double)pg_hist_quantile(&lat, 0.5) * us, 3);
	il_json_fixed(&js, "p90", (double)pg_hist_quantile(&lat, 0.9) * us, 3);
	il_json_fixed(&js, "p99", (double)pg_hist_quantile(&lat, 0.99) * us, 3);
	il_json_fixed(&js, "p999", (double)pg_hist_quantile(&lat, 0.999) * us, 3);
	il_json_fixed(&js, "max", (double)lat.max * us, 3);
	il_json_fixed(&js, "mean", lat.count ? (double)lat.sum / (double)lat.count * us : 0.0, 3);
	il_json_u64(&js, "samples", lat.count);
	il_json_end(&js);
	il_json_end(&js);
	if (il_json_finish(&js))
		fprintf(stderr, "interlink-pktgen: cannot write %s\n", json);
	if (j != stdout)
		fclose(j);
}

static unsigned max_frame(void)
{
	const struct pg_conf *c = &S.c;
	unsigned big = 0;
	if (c->mode == PG_PCAP) {
		for (size_t i = 0; i < S.pc.n; i++)
			if (S.pc.rec[i].len > big)
				big = S.pc.rec[i].len;
		return big;
	}
	big = pg_sizes_max(&c->msg_sizes);
	if (c->pack_bytes) {
		/* a message larger than the MTU still goes, alone in its frame */
		unsigned one = pg_frame_len(c, 1, big);
		return one > 14 + c->pack_bytes ? one : 14 + c->pack_bytes;
	}
	if (c->frame_sizes)
		return big + 128; /* the payload is clamped up to 16 bytes */
	return pg_frame_len(c, c->pack, big);
}

static void status_line(uint64_t now, uint64_t t0, uint64_t last, bool sending,
			uint64_t *st)
{
	struct totals t;
	double dt = (double)(now - last) / (double)S.hz;
	totals(&t);
	if (S.c.check == PG_CHECK_COUNT)
		printf("[%6.1fs] tx %.3f Mpps  refused %.3f Mpps  rx data %.3f Mpps  lost %" PRIu64
		       "  seq missing %" PRIu64 "%s\n", (double)(now - t0) / (double)S.hz,
		       (double)(S.tx_frames - st[0]) / dt / 1e6,
		       (double)(S.tx_refused - st[3]) / dt / 1e6,
		       (double)(S.rx_data - st[1]) / dt / 1e6, lost(), seq_missing(),
		       sending ? "" : "  (draining)");
	else
		printf("[%6.1fs] tx %.3f Mpps  rx %.3f Mpps  delivered %.3f M msg/s  gaps %" PRIu64
		       " repaired %" PRIu64 " naks %" PRIu64 " window-stalls %" PRIu64 "%s\n",
		       (double)(now - t0) / (double)S.hz, (double)(S.tx_frames - st[0]) / dt / 1e6,
		       (double)(S.rx_frames - st[1]) / dt / 1e6,
		       (double)(t.delivered - st[2]) / dt / 1e6, t.gaps, t.repaired, S.naks_tx,
		       S.window_stalls, sending ? "" : "  (draining)");
	fflush(stdout);
	st[0] = S.tx_frames;
	st[1] = S.c.check == PG_CHECK_COUNT ? S.rx_data : S.rx_frames;
	st[2] = t.delivered;
	st[3] = S.tx_refused;
}

/* --rx-lcore: receiving on a second lcore (count check only, whose receive
 * side shares nothing with the sender but counters it alone writes). */
static int rx_main(void *arg)
{
	struct rte_mbuf *rx[PG_BURST];
	(void)arg;
	il_guard_online(1);
	while (!S.rx_stop) {
		uint16_t k = pg_rx_burst(&S, rx, PG_BURST);
		if (k) {
			S.rx_last_tsc = rte_rdtsc();
			pg_count_burst(&S, rx, k);
		}
		il_guard_quiescent(1);
	}
	il_guard_offline(1);
	return 0;
}

/* --tx-queue hash: the burst ordered by queue, each queue's frames in the
 * order they were built (a group's frames all go to one queue). */
static void txq_partition(struct rte_mbuf **p, uint16_t n)
{
	struct rte_mbuf *tmp[PG_BURST];
	uint16_t k = 0;

	for (uint16_t q = 0; q < S.c.queues; q++)
		for (uint16_t i = 0; i < n; i++)
			if (pg_txq_of(&S, p[i]) == q)
				tmp[k++] = p[i];
	memcpy(p, tmp, sizeof(p[0]) * k);
}

/* "tx" or "rx" if that port's link is down, else NULL. */
static const char *link_down(void)
{
	struct rte_eth_link link;

	if (rte_eth_link_get_nowait(S.tx_port, &link) != 0 || link.link_status != RTE_ETH_LINK_UP)
		return "tx";
	if (S.rx_port != S.tx_port &&
	    (rte_eth_link_get_nowait(S.rx_port, &link) != 0 || link.link_status != RTE_ETH_LINK_UP))
		return "rx";
	return NULL;
}

/* One run: send for the configured count or duration at the configured
 * rate while receiving, then drain. Returns whether every receiver is
 * complete (full check); the counters hold the rest. */
static bool run(uint64_t *send_tsc, uint64_t *end_tsc)
{
	const uint64_t hz = S.hz;
	const uint64_t t0 = rte_rdtsc();
	const uint64_t tick = hz / 10000; /* receivers' timers: 100 us */
	const bool count = S.c.check == PG_CHECK_COUNT;
	uint64_t last_tick = t0, last_status = t0, done_tsc = 0, last_link = t0, down_since = 0;
	uint64_t st[4] = {0, 0, 0, 0};
	struct rte_mbuf *pend[PG_BURST], *rx[PG_BURST];
	uint16_t npend = 0, pend_off = 0;
	bool sending = true, complete = false;

	S.t0 = t0;
	if (S.rx_lcore != RTE_MAX_LCORE) {
		S.rx_stop = false;
		S.rx_lcore_on = true;
		rte_eal_remote_launch(rx_main, NULL, S.rx_lcore);
	}
	pg_pace_init(&S.pace, hz, S.c.rate_pps, S.c.rate_bps, t0);
	if (S.c.catch_up_s > 0)
		pg_pace_set_lag(&S.pace, hz, S.c.catch_up_s);
	il_guard_online(0);
	while (!S.quit) {
		uint64_t now = rte_rdtsc();
		il_guard_quiescent(0);
		if (sending && S.c.listen) {
			if ((double)(now - t0) / (double)hz >= S.c.duration) {
				sending = false;
				done_tsc = now;
			}
		} else if (sending) {
			if (npend == pend_off) {
				npend = pg_build_burst(&S, pend, PG_BURST, now);
				pend_off = 0;
				if (S.c.tx_queue == PG_TXQ_HASH)
					txq_partition(pend, npend);
			}
			if (npend > pend_off) {
				/* One queue's run at a time (one run without --tx-queue hash). */
				uint16_t q = pg_txq_of(&S, pend[pend_off]), end = pend_off + 1;
				while (end < npend && pg_txq_of(&S, pend[end]) == q)
					end++;
				uint32_t bytes = 0;
				for (uint16_t i = pend_off; i < end; i++)
					bytes += pend[i]->data_len;
				uint16_t k = rte_eth_tx_burst(S.tx_port, q, pend + pend_off,
							      end - pend_off);
				for (uint16_t i = pend_off + k; i < end; i++)
					bytes -= pend[i]->data_len;
				S.tx_frames += k;
				S.tx_bytes += bytes;
				pend_off += k;
				if (pend_off < end) {
					S.tx_retry++;
					if (S.c.tx_drop) {
						/* A wire does not wait: the peer's ring was full. */
						S.tx_refused += end - pend_off;
						rte_pktmbuf_free_bulk(pend + pend_off,
								      end - pend_off);
						pend_off = end;
					}
				}
			}
			double el = (double)(now - t0) / (double)hz;
			if (npend == pend_off &&
			    (pg_sending_over(&S) || (S.c.duration > 0 && el >= S.c.duration))) {
				sending = false;
				done_tsc = now;
				/* A duration run stops its count where it is. */
				S.c.count = S.tx_msgs;
			}
		}
		if (!sending && S.c.uto && S.c.count && S.tx_msgs < S.c.count)
			sending = true; /* a resume notice took messages back */
		uint16_t k = S.rx_lcore_on ? 0 : pg_rx_burst(&S, rx, PG_BURST);
		if (k) {
			S.rx_last_tsc = now;
			if (count)
				pg_count_burst(&S, rx, k);
			else
				pg_receive_burst(&S, rx, k);
		}
		if (S.c.uto)
			pg_uto_poll(&S, now);
		if (now - last_link >= hz / 100) {
			/* A peer that went away (the appliance exited) must not
			 * leave the run waiting for ever. */
			last_link = now;
			const char *down = link_down();
			if (down == NULL)
				down_since = 0;
			else if (down_since == 0)
				down_since = now;
			else if ((double)(now - down_since) / (double)hz >= S.c.link_loss_s) {
				S.link_lost = down;
				fprintf(stderr, "interlink-pktgen: the %s link has been down for %g s: "
					"run stopped (did the appliance exit?)\n", down,
					S.c.link_loss_s);
				break;
			}
		}
		if (now - last_tick >= tick) {
			last_tick = now;
			if (count) {
				/* Done once nothing has come for 100 ms after the last send. */
				uint64_t quiet = hz / 10;
				if (!sending && now - done_tsc >= quiet &&
				    (now - S.rx_last_tsc >= quiet || S.rx_last_tsc < done_tsc ||
				     (double)(now - done_tsc) / (double)hz >= S.c.drain_timeout_s))
					break;
			} else {
				pg_receivers_tick(&S, !sending);
				if (!sending) {
					complete = pg_receivers_complete(&S);
					if (complete || (double)(now - done_tsc) / (double)hz >=
								S.c.drain_timeout_s)
						break;
				}
			}
		}
		if (!S.c.quiet && now - last_status >= hz) {
			status_line(now, t0, last_status, sending, st);
			last_status = now;
		}
	}
	il_guard_offline(0);
	if (S.rx_lcore_on) {
		S.rx_stop = true;
		rte_eal_wait_lcore(S.rx_lcore);
		S.rx_lcore_on = false;
	}
	uint64_t end = rte_rdtsc();
	if (!done_tsc)
		done_tsc = end;
	/* A frame still pending was never offered. */
	if (npend > pend_off)
		rte_pktmbuf_free_bulk(pend + pend_off, npend - pend_off);
	*send_tsc = done_tsc - t0;
	*end_tsc = end - t0;
	return !count && pg_receivers_complete(&S);
}

/* Counters of one run, so that a served generator starts every trial from
 * zero; sender sequences carry on, as a host's would. */
static void reset_counters(void)
{
	S.tx_frames = S.tx_msgs = S.tx_retry = S.rx_frames = S.rx_other = 0;
	S.rx_unavail = S.rx_bad = S.tx_refused = S.tx_bytes = S.rx_data = S.rx_stale = 0;
	S.rx_last_tsc = 0;
	memset(&S.lat_count, 0, sizeof(S.lat_count));
	memset(S.group_sent, 0, sizeof(S.group_sent));
	for (unsigned r = 0; r < PG_MAX_RECEIVERS; r++) {
		struct pg_receiver *rx = &S.rx[r];
		memset(rx->cnt_next, 0, sizeof(rx->cnt_next));
		rx->cnt_missing = rx->cnt_reordered = 0;
		for (unsigned g = 0; g < PG_MAX_GROUPS; g++)
			rx->g[g].delivered = 0;
	}
}

/* --serve: trials on one connection, driven from stdin, one JSON summary
 * each on stdout followed by a line "END". A line is
 *   trial RATE_PPS SECONDS [SENDERS RECEIVERS]   (RATE 0: as fast as possible)
 *   quit
 * Reconnecting a memif client for every trial costs seconds and, with DPDK
 * 22.11, sometimes the server. */
static int serve(void)
{
	const unsigned max_senders = S.c.senders, max_receivers = S.c.receivers;
	char line[256];

	printf("READY\n");
	fflush(stdout);
	while (!S.quit && fgets(line, sizeof(line), stdin)) {
		double rate, secs;
		unsigned snd = max_senders, rcv = max_receivers;
		if (!strncmp(line, "quit", 4))
			break;
		int k = sscanf(line, "trial %lf %lf %u %u", &rate, &secs, &snd, &rcv);
		if (k < 2 || rate < 0 || secs <= 0 || !snd || snd > max_senders || !rcv ||
		    rcv > max_receivers) {
			printf("ERROR want: trial RATE_PPS SECONDS [SENDERS<=%u RECEIVERS<=%u]\nEND\n",
			       max_senders, max_receivers);
			fflush(stdout);
			continue;
		}
		S.c.rate_pps = rate;
		S.c.rate_bps = 0;
		S.c.duration = secs;
		S.c.count = 0;
		S.c.senders = snd;
		S.c.receivers = rcv;
		S.next_sender = 0;
		reset_counters();
		uint64_t send_tsc, end_tsc;
		bool complete = run(&send_tsc, &end_tsc);
		summary(NULL, "-", (double)send_tsc / (double)S.hz, (double)end_tsc / (double)S.hz,
			complete);
		printf("END\n");
		fflush(stdout);
		if (S.link_lost)
			break; /* no trial can run without the appliance */
	}
	rte_eth_dev_stop(S.tx_port);
	if (S.rx_port != S.tx_port)
		rte_eth_dev_stop(S.rx_port);
	rte_eal_cleanup();
	return S.link_lost ? 2 : 0;
}

int main(int argc, char **argv)
{
	/* A closed stdout (`interlink-pktgen | head`) fails writes, it does
	 * not stop the run: the JSON summary is still written. */
	signal(SIGPIPE, SIG_IGN);
	int first = pg_parse_args(argc, argv, &S.c);
	char err[256];
	if (first < 0)
		return 2;
	if (S.c.pcap && pg_pcap_load(&S.pc, S.c.pcap, 1u << 24, err, sizeof(err))) {
		fprintf(stderr, "interlink-pktgen: --pcap: %s\n", err);
		return 2;
	}
	if (S.c.capture && pg_capture_init(&S.cap, S.c.capture_count, 9018)) {
		fprintf(stderr, "interlink-pktgen: --capture: out of memory\n");
		return 2;
	}

	/* EAL: what follows "--", plus our ports; defaults for a laptop. */
	char *eargv[64];
	int n = 0;
	eargv[n++] = argv[0];
	bool have_prefix = false, have_mem = false;
	for (int i = first; i < argc && n < 56; i++) {
		if (!strncmp(argv[i], "--file-prefix", 13))
			have_prefix = true;
		if (!strcmp(argv[i], "--no-huge") || !strcmp(argv[i], "-m"))
			have_mem = true;
		eargv[n++] = argv[i];
	}
	if (!have_mem) {
		eargv[n++] = (char *)"--no-huge";
		eargv[n++] = (char *)"-m";
		eargv[n++] = (char *)"1024";
	}
	if (!have_prefix)
		eargv[n++] = (char *)"--file-prefix=pktgen";
	eargv[n++] = (char *)"--no-pci";
	eargv[n++] = (char *)"--vdev";
	eargv[n++] = (char *)S.c.tx_dev;
	if (strcmp(S.c.rx_dev, S.c.tx_dev)) {
		eargv[n++] = (char *)"--vdev";
		eargv[n++] = (char *)S.c.rx_dev;
	}
	eargv[n] = NULL;
	if (rte_eal_init(n, eargv) < 0) {
		fprintf(stderr, "interlink-pktgen: EAL initialisation failed: %s\n",
			rte_strerror(rte_errno));
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	S.hz = rte_get_tsc_hz();
	/* Frames in flight plus what receivers may hold while gaps are open. */
	unsigned hold = S.c.reorder_slots < 4096 ? S.c.reorder_slots : 4096;
	unsigned pool_n = (max_frame() > 2048 ? 8192 : 32768) + (S.c.check == PG_CHECK_FULL ? S.c.receivers * S.c.groups * hold
							       : 0);
	unsigned frame = max_frame();
	unsigned room = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (frame + RTE_PKTMBUF_HEADROOM > room)
		room = frame + RTE_PKTMBUF_HEADROOM;
	S.pool = rte_pktmbuf_pool_create("pg_pool", pool_n, 256, 0, (uint16_t)room,
					 (int)rte_socket_id());
	if (!S.pool) {
		fprintf(stderr, "interlink-pktgen: cannot allocate %u mbufs: %s (raise -m)\n", pool_n,
			rte_strerror(rte_errno));
		return 2;
	}
	S.tx_port = port_of(S.c.tx_dev);
	S.rx_port = port_of(S.c.rx_dev);
	setup_port(S.tx_port);
	if (S.rx_port != S.tx_port)
		setup_port(S.rx_port);
	/* A memif peer that disconnects must not unmap rings under a burst. */
	if (il_guard_arm() < 0) {
		fprintf(stderr, "interlink-pktgen: out of memory for the memif guard\n");
		return 2;
	}
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(S.tx_port, &mac);
	memcpy(S.tx_mac, mac.addr_bytes, 6);
	if (pg_senders_init(&S) || pg_receivers_init(&S) || (S.c.uto && pg_uto_init(&S)) ||
	    pg_auth_init(&S))
		return 2;
	S.rx_lcore = RTE_MAX_LCORE;
	if (S.c.rx_lcore) {
		S.rx_lcore = rte_get_next_lcore(-1, 1, 0);
		if (S.rx_lcore == RTE_MAX_LCORE) {
			fprintf(stderr, "interlink-pktgen: --rx-lcore needs a second lcore (EAL "
					"--lcores 0,1)\n");
			return 2;
		}
	}

	/* memif links come up once the peer connects: wait, then send. */
	unsigned wait_ms = (unsigned)(S.c.link_wait_s * 1000);
	if (!il_port_wait_link(S.tx_port, wait_ms) || !il_port_wait_link(S.rx_port, wait_ms)) {
		fprintf(stderr, "interlink-pktgen: link down after %g s (is the appliance running?)\n",
			S.c.link_wait_s);
		return 2;
	}
	usleep(100000);
	if (S.c.serve)
		return serve();
	if (S.c.uto && pg_uto_join(&S)) {
		rte_eth_dev_stop(S.tx_port);
		if (S.rx_port != S.tx_port)
			rte_eth_dev_stop(S.rx_port);
		rte_eal_cleanup();
		return 2;
	}

	struct timespec wall0;
	clock_gettime(CLOCK_REALTIME, &wall0);
	uint64_t send_tsc, end_tsc;
	bool complete = run(&send_tsc, &end_tsc);
	const bool count = S.c.check == PG_CHECK_COUNT;
	if (S.c.uto)
		S.uto_stable = pg_uto_finish(&S, 2.0);
	summary(stdout, S.c.json, (double)send_tsc / (double)S.hz, (double)end_tsc / (double)S.hz,
		complete);
	if (S.c.capture && pg_capture_write(&S.cap, S.c.capture,
					    (uint64_t)wall0.tv_sec * 1000000000ull +
						    (uint64_t)wall0.tv_nsec))
		fprintf(stderr, "interlink-pktgen: cannot write %s\n", S.c.capture);
	struct totals t;
	totals(&t);
	bool ok = (count ? count_ok() : complete && !disagreements() && !t.fifo && !t.unrec) &&
		  !S.link_lost;
	rte_eth_dev_stop(S.tx_port);
	if (S.rx_port != S.tx_port)
		rte_eth_dev_stop(S.rx_port);
	rte_eal_cleanup();
	return S.link_lost ? 2 : ok ? 0 : 1;
}
