/* SPDX-License-Identifier: BSD-3-Clause
 * il-lec-host: one libinterlink host of the LEC tests and measurements
 * (tests/integration/test_lec.py, bench/lec/lec_e2e.py; docs/lec.md).
 *
 * It joins up to 8 groups as a receiver (and a sender where asked), turns
 * LEC on as asked, loses what arrives on its RX socket by its own seeded
 * loss model (the receive-buffer overflows Ricochet measured, through
 * libinterlink's rx_filter), sends numbered, timestamped messages at a
 * rate, and checks what it delivers: every message of every sender once,
 * in its sender's order, and a hash of each group's delivered order so
 * that receivers can be compared. For every message it lost it knows when
 * and after how many received frames, so a recovered one gives the
 * recovery latency in milliseconds and in packets, by the way it came
 * back (LEC or NAK). The summary is JSON.
 *
 *   il-lec-host --tx IF --rx IF --id N [--port P] --group ID:MCAST[:send] ...
 *       [--lec off|peers|appliance|both] [--c C] [--r R] [--stagger S]
 *       [--nak-delay-us N] [--nak-retry-us N] [--peer ID=IPV4 ...]
 *       [--loss none|bernoulli:P|burst:P:LEN|ge:PGB:PBG:LG:LB] [--seed N]
 *       [--count N] [--rate MSGS_PER_S] [--size BYTES] [--expect ID:N ...]
 *       [--ready FILE] [--start FILE] [--timeout S] [--linger-ms MS] [--dump CSV]
 *       --json PATH
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <interlink/endpoint.h>
#include <interlink/impair.h>
#include <interlink/json.h>
#include <interlink/wire.h>

#define MAXG IL_EP_MAX_GROUPS
#define MAXS 64
#define MAGIC 0x4c454348u /* "LECH" */
#define MSG_HDR 32u

struct drop {
	uint64_t t_ns;  /* when we lost its frame first; 0: never lost */
	uint64_t frames; /* DATA frames received until then */
	bool held;       /* delivered already: losing it again costs nothing */
};

struct lat {
	double *v;
	size_t n, cap;
};

struct grp {
	uint16_t id;
	char mcast[32];
	bool send;
	uint64_t expect, delivered, dups, gaps, bad, sent;
	uint64_t order_hash;
	unsigned nsend;
	struct {
		uint32_t id;
		uint64_t last;
	} snd[MAXS];
	struct drop *drops;
	size_t ndrops;
	uint64_t next_ns;
};

static struct {
	struct grp g[MAXG];
	unsigned ng;
	struct il_loss loss;
	bool lossy, lose_repairs;
	uint64_t rx_frames, drop_frames, drop_msgs, drop_repairs;
	uint64_t rec_unaccounted, rec_as_data, via[3];
	struct lat lat_all, lat_rec_ms[3], lat_rec_pkts[3], lat_hol[3];
	uint32_t id;
	unsigned size;
	FILE *dump; /* --dump: one line per message recovered: via, ms, packets */
} H = { .lose_repairs = true };

/* Frames received, by time: a message's recovery latency in packets is
 * what arrived between its loss and the arrival of its rebuilt or
 * retransmitted frame, which may be delivered later (behind a gap). */
#define RXLOG (1u << 17)
static struct {
	uint64_t t[RXLOG];
	uint64_t n; /* entries written: entry k holds the time of frame k + 1 */
} rxlog;

static uint64_t frames_at(uint64_t t)
{
	uint64_t lo = rxlog.n > RXLOG ? rxlog.n - RXLOG : 0, hi = rxlog.n;

	/* the first entry later than t: frames up to it had arrived */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (rxlog.t[mid % RXLOG] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void lat_add(struct lat *l, double v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 1024;
		double *nv = realloc(l->v, cap * sizeof(*nv));

		if (nv == NULL)
			return;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void lat_json(struct il_json *j, const char *key, struct lat *l, int dec)
{
	il_json_obj(j, key);
	il_json_u64(j, "n", l->n);
	if (l->n) {
		qsort(l->v, l->n, sizeof(double), cmp_d);
		double sum = 0;

		for (size_t i = 0; i < l->n; i++)
			sum += l->v[i];
		il_json_fixed(j, "mean", sum / (double)l->n, dec);
		il_json_fixed(j, "p10", l->v[l->n / 10], dec);
		il_json_fixed(j, "p50", l->v[l->n / 2], dec);
		il_json_fixed(j, "p90", l->v[l->n * 9 / 10], dec);
		il_json_fixed(j, "p99", l->v[l->n * 99 / 100], dec);
		il_json_fixed(j, "max", l->v[l->n - 1], dec);
	}
	il_json_end(j);
}

static struct grp *grp_of(uint16_t id)
{
	for (unsigned i = 0; i < H.ng; i++)
		if (H.g[i].id == id)
			return &H.g[i];
	return NULL;
}

static struct drop *drop_at(struct grp *g, uint64_t seq, bool grow)
{
	if (seq >= g->ndrops) {
		if (!grow)
			return NULL;
		size_t n = g->ndrops ? g->ndrops : 4096;

		while (n <= seq)
			n *= 2;
		struct drop *nd = realloc(g->drops, n * sizeof(*nd));
		if (nd == NULL)
			return NULL;
		memset(nd + g->ndrops, 0, (n - g->ndrops) * sizeof(*nd));
		g->drops = nd;
		g->ndrops = n;
	}
	return &g->drops[seq];
}

/* libinterlink's rx_filter: every datagram the RX socket gets. */
static bool rx_filter(void *arg, const uint8_t *d, size_t len)
{
	(void)arg;
	if (len < IL_HDR_LEN || d[IL_OFF_VERSION] != IL_VERSION)
		return false;
	uint8_t t = d[IL_OFF_TYPE];
	bool data = t == IL_T_DATA && (d[IL_OFF_FLAGS] & IL_F_STAMPED);

	if (!data && !(t == IL_T_LEC_REPAIR && H.lose_repairs))
		return false;
	if (!H.lossy || !il_loss_drop(&H.loss)) {
		if (data) {
			H.rx_frames++;
			rxlog.t[rxlog.n++ % RXLOG] = now_ns();
		}
		return false;
	}
	if (!data) {
		H.drop_repairs++;
		return true;
	}
	struct grp *g = grp_of(il_get16(d + IL_OFF_GROUP_ID));
	uint64_t g0 = il_get64(d + IL_OFF_GLOBAL_SEQ), t_ns = now_ns();
	uint16_t cnt = il_get16(d + IL_OFF_MSG_COUNT);

	H.drop_frames++;
	for (uint16_t i = 0; g != NULL && i < cnt; i++) {
		struct drop *x = drop_at(g, g0 + i, true);

		if (x != NULL && x->t_ns == 0 && !x->held) {
			x->t_ns = t_ns;
			x->frames = H.rx_frames;
			H.drop_msgs++;
		}
	}
	return true;
}

static void on_po(void *user, const struct il_ep_msg *m)
{
	struct grp *g = user;
	const uint8_t *p = m->data;
	uint64_t t = now_ns();

	if (m->len < MSG_HDR || il_get32(p) != MAGIC) {
		g->bad++;
		return;
	}
	uint32_t sender = il_get32(p + 4);
	uint64_t seq = il_get64(p + 12), sent = il_get64(p + 20);
	unsigned s;

	for (s = 0; s < g->nsend && g->snd[s].id != sender; s++)
		;
	if (s == g->nsend) {
		if (g->nsend == MAXS) {
			g->bad++;
			return;
		}
		g->snd[g->nsend++].id = sender;
	}
	if (seq <= g->snd[s].last) {
		g->dups++;
		return;
	}
	if (seq != g->snd[s].last + 1)
		g->gaps += seq - g->snd[s].last - 1;
	g->snd[s].last = seq;
	g->delivered++;
	/* FNV-1a over (sender, seq): every receiver of the group must end
	 * with the same value (the same messages in the same order) */
	uint64_t h = g->order_hash ? g->order_hash : 0xcbf29ce484222325ull;
	const uint8_t *b[2] = { (const uint8_t *)&sender, (const uint8_t *)&seq };
	const size_t n[2] = { sizeof(sender), sizeof(seq) };
	for (unsigned k = 0; k < 2; k++)
		for (size_t i = 0; i < n[k]; i++)
			h = (h ^ b[k][i]) * 0x100000001b3ull;
	g->order_hash = h;

	if (t > sent)
		lat_add(&H.lat_all, (double)(t - sent) / 1e6);
	unsigned via = m->via < 3 ? m->via : 0;
	H.via[via]++;
	struct drop *x = drop_at(g, m->global_seq, true);
	if (x != NULL)
		x->held = true;
	if (x != NULL && x->t_ns != 0 && via == IL_EP_VIA_DATA) {
		H.rec_as_data++; /* a retransmission we did not know we missed */
	} else if (x != NULL && x->t_ns != 0) {
		/* recovered when its frame came back, maybe delivered later */
		uint64_t at = m->rx_ns > x->t_ns ? m->rx_ns : x->t_ns;
		uint64_t fr = frames_at(at);

		lat_add(&H.lat_rec_ms[via], (double)(at - x->t_ns) / 1e6);
		lat_add(&H.lat_rec_pkts[via], (double)(fr > x->frames ? fr - x->frames : 0));
		if (H.dump)
			fprintf(H.dump, "%s,%.4f,%llu,%u,%llu,%.3f\n",
				via == IL_EP_VIA_LEC ? "lec" : "nak", (double)(at - x->t_ns) / 1e6,
				(unsigned long long)(fr > x->frames ? fr - x->frames : 0), g->id,
				(unsigned long long)m->global_seq, (double)x->t_ns / 1e6);
		if (t > at)
			lat_add(&H.lat_hol[via], (double)(t - at) / 1e6);
	} else if (via != IL_EP_VIA_DATA) {
		H.rec_unaccounted++; /* lost on its way, not by our model */
	}
}

static int parse_loss(const char *spec, struct il_loss_cfg *lc)
{
	memset(lc, 0, sizeof(*lc));
	if (strcmp(spec, "none") == 0)
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

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr,
		"usage: il-lec-host --tx IF --rx IF --id N [--port P] --group ID:MCAST[:send] ...\n"
		"  [--lec off|peers|appliance|both] [--c C] [--r R] [--stagger S]\n"
		"  [--nak-delay-us N] [--nak-retry-us N] [--peer ID=IPV4 ...]\n"
		"  [--loss none|bernoulli:P|burst:P:LEN|ge:PGB:PBG:LG:LB] [--seed N] [--keep-repairs]\n"
		"  [--count N] [--rate MSGS_PER_S] [--size BYTES] [--expect ID:N ...]\n"
		"  [--ready FILE] [--start FILE] [--timeout S] [--linger-ms MS] [--dump CSV]\n"
		"  [--hb-ms MS] [--rx-window N]   (libinterlink's hb_ms, rx_window: many groups)\n"
		"  --json PATH\n");
	exit(2);
}

static uint64_t clock_cost_ns(void);

static void write_json(const char *path, struct il_ep *ep, bool done, double elapsed,
		       double cpu_s, const char *lec)
{
	struct il_ep_stats st;
	struct il_ep_lec ls;
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		perror(path);
		return;
	}
	il_ep_get_stats(ep, &st);
	il_ep_lec_stats(ep, &ls);
	struct il_json js, *j = &js;
	il_json_begin(j, f, 2);
	il_json_obj(j, NULL);
	il_json_u64(j, "id", H.id);
	il_json_str(j, "lec", lec);
	il_json_bool(j, "done", done);
	il_json_fixed(j, "elapsed_s", elapsed, 3);
	il_json_fixed(j, "cpu_s", cpu_s, 4);
	il_json_u64(j, "clock_ns", clock_cost_ns());
	il_json_arr(j, "groups");
	for (unsigned i = 0; i < H.ng; i++) {
		const struct grp *g = &H.g[i];

		il_json_obj(j, NULL);
		il_json_u64(j, "id", g->id);
		il_json_u64(j, "sent", g->sent);
		il_json_u64(j, "expect", g->expect);
		il_json_u64(j, "delivered", g->delivered);
		il_json_u64(j, "dups", g->dups);
		il_json_u64(j, "gaps", g->gaps);
		il_json_u64(j, "bad", g->bad);
		il_json_u64(j, "senders", g->nsend);
		il_json_strf(j, "order_hash", "%016llx", (unsigned long long)g->order_hash);
		il_json_end(j);
	}
	il_json_end(j);
	il_json_u64(j, "rx_frames", H.rx_frames);
	il_json_u64(j, "drop_frames", H.drop_frames);
	il_json_u64(j, "drop_msgs", H.drop_msgs);
	il_json_u64(j, "drop_repairs", H.drop_repairs);
	il_json_u64(j, "via_data", H.via[IL_EP_VIA_DATA]);
	il_json_u64(j, "via_nak", H.via[IL_EP_VIA_NAK]);
	il_json_u64(j, "via_lec", H.via[IL_EP_VIA_LEC]);
	il_json_u64(j, "recovered_unaccounted", H.rec_unaccounted);
	il_json_u64(j, "recovered_as_data", H.rec_as_data);
	lat_json(j, "latency_ms", &H.lat_all, 3);
	lat_json(j, "lec_ms", &H.lat_rec_ms[IL_EP_VIA_LEC], 3);
	lat_json(j, "lec_pkts", &H.lat_rec_pkts[IL_EP_VIA_LEC], 1);
	lat_json(j, "nak_ms", &H.lat_rec_ms[IL_EP_VIA_NAK], 3);
	lat_json(j, "nak_pkts", &H.lat_rec_pkts[IL_EP_VIA_NAK], 1);
	/* from recovery to delivery: waiting behind earlier gaps (PO order) */
	lat_json(j, "lec_wait_ms", &H.lat_hol[IL_EP_VIA_LEC], 3);
	lat_json(j, "nak_wait_ms", &H.lat_hol[IL_EP_VIA_NAK], 3);
	il_json_obj(j, "ep");
	il_json_u64(j, "data_rx", st.data_rx);
	il_json_u64(j, "data_dup", st.data_dup);
	il_json_u64(j, "rx_overflow", st.rx_overflow);
	il_json_u64(j, "rx_bad", st.rx_bad);
	il_json_u64(j, "msgs_po", st.msgs_po);
	il_json_u64(j, "msgs_tx", st.msgs_tx);
	il_json_u64(j, "data_tx", st.data_tx);
	il_json_u64(j, "nak_tx", st.nak_tx);
	il_json_u64(j, "unavail_msgs", st.unavail_msgs);
	il_json_u64(j, "rx_filtered", st.rx_filtered);
	il_json_u64(j, "nak_filled", st.nak_filled);
	il_json_u64(j, "nak_filled_msgs", st.nak_filled_msgs);
	il_json_u64(j, "lec_recovered", st.lec_recovered);
	il_json_u64(j, "lec_recovered_msgs", st.lec_recovered_msgs);
	il_json_u64(j, "lec_tx", st.lec_tx);
	il_json_u64(j, "lec_tx_fail", st.lec_tx_fail);
	il_json_u64(j, "lec_tx_noaddr", st.lec_tx_noaddr);
	il_json_u64(j, "lec_rx", st.lec_rx);
	il_json_u64(j, "lec_rx_bad", st.lec_rx_bad);
	il_json_u64(j, "lec_rebuilt_bad", st.lec_rebuilt_bad);
	il_json_u64(j, "lec_ns", st.lec_ns);
	il_json_u64(j, "lec_slow", st.lec_slow);
	il_json_u64(j, "tx_fail", st.tx_fail);
	il_json_end(j);
	il_json_obj(j, "lec_core");
	il_json_u64(j, "data_new", ls.data_new);
	il_json_u64(j, "data_dup", ls.data_dup);
	il_json_u64(j, "data_unprotected", ls.data_unprotected);
	il_json_u64(j, "bin_adds", ls.bin_adds);
	il_json_u64(j, "xor_ops", ls.xor_ops);
	il_json_u64(j, "copy_ops", ls.copy_ops);
	il_json_u64(j, "repairs_sent", ls.repairs_sent);
	il_json_u64(j, "repair_targets", ls.repair_targets);
	il_json_u64(j, "repairs_skipped", ls.repairs_skipped);
	il_json_u64(j, "repairs_in", ls.repairs_in);
	il_json_u64(j, "rep_recovered", ls.rep_recovered);
	il_json_u64(j, "rep_stored", ls.rep_stored);
	il_json_u64(j, "rep_useless", ls.rep_useless);
	il_json_u64(j, "rep_stale", ls.rep_stale);
	il_json_u64(j, "rep_foreign", ls.rep_foreign);
	il_json_u64(j, "rep_bad", ls.rep_bad);
	il_json_u64(j, "rep_inconsistent", ls.rep_inconsistent);
	il_json_u64(j, "recovered", ls.recovered);
	il_json_u64(j, "recovered_immediate", ls.recovered_immediate);
	il_json_u64(j, "recovered_cascade", ls.recovered_cascade);
	il_json_u64(j, "recovered_pair", ls.recovered_pair);
	il_json_u64(j, "recover_xor_ops", ls.recover_xor_ops);
	il_json_u64(j, "evict_msgs", ls.evict_msgs);
	il_json_u64(j, "evict_repairs", ls.evict_repairs);
	il_json_u64(j, "unrecoverable", ls.unrecoverable);
	il_json_u64(j, "msgs_hwm", ls.msgs_hwm);
	il_json_u64(j, "repairs_hwm", ls.repairs_hwm);
	il_json_u64(j, "applies", ls.applies);
	il_json_u64(j, "apply_fail", ls.apply_fail);
	il_json_u64(j, "regions", ls.regions);
	il_json_u64(j, "bins", ls.bins);
	il_json_end(j);
	il_json_end(j);
	if (il_json_finish(j))
		fprintf(stderr, "il-lec-host: cannot write %s\n", path);
	fclose(f);
}

/* What one reading of libinterlink's LEC clock costs (lec_ns is bounded by
 * two per LEC call; the monotonic clock, the vDSO): the least over a few
 * rounds. */
static uint64_t clock_cost_ns(void)
{
	uint64_t best = UINT64_MAX;
	struct timespec a, b;

	for (int k = 0; k < 5; k++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < 1000; i++)
			clock_gettime(CLOCK_MONOTONIC, &b);
		uint64_t d = ((uint64_t)(b.tv_sec - a.tv_sec) * 1000000000ull +
			      (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec) / 1001;
		best = d < best ? d : best;
	}
	return best;
}

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static bool all_delivered(struct il_ep *ep)
{
	for (unsigned i = 0; i < H.ng; i++) {
		const struct grp *g = &H.g[i];

		if (g->delivered < g->expect || (g->send && il_ep_pending(ep, g->id) > 0))
			return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	enum { O_TX = 256, O_RX, O_ID, O_PORT, O_GROUP, O_LEC, O_C, O_R, O_STAGGER, O_NAKD,
	       O_NAKR, O_PEER, O_LOSS, O_SEED, O_COUNT, O_RATE, O_SIZE, O_EXPECT, O_READY,
	       O_START, O_TIMEOUT, O_LINGER, O_JSON, O_KEEP, O_DUMP, O_HB, O_RXW };
	static const struct option opts[] = {
		{ "tx", 1, NULL, O_TX }, { "rx", 1, NULL, O_RX }, { "id", 1, NULL, O_ID },
		{ "port", 1, NULL, O_PORT }, { "group", 1, NULL, O_GROUP },
		{ "lec", 1, NULL, O_LEC }, { "c", 1, NULL, O_C }, { "r", 1, NULL, O_R },
		{ "stagger", 1, NULL, O_STAGGER }, { "nak-delay-us", 1, NULL, O_NAKD },
		{ "nak-retry-us", 1, NULL, O_NAKR }, { "peer", 1, NULL, O_PEER },
		{ "loss", 1, NULL, O_LOSS }, { "seed", 1, NULL, O_SEED },
		{ "count", 1, NULL, O_COUNT }, { "rate", 1, NULL, O_RATE },
		{ "size", 1, NULL, O_SIZE }, { "expect", 1, NULL, O_EXPECT },
		{ "ready", 1, NULL, O_READY }, { "start", 1, NULL, O_START },
		{ "timeout", 1, NULL, O_TIMEOUT }, { "linger-ms", 1, NULL, O_LINGER },
		{ "json", 1, NULL, O_JSON }, { "keep-repairs", 0, NULL, O_KEEP },
		{ "dump", 1, NULL, O_DUMP }, { "hb-ms", 1, NULL, O_HB },
		{ "rx-window", 1, NULL, O_RXW },
		{ NULL, 0, NULL, 0 },
	};
	struct il_ep_config cfg;
	const char *json = NULL, *ready = NULL, *start = NULL, *lec = "off";
	const char *peers[1024];
	unsigned npeers = 0;
	struct il_loss_cfg lc = { 0 };
	uint64_t seed = 1, count = 0;
	double rate = 1000, timeout = 60, c = 0;
	unsigned linger_ms = 1000;
	int o;

	il_ep_config_init(&cfg);
	H.size = 64;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_TX: cfg.tx_ifname = optarg; break;
		case O_RX: cfg.rx_ifname = optarg; break;
		case O_ID: cfg.member_id = (uint32_t)strtoul(optarg, NULL, 0); break;
		case O_PORT: cfg.port = (uint16_t)strtoul(optarg, NULL, 0); break;
		case O_GROUP: {
			struct grp *g = &H.g[H.ng];
			char mode[8] = "";
			unsigned id = 0;

			if (H.ng == MAXG ||
			    sscanf(optarg, "%u:%31[0-9.]:%7s", &id, g->mcast, mode) < 2)
				usage();
			g->id = (uint16_t)id;
			g->send = strcmp(mode, "send") == 0;
			H.ng++;
			break;
		}
		case O_LEC: lec = optarg; break;
		case O_C: c = atof(optarg); break;
		case O_R: cfg.lec_r = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_STAGGER: cfg.lec_stagger = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_NAKD: cfg.lec_nak_delay_us = cfg.nak_delay_us =
				     (unsigned)strtoul(optarg, NULL, 0); break;
		case O_NAKR: cfg.lec_nak_retry_us = cfg.nak_retry_us =
				     (unsigned)strtoul(optarg, NULL, 0); break;
		case O_PEER:
			if (npeers < 1024)
				peers[npeers++] = optarg;
			break;
		case O_LOSS:
			if (parse_loss(optarg, &lc))
				usage();
			break;
		case O_SEED: seed = strtoull(optarg, NULL, 0); break;
		case O_COUNT: count = strtoull(optarg, NULL, 0); break;
		case O_RATE: rate = atof(optarg); break;
		case O_SIZE: H.size = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_EXPECT: {
			unsigned id;
			unsigned long long n;

			if (sscanf(optarg, "%u:%llu", &id, &n) != 2 || grp_of((uint16_t)id) == NULL)
				usage();
			grp_of((uint16_t)id)->expect = n;
			break;
		}
		case O_READY: ready = optarg; break;
		case O_START: start = optarg; break;
		case O_TIMEOUT: timeout = atof(optarg); break;
		case O_LINGER: linger_ms = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_JSON: json = optarg; break;
		case O_KEEP: H.lose_repairs = false; break;
		case O_HB: cfg.hb_ms = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_RXW: cfg.rx_window = (uint32_t)strtoul(optarg, NULL, 0); break;
		case O_DUMP:
			H.dump = fopen(optarg, "w");
			if (H.dump == NULL) {
				perror(optarg);
				return 2;
			}
			break;
		default: usage();
		}
	}
	unsigned mode = !strcmp(lec, "peers") ? IL_EP_LEC_PEERS
			: !strcmp(lec, "appliance") ? IL_EP_LEC_APPLIANCE
			: !strcmp(lec, "both") ? IL_EP_LEC_BOTH : IL_EP_LEC_OFF;
	if (!cfg.tx_ifname || !cfg.rx_ifname || !json || H.ng == 0 || H.size < MSG_HDR ||
	    H.size > 1400 || rate <= 0 || (mode == IL_EP_LEC_OFF && strcmp(lec, "off")))
		usage();
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	H.lossy = lc.model != IL_LOSS_NONE;
	if (H.lossy) {
		char err[256];

		lc.seed = seed;
		if (il_loss_init(&H.loss, &lc, err, sizeof(err))) {
			fprintf(stderr, "il-lec-host: --loss: %s\n", err);
			return 2;
		}
	}
	cfg.rx_filter = rx_filter;
	cfg.lec_cpu_stats = true;
	char err[256];
	struct il_ep *ep = il_ep_open(&cfg, err, sizeof(err));
	if (ep == NULL) {
		fprintf(stderr, "il-lec-host: %s\n", err);
		return 1;
	}
	H.id = il_ep_member_id(ep);
	for (unsigned i = 0; i < npeers; i++) {
		char ip[32];
		unsigned long id;

		if (sscanf(peers[i], "%lu=%31s", &id, ip) != 2 ||
		    il_ep_lec_peer(ep, (uint32_t)id, ip) != 0) {
			fprintf(stderr, "il-lec-host: --peer %s: expected ID=IPV4\n", peers[i]);
			return 2;
		}
	}
	for (unsigned i = 0; i < H.ng; i++) {
		struct grp *g = &H.g[i];
		const struct il_ep_callbacks cb = { .po = on_po };
		int rc = il_ep_join(ep, g->id, g->mcast,
				    IL_EP_RECEIVER | (g->send ? IL_EP_SENDER : 0), &cb, g);

		if (rc == 0)
			rc = il_ep_lec(ep, g->id, mode, c);
		if (rc != 0) {
			fprintf(stderr, "il-lec-host: group %u: %s\n", g->id, strerror(-rc));
			return 1;
		}
	}
	uint64_t t0 = now_ns();
	for (bool all = false; !all && !stop; ) {
		il_ep_poll(ep, 1000);
		all = true;
		for (unsigned i = 0; i < H.ng; i++)
			all = all && il_ep_is_member(ep, H.g[i].id);
		if (now_ns() - t0 > (uint64_t)(timeout * 1e9)) {
			fprintf(stderr, "il-lec-host %u: no VIEW within %.0f s\n", H.id, timeout);
			return 1;
		}
	}
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (f)
			fclose(f);
	}
	while (start && access(start, F_OK) != 0 && !stop)
		il_ep_poll(ep, 2000);

	/* Send and receive until every message is delivered (or the time
	 * is up), then linger: peers may still want our repairs. */
	uint64_t begin = now_ns(), gap_ns = (uint64_t)(1e9 / rate);
	double cpu0 = cpu_now();
	uint8_t msg[1400];
	bool done = false;

	memset(msg, 0xa5, sizeof(msg));
	for (unsigned i = 0; i < H.ng; i++)
		H.g[i].next_ns = begin + (uint64_t)i * gap_ns / H.ng;
	while (!stop) {
		uint64_t t = now_ns();

		for (unsigned i = 0; i < H.ng; i++) {
			struct grp *g = &H.g[i];

			while (g->send && g->sent < count && t >= g->next_ns) {
				il_put32(msg, MAGIC);
				il_put32(msg + 4, H.id);
				il_put16(msg + 8, g->id);
				il_put64(msg + 12, g->sent + 1);
				il_put64(msg + 20, now_ns());
				if (il_ep_send(ep, g->id, msg, H.size) != 0)
					break; /* -EAGAIN: again at the next step */
				g->sent++;
				g->next_ns += gap_ns;
			}
		}
		il_ep_poll(ep, 500);
		if (all_delivered(ep) && !done) {
			done = true;
			break;
		}
		if (t - begin > (uint64_t)(timeout * 1e9))
			break;
	}
	double elapsed = (double)(now_ns() - begin) / 1e9, cpu = cpu_now() - cpu0;
	write_json(json, ep, done, elapsed, cpu, lec);
	if (H.dump)
		fclose(H.dump);
	H.dump = NULL;
	uint64_t until = now_ns() + (uint64_t)linger_ms * 1000000u;
	while (!stop && now_ns() < until)
		il_ep_poll(ep, 1000);
	il_ep_close(ep);
	return done ? 0 : 3;
}
