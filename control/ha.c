/* SPDX-License-Identifier: BSD-3-Clause
 * One control process of an active/standby pair (ha.h, docs/ha.md).
 *
 * Roles: STANDBY, ACTIVE_CUT (owns a new epoch, waits for the receivers'
 * reports to fix the cut of the previous one), ACTIVE_SERVING, QUIESCING
 * (a planned hand-over). Every change of the pair's shared state is one
 * etcd transaction comparing the mod revision of P/epoch (T1 cold start,
 * T2 takeover, T3/T4 views and the cut, T5 hand-over): a writer whose
 * knowledge is stale commits nothing, and learns it is fenced.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/wire.h>

#include "ha.h"
#include "ha_coord.h"
#include "ha_pair.h"
#include "ha_record.h"

enum role { R_STANDBY = HB_STANDBY, R_CUT = HB_ACTIVE_CUT, R_SERVING = HB_ACTIVE_SERVING,
	    R_QUIESCING = HB_QUIESCING };

enum tag { TAG_READ = 1, TAG_STALL, TAG_T1, TAG_T2, TAG_COMMIT, TAG_T5, TAG_T6, TAG_MISC };

#define STAGE_MAX 8192   /* down messages waiting for a commit */
#define MAX_LAST 8
/* The data plane reports every 10 ms: a report more than this after the
 * one before it, or this old, comes from a data plane that was away. */
#define ALIVE_REGULAR_NS 30000000ull

/* A group of the epoch being cut: its last committed view and the
 * receivers' reports. */
struct cut_grp {
	struct ha_view v;
	bool *reported;
	uint64_t *cum;
	bool shadow;
	struct il_cm_shadow sh;
	uint64_t final_ns; /* the final watermark last sent again (a late report) */
};

struct takeover {
	uint32_t epoch;
	char why[32];
	uint64_t decided_ns, owned_ns, cut_ns; /* T2 submitted, committed, cut committed */
};

struct ha {
	const struct ctl_opts *o;
	struct il_chan *ch;
	struct il_mship *ms;
	struct ha_coord *hc;
	struct il_coord_cfg ccfg;
	struct il_coord_watch *w;
	char node[HA_NODE_LEN + 1];
	char prefix[128], k_epoch[160], k_leader[160], k_node[160], k_view[160];
	struct sockaddr_in peer_sa;
	int hb_fd;
	uint64_t hb_ns, detect_ns, auth_ns, report_ns, dp_dead_ns, cold_ns, q_ns;

	/* What etcd says (the first read, then the watch). */
	bool have_read;
	uint64_t read_id;
	struct ha_record rec;
	struct ha_view **views; /* by group id: the last committed view */

	/* The role. */
	enum role role;
	uint32_t epoch, prev;
	uint64_t role_ns, role_sent_ns;
	uint64_t resign_until;
	uint64_t txn_id;          /* the state transaction in flight (one at a time) */
	unsigned txn_tag;
	struct hc_req *txn_copy;  /* a commit to resubmit when etcd did not answer */
	uint64_t retry_at;
	struct ha_record txn_rec; /* the P/epoch it writes */
	bool txn_cut;             /* it carries the cut */
	bool txn_views;           /* a hand-over's T2 carries the first views too */
	bool views_precommitted;  /* ... so they go down without a commit of their own */
	bool node_due;            /* P/node to write once the cut is committed */
	uint64_t stall_id;
	bool stalled;
	uint64_t stall_ns; /* when the stall was noticed */

	/* Down messages that wait for their commit (views, final watermarks). */
	struct il_cmsg *staged;
	unsigned n_staged;
	bool staged_ok;           /* committed: send them */

	/* The cut of prev (ACTIVE_CUT). */
	struct cut_grp *cg;
	unsigned n_cg;
	uint64_t cut_start, first_report, last_report;
	bool cut_done, cut_commit;
	struct ha_cut cut;

	/* A hand-over (QUIESCING). */
	uint64_t q_start;
	struct ha_cut q_next;
	char q_to[HA_NODE_LEN + 1];

	/* The data plane. */
	struct il_cm_alive alive;
	uint64_t alive_ns, dp_inc;
	uint64_t alive_gap_ns; /* between its last two reports, by its own clock */
	uint64_t tx_moved_ns, last_tx_out;

	/* The peer's heartbeat. */
	struct hb_msg peer;
	uint64_t peer_ns, rtt_ns, hb_counter, hb_sent_ns;
	bool peer_unseen;

	uint64_t started_ns, last_tick_ns, released_ns;
	uint64_t settle_until; /* after a stall of our own: inputs may still be queued */
	struct {
		uint64_t takeovers, handovers, fenced, superseded, resigns, t2_lost, commits,
			commit_retries, reports, stalls, link_unjudged, hb_rx, hb_bad, watch_events, role_msgs,
			finals_again;
	} st;
	struct takeover last[MAX_LAST];
	unsigned n_last;
	struct takeover cur;
	char why[64];

	/* Fault injection for tests (IL_HA_FAULT_TAKE_RESULT_MS): T1 and T2
	 * results, and every result behind them, are held this long before
	 * they are acted on, so the watch shows our own new record first. */
	uint64_t fault_hold_ns;
	struct held_res {
		struct hc_res *r;
		uint64_t until;
		struct held_res *next;
	} *held, **held_tail;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void logm(const struct ha *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logm(const struct ha *h, const char *fmt, ...)
{
	va_list ap;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "interlink-control: ha %s %ld.%03ld: ", h->node, (long)ts.tv_sec,
		ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t nonce(void)
{
	uint64_t n = 0;

	if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != sizeof(n))
		n = mono_ns() ^ ((uint64_t)getpid() << 32);
	return n;
}

static bool active(const struct ha *h)
{
	return h->role != R_STANDBY;
}

bool ha_serving(const struct ha *h)
{
	return h->role == R_SERVING || h->role == R_QUIESCING || (h->role == R_CUT && h->cut_done);
}

/* ---- to the data plane ------------------------------------------------- */

static bool down(struct ha *h, struct il_cmsg *m)
{
	return il_chan_send_burst(h->ch, m, 1) == 1;
}

static void send_role(struct ha *h, uint64_t now)
{
	struct il_cmsg m = { .type = IL_CM_ROLE, .len = sizeof(m.u.role) };

	m.u.role = (struct il_cm_role){ .role = active(h) ? IL_HA_ACTIVE : IL_HA_STANDBY,
					.epoch = h->epoch, .prev_epoch = h->prev,
					.authority_until_ns = active(h) && !h->stalled
								      ? now + h->auth_ns : 0 };
	if (down(h, &m)) {
		h->role_sent_ns = now;
		h->st.role_msgs++;
	}
}

static void send_authority(struct ha *h, uint64_t now)
{
	struct il_cmsg m = { .type = IL_CM_AUTHORITY, .len = sizeof(m.u.auth) };

	m.u.auth = (struct il_cm_authority){ .epoch = h->epoch, .until_ns = now + h->auth_ns };
	down(h, &m);
}

/* ---- etcd ------------------------------------------------------------- */

static char *dupn(const char *s)
{
	char *d = strdup(s);

	if (d == NULL) {
		perror("interlink-control: ha");
		exit(1);
	}
	return d;
}

static void op_put(struct hc_req *r, const char *key, char *val, bool lease)
{
	struct hc_op *o = &r->then[r->n_then++];

	*o = (struct hc_op){ .type = IL_COORD_OP_PUT, .key = dupn(key), .value = val,
			     .len = strlen(val), .my_lease = lease };
}

/* A transaction that rewrites P/epoch to nr if P/epoch is still at the
 * revision we know (create: if it does not exist), else reads P/ again. */
static struct hc_req *epoch_txn(struct ha *h, unsigned tag, struct ha_record *nr, bool create)
{
	struct hc_req *r = hc_req_new(HC_TXN, tag);

	if (r == NULL) {
		perror("interlink-control: ha");
		exit(1);
	}
	nr->nonce = nonce();
	char *json = ha_record_json(nr);
	if (json == NULL) {
		fprintf(stderr, "interlink-control: ha: out of memory\n");
		exit(1);
	}
	r->cmp_key[0] = dupn(h->k_epoch);
	r->cmp[0] = (struct il_coord_cmp){ .key = r->cmp_key[0],
					   .target = create ? IL_COORD_CREATE : IL_COORD_MOD,
					   .rel = IL_COORD_EQ, .num = create ? 0 : h->rec.mod_rev };
	r->n_cmp = 1;
	r->check_key = dupn(h->k_epoch);
	r->check_value = dupn(json);
	op_put(r, h->k_epoch, json, false);
	r->other[0] = (struct hc_op){ .type = IL_COORD_OP_GET, .key = dupn(h->prefix),
				      .prefix = true };
	r->n_else = 1;
	h->txn_rec = *nr;
	return r;
}

static struct hc_req *req_clone(const struct hc_req *r)
{
	struct hc_req *c = malloc(sizeof(*c));

	if (c == NULL) {
		perror("interlink-control: ha");
		exit(1);
	}
	*c = *r;
	c->next = NULL;
	c->key = r->key ? dupn(r->key) : NULL;
	c->value = r->value ? dupn(r->value) : NULL;
	for (unsigned i = 0; i < r->n_cmp; i++) {
		c->cmp_key[i] = dupn(r->cmp_key[i]);
		c->cmp[i].key = c->cmp_key[i];
	}
	for (unsigned i = 0; i < r->n_then; i++) {
		c->then[i].key = dupn(r->then[i].key);
		c->then[i].value = r->then[i].value ? dupn(r->then[i].value) : NULL;
	}
	for (unsigned i = 0; i < r->n_else; i++) {
		c->other[i].key = dupn(r->other[i].key);
		c->other[i].value = r->other[i].value ? dupn(r->other[i].value) : NULL;
	}
	c->check_key = r->check_key ? dupn(r->check_key) : NULL;
	c->check_value = r->check_value ? dupn(r->check_value) : NULL;
	return c;
}

static void req_drop(struct hc_req *r)
{
	/* A request never submitted: hc_submit frees what it runs. */
	if (r == NULL)
		return;
	struct hc_req *c = r;
	free(c->key);
	free(c->value);
	for (unsigned i = 0; i < c->n_cmp; i++)
		free(c->cmp_key[i]);
	for (unsigned i = 0; i < c->n_then; i++) {
		free(c->then[i].key);
		free(c->then[i].value);
	}
	for (unsigned i = 0; i < c->n_else; i++) {
		free(c->other[i].key);
		free(c->other[i].value);
	}
	free(c->check_key);
	free(c->check_value);
	free(c);
}

static void submit_state(struct ha *h, struct hc_req *r, bool keep_copy)
{
	r->urgent = true;
	req_drop(h->txn_copy);
	h->txn_copy = keep_copy ? req_clone(r) : NULL;
	h->txn_tag = r->tag;
	h->txn_id = hc_submit(h->hc, r);
}

static void submit_simple(struct ha *h, enum hc_kind kind, unsigned tag, const char *key,
			  char *value, bool lease)
{
	struct hc_req *r = hc_req_new(kind, tag);

	if (r == NULL)
		return;
	r->key = dupn(key);
	r->value = value;
	r->len = value ? strlen(value) : 0;
	r->my_lease = lease;
	hc_submit(h->hc, r);
}

static void put_node(struct ha *h)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "{\"role\":\"%s\",\"epoch\":%u,\"dp\":%s,\"ports\":%s}",
		 hb_role_name(h->role), h->epoch, h->alive_ns ? "true" : "false",
		 h->alive.ports_up ? "true" : "false");
	submit_simple(h, HC_PUT, TAG_MISC, h->k_node, dupn(buf), true);
}

/* A value of P/: the epoch record or a view. */
static void apply_kv(struct ha *h, const struct il_coord_kv *kv)
{
	char err[128];

	if (strcmp(kv->key, h->k_epoch) == 0) {
		struct ha_record r;

		if (kv->mod_rev < h->rec.mod_rev)
			return;
		if (ha_record_parse(kv->value, kv->value_len, &r, err, sizeof(err)) != 0) {
			logm(h, "%s: %s", h->k_epoch, err);
			return;
		}
		r.mod_rev = kv->mod_rev;
		if (r.final_set && (!h->rec.final_set || h->rec.epoch != r.epoch))
			h->released_ns = mono_ns();
		else if (!r.final_set)
			h->released_ns = 0;
		h->rec = r;
		return;
	}
	size_t kl = strlen(h->k_view);
	if (strncmp(kv->key, h->k_view, kl) == 0) {
		char *end;
		unsigned long g = strtoul(kv->key + kl, &end, 10);
		struct ha_view *v;

		if (*end != '\0' || g > 65535)
			return;
		v = calloc(1, sizeof(*v));
		if (v == NULL || ha_view_parse(kv->value, kv->value_len, (uint16_t)g, v, err,
					       sizeof(err)) != 0) {
			free(v);
			logm(h, "%s: %s", kv->key, err);
			return;
		}
		if (h->views[g]) {
			ha_view_free(h->views[g]);
			free(h->views[g]);
		}
		h->views[g] = v;
	}
}

static void apply_kvs(struct ha *h, const struct il_coord_kv *kvs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		apply_kv(h, &kvs[i]);
}

/* ---- roles ------------------------------------------------------------- */

static void cut_free(struct ha *h)
{
	for (unsigned i = 0; i < h->n_cg; i++) {
		ha_view_free(&h->cg[i].v);
		free(h->cg[i].reported);
		free(h->cg[i].cum);
	}
	free(h->cg);
	h->cg = NULL;
	h->n_cg = 0;
}

static void go_standby(struct ha *h, const char *why, bool resign)
{
	uint64_t now = mono_ns();

	if (active(h))
		logm(h, "standby (was %s in epoch %u): %s", hb_role_name(h->role), h->epoch, why);
	snprintf(h->why, sizeof(h->why), "%s", why);
	if (resign) {
		h->resign_until = now + 500000000ull;
		h->st.resigns++;
	}
	bool was = active(h);
	h->role = R_STANDBY;
	h->epoch = h->prev = 0;
	h->role_ns = now;
	h->stalled = false;
	h->n_staged = 0;
	h->staged_ok = false;
	h->cut_done = h->cut_commit = false;
	h->node_due = false; /* put below if it matters */
	cut_free(h);
	/* A commit in flight may still land; its result is not ours to act on. */
	if (h->txn_tag == TAG_COMMIT || h->txn_tag == TAG_T5) {
		h->txn_id = 0;
		req_drop(h->txn_copy);
		h->txn_copy = NULL;
	}
	il_mship_reset(h->ms, 0);
	send_role(h, now);
	if (was) {
		submit_simple(h, HC_RESIGN, TAG_MISC, h->k_leader, NULL, false);
		put_node(h);
	}
}

static void remember_takeover(struct ha *h)
{
	if (h->n_last == MAX_LAST) {
		memmove(h->last, h->last + 1, sizeof(h->last[0]) * (MAX_LAST - 1));
		h->n_last--;
	}
	h->last[h->n_last++] = h->cur;
}

/* We own epoch E (T1 or T2 committed). */
static void become_active(struct ha *h, uint32_t epoch, uint32_t prev, bool cut_known)
{
	uint64_t now = mono_ns();

	h->role = cut_known ? R_SERVING : R_CUT;
	h->epoch = epoch;
	h->prev = prev;
	h->role_ns = now;
	h->resign_until = 0;
	h->stalled = false;
	h->cut_done = cut_known;
	h->cut_commit = false;
	h->n_staged = 0;
	h->staged_ok = false;
	h->peer_unseen = false;
	h->cut_start = now;
	h->first_report = h->last_report = 0;
	h->cur.owned_ns = now;
	h->st.takeovers++;
	send_role(h, now);
	/* P/node is for operators: while the cut is open it would only
	 * queue an etcd write (and its fsync) ahead of T4. */
	if (cut_known)
		put_node(h);
	else
		h->node_due = true;
	cut_free(h);
	/* The committed views of prev: every receiver of them reports or is
	 * left out of the new epoch's first view (docs/ha.md, 6.3). */
	unsigned n = 0;
	/* (A hand-over's T2 wrote them again for the new epoch, view id + 1:
	 * the watch may have brought those already.) */
	for (unsigned g = 0; g < 65536; g++)
		if (h->views[g] && prev != 0 &&
		    (h->views[g]->epoch == prev || (cut_known && h->views[g]->epoch == epoch)))
			n++;
	h->cg = calloc(n ? n : 1, sizeof(*h->cg));
	for (unsigned g = 0; h->cg && g < 65536; g++) {
		const struct ha_view *v = h->views[g];

		if (!v || prev == 0 || (v->epoch != prev && !(cut_known && v->epoch == epoch)))
			continue;
		struct cut_grp *c = &h->cg[h->n_cg++];
		c->v = *v;
		if (v->epoch == epoch && c->v.view_id > 0)
			c->v.view_id--;
		c->v.m = calloc(v->n + 1, sizeof(*v->m));
		c->reported = calloc(v->n + 1, sizeof(bool));
		c->cum = calloc(v->n + 1, sizeof(uint64_t));
		if (c->v.m)
			memcpy(c->v.m, v->m, sizeof(*v->m) * v->n);
	}
	logm(h, "active in epoch %u (previous %u, %s), %u group(s) to cut", epoch, prev,
	     cut_known ? "its cut committed" : "cutting it", h->n_cg);
	if (cut_known) {
		/* A hand-over: the cut is in the record; no reports needed. */
		struct il_mship_seed *seeds = calloc(h->n_cg + 1, sizeof(*seeds));

		for (unsigned i = 0; seeds && i < h->n_cg; i++) {
			uint64_t c = 0;
			bool has = ha_cut_get(&h->rec.cut, h->cg[i].v.group, &c);

			seeds[i] = (struct il_mship_seed){
				.group = h->cg[i].v.group, .view_id = h->cg[i].v.view_id,
				.has_cut = has, .cut = c, .n = h->cg[i].v.n,
				.m = (const struct il_mship_seed_member *)h->cg[i].v.m };
		}
		il_mship_takeover(h->ms, epoch, prev, seeds, seeds ? h->n_cg : 0, now);
		free(seeds);
		h->cut = h->rec.cut;
		h->cut_commit = true; /* the first views go with a commit */
	}
}

static uint32_t next_epoch(uint32_t e)
{
	uint32_t now = (uint32_t)time(NULL);

	return il_epoch_after(now, e + 1) ? now : e + 1;
}

/* T1 (cold start) or T2 (takeover). */
static void take(struct ha *h, const char *why)
{
	struct ha_record nr;
	struct hc_req *r;
	bool cold = !h->rec.exists;

	memset(&nr, 0, sizeof(nr));
	nr.exists = true;
	snprintf(nr.owner, sizeof(nr.owner), "%s", h->node);
	if (cold) {
		nr.epoch = next_epoch(0);
		nr.prev = 0;
		nr.cut_set = true; /* nothing to cut */
	} else {
		nr.epoch = next_epoch(h->rec.epoch);
		nr.views = h->rec.views;
		if (h->rec.final_set) {
			/* Handed over: its cut is committed already. */
			nr.prev = h->rec.epoch;
			nr.cut_set = true;
			nr.cut = h->rec.final;
		} else {
			/* An epoch whose owner died before committing its cut
			 * delivered nothing uniformly: cut its predecessor. */
			nr.prev = h->rec.cut_set ? h->rec.epoch : h->rec.prev;
		}
	}
	h->txn_views = false;
	if (!cold && h->rec.final_set) {
		/* Handed over: the cut is known, so the first views of the new
		 * epoch (the handed-over ones, unchanged) go in this commit. */
		nr.views++;
	}
	r = epoch_txn(h, cold ? TAG_T1 : TAG_T2, &nr, cold);
	if (!cold && h->rec.final_set) {
		for (unsigned g = 0; g < 65536 && r->n_then < HC_MAX_OPS - 1; g++) {
			struct ha_view *v = h->views[g];
			char key[192];

			if (v == NULL || v->epoch != h->rec.epoch)
				continue;
			struct ha_view nv = *v;
			nv.epoch = nr.epoch;
			nv.view_id = v->view_id + 1;
			char *json = ha_view_json(&nv);
			snprintf(key, sizeof(key), "%s%u", h->k_view, (unsigned)g);
			if (json)
				op_put(r, key, json, false);
		}
		h->txn_views = true;
	}
	char lead[160];
	snprintf(lead, sizeof(lead), "{\"node\":\"%s\",\"epoch\":%u}", h->node, nr.epoch);
	op_put(r, h->k_leader, dupn(lead), true);
	h->cur = (struct takeover){ .epoch = nr.epoch, .decided_ns = mono_ns() };
	snprintf(h->cur.why, sizeof(h->cur.why), "%s", why);
	logm(h, "%s: %s epoch %u (record: epoch %u owner %s rev %" PRId64 ")", why,
	     cold ? "T1 creates" : "T2 takes", nr.epoch, h->rec.epoch, h->rec.owner,
	     h->rec.mod_rev);
	submit_state(h, r, false);
}

/* ---- the cut (ACTIVE_CUT) ---------------------------------------------- */

static struct cut_grp *cut_group(struct ha *h, uint16_t g)
{
	for (unsigned i = 0; i < h->n_cg; i++)
		if (h->cg[i].v.group == g)
			return &h->cg[i];
	return NULL;
}

static bool all_reported(const struct ha *h)
{
	for (unsigned i = 0; i < h->n_cg; i++)
		for (unsigned k = 0; k < h->cg[i].v.n; k++)
			if ((h->cg[i].v.m[k].roles & IL_ROLE_RECEIVER) && !h->cg[i].reported[k])
				return false;
	return true;
}

/* Per group: C = the lowest cumulative point among the receivers that
 * reported, moved up to the end of the shadow's run when that run covers
 * it (the new active holds those frames and serves the receivers below);
 * never below a watermark seen published. Receivers that did not report
 * are not in the first view of the new epoch. */
static void cut_fix(struct ha *h, uint64_t now)
{
	struct il_mship_seed *seeds = calloc(h->n_cg + 1, sizeof(*seeds));
	struct il_mship_seed_member **mem = calloc(h->n_cg + 1, sizeof(*mem));
	unsigned excluded = 0;

	memset(&h->cut, 0, sizeof(h->cut));
	for (unsigned i = 0; seeds && mem && i < h->n_cg; i++) {
		struct cut_grp *c = &h->cg[i];
		uint64_t cmin = UINT64_MAX, C;
		unsigned n = 0;

		mem[i] = calloc(c->v.n + 1, sizeof(**mem));
		for (unsigned k = 0; k < c->v.n; k++) {
			bool rcv = c->v.m[k].roles & IL_ROLE_RECEIVER;

			if (rcv && !c->reported[k]) {
				excluded++;
				continue;
			}
			if (rcv && c->cum[k] < cmin)
				cmin = c->cum[k];
			if (mem[i])
				mem[i][n++] = (struct il_mship_seed_member){ c->v.m[k].id,
									     c->v.m[k].roles,
									     c->v.m[k].incarnation };
		}
		bool sh = c->shadow && c->sh.epoch == h->prev;
		if (cmin == UINT64_MAX) /* no receiver reported */
			C = sh ? c->sh.stable : 0;
		else if (sh && c->sh.lo <= cmin && cmin < c->sh.hi)
			C = c->sh.hi;
		else
			C = cmin;
		if (sh && C < c->sh.stable)
			C = c->sh.stable;
		ha_cut_put(&h->cut, c->v.group, C);
		seeds[i] = (struct il_mship_seed){ .group = c->v.group, .view_id = c->v.view_id,
						   .has_cut = true, .cut = C, .n = n, .m = mem[i] };
		logm(h, "cut of epoch %u group %u: %" PRIu64 " (lowest report %" PRIu64
		     ", shadow [%" PRIu64 ", %" PRIu64 ") stable %" PRIu64 ")", h->prev, c->v.group,
		     C, cmin == UINT64_MAX ? 0 : cmin, sh ? c->sh.lo : 0, sh ? c->sh.hi : 0,
		     sh ? c->sh.stable : 0);
	}
	il_mship_takeover(h->ms, h->epoch, h->prev, seeds, seeds ? h->n_cg : 0, now);
	for (unsigned i = 0; mem && i < h->n_cg; i++)
		free(mem[i]);
	free(mem);
	free(seeds);
	if (excluded)
		logm(h, "%u receiver(s) of epoch %u did not report in %" PRIu64 " ms: not in the "
		     "new views", excluded, h->prev, (now - h->cut_start) / 1000000);
	if (h->first_report)
		logm(h, "reports came %.1f to %.1f ms after the role went down",
		     (double)(h->first_report - h->cut_start) / 1e6,
		     (double)(h->last_report - h->cut_start) / 1e6);
	h->cut_done = true;
	h->cut_commit = true;
}

static void cut_check(struct ha *h, uint64_t now)
{
	if (h->role != R_CUT || h->cut_done)
		return;
	if (!all_reported(h) && now - h->cut_start < h->report_ns)
		return;
	cut_fix(h, now);
}

/* ---- views committed before they go down (T3, T4) ---------------------- */

static bool staged_needs_commit(const struct ha *h)
{
	for (unsigned i = 0; i < h->n_staged; i++)
		if ((h->staged[i].type == IL_CM_VIEW && !(h->staged[i].flags & IL_CMF_REPEAT)) ||
		    h->staged[i].type == IL_CM_WATERMARK)
			return true;
	return false;
}

static void commit_views(struct ha *h)
{
	struct ha_record nr = h->rec;
	struct hc_req *r;

	nr.views++;
	snprintf(nr.owner, sizeof(nr.owner), "%s", h->node);
	nr.epoch = h->epoch;
	nr.prev = h->prev;
	if (h->cut_commit) {
		nr.cut_set = true;
		nr.cut = h->cut;
	}
	r = epoch_txn(h, TAG_COMMIT, &nr, false);
	h->txn_cut = h->cut_commit;
	/* Every group whose VIEW is staged: its members as the VIEW has them. */
	for (unsigned i = 0; i < h->n_staged && r->n_then < HC_MAX_OPS; i++) {
		const struct il_cmsg *m = &h->staged[i];

		if (m->type != IL_CM_VIEW || (m->flags & IL_CMF_REPEAT))
			continue; /* a repeat's view is committed already */
		const struct il_mgroup *g = il_mship_group(h->ms, m->group);
		struct ha_view v = { .group = m->group, .epoch = h->epoch, .view_id = m->u.view.view_id };
		char key[192];

		if (g != NULL) {
			v.m = calloc(g->n + 1, sizeof(*v.m));
			for (unsigned k = 0; v.m && k < g->n; k++)
				v.m[v.n++] = (struct ha_member){ g->m[k].id, g->m[k].roles,
								 g->m[k].incarnation };
		}
		char *json = ha_view_json(&v);
		ha_view_free(&v);
		snprintf(key, sizeof(key), "%s%u", h->k_view, m->group);
		if (json)
			op_put(r, key, json, false);
	}
	submit_state(h, r, true);
}

static void staged_send(struct ha *h)
{
	if (il_chan_tx_free(h->ch) < h->n_staged)
		return; /* a view is never cut: wait for room */
	il_chan_send_burst(h->ch, h->staged, h->n_staged);
	h->n_staged = 0;
	h->staged_ok = false;
}

void ha_publish(struct ha *h)
{
	struct il_cmsg out[64];
	unsigned n, k;
	uint64_t now = mono_ns();

	if (!ha_serving(h))
		return;
	if (h->staged_ok)
		staged_send(h);
	if (h->txn_id == 0 && h->n_staged == 0 && h->role != R_QUIESCING) {
		n = il_mship_collect_views(h->ms, h->staged, STAGE_MAX, now);
		h->n_staged = n;
		if (h->views_precommitted) {
			/* A hand-over's first views went in with its T2. */
			h->views_precommitted = false;
			h->cut_commit = false;
			h->staged_ok = true;
			il_mship_views_committed(h->ms);
			staged_send(h);
			h->cur.cut_ns = now;
			remember_takeover(h);
			logm(h, "serving epoch %u, %" PRIu64 " ms after the hand-over began", h->epoch,
			     (now - h->cur.decided_ns) / 1000000);
		} else if (n > 0 || h->cut_commit) {
			if (staged_needs_commit(h) || h->cut_commit) {
				commit_views(h);
			} else {
				h->staged_ok = true; /* credits only: no commit needed */
				staged_send(h);
			}
		}
	}
	do {
		n = il_mship_collect(h->ms, out, 64);
		k = il_chan_send_burst(h->ch, out, n);
		il_mship_published(h->ms, out, k);
	} while (n == 64 && k == n);
}

/* ---- results, the watch ------------------------------------------------ */

static void fenced(struct ha *h, const char *why)
{
	h->st.fenced++;
	go_standby(h, why, false);
}

/* After the record changed: is this process still who it thinks it is? */
static void record_changed(struct ha *h)
{
	if (!active(h))
		return;
	if (strcmp(h->rec.owner, h->node) != 0 || h->rec.epoch != h->epoch) {
		char why[96];

		snprintf(why, sizeof(why), "fenced: epoch %u now owned by %s", h->rec.epoch,
			 h->rec.owner);
		fenced(h, why);
	} else if (h->rec.final_set && h->role != R_QUIESCING) {
		fenced(h, "fenced: our epoch was handed over");
	}
}

static void open_watch(struct ha *h, int64_t rev)
{
	char err[256];

	if (h->w != NULL)
		return;
	h->w = il_coord_watch_open(&h->ccfg, h->prefix, true, rev + 1, err, sizeof(err));
	if (h->w == NULL)
		logm(h, "watch on %s: %s", h->prefix, err);
}

static void on_result(struct ha *h, struct hc_res *r)
{
	uint64_t now = mono_ns();

	if (r->kind == HC_LEASE) {
		logm(h, "lease lost; a new one (%" PRId64 ")", r->lease);
		if (active(h)) {
			char lead[160];

			snprintf(lead, sizeof(lead), "{\"node\":\"%s\",\"epoch\":%u}", h->node,
				 h->epoch);
			submit_simple(h, HC_PUT, TAG_T6, h->k_leader, dupn(lead), true);
		}
		put_node(h);
		return;
	}
	switch (r->tag) {
	case TAG_READ:
		if (r->rc != IL_COORD_OK) {
			h->read_id = 0; /* the tick asks again */
			return;
		}
		apply_kvs(h, r->kvs, r->n_kvs);
		h->have_read = true;
		h->read_id = 0;
		open_watch(h, r->rev);
		record_changed(h);
		return;
	case TAG_STALL:
		if (r->id != h->stall_id)
			return;
		h->stall_id = 0;
		if (r->rc == IL_COORD_OK && r->n_kvs == 1)
			apply_kv(h, &r->kvs[0]);
		else if (r->rc < 0)
			return; /* asked again on the next tick while stalled */
		if (active(h) && strcmp(h->rec.owner, h->node) == 0 && h->rec.epoch == h->epoch &&
		    !h->rec.final_set) {
			h->stalled = false;
			send_authority(h, now);
		} else {
			record_changed(h);
			if (active(h))
				fenced(h, "fenced: not the owner after a stall");
		}
		return;
	case TAG_T1:
	case TAG_T2:
	case TAG_COMMIT:
	case TAG_T5:
		break;
	default:
		return;
	}
	if (r->id != h->txn_id)
		return; /* superseded by a role change */
	h->txn_id = 0;
	if (r->rc < 0) {
		logm(h, "etcd did not answer (%s): %s", r->tag == TAG_COMMIT ? "views" :
		     r->tag == TAG_T5 ? "hand-over" : "takeover", r->err);
		if ((r->tag == TAG_COMMIT || r->tag == TAG_T5) && h->txn_copy != NULL) {
			/* A minority stalls: try again, the same values. */
			h->retry_at = now + 20000000ull;
			h->st.commit_retries++;
		}
		return;
	}
	if (!r->succeeded) {
		apply_kvs(h, r->kvs, r->n_kvs);
		req_drop(h->txn_copy);
		h->txn_copy = NULL;
		if (r->tag == TAG_T1 || r->tag == TAG_T2) {
			h->st.t2_lost++;
			logm(h, "%s lost: epoch %u owner %s (rev %" PRId64 ")",
			     r->tag == TAG_T1 ? "T1" : "T2", h->rec.epoch, h->rec.owner,
			     h->rec.mod_rev);
			return;
		}
		fenced(h, r->tag == TAG_T5 ? "fenced: hand-over refused, the record moved"
					   : "fenced: a view commit's compare failed");
		return;
	}
	req_drop(h->txn_copy);
	h->txn_copy = NULL;
	h->rec = h->txn_rec;
	h->rec.mod_rev = r->rev;
	h->released_ns = h->rec.final_set ? now : 0;
	switch (r->tag) {
	case TAG_T1:
		logm(h, "T1 committed in %.1f ms: epoch %u", r->ms, h->rec.epoch);
		il_mship_reset(h->ms, h->rec.epoch);
		become_active(h, h->rec.epoch, 0, true);
		h->cut_commit = false;
		h->role = R_SERVING;
		break;
	case TAG_T2:
		logm(h, "T2 committed in %.1f ms: epoch %u, previous %u", r->ms, h->rec.epoch,
		     h->rec.prev);
		become_active(h, h->rec.epoch, h->rec.prev, h->rec.cut_set);
		h->views_precommitted = h->txn_views;
		break;
	case TAG_COMMIT:
		h->st.commits++;
		h->staged_ok = true;
		il_mship_views_committed(h->ms);
		staged_send(h);
		if (h->txn_cut) {
			h->cut_commit = false;
			h->role = R_SERVING;
			h->cur.cut_ns = now;
			remember_takeover(h);
			logm(h, "cut of epoch %u committed (%.1f ms): serving epoch %u, %" PRIu64
			     " ms after the takeover was decided", h->prev, r->ms, h->epoch,
			     (now - h->cur.decided_ns) / 1000000);
		}
		if (h->node_due) {
			h->node_due = false;
			put_node(h);
		}
		break;
	case TAG_T5:
		h->st.handovers++;
		logm(h, "T5 committed in %.1f ms: epoch %u handed over to %s", r->ms, h->epoch,
		     h->rec.to);
		go_standby(h, "handed over", false);
		break;
	}
}

void ha_on_results(struct ha *h)
{
	struct hc_res *r;
	uint64_t v;

	if (read(hc_fd(h->hc), &v, sizeof(v)) < 0 && errno != EAGAIN)
		logm(h, "etcd thread eventfd: %s", strerror(errno));
	while ((r = hc_next(h->hc)) != NULL) {
		if (h->fault_hold_ns &&
		    (h->held != NULL || r->tag == TAG_T1 || r->tag == TAG_T2)) {
			struct held_res *e = calloc(1, sizeof(*e));

			if (e != NULL) {
				e->r = r;
				e->until = mono_ns() + h->fault_hold_ns;
				*h->held_tail = e;
				h->held_tail = &e->next;
				continue;
			}
		}
		on_result(h, r);
		hc_res_free(r);
	}
}

static void release_held(struct ha *h, uint64_t now)
{
	while (h->held != NULL && now >= h->held->until) {
		struct held_res *e = h->held;

		h->held = e->next;
		if (h->held == NULL)
			h->held_tail = &h->held;
		on_result(h, e->r);
		hc_res_free(e->r);
		free(e);
	}
}

void ha_on_watch(struct ha *h)
{
	struct il_coord_event ev;

	if (h->w == NULL)
		return;
	while (il_coord_watch_next(h->w, &ev) == IL_COORD_OK) {
		h->st.watch_events++;
		if (ev.type == IL_COORD_EV_RESET) {
			if (h->read_id == 0) {
				struct hc_req *r = hc_req_new(HC_READ_ALL, TAG_READ);

				r->key = dupn(h->prefix);
				h->read_id = hc_submit(h->hc, r);
			}
		} else if (ev.type == IL_COORD_EV_PUT) {
			apply_kv(h, &ev.kv);
		} else if (strcmp(ev.kv.key, h->k_epoch) == 0 && ev.kv.mod_rev >= h->rec.mod_rev) {
			h->rec.exists = false; /* an operator wiped it: a cold start */
			h->rec.mod_rev = 0;
		}
		il_coord_event_free(&ev);
	}
	record_changed(h);
}

/* ---- heartbeat, detection, the tick ------------------------------------ */

static bool dp_alive(const struct ha *h, uint64_t now)
{
	return h->alive_ns != 0 && now - h->alive_ns < h->dp_dead_ns;
}

static void send_hb(struct ha *h, uint64_t now)
{
	/* While our T1 or T2 is in flight, the watch can show us our own new
	 * record before the transaction's result makes us active; a heartbeat
	 * naming that revision as a standby would read, at the peer, as the
	 * new owner not serving (docs/ha.md section 14). Such a heartbeat
	 * names no revision: the peer does not judge on it. */
	bool taking = h->txn_id != 0 && (h->txn_tag == TAG_T1 || h->txn_tag == TAG_T2);
	struct hb_msg m = { .epoch = active(h) ? h->epoch : 0, .role = (uint8_t)h->role,
			    .rev = taking ? 0 : h->rec.mod_rev, .counter = ++h->hb_counter, .sent_ns = now,
			    .echo_ns = h->peer.sent_ns };
	uint8_t b[HB_LEN];

	snprintf(m.node, sizeof(m.node), "%s", h->node);
	if (dp_alive(h, now))
		m.flags |= HB_F_DP_ALIVE;
	if (h->alive.ports_up)
		m.flags |= HB_F_PORTS_UP;
	if (active(h) && !h->stalled)
		m.flags |= HB_F_AUTHORITY;
	if (hc_reachable(h->hc))
		m.flags |= HB_F_ETCD;
	if (now < h->resign_until)
		m.flags |= HB_F_RESIGNING;
	if (h->tx_moved_ns && now - h->tx_moved_ns < 20000000ull)
		m.flags |= HB_F_TRANSMITTING;
	hb_encode(&m, b);
	sendto(h->hb_fd, b, HB_LEN, MSG_DONTWAIT, (const struct sockaddr *)&h->peer_sa,
	       sizeof(h->peer_sa));
	h->hb_sent_ns = now;
}

void ha_on_heartbeat(struct ha *h, const void *buf, size_t len)
{
	struct hb_msg m;
	uint64_t now = mono_ns();

	if (hb_decode(buf, len, &m) != 0 || strcmp(m.node, h->node) == 0) {
		h->st.hb_bad++;
		return;
	}
	h->st.hb_rx++;
	h->peer = m;
	h->peer_ns = now;
	if (m.echo_ns && m.echo_ns <= now)
		h->rtt_ns = now - m.echo_ns;
	if (active(h) && h->stalled && now > h->stall_ns && m.role == HB_STANDBY &&
	    !h->alive.superseded) {
		/* After a stall, the authority comes back with a linearizable
		 * read that says we own the epoch, or with the peer, heard after
		 * the stall, saying it is a standby: it has not taken over (and
		 * cannot without us seeing it). The second needs no etcd: a
		 * minority of etcd members stalls view changes, not the active. */
		h->stalled = false;
		send_authority(h, now);
	}
}

/* A standby decides whether to take over (docs/ha.md, 6.1). */
static void decide(struct ha *h, uint64_t now)
{
	if (!h->have_read || h->txn_id != 0)
		return;
	/* Only a healthy appliance takes over: its data plane alive, its
	 * ports up. */
	if (!dp_alive(h, now) || !h->alive.ha || !h->alive.ports_up)
		return;
	if (!h->rec.exists) {
		take(h, "cold start");
		return;
	}
	if (h->rec.final_set) {
		/* Handed over: to us at once, anyone after a while. */
		if (h->released_ns == 0)
			h->released_ns = now;
		if (strcmp(h->rec.to, h->node) == 0 || now - h->released_ns > h->detect_ns)
			take(h, "hand-over");
		return;
	}
	if (strcmp(h->rec.owner, h->node) == 0) {
		/* Our own previous incarnation owned it (its authority came from
		 * a control process that is gone), or we resigned it: the peer
		 * takes it first; after a while, we do. */
		if (now >= h->resign_until)
			take(h, "owner restarted");
		return;
	}
	bool hb = h->peer_ns && now - h->peer_ns < h->detect_ns;
	bool link = h->alive.last_peer_frame_ns && h->alive.peer_epoch == h->rec.epoch &&
		    now - h->alive.last_peer_frame_ns < h->detect_ns;
	bool hosts = h->alive.last_host_in_ns && now - h->alive.last_host_in_ns < 1000000000ull;
	if (hb) {
		if (il_epoch_after(h->peer.epoch, h->rec.epoch))
			return; /* the watch has not told us yet */
		bool serving = (h->peer.role == HB_ACTIVE_SERVING || h->peer.role == HB_ACTIVE_CUT ||
				h->peer.role == HB_QUIESCING) && h->peer.epoch == h->rec.epoch;
		if (!serving) {
			/* Not on a heartbeat older than what we know of the record
			 * (it may have been sent just before the peer took over). */
			if (now - h->started_ns > h->detect_ns && h->peer.rev >= h->rec.mod_rev)
				take(h, "owner not serving");
			return;
		}
		if (!(h->peer.flags & HB_F_DP_ALIVE) || !(h->peer.flags & HB_F_PORTS_UP) ||
		    (h->peer.flags & HB_F_RESIGNING)) {
			take(h, "owner unhealthy");
			return;
		}
		h->peer_unseen = !link && (h->peer.flags & HB_F_TRANSMITTING);
		return;
	}
	if (link)
		return;
	if (!hosts)
		return; /* we may be the one cut off */
	if (h->alive.sent_ns && (h->alive_gap_ns > ALIVE_REGULAR_NS ||
				 (now > h->alive.sent_ns && now - h->alive.sent_ns > ALIVE_REGULAR_NS))) {
		/* Our own data plane was away (descheduled) just before its
		 * last report, or has not reported since: what it says of the
		 * link is stale, and the frames it has not looked at yet wait
		 * in its port's ring. Judge the link once it reports again on
		 * time. */
		h->st.link_unjudged++;
		return;
	}
	if (h->peer_ns == 0 && !h->alive.last_peer_frame_ns && now - h->started_ns < h->cold_ns)
		return; /* just started: give the owner T_cold to show itself */
	take(h, "owner silent");
}

static void quiesce_check(struct ha *h, uint64_t now)
{
	if (h->role != R_QUIESCING || h->txn_id != 0 || h->n_staged != 0)
		return;
	bool ready = true;

	for (unsigned i = 0; i < h->ms->n_groups; i++) {
		const struct il_mgroup *g = il_mship_group(h->ms, h->ms->groups[i]);
		uint64_t next;

		if (g->stab.n == 0)
			continue;
		if (!ha_cut_get(&h->q_next, g->id, &next) || g->published < next)
			ready = false;
	}
	if (!ready && now - h->q_start < h->q_ns)
		return;
	/* The cut of our own epoch: what every receiver was told is stable. */
	struct ha_record nr = h->rec;
	nr.final_set = true;
	memset(&nr.final, 0, sizeof(nr.final));
	for (unsigned i = 0; i < h->ms->n_groups; i++) {
		const struct il_mgroup *g = il_mship_group(h->ms, h->ms->groups[i]);

		ha_cut_put(&nr.final, g->id, g->published);
	}
	snprintf(nr.to, sizeof(nr.to), "%s", h->q_to);
	nr.views++;
	struct hc_req *r = epoch_txn(h, TAG_T5, &nr, false);
	for (unsigned i = 0; i < h->ms->n_groups && r->n_then < HC_MAX_OPS; i++) {
		const struct il_mgroup *g = il_mship_group(h->ms, h->ms->groups[i]);
		struct ha_view v = { .group = g->id, .epoch = h->epoch, .view_id = g->view_id };
		char key[192];

		v.m = calloc(g->n + 1, sizeof(*v.m));
		for (unsigned k = 0; v.m && k < g->n; k++)
			v.m[v.n++] = (struct ha_member){ g->m[k].id, g->m[k].roles,
							 g->m[k].incarnation };
		char *json = ha_view_json(&v);
		ha_view_free(&v);
		snprintf(key, sizeof(key), "%s%u", h->k_view, g->id);
		if (json)
			op_put(r, key, json, false);
	}
	r->then[r->n_then++] = (struct hc_op){ .type = IL_COORD_OP_DELETE, .key = dupn(h->k_leader) };
	logm(h, "hand-over to %s: %s after %" PRIu64 " ms of quiescing", h->q_to,
	     ready ? "everything stamped is stable" : "T_q elapsed",
	     (now - h->q_start) / 1000000);
	submit_state(h, r, true);
}

void ha_tick(struct ha *h)
{
	uint64_t now = mono_ns();

	release_held(h, now);
	if (!h->have_read && h->read_id == 0) {
		struct hc_req *r = hc_req_new(HC_READ_ALL, TAG_READ);

		r->key = dupn(h->prefix);
		h->read_id = hc_submit(h->hc, r);
	}
	/* A loop that stalled longer than the authority may not renew it
	 * before a linearizable read says we still own the epoch (8). */
	if (active(h) && h->last_tick_ns && now - h->last_tick_ns > h->auth_ns && !h->stalled) {
		h->stalled = true;
		h->stall_ns = now;
		h->st.stalls++;
		logm(h, "loop stalled %" PRIu64 " ms: authority held back until etcd confirms",
		     (now - h->last_tick_ns) / 1000000);
	}
	if (h->last_tick_ns && now - h->last_tick_ns > 2 * h->hb_ns) {
		/* Our own loop was away: heartbeats and sightings may wait in
		 * sockets and rings. Judge nobody until they are read. */
		h->settle_until = now + 2 * h->hb_ns;
	}
	h->last_tick_ns = now;
	if (active(h) && h->stalled && h->stall_id == 0) {
		struct hc_req *r = hc_req_new(HC_GET, TAG_STALL);

		r->key = dupn(h->k_epoch);
		r->urgent = true;
		h->stall_id = hc_submit(h->hc, r);
	}
	if (h->txn_id == 0 && h->txn_copy != NULL && now >= h->retry_at && active(h)) {
		struct hc_req *r = req_clone(h->txn_copy);

		r->urgent = true;
		h->txn_tag = r->tag;
		h->txn_id = hc_submit(h->hc, r);
	}
	if (now - h->hb_sent_ns >= h->hb_ns)
		send_hb(h, now);
	if (!active(h)) {
		if (now - h->role_sent_ns > 100000000ull)
			send_role(h, now); /* repeated: a data plane that restarted learns it */
		if (now >= h->settle_until)
			decide(h, now);
		return;
	}
	if (now >= h->settle_until && !dp_alive(h, now)) {
		go_standby(h, "resigned: data plane silent", true);
		return;
	}
	if (now >= h->settle_until && !h->alive.ports_up) {
		go_standby(h, "resigned: a port is down", true);
		return;
	}
	if (!h->stalled)
		send_authority(h, now);
	if (h->alive.role != IL_HA_ACTIVE && now - h->role_sent_ns > 20000000ull)
		send_role(h, now);
	cut_check(h, now);
	quiesce_check(h, now);
}

unsigned ha_tick_ms(const struct ha *h)
{
	unsigned t = (unsigned)(h->hb_ns / 2000000);

	return t < 1 ? 1 : t > 5 ? 5 : t;
}

/* ---- from the data plane ----------------------------------------------- */

bool ha_dispatch(struct ha *h, const struct il_cmsg *m, uint64_t now)
{
	switch (m->type) {
	case IL_CM_ALIVE:
		h->alive_ns = now;
		if (m->len >= offsetof(struct il_cm_alive, sent_ns) && m->u.alive.ha) {
			if (m->u.alive.tx_out != h->last_tx_out) {
				h->last_tx_out = m->u.alive.tx_out;
				h->tx_moved_ns = now;
			}
			uint64_t prev = h->alive.sent_ns;
			h->alive = m->u.alive;
			if (m->len < sizeof(m->u.alive))
				h->alive.sent_ns = 0; /* an older data plane: no clock */
			h->alive_gap_ns = prev && h->alive.sent_ns > prev ? h->alive.sent_ns - prev
									  : UINT64_MAX;
			if (active(h) && m->u.alive.superseded && m->u.alive.epoch == h->epoch)
				fenced(h, "superseded: a newer epoch on the link");
		}
		return true;
	case IL_CM_EPOCH_REPORT: {
		const struct il_cm_epoch_report *r = &m->u.report;
		struct cut_grp *c;

		h->st.reports++;
		if (r->epoch != h->prev || h->prev == 0 || (c = cut_group(h, m->group)) == NULL)
			return true; /* a report on another epoch counts as none */
		if ((h->role == R_SERVING || h->role == R_QUIESCING) && !h->cut_commit &&
		    now - c->final_ns > 10000000ull) {
			/* A receiver still waits for the cut, which is committed: it
			 * missed every copy of the final watermark (lost, or sent while
			 * this data plane's authority lapsed). Again, at most every
			 * 10 ms per group. */
			uint64_t cut;
			struct il_cmsg w = { .type = IL_CM_WATERMARK, .len = sizeof(w.u.wm),
					     .group = m->group };

			if (ha_cut_get(&h->cut, m->group, &cut)) {
				w.u.wm.epoch = h->prev;
				w.u.wm.stable_seq = cut;
				if (down(h, &w)) {
					c->final_ns = now;
					h->st.finals_again++;
				}
			}
			return true;
		}
		if (h->role != R_CUT || h->cut_done)
			return true;
		for (unsigned k = 0; k < c->v.n; k++)
			if (c->v.m[k].id == r->receiver && !c->reported[k]) {
				c->reported[k] = true;
				c->cum[k] = r->cum; /* frozen from the report on */
				if (h->first_report == 0)
					h->first_report = now;
				h->last_report = now;
			}
		cut_check(h, now);
		return true;
	}
	case IL_CM_SHADOW: {
		struct cut_grp *c = cut_group(h, m->group);

		if (c != NULL) {
			c->shadow = true;
			c->sh = m->u.shadow;
		}
		return true;
	}
	case IL_CM_SUPERSEDED:
		h->st.superseded++;
		if (active(h) && m->u.superseded.own_epoch == h->epoch)
			fenced(h, "superseded: a newer epoch on the link");
		return true;
	case IL_CM_QUIESCED:
		if (h->role == R_QUIESCING && m->u.quiesced.epoch == h->epoch)
			ha_cut_put(&h->q_next, m->group, m->u.quiesced.next);
		return true;
	default:
		return false;
	}
}

void ha_dp_hello(struct ha *h, uint64_t inc)
{
	uint64_t now = mono_ns();

	if (h->dp_inc != 0 && inc != h->dp_inc && active(h))
		go_standby(h, "resigned: the data plane restarted (its epoch died with it)", true);
	h->dp_inc = inc;
	send_role(h, now);
}

/* ---- management ------------------------------------------------------- */

static size_t reply_ha(struct ha *h, char *r, size_t len)
{
	uint64_t now = mono_ns();
	struct il_coord_stats cs;
	uint64_t calls, failed;
	double last_ms;
	size_t o = 0;

	hc_stats(h->hc, &cs, &calls, &failed, &last_ms);
#define OUT(...) (o += o < len ? (size_t)snprintf(r + o, len - o, __VA_ARGS__) : 0)
	OUT("node %s\nrole %s\nepoch %u\nprev_epoch %u\n", h->node, hb_role_name(h->role), h->epoch,
	    h->prev);
	OUT("owner %s\nrecord_epoch %u\nrecord_rev %" PRId64 "\nrecord_views %" PRIu64 "\n",
	    h->rec.exists ? h->rec.owner : "-", h->rec.epoch, h->rec.mod_rev, h->rec.views);
	OUT("peer %s\npeer_role %s\npeer_epoch %u\npeer_heard_ms %" PRIu64 "\nheartbeat_rtt_us %"
	    PRIu64 "\n", h->peer.node[0] ? h->peer.node : "-", hb_role_name(h->peer.role),
	    h->peer.epoch, h->peer_ns ? (now - h->peer_ns) / 1000000 : UINT64_MAX,
	    h->rtt_ns / 1000);
	OUT("peer_frame_ms %" PRIu64 "\npeer_frame_epoch %u\npeer_unseen %u\n",
	    h->alive.last_peer_frame_ns ? (now - h->alive.last_peer_frame_ns) / 1000000
					: UINT64_MAX,
	    h->alive.peer_epoch, h->peer_unseen ? 1u : 0u);
	OUT("dp_alive %u\nports_up %u\nstalled %u\nlease %" PRId64 "\netcd_reachable %u\n",
	    dp_alive(h, now) ? 1u : 0u, h->alive.ports_up, h->stalled ? 1u : 0u, hc_lease(h->hc),
	    hc_reachable(h->hc) ? 1u : 0u);
	OUT("etcd_calls %" PRIu64 "\netcd_failed %" PRIu64 "\netcd_last_ms %.2f\netcd_failovers %"
	    PRIu64 "\n", calls, failed, last_ms, cs.failovers);
	OUT("takeovers %" PRIu64 "\nhandovers %" PRIu64 "\nfenced %" PRIu64 "\nsuperseded %" PRIu64
	    "\nresigns %" PRIu64 "\ntakeovers_lost %" PRIu64 "\nview_commits %" PRIu64
	    "\ncommit_retries %" PRIu64 "\nreports %" PRIu64 "\nstalls %" PRIu64
	    "\nheartbeats_rx %" PRIu64 "\nfinals_again %" PRIu64 "\nlink_unjudged %" PRIu64 "\n",
	    h->st.takeovers, h->st.handovers, h->st.fenced, h->st.superseded, h->st.resigns,
	    h->st.t2_lost, h->st.commits, h->st.commit_retries, h->st.reports, h->st.stalls,
	    h->st.hb_rx, h->st.finals_again, h->st.link_unjudged);
	OUT("last_change %s\n", h->why[0] ? h->why : "-");
	for (unsigned i = 0; i < h->n_last; i++)
		OUT("takeover epoch %u why %s owned_ms %.1f serving_ms %.1f\n", h->last[i].epoch,
		    h->last[i].why, (double)(h->last[i].owned_ns - h->last[i].decided_ns) / 1e6,
		    (double)(h->last[i].cut_ns - h->last[i].decided_ns) / 1e6);
#undef OUT
	return o < len ? o : len - 1;
}

size_t ha_status(struct ha *h, char *r, size_t len)
{
	uint64_t now = mono_ns();
	int n = snprintf(r, len,
			 "ha_role %u\nha_epoch %u\nha_record_epoch %u\nha_record_rev %" PRId64
			 "\nha_peer_heard_ms %" PRIu64 "\nha_peer_role %u\nha_takeovers %" PRIu64
			 "\nha_handovers %" PRIu64 "\nha_fenced %" PRIu64 "\nha_resigns %" PRIu64
			 "\nha_stalls %" PRIu64 "\nha_view_commits %" PRIu64 "\nha_reports %" PRIu64
			 "\n", h->role, h->epoch, h->rec.epoch, h->rec.mod_rev,
			 h->peer_ns ? (now - h->peer_ns) / 1000000 : 999999, h->peer.role,
			 h->st.takeovers, h->st.handovers, h->st.fenced, h->st.resigns, h->st.stalls,
			 h->st.commits, h->st.reports);
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

static size_t handover(struct ha *h, char *r, size_t len)
{
	uint64_t now = mono_ns();

	if (h->role != R_SERVING)
		return (size_t)snprintf(r, len, "error: not the active appliance (%s)\n",
					hb_role_name(h->role));
	if (!h->peer_ns || now - h->peer_ns > h->detect_ns || h->peer.role != HB_STANDBY ||
	    !(h->peer.flags & HB_F_DP_ALIVE) || !(h->peer.flags & HB_F_PORTS_UP))
		return (size_t)snprintf(r, len, "error: the peer is not a healthy standby\n");
	if (h->txn_id != 0 || h->n_staged != 0 || h->stalled)
		return (size_t)snprintf(r, len, "error: busy (a commit in flight); try again\n");
	struct il_cmsg m = { .type = IL_CM_QUIESCE, .len = sizeof(m.u.quiesce) };

	m.u.quiesce = (struct il_cm_quiesce){ .epoch = h->epoch, .on = 1 };
	if (!down(h, &m))
		return (size_t)snprintf(r, len, "error: the channel is full; try again\n");
	h->role = R_QUIESCING;
	h->q_start = now;
	memset(&h->q_next, 0, sizeof(h->q_next));
	snprintf(h->q_to, sizeof(h->q_to), "%s", h->peer.node);
	h->cur = (struct takeover){ .epoch = h->epoch, .decided_ns = now };
	logm(h, "hand-over of epoch %u to %s: quiescing", h->epoch, h->q_to);
	return (size_t)snprintf(r, len, "ok: handing epoch %u over to %s\n", h->epoch, h->q_to);
}

size_t ha_mgmt(struct ha *h, const char *cmd, char *reply, size_t len)
{
	if (strcmp(cmd, "ha") == 0)
		return reply_ha(h, reply, len);
	if (strcmp(cmd, "handover") == 0)
		return handover(h, reply, len);
	return 0;
}

/* ---- set-up ------------------------------------------------------------ */

int ha_result_fd(const struct ha *h)
{
	return hc_fd(h->hc);
}

int ha_watch_fd(const struct ha *h)
{
	return h->w ? il_coord_watch_fd(h->w) : -1;
}

int ha_hb_fd(const struct ha *h)
{
	return h->hb_fd;
}

struct ha *ha_open(const struct ctl_opts *o, struct il_chan *ch, struct il_mship *ms, char *err,
		   size_t errlen)
{
	struct ha *h = calloc(1, sizeof(*h));
	struct sockaddr_in lsa;

	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->o = o;
	h->ch = ch;
	h->ms = ms;
	h->hb_fd = -1;
	h->role = R_STANDBY;
	h->started_ns = mono_ns();
	h->held_tail = &h->held;
	const char *fault = getenv("IL_HA_FAULT_TAKE_RESULT_MS");
	if (fault != NULL && *fault != '\0') {
		char *end;
		unsigned long ms = strtoul(fault, &end, 10);

		if (*end != '\0' || ms > 10000) {
			snprintf(err, errlen, "IL_HA_FAULT_TAKE_RESULT_MS: '%s' is not 0-10000", fault);
			free(h);
			return NULL;
		}
		h->fault_hold_ns = ms * 1000000ull;
	}
	h->hb_ns = o->ha_hb_ms * 1000000ull;
	h->detect_ns = o->ha_detect_ms * 1000000ull;
	h->auth_ns = o->ha_auth_ms * 1000000ull;
	h->report_ns = o->ha_report_ms * 1000000ull;
	h->dp_dead_ns = o->ha_dp_dead_ms * 1000000ull;
	h->cold_ns = o->ha_cold_ms * 1000000ull;
	h->q_ns = o->ha_quiesce_ms * 1000000ull;
	snprintf(h->node, sizeof(h->node), "%s", o->ha_node);
	snprintf(h->prefix, sizeof(h->prefix), "%s", o->ha_prefix);
	snprintf(h->k_epoch, sizeof(h->k_epoch), "%sepoch", h->prefix);
	snprintf(h->k_leader, sizeof(h->k_leader), "%sleader", h->prefix);
	snprintf(h->k_node, sizeof(h->k_node), "%snode/%s", h->prefix, h->node);
	snprintf(h->k_view, sizeof(h->k_view), "%sview/", h->prefix);
	h->views = calloc(65536, sizeof(*h->views));
	h->staged = calloc(STAGE_MAX, sizeof(*h->staged));
	if (h->views == NULL || h->staged == NULL) {
		snprintf(err, errlen, "out of memory");
		ha_close(h);
		return NULL;
	}
	if (hb_addr(o->ha_listen, &lsa) != 0 || hb_addr(o->ha_peer, &h->peer_sa) != 0) {
		snprintf(err, errlen, "--ha-listen/--ha-peer: not ADDR:PORT");
		ha_close(h);
		return NULL;
	}
	h->hb_fd = hb_socket(&lsa);
	if (h->hb_fd < 0) {
		snprintf(err, errlen, "--ha-listen %s: %s", o->ha_listen, strerror(errno));
		ha_close(h);
		return NULL;
	}
	il_coord_cfg_init(&h->ccfg);
	h->ccfg.endpoints = o->ha_etcd;
	h->ccfg.attempt_ms = o->ha_attempt_ms;
	h->ccfg.deadline_ms = o->ha_deadline_ms;
	h->hc = hc_open(&h->ccfg, o->ha_lease_s, err, errlen);
	if (h->hc == NULL) {
		ha_close(h);
		return NULL;
	}
	/* Start as standby: become active only through a committed transaction. */
	il_mship_reset(ms, 0);
	ms->cfg.commit_views = true;
	logm(h, "standby; etcd %s, prefix %s, heartbeat %s -> %s every %u ms, detection %u ms, "
	     "authority %u ms", o->ha_etcd, h->prefix, o->ha_listen, o->ha_peer, o->ha_hb_ms,
	     o->ha_detect_ms, o->ha_auth_ms);
	return h;
}

void ha_close(struct ha *h)
{
	if (h == NULL)
		return;
	if (h->hc != NULL && active(h)) {
		/* A clean stop while active: the leader key goes now, not with
		 * the lease (the peer takes over on silence anyway). */
		struct il_cmsg m = { .type = IL_CM_ROLE, .len = sizeof(m.u.role) };

		m.u.role.role = IL_HA_STANDBY;
		down(h, &m);
	}
	if (h->w != NULL)
		il_coord_watch_close(h->w);
	if (h->hc != NULL)
		hc_close(h->hc);
	if (h->hb_fd >= 0)
		close(h->hb_fd);
	for (unsigned g = 0; h->views && g < 65536; g++)
		if (h->views[g]) {
			ha_view_free(h->views[g]);
			free(h->views[g]);
		}
	free(h->views);
	free(h->staged);
	while (h->held != NULL) {
		struct held_res *e = h->held;

		h->held = e->next;
		hc_res_free(e->r);
		free(e);
	}
	cut_free(h);
	req_drop(h->txn_copy);
	free(h);
}
