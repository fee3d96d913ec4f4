/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The logger's per-connection state and files. A log file is a sequence of
 * records (struct ftc_rec + payload, 8-byte aligned) exactly as the data
 * plane queued them, plus the shim's FR_READ records, so the state can be
 * rebuilt by applying the file from the start (ftl_load_dir), which is what
 * a restarted logger does. The stream of instream bytes is the union of the
 * FR_DATA payloads by sequence number: duplicates and overlaps (client
 * retransmissions) are harmless, holes are tracked (G7).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "ftlog.h"

/* A read record's flags value meaning "keep only the first aux reads":
 * written when recovery drops reads whose bytes were never logged. */
#define FTL_READ_TRUNC 0xff

uint64_t ftl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t key_hash(const struct ftc_key *k)
{
	uint32_t h = k->cip * 2654435761u ^ k->sip * 2246822519u;
	h ^= ((uint32_t)k->cport << 16 | k->sport) * 3266489917u;
	return h ^ (h >> 15);
}

/* Linear probing; deletion uses tombstones-free backward shift would be
 * nicer, but the table is small and scanned on lookup miss only. */
struct ftl_conn *ftl_conn_find(struct ftl *l, const struct ftc_key *k)
{
	uint32_t i = key_hash(k) & (FTL_MAX_CONNS - 1);

	if (l->n_live == 0)
		return NULL; /* nothing to find: no need to scan the whole table */

	for (unsigned n = 0; n < FTL_MAX_CONNS; n++, i = (i + 1) & (FTL_MAX_CONNS - 1)) {
		struct ftl_conn *c = &l->conns[i];
		if (c->used && !memcmp(&c->key, k, sizeof(*k)))
			return c;
	}
	return NULL;
}

struct ftl_conn *ftl_conn_new(struct ftl *l, const struct ftc_key *k)
{
	uint32_t i = key_hash(k) & (FTL_MAX_CONNS - 1);

	for (unsigned n = 0; n < FTL_MAX_CONNS; n++, i = (i + 1) & (FTL_MAX_CONNS - 1)) {
		struct ftl_conn *c = &l->conns[i];
		if (c->used)
			continue;
		uint8_t *wbuf = c->wbuf;
		uint32_t wcap = c->wcap, hcap = c->cap_holes, *hs = c->hole_s, *he = c->hole_e;
		memset(c, 0, sizeof(*c));
		c->wbuf = wbuf;
		c->wcap = wcap;
		c->cap_holes = hcap;
		c->hole_s = hs;
		c->hole_e = he;
		c->used = true;
		c->live_pos = l->n_live;
		l->live[l->n_live++] = (uint16_t)i;
		c->key = *k;
		c->fd = -1;
		c->owner = -1;
		c->state = FC_LIVE;
		return c;
	}
	return NULL;
}

void ftl_conn_free(struct ftl *l, struct ftl_conn *c)
{
	if (!c->used)
		return;
	/* Swap-remove from the live list. */
	uint16_t last = l->live[--l->n_live];
	l->live[c->live_pos] = last;
	l->conns[last].live_pos = c->live_pos;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->used = false;
	c->wlen = 0;
}

void ftl_path(const struct ftl *l, const struct ftc_key *k, const char *ext, char *buf,
	      size_t len)
{
	char a[16], b[16];

	inet_ntop(AF_INET, &k->cip, a, sizeof(a));
	inet_ntop(AF_INET, &k->sip, b, sizeof(b));
	snprintf(buf, len, "%s/%s_%u-%s_%u.%s", l->dir, a, ntohs(k->cport), b, ntohs(k->sport),
		 ext);
}

int ftl_open_file(struct ftl *l, struct ftl_conn *c, bool truncate)
{
	char p[512];

	ftl_path(l, &c->key, "log", p, sizeof(p));
	c->fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0600);
	if (c->fd < 0) {
		fprintf(stderr, "ftlog: %s: %s\n", p, strerror(errno));
		return -1;
	}
	return 0;
}

int ftl_append_raw(struct ftl_conn *c, const struct ftc_rec *r)
{
	if (c->wlen + r->len > c->wcap) {
		uint32_t cap = c->wcap ? c->wcap : 65536;
		while (cap < c->wlen + r->len)
			cap *= 2;
		uint8_t *nb = realloc(c->wbuf, cap);
		if (!nb)
			return -1;
		c->wbuf = nb;
		c->wcap = cap;
	}
	memcpy(c->wbuf + c->wlen, r, r->len);
	c->wlen += r->len;
	return 0;
}

static void add_range(struct ftl_conn *c, uint32_t s, uint32_t e)
{
	uint32_t i, j, base = c->contig;

	if (!ftc_seq_lt(s, e) || !ftc_seq_lt(base, e))
		return;
	if (ftc_seq_lt(s, base))
		s = base;
	/* Offsets from contig keep the order right across the 2^32 wrap. */
	uint32_t os = s - base, oe = e - base;
	for (i = 0; i < c->n_holes && c->hole_e[i] - base < os; i++)
		;
	/* [i, j) are the ranges [s, e) touches or overlaps: merge them. */
	for (j = i; j < c->n_holes && c->hole_s[j] - base <= oe; j++) {
		if (c->hole_s[j] - base < os)
			os = c->hole_s[j] - base;
		if (c->hole_e[j] - base > oe)
			oe = c->hole_e[j] - base;
	}
	if (i == j) {
		if (c->n_holes == c->cap_holes) {
			uint32_t cap = c->cap_holes ? 2 * c->cap_holes : 16;
			uint32_t *ns = realloc(c->hole_s, cap * sizeof(*ns));
			if (ns)
				c->hole_s = ns;
			uint32_t *ne = ns ? realloc(c->hole_e, cap * sizeof(*ne)) : NULL;
			if (!ns || !ne)
				return; /* the bytes are in the file; a retransmission re-reports them */
			c->hole_e = ne;
			c->cap_holes = cap;
		}
		memmove(c->hole_s + i + 1, c->hole_s + i, (c->n_holes - i) * sizeof(uint32_t));
		memmove(c->hole_e + i + 1, c->hole_e + i, (c->n_holes - i) * sizeof(uint32_t));
		c->n_holes++;
		j = i + 1;
	} else if (j > i + 1) {
		memmove(c->hole_s + i + 1, c->hole_s + j, (c->n_holes - j) * sizeof(uint32_t));
		memmove(c->hole_e + i + 1, c->hole_e + j, (c->n_holes - j) * sizeof(uint32_t));
		c->n_holes -= j - i - 1;
	}
	c->hole_s[i] = base + os;
	c->hole_e[i] = base + oe;
	/* The first range starting at contig moves it. */
	if (c->n_holes && c->hole_s[0] == base) {
		c->contig = c->hole_e[0];
		memmove(c->hole_s, c->hole_s + 1, (c->n_holes - 1) * sizeof(uint32_t));
		memmove(c->hole_e, c->hole_e + 1, (c->n_holes - 1) * sizeof(uint32_t));
		c->n_holes--;
	}
}

/* Apply one record to the connection's state; append it to the write
 * buffer too when `append` (live records; a restart replays the file with
 * append false). */
int ftl_apply(struct ftl *l, struct ftl_conn *c, const struct ftc_rec *r, bool append)
{
	if (append && ftl_append_raw(c, r))
		return -1;
	l->st.records++;
	switch (r->type) {
	case FR_SYN:
		c->have_syn = true;
		c->client_isn = r->seq;
		c->contig = r->seq + 1;
		break;
	case FR_SYNACK:
		c->have_synack = true;
		c->server_isn = r->seq;
		break;
	case FR_DATA: {
		uint32_t end = r->seq + r->plen + ((r->flags & 0x01) ? 1 : 0);
		if (!c->have_syn)
			break;
		add_range(c, r->seq, end);
		if ((r->flags & 0x10) && c->have_synack &&
		    (!c->have_ack || ftc_seq_lt(c->max_ack, r->ack)))
			c->max_ack = r->ack, c->have_ack = true;
		l->st.data_bytes += r->plen;
		break;
	}
	case FR_READ:
		if (r->flags == FTL_READ_TRUNC) {
			/* recovery dropped the reads past aux; recount below */
			c->reads = r->aux;
			c->read_total = r->ack | (uint64_t)r->seq << 32;
		} else {
			c->reads++;
			c->read_total += r->aux;
		}
		break;
	case FR_CRASHED:
		if (c->state == FC_LIVE || c->state == FC_CRASHED)
			c->state = FC_FROZEN;
		break;
	case FR_RECOVERED:
		l->st.recoveries++;
		break;
	default:
		break;
	}
	return 0;
}

static int read_all(int fd, uint8_t **buf, size_t *len)
{
	struct stat stb;

	if (fstat(fd, &stb))
		return -1;
	*len = (size_t)stb.st_size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf)
		return -1;
	for (size_t got = 0; got < *len;) {
		ssize_t n = pread(fd, *buf + got, *len - got, (off_t)got);
		if (n <= 0) {
			*len = got; /* a torn tail record is ignored below */
			break;
		}
		got += (size_t)n;
	}
	return 0;
}

/* Walk the complete records of a file image. */
#define FOR_EACH_REC(buf, len, r)                                                        \
	for (size_t _o = 0;                                                               \
	     _o + sizeof(struct ftc_rec) <= (len) &&                                      \
	     ((r) = (const struct ftc_rec *)((buf) + _o))->len >= sizeof(struct ftc_rec) && \
	     _o + (r)->len <= (len) && sizeof(struct ftc_rec) + (r)->plen <= (r)->len;    \
	     _o += (r)->len)

size_t ftl_load_image(struct ftl *l, const uint8_t *buf, size_t len, struct ftl_conn **cp)
{
	const struct ftc_rec *r;
	struct ftl_conn *c = NULL;
	size_t good = 0;

	FOR_EACH_REC(buf, len, r) {
		if (!c) {
			c = ftl_conn_find(l, &r->key);
			if (!c)
				c = ftl_conn_new(l, &r->key);
			if (!c)
				break;
		}
		ftl_apply(l, c, r, false);
		good = _o + r->len;
	}
	*cp = c;
	return good;
}

int ftl_load_dir(struct ftl *l, uint64_t claim_deadline_ns)
{
	DIR *d = opendir(l->dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		size_t nl = strlen(e->d_name), len;
		char p[512];
		uint8_t *buf;
		struct ftl_conn *c;
		int fd;

		if (nl < 5 || strcmp(e->d_name + nl - 4, ".log"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", l->dir, e->d_name);
		fd = open(p, O_RDWR | O_CLOEXEC);
		if (fd < 0 || read_all(fd, &buf, &len)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		size_t good = ftl_load_image(l, buf, len, &c);
		free(buf);
		if (!c) {
			close(fd);
			continue;
		}
		/* A record torn by a crash mid-write is cut off, so appends
		 * continue on a record boundary. */
		if (good < len && ftruncate(fd, (off_t)good))
			fprintf(stderr, "ftlog: %s: truncate: %s\n", p, strerror(errno));
		c->fd = fd;
		c->off = good;
		c->contig_durable = c->contig;
		c->isns_durable = c->have_syn && c->have_synack;
		c->reads_durable = c->reads;
		c->read_total_durable = c->read_total;
		c->claim_deadline_ns = claim_deadline_ns;
		n++;
	}
	closedir(d);
	return n;
}

void ftl_replay_params(const struct ftl_conn *c, uint32_t *fab_isn, uint32_t *server_seq)
{
	/* G5: server_seq = the highest client ack in the log. */
	*server_seq = c->have_ack ? c->max_ack : c->server_isn + 1;
	/* G1/G2: the shim serves every logged byte from the log, so the new
	 * TCP must expect the first byte that is not logged. */
	*fab_isn = c->contig_durable - 1;
}

void ftl_replay_prepare(const struct ftl *l, const struct ftl_conn *c, struct ftl_replay *j)
{
	uint32_t fab_isn, sseq;

	memset(j, 0, sizeof(*j));
	j->key = c->key;
	ftl_path(l, &c->key, "log", j->log_path, sizeof(j->log_path));
	ftl_path(l, &c->key, "replay", j->replay_path, sizeof(j->replay_path));
	/* Only what is written: the loop may append meanwhile. */
	j->log_len = c->off;
	j->base = c->client_isn + 1;
	j->data_len = c->contig_durable - j->base;
	j->nmax = c->reads_durable + 1;
	ftl_replay_params(c, &fab_isn, &sseq);
	j->out_skip = sseq - (c->server_isn + 1);
}

/* One DATA record's part of [base, base + L): where it lies in the stream
 * and in the file. */
struct cand {
	uint32_t s_off, len;
	uint64_t f_off;
};

static int cand_cmp(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	if (a->s_off != b->s_off)
		return a->s_off < b->s_off ? -1 : 1;
	return a->f_off < b->f_off ? -1 : a->f_off > b->f_off;
}

int ftl_replay_plan(const uint8_t *buf, size_t len, const struct ftl_replay *j,
		    struct ftl_replay_plan *p)
{
	uint32_t base = j->base, L = j->data_len, nr = 0, nmax = j->nmax, nc = 0, ne = 0;
	struct cand *cs = NULL;
	uint64_t sum = 0, ncap = 1024; /* candidates: grown as DATA records are met */
	const struct ftc_rec *r;

	memset(p, 0, sizeof(*p));
	/* No more reads than read records the log can hold: a damaged read
	 * count (a truncation record's) must not size the table. */
	if (nmax > len / sizeof(struct ftc_rec) + 1)
		nmax = (uint32_t)(len / sizeof(struct ftc_rec) + 1);
	p->lens = malloc(sizeof(*p->lens) * nmax);
	cs = malloc(sizeof(*cs) * ncap);
	if (!p->lens || !cs)
		goto fail;
	FOR_EACH_REC(buf, len, r) {
		if (r->type == FR_DATA && r->plen) {
			/* What of [seq, seq+plen) falls in [base, base+L). All
			 * in unsigned arithmetic mod 2^32: a record 2^31 behind
			 * base must not be negated as INT32_MIN. */
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
					goto fail;
				cs = g;
				ncap *= 2;
			}
			cs[nc++] = (struct cand){.s_off = off, .len = n,
						 .f_off = _o + sizeof(*r) + s};
		} else if (r->type == FR_READ) {
			if (r->flags == FTL_READ_TRUNC) {
				nr = r->aux < nr ? r->aux : nr;
				sum = 0;
				for (uint32_t i = 0; i < nr; i++)
					sum += p->lens[i];
			} else if (nr < nmax && r->aux) {
				/* A read of 0 bytes is none: replayed, it would be
				 * the server's end of file. */
				p->lens[nr++] = r->aux;
				sum += r->aux;
			}
		}
	}
	/* Cover [0, L) in stream order without overlap; where records overlap
	 * (client retransmissions: the same bytes) the one that starts first
	 * supplies them, the earlier in the log on a tie. */
	qsort(cs, nc, sizeof(*cs), cand_cmp);
	p->ext = malloc(sizeof(*p->ext) * (nc + 1)); /* at most one extent per candidate */
	if (!p->ext)
		goto fail;
	uint32_t covered = 0;
	for (uint32_t i = 0; i < nc && covered < L; i++) {
		uint32_t end = cs[i].s_off + cs[i].len;
		if (end <= covered)
			continue;
		if (cs[i].s_off > covered)
			break; /* a hole: cannot be, the bytes were logged */
		uint32_t skip = covered - cs[i].s_off;
		p->ext[ne++] = (struct ftc_replay_ext){.log_off = cs[i].f_off + skip,
						       .len = end - covered};
		covered = end;
	}
	if (covered != L) {
		fprintf(stderr, "ftlog: %s: logged bytes cover %u of %u\n", j->log_path, covered, L);
		goto fail;
	}
	/* A read whose bytes were never all logged was never acknowledged,
	 * so no output depended on it: replay stops before it (G3). */
	while (nr && sum > L)
		sum -= p->lens[--nr];
	p->n_reads = nr;
	p->n_ext = ne;
	p->read_total = sum;
	free(cs);
	return 0;
fail:
	free(cs);
	ftl_replay_plan_free(p);
	return -1;
}

void ftl_replay_plan_free(struct ftl_replay_plan *p)
{
	free(p->lens);
	free(p->ext);
	p->lens = NULL;
	p->ext = NULL;
}

/* Thread-safe: touches nothing but the job and its two files. The log is
 * mapped and only its record headers are read; the replay file lists
 * extents of the log instead of a copy of the stream. */
int ftl_replay_build(struct ftl_replay *j)
{
	uint64_t t0 = ftl_now_ns();
	const uint8_t *buf = NULL;
	struct ftl_replay_plan p = {0};
	size_t len = j->log_len;
	int fd, rc = 0;

	j->rc = -1;
	fd = open(j->log_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (len) {
		void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			close(fd);
			return -1;
		}
		buf = m;
		madvise(m, len, MADV_SEQUENTIAL);
	}
	close(fd);
	if (ftl_replay_plan(buf, len, j, &p)) {
		rc = -1;
		goto out;
	}
	j->n_reads = p.n_reads;
	j->read_total = p.read_total;

	struct ftc_replay_hdr h = {.n_reads = p.n_reads, .n_ext = p.n_ext, .data_len = j->data_len,
				   .out_skip = j->out_skip};
	memcpy(h.magic, FTC_REPLAY_MAGIC, 8);
	/* Written under a temporary name and renamed: the shim never sees a
	 * half-built file. */
	char tmp[sizeof(j->replay_path) + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", j->replay_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	rc = fd < 0 ? -1 : 0;
	if (!rc && (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
		    write(fd, p.lens, sizeof(*p.lens) * p.n_reads) !=
			    (ssize_t)(sizeof(*p.lens) * p.n_reads) ||
		    write(fd, p.ext, sizeof(*p.ext) * p.n_ext) !=
			    (ssize_t)(sizeof(*p.ext) * p.n_ext)))
		rc = -1;
	if (fd >= 0)
		close(fd);
	if (!rc && rename(tmp, j->replay_path))
		rc = -1;
	if (rc)
		unlink(tmp);
out:
	if (len)
		munmap((void *)buf, len);
	ftl_replay_plan_free(&p);
	j->build_us = (ftl_now_ns() - t0) / 1000;
	j->rc = rc;
	return rc;
}

void ftl_replay_done(struct ftl *l, struct ftl_conn *c, const struct ftl_replay *j)
{
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

	ftl_replay_prepare(l, c, &j);
	ftl_replay_params(c, fab_isn, server_seq);
	snprintf(path, plen, "%s", j.replay_path);
	ftl_replay_build(&j);
	ftl_replay_done(l, c, &j);
	return j.rc;
}
