/* SPDX-License-Identifier: BSD-3-Clause
 * Scale across lcores (docs/scaling.md 1.6, issue 16 "Scale"): the
 * appliance's own poll loop (il_worker_main) with 1 and 2 shards, one group
 * per shard, and, beside them, the pipeline without shards on one lcore.
 *
 * No generator thread: each shard's queue of a net_ring port is primed
 * once with frames of its group, and the chain transmits on the same port,
 * whose tx queue k is its rx queue k (net_ring's loopback). So each frame
 * goes round rx -> classify -> sequencer -> tx -> rx ..., stamped again on
 * every round (sender_seq 0: not FIFO-checked), and the measured lcores do
 * all the work there is: nothing else of the benchmark runs while it
 * measures (the main lcore sleeps). Rounds alternate the configurations,
 * so the ratios come from runs side by side.
 *
 *   build/bench/scale/bench_scale [--seconds S] [--rounds R] [--frames K]
 *       [--size B] [--lec] [-- EAL options]   (default EAL: --lcores 0@0,1@0,2@1)
 *
 * --lec puts the lec stage after the sequencer (its defaults: one bin per
 * group at the peers' rate, each group's repairs once to its address, on a
 * net_null port), each group a view of 10 receivers (a VIEW frame that
 * goes round with the group's frames): appliance-side LEC per shard, each
 * shard's copy protecting its own group (docs/scaling.md).
 *
 * Two modes, run side by side in every round:
 *   pmd:   il_worker_main over the net_ring port (the appliance's loop as it
 *          runs). net_ring keeps each queue's packet counters in 24-byte
 *          structs side by side, so its queues 0 and 1 write one cache line:
 *          a cost of this PMD, not of the shards (a NIC's queues share none).
 *   chain: each shard's lcore takes bursts from a private rte_ring, runs its
 *          chain (il_chain_stages: classify, stray split, sequencer) and puts
 *          the survivors back: the shard path without any PMD.
 *
 * Reports per configuration and shard: Mpps, the chain's cycles per frame
 * (the stages' own TSC counters) and the lcore's cycles per frame (wall
 * TSC cycles over frames: PMD rx/tx, loop and time the OS took included).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/frame.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#define N_CONF 3
#define MAX_ROUNDS 64

struct conf {
	const char *label;
	unsigned shards;   /* 0: no shards key (today's pipeline) */
	struct il_app app;
	struct il_cfg *cfg;
};

static struct conf confs[N_CONF] = {
	{.label = "no shards, 1 lcore", .shards = 0},
	{.label = "1 shard", .shards = 1},
	{.label = "2 shards", .shards = 2},
};

struct sample {
	double mpps[2];        /* per shard (worker) */
	double chain_cpf[2];   /* stages' cycles per frame */
	double lcore_cpf[2];   /* wall cycles per frame */
};

static struct sample samples[2][N_CONF][MAX_ROUNDS];
static bool with_lec;
static const char *const mode_name[2] = {"pmd", "chain"};
static struct rte_ring *chain_ring[N_CONF][2];

/* Mode chain: worker w's chain 0 on its private ring, until quit. */
static int chain_main(void *arg)
{
	struct il_app *app = arg;
	struct il_worker *w = NULL;
	struct rte_ring *r = NULL;
	struct rte_mbuf *pkts[IL_BURST_CAP];

	for (unsigned i = 0; i < app->n_workers; i++)
		if (app->workers[i].lcore_id == rte_lcore_id())
			w = &app->workers[i];
	for (unsigned i = 0; i < N_CONF; i++)
		if (&confs[i].app == app)
			r = chain_ring[i][w - app->workers];
	while (!app->quit) {
		unsigned n = rte_ring_dequeue_burst(r, (void **)pkts, IL_BURST, NULL);
		n = il_chain_stages(&w->io, &w->chains[0], pkts, (uint16_t)n);
		unsigned k = rte_ring_enqueue_burst(r, (void **)pkts, n, NULL);
		if (k < n)
			rte_pktmbuf_free_bulk(pkts + k, n - k);
		w->loops++;
	}
	return 0;
}

static void config_text(const struct conf *c, unsigned idx, char *buf, size_t len)
{
	unsigned n = c->shards ? c->shards : 1;
	char sink[96] = "";

	if (with_lec) /* where the repairs go: dropped by net_null */
		snprintf(sink, sizeof(sink), ", sink: { device: net_null%u%s }", idx,
			 c->shards > 1 ? ", queues: 2" : "");
	size_t off = (size_t)snprintf(buf, len,
		"name: scale%u\n"
		"epoch: 9\n"
		"ports: { in: { device: net_ring%u%s }%s }\n", idx, idx,
		c->shards > 1 ? ", queues: 2" : "", sink);
	if (c->shards)
		off += (size_t)snprintf(buf + off, len - off,
			"shards: { lcores: [%s], assign: config }\n", c->shards == 1 ? "1" : "1, 2");
	off += (size_t)snprintf(buf + off, len - off, "groups:\n");
	for (unsigned g = 0; g < n; g++)
		off += (size_t)snprintf(buf + off, len - off,
			"  - { id: %u, address: 239.1.2.%u%s }\n", g + 1, g + 1,
			c->shards ? (g ? ", shard: 1" : ", shard: 0") : "");
	snprintf(buf + off, len - off,
		"stages:\n"
		"  classify: { type: classify }\n"
		"  seq: { type: sequencer, history: 16384 }\n"
		"%s"
		"pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify, seq%s], tx: in } ] } ]\n",
		with_lec ? "  lec: { type: lec, group_tx: sink }\n" : "", with_lec ? ", lec" : "");
}

/* A native DATA frame of group `group`, one message of `size` bytes, UDP
 * checksum filled (as outside generators do). */
static struct rte_mbuf *make_frame(struct il_app *app, uint16_t group, unsigned size)
{
	unsigned body = IL_MSG_HDR_LEN + size;
	uint8_t *f;
	struct rte_mbuf *m = il_frame_alloc(app->pool,
					    (uint16_t)(IL_UDP_HDRS_LEN + IL_HDR_LEN + body), &f);

	if (!m)
		return NULL;
	struct il_path p = {.src_ip = 0x0a000001u + group, .src_port = 5000,
			    .dst_port = 7400, .ttl = 8};
	il_path_mcast(&p, 0xef010200u + group);
	struct il_hdr_fields h = {.type = IL_T_DATA, .group_id = group, .msg_count = 1,
				  .sender_id = group};
	uint8_t *r = il_frame_put(f, &p, 0, &h, (uint16_t)body);
	r = il_rec_put(r, (uint16_t)size);
	memset(r, 0x42, size);
	il_udp_csum_set(f + IL_ETH_HLEN);
	return m;
}

/* The VIEW of group `group`: ten receivers (ids 10g+1..10g+10). */
static struct rte_mbuf *make_view(struct il_app *app, uint16_t group)
{
	unsigned body = il_view_len(10, 0);
	uint8_t *f;
	struct rte_mbuf *m = il_frame_alloc(app->pool,
					    (uint16_t)(IL_UDP_HDRS_LEN + IL_HDR_LEN + body), &f);

	if (!m)
		return NULL;
	struct il_path p = {.src_ip = 0x0a0000feu, .src_port = 7400, .dst_port = 7400, .ttl = 8};
	il_path_mcast(&p, 0xef010200u + group);
	struct il_hdr_fields h = {.type = IL_T_VIEW, .group_id = group, .flags = IL_F_STAMPED};
	uint8_t *b = il_view_put(il_frame_put(f, &p, 0, &h, (uint16_t)body), 1, 10, 0);
	for (uint32_t i = 1; i <= 10; i++)
		b = il_view_member_put(b, 10u * group + i, IL_ROLE_RECEIVER);
	return m;
}

static uint64_t stage_ctr(const struct il_stage *st, const char *name)
{
	for (unsigned c = 0; c < st->type->n_counters; c++)
		if (!strcmp(st->type->counter_names[c], name))
			return st->ctr[c];
	return 0;
}

struct snap {
	uint64_t frames, busy;
};

static void snapshot(const struct il_app *app, struct snap *s)
{
	for (unsigned w = 0; w < app->n_workers; w++) {
		const struct il_chain *ch = &app->workers[w].chains[0];
		s[w].frames = 0;
		s[w].busy = 0;
		for (unsigned k = 0; k < ch->n_stages; k++) {
			const struct il_stage *st = ch->stages[k];
			s[w].busy += __atomic_load_n(&st->tsc_busy, __ATOMIC_RELAXED);
			if (!strcmp(st->type->name, "sequencer"))
				s[w].frames = stage_ctr(st, "stamped_frames");
		}
	}
}

static int run_once(struct conf *c, int mode, double seconds, struct sample *out)
{
	struct il_app *app = &c->app;
	struct snap a[2], b[2];
	uint64_t hz = rte_get_tsc_hz();

	app->quit = false;
	for (unsigned w = 0; w < app->n_workers; w++)
		if (rte_eal_remote_launch(mode ? chain_main : il_worker_main, app,
					  app->workers[w].lcore_id)) {
			fprintf(stderr, "bench_scale: cannot launch lcore %u\n",
				app->workers[w].lcore_id);
			return -1;
		}
	usleep(200000); /* warm-up: caches, the history filling */
	snapshot(app, a);
	uint64_t t0 = rte_rdtsc();
	usleep((useconds_t)(seconds * 1e6));
	snapshot(app, b);
	uint64_t t1 = rte_rdtsc();
	app->quit = true;
	for (unsigned w = 0; w < app->n_workers; w++)
		rte_eal_wait_lcore(app->workers[w].lcore_id);
	double dt = (double)(t1 - t0) / (double)hz;
	memset(out, 0, sizeof(*out));
	for (unsigned w = 0; w < app->n_workers; w++) {
		double fr = (double)(b[w].frames - a[w].frames);
		out->mpps[w] = fr / dt / 1e6;
		out->chain_cpf[w] = fr > 0 ? (double)(b[w].busy - a[w].busy) / fr : 0;
		out->lcore_cpf[w] = fr > 0 ? (double)(t1 - t0) / fr : 0;
	}
	return 0;
}

static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");
	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

int main(int argc, char **argv)
{
	double seconds = 2.0;
	unsigned rounds = 5, frames = 512, size = 20;
	static const struct option opts[] = {
		{"seconds", 1, NULL, 's'}, {"rounds", 1, NULL, 'r'},
		{"frames", 1, NULL, 'f'}, {"size", 1, NULL, 'b'}, {"lec", 0, NULL, 'l'},
		{NULL, 0, NULL, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': seconds = atof(optarg); break;
		case 'r': rounds = (unsigned)atoi(optarg); break;
		case 'f': frames = (unsigned)atoi(optarg); break;
		case 'b': size = (unsigned)atoi(optarg); break;
		case 'l': with_lec = true; break;
		default:
			fprintf(stderr, "usage: bench_scale [--seconds S] [--rounds R] [--frames K] "
				"[--size B] [--lec] [-- EAL options]\n");
			return 2;
		}
	}
	if (rounds == 0 || rounds > MAX_ROUNDS || frames == 0 || frames > 1000 || seconds <= 0) {
		fprintf(stderr, "bench_scale: --rounds 1..%d, --frames 1..1000 (a net_ring queue "
			"holds 1023), --seconds > 0\n", MAX_ROUNDS);
		return 2;
	}
	char *eal[32];
	int ne = 0;
	char pfx[64];
	snprintf(pfx, sizeof(pfx), "--file-prefix=ilscale%d", (int)getpid());
	eal[ne++] = argv[0];
	if (optind < argc) {
		for (int i = optind; i < argc && ne < 24; i++)
			eal[ne++] = argv[i];
	} else {
		eal[ne++] = (char *)"--lcores";
		eal[ne++] = (char *)"0@0,1@0,2@1";
	}
	eal[ne++] = (char *)"--no-huge";
	eal[ne++] = (char *)"-m";
	eal[ne++] = (char *)(with_lec ? "3072" : "1024"); /* three lec stages' tables */
	eal[ne++] = (char *)"--no-pci";
	eal[ne++] = pfx;
	eal[ne++] = (char *)"--log-level";
	eal[ne++] = (char *)"lib.eal:error";
	eal[ne++] = (char *)"--vdev=net_ring0";
	eal[ne++] = (char *)"--vdev=net_ring1";
	eal[ne++] = (char *)"--vdev=net_ring2";
	eal[ne++] = (char *)"--vdev=net_null0";
	eal[ne++] = (char *)"--vdev=net_null1";
	eal[ne++] = (char *)"--vdev=net_null2";
	eal[ne] = NULL;
	if (rte_eal_init(ne, eal) < 0) {
		fprintf(stderr, "bench_scale: EAL init failed\n");
		return 1;
	}
	char err[512], text[2048], la0[128], la1[128];
	unsigned frame_len = IL_UDP_HDRS_LEN + IL_HDR_LEN + IL_MSG_HDR_LEN + size;
	for (unsigned i = 0; i < N_CONF; i++) {
		struct conf *c = &confs[i];
		config_text(c, i, text, sizeof(text));
		c->cfg = il_cfg_load_string(text, c->label, err, sizeof(err));
		if (!c->cfg || il_app_configure(&c->app, c->cfg, err, sizeof(err)) ||
		    il_app_start(&c->app, err, sizeof(err))) {
			fprintf(stderr, "bench_scale: %s: %s\n", c->label, err);
			return 1;
		}
		/* Prime each worker's queue with its group's frames. */
		for (unsigned w = 0; w < c->app.n_workers; w++) {
			struct rte_mbuf *m[1000];
			for (unsigned k = 0; k < frames; k++) {
				/* with lec, the group's view goes round with its frames */
				m[k] = with_lec && k == 0 ? make_view(&c->app, (uint16_t)(w + 1)) :
					make_frame(&c->app, (uint16_t)(w + 1), size);
				if (!m[k]) {
					fprintf(stderr, "bench_scale: pool empty\n");
					return 1;
				}
			}
			uint16_t sent = rte_eth_tx_burst(c->app.ports[0].port_id, (uint16_t)w, m,
							 (uint16_t)frames);
			if (sent != frames) {
				fprintf(stderr, "bench_scale: primed %u of %u frames\n", sent, frames);
				return 1;
			}
			char rn[RTE_RING_NAMESIZE];
			snprintf(rn, sizeof(rn), "scale_chain%u_%u", i, w);
			chain_ring[i][w] = rte_ring_create(rn, 1024, (int)rte_socket_id(),
							   RING_F_SP_ENQ | RING_F_SC_DEQ);
			for (unsigned k = 0; k < frames && chain_ring[i][w]; k++) {
				struct rte_mbuf *f = with_lec && k == 0 ?
					make_view(&c->app, (uint16_t)(w + 1)) :
					make_frame(&c->app, (uint16_t)(w + 1), size);
				if (!f || rte_ring_enqueue(chain_ring[i][w], f)) {
					fprintf(stderr, "bench_scale: cannot prime the chain ring\n");
					return 1;
				}
			}
			if (!chain_ring[i][w]) {
				fprintf(stderr, "bench_scale: cannot create ring %s\n", rn);
				return 1;
			}
		}
	}
	loadavg(la0, sizeof(la0));
	printf("bench_scale: %u rounds x %.1f s per configuration, %u frames of %u B looping "
	       "per queue, TSC %.2f GHz\nload average before: %s\n", rounds, seconds, frames,
	       frame_len, (double)rte_get_tsc_hz() / 1e9, la0);
	for (unsigned r = 0; r < rounds; r++)
		for (int mode = 0; mode < 2; mode++)
		for (unsigned i = 0; i < N_CONF; i++) {
			if (run_once(&confs[i], mode, seconds, &samples[mode][i][r]))
				return 1;
			const struct sample *s = &samples[mode][i][r];
			printf("round %u %-5s %-20s", r + 1, mode_name[mode], confs[i].label);
			for (unsigned w = 0; w < confs[i].app.n_workers; w++)
				printf("  lcore %u: %6.2f Mpps, chain %5.1f cyc/frame, lcore %6.1f "
				       "cyc/frame", confs[i].app.workers[w].lcore_id, s->mpps[w],
				       s->chain_cpf[w], s->lcore_cpf[w]);
			printf("\n");
			fflush(stdout);
		}
	loadavg(la1, sizeof(la1));
	printf("load average after: %s\n", la1);
	for (unsigned i = 0; with_lec && i < N_CONF; i++) /* LEC was at work */
		for (unsigned s = 0; s < confs[i].app.n_stages; s++) {
			const struct il_stage *st = confs[i].app.stages[s];
			double prot = (double)stage_ctr(st, "protected");

			if (strcmp(st->type->name, "lec"))
				continue;
			printf("%-20s %-6s protected %.0f frames, %.3f repairs and %.3f unprotected "
			       "per protected frame\n", confs[i].label, st->name, prot,
			       prot > 0 ? (double)stage_ctr(st, "repairs") / prot : 0,
			       prot > 0 ? (double)stage_ctr(st, "unprotected") / prot : 0);
		}
	double agg[N_CONF][MAX_ROUNDS], v[MAX_ROUNDS];
	for (int mode = 0; mode < 2; mode++) {
	printf("\nmode %s, medians over %u rounds:\n", mode_name[mode], rounds);
	for (unsigned i = 0; i < N_CONF; i++) {
		for (unsigned r = 0; r < rounds; r++)
			agg[i][r] = samples[mode][i][r].mpps[0] + samples[mode][i][r].mpps[1];
		memcpy(v, agg[i], sizeof(double) * rounds);
		printf("  %-20s aggregate %6.2f Mpps", confs[i].label, median(v, rounds));
		for (unsigned w = 0; w < confs[i].app.n_workers; w++) {
			for (unsigned r = 0; r < rounds; r++)
				v[r] = samples[mode][i][r].mpps[w];
			double mp = median(v, rounds);
			for (unsigned r = 0; r < rounds; r++)
				v[r] = samples[mode][i][r].chain_cpf[w];
			double cc = median(v, rounds);
			for (unsigned r = 0; r < rounds; r++)
				v[r] = samples[mode][i][r].lcore_cpf[w];
			printf(" | lcore %u %6.2f Mpps, chain %5.1f, lcore %6.1f cyc/frame",
			       confs[i].app.workers[w].lcore_id, mp, cc, median(v, rounds));
		}
		printf("\n");
	}
	/* Ratios of runs side by side (same round). */
	for (unsigned r = 0; r < rounds; r++)
		v[r] = agg[2][r] / agg[1][r];
	printf("  2 shards / 1 shard, aggregate (median of per-round ratios): %.2f "
	       "(per added lcore: %.2f)\n", median(v, rounds), median(v, rounds) - 1.0);
	for (unsigned r = 0; r < rounds; r++)
		v[r] = agg[1][r] / agg[0][r];
	printf("  1 shard / no shards (cost of the shard path on one lcore): %.2f\n",
	       median(v, rounds));
	}
	for (unsigned i = 0; i < N_CONF; i++) {
		il_app_stop(&confs[i].app);
		il_cfg_free(confs[i].cfg);
	}
	rte_eal_cleanup();
	return 0;
}
