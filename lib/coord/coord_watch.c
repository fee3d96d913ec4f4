/* SPDX-License-Identifier: BSD-3-Clause
 * il_coord watches: a thread per watch keeps an etcd watch stream open
 * (POST /v3/watch, answers streamed as JSON objects), queues the events,
 * and makes an eventfd readable while any wait, so the control process's
 * io_uring loop can wait on the fd.
 *
 * The stream asks etcd to cancel it when its member loses the cluster's
 * leader (gRPC metadata "hasleader", as etcd's own clients do), and every
 * check_ms the thread reads the watched range through the stream's member
 * (a linearizable read, answered only by a member that is part of the
 * majority): a member that stopped, hangs or sits in a minority partition
 * fails the check and the watch moves to the next endpoint, resuming from
 * the revision after the last event it passed on.
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

#include "coord_priv.h"

#define CHECK_MS 500 /* how often the stream's member is checked */

struct qnode {
	struct qnode *next;
	struct il_coord_event ev;
};

struct il_coord_watch {
	char *key;
	bool prefix;
	int64_t next_rev; /* resume here (0: from now on); watch thread only */
	unsigned n_ep, cur;
	struct il_coord *probe[IL_COORD_MAX_ENDPOINTS]; /* one endpoint each */
	char *ep[IL_COORD_MAX_ENDPOINTS];
	unsigned connect_ms;

	pthread_t th;
	bool th_ok;
	CURLM *multi;
	atomic_bool stop, connected;
	atomic_uint_fast64_t reconnects;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qnode *head, *tail;
	int efd;

	/* The current stream (watch thread only). */
	struct coord_buf in;
	bool ended; /* canceled or an error object: reconnect */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void push(struct il_coord_watch *w, const struct il_coord_event *ev)
{
	struct qnode *q = malloc(sizeof(*q));
	uint64_t one = 1;

	if (q == NULL)
		return; /* out of memory: the caller's next full read recovers */
	q->next = NULL;
	q->ev = *ev;
	pthread_mutex_lock(&w->mu);
	if (w->tail != NULL)
		w->tail->next = q;
	else
		w->head = q;
	w->tail = q;
	if (write(w->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN only at 2^64 - 2 unread writes: readable anyway */
	}
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* One answer of the stream. */
static void on_answer(struct il_coord_watch *w, const json_t *j)
{
	const json_t *r = json_object_get(j, "result");
	const json_t *evs;

	if (r == NULL) { /* {"error": {...}}: the stream is over */
		w->ended = true;
		return;
	}
	if (json_is_true(json_object_get(r, "created")))
		atomic_store(&w->connected, true);
	evs = json_object_get(r, "events");
	for (size_t i = 0; json_is_array(evs) && i < json_array_size(evs); i++) {
		const json_t *e = json_array_get(evs, i);
		const json_t *t = json_object_get(e, "type");
		struct il_coord_event ev = { .type = IL_COORD_EV_PUT };

		if (json_is_string(t) && strcmp(json_string_value(t), "DELETE") == 0)
			ev.type = IL_COORD_EV_DELETE;
		if (coord_kv_from_json(json_object_get(e, "kv"), &ev.kv) != 0)
			continue;
		ev.rev = ev.kv.mod_rev;
		if (ev.rev >= w->next_rev)
			w->next_rev = ev.rev + 1;
		push(w, &ev);
	}
	if (json_is_true(json_object_get(r, "canceled"))) {
		int64_t compact = coord_json_i64(r, "compact_revision");

		if (compact > 0) {
			/* What we would resume from is gone: say so, go on
			 * from the oldest revision still kept. */
			struct il_coord_event ev = { .type = IL_COORD_EV_RESET, .rev = compact };

			w->next_rev = compact;
			push(w, &ev);
		}
		w->ended = true;
	}
}

static size_t on_stream(char *data, size_t size, size_t nmemb, void *arg)
{
	struct il_coord_watch *w = arg;
	struct coord_buf *b = &w->in;
	size_t n = size * nmemb, off = 0, skip, len;

	if (!coord_buf_append(b, data, n))
		return 0;
	while ((len = coord_stream_object(b->p + off, b->len - off, &skip)) > 0) {
		json_error_t jerr;
		json_t *j = json_loadb(b->p + off + skip, len, 0, &jerr);

		if (j != NULL)
			on_answer(w, j);
		json_decref(j);
		off += skip + len;
	}
	memmove(b->p, b->p + off, b->len - off);
	b->len -= off;
	return n;
}

static CURL *stream_open(struct il_coord_watch *w, struct curl_slist *hdrs, char **body)
{
	json_t *req = coord_key_json(w->key, w->prefix), *o = json_object();
	char url[512];
	CURL *h;

	*body = NULL;
	if (req == NULL || o == NULL ||
	    (w->next_rev > 0 &&
	     json_object_set_new(req, "start_revision", json_integer(w->next_rev)) != 0) ||
	    json_object_set_new(o, "create_request", req) != 0) {
		json_decref(o);
		return NULL;
	}
	*body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	h = curl_easy_init();
	if (*body == NULL || h == NULL) {
		curl_easy_cleanup(h);
		return NULL;
	}
	snprintf(url, sizeof(url), "%s/v3/watch", w->ep[w->cur]);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, *body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)w->connect_ms);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 1L);
	return h;
}

/* The stream's member still answers linearizable reads. */
static bool member_ok(struct il_coord_watch *w)
{
	json_t *body = coord_key_json(w->key, w->prefix), *resp;
	int rc;

	if (body == NULL || json_object_set_new(body, "count_only", json_true()) != 0) {
		json_decref(body);
		return true; /* out of memory: no verdict */
	}
	rc = coord_call(w->probe[w->cur], "/v3/kv/range", body, 0, &resp, NULL);
	if (rc == IL_COORD_OK)
		json_decref(resp);
	return rc == IL_COORD_OK;
}

static void *watch_main(void *arg)
{
	struct il_coord_watch *w = arg;
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	bool first = true;

	hdrs = curl_slist_append(hdrs, "Grpc-Metadata-hasleader: true");
	while (!atomic_load(&w->stop)) {
		char *body;
		CURL *h = stream_open(w, hdrs, &body);
		uint64_t next_check = mono_ms() + CHECK_MS;
		bool done = false;

		if (!first)
			atomic_fetch_add(&w->reconnects, 1);
		first = false;
		w->in.len = 0;
		w->ended = false;
		if (h != NULL)
			curl_multi_add_handle(w->multi, h);
		while (h != NULL && !done && !w->ended && !atomic_load(&w->stop)) {
			int running = 0, msgs;
			CURLMsg *m;

			curl_multi_perform(w->multi, &running);
			while ((m = curl_multi_info_read(w->multi, &msgs)) != NULL)
				if (m->msg == CURLMSG_DONE)
					done = true; /* the stream ended: reconnect */
			if (done || w->ended)
				break;
			if (mono_ms() >= next_check) {
				if (!member_ok(w))
					break;
				next_check = mono_ms() + CHECK_MS;
			}
			curl_multi_poll(w->multi, NULL, 0, 100, NULL);
		}
		atomic_store(&w->connected, false);
		if (h != NULL) {
			curl_multi_remove_handle(w->multi, h);
			curl_easy_cleanup(h);
		}
		free(body);
		if (atomic_load(&w->stop))
			break;
		w->cur = (w->cur + 1) % w->n_ep;
		/* Do not hammer a cluster in an election: a short pause,
		 * cut short by il_coord_watch_close. */
		curl_multi_poll(w->multi, NULL, 0, 50, NULL);
	}
	curl_slist_free_all(hdrs);
	return NULL;
}

struct il_coord_watch *il_coord_watch_open(const struct il_coord_cfg *cfg, const char *key,
					   bool prefix, int64_t start_rev, char *err,
					   size_t errlen)
{
	struct il_coord_watch *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->efd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (key == NULL ||
	    coord_parse_endpoints(cfg->endpoints, w->ep, &w->n_ep, err, errlen) != 0) {
		if (key == NULL)
			snprintf(err, errlen, "watch: no key");
		il_coord_watch_close(w);
		return NULL;
	}
	w->key = strdup(key);
	w->prefix = prefix;
	w->next_rev = start_rev;
	w->connect_ms = cfg->connect_ms ? cfg->connect_ms : 100;
	for (unsigned i = 0; i < w->n_ep; i++) {
		struct il_coord_cfg one = *cfg;

		one.endpoints = w->ep[i];
		one.deadline_ms = one.attempt_ms = CHECK_MS;
		w->probe[i] = il_coord_open(&one, err, errlen);
		if (w->probe[i] == NULL) {
			il_coord_watch_close(w);
			return NULL;
		}
	}
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->multi = curl_multi_init();
	if (w->key == NULL || w->efd < 0 || w->multi == NULL) {
		snprintf(err, errlen, "watch: cannot set up (%s)", strerror(errno));
		il_coord_watch_close(w);
		return NULL;
	}
	if (pthread_create(&w->th, NULL, watch_main, w) != 0) {
		snprintf(err, errlen, "watch: cannot start its thread");
		il_coord_watch_close(w);
		return NULL;
	}
	w->th_ok = true;
	return w;
}

int il_coord_watch_fd(const struct il_coord_watch *w)
{
	return w->efd;
}

/* Pop one; with the lock held. */
static int pop(struct il_coord_watch *w, struct il_coord_event *ev)
{
	struct qnode *q = w->head;
	uint64_t v;

	if (q == NULL)
		return IL_COORD_FAILED;
	w->head = q->next;
	if (w->head == NULL) {
		w->tail = NULL;
		/* Empty now: the fd stops being readable. */
		if (read(w->efd, &v, sizeof(v)) < 0) {
			/* EAGAIN: it was not readable */
		}
	}
	*ev = q->ev;
	free(q);
	return IL_COORD_OK;
}

int il_coord_watch_next(struct il_coord_watch *w, struct il_coord_event *ev)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = pop(w, ev);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int il_coord_watch_wait(struct il_coord_watch *w, struct il_coord_event *ev, unsigned timeout_ms)
{
	struct timespec until;
	int rc;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (w->head == NULL)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT)
			break;
	rc = pop(w, ev);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

bool il_coord_watch_connected(const struct il_coord_watch *w)
{
	return atomic_load(&w->connected);
}

uint64_t il_coord_watch_reconnects(const struct il_coord_watch *w)
{
	return atomic_load(&w->reconnects);
}

void il_coord_event_free(struct il_coord_event *ev)
{
	il_coord_kv_free(&ev->kv);
}

void il_coord_watch_close(struct il_coord_watch *w)
{
	struct il_coord_event ev;

	if (w == NULL)
		return;
	atomic_store(&w->stop, true);
	if (w->multi != NULL)
		curl_multi_wakeup(w->multi);
	if (w->th_ok)
		pthread_join(w->th, NULL);
	while (w->head != NULL && pop(w, &ev) == IL_COORD_OK)
		il_coord_event_free(&ev);
	if (w->multi != NULL)
		curl_multi_cleanup(w->multi);
	for (unsigned i = 0; i < w->n_ep; i++) {
		il_coord_close(w->probe[i]);
		free(w->ep[i]);
	}
	if (w->efd >= 0)
		close(w->efd);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w->in.p);
	free(w->key);
	free(w);
}
