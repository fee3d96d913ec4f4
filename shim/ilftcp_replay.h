/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The shim's replay reader (libilftcp.so, docs/ft-tcp.md "Recovery"): a
 * replay file (struct ftc_replay_hdr, then the logged read lengths, then
 * the extents that hold the logged instream bytes, then, since the shared
 * log, those bytes themselves: the extents point into the replay file)
 * whose header and lists are read and checked against the file and the
 * file the extents point into before anything is served; then the bytes
 * are served with the logged read lengths, then the rest as new reads. The
 * logged bytes are read as they are served, never the whole file at once.
 * No wrapped call and no logger session here: the shim (ilftcp.c) links
 * it, and so does the fuzzer.
 */
#ifndef INTERLINK_ILFTCP_REPLAY_H
#define INTERLINK_ILFTCP_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <interlink/ftcp_proto.h>

#pragma GCC visibility push(hidden)

struct ilf_replay {
	int log_fd;               /* the connection's log; -1: no replay */
	struct ftc_replay_ext *ext;
	uint32_t n_ext, ei, epos; /* extent being served, bytes of it served */
	uint8_t *rb;              /* read-ahead of the log: [rb_off, rb_off + rb_len) */
	uint64_t rb_off;
	uint32_t rb_len, rb_cap;
	uint32_t n_reads, next_read;
	uint32_t *rlens;
	uint32_t part;      /* bytes of rlens[next_read] already served */
	uint64_t log_left;  /* logged instream bytes not served yet */
	uint64_t log_size;  /* of the log file, when the replay began */
	/* The crashed server's last output (ftc_replay_hdr): tail_len bytes
	 * ending at outstream position tail_end. */
	uint64_t tail_end;
	uint32_t tail_len;
	uint8_t tail[FTC_OUT_TAIL];
};

/* The replay file's header and lists: file holds its first len bytes (at
 * least the header and the lists it announces; what follows is not
 * looked at), file_size is the whole file's size, log_size that of the
 * file the extents point into; same: that file is the replay file itself
 * (what the logger hands over since the shared log). Every size is
 * checked first: the lists must lie inside the file, each extent inside
 * the log (same: inside the bytes after the lists, which must be exactly
 * data_len), the extents must give exactly data_len bytes, the logged
 * reads at most that many (reads of 0 bytes are dropped: served, one would
 * be the server's end of file). 0 with r ready (log_fd is the caller's to
 * set), or -1 and *why. */
int ilf_replay_parse(struct ilf_replay *r, const uint8_t *file, size_t len, uint64_t file_size,
		     uint64_t log_size, bool same, uint64_t *out_skip, const char **why);
/* The same from the two descriptors the logger hands over: only the
 * header and the lists of the replay file are read (its size, the log's
 * and whether they are one file from fstat); the log is kept as log_fd. */
int ilf_replay_load(struct ilf_replay *r, int replay_fd, int log_fd, uint64_t *out_skip,
		    const char **why);
/* Up to n replay bytes into buf: how many (at most n, and never across
 * the end of a logged read), 0 when the replay is over, -1 when the log
 * cannot be read (*why). *fresh: the bytes are past the logged reads (a
 * new read, to be logged). With peek nothing is consumed. */
ssize_t ilf_replay_next(struct ilf_replay *r, void *buf, size_t n, bool peek, bool *fresh,
			const char **why);
/* Frees the lists and the read-ahead (log_fd stays the caller's). */
void ilf_replay_release(struct ilf_replay *r);

#pragma GCC visibility pop

#endif
