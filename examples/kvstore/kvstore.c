/* SPDX-License-Identifier: BSD-3-Clause
 * il-kvstore: a replicated key-value store on libinterlink (docs/libinterlink.md).
 *
 *   il-kvstore writer  --tx IF --rx IF --id N --count C [--keys K] [--seed S]
 *                      [--rate PUTS_PER_S [--bursts N]] [--status FILE]
 *   il-kvstore replica --tx IF --rx IF --id N --listen IP:PORT [--peer IP:PORT]...
 *                      [--recover] [--keys K] [--status FILE] [--log FILE]
 *   either with [--auth-keys FILE [--auth-key-id ID]]: authenticated control traffic
 *
 * Writers send PUT(key, value) messages to the group. Replicas apply them
 * in uniform total order (the UTO callback): a PUT is applied only once
 * every live replica holds it, so a replica that crashes never applied
 * anything the others might not have, and all apply the same sequence.
 *
 * State transfer (a replica restarted after a crash, or excluded): it
 * joins, and its VIEW says where its stream starts (global sequence S,
 * Fast-Join). It buffers what it U-delivers from S on and asks a peer
 * replica, over TCP, for a snapshot "at S or later". The peer answers
 * between two of its own deliveries once its position P (every PUT below
 * global sequence P applied) is at least S: the map plus P. The joiner
 * loads it, drops its buffered PUTs below P, applies the rest, and is
 * then a replica like the others. Because the joiner is counted in the
 * stability watermark from S, everything from S on stays in the
 * appliance's history (or the joiner's buffer) until it has it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/endpoint.h>
#include <interlink/json.h>
#include <interlink/version.h>

#include "kv.h"

static volatile bool stop;

static void on_signal(int s)
{
	(void)s;
	stop = true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: il-kvstore writer|replica --tx IF --rx IF --id N [--group G] [--mcast ADDR]\n"
		"                  [--auth-keys FILE [--auth-key-id ID]]\n"
		"       writer:  --count C [--keys K] [--seed S] [--rate PUTS_PER_S [--bursts N]]\n"
		"                [--status FILE]\n"
		"       replica: --listen IP:PORT [--peer IP:PORT]... [--recover] [--keys K]\n"
		"                [--status FILE] [--log FILE]\n"
		"       il-kvstore --version\n");
	exit(2);
}

struct opts kv_opts = { .group = 1, .mcast = "239.1.1.1", .keys = 10000, .seed = 1,
			.bursts = 10 };

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "tx", 1, 0, 't' },	 { "rx", 1, 0, 'r' },	  { "id", 1, 0, 'i' },
		{ "group", 1, 0, 'g' },	 { "mcast", 1, 0, 'm' },  { "count", 1, 0, 'c' },
		{ "keys", 1, 0, 'k' },	 { "seed", 1, 0, 's' },	  { "status", 1, 0, 'S' },
		{ "listen", 1, 0, 'l' }, { "peer", 1, 0, 'p' },	  { "recover", 0, 0, 'R' },
		{ "rate", 1, 0, 'q' },	 { "log", 1, 0, 'L' },	  { "auth-keys", 1, 0, 'A' },
		{ "auth-key-id", 1, 0, 'I' }, { "bursts", 1, 0, 'b' },
		{ 0, 0, 0, 0 },
	};
	struct opts *o = &kv_opts;
	int ch;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 't': o->tx = optarg; break;
		case 'r': o->rx = optarg; break;
		case 'i': o->id = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'g': o->group = (uint16_t)strtoul(optarg, NULL, 0); break;
		case 'm': o->mcast = optarg; break;
		case 'c': o->count = strtoull(optarg, NULL, 0); break;
		case 'k': o->keys = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 's': o->seed = strtoull(optarg, NULL, 0); break;
		case 'S': o->status = optarg; break;
		case 'L': o->log = optarg; break;
		case 'A': o->auth_keys = optarg; break;
		case 'I': o->auth_key_id = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'l':
			if (parse_addr(optarg, &o->listen))
				usage();
			o->has_listen = true;
			break;
		case 'p':
			if (o->n_peers == KV_MAX_PEERS || parse_addr(optarg, &o->peers[o->n_peers]))
				usage();
			o->n_peers++;
			break;
		case 'R': o->recover = true; break;
		case 'b':
			o->bursts = strtoull(optarg, NULL, 0);
			if (o->bursts < 1 || o->bursts > 1000) {
				fprintf(stderr, "il-kvstore: --bursts wants 1 to 1000 a second, not "
					"'%s'\n", optarg);
				exit(2);
			}
			break;
		case 'q': {
			char *end;

			o->rate = strtoull(optarg, &end, 0);
			if (*optarg == '\0' || *end != '\0') {
				fprintf(stderr, "il-kvstore: --rate wants PUTs per second, not '%s'\n",
					optarg);
				exit(2);
			}
			break;
		}
		default: usage();
		}
	}
	if (o->tx == NULL || o->rx == NULL || o->id == 0 || o->keys == 0)
		usage();
	if (o->seed > UINT32_MAX || o->count > UINT32_MAX) {
		/* A PUT's value is the seed (high half) and its number (low half). */
		fprintf(stderr, "il-kvstore: --seed and --count must be below 2^32, got %lu and %lu\n",
			o->seed, o->count);
		exit(2);
	}
}

static struct il_ep *open_ep(void)
{
	struct il_ep_config cfg;
	char err[256];

	il_ep_config_init(&cfg);
	cfg.tx_ifname = kv_opts.tx;
	cfg.rx_ifname = kv_opts.rx;
	cfg.member_id = kv_opts.id;
	struct il_ep *ep = il_ep_open(&cfg, err, sizeof(err));
	if (ep == NULL) {
		fprintf(stderr, "il-kvstore: %s\n", err);
		exit(1);
	}
	/* Before the JOIN: every control message of ours goes signed. */
	if (kv_opts.auth_keys != NULL &&
	    il_ep_set_auth(ep, kv_opts.auth_keys, kv_opts.auth_key_id, err, sizeof(err)) != 0) {
		fprintf(stderr, "il-kvstore: --auth-keys: %s\n", err);
		exit(1);
	}
	return ep;
}

void kv_auth_status(struct il_json *j, const struct il_ep *ep)
{
	struct il_ep_auth_stats as;

	il_ep_get_auth_stats(ep, &as);
	il_json_u64(j, "auth_signed_tx", as.signed_tx);
	il_json_u64(j, "auth_verified_rx", as.verified_rx);
	il_json_u64(j, "auth_bad_mac", as.bad_mac);
	il_json_u64(j, "auth_replay", as.replay);
}

/* ---- writer ------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: reproducible PUTs from --seed */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* What the writer has done so far: PUTs sent, and of them the ones not yet
 * known stable (held by every live replica). Rewritten while it runs, so
 * that whoever kills it knows which PUTs it had been told were stable. */
static void writer_status(struct il_ep *ep, uint64_t sent, bool final)
{
	const struct opts *o = &kv_opts;
	struct il_ep_stats st;
	struct il_json j;
	char tmp[512];
	int failed;
	FILE *f;

	if (o->status == NULL)
		return;
	il_ep_get_stats(ep, &st);
	snprintf(tmp, sizeof(tmp), "%s.tmp", o->status);
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	il_json_begin(&j, f, 0);
	il_json_obj(&j, NULL);
	il_json_u64(&j, "id", o->id);
	il_json_u64(&j, "sent", sent);
	il_json_u64(&j, "pending", il_ep_pending(ep, o->group));
	il_json_u64(&j, "frames", st.data_tx);
	il_json_u64(&j, "packed", st.msgs_packed);
	il_json_u64(&j, "deferred", st.msgs_deferred);
	il_json_bool(&j, "final", final);
	kv_auth_status(&j, ep);
	il_json_end(&j);
	failed = il_json_finish(&j);
	/* A reader sees the whole previous status or the whole new one. */
	if (fclose(f) == 0 && !failed)
		rename(tmp, o->status);
}

static int writer(void)
{
	const struct opts *o = &kv_opts;
	struct il_ep *ep = open_ep();
	uint64_t rng = o->seed * 1000003u + o->id, sent = 0, t0 = now_ms(), shown = 0;
	uint64_t burst = o->rate >= o->bursts ? o->rate / o->bursts : 1;
	int rc = il_ep_join(ep, o->group, o->mcast, IL_EP_SENDER, NULL, NULL);

	if (rc) {
		fprintf(stderr, "il-kvstore: join: %s\n", strerror(-rc));
		return 1;
	}
	while (!stop && sent < o->count) {
		uint8_t put[KV_PUT_LEN];

		if (now_ms() - shown >= 200) {
			writer_status(ep, sent, false);
			shown = now_ms();
		}
		if (o->rate && sent % burst == 0) {
			/* --bursts a second (ten by default): burst number
			 * sent/burst is due sent/rate seconds after t0. */
			uint64_t due = t0 + sent * 1000u / o->rate, now = now_ms();

			if (now < due) {
				il_ep_poll(ep, (unsigned)(due - now > 100 ? 100000 : (due - now) * 1000));
				continue;
			}
		}
		/* A random key; the value names the PUT: this run's seed, then
		 * its number from 1 (so an applied PUT can be traced back). */
		uint64_t r = rng_next(&rng);

		kv_put_encode(put, (uint32_t)(r % o->keys), (o->seed << 32) | (sent + 1));
		rc = il_ep_send(ep, o->group, put, sizeof(put));
		if (rc == -EAGAIN) {
			/* The PUT is not sent: draw it again, the same one. */
			rng -= 0x9e3779b97f4a7c15ull;
			il_ep_poll(ep, 1000);
			continue;
		}
		if (rc) {
			fprintf(stderr, "il-kvstore: send: %s\n", strerror(-rc));
			return 1;
		}
		if (++sent % 256 == 0)
			il_ep_poll(ep, 0);
	}
	/* Done when every PUT is stable: held by every live replica. */
	uint64_t deadline = now_ms() + 120000;
	while (!stop && il_ep_pending(ep, o->group) > 0 && now_ms() < deadline) {
		il_ep_poll(ep, 2000);
		if (now_ms() - shown >= 200) {
			writer_status(ep, sent, false);
			shown = now_ms();
		}
	}
	uint64_t pending = il_ep_pending(ep, o->group);
	struct il_ep_stats st;

	il_ep_get_stats(ep, &st);
	printf("writer %u: sent %lu pending %lu in %.2f s; frames %lu, packed %lu, deferred %lu, "
	       "credits %lu, sync sends %lu, failed sends %lu, re-sent %lu (epochs %lu)\n", o->id,
	       sent, pending, (double)(now_ms() - t0) / 1e3, st.data_tx, st.msgs_packed,
	       st.msgs_deferred, st.credit_rx, st.tx_sync, st.tx_fail, st.resent, st.epochs);
	writer_status(ep, sent, true);
	il_ep_close(ep);
	return pending == 0 && sent == o->count ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };

	if (argc < 2)
		usage();
	if (strcmp(argv[1], "--version") == 0)
		return il_print_version("il-kvstore");
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	parse(argc - 1, argv + 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(argv[1], "writer") == 0)
		return writer();
	if (strcmp(argv[1], "replica") == 0) {
		if (!kv_opts.has_listen)
			usage();
		return kv_replica(open_ep(), &stop);
	}
	usage();
	return 2;
}
