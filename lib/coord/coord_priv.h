/* SPDX-License-Identifier: BSD-3-Clause
 * il_coord internals shared by its files: the handle, the transport with
 * endpoint fail-over (coord_http.c), base64 and the JSON <-> key helpers
 * (coord_codec.c). The unit tests use the codec directly.
 */
#ifndef IL_COORD_PRIV_H
#define IL_COORD_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include <interlink/coord.h>

struct coord_buf {
	char *p;
	size_t len, cap;
};

struct il_coord {
	char *ep[IL_COORD_MAX_ENDPOINTS];
	unsigned n_ep, cur;
	unsigned connect_ms, attempt_ms, deadline_ms;
	CURL *curl;
	struct curl_slist *hdrs;
	struct coord_buf resp;
	char err[512];
	struct il_coord_stats st;
};

/* coord_codec.c: pure functions, no I/O. */
/* Append n bytes and keep a terminating NUL; false when out of memory. */
bool coord_buf_append(struct coord_buf *b, const char *data, size_t n);
size_t coord_b64_len(size_t n); /* encoded length, without the terminator */
void coord_b64_encode(const void *in, size_t n, char *out); /* out: coord_b64_len(n) + 1 */
/* Decodes into out (room for 3 * (len / 4) + 3 bytes); returns the byte
 * count or -1 on bad input. */
long coord_b64_decode(const char *in, size_t len, uint8_t *out);
/* A base64 JSON string of n bytes, or NULL (no memory). */
json_t *coord_b64_json(const void *p, size_t n);
/* etcd writes 64-bit numbers as strings (proto3 JSON) and leaves zeros out. */
int64_t coord_json_i64(const json_t *obj, const char *name);
/* A KeyValue object into kv (copies). 0, or -1 (bad base64 / no memory). */
int coord_kv_from_json(const json_t *obj, struct il_coord_kv *kv);
/* The key just past every key that starts with prefix (etcd's range_end
 * for a prefix): a copy into out, *n its length; false when there is none
 * (a prefix of 0xff bytes only: then "\0", every key, is the range end). */
bool coord_prefix_end(const char *prefix, size_t len, char *out, size_t *n);
/* "a,b,c" into malloc'd URLs without a trailing '/'. 0 or -1 (err). */
int coord_parse_endpoints(const char *list, char **ep, unsigned *n, char *err, size_t errlen);
/* A watch stream's bytes: complete JSON objects one after another (etcd's
 * gateway ends each with a newline). Returns the bytes of the first
 * complete object at p (0: not complete yet), skipping leading blanks
 * into *skip. */
size_t coord_stream_object(const char *p, size_t len, size_t *skip);

/* coord_http.c */
enum coord_verdict {
	COORD_ANSWER,    /* an etcd answer (which may be an error code the caller wants) */
	COORD_RETRY,     /* not served here: try another endpoint, nothing was applied */
	COORD_RETRY_AMB, /* not served, and it may have been applied */
	COORD_REJECT,    /* a final error */
};
/* The verdict on an etcd error object {"error", "code"}. */
enum coord_verdict coord_classify_error(int code, const char *msg);

/* POST body (consumed: decref'd) to path on the current endpoint, failing
 * over as needed within the deadline. OK: *resp is the answer (the caller
 * decrefs; an error object only when its code is `accept_code`, e.g. 5 =
 * not found, else it is an error). *ambiguous (may be NULL): an attempt
 * may have been applied. */
int coord_call(struct il_coord *c, const char *path, json_t *body, int accept_code,
	       json_t **resp, bool *ambiguous);
void coord_set_err(struct il_coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* coord_kv.c: a request object's key fields. */
json_t *coord_key_json(const char *key, bool prefix);

#endif
