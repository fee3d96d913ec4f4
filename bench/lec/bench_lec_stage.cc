// SPDX-License-Identifier: BSD-3-Clause
// The `lec` stage (appliance-side LEC, docs/lec.md) on a real appliance
// instance (EAL --no-huge, net_ring ports, the real pool and stages), at
// rate-of-fire (8, 5).
//
// Members 1..64; g groups of 10 members each drawn at random (a fixed
// seed), so the stage, which sees every group, has the regions of 64
// members over g groups. Bursts of 32 stamped DATA frames of one message
// of `size` bytes, groups drawn at random.
//
//   BM_LecStage/layout/size/chained/plan
//       the stage alone: TSC cycles per data packet (the median burst:
//       a burst in which the lcore was descheduled does not count) and
//       thread CPU ns per packet, beside classify + sequencer on the same
//       bursts. Repairs are freed after each burst (tx completion, not
//       timed). chained: copies of a repair whole (0, tx on a net_ring) or
//       as headers chained to one message (1, tx on memif). plan: bins of
//       Algorithm 1 at one node's rate, (8, 5) (0), one bin per group at
//       that rate (1), one bin per group at the peers' rate (2).
//   BM_Forward/layout/variant
//       the worker's whole loop for a chain as the appliance runs it: rx
//       burst, classify, sequencer, [lec], tx burst, the repairs' tx: the
//       forwarding rate of one core (Mpps from the median burst). lec 0:
//       no lec stage; 1, 2, 3: the lec stage of plan 0, 1, 2 (chained
//       copies on memif). Run with
//       --benchmark_enable_random_interleaving=true and repetitions so
//       that with and without lec alternate in the same run.
//
// LEC_BENCH_TO=members|group sets every lec stage's repairs_to (unset: the
// stage's default, group): with group, a repair for every receiver of its
// group leaves once, to the group's address (on "out"), instead of a copy per
// receiver. copies_per_pkt counts frames sent either way.
//
// LEC_BENCH_STRIDE=true|false sets every lec stage's layer_stride (unset: the
// stage's default, true).
//
// LEC_BENCH_C=<c> in the environment sets every lec stage's c (default 5):
// c = 0.01 builds almost no repair (the per-packet floor), c = 1 one copy per
// repair (the fixed cost of a repair), c = 5 the target's (8, 5).
//
//   BM_LecRepairLcore/layout
//       the defaults (one bin per group at the peers' rate, headers chained)
//       with repair_lcore (docs/lec.md, "A repair lcore"): the stage's work on
//       the chain lcore (the bench thread: a reference and a ring slot per
//       frame, the repairs handed back sent) in TSC cycles per packet of the
//       median burst, and the repair lcore's (a second CPU: bins, XOR,
//       repairs' frames) from its own busy cycles over its frames. After each
//       burst the bench waits (untimed) for the repair lcore to take it all,
//       so the chain lcore is timed with a ring that has room: what it costs
//       while LEC keeps up. svc_mpps is what the repair lcore sustains.
//       Needs two CPUs (without, it reports an error and times nothing).
//   BM_Forward/layout/lec:4 is BM_Forward with that stage.
//
//   ./build/bench/lec/bench_lec_stage --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <sched.h>
#include <cstdio>
#include <unistd.h>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include <interlink/app.h>
#include <interlink/frame.h>
#include <interlink/lec.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>
}

#ifndef LEC_BENCH_PLANS
#define LEC_BENCH_PLANS 3 /* 1 before the stage had `plan` and `rate` keys */
#endif

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
// call here: about 0.4 us on the shared VM), measured at start and taken off.
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

constexpr unsigned kMembers = 64, kGroupSize = 10, kMaxGroups = 128, kBurst = 32;
const unsigned kLayouts[] = { 1, 16, 128 };
// plan and rate of each variant: Algorithm 1 at one node's rate (c per message), one bin
// per group at one node's rate, one bin per group at the peers' rate (each member gets
// min(c, |G| - 1) repairs of each message, as from its peers: |G| min(c, |G| - 1) targets)
const char *const kPlanNames[] = { "regions", "groups", "groupspeers" };
const char *const kPlanKeys[] = { "plan: regions, rate: node", "plan: groups, rate: node",
				  "plan: groups, rate: peers" };

il_app g_app;
il_stage *g_cl, *g_sq;
il_stage *g_lec[3][2][3]; // [layout][0: whole copies, 1: headers chained][variant]
il_stage *g_fwd[3][3];    // [layout][variant]: the stages BM_Forward's chains run
il_stage *g_off[3];       // [layout]: the defaults with repair_lcore 2 + layout
bool g_two_cpus;
uint16_t g_port_in, g_port_out, g_port_rep, g_out_idx;
std::string g_sock;
std::vector<uint32_t> g_members[kMaxGroups + 1];

std::string lec_stage(const std::string &name, unsigned layout, const char *tx, bool ref,
		      unsigned plan)
{
	char b[256];
	snprintf(b, sizeof(b),
		 "  %s: { type: lec, tx: %s, fanout: %s, r: 8, c: %s, max_bins: 4096, "
		 "max_links: 65536, ",
		 name.c_str(), tx, ref ? "reference" : "copy",
		 getenv("LEC_BENCH_C") ? getenv("LEC_BENCH_C") : "5");
	std::string c = b;
	if (getenv("LEC_BENCH_TO"))
		c += std::string("repairs_to: ") + getenv("LEC_BENCH_TO") + ", ";
	if (getenv("LEC_BENCH_STRIDE"))
		c += std::string("layer_stride: ") + getenv("LEC_BENCH_STRIDE") + ", ";
	if (LEC_BENCH_PLANS > 1)
		c += std::string(kPlanKeys[plan]) + ", ";
	c += "groups: [";
	for (unsigned g = 1; g <= kLayouts[layout]; g++)
		c += (g > 1 ? ", " : "") + std::to_string(g);
	return c + "] }\n";
}

std::string config()
{
	// A memif port (no peer: nothing is sent) takes chained mbufs, so a stage
	// on it may send copies of a repair as headers chained to one message.
	std::string c = "name: benchlec\n"
			"ports: { in: { device: net_ring0 }, out: { device: net_ring1 },\n"
			"         rep: { device: net_ring2 }, off: { device: net_ring3 },\n"
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
	// (the worker is not launched: the chains only place the stages on lcore 1,
	// at most 8 to a chain)
	std::string chains = "{ rx: in, stages: [classify, seq], tx: out }";
	for (unsigned i = 0; i < 3; i++) {
		std::string chain;
		for (unsigned f = 0; f < 2; f++)
			for (unsigned p = 0; p < LEC_BENCH_PLANS; p++) {
				std::string n = "lec" + std::to_string(kLayouts[i]) + (f ? "r" : "c") +
						kPlanNames[p];
				c += lec_stage(n, i, f ? "mif" : "rep", f, p);
				chain += (chain.empty() ? "" : ", ") + n;
			}
		c += "  cl" + std::to_string(i) + ": { type: classify }\n";
		chains += ", { rx: " + std::string(i == 0 ? "rep" : i == 1 ? "out" : "mif") +
			  ", stages: [cl" + std::to_string(i) + ", " + chain + "], tx: out }";
	}
	// the defaults with a repair lcore each (launched by the benchmark that times it)
	std::string off;
	for (unsigned i = 0; i < 3; i++) {
		std::string n = "off" + std::to_string(kLayouts[i]);
		std::string st = lec_stage(n, i, "mif", true, 2);
		st.insert(st.size() - 3, ", repair_lcore: " + std::to_string(2 + i));
		c += st;
		off += ", " + n;
	}
	c += "  cl3: { type: classify }\n";
	chains += ", { rx: off, stages: [cl3" + off + "], tx: out }";
	c += "pipeline: [ { lcore: 1, chains: [" + chains + "] } ]\n"
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

void free_emitted()
{
	il_lcore_io *io = g_cl->io;
	for (uint16_t i = 0; i < io->n_defer; i++) // tx completion of the repairs
		rte_pktmbuf_free(io->defer[i]);
	io->n_defer = 0;
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
	for (size_t i = 0; i < v.size(); i += kBurst) {
		rte_mbuf *burst[IL_BURST_CAP];
		uint16_t n = uint16_t(std::min<size_t>(kBurst, v.size() - i));
		std::memcpy(burst, &v[i], n * sizeof(burst[0]));
		n = g_cl->type->process(g_cl, burst, n);
		n = g_sq->type->process(g_sq, burst, n);
		for (auto &l : g_lec)
			for (auto &f : l)
				for (unsigned p = 0; p < LEC_BENCH_PLANS; p++)
					n = f[p]->type->process(f[p], burst, n);
		for (il_stage *o : g_off)
			n = o->type->process(o, burst, n);
		rte_pktmbuf_free_bulk(burst, n);
	}
	// the repair lcores are not running yet: their work on this thread
	for (il_stage *o : g_off)
		while (o->type->service(o))
			;
	free_emitted();
}


uint64_t counter(const il_stage *st, const char *name)
{
	for (unsigned i = 0; i < st->type->n_counters; i++)
		if (!strcmp(st->type->counter_names[i], name))
			return st->ctr[i];
	return 0;
}

struct Seen {
	uint64_t xor_ops = 0, copy_ops = 0, bin_adds = 0, holds = 0, copies = 0, repairs = 0;
	uint64_t svc_frames = 0, svc_busy = 0; // the repair lcore's
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
			else if (!strcmp(key, "holds"))
				s->holds = val;
			else if (!strcmp(key, "repair_lcore_frames"))
				s->svc_frames = val;
			else if (!strcmp(key, "repair_lcore_busy_cycles"))
				s->svc_busy = val;
		};
		st->type->state(st, &sink);
		copies = counter(st, "repair_copies") + counter(st, "repairs_to_group");
		repairs = counter(st, "repairs");
	}
};

// A stage's repair lcore, running while a benchmark times it.
std::atomic<bool> g_svc_stop;

int svc_loop(void *arg)
{
	auto *st = static_cast<il_stage *>(arg);
	while (!g_svc_stop.load(std::memory_order_relaxed))
		st->type->service(st);
	return 0;
}

struct Service {
	il_stage *st;
	explicit Service(il_stage *s) : st(s)
	{
		g_svc_stop = false;
		rte_eal_remote_launch(svc_loop, st, st->service_lcore);
	}
	~Service()
	{
		g_svc_stop = true;
		rte_eal_wait_lcore(st->service_lcore);
	}
};

// LEC_BENCH_SATURATE=1: BM_LecRepairLcore does not wait for the repair lcore
// between bursts, so it runs flat out (a profile of its work: perf record -C
// on its CPU) and what it cannot take is counted, not timed.
bool saturate()
{
	return getenv("LEC_BENCH_SATURATE") && getenv("LEC_BENCH_SATURATE")[0] == '1';
}

// Until the repair lcore has taken every frame handed to it (untimed).
void wait_taken(il_stage *st)
{
	const uint64_t want = counter(st, "handed_over");
	for (;;) {
		Seen s;
		s.take(st);
		if (s.svc_frames >= want)
			return;
		rte_delay_us_block(20); // not a line of its state read more often than this
	}
}

// 256 frame templates of one message of `size` bytes, groups drawn at random.
std::vector<std::vector<uint8_t>> templates(unsigned groups, unsigned size)
{
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
	return tmpl;
}

bool fill_burst(benchmark::State &state, rte_mbuf **burst,
		const std::vector<std::vector<uint8_t>> &tmpl, unsigned &pos)
{
	if (rte_pktmbuf_alloc_bulk(g_app.pool, burst, kBurst) != 0) {
		state.SkipWithError("pool empty");
		return false;
	}
	for (unsigned i = 0; i < kBurst; i++) {
		const auto &t = tmpl[(pos + i) & 255];
		std::memcpy(rte_pktmbuf_append(burst[i], uint16_t(t.size())), t.data(), t.size());
	}
	pos += kBurst;
	return true;
}

double median(std::vector<uint64_t> &v)
{
	if (v.empty())
		return 0;
	std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
	return double(v[v.size() / 2]);
}

void report_work(benchmark::State &state, il_stage *lec, const Seen &s0, uint64_t prot0)
{
	Seen s1;
	s1.take(lec);
	const double prot = double(counter(lec, "protected") - prot0);
	if (prot > 0) {
		state.counters["xor_per_pkt"] =
			double(s1.xor_ops - s0.xor_ops + s1.copy_ops - s0.copy_ops) / prot;
		state.counters["bins_per_pkt"] = double(s1.bin_adds - s0.bin_adds) / prot;
		state.counters["holds_per_pkt"] = double(s1.holds - s0.holds) / prot;
		state.counters["copies_per_pkt"] = double(s1.copies - s0.copies) / prot;
		state.counters["repairs_per_pkt"] = double(s1.repairs - s0.repairs) / prot;
	}
}

// range(0): groups of the layout (index into kLayouts); range(1): message bytes;
// range(2): copies of a repair whole (0) or headers chained to one message (1);
// range(3): plan (0 regions, 1 groups).
void BM_LecStage(benchmark::State &state)
{
	const unsigned li = unsigned(state.range(0)), size = unsigned(state.range(1));
	if (unsigned(state.range(3)) >= LEC_BENCH_PLANS) {
		state.SkipWithError("no such plan in this build");
		for (auto _ : state)
			;
		return;
	}
	il_stage *lec = g_lec[li][state.range(2)][state.range(3)];
	const auto tmpl = templates(kLayouts[li], size);
	Seen s0;
	s0.take(lec);
	const uint64_t prot0 = counter(lec, "protected");
	rte_mbuf *burst[IL_BURST_CAP];
	std::vector<uint64_t> cyc_lec, cyc_chain;
	uint64_t n = 0, ns_lec = 0, ns_chain = 0, sum_lec = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	cyc_lec.reserve(1 << 20);
	cyc_chain.reserve(1 << 20);
	for (auto _ : state) {
		if (!fill_burst(state, burst, tmpl, pos))
			break;
		uint64_t u0 = cpu_ns(), t0 = rte_rdtsc();
		uint16_t k = g_cl->type->process(g_cl, burst, kBurst);
		k = g_sq->type->process(g_sq, burst, k);
		uint64_t t1 = rte_rdtsc(), u1 = cpu_ns(), t1b = rte_rdtsc();
		k = lec->type->process(lec, burst, k);
		uint64_t t2 = rte_rdtsc(), u2 = cpu_ns();
		cyc_chain.push_back(t1 - t0);
		cyc_lec.push_back(t2 - t1b);
		sum_lec += t2 - t1b;
		ns_chain += u1 - u0 > g_clock_ns ? u1 - u0 - g_clock_ns : 0;
		ns_lec += u2 - u1 > g_clock_ns ? u2 - u1 - g_clock_ns : 0;
		state.SetIterationTime(double(t2 - t1b) / hz);
		rte_pktmbuf_free_bulk(burst, k);
		free_emitted();
		n += k;
	}
	state.SetItemsProcessed(int64_t(n));
	state.SetBytesProcessed(int64_t(n * size));
	const double bursts = double(cyc_lec.size());
	// TSC cycles per packet of the median burst (robust to preemption), and
	// thread CPU time per packet (the clock's own cost per burst taken off)
	state.counters["lec_cyc"] = median(cyc_lec) / kBurst;
	state.counters["lec_ns"] = median(cyc_lec) / kBurst * 1e9 / hz;
	state.counters["lec_cyc_mean"] = bursts ? double(sum_lec) / bursts / kBurst : 0;
	state.counters["chain_cyc"] = median(cyc_chain) / kBurst;
	state.counters["lec_cpu_ns"] = n ? double(ns_lec) / double(n) : 0;
	state.counters["chain_cpu_ns"] = n ? double(ns_chain) / double(n) : 0;
	report_work(state, lec, s0, prot0);
	state.counters["groups"] = kLayouts[li];
	if (double(counter(lec, "protected") - prot0) < double(n))
		state.SkipWithError("frames went unprotected: views or addresses missing");
}

// range(0): layout. The defaults with a repair lcore, 1 KB, headers chained.
void BM_LecRepairLcore(benchmark::State &state)
{
	const unsigned li = unsigned(state.range(0));
	if (!g_two_cpus) {
		state.SkipWithError("needs two CPUs (a repair lcore beside the bench thread)");
		for (auto _ : state)
			;
		return;
	}
	il_stage *lec = g_off[li];
	const auto tmpl = templates(kLayouts[li], 1024);
	Seen s0;
	s0.take(lec);
	uint64_t prot0 = counter(lec, "protected");
	const uint64_t busy0 = counter(lec, "drop_repair_lcore_busy");
	rte_mbuf *burst[IL_BURST_CAP];
	std::vector<uint64_t> cyc;
	uint64_t n = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	cyc.reserve(1 << 20);
	{
		Service svc(lec);
		// warm-up, untimed: the pool's pages and the bins touched once
		for (unsigned w = 0; w < 2000; w++) {
			if (!fill_burst(state, burst, tmpl, pos))
				return;
			uint16_t k = g_cl->type->process(g_cl, burst, kBurst);
			k = g_sq->type->process(g_sq, burst, k);
			k = lec->type->process(lec, burst, k);
			rte_pktmbuf_free_bulk(burst, k);
			free_emitted();
			wait_taken(lec);
		}
		s0.take(lec);
		prot0 = counter(lec, "protected");
		for (auto _ : state) {
			if (!fill_burst(state, burst, tmpl, pos))
				break;
			uint16_t k = g_cl->type->process(g_cl, burst, kBurst);
			k = g_sq->type->process(g_sq, burst, k);
			uint64_t t0 = rte_rdtsc();
			k = lec->type->process(lec, burst, k);
			uint64_t t1 = rte_rdtsc();
			cyc.push_back(t1 - t0);
			state.SetIterationTime(double(t1 - t0) / hz);
			rte_pktmbuf_free_bulk(burst, k); // tx completion: the frames' other reference
			free_emitted();
			n += k;
			if (!saturate())
				wait_taken(lec);
		}
		wait_taken(lec);
	}
	state.SetItemsProcessed(int64_t(n));
	state.SetBytesProcessed(int64_t(n * 1024));
	Seen s1;
	s1.take(lec);
	const double c = median(cyc) / kBurst;
	state.counters["lec_cyc"] = c;
	state.counters["lec_ns"] = c * 1e9 / hz;
	const double svc = s1.svc_frames > s0.svc_frames ?
		double(s1.svc_busy - s0.svc_busy) / double(s1.svc_frames - s0.svc_frames) : 0;
	state.counters["svc_cyc"] = svc;
	state.counters["svc_ns"] = svc * 1e9 / hz;
	state.counters["svc_mpps"] = svc > 0 ? hz / svc / 1e6 : 0;
	state.counters["groups"] = kLayouts[li];
	report_work(state, lec, s0, prot0);
	state.counters["busy_drop_frac"] = n ? double(counter(lec, "drop_repair_lcore_busy") -
						      busy0) / double(n) : 0;
	if (!saturate() && counter(lec, "drop_repair_lcore_busy") != busy0)
		state.SkipWithError("the repair lcore's ring was full");
	else if (!saturate() && double(counter(lec, "protected") - prot0) < double(n))
		state.SkipWithError("frames went unprotected: views or addresses missing");
}

// A fixed number of bursts: each waits (untimed) for the repair lcore, so a
// minimum of timed time would take minutes.
BENCHMARK(BM_LecRepairLcore)
	->ArgsProduct({ { 0, 1, 2 } })
	->ArgNames({ "layout" })
	->Iterations(20000)
	->UseManualTime()
	->Unit(benchmark::kNanosecond);

BENCHMARK(BM_LecStage)
	->ArgsProduct({ { 0, 1, 2 }, { 64, 1024 }, { 0, 1 }, { 0, 1, 2 } })
	->ArgNames({ "layout", "size", "chained", "plan" })
	->UseManualTime()
	->Unit(benchmark::kNanosecond);

// range(0): layout; range(1): 0 no lec, else lec of variant range(1) - 1; 1 KB.
void BM_Forward(benchmark::State &state)
{
	const unsigned li = unsigned(state.range(0)), variant = unsigned(state.range(1));
	if (variant == 4 && !g_two_cpus) {
		state.SkipWithError("needs two CPUs (a repair lcore beside the bench thread)");
		for (auto _ : state)
			;
		return;
	}
	if (variant > LEC_BENCH_PLANS && variant != 4) {
		state.SkipWithError("no such plan in this build");
		for (auto _ : state)
			;
		return;
	}
	il_stage *lec = variant == 4 ? g_off[li] : variant ? g_fwd[li][variant - 1] : nullptr;
	const auto tmpl = templates(kLayouts[li], 1024);
	il_lcore_io *io = g_cl->io;
	Seen s0;
	uint64_t prot0 = 0;
	if (lec) {
		s0.take(lec);
		prot0 = counter(lec, "protected");
	}
	rte_mbuf *burst[IL_BURST_CAP], *pkts[IL_BURST_CAP];
	std::vector<uint64_t> cyc;
	uint64_t n = 0;
	unsigned pos = 0;
	const double hz = double(rte_get_tsc_hz());
	cyc.reserve(1 << 20);
	std::unique_ptr<Service> svc(variant == 4 ? new Service(lec) : nullptr);
	for (auto _ : state) {
		if (!fill_burst(state, burst, tmpl, pos))
			break;
		// into the "in" ring (net_ring loops its tx back to its rx)
		uint16_t q = rte_eth_tx_burst(g_port_in, 0, burst, kBurst);
		if (q < kBurst)
			rte_pktmbuf_free_bulk(burst + q, kBurst - q);
		uint64_t t0 = rte_rdtsc();
		uint16_t k = rte_eth_rx_burst(g_port_in, 0, pkts, kBurst);
		k = g_cl->type->process(g_cl, pkts, k);
		k = g_sq->type->process(g_sq, pkts, k);
		if (lec)
			k = lec->type->process(lec, pkts, k);
		if (k)
			il_tx_burst(io, g_out_idx, pkts, k);
		if (io->n_defer)
			il_emit_flush(io);
		for (uint16_t p = 0; p < g_app.n_ports; p++)
			rte_eth_tx_buffer_flush(io->port_id[p], io->txq[p], io->txb[p]);
		uint64_t t1 = rte_rdtsc();
		cyc.push_back(t1 - t0);
		state.SetIterationTime(double(t1 - t0) / hz);
		n += k;
		// the receivers: drain "out" (and "rep") outside the timing
		uint16_t d;
		while ((d = rte_eth_rx_burst(g_port_out, 0, pkts, IL_BURST)) > 0)
			rte_pktmbuf_free_bulk(pkts, d);
		while ((d = rte_eth_rx_burst(g_port_rep, 0, pkts, IL_BURST)) > 0)
			rte_pktmbuf_free_bulk(pkts, d);
		if (svc)
			wait_taken(lec); // what it costs while LEC keeps up
	}
	svc.reset();
	state.SetItemsProcessed(int64_t(n));
	const double c = median(cyc) / kBurst;
	state.counters["fwd_cyc"] = c;
	state.counters["fwd_mpps"] = c > 0 ? hz / c / 1e6 : 0;
	if (lec)
		report_work(state, lec, s0, prot0);
	state.counters["groups"] = kLayouts[li];
}

BENCHMARK(BM_Forward)
	->ArgsProduct({ { 0, 1, 2 }, { 0, 1, 2, 3 } })
	->ArgNames({ "layout", "lec" })
	->UseManualTime()
	->Unit(benchmark::kNanosecond);
BENCHMARK(BM_Forward) // with a repair lcore: a fixed number of bursts, as above
	->ArgsProduct({ { 0, 1, 2 }, { 4 } })
	->ArgNames({ "layout", "lec" })
	->Iterations(20000)
	->UseManualTime()
	->Unit(benchmark::kNanosecond);

} // namespace

int main(int argc, char **argv)
{
	char err[512];
	g_sock = "/tmp/il-bench-lec-stage-" + std::to_string(getpid()) + ".sock";
	std::string prefix = "il-bench-lec-stage-" + std::to_string(getpid());
	std::string mif = "net_memif0,role=server,socket=" + g_sock;
	// lcores 0 (this thread) and 1 on the first CPU allowed, the repair lcores
	// (2..4) on the second
	cpu_set_t cpus;
	int cpu[2] = { 0, 0 }, ncpu = 0;
	sched_getaffinity(0, sizeof(cpus), &cpus);
	for (int c = 0; c < CPU_SETSIZE && ncpu < 2; c++)
		if (CPU_ISSET(c, &cpus))
			cpu[ncpu++] = c;
	g_two_cpus = ncpu == 2;
	if (!g_two_cpus)
		cpu[1] = cpu[0];
	char lcores[96];
	snprintf(lcores, sizeof(lcores), "0@%d,1@%d,2@%d,3@%d,4@%d", cpu[0], cpu[0], cpu[1],
		 cpu[1], cpu[1]);
	const char *eal[] = { argv[0], "--no-huge", "-m", "4096", "--no-pci", "--lcores", lcores,
			      "--file-prefix", prefix.c_str(), "--log-level", "lib.eal:error",
			      "--vdev", "net_ring0", "--vdev", "net_ring1", "--vdev", "net_ring2",
			      "--vdev", "net_ring3",
			      "--vdev", mif.c_str() };
	int neal = int(sizeof(eal) / sizeof(eal[0]));
	if (rte_eal_init(neal, const_cast<char **>(eal)) < 0) {
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
			for (unsigned p = 0; p < LEC_BENCH_PLANS; p++)
				g_lec[i][f][p] = il_app_stage(
					&g_app, ("lec" + std::to_string(kLayouts[i]) + (f ? "r" : "c") +
						 kPlanNames[p]).c_str());
	for (unsigned i = 0; i < 3; i++)
		for (unsigned p = 0; p < LEC_BENCH_PLANS; p++)
			g_fwd[i][p] = g_lec[i][1][p];
	for (unsigned i = 0; i < 3; i++)
		g_off[i] = il_app_stage(&g_app, ("off" + std::to_string(kLayouts[i])).c_str());
	g_out_idx = uint16_t(il_app_port_index(&g_app, "out"));
	g_port_in = g_app.ports[il_app_port_index(&g_app, "in")].port_id;
	g_port_out = g_app.ports[il_app_port_index(&g_app, "out")].port_id;
	g_port_rep = g_app.ports[il_app_port_index(&g_app, "rep")].port_id;
	setup_views();
	calibrate_clock();
	benchmark::AddCustomContext("cpu_clock_ns", std::to_string(g_clock_ns));
	benchmark::AddCustomContext("tsc_hz", std::to_string(rte_get_tsc_hz()));
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	il_app_stop(&g_app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	unlink(g_sock.c_str());
	return 0;
}
