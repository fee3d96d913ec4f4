/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The JSON writer: strings escaped (quotes, backslashes, control
 * characters, invalid UTF-8), members separated and laid out, numbers
 * valid JSON, misuse reported by finish().
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <interlink/json.h>

struct sink {
	FILE *f;
	char *buf;
	size_t len;
};

static void sink_open(struct sink *s)
{
	s->buf = NULL;
	s->len = 0;
	s->f = open_memstream(&s->buf, &s->len);
	assert_non_null(s->f);
}

/* Close the stream and compare what was written. */
static void sink_check(struct sink *s, const char *want)
{
	fclose(s->f);
	if (strcmp(s->buf, want) != 0)
		fail_msg("wrote\n%s\nwanted\n%s", s->buf, want);
	free(s->buf);
}

static void check_string(const char *in, const char *want)
{
	struct sink s;

	sink_open(&s);
	il_json_write_string(s.f, in);
	sink_check(&s, want);
}

static void test_escaping(void **state)
{
	(void)state;
	check_string("seq", "\"seq\"");
	check_string("", "\"\"");
	check_string("a\"b", "\"a\\\"b\"");
	check_string("back\\slash", "\"back\\\\slash\"");
	check_string("\"\\", "\"\\\"\\\\\"");
	check_string("l1\nl2\r\t\b\f", "\"l1\\nl2\\r\\t\\b\\f\"");
	check_string("\x01\x1f", "\"\\u0001\\u001f\"");
	check_string("del\x7f", "\"del\x7f\"");      /* DEL needs no escape */
	check_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", /* é € 😀 kept */
		     "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	check_string("x\xffy", "\"x\\ufffdy\"");        /* not UTF-8 */
	check_string("cut\xc3", "\"cut\\ufffd\"");      /* truncated at the end */
	check_string("\xc0\xaf", "\"\\ufffd\\ufffd\""); /* overlong '/' */
	check_string("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate */
	check_string("</script>", "\"</script>\"");
}

/* With a length: NULs inside are data, and a sequence cut by the length is
 * not valid UTF-8 even when the bytes after it would complete it. */
static void test_escaping_with_length(void **state)
{
	struct sink s;

	(void)state;
	sink_open(&s);
	il_json_write_string_n(s.f, "a\0b", 3);
	sink_check(&s, "\"a\\u0000b\"");
	sink_open(&s);
	il_json_write_string_n(s.f, "caf\xc3\xa9", 4);
	sink_check(&s, "\"caf\\ufffd\"");
	sink_open(&s);
	il_json_write_string_n(s.f, "caf\xc3\xa9", 5);
	sink_check(&s, "\"caf\xc3\xa9\"");
}

static void test_layout(void **state)
{
	struct il_json j;
	struct sink s;

	(void)state;
	/* One line. */
	sink_open(&s);
	il_json_begin(&j, s.f, 0);
	il_json_obj(&j, NULL);
	il_json_str(&j, "name", "in\"x");
	il_json_u64(&j, "rx", UINT64_MAX);
	il_json_i64(&j, "delta", -5);
	il_json_fixed(&j, "s", 1.5, 3);
	il_json_bool(&j, "pass", true);
	il_json_arr(&j, "wm");
	il_json_u64(&j, NULL, 1);
	il_json_u64(&j, NULL, 2);
	il_json_end(&j);
	il_json_arr(&j, "none");
	il_json_end(&j);
	il_json_obj(&j, "empty");
	il_json_end(&j);
	il_json_end(&j);
	assert_int_equal(il_json_finish(&j), 0);
	sink_check(&s, "{\"name\": \"in\\\"x\", \"rx\": 18446744073709551615, \"delta\": -5, "
		       "\"s\": 1.500, \"pass\": true, \"wm\": [1, 2], \"none\": [], "
		       "\"empty\": {}}\n");

	/* Members of the top object on lines of their own, deeper ones not. */
	sink_open(&s);
	il_json_begin(&j, s.f, 1);
	il_json_obj(&j, NULL);
	il_json_obj(&j, "ports");
	il_json_u64(&j, "a", 1);
	il_json_u64(&j, "b", 2);
	il_json_end(&j);
	il_json_strf(&j, "hash", "%016x", 0xabcu);
	il_json_end(&j);
	assert_int_equal(il_json_finish(&j), 0);
	sink_check(&s, "{\n  \"ports\": {\"a\": 1, \"b\": 2},\n  \"hash\": \"0000000000000abc\"\n}\n");

	/* Two levels. */
	sink_open(&s);
	il_json_begin(&j, s.f, 2);
	il_json_obj(&j, NULL);
	il_json_obj(&j, "stages");
	il_json_obj(&j, "seq");
	il_json_u64(&j, "n", 3);
	il_json_end(&j);
	il_json_end(&j);
	il_json_end(&j);
	assert_int_equal(il_json_finish(&j), 0);
	sink_check(&s, "{\n  \"stages\": {\n    \"seq\": {\"n\": 3}\n  }\n}\n");
}

static void test_numbers(void **state)
{
	struct il_json j;
	struct sink s;

	(void)state;
	sink_open(&s);
	il_json_begin(&j, s.f, 0);
	il_json_arr(&j, NULL);
	il_json_fixed(&j, NULL, NAN, 2);
	il_json_fixed(&j, NULL, INFINITY, 2);
	il_json_fixed(&j, NULL, -0.25, 2);
	il_json_fixed(&j, NULL, 123456789.123456, 6);
	il_json_end(&j);
	assert_int_equal(il_json_finish(&j), 0);
	sink_check(&s, "[null, null, -0.25, 123456789.123456]\n");
}

/* A document that leaves the writer unbalanced or misused: finish() fails. */
static void check_misuse(void (*write)(struct il_json *j))
{
	struct il_json j;
	struct sink s;

	sink_open(&s);
	il_json_begin(&j, s.f, 0);
	write(&j);
	assert_int_equal(il_json_finish(&j), -1);
	fclose(s.f);
	free(s.buf);
}

static void left_open(struct il_json *j)
{
	il_json_obj(j, NULL);
}

static void unnamed_member(struct il_json *j)
{
	il_json_obj(j, NULL);
	il_json_u64(j, NULL, 1);
	il_json_end(j);
}

static void named_element(struct il_json *j)
{
	il_json_arr(j, NULL);
	il_json_u64(j, "x", 1);
	il_json_end(j);
}

static void one_end_too_many(struct il_json *j)
{
	il_json_arr(j, NULL);
	il_json_end(j);
	il_json_end(j);
}

static void too_deep(struct il_json *j)
{
	for (int i = 0; i < IL_JSON_MAX_DEPTH + 1; i++)
		il_json_arr(j, NULL);
	for (int i = 0; i < IL_JSON_MAX_DEPTH + 1; i++)
		il_json_end(j);
}

static void test_misuse(void **state)
{
	(void)state;
	check_misuse(left_open);
	check_misuse(unnamed_member);
	check_misuse(named_element);
	check_misuse(one_end_too_many);
	check_misuse(too_deep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_escaping_with_length),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_misuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
