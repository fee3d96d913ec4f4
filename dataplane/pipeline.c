/* SPDX-License-Identifier: BSD-3-Clause
 * The poll loop of one worker lcore: for each chain, receive a burst, run
 * it through the chain's stages, transmit the survivors in one call; flush
 * the tx buffers of emitted packets once per iteration so a lone packet
 * never waits.
 */
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <interlink/app.h>
#include <interlink/memif_guard.h>

uint16_t il_chain_stages(struct il_lcore_io *io, struct il_chain *ch, struct rte_mbuf **pkts,
			 uint16_t n)
{
	io->kinds = IL_KINDS_ALL;
	for (uint16_t s = 0; s < ch->n_stages; s++) {
		struct il_stage *st = ch->stages[s];
		if (!st->type->poll && (n == 0 || (st->kinds && !(st->kinds & io->kinds))))
			continue; /* nothing for it in this burst */
		uint64_t t0 = IL_STAGE_CYCLES ? rte_rdtsc() : 0;
		uint16_t n_in = n;
		st->pkts_in += n;
		n = st->type->process(st, pkts, n);
		if (!st->type->kinds_kept)
			io->kinds = IL_KINDS_ALL;
		if (IL_STAGE_CYCLES) {
			/* An idle poll is not a packet's cost: counted apart. */
			if (n_in)
				st->tsc_busy += rte_rdtsc() - t0;
			else
				st->tsc_poll += rte_rdtsc() - t0;
		}
	}
	return n;
}

static inline uint16_t run_chain(struct il_worker *w, struct il_chain *ch, struct il_app *app)
{
	struct rte_mbuf *pkts[IL_BURST_CAP];
	uint16_t n = rte_eth_rx_burst(app->ports[ch->rx_port].port_id, 0, pkts, IL_BURST);
	uint16_t got = n;
	struct il_lcore_io *io = &w->io;

	io->rx[ch->rx_port] += n;
	if (n == 0 && !ch->any_poll)
		return 0;
	n = il_chain_stages(io, ch, pkts, n);
	if (unlikely(app->tx_mute)) {
		il_tx_mute(io, pkts, n);
		return got | n;
	}
	/* The burst is already an array: one tx call for all of it. What the
	 * stages emitted goes after it (a retransmission never overtakes its
	 * original). */
	if (n)
		il_tx_burst(io, ch->tx_port, pkts, n);
	if (io->n_defer)
		il_emit_flush(io);
	return got | n;
}

int il_worker_main(void *arg)
{
	struct il_app *app = arg;
	unsigned lcore = rte_lcore_id();
	struct il_worker *w = NULL;

	for (unsigned i = 0; i < app->n_workers; i++)
		if (app->workers[i].lcore_id == lcore)
			w = &app->workers[i];
	if (!w)
		return 0;
	unsigned slot = (unsigned)(w - app->workers);
	il_guard_online(slot);
	while (!app->quit) {
		uint16_t work = 0;
		for (uint16_t c = 0; c < w->n_chains; c++)
			work |= run_chain(w, &w->chains[c], app);
		for (uint16_t p = 0; p < app->n_ports; p++)
			rte_eth_tx_buffer_flush(w->io.port_id[p], w->io.txq[p], w->io.txb[p]);
		w->loops++;
		if (work)
			w->busy_loops++;
		/* A runtime command (counter reset, new parameters)? One relaxed
		 * load; the command itself is read after an acquire. */
		uint32_t cmd = __atomic_load_n(&app->rt.seq, __ATOMIC_RELAXED);
		if (unlikely(cmd != w->cmd_seen)) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			il_runtime_apply(app, w, cmd);
		}
		il_guard_quiescent(slot);
	}
	il_guard_offline(slot);
	return 0;
}
