/* SPDX-License-Identifier: BSD-3-Clause
 * The pair's etcd values as JSON (ha_record.h), with jansson.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ha_record.h"

static int bad(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s", what);
	return -1;
}

static bool u64_of(json_t *o, const char *k, uint64_t *out)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static int cut_parse(json_t *o, struct ha_cut *c)
{
	const char *k;
	json_t *v;

	c->n = 0;
	json_object_foreach(o, k, v)
	{
		char *end;
		unsigned long g = strtoul(k, &end, 10);

		if (*k == '\0' || *end != '\0' || g > 65535 || !json_is_integer(v) ||
		    json_integer_value(v) < 0 || c->n == HA_MAX_CUT)
			return -1;
		c->g[c->n].group = (uint16_t)g;
		c->g[c->n++].seq = (uint64_t)json_integer_value(v);
	}
	return 0;
}

static json_t *cut_json(const struct ha_cut *c)
{
	json_t *o = json_object();
	char k[8];

	for (unsigned i = 0; o != NULL && i < c->n; i++) {
		snprintf(k, sizeof(k), "%u", c->g[i].group);
		json_object_set_new(o, k, json_integer((json_int_t)c->g[i].seq));
	}
	return o;
}

bool ha_cut_get(const struct ha_cut *c, uint16_t g, uint64_t *seq)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->g[i].group == g) {
			*seq = c->g[i].seq;
			return true;
		}
	return false;
}

void ha_cut_put(struct ha_cut *c, uint16_t g, uint64_t seq)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->g[i].group == g) {
			c->g[i].seq = seq;
			return;
		}
	if (c->n < HA_MAX_CUT) {
		c->g[c->n].group = g;
		c->g[c->n++].seq = seq;
	}
}

int ha_record_parse(const char *json, size_t len, struct ha_record *r, char *err, size_t errlen)
{
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je), *v;
	uint64_t x;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(o)) {
		json_decref(o);
		return bad(err, errlen, "epoch record: not a JSON object");
	}
	if (!u64_of(o, "epoch", &x) || x == 0 || x > UINT32_MAX) {
		rc = bad(err, errlen, "epoch record: no epoch");
		goto out;
	}
	r->epoch = (uint32_t)x;
	if (u64_of(o, "prev", &x) && x <= UINT32_MAX)
		r->prev = (uint32_t)x;
	v = json_object_get(o, "owner");
	if (!json_is_string(v) || json_string_length(v) > HA_NODE_LEN) {
		rc = bad(err, errlen, "epoch record: no owner");
		goto out;
	}
	snprintf(r->owner, sizeof(r->owner), "%s", json_string_value(v));
	v = json_object_get(o, "cut");
	if (json_is_object(v)) {
		if (cut_parse(v, &r->cut) != 0) {
			rc = bad(err, errlen, "epoch record: bad cut");
			goto out;
		}
		r->cut_set = true;
	}
	v = json_object_get(o, "final");
	if (json_is_object(v)) {
		if (cut_parse(v, &r->final) != 0) {
			rc = bad(err, errlen, "epoch record: bad final");
			goto out;
		}
		r->final_set = true;
	}
	v = json_object_get(o, "to");
	if (json_is_string(v) && json_string_length(v) <= HA_NODE_LEN)
		snprintf(r->to, sizeof(r->to), "%s", json_string_value(v));
	if (u64_of(o, "views", &x))
		r->views = x;
	if (u64_of(o, "nonce", &x))
		r->nonce = x;
	r->exists = true;
out:
	json_decref(o);
	return rc;
}

char *ha_record_json(const struct ha_record *r)
{
	json_t *o = json_object();
	char *s;

	json_object_set_new(o, "epoch", json_integer(r->epoch));
	json_object_set_new(o, "owner", json_string(r->owner));
	json_object_set_new(o, "prev", json_integer(r->prev));
	json_object_set_new(o, "cut", r->cut_set ? cut_json(&r->cut) : json_null());
	json_object_set_new(o, "views", json_integer((json_int_t)r->views));
	if (r->final_set) {
		json_object_set_new(o, "final", cut_json(&r->final));
		json_object_set_new(o, "to", json_string(r->to));
	}
	/* Unique: a writer recognises its own value after a lost answer. */
	json_object_set_new(o, "nonce", json_integer((json_int_t)(r->nonce & INT64_MAX)));
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

int ha_view_parse(const char *json, size_t len, uint16_t group, struct ha_view *v, char *err,
		  size_t errlen)
{
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je), *a;
	uint64_t x;
	int rc = 0;

	memset(v, 0, sizeof(*v));
	v->group = group;
	if (!json_is_object(o) || !u64_of(o, "epoch", &x) || x > UINT32_MAX) {
		rc = bad(err, errlen, "view: not a view record");
		goto out;
	}
	v->epoch = (uint32_t)x;
	if (u64_of(o, "view_id", &x))
		v->view_id = x;
	a = json_object_get(o, "members");
	if (!json_is_array(a)) {
		rc = bad(err, errlen, "view: no members");
		goto out;
	}
	v->m = calloc(json_array_size(a) + 1, sizeof(*v->m));
	if (v->m == NULL) {
		rc = bad(err, errlen, "view: out of memory");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *e = json_array_get(a, i);
		json_int_t f[3];

		if (!json_is_array(e) || json_array_size(e) != 3) {
			rc = bad(err, errlen, "view: bad member");
			goto out;
		}
		for (unsigned k = 0; k < 3; k++) {
			json_t *n = json_array_get(e, k);

			if (!json_is_integer(n) || json_integer_value(n) < 0 ||
			    json_integer_value(n) > UINT32_MAX) {
				rc = bad(err, errlen, "view: bad member");
				goto out;
			}
			f[k] = json_integer_value(n);
		}
		v->m[v->n++] = (struct ha_member){ (uint32_t)f[0], (uint32_t)f[1], (uint32_t)f[2] };
	}
out:
	json_decref(o);
	if (rc != 0)
		ha_view_free(v);
	return rc;
}

char *ha_view_json(const struct ha_view *v)
{
	json_t *o = json_object(), *a = json_array();
	char *s;

	json_object_set_new(o, "epoch", json_integer(v->epoch));
	json_object_set_new(o, "view_id", json_integer((json_int_t)v->view_id));
	for (unsigned i = 0; i < v->n; i++)
		json_array_append_new(a, json_pack("[III]", (json_int_t)v->m[i].id,
						   (json_int_t)v->m[i].roles,
						   (json_int_t)v->m[i].incarnation));
	json_object_set_new(o, "members", a);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

void ha_view_free(struct ha_view *v)
{
	free(v->m);
	v->m = NULL;
	v->n = 0;
}
