/* SPDX-License-Identifier: BSD-3-Clause
 * il_coord's transport: one keep-alive HTTP connection to the endpoint that
 * answered last, and fail-over to the next endpoint when it does not
 * answer or cannot serve (no leader, leader changed, request timed out),
 * within the call's deadline.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coord_priv.h"

/* gRPC status codes etcd answers with (google.golang.org/grpc/codes). */
enum {
	GRPC_CANCELED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_DEADLINE = 4,
	GRPC_ABORTED = 10,
	GRPC_UNAVAILABLE = 14,
};

void il_coord_cfg_init(struct il_coord_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->connect_ms = 100;
	cfg->attempt_ms = 500;
	cfg->deadline_ms = 2000;
}

void coord_set_err(struct il_coord *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	/* Returning less than given makes curl fail the transfer. */
	return coord_buf_append(arg, data, size * nmemb) ? size * nmemb : 0;
}

struct il_coord *il_coord_open(const struct il_coord_cfg *cfg, char *err, size_t errlen)
{
	static bool curl_ready;
	struct il_coord *c;

	if (cfg->connect_ms == 0 || cfg->attempt_ms == 0 || cfg->deadline_ms < cfg->attempt_ms) {
		snprintf(err, errlen, "etcd timeouts: connect %u ms, attempt %u ms and deadline %u ms "
			 "must be positive, with the deadline at least one attempt", cfg->connect_ms,
			 cfg->attempt_ms, cfg->deadline_ms);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (coord_parse_endpoints(cfg->endpoints, c->ep, &c->n_ep, err, errlen) != 0) {
		free(c);
		return NULL;
	}
	if (!curl_ready) {
		/* Not thread-safe by itself: the control process opens its
		 * handles before it starts the watch threads. */
		curl_global_init(CURL_GLOBAL_DEFAULT);
		curl_ready = true;
	}
	c->connect_ms = cfg->connect_ms;
	c->attempt_ms = cfg->attempt_ms;
	c->deadline_ms = cfg->deadline_ms;
	c->curl = curl_easy_init();
	c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (c->curl == NULL || c->hdrs == NULL) {
		snprintf(err, errlen, "cannot set up libcurl");
		il_coord_close(c);
		return NULL;
	}
	return c;
}

void il_coord_close(struct il_coord *c)
{
	if (c == NULL)
		return;
	if (c->curl != NULL)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->hdrs);
	for (unsigned i = 0; i < c->n_ep; i++)
		free(c->ep[i]);
	free(c->resp.p);
	free(c);
}

const char *il_coord_strerror(const struct il_coord *c)
{
	return c->err[0] ? c->err : "no error";
}

const char *il_coord_endpoint(const struct il_coord *c)
{
	return c->ep[c->cur];
}

void il_coord_get_stats(const struct il_coord *c, struct il_coord_stats *st)
{
	*st = c->st;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

enum coord_verdict coord_classify_error(int code, const char *msg)
{
	switch (code) {
	case GRPC_UNAVAILABLE:
		/* "no leader" is refused before anything is proposed; "request
		 * timed out" and "leader changed" may have been applied. */
		if (msg != NULL && strstr(msg, "no leader") != NULL)
			return COORD_RETRY;
		return COORD_RETRY_AMB;
	case GRPC_CANCELED:
	case GRPC_DEADLINE:
	case GRPC_ABORTED:
		return COORD_RETRY_AMB;
	case GRPC_UNKNOWN:
		/* Older gateways map "leader changed" here. */
		if (msg != NULL && (strstr(msg, "leader") != NULL || strstr(msg, "timed out") != NULL))
			return COORD_RETRY_AMB;
		return COORD_REJECT;
	default:
		return COORD_REJECT;
	}
}

/* One attempt on endpoint c->cur. */
static enum coord_verdict attempt(struct il_coord *c, const char *path, const char *body,
				  unsigned budget_ms, int accept_code, json_t **resp)
{
	char url[512];
	CURLcode rc;
	long status = 0;
	curl_off_t sent = 0;

	snprintf(url, sizeof(url), "%s%s", c->ep[c->cur], path);
	c->resp.len = 0;
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->hdrs);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->resp);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(c->connect_ms < budget_ms ? c->connect_ms : budget_ms));
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)budget_ms);
	curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
	c->st.requests++;
	rc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_SIZE_UPLOAD_T, &sent);
	if (rc != CURLE_OK) {
		coord_set_err(c, "%s: %s", c->ep[c->cur], curl_easy_strerror(rc));
		/* Refused or never connected: nothing reached etcd. */
		if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || sent == 0)
			return COORD_RETRY;
		return COORD_RETRY_AMB;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	json_error_t jerr;
	json_t *j = c->resp.len ? json_loadb(c->resp.p, c->resp.len, 0, &jerr) : NULL;

	if (!json_is_object(j)) {
		coord_set_err(c, "%s: HTTP %ld, not a JSON object: %.120s", c->ep[c->cur], status,
			      c->resp.len ? c->resp.p : "(empty)");
		json_decref(j);
		/* A proxy or a member shutting down: let another one answer. */
		return status >= 500 ? COORD_RETRY_AMB : COORD_REJECT;
	}
	const json_t *e = json_object_get(j, "error");
	if (e != NULL) {
		int code = (int)coord_json_i64(j, "code");
		const char *msg = json_is_string(e) ? json_string_value(e) : "?";

		coord_set_err(c, "%s: %s (code %d)", c->ep[c->cur], msg, code);
		if (code == accept_code && accept_code != 0) {
			*resp = j;
			return COORD_ANSWER;
		}
		/* msg lives in j: judge it before letting j go. */
		enum coord_verdict v = coord_classify_error(code, msg);

		json_decref(j);
		return v;
	}
	*resp = j;
	return COORD_ANSWER;
}

int coord_call(struct il_coord *c, const char *path, json_t *body, int accept_code,
	       json_t **resp, bool *ambiguous)
{
	char *text = json_dumps(body, JSON_COMPACT);
	uint64_t deadline = mono_ms() + c->deadline_ms;
	unsigned tried = 0;
	int rc = IL_COORD_EUNAVAIL;

	json_decref(body);
	*resp = NULL;
	if (ambiguous != NULL)
		*ambiguous = false;
	if (text == NULL) {
		coord_set_err(c, "out of memory");
		return IL_COORD_ENOMEM;
	}
	c->st.calls++;
	for (;;) {
		uint64_t now = mono_ms();

		if (now >= deadline)
			break;
		unsigned left = (unsigned)(deadline - now);
		enum coord_verdict v = attempt(c, path, text, left < c->attempt_ms ? left :
					       c->attempt_ms, accept_code, resp);

		if (v == COORD_ANSWER) {
			rc = IL_COORD_OK;
			break;
		}
		if (v == COORD_REJECT) {
			rc = IL_COORD_EREJECTED;
			break;
		}
		if (v == COORD_RETRY_AMB) {
			c->st.ambiguous++;
			if (ambiguous != NULL)
				*ambiguous = true;
		}
		/* Next endpoint; after a full round of refusals pause a
		 * little so that an election can finish. */
		c->cur = (c->cur + 1) % c->n_ep;
		c->st.failovers++;
		if (++tried % c->n_ep == 0) {
			struct timespec ts = { 0, 20 * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	if (rc == IL_COORD_EUNAVAIL) {
		char last[sizeof(c->err)];

		memcpy(last, c->err, sizeof(last));
		coord_set_err(c, "no etcd endpoint answered within %u ms (last: %s)", c->deadline_ms,
			      last[0] ? last : "none tried");
		c->st.unavailable++;
	}
	free(text);
	return rc;
}
