/* SPDX-License-Identifier: BSD-3-Clause
 * il-uto-members: command line, latency percentiles and the JSON report.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <interlink/json.h>

#include "members.h"

void hist(uint64_t *h, uint64_t ns)
{
	uint64_t b = ns / 10000;

	h[b < HB ? b : HB - 1]++;
}

static double pct(const uint64_t *h, double p)
{
	uint64_t n = 0, k = 0;

	for (unsigned i = 0; i < HB; i++)
		n += h[i];
	if (n == 0)
		return 0;
	for (unsigned i = 0; i < HB; i++) {
		k += h[i];
		if ((double)k >= p * (double)n)
			return (i + 0.5) * 10.0;
	}
	return HB * 10.0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: il-uto-members --tx IF --rx IF [--group G] [--mcast A.B.C.D] [--udp-port P]\n"
		"  [--senders S] [--receivers R] [--count N per sender] [--rate MSGS/S total]\n"
		"  [--size B] [--ack-every K] [--ack-us T] [--hb-ms H] [--buffer MSGS]\n"
		"  [--window W (check)] [--need-credit] [--kill R@S] [--late R@S]\n"
		"  [--silent R@S1:S2 (S2 0: until excluded)] [--max-s S] [--settle-s S] [--json PATH]\n"
		"  [--no-check (skip the O(receivers^2) uniformity check: benchmarks)]\n"
		"  [--auth-keys FILE [--auth-key-id ID (default: the file's first key)]: sign control messages, and drop STABLE, VIEW, CREDIT and UNAVAIL without a valid MAC]\n"
		"  [--resend-ms T (a message not seen stamped for T ms is sent again; 10000: the appliance lcore was seen descheduled for 7 s here)]\n");
	exit(2);
}

static void add_ev(enum evk k, const char *a)
{
	struct ev *e = &o.ev[o.n_ev];

	if (o.n_ev == MAXEV)
		usage();
	e->k = k;
	if (k == EV_SILENT) {
		if (sscanf(a, "%u@%lf:%lf", &e->r, &e->at, &e->until) != 3)
			usage();
	} else if (sscanf(a, "%u@%lf", &e->r, &e->at) != 2) {
		usage();
	}
	o.n_ev++;
}

void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "tx", 1, 0, 't' },	    { "rx", 1, 0, 'r' },	  { "group", 1, 0, 'g' },
		{ "mcast", 1, 0, 'm' },	    { "senders", 1, 0, 'S' },	  { "receivers", 1, 0, 'R' },
		{ "count", 1, 0, 'n' },	    { "rate", 1, 0, 'p' },	  { "size", 1, 0, 'z' },
		{ "ack-every", 1, 0, 'k' }, { "ack-us", 1, 0, 'T' },	  { "hb-ms", 1, 0, 'H' },
		{ "buffer", 1, 0, 'b' },    { "window", 1, 0, 'w' },	  { "need-credit", 0, 0, 'C' },
		{ "kill", 1, 0, 'K' },	    { "late", 1, 0, 'L' },	  { "silent", 1, 0, 'Q' },
		{ "no-check", 0, 0, 'N' },  { "resend-ms", 1, 0, 'E' },  { "udp-port", 1, 0, 'P' },  { "max-s", 1, 0, 'x' },	    { "settle-s", 1, 0, 's' },	  { "json", 1, 0, 'j' },
		{ "auth-keys", 1, 0, 'A' }, { "auth-key-id", 1, 0, 'I' },
		{ 0, 0, 0, 0 },
	};
	const char *mc = "239.1.1.1";
	struct in_addr a;
	int ch;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 't': o.tx_if = optarg; break;
		case 'r': o.rx_if = optarg; break;
		case 'g': o.group = (uint16_t)atoi(optarg); break;
		case 'm': mc = optarg; break;
		case 'S': o.ns = (unsigned)atoi(optarg); break;
		case 'R': o.nr = (unsigned)atoi(optarg); break;
		case 'n': o.count = strtoull(optarg, NULL, 10); break;
		case 'p': o.rate = atof(optarg); break;
		case 'z': o.size = (unsigned)atoi(optarg); break;
		case 'k': o.ack_every = (unsigned)atoi(optarg); break;
		case 'T': o.ack_us = (unsigned)atoi(optarg); break;
		case 'H': o.hb_ms = (unsigned)atoi(optarg); break;
		case 'b': o.buffer = strtoull(optarg, NULL, 10); break;
		case 'w': o.window = strtoull(optarg, NULL, 10); break;
		case 'C': o.need_credit = true; break;
		case 'N': o.no_check = true; break;
		case 'E': o.resend_ms = (unsigned)atoi(optarg); break;
		case 'P': o.udp_port = (uint16_t)atoi(optarg); break;
		case 'K': add_ev(EV_KILL, optarg); break;
		case 'L': add_ev(EV_LATE, optarg); break;
		case 'Q': add_ev(EV_SILENT, optarg); break;
		case 'x': o.max_s = atof(optarg); break;
		case 's': o.settle_s = atof(optarg); break;
		case 'j': o.json = optarg; break;
		case 'A': o.auth_keys = optarg; break;
		case 'I': o.auth_key_id = (uint32_t)strtoul(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (!o.tx_if || !o.rx_if || o.ns < 1 || o.ns > MAXS || o.nr < 1 || o.nr > MAXR ||
	    o.count < 1 || o.count > RING / 2 || o.size > 1400 || inet_pton(AF_INET, mc, &a) != 1)
		usage();
	o.mcast = ntohl(a.s_addr);
	for (unsigned i = 0; i < o.n_ev; i++)
		if (o.ev[i].r >= o.nr)
			usage();
}

/* Each joiner's VIEW named, per sender, the sender_seq of that sender's
 * first message at or after the start: check it against the stream. */
static uint64_t fastjoin_mismatches(const struct rcv *r)
{
	uint64_t bad = 0;

	for (unsigned i = 0; i < r->n_fj; i++) {
		uint64_t want = 0;

		for (uint64_t g = r->start; g < c.max_g && g < r->start + RING / 2; g++)
			if (msgs[g & (RING - 1)].g == g && msgs[g & (RING - 1)].sender == r->fj_sender[i]) {
				want = msgs[g & (RING - 1)].sseq;
				break;
			}
		if (want != 0 && want != r->fj_next[i])
			bad++;
	}
	return bad;
}

void report(double elapsed, double t_first, double t_last)
{
	FILE *f = o.json ? fopen(o.json, "w") : stdout;
	uint64_t uto_total = 0, buffer_drops = 0, max_unstable = 0, rejoins = 0;
	double span = t_last - t_first;

	if (f == NULL) {
		perror(o.json);
		exit(2);
	}
	struct il_json j;
	il_json_begin(&j, f, 2);
	il_json_obj(&j, NULL);
	il_json_fixed(&j, "elapsed_s", elapsed, 3);
	il_json_fixed(&j, "span_s", span, 3);
	il_json_u64(&j, "epoch", epoch);
	il_json_arr(&j, "receivers");
	for (unsigned k = 0; k < o.nr; k++) {
		const struct rcv *r = &R[k];
		static const char *const sn[] = { "idle", "joining", "member", "dead", "silent" };

		il_json_obj(&j, NULL);
		il_json_u64(&j, "id", r->id);
		il_json_str(&j, "state", sn[r->st]);
		il_json_u64(&j, "start", r->start);
		il_json_u64(&j, "po", r->po);
		il_json_u64(&j, "uto", r->uto);
		il_json_u64(&j, "po_n", r->po_n);
		il_json_u64(&j, "uto_n", r->uto_n);
		il_json_u64(&j, "buffer_drops", r->buffer_drops);
		il_json_u64(&j, "rejoins", r->rejoins);
		il_json_u64(&j, "view", r->view);
		il_json_u64(&j, "inc", r->inc);
		il_json_fixed(&j, "excluded_after_s", r->excluded_after_s, 3);
		il_json_u64(&j, "dup_skipped", r->dup_skipped);
		il_json_u64(&j, "fastjoin_senders", r->n_fj);
		il_json_u64(&j, "fastjoin_mismatches", fastjoin_mismatches(r));
		il_json_end(&j);
		uto_total += r->uto_n;
		buffer_drops += r->buffer_drops;
		rejoins += r->rejoins;
	}
	il_json_end(&j);
	il_json_arr(&j, "senders");
	for (unsigned i = 0; i < o.ns; i++) {
		const struct snd *s = &S[i];

		il_json_obj(&j, NULL);
		il_json_u64(&j, "id", s->id);
		il_json_u64(&j, "sent", s->next - 1);
		il_json_u64(&j, "limit", s->limit);
		il_json_u64(&j, "max_unstable", s->max_unstable);
		il_json_u64(&j, "resent", s->resent);
		il_json_u64(&j, "unseen", s->unseen);
		il_json_end(&j);
		if (s->max_unstable > max_unstable)
			max_unstable = s->max_unstable;
	}
	il_json_end(&j);
	uint64_t ctl = c.ack_tx + c.hb_tx + c.join_tx + c.nak_tx + c.stable_rx + c.view_rx +
		       c.credit_rx + c.unavail_rx;
	il_json_u64(&j, "messages", (uint64_t)o.ns * o.count);
	il_json_u64(&j, "max_g", c.max_g);
	il_json_u64(&j, "stable", stable);
	il_json_fixed(&j, "throughput_msgs_s", span > 0 ? (double)(o.ns * o.count) / span : 0.0, 1);
	il_json_u64(&j, "uto_deliveries", uto_total);
	il_json_u64(&j, "buffer_drops", buffer_drops);
	il_json_u64(&j, "max_unstable", max_unstable);
	il_json_u64(&j, "rejoins", rejoins);
	il_json_u64(&j, "disagreements", c.disagreements);
	il_json_u64(&j, "uniform_violations", c.uniform_violations);
	il_json_u64(&j, "restamped", c.restamped);
	il_json_u64(&j, "data_rx", c.data_rx);
	il_json_u64(&j, "auth_bad_mac", c.auth_bad_mac);
	il_json_u64(&j, "auth_replay", c.auth_replay);
	il_json_u64(&j, "data_dup", c.data_dup);
	il_json_u64(&j, "send_fail", c.send_fail);
	il_json_u64(&j, "epochs", c.epochs);
	il_json_u64(&j, "stale_epoch", c.stale_epoch);
	il_json_obj(&j, "ctl");
	il_json_u64(&j, "ack_tx", c.ack_tx);
	il_json_u64(&j, "hb_tx", c.hb_tx);
	il_json_u64(&j, "join_tx", c.join_tx);
	il_json_u64(&j, "nak_tx", c.nak_tx);
	il_json_u64(&j, "stable_rx", c.stable_rx);
	il_json_u64(&j, "view_rx", c.view_rx);
	il_json_u64(&j, "credit_rx", c.credit_rx);
	il_json_u64(&j, "unavail_rx", c.unavail_rx);
	il_json_u64(&j, "total", ctl);
	il_json_end(&j);
	uint64_t missing = 0, redelivered = 0, rewound = 0;
	for (unsigned k = 0; k < o.nr; k++) {
		redelivered += R[k].redelivered;
		if (!R[k].whole || R[k].st != R_MEMBER)
			continue;
		for (unsigned i = 0; i < o.ns; i++)
			for (uint64_t q = 1; q <= o.count; q++)
				missing += R[k].got[i][q] == 0;
	}
	for (unsigned i = 0; i < o.ns; i++)
		rewound += S[i].rewound;
	il_json_u64(&j, "missing", missing);
	il_json_u64(&j, "redelivered", redelivered);
	il_json_u64(&j, "lost_stable", c.lost_stable);
	il_json_u64(&j, "finals", c.finals);
	il_json_u64(&j, "rewound", rewound);
	il_json_fixed(&j, "max_loop_gap_ms", (double)c.max_gap_ns / 1e6, 1);
	/* The emulator's own cost, which grows with the receivers it emulates
	 * (an ACK frame each per ack_every messages; their deliveries). */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	il_json_obj(&j, "emulator");
	il_json_u64(&j, "loops", c.loops);
	il_json_u64(&j, "waits", c.waits);
	il_json_u64(&j, "rx_calls", c.rx_calls);
	il_json_u64(&j, "tx_calls", c.tx_calls);
	il_json_u64(&j, "frames_tx", c.frames_tx);
	il_json_fixed(&j, "cpu_user_s",
		      (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6, 3);
	il_json_fixed(&j, "cpu_sys_s",
		      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, 3);
	il_json_end(&j);
	il_json_fixed(&j, "ctl_per_data_msg", c.data_tx ? (double)ctl / (double)c.data_tx : 0.0, 4);
	static const double ps[] = { .1, .5, .9, .99 };
	static const struct {
		const char *name;
		const uint64_t *h;
	} lat[] = { { "po", lat_po }, { "uto", lat_uto }, { "uto_minus_po", lat_diff } };
	il_json_obj(&j, "latency_us");
	for (unsigned l = 0; l < sizeof(lat) / sizeof(lat[0]); l++) {
		il_json_arr(&j, lat[l].name);
		for (unsigned i = 0; i < 4; i++)
			il_json_fixed(&j, NULL, pct(lat[l].h, ps[i]), 0);
		il_json_end(&j);
	}
	il_json_arr(&j, "percentiles");
	for (unsigned i = 0; i < 4; i++)
		il_json_u64(&j, NULL, (uint64_t)(ps[i] * 100 + 0.5));
	il_json_end(&j);
	il_json_end(&j);
	il_json_end(&j);
	if (il_json_finish(&j))
		fprintf(stderr, "il-uto-members: cannot write the report\n");
	if (f != stdout)
		fclose(f);
}

