// SPDX-License-Identifier: BSD-3-Clause
// The FEC decoder's packet index, two ways: the codec's own open-addressing
// table (linear probing at load 1/2, the multiply hash of fec_store.c over
// the id without its payload check, duplicates allowed) against DPDK's
// rte_hash (CRC32 hash, 12-byte keys), both holding 4096 ids as the
// default store does. A lookup is what the decoder does for a received
// packet (a miss, mostly) and for each recipe entry of a repair (a hit):
// about c + 1 per packet. docs/fec.md, "The packet index".
//
//   taskset -c 1 build/bench/fec/bench_fec_index --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

extern "C" {
#include <rte_eal.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>

}

namespace {

constexpr uint32_t kLive = 4096, kSlots = 8192, kNone = UINT32_MAX;

struct Key {
	uint32_t src, dst;
	uint16_t ip_id, ip_len;
};

// The codec's hash (fec_store.c fec_id_hash): the 12 bytes before the check.
inline uint32_t own_hash(const Key &k)
{
	uint64_t a, b, h;
	std::memcpy(&a, &k, 8);
	std::memcpy(&b, reinterpret_cast<const uint8_t *>(&k) + 8, 4);
	b &= 0xffffffffull;
	h = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	return uint32_t(h >> 32);
}

struct Own {
	std::vector<uint32_t> ht = std::vector<uint32_t>(kSlots, kNone);
	std::vector<Key> rec = std::vector<Key>(kLive);
	std::vector<uint32_t> hash = std::vector<uint32_t>(kLive);
	void insert(uint32_t ri, const Key &k)
	{
		rec[ri] = k;
		hash[ri] = own_hash(k);
		uint32_t i = hash[ri] & (kSlots - 1);
		while (ht[i] != kNone)
			i = (i + 1) & (kSlots - 1);
		ht[i] = ri;
	}
	uint32_t lookup(const Key &k) const
	{
		uint32_t h = own_hash(k);
		for (uint32_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
			uint32_t ri = ht[i];
			if (ri == kNone)
				return kNone;
			if (hash[ri] == h && std::memcmp(&rec[ri], &k, sizeof(k)) == 0)
				return ri;
		}
	}
};

Key key_of(uint32_t x)
{
	// Addresses of one host pair, IP ids counting up, lengths of a TCP stream.
	return Key{0x0a000001u, 0x0a000002u, uint16_t(x * 7919u), uint16_t(1500 - (x % 3) * 8)};
}

// range(0): 0 the codec's table, 1 rte_hash; range(1): 1 hits, 0 misses.
void BM_IdLookup(benchmark::State &st)
{
	const bool rte = st.range(0) != 0, hit = st.range(1) != 0;
	std::vector<Key> probe(kLive);
	for (uint32_t i = 0; i < kLive; i++)
		probe[i] = key_of(hit ? (i * 2654435761u) % kLive : kLive + i);
	uint64_t found = 0;
	if (rte) {
		char name[32];
		std::snprintf(name, sizeof(name), "idx%d", int(hit));
		rte_hash_parameters p{};
		p.name = name;
		p.entries = kSlots;
		p.key_len = sizeof(Key);
		p.hash_func = rte_hash_crc;
		p.socket_id = int(rte_socket_id());
		rte_hash *h = rte_hash_create(&p);
		for (uint32_t i = 0; i < kLive; i++) {
			Key k = key_of(i);
			rte_hash_add_key(h, &k);
		}
		uint32_t i = 0;
		for (auto _ : st) {
			found += rte_hash_lookup(h, &probe[i]) >= 0;
			i = (i + 1) & (kLive - 1);
		}
		rte_hash_free(h);
	} else {
		Own o;
		for (uint32_t i = 0; i < kLive; i++)
			o.insert(i, key_of(i));
		uint32_t i = 0;
		for (auto _ : st) {
			found += o.lookup(probe[i]) != kNone;
			i = (i + 1) & (kLive - 1);
		}
	}
	if ((found != 0) != hit)
		st.SkipWithError("lookups did not find what they should");
	st.SetItemsProcessed(int64_t(st.iterations()));
}

BENCHMARK(BM_IdLookup)->ArgNames({"rte_hash", "hit"})->ArgsProduct({{0, 1}, {1, 0}});

} // namespace

int main(int argc, char **argv)
{
	const char *eal[] = {argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0",
			     "--file-prefix", "il-bench-fec-index", "--log-level", "lib.eal:error",
			     nullptr};
	if (rte_eal_init(11, const_cast<char **>(eal)) < 0) {
		std::fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	rte_eal_cleanup();
	return 0;
}
