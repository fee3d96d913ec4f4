/* SPDX-License-Identifier: BSD-3-Clause
 * What the two kernel baselines of the line-rate benchmark (kseq: UDP
 * sockets; afpseq: AF_PACKET rings) share: the appliance's raw-mode header
 * (docs/wire-format.md, "Raw mode") and its per-source FIFO sequence, and
 * the stop flag. Header-only: each baseline is one C file built on its own.
 */
#ifndef RAWSEQ_H
#define RAWSEQ_H

#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define RAWSEQ_HDR 40u   /* the Interlink header */
#define RAWSEQ_REC 4u    /* one message record: u16 length, u16 flags */
#define RAWSEQ_INSERT (RAWSEQ_HDR + RAWSEQ_REC)
#define RAWSEQ_SRC_SLOTS 4096u /* open addressing; far more than the benchmark's senders */

static volatile sig_atomic_t rawseq_quit;

static void rawseq_on_signal(int sig)
{
	(void)sig;
	rawseq_quit = 1;
}

/* SIGINT and SIGTERM end the main loop; no SA_RESTART, so a blocking call
 * returns. */
static inline void rawseq_signals(void)
{
	struct sigaction act = {.sa_handler = rawseq_on_signal};

	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
}

struct rawseq_src {
	uint32_t addr;
	uint16_t port;
	bool used;
	uint64_t next;
};

static struct rawseq_src rawseq_srcs[RAWSEQ_SRC_SLOTS];

/* The next FIFO sequence of a source address and port, from 1. */
static inline uint64_t rawseq_sender_seq(uint32_t addr, uint16_t port)
{
	uint32_t h = (addr * 2654435761u) ^ port;

	for (unsigned i = 0; i < RAWSEQ_SRC_SLOTS; i++) {
		struct rawseq_src *s = &rawseq_srcs[(h + i) & (RAWSEQ_SRC_SLOTS - 1)];
		if (!s->used) {
			s->used = true;
			s->addr = addr;
			s->port = port;
			s->next = 1;
		}
		if (s->addr == addr && s->port == port)
			return s->next++;
	}
	return 0; /* table full: never with the benchmark's senders */
}

static inline void rawseq_put16(uint8_t *p, uint16_t v)
{
	v = htons(v);
	memcpy(p, &v, 2);
}

static inline void rawseq_put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static inline void rawseq_put64(uint8_t *p, uint64_t v)
{
	rawseq_put32(p, (uint32_t)(v >> 32));
	rawseq_put32(p + 4, (uint32_t)v);
}

/* The 44 bytes the appliance inserts in front of a raw UDP payload of
 * payload_len bytes from saddr_be (network order) and sport (host order):
 * DATA, flags STAMPED|RAW, one message, the source's FIFO sequence, the
 * group's global sequence gseq. */
static inline void rawseq_header(uint8_t *h, uint16_t group_id, uint32_t saddr_be,
				 uint16_t sport, uint32_t epoch, uint64_t gseq,
				 uint16_t payload_len)
{
	memset(h, 0, RAWSEQ_HDR);
	h[0] = 1;           /* version */
	h[1] = 1;           /* DATA */
	h[2] = RAWSEQ_HDR;  /* hdr_len */
	h[3] = 0x01 | 0x08; /* STAMPED | RAW */
	rawseq_put16(h + 4, group_id);
	rawseq_put16(h + 6, 1);
	memcpy(h + 8, &saddr_be, 4);
	rawseq_put32(h + 12, epoch);
	rawseq_put64(h + 16, rawseq_sender_seq(ntohl(saddr_be), sport));
	rawseq_put64(h + 24, gseq);
	rawseq_put16(h + RAWSEQ_HDR, payload_len);
	rawseq_put16(h + RAWSEQ_HDR + 2, 0);
}

#endif
