/* SPDX-License-Identifier: BSD-3-Clause
 * The control process's etcd thread (ha_coord.h, docs/ha.md section 5).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ha_coord.h"

struct ha_coord {
	struct il_coord *c;
	int64_t ttl_s;
	pthread_t th;
	bool th_ok;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	struct hc_req *q_head, *q_tail;
	struct hc_res *r_head, *r_tail;
	int efd;
	uint64_t next_id;
	atomic_int_fast64_t lease;
	atomic_bool reachable;
	atomic_uint_fast64_t calls, failed;
	_Atomic double last_ms;
	struct il_coord_stats st; /* a copy, under mu: the handle is the thread's */
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct hc_req *hc_req_new(enum hc_kind kind, unsigned tag)
{
	struct hc_req *r = calloc(1, sizeof(*r));

	if (r != NULL) {
		r->kind = kind;
		r->tag = tag;
	}
	return r;
}

static void req_free(struct hc_req *r)
{
	if (r == NULL)
		return;
	free(r->key);
	free(r->value);
	for (unsigned i = 0; i < r->n_cmp; i++)
		free(r->cmp_key[i]);
	for (unsigned i = 0; i < r->n_then; i++) {
		free(r->then[i].key);
		free(r->then[i].value);
	}
	for (unsigned i = 0; i < r->n_else; i++) {
		free(r->other[i].key);
		free(r->other[i].value);
	}
	free(r->check_key);
	free(r->check_value);
	free(r);
}

void hc_res_free(struct hc_res *r)
{
	if (r == NULL)
		return;
	il_coord_kvs_free(r->kvs, r->n_kvs);
	free(r);
}

static void post(struct ha_coord *hc, struct hc_res *res)
{
	uint64_t one = 1;

	pthread_mutex_lock(&hc->mu);
	if (hc->r_tail)
		hc->r_tail->next = res;
	else
		hc->r_head = res;
	hc->r_tail = res;
	pthread_mutex_unlock(&hc->mu);
	if (write(hc->efd, &one, sizeof(one)) != sizeof(one))
		perror("interlink-control: ha: eventfd");
}

static void note(struct ha_coord *hc, struct hc_res *res, int rc, double t0)
{
	res->rc = rc;
	res->ms = now_ms() - t0;
	atomic_store(&hc->last_ms, res->ms);
	atomic_fetch_add(&hc->calls, 1);
	if (rc < 0) {
		atomic_fetch_add(&hc->failed, 1);
		snprintf(res->err, sizeof(res->err), "%s", il_coord_strerror(hc->c));
	}
	atomic_store(&hc->reachable, rc >= 0);
}

static void ops_of(const struct hc_op *in, unsigned n, int64_t lease, struct il_coord_op *out)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = (struct il_coord_op){ .type = in[i].type, .key = in[i].key,
					       .prefix = in[i].prefix, .value = in[i].value,
					       .value_len = in[i].len,
					       .lease = in[i].my_lease ? lease : 0 };
}

static void run(struct ha_coord *hc, struct hc_req *r)
{
	struct hc_res *res = calloc(1, sizeof(*res));
	int64_t lease = atomic_load(&hc->lease);
	double t0 = now_ms();
	int rc;

	if (res == NULL)
		return;
	res->id = r->id;
	res->kind = r->kind;
	res->tag = r->tag;
	switch (r->kind) {
	case HC_READ_ALL:
		rc = il_coord_get_prefix(hc->c, r->key, &res->kvs, &res->n_kvs, &res->rev);
		break;
	case HC_GET:
		res->kvs = calloc(1, sizeof(*res->kvs));
		rc = res->kvs ? il_coord_get(hc->c, r->key, res->kvs, &res->rev) : IL_COORD_ENOMEM;
		if (rc == IL_COORD_OK)
			res->n_kvs = 1;
		break;
	case HC_PUT:
		rc = il_coord_put(hc->c, r->key, r->value, r->len, r->my_lease ? lease : 0,
				  &res->rev);
		break;
	case HC_RESIGN:
		rc = lease ? il_coord_resign(hc->c, r->key, lease) : IL_COORD_FAILED;
		break;
	case HC_TXN: {
		static struct il_coord_op then[HC_MAX_OPS], other[2];
		struct il_coord_txn_res tr;

		ops_of(r->then, r->n_then, lease, then);
		ops_of(r->other, r->n_else, lease, other);
		rc = il_coord_txn(hc->c, r->cmp, r->n_cmp, then, r->n_then, other, r->n_else, &tr);
		if (rc != IL_COORD_OK)
			break;
		res->succeeded = tr.succeeded;
		res->ambiguous = tr.ambiguous;
		res->rev = tr.rev;
		res->kvs = tr.kvs;
		res->n_kvs = tr.n_kvs;
		tr.kvs = NULL;
		tr.n_kvs = 0;
		il_coord_txn_res_free(&tr);
		if (!res->succeeded && res->ambiguous && r->check_key != NULL) {
			/* The compare failed, but an attempt whose answer was lost
			 * may have been ours: then the key holds exactly our value
			 * (values carry a nonce, so they are unique). */
			for (unsigned i = 0; i < res->n_kvs; i++)
				if (strcmp(res->kvs[i].key, r->check_key) == 0 &&
				    res->kvs[i].value_len == strlen(r->check_value) &&
				    memcmp(res->kvs[i].value, r->check_value,
					   res->kvs[i].value_len) == 0) {
					res->succeeded = true;
					res->rev = res->kvs[i].mod_rev;
				}
		}
		break;
	}
	default:
		rc = IL_COORD_EINVAL;
		break;
	}
	note(hc, res, rc, t0);
	pthread_mutex_lock(&hc->mu);
	il_coord_get_stats(hc->c, &hc->st);
	pthread_mutex_unlock(&hc->mu);
	post(hc, res);
}

/* Grant a lease (again); posts HC_LEASE when it replaces one. */
static void grant(struct ha_coord *hc, bool again)
{
	int64_t id, granted;
	double t0 = now_ms();
	int rc = il_coord_lease_grant(hc->c, hc->ttl_s, &id, &granted);

	atomic_store(&hc->reachable, rc >= 0);
	if (rc != IL_COORD_OK)
		return;
	atomic_store(&hc->lease, id);
	if (again) {
		struct hc_res *res = calloc(1, sizeof(*res));

		if (res == NULL)
			return;
		res->kind = HC_LEASE;
		res->lease = id;
		note(hc, res, rc, t0);
		post(hc, res);
	}
}

static void *hc_main(void *arg)
{
	struct ha_coord *hc = arg;
	double next_ka = 0, period = (double)hc->ttl_s * 1000.0 / 3.0;

	grant(hc, false);
	next_ka = now_ms() + period;
	for (;;) {
		struct hc_req *r = NULL;

		pthread_mutex_lock(&hc->mu);
		while (!hc->stop && hc->q_head == NULL) {
			double left = next_ka - now_ms();

			if (left <= 0)
				break;
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			long long ns = ts.tv_nsec + (long long)(left * 1e6);
			ts.tv_sec += ns / 1000000000LL;
			ts.tv_nsec = ns % 1000000000LL;
			pthread_cond_timedwait(&hc->cv, &hc->mu, &ts);
		}
		if (hc->stop) {
			pthread_mutex_unlock(&hc->mu);
			break;
		}
		if (hc->q_head != NULL) {
			r = hc->q_head;
			hc->q_head = r->next;
			if (hc->q_head == NULL)
				hc->q_tail = NULL;
		}
		pthread_mutex_unlock(&hc->mu);
		if (r != NULL && r->urgent) {
			/* A takeover's transaction does not wait for a keepalive
			 * that fell due at the same moment (the lease has TTL/3
			 * to spare). */
			run(hc, r);
			req_free(r);
			r = NULL;
		}
		if (now_ms() >= next_ka) {
			int64_t lease = atomic_load(&hc->lease);

			next_ka = now_ms() + period;
			if (lease == 0) {
				grant(hc, true);
			} else {
				int rc = il_coord_lease_keepalive(hc->c, lease, NULL);

				atomic_store(&hc->reachable, rc >= 0);
				if (rc == IL_COORD_FAILED) /* gone: what hung on it too */
					grant(hc, true);
			}
		}
		if (r != NULL) {
			run(hc, r);
			req_free(r);
		}
	}
	return NULL;
}

struct ha_coord *hc_open(const struct il_coord_cfg *cfg, int64_t ttl_s, char *err, size_t errlen)
{
	struct ha_coord *hc = calloc(1, sizeof(*hc));
	pthread_condattr_t ca;

	if (hc == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	hc->ttl_s = ttl_s;
	hc->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&hc->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&hc->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&hc->lease, 0);
	atomic_init(&hc->reachable, false);
	hc->c = il_coord_open(cfg, err, errlen);
	if (hc->c == NULL || hc->efd < 0) {
		if (hc->efd < 0)
			snprintf(err, errlen, "eventfd: %s", strerror(errno));
		hc_close(hc);
		return NULL;
	}
	if (pthread_create(&hc->th, NULL, hc_main, hc) != 0) {
		snprintf(err, errlen, "cannot start the etcd thread");
		hc_close(hc);
		return NULL;
	}
	hc->th_ok = true;
	return hc;
}

void hc_close(struct ha_coord *hc)
{
	if (hc == NULL)
		return;
	pthread_mutex_lock(&hc->mu);
	hc->stop = true;
	pthread_cond_signal(&hc->cv);
	pthread_mutex_unlock(&hc->mu);
	if (hc->th_ok)
		pthread_join(hc->th, NULL);
	while (hc->q_head) {
		struct hc_req *r = hc->q_head;

		hc->q_head = r->next;
		req_free(r);
	}
	while (hc->r_head) {
		struct hc_res *r = hc->r_head;

		hc->r_head = r->next;
		hc_res_free(r);
	}
	if (hc->c != NULL)
		il_coord_close(hc->c);
	if (hc->efd >= 0)
		close(hc->efd);
	pthread_mutex_destroy(&hc->mu);
	pthread_cond_destroy(&hc->cv);
	free(hc);
}

int hc_fd(const struct ha_coord *hc)
{
	return hc->efd;
}

uint64_t hc_submit(struct ha_coord *hc, struct hc_req *r)
{
	pthread_mutex_lock(&hc->mu);
	r->id = ++hc->next_id;
	r->next = NULL;
	if (r->urgent) {
		/* After the urgent ones already waiting, before the rest: a
		 * takeover's transactions do not queue behind bookkeeping. */
		struct hc_req **pp = &hc->q_head;

		while (*pp != NULL && (*pp)->urgent)
			pp = &(*pp)->next;
		r->next = *pp;
		*pp = r;
		if (r->next == NULL)
			hc->q_tail = r;
	} else {
		if (hc->q_tail)
			hc->q_tail->next = r;
		else
			hc->q_head = r;
		hc->q_tail = r;
	}
	pthread_cond_signal(&hc->cv);
	pthread_mutex_unlock(&hc->mu);
	return r->id;
}

struct hc_res *hc_next(struct ha_coord *hc)
{
	struct hc_res *r;

	pthread_mutex_lock(&hc->mu);
	r = hc->r_head;
	if (r != NULL) {
		hc->r_head = r->next;
		if (hc->r_head == NULL)
			hc->r_tail = NULL;
		r->next = NULL;
	}
	pthread_mutex_unlock(&hc->mu);
	return r;
}

int64_t hc_lease(const struct ha_coord *hc)
{
	return atomic_load(&((struct ha_coord *)hc)->lease);
}

bool hc_reachable(const struct ha_coord *hc)
{
	return atomic_load(&((struct ha_coord *)hc)->reachable);
}

void hc_stats(const struct ha_coord *hc, struct il_coord_stats *st, uint64_t *calls,
	      uint64_t *failed, double *last_ms)
{
	struct ha_coord *h = (struct ha_coord *)hc;

	pthread_mutex_lock(&h->mu);
	*st = h->st;
	pthread_mutex_unlock(&h->mu);
	*calls = atomic_load(&h->calls);
	*failed = atomic_load(&h->failed);
	*last_ms = atomic_load(&h->last_ms);
}
