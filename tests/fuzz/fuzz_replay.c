/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the shim's replay reader (shim/ilftcp_replay.c): a
 * replay file the logger wrote (or a damaged one) and the file its extents
 * point into, loaded through their descriptors (only the header and the
 * lists are read), then the restarted server's reads served from them,
 * with the sizes and peeks of the input.
 *
 * Two shapes, as the first input byte says: the logger's since the shared
 * log (one file, handed over twice: the lists, then the logged bytes,
 * which the extents point at), and a replay file whose extents point into
 * a log of its own. Each is either raw chunks or a program that writes
 * the lists (extents anywhere, read lengths, sizes that fit or not). The
 * files live in memory files (memfd) made once; each input rewrites them.
 *
 * Checked: a replay the reader accepts has its lists inside the file and,
 * in one file, every extent after them; it serves exactly its logged
 * bytes, those of its extents in order, every logged read with its own
 * length (a read never spans two of them, and none is empty), then the
 * rest as new reads; a peek returns what the next read will and consumes
 * nothing; nothing is served past the end.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fz.h"
#include "ilftcp_replay.h"

static int log_fd = -1, file_fd = -1, file_fd2 = -1;
#define LOG_MAX 16384
#define FILE_MAX 8192
static uint8_t pattern[LOG_MAX];

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	for (unsigned i = 0; i < LOG_MAX; i++)
		pattern[i] = (uint8_t)(i * 7u + 3u);
	log_fd = memfd_create("fuzz_replay_log", MFD_CLOEXEC);
	file_fd = memfd_create("fuzz_replay_file", MFD_CLOEXEC);
	file_fd2 = file_fd >= 0 ? dup(file_fd) : -1; /* the logger sends it twice */
	if (log_fd < 0 || file_fd < 0 || file_fd2 < 0)
		abort();
	return 0;
}

/* A replay file from a program. one: the logger's shape (the logged bytes
 * after the lists, the extents into them); else its extents point into a
 * log of log_len bytes. Returns the file's length. */
FZ_HARNESS static size_t program(struct fz *z, uint8_t *f, bool one, size_t log_len)
{
	struct ftc_replay_hdr h = {0};
	unsigned n_reads = fz_u8(z) % 16, n_ext = fz_u8(z) % 16;
	size_t lists = sizeof(h) + 4u * n_reads + sizeof(struct ftc_replay_ext) * n_ext;
	uint8_t *w = f + sizeof(h);
	struct ftc_replay_ext ext[16];
	uint64_t data = 0;

	memcpy(h.magic, FTC_REPLAY_MAGIC, 8);
	for (unsigned i = 0; i < n_reads; i++) {
		uint32_t l = fz_u8(z) & 1 ? fz_u32(z) : fz_u8(z) % 64;

		memcpy(w, &l, 4);
		w += 4;
	}
	/* The lengths first: in one file the bytes after the lists are
	 * (mostly) as many as the extents give. */
	uint8_t sel[16];
	for (unsigned i = 0; i < n_ext; i++) {
		sel[i] = fz_u8(z);
		ext[i].len = sel[i] & 2 ? fz_u32(z) : 1 + fz_u8(z) % 64;
		data += ext[i].len;
	}
	size_t area = one ? (size_t)(data < FILE_MAX - lists ? data : FILE_MAX - lists) : log_len;
	uint64_t from = one ? lists : 0;
	if (one && (fz_u8(z) & 0x80)) /* some other size after the lists */
		area = fz_u16(z) % (FILE_MAX - lists + 1);
	for (unsigned i = 0; i < n_ext; i++) {
		struct ftc_replay_ext *e = &ext[i];

		if (sel[i] & 1)
			e->log_off = sel[i] & 8 ? fz_u16(z) % (lists + area + 1) : fz_u64(z);
		else
			e->log_off = from + (area ? fz_u16(z) % area : 0);
		if (!(sel[i] & 4) && e->log_off + e->len > from + area) /* mostly inside */
			e->len = e->log_off < from + area ? (uint32_t)(from + area - e->log_off) : 0;
		memcpy(w, e, sizeof(*e));
		w += sizeof(*e);
	}
	data = 0;
	for (unsigned i = 0; i < n_ext; i++)
		data += ext[i].len;
	h.n_reads = n_reads;
	h.n_ext = n_ext;
	h.data_len = fz_u8(z) & 0x80 ? fz_u64(z) : data;
	h.out_skip = fz_u32(z);
	h.tail_len = fz_u8(z) % 40; /* the output tail: a length past FTC_OUT_TAIL, */
	h.tail_end = fz_u8(z) % 48; /* or an end before its start, is refused */
	memcpy(f, &h, sizeof(h));
	if (!one)
		return lists;
	memcpy(f + lists, pattern, area);
	return lists + area;
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t lg[LOG_MAX], fs[FILE_MAX];
	struct fz z = { data, size };
	uint8_t mode = fz_u8(&z);
	bool prog = mode & 1, one = !(mode & 2);
	size_t log_len = 0, flen, got;
	const uint8_t *p;

	/* A log of its own. */
	if (!one) {
		p = fz_chunk(&z, LOG_MAX, &got);
		log_len = got;
		memcpy(lg, p, got);
		if (prog) { /* a longer log of a pattern, when the input is short */
			size_t want = fz_u16(&z) % LOG_MAX;

			if (want > log_len) {
				memcpy(lg + log_len, pattern + log_len, want - log_len);
				log_len = want;
			}
		}
		if (ftruncate(log_fd, 0) ||
		    (log_len && pwrite(log_fd, lg, log_len, 0) != (ssize_t)log_len))
			abort();
	}
	/* The replay file. */
	if (prog) {
		flen = program(&z, fs, one, log_len);
	} else {
		p = fz_chunk(&z, FILE_MAX, &got);
		memcpy(fs, p, got);
		flen = got;
	}
	if (ftruncate(file_fd, 0) || (flen && pwrite(file_fd, fs, flen, 0) != (ssize_t)flen))
		abort();
	const uint8_t *src = one ? fs : lg; /* what the extents point into */

	struct ilf_replay r;
	uint64_t out_skip = 0;
	const char *why = "";

	if (ilf_replay_load(&r, file_fd, one ? file_fd2 : log_fd, &out_skip, &why) != 0)
		return 0;
	/* What must come out: the extents' bytes, in order; the logged reads
	 * (non-empty ones, in order). */
	struct ftc_replay_hdr h;
	memcpy(&h, fs, sizeof(h));
	uint64_t lists = sizeof(h) + (uint64_t)h.n_reads * 4 +
			 (uint64_t)h.n_ext * sizeof(struct ftc_replay_ext);
	FZ_CHECK(lists <= flen, "lists of %lu bytes in a file of %zu", (unsigned long)lists, flen);
	FZ_CHECK(r.log_left == h.data_len, "log_left %lu for data_len %lu",
		 (unsigned long)r.log_left, (unsigned long)h.data_len);
	FZ_CHECK(h.tail_len <= FTC_OUT_TAIL && h.tail_end >= h.tail_len &&
			 r.tail_len == h.tail_len && r.tail_end == h.tail_end &&
			 !memcmp(r.tail, h.tail, h.tail_len),
		 "output tail %u bytes ending at %lu accepted as %u at %lu", h.tail_len,
		 (unsigned long)h.tail_end, r.tail_len, (unsigned long)r.tail_end);
	const uint8_t *ext = fs + sizeof(h) + (size_t)h.n_reads * 4;
	for (uint32_t i = 0; i < h.n_ext; i++) {
		struct ftc_replay_ext e;

		memcpy(&e, ext + (size_t)i * sizeof(e), sizeof(e));
		FZ_CHECK(e.len && e.log_off + e.len <= (one ? flen : log_len) &&
				 (!one || e.log_off >= lists),
			 "extent %u (%lu + %u) accepted", i, (unsigned long)e.log_off, e.len);
	}
	uint64_t served = 0, in_read = 0;
	uint32_t read_no = 0;
	uint8_t buf[4096];
	uint32_t ei = 0, epos = 0;

	for (unsigned calls = 0; calls < 4096; calls++) {
		size_t n = 1 + (z.n ? fz_u16(&z) % sizeof(buf) : sizeof(buf) - 1);
		bool peek = fz_u8(&z) == 0x55, fresh;
		ssize_t k = ilf_replay_next(&r, buf, n, peek, &fresh, &why);

		FZ_CHECK(k >= 0, "the replay failed: %s", why);
		if (k == 0) {
			FZ_CHECK(r.log_left == 0, "nothing served, %lu bytes left",
				 (unsigned long)r.log_left);
			break;
		}
		FZ_CHECK((size_t)k <= n, "%zd bytes for a read of %zu", k, n);
		/* The bytes: the extents' in order (a peek: from where we are). */
		uint32_t xi = ei, xpos = epos;
		for (ssize_t b = 0; b < k;) {
			struct ftc_replay_ext e;

			memcpy(&e, ext + (size_t)xi * sizeof(e), sizeof(e));
			size_t m = e.len - xpos < (uint64_t)(k - b) ? e.len - xpos : (size_t)(k - b);
			FZ_CHECK(!memcmp(buf + b, src + e.log_off + xpos, m),
				 "bytes %lu.. of the replay are wrong",
				 (unsigned long)(served + (uint64_t)b));
			b += (ssize_t)m;
			xpos += (uint32_t)m;
			if (xpos == e.len) {
				xi++;
				xpos = 0;
			}
		}
		if (peek)
			continue;
		ei = xi;
		epos = xpos;
		served += (uint64_t)k;
		if (!fresh) {
			FZ_CHECK(read_no < r.n_reads, "a logged read past the logged reads");
			in_read += (uint64_t)k;
			FZ_CHECK(in_read <= r.rlens[read_no], "read %u: %lu bytes for %u", read_no,
				 (unsigned long)in_read, r.rlens[read_no]);
			if (in_read == r.rlens[read_no]) {
				read_no++;
				in_read = 0;
			}
		} else {
			FZ_CHECK(read_no == r.n_reads, "a new read before the logged ones ended");
		}
	}
	if (r.log_left == 0) {
		FZ_CHECK(served == h.data_len, "served %lu of %lu", (unsigned long)served,
			 (unsigned long)h.data_len);
		FZ_CHECK(read_no == r.n_reads, "%u of %u logged reads served", read_no,
			 r.n_reads);
	}
	for (uint32_t i = 0; i < r.n_reads; i++)
		FZ_CHECK(r.rlens[i] > 0, "an empty logged read");
	(void)out_skip;
	ilf_replay_release(&r);
	return 0;
}
