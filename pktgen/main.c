/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen: drives the appliance with emulated senders and checks
 * what its emulated receivers get. One poll loop: build and send a burst,
 * receive a burst, NAK what is missing, print a status line each second.
 * Exit status: 0 when every receiver got every message in one agreed
 * order with per-sender FIFO intact; 1 otherwise; 2 for usage errors.
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include <interlink/port.h>
#include <interlink/wire.h>

#include "pktgen.h"

static struct pg_state S;

static void on_signal(int sig)
{
	(void)sig;
	S.quit = true;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: interlink-pktgen --tx DEV [--rx DEV] [options] [-- EAL options]\n"
"  --tx DEV              port to send on (PCI address or vdev string)\n"
"  --rx DEV              port to receive on (default: the tx port)\n"
"  --senders N           emulated senders (default 4, max %d)\n"
"  --receivers N         emulated receivers (default 3, max %d)\n"
"  --groups N            groups, ids from --group-base (default 2, max %d)\n"
"  --group-base ID       first group id (default 1)\n"
"  --group-addr A.B.C.D  multicast address of the first group (default 239.1.1.1)\n"
"  --udp-port P          Interlink UDP port (default 7400)\n"
"  --count N             messages to send (default 1000000; 0 with --duration)\n"
"  --duration SEC        send for SEC seconds\n"
"  --rate PPS            frames per second, TSC-paced (default 0: as fast as possible)\n"
"  --size B              payload bytes per message (default 64, >= 16 for latency)\n"
"  --pack K              messages per frame (default 1)\n"
"  --udp-csum            fill UDP checksums (default: zero, i.e. none)\n"
"  --loss SPEC           loss at each receiver: none | bernoulli:P | burst:P:LEN |\n"
"                        ge:P_GB:P_BG:LOSS_GOOD:LOSS_BAD (default none)\n"
"  --seed N              seed of the loss models (default 1)\n"
"  --nak-timeout-us U    re-NAK a gap after U microseconds (default 500)\n"
"  --drain-timeout SEC   after sending, wait at most SEC for repairs (default 10)\n"
"  --reorder-slots N     frames a receiver may buffer per group (default 65536)\n"
"  --window W            messages a sender may have undelivered at some receiver\n"
"                        (default 2048; 0: no flow control)\n"
"  --json FILE           write the final summary as JSON\n"
"  --quiet               no status line\n",
		PG_MAX_SENDERS, PG_MAX_RECEIVERS, PG_MAX_GROUPS);
}

static int parse_loss(const char *spec, struct il_loss_cfg *lc)
{
	memset(lc, 0, sizeof(*lc));
	if (!strcmp(spec, "none"))
		return 0;
	if (sscanf(spec, "bernoulli:%lf", &lc->p) == 1) {
		lc->model = IL_LOSS_BERNOULLI;
		return 0;
	}
	if (sscanf(spec, "burst:%lf:%u", &lc->p, &lc->burst_len) == 2) {
		lc->model = IL_LOSS_BURST;
		return 0;
	}
	if (sscanf(spec, "ge:%lf:%lf:%lf:%lf", &lc->ge_p_gb, &lc->ge_p_bg, &lc->ge_loss_good,
		   &lc->ge_loss_bad) == 4) {
		lc->model = IL_LOSS_GILBERT_ELLIOTT;
		return 0;
	}
	return -1;
}

static int num(const char *opt, const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);
	if (*end || end == arg || v < lo || v > hi) {
		fprintf(stderr, "interlink-pktgen: --%s expects a number in %g..%g, got '%s'\n", opt,
			lo, hi, arg);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct pg_conf *c)
{
	static const struct option opts[] = {
		{"tx", required_argument, NULL, 1}, {"rx", required_argument, NULL, 2},
		{"senders", required_argument, NULL, 3}, {"receivers", required_argument, NULL, 4},
		{"groups", required_argument, NULL, 5}, {"group-base", required_argument, NULL, 6},
		{"group-addr", required_argument, NULL, 7}, {"udp-port", required_argument, NULL, 8},
		{"count", required_argument, NULL, 9}, {"duration", required_argument, NULL, 10},
		{"rate", required_argument, NULL, 11}, {"size", required_argument, NULL, 12},
		{"pack", required_argument, NULL, 13}, {"udp-csum", no_argument, NULL, 14},
		{"loss", required_argument, NULL, 15}, {"seed", required_argument, NULL, 16},
		{"nak-timeout-us", required_argument, NULL, 17},
		{"drain-timeout", required_argument, NULL, 18},
		{"reorder-slots", required_argument, NULL, 19}, {"json", required_argument, NULL, 20},
		{"quiet", no_argument, NULL, 21}, {"window", required_argument, NULL, 22},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	double v;
	int o;
	struct in_addr a;

	c->senders = 4;
	c->receivers = 3;
	c->groups = 2;
	c->group_base = 1;
	c->group_addr_base = 0xef010101u;
	c->il_port = IL_UDP_PORT_DEFAULT;
	c->count = 1000000;
	c->msg_size = 64;
	c->pack = 1;
	c->seed = 1;
	c->nak_timeout_us = 500;
	c->drain_timeout_s = 10;
	c->reorder_slots = 65536;
	c->window = 2048;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 1: c->tx_dev = optarg; break;
		case 2: c->rx_dev = optarg; break;
		case 3: if (num("senders", optarg, 1, PG_MAX_SENDERS, &v)) return -1;
			c->senders = (unsigned)v; break;
		case 4: if (num("receivers", optarg, 1, PG_MAX_RECEIVERS, &v)) return -1;
			c->receivers = (unsigned)v; break;
		case 5: if (num("groups", optarg, 1, PG_MAX_GROUPS, &v)) return -1;
			c->groups = (unsigned)v; break;
		case 6: if (num("group-base", optarg, 0, 65535 - PG_MAX_GROUPS, &v)) return -1;
			c->group_base = (uint16_t)v; break;
		case 7:
			if (inet_pton(AF_INET, optarg, &a) != 1 || (ntohl(a.s_addr) >> 28) != 0xe) {
				fprintf(stderr, "interlink-pktgen: --group-addr expects a multicast "
						"IPv4 address, got '%s'\n", optarg);
				return -1;
			}
			c->group_addr_base = ntohl(a.s_addr);
			break;
		case 8: if (num("udp-port", optarg, 1, 65535, &v)) return -1;
			c->il_port = (uint16_t)v; break;
		case 9: if (num("count", optarg, 0, 1e15, &v)) return -1;
			c->count = (uint64_t)v; break;
		case 10: if (num("duration", optarg, 0, 1e6, &c->duration)) return -1;
			break;
		case 11: if (num("rate", optarg, 0, 1e9, &c->rate_pps)) return -1;
			break;
		case 12: if (num("size", optarg, 0, 9000, &v)) return -1;
			c->msg_size = (unsigned)v; break;
		case 13: if (num("pack", optarg, 1, IL_MAX_MSGS_PER_FRAME, &v)) return -1;
			c->pack = (unsigned)v; break;
		case 14: c->udp_csum = true; break;
		case 15:
			if (parse_loss(optarg, &c->loss)) {
				fprintf(stderr, "interlink-pktgen: --loss expects none, bernoulli:P, "
						"burst:P:LEN or ge:P_GB:P_BG:LOSS_GOOD:LOSS_BAD, got "
						"'%s'\n", optarg);
				return -1;
			}
			break;
		case 16: if (num("seed", optarg, 0, 1e18, &v)) return -1;
			c->seed = (uint64_t)v; break;
		case 17: if (num("nak-timeout-us", optarg, 1, 1e7, &c->nak_timeout_us)) return -1;
			break;
		case 18: if (num("drain-timeout", optarg, 0, 3600, &c->drain_timeout_s)) return -1;
			break;
		case 19: if (num("reorder-slots", optarg, 16, 1 << 22, &v)) return -1;
			c->reorder_slots = (unsigned)v;
			if (c->reorder_slots & (c->reorder_slots - 1)) {
				fprintf(stderr, "interlink-pktgen: --reorder-slots must be a power "
						"of two\n");
				return -1;
			}
			break;
		case 20: c->json = optarg; break;
		case 21: c->quiet = true; break;
		case 22: if (num("window", optarg, 0, 1 << 24, &v)) return -1;
			c->window = (unsigned)v; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (!c->tx_dev) {
		fprintf(stderr, "interlink-pktgen: --tx DEV is required\n");
		usage(stderr);
		return -1;
	}
	if (!c->rx_dev)
		c->rx_dev = c->tx_dev;
	if (!c->count && !c->duration) {
		fprintf(stderr, "interlink-pktgen: --count 0 needs a --duration\n");
		return -1;
	}
	unsigned frame = 42 + IL_HDR_LEN + c->pack * (IL_MSG_HDR_LEN + c->msg_size);
	if (frame > 9014) {
		fprintf(stderr, "interlink-pktgen: --pack %u x --size %u makes %u-byte frames; the "
				"limit is 9014\n", c->pack, c->msg_size, frame);
		return -1;
	}
	return optind;
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

static void setup_port(uint16_t port, bool tx_only_queue)
{
	struct rte_eth_conf conf;
	(void)tx_only_queue;
	memset(&conf, 0, sizeof(conf));
	if (rte_eth_dev_configure(port, 1, 1, &conf) ||
	    rte_eth_rx_queue_setup(port, 0, 4096, 0, NULL, S.pool) ||
	    rte_eth_tx_queue_setup(port, 0, 4096, 0, NULL) || rte_eth_dev_start(port)) {
		fprintf(stderr, "interlink-pktgen: cannot set up port %u\n", port);
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

static void summary(double send_s, double total_s, bool complete)
{
	struct totals t;
	struct pg_hist lat;
	double us = 1e6 / (double)S.hz;
	uint64_t sent_all = 0;
	unsigned dis = disagreements();

	totals(&t);
	memset(&lat, 0, sizeof(lat));
	for (unsigned r = 0; r < S.c.receivers; r++)
		pg_hist_merge(&lat, &S.rx[r].lat);
	for (unsigned g = 0; g < S.c.groups; g++)
		sent_all += S.group_sent[g];
	printf("\n==== interlink-pktgen summary ====\n");
	printf("sent               %" PRIu64 " messages in %" PRIu64 " frames from %u senders to %u "
	       "groups in %.2f s: %.3f Mpps\n", S.tx_msgs, S.tx_frames, S.c.senders, S.c.groups,
	       send_s, send_s > 0 ? (double)S.tx_frames / send_s / 1e6 : 0.0);
	printf("received           %" PRIu64 " frames (%" PRIu64 " other, %" PRIu64 " UNAVAIL, %" PRIu64
	       " unstamped)\n", S.rx_frames, S.rx_other, S.rx_unavail, S.rx_bad);
	printf("receivers          %u, each expecting %" PRIu64 " messages; delivered %" PRIu64
	       " of %" PRIu64 "\n", S.c.receivers, sent_all, t.delivered,
	       sent_all * S.c.receivers);
	printf("order disagreements %u   FIFO violations %" PRIu64 "   unrecoverable %" PRIu64 "\n",
	       dis, t.fifo, t.unrec);
	printf("gaps               %" PRIu64 " detected, %" PRIu64 " repaired; %" PRIu64
	       " NAKs sent (%" PRIu64 " failed); %" PRIu64 " duplicates; %" PRIu64
	       " injected losses; %" PRIu64 " reorder overruns\n",
	       t.gaps, t.repaired, S.naks_tx, S.naks_tx_fail, t.dups, t.injected, t.overrun);
	printf("latency (PO, us)   p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (%" PRIu64
	       " samples)\n",
	       (double)pg_hist_quantile(&lat, 0.5) * us, (double)pg_hist_quantile(&lat, 0.9) * us,
	       (double)pg_hist_quantile(&lat, 0.99) * us,
	       (double)pg_hist_quantile(&lat, 0.999) * us, (double)lat.max * us, lat.count);
	printf("per group hashes  ");
	for (unsigned g = 0; g < S.c.groups; g++)
		printf(" g%u=%016" PRIx64, S.c.group_base + g, S.rx[0].g[g].hash);
	printf("\nresult             %s\n",
	       complete && !dis && !t.fifo && !t.unrec ? "PASS: one order, nothing missing"
						       : "FAIL");
	fflush(stdout);
	if (!S.c.json)
		return;
	FILE *j = fopen(S.c.json, "w");
	if (!j) {
		perror(S.c.json);
		return;
	}
	fprintf(j, "{\n  \"senders\": %u, \"receivers\": %u, \"groups\": %u,\n", S.c.senders,
		S.c.receivers, S.c.groups);
	fprintf(j, "  \"sent_msgs\": %" PRIu64 ", \"sent_frames\": %" PRIu64 ", \"send_s\": %.6f, "
		   "\"total_s\": %.6f, \"tx_mpps\": %.6f,\n",
		S.tx_msgs, S.tx_frames, send_s, total_s,
		send_s > 0 ? (double)S.tx_frames / send_s / 1e6 : 0.0);
	fprintf(j, "  \"delivered\": %" PRIu64 ", \"expected\": %" PRIu64 ", \"complete\": %s,\n",
		t.delivered, sent_all * S.c.receivers, complete ? "true" : "false");
	fprintf(j, "  \"disagreements\": %u, \"fifo_violations\": %" PRIu64 ", \"unrecoverable\": %"
		   PRIu64 ",\n", dis, t.fifo, t.unrec);
	fprintf(j, "  \"gaps\": %" PRIu64 ", \"gaps_repaired\": %" PRIu64 ", \"naks\": %" PRIu64
		   ", \"naks_failed\": %" PRIu64 ", \"duplicates\": %" PRIu64 ", \"injected_losses\": %"
		   PRIu64 ", \"overruns\": %" PRIu64 ",\n",
		t.gaps, t.repaired, S.naks_tx, S.naks_tx_fail, t.dups, t.injected, t.overrun);
	fprintf(j, "  \"latency_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, "
		   "\"max\": %.3f, \"samples\": %" PRIu64 "}\n}\n",
		(double)pg_hist_quantile(&lat, 0.5) * us, (double)pg_hist_quantile(&lat, 0.9) * us,
		(double)pg_hist_quantile(&lat, 0.99) * us,
		(double)pg_hist_quantile(&lat, 0.999) * us, (double)lat.max * us, lat.count);
	fclose(j);
}

int main(int argc, char **argv)
{
	int first = parse_args(argc, argv, &S.c);
	if (first < 0)
		return 2;

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
	unsigned pool_n = 32768 + S.c.receivers * S.c.groups * hold;
	unsigned frame = 42 + IL_HDR_LEN + S.c.pack * (IL_MSG_HDR_LEN + S.c.msg_size);
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
	setup_port(S.tx_port, false);
	if (S.rx_port != S.tx_port)
		setup_port(S.rx_port, false);
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(S.tx_port, &mac);
	memcpy(S.tx_mac, mac.addr_bytes, 6);
	for (unsigned i = 0; i < S.c.senders; i++) {
		S.senders[i].id = i + 1;
		for (unsigned g = 0; g < PG_MAX_GROUPS; g++)
			S.senders[i].seq[g] = 1;
	}
	if (pg_receivers_init(&S))
		return 2;

	/* memif links come up once the peer connects: wait, then send. */
	if (!il_port_wait_link(S.tx_port, 10000) || !il_port_wait_link(S.rx_port, 10000)) {
		fprintf(stderr, "interlink-pktgen: link down after 10 s (is the appliance running?)\n");
		return 2;
	}
	usleep(100000);

	const uint64_t hz = S.hz;
	const uint64_t t0 = rte_rdtsc();
	const uint64_t tick = hz / 10000; /* receivers' timers: 100 us */
	const double period = S.c.rate_pps > 0 ? (double)hz / S.c.rate_pps : 0;
	double next_tx = (double)t0;
	uint64_t last_tick = t0, last_status = t0, done_tsc = 0;
	uint64_t st_tx = 0, st_rx = 0, st_del = 0;
	struct rte_mbuf *pend[PG_BURST], *rx[PG_BURST];
	uint16_t npend = 0, pend_off = 0;
	bool sending = true, complete = false;

	while (!S.quit) {
		uint64_t now = rte_rdtsc();
		if (sending) {
			if (npend == pend_off) {
				uint16_t want = PG_BURST;
				if (period > 0) {
					double due = ((double)now - next_tx) / period;
					want = due < 0 ? 0 : due >= PG_BURST ? PG_BURST : (uint16_t)due;
					if (due > 4 * PG_BURST) /* do not try to catch up forever */
						next_tx = (double)now - 4 * PG_BURST * period;
				}
				npend = want ? pg_build_burst(&S, pend, want) : 0;
				pend_off = 0;
				next_tx += period * npend;
			}
			if (npend > pend_off) {
				uint16_t k = rte_eth_tx_burst(S.tx_port, 0, pend + pend_off,
							      npend - pend_off);
				S.tx_frames += k;
				pend_off += k;
				if (pend_off < npend)
					S.tx_retry++;
			}
			double el = (double)(now - t0) / (double)hz;
			if (npend == pend_off &&
			    ((S.c.count && S.tx_msgs >= S.c.count) ||
			     (S.c.duration > 0 && el >= S.c.duration))) {
				sending = false;
				done_tsc = now;
				/* A duration run stops its count where it is. */
				S.c.count = S.tx_msgs;
			}
		}
		uint16_t k = rte_eth_rx_burst(S.rx_port, 0, rx, PG_BURST);
		if (k)
			pg_receive_burst(&S, rx, k);
		if (now - last_tick >= tick) {
			pg_receivers_tick(&S, !sending);
			last_tick = now;
			if (!sending) {
				complete = pg_receivers_complete(&S);
				if (complete || (double)(now - done_tsc) / (double)hz >=
							S.c.drain_timeout_s)
					break;
			}
		}
		if (!S.c.quiet && now - last_status >= hz) {
			struct totals t;
			double dt = (double)(now - last_status) / (double)hz;
			totals(&t);
			printf("[%6.1fs] tx %.3f Mpps  rx %.3f Mpps  delivered %.3f M msg/s  gaps %" PRIu64
			       " repaired %" PRIu64 " naks %" PRIu64 " window-stalls %" PRIu64 "%s\n",
			       (double)(now - t0) / (double)hz,
			       (double)(S.tx_frames - st_tx) / dt / 1e6,
			       (double)(S.rx_frames - st_rx) / dt / 1e6,
			       (double)(t.delivered - st_del) / dt / 1e6, t.gaps, t.repaired,
			       S.naks_tx, S.window_stalls, sending ? "" : "  (draining)");
			fflush(stdout);
			st_tx = S.tx_frames;
			st_rx = S.rx_frames;
			st_del = t.delivered;
			last_status = now;
		}
	}
	uint64_t end = rte_rdtsc();
	if (!done_tsc)
		done_tsc = end;
	complete = pg_receivers_complete(&S);
	summary((double)(done_tsc - t0) / (double)hz, (double)(end - t0) / (double)hz, complete);
	struct totals t;
	totals(&t);
	bool ok = complete && !disagreements() && !t.fifo && !t.unrec;
	rte_eth_dev_stop(S.tx_port);
	if (S.rx_port != S.tx_port)
		rte_eth_dev_stop(S.rx_port);
	rte_eal_cleanup();
	return ok ? 0 : 1;
}
