/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FT-TCP: what the south-side wrapper (the `ftcp` data-plane stage), the
 * logger (a thread of interlink-control) and the north-side shim (libilftcp.so) say to
 * each other. No DPDK and no liburing here: all three include it. The
 * rings themselves (the file both the data plane and the logger map) are
 * in include/interlink/ftcp_ring.h.
 *
 *   data plane --- up ring (variable-length records) ---> logger
 *   data plane <-- down ring (32-byte messages) --------- logger
 *   shim <-------- unix stream socket (32-byte messages) -> logger
 *
 * The up-ring record header is also the on-disk log record header
 * (docs/ft-tcp.md, "Log format"). The log is one per logger, shared by
 * every connection: an append-only sequence of records (the data plane's,
 * the shim's READ records, the logger's own) cut into segment files
 * <dir>/ftlog-<16 hex digits>.seg, the digits being the global log
 * position of the segment's first byte (positions run on across segments).
 * A segment starts with an FR_SEG record. A connection's history is its
 * records in log order: from its FR_SYN (a new FR_SYN for the same key
 * starts a new connection) or from its latest complete FR_MOVED copy, to
 * its FR_CLOSED tombstone. A torn tail (a record, or an FR_MOVED copy, cut
 * short by a crash) is cut off by the logger at start.
 */
#ifndef INTERLINK_FTCP_PROTO_H
#define INTERLINK_FTCP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Connection key, network byte order as on the wire. */
struct ftc_key {
	uint32_t cip, sip;
	uint16_t cport, sport;
} __attribute__((packed));

/* Sequence arithmetic mod 2^32. */
static inline bool ftc_seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline bool ftc_seq_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }
static inline uint32_t ftc_seq_max(uint32_t a, uint32_t b) { return ftc_seq_lt(a, b) ? b : a; }
static inline uint32_t ftc_seq_min(uint32_t a, uint32_t b) { return ftc_seq_lt(a, b) ? a : b; }

/* ---- records: up ring and log files ---------------------------------- */

enum ftc_rec_type {
	FR_SYN = 1,       /* client SYN: seq = client ISN, win = its window,
			   * aux = mss | wscale << 16 | has_ws << 24; payload:
			   * client MAC, server MAC (12 bytes) */
	FR_SYNACK = 2,    /* server SYN-ACK: seq = server ISN, aux = wscale */
	FR_DATA = 3,      /* client segment: seq, ack, win, flags; payload */
	FR_CRASHED = 4,   /* data plane entered recovery: seq = next byte passed */
	FR_CLOSED = 5,    /* connection ended normally: compact the log. In the
			   * log, the connection's tombstone: its records before
			   * are dead (flags: enum ftc_end) */
	/* 6: the up ring's own padding before ring layout 2; never in a log */
	FR_READ = 7,      /* log only: one read of aux bytes by the server */
	FR_RECOVERED = 8, /* handshake with the restarted server done: seq = its ISN */
	FR_SEG = 9,       /* log only, first record of a segment: key zero, seq and
			   * ack = the segment's start position (low, high 32 bits),
			   * aux = FTC_LOG_VERSION; payload FTC_SEG_MAGIC */
	FR_MOVED = 10,    /* log only: the connection's whole history copied forward
			   * follows, seq and ack = its length in bytes (low, high),
			   * aux = its records; the connection's earlier records are
			   * dead once the copy is complete */
};

/* FR_CLOSED's flags in the log: why the connection ended. */
enum ftc_end { FTC_END_CLOSED = 0, FTC_END_ABANDONED = 1 };

/* 1: records unchecked; 2: every record's crc checked at load, and the
 * head may run past its records into zeros written ahead (docs/ft-tcp.md,
 * "The log"). A logger reads both and writes 2. */
#define FTC_LOG_VERSION 2u
#define FTC_SEG_MAGIC "ILFTSEG1"

#define FTC_REC_ALIGN 8u

struct ftc_rec {
	uint32_t len;   /* whole record, header included, multiple of 8 */
	uint16_t type;  /* enum ftc_rec_type */
	uint16_t plen;  /* payload bytes after the header */
	struct ftc_key key;
	uint32_t seq;   /* host order from here on */
	uint32_t ack;
	uint16_t win;   /* raw window field */
	uint8_t flags;  /* TCP flags */
	uint8_t spare;
	uint32_t aux;
	uint32_t crc;   /* in the log (segments of version 2 on): CRC-32C of the
			 * whole record, len bytes, with this field zero; 0 on
			 * the rings (the logger fills it as it appends) */
	uint64_t ts_ns; /* CLOCK_MONOTONIC when the data plane copied it (0: n/a) */
} __attribute__((packed));

_Static_assert(sizeof(struct ftc_rec) == 48, "record header is 48 bytes");

static inline uint32_t ftc_rec_size(uint32_t plen)
{
	return (uint32_t)((sizeof(struct ftc_rec) + plen + FTC_REC_ALIGN - 1) &
			  ~(size_t)(FTC_REC_ALIGN - 1));
}

/* ---- down ring messages ---------------------------------------------- */

enum ftc_down_type {
	FD_STABLE = 1,   /* a = lowest instream seq not logged (cumulative);
			  * flags & FD_F_ISNS: both ISNs are durable */
	FD_CRASH = 2,    /* the server process died: start recovery */
	FD_RECOVER = 3,  /* fabricate the SYN: a = its ISN, b = server_seq */
	FD_CLOSE_OK = 4, /* the shim announced close/shutdown: FIN/RST may pass */
	FD_ABANDON = 5,  /* recovery gave up (a = enum ftc_abandon): reset the client */
};

/* Why a crashed connection could not be recovered. */
enum ftc_abandon {
	FTC_AB_TIMEOUT = 1, /* the restarted server did not accept it in time */
	FTC_AB_REPLAY = 2,  /* its replay could not be built or handed over */
	FTC_AB_DIVERGED = 3, /* the restarted server, its replay read, did not
			      * write again what the client already had */
};

#define FD_F_ISNS 1u

struct ftc_down {
	uint16_t type;
	uint16_t flags;
	struct ftc_key key;
	uint32_t a, b, c, d;
} __attribute__((packed));

_Static_assert(sizeof(struct ftc_down) == 32, "down message is 32 bytes");

/* ---- shim <-> logger (unix stream socket) ----------------------------- */

enum ftc_shim_type {
	FS_HELLO = 1,     /* shim -> logger: a = pid */
	FS_LISTEN = 2,    /* shim -> logger: a = port (host order), b = listen backlog;
			   * recover its conns, paced by the backlog */
	FS_ACCEPTED = 3,  /* shim -> logger: key; reply FS_CONN */
	FS_CONN = 4,      /* logger -> shim: a = 1 protected, b = 1 recovering */
	FS_READ = 5,      /* shim -> logger: key, a = length */
	FS_READ_ACK = 6,  /* logger -> shim: key, a = reads acknowledged (cumulative) */
	FS_CLOSE = 7,     /* shim -> logger: key, announce close/shutdown */
	FS_CLOSE_OK = 8,  /* logger -> shim */
	FS_REPLAY = 9,    /* logger -> shim, after FS_CONN with b = 1: a = 1 with two
			   * descriptors (SCM_RIGHTS): the replay file (already
			   * unlinked) and the file its extents point into, both
			   * read-only (since the shared log: the replay file
			   * again, which holds a copy of the bytes; the shared log
			   * holds other connections' bytes and is never handed
			   * out); a = 0: no replay, the connection is abandoned */
	FS_OWED = 10,     /* shim -> logger: key, a | b << 32 = output bytes the
			   * client already has that the server has not written
			   * again; sent when the replay is read with some owed,
			   * then with 0 once they are written; with flags
			   * FTC_OWED_DIVERGED: a | b << 32 = the outstream position
			   * where what the server wrote again differs from what
			   * the client had (the replay's tail): reset it now */
};

#define FTC_OWED_DIVERGED 0x0001

struct ftc_shim_msg {
	uint16_t type;
	uint16_t flags; /* FS_REPLAY: FTC_REPLAY_PEER_FIN */
	struct ftc_key key;
	uint32_t a, b, c, d;
} __attribute__((packed));

_Static_assert(sizeof(struct ftc_shim_msg) == 32, "shim message is 32 bytes");

/* FS_REPLAY's flags: the client had closed its side (its FIN is logged,
 * just after the replayed bytes), so once they are read the connection
 * reads as at its end (0 bytes), as the crashed server's socket did. */
#define FTC_REPLAY_PEER_FIN 0x0001

/* Replay file (written by the logger, read once by the shim): this header,
 * n_reads logged read lengths (u32 each), then n_ext extents that say where
 * in the second descriptor of FS_REPLAY the logged instream bytes are, in
 * stream order, covering data_len bytes without overlap. The logger of the
 * shared log writes one extent, pointing at a copy of the bytes after the
 * extents in the replay file itself (a reader needs no other assumption). */
#define FTC_OUT_TAIL 32

struct ftc_replay_hdr {
	char magic[8];      /* "ILFTRPL3" */
	uint32_t n_reads;
	uint32_t n_ext;
	uint64_t data_len;  /* logged instream bytes to replay */
	uint64_t out_skip;  /* outstream bytes the client already acknowledged */
	/* The last tail_len (<= FTC_OUT_TAIL) bytes the server had sent before
	 * it crashed, ending at outstream position tail_end (0: the first
	 * byte after the SYN-ACK): the shim compares the bytes it discards
	 * with them, so a restarted server that writes something else is
	 * caught even when it writes as much. */
	uint64_t tail_end;
	uint32_t tail_len;
	uint32_t spare;
	uint8_t tail[FTC_OUT_TAIL];
};

struct ftc_replay_ext {
	uint64_t log_off;   /* byte offset in the file the extents point into */
	uint32_t len;
	uint32_t pad;
};
#define FTC_REPLAY_MAGIC "ILFTRPL3"

#define FTC_LOGGER_SOCK_DEF "/run/interlink/ftlog.sock"
#define FTC_RING_PATH_DEF "/dev/shm/interlink-ftcp"

#endif
