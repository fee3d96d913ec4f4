/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen's pure pieces (no DPDK): latency histogram, message and
 * frame size distributions, TSC pacing arithmetic, pcap files. The unit
 * tests in tests/unit/pktgen drive them with virtual clocks.
 */
#ifndef IL_PGUTIL_H
#define IL_PGUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- latency histogram (log-linear, HDR-style) ----------------------- */
#define HIST_SUB_BITS 5 /* 32 sub-buckets per power of two: <= 3.1% error */
#define HIST_BUCKETS (64 * (1 << HIST_SUB_BITS))
struct pg_hist {
	uint64_t count, max, sum;
	uint64_t b[HIST_BUCKETS];
};
void pg_hist_add(struct pg_hist *h, uint64_t v);
uint64_t pg_hist_quantile(const struct pg_hist *h, double q);
void pg_hist_merge(struct pg_hist *into, const struct pg_hist *from);

/* ---- size distributions ------------------------------------------------ */
/* Ethernet overheads, so that "a 64 B frame" means what RFC 2544 means:
 * 64 bytes including the 4-byte FCS, i.e. 60 bytes handed to the PMD, and
 * 84 bytes of wire time once preamble and inter-frame gap are counted. */
#define PG_FCS 4u
#define PG_WIRE_EXTRA 20u /* preamble + SFD + inter-frame gap */

enum pg_size_kind { PG_SIZE_FIXED, PG_SIZE_RANGE, PG_SIZE_IMIX };

struct pg_sizes {
	enum pg_size_kind kind;
	unsigned lo, hi;    /* FIXED: lo; RANGE: uniform in [lo, hi] */
	uint64_t rng;       /* xorshift state: cheap, and deterministic per seed */
	unsigned imix_pos;  /* IMIX: position in the shuffled 12-slot cycle */
	unsigned imix_cycle[12];
};

/* Simple IMIX (7:4:1 of 64, 570 and 1518-byte frames, FCS included). */
#define PG_IMIX_SMALL 64u
#define PG_IMIX_MID 570u
#define PG_IMIX_LARGE 1518u

/* Parses "N", "A-B" or "imix". 0, or -1 with a message in err. */
int pg_sizes_parse(struct pg_sizes *sz, const char *spec, uint64_t seed, char *err, size_t len);
unsigned pg_sizes_next(struct pg_sizes *sz);
double pg_sizes_mean(const struct pg_sizes *sz);
unsigned pg_sizes_max(const struct pg_sizes *sz);

/* ---- pacing ------------------------------------------------------------- */
/* Each frame costs ticks: either 1/pps, or its wire bits / bps. A sender
 * may go when the clock has reached `next`; lateness is forgiven only up to
 * `max_lag` ticks, so a stall (a busy CPU) cannot turn into an unbounded
 * burst afterwards, while ordinary jitter is caught up and the long-run
 * rate stays exact. */
struct pg_pace {
	double per_frame;   /* ticks per frame (pps mode) */
	double per_bit;     /* ticks per wire bit (bps mode) */
	double next;        /* when the next frame may go */
	double max_lag;
	bool on;
};

void pg_pace_init(struct pg_pace *p, uint64_t hz, double pps, double bps, uint64_t now);
/* Lateness forgiven (default: 64 frames, at least 10 ms). A benchmark
 * sets it small, so that a generator that lost its CPU does not make up
 * with a burst the device under test never saw from a real wire. */
void pg_pace_set_lag(struct pg_pace *p, uint64_t hz, double seconds);
/* Frames of frame_len bytes (without FCS) that may go now, at most max. */
unsigned pg_pace_due(struct pg_pace *p, uint64_t now, unsigned frame_len, unsigned max);
/* Charge one frame of frame_len bytes (without FCS). */
void pg_pace_charge(struct pg_pace *p, unsigned frame_len);
static inline unsigned pg_wire_bits(unsigned frame_len)
{
	return (frame_len + PG_FCS + PG_WIRE_EXTRA) * 8u;
}

/* ---- pcap files ---------------------------------------------------------- */
struct pg_pcap_rec {
	uint64_t ts_ns;     /* from the file's start */
	uint32_t len;       /* captured bytes */
	uint32_t off;       /* into pg_pcap.data */
};

struct pg_pcap {
	struct pg_pcap_rec *rec;
	uint8_t *data;
	size_t n;
};

/* Loads a whole classic pcap file (usec or nsec, either byte order,
 * Ethernet link type). 0, or -1 with a message in err. */
int pg_pcap_load(struct pg_pcap *pc, const char *path, size_t max_frames, char *err,
		 size_t errlen);
void pg_pcap_free(struct pg_pcap *pc);
/* Departure time in ticks after the replay's start for record i, played
 * speed times faster than captured. */
uint64_t pg_pcap_due(const struct pg_pcap *pc, size_t i, double speed, uint64_t hz);

/* A capture buffer: filled on the fast path, written out at the end. */
struct pg_capture {
	uint8_t *buf;
	uint32_t *len, *caplen;
	uint64_t *ts_ns;
	unsigned snap, cap, n;
};
int pg_capture_init(struct pg_capture *c, unsigned count, unsigned snap);
void pg_capture_add(struct pg_capture *c, const uint8_t *frame, uint32_t len, uint64_t ts_ns);
/* Writes a nanosecond pcap; base_ns is the wall-clock time of ts 0. */
int pg_capture_write(const struct pg_capture *c, const char *path, uint64_t base_ns);
void pg_capture_free(struct pg_capture *c);

#endif
