/* SPDX-License-Identifier: BSD-3-Clause
 * il_coord's calls: keys (range, put, delete), transactions and the
 * compare-and-swap built on them, leases, and leadership (a key that
 * exists only while its holder's lease lives).
 */
#include <stdlib.h>
#include <string.h>

#include "coord_priv.h"

#define GRPC_NOT_FOUND 5

json_t *coord_key_json(const char *key, bool prefix)
{
	size_t len = strlen(key);
	json_t *o = json_object();

	if (o == NULL || json_object_set_new(o, "key", coord_b64_json(key, len)) != 0)
		goto fail;
	if (prefix) {
		char *end = malloc(len + 1);
		size_t n;
		bool some;

		if (end == NULL)
			goto fail;
		some = coord_prefix_end(key, len, end, &n);
		/* No byte to increment: "\0" means every key from `key` on. */
		int r = json_object_set_new(o, "range_end", some ? coord_b64_json(end, n) :
					    coord_b64_json("", 1));
		free(end);
		if (r != 0)
			goto fail;
	}
	return o;
fail:
	json_decref(o);
	return NULL;
}

static json_t *i64_json(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

static int64_t header_rev(const json_t *resp)
{
	return coord_json_i64(json_object_get(resp, "header"), "revision");
}

/* The "kvs" array of a range answer into a malloc'd array. */
static int kvs_from_json(const json_t *range, struct il_coord_kv **kvs, unsigned *n)
{
	const json_t *arr = json_object_get(range, "kvs");
	size_t count = json_is_array(arr) ? json_array_size(arr) : 0;

	*kvs = NULL;
	*n = 0;
	if (count == 0)
		return 0;
	*kvs = calloc(count, sizeof(**kvs));
	if (*kvs == NULL)
		return IL_COORD_ENOMEM;
	for (size_t i = 0; i < count; i++) {
		if (coord_kv_from_json(json_array_get(arr, i), &(*kvs)[i]) != 0) {
			il_coord_kvs_free(*kvs, (unsigned)i);
			*kvs = NULL;
			return IL_COORD_EPROTO;
		}
	}
	*n = (unsigned)count;
	return 0;
}

int il_coord_get_prefix(struct il_coord *c, const char *prefix, struct il_coord_kv **kvs,
			unsigned *n, int64_t *rev)
{
	json_t *resp;
	int rc = coord_call(c, "/v3/kv/range", coord_key_json(prefix, true), 0, &resp, NULL);

	*kvs = NULL;
	*n = 0;
	if (rc != IL_COORD_OK)
		return rc;
	if (rev != NULL)
		*rev = header_rev(resp);
	rc = kvs_from_json(resp, kvs, n);
	json_decref(resp);
	return rc;
}

int il_coord_get(struct il_coord *c, const char *key, struct il_coord_kv *kv, int64_t *rev)
{
	struct il_coord_kv *kvs;
	unsigned n;
	json_t *resp;
	int rc = coord_call(c, "/v3/kv/range", coord_key_json(key, false), 0, &resp, NULL);

	memset(kv, 0, sizeof(*kv));
	if (rc != IL_COORD_OK)
		return rc;
	if (rev != NULL)
		*rev = header_rev(resp);
	rc = kvs_from_json(resp, &kvs, &n);
	json_decref(resp);
	if (rc != 0)
		return rc;
	if (n == 0)
		return IL_COORD_FAILED;
	*kv = kvs[0];
	memset(&kvs[0], 0, sizeof(kvs[0]));
	il_coord_kvs_free(kvs, n);
	return IL_COORD_OK;
}

static json_t *put_json(const char *key, const void *val, size_t len, int64_t lease)
{
	json_t *o = coord_key_json(key, false);

	if (o == NULL || json_object_set_new(o, "value", coord_b64_json(val, len)) != 0 ||
	    (lease != 0 && json_object_set_new(o, "lease", i64_json(lease)) != 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int il_coord_put(struct il_coord *c, const char *key, const void *val, size_t len, int64_t lease,
		 int64_t *rev)
{
	json_t *resp;
	int rc = coord_call(c, "/v3/kv/put", put_json(key, val, len, lease), 0, &resp, NULL);

	if (rc == IL_COORD_OK) {
		if (rev != NULL)
			*rev = header_rev(resp);
		json_decref(resp);
	}
	return rc;
}

int il_coord_delete(struct il_coord *c, const char *key, int64_t *rev)
{
	json_t *resp;
	int rc = coord_call(c, "/v3/kv/deleterange", coord_key_json(key, false), 0, &resp, NULL);

	if (rc != IL_COORD_OK)
		return rc;
	if (rev != NULL)
		*rev = header_rev(resp);
	rc = coord_json_i64(resp, "deleted") > 0 ? IL_COORD_OK : IL_COORD_FAILED;
	json_decref(resp);
	return rc;
}

static json_t *cmp_json(const struct il_coord_cmp *k)
{
	static const char *const target[] = { "VERSION", "CREATE", "MOD", "VALUE", "LEASE" };
	static const char *const field[] = { "version", "create_revision", "mod_revision", "value",
					     "lease" };
	static const char *const rel[] = { "EQUAL", "NOT_EQUAL", "LESS", "GREATER" };
	json_t *o;

	if (k->key == NULL || (unsigned)k->target > IL_COORD_LEASE || (unsigned)k->rel > IL_COORD_GT)
		return NULL;
	o = coord_key_json(k->key, false);
	if (o == NULL || json_object_set_new(o, "target", json_string(target[k->target])) != 0 ||
	    json_object_set_new(o, "result", json_string(rel[k->rel])) != 0 ||
	    json_object_set_new(o, field[k->target],
				k->target == IL_COORD_VALUE ? coord_b64_json(k->value, k->value_len) :
				i64_json(k->num)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *op_json(const struct il_coord_op *op)
{
	json_t *inner, *o;
	const char *name;

	if (op->key == NULL)
		return NULL;
	switch (op->type) {
	case IL_COORD_OP_PUT:
		name = "request_put";
		inner = put_json(op->key, op->value, op->value_len, op->lease);
		break;
	case IL_COORD_OP_DELETE:
		name = "request_delete_range";
		inner = coord_key_json(op->key, op->prefix);
		break;
	case IL_COORD_OP_GET:
		name = "request_range";
		inner = coord_key_json(op->key, op->prefix);
		break;
	default:
		return NULL;
	}
	o = json_object();
	if (inner == NULL || o == NULL || json_object_set_new(o, name, inner) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *ops_json(const struct il_coord_op *ops, unsigned n)
{
	json_t *a = json_array();

	for (unsigned i = 0; a != NULL && i < n; i++) {
		json_t *o = op_json(&ops[i]);

		if (o == NULL || json_array_append_new(a, o) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void il_coord_txn_res_free(struct il_coord_txn_res *res)
{
	il_coord_kvs_free(res->kvs, res->n_kvs);
	res->kvs = NULL;
	res->n_kvs = 0;
}

/* Append what every range response of the branch returned. */
static int txn_collect(const json_t *resp, struct il_coord_txn_res *res)
{
	const json_t *arr = json_object_get(resp, "responses");

	for (size_t i = 0; json_is_array(arr) && i < json_array_size(arr); i++) {
		const json_t *r = json_object_get(json_array_get(arr, i), "response_range");
		struct il_coord_kv *kvs, *all;
		unsigned n;
		int rc;

		if (r == NULL)
			continue;
		rc = kvs_from_json(r, &kvs, &n);
		if (rc != 0)
			return rc;
		if (n == 0)
			continue;
		all = realloc(res->kvs, (res->n_kvs + n) * sizeof(*all));
		if (all == NULL) {
			il_coord_kvs_free(kvs, n);
			return IL_COORD_ENOMEM;
		}
		memcpy(all + res->n_kvs, kvs, n * sizeof(*kvs));
		free(kvs);
		res->kvs = all;
		res->n_kvs += n;
	}
	return 0;
}

int il_coord_txn(struct il_coord *c, const struct il_coord_cmp *cmp, unsigned n_cmp,
		 const struct il_coord_op *then, unsigned n_then, const struct il_coord_op *otherwise,
		 unsigned n_otherwise, struct il_coord_txn_res *res)
{
	json_t *body = json_object(), *ca = json_array(), *resp;
	int rc;

	memset(res, 0, sizeof(*res));
	for (unsigned i = 0; ca != NULL && i < n_cmp; i++) {
		json_t *o = cmp_json(&cmp[i]);

		if (o == NULL || json_array_append_new(ca, o) != 0) {
			json_decref(ca);
			ca = NULL;
		}
	}
	if (body == NULL || ca == NULL || json_object_set_new(body, "compare", ca) != 0 ||
	    json_object_set_new(body, "success", ops_json(then, n_then)) != 0 ||
	    json_object_set_new(body, "failure", ops_json(otherwise, n_otherwise)) != 0) {
		json_decref(body);
		coord_set_err(c, "txn: a compare or operation without a key, or out of memory");
		return IL_COORD_EINVAL;
	}
	rc = coord_call(c, "/v3/kv/txn", body, 0, &resp, &res->ambiguous);
	if (rc != IL_COORD_OK)
		return rc;
	res->succeeded = json_is_true(json_object_get(resp, "succeeded"));
	res->rev = header_rev(resp);
	rc = txn_collect(resp, res);
	json_decref(resp);
	if (rc != 0)
		il_coord_txn_res_free(res);
	return rc;
}

/* Put key = val (with lease) if cmp holds, else read key: what both the
 * compare-and-swap and the campaign are. OK: put (*rev its revision, res
 * freed); FAILED: not put, res holds the key as it is (free it). */
static int put_or_get(struct il_coord *c, const struct il_coord_cmp *cmp, const char *key,
		      const void *val, size_t len, int64_t lease, int64_t *rev,
		      struct il_coord_txn_res *res)
{
	const struct il_coord_op put = { .type = IL_COORD_OP_PUT, .key = key, .value = val,
					 .value_len = len, .lease = lease };
	const struct il_coord_op get = { .type = IL_COORD_OP_GET, .key = key };
	int rc = il_coord_txn(c, cmp, 1, &put, 1, &get, 1, res);

	if (rc != IL_COORD_OK)
		return rc;
	if (!res->succeeded)
		return IL_COORD_FAILED;
	if (rev != NULL)
		*rev = res->rev;
	il_coord_txn_res_free(res);
	return IL_COORD_OK;
}

int il_coord_cas(struct il_coord *c, const char *key, int64_t expect_mod, const void *val,
		 size_t len, int64_t lease, int64_t *rev, struct il_coord_kv *cur)
{
	const struct il_coord_cmp cmp = { .key = key, .target = IL_COORD_MOD, .rel = IL_COORD_EQ,
					  .num = expect_mod };
	struct il_coord_txn_res res;
	int rc;

	if (cur != NULL)
		memset(cur, 0, sizeof(*cur));
	rc = put_or_get(c, &cmp, key, val, len, lease, rev, &res);
	if (rc != IL_COORD_FAILED)
		return rc;
	if (res.n_kvs == 1 && res.ambiguous && res.kvs[0].value_len == len &&
	    memcmp(res.kvs[0].value, val, len) == 0 && res.kvs[0].mod_rev > expect_mod &&
	    res.kvs[0].lease == lease) {
		/* Our earlier attempt went through before its answer was lost. */
		if (rev != NULL)
			*rev = res.kvs[0].mod_rev;
		rc = IL_COORD_OK;
	}
	if (cur != NULL && res.n_kvs == 1) {
		*cur = res.kvs[0];
		memset(&res.kvs[0], 0, sizeof(res.kvs[0]));
	}
	il_coord_txn_res_free(&res);
	return rc;
}

int il_coord_lease_grant(struct il_coord *c, int64_t ttl_s, int64_t *id, int64_t *granted)
{
	json_t *body = json_object(), *resp;
	int rc;

	if (ttl_s <= 0) {
		json_decref(body);
		coord_set_err(c, "lease TTL %lld: must be at least 1 second", (long long)ttl_s);
		return IL_COORD_EINVAL;
	}
	if (body == NULL || json_object_set_new(body, "TTL", i64_json(ttl_s)) != 0) {
		json_decref(body);
		return IL_COORD_ENOMEM;
	}
	rc = coord_call(c, "/v3/lease/grant", body, 0, &resp, NULL);
	if (rc != IL_COORD_OK)
		return rc;
	*id = coord_json_i64(resp, "ID");
	if (granted != NULL)
		*granted = coord_json_i64(resp, "TTL");
	json_decref(resp);
	if (*id == 0) {
		coord_set_err(c, "lease grant: the answer has no lease ID");
		return IL_COORD_EPROTO;
	}
	return IL_COORD_OK;
}

static json_t *lease_body(int64_t id)
{
	json_t *o = json_object();

	if (o != NULL && json_object_set_new(o, "ID", i64_json(id)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int il_coord_lease_keepalive(struct il_coord *c, int64_t id, int64_t *ttl_left)
{
	json_t *resp;
	int rc = coord_call(c, "/v3/lease/keepalive", lease_body(id), 0, &resp, NULL);

	if (rc != IL_COORD_OK)
		return rc;
	/* A stream of answers, one per request; ours is the first. A lease
	 * that is gone answers with its ID and no TTL. */
	int64_t ttl = coord_json_i64(json_object_get(resp, "result"), "TTL");

	json_decref(resp);
	if (ttl_left != NULL)
		*ttl_left = ttl;
	return ttl > 0 ? IL_COORD_OK : IL_COORD_FAILED;
}

int il_coord_lease_revoke(struct il_coord *c, int64_t id)
{
	json_t *resp;
	int rc = coord_call(c, "/v3/lease/revoke", lease_body(id), GRPC_NOT_FOUND, &resp, NULL);

	if (rc != IL_COORD_OK)
		return rc;
	rc = json_object_get(resp, "error") != NULL ? IL_COORD_FAILED : IL_COORD_OK;
	json_decref(resp);
	return rc;
}

int il_coord_campaign(struct il_coord *c, const char *key, const void *val, size_t len,
		      int64_t lease, int64_t *rev, struct il_coord_kv *holder)
{
	const struct il_coord_cmp cmp = { .key = key, .target = IL_COORD_CREATE, .rel = IL_COORD_EQ,
					  .num = 0 };
	struct il_coord_txn_res res;
	int rc;

	if (holder != NULL)
		memset(holder, 0, sizeof(*holder));
	if (lease == 0) {
		coord_set_err(c, "campaign for '%s': a leadership key needs a lease", key);
		return IL_COORD_EINVAL;
	}
	rc = put_or_get(c, &cmp, key, val, len, lease, rev, &res);
	if (rc != IL_COORD_FAILED)
		return rc;
	/* Held already: by our own lease (an earlier attempt of ours whose
	 * answer was lost, or a campaign repeated), or by someone else. */
	rc = res.n_kvs == 1 && res.kvs[0].lease == lease ? IL_COORD_OK : IL_COORD_FAILED;
	if (rc == IL_COORD_OK && rev != NULL)
		*rev = res.kvs[0].create_rev;
	if (holder != NULL && res.n_kvs == 1) {
		*holder = res.kvs[0];
		memset(&res.kvs[0], 0, sizeof(res.kvs[0]));
	}
	il_coord_txn_res_free(&res);
	return rc;
}

int il_coord_resign(struct il_coord *c, const char *key, int64_t lease)
{
	const struct il_coord_cmp cmp = { .key = key, .target = IL_COORD_LEASE, .rel = IL_COORD_EQ,
					  .num = lease };
	const struct il_coord_op del = { .type = IL_COORD_OP_DELETE, .key = key };
	struct il_coord_txn_res res;
	int rc = il_coord_txn(c, &cmp, 1, &del, 1, NULL, 0, &res);

	if (rc != IL_COORD_OK)
		return rc;
	rc = res.succeeded ? IL_COORD_OK : IL_COORD_FAILED;
	il_coord_txn_res_free(&res);
	return rc;
}
