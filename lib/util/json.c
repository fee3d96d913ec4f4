/* SPDX-License-Identifier: BSD-3-Clause */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include <interlink/json.h>

void il_json_begin(struct il_json *j, FILE *f, unsigned pretty_depth)
{
	*j = (struct il_json){
		.f = f,
		.pretty_depth = pretty_depth < IL_JSON_MAX_DEPTH ? (uint8_t)pretty_depth
							       : IL_JSON_MAX_DEPTH,
	};
}

static void newline(struct il_json *j, unsigned depth)
{
	fputc('\n', j->f);
	for (unsigned i = 0; i < depth; i++)
		fputs("  ", j->f);
}

/* Whatever goes before a member: the comma, the line break, the key. */
static void member(struct il_json *j, const char *key)
{
	if (j->depth == 0) {
		if (key)
			j->bad = true; /* a top-level value has no name */
		return;
	}
	uint32_t bit = 1u << (j->depth - 1);
	bool first = j->fresh & bit;

	j->fresh &= ~bit;
	if (!first)
		fputc(',', j->f);
	if (j->depth <= j->pretty_depth)
		newline(j, j->depth);
	else if (!first)
		fputc(' ', j->f);
	if (j->is_arr & bit) {
		if (key)
			j->bad = true; /* array elements have no names */
		return;
	}
	if (!key) {
		j->bad = true;
		key = "";
	}
	il_json_write_string(j->f, key);
	fputs(": ", j->f);
}

static void json_open(struct il_json *j, const char *key, bool arr)
{
	member(j, key);
	if (j->depth == IL_JSON_MAX_DEPTH) {
		j->bad = true;
		return;
	}
	fputc(arr ? '[' : '{', j->f);
	j->depth++;
	uint32_t bit = 1u << (j->depth - 1);
	j->fresh |= bit;
	if (arr)
		j->is_arr |= bit;
	else
		j->is_arr &= ~bit;
}

void il_json_obj(struct il_json *j, const char *key)
{
	json_open(j, key, false);
}

void il_json_arr(struct il_json *j, const char *key)
{
	json_open(j, key, true);
}

void il_json_end(struct il_json *j)
{
	if (j->depth == 0) {
		j->bad = true;
		return;
	}
	uint32_t bit = 1u << (j->depth - 1);

	if (!(j->fresh & bit) && j->depth <= j->pretty_depth)
		newline(j, j->depth - 1u);
	fputc(j->is_arr & bit ? ']' : '}', j->f);
	j->depth--;
}

void il_json_str(struct il_json *j, const char *key, const char *s)
{
	member(j, key);
	il_json_write_string(j->f, s ? s : "");
}

void il_json_strn(struct il_json *j, const char *key, const char *s, size_t n)
{
	member(j, key);
	il_json_write_string_n(j->f, s ? s : "", s ? n : 0);
}

void il_json_strf(struct il_json *j, const char *key, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	il_json_str(j, key, buf);
}

void il_json_u64(struct il_json *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void il_json_i64(struct il_json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void il_json_fixed(struct il_json *j, const char *key, double v, int decimals)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.*f", decimals, v);
	else
		fputs("null", j->f);
}

void il_json_bool(struct il_json *j, const char *key, bool v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->f);
}

int il_json_finish(struct il_json *j)
{
	fputc('\n', j->f);
	if (fflush(j->f) != 0 || ferror(j->f))
		return -1;
	return j->bad || j->depth != 0 ? -1 : 0;
}

/* Length of the valid UTF-8 sequence at s (1..4, at most left bytes), or 0
 * if it is not one (overlong forms, surrogates and code points above
 * U+10FFFF included). */
static unsigned utf8_len(const unsigned char *s, size_t left)
{
	unsigned n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1fu;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0fu;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07u;
	} else {
		return 0;
	}
	if (n > left)
		return 0;
	for (unsigned i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void il_json_write_string_n(FILE *f, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	fputc('"', f);
	while (p < end) {
		unsigned char c = *p;
		unsigned n;

		switch (c) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\b':
			fputs("\\b", f);
			break;
		case '\f':
			fputs("\\f", f);
			break;
		default:
			if (c < 0x20) {
				fprintf(f, "\\u%04x", c);
				break;
			}
			n = utf8_len(p, (size_t)(end - p));
			if (n == 0) {
				fputs("\\ufffd", f);
				break;
			}
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		p++;
	}
	fputc('"', f);
}

void il_json_write_string(FILE *f, const char *s)
{
	il_json_write_string_n(f, s, strlen(s));
}
