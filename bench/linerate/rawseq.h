/* SPDX-License-Identifier: BSD-3-Clause
 * What the two kernel baselines of the line-rate benchmark (kseq: UDP
 * sockets; afpseq: AF_PACKET rings) share: the appliance's raw-mode header
 * (docs/wire-format.md, "Raw mode", written with include/interlink/wire.h)
 * and its per-source FIFO sequence, and the stop flag. Header-only: each
 * baseline is one C file built on its own (cc -I include).
 */
#ifndef RAWSEQ_H
#define RAWSEQ_H

#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "interlink/wire.h" /* the wire format's one source: sizes, offsets, flags */

#define RAWSEQ_INSERT (IL_HDR_LEN + IL_MSG_HDR_LEN) /* the header and one message record */
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

/* The 44 bytes the appliance inserts in front of a raw UDP payload of
 * payload_len bytes from saddr_be (network order) and sport (host order):
 * DATA, flags STAMPED|RAW, one message, the source's FIFO sequence, the
 * group's global sequence gseq. */
static inline void rawseq_header(uint8_t *h, uint16_t group_id, uint32_t saddr_be,
				 uint16_t sport, uint32_t epoch, uint64_t gseq,
				 uint16_t payload_len)
{
	memset(h, 0, IL_HDR_LEN);
	h[IL_OFF_VERSION] = IL_VERSION;
	h[IL_OFF_TYPE] = IL_T_DATA;
	h[IL_OFF_HDR_LEN] = IL_HDR_LEN;
	h[IL_OFF_FLAGS] = IL_F_STAMPED | IL_F_RAW;
	il_put16(h + IL_OFF_GROUP_ID, group_id);
	il_put16(h + IL_OFF_MSG_COUNT, 1);
	memcpy(h + IL_OFF_SENDER_ID, &saddr_be, 4);
	il_put32(h + IL_OFF_EPOCH, epoch);
	il_put64(h + IL_OFF_SENDER_SEQ, rawseq_sender_seq(ntohl(saddr_be), sport));
	il_put64(h + IL_OFF_GLOBAL_SEQ, gseq);
	il_put16(h + IL_HDR_LEN, payload_len); /* the record: length, flags 0 */
	il_put16(h + IL_HDR_LEN + 2, 0);
}

#endif
