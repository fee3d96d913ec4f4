/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen's command line. Every option is checked here, with an
 * error that names the option and what it accepts, before EAL starts.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <interlink/version.h>
#include <interlink/wire.h>

#include "pktgen.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: interlink-pktgen --tx DEV [--rx DEV] [options] [-- EAL options]\n"
"       interlink-pktgen -h, --help | --version\n"
"  --tx DEV              port to send on (PCI address or vdev string)\n"
"  --rx DEV              port to receive on (default: the tx port)\n"
"  --queues N            queue pairs on each port (default 1; a sharded appliance's\n"
"                        memif ports need as many as it has shards); receives on all\n"
"  --tx-queue Q|hash     send frames and NAKs on queue Q (default 0): a shard other\n"
"                        than Q's hands the frames of its groups over (strays);\n"
"                        hash: each group's on its shard's queue (shards.assign: hash)\n"
"  --mode M              native (Interlink DATA, default) | raw (plain UDP to\n"
"                        --raw-dst, for the appliance's raw-mode filter)\n"
"  --raw-dst A.B.C.D:P   raw mode destination (default 239.1.1.100:9000)\n"
"  --raw-group ID        group id the appliance gives raw traffic (default 100)\n"
"  --pcap FILE           replay FILE on its own timestamps instead of senders\n"
"  --speed X             replay X times faster (default 1; 0: back to back)\n"
"  --pcap-loops N        replay the file N times (default 1)\n"
"  --senders N           emulated senders (default 4, max %d)\n"
"  --receivers N         emulated receivers (default 3, max %d)\n"
"  --groups N            groups, ids from --group-base (default 2, max %d)\n"
"  --group-base ID       first group id (default 1)\n"
"  --group-addr A.B.C.D  multicast address of the first group (default 239.1.1.1)\n"
"  --udp-port P          Interlink UDP port (default 7400)\n"
"  --count N             messages to send (default 1000000; 0 with --duration)\n"
"  --duration SEC        send for SEC seconds\n"
"  --rate PPS            frames per second, TSC-paced (default 0: as fast as possible)\n"
"  --rate-bps BPS        or wire bits per second (frame + FCS + preamble + gap)\n"
"  --catch-up-us U       after losing the CPU, make up at most U us of sending\n"
"                        (default 10000: exact rate over a second; small for NDR)\n"
"  --size SPEC           message payload bytes (raw: UDP payload): N, A-B\n"
"                        (uniform) (default 64; >= 16 carries timestamp and tag)\n"
"  --frame SPEC          whole frame bytes, FCS included (RFC 2544): N, A-B or\n"
"                        imix (7:4:1 of 64/570/1518); the payload follows\n"
"  --pack K              messages per frame (default 1)\n"
"  --pack-bytes MTU      pack as many messages as fit in MTU (1500 or 9000)\n"
"  --udp-csum            fill UDP checksums (default: zero, i.e. none)\n"
"  --check C             full (order, hash, NAK repair; default) | count (count\n"
"                        frames, global-seq continuity and latency; line rate)\n"
"  --rx-lcore            receive on a second lcore (EAL --lcores 0,1; count check)\n"
"  --tx-drop             frames the port refuses are dropped and counted as lost,\n"
"                        as on a wire (default: retried)\n"
"  --loss SPEC           loss at each receiver: none | bernoulli:P | burst:P:LEN |\n"
"                        ge:P_GB:P_BG:LOSS_GOOD:LOSS_BAD (default none)\n"
"  --seed N              seed of the loss models and sizes (default 1)\n"
"  --nak-timeout-us U    re-NAK a gap after U microseconds (default 500)\n"
"  --drain-timeout SEC   after sending, wait at most SEC for repairs (default 10;\n"
"                        count mode: until 100 ms without a frame, at most SEC)\n"
"  --reorder-slots N     frames a receiver may buffer per group (default 65536)\n"
"  --window W            messages a sender may have undelivered at some receiver\n"
"                        (default 2048; 0: no flow control; full check only)\n"
"  --capture FILE        write the first --capture-count received frames (pcap)\n"
"  --capture-count N     (default 1000)\n"
"  --link-wait SEC       wait at most SEC for the links to come up (default 10)\n"
"  --link-loss SEC       a link down for SEC during a run ends it, exit status 2\n"
"                        (the appliance went away; default 5)\n"
"  --serve               run trials on one connection, driven from stdin:\n"
"                        'trial RATE_PPS SECONDS [SENDERS RECEIVERS]' or 'quit';\n"
"                        a JSON summary and a line END on stdout for each\n"
"  --listen              send nothing: count what arrives for --duration seconds\n"
"                        (another generator drives the appliance; count check)\n"
"  --uto                 speak the appliance's UTO control protocol (configs/uto.yaml\n"
"                        with interlink-control): members JOIN and wait for a VIEW\n"
"                        naming them, receivers ACK, all send HEARTBEATs, senders\n"
"                        obey CREDIT (its rate_kbps too) instead of --window and go\n"
"                        back on a resume notice (full check only)\n"
"  --ack-every K         --uto: ACK after K new messages (default 32)\n"
"  --ack-us T            --uto: or after T us with anything new (default 500)\n"
"  --heartbeat-ms MS     --uto: HEARTBEAT of every member each MS (default 20)\n"
"  --view-wait SEC       --uto: wait at most SEC for the VIEWs (default 10)\n"
"  --credit-wait SEC     --uto: then for a first CREDIT per sender (default 1)\n"
"  --auth-keys FILE      sign JOIN, LEAVE, HEARTBEAT, ACK and NAK with a key of FILE (the\n"
"                        appliance's auth key file) and drop STABLE, VIEW, CREDIT and\n"
"                        UNAVAIL without a valid MAC and a fresh counter\n"
"  --auth-key-id ID      the key to sign with (default: the file's first)\n"
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

static int mcast(const char *opt, const char *arg, uint32_t *out)
{
	struct in_addr a;
	if (inet_pton(AF_INET, arg, &a) != 1 || (ntohl(a.s_addr) >> 28) != 0xe) {
		fprintf(stderr, "interlink-pktgen: --%s expects a multicast IPv4 address, got "
				"'%s'\n", opt, arg);
		return -1;
	}
	*out = ntohl(a.s_addr);
	return 0;
}

enum {
	O_TX = 1, O_RX, O_SENDERS, O_RECEIVERS, O_GROUPS, O_GROUP_BASE, O_GROUP_ADDR,
	O_UDP_PORT, O_COUNT, O_DURATION, O_RATE, O_SIZE, O_PACK, O_UDP_CSUM, O_LOSS, O_SEED,
	O_NAK_TMO, O_DRAIN, O_REORDER, O_JSON, O_QUIET, O_WINDOW, O_MODE, O_RAW_DST,
	O_RAW_GROUP, O_PCAP, O_SPEED, O_PCAP_LOOPS, O_RATE_BPS, O_FRAME, O_PACK_BYTES,
	O_CHECK, O_TX_DROP, O_CAPTURE, O_CAPTURE_COUNT, O_LINK_WAIT, O_LINK_LOSS, O_LISTEN, O_CATCH_UP, O_SERVE, O_RX_LCORE,
	O_UTO, O_ACK_EVERY, O_ACK_US, O_HB_MS, O_VIEW_WAIT, O_CREDIT_WAIT, O_AUTH_KEYS,
	O_AUTH_KEY_ID, O_QUEUES, O_TX_QUEUE,
};

int pg_parse_args(int argc, char **argv, struct pg_conf *c)
{
	static const struct option opts[] = {
		{"tx", 1, NULL, O_TX}, {"rx", 1, NULL, O_RX},
		{"queues", 1, NULL, O_QUEUES}, {"tx-queue", 1, NULL, O_TX_QUEUE},
		{"senders", 1, NULL, O_SENDERS}, {"receivers", 1, NULL, O_RECEIVERS},
		{"groups", 1, NULL, O_GROUPS}, {"group-base", 1, NULL, O_GROUP_BASE},
		{"group-addr", 1, NULL, O_GROUP_ADDR}, {"udp-port", 1, NULL, O_UDP_PORT},
		{"count", 1, NULL, O_COUNT}, {"duration", 1, NULL, O_DURATION},
		{"rate", 1, NULL, O_RATE}, {"size", 1, NULL, O_SIZE},
		{"pack", 1, NULL, O_PACK}, {"udp-csum", 0, NULL, O_UDP_CSUM},
		{"loss", 1, NULL, O_LOSS}, {"seed", 1, NULL, O_SEED},
		{"nak-timeout-us", 1, NULL, O_NAK_TMO}, {"drain-timeout", 1, NULL, O_DRAIN},
		{"reorder-slots", 1, NULL, O_REORDER}, {"json", 1, NULL, O_JSON},
		{"quiet", 0, NULL, O_QUIET}, {"window", 1, NULL, O_WINDOW},
		{"mode", 1, NULL, O_MODE}, {"raw-dst", 1, NULL, O_RAW_DST},
		{"raw-group", 1, NULL, O_RAW_GROUP}, {"pcap", 1, NULL, O_PCAP},
		{"speed", 1, NULL, O_SPEED}, {"pcap-loops", 1, NULL, O_PCAP_LOOPS},
		{"rate-bps", 1, NULL, O_RATE_BPS}, {"frame", 1, NULL, O_FRAME},
		{"pack-bytes", 1, NULL, O_PACK_BYTES}, {"check", 1, NULL, O_CHECK},
		{"tx-drop", 0, NULL, O_TX_DROP}, {"capture", 1, NULL, O_CAPTURE},
		{"capture-count", 1, NULL, O_CAPTURE_COUNT}, {"link-wait", 1, NULL, O_LINK_WAIT},
		{"link-loss", 1, NULL, O_LINK_LOSS},
		{"listen", 0, NULL, O_LISTEN}, {"serve", 0, NULL, O_SERVE},
		{"rx-lcore", 0, NULL, O_RX_LCORE}, {"catch-up-us", 1, NULL, O_CATCH_UP},
		{"uto", 0, NULL, O_UTO}, {"ack-every", 1, NULL, O_ACK_EVERY},
		{"ack-us", 1, NULL, O_ACK_US}, {"heartbeat-ms", 1, NULL, O_HB_MS},
		{"view-wait", 1, NULL, O_VIEW_WAIT}, {"credit-wait", 1, NULL, O_CREDIT_WAIT},
		{"auth-keys", 1, NULL, O_AUTH_KEYS}, {"auth-key-id", 1, NULL, O_AUTH_KEY_ID},
		{"help", 0, NULL, 'h'}, {"version", 0, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *size_spec = "64", *frame_spec = NULL;
	double v;
	int o;
	unsigned raw_group = 100;
	bool groups_set = false;
	char err[160];

	c->senders = 4;
	c->receivers = 3;
	c->groups = 2;
	c->group_base = 1;
	c->group_addr_base = 0xef010101u;
	c->queues = 1;
	c->il_port = IL_UDP_PORT_DEFAULT;
	c->raw_dst = 0xef010164u; /* 239.1.1.100 */
	c->raw_port = 9000;
	c->count = 1000000;
	c->pack = 1;
	c->seed = 1;
	c->nak_timeout_us = 500;
	c->drain_timeout_s = 10;
	c->reorder_slots = 65536;
	c->window = 2048;
	c->speed = 1;
	c->pcap_loops = 1;
	c->capture_count = 1000;
	c->link_wait_s = 10;
	c->link_loss_s = 5;
	c->ack_every = 32;
	c->ack_us = 500;
	c->hb_ms = 20;
	c->view_wait_s = 10;
	c->credit_wait_s = 1;
	bool window_set = false;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case O_TX: c->tx_dev = optarg; break;
		case O_RX: c->rx_dev = optarg; break;
		case O_QUEUES: if (num("queues", optarg, 1, 8, &v)) return -1;
			c->queues = (unsigned)v; break;
		case O_TX_QUEUE:
			if (!strcmp(optarg, "hash")) {
				c->tx_queue = PG_TXQ_HASH;
				break;
			}
			if (num("tx-queue", optarg, 0, 7, &v))
				return -1;
			c->tx_queue = (unsigned)v; break;
		case O_SENDERS: if (num("senders", optarg, 1, PG_MAX_SENDERS, &v)) return -1;
			c->senders = (unsigned)v; break;
		case O_RECEIVERS: if (num("receivers", optarg, 1, PG_MAX_RECEIVERS, &v)) return -1;
			c->receivers = (unsigned)v; break;
		case O_GROUPS: if (num("groups", optarg, 1, PG_MAX_GROUPS, &v)) return -1;
			c->groups = (unsigned)v; groups_set = true; break;
		case O_GROUP_BASE: if (num("group-base", optarg, 0, 65535 - PG_MAX_GROUPS, &v))
				return -1;
			c->group_base = (uint16_t)v; break;
		case O_GROUP_ADDR: if (mcast("group-addr", optarg, &c->group_addr_base)) return -1;
			break;
		case O_UDP_PORT: if (num("udp-port", optarg, 1, 65535, &v)) return -1;
			c->il_port = (uint16_t)v; break;
		case O_COUNT: if (num("count", optarg, 0, 1e15, &v)) return -1;
			c->count = (uint64_t)v; break;
		case O_DURATION: if (num("duration", optarg, 0, 1e6, &c->duration)) return -1;
			break;
		case O_RATE: if (num("rate", optarg, 0, 1e9, &c->rate_pps)) return -1;
			break;
		case O_RATE_BPS: if (num("rate-bps", optarg, 0, 4e12, &c->rate_bps)) return -1;
			break;
		case O_SIZE: size_spec = optarg; break;
		case O_FRAME: frame_spec = optarg; break;
		case O_PACK: if (num("pack", optarg, 1, IL_MAX_MSGS_PER_FRAME, &v)) return -1;
			c->pack = (unsigned)v; break;
		case O_PACK_BYTES: if (num("pack-bytes", optarg, 576, 9000, &v)) return -1;
			c->pack_bytes = (unsigned)v; break;
		case O_UDP_CSUM: c->udp_csum = true; break;
		case O_LOSS:
			if (parse_loss(optarg, &c->loss)) {
				fprintf(stderr, "interlink-pktgen: --loss expects none, bernoulli:P, "
						"burst:P:LEN or ge:P_GB:P_BG:LOSS_GOOD:LOSS_BAD, got "
						"'%s'\n", optarg);
				return -1;
			}
			break;
		case O_SEED: if (num("seed", optarg, 0, 1e18, &v)) return -1;
			c->seed = (uint64_t)v; break;
		case O_NAK_TMO: if (num("nak-timeout-us", optarg, 1, 1e7, &c->nak_timeout_us))
				return -1;
			break;
		case O_DRAIN: if (num("drain-timeout", optarg, 0, 3600, &c->drain_timeout_s))
				return -1;
			break;
		case O_REORDER: if (num("reorder-slots", optarg, 16, 1 << 22, &v)) return -1;
			c->reorder_slots = (unsigned)v;
			if (c->reorder_slots & (c->reorder_slots - 1)) {
				fprintf(stderr, "interlink-pktgen: --reorder-slots must be a power "
						"of two\n");
				return -1;
			}
			break;
		case O_JSON: c->json = optarg; break;
		case O_QUIET: c->quiet = true; break;
		case O_WINDOW: if (num("window", optarg, 0, 1 << 24, &v)) return -1;
			c->window = (unsigned)v; window_set = true; break;
		case O_UTO: c->uto = true; break;
		case O_ACK_EVERY: if (num("ack-every", optarg, 1, 1 << 20, &v)) return -1;
			c->ack_every = (unsigned)v; break;
		case O_ACK_US: if (num("ack-us", optarg, 1, 1e7, &c->ack_us)) return -1;
			break;
		case O_HB_MS: if (num("heartbeat-ms", optarg, 1, 60000, &c->hb_ms)) return -1;
			break;
		case O_VIEW_WAIT: if (num("view-wait", optarg, 0.1, 3600, &c->view_wait_s))
				return -1;
			break;
		case O_AUTH_KEYS: c->auth_keys = optarg; break;
		case O_AUTH_KEY_ID: if (num("auth-key-id", optarg, 0, UINT32_MAX, &v)) return -1;
			c->auth_key_id = (uint32_t)v; break;
		case O_CREDIT_WAIT: if (num("credit-wait", optarg, 0, 3600, &c->credit_wait_s))
				return -1;
			break;
		case O_MODE:
			if (!strcmp(optarg, "native")) {
				c->mode = PG_NATIVE;
			} else if (!strcmp(optarg, "raw")) {
				c->mode = PG_RAW;
			} else {
				fprintf(stderr, "interlink-pktgen: --mode expects native or raw, got "
						"'%s'\n", optarg);
				return -1;
			}
			break;
		case O_RAW_DST: {
			char a[64];
			unsigned port;
			if (sscanf(optarg, "%63[0-9.]:%u", a, &port) != 2 || !port || port > 65535 ||
			    mcast("raw-dst", a, &c->raw_dst)) {
				fprintf(stderr, "interlink-pktgen: --raw-dst expects a multicast "
						"A.B.C.D:PORT, got '%s'\n", optarg);
				return -1;
			}
			c->raw_port = (uint16_t)port;
			break;
		}
		case O_RAW_GROUP: if (num("raw-group", optarg, 0, 65535, &v)) return -1;
			raw_group = (unsigned)v; break;
		case O_PCAP: c->pcap = optarg; break;
		case O_SPEED: if (num("speed", optarg, 0, 1e6, &c->speed)) return -1;
			break;
		case O_PCAP_LOOPS: if (num("pcap-loops", optarg, 1, 1e9, &v)) return -1;
			c->pcap_loops = (unsigned)v; break;
		case O_CHECK:
			if (!strcmp(optarg, "full")) {
				c->check = PG_CHECK_FULL;
			} else if (!strcmp(optarg, "count")) {
				c->check = PG_CHECK_COUNT;
			} else {
				fprintf(stderr, "interlink-pktgen: --check expects full or count, got "
						"'%s'\n", optarg);
				return -1;
			}
			break;
		case O_TX_DROP: c->tx_drop = true; break;
		case O_CAPTURE: c->capture = optarg; break;
		case O_CAPTURE_COUNT: if (num("capture-count", optarg, 1, 1e7, &v)) return -1;
			c->capture_count = (unsigned)v; break;
		case O_LINK_WAIT: if (num("link-wait", optarg, 0.1, 3600, &c->link_wait_s))
				return -1;
			break;
		case O_LINK_LOSS: if (num("link-loss", optarg, 0.1, 3600, &c->link_loss_s))
				return -1;
			break;
		case O_LISTEN: c->listen = true; break;
		case O_SERVE: c->serve = true; break;
		case O_RX_LCORE: c->rx_lcore = true; break;
		case O_CATCH_UP: if (num("catch-up-us", optarg, 1, 1e7, &v)) return -1;
			c->catch_up_s = v / 1e6; break;
		case 'h': usage(stdout); exit(0);
		case 'V': exit(il_print_version("interlink-pktgen"));
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
	if (c->pcap) {
		c->mode = PG_PCAP;
		c->check = PG_CHECK_COUNT; /* a capture's frames are not ours to order */
	}
	if (c->mode == PG_RAW) {
		/* The appliance sequences one raw filter as one group. */
		if (groups_set && c->groups != 1) {
			fprintf(stderr, "interlink-pktgen: --mode raw sends to one filter: "
					"--groups must be 1\n");
			return -1;
		}
		c->groups = 1;
		c->group_base = (uint16_t)raw_group;
		c->group_addr_base = c->raw_dst;
		c->window = 0; /* raw senders are identified by address, not by id */
		if (c->pack > 1 || c->pack_bytes) {
			fprintf(stderr, "interlink-pktgen: --mode raw carries one message per "
					"frame: no --pack\n");
			return -1;
		}
	}
	if (c->serve) {
		if (c->pcap || c->listen) {
			fprintf(stderr, "interlink-pktgen: --serve drives senders: no --pcap, "
					"--listen\n");
			return -1;
		}
		c->check = PG_CHECK_COUNT;
		c->quiet = true;
		c->count = 0;
		c->duration = 1;
	}
	if (c->listen) {
		if (c->duration <= 0 || c->pcap) {
			fprintf(stderr, "interlink-pktgen: --listen needs a --duration (and no "
					"--pcap)\n");
			return -1;
		}
		c->check = PG_CHECK_COUNT;
		c->count = 0;
	}
	if (c->check == PG_CHECK_COUNT)
		c->window = 0; /* count mode settles no windows */
	if (c->uto) {
		if (c->mode != PG_NATIVE || c->check != PG_CHECK_FULL || c->serve || c->listen) {
			fprintf(stderr, "interlink-pktgen: --uto emulates native members with the "
					"full check: no --mode raw, --pcap, --check count, --serve, "
					"--listen\n");
			return -1;
		}
		if (window_set && c->window) {
			fprintf(stderr, "interlink-pktgen: --uto: senders obey the appliance's "
					"CREDIT (interlink-control --window), not --window\n");
			return -1;
		}
		c->window = 0;
	}
	if (c->rx_lcore && c->check != PG_CHECK_COUNT) {
		/* The full check's receivers NAK on the tx queue and settle the
		 * senders' windows: they stay on the sending lcore. */
		fprintf(stderr, "interlink-pktgen: --rx-lcore goes with --check count\n");
		return -1;
	}
	if (c->mode != PG_PCAP && !c->count && !c->duration) {
		fprintf(stderr, "interlink-pktgen: --count 0 needs a --duration\n");
		return -1;
	}
	if (c->rate_pps > 0 && c->rate_bps > 0) {
		fprintf(stderr, "interlink-pktgen: --rate and --rate-bps exclude each other\n");
		return -1;
	}
	c->frame_sizes = frame_spec != NULL;
	if (pg_sizes_parse(&c->msg_sizes, frame_spec ? frame_spec : size_spec, c->seed, err,
			   sizeof(err))) {
		fprintf(stderr, "interlink-pktgen: --%s: %s\n", frame_spec ? "frame" : "size", err);
		return -1;
	}
	if (!frame_spec && c->msg_sizes.kind == PG_SIZE_IMIX) {
		fprintf(stderr, "interlink-pktgen: imix is a mix of frame sizes: use --frame imix\n");
		return -1;
	}
	if (frame_spec && c->msg_sizes.lo < 60 + PG_FCS - 4) {
		fprintf(stderr, "interlink-pktgen: --frame %s: frames are at least 64 bytes\n",
			frame_spec);
		return -1;
	}
	if (c->tx_queue != PG_TXQ_HASH && c->tx_queue >= c->queues) {
		fprintf(stderr, "interlink-pktgen: --tx-queue %u: the ports have %u queue%s "
			"(--queues)\n", c->tx_queue, c->queues, c->queues == 1 ? "" : "s");
		return -1;
	}
	unsigned big = pg_sizes_max(&c->msg_sizes);
	unsigned frame = c->frame_sizes ? big - PG_FCS
					: c->mode == PG_RAW ? 42 + big
					: 42 + IL_HDR_LEN + c->pack * (IL_MSG_HDR_LEN + big);
	if (c->pack_bytes)
		frame = 14 + c->pack_bytes;
	if (frame > 9014 && c->mode != PG_PCAP) {
		fprintf(stderr, "interlink-pktgen: frames of %u bytes: the limit is 9014\n", frame);
		return -1;
	}
	return optind;
}
