/* SPDX-License-Identifier: BSD-3-Clause
 * il-tfrc-host: one libinterlink host for the TCP-friendly rate test
 * (tests/integration/test_tfrc.py). A sender sends fixed-size messages as
 * fast as its credit window and the group's rate allow (or at most --pps);
 * a receiver receives, ACKs and reports its loss-event rate. Every 100 ms
 * it samples what libinterlink says (il_ep_tfrc_stats) and at the end
 * writes a JSON summary with that timeline.
 *
 *   il-tfrc-host --tx IF --rx IF --id N --group G --mcast A --role send|recv
 *                --seconds S [--size BYTES] [--pps N] [--rtt-ms R] --json PATH
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <interlink/endpoint.h>
#include <interlink/json.h>

#define MAX_SAMPLES 4096

struct sample {
	double t;
	struct il_ep_tfrc tf;
	uint64_t msgs_tx;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_po(void *user, const struct il_ep_msg *m)
{
	(void)m;
	++*(uint64_t *)user;
}

static void usage(void)
{
	fprintf(stderr, "usage: il-tfrc-host --tx IF --rx IF --id N --group G --mcast A "
			"--role send|recv --seconds S [--size BYTES] [--pps N] [--rtt-ms R] "
			"--json PATH\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tx", required_argument, NULL, 't' },	     { "rx", required_argument, NULL, 'r' },
		{ "id", required_argument, NULL, 'i' },	     { "group", required_argument, NULL, 'g' },
		{ "mcast", required_argument, NULL, 'm' },   { "role", required_argument, NULL, 'R' },
		{ "seconds", required_argument, NULL, 's' }, { "size", required_argument, NULL, 'z' },
		{ "pps", required_argument, NULL, 'p' },     { "rtt-ms", required_argument, NULL, 'T' },
		{ "json", required_argument, NULL, 'j' },    { NULL, 0, NULL, 0 },
	};
	const char *tx = NULL, *rx = NULL, *mcast = NULL, *json = NULL, *role = NULL;
	unsigned id = 0, group = 0, size = 956, pps = 0, rtt_ms = 100;
	double seconds = 10;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': tx = optarg; break;
		case 'r': rx = optarg; break;
		case 'i': id = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'g': group = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'm': mcast = optarg; break;
		case 'R': role = optarg; break;
		case 's': seconds = atof(optarg); break;
		case 'z': size = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'p': pps = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'T': rtt_ms = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'j': json = optarg; break;
		default: usage();
		}
	}
	if (!tx || !rx || !mcast || !json || !role || !id || !group || size == 0 || size > 1400)
		usage();
	bool sender = strcmp(role, "send") == 0;
	if (!sender && strcmp(role, "recv") != 0)
		usage();
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	struct il_ep_config cfg;
	char err[256];

	il_ep_config_init(&cfg);
	cfg.tx_ifname = tx;
	cfg.rx_ifname = rx;
	cfg.member_id = id;
	cfg.tfrc_rtt_ms = rtt_ms;
	struct il_ep *ep = il_ep_open(&cfg, err, sizeof(err));
	if (ep == NULL) {
		fprintf(stderr, "il_ep_open: %s\n", err);
		return 1;
	}
	uint64_t delivered = 0;
	const struct il_ep_callbacks cb = { .po = on_po };
	int rc = il_ep_join(ep, (uint16_t)group, mcast, sender ? IL_EP_SENDER : IL_EP_RECEIVER,
			    &cb, &delivered);
	if (rc != 0) {
		fprintf(stderr, "il_ep_join: %s\n", strerror(-rc));
		return 1;
	}
	double t0 = now_s(), joined = 0;
	while (!stop && !il_ep_is_member(ep, (uint16_t)group) && now_s() - t0 < 20)
		il_ep_poll(ep, 1000);
	if (!il_ep_is_member(ep, (uint16_t)group)) {
		fprintf(stderr, "no VIEW named us within 20 s\n");
		return 1;
	}
	joined = now_s();

	static struct sample smp[MAX_SAMPLES];
	unsigned n_smp = 0;
	char msg[1400];
	uint64_t offered = 0;
	double next_sample = joined, end = joined + seconds;

	memset(msg, 'x', sizeof(msg));
	while (!stop) {
		double t = now_s();

		if (t >= end)
			break;
		if (sender) {
			/* Keep a little queued beyond what is in flight: the rate
			 * and the window, not this loop, decide when it goes. */
			uint64_t budget = pps ? (uint64_t)((t - joined) * pps) : UINT64_MAX;

			while (offered < budget && il_ep_pending(ep, (uint16_t)group) < 1024) {
				snprintf(msg, 32, "%lu ", (unsigned long)offered);
				if (il_ep_send(ep, (uint16_t)group, msg, size) != 0)
					break;
				offered++;
			}
		}
		il_ep_poll(ep, 1000);
		if (t >= next_sample && n_smp < MAX_SAMPLES) {
			struct il_ep_stats st;

			il_ep_get_stats(ep, &st);
			smp[n_smp].t = t - joined;
			smp[n_smp].msgs_tx = st.msgs_tx;
			il_ep_tfrc_stats(ep, (uint16_t)group, &smp[n_smp].tf);
			n_smp++;
			next_sample += 0.1;
		}
	}

	struct il_ep_stats st;
	il_ep_get_stats(ep, &st);
	FILE *f = fopen(json, "w");
	if (f == NULL) {
		perror(json);
		return 1;
	}
	struct il_json j;
	il_json_begin(&j, f, 2);
	il_json_obj(&j, NULL);
	il_json_str(&j, "role", role);
	il_json_u64(&j, "id", id);
	il_json_u64(&j, "group", group);
	il_json_u64(&j, "size", size);
	il_json_u64(&j, "offered", offered);
	il_json_u64(&j, "delivered", delivered);
	il_json_u64(&j, "msgs_tx", st.msgs_tx);
	il_json_u64(&j, "data_rx", st.data_rx);
	il_json_u64(&j, "acks", st.ack_tx);
	il_json_u64(&j, "naks", st.nak_tx);
	il_json_u64(&j, "credits", st.credit_rx);
	il_json_arr(&j, "samples");
	for (unsigned i = 0; i < n_smp; i++) {
		const struct il_ep_tfrc *tf = &smp[i].tf;

		il_json_obj(&j, NULL);
		il_json_fixed(&j, "t", smp[i].t, 4);
		il_json_u64(&j, "rate_kbps", tf->rate_kbps);
		il_json_u64(&j, "tx_bytes", tf->tx_bytes);
		il_json_u64(&j, "msgs_tx", smp[i].msgs_tx);
		il_json_u64(&j, "paced", tf->paced);
		il_json_fixed(&j, "loss_p", tf->loss_p, 6);
		il_json_u64(&j, "loss_events", tf->loss_events);
		il_json_u64(&j, "lost", tf->lost);
		il_json_u64(&j, "received", tf->received);
		il_json_end(&j);
	}
	il_json_end(&j);
	il_json_end(&j);
	if (il_json_finish(&j))
		fprintf(stderr, "il-tfrc-host: cannot write %s\n", json);
	fclose(f);
	il_ep_close(ep);
	return 0;
}
