/* SPDX-License-Identifier: BSD-3-Clause
 * il_coord's pure parts: base64 (etcd's gateway carries keys and values as
 * base64 strings), 64-bit numbers written as JSON strings, KeyValue
 * objects, prefix range ends, endpoint lists and the watch stream framing.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_priv.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool coord_buf_append(struct coord_buf *b, const char *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (p == NULL)
			return false;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return true;
}

size_t coord_b64_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

void coord_b64_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	size_t i = 0, o = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = b64[(v >> 6) & 63];
		out[o++] = b64[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = b64[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
}

static int b64_val(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

long coord_b64_decode(const char *in, size_t len, uint8_t *out)
{
	uint32_t acc = 0;
	unsigned bits = 0;
	long o = 0;
	size_t i;

	while (len > 0 && in[len - 1] == '=')
		len--;
	for (i = 0; i < len; i++) {
		int v = b64_val(in[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	/* A single leftover character carries no whole byte: malformed. */
	return len % 4 == 1 ? -1 : o;
}

json_t *coord_b64_json(const void *p, size_t n)
{
	char *s = malloc(coord_b64_len(n) + 1);
	json_t *j;

	if (s == NULL)
		return NULL;
	coord_b64_encode(p, n, s);
	j = json_string(s);
	free(s);
	return j;
}

int64_t coord_json_i64(const json_t *obj, const char *name)
{
	const json_t *v = json_object_get(obj, name);

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_string(v)) {
		char *end;
		long long x;

		errno = 0;
		x = strtoll(json_string_value(v), &end, 10);
		if (errno == 0 && *end == '\0')
			return (int64_t)x;
	}
	return 0;
}

/* A base64 field into a NUL-terminated malloc'd copy. */
static int b64_field(const json_t *obj, const char *name, char **out, size_t *n)
{
	const json_t *v = json_object_get(obj, name);
	const char *s = json_is_string(v) ? json_string_value(v) : "";
	size_t len = strlen(s);
	uint8_t *b = malloc(len / 4 * 3 + 4);
	long k;

	if (b == NULL)
		return -1;
	k = coord_b64_decode(s, len, b);
	if (k < 0) {
		free(b);
		return -1;
	}
	b[k] = '\0';
	*out = (char *)b;
	*n = (size_t)k;
	return 0;
}

int coord_kv_from_json(const json_t *obj, struct il_coord_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(obj))
		return -1;
	if (b64_field(obj, "key", &kv->key, &kv->key_len) != 0 ||
	    b64_field(obj, "value", &kv->value, &kv->value_len) != 0) {
		il_coord_kv_free(kv);
		return -1;
	}
	kv->create_rev = coord_json_i64(obj, "create_revision");
	kv->mod_rev = coord_json_i64(obj, "mod_revision");
	kv->version = coord_json_i64(obj, "version");
	kv->lease = coord_json_i64(obj, "lease");
	return 0;
}

void il_coord_kv_free(struct il_coord_kv *kv)
{
	if (kv == NULL)
		return;
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

void il_coord_kvs_free(struct il_coord_kv *kvs, unsigned n)
{
	for (unsigned i = 0; kvs != NULL && i < n; i++)
		il_coord_kv_free(&kvs[i]);
	free(kvs);
}

bool coord_prefix_end(const char *prefix, size_t len, char *out, size_t *n)
{
	/* Increment the last byte that is not 0xff and cut what follows. */
	memcpy(out, prefix, len);
	while (len > 0) {
		uint8_t b = (uint8_t)out[len - 1];

		if (b != 0xff) {
			out[len - 1] = (char)(b + 1);
			*n = len;
			return true;
		}
		len--;
	}
	*n = 0;
	return false;
}

int coord_parse_endpoints(const char *list, char **ep, unsigned *n, char *err, size_t errlen)
{
	const char *p = list;

	*n = 0;
	if (list == NULL || *list == '\0') {
		snprintf(err, errlen, "no etcd endpoint given (a comma-separated list of URLs, "
			 "e.g. http://127.0.0.1:2379)");
		return -1;
	}
	while (*p) {
		size_t len = strcspn(p, ",");
		const char *s = p;

		p += len + (p[len] == ',');
		while (len > 0 && isspace((unsigned char)*s)) {
			s++;
			len--;
		}
		while (len > 0 && (isspace((unsigned char)s[len - 1]) || s[len - 1] == '/'))
			len--;
		if (len == 0)
			continue;
		if ((len < 8 || strncmp(s, "http://", 7) != 0) &&
		    (len < 9 || strncmp(s, "https://", 8) != 0)) {
			snprintf(err, errlen, "etcd endpoint '%.*s' is not an http:// or https:// URL",
				 (int)len, s);
			goto fail;
		}
		if (*n == IL_COORD_MAX_ENDPOINTS) {
			snprintf(err, errlen, "more than %d etcd endpoints", IL_COORD_MAX_ENDPOINTS);
			goto fail;
		}
		ep[*n] = strndup(s, len);
		if (ep[*n] == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		(*n)++;
	}
	if (*n == 0) {
		snprintf(err, errlen, "no etcd endpoint in '%s'", list);
		return -1;
	}
	return 0;
fail:
	while (*n > 0)
		free(ep[--*n]);
	return -1;
}

size_t coord_stream_object(const char *p, size_t len, size_t *skip)
{
	size_t i = 0, depth = 0;
	bool str = false, esc = false;

	while (i < len && isspace((unsigned char)p[i]))
		i++;
	*skip = i;
	if (i == len)
		return 0;
	for (size_t j = i; j < len; j++) {
		char ch = p[j];

		if (str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				str = false;
			continue;
		}
		if (ch == '"')
			str = true;
		else if (ch == '{' || ch == '[')
			depth++;
		else if ((ch == '}' || ch == ']') && depth > 0 && --depth == 0)
			return j + 1 - i;
	}
	return 0;
}
