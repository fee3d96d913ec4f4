/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The FT-TCP logger's shared log: one append-only log per logger for every
 * connection, so a commit round is one write and at most one fdatasync
 * whatever the number of connections in it (a log per connection cost one
 * fdatasync per connection written, each flushing the device's cache:
 * docs/ft-tcp.md, "The log").
 *
 * The log is cut into segment files named by the global position of their
 * first byte (positions run on across segments), each starting with an
 * FR_SEG record. Records are appended to a buffer and written at the
 * head's end by the loop's commit; a head that has grown past seg_bytes is
 * sealed after a commit and a new one started.
 *
 * Each connection keeps the spans of the log its records are in, one per
 * segment (ftl_conn.spans): recovery reads only those, and a segment is
 * referenced by the connections with a span in it. A segment nobody
 * references any more (its connections closed, were abandoned or were
 * copied forward) is removed once the log is durable past the record that
 * released it (a tombstone, a copy), so a restart never finds a
 * connection half gone. A long-lived connection would otherwise keep every
 * segment written since it opened: one whose log is small (reloc_max) is
 * copied forward to the head (FR_MOVED and its whole history) once it pins
 * a segment older than the two newest sealed ones; a larger one keeps its
 * segments.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftlog.h"

void ftl_seg_path(const struct ftl *l, uint64_t start, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ftlog-%016" PRIx64 ".seg", l->dir, start);
}

struct ftl_seg *ftl_seg_of(struct ftl *l, uint64_t pos)
{
	uint32_t lo = 0, hi = l->n_segs;

	/* The last segment starting at or before pos. */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (l->segs[mid].start <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &l->segs[lo - 1] : NULL;
}

static struct ftl_seg *seg_add(struct ftl *l, uint64_t start, int fd, uint64_t len)
{
	if (l->n_segs == l->cap_segs) {
		uint32_t cap = l->cap_segs ? 2 * l->cap_segs : 16;
		struct ftl_seg *n = realloc(l->segs, cap * sizeof(*n));
		if (!n)
			return NULL;
		l->segs = n;
		l->cap_segs = cap;
	}
	struct ftl_seg *s = &l->segs[l->n_segs++];
	*s = (struct ftl_seg){.start = start, .len = len, .fd = fd};
	return s;
}

static void seg_unref(struct ftl *l, struct ftl_seg *s)
{
	if (s->refs && --s->refs == 0)
		s->free_at = l->written + l->wlen;
}

void ftl_seg_pin(struct ftl *l, uint64_t start)
{
	struct ftl_seg *s = ftl_seg_of(l, start);
	if (s)
		s->refs++;
}

void ftl_seg_unpin(struct ftl *l, uint64_t start)
{
	struct ftl_seg *s = ftl_seg_of(l, start);
	if (s)
		seg_unref(l, s);
}

static int grow_wbuf(struct ftl *l, uint32_t more)
{
	if (l->wlen + more <= l->wcap)
		return 0;
	uint32_t cap = l->wcap ? l->wcap : 1u << 20;
	while (cap < l->wlen + more)
		cap *= 2;
	uint8_t *nb = realloc(l->wbuf, cap);
	if (!nb)
		return -1;
	l->wbuf = nb;
	l->wcap = cap;
	return 0;
}

/* A new head at the log's end (the buffer is empty), its FR_SEG record
 * written at once: a segment file is never empty but for a crash right
 * after its creation. */
static int seg_new(struct ftl *l)
{
	char p[600];
	uint64_t start = l->written;
	struct {
		struct ftc_rec h;
		char magic[8];
	} __attribute__((packed)) r = {
		.h = {.len = sizeof(r), .type = FR_SEG, .plen = 8, .seq = (uint32_t)start,
		      .ack = (uint32_t)(start >> 32), .aux = FTC_LOG_VERSION},
	};

	_Static_assert(sizeof(r) % FTC_REC_ALIGN == 0, "segment header is aligned");
	memcpy(r.magic, FTC_SEG_MAGIC, 8);
	ftl_rec_seal(&r.h);
	ftl_seg_path(l, start, p, sizeof(p));
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "ftlog: %s: %s\n", p, strerror(errno));
		l->log_failed = true;
		return -1;
	}
	if (l->durability != FTL_NONE) {
		/* The new name must survive a power cut as its records do. */
		int d = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d >= 0) {
			if (fsync(d))
				perror("ftlog: fsync of the log directory");
			close(d);
		}
	}
	struct ftl_seg *s = NULL;
	if (l->wlen || pwrite(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r) ||
	    !(s = seg_add(l, start, fd, sizeof(r)))) {
		fprintf(stderr, "ftlog: %s: cannot start the segment\n", p);
		close(fd);
		unlink(p);
		l->log_failed = true;
		return -1;
	}
	s->dirty = true;
	s->checked = true;
	s->file_len = sizeof(r);
	l->written += sizeof(r);
	l->st.segments_created++;
	ftl_log_zero_ahead(l);
	return 0;
}

void ftl_log_zero_ahead(struct ftl *l)
{
	static const uint8_t zeros[64 << 10];

	if (l->durability == FTL_NONE || !l->n_segs)
		return;
	struct ftl_seg *h = &l->segs[l->n_segs - 1];
	/* Without CRCs a record torn over such zeros would look whole. */
	if (!h->checked || h->fd < 0 || h->file_len >= h->len + FTL_ZERO_LOW)
		return;
	uint64_t from = h->file_len > h->len ? h->file_len : h->len;
	uint64_t to = (h->len + FTL_ZERO_AHEAD + 4095) & ~4095ull;
	for (uint64_t o = from; o < to;) {
		size_t n = to - o < sizeof(zeros) ? (size_t)(to - o) : sizeof(zeros);
		ssize_t w = pwrite(h->fd, zeros, n, (off_t)o);
		if (w <= 0) {
			/* No room for zeros: the head goes on by appending. */
			if (w < 0 && errno == EINTR)
				continue;
			return;
		}
		o += (uint64_t)w;
		h->file_len = o;
		l->st.zero_ahead_bytes += (uint64_t)w;
	}
	h->dirty = true;
	/* Their writeback starts now; the next round's fdatasync waits for
	 * what is left of it and commits the file's new size, once. */
	sync_file_range(h->fd, (off_t)from, (off_t)(to - from), SYNC_FILE_RANGE_WRITE);
}

int ftl_log_open(struct ftl *l)
{
	if (!l->seg_bytes)
		l->seg_bytes = FTL_SEG_BYTES_DEF;
	if (l->n_segs) {
		const struct ftl_seg *h = &l->segs[l->n_segs - 1];
		l->written = l->durable = h->start + h->len;
		return 0;
	}
	return seg_new(l);
}

void ftl_log_close(struct ftl *l)
{
	for (uint32_t i = 0; i < l->n_segs; i++)
		if (l->segs[i].fd >= 0)
			close(l->segs[i].fd);
	free(l->segs);
	l->segs = NULL;
	l->n_segs = l->cap_segs = 0;
	free(l->wbuf);
	l->wbuf = NULL;
	l->wlen = l->wcap = 0;
}

void ftl_log_track(struct ftl *l, struct ftl_conn *c, uint64_t pos, uint32_t len)
{
	struct ftl_seg *s = l->n_segs && pos >= l->segs[l->n_segs - 1].start
				    ? &l->segs[l->n_segs - 1]
				    : ftl_seg_of(l, pos);

	if (!s)
		return;
	struct ftl_span *sp = c->n_spans ? &c->spans[c->n_spans - 1] : NULL;
	if (!sp || sp->start < s->start) {
		if (c->n_spans == c->cap_spans) {
			uint32_t cap = c->cap_spans ? 2 * c->cap_spans : 4;
			struct ftl_span *n = realloc(c->spans, cap * sizeof(*n));
			if (!n) {
				/* Not tracked: its segment may go. Its recovery would
				 * then fail and be counted; nothing else breaks. */
				fprintf(stderr, "ftlog: out of memory for a connection's spans\n");
				return;
			}
			c->spans = n;
			c->cap_spans = cap;
		}
		sp = &c->spans[c->n_spans++];
		*sp = (struct ftl_span){.start = pos, .end = pos};
		s->refs++;
	}
	sp->end = pos + len;
	sp->bytes += len;
	s->live_bytes += len;
	c->log_bytes += len;
	c->log_end = pos + len;
}

void ftl_log_release(struct ftl *l, struct ftl_conn *c)
{
	for (uint32_t i = 0; i < c->n_spans; i++) {
		struct ftl_seg *s = ftl_seg_of(l, c->spans[i].start);
		if (!s)
			continue;
		s->live_bytes -= c->spans[i].bytes < s->live_bytes ? c->spans[i].bytes
								   : s->live_bytes;
		seg_unref(l, s);
	}
	c->n_spans = 0;
	c->log_bytes = 0;
}

int ftl_log_append(struct ftl *l, struct ftl_conn *c, const struct ftc_rec *r)
{
	uint64_t pos = l->written + l->wlen;

	if (grow_wbuf(l, r->len))
		return -1;
	memcpy(l->wbuf + l->wlen, r, r->len);
	ftl_rec_seal((struct ftc_rec *)(void *)(l->wbuf + l->wlen));
	l->wlen += r->len;
	if (c)
		ftl_log_track(l, c, pos, r->len);
	return 0;
}

int ftl_log_write_sync(struct ftl *l, bool sync)
{
	if (!l->n_segs)
		return -1;
	struct ftl_seg *h = &l->segs[l->n_segs - 1];
	for (uint32_t o = 0; o < l->wlen;) {
		ssize_t w = pwrite(h->fd, l->wbuf + o, l->wlen - o, (off_t)(h->len + o));
		if (w <= 0)
			return -1;
		o += (uint32_t)w;
	}
	h->len += l->wlen;
	if (h->file_len < h->len)
		h->file_len = h->len;
	l->written += l->wlen;
	l->st.writes += l->wlen != 0;
	h->dirty |= l->wlen != 0;
	l->wlen = 0;
	if (sync || l->durability == FTL_NONE) {
		for (uint32_t i = 0; sync && i < l->n_segs; i++) {
			if (!l->segs[i].dirty)
				continue;
			if (fdatasync(l->segs[i].fd))
				return -1;
			l->segs[i].dirty = false;
			l->st.fsyncs++;
		}
		l->durable = l->written;
	}
	return 0;
}

/* ---- copying a long-lived connection forward ----------------------------- */

/* Its records, in log order, from its spans (all written: the caller
 * checked), FR_MOVED headers of earlier copies left out. */
static int read_history(struct ftl *l, const struct ftl_conn *c, uint8_t **out, uint64_t *olen,
			uint32_t *count)
{
	const size_t chunk = 1u << 20;
	uint8_t *buf = malloc(chunk), *dst = NULL;
	uint64_t dl = 0, dcap = 0;
	uint32_t n = 0;

	if (!buf)
		return -1;
	for (uint32_t i = 0; i < c->n_spans; i++) {
		const struct ftl_span *sp = &c->spans[i];
		struct ftl_seg *s = ftl_seg_of(l, sp->start);
		uint64_t at = sp->start;
		if (!s)
			goto fail;
		while (at < sp->end) {
			size_t want = sp->end - at < chunk ? (size_t)(sp->end - at) : chunk;
			ssize_t got = pread(s->fd, buf, want, (off_t)(at - s->start));
			if (got <= 0)
				goto fail;
			const struct ftc_rec *r;
			size_t used = 0;
			FTL_FOR_EACH_REC(buf, (size_t)got, r) {
				used = _o + r->len;
				if (r->type == FR_MOVED || r->type == FR_SEG ||
				    memcmp(&r->key, &c->key, sizeof(r->key)))
					continue;
				if (dl + r->len > dcap) {
					uint64_t cap = dcap ? 2 * dcap : 65536;
					while (cap < dl + r->len)
						cap *= 2;
					uint8_t *nd = realloc(dst, cap);
					if (!nd)
						goto fail;
					dst = nd;
					dcap = cap;
				}
				memcpy(dst + dl, r, r->len);
				dl += r->len;
				n++;
			}
			if (!used)
				goto fail; /* not a record boundary: the span is wrong */
			at += used;
		}
	}
	free(buf);
	*out = dst;
	*olen = dl;
	*count = n;
	return 0;
fail:
	free(buf);
	free(dst);
	return -1;
}

int ftl_log_relocate(struct ftl *l, struct ftl_conn *c)
{
	uint8_t *hist;
	uint64_t hl;
	uint32_t n;

	if (c->log_end > l->written)
		return -1; /* some of it is still in the buffer: later */
	if (read_history(l, c, &hist, &hl, &n))
		return -1;
	struct ftc_rec h = {.len = sizeof(h), .type = FR_MOVED, .key = c->key,
			    .seq = (uint32_t)hl, .ack = (uint32_t)(hl >> 32), .aux = n};
	uint64_t pos = l->written + l->wlen;
	if (grow_wbuf(l, (uint32_t)(sizeof(h) + hl))) {
		free(hist);
		return -1;
	}
	ftl_rec_seal(&h);
	memcpy(l->wbuf + l->wlen, &h, sizeof(h));
	memcpy(l->wbuf + l->wlen + sizeof(h), hist, hl);
	{
		/* copies out of a segment of version 1 have no CRC yet */
		const struct ftc_rec *r;
		uint8_t *at = l->wbuf + l->wlen + sizeof(h);
		FTL_FOR_EACH_REC(at, hl, r)
			ftl_rec_seal((struct ftc_rec *)(void *)(at + _o));
	}
	l->wlen += (uint32_t)(sizeof(h) + hl);
	free(hist);
	/* The old spans go (their segments are removed once this copy is
	 * durable: seg_unref notes the log's end, the copy included). */
	ftl_log_release(l, c);
	ftl_log_track(l, c, pos, (uint32_t)(sizeof(h) + hl));
	l->st.relocations++;
	l->st.relocated_bytes += hl;
	return 0;
}

void ftl_log_after_commit(struct ftl *l)
{
	bool rolled = false;

	/* Segments nobody needs, once what released them is durable. */
	for (uint32_t i = 0; i + 1 < l->n_segs;) {
		struct ftl_seg *s = &l->segs[i];
		if (s->refs || s->free_at > l->durable) {
			i++;
			continue;
		}
		char p[600];
		ftl_seg_path(l, s->start, p, sizeof(p));
		if (s->fd >= 0)
			close(s->fd);
		if (unlink(p) && errno != ENOENT)
			fprintf(stderr, "ftlog: %s: %s\n", p, strerror(errno));
		memmove(s, s + 1, (l->n_segs - i - 1) * sizeof(*s));
		l->n_segs--;
		l->st.segments_removed++;
	}
	if (!l->n_segs || l->wlen)
		return;
	if (l->segs[l->n_segs - 1].len >= l->seg_bytes) {
		struct ftl_seg *old = &l->segs[l->n_segs - 1];
		/* sealed: its zeros ahead are of no use any more */
		if (old->file_len > old->len && !ftruncate(old->fd, (off_t)old->len))
			old->file_len = old->len;
		if (seg_new(l))
			return;
		rolled = true;
	}
	/* Long-lived small connections out of old segments, at each new head:
	 * a connection whose first span is older than the two newest sealed
	 * segments. The copy lands in the head, so it moves again only after
	 * three more segments. */
	if (!rolled || !l->reloc_max || l->n_segs < 4)
		return;
	uint64_t cutoff = l->segs[l->n_segs - 3].start;
	struct ftl_conn *c;
	FTL_FOR_EACH_LIVE(l, c) {
		if (!c->n_spans || c->spans[0].start >= cutoff || c->log_bytes > l->reloc_max ||
		    c->replay != FTL_RP_NONE || c->closed)
			continue;
		if (ftl_log_relocate(l, c))
			fprintf(stderr, "ftlog: could not copy a connection forward; its "
					"segments are kept\n");
	}
}

/* ---- loading the log at start --------------------------------------------- */

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* How far the segment's records are whole: the first record that is not
 * (checked: whose CRC does not match), or the start of an FR_MOVED copy
 * that does not end within them. */
static size_t valid_end(struct ftl *l, const uint8_t *buf, size_t len, bool checked)
{
	const struct ftc_rec *r;
	size_t good = 0, moved_at = 0;
	uint64_t moved_end = 0;

	FTL_FOR_EACH_REC(buf, len, r) {
		/* (the FR_SEG header at 0 is checked by its magic: a segment
		 * cut back to nothing would lose it) */
		if (checked && _o && !ftl_rec_crc_ok(r)) {
			/* torn by a crash, or garbage: the log ends here */
			l->st.crc_mismatches++;
			break;
		}
		if (r->type == FR_MOVED && !moved_end) {
			moved_at = _o;
			moved_end = _o + r->len + ((uint64_t)r->ack << 32 | r->seq);
		}
		good = _o + r->len;
		if (moved_end && good >= moved_end)
			moved_end = 0;
	}
	return moved_end ? moved_at : good;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void load_segment(struct ftl *l, const uint8_t *buf, size_t len, uint64_t start,
			 const struct ftc_key *only)
{
	const struct ftc_rec *r;

	FTL_FOR_EACH_REC(buf, len, r) {
		uint64_t pos = start + _o;
		if (r->type == FR_SEG || (only && memcmp(&r->key, only, sizeof(*only))))
			continue;
		struct ftl_conn *c = ftl_conn_find(l, &r->key);
		switch (r->type) {
		case FR_CLOSED:
			/* The tombstone: its records are dead. */
			if (c)
				ftl_conn_free(l, c);
			continue;
		case FR_MOVED:
			/* The whole history follows: what came before is dead. */
			if (c)
				ftl_conn_free(l, c);
			c = ftl_conn_new(l, &r->key);
			if (c)
				ftl_log_track(l, c, pos, r->len);
			continue;
		case FR_SYN:
			if (c && c->have_syn) {
				ftl_conn_free(l, c); /* the 4-tuple used again */
				c = NULL;
			}
			if (!c)
				c = ftl_conn_new(l, &r->key);
			break;
		default:
			break; /* a record of a connection whose start is gone: dead */
		}
		if (!c)
			continue;
		ftl_apply(l, c, r, false);
		ftl_log_track(l, c, pos, r->len);
	}
}

/* The segment's FR_SEG header: its start position and format version, or
 * -1 when the image does not begin with one. */
static int seg_header(const uint8_t *buf, size_t len, uint64_t *start, uint32_t *version)
{
	const struct ftc_rec *h = (const struct ftc_rec *)buf;

	if (!buf || len < sizeof(*h) + 8 || h->type != FR_SEG || h->plen != 8 ||
	    h->len < sizeof(*h) + 8 || h->len % FTC_REC_ALIGN || h->len > len ||
	    memcmp(h + 1, FTC_SEG_MAGIC, 8))
		return -1;
	*start = (uint64_t)h->ack << 32 | h->seq;
	if (version)
		*version = h->aux;
	return 0;
}

size_t ftl_load_image(struct ftl *l, const uint8_t *buf, size_t len, const struct ftc_key *k,
		      struct ftl_conn **cp)
{
	uint64_t start;
	uint32_t version;
	size_t good;

	if (cp)
		*cp = NULL;
	if (seg_header(buf, len, &start, &version))
		return 0;
	good = valid_end(l, buf, len, version >= 2);
	/* The segment must be in the table before its records are tracked;
	 * segments are entered in order of position. */
	struct ftl_seg *s = l->n_segs ? &l->segs[l->n_segs - 1] : NULL;
	if (s && s->start == start)
		s->len = good;
	else if (!s || s->start < start)
		s = seg_add(l, start, -1, good);
	else
		s = NULL;
	if (s) {
		s->checked = version >= 2;
		s->file_len = len;
	}
	load_segment(l, buf, good, start, k);
	if (cp && k)
		*cp = ftl_conn_find(l, k);
	return good;
}

/* Per-connection logs of the logger before the shared log: their
 * connections are appended to the shared log (and made durable) and the
 * files removed, so an upgrade keeps the connections open across it. */
static void import_legacy(struct ftl *l, DIR *d)
{
	struct dirent *e;
	char p[600];
	char **done = NULL;
	size_t n_done = 0;

	rewinddir(d);
	while ((e = readdir(d))) {
		size_t nl = strlen(e->d_name);
		struct stat stb;
		const struct ftc_rec *r;
		struct ftl_conn *c = NULL;

		if (nl < 5 || strcmp(e->d_name + nl - 4, ".log"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", l->dir, e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		uint8_t *buf = NULL;
		size_t len = 0;
		if (!fstat(fd, &stb) && stb.st_size > 0) {
			len = (size_t)stb.st_size;
			void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
			buf = m == MAP_FAILED ? NULL : m;
		}
		close(fd);
		if (buf) {
			FTL_FOR_EACH_REC(buf, len, r) {
				if (!c) {
					if (r->type != FR_SYN)
						break;
					c = ftl_conn_find(l, &r->key);
					if (c)
						ftl_conn_free(l, c);
					c = ftl_conn_new(l, &r->key);
					if (!c)
						break;
				}
				if (r->type == FR_SEG || r->type == FR_MOVED)
					continue;
				ftl_apply(l, c, r, true);
			}
			munmap(buf, len);
		}
		char **nd = realloc(done, (n_done + 1) * sizeof(*nd));
		if (nd) {
			done = nd;
			done[n_done] = strdup(p);
			if (done[n_done])
				n_done++;
		}
		l->st.legacy_imported += c != NULL;
	}
	if (!n_done)
		return;
	/* Durable in the shared log before the old files go. */
	if (!ftl_log_write_sync(l, true)) {
		for (size_t i = 0; i < n_done; i++)
			unlink(done[i]);
	} else {
		fprintf(stderr, "ftlog: importing the per-connection logs failed: %s\n",
			strerror(errno));
	}
	for (size_t i = 0; i < n_done; i++)
		free(done[i]);
	free(done);
}

int ftl_load_dir(struct ftl *l, uint64_t claim_deadline_ns)
{
	DIR *d = opendir(l->dir);
	struct dirent *e;
	uint64_t *starts = NULL;
	size_t n = 0, cap = 0;
	int rebuilt = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		uint64_t st;
		char tail[8];
		if (sscanf(e->d_name, "ftlog-%16" SCNx64 ".se%1s", &st, tail) != 2 ||
		    strlen(e->d_name) != 26 || strcmp(tail, "g"))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			uint64_t *ns = realloc(starts, cap * sizeof(*ns));
			if (!ns) {
				free(starts);
				closedir(d);
				return -1;
			}
			starts = ns;
		}
		starts[n++] = st;
	}
	if (n) /* no segment yet: starts is NULL, which qsort may not be given */
		qsort(starts, n, sizeof(*starts), u64_cmp);
	for (size_t i = 0; i < n; i++) {
		char p[600];
		struct stat stb;
		bool last = i + 1 == n;
		ftl_seg_path(l, starts[i], p, sizeof(p));
		int fd = open(p, O_RDWR | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &stb)) {
			fprintf(stderr, "ftlog: %s: %s\n", p, strerror(errno));
			if (fd >= 0)
				close(fd);
			continue;
		}
		size_t len = (size_t)stb.st_size, good = 0;
		const uint8_t *buf = NULL;
		if (len) {
			void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
			buf = m == MAP_FAILED ? NULL : m;
		}
		uint64_t hstart;
		bool hdr_ok = !seg_header(buf, len, &hstart, NULL) && hstart == starts[i];
		if (!hdr_ok) {
			/* A head torn as it was created holds nothing; anything
			 * else is not ours to touch. */
			if (buf)
				munmap((void *)buf, len);
			close(fd);
			if (last && len < 4096) {
				unlink(p);
				fprintf(stderr, "ftlog: %s: no segment header, removed\n", p);
			} else {
				fprintf(stderr, "ftlog: %s: not a log segment, ignored\n", p);
			}
			continue;
		}
		/* Entered with its descriptor; the loader sets its length to
		 * what is whole. */
		if (!seg_add(l, starts[i], fd, 0)) {
			munmap((void *)buf, len);
			close(fd);
			continue;
		}
		good = ftl_load_image(l, buf, len, NULL, NULL);
		/* Zeros after the records are the ones written ahead (version 2). */
		bool zeros = l->segs[l->n_segs - 1].checked && all_zero(buf + good, len - good);
		munmap((void *)buf, len);
		if (good < len && !zeros) {
			if (last) {
				/* A record (or a copy) torn by a crash mid-write is
				 * cut off, so appends go on at a record boundary
				 * (and no part of it is left to be read as records
				 * once later ones are written before it). */
				if (ftruncate(fd, (off_t)good))
					fprintf(stderr, "ftlog: %s: truncate: %s\n", p,
						strerror(errno));
				else
					l->segs[l->n_segs - 1].file_len = good;
			} else {
				fprintf(stderr, "ftlog: %s: %zu bytes after the last whole record "
						"ignored\n", p, len - good);
			}
		}
	}
	free(starts);
	struct ftl_conn *c;
	FTL_FOR_EACH_LIVE(l, c) {
		if (!c->have_syn) {
			ftl_conn_free(l, c);
			continue;
		}
		ftl_conn_durable(c);
		c->claim_deadline_ns = claim_deadline_ns;
		rebuilt++;
	}
	if (ftl_log_open(l)) {
		closedir(d);
		return -1;
	}
	import_legacy(l, d);
	closedir(d);
	if (l->st.legacy_imported) {
		rebuilt = 0;
		FTL_FOR_EACH_LIVE(l, c) {
			ftl_conn_durable(c);
			c->claim_deadline_ns = claim_deadline_ns;
			rebuilt++;
		}
	}
	return rebuilt;
}
