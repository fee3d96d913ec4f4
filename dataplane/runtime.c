/* SPDX-License-Identifier: BSD-3-Clause
 * Runtime commands through DPDK telemetry (interlink-ctl speaks them):
 *
 *   /interlink/reset                         zero every counter
 *   /interlink/set,STAGE,KEY=VALUE[,K=V...]  change a stage's parameters
 *
 * A telemetry thread never writes what a poll loop owns: it posts the
 * command (one at a time, under a mutex that only telemetry threads take)
 * and bumps a sequence number; each worker sees the new number with one
 * relaxed load per loop iteration, applies what concerns its lcore between
 * two bursts, and acknowledges. The telemetry thread waits for the
 * acknowledgements and answers with the result. No lock in the fast path.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_telemetry.h>

#include <interlink/app.h>
#include <interlink/config.h>

static struct il_app *rt_app;
static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;

static void stage_reset(struct il_stage *st)
{
	memset(st->ctr, 0, sizeof(st->ctr));
	st->pkts_in = 0;
	st->tsc_busy = 0;
	st->tsc_poll = 0;
}

/* On the worker's lcore, between bursts. */
void il_runtime_apply(struct il_app *app, struct il_worker *w, uint32_t seq)
{
	struct il_rt_cmd *cmd = &app->rt;

	if (cmd->kind == IL_RT_RESET) {
		for (unsigned s = 0; s < app->n_stages; s++)
			if (app->stages[s]->lcore == (int)w->lcore_id)
				stage_reset(app->stages[s]);
		memset(w->io.rx, 0, sizeof(w->io.rx));
		memset(w->io.tx_queued, 0, sizeof(w->io.tx_queued));
		memset(w->io.tx_dropped, 0, sizeof(w->io.tx_dropped));
		memset(w->io.tx_link_down, 0, sizeof(w->io.tx_link_down));
		w->loops = 0;
		w->busy_loops = 0;
		if (w->shard) {
			w->shard->handoff_out = 0;
			w->shard->handoff_in = 0;
			w->shard->drop_handoff_full = 0;
			w->shard->drop_handoff_nombuf = 0;
		}
	} else if (cmd->st->lcore == (int)w->lcore_id) {
		cmd->rc = cmd->st->type->set(cmd->st, cmd->params, cmd->err, sizeof(cmd->err));
	}
	w->cmd_seen = seq;
	__atomic_store_n(&w->cmd_done, seq, __ATOMIC_RELEASE);
}

/* Post the command prepared in rt_app->rt and wait (bounded) for every
 * worker to have seen it. Called with rt_lock held. */
static int post_and_wait(void)
{
	struct il_app *app = rt_app;
	uint32_t seq = __atomic_load_n(&app->rt.seq, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(&app->rt.seq, seq, __ATOMIC_RELEASE);
	for (int ms = 0; ms < 5000; ms++) {
		unsigned done = 0;
		for (unsigned w = 0; w < app->n_workers; w++)
			done += __atomic_load_n(&app->workers[w].cmd_done, __ATOMIC_ACQUIRE) == seq;
		if (done == app->n_workers)
			return 0;
		usleep(1000);
	}
	return -1;
}

/* {"error": "...", "error_1": "...", ...}: a telemetry string holds at most
 * RTE_TEL_MAX_STRING_LEN - 1 bytes, so a long message comes in pieces that
 * interlink-ctl joins in order. */
static int reply_error(struct rte_tel_data *d, const char *msg)
{
	const size_t piece = RTE_TEL_MAX_STRING_LEN - 1;
	char buf[RTE_TEL_MAX_STRING_LEN], name[24];

	rte_tel_data_start_dict(d);
	for (unsigned i = 0; *msg; i++) {
		snprintf(buf, sizeof(buf), "%.*s", (int)piece, msg);
		snprintf(name, sizeof(name), i ? "error_%u" : "error", i);
		rte_tel_data_add_dict_string(d, name, buf);
		msg += strlen(buf);
	}
	return 0;
}

static int tel_reset(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct il_app *app = rt_app;
	int rc;

	(void)cmd;
	if (params != NULL && *params != '\0')
		return reply_error(d, "/interlink/reset takes no parameters");
	pthread_mutex_lock(&rt_lock);
	app->rt.kind = IL_RT_RESET;
	rc = post_and_wait();
	if (rc == 0) {
		/* Stages on no lcore have no poll loop to do it for them. */
		for (unsigned s = 0; s < app->n_stages; s++)
			if (app->stages[s]->lcore < 0)
				stage_reset(app->stages[s]);
		for (unsigned p = 0; p < app->n_ports; p++)
			rte_eth_stats_reset(app->ports[p].port_id);
	}
	pthread_mutex_unlock(&rt_lock);
	if (rc)
		return reply_error(d, "a poll loop did not answer within 5 s");
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "reset", 1);
	return 0;
}

/* "STAGE,KEY=VALUE[,KEY=VALUE...]" into a YAML document
 * "stages: {STAGE: {KEY: VALUE, ...}}", so errors name stages.STAGE.KEY
 * and values go through the config's own typed readers. */
static int set_doc(const char *params, char *stage, size_t slen, char *doc, size_t dlen)
{
	const char *comma = strchr(params, ',');
	size_t off;

	if (comma == NULL || (size_t)(comma - params) >= slen || comma == params)
		return -1;
	snprintf(stage, slen, "%.*s", (int)(comma - params), params);
	off = (size_t)snprintf(doc, dlen, "stages:\n  %s:\n", stage);
	for (const char *p = comma + 1; *p && off < dlen;) {
		size_t len = strcspn(p, ",");
		const char *eq = memchr(p, '=', len);

		if (eq == NULL || eq == p)
			return -1;
		off += (size_t)snprintf(doc + off, dlen - off, "    %.*s: \"%.*s\"\n",
					(int)(eq - p), p, (int)(len - (size_t)(eq - p) - 1), eq + 1);
		p += len + (p[len] == ',');
	}
	return off < dlen ? 0 : -1;
}

static int tel_set(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct il_app *app = rt_app;
	char stage[IL_NAME_LEN], doc[1024], err[256];
	struct il_stage *st;
	struct il_cfg *root;
	int rc;

	(void)cmd;
	if (params == NULL || set_doc(params, stage, sizeof(stage), doc, sizeof(doc)))
		return reply_error(d, "usage: /interlink/set,STAGE,KEY=VALUE[,KEY=VALUE...]");
	st = il_app_stage(app, stage);
	if (st == NULL)
		return reply_error(d, "no stage of that name (see /interlink/stages)");
	if (st->type->set == NULL || st->lcore < 0) {
		snprintf(err, sizeof(err), "stage '%s' (%s) has no parameters that change at run "
			 "time", st->name, st->type->name);
		return reply_error(d, err);
	}
	root = il_cfg_load_string(doc, "/interlink/set", err, sizeof(err));
	if (root == NULL)
		return reply_error(d, err);
	pthread_mutex_lock(&rt_lock);
	app->rt.kind = IL_RT_SET;
	app->rt.st = st;
	app->rt.params = il_cfg_get(il_cfg_get(root, "stages"), stage);
	app->rt.rc = 0;
	app->rt.err[0] = '\0';
	bool unanswered = post_and_wait() != 0;
	rc = unanswered ? -1 : app->rt.rc;
	if (unanswered)
		snprintf(err, sizeof(err), "the poll loop of lcore %d did not answer within 5 s",
			 st->lcore);
	else if (rc)
		snprintf(err, sizeof(err), "%s", app->rt.err);
	pthread_mutex_unlock(&rt_lock);
	/* A loop that never answered may read the tree later: it stays. */
	if (!unanswered)
		il_cfg_free(root);
	if (rc)
		return reply_error(d, err);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "stage", st->name);
	rte_tel_data_add_dict_string(d, "applied", strchr(params, ',') + 1);
	return 0;
}

void il_runtime_register(struct il_app *app)
{
	rt_app = app;
	rte_telemetry_register_cmd("/interlink/reset", tel_reset,
				   "Zero every counter (stages, ports, lcores). No parameters");
	rte_telemetry_register_cmd("/interlink/set", tel_set,
				   "Change stage parameters at run time. Parameters: "
				   "STAGE,KEY=VALUE[,KEY=VALUE...]");
}
