/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the shim's replay reader (shim/ilftcp_replay.c): a
 * replay file the logger wrote (or a damaged one) and the connection's
 * log, then the restarted server's reads served from them, with the sizes
 * and peeks of the input.
 *
 * The input is either two raw chunks (the replay file and the log), or a
 * program that writes a log and a replay file over it: extents anywhere,
 * read lengths, sizes that fit or not. The log lives in a memory file
 * (memfd) made once; each input rewrites it.
 *
 * Checked: a replay the reader accepts serves exactly its logged bytes,
 * those of its extents in order, every logged read with its own length
 * (a read never spans two of them, and none is empty), then the rest as
 * new reads; a peek returns what the next read will and consumes nothing;
 * nothing is served past the end.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fz.h"
#include "ilftcp_replay.h"

static int log_fd = -1;
#define LOG_MAX 16384
#define FILE_MAX 4096
static uint8_t pattern[LOG_MAX];

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	for (unsigned i = 0; i < LOG_MAX; i++)
		pattern[i] = (uint8_t)(i * 7u + 3u);
	log_fd = memfd_create("fuzz_replay_log", MFD_CLOEXEC);
	if (log_fd < 0)
		abort();
	return 0;
}

/* A replay file over a log of log_len bytes, from a program. */
FZ_HARNESS static size_t program(struct fz *z, uint8_t *f, size_t log_len)
{
	struct ftc_replay_hdr h = {0};
	unsigned n_reads = fz_u8(z) % 16, n_ext = fz_u8(z) % 16;
	uint8_t *w = f + sizeof(h);
	uint64_t data = 0;

	memcpy(h.magic, FTC_REPLAY_MAGIC, 8);
	for (unsigned i = 0; i < n_reads; i++) {
		uint32_t l = fz_u8(z) & 1 ? fz_u32(z) : fz_u8(z) % 64;

		memcpy(w, &l, 4);
		w += 4;
	}
	for (unsigned i = 0; i < n_ext; i++) {
		struct ftc_replay_ext e = {0};
		uint8_t sel = fz_u8(z);

		e.log_off = sel & 1 ? fz_u64(z) : (log_len ? fz_u16(z) % log_len : 0);
		e.len = sel & 2 ? fz_u32(z) : 1 + fz_u8(z) % 64;
		if (!(sel & 4) && e.log_off + e.len > log_len) /* mostly inside the log */
			e.len = e.log_off < log_len ? (uint32_t)(log_len - e.log_off) : 0;
		data += e.len;
		memcpy(w, &e, sizeof(e));
		w += sizeof(e);
	}
	h.n_reads = n_reads;
	h.n_ext = n_ext;
	h.data_len = fz_u8(z) & 0x80 ? fz_u64(z) : data;
	h.out_skip = fz_u32(z);
	memcpy(f, &h, sizeof(h));
	return (size_t)(w - f);
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t lg[LOG_MAX], fs[FILE_MAX];
	struct fz z = { data, size };
	bool prog = fz_u8(&z) & 1;
	size_t log_len, flen, got;
	const uint8_t *p;

	/* The log. */
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
	if (ftruncate(log_fd, 0) || (log_len && pwrite(log_fd, lg, log_len, 0) != (ssize_t)log_len))
		abort();
	/* The replay file. */
	if (prog) {
		flen = program(&z, fs, log_len);
	} else {
		p = fz_chunk(&z, FILE_MAX, &got);
		memcpy(fs, p, got);
		flen = got;
	}
	uint8_t *file = malloc(flen ? flen : 1); /* exact size: ASan sees overreads */
	if (file == NULL)
		abort();
	memcpy(file, fs, flen);

	struct ilf_replay r;
	uint64_t out_skip = 0;
	const char *why = "";

	if (ilf_replay_parse(&r, file, flen, log_len, &out_skip, &why) != 0) {
		free(file);
		return 0;
	}
	r.log_fd = log_fd;
	/* What must come out: the extents' bytes, in order; the logged reads
	 * (non-empty ones, in order). */
	struct ftc_replay_hdr h;
	memcpy(&h, file, sizeof(h));
	FZ_CHECK(r.log_left == h.data_len, "log_left %lu for data_len %lu",
		 (unsigned long)r.log_left, (unsigned long)h.data_len);
	uint64_t served = 0, in_read = 0;
	uint32_t read_no = 0;
	uint8_t buf[4096];
	const uint8_t *ext = file + sizeof(h) + (size_t)h.n_reads * 4;
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
			FZ_CHECK(!memcmp(buf + b, lg + e.log_off + xpos, m),
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
	free(file);
	return 0;
}
