/* SPDX-License-Identifier: BSD-3-Clause
 * The C side of bench_ftcp: the stage's structures use C11 atomics, which
 * C++ cannot include, so the benchmark reaches them through these calls.
 */
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_hash.h>
#include <rte_mbuf.h>

#include "ftcp.h"
#include "ftcp_timer.h"

#include "ftcp_glue.h"

/* Up to n flows, established (idle), as many as the table takes: a cuckoo
 * table of 2^20 entries refuses a new key a little before it is full.
 * Returns how many. */
uint32_t ftcp_bench_populate(struct il_stage *st, uint32_t n)
{
	struct ftcp *f = st->ctx;

	for (uint32_t i = 0; i < n; i++) {
		struct ftc_key k = {rte_cpu_to_be_32(0x0a000000u | (i >> 16)),
				    rte_cpu_to_be_32(0x0a4d0002u),
				    rte_cpu_to_be_16((uint16_t)(1024 + (i & 0xffff))),
				    rte_cpu_to_be_16(5001)};
		int32_t pos = rte_hash_add_key(f->h, &k);
		if (pos < 0)
			return i;
		struct ftcp_flow *fl = &f->flows[pos];
		memset(fl, 0, sizeof(*fl));
		fl->key = k;
		fl->state = FT_EST;
		fl->mss = 1460;
		fl->syn_win = 64240;
	}
	return n;
}

uint32_t ftcp_bench_flows(struct il_stage *st)
{
	return (uint32_t)rte_hash_count(((struct ftcp *)st->ctx)->h);
}

uint64_t ftcp_bench_poll_tick(struct il_stage *st)
{
	struct ftcp *f = st->ctx;
	struct rte_mbuf *none[1];
	struct il_lcore_io *io = st->io;

	f->next_scan = 0;
	uint64_t t0 = rte_rdtsc();
	ftcp_process(st, none, 0);
	uint64_t dt = rte_rdtsc() - t0;
	if (io->n_defer) {
		rte_pktmbuf_free_bulk(io->defer, io->n_defer);
		io->n_defer = 0;
	}
	return dt;
}

/* Every flow recovering with its fabricated SYN due at every tick (all
 * true), or back to established (all false). */
void ftcp_bench_all_due(struct il_stage *st, bool on)
{
	struct ftcp *f = st->ctx;
	const void *key;
	void *data;
	uint32_t it = 0;
	int32_t pos;

	while ((pos = rte_hash_iterate(f->h, &key, &data, &it)) >= 0) {
		struct ftcp_flow *fl = &f->flows[pos];

		fl->state = on ? FT_RECOVERING : FT_EST;
		fl->syn_sent = on;
		fl->syn_tsc = 0;
		if (on)
			ftl_append(f, pos, FTL_SYN);
		else
			ftl_unlink_all(f, pos);
	}
	f->syn_rto_tsc = on ? 0 : f->hz / 5;
}

uint64_t ftcp_bench_syns(struct il_stage *st)
{
	return st->ctr[C_FAB_SYNS];
}

/* What every tick did before: walk the whole table, looking at each
 * flow's state. Returns the cycles. */
uint64_t ftcp_bench_full_walk(struct il_stage *st, uint64_t *seen)
{
	struct ftcp *f = st->ctx;
	const void *key;
	void *data;
	uint32_t it = 0;
	int32_t pos;
	uint64_t t0 = rte_rdtsc();

	while ((pos = rte_hash_iterate(f->h, &key, &data, &it)) >= 0)
		*seen += f->flows[pos].state == FT_CLOSING;
	return rte_rdtsc() - t0;
}
