/* SPDX-License-Identifier: BSD-3-Clause
 * The shim's replay reader (ilftcp_replay.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ilftcp_replay.h"

/* The file the extents point into is read ahead this much at a time (the
 * logger's replay file has one extent, after the lists), or whole when it
 * is smaller. */
#define RB_SIZE (1u << 20)
/* A replay file's lists (reads and extents together) are at most this
 * large: they are read into memory, the logged bytes after them are not. */
#define MAX_LISTS (256u << 20)

int ilf_replay_parse(struct ilf_replay *r, const uint8_t *file, size_t len, uint64_t file_size,
		     uint64_t log_size, bool same, uint64_t *out_skip, const char **why)
{
	struct ftc_replay_hdr h;
	uint64_t sum = 0, reads = 0;
	uint32_t nr = 0;

	memset(r, 0, sizeof(*r));
	r->log_fd = -1;
	if (len < sizeof(h)) {
		*why = "replay file: shorter than its header";
		return -1;
	}
	memcpy(&h, file, sizeof(h));
	if (memcmp(h.magic, FTC_REPLAY_MAGIC, 8)) {
		*why = "replay file: not a replay file (magic)";
		return -1;
	}
	uint64_t lists_end = sizeof(h) + (uint64_t)h.n_reads * sizeof(uint32_t) +
			     (uint64_t)h.n_ext * sizeof(struct ftc_replay_ext);
	if (lists_end > file_size || lists_end > len) {
		*why = "replay file: its lists do not fit in it";
		return -1;
	}
	/* The logged bytes after the lists, when the extents point into this
	 * file: exactly the rest of it, and no extent into the lists. */
	uint64_t data_from = same ? lists_end : 0;
	if (same && (log_size != file_size || file_size - lists_end != h.data_len)) {
		*why = "replay file: the logged bytes do not fill it after its lists";
		return -1;
	}
	const uint8_t *lens = file + sizeof(h);
	const uint8_t *exts = lens + (size_t)h.n_reads * sizeof(uint32_t);

	for (uint32_t i = 0; i < h.n_ext; i++) {
		struct ftc_replay_ext e;

		memcpy(&e, exts + (size_t)i * sizeof(e), sizeof(e));
		if (e.len == 0 || e.log_off < data_from || e.log_off > log_size ||
		    e.len > log_size - e.log_off) {
			*why = "replay file: an extent is not inside the log";
			return -1;
		}
		sum += e.len;
	}
	if (sum != h.data_len) {
		*why = "replay file: the extents do not hold the logged bytes";
		return -1;
	}
	for (uint32_t i = 0; i < h.n_reads; i++) {
		uint32_t l;

		memcpy(&l, lens + (size_t)i * sizeof(l), sizeof(l));
		reads += l;
		nr += l != 0;
	}
	if (reads > h.data_len) {
		*why = "replay file: more read bytes than logged bytes";
		return -1;
	}
	if (h.tail_len > FTC_OUT_TAIL || h.tail_end < h.tail_len) {
		*why = "replay file: its output tail is not within the stream";
		return -1;
	}
	r->ext = malloc(sizeof(*r->ext) * (h.n_ext ? h.n_ext : 1));
	r->rlens = malloc(sizeof(*r->rlens) * (nr ? nr : 1));
	if (!r->ext || !r->rlens) {
		ilf_replay_release(r);
		*why = "replay: out of memory";
		return -1;
	}
	memcpy(r->ext, exts, sizeof(*r->ext) * h.n_ext);
	for (uint32_t i = 0, k = 0; i < h.n_reads; i++) {
		uint32_t l;

		memcpy(&l, lens + (size_t)i * sizeof(l), sizeof(l));
		if (l)
			r->rlens[k++] = l;
	}
	r->n_ext = h.n_ext;
	r->n_reads = nr;
	r->log_left = h.data_len;
	r->log_size = log_size;
	r->tail_end = h.tail_end;
	r->tail_len = h.tail_len;
	memcpy(r->tail, h.tail, h.tail_len);
	*out_skip = h.out_skip;
	return 0;
}

int ilf_replay_load(struct ilf_replay *r, int replay_fd, int log_fd, uint64_t *out_skip,
		    const char **why)
{
	struct stat rs, ls;
	struct ftc_replay_hdr h;
	uint8_t *file;
	int rc;

	memset(r, 0, sizeof(*r));
	r->log_fd = -1;
	if (fstat(replay_fd, &rs) || fstat(log_fd, &ls) || rs.st_size < 0 || ls.st_size < 0) {
		*why = "replay: fstat";
		return -1;
	}
	if (pread(replay_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		*why = "replay file: shorter than its header";
		return -1;
	}
	/* Only the header and the lists: the logged bytes after them are read
	 * as they are served. */
	uint64_t lists_end = sizeof(h) + (uint64_t)h.n_reads * sizeof(uint32_t) +
			     (uint64_t)h.n_ext * sizeof(struct ftc_replay_ext);
	if (lists_end > (uint64_t)rs.st_size) {
		*why = "replay file: its lists do not fit in it";
		return -1;
	}
	if (lists_end > MAX_LISTS) {
		*why = "replay file: its lists are too large";
		return -1;
	}
	file = malloc((size_t)lists_end);
	if (!file) {
		*why = "replay: out of memory";
		return -1;
	}
	for (size_t o = 0; o < (size_t)lists_end;) {
		ssize_t g = pread(replay_fd, file + o, (size_t)lists_end - o, (off_t)o);

		if (g <= 0) {
			free(file);
			*why = "replay file: reading its lists";
			return -1;
		}
		o += (size_t)g;
	}
	rc = ilf_replay_parse(r, file, (size_t)lists_end, (uint64_t)rs.st_size,
			      (uint64_t)ls.st_size,
			      rs.st_dev == ls.st_dev && rs.st_ino == ls.st_ino, out_skip, why);
	free(file);
	if (rc == 0)
		r->log_fd = log_fd;
	return rc;
}

/* n logged bytes from the log, across as many extents as it takes. */
static int ext_read(struct ilf_replay *r, uint8_t *buf, size_t n, const char **why)
{
	while (n) {
		const struct ftc_replay_ext *e = &r->ext[r->ei]; /* parse: they hold log_left */
		uint64_t at = e->log_off + r->epos;
		size_t k = e->len - r->epos;

		if (k > n)
			k = n;
		if (!r->rb) {
			r->rb_cap = r->log_size < RB_SIZE ? (uint32_t)r->log_size : RB_SIZE;
			r->rb = malloc(r->rb_cap ? r->rb_cap : 1);
			if (!r->rb) {
				*why = "replay: out of memory";
				return -1;
			}
		}
		if (at < r->rb_off || at >= r->rb_off + r->rb_len) {
			ssize_t g = pread(r->log_fd, r->rb, r->rb_cap, (off_t)at);

			if (g <= 0) {
				*why = "replay: reading the log";
				return -1;
			}
			r->rb_off = at;
			r->rb_len = (uint32_t)g;
		}
		size_t got = (size_t)(r->rb_off + r->rb_len - at);
		if (got > k)
			got = k;
		memcpy(buf, r->rb + (at - r->rb_off), got);
		buf += got;
		n -= got;
		r->epos += (uint32_t)got;
		if (r->epos == e->len) {
			r->ei++;
			r->epos = 0;
		}
	}
	return 0;
}

ssize_t ilf_replay_next(struct ilf_replay *r, void *buf, size_t n, bool peek, bool *fresh,
			const char **why)
{
	size_t want;
	bool logged;

	*fresh = false;
	if (r->log_left == 0 || n == 0)
		return 0;
	if (r->next_read < r->n_reads) {
		want = r->rlens[r->next_read] - r->part;
		logged = true;
	} else {
		want = r->log_left;
		logged = false;
	}
	if (want > n)
		want = n;
	if (want > r->log_left)
		want = r->log_left;
	if (peek) {
		uint32_t ei = r->ei, epos = r->epos;
		int rc = ext_read(r, buf, want, why);

		r->ei = ei;
		r->epos = epos;
		return rc ? -1 : (ssize_t)want;
	}
	if (ext_read(r, buf, want, why))
		return -1;
	r->log_left -= want;
	if (logged) {
		r->part += (uint32_t)want;
		if (r->part == r->rlens[r->next_read]) {
			r->part = 0;
			r->next_read++;
		}
	}
	*fresh = !logged;
	return (ssize_t)want;
}

void ilf_replay_release(struct ilf_replay *r)
{
	free(r->rlens);
	free(r->ext);
	free(r->rb);
	r->rlens = NULL;
	r->ext = NULL;
	r->rb = NULL;
	r->rb_len = r->rb_cap = 0;
	r->n_ext = r->n_reads = 0;
	r->log_left = 0;
}
