// SPDX-License-Identifier: BSD-3-Clause
// Microbenchmarks of the sequencer fast path: parse, classify, stamp and
// history for bursts of 32, on a real appliance instance (EAL --no-huge,
// net_ring ports, the real pool and stages). Reports ns and TSC cycles
// per packet.
//
//   ./build/bench/bench_seq --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/frame.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "seq.h"
}

namespace {

il_app g_app;
il_stage *g_cl, *g_sq, *g_sq32, *g_squto, *g_nk;
// The history both ways, each with the default depth: frames copied into
// the arena (the default, copy_max 256) and every frame held by reference
// (copy_max 0, as before the arena).
const char *const kModes[] = {"ref", "copy"};
il_stage *g_sqmode[2];
// Each with a classify of its own, right before it, as in an appliance's
// chain: classify's fused raw path stamps raw frames in classify. With
// IL_BENCH_STAGED=1 in the environment these classify stages are
// `fused_raw: false` (the sequencer stage stamps them), for comparison.
il_stage *g_clmode[2];

const char *kConfig =
	"name: benchseq\n"
	"ports: { in: { device: net_ring0 }, out: { device: net_ring1 },\n"
	"         a: { device: net_ring6 }, b: { device: net_ring7 } }\n"
	"groups: [ { id: 1, address: 239.1.1.1 }, { id: 2, address: 239.1.1.2 },\n"
	"          { id: 3, address: 239.1.1.3, raw: { dst: 239.1.1.100, port: 9000 } } ]\n"
	"stages:\n"
	"  classify: { type: classify }\n"
	"  classify_ref: { type: classify }\n"
	"  classify_copy: { type: classify }\n"
	"  seq: { type: sequencer, history: 16384 }\n"
	"  seq32: { type: sequencer, history: 32 }\n"
	"  sequto: { type: sequencer, history: 16384 }\n"
	"  seq_ref: { type: sequencer, history: 16384, copy_max: 0 }\n"
	"  seq_copy: { type: sequencer, history: 16384 }\n"
	"  nak: { type: nak, sequencer: seq, tx: out }\n"
	"pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify, seq, nak], tx: out },\n"
	"    { rx: out, stages: [classify, seq32, sequto], tx: in },\n"
	"    { rx: a, stages: [classify_ref, seq_ref], tx: b },\n"
	"    { rx: b, stages: [classify_copy, seq_copy], tx: a } ] } ]\n"
	"pool_size: 120000\n";
// history 16384 x 3 groups in seq_ref: 49152 frames held (the others copy
// these frames), the rest of the pool cycles.

// A native DATA frame: `msgs` messages of `size` bytes, group alternating;
// with a UDP checksum or none.
rte_mbuf *make_frame(unsigned i, unsigned msgs, unsigned size, bool csum = true)
{
	rte_mbuf *m = rte_pktmbuf_alloc(g_app.pool);
	const unsigned body = msgs * (IL_MSG_HDR_LEN + size);
	auto *f = reinterpret_cast<uint8_t *>(
		rte_pktmbuf_append(m, uint16_t(IL_UDP_HDRS_LEN + IL_HDR_LEN + body)));
	il_path p{};
	p.dst_ip = 0xef010101u + (i & 1);
	p.dst_port = 7400;
	p.ttl = 8;
	il_hdr_fields h{};
	h.type = IL_T_DATA;
	h.group_id = uint16_t(1 + (i & 1));
	h.msg_count = uint16_t(msgs);
	h.sender_id = i % 8;
	h.sender_seq = i;
	uint8_t *r = il_frame_put(f, &p, 0, &h, uint16_t(body));
	for (unsigned k = 0; k < msgs; k++) {
		r = il_rec_put(r, uint16_t(size));
		std::memset(r, 0, size);
		r += size;
	}
	if (csum)
		il_udp_csum_set(f + IL_ETH_HLEN);
	return m;
}

// Raw mode: a 60-byte UDP frame (64 B on the wire) to the raw filter of
// group 3 (239.1.1.100:9000), from one of 8 sources; with a UDP checksum
// (as every outside generator fills it) or none.
rte_mbuf *make_raw(unsigned i, bool csum)
{
	il_path p{};
	p.src_ip = 0x0a000001u + (i & 7);
	p.src_port = uint16_t(5000 + (i & 7));
	p.dst_port = 9000;
	p.ttl = 16;
	il_path_mcast(&p, 0xef010164u); // 239.1.1.100
	rte_mbuf *m = rte_pktmbuf_alloc(g_app.pool);
	auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, 60));
	std::memset(il_udp_frame_put(f, &p, 0, 18), 0x5a, 18);
	if (csum)
		il_udp_csum_set(f + IL_ETH_HLEN);
	return m;
}

// Frames used round-robin, all in cache.
struct Frames {
	std::vector<rte_mbuf *> v;
	Frames(unsigned n, unsigned msgs, unsigned size)
	{
		for (unsigned i = 0; i < n; i++)
			v.push_back(make_frame(i, msgs, size));
	}
	~Frames()
	{
		for (auto *m : v)
			rte_pktmbuf_free(m);
	}
};

void report(benchmark::State &state, uint64_t pkts, uint64_t cycles)
{
	state.SetItemsProcessed(pkts);
	state.counters["cycles_per_pkt"] = pkts ? double(cycles) / double(pkts) : 0;
	state.counters["ns_per_pkt"] = benchmark::Counter(
		double(pkts), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Cycles per packet over windows of 8 bursts (256 packets, longer than a
// deferred release's period), in a histogram of 1-cycle bins: the median
// window is what the work costs when the benchmark kept its CPU (a window
// in which another process ran on this shared machine lands in the tail,
// and moves the mean, not the median).
struct BurstCycles {
	static constexpr unsigned kBins = 4096, kWindow = 8;
	std::vector<uint64_t> bin = std::vector<uint64_t>(kBins + 1);
	uint64_t windows = 0, w_cyc = 0, w_pkts = 0;
	unsigned w_bursts = 0;
	void add(uint64_t cycles, unsigned pkts)
	{
		w_cyc += cycles;
		w_pkts += pkts;
		if (++w_bursts < kWindow)
			return;
		if (w_pkts) {
			uint64_t c = w_cyc / w_pkts;
			bin[c < kBins ? c : kBins]++;
			windows++;
		}
		w_cyc = w_pkts = 0;
		w_bursts = 0;
	}
	double median() const
	{
		uint64_t seen = 0;
		for (unsigned i = 0; i <= kBins; i++)
			if ((seen += bin[i]) * 2 >= windows)
				return i;
		return 0;
	}
};

// A burst of 32 as a PMD's rx makes it (fresh mbufs, the frame bytes just
// written, so hot), copies of the templates from pos on.
bool rx_burst(benchmark::State &state, rte_mempool *pool, const std::vector<rte_mbuf *> &tmpl,
	      rte_mbuf **burst, unsigned pos)
{
	if (rte_pktmbuf_alloc_bulk(pool, burst, 32) != 0) {
		state.SkipWithError("pool empty");
		return false;
	}
	for (unsigned i = 0; i < 32; i++) {
		rte_mbuf *t = tmpl[(pos + i) % tmpl.size()];
		std::memcpy(rte_pktmbuf_append(burst[i], t->data_len), rte_pktmbuf_mtod(t, void *),
			    t->data_len);
	}
	return true;
}

// il_parse_frame alone.
void BM_Parse(benchmark::State &state)
{
	Frames fr(64, 1, 64);
	il_parsed p;
	uint64_t n = 0, cyc = 0;
	for (auto _ : state) {
		uint64_t t0 = rte_rdtsc();
		for (unsigned i = 0; i < 32; i++) {
			rte_mbuf *m = fr.v[(n + i) & 63];
			benchmark::DoNotOptimize(il_parse_frame(rte_pktmbuf_mtod(m, uint8_t *),
								m->data_len, 7400, &p));
		}
		cyc += rte_rdtsc() - t0;
		n += 32;
	}
	report(state, n, cyc);
}

// classify -> sequencer (stamp + checksum update + history push/evict)
// -> nak (pass-through check): the per-packet work of the in->out chain.
// Each burst is built like a PMD's rx does (fresh mbufs, frame bytes just
// written, so hot) and released after, like tx completion does; only the
// stage calls are timed (manual time). The history's victims are the frames
// of 32768 frames ago: cold, as in the appliance.
void BM_ParseStampHistory(benchmark::State &state)
{
	const unsigned msgs = unsigned(state.range(0));
	const bool csum = state.range(1) != 0;
	// range(2): 16384 frames of history per group (victims cold), or 32 (hot).
	il_stage *sq = state.range(2) == 32 ? g_sq32 : g_sq;
	std::vector<rte_mbuf *> tmpl;
	for (unsigned i = 0; i < 64; i++)
		tmpl.push_back(make_frame(i, msgs, 64, csum));
	rte_mbuf *burst[IL_BURST_CAP];
	uint64_t n = 0, cyc = 0, c_cl = 0, c_sq = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	BurstCycles bc;
	for (auto _ : state) {
		if (!rx_burst(state, g_app.pool, tmpl, burst, pos))
			break;
		pos += 32;
		uint64_t t0 = rte_rdtsc();
		uint16_t k = g_cl->type->process(g_cl, burst, 32);
		uint64_t t1 = rte_rdtsc();
		k = sq->type->process(sq, burst, k);
		uint64_t t2 = rte_rdtsc();
		k = g_nk->type->process(g_nk, burst, k);
		uint64_t dt = rte_rdtsc() - t0;
		c_cl += t1 - t0;
		c_sq += t2 - t1;
		cyc += dt;
		bc.add(dt, k);
		state.SetIterationTime(double(dt) / hz);
		rte_pktmbuf_free_bulk(burst, k); // tx completion; the history keeps its reference
		n += k;
	}
	report(state, n, cyc);
	state.counters["cyc_p50"] = bc.median();
	state.counters["msgs_per_frame"] = msgs;
	state.counters["classify_cyc"] = n ? double(c_cl) / double(n) : 0;
	state.counters["seq_cyc"] = n ? double(c_sq) / double(n) : 0;
	for (auto *m : tmpl)
		rte_pktmbuf_free(m);
}

// The sequencer of a group with a control stage (uto: stable_seq stamped,
// history refuses unstable frames, here all are stable), 8 senders whose
// frames come in FIFO order: range(0) 1 checks each sender's FIFO (the
// sequencer's table, docs/control.md "Sender FIFO"), 0 sends sender_seq 0
// (not checked: the uto path without the FIFO). UDP checksum present.
void BM_StampUtoFifo(benchmark::State &state)
{
	const bool fifo = state.range(0) != 0;
	std::vector<rte_mbuf *> tmpl;
	// The sequencer remembers each sender across runs of this function.
	static uint64_t next[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	// A new sender_seq per copy would break a UDP checksum: none.
	for (unsigned i = 0; i < 64; i++)
		tmpl.push_back(make_frame(i, 1, 64, false));
	rte_mbuf *burst[IL_BURST_CAP];
	uint64_t n = 0, cyc = 0, c_sq = 0, fed = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	const uint64_t drops0 = g_squto->ctr[SEQ_C_DROP_FIFO_GAP] + g_squto->ctr[SEQ_C_DROP_FIFO_DUP];
	for (auto _ : state) {
		if (rte_pktmbuf_alloc_bulk(g_app.pool, burst, 32) != 0) {
			state.SkipWithError("pool empty");
			break;
		}
		for (unsigned i = 0; i < 32; i++) {
			rte_mbuf *t = tmpl[(pos + i) & 63];
			auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(burst[i], t->data_len));
			std::memcpy(f, rte_pktmbuf_mtod(t, void *), t->data_len);
			uint32_t snd = il_get32(f + IL_UDP_HDRS_LEN + IL_OFF_SENDER_ID) & 7;
			il_put64(f + IL_UDP_HDRS_LEN + IL_OFF_SENDER_SEQ, fifo ? next[snd]++ : 0);
		}
		pos += 32;
		fed += 32;
		uint64_t t0 = rte_rdtsc();
		uint16_t k = g_cl->type->process(g_cl, burst, 32);
		uint64_t t1 = rte_rdtsc();
		k = g_squto->type->process(g_squto, burst, k);
		uint64_t t2 = rte_rdtsc();
		k = g_nk->type->process(g_nk, burst, k);
		uint64_t dt = rte_rdtsc() - t0;
		c_sq += t2 - t1;
		cyc += dt;
		state.SetIterationTime(double(dt) / hz);
		rte_pktmbuf_free_bulk(burst, k);
		n += k;
	}
	if (n != fed || g_squto->ctr[SEQ_C_DROP_FIFO_GAP] + g_squto->ctr[SEQ_C_DROP_FIFO_DUP] != drops0)
		state.SkipWithError("frames refused: the bench must feed every sender in order");
	report(state, n, cyc);
	state.counters["seq_cyc"] = n ? double(c_sq) / double(n) : 0;
	for (auto *m : tmpl)
		rte_pktmbuf_free(m);
}

// Raw mode: plain UDP to the raw filter of group 3, 60-byte frames (the
// 64-byte frames of RFC 2544), 8 sources. The sequencer inserts the
// header and a message record in front of the payload, fixes lengths and
// checksums and looks the source's FIFO sequence up. range(0): UDP
// checksum present. History of 32 frames (victims hot): the insertion's
// own cost.
void BM_StampRaw(benchmark::State &state)
{
	const bool csum = state.range(0) != 0;
	std::vector<rte_mbuf *> tmpl;
	for (unsigned i = 0; i < 64; i++)
		tmpl.push_back(make_raw(i, csum));
	rte_mbuf *burst[IL_BURST_CAP];
	uint64_t n = 0, cyc = 0, c_sq = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	BurstCycles bc;
	for (auto _ : state) {
		if (!rx_burst(state, g_app.pool, tmpl, burst, pos))
			break;
		pos += 32;
		uint64_t t0 = rte_rdtsc();
		uint16_t k = g_cl->type->process(g_cl, burst, 32);
		uint64_t t1 = rte_rdtsc();
		k = g_sq32->type->process(g_sq32, burst, k);
		uint64_t dt = rte_rdtsc() - t0;
		c_sq += rte_rdtsc() - t1;
		cyc += dt;
		bc.add(dt, k);
		state.SetIterationTime(double(dt) / hz);
		rte_pktmbuf_free_bulk(burst, k);
		n += k;
	}
	if (n == 0 || g_sq32->ctr[SEQ_C_RAW_INSERTED] == 0)
		state.SkipWithError("no raw frame was sequenced");
	report(state, n, cyc);
	state.counters["cyc_p50"] = bc.median();
	state.counters["seq_cyc"] = n ? double(c_sq) / double(n) : 0;
	for (auto *m : tmpl)
		rte_pktmbuf_free(m);
}

// The history both ways side by side (docs/benchmarks.md, "A history that
// stays in cache"): classify -> sequencer -> nak with the default depth of
// 16384 frames per group, the history full before timing starts (every
// frame stamped evicts one). range(0): 0 references (copy_max 0), 1 copies
// (the default); range(1): 0 native DATA frames of 150 B (one 64-byte
// message, two groups), 1 raw-mode 64 B UDP frames (one group); range(2):
// UDP checksum present.
void BM_History(benchmark::State &state)
{
	il_stage *sq = g_sqmode[state.range(0)], *cl = g_clmode[state.range(0)];
	// The burst comes in on the chain of cl (classify fuses per chain).
	for (unsigned c = 0; c < g_app.workers[0].n_chains; c++)
		if (g_app.workers[0].chains[c].stages[0] == cl)
			cl->io->rx_port = g_app.workers[0].chains[c].rx_port;
	const bool raw = state.range(1) != 0, csum = state.range(2) != 0;
	auto *s = static_cast<il_seq *>(sq->ctx);
	std::vector<rte_mbuf *> tmpl;
	for (unsigned i = 0; i < 64; i++)
		tmpl.push_back(raw ? make_raw(i, csum) : make_frame(i, 1, 64, csum));
	rte_mbuf *burst[IL_BURST_CAP];
	unsigned pos = 0;
	// Fill the histories of the groups this case uses (untimed).
	const unsigned fill = s->depth * (raw ? 1 : 2) / 32 + 64;
	for (unsigned b = 0; b < fill; b++) {
		if (!rx_burst(state, g_app.pool, tmpl, burst, pos))
			return;
		pos += 32;
		uint16_t k = cl->type->process(cl, burst, 32);
		k = sq->type->process(sq, burst, k);
		rte_pktmbuf_free_bulk(burst, k);
	}
	uint64_t n = 0, cyc = 0;
	const uint64_t evicted0 = sq->ctr[SEQ_C_HIST_EVICTED];
	// The appliance's own chain runner: dispatch by kind and the per-stage
	// cycle counters, as in the poll loop.
	il_chain ch{};
	ch.n_stages = 3;
	ch.stages[0] = cl;
	ch.stages[1] = sq;
	ch.stages[2] = g_nk;
	uint64_t busy0[3];
	for (unsigned i = 0; i < 3; i++)
		busy0[i] = ch.stages[i]->tsc_busy;
	const double hz = double(rte_get_tsc_hz());
	// The whole chain's and each stage's (its own cycle counter, as the
	// appliance keeps it) median 256-frame window.
	BurstCycles bc, bc_stage[3];
	for (auto _ : state) {
		if (!rx_burst(state, g_app.pool, tmpl, burst, pos))
			break;
		pos += 32;
		uint64_t busy[3];
		for (unsigned i = 0; i < 3; i++)
			busy[i] = ch.stages[i]->tsc_busy;
		uint64_t t0 = rte_rdtsc();
		uint16_t k = il_chain_stages(cl->io, &ch, burst, 32);
		uint64_t dt = rte_rdtsc() - t0;
		for (unsigned i = 0; i < 3; i++)
			bc_stage[i].add(ch.stages[i]->tsc_busy - busy[i], k);
		cyc += dt;
		bc.add(dt, k);
		state.SetIterationTime(double(dt) / hz);
		rte_pktmbuf_free_bulk(burst, k); // tx completion
		n += k;
	}
	uint64_t c_cl = cl->tsc_busy - busy0[0], c_sq = sq->tsc_busy - busy0[1],
		 c_nk = g_nk->tsc_busy - busy0[2];
	if (n == 0 || sq->ctr[SEQ_C_HIST_EVICTED] - evicted0 != n)
		state.SkipWithError("not every frame was stamped into a full history");
	report(state, n, cyc);
	state.SetLabel(kModes[state.range(0)]);
	state.counters["cyc_p50"] = bc.median();
	state.counters["classify_p50"] = bc_stage[0].median();
	state.counters["seq_p50"] = bc_stage[1].median();
	state.counters["nak_p50"] = bc_stage[2].median();
	state.counters["classify_cyc"] = n ? double(c_cl) / double(n) : 0;
	state.counters["seq_cyc"] = n ? double(c_sq) / double(n) : 0;
	state.counters["nak_cyc"] = n ? double(c_nk) / double(n) : 0;
	for (auto *m : tmpl)
		rte_pktmbuf_free(m);
}

// Raw-mode filters: plain UDP frames (not Interlink) through classify, on
// appliances with 1 and with 64 filters. range(0): filters configured;
// range(1): 1 = every frame matches one (spread over all of them), 0 = none
// does (other traffic, the common case). Only classify is timed.
il_app g_raw_app[2];
il_stage *g_raw_cl[2];

std::string raw_config(unsigned n, unsigned idx)
{
	std::string c = "name: benchraw" + std::to_string(idx) + "\n"
			"ports: { in: { device: net_ring" + std::to_string(2 + 2 * idx) +
			" }, out: { device: net_ring" + std::to_string(3 + 2 * idx) + " } }\n"
			"groups:\n";
	for (unsigned i = 1; i <= n; i++)
		c += "  - { id: " + std::to_string(i) + ", address: 239.3.0." + std::to_string(i) +
		     ", raw: { dst: 239.4.0." + std::to_string(i) + ", port: 9000 } }\n";
	c += "stages: { classify: { type: classify } }\n"
	     "pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [classify], tx: out } ] } ]\n"
	     "pool_size: 4096\n";
	return c;
}

// Plain UDP (not Interlink) from 10.0.0.1:5000 to dst:dport, 64 bytes of
// zero payload, no UDP checksum.
rte_mbuf *make_udp(il_app &app, uint32_t dst, uint16_t dport)
{
	const uint16_t plen = 64;
	il_path p{};
	p.src_ip = 0x0a000001u;
	p.dst_ip = dst;
	p.src_port = 5000;
	p.dst_port = dport;
	p.ttl = 8;
	rte_mbuf *m = rte_pktmbuf_alloc(app.pool);
	auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, IL_UDP_HDRS_LEN + plen));
	std::memset(il_udp_frame_put(f, &p, 0, plen), 0, plen);
	return m;
}

void BM_ClassifyRawFilters(benchmark::State &state)
{
	const unsigned filters = unsigned(state.range(0));
	const bool match = state.range(1) != 0;
	const unsigned idx = filters == 1 ? 0 : 1;
	il_app &app = g_raw_app[idx];
	il_stage *cl = g_raw_cl[idx];
	std::vector<rte_mbuf *> tmpl;
	for (unsigned i = 0; i < 64; i++)
		tmpl.push_back(match ? make_udp(app, 0xef040001u + i % filters, 9000)
				     : make_udp(app, 0xef050001u + i, 9000));
	rte_mbuf *burst[IL_BURST_CAP];
	uint64_t n = 0, cyc = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	unsigned c_raw = 0;
	while (std::strcmp(cl->type->counter_names[c_raw], "raw_matched") != 0)
		c_raw++;
	const uint64_t matched0 = cl->ctr[c_raw];
	for (auto _ : state) {
		if (!rx_burst(state, app.pool, tmpl, burst, pos))
			break;
		pos += 32;
		uint64_t t0 = rte_rdtsc();
		uint16_t k = cl->type->process(cl, burst, 32);
		uint64_t dt = rte_rdtsc() - t0;
		cyc += dt;
		state.SetIterationTime(double(dt) / hz);
		rte_pktmbuf_free_bulk(burst, k);
		n += k;
	}
	if ((cl->ctr[c_raw] - matched0 == n) != match)
		state.SkipWithError("frames did not match (or missed) the filters as intended");
	report(state, n, cyc);
	for (auto *m : tmpl)
		rte_pktmbuf_free(m);
}

BENCHMARK(BM_Parse);
// (messages per frame, UDP checksum present, history frames per group)
BENCHMARK(BM_ParseStampHistory)
	->Args({1, 1, 16384})->Args({1, 0, 16384})->Args({8, 1, 16384})
	->Args({1, 1, 32})->Args({1, 0, 32})
	->UseManualTime();
// (history mode, raw, UDP checksum)
BENCHMARK(BM_History)
	->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})
	->UseManualTime();
BENCHMARK(BM_StampUtoFifo)->Arg(0)->Arg(1)->UseManualTime();
BENCHMARK(BM_StampRaw)->Arg(0)->Arg(1)->UseManualTime();
// (raw filters configured, frames match one)
BENCHMARK(BM_ClassifyRawFilters)
	->Args({1, 0})->Args({1, 1})->Args({64, 0})->Args({64, 1})
	->UseManualTime();

} // namespace

int main(int argc, char **argv)
{
	char err[512];
	const char *eal[] = {argv[0], "--no-huge", "-m", "1024", "--no-pci", "--lcores", "0,1",
			     "--file-prefix", "il-bench-seq", "--log-level", "lib.eal:error",
			     "--vdev", "net_ring0", "--vdev", "net_ring1", "--vdev", "net_ring2",
			     "--vdev", "net_ring3", "--vdev", "net_ring4", "--vdev", "net_ring5",
			     "--vdev", "net_ring6", "--vdev", "net_ring7", nullptr};
	if (rte_eal_init(27, const_cast<char **>(eal)) < 0) {
		std::fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	std::string config = kConfig;
	if (std::getenv("IL_BENCH_STAGED") != nullptr)
		for (const char *st : {"classify_ref", "classify_copy"}) {
			const std::string from = std::string(st) + ": { type: classify }";
			config.replace(config.find(from), from.size(),
				       std::string(st) + ": { type: classify, fused_raw: false }");
		}
	il_cfg *cfg = il_cfg_load_string(config.c_str(), "bench", err, sizeof(err));
	if (!cfg || il_app_configure(&g_app, cfg, err, sizeof(err)) ||
	    il_app_start(&g_app, err, sizeof(err))) {
		std::fprintf(stderr, "%s\n", err);
		return 1;
	}
	g_cl = il_app_stage(&g_app, "classify");
	g_sq = il_app_stage(&g_app, "seq");
	g_sq32 = il_app_stage(&g_app, "seq32");
	g_squto = il_app_stage(&g_app, "sequto");
	{
		// What a control stage's bind does, and every frame stable at once.
		auto *s = static_cast<il_seq *>(g_squto->ctx);
		s->uto = true;
		for (unsigned g = 0; g < g_app.n_groups; g++)
			s->groups[g].stable = UINT64_MAX / 2;
	}
	g_nk = il_app_stage(&g_app, "nak");
	for (unsigned i = 0; i < 2; i++) {
		g_sqmode[i] = il_app_stage(&g_app, (std::string("seq_") + kModes[i]).c_str());
		g_clmode[i] = il_app_stage(&g_app, (std::string("classify_") + kModes[i]).c_str());
	}
	il_cfg *raw_cfg[2];
	for (unsigned i = 0; i < 2; i++) {
		raw_cfg[i] = il_cfg_load_string(raw_config(i ? 64 : 1, i).c_str(), "bench", err,
						sizeof(err));
		if (!raw_cfg[i] || il_app_configure(&g_raw_app[i], raw_cfg[i], err, sizeof(err)) ||
		    il_app_start(&g_raw_app[i], err, sizeof(err))) {
			std::fprintf(stderr, "%s\n", err);
			return 1;
		}
		g_raw_cl[i] = il_app_stage(&g_raw_app[i], "classify");
	}
	benchmark::AddCustomContext("tsc_hz", std::to_string(rte_get_tsc_hz()));
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	for (unsigned i = 0; i < 2; i++) {
		il_app_stop(&g_raw_app[i]);
		il_cfg_free(raw_cfg[i]);
	}
	il_app_stop(&g_app);
	rte_eal_cleanup();
	return 0;
}
