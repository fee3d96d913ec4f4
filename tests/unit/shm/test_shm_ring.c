/* SPDX-License-Identifier: BSD-3-Clause
 * The shared-memory ring on its own: fixed-size messages across every
 * wrap point, records with the end padded, full rings counted, corrupt
 * lengths survived, the sleep/wake handshake (one doorbell per announced
 * sleep, a consumer that died asleep), a two-thread stream whose consumer
 * sleeps on an eventfd (a lost wake-up fails it), and the file: creation,
 * attach and every refusal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <interlink/shm_file.h>
#include <interlink/shm_ring.h>

/* A ring in private memory: the ring does not care where it lives. */
static struct il_shm_ring *ring_new(uint32_t bytes)
{
	struct il_shm_ring *r = aligned_alloc(IL_SHM_GUARD, sizeof(*r) + bytes);

	assert_non_null(r);
	memset(r, 0, sizeof(*r) + bytes);
	return r;
}

static void fill(void *p, uint32_t len, uint64_t seed)
{
	uint8_t *b = p;

	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7);
}

static bool same(const void *p, uint32_t len, uint64_t seed)
{
	const uint8_t *b = p;

	for (uint32_t i = 0; i < len; i++)
		if (b[i] != (uint8_t)(seed * 131 + i * 7))
			return false;
	return true;
}

static void test_fixed_wrap_and_full(void **state)
{
	struct il_shm_ring *r = ring_new(8 * 16);
	struct il_shm_prod p;
	struct il_shm_cons c;
	struct il_shm_ring_stats st;
	uint8_t in[8][16], out[8][16];
	uint64_t sent = 0, got = 0;
	(void)state;

	il_shm_prod_attach(&p, r, 8 * 16, 16);
	il_shm_cons_attach(&c, r, 8 * 16, 16, false);
	assert_int_equal(il_shm_free(&p), 8);
	/* Odd burst sizes on an 8-message ring: every start offset and every
	 * split of a copy across the end. */
	for (unsigned round = 0; round < 5000; round++) {
		unsigned b = round % 7 + 1, n;

		if (il_shm_free(&p) < b) {
			n = il_shm_recv(&c, out, 8);
			for (unsigned i = 0; i < n; i++)
				assert_true(same(out[i], 16, got + i));
			got += n;
		}
		for (unsigned i = 0; i < b; i++)
			fill(in[i], 16, sent + i);
		assert_int_equal(il_shm_send(&p, in, b), b);
		sent += b;
		assert_int_equal(il_shm_pending(&c), sent - got);
		n = il_shm_recv(&c, out, (round * 3) % 8 + 1);
		for (unsigned i = 0; i < n; i++)
			assert_true(same(out[i], 16, got + i));
		got += n;
	}
	while (got < sent) {
		unsigned n = il_shm_recv(&c, out, 8);

		assert_true(n > 0);
		for (unsigned i = 0; i < n; i++)
			assert_true(same(out[i], 16, got + i));
		got += n;
	}
	/* Full: the first ones go in, the rest are counted, nothing waits. */
	for (unsigned i = 0; i < 8; i++)
		fill(in[i], 16, i);
	assert_int_equal(il_shm_send(&p, in, 5), 5);
	assert_int_equal(il_shm_send(&p, in, 5), 3);
	assert_int_equal(il_shm_send(&p, in, 2), 0);
	assert_int_equal(il_shm_free(&p), 0);
	il_shm_ring_stats(r, &st);
	assert_int_equal(st.drops, 4);
	assert_int_equal(st.head - st.tail, 8 * 16);
	assert_int_equal(il_shm_recv(&c, out, 8), 8);
	assert_int_equal(il_shm_recv(&c, out, 8), 0);
	free(r);
}

/* Records of many lengths: the consumer sees exactly what was written, in
 * order, never the padding; a record that fits the end exactly is not
 * padded. */
static void test_records_padded_at_the_end(void **state)
{
	const uint32_t size = 4096;
	struct il_shm_ring *r = ring_new(size);
	struct il_shm_prod p;
	struct il_shm_cons c;
	struct il_shm_ring_stats st;
	uint64_t made = 0, seen = 0, pads = 0;
	(void)state;

	il_shm_prod_attach(&p, r, size, IL_SHM_REC_ALIGN);
	il_shm_cons_attach(&c, r, size, IL_SHM_REC_ALIGN, false);
	for (unsigned round = 0; round < 20000; round++) {
		uint32_t len = 8 * (1 + (round * 37) % 100); /* 8..800 bytes */
		uint64_t head0 = p.head;
		uint32_t *rec = il_shm_reserve(&p, len);

		if (rec == NULL) {
			/* Full: drain everything published so far. */
			const void *x;
			uint32_t l;

			il_shm_publish(&p);
			while (il_shm_rec_next(&c, &x, &l) == 1) {
				assert_int_equal(l, *(const uint32_t *)x);
				assert_true(same((const uint32_t *)x + 1, l - 4, seen));
				seen++;
			}
			il_shm_release(&c);
			assert_int_equal(seen, made);
			head0 = p.head;
			rec = il_shm_reserve(&p, len);
			assert_non_null(rec);
		}
		if (p.head - head0 > len)
			pads++;
		rec[0] = len;
		fill(rec + 1, len - 4, made);
		made++;
		if (round % 5 == 0)
			il_shm_publish(&p);
	}
	il_shm_publish(&p);
	{
		const void *x;
		uint32_t l;

		while (il_shm_rec_next(&c, &x, &l) == 1) {
			assert_true(same((const uint32_t *)x + 1, l - 4, seen));
			seen++;
		}
		il_shm_release(&c);
	}
	assert_int_equal(seen, made);
	assert_true(pads > 0);
	il_shm_ring_stats(r, &st);
	assert_int_equal(st.head, st.tail);

	/* Exactly the room left before the end: no padding. */
	uint32_t left = size - (uint32_t)(p.head & (size - 1));
	uint64_t h0 = p.head;
	uint32_t *rec = il_shm_reserve(&p, left);
	assert_non_null(rec);
	assert_int_equal(p.head - h0, left);
	rec[0] = left;
	il_shm_publish(&p);
	const void *x;
	uint32_t l;
	assert_int_equal(il_shm_rec_next(&c, &x, &l), 1);
	assert_int_equal(l, left);
	assert_ptr_equal(x, rec);
	il_shm_release(&c);
	/* A record larger than the ring never fits. */
	assert_null(il_shm_reserve(&p, size + 8));
	free(r);
}

/* A length word that cannot be right: skipped up to the producer's head,
 * and the records after it are read as usual. */
static void test_record_corrupt_length(void **state)
{
	const uint32_t bad[] = { 0, 12, 4096 + 8, 0x40, IL_SHM_REC_PAD | 16 };
	struct il_shm_ring *r = ring_new(4096);
	struct il_shm_prod p;
	struct il_shm_cons c;
	(void)state;

	il_shm_prod_attach(&p, r, 4096, IL_SHM_REC_ALIGN);
	il_shm_cons_attach(&c, r, 4096, IL_SHM_REC_ALIGN, false);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const void *x = &x;
		uint32_t l = 0, *rec = il_shm_reserve(&p, 32);

		assert_non_null(rec);
		/* 0x40 claims more than was published (32 bytes). */
		rec[0] = bad[i];
		il_shm_publish(&p);
		assert_int_equal(il_shm_rec_next(&c, &x, &l), -1);
		assert_null(x);
		assert_int_equal(l, bad[i]);
		il_shm_release(&c);
		rec = il_shm_reserve(&p, 16);
		rec[0] = 16;
		rec[1] = i;
		il_shm_publish(&p);
		assert_int_equal(il_shm_rec_next(&c, &x, &l), 1);
		assert_int_equal(((const uint32_t *)x)[1], i);
		assert_int_equal(il_shm_rec_next(&c, &x, &l), 0);
		il_shm_release(&c);
	}
	free(r);
}

static void test_sleep_wake_handshake(void **state)
{
	struct il_shm_ring *r = ring_new(1024);
	struct il_shm_prod p;
	struct il_shm_cons c, c2;
	struct il_shm_ring_stats st;
	uint8_t m[4][64];
	(void)state;

	memset(m, 7, sizeof(m));
	il_shm_prod_attach(&p, r, 1024, 64);
	il_shm_cons_attach(&c, r, 1024, 64, false);
	/* Consumer awake: no doorbell. */
	assert_int_equal(il_shm_send(&p, m, 1), 1);
	assert_false(il_shm_wake_due(&p));
	/* Cannot sleep with a message waiting: withdrawn, still no doorbell. */
	assert_false(il_shm_sleep_prepare(&c));
	assert_false(il_shm_wake_due(&p));
	assert_int_equal(il_shm_recv(&c, m, 4), 1);
	/* Asleep: the next publish rings once, later ones do not. */
	assert_true(il_shm_sleep_prepare(&c));
	assert_int_equal(il_shm_send(&p, m, 1), 1);
	assert_true(il_shm_wake_due(&p));
	assert_int_equal(il_shm_send(&p, m, 1), 1);
	assert_false(il_shm_wake_due(&p));
	il_shm_sleep_end(&c);
	assert_false(il_shm_wake_due(&p));
	assert_int_equal(il_shm_recv(&c, m, 4), 2);
	/* A new sleep is a new doorbell. */
	assert_true(il_shm_sleep_prepare(&c));
	assert_true(il_shm_wake_due(&p));
	il_shm_sleep_end(&c);
	il_shm_ring_stats(r, &st);
	assert_int_equal(st.sleeps, 3);
	assert_int_equal(st.wakeups, 2);

	/* A consumer that died asleep (its doorbell already rung): its
	 * successor's first sleep must still be answered. */
	assert_true(il_shm_sleep_prepare(&c));
	assert_true(il_shm_wake_due(&p));
	il_shm_cons_attach(&c2, r, 1024, 64, false);
	assert_true(il_shm_sleep_prepare(&c2));
	assert_true(il_shm_wake_due(&p));
	il_shm_sleep_end(&c2);
	/* Attaching with discard drops what was queued for the old consumer. */
	assert_int_equal(il_shm_send(&p, m, 3), 3);
	il_shm_cons_attach(&c2, r, 1024, 64, true);
	assert_int_equal(il_shm_pending(&c2), 0);
	assert_int_equal(il_shm_free(&p), 16);
	free(r);
}

/* Two threads, a consumer that sleeps on an eventfd whenever the ring is
 * empty: every record arrives intact and in order, and a lost wake-up
 * shows as a 5 s poll timeout. */
#define STREAM_RECS 1000000u

struct stream {
	struct il_shm_ring *r;
	int efd;
	uint64_t got, bad, blocked;
	int lost;
};

static void *stream_consumer(void *arg)
{
	struct stream *s = arg;
	struct il_shm_cons c;

	il_shm_cons_attach(&c, s->r, 1 << 14, IL_SHM_REC_ALIGN, false);
	while (s->got < STREAM_RECS) {
		const uint32_t *x;
		uint32_t l;
		int n = 0;

		while (il_shm_rec_next(&c, (const void **)&x, &l) == 1) {
			if (x[1] != (uint32_t)s->got || !same(x + 2, l - 8, s->got))
				s->bad++;
			s->got++;
			n++;
		}
		il_shm_release(&c);
		if (n == 0 && il_shm_sleep_prepare(&c)) {
			struct pollfd pf = { .fd = s->efd, .events = POLLIN };
			uint64_t v;

			s->blocked++;
			if (poll(&pf, 1, 5000) != 1) {
				s->lost = 1;
				return NULL;
			}
			if (read(s->efd, &v, sizeof(v)) != sizeof(v))
				s->bad++;
			il_shm_sleep_end(&c);
		}
	}
	return NULL;
}

static void test_two_thread_stream(void **state)
{
	struct stream s = { .r = ring_new(1 << 14) };
	struct il_shm_ring_stats st;
	struct il_shm_prod p;
	uint64_t sent = 0, rung = 0;
	pthread_t th;
	(void)state;

	s.efd = eventfd(0, EFD_CLOEXEC);
	assert_true(s.efd >= 0);
	il_shm_prod_attach(&p, s.r, 1 << 14, IL_SHM_REC_ALIGN);
	assert_int_equal(pthread_create(&th, NULL, stream_consumer, &s), 0);
	while (sent < STREAM_RECS) {
		/* Bursts of up to 16 records of 16..520 bytes. */
		unsigned b = (unsigned)(sent % 16) + 1;

		for (unsigned i = 0; i < b && sent < STREAM_RECS; i++) {
			uint32_t len = 16 + 8 * (uint32_t)(sent % 64);
			uint32_t *rec = il_shm_reserve(&p, len);

			if (rec == NULL) {
				sched_yield(); /* full: let the consumer run */
				break;
			}
			rec[0] = len;
			rec[1] = (uint32_t)sent;
			fill(rec + 2, len - 8, sent);
			sent++;
		}
		il_shm_publish(&p);
		if (il_shm_wake_due(&p)) {
			uint64_t one = 1;

			assert_int_equal(write(s.efd, &one, sizeof(one)), sizeof(one));
			rung++;
		}
	}
	pthread_join(th, NULL);
	close(s.efd);
	assert_false(s.lost);
	assert_int_equal(s.got, STREAM_RECS);
	assert_int_equal(s.bad, 0);
	il_shm_ring_stats(s.r, &st);
	assert_int_equal(st.wakeups, rung);
	assert_true(st.wakeups <= st.sleeps);
	assert_true(s.blocked <= st.sleeps);
	print_message("stream: %u records, consumer blocked %llu times, %llu doorbells, %llu "
		      "full-ring refusals\n", STREAM_RECS, (unsigned long long)s.blocked,
		      (unsigned long long)rung, (unsigned long long)st.drops);
	free(s.r);
}

static char path[128];

static int file_setup(void **state)
{
	static unsigned seq;

	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/il-test-shm-%d-%u", (int)getpid(), seq++);
	unlink(path);
	return 0;
}

static int file_teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static struct il_shm_spec spec_of(uint32_t a, uint32_t b)
{
	struct il_shm_spec s = {
		.what = "test file",
		.magic = "ILTEST01",
		.version = 3,
		.n_rings = 2,
		.ring = { { a, 64 }, { b, IL_SHM_REC_ALIGN } },
		.user_bytes = 200,
	};
	return s;
}

static void test_file_create_attach_refuse(void **state)
{
	struct il_shm_spec s = spec_of(1024, 4096), t;
	struct il_shm_file f, g;
	struct il_shm_prod p;
	struct il_shm_cons c;
	char err[256];
	uint8_t m[64] = { 1 };
	int fd;
	(void)state;

	/* Attach-only to a missing file. */
	assert_int_equal(il_shm_file_open(path, &s, 0, &f, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	/* Created, then attached by a second mapping with any sizes. */
	assert_int_equal(il_shm_file_open(path, &s, 1, &f, err, sizeof(err)), 0);
	t = spec_of(0, 0);
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), 0);
	assert_int_equal(g.geom[0].bytes, 1024);
	assert_int_equal(g.geom[1].bytes, 4096);
	assert_int_equal((uintptr_t)g.ring[0] % IL_SHM_GUARD, 0);
	assert_int_equal((uintptr_t)g.ring[1] % IL_SHM_GUARD, 0);
	/* The two mappings share the rings and the user area. */
	memset(f.user, 0xab, 200);
	assert_int_equal(((uint8_t *)g.user)[199], 0xab);
	assert_true((uint8_t *)g.user + 200 <= (uint8_t *)g.ring[0]);
	il_shm_prod_attach(&p, f.ring[0], 1024, 64);
	il_shm_cons_attach(&c, g.ring[0], 1024, 64, false);
	assert_int_equal(il_shm_send(&p, m, 1), 1);
	assert_int_equal(il_shm_recv(&c, m, 1), 1);
	assert_int_equal(m[0], 1);
	/* Creating again keeps the existing file (and its sizes). */
	il_shm_file_close(&g);
	t = spec_of(2048, 4096);
	assert_int_equal(il_shm_file_open(path, &t, 1, &g, err, sizeof(err)), 0);
	assert_int_equal(g.geom[0].bytes, 1024);
	il_shm_file_close(&g);
	il_shm_file_close(&f);

	/* Refusals, each naming the path. */
	t = spec_of(0, 0);
	t.ring[0].unit = 32;
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "64-byte messages"));
	t = spec_of(0, 0);
	t.version = 4;
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "layout version"));
	t = spec_of(0, 0);
	memcpy(t.magic, "ILOTHER1", 8);
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad magic"));
	t = spec_of(0, 0);
	t.n_rings = 1;
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "corrupt header"));
	/* Cut short: the size no longer matches the header. */
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2048), 0);
	close(fd);
	t = spec_of(0, 0);
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "disagree"));
	assert_non_null(strstr(err, path));
	/* Not even a header. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "garbage!", 8), 8);
	close(fd);
	assert_int_equal(il_shm_file_open(path, &t, 0, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too short"));
	/* Sizes that are no ring. */
	unlink(path);
	t = spec_of(1000, 4096);
	assert_int_equal(il_shm_file_open(path, &t, 1, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not a ring"));
	assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_wrap_and_full),
		cmocka_unit_test(test_records_padded_at_the_end),
		cmocka_unit_test(test_record_corrupt_length),
		cmocka_unit_test(test_sleep_wake_handshake),
		cmocka_unit_test(test_two_thread_stream),
		cmocka_unit_test_setup_teardown(test_file_create_attach_refuse, file_setup,
						file_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
