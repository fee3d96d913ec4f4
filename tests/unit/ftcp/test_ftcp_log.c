/* SPDX-License-Identifier: BSD-3-Clause
 * FT-TCP without DPDK: the shared rings (records, padding at the wrap, full ring,
 * the sleep/wake handshake, the down ring) and the logger's store over its
 * shared log (holes and overlaps, sequence wrap, a restart rebuilding state
 * from the segments, a torn tail record and a torn copy, the replay file:
 * G1/G2/G3/G4 decisions; many connections in one log, compaction removing
 * segments and copying a long-lived connection forward, legacy logs).
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
#include <sys/wait.h>
#include <arpa/inet.h>

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

/* A logger's store over the test's directory (none durability). */
static void store_init(struct ftl *l, uint64_t seg_bytes, uint64_t reloc_max)
{
	memset(l, 0, sizeof(*l));
	l->dir = dir;
	l->seg_bytes = seg_bytes;
	l->reloc_max = reloc_max;
}

static void store_open(struct ftl *l, uint64_t seg_bytes, uint64_t reloc_max)
{
	store_init(l, seg_bytes, reloc_max);
	assert_int_equal(ftl_log_open(l), 0);
}

/* A restarted logger: everything rebuilt from the directory. */
static int store_load(struct ftl *l, uint64_t seg_bytes, uint64_t reloc_max)
{
	store_init(l, seg_bytes, reloc_max);
	return ftl_load_dir(l, 1);
}

static void store_end(struct ftl *l)
{
	ftl_free_all(l);
	memset(l, 0, sizeof(*l));
}

static struct ftc_key key_n(uint32_t n)
{
	struct ftc_key k = K;
	k.cport = htons((uint16_t)(10000 + n));
	return k;
}

static struct ftl_conn *conn_open(struct ftl *l, const struct ftc_key *k, uint32_t isn,
				  uint32_t sisn)
{
	struct ftl_conn *c = ftl_conn_new(l, k);
	assert_non_null(c);
	struct ftc_rec syn = {.len = sizeof(syn), .type = FR_SYN, .key = *k, .seq = isn};
	struct ftc_rec sa = {.len = sizeof(sa), .type = FR_SYNACK, .key = *k, .seq = sisn};
	assert_int_equal(ftl_apply(l, c, &syn, true), 0);
	assert_int_equal(ftl_apply(l, c, &sa, true), 0);
	return c;
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

static void rec_read(struct ftl *l, struct ftl_conn *c, uint32_t len)
{
	struct ftc_rec r = {.len = sizeof(r), .type = FR_READ, .key = c->key, .aux = len};
	assert_int_equal(ftl_apply(l, c, &r, true), 0);
}

/* The normal end, as the logger's loop does it: the tombstone is logged,
 * the connection freed. */
static void conn_close(struct ftl *l, struct ftl_conn *c)
{
	struct ftc_rec t = {.len = sizeof(t), .type = FR_CLOSED, .key = c->key};
	assert_int_equal(ftl_apply(l, c, &t, true), 0);
	ftl_conn_free(l, c);
}

/* One commit round in line, then what the loop does after it. */
static void commit_round(struct ftl *l)
{
	assert_int_equal(ftl_log_write_sync(l, false), 0);
	ftl_log_after_commit(l);
}

static int count_segments(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "exit $(ls %s | grep -c '^ftlog-.*\\.seg$')", dir);
	int rc = system(cmd);
	return WEXITSTATUS(rc);
}

/* The replay file's stream (the copy its one extent points at). */
static uint8_t *replay_stream(const char *path, struct ftc_replay_hdr *h, uint32_t *lens,
			      uint32_t max_lens)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, h, sizeof(*h)), (ssize_t)sizeof(*h));
	assert_memory_equal(h->magic, FTC_REPLAY_MAGIC, 8);
	assert_true(h->n_reads <= max_lens);
	assert_int_equal(read(fd, lens, sizeof(*lens) * h->n_reads),
			 (ssize_t)(sizeof(*lens) * h->n_reads));
	uint8_t *data = malloc(h->data_len + 1);
	assert_non_null(data);
	if (h->data_len) {
		struct ftc_replay_ext e;
		assert_int_equal(h->n_ext, 1);
		assert_int_equal(read(fd, &e, sizeof(e)), (ssize_t)sizeof(e));
		assert_int_equal(e.len, h->data_len);
		assert_int_equal(e.log_off, sizeof(*h) + sizeof(*lens) * h->n_reads + sizeof(e));
		assert_int_equal(pread(fd, data, h->data_len, (off_t)e.log_off),
				 (ssize_t)h->data_len);
		assert_int_equal(pread(fd, data, 1, (off_t)(e.log_off + e.len)), 0); /* the end */
	} else {
		assert_int_equal(h->n_ext, 0);
	}
	close(fd);
	return data;
}

static void test_store_holes_restart_replay(void **state)
{
	const uint32_t isn = 0xfffffc00u; /* the instream wraps past 2^32 */
	struct ftl_conn *c;
	(void)state;

	store_open(&L1, 0, 0);
	c = conn_open(&L1, &K, isn, 5000);
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
	for (int i = 0; i < 3; i++)
		rec_read(&L1, c, rl[i]);
	assert_int_equal(c->reads, 3);
	assert_int_equal(c->read_total, 3200);
	/* The crash: FR_CRASHED with the server's last 20 bytes of output,
	 * ending at outstream position 150 (seq 5000 + 1 + 150). */
	{
		uint8_t buf[sizeof(struct ftc_rec) + 32];
		struct ftc_rec *r = (struct ftc_rec *)buf;
		*r = (struct ftc_rec){.len = ftc_rec_size(20), .type = FR_CRASHED, .plen = 20,
				      .key = c->key, .seq = isn + 3001, .ack = 5151, .aux = 20};
		for (int i = 0; i < 20; i++)
			((uint8_t *)(r + 1))[i] = (uint8_t)('A' + i);
		assert_int_equal(ftl_apply(&L1, c, r, true), 0);
	}
	commit_round(&L1);
	/* A torn record at the tail (a crash mid-write). */
	struct ftl_seg *hd = &L1.segs[L1.n_segs - 1];
	assert_int_equal(pwrite(hd->fd, "\x40\x00\x00\x00\x03\x00", 6, (off_t)hd->len), 6);

	/* A restarted logger rebuilds the same state from the log. */
	assert_int_equal(store_load(&L2, 0, 0), 1);
	struct ftl_conn *d = ftl_conn_find(&L2, &K);
	assert_non_null(d);
	assert_int_equal(d->contig, c->contig);
	assert_int_equal(d->contig_durable, c->contig);
	assert_true(d->isns_durable);
	assert_int_equal(d->client_isn, isn);
	assert_int_equal(d->server_isn, 5000);
	assert_int_equal(d->max_ack, 5101);
	assert_int_equal(d->reads, 3);
	assert_int_equal(d->out_tail_len, 20);
	assert_int_equal(d->out_tail_end, 5151);
	assert_int_equal(d->log_end, c->log_end);
	assert_int_equal(L2.written, L1.written); /* torn tail cut off */
	struct stat stb;
	assert_int_equal(fstat(L2.segs[L2.n_segs - 1].fd, &stb), 0);
	assert_int_equal((uint64_t)stb.st_size, L1.written - L1.segs[L1.n_segs - 1].start);

	/* Recovery: the replay file has the logged stream, the reads that fit
	 * in it, and the output the client already acknowledged. */
	char path[512];
	uint32_t fab, sseq, lens[4];
	struct ftc_replay_hdr h;
	assert_int_equal(ftl_make_replay(&L2, d, path, sizeof(path), &fab, &sseq), 0);
	assert_int_equal(fab, isn + 3000);   /* G1/G2: new TCP expects the first unlogged byte */
	assert_int_equal(sseq, 5101);        /* G4/G5: server_seq = highest client ack */
	assert_int_equal(d->reads, 2);       /* truncated, and recorded so in the log */
	uint8_t *data = replay_stream(path, &h, lens, 4);
	assert_int_equal(h.n_reads, 2);
	assert_int_equal(h.data_len, 3000);
	assert_int_equal(h.out_skip, 100);
	assert_int_equal(h.tail_end, 150); /* the crashed server's last output, for the shim */
	assert_int_equal(h.tail_len, 20);
	assert_memory_equal(h.tail, "ABCDEFGHIJKLMNOPQRST", 20);
	assert_int_equal(lens[0], 800);
	assert_int_equal(lens[1], 1500);
	/* Where records overlap, the first in stream order supplies the bytes
	 * (the same in real TCP; here they differ, so the layout shows):
	 * [0,1000) of the first record, [1000,1600) of the fourth, [1600,2500)
	 * of the third, the rest of the second. */
	for (int i = 0; i < 3000; i++) {
		char want = i < 1000 ? 'a' : i < 1600 ? 'x' : i < 2500 ? 'b' : 'c';
		if (data[i] != (uint8_t)want)
			fail_msg("replay byte %d is %c, want %c", i, data[i], want);
	}
	free(data);
	/* The truncation survives another restart. */
	assert_int_equal(ftl_log_write_sync(&L2, false), 0);
	store_end(&L1);
	assert_int_equal(store_load(&L1, 0, 0), 1);
	assert_int_equal(ftl_conn_find(&L1, &K)->reads, 2);
	assert_int_equal(ftl_conn_find(&L1, &K)->read_total, 2300);
	store_end(&L1);
	store_end(&L2);
}

/* Damaged or odd records the replay must not trip on: a DATA record
 * exactly 2^31 behind the stream's base (negating that offset as an int32
 * is undefined; UBSan in build-san) and a read of 0 bytes (the server's end
 * of file: replayed, the recovered server would see the client close). */
static void test_replay_far_behind_and_empty_read(void **state)
{
	const uint32_t isn = 1000;
	struct ftl_conn *c;
	(void)state;

	store_open(&L1, 0, 0);
	c = conn_open(&L1, &K, isn, 5000);
	rec_data(&L1, c, isn + 1, 100, 5001, 'a');
	rec_data(&L1, c, isn + 1 - 0x80000000u, 50, 5001, 'z'); /* 2^31 behind */
	rec_read(&L1, c, 60);
	rec_read(&L1, c, 0);
	rec_read(&L1, c, 40);
	assert_int_equal(c->reads, 3);
	commit_round(&L1);
	c->contig_durable = c->contig;
	c->reads_durable = c->reads;
	c->read_total_durable = c->read_total;

	char path[512];
	uint32_t fab, sseq, lens[4];
	struct ftc_replay_hdr h;
	assert_int_equal(ftl_make_replay(&L1, c, path, sizeof(path), &fab, &sseq), 0);
	uint8_t *data = replay_stream(path, &h, lens, 4);
	assert_int_equal(h.data_len, 100);
	assert_int_equal(h.n_reads, 2); /* the empty read is not replayed */
	assert_int_equal(lens[0], 60);
	assert_int_equal(lens[1], 40);
	for (int i = 0; i < 100; i++)
		assert_int_equal(data[i], 'a');
	free(data);
	/* The logger's count follows the replay's (a truncation record). */
	assert_int_equal(c->reads, 2);
	assert_int_equal(c->read_total, 100);
	store_end(&L1);
}

/* Many connections interleaved in one log across many segments: every
 * round is one write; a restart rebuilds each from its own records; a
 * replay holds only its connection's bytes; closed connections stay
 * closed though their segments stay (others have records there). */
static void test_many_connections_one_log(void **state)
{
	enum { N = 300, ROUNDS = 10, SZ = 100 };
	static struct ftl_conn *cs[N];
	(void)state;

	store_open(&L1, 64 << 10, 0);
	for (uint32_t i = 0; i < N; i++) {
		struct ftc_key k = key_n(i);
		cs[i] = conn_open(&L1, &k, 1000 * i, 7);
	}
	for (uint32_t r = 0; r < ROUNDS; r++) {
		uint64_t writes = L1.st.writes;
		for (uint32_t i = 0; i < N; i++) {
			rec_data(&L1, cs[i], 1000 * i + 1 + r * SZ, SZ, 8, (uint8_t)(i + r));
			rec_read(&L1, cs[i], SZ);
		}
		commit_round(&L1);
		assert_int_equal(L1.st.writes, writes + 1); /* one write for 300 connections */
	}
	assert_true(L1.n_segs > 4);
	assert_int_equal(count_segments(), (int)L1.n_segs);
	assert_int_equal(L1.st.segments_removed, 0); /* every segment has live records */
	/* Half of them end normally. */
	for (uint32_t i = 0; i < N; i += 2)
		conn_close(&L1, cs[i]);
	commit_round(&L1);

	assert_int_equal(store_load(&L2, 64 << 10, 0), N / 2);
	for (uint32_t i = 0; i < N; i++) {
		struct ftc_key k = key_n(i);
		struct ftl_conn *d = ftl_conn_find(&L2, &k);
		if (i % 2 == 0) {
			assert_null(d); /* its tombstone */
			continue;
		}
		assert_non_null(d);
		assert_int_equal(d->contig, 1000 * i + 1 + ROUNDS * SZ);
		assert_int_equal(d->reads, ROUNDS);
		assert_int_equal(d->n_spans, cs[i]->n_spans);
		if (i % 49 != 1)
			continue;
		char path[512];
		uint32_t fab, sseq, lens[ROUNDS + 1];
		struct ftc_replay_hdr h;
		assert_int_equal(ftl_make_replay(&L2, d, path, sizeof(path), &fab, &sseq), 0);
		uint8_t *data = replay_stream(path, &h, lens, ROUNDS + 1);
		assert_int_equal(h.data_len, ROUNDS * SZ);
		assert_int_equal(h.n_reads, ROUNDS);
		for (uint32_t b = 0; b < ROUNDS * SZ; b++)
			if (data[b] != (uint8_t)(i + b / SZ))
				fail_msg("connection %u, replay byte %u is %u", i, b, data[b]);
		free(data);
		unlink(path);
	}
	store_end(&L1);
	store_end(&L2);
}

/* Compaction: segments go once no live connection has records in them; a
 * small long-lived connection is copied forward instead of keeping every
 * segment; a large one keeps its segments until it ends. */
static void test_compaction_removes_segments(void **state)
{
	const uint64_t seg = 32 << 10;
	uint32_t tseq = 0;
	(void)state;

	store_open(&L1, seg, seg / 4);
	struct ftc_key kb = key_n(1), kbig = key_n(2);
	struct ftl_conn *b = conn_open(&L1, &kb, 100, 9);
	rec_data(&L1, b, 101, 300, 10, 'B');
	rec_read(&L1, b, 300);
	struct ftl_conn *big = conn_open(&L1, &kbig, 5000, 9);
	uint32_t big_seq = 5001;
	int most = 0;
	for (uint32_t r = 0; r < 120; r++) {
		/* a short connection: 4 KB, read, closed */
		struct ftc_key kt = key_n(100 + r);
		struct ftl_conn *t = conn_open(&L1, &kt, tseq, 9);
		rec_data(&L1, t, tseq + 1, 4000, 10, 'T');
		rec_read(&L1, t, 4000);
		conn_close(&L1, t);
		tseq += 100000;
		/* the long-lived one acks (a download's pure acks) */
		rec_data(&L1, b, 401, 0, 10 + r, 0);
		/* the big one uploads 1000 bytes a round until round 60 (over
		 * reloc_max before the first segment could be left behind) */
		if (r < 60 && big) {
			rec_data(&L1, big, big_seq, 1000, 10, 'G');
			big_seq += 1000;
		} else if (r == 60) {
			/* While it lived it kept every segment it has records in
			 * (it is over reloc_max: never copied forward). */
			assert_true(big->log_bytes > L1.reloc_max);
			assert_int_equal(L1.st.segments_removed, 0);
			most = count_segments();
			assert_true(most >= 6);
			conn_close(&L1, big);
			big = NULL;
		}
		commit_round(&L1);
	}
	/* What is left: the newest segments, and none older than what the
	 * small one (copied forward) still needs. */
	assert_true(L1.st.segments_removed > 0);
	assert_true(L1.st.relocations > 0);
	assert_true(count_segments() <= 4);
	assert_true(count_segments() < most);
	assert_int_equal(count_segments(), (int)L1.n_segs);
	assert_true(b->spans[0].start >= L1.segs[0].start);

	/* A restart finds the small one whole (from its latest copy on) and
	 * none of the closed ones. */
	assert_int_equal(store_load(&L2, seg, seg / 4), 1);
	struct ftl_conn *d = ftl_conn_find(&L2, &kb);
	assert_non_null(d);
	assert_int_equal(d->contig, 401);
	assert_int_equal(d->reads, 1);
	assert_int_equal(d->max_ack, 10 + 119);
	assert_int_equal(d->log_end, b->log_end);
	char path[512];
	uint32_t fab, sseq, lens[4];
	struct ftc_replay_hdr h;
	assert_int_equal(ftl_make_replay(&L2, d, path, sizeof(path), &fab, &sseq), 0);
	uint8_t *data = replay_stream(path, &h, lens, 4);
	assert_int_equal(h.data_len, 300);
	assert_int_equal(h.n_reads, 1);
	for (int i = 0; i < 300; i++)
		assert_int_equal(data[i], 'B');
	free(data);
	store_end(&L1);
	store_end(&L2);
}

/* A copy forward torn by a crash (its FR_MOVED written, not all of the
 * copy) is cut off, and the connection comes back from its old records;
 * a whole copy replaces them. */
static void test_torn_copy_is_cut(void **state)
{
	(void)state;

	store_open(&L1, 0, 1 << 20);
	struct ftl_conn *c = conn_open(&L1, &K, 1, 2);
	for (uint32_t i = 0; i < 10; i++) {
		rec_data(&L1, c, 2 + 100 * i, 100, 3, (uint8_t)('0' + i));
		rec_read(&L1, c, 100);
	}
	commit_round(&L1);
	uint64_t before = L1.written;
	assert_int_equal(ftl_log_relocate(&L1, c), 0);
	assert_int_equal(L1.st.relocations, 1);
	/* Half of it reaches the file. */
	struct ftl_seg *hd = &L1.segs[L1.n_segs - 1];
	uint32_t half = L1.wlen / 2;
	assert_int_equal(pwrite(hd->fd, L1.wbuf, half, (off_t)hd->len), (ssize_t)half);
	assert_int_equal(store_load(&L2, 0, 1 << 20), 1);
	struct ftl_conn *d = ftl_conn_find(&L2, &K);
	assert_int_equal(d->contig, 1002);
	assert_int_equal(d->reads, 10);
	assert_int_equal(d->log_end, before);   /* its old records */
	assert_int_equal(L2.written, before);   /* the copy cut off */
	store_end(&L2);
	/* The whole copy: the connection's records from there on. */
	assert_int_equal(ftl_log_write_sync(&L1, false), 0);
	assert_int_equal(store_load(&L2, 0, 1 << 20), 1);
	d = ftl_conn_find(&L2, &K);
	assert_int_equal(d->contig, 1002);
	assert_int_equal(d->reads, 10);
	assert_int_equal(d->n_spans, 1);
	assert_int_equal(d->spans[0].start, before);
	assert_int_equal(d->log_end, L1.written);
	char path[512];
	uint32_t fab, sseq, lens[11];
	struct ftc_replay_hdr h;
	assert_int_equal(ftl_make_replay(&L2, d, path, sizeof(path), &fab, &sseq), 0);
	uint8_t *data = replay_stream(path, &h, lens, 11);
	assert_int_equal(h.data_len, 1000);
	assert_int_equal(h.n_reads, 10);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(data[i], '0' + i / 100);
	free(data);
	store_end(&L1);
	store_end(&L2);
}

/* The per-connection logs of an older logger are imported into the shared
 * log at start and removed. */
static void test_legacy_logs_imported(void **state)
{
	char p[600];
	uint8_t buf[4096];
	uint32_t o = 0;
	(void)state;

	snprintf(p, sizeof(p), "%s/10.0.0.1_12345-10.0.0.2_5001.log", dir);
	struct ftc_rec syn = {.len = sizeof(syn), .type = FR_SYN, .key = K, .seq = 40};
	struct ftc_rec sa = {.len = sizeof(sa), .type = FR_SYNACK, .key = K, .seq = 70};
	struct ftc_rec rd = {.len = sizeof(rd), .type = FR_READ, .key = K, .aux = 64};
	struct ftc_rec dt = {.len = ftc_rec_size(64), .type = FR_DATA, .plen = 64, .key = K,
			     .seq = 41, .ack = 71, .flags = 0x10};
	memcpy(buf + o, &syn, sizeof(syn)), o += sizeof(syn);
	memcpy(buf + o, &sa, sizeof(sa)), o += sizeof(sa);
	memcpy(buf + o, &dt, sizeof(dt)), o += sizeof(dt);
	memset(buf + o, 'L', 64), o += 64;
	memcpy(buf + o, &rd, sizeof(rd)), o += sizeof(rd);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, o), (ssize_t)o);
	close(fd);
	assert_int_equal(store_load(&L1, 0, 0), 1);
	assert_int_equal(L1.st.legacy_imported, 1);
	assert_int_equal(access(p, F_OK), -1); /* removed */
	struct ftl_conn *c = ftl_conn_find(&L1, &K);
	assert_int_equal(c->contig, 105);
	assert_int_equal(c->reads, 1);
	store_end(&L1);
	/* It is in the shared log now. */
	assert_int_equal(store_load(&L1, 0, 0), 1);
	assert_int_equal(L1.st.legacy_imported, 0);
	assert_int_equal(ftl_conn_find(&L1, &K)->contig, 105);
	store_end(&L1);
}

/* Heavy loss: thousands of disjoint ranges, filled in a scrambled order;
 * stable_seq must land exactly at the end and never before its time. */
static void test_many_holes(void **state)
{
	static struct ftl l;
	const uint32_t isn = 0xffff0000u, n = 4000;
	struct ftl_conn *c;
	(void)state;

	store_open(&l, 0, 0);
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
	store_end(&l);
}

static struct ftc_key churn_key(uint32_t i)
{
	struct ftc_key k = {.cip = 0x0a000001u + (i & 7), .sip = 0x0a000063u,
			    .cport = (uint16_t)(1000 + i / 8), .sport = 80};
	return k;
}

/* The connection index: a full table, then connections freed in a
 * scrambled order while others come and go; every live key is found, in
 * the slot it was given, every freed one is not, and the table refills. */
static void test_index_churn(void **state)
{
	static struct ftl l;
	static struct ftl_conn *at[FTL_MAX_CONNS];
	static bool live[FTL_MAX_CONNS];
	(void)state;

	memset(&l, 0, sizeof(l));
	for (uint32_t i = 0; i < FTL_MAX_CONNS; i++) {
		struct ftc_key k = churn_key(i);

		assert_null(ftl_conn_find(&l, &k));
		at[i] = ftl_conn_new(&l, &k);
		assert_non_null(at[i]);
		live[i] = true;
	}
	struct ftc_key extra = {.cip = 1, .sip = 2, .cport = 3, .sport = 4};
	assert_null(ftl_conn_new(&l, &extra)); /* full */
	for (uint32_t round = 0; round < 4; round++) {
		for (uint32_t n = 0; n < FTL_MAX_CONNS / 2; n++) {
			uint32_t i = (n * 2654435761u + round * 97u) % FTL_MAX_CONNS;

			if (live[i]) {
				ftl_conn_free(&l, at[i]);
				live[i] = false;
			} else {
				struct ftc_key k = churn_key(i); /* its old slot may hold another */

				at[i] = ftl_conn_new(&l, &k);
				assert_non_null(at[i]);
				live[i] = true;
			}
		}
		for (uint32_t i = 0; i < FTL_MAX_CONNS; i++) {
			struct ftc_key k = churn_key(i);

			assert_ptr_equal(ftl_conn_find(&l, &k), live[i] ? at[i] : NULL);
		}
	}
	ftl_free_all(&l);
	for (uint32_t i = 0; i < FTL_IDX_SIZE; i++)
		assert_int_equal(l.idx[i], 0);
}

/* CRC-32C's check value ("123456789"), chained calls, and a record's seal. */
static void test_crc32c(void **state)
{
	(void)state;
	assert_int_equal(ftl_crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(ftl_crc32c(ftl_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	assert_int_equal(ftl_crc32c(0, "", 0), 0);
	uint8_t buf[sizeof(struct ftc_rec) + 16];
	struct ftc_rec *r = (struct ftc_rec *)buf;
	*r = (struct ftc_rec){.len = sizeof(buf), .type = FR_DATA, .plen = 16, .key = K};
	memset(r + 1, 'q', 16);
	ftl_rec_seal(r);
	assert_true(ftl_rec_crc_ok(r));
	buf[sizeof(buf) - 1] ^= 0x40; /* one bit of the payload */
	assert_false(ftl_rec_crc_ok(r));
}

static uint64_t file_size(int fd)
{
	struct stat stb;
	assert_int_equal(fstat(fd, &stb), 0);
	return (uint64_t)stb.st_size;
}

/* group and sync: the head's file runs ahead of its records with zeros,
 * so a round writes over blocks the file has. A restart reads up to the
 * zeros, keeps them, and appends where the records end; a record torn
 * over them (its header written, its payload still zeros) fails its CRC
 * and is cut off with what follows. */
static void test_zeros_ahead_and_torn_over_them(void **state)
{
	(void)state;

	store_init(&L1, 0, 0);
	L1.durability = FTL_GROUP;
	assert_int_equal(ftl_log_open(&L1), 0);
	struct ftl_seg *hd = &L1.segs[L1.n_segs - 1];
	assert_true(hd->checked);
	assert_true(hd->file_len >= hd->len + FTL_ZERO_AHEAD - 4096);
	assert_int_equal(file_size(hd->fd), hd->file_len);
	uint64_t ahead = hd->file_len;
	struct ftl_conn *c = conn_open(&L1, &K, 1, 2);
	rec_data(&L1, c, 2, 1000, 3, 'a');
	rec_read(&L1, c, 1000);
	assert_int_equal(ftl_log_write_sync(&L1, true), 0);
	ftl_log_zero_ahead(&L1);
	assert_int_equal(file_size(hd->fd), ahead); /* written over the zeros */
	assert_int_equal(L1.st.zero_ahead_bytes, ahead - 56);
	uint64_t whole = hd->len;

	/* A restart: the same connection, the zeros kept. */
	store_init(&L2, 0, 0);
	L2.durability = FTL_GROUP;
	assert_int_equal(ftl_load_dir(&L2, 1), 1);
	assert_int_equal(L2.written, L1.written);
	assert_int_equal(L2.st.crc_mismatches, 0);
	struct ftl_seg *h2 = &L2.segs[L2.n_segs - 1];
	assert_int_equal(h2->len, whole);
	assert_int_equal(h2->file_len, ahead);
	assert_int_equal(file_size(h2->fd), ahead);
	struct ftl_conn *d = ftl_conn_find(&L2, &K);
	assert_non_null(d);
	assert_int_equal(d->contig, 1002);
	assert_int_equal(d->reads, 1);
	/* It goes on where the records end: one more, then a record torn
	 * over the zeros: the first 48 bytes of a 600-byte one. */
	rec_data(&L2, d, 1002, 500, 3, 'b');
	assert_int_equal(ftl_log_write_sync(&L2, true), 0);
	uint64_t whole2 = h2->len;
	uint8_t torn[sizeof(struct ftc_rec) + 600];
	struct ftc_rec *t = (struct ftc_rec *)torn;
	*t = (struct ftc_rec){.len = ftc_rec_size(600), .type = FR_DATA, .plen = 600, .key = K,
			      .seq = 1502, .ack = 3, .flags = 0x10};
	memset(t + 1, 'c', 600);
	ftl_rec_seal(t);
	assert_int_equal(pwrite(h2->fd, torn, sizeof(*t), (off_t)whole2), (ssize_t)sizeof(*t));
	store_end(&L2);
	store_end(&L1);

	store_init(&L2, 0, 0);
	L2.durability = FTL_GROUP;
	assert_int_equal(ftl_load_dir(&L2, 1), 1);
	assert_int_equal(L2.st.crc_mismatches, 1);
	h2 = &L2.segs[L2.n_segs - 1];
	assert_int_equal(h2->len, whole2);
	/* cut off: nothing of it left to be read once records reach it */
	assert_int_equal(file_size(h2->fd), whole2);
	d = ftl_conn_find(&L2, &K);
	assert_int_equal(d->contig, 1502);
	/* The whole record, written now, is read back. */
	assert_int_equal(ftl_apply(&L2, d, t, true), 0);
	assert_int_equal(ftl_log_write_sync(&L2, true), 0);
	ftl_log_zero_ahead(&L2);
	assert_true(L2.segs[L2.n_segs - 1].file_len > L2.segs[L2.n_segs - 1].len);
	store_end(&L2);
	store_init(&L2, 0, 0);
	assert_int_equal(ftl_load_dir(&L2, 1), 1);
	assert_int_equal(L2.st.crc_mismatches, 0);
	assert_int_equal(ftl_conn_find(&L2, &K)->contig, 2102);
	store_end(&L2);
}

/* Durability none writes no zeros (it never syncs), and a sealed head
 * gives back its zeros. */
static void test_zeros_only_when_syncing(void **state)
{
	(void)state;

	store_open(&L1, 0, 0); /* none */
	struct ftl_seg *hd = &L1.segs[L1.n_segs - 1];
	assert_int_equal(hd->file_len, hd->len);
	ftl_log_zero_ahead(&L1);
	assert_int_equal(file_size(hd->fd), hd->len);
	store_end(&L1);
	teardown(NULL);
	setup(NULL);

	store_init(&L1, 4096, 0);
	L1.durability = FTL_SYNC;
	assert_int_equal(ftl_log_open(&L1), 0);
	struct ftl_conn *c = conn_open(&L1, &K, 1, 2);
	rec_data(&L1, c, 2, 3000, 3, 'a');
	rec_data(&L1, c, 3002, 3000, 3, 'b');
	assert_int_equal(ftl_log_write_sync(&L1, true), 0);
	ftl_log_after_commit(&L1); /* past 4096 bytes: sealed, a new head */
	assert_int_equal(L1.n_segs, 2);
	assert_int_equal(file_size(L1.segs[0].fd), L1.segs[0].len);
	assert_int_equal(L1.segs[0].file_len, L1.segs[0].len);
	assert_true(file_size(L1.segs[1].fd) > L1.segs[1].len);
	store_end(&L1);
	store_init(&L2, 4096, 0);
	assert_int_equal(ftl_load_dir(&L2, 1), 1);
	assert_int_equal(ftl_conn_find(&L2, &K)->contig, 6002);
	assert_int_equal(L2.st.crc_mismatches, 0);
	store_end(&L2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ring_wrap_and_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_holes_restart_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_holes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_far_behind_and_empty_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_connections_one_log, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compaction_removes_segments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_copy_is_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_legacy_logs_imported, setup, teardown),
		cmocka_unit_test(test_index_churn),
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test_setup_teardown(test_zeros_ahead_and_torn_over_them, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zeros_only_when_syncing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
