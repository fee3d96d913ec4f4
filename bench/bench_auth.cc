// SPDX-License-Identifier: BSD-3-Clause
// What authenticated control traffic costs per message (lib/auth, keyed
// BLAKE2b-128 from libsodium): signing an ACK, verifying it with the
// replay check, and the same for a JOIN and a 6-member VIEW. ns and TSC
// cycles per message, one core.
//
//   ./build/bench/bench_auth --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstring>

#include <x86intrin.h>

extern "C" {
#include <interlink/auth.h>
#include <interlink/wire_msg.h>
}

namespace {

il_auth_key key()
{
	il_auth_key k{};
	k.id = 1;
	for (unsigned i = 0; i < IL_AUTH_KEY_LEN; i++)
		k.key[i] = uint8_t(i * 7);
	return k;
}

// An unsigned message of the given type as a host sends it; its length.
uint32_t build(uint8_t *m, unsigned type, uint32_t sender)
{
	il_hdr_fields h{};
	h.type = uint8_t(type);
	h.group_id = 1;
	h.sender_id = sender;
	h.epoch = 5;
	h.global_seq = 1000;
	uint8_t *b = il_hdr_put(m, &h);
	switch (type) {
	case IL_T_ACK:
		return uint32_t(il_ack_put(b, 3, 100) - m);
	case IL_T_VIEW:
		b = il_view_put(b, 3, 6, 0);
		for (unsigned i = 0; i < 6; i++)
			b = il_view_member_put(b, 1000 + i, IL_ROLE_RECEIVER);
		return uint32_t(b - m);
	default:
		return uint32_t(il_member_put(b, IL_ROLE_RECEIVER, 1) - m);
	}
}

void cycles(benchmark::State &st, uint64_t t0, uint64_t n)
{
	st.counters["cycles_per_msg"] = double(__rdtsc() - t0) / double(n);
	st.SetItemsProcessed(int64_t(n));
}

void BM_sign(benchmark::State &st)
{
	const il_auth_key k = key();
	uint8_t m[256];
	const uint32_t len = build(m, unsigned(st.range(0)), 1001);
	uint8_t s[256];
	uint64_t ctr = 1, n = 0;

	memcpy(s, m, len);
	uint32_t slen = il_auth_seal(&k, ctr, s, len);
	uint64_t t0 = __rdtsc();
	for (auto _ : st) {
		il_auth_sign(&k, ++ctr, s, slen);
		benchmark::DoNotOptimize(s[IL_OFF_AUTH_MAC]);
		n++;
	}
	cycles(st, t0, n);
}

// Verify with the replay check, 64 senders. After the first round every
// message is a replay: the MAC is computed and the window looked up all
// the same (the MAC comes first), so the cost is the same as for fresh ones.
void BM_verify(benchmark::State &st)
{
	il_auth_keyring kr{};
	kr.n = 1;
	kr.k[0] = key();
	alignas(64) static uint8_t rbuf[sizeof(il_auth_replay) + 1024 * sizeof(il_auth_win)];
	auto *r = reinterpret_cast<il_auth_replay *>(rbuf);
	il_auth_replay_init(r, 1024);
	static uint8_t msgs[64][256];
	uint32_t lens[64];
	for (unsigned i = 0; i < 64; i++)
		lens[i] = il_auth_seal(&kr.k[0], 1, msgs[i],
				       build(msgs[i], unsigned(st.range(0)), 1000 + i));
	uint64_t n = 0, ok = 0;
	uint64_t t0 = __rdtsc();
	for (auto _ : st) {
		unsigned i = unsigned(n & 63);
		ok += il_auth_verify(&kr, r, msgs[i], lens[i]) == IL_AUTH_OK;
		n++;
	}
	cycles(st, t0, n);
	st.counters["accepted"] = double(ok);
}

} // namespace

BENCHMARK(BM_sign)->Arg(IL_T_ACK)->Arg(IL_T_JOIN)->Arg(IL_T_VIEW)->ArgName("type");
BENCHMARK(BM_verify)->Arg(IL_T_ACK)->Arg(IL_T_JOIN)->Arg(IL_T_VIEW)->ArgName("type");
BENCHMARK_MAIN();
