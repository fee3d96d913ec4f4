/* SPDX-License-Identifier: BSD-3-Clause
 * Config tree: typed getters, overrides, and errors that name the key.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <interlink/config.h>

static const char *doc = "a: 5\n"
			 "b: { c: 1.5, d: [x, y, z], e: 239.1.1.1, f: yes, g: 4Ki }\n"
			 "list:\n  - { id: 1 }\n  - { id: 2 }\n";

static void test_getters(void **state)
{
	(void)state;
	char err[256];
	struct il_cfg *c = il_cfg_load_string(doc, "t", err, sizeof(err));
	assert_non_null(c);
	uint64_t v;
	assert_int_equal(il_cfg_u64(c, "a", 0, 0, 10, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 5);
	assert_int_equal(il_cfg_u64(c, "missing", 77, 0, 100, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 77);
	assert_int_equal(il_cfg_u64(c, "a", 0, 6, 10, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "key 'a'"));
	assert_non_null(strstr(err, "6..10"));
	const struct il_cfg *b = il_cfg_get(c, "b");
	double d;
	assert_int_equal(il_cfg_double(b, "c", 0, 0, 2, &d, err, sizeof(err)), 0);
	assert_true(d == 1.5);
	assert_int_equal(il_cfg_len(il_cfg_get(b, "d")), 3);
	assert_string_equal(il_cfg_path(il_cfg_at(il_cfg_get(b, "d"), 2)), "b.d[2]");
	uint32_t ip;
	assert_int_equal(il_cfg_ipv4(b, "e", 0, &ip, err, sizeof(err)), 0);
	assert_int_equal(ip, 0xef010101u);
	assert_int_equal(il_cfg_ipv4(b, "c", 0, &ip, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "b.c"));
	bool f;
	assert_int_equal(il_cfg_bool(b, "f", false, &f, err, sizeof(err)), 0);
	assert_true(f);
	assert_int_equal(il_cfg_u64(b, "g", 0, 0, 1 << 20, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(il_cfg_u64(b, "d", 0, 0, 1, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "single value"));
	static const char *const allowed[] = {"c", "d", "e", "f", NULL};
	assert_int_equal(il_cfg_check_keys(b, allowed, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown key 'b.g'"));
	assert_non_null(strstr(err, "allowed here: c, d, e, f"));
	static const char *const modes[] = {"x", "y", NULL};
	int m;
	assert_int_equal(il_cfg_enum(c, "a", modes, 0, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not one of: x, y"));
	il_cfg_free(c);
}

static void test_set_overrides(void **state)
{
	(void)state;
	char err[256];
	uint64_t v;
	struct il_cfg *c = il_cfg_load_string(doc, "t", err, sizeof(err));
	assert_int_equal(il_cfg_set(c, "a", "9", err, sizeof(err)), 0);
	assert_int_equal(il_cfg_u64(c, "a", 0, 0, 10, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 9);
	assert_int_equal(il_cfg_set(c, "list.1.id", "42", err, sizeof(err)), 0);
	assert_int_equal(il_cfg_u64(il_cfg_at(il_cfg_get(c, "list"), 1), "id", 0, 0, 100, &v, err,
				    sizeof(err)), 0);
	assert_int_equal(v, 42);
	assert_int_equal(il_cfg_set(c, "list.5.id", "1", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out of range"));
	assert_int_equal(il_cfg_set(c, "new.deep.key", "[1, 2]", err, sizeof(err)), 0);
	assert_int_equal(il_cfg_len(il_cfg_get(il_cfg_get(il_cfg_get(c, "new"), "deep"), "key")), 2);
	assert_int_equal(il_cfg_set(c, "a.x", "1", err, sizeof(err)), -1);
	/* A key inside a list or map given by --set is named by its place,
	 * not by the scratch key the value was parsed under. */
	assert_int_equal(il_cfg_set(c, "list", "[{id: 1}, {id: 2, sub: {k: 300}}]", err,
				    sizeof(err)), 0);
	const struct il_cfg *sub = il_cfg_get(il_cfg_at(il_cfg_get(c, "list"), 1), "sub");
	assert_string_equal(il_cfg_path(sub), "list[1].sub");
	assert_int_equal(il_cfg_u64(sub, "k", 0, 0, 255, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'list[1].sub.k'"));
	il_cfg_free(c);
}

static void test_syntax_errors(void **state)
{
	(void)state;
	char err[256];
	assert_null(il_cfg_load_string("a: [1, 2\n", "bad.yaml", err, sizeof(err)));
	assert_non_null(strstr(err, "bad.yaml: line"));
	assert_null(il_cfg_load_string("a: 1\na: 2\n", "dup.yaml", err, sizeof(err)));
	assert_non_null(strstr(err, "appears twice"));
	assert_null(il_cfg_load_string("- 1\n- 2\n", "seq.yaml", err, sizeof(err)));
	assert_non_null(strstr(err, "top level"));
	assert_null(il_cfg_load_file("/nonexistent/x.yaml", err, sizeof(err)));
	assert_non_null(strstr(err, "cannot open"));
}

/* Recorded defaults: printed (marked), invisible to readers, and the dump
 * loads back into the same tree. */
static void test_defaults_and_dump(void **state)
{
	(void)state;
	char err[256], *text = NULL;
	size_t len = 0;
	uint64_t v;
	struct il_cfg *c = il_cfg_load_string(doc, "t", err, sizeof(err));
	assert_non_null(c);
	il_cfg_record_defaults(true);
	assert_int_equal(il_cfg_u64(c, "missing", 77, 0, 100, &v, err, sizeof(err)), 0);
	assert_int_equal(il_cfg_u64(c, "missing", 88, 0, 100, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 88); /* a reader still sees the key as absent */
	il_cfg_record_defaults(false);
	assert_null(il_cfg_get(c, "missing"));
	assert_int_equal(il_cfg_set(c, "b.s", "\"a: b # c\"", err, sizeof(err)), 0);
	FILE *f = open_memstream(&text, &len);
	il_cfg_dump(f, c, true);
	fclose(f);
	assert_non_null(strstr(text, "missing: 77  # default\n"));
	assert_non_null(strstr(text, "s: \"a: b # c\"\n"));
	struct il_cfg *back = il_cfg_load_string(text, "dump", err, sizeof(err));
	assert_non_null(back);
	assert_int_equal(il_cfg_u64(back, "missing", 0, 0, 100, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 77);
	assert_string_equal(il_cfg_scalar(il_cfg_get(il_cfg_get(back, "b"), "s")), "a: b # c");
	assert_string_equal(il_cfg_scalar(il_cfg_at(il_cfg_get(il_cfg_get(back, "b"), "d"), 2)),
			    "z");
	assert_int_equal(il_cfg_len(il_cfg_get(back, "list")), 2);
	free(text);
	il_cfg_free(back);
	il_cfg_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getters),
		cmocka_unit_test(test_set_overrides),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_defaults_and_dump),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
