// SPDX-License-Identifier: BSD-3-Clause
//
// Shared-memory rings: nanoseconds per message for an enqueue plus a
// dequeue, by batch size, on the rings the data plane shares with the
// control process (the control channel's 64-byte messages, the FT-TCP
// logger's records and its 32-byte down messages).
//
//  same_thread: one thread enqueues a batch, then dequeues it: the cost
//               of the ring operations themselves, caches warm.
//  two_threads: a producer thread and a consumer thread (run it on two
//               cores): what crossing cores adds (index and slot cache
//               lines moving between them).
//
// Run: taskset -c 0,1 build/bench/shm/bench_shm_ring
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "ring_ops.h"

namespace {

void set_counters(benchmark::State &state, uint64_t msgs)
{
	state.SetItemsProcessed((int64_t)msgs);
	state.counters["ns_per_msg"] = benchmark::Counter(
		(double)msgs, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_same_thread(benchmark::State &state, ring_kind kind)
{
	const unsigned batch = (unsigned)state.range(0);
	const unsigned plen = (unsigned)state.range(1);
	ring_bench *b = rb_open(kind);

	if (b == nullptr) {
		state.SkipWithError("cannot open the ring");
		return;
	}
	for (auto _ : state) {
		unsigned sent = rb_send(b, batch, plen);
		unsigned got = rb_recv(b, batch);

		if (sent != batch || got != batch) {
			state.SkipWithError("ring lost or refused messages");
			break;
		}
	}
	set_counters(state, state.iterations() * batch);
	rb_close(b);
}

void BM_two_threads(benchmark::State &state, ring_kind kind)
{
	const unsigned batch = (unsigned)state.range(0);
	const unsigned plen = (unsigned)state.range(1);
	ring_bench *b = rb_open(kind);
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> consumed{0};
	uint64_t produced = 0;

	if (b == nullptr) {
		state.SkipWithError("cannot open the ring");
		return;
	}
	std::thread consumer([&] {
		uint64_t got = 0;

		while (!stop.load(std::memory_order_relaxed))
			got += rb_recv(b, batch);
		consumed.store(got);
	});
	for (auto _ : state) {
		unsigned sent = 0;

		while (sent < batch)
			sent += rb_send(b, batch - sent, plen);
		produced += batch;
	}
	stop.store(true);
	consumer.join();
	// Whatever the consumer had not taken when the clock stopped.
	uint64_t got = consumed.load();
	while (got < produced)
		got += rb_recv(b, batch);
	set_counters(state, produced);
	rb_close(b);
}

} // namespace

BENCHMARK_CAPTURE(BM_same_thread, chan, RB_CHAN)
	->ArgNames({"batch", "payload"})
	->Args({1, 0})->Args({8, 0})->Args({32, 0})->Args({64, 0});
BENCHMARK_CAPTURE(BM_same_thread, ftcp_up, RB_FTCP_UP)
	->ArgNames({"batch", "payload"})
	->Args({1, 0})->Args({8, 0})->Args({32, 0})->Args({64, 0})
	->Args({32, 1448});
BENCHMARK_CAPTURE(BM_same_thread, ftcp_down, RB_FTCP_DOWN)
	->ArgNames({"batch", "payload"})
	->Args({1, 0})->Args({8, 0})->Args({32, 0});
BENCHMARK_CAPTURE(BM_two_threads, chan, RB_CHAN)
	->ArgNames({"batch", "payload"})
	->Args({8, 0})->Args({32, 0})->UseRealTime();
BENCHMARK_CAPTURE(BM_two_threads, ftcp_up, RB_FTCP_UP)
	->ArgNames({"batch", "payload"})
	->Args({32, 0})->Args({32, 1448})->UseRealTime();

BENCHMARK_MAIN();
