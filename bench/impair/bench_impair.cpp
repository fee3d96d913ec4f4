// SPDX-License-Identifier: BSD-3-Clause
//
// Cost per packet of the impairment models (loss decision, delay line
// push + pop, token bucket) and of the `impair` stage on real mbufs.
// The stage benchmarks need DPDK's EAL (--no-huge); the model ones do not.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <vector>

extern "C" {
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <interlink/config.h>
#include <interlink/impair.h>
#include <interlink/stage.h>

extern const struct il_stage_type il_stage_impair;
}

namespace {

void loss_bench(benchmark::State &state, const il_loss_cfg &cfg)
{
	il_loss l;
	char err[256];

	if (il_loss_init(&l, &cfg, err, sizeof(err)) != 0) {
		state.SkipWithError(err);
		return;
	}
	for (auto _ : state)
		benchmark::DoNotOptimize(il_loss_drop(&l));
	state.SetItemsProcessed(state.iterations());
	state.counters["loss"] = (double)l.lost / (double)l.seen;
}

void BM_loss_none(benchmark::State &state)
{
	il_loss_cfg c{};
	c.model = IL_LOSS_NONE;
	loss_bench(state, c);
}

void BM_loss_bernoulli(benchmark::State &state)
{
	il_loss_cfg c{};
	c.model = IL_LOSS_BERNOULLI;
	c.p = 0.01;
	loss_bench(state, c);
}

void BM_loss_gilbert_elliott(benchmark::State &state)
{
	il_loss_cfg c{};
	c.model = IL_LOSS_GILBERT_ELLIOTT;
	c.ge_p_gb = 0.01;
	c.ge_p_bg = 0.2;
	c.ge_loss_good = 0.001;
	c.ge_loss_bad = 0.5;
	loss_bench(state, c);
}

void BM_loss_burst(benchmark::State &state)
{
	il_loss_cfg c{};
	c.model = IL_LOSS_BURST;
	c.p = 0.01;
	c.burst_len = 8;
	loss_bench(state, c);
}

// Steady state: the line holds range(0) packets; each iteration pushes
// one and pops the one that has become due, as a poll loop would.
void BM_delay_push_pop(benchmark::State &state)
{
	const uint32_t inflight = (uint32_t)state.range(0);
	const uint64_t jitter = (uint64_t)state.range(1);
	const uint64_t delay = 1000;
	std::vector<il_delay_slot> ring(2 * inflight);
	il_delay d;
	char err[256];
	uint64_t now = 0;
	// One push per `gap` ticks keeps `inflight` packets in the line.
	const uint64_t gap = (delay + jitter / 2) / inflight + 1;

	il_delay_init(&d, ring.data(), (uint32_t)ring.size(), delay, jitter, 1, err, sizeof(err));
	while (il_delay_count(&d) < inflight)
		il_delay_push(&d, &d, now += gap);
	for (auto _ : state) {
		now += gap;
		il_delay_push(&d, &d, now);
		benchmark::DoNotOptimize(il_delay_pop(&d, now));
	}
	state.SetItemsProcessed(state.iterations());
	state.counters["held"] = il_delay_count(&d);
}

void BM_tbucket_take(benchmark::State &state)
{
	il_tbucket tb;
	uint64_t now = 0;

	// 10 Gbit/s on a 2.5 GHz clock; 64-byte packets arriving at line rate.
	il_tbucket_init(&tb, 10e9 / 8, 12500, 2500000000ull, 0);
	for (auto _ : state) {
		now += 128;
		benchmark::DoNotOptimize(il_tbucket_take(&tb, 64, now));
	}
	state.SetItemsProcessed(state.iterations());
}

// ---- the stage on mbufs ------------------------------------------------

rte_mempool *pool;

// Allocating and freeing the mbufs is part of every stage iteration; this
// measures it alone so the stage's own cost is the difference.
void BM_mbuf_alloc_free_baseline(benchmark::State &state)
{
	rte_mbuf *pkts[IL_BURST_CAP];

	for (auto _ : state) {
		if (rte_pktmbuf_alloc_bulk(pool, pkts, IL_BURST) != 0) {
			state.SkipWithError("mbuf pool empty");
			return;
		}
		rte_pktmbuf_free_bulk(pkts, IL_BURST);
	}
	state.SetItemsProcessed(state.iterations() * IL_BURST);
}

void stage_bench(benchmark::State &state, const char *yaml)
{
	rte_mbuf *pkts[IL_BURST_CAP];
	il_stage st;
	char err[512];
	il_cfg *cfg = il_cfg_load_string(yaml, "bench", err, sizeof(err));

	std::memset(&st, 0, sizeof(st));
	st.type = &il_stage_impair;
	if (cfg == NULL || il_stage_impair.create(&st, cfg, NULL, err, sizeof(err)) != 0) {
		il_cfg_free(cfg);
		state.SkipWithError(err);
		return;
	}
	il_cfg_free(cfg);
	for (auto _ : state) {
		if (rte_pktmbuf_alloc_bulk(pool, pkts, IL_BURST) != 0) {
			state.SkipWithError("mbuf pool empty");
			break;
		}
		for (unsigned i = 0; i < IL_BURST; i++)
			pkts[i]->pkt_len = pkts[i]->data_len = 64;
		uint16_t out = il_stage_impair.process(&st, pkts, IL_BURST);
		rte_pktmbuf_free_bulk(pkts, out);
	}
	state.SetItemsProcessed(state.iterations() * IL_BURST);
	state.counters["lost"] = (double)st.ctr[0];
	state.counters["queue_full"] = (double)st.ctr[1];
	il_stage_impair.destroy(&st);
}

void BM_stage_passthrough(benchmark::State &state)
{
	stage_bench(state, "{}");
}

void BM_stage_bernoulli(benchmark::State &state)
{
	stage_bench(state, "{loss: bernoulli, p: 0.01}");
}

void BM_stage_ge(benchmark::State &state)
{
	stage_bench(state, "{loss: gilbert-elliott, ge_p_gb: 0.01, ge_p_bg: 0.2}");
}

// 20 us plus up to 5 us of jitter: at these speeds roughly a thousand
// packets are in flight, all held in the stage's ring.
void BM_stage_delay_20us(benchmark::State &state)
{
	stage_bench(state, "{delay_us: 20, jitter_us: 5, queue: 8192}");
}

// Shaping to 100 Gbit/s (above what this loop offers): every packet goes
// through the queue and the bucket without being held back.
void BM_stage_rate(benchmark::State &state)
{
	stage_bench(state, "{rate_bps: 100G, queue: 4096}");
}

} // namespace

BENCHMARK(BM_loss_none);
BENCHMARK(BM_loss_bernoulli);
BENCHMARK(BM_loss_gilbert_elliott);
BENCHMARK(BM_loss_burst);
BENCHMARK(BM_delay_push_pop)->Args({ 64, 0 })->Args({ 4096, 0 })->Args({ 4096, 500 });
BENCHMARK(BM_tbucket_take);
BENCHMARK(BM_mbuf_alloc_free_baseline);
BENCHMARK(BM_stage_passthrough);
BENCHMARK(BM_stage_bernoulli);
BENCHMARK(BM_stage_ge);
BENCHMARK(BM_stage_delay_20us);
BENCHMARK(BM_stage_rate);

int main(int argc, char **argv)
{
	char *eal_args[] = {
		argv[0],
		const_cast<char *>("--no-huge"),
		const_cast<char *>("-m"),
		const_cast<char *>("128"),
		const_cast<char *>("--no-pci"),
		const_cast<char *>("-l"),
		const_cast<char *>("0"),
		const_cast<char *>("--no-telemetry"),
		const_cast<char *>("--file-prefix"),
		const_cast<char *>("il-impair-bench"),
		const_cast<char *>("--log-level=lib.eal:error"),
	};

	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	if (rte_eal_init((int)RTE_DIM(eal_args), eal_args) < 0) {
		std::fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	// Small buffers: the benchmark sends 64-byte frames and the delay
	// line holds a few thousand of them.
	pool = rte_pktmbuf_pool_create("il_impair_bench", 16383, 256, IL_MBUF_PRIV_SIZE,
				       RTE_PKTMBUF_HEADROOM + 256, SOCKET_ID_ANY);
	if (pool == NULL) {
		std::fprintf(stderr, "mbuf pool creation failed\n");
		return 1;
	}
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	rte_mempool_free(pool);
	rte_eal_cleanup();
	return 0;
}
