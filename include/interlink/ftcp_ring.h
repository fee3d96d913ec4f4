/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The FT-TCP rings: one shared file, mapped by the data plane's `ftcp`
 * stage and by the logger (a thread of interlink-control), holding
 *
 *   up ring:   data plane -> logger, records (struct ftc_rec + payload),
 *              8 MiB by default (the stage's ring_size);
 *   down ring: logger -> data plane, 32-byte struct ftc_down messages,
 *              FTC_DOWN_SLOTS of them.
 *
 * Both are shared-memory rings (include/interlink/shm_ring.h): the data
 * plane reserves records in place with il_shm_reserve() on `tx` and
 * publishes them once per burst, then rings the logger's wake datagram
 * socket when il_shm_wake_due() says the logger announced a sleep; the
 * logger reads them with il_shm_rec_next() on `rx`, and sends with
 * il_shm_send() on its `tx`, which the data plane polls.
 *
 * Either side may create the file; a restarted side re-attaches by name
 * and the indices in the file carry on, so nothing queued is lost across a
 * logger restart (unlike the control channel, the up ring holds client
 * bytes that must be logged whoever consumes them).
 */
#ifndef INTERLINK_FTCP_RING_H
#define INTERLINK_FTCP_RING_H

#include <stddef.h>
#include <stdint.h>

#include <interlink/ftcp_proto.h>
#include <interlink/shm_file.h>
#include <interlink/shm_ring.h>

#define FTC_RING_MAGIC "ILFTRNG2"
#define FTC_RING_LAYOUT_VERSION 2u
#define FTC_UP_SIZE_DEF (8u << 20)
#define FTC_DOWN_SLOTS 8192u

_Static_assert(FTC_REC_ALIGN == IL_SHM_REC_ALIGN, "records are the ring's records");

enum ftc_side {
	FTC_DATAPLANE, /* produces the up ring, consumes the down ring */
	FTC_LOGGER,    /* produces the down ring, consumes the up ring */
};

/* One process's handle on the file. */
struct ftc_ring {
	struct il_shm_file file;
	struct il_shm_prod tx; /* data plane: the up ring; logger: the down ring */
	struct il_shm_cons rx; /* data plane: the down ring; logger: the up ring */
	struct il_shm_ring *up; /* for counters */
};

/* Open or create the ring file as `side`; up_size (a power of two, 0: the
 * default) only matters to the side that creates it. Returns the handle,
 * or NULL with err naming the path. */
struct ftc_ring *ftc_ring_open(const char *path, uint32_t up_size, enum ftc_side side,
			       char *err, size_t errlen);
void ftc_ring_close(struct ftc_ring *r);

#endif
