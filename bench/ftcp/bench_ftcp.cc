// SPDX-License-Identifier: BSD-3-Clause
// The ftcp stage's timer tick with a table of 2^20 flows (max_flows; filled
// as far as the cuckoo hash takes, about 98%), on a real
// appliance instance (EAL --no-huge, net_ring ports, the real pool and
// stage): cycles of one poll (an empty burst) that runs the tick, while
//  - no flow is due (the common case), and
//  - every flow is due (all 2^20 recovering, their fabricated SYNs due
//    again at every tick: the worst case, the budget bounds the work);
// against the full walk of the table that each tick used to make.
//
//   ./build/bench/ftcp/bench_ftcp --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include <unistd.h>

extern "C" {
#include <rte_cycles.h>
#include <rte_eal.h>

#include <interlink/app.h>

#include "ftcp_glue.h"
}

namespace {

constexpr uint32_t kFlows = 1u << 20;

il_app g_app;
il_stage *g_st;

void report(benchmark::State &state, uint64_t polls, uint64_t cycles, uint64_t worst)
{
	double hz = double(rte_get_tsc_hz());
	state.counters["cycles_per_poll"] = double(cycles) / double(polls);
	state.counters["us_per_poll"] = double(cycles) / double(polls) * 1e6 / hz;
	state.counters["worst_us"] = double(worst) * 1e6 / hz;
	state.counters["flows"] = double(ftcp_bench_flows(g_st));
}

template <typename F> void run(benchmark::State &state, F one_poll)
{
	uint64_t polls = 0, cyc = 0, worst = 0;
	for (auto _ : state) {
		uint64_t dt = one_poll();
		state.SetIterationTime(double(dt) / double(rte_get_tsc_hz()));
		cyc += dt;
		worst = dt > worst ? dt : worst;
		polls++;
	}
	report(state, polls, cyc, worst);
}

// One poll (an empty burst) that runs the tick; no flow is due.
void BM_TickNothingDue(benchmark::State &state)
{
	run(state, [] { return ftcp_bench_poll_tick(g_st); });
}
BENCHMARK(BM_TickNothingDue)->UseManualTime();

// Every flow recovering with its SYN due: each tick re-sends the budget's
// worth (built, queued for tx) and moves them to the back of the list.
void BM_TickAllDue(benchmark::State &state)
{
	ftcp_bench_all_due(g_st, true);
	uint64_t syns0 = ftcp_bench_syns(g_st), polls = 0;
	run(state, [&] {
		polls++;
		return ftcp_bench_poll_tick(g_st);
	});
	state.counters["syns_per_poll"] = double(ftcp_bench_syns(g_st) - syns0) / double(polls);
	ftcp_bench_all_due(g_st, false);
}
BENCHMARK(BM_TickAllDue)->UseManualTime();

// What every tick cost before: a walk of the whole table looking at each
// flow's state (nothing due: the cheapest such walk).
void BM_FullTableWalk(benchmark::State &state)
{
	uint64_t seen = 0;
	run(state, [&] { return ftcp_bench_full_walk(g_st, &seen); });
	benchmark::DoNotOptimize(seen);
}
BENCHMARK(BM_FullTableWalk)->UseManualTime()->Iterations(20);

} // namespace

int main(int argc, char **argv)
{
	char err[512], ring[96], text[1024];
	std::string prefix = "il-bench-ftcp-" + std::to_string(getpid());
	char *eal[] = {argv[0], const_cast<char *>("--no-huge"), const_cast<char *>("--no-shconf"),
		       const_cast<char *>("-m"), const_cast<char *>("1536"),
		       const_cast<char *>("--no-pci"), const_cast<char *>("--file-prefix"),
		       const_cast<char *>(prefix.c_str()), const_cast<char *>("--lcores"),
		       const_cast<char *>("0,1"), const_cast<char *>("--no-telemetry"),
		       const_cast<char *>("--log-level"), const_cast<char *>("lib.eal:error"),
		       const_cast<char *>("--vdev"), const_cast<char *>("net_ring0"),
		       const_cast<char *>("--vdev"), const_cast<char *>("net_ring1")};
	if (rte_eal_init(int(sizeof(eal) / sizeof(eal[0])), eal) < 0) {
		std::fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	std::snprintf(ring, sizeof(ring), "/dev/shm/il-bench-ftcp-%d", int(getpid()));
	std::snprintf(text, sizeof(text),
		      "name: benchftcp\n"
		      "ports: { client: { device: net_ring0 }, server: { device: net_ring1 } }\n"
		      "groups: [ { id: 1, address: 239.1.1.1 } ]\n"
		      "stages:\n"
		      "  ft: { type: ftcp, ring: %s, max_flows: %u, linger_ms: 600000,\n"
		      "        protect: [ { address: 10.77.0.2, port: 5001 } ] }\n"
		      "pipeline: [ { lcore: 1, chains: [ { rx: client, stages: [ft], tx: server },\n"
		      "                                  { rx: server, stages: [ft], tx: client } ] } ]\n",
		      ring, kFlows);
	il_cfg *cfg = il_cfg_load_string(text, "bench", err, sizeof(err));
	if (!cfg || il_app_configure(&g_app, cfg, err, sizeof(err)) ||
	    il_app_start(&g_app, err, sizeof(err))) {
		std::fprintf(stderr, "%s\n", err);
		unlink(ring);
		return 1;
	}
	g_st = il_app_stage(&g_app, "ft");
	uint32_t flows = ftcp_bench_populate(g_st, kFlows);
	if (flows < kFlows * 0.9) {
		std::fprintf(stderr, "only %u flows fit a table of %u\n", flows, kFlows);
		unlink(ring);
		return 1;
	}
	benchmark::AddCustomContext("tsc_hz", std::to_string(rte_get_tsc_hz()));
	benchmark::AddCustomContext("max_flows", std::to_string(kFlows));
	benchmark::AddCustomContext("flows", std::to_string(flows));
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	il_app_stop(&g_app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	unlink(ring);
	return 0;
}
