// SPDX-License-Identifier: BSD-3-Clause
//
// FEC codec microbenchmarks (docs/fec.md, "Measured"): encode and decode
// cost per packet at 64, 512 and 1500 bytes for (8,3) and (8,4), ISA-L
// against the plain C XOR, and Reed-Solomon at the same (r, c). Rates
// are of protected data (the original packets), one core.
//
//   BM_Encode/<r>/<c>/<bytes>/<impl>  id + check + encoder, repairs copied out
//                                     (as a stage copies them into mbufs)
//   BM_Decode/<r>/<c>/<bytes>/<impl>/<loss per mille>
//                                     a recorded link stream replayed
//                                     into a decoder, per data packet
//   BM_Xor/<bytes>/<impl>             one XOR of a packet into a bin
//   BM_PayloadCheck/<bytes>           the payload check of the id
// impl: 0 = ISA-L one pass (GF multiply-accumulate by 1), 1 = plain C,
// 2 = ISA-L xor_gen per bin, 3 = AVX2 one pass with cached stores (the
// default) (RS: 0, 2 and 3 = ISA-L SIMD, 1 = ISA-L base C).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include <interlink/fec.h>
}

namespace {

constexpr unsigned kPool = 64; // distinct packets cycled through

void build_pkt(uint8_t *b, uint64_t x, uint32_t len)
{
	std::memset(b, 0, 20);
	b[0] = 0x45;
	il_put16(b + 2, (uint16_t)len);
	il_put16(b + 4, (uint16_t)x);
	b[8] = 64;
	b[9] = 17;
	il_put32(b + 12, 0x0a000001);
	il_put32(b + 16, 0x0a000102);
	uint64_t v = x * 0x9e3779b97f4a7c15ull;
	for (uint32_t i = 20; i < len; i++) {
		v ^= v << 13;
		v ^= v >> 7;
		v ^= v << 17;
		b[i] = (uint8_t)v;
	}
	std::memcpy(b + 20, &x, 8 < len - 20 ? 8 : len - 20);
}

struct Sink {
	uint8_t buf[16384];
	uint64_t n = 0;
};

void sink_emit(void *arg, const uint8_t *msg, uint32_t len, const il_fec_repair_info *)
{
	auto *s = static_cast<Sink *>(arg);
	std::memcpy(s->buf, msg, len); // what a stage does: copy into an mbuf
	s->n++;
}

il_fec_cfg make_cfg(unsigned code, unsigned r, unsigned c, unsigned impl)
{
	static const uint16_t iv[] = { 1, 11, 19, 29, 37 };
	il_fec_cfg cfg;
	il_fec_cfg_defaults(&cfg);
	cfg.code = (uint8_t)code;
	cfg.r = (uint8_t)r;
	cfg.c = (uint8_t)c;
	for (unsigned l = 0; l < c && l < 5; l++)
		cfg.interleave[l] = code == IL_FEC_CODE_RS ? (l ? 0 : 1) : iv[l];
	cfg.xor_impl = (uint8_t)impl;
	return cfg;
}

void set_rates(benchmark::State &st, uint64_t bytes)
{
	st.SetItemsProcessed((int64_t)st.iterations());
	st.SetBytesProcessed((int64_t)bytes);
	st.counters["Gbit"] =
		benchmark::Counter((double)bytes * 8 / 1e9, benchmark::Counter::kIsRate);
	st.counters["per_pkt"] = benchmark::Counter(
		(double)st.iterations(),
		benchmark::Counter::kIsRate | benchmark::Counter::kInvert,
		benchmark::Counter::kIs1000);
}

void encode(benchmark::State &st, unsigned code)
{
	const unsigned r = (unsigned)st.range(0), c = (unsigned)st.range(1);
	const uint32_t len = (uint32_t)st.range(2);
	il_fec_cfg cfg = make_cfg(code, r, c, (unsigned)st.range(3));
	char err[512];
	Sink sink;
	il_fec_enc *e = il_fec_enc_create(&cfg, sink_emit, &sink, err, sizeof(err));
	if (!e) {
		st.SkipWithError(err);
		return;
	}
	// Packets as a stage sees them: 64-byte aligned, one after another.
	auto *pool = static_cast<uint8_t *>(std::aligned_alloc(64, kPool * 2048));
	for (unsigned k = 0; k < kPool; k++)
		build_pkt(pool + k * 2048, k, len);
	uint64_t k = 0, bytes = 0;
	for (auto _ : st) {
		const uint8_t *p = pool + (k++ % kPool) * 2048;
		il_fec_id id;
		// as the fec_enc stage calls it: the id's payload check computed
		// by the encoder (in its XOR pass with AVX2, separately otherwise)
		il_fec_id_ipv4_tuple(p, len, &id);
		il_fec_enc_add_checked(e, &id, p, len, uint32_t(p[0] & 0x0f) * 4);
		bytes += len;
	}
	set_rates(st, bytes);
	st.counters["repairs/pkt"] = (double)sink.n / (double)st.iterations();
	il_fec_enc_free(e);
	std::free(pool);
}

void BM_Encode(benchmark::State &st)
{
	encode(st, IL_FEC_CODE_XOR);
}

void BM_EncodeRS(benchmark::State &st)
{
	encode(st, IL_FEC_CODE_RS);
}

// A link stream recorded once per configuration: data packets and the
// repairs behind them, after loss.
struct Stream {
	std::vector<uint8_t> bytes;
	struct Item {
		uint32_t off, len;
		bool repair;
		il_fec_id id;
	};
	std::vector<Item> items;
	uint64_t data = 0, data_bytes = 0;
};

struct Recorder {
	Stream *s;
	uint64_t rng;
	double loss;
	bool drop()
	{
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		return (double)(rng >> 11) * 0x1.0p-53 < loss;
	}
};

void rec_emit(void *arg, const uint8_t *msg, uint32_t len, const il_fec_repair_info *)
{
	auto *r = static_cast<Recorder *>(arg);
	if (r->drop())
		return;
	Stream::Item it{ (uint32_t)r->s->bytes.size(), len, true, {} };
	r->s->bytes.insert(r->s->bytes.end(), msg, msg + len);
	r->s->items.push_back(it);
}

void record(Stream &s, const il_fec_cfg &cfg, uint32_t len, double loss, uint64_t n)
{
	char err[512];
	Recorder rec{ &s, 0x9e3779b97f4a7c15ull, loss };
	il_fec_enc *e = il_fec_enc_create(&cfg, rec_emit, &rec, err, sizeof(err));
	alignas(64) uint8_t pkt[2048];
	s.bytes.reserve((size_t)n * (len + 64) * 3 / 2);
	for (uint64_t x = 0; x < n; x++) {
		build_pkt(pkt, x, len);
		il_fec_id id;
		il_fec_id_ipv4(pkt, len, &id);
		if (!rec.drop()) {
			// Data spans start on a cache line, like mbuf data.
			size_t off = (s.bytes.size() + 63) / 64 * 64;
			s.bytes.resize(off);
			s.bytes.insert(s.bytes.end(), pkt, pkt + len);
			s.items.push_back({ (uint32_t)off, len, false, id });
			s.data++;
			s.data_bytes += len;
		}
		il_fec_enc_add(e, &id, pkt, len);
	}
	il_fec_enc_free(e);
}

void deliver_count(void *arg, const uint8_t *, uint32_t, const il_fec_recovery *)
{
	++*static_cast<uint64_t *>(arg);
}

void BM_Decode(benchmark::State &st)
{
	const unsigned r = (unsigned)st.range(0), c = (unsigned)st.range(1);
	const uint32_t len = (uint32_t)st.range(2);
	il_fec_cfg cfg = make_cfg(IL_FEC_CODE_XOR, r, c, (unsigned)st.range(3));
	const double loss = (double)st.range(4) / 1000.0;
	const uint64_t n = len > 1000 ? 12288 : 32768;
	Stream s;
	record(s, cfg, len, loss, n);
	// The recorded bytes must keep 64-byte alignment for ISA-L.
	auto *base = static_cast<uint8_t *>(std::aligned_alloc(64, (s.bytes.size() + 63) / 64 * 64));
	std::memcpy(base, s.bytes.data(), s.bytes.size());
	char err[512];
	uint64_t recovered = 0, passes = 0, data = 0, bytes = 0;
	il_fec_dec *d = nullptr;
	size_t i = s.items.size();
	uint64_t now = 0;
	for (auto _ : st) {
		if (i == s.items.size()) {
			// A fresh decoder per pass over the stream, off the clock.
			st.PauseTiming();
			il_fec_dec_free(d);
			d = il_fec_dec_create(&cfg, deliver_count, &recovered, err, sizeof(err));
			i = 0;
			passes++;
			st.ResumeTiming();
		}
		// One iteration: one data packet and the repairs that follow it.
		do {
			const Stream::Item &it = s.items[i++];
			now += 1000;
			if (it.repair) {
				il_fec_dec_repair(d, base + it.off, it.len, now);
			} else {
				il_fec_dec_data(d, &it.id, base + it.off, it.len, now);
				data++;
				bytes += it.len;
			}
		} while (i < s.items.size() && s.items[i].repair);
	}
	// Per data packet received; the rates count received data bytes.
	st.SetItemsProcessed((int64_t)data);
	st.SetBytesProcessed((int64_t)bytes);
	st.counters["Gbit"] =
		benchmark::Counter((double)bytes * 8 / 1e9, benchmark::Counter::kIsRate);
	st.counters["recovered/pkt"] = (double)recovered / (double)(data ? data : 1);
	il_fec_dec_free(d);
	std::free(base);
	(void)passes;
}

// What the fec_dec stage does per received packet, both ways: hold 0
// computes the whole id (payload check included) and copies the packet
// into the store (as before); hold 1 takes the id without its check and
// keeps the packet by reference (the stage's default now). (8,3), ISA-L.
void nop_release(void *, void *) {}

void BM_DecodeHold(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	const double loss = (double)st.range(1) / 1000.0;
	const bool ref = st.range(2) != 0;
	il_fec_cfg cfg = make_cfg(IL_FEC_CODE_XOR, 8, 3, 0);
	cfg.release = nop_release;
	const uint64_t n = len > 1000 ? 12288 : 32768;
	Stream s;
	record(s, cfg, len, loss, n);
	auto *base = static_cast<uint8_t *>(std::aligned_alloc(64, (s.bytes.size() + 63) / 64 * 64));
	std::memcpy(base, s.bytes.data(), s.bytes.size());
	char err[512];
	uint64_t recovered = 0, data = 0, bytes = 0;
	il_fec_dec *d = nullptr;
	size_t i = s.items.size();
	uint64_t now = 0;
	for (auto _ : st) {
		if (i == s.items.size()) {
			st.PauseTiming();
			il_fec_dec_free(d);
			d = il_fec_dec_create(&cfg, deliver_count, &recovered, err, sizeof(err));
			i = 0;
			st.ResumeTiming();
		}
		do {
			const Stream::Item &it = s.items[i++];
			now += 1000;
			if (it.repair) {
				il_fec_dec_repair(d, base + it.off, it.len, now);
			} else {
				il_fec_id id;
				bool kept;
				if (ref) {
					il_fec_id_ipv4_tuple(base + it.off, it.len, &id);
					il_fec_dec_data_ref(d, &id, false, base + it.off, it.len,
							    base + it.off, &kept, now);
				} else {
					il_fec_id_ipv4(base + it.off, it.len, &id);
					il_fec_dec_data(d, &id, base + it.off, it.len, now);
				}
				data++;
				bytes += it.len;
			}
		} while (i < s.items.size() && s.items[i].repair);
	}
	st.SetItemsProcessed((int64_t)data);
	st.SetBytesProcessed((int64_t)bytes);
	st.counters["Gbit"] =
		benchmark::Counter((double)bytes * 8 / 1e9, benchmark::Counter::kIsRate);
	st.counters["recovered/pkt"] = (double)recovered / (double)(data ? data : 1);
	st.counters["checks/pkt"] =
		(double)il_fec_dec_stats(d)->checks_computed / (double)(data ? data : 1);
	il_fec_dec_free(d);
	std::free(base);
}

void BM_Xor(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	const unsigned impl = (unsigned)st.range(1);
	auto *a = static_cast<uint8_t *>(std::aligned_alloc(64, 2048));
	auto *b = static_cast<uint8_t *>(std::aligned_alloc(64, 2048));
	std::memset(a, 1, 2048);
	std::memset(b, 2, 2048);
	const void *src[1] = { b };
	for (auto _ : st) {
		il_fec_xor_acc(impl, a, src, 1, len);
		benchmark::DoNotOptimize(a);
		benchmark::ClobberMemory();
	}
	set_rates(st, (uint64_t)st.iterations() * len);
	std::free(a);
	std::free(b);
}

void BM_PayloadCheck(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	alignas(64) uint8_t p[2048];
	build_pkt(p, 1, 1500);
	for (auto _ : st) {
		benchmark::DoNotOptimize(il_fec_payload_check(p + 20, len - 20));
	}
	set_rates(st, (uint64_t)st.iterations() * len);
}

void enc_args(benchmark::internal::Benchmark *b)
{
	b->ArgNames({ "r", "c", "bytes", "impl" });
	for (int c : { 3, 4 })
		for (int bytes : { 64, 512, 1500 })
			for (int impl : { 0, 1, 2, 3 })
				b->Args({ 8, c, bytes, impl });
}

void dec_args(benchmark::internal::Benchmark *b)
{
	b->ArgNames({ "r", "c", "bytes", "impl", "loss_pm" });
	for (int c : { 3, 4 })
		for (int bytes : { 64, 512, 1500 })
			for (int impl : { 0, 1, 3 })
				for (int loss : { 0, 10 })
					b->Args({ 8, c, bytes, impl, loss });
}

} // namespace

BENCHMARK(BM_Encode)->Apply(enc_args);
BENCHMARK(BM_EncodeRS)->Apply(enc_args);
BENCHMARK(BM_Decode)->Apply(dec_args);
BENCHMARK(BM_DecodeHold)
	->ArgNames({ "bytes", "loss_pm", "ref" })
	->ArgsProduct({ { 64, 1500 }, { 0, 10 }, { 0, 1 } });
BENCHMARK(BM_Xor)->ArgNames({ "bytes", "impl" })->ArgsProduct({ { 64, 512, 1500 }, { 0, 1, 3 } });
BENCHMARK(BM_PayloadCheck)->Arg(64)->Arg(512)->Arg(1500);

BENCHMARK_MAIN();
