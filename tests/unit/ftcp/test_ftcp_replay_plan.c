/* SPDX-License-Identifier: BSD-3-Clause
 * The FT-TCP logger's replay builder on damaged logs (ftl_replay_plan, in
 * memory): regressions of what tests/fuzz/fuzz_ftlog.c found. A read count
 * taken from a damaged truncation record sized a table of 16 GiB; a read
 * of 0 bytes was replayed (the server's end of file); a DATA record 2^31
 * behind the stream's base negated INT32_MIN. The binary is linked with
 * --wrap for the allocator: the largest request is recorded. Also the
 * loader on a segment image (ftl_load_image), one connection's records
 * among another's, and the planner's steps over its spans.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ftlog.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

static size_t largest;

void *__wrap_malloc(size_t size)
{
	if (size > largest)
		largest = size;
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (n * size > largest)
		largest = n * size;
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	if (size > largest)
		largest = size;
	return __real_realloc(p, size);
}

#define ISN 1000u
static const struct ftc_key K = {.cip = 0x0100000a, .sip = 0x0200000a, .cport = 0x3930,
				  .sport = 0x8913};

struct img {
	uint8_t b[4096];
	size_t len;
};

static void add(struct img *m, uint16_t type, uint32_t seq, uint32_t aux, uint8_t flags,
		uint16_t plen)
{
	struct ftc_rec *r = (struct ftc_rec *)(m->b + m->len);
	uint32_t sz = ftc_rec_size(plen);

	assert_true(m->len + sz <= sizeof(m->b));
	memset(r, 0, sz);
	*r = (struct ftc_rec){.len = sz, .type = type, .plen = plen, .key = K, .seq = seq,
			      .aux = aux, .flags = flags};
	memset(r + 1, 'd', plen);
	ftl_rec_seal(r);
	m->len += sz;
}

/* The image starts over with a segment's header (FR_SEG at log position
 * start, then the magic), as seglog.c writes it. */
static void seg_start(struct img *m, uint64_t start)
{
	struct ftc_rec *h = (struct ftc_rec *)m->b;

	*h = (struct ftc_rec){.len = 56, .type = FR_SEG, .plen = 8, .seq = (uint32_t)start,
			      .aux = FTC_LOG_VERSION};
	memcpy(h + 1, FTC_SEG_MAGIC, 8);
	ftl_rec_seal(h);
	m->len = 56;
}

static struct ftl_replay job(uint32_t data_len, uint32_t nmax)
{
	struct ftl_replay j;

	memset(&j, 0, sizeof(j));
	j.base = ISN + 1;
	j.data_len = data_len;
	j.nmax = nmax;
	j.key = K;
	snprintf(j.replay_path, sizeof(j.replay_path), "test.replay");
	return j;
}

/* A truncation record of a damaged log says 2^32 - 2 reads: the read table
 * was sized from it (16 GiB). No more reads than the log has records. */
static void test_damaged_read_count(void **state)
{
	struct img m = {0};
	struct ftl_replay_plan p;

	(void)state;
	add(&m, FR_SYN, ISN, 0, 0, 0);
	add(&m, FR_DATA, ISN + 1, 0, 0x18, 100);
	add(&m, FR_READ, 0, 60, 0, 0);
	add(&m, FR_READ, 0, 0xfffffffeu, 0xff, 0); /* FTL_READ_TRUNC */
	add(&m, FR_READ, 0, 40, 0, 0);
	/* What ftl_replay_prepare makes of a connection loaded from it. */
	struct ftl_replay j = job(100, 0xfffffffeu + 1);
	largest = 0;
	assert_int_equal(ftl_replay_plan(m.b, m.len, &j, &p), 0);
	assert_true(largest < 1u << 20);
	assert_int_equal(p.n_reads, 2);
	assert_int_equal(p.lens[0], 60);
	assert_int_equal(p.lens[1], 40);
	assert_int_equal(p.n_ext, 1);
	ftl_replay_plan_free(&p);
}

/* A read record of 0 bytes is no read: replayed, the server's read would
 * return 0, its end of file. */
static void test_zero_length_read(void **state)
{
	struct img m = {0};
	struct ftl_replay_plan p;

	(void)state;
	add(&m, FR_SYN, ISN, 0, 0, 0);
	add(&m, FR_DATA, ISN + 1, 0, 0x18, 50);
	add(&m, FR_READ, 0, 0, 0, 0);
	add(&m, FR_READ, 0, 20, 0, 0);
	add(&m, FR_READ, 0, 0, 0, 0);
	add(&m, FR_READ, 0, 30, 0, 0);
	struct ftl_replay j = job(50, 5);
	assert_int_equal(ftl_replay_plan(m.b, m.len, &j, &p), 0);
	assert_int_equal(p.n_reads, 2);
	assert_int_equal(p.lens[0], 20);
	assert_int_equal(p.lens[1], 30);
	assert_int_equal(p.read_total, 50);
	ftl_replay_plan_free(&p);
}

/* A DATA record exactly 2^31 behind the base: its offset is INT32_MIN,
 * which was negated (undefined; the sanitizer builds stop there). It lies
 * outside the stream either way and supplies nothing. */
static void test_record_half_the_sequence_space_away(void **state)
{
	struct img m = {0};
	struct ftl_replay_plan p;

	(void)state;
	add(&m, FR_SYN, ISN, 0, 0, 0);
	add(&m, FR_DATA, ISN + 1 + 0x80000000u, 0, 0x18, 64);
	add(&m, FR_DATA, ISN + 1, 0, 0x18, 64);
	add(&m, FR_DATA, ISN + 1 - 0x7fffffffu, 0, 0x18, 64);
	struct ftl_replay j = job(64, 1);
	assert_int_equal(ftl_replay_plan(m.b, m.len, &j, &p), 0);
	assert_int_equal(p.n_ext, 1);
	assert_int_equal(p.ext[0].len, 64);
	/* the second record's payload, after its 48-byte header */
	assert_int_equal(p.ext[0].log_off, 48 + ftc_rec_size(64) + 48);
	ftl_replay_plan_free(&p);
}

/* A segment of the shared log in memory: one connection's records among
 * another's (closed in it), a torn tail. Loaded for one key, its state and
 * spans; the plan's steps over its spans take only its own bytes. */
static void test_load_image_one_key(void **state)
{
	static const struct ftc_key K2 = {.cip = 0x0300000a, .sip = 0x0200000a,
					  .cport = 0x3a30, .sport = 0x8913};
	static struct ftl l;
	struct img m = {0};
	struct ftl_replay_plan p;
	struct ftl_conn *c;
	const uint64_t start = 1u << 20;

	(void)state;
	seg_start(&m, start);
	add(&m, FR_SYN, ISN, 0, 0, 0);
	add(&m, FR_DATA, ISN + 1, 0, 0x18, 40);
	size_t other = m.len;
	add(&m, FR_SYN, ISN, 0, 0, 0);         /* K2's, below */
	add(&m, FR_DATA, ISN + 1, 0, 0x18, 80);
	add(&m, FR_CLOSED, 0, 0, 0, 0);
	for (size_t o = other; o < m.len; o += ((struct ftc_rec *)(m.b + o))->len) {
		((struct ftc_rec *)(m.b + o))->key = K2;
		ftl_rec_seal((struct ftc_rec *)(m.b + o));
	}
	add(&m, FR_DATA, ISN + 41, 0, 0x18, 24);
	add(&m, FR_READ, 0, 64, 0, 0);
	size_t whole = m.len;
	add(&m, FR_DATA, ISN + 65, 0, 0x18, 16);
	m.len -= 10; /* torn */

	l.dir = "/nonexistent";
	assert_int_equal(ftl_load_image(&l, m.b, m.len, &K, &c), whole);
	assert_non_null(c);
	assert_null(ftl_conn_find(&l, &K2));
	assert_int_equal(l.n_live, 1);
	assert_int_equal(c->contig, ISN + 65);
	assert_int_equal(c->reads, 1);
	assert_int_equal(c->n_spans, 1);
	assert_int_equal(c->spans[0].start, start + 56);
	assert_int_equal(c->spans[0].end, start + whole);
	struct ftl_replay j = job(64, 2);
	assert_int_equal(ftl_replay_plan_init(&p, &j, whole - 56), 0);
	assert_int_equal(ftl_replay_plan_add(&p, &j, m.b + 56, whole - 56, start + 56), 0);
	assert_int_equal(ftl_replay_plan_finish(&p, &j), 0);
	assert_int_equal(p.n_ext, 2);
	assert_int_equal(p.ext[0].log_off, start + 56 + 48 + 48);
	assert_int_equal(p.ext[0].len, 40);
	assert_int_equal(p.ext[1].len, 24);
	assert_int_equal(p.n_reads, 1);
	ftl_replay_plan_free(&p);
	/* Not a segment: nothing loaded. */
	m.b[48] ^= 1; /* the magic */
	assert_int_equal(ftl_load_image(&l, m.b, m.len, &K, &c), 0);
	assert_null(c);
	ftl_free_all(&l);
}

/* A client that closed its side: its FIN, the last thing logged, takes a
 * sequence number no byte stands for. The replay is the bytes before it
 * and says so (fin); a FIN in the middle of the logged stream (no TCP
 * sends one) leaves a hole: no replay. */
static void test_client_fin_ends_the_replay(void **state)
{
	static struct ftl l;
	struct img m = {0};
	struct ftl_replay_plan p;
	struct ftl_conn *c;
	const uint64_t start = 1u << 20;

	(void)state;
	for (int mid = 0; mid < 2; mid++) {
		seg_start(&m, start);
		add(&m, FR_SYN, ISN, 0, 0, 0);
		add(&m, FR_DATA, ISN + 1, 0, 0x18, 40);
		if (mid) {
			add(&m, FR_DATA, ISN + 41, 0, 0x11, 0); /* FIN at ISN + 41 */
			add(&m, FR_DATA, ISN + 42, 0, 0x18, 20);
		} else {
			add(&m, FR_DATA, ISN + 41, 0, 0x19, 20); /* its FIN at ISN + 61 */
		}
		l.dir = "/nonexistent";
		assert_int_equal(ftl_load_image(&l, m.b, m.len, &K, &c), m.len);
		assert_non_null(c);
		assert_int_equal(c->contig, ISN + 62);
		ftl_conn_durable(c); /* as a restart leaves it */

		struct ftl_replay j;
		assert_int_equal(ftl_replay_prepare(&l, c, &j), 0);
		assert_int_equal(j.fin, !mid);
		assert_int_equal(j.data_len, mid ? 61 : 60);
		assert_int_equal(ftl_replay_plan_init(&p, &j, m.len - 56), 0);
		assert_int_equal(ftl_replay_plan_add(&p, &j, m.b + 56, m.len - 56, start + 56), 0);
		if (mid) {
			assert_int_equal(ftl_replay_plan_finish(&p, &j), -1);
		} else {
			assert_int_equal(ftl_replay_plan_finish(&p, &j), 0);
			assert_int_equal(p.n_ext, 2);
			assert_int_equal(p.ext[0].len + p.ext[1].len, 60);
			ftl_replay_plan_free(&p);
		}
		ftl_replay_done(&l, NULL, &j);
		ftl_free_all(&l);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_damaged_read_count),
		cmocka_unit_test(test_zero_length_read),
		cmocka_unit_test(test_record_half_the_sequence_space_away),
		cmocka_unit_test(test_load_image_one_key),
		cmocka_unit_test(test_client_fin_ends_the_replay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
