// SPDX-License-Identifier: BSD-3-Clause
//
// LEC core microbenchmarks (docs/lec.md, "Measured"): cost per data
// message of feeding the repair bins and sending the repairs they fire,
// cost per data message on a receiver that also decodes, the XOR kernels,
// and recomputing regions on a view change. One core, 1 KB messages
// unless said.
//
//   BM_Encode/<groups>/<bytes>/<impl>/<mode>
//       a node in <groups> groups of 10 (random overlaps among 64 nodes),
//       r = 8, c = 5: il_lec_data() for each message, repairs handed to a
//       send callback that copies each once (as a caller builds one
//       message). mode 0: encode-only (the appliance), each message XORed
//       into its bins as it comes; mode 1: encode-only with defer_xor
//       (bins keep references, XOR all r at once; hold/release count
//       references as a caller's mbuf reference counts would); mode 2: a
//       host that also keeps every message for decoding.
//   BM_Receive/<groups>/<loss per mille>/<impl>
//       a receiver replaying a recorded stream from its peers: data it did
//       not lose and every repair sent to it, per data message of the
//       stream (store, bins, decoding, recoveries).
//   BM_Xor/<bytes>/<impl>      one two-input XOR into a bin's accumulator
//   BM_Apply/<groups>          regions + bin plan for a new view
//   BM_FlushScan/<groups>      one il_lec_flush_aged() that finds nothing due,
//       every instance of every bin holding messages, as the lec stage
//       keeps them (a bin per group, up to 8 strided layers): what one run
//       of the stage's flush timer costs
// impl: 0 = ISA-L xor_gen, 1 = plain C, 2 = AVX2 (the default).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <interlink/lec.h>

namespace {

constexpr unsigned kPool = 64; // distinct payloads cycled through
constexpr uint32_t kNodes = 64;
constexpr uint32_t kGroupSize = 10;

struct Pool {
	std::vector<uint8_t> buf;
	uint32_t len;
	explicit Pool(uint32_t l) : buf(kPool * l), len(l)
	{
		uint64_t s = 0x1234567ull;
		for (auto &b : buf) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			b = (uint8_t)s;
		}
	}
	const uint8_t *at(uint64_t seq) const { return &buf[(seq % kPool) * len]; }
};

struct Sink {
	alignas(64) uint8_t copy[65536 + 128];
	uint64_t repairs = 0, copies = 0, recovered = 0;
	uint32_t refs[kPool] = {}; // defer_xor: references per pool buffer
};

void sink_send(void *arg, const struct il_lec_repair *rep, const uint32_t *, uint32_t n)
{
	auto *s = static_cast<Sink *>(arg);
	if (rep->payload)
		std::memcpy(s->copy, rep->payload, rep->len);
	else // defer_xor: the XOR straight into the caller's buffer (ISA-L when aligned)
		il_lec_repair_xor(rep, s->copy + 64 + ((uintptr_t)rep->src[0] & 31), 31);
	s->repairs++;
	s->copies += n;
}

void sink_recovered(void *arg, const il_lec_id *, const uint8_t *, uint32_t,
		    const il_lec_recovery *)
{
	static_cast<Sink *>(arg)->recovered++;
}

void ref_hold(void *arg, void *cookie, uint32_t n)
{
	static_cast<Sink *>(arg)->refs[(uintptr_t)cookie % kPool] += n;
}

void ref_release(void *arg, void *const *cookies, uint32_t n)
{
	auto *s = static_cast<Sink *>(arg);
	for (uint32_t i = 0; i < n; i++)
		s->refs[(uintptr_t)cookies[i] % kPool]--;
}

il_lec_cfg make_cfg(uint32_t self, unsigned impl, bool decode)
{
	il_lec_cfg cfg;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = self;
	cfg.xor_impl = (uint8_t)impl;
	cfg.decode = decode;
	cfg.max_groups = 256;
	cfg.max_len = 1500;
	cfg.max_bins = 1024;
	cfg.max_links = 16384;
	cfg.seed = 99;
	return cfg;
}

// groups x kGroupSize member lists, all containing node 0, the rest
// drawn from 1..kNodes-1 (fixed seed).
std::vector<std::vector<uint32_t>> make_groups(unsigned groups)
{
	std::vector<std::vector<uint32_t>> g(groups);
	uint64_t s = 77;
	for (auto &m : g) {
		m.push_back(0);
		while (m.size() < kGroupSize) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			uint32_t id = 1 + (uint32_t)((s >> 33) % (kNodes - 1));
			bool dup = false;
			for (uint32_t x : m)
				dup |= x == id;
			if (!dup)
				m.push_back(id);
		}
	}
	return g;
}

il_lec *make_node(uint32_t self, unsigned groups, unsigned impl, bool decode, Sink *sink,
		  const std::vector<std::vector<uint32_t>> &g, bool defer = false,
		  uint8_t layers = 1, uint8_t plan = IL_LEC_PLAN_REGIONS)
{
	il_lec_cfg cfg = make_cfg(self, impl, decode);
	cfg.max_layers = layers;
	cfg.layer_stride = layers > 1;
	cfg.plan = plan;
	il_lec_ops ops = { sink_send, sink_recovered, ref_hold, ref_release, sink };
	cfg.defer_xor = defer;
	char err[256];
	il_lec *l = il_lec_create(&cfg, &ops, err, sizeof(err));
	if (!l)
		return nullptr;
	for (unsigned k = 0; k < groups; k++) {
		bool member = false;
		for (uint32_t x : g[k])
			member |= x == self;
		if (member && il_lec_group_set(l, (uint16_t)k, 0, g[k].data(), (uint32_t)g[k].size(),
					       err, sizeof(err)))
			return nullptr;
	}
	if (il_lec_apply(l, err, sizeof(err)))
		return nullptr;
	return l;
}

void BM_Encode(benchmark::State &st)
{
	unsigned groups = (unsigned)st.range(0), impl = (unsigned)st.range(2);
	uint32_t len = (uint32_t)st.range(1);
	int mode = (int)st.range(3);
	Pool pool(len);
	Sink sink;
	auto g = make_groups(groups);
	il_lec *l = make_node(0, groups, impl, mode == 2, &sink, g, mode == 1);
	if (!l) {
		st.SkipWithError("create");
		return;
	}
	uint64_t i = 0;
	for (auto _ : st) {
		il_lec_id id;
		id.group = (uint16_t)(i % groups);
		id.seq = i / groups + 1;
		id.epoch = 1;
		id.zero = 0;
		benchmark::DoNotOptimize(
			il_lec_data(l, &id, pool.at(i), len, (void *)(uintptr_t)i, i * 1000));
		i++;
	}
	const struct il_lec_stats *s = il_lec_stats(l);
	double n = (double)s->data_new;
	st.counters["bins/msg"] = (double)s->bin_adds / n;
	st.counters["xors/msg"] = (double)s->xor_ops / n;
	st.counters["copies/msg"] = (double)s->copy_ops / n;
	st.counters["repairs/msg"] = (double)s->repairs_sent / n;
	st.counters["targets/msg"] = (double)s->repair_targets / n;
	st.SetItemsProcessed((int64_t)st.iterations());
	st.SetBytesProcessed((int64_t)st.iterations() * len);
	il_lec_free(l);
}

// One recorded event for the receiver: a data message it got, or a repair
// sent to it (ids, payload and lengths copied).
struct Event {
	bool data;
	uint64_t seq;
	uint16_t group;
	uint16_t count, len, len_xor;
	il_lec_id ids[IL_LEC_MAX_R];
	std::vector<uint8_t> payload;
};

struct Recorder {
	std::vector<Event> *ev;
	uint32_t me;
};

void rec_send(void *arg, const struct il_lec_repair *rep, const uint32_t *t, uint32_t n)
{
	auto *r = static_cast<Recorder *>(arg);
	for (uint32_t k = 0; k < n; k++) {
		if (t[k] != r->me)
			continue;
		Event e{};
		e.data = false;
		e.count = rep->count;
		e.len = rep->len;
		e.len_xor = rep->len_xor;
		std::memcpy(e.ids, rep->ids, rep->count * sizeof(rep->ids[0]));
		e.payload.assign(rep->payload, rep->payload + rep->len);
		r->ev->push_back(std::move(e));
	}
}

void rec_recovered(void *, const il_lec_id *, const uint8_t *, uint32_t, const il_lec_recovery *)
{
}

void BM_Receive(benchmark::State &st)
{
	unsigned groups = (unsigned)st.range(0), impl = (unsigned)st.range(2);
	double loss = (double)st.range(1) / 1000.0;
	constexpr uint32_t len = 1024;
	constexpr uint64_t kMsgs = 64 * 256; // a multiple of kPool per group
	Pool pool(len);
	auto g = make_groups(groups);
	std::vector<Event> ev;
	Recorder rc{ &ev, 0 };

	// The peers (every other member of node 0's groups) see every message
	// and send repairs; node 0 loses `loss` of the data and of the repairs.
	std::vector<il_lec *> peers;
	for (uint32_t p = 1; p < kNodes; p++) {
		bool in = false;
		for (auto &m : g)
			for (uint32_t x : m)
				in |= x == p;
		if (!in)
			continue;
		il_lec_cfg cfg = make_cfg(p, 1, false);
		il_lec_ops ops = { rec_send, rec_recovered, nullptr, nullptr, &rc };
		char err[256];
		il_lec *l = il_lec_create(&cfg, &ops, err, sizeof(err));
		for (unsigned k = 0; k < groups; k++) {
			bool member = false;
			for (uint32_t x : g[k])
				member |= x == p;
			if (member)
				il_lec_group_set(l, (uint16_t)k, 0, g[k].data(), (uint32_t)g[k].size(),
						 err, sizeof(err));
		}
		il_lec_apply(l, err, sizeof(err));
		peers.push_back(l);
	}
	uint64_t s = 5;
	auto lost = [&]() {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		return (double)(s >> 11) / 9007199254740992.0 < loss;
	};
	for (uint64_t i = 0; i < kMsgs; i++) {
		il_lec_id id;
		id.group = (uint16_t)(i % groups);
		id.seq = i / groups + 1;
		id.epoch = 1;
		id.zero = 0;
		size_t before = ev.size();
		if (!lost()) {
			Event e{};
			e.data = true;
			e.seq = id.seq;
			e.group = id.group;
			ev.push_back(e);
		}
		for (auto *l : peers)
			il_lec_data(l, &id, pool.at(id.seq), len, nullptr, 0);
		// repairs to us are lost too
		for (size_t k = before; k < ev.size();) {
			if (!ev[k].data && lost())
				ev.erase(ev.begin() + (long)k);
			else
				k++;
		}
	}
	for (auto *l : peers)
		il_lec_free(l);

	Sink sink;
	il_lec *me = make_node(0, groups, impl, true, &sink, g);
	if (!me) {
		st.SkipWithError("create");
		return;
	}
	uint64_t round = 0, msgs = 0, got = 0;
	il_lec_id ids[IL_LEC_MAX_R];
	for (const Event &e : ev)
		got += e.data;
	for (auto _ : st) {
		// each round shifts every sequence number by a multiple of the
		// pool, so payloads (and the recorded XORs) still match
		uint64_t shift = round * (kMsgs / groups);
		for (const Event &e : ev) {
			if (e.data) {
				il_lec_id id;
				id.group = e.group;
				id.seq = e.seq + shift;
				id.epoch = 1;
				id.zero = 0;
				il_lec_data(me, &id, pool.at(e.seq), len, nullptr, 0);
			} else {
				for (unsigned k = 0; k < e.count; k++) {
					ids[k] = e.ids[k];
					ids[k].seq += shift;
				}
				struct il_lec_repair rep = { ids, e.payload.data(), e.count, e.len, e.len_xor };
				il_lec_repair(me, &rep, 0);
			}
		}
		round++;
		msgs += kMsgs;
	}
	const struct il_lec_stats *x = il_lec_stats(me);
	st.counters["repairs_in/msg"] = (double)x->repairs_in / (double)msgs;
	uint64_t nlost = (kMsgs - got) * round;
	st.counters["recovered%"] = nlost ? 100.0 * (double)x->recovered / (double)nlost : 0.0;
	st.SetItemsProcessed((int64_t)msgs);
	il_lec_free(me);
}

void BM_Xor(benchmark::State &st)
{
	uint32_t len = (uint32_t)st.range(0);
	unsigned impl = (unsigned)st.range(1);
	Sink sink;
	auto g = make_groups(1);
	// one group of 10: c = 5 >= 1, every round builds its XOR
	il_lec *l = make_node(0, 1, impl, false, &sink, g);
	Pool pool(len);
	uint64_t i = 0;
	for (auto _ : st) {
		il_lec_id id;
		id.group = 0;
		id.seq = ++i;
		id.epoch = 1;
		id.zero = 0;
		il_lec_data(l, &id, pool.at(i), len, nullptr, 0);
	}
	const struct il_lec_stats *s = il_lec_stats(l);
	st.counters["xors/msg"] = (double)s->xor_ops / (double)s->data_new;
	st.SetBytesProcessed((int64_t)st.iterations() * len);
	il_lec_free(l);
}

void BM_Apply(benchmark::State &st)
{
	unsigned groups = (unsigned)st.range(0);
	Sink sink;
	auto g = make_groups(groups);
	il_lec *l = make_node(0, groups, 0, true, &sink, g);
	char err[256];
	unsigned k = 0;
	for (auto _ : st) {
		// a member leaves one group and comes back: two applies
		auto &m = g[k++ % groups];
		il_lec_group_set(l, (uint16_t)((k - 1) % groups), 0, m.data(), (uint32_t)m.size() - 1,
				 err, sizeof(err));
		il_lec_apply(l, err, sizeof(err));
		il_lec_group_set(l, (uint16_t)((k - 1) % groups), 0, m.data(), (uint32_t)m.size(), err,
				 sizeof(err));
		il_lec_apply(l, err, sizeof(err));
	}
	st.counters["regions"] = (double)il_lec_region_count(l);
	st.counters["bins"] = (double)il_lec_bin_count(l);
	st.SetItemsProcessed((int64_t)st.iterations() * 2);
	il_lec_free(l);
}

void BM_FlushScan(benchmark::State &st)
{
	unsigned groups = (unsigned)st.range(0);
	const uint32_t len = 1024;
	Pool pool(len);
	Sink sink;
	auto g = make_groups(groups);
	il_lec *l = make_node(0, groups, 2, false, &sink, g, true, 8, IL_LEC_PLAN_GROUPS);
	if (!l) {
		st.SkipWithError("create");
		return;
	}
	// Messages enough that the instances of every layer hold some (layer j
	// deals over j + 1 of them), none full.
	const uint64_t age = 1000000000ull;
	uint64_t i = 0;
	for (unsigned k = 0; k < groups * 7; k++, i++) {
		il_lec_id id;
		id.group = (uint16_t)(i % groups);
		id.seq = i / groups + 1;
		id.epoch = 1;
		id.zero = 0;
		il_lec_data(l, &id, pool.at(i), len, (void *)(uintptr_t)i, 1000);
	}
	uint64_t fired = il_lec_stats(l)->repairs_sent;
	for (auto _ : st)
		benchmark::DoNotOptimize(il_lec_flush_aged(l, age, age));
	if (il_lec_stats(l)->repairs_sent != fired || il_lec_next_due(l) != 1000 + age)
		st.SkipWithError("a bin fired or none was holding");
	il_lec_free(l);
}

} // namespace

BENCHMARK(BM_Encode)
	->ArgNames({ "groups", "bytes", "impl", "mode" })
	->Args({ 1, 1024, 2, 0 })
	->Args({ 1, 1024, 0, 0 })
	->Args({ 1, 1024, 1, 0 })
	->Args({ 1, 1024, 2, 1 })
	->Args({ 1, 1024, 0, 1 })
	->Args({ 16, 1024, 2, 0 })
	->Args({ 16, 1024, 0, 0 })
	->Args({ 16, 1024, 1, 0 })
	->Args({ 16, 1024, 2, 1 })
	->Args({ 16, 1024, 0, 1 })
	->Args({ 16, 1024, 1, 1 })
	->Args({ 128, 1024, 2, 0 })
	->Args({ 128, 1024, 2, 1 })
	->Args({ 16, 1024, 2, 2 })
	->Args({ 16, 1024, 0, 2 })
	->Args({ 16, 1024, 1, 2 })
	->Args({ 16, 64, 2, 1 })
	->Args({ 16, 1472, 2, 1 });
BENCHMARK(BM_Receive)
	->ArgNames({ "groups", "loss_pm", "impl" })
	->Args({ 16, 0, 2 })
	->Args({ 16, 50, 2 })
	->Args({ 16, 50, 0 })
	->Args({ 16, 50, 1 })
	->Args({ 16, 250, 2 })
	->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Xor)
	->ArgNames({ "bytes", "impl" })
	->Args({ 1024, 2 })
	->Args({ 1024, 0 })
	->Args({ 1024, 1 });
BENCHMARK(BM_Apply)->ArgNames({ "groups" })->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FlushScan)->ArgNames({ "groups" })->Arg(1)->Arg(16)->Arg(128);

BENCHMARK_MAIN();
