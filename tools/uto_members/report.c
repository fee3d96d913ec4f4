/* SPDX-License-Identifier: BSD-3-Clause
 * il-uto-members: command line, latency percentiles and the JSON report.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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
	fprintf(f, "{\n  \"elapsed_s\": %.3f, \"span_s\": %.3f, \"epoch\": %u,\n", elapsed, span,
		epoch);
	fprintf(f, "  \"receivers\": [\n");
	for (unsigned k = 0; k < o.nr; k++) {
		const struct rcv *r = &R[k];
		static const char *const sn[] = { "idle", "joining", "member", "dead", "silent" };

		fprintf(f, "    {\"id\": %u, \"state\": \"%s\", \"start\": %llu, \"po\": %llu, "
			   "\"uto\": %llu, \"po_n\": %llu, \"uto_n\": %llu, \"buffer_drops\": %llu, "
			   "\"rejoins\": %llu, \"view\": %u, \"inc\": %u, \"excluded_after_s\": %.3f, "
			   "\"dup_skipped\": %llu, "
			   "\"fastjoin_senders\": %u, \"fastjoin_mismatches\": %llu}%s\n",
			r->id, sn[r->st], (unsigned long long)r->start, (unsigned long long)r->po,
			(unsigned long long)r->uto, (unsigned long long)r->po_n,
			(unsigned long long)r->uto_n, (unsigned long long)r->buffer_drops,
			(unsigned long long)r->rejoins, r->view, r->inc, r->excluded_after_s,
			(unsigned long long)r->dup_skipped, r->n_fj,
			(unsigned long long)fastjoin_mismatches(r), k + 1 < o.nr ? "," : "");
		uto_total += r->uto_n;
		buffer_drops += r->buffer_drops;
		rejoins += r->rejoins;
	}
	fprintf(f, "  ],\n  \"senders\": [\n");
	for (unsigned i = 0; i < o.ns; i++) {
		const struct snd *s = &S[i];

		fprintf(f, "    {\"id\": %u, \"sent\": %llu, \"limit\": %llu, \"max_unstable\": %llu, "
			   "\"resent\": %llu, \"unseen\": %llu}%s\n", s->id,
			(unsigned long long)(s->next - 1), (unsigned long long)s->limit,
			(unsigned long long)s->max_unstable, (unsigned long long)s->resent,
			(unsigned long long)s->unseen, i + 1 < o.ns ? "," : "");
		if (s->max_unstable > max_unstable)
			max_unstable = s->max_unstable;
	}
	uint64_t ctl = c.ack_tx + c.hb_tx + c.join_tx + c.nak_tx + c.stable_rx + c.view_rx +
		       c.credit_rx + c.unavail_rx;
	fprintf(f, "  ],\n  \"messages\": %llu, \"max_g\": %llu, \"stable\": %llu,\n",
		(unsigned long long)(o.ns * o.count), (unsigned long long)c.max_g,
		(unsigned long long)stable);
	fprintf(f, "  \"throughput_msgs_s\": %.1f, \"uto_deliveries\": %llu,\n",
		span > 0 ? (double)(o.ns * o.count) / span : 0.0, (unsigned long long)uto_total);
	fprintf(f, "  \"buffer_drops\": %llu, \"max_unstable\": %llu, \"rejoins\": %llu,\n",
		(unsigned long long)buffer_drops, (unsigned long long)max_unstable,
		(unsigned long long)rejoins);
	fprintf(f, "  \"disagreements\": %llu, \"uniform_violations\": %llu, \"restamped\": %llu,\n",
		(unsigned long long)c.disagreements, (unsigned long long)c.uniform_violations,
		(unsigned long long)c.restamped);
	fprintf(f, "  \"data_rx\": %llu, \"data_dup\": %llu, \"send_fail\": %llu, \"epochs\": %llu,\n",
		(unsigned long long)c.data_rx, (unsigned long long)c.data_dup,
		(unsigned long long)c.send_fail, (unsigned long long)c.epochs);
	fprintf(f, "  \"ctl\": {\"ack_tx\": %llu, \"hb_tx\": %llu, \"join_tx\": %llu, \"nak_tx\": %llu, "
		   "\"stable_rx\": %llu, \"view_rx\": %llu, \"credit_rx\": %llu, \"unavail_rx\": %llu, "
		   "\"total\": %llu},\n",
		(unsigned long long)c.ack_tx, (unsigned long long)c.hb_tx,
		(unsigned long long)c.join_tx, (unsigned long long)c.nak_tx,
		(unsigned long long)c.stable_rx, (unsigned long long)c.view_rx,
		(unsigned long long)c.credit_rx, (unsigned long long)c.unavail_rx,
		(unsigned long long)ctl);
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
	fprintf(f, "  \"missing\": %llu, \"redelivered\": %llu, \"lost_stable\": %llu, "
		   "\"finals\": %llu, \"rewound\": %llu,\n", (unsigned long long)missing,
		(unsigned long long)redelivered, (unsigned long long)c.lost_stable,
		(unsigned long long)c.finals, (unsigned long long)rewound);
	fprintf(f, "  \"max_loop_gap_ms\": %.1f,\n", (double)c.max_gap_ns / 1e6);
	/* The emulator's own cost, which grows with the receivers it emulates
	 * (an ACK frame each per ack_every messages; their deliveries). */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "  \"emulator\": {\"loops\": %llu, \"waits\": %llu, \"rx_calls\": %llu, "
		   "\"tx_calls\": %llu, \"frames_tx\": %llu, \"cpu_user_s\": %.3f, \"cpu_sys_s\": %.3f},\n",
		(unsigned long long)c.loops, (unsigned long long)c.waits,
		(unsigned long long)c.rx_calls, (unsigned long long)c.tx_calls,
		(unsigned long long)c.frames_tx,
		(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	fprintf(f, "  \"ctl_per_data_msg\": %.4f,\n",
		c.data_tx ? (double)ctl / (double)c.data_tx : 0.0);
	fprintf(f, "  \"latency_us\": {\"po\": [%.0f, %.0f, %.0f, %.0f], \"uto\": [%.0f, %.0f, %.0f, "
		   "%.0f], \"uto_minus_po\": [%.0f, %.0f, %.0f, %.0f], \"percentiles\": [10, 50, 90, 99]}\n}\n",
		pct(lat_po, .1), pct(lat_po, .5), pct(lat_po, .9), pct(lat_po, .99), pct(lat_uto, .1),
		pct(lat_uto, .5), pct(lat_uto, .9), pct(lat_uto, .99), pct(lat_diff, .1),
		pct(lat_diff, .5), pct(lat_diff, .9), pct(lat_diff, .99));
	if (f != stdout)
		fclose(f);
}

