/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Recovery's replay file, built from the shared log. The fabricated SYN's
 * ISN and server_seq come from the connection's state in memory
 * (ftl_replay_params); the file (ftc_replay_hdr) lists the logged read
 * lengths and holds a copy of the logged instream bytes in stream order.
 * The copy is the price of the shared log: it holds every connection's
 * bytes and is never handed to a server, which gets the replay file alone
 * (twice: as the replay and as the file its one extent points into).
 *
 * ftl_replay_build runs in a worker thread: it touches nothing but its job,
 * the segments it maps (pinned by prepare, so none is removed under it)
 * and the file it writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ftlog.h"

void ftl_replay_params(const struct ftl_conn *c, uint32_t *fab_isn, uint32_t *server_seq)
{
	/* G5: server_seq = the highest client ack in the log. */
	*server_seq = c->have_ack ? c->max_ack : c->server_isn + 1;
	/* G1/G2: the shim serves every logged byte from the log, so the new
	 * TCP must expect the first byte that is not logged. */
	*fab_isn = c->contig_durable - 1;
}

int ftl_replay_prepare(struct ftl *l, const struct ftl_conn *c, struct ftl_replay *j)
{
	uint32_t fab_isn, sseq;

	memset(j, 0, sizeof(*j));
	j->key = c->key;
	snprintf(j->dir, sizeof(j->dir), "%s", l->dir);
	ftl_path(l, &c->key, "replay", j->replay_path, sizeof(j->replay_path));
	/* Only what is written: the loop appends meanwhile. */
	j->log_end = l->written;
	j->base = c->client_isn + 1;
	j->data_len = c->contig_durable - j->base;
	j->nmax = c->reads_durable + 1;
	ftl_replay_params(c, &fab_isn, &sseq);
	j->out_skip = sseq - (c->server_isn + 1);
	j->rc = -1;
	if (c->n_spans) {
		j->spans = malloc(sizeof(*j->spans) * c->n_spans);
		j->seg_start = malloc(sizeof(*j->seg_start) * c->n_spans);
		if (!j->spans || !j->seg_start) {
			free(j->spans);
			free(j->seg_start);
			j->spans = NULL;
			j->seg_start = NULL;
			return -1;
		}
	}
	for (uint32_t i = 0; i < c->n_spans; i++) {
		const struct ftl_seg *s = ftl_seg_of(l, c->spans[i].start);
		j->spans[i] = c->spans[i];
		j->seg_start[i] = s ? s->start : 0;
		ftl_seg_pin(l, c->spans[i].start);
	}
	j->n_spans = c->n_spans;
	return 0;
}

/* One DATA record's part of [base, base + L): where it lies in the stream
 * and in the log. */
struct cand {
	uint32_t s_off, len;
	uint64_t pos;
};

static int cand_cmp(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	if (a->s_off != b->s_off)
		return a->s_off < b->s_off ? -1 : 1;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* A span of the log, mapped: global position start lies at `at`. */
struct map {
	void *base;
	size_t maplen;
	const uint8_t *at;
	uint64_t start, end;
};

static const uint8_t *map_ptr(const struct map *m, uint32_t n, uint64_t pos)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (m[mid].start <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || pos >= m[lo - 1].end)
		return NULL;
	return m[lo - 1].at + (pos - m[lo - 1].start);
}

#define IOV_BATCH 1024 /* IOV_MAX on Linux */

/* The whole vector, whatever the short writes. */
static int writev_all(int fd, struct iovec *v, int k, size_t want)
{
	while (want) {
		ssize_t w = writev(fd, v, k);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		want -= (size_t)w;
		while (k && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			k--;
		}
		if (k) {
			v->iov_base = (uint8_t *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int write_all(int fd, const void *b, size_t n)
{
	const uint8_t *p = b;

	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int ftl_replay_build(struct ftl_replay *j)
{
	uint64_t t0 = ftl_now_ns();
	uint32_t base = j->base, L = j->data_len, nr = 0, nmax = j->nmax, nc = 0, ne = 0, nm = 0;
	struct cand *cs = NULL;
	struct ftc_replay_ext *ext = NULL;
	struct map *maps = calloc(j->n_spans + 1, sizeof(*maps));
	uint32_t *lens = malloc(sizeof(*lens) * nmax);
	struct iovec *iov = NULL;
	uint64_t sum = 0, ncap = 1024; /* candidates: grown as DATA records are met */
	long pg = sysconf(_SC_PAGESIZE);
	int fd = -1, rc = -1;
	char tmp[sizeof(j->replay_path) + 8];

	cs = malloc(sizeof(*cs) * ncap);
	if (!maps || !lens || !cs)
		goto out;
	for (uint32_t i = 0; i < j->n_spans; i++) {
		const struct ftl_span *sp = &j->spans[i];
		uint64_t end = sp->end < j->log_end ? sp->end : j->log_end;
		char p[600];
		if (end <= sp->start)
			continue;
		snprintf(p, sizeof(p), "%s/ftlog-%016llx.seg", j->dir,
			 (unsigned long long)j->seg_start[i]);
		int sfd = open(p, O_RDONLY | O_CLOEXEC);
		if (sfd < 0) {
			fprintf(stderr, "ftlog: replay: %s: %s\n", p, strerror(errno));
			goto out;
		}
		uint64_t rel = sp->start - j->seg_start[i];
		uint64_t moff = rel & ~(uint64_t)(pg - 1);
		size_t mlen = (size_t)(end - j->seg_start[i] - moff);
		/* Populated at once: the copy below would fault page by page. */
		void *m = mmap(NULL, mlen, PROT_READ, MAP_PRIVATE | MAP_POPULATE, sfd, (off_t)moff);
		close(sfd);
		if (m == MAP_FAILED)
			goto out;
		madvise(m, mlen, MADV_SEQUENTIAL);
		maps[nm] = (struct map){.base = m, .maplen = mlen,
					.at = (const uint8_t *)m + (rel - moff),
					.start = sp->start, .end = end};
		const uint8_t *buf = maps[nm].at;
		size_t blen = (size_t)(end - sp->start);
		const struct ftc_rec *r;
		nm++;
		FTL_FOR_EACH_REC(buf, blen, r) {
			if (memcmp(&r->key, &j->key, sizeof(r->key)))
				continue;
			if (r->type == FR_DATA && r->plen) {
				/* What of [seq, seq+plen) falls in [base, base+L).
				 * All in unsigned arithmetic mod 2^32: a record
				 * 2^31 behind base must not be negated as
				 * INT32_MIN. */
				uint32_t off = r->seq - base, s = 0, n = r->plen;
				if ((int32_t)off < 0) {
					uint32_t behind = base - r->seq;
					if (behind >= n)
						continue;
					s = behind;
					off = 0;
					n -= s;
				}
				if (off >= L)
					continue;
				if (n > L - off)
					n = L - off;
				if (nc == ncap) {
					struct cand *g = realloc(cs, sizeof(*cs) * ncap * 2);
					if (!g)
						goto out;
					cs = g;
					ncap *= 2;
				}
				cs[nc++] = (struct cand){.s_off = off, .len = n,
							 .pos = sp->start + _o + sizeof(*r) + s};
			} else if (r->type == FR_READ) {
				if (r->flags == FTL_READ_TRUNC) {
					nr = r->aux < nr ? r->aux : nr;
					sum = 0;
					for (uint32_t i2 = 0; i2 < nr; i2++)
						sum += lens[i2];
				} else if (nr < nmax && r->aux) {
					/* A read of 0 bytes is none: replayed, it
					 * would be the server's end of file. */
					lens[nr++] = r->aux;
					sum += r->aux;
				}
			}
		}
	}
	/* Cover [0, L) in stream order without overlap; where records overlap
	 * (client retransmissions: the same bytes) the one that starts first
	 * supplies them, the earlier in the log on a tie. */
	qsort(cs, nc, sizeof(*cs), cand_cmp);
	ext = malloc(sizeof(*ext) * (nc + 1)); /* at most one extent per candidate */
	if (!ext)
		goto out;
	uint32_t covered = 0;
	for (uint32_t i = 0; i < nc && covered < L; i++) {
		uint32_t end = cs[i].s_off + cs[i].len;
		if (end <= covered)
			continue;
		if (cs[i].s_off > covered)
			break; /* a hole: cannot be, the bytes were logged */
		uint32_t skip = covered - cs[i].s_off;
		ext[ne++] = (struct ftc_replay_ext){.log_off = cs[i].pos + skip,
						    .len = end - covered};
		covered = end;
	}
	if (covered != L) {
		fprintf(stderr, "ftlog: %s: logged bytes cover %u of %u\n", j->replay_path, covered,
			L);
		goto out;
	}
	/* A read whose bytes were never all logged was never acknowledged,
	 * so no output depended on it: replay stops before it (G3). */
	while (nr && sum > L)
		sum -= lens[--nr];
	j->n_reads = nr;
	j->read_total = sum;

	/* One extent: the copy right after it, in this file. */
	uint64_t data_off = sizeof(struct ftc_replay_hdr) + sizeof(*lens) * nr +
			    (L ? sizeof(struct ftc_replay_ext) : 0);
	struct ftc_replay_hdr h = {.n_reads = nr, .n_ext = L ? 1 : 0, .data_len = L,
				   .out_skip = j->out_skip};
	struct ftc_replay_ext one = {.log_off = data_off, .len = L};
	memcpy(h.magic, FTC_REPLAY_MAGIC, 8);
	/* Written under a temporary name and renamed: the logger never hands
	 * over a half-built file. Private: it holds the client's bytes. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", j->replay_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write_all(fd, &h, sizeof(h)) || write_all(fd, lens, sizeof(*lens) * nr) ||
	    (L && write_all(fd, &one, sizeof(one))))
		goto fail_file;
	/* The extents straight from the mapped log, IOV_MAX at a time (no
	 * copy in between: a segment's payload per extent). */
	iov = malloc(sizeof(*iov) * IOV_BATCH);
	if (!iov)
		goto fail_file;
	for (uint32_t e = 0; e < ne;) {
		int k = 0;
		size_t want = 0;
		for (; e < ne && k < IOV_BATCH; e++, k++) {
			const uint8_t *src = map_ptr(maps, nm, ext[e].log_off);
			if (!src)
				goto fail_file;
			iov[k] = (struct iovec){.iov_base = (void *)src, .iov_len = ext[e].len};
			want += ext[e].len;
		}
		if (writev_all(fd, iov, k, want))
			goto fail_file;
	}
	if (close(fd)) {
		fd = -1;
		goto fail_file;
	}
	fd = -1;
	if (rename(tmp, j->replay_path))
		goto fail_file;
	rc = 0;
	goto out;
fail_file:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
out:
	for (uint32_t i = 0; maps && i < nm; i++)
		munmap(maps[i].base, maps[i].maplen);
	free(maps);
	free(lens);
	free(cs);
	free(ext);
	free(iov);
	j->build_us = (ftl_now_ns() - t0) / 1000;
	j->rc = rc;
	return rc;
}

void ftl_replay_done(struct ftl *l, struct ftl_conn *c, struct ftl_replay *j)
{
	for (uint32_t i = 0; i < j->n_spans; i++)
		ftl_seg_unpin(l, j->spans[i].start);
	free(j->spans);
	free(j->seg_start);
	j->spans = NULL;
	j->seg_start = NULL;
	j->n_spans = 0;
	if (!c)
		return;
	if (j->rc == 0) {
		if (j->n_reads != c->reads || j->read_total != c->read_total) {
			struct ftc_rec t = {.len = sizeof(t), .type = FR_READ, .key = c->key,
					    .flags = FTL_READ_TRUNC, .aux = j->n_reads,
					    .seq = (uint32_t)(j->read_total >> 32),
					    .ack = (uint32_t)j->read_total};
			ftl_apply(l, c, &t, true);
		}
		c->reads_durable = c->reads_acked = j->n_reads;
		c->read_total_durable = j->read_total;
		l->st.replay_bytes += j->data_len;
	}
	l->st.replay_us_last = j->build_us;
}

int ftl_make_replay(struct ftl *l, struct ftl_conn *c, char *path, size_t plen,
		    uint32_t *fab_isn, uint32_t *server_seq)
{
	struct ftl_replay j;

	if (ftl_replay_prepare(l, c, &j))
		return -1;
	ftl_replay_params(c, fab_isn, server_seq);
	snprintf(path, plen, "%s", j.replay_path);
	ftl_replay_build(&j);
	ftl_replay_done(l, c, &j);
	return j.rc;
}
