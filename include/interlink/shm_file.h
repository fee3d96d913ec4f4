/* SPDX-License-Identifier: BSD-3-Clause
 *
 * A file of shared-memory rings (by default under /dev/shm) that two
 * processes map: a 128-byte header, an area of the user's own (per-side
 * state, for instance), then the rings (struct il_shm_ring), each at a
 * 128-byte boundary.
 *
 * A file rather than a memfd, so that a restarted process attaches by
 * name without anyone handing it a descriptor. Creation is atomic: the
 * whole file is built under a private name and link()ed into place, which
 * fails on an existing name, so of two processes starting at once exactly
 * one creates and nobody maps a half-written header. Attaching checks
 * everything in the header (magic, versions, ring geometry, offsets, file
 * size) before any offset from the file is used.
 */
#ifndef INTERLINK_SHM_FILE_H
#define INTERLINK_SHM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <interlink/shm_ring.h>

#define IL_SHM_MAX_RINGS 4u
/* The header's own layout; users version theirs in il_shm_spec.version. */
#define IL_SHM_FILE_VERSION 1u

struct il_shm_geom {
	uint32_t bytes; /* data bytes, a power of two; 0 when attaching: any */
	uint32_t unit;  /* message size, or IL_SHM_REC_ALIGN for records */
};

/* What a user expects to find (and creates when the file is absent). */
struct il_shm_spec {
	const char *what;   /* for messages: "channel", "FT-TCP ring" */
	char magic[8];      /* the user's, e.g. "IL2CHAN1" */
	uint32_t version;   /* the user's layout version */
	uint32_t n_rings;   /* 1..IL_SHM_MAX_RINGS */
	struct il_shm_geom ring[IL_SHM_MAX_RINGS];
	uint32_t user_bytes; /* size of the user's area */
};

/* One process's mapping of the file. */
struct il_shm_file {
	void *base;
	size_t len;
	void *user; /* the user's area, user_bytes long */
	struct il_shm_ring *ring[IL_SHM_MAX_RINGS];
	struct il_shm_geom geom[IL_SHM_MAX_RINGS]; /* as found in the file */
};

/* Map the file at path. With create and the file absent, create it with
 * spec's geometry first (every ring's bytes must then be set; the user's
 * area starts zeroed). A present file's geometry is accepted as found if
 * its magic, versions, number of rings and units match spec (compare
 * f->geom with what you asked for when sizes matter). Returns 0, or -1
 * with a message naming the path in err. */
int il_shm_file_open(const char *path, const struct il_shm_spec *spec, int create,
		     struct il_shm_file *f, char *err, size_t errlen);

/* Unmap (the file stays: the peer may still use it). */
void il_shm_file_close(struct il_shm_file *f);

#endif
