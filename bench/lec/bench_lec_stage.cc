// SPDX-License-Identifier: BSD-3-Clause
// The `lec` stage (appliance-side LEC, docs/lec.md) on a real appliance
// instance (EAL --no-huge, net_ring ports, the real pool and stages):
// ns and TSC cycles per data packet of the stage alone, beside those of
// classify + sequencer on the same bursts (what it adds to the chain that
// forwards), at rate-of-fire (8, 5).
//
// Members 1..64; g groups of 10 members each drawn at random (a fixed
// seed), so the stage, which sees every group, has the regions of 64
// members over g groups. Bursts of 32 stamped DATA frames of one message
// of `size` bytes, groups drawn at random; repairs are freed after each
// burst (tx completion, not timed).
//
//   ./build/bench/lec/bench_lec_stage --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctime>
#include <cstdio>
#include <unistd.h>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/frame.h>
#include <interlink/lec.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>
}

namespace {

// This thread's CPU time: on the shared machine the lcore is descheduled
// now and then, and the TSC counts that too.
uint64_t cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// What one reading of cpu_ns() adds to an interval it bounds (a system
// call here: about 1 us on the shared VM), measured at start and taken off.
uint64_t g_clock_ns;

void calibrate_clock()
{
	uint64_t best = UINT64_MAX;
	for (int k = 0; k < 5; k++) {
		uint64_t t0 = cpu_ns();
		for (int i = 0; i < 1000; i++)
			benchmark::DoNotOptimize(cpu_ns());
		uint64_t d = (cpu_ns() - t0) / 1000;
		best = d < best ? d : best;
	}
	g_clock_ns = best;
}

constexpr unsigned kMembers = 64, kGroupSize = 10, kMaxGroups = 128;
const unsigned kLayouts[] = { 1, 16, 128 };

il_app g_app;
il_stage *g_cl, *g_sq;
il_stage *g_lec[3][2]; // [layout][0: whole copies, 1: headers chained to one message]
std::string g_sock;
std::vector<uint32_t> g_members[kMaxGroups + 1];

std::string config()
{
	// A memif port (no peer: nothing is sent) takes chained mbufs, so a stage
	// on it may send copies of a repair as headers chained to one message.
	std::string c = "name: benchlec\n"
			"ports: { in: { device: net_ring0 }, out: { device: net_ring1 },\n"
			"         mif: { device: \"net_memif0,role=server,socket=" + g_sock + "\" } }\n"
			"groups: [";
	for (unsigned g = 1; g <= kMaxGroups; g++) {
		char b[64];
		snprintf(b, sizeof(b), "%s{ id: %u, address: 239.2.%u.%u }", g > 1 ? ", " : "", g,
			 g / 250, g % 250 + 1);
		c += b;
	}
	c += "]\nstages:\n"
	     "  classify: { type: classify }\n"
	     "  seq: { type: sequencer, history: 256 }\n";
	std::string chain = "classify, seq";
	for (unsigned i = 0; i < 3; i++)
		for (unsigned f = 0; f < 2; f++) {
			char b[200];
			snprintf(b, sizeof(b),
				 "  lec%u%c: { type: lec, tx: %s, fanout: %s, r: 8, c: 5, max_bins: 4096, "
				 "max_links: 65536, groups: [",
				 kLayouts[i], f ? 'r' : 'c', f ? "mif" : "in", f ? "reference" : "copy");
			c += b;
			for (unsigned g = 1; g <= kLayouts[i]; g++)
				c += (g > 1 ? ", " : "") + std::to_string(g);
			c += "] }\n";
			chain += ", lec" + std::to_string(kLayouts[i]) + (f ? "r" : "c");
		}
	c += "pipeline: [ { lcore: 1, chains: [ { rx: in, stages: [" + chain +
	     "], tx: out } ] } ]\n"
	     "pool_size: 100000\n";
	return c;
}

uint8_t *msg_frame(rte_mbuf *m, uint32_t src, uint16_t group, uint8_t type, uint32_t sender,
		   unsigned body)
{
	auto *f = reinterpret_cast<uint8_t *>(
		rte_pktmbuf_append(m, uint16_t(IL_UDP_HDRS_LEN + IL_HDR_LEN + body)));
	il_path p{};
	p.src_mac[0] = 2;
	p.src_mac[5] = uint8_t(src);
	p.src_ip = src;
	il_path_mcast(&p, 0xef020000u + group);
	p.src_port = 5000;
	p.dst_port = 7400;
	p.ttl = 8;
	il_hdr_fields h{};
	h.type = type;
	h.group_id = group;
	h.sender_id = sender;
	return il_frame_put(f, &p, 0, &h, uint16_t(body));
}

// Views (VIEW frames) and members' addresses (HEARTBEATs) into every lec stage.
void setup_views()
{
	std::mt19937 rng(7);
	std::vector<rte_mbuf *> v;

	for (unsigned g = 1; g <= kMaxGroups; g++) {
		std::vector<uint32_t> all;
		for (uint32_t m = 1; m <= kMembers; m++)
			all.push_back(m);
		std::shuffle(all.begin(), all.end(), rng);
		g_members[g].assign(all.begin(), all.begin() + kGroupSize);
		rte_mbuf *m = rte_pktmbuf_alloc(g_app.pool);
		uint8_t *b = msg_frame(m, 0xc0000201u, uint16_t(g), IL_T_VIEW, 0,
				       il_view_len(kGroupSize, 0));
		b = il_view_put(b, 1, kGroupSize, 0);
		for (uint32_t id : g_members[g])
			b = il_view_member_put(b, id, IL_ROLE_SENDER | IL_ROLE_RECEIVER);
		v.push_back(m);
	}
	for (uint32_t id = 1; id <= kMembers; id++) {
		rte_mbuf *m = rte_pktmbuf_alloc(g_app.pool);
		il_member_put(msg_frame(m, 0x0a000100u + id, 1, IL_T_HEARTBEAT, id,
					IL_MEMBER_MSG_LEN),
			      IL_ROLE_RECEIVER, 1);
		v.push_back(m);
	}
	for (size_t i = 0; i < v.size(); i += 32) {
		rte_mbuf *burst[IL_BURST_CAP];
		uint16_t n = uint16_t(std::min<size_t>(32, v.size() - i));
		std::memcpy(burst, &v[i], n * sizeof(burst[0]));
		n = g_cl->type->process(g_cl, burst, n);
		n = g_sq->type->process(g_sq, burst, n);
		for (auto &l : g_lec)
			for (auto *s : l)
				n = s->type->process(s, burst, n);
		rte_pktmbuf_free_bulk(burst, n);
	}
	il_lcore_io *io = g_lec[0][0]->io;
	for (uint16_t i = 0; i < io->n_defer; i++)
		rte_pktmbuf_free(io->defer[i]);
	io->n_defer = 0;
}

uint64_t counter(const il_stage *st, const char *name)
{
	for (unsigned i = 0; i < st->type->n_counters; i++)
		if (!strcmp(st->type->counter_names[i], name))
			return st->ctr[i];
	return 0;
}

struct Seen {
	uint64_t xor_ops = 0, copy_ops = 0, bin_adds = 0, copies = 0, repairs = 0;
	void take(const il_stage *st)
	{
		// the core's counters, through the stage's state
		struct Sink : il_state_sink {
			Seen *s;
		} sink;
		sink.s = this;
		sink.put = [](il_state_sink *k, int group, const char *key, uint64_t val) {
			Seen *s = static_cast<Sink *>(k)->s;
			if (group >= 0)
				return;
			if (!strcmp(key, "xor_ops"))
				s->xor_ops = val;
			else if (!strcmp(key, "copy_ops"))
				s->copy_ops = val;
			else if (!strcmp(key, "bin_adds"))
				s->bin_adds = val;
		};
		st->type->state(st, &sink);
		copies = counter(st, "repair_copies");
		repairs = counter(st, "repairs");
	}
};

// range(0): groups of the layout (index into kLayouts); range(1): message bytes;
// range(2): copies of a repair whole (0) or headers chained to one message (1).
void BM_LecStage(benchmark::State &state)
{
	const unsigned li = unsigned(state.range(0)), size = unsigned(state.range(1));
	const unsigned groups = kLayouts[li];
	il_stage *lec = g_lec[li][state.range(2)];
	std::mt19937 rng(11);
	std::vector<std::vector<uint8_t>> tmpl;
	for (unsigned i = 0; i < 256; i++) {
		uint16_t g = uint16_t(1 + rng() % groups);
		rte_mbuf *m = rte_pktmbuf_alloc(g_app.pool);
		uint8_t *b = msg_frame(m, 0x0a000100u + g_members[g][0], g, IL_T_DATA,
				       g_members[g][0], IL_MSG_HDR_LEN + size);
		il_put16(b - IL_HDR_LEN + IL_OFF_MSG_COUNT, 1);
		b = il_rec_put(b, uint16_t(size));
		for (unsigned k = 0; k < size; k++)
			b[k] = uint8_t(i * 7 + k);
		tmpl.emplace_back(rte_pktmbuf_mtod(m, uint8_t *),
				  rte_pktmbuf_mtod(m, uint8_t *) + m->data_len);
		rte_pktmbuf_free(m);
	}
	Seen s0, s1;
	s0.take(lec);
	const uint64_t prot0 = counter(lec, "protected");
	il_lcore_io *io = lec->io;
	rte_mbuf *burst[IL_BURST_CAP];
	uint64_t n = 0, c_lec = 0, c_chain = 0, ns_lec = 0, ns_chain = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	for (auto _ : state) {
		if (rte_pktmbuf_alloc_bulk(g_app.pool, burst, 32) != 0) {
			state.SkipWithError("pool empty");
			break;
		}
		for (unsigned i = 0; i < 32; i++) {
			const auto &t = tmpl[(pos + i) & 255];
			std::memcpy(rte_pktmbuf_append(burst[i], uint16_t(t.size())), t.data(),
				    t.size());
		}
		pos += 32;
		uint64_t u0 = cpu_ns(), t0 = rte_rdtsc();
		uint16_t k = g_cl->type->process(g_cl, burst, 32);
		k = g_sq->type->process(g_sq, burst, k);
		uint64_t t1 = rte_rdtsc(), u1 = cpu_ns(), t1b = rte_rdtsc();
		k = lec->type->process(lec, burst, k);
		uint64_t t2 = rte_rdtsc(), u2 = cpu_ns();
		c_chain += t1 - t0;
		c_lec += t2 - t1b;
		ns_chain += u1 - u0 > g_clock_ns ? u1 - u0 - g_clock_ns : 0;
		ns_lec += u2 - u1 > g_clock_ns ? u2 - u1 - g_clock_ns : 0;
		state.SetIterationTime(double(t2 - t1b) / hz);
		rte_pktmbuf_free_bulk(burst, k);
		for (uint16_t i = 0; i < io->n_defer; i++) // tx completion of the repairs
			rte_pktmbuf_free(io->defer[i]);
		io->n_defer = 0;
		n += k;
	}
	s1.take(lec);
	const double prot = double(counter(lec, "protected") - prot0);
	state.SetItemsProcessed(int64_t(n));
	state.SetBytesProcessed(int64_t(n * size));
	state.counters["lec_cyc"] = n ? double(c_lec) / double(n) : 0;
	state.counters["chain_cyc"] = n ? double(c_chain) / double(n) : 0;
	// thread CPU time per packet, the clock's own cost per burst taken off
	state.counters["lec_cpu_ns"] = n ? double(ns_lec) / double(n) : 0;
	state.counters["chain_cpu_ns"] = n ? double(ns_chain) / double(n) : 0;
	state.counters["ns_per_pkt"] = benchmark::Counter(
		double(n), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
	if (prot > 0) {
		state.counters["xor_per_pkt"] =
			double(s1.xor_ops - s0.xor_ops + s1.copy_ops - s0.copy_ops) / prot;
		state.counters["bins_per_pkt"] = double(s1.bin_adds - s0.bin_adds) / prot;
		state.counters["copies_per_pkt"] = double(s1.copies - s0.copies) / prot;
		state.counters["repairs_per_pkt"] = double(s1.repairs - s0.repairs) / prot;
	}
	state.counters["groups"] = groups;
	if (prot < double(n))
		state.SkipWithError("frames went unprotected: views or addresses missing");
}

BENCHMARK(BM_LecStage)
	->ArgsProduct({ { 0, 1, 2 }, { 64, 1024 }, { 0, 1 } })
	->ArgNames({ "layout", "size", "chained" })
	->UseManualTime()
	->Unit(benchmark::kNanosecond);

} // namespace

int main(int argc, char **argv)
{
	char err[512];
	g_sock = "/tmp/il-bench-lec-stage-" + std::to_string(getpid()) + ".sock";
	char *eal[] = { argv[0], (char *)"--no-huge", (char *)"-m", (char *)"768",
			(char *)"--no-pci", (char *)"--lcores", (char *)"0,1", (char *)"--file-prefix",
			(char *)"il-bench-lec-stage", (char *)"--log-level", (char *)"lib.eal:error",
			(char *)"--vdev", (char *)"net_ring0", (char *)"--vdev", (char *)"net_ring1",
			(char *)"--vdev", nullptr, nullptr };
	std::string mif = "net_memif0,role=server,socket=" + g_sock;
	eal[16] = const_cast<char *>(mif.c_str());
	if (rte_eal_init(17, eal) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	std::string text = config();
	il_cfg *cfg = il_cfg_load_string(text.c_str(), "bench", err, sizeof(err));
	if (!cfg || il_app_configure(&g_app, cfg, err, sizeof(err)) ||
	    il_app_start(&g_app, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	g_cl = il_app_stage(&g_app, "classify");
	g_sq = il_app_stage(&g_app, "seq");
	for (unsigned i = 0; i < 3; i++)
		for (unsigned f = 0; f < 2; f++)
			g_lec[i][f] = il_app_stage(
				&g_app, ("lec" + std::to_string(kLayouts[i]) + (f ? "r" : "c")).c_str());
	setup_views();
	calibrate_clock();
	benchmark::AddCustomContext("cpu_clock_ns", std::to_string(g_clock_ns));
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	il_app_stop(&g_app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	unlink(g_sock.c_str());
	return 0;
}
