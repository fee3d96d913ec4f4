/* SPDX-License-Identifier: BSD-3-Clause
 * lib/auth: key files refused with the reason, a signed message verified,
 * every covered byte changed makes it fail, and the replay window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <interlink/auth.h>
#include <interlink/parse.h>
#include <interlink/wire_msg.h>

static char path[64];

static int keys_from(const char *text, mode_t mode, struct il_auth_keyring *kr, char *err)
{
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/il-auth-test-%d", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
	int rc = il_auth_keys_load(path, kr, err, 512);
	unlink(path);
	return rc;
}

#define K1 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static void test_key_files(void **state)
{
	struct il_auth_keyring kr;
	char err[512];

	(void)state;
	assert_int_equal(keys_from("# c\n\n7 " K1 "\n 9\t" K1 " # k\n", 0600, &kr, err), 0);
	assert_int_equal(kr.n, 2);
	assert_non_null(il_auth_key_find(&kr, 9));
	assert_null(il_auth_key_find(&kr, 8));
	assert_int_equal(kr.k[0].key[31], 0x1f);
	assert_int_equal(keys_from("7 " K1 "\n", 0640, &kr, err), -1);
	assert_non_null(strstr(err, "mode 0640"));
	assert_int_equal(keys_from("7 " K1 "\n7 " K1 "\n", 0600, &kr, err), -1);
	assert_non_null(strstr(err, "line 2: key id 7 given twice"));
	assert_int_equal(keys_from("7 " K1 "ff\n", 0600, &kr, err), -1);
	assert_non_null(strstr(err, "line 1: expected"));
	assert_int_equal(keys_from("x " K1 "\n", 0600, &kr, err), -1);
	assert_int_equal(keys_from("7 0011\n", 0600, &kr, err), -1);
	assert_int_equal(keys_from("", 0600, &kr, err), -1);
	assert_non_null(strstr(err, "no keys"));
	assert_int_equal(il_auth_keys_load("/nonexistent/k", &kr, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/k"));
}

static uint32_t ack(uint8_t *m, uint32_t sender)
{
	struct il_hdr_fields h = { .type = IL_T_ACK, .group_id = 3, .sender_id = sender,
				   .epoch = 9, .global_seq = 100 };

	il_ack_put(il_hdr_put(m, &h), 4, 5);
	return IL_HDR_LEN + IL_ACK_LEN;
}

static void test_sign_verify(void **state)
{
	struct il_auth_keyring kr;
	char err[512];
	uint8_t m[128], c[128];
	struct il_parsed p;

	(void)state;
	assert_int_equal(keys_from("7 " K1 "\n", 0600, &kr, err), 0);
	uint32_t len = il_auth_seal(&kr.k[0], 42, m, ack(m, 11));
	assert_int_equal(len, IL_AUTH_HDR_LEN + IL_ACK_LEN);
	/* Still a valid ACK to the parser, its body after the option. */
	assert_int_equal(il_parse_payload(m, len, &p), IL_V_CONTROL);
	assert_int_equal(p.hdr_len, IL_AUTH_HDR_LEN);
	assert_int_equal(il_get32(m + p.hdr_len), 4);
	assert_int_equal(il_auth_verify(&kr, NULL, m, len), IL_AUTH_OK);
	/* Every byte but the MAC's is covered; a changed MAC fails too. */
	for (uint32_t i = 0; i < len; i++) {
		memcpy(c, m, len);
		c[i] ^= 0x01;
		if (i == IL_OFF_VERSION || i == IL_OFF_HDR_LEN || i == IL_OFF_FLAGS)
			continue; /* the parser's (and verify's framing) checks */
		assert_int_equal(il_auth_verify(&kr, NULL, c, len), IL_AUTH_BAD_MAC);
	}
	/* Unsigned, or truncated. */
	assert_int_equal(il_auth_verify(&kr, NULL, c, ack(c, 11)), IL_AUTH_BAD_MAC);
	assert_int_equal(il_auth_verify(&kr, NULL, m, len - 1), IL_AUTH_BAD_MAC);
}

static void test_replay_window(void **state)
{
	struct il_auth_keyring kr;
	char err[512];
	uint8_t m[128];
	struct il_auth_replay *r = calloc(1, il_auth_replay_bytes(16));

	(void)state;
	assert_int_equal(keys_from("7 " K1 "\n", 0600, &kr, err), 0);
	il_auth_replay_init(r, 16);
#define V(sender, ctr) il_auth_verify(&kr, r, m, il_auth_seal(&kr.k[0], ctr, m, ack(m, sender)))
	assert_int_equal(V(11, 1000), IL_AUTH_OK);
	assert_int_equal(V(11, 1000), IL_AUTH_REPLAY);  /* the same again */
	assert_int_equal(V(11, 990), IL_AUTH_OK);       /* late but in the window, once */
	assert_int_equal(V(11, 990), IL_AUTH_REPLAY);
	assert_int_equal(V(11, 1000 - 64), IL_AUTH_REPLAY); /* behind the window */
	assert_int_equal(V(12, 990), IL_AUTH_OK);       /* another sender's window */
	assert_int_equal(V(11, 5000), IL_AUTH_OK);      /* a jump clears the window */
	assert_int_equal(V(11, 4999), IL_AUTH_OK);
	assert_int_equal(V(11, 1001), IL_AUTH_REPLAY);
	assert_int_equal(V(11, 0), IL_AUTH_REPLAY);
	/* The table takes 3/4 of its slots: 12 senders, the 13th is refused. */
	for (uint32_t s = 13; s < 23; s++)
		assert_int_equal(V(s, 1), IL_AUTH_OK);
	assert_int_equal(V(99, 1), IL_AUTH_REPLAY);
	assert_int_equal(V(11, 6000), IL_AUTH_OK);
#undef V
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_sign_verify),
		cmocka_unit_test(test_replay_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
