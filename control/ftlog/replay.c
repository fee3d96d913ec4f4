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
	/* A client FIN takes a sequence number no byte stands for: when it is
	 * the last thing logged, the replay is the bytes before it and the
	 * shim gives an end of stream after them. */
	j->fin = c->have_fin && j->data_len > 0 && c->fin_seq + 1 == c->contig_durable;
	if (j->fin)
		j->data_len--;
	j->nmax = c->reads_durable + 1;
	ftl_replay_params(c, &fab_isn, &sseq);
	j->out_skip = sseq - (c->server_isn + 1);
	/* The output tail, as outstream positions (0: the first byte). */
	j->tail_len = 0;
	if (c->out_tail_len && c->have_synack) {
		uint32_t end = c->out_tail_end - (c->server_isn + 1);
		if (end >= c->out_tail_len && end < (1u << 31)) {
			j->tail_end = end;
			j->tail_len = c->out_tail_len;
			memcpy(j->tail, c->out_tail, c->out_tail_len);
		}
	}
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
struct ftc_replay_cand {
	uint32_t s_off, len;
	uint64_t pos;
};

static int cand_cmp(const void *x, const void *y)
{
	const struct ftc_replay_cand *a = x, *b = y;

	if (a->s_off != b->s_off)
		return a->s_off < b->s_off ? -1 : 1;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

void ftl_replay_plan_free(struct ftl_replay_plan *p)
{
	free(p->lens);
	free(p->ext);
	free(p->cs);
	p->lens = NULL;
	p->ext = NULL;
	p->cs = NULL;
	p->n_reads = p->n_ext = p->nc = p->ncap = 0;
}

int ftl_replay_plan_init(struct ftl_replay_plan *p, const struct ftl_replay *j,
			 uint64_t log_bytes)
{
	uint64_t most = log_bytes / sizeof(struct ftc_rec) + 1;

	memset(p, 0, sizeof(*p));
	/* No more reads than read records the log can hold: a damaged read
	 * count (a truncation record's) must not size the table. */
	p->nmax = j->nmax < most ? j->nmax : (uint32_t)most;
	p->ncap = 1024; /* candidates: grown as DATA records are met */
	p->lens = malloc(sizeof(*p->lens) * (p->nmax ? p->nmax : 1));
	p->cs = malloc(sizeof(*p->cs) * p->ncap);
	if (!p->lens || !p->cs) {
		ftl_replay_plan_free(p);
		return -1;
	}
	return 0;
}

int ftl_replay_plan_add(struct ftl_replay_plan *p, const struct ftl_replay *j,
			const uint8_t *buf, size_t len, uint64_t pos)
{
	uint32_t base = j->base, L = j->data_len;
	const struct ftc_rec *r;

	FTL_FOR_EACH_REC(buf, len, r) {
		if (memcmp(&r->key, &j->key, sizeof(r->key)))
			continue;
		if (r->type == FR_DATA && r->plen) {
			/* What of [seq, seq+plen) falls in [base, base+L). All in
			 * unsigned arithmetic mod 2^32: a record 2^31 behind base
			 * must not be negated as INT32_MIN. */
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
			if (p->nc == p->ncap) {
				struct ftc_replay_cand *g =
					realloc(p->cs, sizeof(*p->cs) * p->ncap * 2);
				if (!g)
					return -1;
				p->cs = g;
				p->ncap *= 2;
			}
			p->cs[p->nc++] = (struct ftc_replay_cand){
				.s_off = off, .len = n, .pos = pos + _o + sizeof(*r) + s};
		} else if (r->type == FR_READ) {
			if (r->flags == FTL_READ_TRUNC) {
				/* recovery dropped the reads past aux */
				p->n_reads = r->aux < p->n_reads ? r->aux : p->n_reads;
				p->read_total = 0;
				for (uint32_t i = 0; i < p->n_reads; i++)
					p->read_total += p->lens[i];
			} else if (p->n_reads < p->nmax && r->aux) {
				/* A read of 0 bytes is none: replayed, it would be
				 * the server's end of file. */
				p->lens[p->n_reads++] = r->aux;
				p->read_total += r->aux;
			}
		}
	}
	return 0;
}

int ftl_replay_plan_finish(struct ftl_replay_plan *p, const struct ftl_replay *j)
{
	uint32_t L = j->data_len, ne = 0, covered = 0;

	/* Cover [0, L) in stream order without overlap; where records overlap
	 * (client retransmissions: the same bytes) the one that starts first
	 * supplies them, the earlier in the log on a tie. */
	if (p->nc)
		qsort(p->cs, p->nc, sizeof(*p->cs), cand_cmp);
	p->ext = malloc(sizeof(*p->ext) * (p->nc + 1)); /* at most one extent per candidate */
	if (!p->ext)
		goto fail;
	for (uint32_t i = 0; i < p->nc && covered < L; i++) {
		uint32_t end = p->cs[i].s_off + p->cs[i].len;
		if (end <= covered)
			continue;
		if (p->cs[i].s_off > covered)
			break; /* a hole: cannot be, the bytes were logged */
		uint32_t skip = covered - p->cs[i].s_off;
		p->ext[ne++] = (struct ftc_replay_ext){.log_off = p->cs[i].pos + skip,
						       .len = end - covered};
		covered = end;
	}
	if (covered != L) {
		fprintf(stderr, "ftlog: %s: logged bytes cover %u of %u\n", j->replay_path, covered,
			L);
		goto fail;
	}
	/* A read whose bytes were never all logged was never acknowledged,
	 * so no output depended on it: replay stops before it (G3). */
	while (p->n_reads && p->read_total > L)
		p->read_total -= p->lens[--p->n_reads];
	p->n_ext = ne;
	free(p->cs);
	p->cs = NULL;
	p->nc = p->ncap = 0;
	return 0;
fail:
	ftl_replay_plan_free(p);
	return -1;
}

int ftl_replay_plan(const uint8_t *buf, size_t len, const struct ftl_replay *j,
		    struct ftl_replay_plan *p)
{
	if (ftl_replay_plan_init(p, j, len))
		return -1;
	if (ftl_replay_plan_add(p, j, buf, len, 0)) {
		ftl_replay_plan_free(p);
		return -1;
	}
	return ftl_replay_plan_finish(p, j);
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
	uint32_t L = j->data_len, nm = 0;
	struct ftl_replay_plan pl = {0};
	struct map *maps = calloc(j->n_spans + 1, sizeof(*maps));
	struct iovec *iov = NULL;
	uint64_t log_bytes = 0;
	long pg = sysconf(_SC_PAGESIZE);
	int fd = -1, rc = -1;
	char tmp[sizeof(j->replay_path) + 8];

	for (uint32_t i = 0; i < j->n_spans; i++) {
		uint64_t end = j->spans[i].end < j->log_end ? j->spans[i].end : j->log_end;
		if (end > j->spans[i].start)
			log_bytes += end - j->spans[i].start;
	}
	if (!maps || ftl_replay_plan_init(&pl, j, log_bytes))
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
		nm++;
		if (ftl_replay_plan_add(&pl, j, maps[nm - 1].at, (size_t)(end - sp->start),
					sp->start))
			goto out;
	}
	if (ftl_replay_plan_finish(&pl, j))
		goto out;
	j->n_reads = pl.n_reads;
	j->read_total = pl.read_total;

	/* One extent: the copy right after it, in this file. */
	uint64_t data_off = sizeof(struct ftc_replay_hdr) + sizeof(*pl.lens) * pl.n_reads +
			    (L ? sizeof(struct ftc_replay_ext) : 0);
	struct ftc_replay_hdr h = {.n_reads = pl.n_reads, .n_ext = L ? 1 : 0, .data_len = L,
				   .out_skip = j->out_skip, .tail_end = j->tail_end,
				   .tail_len = j->tail_len};
	memcpy(h.tail, j->tail, j->tail_len);
	struct ftc_replay_ext one = {.log_off = data_off, .len = L};
	memcpy(h.magic, FTC_REPLAY_MAGIC, 8);
	/* Written under a temporary name and renamed: the logger never hands
	 * over a half-built file. Private: it holds the client's bytes. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", j->replay_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write_all(fd, &h, sizeof(h)) ||
	    write_all(fd, pl.lens, sizeof(*pl.lens) * pl.n_reads) ||
	    (L && write_all(fd, &one, sizeof(one))))
		goto fail_file;
	/* The extents straight from the mapped log, IOV_MAX at a time (no
	 * copy in between: a segment's payload per extent). */
	iov = malloc(sizeof(*iov) * IOV_BATCH);
	if (!iov)
		goto fail_file;
	for (uint32_t e = 0; e < pl.n_ext;) {
		int k = 0;
		size_t want = 0;
		for (; e < pl.n_ext && k < IOV_BATCH; e++, k++) {
			const uint8_t *src = map_ptr(maps, nm, pl.ext[e].log_off);
			if (!src)
				goto fail_file;
			iov[k] = (struct iovec){.iov_base = (void *)src, .iov_len = pl.ext[e].len};
			want += pl.ext[e].len;
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
	ftl_replay_plan_free(&pl);
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
		c->replay_fin = j->fin;
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
