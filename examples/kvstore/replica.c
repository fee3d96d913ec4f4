/* SPDX-License-Identifier: BSD-3-Clause
 * il-kvstore replica: applies PUTs in uniform total order, serves
 * snapshots to replicas that rejoin, and fetches one itself after a
 * crash or an exclusion (the protocol is described in kvstore.c).
 *
 * Snapshot over TCP: request = u64 S (the joiner's start); answer, once
 * the donor's position P >= S: "KVS1", u32 keys, u64 P, u64 applied, then
 * keys x u64 values (0: unset), all big-endian. A donor that is itself
 * not a full replica closes the connection and the joiner tries the next.
 *
 * --log FILE appends what the replica applies, so that a test can check
 * that every PUT was applied exactly once (the state alone cannot show it:
 * PUTs overwrite). One line per run of PUTs applied one after the other:
 * "epoch global_seq sender sender_seq n value", n PUTs at global_seq..+n-1
 * from one sender, its sender_seqs and values (a writer numbers its PUTs
 * in the value's low half) each one more than the last. Lines go out with
 * write(2) once per loop step, and the file is opened for appending: a
 * replica that is killed and restarted continues it, after a line "#"
 * (which also ends a line its predecessor's death cut short).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/json.h>

#include "kv.h"

#define SNAP_HDR 24
#define MAX_REQ 16

struct pend {
	uint64_t g, sender_seq, val;
	uint32_t key, sender, epoch;
};

static struct {
	uint64_t *vals;
	uint64_t applied, bad, skip_below;
	bool ready, need_transfer, member;
	/* PUTs U-delivered while the snapshot is on its way */
	struct pend *buf;
	size_t n_buf, cap_buf;
	/* fetching a snapshot */
	int xfd;
	uint8_t *xbuf;
	size_t xgot;
	uint64_t want, retry_ms;
	unsigned peer_i, transfers, served, epochs;
	uint32_t uto_epoch; /* the epoch of the last U-delivery */
	/* serving snapshots */
	int lfd;
	struct {
		int fd;
		uint64_t at, since;
	} req[MAX_REQ];
	unsigned n_req;
	/* --log: lines not yet written, and the run of PUTs being extended */
	int logfd;
	char *logbuf;
	size_t n_log;
	struct pend run;
	uint64_t run_n;
} R = { .xfd = -1, .lfd = -1, .logfd = -1 };

#define LOG_BUF (1u << 20)
#define LOG_LINE 128u

static void log_run_end(void)
{
	const struct pend *p = &R.run;

	if (R.run_n)
		R.n_log += (size_t)snprintf(R.logbuf + R.n_log, LOG_LINE, "%u %lu %u %lu %lu %lu\n",
					    p->epoch, p->g, p->sender, p->sender_seq, R.run_n, p->val);
	R.run_n = 0;
}

static void log_flush(void)
{
	size_t off = 0;

	log_run_end();
	while (off < R.n_log) {
		ssize_t k = write(R.logfd, R.logbuf + off, R.n_log - off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			perror("il-kvstore: --log");
			exit(1);
		}
		off += (size_t)k;
	}
	R.n_log = 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void apply(const struct pend *p)
{
	const struct pend *r = &R.run;

	R.vals[p->key] = p->val;
	R.applied++;
	if (R.logfd < 0)
		return;
	if (R.run_n && p->epoch == r->epoch && p->sender == r->sender && p->g == r->g + R.run_n &&
	    p->sender_seq == r->sender_seq + R.run_n && p->val == r->val + R.run_n) {
		R.run_n++;
		return;
	}
	if (R.n_log + 2 * LOG_LINE > LOG_BUF)
		log_flush();
	log_run_end();
	R.run = *p;
	R.run_n = 1;
}

static void on_uto(void *user, const struct il_ep_msg *m)
{
	(void)user;
	if (m->len != KV_PUT_LEN) {
		R.bad++;
		return;
	}
	uint32_t key = il_get32(m->data);
	uint64_t val = il_get64((const uint8_t *)m->data + 4);

	if (key >= kv_opts.keys || val == 0) {
		R.bad++;
		return;
	}
	if (m->epoch != R.uto_epoch) {
		/* When an epoch's first message was U-delivered, on the clock the
		 * tests' fault times are taken on (a pair's takeover, docs/ha.md). */
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		printf("replica %u: first delivery in epoch %u at %ld.%09ld\n", kv_opts.id,
		       m->epoch, (long)ts.tv_sec, ts.tv_nsec);
		R.uto_epoch = m->epoch;
	}
	if (m->global_seq < R.skip_below)
		return; /* already in the snapshot we loaded */
	const struct pend p = { .g = m->global_seq, .sender_seq = m->sender_seq, .val = val,
				.key = key, .sender = m->sender, .epoch = m->epoch };
	if (R.ready) {
		apply(&p);
		return;
	}
	if (R.n_buf == R.cap_buf) {
		R.cap_buf = R.cap_buf ? R.cap_buf * 2 : 65536;
		R.buf = realloc(R.buf, R.cap_buf * sizeof(*R.buf));
		if (R.buf == NULL) {
			perror("il-kvstore: buffer");
			exit(1);
		}
	}
	R.buf[R.n_buf++] = p;
}

static void xfer_abort(void)
{
	if (R.xfd >= 0)
		close(R.xfd);
	R.xfd = -1;
	R.xgot = 0;
}

static void on_view(void *user, const struct il_ep_view *v)
{
	(void)user;
	if (v->event == IL_EP_VIEW_EXCLUDED) {
		/* What we did not U-deliver is gone for us: our state is a
		 * prefix that will not be continued. Fetch it anew. */
		fprintf(stderr, "replica %u: excluded from view %u\n", kv_opts.id, v->view_id);
		R.member = false;
		R.ready = false;
		R.need_transfer = true;
		R.n_buf = 0;
		xfer_abort();
		return;
	}
	R.member = true;
	if (v->event == IL_EP_VIEW_NEW_EPOCH) {
		/* The sequencer restarted: global sequences start again at 1,
		 * positions and snapshots of the old epoch mean nothing now. */
		printf("replica %u: new epoch %u\n", kv_opts.id, v->epoch);
		R.epochs++;
		R.skip_below = 0;
		if (R.need_transfer) {
			R.want = 1;
			R.n_buf = 0;
			xfer_abort();
		}
		return;
	}
	if (v->event != IL_EP_VIEW_JOINED)
		return;
	printf("replica %u: joined view %u at %lu\n", kv_opts.id, v->view_id, v->start_seq);
	R.skip_below = 0;
	if (!R.need_transfer) {
		R.ready = true;
		return;
	}
	R.want = v->start_seq;
	R.n_buf = 0;
	R.retry_ms = 0;
	xfer_abort();
}

static void xfer_start(void)
{
	if (kv_opts.n_peers == 0) {
		fprintf(stderr, "replica %u: no --peer to fetch state from\n", kv_opts.id);
		exit(1);
	}
	const struct sockaddr_in *p = &kv_opts.peers[R.peer_i++ % kv_opts.n_peers];
	struct timeval tv = { .tv_usec = 300000 };
	uint8_t q[8];

	R.xfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(R.xfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	il_put64(q, R.want);
	if (connect(R.xfd, (const struct sockaddr *)p, sizeof(*p)) != 0 ||
	    write(R.xfd, q, sizeof(q)) != (ssize_t)sizeof(q)) {
		xfer_abort();
		R.retry_ms = now_ms() + 100;
		return;
	}
	fcntl(R.xfd, F_SETFL, O_NONBLOCK);
	R.xgot = 0;
}

static int cmp_pend(const void *a, const void *b)
{
	const struct pend *x = a, *y = b;

	return x->g < y->g ? -1 : x->g > y->g;
}

static void xfer_done(void)
{
	uint64_t pos = il_get64(R.xbuf + 8), applied = il_get64(R.xbuf + 16);

	if (memcmp(R.xbuf, "KVS1", 4) || il_get32(R.xbuf + 4) != kv_opts.keys || pos < R.want) {
		fprintf(stderr, "replica %u: bad snapshot (pos %lu, want %lu)\n", kv_opts.id, pos,
			R.want);
		exit(1);
	}
	for (uint32_t k = 0; k < kv_opts.keys; k++)
		R.vals[k] = il_get64(R.xbuf + SNAP_HDR + 8u * k);
	R.applied = applied;
	if (R.n_buf > 0) /* qsort wants a buffer even for nothing */
		qsort(R.buf, R.n_buf, sizeof(*R.buf), cmp_pend);
	for (size_t i = 0; i < R.n_buf; i++)
		if (R.buf[i].g >= pos)
			apply(&R.buf[i]);
	printf("replica %u: state transfer done: snapshot at %lu (start %lu), %zu buffered\n",
	       kv_opts.id, pos, R.want, R.n_buf);
	R.n_buf = 0;
	R.skip_below = pos;
	R.ready = true;
	R.need_transfer = false;
	R.transfers++;
	xfer_abort();
}

static void xfer_step(void)
{
	size_t need = SNAP_HDR + 8u * kv_opts.keys;

	if (!R.member || !R.need_transfer || R.ready)
		return;
	if (R.xfd < 0) {
		if (now_ms() >= R.retry_ms)
			xfer_start();
		return;
	}
	for (;;) {
		ssize_t k = read(R.xfd, R.xbuf + R.xgot, need - R.xgot);

		if (k > 0) {
			R.xgot += (size_t)k;
			if (R.xgot == need) {
				xfer_done();
				return;
			}
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* Closed early: that peer could not serve; try the next. */
		xfer_abort();
		R.retry_ms = now_ms() + 100;
		return;
	}
}

static void serve_step(uint64_t pos)
{
	int fd = accept4(R.lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd >= 0) {
		struct timeval tv = { .tv_usec = 200000 };
		uint8_t q[8];

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (R.n_req == MAX_REQ || read(fd, q, 8) != 8) {
			close(fd);
		} else {
			R.req[R.n_req].fd = fd;
			R.req[R.n_req].at = il_get64(q);
			R.req[R.n_req++].since = now_ms();
		}
	}
	for (unsigned i = 0; i < R.n_req;) {
		bool drop = !R.ready || now_ms() - R.req[i].since > 30000;

		if (!drop && pos < R.req[i].at) {
			i++;
			continue;
		}
		if (!drop) {
			/* Between two deliveries: the map is exactly the
			 * PUTs below pos. */
			size_t n = SNAP_HDR + 8u * kv_opts.keys, off = 0;
			uint8_t *s = malloc(n);

			memcpy(s, "KVS1", 4);
			il_put32(s + 4, kv_opts.keys);
			il_put64(s + 8, pos);
			il_put64(s + 16, R.applied);
			for (uint32_t k = 0; k < kv_opts.keys; k++)
				il_put64(s + SNAP_HDR + 8u * k, R.vals[k]);
			while (off < n) {
				ssize_t k = write(R.req[i].fd, s + off, n - off);
				if (k <= 0)
					break;
				off += (size_t)k;
			}
			free(s);
			R.served++;
			printf("replica %u: served a snapshot at %lu (asked %lu)\n", kv_opts.id, pos,
			       R.req[i].at);
		}
		close(R.req[i].fd);
		R.req[i] = R.req[--R.n_req];
	}
}

static uint64_t state_hash(void)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t k = 0; k < kv_opts.keys; k++) {
		uint8_t b[12];

		if (R.vals[k] == 0)
			continue;
		kv_put_encode(b, k, R.vals[k]);
		for (unsigned i = 0; i < sizeof(b); i++)
			h = (h ^ b[i]) * 0x100000001b3ull;
	}
	return h;
}

static void write_status(struct il_ep *ep, uint64_t pos)
{
	char tmp[512];
	struct il_ep_stats st;
	FILE *f;

	if (kv_opts.status == NULL)
		return;
	il_ep_get_stats(ep, &st);
	snprintf(tmp, sizeof(tmp), "%s.tmp", kv_opts.status);
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	struct il_json j;
	il_json_begin(&j, f, 0);
	il_json_obj(&j, NULL);
	il_json_u64(&j, "id", kv_opts.id);
	il_json_bool(&j, "ready", R.ready);
	il_json_bool(&j, "member", R.member);
	il_json_u64(&j, "applied", R.applied);
	il_json_u64(&j, "pos", pos);
	il_json_strf(&j, "hash", "%016" PRIx64, state_hash());
	il_json_u64(&j, "bad", R.bad);
	il_json_u64(&j, "transfers", R.transfers);
	il_json_u64(&j, "served", R.served);
	il_json_u64(&j, "data_rx", st.data_rx);
	il_json_u64(&j, "msgs_uto", st.msgs_uto);
	il_json_u64(&j, "nak_tx", st.nak_tx);
	il_json_u64(&j, "ack_tx", st.ack_tx);
	il_json_u64(&j, "unavail_msgs", st.unavail_msgs);
	il_json_u64(&j, "rx_overflow", st.rx_overflow);
	il_json_u64(&j, "epochs", R.epochs);
	il_json_u64(&j, "lost_stable", st.lost_stable);
	il_json_u64(&j, "fifo_dup", st.fifo_dup);
	il_json_u64(&j, "stale_epoch_frames", st.stale_epoch_frames);
	il_json_u64(&j, "epoch_reports", st.epoch_reports);
	il_json_u64(&j, "cut_repairs", st.cut_repairs);
	il_json_u64(&j, "cut_incomplete", st.cut_incomplete);
	kv_auth_status(&j, ep);
	il_json_end(&j);
	bool ok = il_json_finish(&j) == 0;
	/* A partial file never replaces a whole one. */
	if (fclose(f) != 0 || !ok) {
		unlink(tmp);
		return;
	}
	rename(tmp, kv_opts.status);
}

int kv_replica(struct il_ep *ep, volatile bool *stop)
{
	const struct il_ep_callbacks cb = { .uto = on_uto, .view = on_view };
	int one = 1;

	R.vals = calloc(kv_opts.keys, sizeof(*R.vals));
	R.xbuf = malloc(SNAP_HDR + 8u * kv_opts.keys);
	R.need_transfer = kv_opts.recover;
	if (kv_opts.log != NULL) {
		R.logfd = open(kv_opts.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		R.logbuf = malloc(LOG_BUF);
		if (R.logfd < 0 || R.logbuf == NULL) {
			perror("il-kvstore: --log");
			return 1;
		}
		/* A line of its own: ends a line a killed predecessor cut short. */
		R.n_log = (size_t)snprintf(R.logbuf, LOG_LINE, "#\n");
	}
	R.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	setsockopt(R.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (R.vals == NULL || R.xbuf == NULL ||
	    bind(R.lfd, (const struct sockaddr *)&kv_opts.listen, sizeof(kv_opts.listen)) ||
	    listen(R.lfd, 8)) {
		perror("il-kvstore: snapshot listener");
		return 1;
	}
	int rc = il_ep_join(ep, kv_opts.group, kv_opts.mcast, IL_EP_RECEIVER, &cb, NULL);
	if (rc) {
		fprintf(stderr, "il-kvstore: join: %s\n", strerror(-rc));
		return 1;
	}
	uint64_t last_status = 0;
	while (!*stop) {
		rc = il_ep_poll(ep, 2000);
		if (rc < 0) {
			fprintf(stderr, "il-kvstore: poll: %s\n", strerror(-rc));
			return 1;
		}
		uint64_t pos = il_ep_uto_next(ep, kv_opts.group);
		if (R.logfd >= 0 && (R.n_log || R.run_n))
			log_flush();
		xfer_step();
		serve_step(pos);
		if (now_ms() - last_status >= 200) {
			write_status(ep, pos);
			last_status = now_ms();
		}
	}
	if (R.logfd >= 0)
		log_flush();
	write_status(ep, il_ep_uto_next(ep, kv_opts.group));
	il_ep_close(ep);
	return 0;
}
