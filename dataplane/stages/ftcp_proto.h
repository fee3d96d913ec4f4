/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FT-TCP: what the south-side wrapper (the `ftcp` data-plane stage), the
 * logger (a thread of interlink-control) and the north-side shim (libilftcp.so) say to
 * each other. No DPDK and no liburing here: all three include it.
 *
 *   data plane --- up ring (variable-length records) ---> logger
 *   data plane <-- down ring (32-byte messages) --------- logger
 *   shim <-------- unix stream socket (32-byte messages) -> logger
 *
 * The up-ring record header is also the on-disk log record header
 * (docs/ft-tcp.md, "Log format"): a log file is the records the data plane
 * sent for one connection plus the shim's READ records, in arrival order.
 */
#ifndef INTERLINK_FTCP_PROTO_H
#define INTERLINK_FTCP_PROTO_H

#include <stdatomic.h>
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
	FR_CLOSED = 5,    /* connection ended normally: compact the log */
	FR_PAD = 6,       /* ring only: skip to the ring's start */
	FR_READ = 7,      /* log only: one read of aux bytes by the server */
	FR_RECOVERED = 8, /* handshake with the restarted server done: seq = its ISN */
};

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
	uint32_t spare2;
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
};

#define FD_F_ISNS 1u

struct ftc_down {
	uint16_t type;
	uint16_t flags;
	struct ftc_key key;
	uint32_t a, b, c, d;
} __attribute__((packed));

_Static_assert(sizeof(struct ftc_down) == 32, "down message is 32 bytes");

/* ---- the shared file holding both rings ------------------------------ */

#define FTC_RING_MAGIC "ILFTRNG1"
#define FTC_UP_SIZE_DEF (8u << 20)
#define FTC_DOWN_SLOTS 8192u

struct ftc_ring_hdr {
	char magic[8];
	uint32_t version;
	uint32_t up_size;    /* bytes, power of two */
	uint32_t down_slots; /* power of two */
	uint32_t pad0;
	uint64_t total;
	uint8_t pad1[128 - 32];
	/* up ring producer (data plane) */
	_Atomic uint64_t up_head;
	uint64_t up_drops;
	_Atomic uint64_t woke_gen; /* last sleep_gen the producer answered */
	uint8_t pad2[128 - 24];
	/* up ring consumer (logger) */
	_Atomic uint64_t up_tail;
	_Atomic uint64_t sleep_gen; /* odd: the consumer is (about to be) asleep */
	uint8_t pad3[128 - 16];
	/* down ring producer (logger) */
	_Atomic uint64_t down_head;
	uint8_t pad4[128 - 8];
	/* down ring consumer (data plane) */
	_Atomic uint64_t down_tail;
	uint8_t pad5[128 - 8];
};

_Static_assert(sizeof(struct ftc_ring_hdr) == 640, "ring header layout");

static inline uint8_t *ftc_up_data(struct ftc_ring_hdr *h)
{
	return (uint8_t *)h + sizeof(*h);
}

static inline struct ftc_down *ftc_down_slots(struct ftc_ring_hdr *h)
{
	return (struct ftc_down *)(ftc_up_data(h) + h->up_size);
}

static inline uint64_t ftc_ring_bytes(uint32_t up_size, uint32_t down_slots)
{
	return sizeof(struct ftc_ring_hdr) + up_size + (uint64_t)down_slots * 32;
}

/* Producer side of the up ring; `head` is the producer's own index (records
 * reserved but not yet published included); `cached_tail` is the producer's copy of
 * the consumer index, reloaded only when the ring looks full. Returns a
 * pointer to len bytes to fill, or NULL when full (the caller drops the
 * segment: TCP retransmits it, an unlogged byte never goes on). */
static inline uint8_t *ftc_up_reserve(struct ftc_ring_hdr *h, uint64_t head,
				      uint64_t *cached_tail, uint32_t len, uint64_t *new_head)
{
	uint32_t mask = h->up_size - 1, off = (uint32_t)(head & mask);
	uint32_t room_end = h->up_size - off, need = len;

	if (room_end < len)
		need += room_end; /* a PAD record fills the end */
	if (head + need - *cached_tail > h->up_size) {
		*cached_tail = atomic_load_explicit(&h->up_tail, memory_order_acquire);
		if (head + need - *cached_tail > h->up_size)
			return NULL;
	}
	if (room_end < len) {
		struct ftc_rec *pad = (struct ftc_rec *)(ftc_up_data(h) + off);
		pad->len = room_end;
		pad->type = FR_PAD;
		head += room_end;
		off = 0;
	}
	*new_head = head + len;
	return ftc_up_data(h) + off;
}

static inline void ftc_up_publish(struct ftc_ring_hdr *h, uint64_t new_head)
{
	atomic_store_explicit(&h->up_head, new_head, memory_order_release);
}

/* The consumer asked to be woken (it went to sleep after its last look). */
static inline bool ftc_up_wants_wake(struct ftc_ring_hdr *h)
{
	/* Dekker-style: our head store must be visible before we read the
	 * consumer's sleep flag (it stores the flag, then reads head), or both
	 * sides miss each other and the consumer sleeps until its timer. A
	 * release store followed by an acquire load may be reordered. */
	atomic_thread_fence(memory_order_seq_cst);
	uint64_t g = atomic_load_explicit(&h->sleep_gen, memory_order_acquire);
	if (!(g & 1) || g == atomic_load_explicit(&h->woke_gen, memory_order_relaxed))
		return false;
	atomic_store_explicit(&h->woke_gen, g, memory_order_relaxed);
	return true;
}

/* Down ring, both ends. */
static inline bool ftc_down_send(struct ftc_ring_hdr *h, const struct ftc_down *m)
{
	uint64_t head = atomic_load_explicit(&h->down_head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&h->down_tail, memory_order_acquire);

	if (head - tail >= h->down_slots)
		return false;
	ftc_down_slots(h)[head & (h->down_slots - 1)] = *m;
	atomic_store_explicit(&h->down_head, head + 1, memory_order_release);
	return true;
}

static inline unsigned ftc_down_recv(struct ftc_ring_hdr *h, struct ftc_down *out, unsigned max)
{
	uint64_t tail = atomic_load_explicit(&h->down_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&h->down_head, memory_order_acquire);
	unsigned n = 0;

	while (tail != head && n < max)
		out[n++] = ftc_down_slots(h)[tail++ & (h->down_slots - 1)];
	if (n)
		atomic_store_explicit(&h->down_tail, tail, memory_order_release);
	return n;
}

/* Open or create the ring file (both processes call it; creation is a
 * private name then link(), so nobody maps a half-made header). Returns
 * the mapping or NULL with err filled. Defined in ftcp_ring.c. */
struct ftc_ring_hdr *ftc_ring_open(const char *path, uint32_t up_size, char *err,
				   size_t errlen);
void ftc_ring_close(struct ftc_ring_hdr *h);

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
			   * unlinked) and the connection's log, read-only;
			   * a = 0: no replay, the connection is abandoned */
};

struct ftc_shim_msg {
	uint16_t type;
	uint16_t flags;
	struct ftc_key key;
	uint32_t a, b, c, d;
} __attribute__((packed));

_Static_assert(sizeof(struct ftc_shim_msg) == 32, "shim message is 32 bytes");

/* Replay file (written by the logger, read once by the shim): this header,
 * n_reads logged read lengths (u32 each), then n_ext extents that say where
 * in the connection's log file (same path, ".log" for ".replay") the
 * logged instream bytes are, in stream order, covering data_len bytes
 * without overlap. The bytes are not copied: the shim reads the log. */
struct ftc_replay_hdr {
	char magic[8];      /* "ILFTRPL2" */
	uint32_t n_reads;
	uint32_t n_ext;
	uint64_t data_len;  /* logged instream bytes to replay */
	uint64_t out_skip;  /* outstream bytes the client already acknowledged */
};

struct ftc_replay_ext {
	uint64_t log_off;   /* byte offset in the log file */
	uint32_t len;
	uint32_t pad;
};
#define FTC_REPLAY_MAGIC "ILFTRPL2"

#define FTC_LOGGER_SOCK_DEF "/run/interlink/ftlog.sock"
#define FTC_RING_PATH_DEF "/dev/shm/interlink-ftcp"

#endif
