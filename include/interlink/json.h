/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The one JSON writer: every summary, statistics file and report the
 * project writes goes through it, so every string (stage, port and group
 * names from a config, role names, hashes) is escaped and every number is
 * valid JSON (a non-finite double is written as null).
 *
 * A streaming writer over a stdio stream: open containers, write members,
 * close them. Members of containers nested at most `pretty_depth` deep go
 * on lines of their own (indented by two spaces a level); deeper ones stay
 * on one line. No allocation; at most IL_JSON_MAX_DEPTH levels.
 *
 *     struct il_json j;
 *     il_json_begin(&j, f, 1);
 *     il_json_obj(&j, NULL);
 *     il_json_str(&j, "name", name);
 *     il_json_arr(&j, "rates");
 *     il_json_u64(&j, NULL, 10);
 *     il_json_end(&j);
 *     il_json_end(&j);
 *     if (il_json_finish(&j)) ...write error...
 */
#ifndef INTERLINK_JSON_H
#define INTERLINK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IL_JSON_MAX_DEPTH 32

struct il_json {
	FILE *f;
	uint32_t fresh;  /* bit d-1: the container at depth d has no member yet */
	uint32_t is_arr; /* bit d-1: the container at depth d is an array */
	uint8_t depth;
	uint8_t pretty_depth;
	bool bad;        /* misuse (too deep, unbalanced): finish() fails */
};

void il_json_begin(struct il_json *j, FILE *f, unsigned pretty_depth);

/* Containers. key: the member's name inside an object; NULL at the top
 * level and inside arrays. */
void il_json_obj(struct il_json *j, const char *key);
void il_json_arr(struct il_json *j, const char *key);
void il_json_end(struct il_json *j);

/* Members (key as above). */
void il_json_str(struct il_json *j, const char *key, const char *s);
/* n bytes of s, which may hold NULs (written as \u0000). */
void il_json_strn(struct il_json *j, const char *key, const char *s, size_t n);
void il_json_strf(struct il_json *j, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void il_json_u64(struct il_json *j, const char *key, uint64_t v);
void il_json_i64(struct il_json *j, const char *key, int64_t v);
/* A double with a fixed number of decimals ("%.*f"); null if not finite. */
void il_json_fixed(struct il_json *j, const char *key, double v, int decimals);
void il_json_bool(struct il_json *j, const char *key, bool v);

/* End the document (a newline) and flush. 0, or -1 if the stream had an
 * error or the containers were not balanced. The stream stays open. */
int il_json_finish(struct il_json *j);

/* Write s as a JSON string literal, quotes included: '"', '\\' and control
 * characters escaped; valid UTF-8 kept as it is, any other byte written
 * as U+FFFD. */
void il_json_write_string(FILE *f, const char *s);
void il_json_write_string_n(FILE *f, const char *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif
