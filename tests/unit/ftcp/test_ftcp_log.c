/* SPDX-License-Identifier: BSD-3-Clause
 * FT-TCP without DPDK: the shared rings (records, padding at the wrap, full ring,
 * the sleep/wake handshake, the down ring) and the logger's store (holes and
 * overlaps, sequence wrap, a restart rebuilding state from the files, a torn
 * tail record, the replay file: G1/G2/G3/G4 decisions).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include <interlink/ftcp_ring.h>

#include "ftlog.h"

static char ring_path[128], dir[128];

static int setup(void **state)
{
	(void)state;
	snprintf(ring_path, sizeof(ring_path), "/dev/shm/ilft-unit-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "/tmp/ilft-unit-%d", (int)getpid());
	unlink(ring_path);
	mkdir(dir, 0700);
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	(void)state;
	unlink(ring_path);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const struct ftc_key K = {0x0100000a, 0x0200000a, 0x3930, 0x8913};

static void test_ring_wrap_and_full(void **state)
{
	char err[256];
	struct ftc_ring *h = ftc_ring_open(ring_path, 1 << 16, FTC_DATAPLANE, err, sizeof(err));
	struct ftc_ring *c = ftc_ring_open(ring_path, 0, FTC_LOGGER, err, sizeof(err)); /* attach */
	struct il_shm_ring_stats rs;
	const struct ftc_rec *rr;
	uint32_t rlen;
	uint8_t pay[1500];
	unsigned produced = 0, consumed = 0;
	(void)state;

	assert_non_null(h);
	assert_non_null(c);
	assert_int_equal(c->file.geom[0].bytes, 1 << 16);
	/* Fill until full: 1000-byte payloads never fit the end exactly, so
	 * the ring must pad its end. */
	for (;;) {
		uint32_t len = ftc_rec_size(1000);
		struct ftc_rec *r = il_shm_reserve(&h->tx, len);
		if (!r)
			break;
		memset(pay, (int)produced, sizeof(pay));
		*r = (struct ftc_rec){.len = len, .type = FR_DATA, .plen = 1000, .key = K,
				      .seq = produced * 1000};
		memcpy(r + 1, pay, 1000);
		produced++;
	}
	il_shm_publish(&h->tx);
	assert_true(produced >= 60 && produced <= 64);
	il_shm_ring_stats(h->up, &rs);
	assert_int_equal(rs.drops, 1);
	/* Consume some, produce again across the wrap, then consume all. */
	for (int round = 0; round < 3; round++) {
		unsigned take = round == 2 ? ~0u : 20;
		while (take-- && il_shm_rec_next(&c->rx, (const void **)&rr, &rlen) == 1) {
			assert_int_equal(rlen, rr->len);
			assert_int_equal(rr->type, FR_DATA);
			assert_int_equal(rr->seq, consumed * 1000);
			assert_int_equal(((const uint8_t *)(rr + 1))[999], (uint8_t)consumed);
			consumed++;
		}
		il_shm_release(&c->rx);
		for (int i = 0; round < 2 && i < 10; i++) {
			uint32_t len = ftc_rec_size(1000);
			struct ftc_rec *r = il_shm_reserve(&h->tx, len);
			assert_non_null(r);
			*r = (struct ftc_rec){.len = len, .type = FR_DATA, .plen = 1000, .key = K,
					      .seq = produced * 1000};
			memset(r + 1, (int)produced, 1000);
			produced++;
		}
		il_shm_publish(&h->tx);
	}
	assert_int_equal(consumed, produced);
	assert_int_equal(il_shm_rec_next(&c->rx, (const void **)&rr, &rlen), 0);

	/* Wake handshake: nothing until the logger announces its sleep, then
	 * exactly one wake per sleep. */
	assert_false(il_shm_wake_due(&h->tx));
	assert_true(il_shm_sleep_prepare(&c->rx));
	assert_true(il_shm_wake_due(&h->tx));
	assert_false(il_shm_wake_due(&h->tx));
	il_shm_sleep_end(&c->rx);
	assert_false(il_shm_wake_due(&h->tx));

	/* Down ring: FIFO, full is refused. */
	struct ftc_down d = {.type = FD_STABLE, .key = K}, out[16];
	unsigned sent = 0;
	for (d.a = 0; il_shm_send(&c->tx, &d, 1) == 1; d.a++)
		sent++;
	assert_int_equal(sent, FTC_DOWN_SLOTS);
	assert_int_equal(il_shm_free(&c->tx), 0);
	unsigned got = 0, n;
	while ((n = il_shm_recv(&h->rx, out, 16)) > 0)
		for (unsigned i = 0; i < n; i++)
			assert_int_equal(out[i].a, got++);
	assert_int_equal(got, sent);
	ftc_ring_close(h);

	/* A restarted data plane carries on where the last one stopped: what
	 * it had published is still there for the logger. */
	h = ftc_ring_open(ring_path, 0, FTC_DATAPLANE, err, sizeof(err));
	assert_non_null(h);
	struct ftc_rec *w = il_shm_reserve(&h->tx, ftc_rec_size(0));
	assert_non_null(w);
	*w = (struct ftc_rec){.len = ftc_rec_size(0), .type = FR_CLOSED, .key = K};
	il_shm_publish(&h->tx);
	ftc_ring_close(h);
	assert_int_equal(il_shm_rec_next(&c->rx, (const void **)&rr, &rlen), 1);
	assert_int_equal(rr->type, FR_CLOSED);
	il_shm_release(&c->rx);
	ftc_ring_close(c);

	/* A file of another layout is refused, naming it. */
	int fd = open(ring_path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "garbage!", 8), 8);
	close(fd);
	assert_null(ftc_ring_open(ring_path, 0, FTC_LOGGER, err, sizeof(err)));
	assert_non_null(strstr(err, ring_path));
}

static struct ftl L1, L2;

/* What a logger holds: its connections' files and buffers. */
static void ftl_release(struct ftl *l)
{
	struct ftl_conn *c;

	FTL_FOR_EACH_LIVE(l, c)
		ftl_conn_free(l, c);
	for (unsigned i = 0; i < FTL_MAX_CONNS; i++) {
		free(l->conns[i].wbuf);
		free(l->conns[i].hole_s);
		free(l->conns[i].hole_e);
	}
	memset(l, 0, sizeof(*l));
}

static void rec_data(struct ftl *l, struct ftl_conn *c, uint32_t seq, uint32_t len, uint32_t ack,
		     uint8_t fill)
{
	uint8_t buf[sizeof(struct ftc_rec) + 4096];
	struct ftc_rec *r = (struct ftc_rec *)buf;

	*r = (struct ftc_rec){.len = ftc_rec_size(len), .type = FR_DATA, .plen = (uint16_t)len,
			      .key = c->key, .seq = seq, .ack = ack, .flags = 0x10};
	memset(r + 1, fill, len);
	assert_int_equal(ftl_apply(l, c, r, true), 0);
}

static void flush(struct ftl_conn *c)
{
	assert_int_equal(pwrite(c->fd, c->wbuf, c->wlen, (off_t)c->off), (ssize_t)c->wlen);
	c->off += c->wlen;
	c->wlen = 0;
}

static void test_store_holes_restart_replay(void **state)
{
	const uint32_t isn = 0xfffffc00u; /* the instream wraps past 2^32 */
	struct ftl_conn *c;
	(void)state;

	L1.dir = dir;
	c = ftl_conn_new(&L1, &K);
	assert_non_null(c);
	assert_int_equal(ftl_open_file(&L1, c, true), 0);
	struct ftc_rec syn = {.len = sizeof(syn), .type = FR_SYN, .key = K, .seq = isn};
	struct ftc_rec sa = {.len = sizeof(sa), .type = FR_SYNACK, .key = K, .seq = 5000};
	ftl_apply(&L1, c, &syn, true);
	ftl_apply(&L1, c, &sa, true);
	assert_int_equal(c->contig, isn + 1);
	/* bytes [0,1000) [2000,3000) [1500,2500) then [1000,1600): holes,
	 * overlaps, and the wrap at 2^32 inside [1000,2000) */
	rec_data(&L1, c, isn + 1, 1000, 5001, 'a');
	assert_int_equal(c->contig, isn + 1001);
	rec_data(&L1, c, isn + 2001, 1000, 5101, 'c');
	assert_int_equal(c->contig, isn + 1001);
	rec_data(&L1, c, isn + 1501, 1000, 5051, 'b');
	assert_int_equal(c->contig, isn + 1001);
	rec_data(&L1, c, isn + 1001, 600, 5001, 'x');
	assert_int_equal(c->contig, isn + 3001);
	assert_int_equal(c->n_holes, 0);
	assert_int_equal(c->max_ack, 5101);
	rec_data(&L1, c, isn + 1, 500, 5001, 'a'); /* a retransmission changes nothing */
	assert_int_equal(c->contig, isn + 3001);
	/* reads: 800 + 1500 + 900 = 3200 > 3000 logged: the last one was never
	 * acknowledged (G3) and must not be replayed */
	uint32_t rl[] = {800, 1500, 900};
	for (int i = 0; i < 3; i++) {
		struct ftc_rec r = {.len = sizeof(r), .type = FR_READ, .key = K, .aux = rl[i]};
		ftl_apply(&L1, c, &r, true);
	}
	assert_int_equal(c->reads, 3);
	assert_int_equal(c->read_total, 3200);
	flush(c);
	/* A torn record at the tail (a crash mid-write). */
	assert_int_equal(pwrite(c->fd, "\x40\x00\x00\x00\x03\x00", 6, (off_t)c->off), 6);

	/* A restarted logger rebuilds the same state from the file. */
	L2.dir = dir;
	assert_int_equal(ftl_load_dir(&L2, 1), 1);
	struct ftl_conn *d = ftl_conn_find(&L2, &K);
	assert_non_null(d);
	assert_int_equal(d->contig, c->contig);
	assert_int_equal(d->contig_durable, c->contig);
	assert_true(d->isns_durable);
	assert_int_equal(d->client_isn, isn);
	assert_int_equal(d->server_isn, 5000);
	assert_int_equal(d->max_ack, 5101);
	assert_int_equal(d->reads, 3);
	assert_int_equal(d->off, c->off); /* torn tail cut off */
	struct stat stb;
	assert_int_equal(fstat(d->fd, &stb), 0);
	assert_int_equal((uint64_t)stb.st_size, c->off);

	/* Recovery: the replay file has the logged stream, the reads that fit
	 * in it, and the output the client already acknowledged. */
	char path[512];
	uint32_t fab, sseq;
	assert_int_equal(ftl_make_replay(&L2, d, path, sizeof(path), &fab, &sseq), 0);
	assert_int_equal(fab, isn + 3000);   /* G1/G2: new TCP expects the first unlogged byte */
	assert_int_equal(sseq, 5101);        /* G4/G5: server_seq = highest client ack */
	assert_int_equal(d->reads, 2);       /* truncated, and recorded so in the log */
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct ftc_replay_hdr h;
	uint32_t lens[2];
	uint8_t data[3000];
	assert_int_equal(read(fd, &h, sizeof(h)), (ssize_t)sizeof(h));
	assert_memory_equal(h.magic, FTC_REPLAY_MAGIC, 8);
	assert_int_equal(h.n_reads, 2);
	assert_int_equal(h.data_len, 3000);
	assert_int_equal(h.out_skip, 100);
	assert_int_equal(read(fd, lens, sizeof(lens)), (ssize_t)sizeof(lens));
	assert_int_equal(lens[0], 800);
	assert_int_equal(lens[1], 1500);
	/* The stream is in the log, at the extents: [0,1000) of the first
	 * record, [1000,1600) of the fourth, [1600,2500) of the third, the
	 * rest of the second (the retransmission supplies nothing). */
	struct ftc_replay_ext ext[8];
	assert_int_equal(h.n_ext, 4);
	assert_int_equal(read(fd, ext, sizeof(ext[0]) * h.n_ext),
			 (ssize_t)(sizeof(ext[0]) * h.n_ext));
	assert_int_equal(read(fd, ext, 1), 0); /* nothing after them */
	close(fd);
	char logp[512];
	ftl_path(&L2, &K, "log", logp, sizeof(logp));
	int lfd = open(logp, O_RDONLY);
	assert_true(lfd >= 0);
	uint32_t at = 0;
	for (uint32_t e = 0; e < h.n_ext; e++) {
		assert_true(at + ext[e].len <= sizeof(data));
		assert_int_equal(pread(lfd, data + at, ext[e].len, (off_t)ext[e].log_off),
				 (ssize_t)ext[e].len);
		at += ext[e].len;
	}
	close(lfd);
	assert_int_equal(at, 3000);
	assert_int_equal(ext[0].len, 1000);
	assert_int_equal(ext[1].len, 600);
	assert_int_equal(ext[2].len, 900);
	assert_int_equal(ext[3].len, 500);
	for (int i = 0; i < 3000; i++) {
		/* where records overlap the first in stream order supplies the
		 * bytes: the same in real TCP; here they differ, so check the
		 * layout */
		char want = i < 1000 ? 'a' : i < 1500 ? 'x' : i < 2000 ? 'b' : i < 2500 ? 'b' : 'c';
		if (i >= 1000 && i < 1600)
			want = 'x';
		else if (i >= 1600 && i < 2500)
			want = 'b';
		if (data[i] != (uint8_t)want)
			fail_msg("replay byte %d is %c, want %c", i, data[i], want);
	}
	/* The truncation survives another restart. */
	flush(d);
	ftl_release(&L1);
	L1.dir = dir;
	assert_int_equal(ftl_load_dir(&L1, 1), 1);
	assert_int_equal(ftl_conn_find(&L1, &K)->reads, 2);
	assert_int_equal(ftl_conn_find(&L1, &K)->read_total, 2300);
	ftl_release(&L1);
	ftl_release(&L2);
}

/* Heavy loss: thousands of disjoint ranges, filled in a scrambled order;
 * stable_seq must land exactly at the end and never before its time. */
static void test_many_holes(void **state)
{
	static struct ftl l;
	const uint32_t isn = 0xffff0000u, n = 4000;
	struct ftl_conn *c;
	(void)state;

	l.dir = dir;
	c = ftl_conn_new(&l, &K);
	struct ftc_rec syn = {.len = sizeof(syn), .type = FR_SYN, .key = K, .seq = isn};
	ftl_apply(&l, c, &syn, false);
	for (uint32_t i = 1; i < n; i += 2) /* every odd segment first */
		rec_data(&l, c, isn + 1 + i * 100, 100, 0, 'o');
	assert_int_equal(c->contig, isn + 1);
	assert_int_equal(c->n_holes, n / 2);
	for (uint32_t k = 0; k < n / 2; k++) {
		uint32_t i = 2 * ((k * 7919u) % (n / 2)); /* even segments, scrambled */
		rec_data(&l, c, isn + 1 + i * 100, 100, 0, 'e');
		if (i == 0)
			assert_true(ftc_seq_lt(isn + 1, c->contig));
	}
	assert_int_equal(c->contig, isn + 1 + n * 100);
	assert_int_equal(c->n_holes, 0);
	c->wlen = 0;
	ftl_release(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ring_wrap_and_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_holes_restart_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_holes, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
