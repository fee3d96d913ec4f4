/* SPDX-License-Identifier: BSD-3-Clause
 * The FT-TCP ring file, shared by the data plane and the logger
 * (interlink-control): two shared-memory rings in one file.
 */
#include <stdlib.h>
#include <string.h>

#include <interlink/err.h>
#include <interlink/ftcp_ring.h>

enum { RING_UP = 0, RING_DOWN = 1 };

struct ftc_ring *ftc_ring_open(const char *path, uint32_t up_size, enum ftc_side side,
			       char *err, size_t errlen)
{
	struct il_shm_spec spec = {
		.what = "FT-TCP ring",
		.version = FTC_RING_LAYOUT_VERSION,
		.n_rings = 2,
		.ring = {
			[RING_UP] = { up_size ? up_size : FTC_UP_SIZE_DEF, IL_SHM_REC_ALIGN },
			[RING_DOWN] = { FTC_DOWN_SLOTS * sizeof(struct ftc_down),
					sizeof(struct ftc_down) },
		},
	};
	struct ftc_ring *r = calloc(1, sizeof(*r));
	int tx, rx;

	if (r == NULL) {
		il_err(err, errlen, "ftcp ring '%s': out of memory", path);
		return NULL;
	}
	memcpy(spec.magic, FTC_RING_MAGIC, sizeof(spec.magic));
	if (il_shm_file_open(path, &spec, 1, &r->file, err, errlen) != 0) {
		free(r);
		return NULL;
	}
	tx = side == FTC_DATAPLANE ? RING_UP : RING_DOWN;
	rx = !tx;
	il_shm_prod_attach(&r->tx, r->file.ring[tx], r->file.geom[tx].bytes,
			   r->file.geom[tx].unit);
	il_shm_cons_attach(&r->rx, r->file.ring[rx], r->file.geom[rx].bytes,
			   r->file.geom[rx].unit, false);
	r->up = r->file.ring[RING_UP];
	return r;
}

void ftc_ring_close(struct ftc_ring *r)
{
	if (r == NULL)
		return;
	il_shm_file_close(&r->file);
	free(r);
}
