/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <yaml.h>

#include <interlink/config.h>

struct il_cfg {
	enum il_cfg_kind kind;
	char *path;
	char *scalar;
	unsigned n, cap;
	char **keys;            /* maps only */
	struct il_cfg **kids;
	bool is_default;        /* added by a getter: the key was absent */
};

/* Getters add the defaults they hand out to the tree, so that
 * il_cfg_dump() shows the effective configuration. Off unless asked
 * for: some callers probe keys with a placeholder default. */
static bool record_defaults;

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static struct il_cfg *node_new(enum il_cfg_kind k, const char *path)
{
	struct il_cfg *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->kind = k;
	n->path = strdup(path ? path : "");
	if (!n->path) {
		free(n);
		return NULL;
	}
	return n;
}

void il_cfg_free(struct il_cfg *n)
{
	if (!n)
		return;
	for (unsigned i = 0; i < n->n; i++) {
		il_cfg_free(n->kids[i]);
		if (n->keys)
			free(n->keys[i]);
	}
	free(n->kids);
	free(n->keys);
	free(n->scalar);
	free(n->path);
	free(n);
}

static int node_add(struct il_cfg *parent, const char *key, struct il_cfg *kid)
{
	if (parent->n == parent->cap) {
		unsigned cap = parent->cap ? parent->cap * 2 : 8;
		struct il_cfg **k = realloc(parent->kids, cap * sizeof(*k));
		if (!k)
			return -1;
		parent->kids = k;
		if (parent->kind == IL_CFG_MAP) {
			char **ks = realloc(parent->keys, cap * sizeof(*ks));
			if (!ks)
				return -1;
			parent->keys = ks;
		}
		parent->cap = cap;
	}
	if (parent->kind == IL_CFG_MAP) {
		parent->keys[parent->n] = strdup(key);
		if (!parent->keys[parent->n])
			return -1;
	}
	parent->kids[parent->n++] = kid;
	return 0;
}

static char *child_path(const char *base, const char *key, int idx)
{
	size_t len = strlen(base) + (key ? strlen(key) : 12) + 4;
	char *p = malloc(len);
	if (!p)
		return NULL;
	if (key)
		snprintf(p, len, "%s%s%s", base, *base ? "." : "", key);
	else
		snprintf(p, len, "%s[%d]", base, idx);
	return p;
}

/* Give node n the path p, and each node under it the path that follows. */
static int repath(struct il_cfg *n, const char *p)
{
	char *np = strdup(p);
	if (!np)
		return -1;
	free(n->path);
	n->path = np;
	for (unsigned i = 0; n->kind != IL_CFG_SCALAR && i < n->n; i++) {
		char *cp = child_path(np, n->kind == IL_CFG_MAP ? n->keys[i] : NULL, (int)i);
		int rc = cp ? repath(n->kids[i], cp) : -1;
		free(cp);
		if (rc)
			return -1;
	}
	return 0;
}

void il_cfg_record_defaults(bool on)
{
	record_defaults = on;
}

/* A getter found `key` absent from map m and used `fmt...` instead. */
static void note_default(const struct il_cfg *m, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note_default(const struct il_cfg *m, const char *key, const char *fmt, ...)
{
	struct il_cfg *map = (struct il_cfg *)m; /* the tree is the caller's, not const data */
	char val[64];
	va_list ap;

	if (!record_defaults || !map || map->kind != IL_CFG_MAP)
		return;
	for (unsigned i = 0; i < map->n; i++)
		if (strcmp(map->keys[i], key) == 0)
			return; /* recorded already */
	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	char *cp = child_path(map->path, key, 0);
	struct il_cfg *n = cp ? node_new(IL_CFG_SCALAR, cp) : NULL;
	free(cp);
	if (!n)
		return;
	n->scalar = strdup(val);
	n->is_default = true;
	if (!n->scalar || node_add(map, key, n))
		il_cfg_free(n);
}

static struct il_cfg *convert(yaml_document_t *doc, yaml_node_t *yn, const char *path, int depth,
			      char *err, size_t errlen)
{
	struct il_cfg *n = NULL;

	if (depth > 32) {
		seterr(err, errlen, "config: '%s' nests too deep", path);
		return NULL;
	}
	switch (yn->type) {
	case YAML_SCALAR_NODE:
		n = node_new(IL_CFG_SCALAR, path);
		if (n)
			n->scalar = strndup((const char *)yn->data.scalar.value,
					    yn->data.scalar.length);
		if (!n || !n->scalar)
			goto oom;
		return n;
	case YAML_SEQUENCE_NODE: {
		n = node_new(IL_CFG_SEQ, path);
		if (!n)
			goto oom;
		int i = 0;
		for (yaml_node_item_t *it = yn->data.sequence.items.start;
		     it < yn->data.sequence.items.top; it++, i++) {
			char *cp = child_path(path, NULL, i);
			if (!cp)
				goto oom;
			struct il_cfg *kid = convert(doc, yaml_document_get_node(doc, *it), cp,
						     depth + 1, err, errlen);
			free(cp);
			if (!kid || node_add(n, NULL, kid)) {
				il_cfg_free(kid);
				goto fail;
			}
		}
		return n;
	}
	case YAML_MAPPING_NODE: {
		n = node_new(IL_CFG_MAP, path);
		if (!n)
			goto oom;
		for (yaml_node_pair_t *pr = yn->data.mapping.pairs.start;
		     pr < yn->data.mapping.pairs.top; pr++) {
			yaml_node_t *kn = yaml_document_get_node(doc, pr->key);
			if (!kn || kn->type != YAML_SCALAR_NODE) {
				seterr(err, errlen, "config: '%s' has a key that is not a plain string",
				       path);
				goto fail;
			}
			const char *key = (const char *)kn->data.scalar.value;
			if (il_cfg_get(n, key)) {
				seterr(err, errlen, "config: key '%s%s%s' appears twice", path,
				       *path ? "." : "", key);
				goto fail;
			}
			char *cp = child_path(path, key, 0);
			if (!cp)
				goto oom;
			struct il_cfg *kid = convert(doc, yaml_document_get_node(doc, pr->value),
						     cp, depth + 1, err, errlen);
			free(cp);
			if (!kid || node_add(n, key, kid)) {
				il_cfg_free(kid);
				goto fail;
			}
		}
		return n;
	}
	default:
		seterr(err, errlen, "config: '%s' is empty", path);
		return NULL;
	}
oom:
	seterr(err, errlen, "config: out of memory");
fail:
	il_cfg_free(n);
	return NULL;
}

static struct il_cfg *load(yaml_parser_t *parser, const char *origin, const char *path,
			   char *err, size_t errlen)
{
	yaml_document_t doc;
	struct il_cfg *root = NULL;

	if (!yaml_parser_load(parser, &doc)) {
		seterr(err, errlen, "config: %s: line %zu column %zu: %s", origin,
		       parser->problem_mark.line + 1, parser->problem_mark.column + 1,
		       parser->problem ? parser->problem : "syntax error");
		return NULL;
	}
	yaml_node_t *top = yaml_document_get_root_node(&doc);
	if (!top)
		root = node_new(IL_CFG_MAP, path);
	else
		root = convert(&doc, top, path, 0, err, errlen);
	yaml_document_delete(&doc);
	return root;
}

struct il_cfg *il_cfg_load_string(const char *text, const char *origin, char *err, size_t errlen)
{
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		seterr(err, errlen, "config: cannot initialise the YAML parser");
		return NULL;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
	struct il_cfg *root = load(&parser, origin, "", err, errlen);
	yaml_parser_delete(&parser);
	if (root && root->kind != IL_CFG_MAP) {
		seterr(err, errlen, "config: %s: the top level must be a mapping of keys", origin);
		il_cfg_free(root);
		return NULL;
	}
	return root;
}

struct il_cfg *il_cfg_load_file(const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "rb");
	if (!f) {
		seterr(err, errlen, "config: cannot open '%s': %s", file, strerror(errno));
		return NULL;
	}
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		seterr(err, errlen, "config: cannot initialise the YAML parser");
		return NULL;
	}
	yaml_parser_set_input_file(&parser, f);
	struct il_cfg *root = load(&parser, file, "", err, errlen);
	yaml_parser_delete(&parser);
	fclose(f);
	if (root && root->kind != IL_CFG_MAP) {
		seterr(err, errlen, "config: %s: the top level must be a mapping of keys", file);
		il_cfg_free(root);
		return NULL;
	}
	return root;
}

enum il_cfg_kind il_cfg_kind(const struct il_cfg *n) { return n->kind; }
const char *il_cfg_path(const struct il_cfg *n) { return n->path; }
const char *il_cfg_scalar(const struct il_cfg *n)
{
	return n && n->kind == IL_CFG_SCALAR ? n->scalar : NULL;
}
unsigned il_cfg_len(const struct il_cfg *n) { return n && n->kind != IL_CFG_SCALAR ? n->n : 0; }
const struct il_cfg *il_cfg_at(const struct il_cfg *n, unsigned i)
{
	return n && i < n->n ? n->kids[i] : NULL;
}
const char *il_cfg_key_at(const struct il_cfg *m, unsigned i)
{
	return m && m->kind == IL_CFG_MAP && i < m->n ? m->keys[i] : NULL;
}

const struct il_cfg *il_cfg_get(const struct il_cfg *m, const char *key)
{
	if (!m || m->kind != IL_CFG_MAP)
		return NULL;
	/* A recorded default is for printing: to readers the key stays absent. */
	for (unsigned i = 0; i < m->n; i++)
		if (strcmp(m->keys[i], key) == 0 && !m->kids[i]->is_default)
			return m->kids[i];
	return NULL;
}

static const char *keypath(const struct il_cfg *m, const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", m && *m->path ? m->path : "", m && *m->path ? "." : "", key);
	return buf;
}

static const struct il_cfg *get_scalar(const struct il_cfg *m, const char *key, char *err,
				       size_t errlen, int *bad)
{
	char kp[256];
	const struct il_cfg *n = il_cfg_get(m, key);
	*bad = 0;
	if (n && n->kind != IL_CFG_SCALAR) {
		seterr(err, errlen, "config: key '%s' must be a single value, not a %s",
		       keypath(m, key, kp, sizeof(kp)), n->kind == IL_CFG_MAP ? "mapping" : "list");
		*bad = 1;
		return NULL;
	}
	return n;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	uint64_t mul = 1;
	if (!*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	/* Size and rate suffixes: k, M, G (decimal); Ki, Mi, Gi (binary). */
	if (*end) {
		if (!strcmp(end, "k") || !strcmp(end, "K"))
			mul = 1000ull;
		else if (!strcmp(end, "M"))
			mul = 1000000ull;
		else if (!strcmp(end, "G"))
			mul = 1000000000ull;
		else if (!strcmp(end, "Ki"))
			mul = 1ull << 10;
		else if (!strcmp(end, "Mi"))
			mul = 1ull << 20;
		else if (!strcmp(end, "Gi"))
			mul = 1ull << 30;
		else
			return -1;
	}
	if (v > UINT64_MAX / mul)
		return -1;
	*out = (uint64_t)v * mul;
	return 0;
}

int il_cfg_u64(const struct il_cfg *m, const char *key, uint64_t def, uint64_t min, uint64_t max,
	       uint64_t *out, char *err, size_t errlen)
{
	char kp[256];
	int bad;
	const struct il_cfg *n = get_scalar(m, key, err, errlen, &bad);
	if (bad)
		return -1;
	if (!n) {
		*out = def;
		note_default(m, key, "%" PRIu64, def);
		return 0;
	}
	uint64_t v;
	if (parse_u64(n->scalar, &v) || v < min || v > max) {
		seterr(err, errlen,
		       "config: key '%s': expected an integer in %" PRIu64 "..%" PRIu64
		       " (suffixes k, M, G, Ki, Mi, Gi allowed), got '%s'",
		       keypath(m, key, kp, sizeof(kp)), min, max, n->scalar);
		return -1;
	}
	*out = v;
	return 0;
}

int il_cfg_double(const struct il_cfg *m, const char *key, double def, double min, double max,
		  double *out, char *err, size_t errlen)
{
	char kp[256];
	int bad;
	const struct il_cfg *n = get_scalar(m, key, err, errlen, &bad);
	if (bad)
		return -1;
	if (!n) {
		*out = def;
		note_default(m, key, "%g", def);
		return 0;
	}
	char *end;
	errno = 0;
	double v = strtod(n->scalar, &end);
	if (errno || end == n->scalar || *end || !(v >= min && v <= max)) {
		seterr(err, errlen, "config: key '%s': expected a number in %g..%g, got '%s'",
		       keypath(m, key, kp, sizeof(kp)), min, max, n->scalar);
		return -1;
	}
	*out = v;
	return 0;
}

int il_cfg_bool(const struct il_cfg *m, const char *key, bool def, bool *out, char *err,
		size_t errlen)
{
	char kp[256];
	int bad;
	const struct il_cfg *n = get_scalar(m, key, err, errlen, &bad);
	if (bad)
		return -1;
	if (!n) {
		*out = def;
		note_default(m, key, "%s", def ? "true" : "false");
		return 0;
	}
	const char *s = n->scalar;
	if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
	    !strcmp(s, "1")) {
		*out = true;
		return 0;
	}
	if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off") ||
	    !strcmp(s, "0")) {
		*out = false;
		return 0;
	}
	seterr(err, errlen, "config: key '%s': expected true or false, got '%s'",
	       keypath(m, key, kp, sizeof(kp)), s);
	return -1;
}

int il_cfg_str(const struct il_cfg *m, const char *key, const char *def, const char **out,
	       char *err, size_t errlen)
{
	int bad;
	const struct il_cfg *n = get_scalar(m, key, err, errlen, &bad);
	if (bad)
		return -1;
	*out = n ? n->scalar : def;
	if (!n && def)
		note_default(m, key, "%s", def);
	return 0;
}

int il_cfg_enum(const struct il_cfg *m, const char *key, const char *const *allowed, int def,
		int *out, char *err, size_t errlen)
{
	char kp[256], list[512];
	int bad;
	const struct il_cfg *n = get_scalar(m, key, err, errlen, &bad);
	if (bad)
		return -1;
	if (!n) {
		*out = def;
		note_default(m, key, "%s", allowed[def]);
		return 0;
	}
	size_t off = 0;
	list[0] = 0;
	for (int i = 0; allowed[i]; i++) {
		if (!strcmp(n->scalar, allowed[i])) {
			*out = i;
			return 0;
		}
		off += (size_t)snprintf(list + off, off < sizeof(list) ? sizeof(list) - off : 0,
					"%s%s", i ? ", " : "", allowed[i]);
	}
	seterr(err, errlen, "config: key '%s': '%s' is not one of: %s",
	       keypath(m, key, kp, sizeof(kp)), n->scalar, list);
	return -1;
}

int il_cfg_str_list(const struct il_cfg *m, const char *key, const char **out, int max,
		    char *err, size_t errlen)
{
	char kp[256];
	const struct il_cfg *l = il_cfg_get(m, key);
	int n = 0;

	if (!l)
		return 0;
	if (il_cfg_expect(l, IL_CFG_SEQ, err, errlen))
		return -1;
	for (unsigned i = 0; i < l->n; i++) {
		if (l->kids[i]->kind != IL_CFG_SCALAR) {
			seterr(err, errlen, "config: '%s' must be a list of strings",
			       l->kids[i]->path);
			return -1;
		}
		if (n == max) {
			seterr(err, errlen, "config: '%s' has more than %d entries",
			       keypath(m, key, kp, sizeof(kp)), max);
			return -1;
		}
		out[n++] = l->kids[i]->scalar;
	}
	return n;
}

int il_cfg_ipv4(const struct il_cfg *m, const char *key, uint32_t def, uint32_t *out, char *err,
		size_t errlen)
{
	char kp[256];
	int bad;
	const struct il_cfg *n = get_scalar(m, key, err, errlen, &bad);
	if (bad)
		return -1;
	if (!n) {
		*out = def;
		note_default(m, key, "%u.%u.%u.%u", def >> 24, (def >> 16) & 255, (def >> 8) & 255,
			     def & 255);
		return 0;
	}
	struct in_addr a;
	if (inet_pton(AF_INET, n->scalar, &a) != 1) {
		seterr(err, errlen, "config: key '%s': expected an IPv4 address (a.b.c.d), got '%s'",
		       keypath(m, key, kp, sizeof(kp)), n->scalar);
		return -1;
	}
	*out = ntohl(a.s_addr);
	return 0;
}

int il_cfg_check_keys(const struct il_cfg *m, const char *const *allowed, char *err,
		      size_t errlen)
{
	char kp[256], list[512];
	if (!m)
		return 0;
	if (m->kind != IL_CFG_MAP) {
		seterr(err, errlen, "config: '%s' must be a mapping of keys", m->path);
		return -1;
	}
	for (unsigned i = 0; i < m->n; i++) {
		int ok = 0;
		for (int j = 0; allowed[j]; j++)
			if (!strcmp(m->keys[i], allowed[j]))
				ok = 1;
		if (ok)
			continue;
		size_t off = 0;
		list[0] = 0;
		for (int j = 0; allowed[j]; j++)
			off += (size_t)snprintf(list + off,
						off < sizeof(list) ? sizeof(list) - off : 0,
						"%s%s", j ? ", " : "", allowed[j]);
		seterr(err, errlen, "config: unknown key '%s' (allowed here: %s)",
		       keypath(m, m->keys[i], kp, sizeof(kp)), list);
		return -1;
	}
	return 0;
}

int il_cfg_expect(const struct il_cfg *n, enum il_cfg_kind k, char *err, size_t errlen)
{
	static const char *const kn[] = {"a single value", "a mapping of keys", "a list"};
	if (n && n->kind == k)
		return 0;
	seterr(err, errlen, "config: '%s' must be %s", n ? n->path : "?", kn[k]);
	return -1;
}

int il_cfg_set(struct il_cfg *root, const char *path, const char *value, char *err,
	       size_t errlen)
{
	char buf[256];
	if (strlen(path) >= sizeof(buf) || !*path) {
		seterr(err, errlen, "--set: bad key '%s'", path);
		return -1;
	}
	strcpy(buf, path);
	struct il_cfg *cur = root;
	char *save = NULL;
	char *tok = strtok_r(buf, ".", &save);
	while (tok) {
		char *next = strtok_r(NULL, ".", &save);
		struct il_cfg *kid = NULL;
		unsigned idx = 0;
		if (cur->kind == IL_CFG_SEQ) {
			char *end;
			unsigned long v = strtoul(tok, &end, 10);
			if (*end || v >= cur->n) {
				seterr(err, errlen, "--set %s: '%s' has %u entries; index '%s' is out of range",
				       path, cur->path, cur->n, tok);
				return -1;
			}
			idx = (unsigned)v;
			kid = cur->kids[idx];
		} else if (cur->kind == IL_CFG_MAP) {
			for (unsigned i = 0; i < cur->n; i++)
				if (!strcmp(cur->keys[i], tok)) {
					kid = cur->kids[i];
					idx = i;
				}
		} else {
			seterr(err, errlen, "--set %s: '%s' is a single value, not a mapping", path,
			       cur->path);
			return -1;
		}
		if (!next) {
			/* Leaf: parse the value as YAML so lists and maps work too. */
			char e2[256];
			char *doc = malloc(strlen(value) + 8);
			if (!doc)
				return -1;
			sprintf(doc, "v: %s", value);
			struct il_cfg *tmp = il_cfg_load_string(doc, "--set", e2, sizeof(e2));
			free(doc);
			if (!tmp || tmp->n != 1) {
				seterr(err, errlen, "--set %s: cannot parse value '%s'", path, value);
				il_cfg_free(tmp);
				return -1;
			}
			struct il_cfg *val = tmp->kids[0];
			free(tmp->keys[0]); /* the scratch key "v": the value is ours now */
			tmp->n = 0;
			il_cfg_free(tmp);
			char *cp = child_path(cur->path, cur->kind == IL_CFG_MAP ? tok : NULL, (int)idx);
			/* Every node of the value takes its place's path (they
			 * were parsed under the scratch key "v"), so an error
			 * about a key inside it names the key, e.g.
			 * 'groups[1].shard', not 'v[1].shard'. */
			if (!cp || repath(val, cp)) {
				free(cp);
				il_cfg_free(val);
				return -1;
			}
			free(cp);
			if (kid) {
				il_cfg_free(kid);
				cur->kids[idx] = val;
			} else if (node_add(cur, tok, val)) {
				il_cfg_free(val);
				return -1;
			}
			return 0;
		}
		if (!kid) {
			char *cp = child_path(cur->path, tok, 0);
			kid = node_new(IL_CFG_MAP, cp);
			free(cp);
			if (!kid || node_add(cur, tok, kid)) {
				il_cfg_free(kid);
				return -1;
			}
		}
		cur = kid;
		tok = next;
	}
	return 0;
}

/* ---- dump: the tree as YAML ------------------------------------------- */

/* Plain YAML scalars need no quotes; anything that could be read back as
 * something else (empty, leading '-', ':' or '#' inside, spaces) gets
 * double quotes. */
static void dump_scalar(FILE *f, const char *s)
{
	bool plain = *s && *s != '-' && *s != '[' && *s != '{' && *s != '*' && *s != '&' &&
		     *s != '!' && *s != '|' && *s != '>' && *s != '%' && *s != '@';

	for (const char *c = s; plain && *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "_./=,+-@", *c) || (*c == ',' && c == s))
			plain = false;
	if (plain) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (const char *c = s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fputc('\\', f);
		fputc(*c, f);
	}
	fputc('"', f);
}

static void dump_node(FILE *f, const struct il_cfg *n, int indent, bool defaults_marked);

static void dump_kid(FILE *f, const struct il_cfg *k, int indent, bool marked)
{
	if (k->kind == IL_CFG_SCALAR) {
		fputc(' ', f);
		dump_scalar(f, k->scalar);
		fputs(k->is_default && marked ? "  # default\n" : "\n", f);
	} else if (k->n == 0) {
		fputs(k->kind == IL_CFG_MAP ? " {}\n" : " []\n", f);
	} else {
		fputc('\n', f);
		dump_node(f, k, indent + 2, marked);
	}
}

static void dump_node(FILE *f, const struct il_cfg *n, int indent, bool marked)
{
	for (unsigned i = 0; i < n->n; i++) {
		fprintf(f, "%*s", indent, "");
		if (n->kind == IL_CFG_MAP) {
			dump_scalar(f, n->keys[i]);
			fputc(':', f);
		} else {
			fputc('-', f);
		}
		dump_kid(f, n->kids[i], indent, marked);
	}
}

void il_cfg_dump(FILE *f, const struct il_cfg *root, bool mark_defaults)
{
	if (root->kind == IL_CFG_SCALAR) {
		dump_scalar(f, root->scalar);
		fputc('\n', f);
		return;
	}
	dump_node(f, root, 0, mark_defaults);
}
