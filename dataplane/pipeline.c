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

/* The chain's stages from `first` on. With shards, the frames of another
 * shard's groups leave the burst after the stage that tags them. */
static inline uint16_t chain_stages_from(struct il_lcore_io *io, struct il_chain *ch,
					 uint16_t chain_idx, uint16_t first,
					 struct rte_mbuf **pkts, uint16_t n)
{
	io->kinds = IL_KINDS_ALL;
	for (uint16_t s = first; s < ch->n_stages; s++) {
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
		if (unlikely(io->shard != NULL) && ch->handoff_at == (int16_t)s && n)
			n = il_shard_handoff(io->shard, chain_idx, pkts, n);
	}
	return n;
}

uint16_t il_chain_stages(struct il_lcore_io *io, struct il_chain *ch, struct rte_mbuf **pkts,
			 uint16_t n)
{
	return chain_stages_from(io, ch, 0, 0, pkts, n);
}

/* Survivors out on the chain's tx port in one call, then what the stages
 * emitted (a retransmission never overtakes its original). */
static inline void chain_tx(struct il_lcore_io *io, struct il_chain *ch, struct il_app *app,
			    struct rte_mbuf **pkts, uint16_t n)
{
	if (unlikely(app->tx_mute)) {
		il_tx_mute(io, pkts, n);
		return;
	}
	if (n)
		il_tx_burst(io, ch->tx_port, pkts, n);
	if (io->n_defer)
		il_emit_flush(io);
}

uint16_t il_shard_drain(struct il_app *app, struct il_worker *w)
{
	struct il_shard *sh = w->shard;
	struct rte_mbuf *got[IL_BURST], *pkts[IL_BURST_CAP];
	uint16_t total = 0;

	for (uint16_t j = 0; j < sh->n; j++) {
		if (sh->in[j] == NULL)
			continue;
		unsigned n = rte_ring_dequeue_burst(sh->in[j], (void **)got, IL_BURST, NULL);
		if (n == 0)
			continue;
		sh->handoff_in += n;
		total = (uint16_t)(total + n);
		/* Into this shard's pool: what it holds (history) and sends
		 * must not keep the sender's pool short. Strays are the
		 * exception path (RSS or a flow rule puts a group's frames on
		 * its owner's queue), so a copy is what they cost. */
		unsigned kept = 0;
		for (unsigned i = 0; i < n; i++) {
			struct rte_mbuf *m = got[i], *c;

			if (likely(m->pool == sh->pool || sh->pool == NULL)) {
				got[kept++] = m;
				continue;
			}
			c = rte_pktmbuf_copy(m, sh->pool, 0, UINT32_MAX);
			rte_pktmbuf_free(m);
			if (unlikely(c == NULL)) {
				sh->drop_handoff_nombuf++;
				continue;
			}
			got[kept++] = c;
		}
		n = kept;
		/* Per chain, in the order they were handed over. */
		for (uint16_t c = 0; c < w->n_chains; c++) {
			struct il_chain *ch = &w->chains[c];
			uint16_t k = 0;
			for (unsigned i = 0; i < n; i++)
				if (il_meta(got[i])->spare == c)
					pkts[k++] = got[i];
			if (k == 0)
				continue;
			w->io.rx_port = ch->rx_port;
			k = chain_stages_from(&w->io, ch, c, (uint16_t)(ch->handoff_at + 1), pkts, k);
			chain_tx(&w->io, ch, app, pkts, k);
		}
	}
	return total;
}

static inline uint16_t run_chain(struct il_worker *w, uint16_t c, struct il_app *app)
{
	struct il_chain *ch = &w->chains[c];
	struct rte_mbuf *pkts[IL_BURST_CAP];
	uint16_t n = likely(ch->rx_poll && !(w->io.link_down & (1u << ch->rx_port))) ?
		rte_eth_rx_burst(app->ports[ch->rx_port].port_id,
							      ch->rx_queue, pkts, IL_BURST) : 0;
	uint16_t got = n;
	struct il_lcore_io *io = &w->io;

	io->rx[ch->rx_port] += n;
	if (n == 0 && !ch->any_poll)
		return 0;
	io->rx_port = ch->rx_port;
	/* The burst is already an array: one tx call for all of it. */
	n = chain_stages_from(io, ch, c, 0, pkts, n);
	chain_tx(io, ch, app, pkts, n);
	return got | n;
}

/* What the tx buffers of ports whose link just went down still hold: it
 * will not be sent on that connection. */
static void drop_buffered(struct il_lcore_io *io, uint32_t ports)
{
	for (uint32_t m = ports; m != 0; m &= m - 1) {
		unsigned p = (unsigned)__builtin_ctz(m);
		struct rte_eth_dev_tx_buffer *b = io->txb[p];

		if (b->length) {
			rte_pktmbuf_free_bulk(b->pkts, b->length);
			io->tx_link_down[p] += b->length;
			b->length = 0;
		}
	}
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
		uint32_t went_down;
		/* No burst on a memif port while its link is down, nor while its
		 * peer is connecting (memif_guard.h). */
		w->io.link_down = il_guard_links(&w->gate, w->io.port_id, &went_down);
		if (unlikely(went_down))
			drop_buffered(&w->io, went_down);
		/* What other shards handed over first: it arrived before what
		 * this loop is about to receive. */
		if (w->shard)
			work |= il_shard_drain(app, w);
		for (uint16_t c = 0; c < w->n_chains; c++)
			work |= run_chain(w, c, app);
		for (uint16_t p = 0; p < app->n_ports; p++)
			if (likely(!(w->io.link_down & (1u << p))))
				rte_eth_tx_buffer_flush(w->io.port_id[p], w->io.txq[p],
							w->io.txb[p]);
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
