/* SPDX-License-Identifier: BSD-3-Clause
 * il_coord's codec: what etcd's JSON gateway reads and writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_priv.h"

static void test_b64_vectors(void **state)
{
	/* RFC 4648 section 10. */
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const enc[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					   "Zm9vYmFy" };
	char out[32];
	uint8_t back[32];

	(void)state;
	for (unsigned i = 0; i < 7; i++) {
		size_t n = strlen(plain[i]);

		assert_int_equal(coord_b64_len(n), strlen(enc[i]));
		coord_b64_encode(plain[i], n, out);
		assert_string_equal(out, enc[i]);
		assert_int_equal(coord_b64_decode(enc[i], strlen(enc[i]), back), (long)n);
		assert_memory_equal(back, plain[i], n);
	}
}

static void test_b64_binary_and_bad(void **state)
{
	uint8_t in[256], back[400];
	char enc[400];

	(void)state;
	for (unsigned i = 0; i < 256; i++)
		in[i] = (uint8_t)(255 - i);
	for (size_t n = 0; n <= 256; n += 17) {
		coord_b64_encode(in, n, enc);
		assert_int_equal(coord_b64_decode(enc, strlen(enc), back), (long)n);
		assert_memory_equal(back, in, n);
	}
	assert_int_equal(coord_b64_decode("Zm9v!", 5, back), -1);
	assert_int_equal(coord_b64_decode("Z", 1, back), -1);
	/* URL-safe letters are accepted too. */
	assert_int_equal(coord_b64_decode("-_8=", 4, back), 2);
	assert_int_equal(back[0], 0xfb);
	assert_int_equal(back[1], 0xff);
}

static void test_i64_and_kv(void **state)
{
	json_error_t e;
	/* As etcd writes it: 64-bit numbers as strings, zeros left out. */
	json_t *o = json_loads("{\"key\":\"L3QvYQ==\",\"create_revision\":\"2\","
			       "\"mod_revision\":\"9223372036854775807\",\"version\":3,"
			       "\"value\":\"aGVsbG8=\"}", 0, &e);
	struct il_coord_kv kv;

	(void)state;
	assert_non_null(o);
	assert_int_equal(coord_kv_from_json(o, &kv), 0);
	assert_int_equal(kv.key_len, 4);
	assert_string_equal(kv.key, "/t/a");
	assert_int_equal(kv.value_len, 5);
	assert_string_equal(kv.value, "hello");
	assert_int_equal(kv.create_rev, 2);
	assert_true(kv.mod_rev == INT64_MAX);
	assert_int_equal(kv.version, 3);
	assert_int_equal(kv.lease, 0);
	il_coord_kv_free(&kv);
	assert_int_equal(coord_json_i64(o, "nope"), 0);
	json_decref(o);
	o = json_loads("{\"key\":\"***\"}", 0, &e);
	assert_int_equal(coord_kv_from_json(o, &kv), -1);
	json_decref(o);
}

static void test_prefix_end(void **state)
{
	char out[8];
	size_t n;

	(void)state;
	assert_true(coord_prefix_end("/a/", 3, out, &n));
	assert_int_equal(n, 3);
	assert_memory_equal(out, "/a0", 3);
	assert_true(coord_prefix_end("a\xff\xff", 3, out, &n));
	assert_int_equal(n, 1);
	assert_int_equal(out[0], 'b');
	assert_false(coord_prefix_end("\xff", 1, out, &n));
}

static void test_endpoints(void **state)
{
	char *ep[IL_COORD_MAX_ENDPOINTS], err[256];
	unsigned n;

	(void)state;
	assert_int_equal(coord_parse_endpoints(" http://a:1/, https://b:2 ,,http://c:3", ep, &n,
					       err, sizeof(err)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(ep[0], "http://a:1");
	assert_string_equal(ep[1], "https://b:2");
	assert_string_equal(ep[2], "http://c:3");
	while (n > 0)
		free(ep[--n]);
	assert_int_equal(coord_parse_endpoints("a:1", ep, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'a:1'"));
	assert_int_equal(coord_parse_endpoints("", ep, &n, err, sizeof(err)), -1);
	assert_int_equal(coord_parse_endpoints(" , ", ep, &n, err, sizeof(err)), -1);
}

static void test_stream_framing(void **state)
{
	const char *s = "\n {\"result\":{\"a\":\"}{\\\"\"}}\n{\"result\":{";
	size_t skip, len = coord_stream_object(s, strlen(s), &skip);

	(void)state;
	assert_int_equal(skip, 2);
	assert_int_equal(len, strlen("{\"result\":{\"a\":\"}{\\\"\"}}"));
	/* The next object is not complete yet. */
	assert_int_equal(coord_stream_object(s + skip + len, strlen(s + skip + len), &skip), 0);
	assert_int_equal(coord_stream_object("  ", 2, &skip), 0);
	assert_int_equal(skip, 2);
}

static void test_buf_append(void **state)
{
	struct coord_buf b = { 0 };
	char chunk[1000];

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < 10; i++)
		assert_true(coord_buf_append(&b, chunk, sizeof(chunk)));
	assert_int_equal(b.len, 10000);
	assert_true(b.cap > b.len);
	assert_int_equal(b.p[b.len], '\0');
	assert_int_equal(strspn(b.p, "x"), 10000);
	free(b.p);
}

static void test_error_verdicts(void **state)
{
	(void)state;
	assert_int_equal(coord_classify_error(14, "etcdserver: no leader"), COORD_RETRY);
	assert_int_equal(coord_classify_error(14, "etcdserver: request timed out"),
			 COORD_RETRY_AMB);
	assert_int_equal(coord_classify_error(2, "etcdserver: leader changed"), COORD_RETRY_AMB);
	assert_int_equal(coord_classify_error(3, "etcdserver: too many operations in txn request"),
			 COORD_REJECT);
	assert_int_equal(coord_classify_error(5, "etcdserver: requested lease not found"),
			 COORD_REJECT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64_vectors),
		cmocka_unit_test(test_b64_binary_and_bad),
		cmocka_unit_test(test_i64_and_kv),
		cmocka_unit_test(test_prefix_end),
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test(test_stream_framing),
		cmocka_unit_test(test_buf_append),
		cmocka_unit_test(test_error_verdicts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
