/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Stage `impair`: loss, delay (with jitter) and rate limiting on the data
 * path, standing in for netem, which this kernel lacks. Packets first meet
 * the loss model; survivors then wait in one bounded FIFO until they are
 * due (delay line) and the token bucket has room for them (shaping), so a
 * single ring of `queue` slots bounds the memory whatever is configured.
 */
#include <stdio.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_debug.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <interlink/config.h>
#include <interlink/impair.h>
#include <interlink/stage.h>

enum {
	CTR_LOST,       /* dropped by the loss model */
	CTR_QUEUE_FULL, /* dropped because the delay/rate queue was full */
	CTR_DELAYED,    /* accepted into the delay/rate queue */
	CTR_RELEASED,   /* left the queue towards the next stage */
	CTR_COUNT
};

static const char *const impair_counter_names[CTR_COUNT] = {
	[CTR_LOST] = "lost",
	[CTR_QUEUE_FULL] = "queue_full",
	[CTR_DELAYED] = "delayed",
	[CTR_RELEASED] = "released",
};

#define IMPAIR_DEF_QUEUE 4096u
#define IMPAIR_MAX_QUEUE (1u << 24)
/* 60 s is far beyond any WAN we emulate and keeps us * hz well in range. */
#define IMPAIR_MAX_US UINT64_C(60000000)
#define IMPAIR_MAX_RATE UINT64_C(1000000000000) /* 1 Tbit/s */
/* Default bucket depth: 100 us of traffic at the configured rate, but at
 * least two full-size frames, so a poll loop that runs every few tens of
 * microseconds still reaches the rate without sending long bursts. */
#define IMPAIR_RATE_WINDOW_US 100u
#define IMPAIR_MIN_BURST_BYTES (2u * 1518u)

struct impair_ctx {
	struct il_loss loss;
	struct il_delay line;
	struct il_tbucket tb;
	struct il_delay_slot *ring;
	bool lossy;  /* a loss model is configured */
	bool queued; /* delay, jitter or rate: packets go through the ring */
	bool shaped; /* rate limit on */
};

/* `type` is the pipeline's: it names this stage type in the same map. */
static const char *const impair_keys[] = {
	"type", "loss", "p", "burst_len", "ge_p_gb", "ge_p_bg", "ge_loss_good", "ge_loss_bad",
	"delay_us", "jitter_us", "rate_bps", "rate_burst", "queue", "seed", NULL,
};

static const char *const loss_names[] = {
	[IL_LOSS_NONE] = "none",
	[IL_LOSS_BERNOULLI] = "bernoulli",
	[IL_LOSS_GILBERT_ELLIOTT] = "gilbert-elliott",
	[IL_LOSS_BURST] = "burst",
	NULL,
};

static const char *keypath(const struct il_cfg *params, const char *key, char *buf, size_t len)
{
	const char *base = params ? il_cfg_path(params) : NULL;

	snprintf(buf, len, "%s%s%s", base && *base ? base : "", base && *base ? "." : "", key);
	return buf;
}

/*
 * Each loss model reads its own parameters only; a parameter given for
 * another model (say `p` with `loss: gilbert-elliott`, or with no `loss`
 * at all) is almost always a typo that would silently run the wrong
 * experiment, so it is an error. required[] must be present.
 */
static int check_model_keys(const struct il_cfg *params, int model, char *err, size_t errlen)
{
	static const char *const used[][5] = {
		[IL_LOSS_NONE] = { NULL },
		[IL_LOSS_BERNOULLI] = { "p", NULL },
		[IL_LOSS_GILBERT_ELLIOTT] = { "ge_p_gb", "ge_p_bg", "ge_loss_good", "ge_loss_bad",
					      NULL },
		[IL_LOSS_BURST] = { "p", "burst_len", NULL },
	};
	static const char *const required[][3] = {
		[IL_LOSS_NONE] = { NULL },
		[IL_LOSS_BERNOULLI] = { "p", NULL },
		[IL_LOSS_GILBERT_ELLIOTT] = { "ge_p_gb", "ge_p_bg", NULL },
		[IL_LOSS_BURST] = { "p", "burst_len", NULL },
	};
	static const char *const model_keys[] = {
		"p", "burst_len", "ge_p_gb", "ge_p_bg", "ge_loss_good", "ge_loss_bad", NULL,
	};
	char kp[256];

	for (int i = 0; model_keys[i]; i++) {
		bool ok = false;

		if (!il_cfg_get(params, model_keys[i]))
			continue;
		for (int j = 0; used[model][j]; j++)
			ok |= !strcmp(used[model][j], model_keys[i]);
		if (!ok) {
			snprintf(err, errlen,
				 "config: key '%s' is not used by loss '%s'; set 'loss' to a model "
				 "that takes it (bernoulli: p; burst: p, burst_len; "
				 "gilbert-elliott: ge_p_gb, ge_p_bg, ge_loss_good, ge_loss_bad)",
				 keypath(params, model_keys[i], kp, sizeof(kp)), loss_names[model]);
			return -1;
		}
	}
	for (int j = 0; required[model][j]; j++) {
		if (il_cfg_get(params, required[model][j]))
			continue;
		snprintf(err, errlen, "config: key '%s' is required with loss '%s'",
			 keypath(params, required[model][j], kp, sizeof(kp)), loss_names[model]);
		return -1;
	}
	return 0;
}

static int parse_loss(const struct il_cfg *params, struct il_loss_cfg *lc, char *err,
		      size_t errlen)
{
	uint64_t blen;
	int model;

	if (il_cfg_enum(params, "loss", loss_names, IL_LOSS_NONE, &model, err, errlen) ||
	    check_model_keys(params, model, err, errlen))
		return -1;
	lc->model = (enum il_loss_model)model;
	if (il_cfg_double(params, "p", 0.0, 0.0, 1.0, &lc->p, err, errlen) ||
	    il_cfg_u64(params, "burst_len", 1, 1, UINT32_MAX, &blen, err, errlen) ||
	    il_cfg_double(params, "ge_p_gb", 0.0, 0.0, 1.0, &lc->ge_p_gb, err, errlen) ||
	    il_cfg_double(params, "ge_p_bg", 1.0, 0.0, 1.0, &lc->ge_p_bg, err, errlen) ||
	    il_cfg_double(params, "ge_loss_good", 0.0, 0.0, 1.0, &lc->ge_loss_good, err,
			  errlen) ||
	    il_cfg_double(params, "ge_loss_bad", 1.0, 0.0, 1.0, &lc->ge_loss_bad, err, errlen))
		return -1;
	lc->burst_len = (uint32_t)blen;
	return 0;
}

static uint64_t us_to_tsc(uint64_t us, uint64_t hz)
{
	return (uint64_t)((unsigned __int128)us * hz / 1000000u);
}

static void impair_free(struct impair_ctx *c)
{
	if (c == NULL)
		return;
	if (c->ring != NULL) {
		struct rte_mbuf *m;

		/* Whatever is still held belongs to us: give it back. */
		while ((m = il_delay_pop(&c->line, UINT64_MAX)) != NULL)
			rte_pktmbuf_free(m);
		rte_free(c->ring);
	}
	rte_free(c);
}

static int impair_create(struct il_stage *st, const struct il_cfg *params, struct il_app *app,
			 char *err, size_t errlen)
{
	struct il_loss_cfg lc = { 0 };
	uint64_t delay_us, jitter_us, rate_bps, rate_burst, queue, seed, hz, now;
	struct impair_ctx *c;

	RTE_SET_USED(app);
	if (il_cfg_check_keys(params, impair_keys, err, errlen) ||
	    parse_loss(params, &lc, err, errlen) ||
	    il_cfg_u64(params, "delay_us", 0, 0, IMPAIR_MAX_US, &delay_us, err, errlen) ||
	    il_cfg_u64(params, "jitter_us", 0, 0, IMPAIR_MAX_US, &jitter_us, err, errlen) ||
	    il_cfg_u64(params, "rate_bps", 0, 0, IMPAIR_MAX_RATE, &rate_bps, err, errlen) ||
	    il_cfg_u64(params, "rate_burst", 0, 0, UINT32_MAX, &rate_burst, err, errlen) ||
	    il_cfg_u64(params, "queue", IMPAIR_DEF_QUEUE, 1, IMPAIR_MAX_QUEUE, &queue, err,
		       errlen) ||
	    il_cfg_u64(params, "seed", 1, 0, UINT64_MAX, &seed, err, errlen))
		return -1;
	lc.seed = seed;

	c = rte_zmalloc("il_impair", sizeof(*c), RTE_CACHE_LINE_SIZE);
	if (c == NULL) {
		snprintf(err, errlen, "impair: out of memory for stage state");
		return -1;
	}
	if (il_loss_init(&c->loss, &lc, err, errlen))
		goto fail;
	c->lossy = lc.model != IL_LOSS_NONE;
	c->queued = delay_us || jitter_us || rate_bps;
	c->shaped = rate_bps != 0;
	hz = rte_get_tsc_hz();
	now = rte_rdtsc();

	if (c->queued) {
		uint32_t cap = rte_align32pow2((uint32_t)queue);

		c->ring = rte_zmalloc("il_impair_ring", (size_t)cap * sizeof(*c->ring),
				      RTE_CACHE_LINE_SIZE);
		if (c->ring == NULL) {
			snprintf(err, errlen, "impair: out of memory for a queue of %u packets",
				 cap);
			goto fail;
		}
		/* A stream of its own for jitter, so that turning jitter on
		 * does not change which packets the loss model drops. */
		if (il_delay_init(&c->line, c->ring, cap, us_to_tsc(delay_us, hz),
				  us_to_tsc(jitter_us, hz), seed ^ 0x6a09e667f3bcc908ull, err,
				  errlen))
			goto fail;
	}
	if (c->shaped) {
		if (rate_burst == 0) {
			rate_burst = rate_bps / 8 * IMPAIR_RATE_WINDOW_US / 1000000u;
			if (rate_burst < IMPAIR_MIN_BURST_BYTES)
				rate_burst = IMPAIR_MIN_BURST_BYTES;
		}
		il_tbucket_init(&c->tb, (double)rate_bps / 8.0, (double)rate_burst, hz, now);
	}
	st->ctx = c;
	return 0;
fail:
	impair_free(c);
	return -1;
}

/* Move due packets (and, when shaping, only those the bucket admits) from
 * the head of the queue to pkts[out...]; FIFO, so the first one that must
 * wait holds everything behind it. */
static uint16_t impair_release(struct il_stage *st, struct impair_ctx *c,
			       struct rte_mbuf **pkts, uint16_t out, uint64_t now)
{
	uint16_t first = out;
	struct rte_mbuf *m;

	while (out < IL_BURST_CAP && (m = il_delay_peek(&c->line, now)) != NULL) {
		if (c->shaped && !il_tbucket_take(&c->tb, (double)rte_pktmbuf_pkt_len(m), now))
			break;
		il_delay_pop(&c->line, now);
		pkts[out++] = m;
	}
	st->ctr[CTR_RELEASED] += out - first;
	return out;
}

static uint16_t impair_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct impair_ctx *c = st->ctx;
	struct rte_mbuf *in[IL_BURST_CAP];
	uint16_t i, k = 0, out;
	uint64_t now;

	RTE_ASSERT(n <= IL_BURST_CAP);
	if (!c->queued) {
		if (!c->lossy)
			return n;
		for (i = 0; i < n; i++) {
			if (il_loss_drop(&c->loss))
				il_drop(st, CTR_LOST, pkts[i]);
			else
				pkts[k++] = pkts[i];
		}
		return k;
	}

	/* Idle poll with nothing held: skip the TSC read. */
	if (n == 0 && il_delay_count(&c->line) == 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (c->lossy && il_loss_drop(&c->loss))
			il_drop(st, CTR_LOST, pkts[i]);
		else
			in[k++] = pkts[i];
	}
	now = rte_rdtsc();
	/* Release first so the slots it frees can take this burst. */
	out = impair_release(st, c, pkts, 0, now);
	for (i = 0; i < k; i++) {
		if (il_delay_push(&c->line, in[i], now))
			st->ctr[CTR_DELAYED]++;
		else
			il_drop(st, CTR_QUEUE_FULL, in[i]);
	}
	/* With no delay (rate limit only) a packet may leave at once. */
	if (k && out < IL_BURST_CAP)
		out = impair_release(st, c, pkts, out, now);
	return out;
}

static void impair_destroy(struct il_stage *st)
{
	impair_free(st->ctx);
	st->ctx = NULL;
}

static void impair_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct impair_ctx *c = st->ctx;

	il_state_put(out, -1, "queued", c->queued ? il_delay_count(&c->line) : 0);
	il_state_put(out, -1, "queue_cap", c->queued ? c->line.cap : 0);
}

const struct il_stage_type il_stage_impair = {
	.name = "impair",
	.help = "loss (bernoulli, gilbert-elliott, fixed bursts), delay with jitter and "
		"rate shaping, in place of netem",
	.counter_names = impair_counter_names,
	.n_counters = CTR_COUNT,
	.create = impair_create,
	.process = impair_process,
	.poll = true,
	.destroy = impair_destroy,
	.state = impair_state,
};
