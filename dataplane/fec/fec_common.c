/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FEC codec pieces shared by encoder and decoder: configuration and its
 * validation, packet identity, XOR kernels, closed-form recovery curves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <isa-l/raid.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define FEC_HAVE_AVX2 1
#else
#define FEC_HAVE_AVX2 0
#endif

#include <interlink/err.h>

#include "fec_internal.h"

/* ---- configuration ---------------------------------------------------- */

void il_fec_cfg_defaults(struct il_fec_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->code = IL_FEC_CODE_XOR;
	cfg->r = 8;
	cfg->c = 3;
	cfg->interleave[0] = 1;
	cfg->interleave[1] = 11;
	cfg->interleave[2] = 19;
	cfg->stagger = true;
	cfg->delay_xor = false;
	cfg->xor_impl = IL_FEC_XOR_AVX2;
	cfg->lan_mtu = 1500;
	cfg->span_extra = 0;
	cfg->link_mtu = 9000;
	cfg->dec_max_pkts = 4096;
	cfg->dec_max_repairs = 1024;
	cfg->dec_max_age_ns = 1000000000ull;
	cfg->verify_l3_off = 0;
}

uint32_t il_fec_repair_max_len(const struct il_fec_cfg *cfg)
{
	return IL_FEC_REPAIR_HDR_LEN(cfg->r) + fec_max_span(cfg);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Interleaves a < b share packets every LCM(a, b) packets. A bin of the
 * a-layer spans (r-1)*a + 1 packets, so two of its repairs' packets can
 * coincide with one b-bin only when LCM(a, b) <= (r-1)*a. (The paper's
 * rule, LCM > r*a, is this condition with a little margin.) */
static void check_overlap(const struct il_fec_cfg *cfg, char *warn, size_t warnlen)
{
	size_t used = 0;

	for (unsigned l = 0; l < cfg->c; l++) {
		for (unsigned m = l + 1; m < cfg->c; m++) {
			uint64_t a = cfg->interleave[l], b = cfg->interleave[m];
			uint64_t span, lcm, shared;
			int n;

			if (a > b) {
				uint64_t t = a;

				a = b;
				b = t;
			}
			lcm = a / gcd64(a, b) * b;
			span = (uint64_t)(cfg->r - 1) * a;
			if (lcm > span)
				continue;
			shared = span / lcm + 1;
			if (shared > cfg->r)
				shared = cfg->r;
			if (!warn || used >= warnlen)
				continue;
			n = snprintf(warn + used, warnlen - used,
				     "%sfec.interleaves: layers %u (i=%u) and %u (i=%u) let two "
				     "repairs share up to %u packets (LCM %llu <= (r-1)*%llu = %llu); "
				     "the paper's rule of thumb is relatively prime interleaves with "
				     "the largest above r",
				     used ? "; " : "", l, cfg->interleave[l], m, cfg->interleave[m],
				     (unsigned)shared, (unsigned long long)lcm,
				     (unsigned long long)a, (unsigned long long)span);
			if (n > 0)
				used += (size_t)n;
		}
	}
}

int il_fec_cfg_check(const struct il_fec_cfg *cfg, char *err, size_t errlen, char *warn,
		     size_t warnlen)
{
	uint64_t need, settle;
	unsigned layers;

	if (errlen)
		err[0] = '\0';
	if (warn && warnlen)
		warn[0] = '\0';
	if (cfg->code != IL_FEC_CODE_XOR && cfg->code != IL_FEC_CODE_RS)
		return ERR("fec.code = %u is unknown; allowed: xor (%u), rs (%u)", cfg->code,
		           IL_FEC_CODE_XOR, IL_FEC_CODE_RS);
	if (cfg->r < 2 || cfg->r > IL_FEC_MAX_R)
		return ERR("fec.r = %u is out of range; allowed: 2..%u (with r = 1 a repair would "
		           "only copy one packet)",
		           cfg->r, IL_FEC_MAX_R);
	if (cfg->c < 1 || cfg->c > IL_FEC_MAX_C)
		return ERR("fec.c = %u is out of range; allowed: 1..%u", cfg->c, IL_FEC_MAX_C);
	layers = fec_layers(cfg);
	for (unsigned l = 0; l < layers; l++) {
		if (cfg->interleave[l] < 1 || cfg->interleave[l] > IL_FEC_MAX_INTERLEAVE)
			return ERR("fec.interleaves[%u] = %u is out of range; allowed: 1..%u "
			           "(%s)",
			           l, cfg->interleave[l], IL_FEC_MAX_INTERLEAVE,
			           cfg->code == IL_FEC_CODE_RS
				           ? "the Reed-Solomon block interleave"
				           : "one interleave per layer, c of them");
	}
	if (cfg->xor_impl > IL_FEC_XOR_AVX2)
		return ERR("fec.xor_impl = %u is unknown; allowed: isal (%u), ref (%u), "
		           "isal-xorgen (%u), avx2 (%u)",
		           cfg->xor_impl, IL_FEC_XOR_ISAL, IL_FEC_XOR_REF, IL_FEC_XOR_ISAL_XORGEN,
		           IL_FEC_XOR_AVX2);
	if (cfg->lan_mtu < 68)
		return ERR("fec.lan_mtu = %u is out of range; allowed: 68..65535 (the IPv4 minimum "
		           "is 68)",
		           cfg->lan_mtu);
	if (fec_max_span(cfg) > 65535)
		return ERR("fec.lan_mtu + fec.span_extra = %u is too large; allowed: at most 65535",
		           fec_max_span(cfg));
	/* A repair carries the longest span plus its headers in one IPv4
	 * datagram; if that exceeds the link MTU it fragments, and losing
	 * either fragment loses the repair (the paper's Fig. 10 setup). */
	need = IL_FEC_IP_UDP_LEN + il_fec_repair_max_len(cfg);
	if (cfg->link_mtu < need)
		return ERR("fec.link_mtu = %u is too small: a repair for fec.lan_mtu = %u "
		           "(+ fec.span_extra = %u) at r = %u needs %llu bytes (IPv4+UDP %u, "
		           "Interlink header %u, FEC body %u, recipe %u x %u, payload %u); raise "
		           "fec.link_mtu to at least %llu or lower fec.lan_mtu",
		           cfg->link_mtu, cfg->lan_mtu, cfg->span_extra, cfg->r,
		           (unsigned long long)need, IL_FEC_IP_UDP_LEN, IL_HDR_LEN, IL_FEC_BODY_LEN,
		           cfg->r, IL_FEC_ID_LEN, fec_max_span(cfg), (unsigned long long)need);
	if (cfg->verify_l3_off < -1 || cfg->verify_l3_off > (int32_t)cfg->span_extra)
		return ERR("fec.verify_l3_off = %d is out of range; allowed: -1 (no check) or "
		           "0..fec.span_extra (%u)",
		           cfg->verify_l3_off, cfg->span_extra);
	/* The decoder must still hold a packet when the last repair that
	 * contains it arrives, or it cannot use that repair. */
	settle = fec_settle_span(cfg);
	if (cfg->dec_max_pkts < settle || cfg->dec_max_pkts > (1u << 22))
		return ERR("fec.dec_max_pkts = %u is out of range; allowed: %llu..%u (a packet "
		           "must stay until the last repair holding it, (r-1) x max "
		           "interleave%s + 1 = %llu packets later)",
		           cfg->dec_max_pkts, (unsigned long long)settle, 1u << 22,
		           cfg->delay_xor ? " + max interleave" : "", (unsigned long long)settle);
	if (cfg->dec_max_age_ns > 3600ull * 1000000000ull)
		return ERR("fec.dec_max_age_ns = %llu is out of range; allowed: 0 (no age limit) "
		           "..3600 s",
		           (unsigned long long)cfg->dec_max_age_ns);
	if (cfg->dec_max_repairs < cfg->c || cfg->dec_max_repairs > (1u << 20))
		return ERR("fec.dec_max_repairs = %u is out of range; allowed: %u..%u (at least c)",
		           cfg->dec_max_repairs, cfg->c, 1u << 20);

	if (cfg->code == IL_FEC_CODE_XOR)
		check_overlap(cfg, warn, warnlen);
	if (warn && warnlen && cfg->dec_max_pkts < 2 * settle) {
		size_t used = strlen(warn);

		if (used < warnlen)
			snprintf(warn + used, warnlen - used,
				 "%sfec.dec_max_pkts = %u is below twice the repair span (%llu): "
				 "reordering or bursts of repairs will evict packets before "
				 "their last repair",
				 used ? "; " : "", cfg->dec_max_pkts,
				 (unsigned long long)(2 * settle));
	}
	return 0;
}

/* ---- memory ----------------------------------------------------------- */

void *fec_alloc(const struct il_fec_cfg *cfg, size_t size)
{
	void *p;

	size = (size + FEC_ALIGN - 1) / FEC_ALIGN * FEC_ALIGN;
	if (cfg->alloc)
		p = cfg->alloc(size, FEC_ALIGN, cfg->alloc_arg);
	else
		p = aligned_alloc(FEC_ALIGN, size);
	if (p)
		memset(p, 0, size);
	return p;
}

void fec_free(const struct il_fec_cfg *cfg, void *p)
{
	if (!p)
		return;
	if (cfg->free)
		cfg->free(p, cfg->alloc_arg);
	else
		free(p);
}

/* ---- packet identity -------------------------------------------------- */

typedef uint32_t fec_v4u __attribute__((vector_size(16)));

/*
 * Fletcher-style sums in eight 32-bit lanes: a += w, b += a per 32-byte
 * block. The b lanes weigh every word by its distance from the end, so
 * swapped words change the result, unlike a plain ones'-complement sum;
 * the lanes vectorise on any x86-64. The 16 lane values and the length
 * are folded with independent multiplies and a final avalanche.
 */
static uint32_t check_fold(fec_v4u a0, fec_v4u a1, fec_v4u b0, fec_v4u b1, uint32_t len)
{
	static const uint64_t mul[4] = {
		0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
		0x165667b19e3779f9ull, 0xd6e8feb86659fd93ull,
	};
	uint64_t h = len;

	for (unsigned k = 0; k < 4; k++) {
		h += ((uint64_t)a0[k] << 32 | a1[k]) * mul[k];
		h += ((uint64_t)b0[k] << 32 | b1[k]) * mul[3 - k];
	}
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

uint32_t il_fec_payload_check(const void *data, uint32_t len)
{
	const uint8_t *p = data;
	fec_v4u a0 = { 0 }, a1 = { 0 }, b0 = { 0 }, b1 = { 0 };
	uint32_t j = 0;

	for (; j + 32 <= len; j += 32) {
		fec_v4u w0, w1;

		memcpy(&w0, p + j, 16);
		memcpy(&w1, p + j + 16, 16);
		a0 += w0;
		a1 += w1;
		b0 += a0;
		b1 += a1;
	}
	if (j < len) {
		uint8_t tail[32] = { 0 };
		fec_v4u w0, w1;

		memcpy(tail, p + j, len - j);
		memcpy(&w0, tail, 16);
		memcpy(&w1, tail + 16, 16);
		a0 += w0;
		a1 += w1;
		b0 += a0;
		b1 += a1;
	}
	return check_fold(a0, a1, b0, b1, len);
}

int il_fec_id_ipv4_tuple(const void *ip, uint32_t avail, struct il_fec_id *id)
{
	const uint8_t *h = ip;
	uint32_t ihl, tot;

	if (avail < 20 || (h[0] >> 4) != 4)
		return -1;
	ihl = (uint32_t)(h[0] & 0x0f) * 4;
	tot = il_get16(h + 2);
	if (ihl < 20 || tot < ihl || tot > avail)
		return -1;
	memcpy(&id->src, h + 12, 4);
	memcpy(&id->dst, h + 16, 4);
	memcpy(&id->ip_id, h + 4, 2);
	memcpy(&id->ip_len, h + 2, 2);
	id->csum = 0;
	return 0;
}

int il_fec_id_ipv4(const void *ip, uint32_t avail, struct il_fec_id *id)
{
	const uint8_t *h = ip;

	if (il_fec_id_ipv4_tuple(ip, avail, id) != 0)
		return -1;
	uint32_t ihl = (uint32_t)(h[0] & 0x0f) * 4;
	id->csum = htonl(il_fec_payload_check(h + ihl, il_get16(h + 2) - ihl));
	return 0;
}

/* ---- XOR -------------------------------------------------------------- */

static inline bool aligned32(const void *p)
{
	return ((uintptr_t)p & 31) == 0;
}

bool fec_cpu_avx2(void)
{
#if FEC_HAVE_AVX2
	static int have = -1;

	if (have < 0)
		have = __builtin_cpu_supports("avx2") ? 1 : 0;
	return have == 1;
#else
	return false;
#endif
}

unsigned fec_impl_in_force(unsigned impl)
{
	return impl == IL_FEC_XOR_AVX2 && !fec_cpu_avx2() ? IL_FEC_XOR_ISAL : impl;
}

#if FEC_HAVE_AVX2
/* dst[k][0, len) ^= src[0, len) for k < n: the source read once, 64 bytes
 * at a time, each bin loaded, XORed and stored with ordinary stores (the
 * bins are read again soon: the next packet, the repair's copy), any
 * alignment. ISA-L's xor_gen stores around the cache, and its
 * multiply-by-1 costs two table lookups per byte block and bin. */
__attribute__((target("avx2"))) static void xor_multi_avx2(uint8_t *const *dst, unsigned n,
							    const uint8_t *src, uint32_t len)
{
	uint32_t i = 0;

	for (; i + 64 <= len; i += 64) {
		const __m256i s0 = _mm256_loadu_si256((const __m256i *)(src + i));
		const __m256i s1 = _mm256_loadu_si256((const __m256i *)(src + i + 32));

		for (unsigned k = 0; k < n; k++) {
			__m256i *d = (__m256i *)(dst[k] + i);

			_mm256_storeu_si256(d, _mm256_xor_si256(_mm256_loadu_si256(d), s0));
			_mm256_storeu_si256(d + 1, _mm256_xor_si256(_mm256_loadu_si256(d + 1), s1));
		}
	}
	if (i + 32 <= len) {
		const __m256i s0 = _mm256_loadu_si256((const __m256i *)(src + i));

		for (unsigned k = 0; k < n; k++) {
			__m256i *d = (__m256i *)(dst[k] + i);

			_mm256_storeu_si256(d, _mm256_xor_si256(_mm256_loadu_si256(d), s0));
		}
		i += 32;
	}
	if (i < len)
		for (unsigned k = 0; k < n; k++)
			il_xor(dst[k] + i, src + i, len - i);
}
#endif

#if FEC_HAVE_AVX2
/* xor_multi_avx2 over [off, len) in 32-byte blocks from off, with the
 * payload check of src[off, len) summed from the same loads (the check's
 * two 16-byte halves are one 32-byte register's lanes 0-3 and 4-7). The
 * bytes before off and the last partial block are XORed in C. Kept apart
 * from xor_multi_avx2: running the XOR alone through this loop (off 0,
 * the check thrown away) made one 1500-byte XOR into one bin 119 ns
 * against 76 (BM_Xor, 2026-11-28). */
__attribute__((target("avx2"))) static uint32_t
xor_multi_check_avx2(uint8_t *const *dst, unsigned n, const uint8_t *src, uint32_t len,
		     uint32_t off)
{
	__m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
	uint32_t i = off, lane[16];
	fec_v4u a0, a1, b0, b1;

	for (unsigned k = 0; k < n && off; k++)
		il_xor(dst[k], src, off);
	for (; i + 32 <= len; i += 32) {
		const __m256i s = _mm256_loadu_si256((const __m256i *)(src + i));

		a = _mm256_add_epi32(a, s);
		b = _mm256_add_epi32(b, a);
		for (unsigned k = 0; k < n; k++) {
			__m256i *d = (__m256i *)(dst[k] + i);

			_mm256_storeu_si256(d, _mm256_xor_si256(_mm256_loadu_si256(d), s));
		}
	}
	if (i < len) {
		uint8_t tail[32] = { 0 };
		__m256i s;

		memcpy(tail, src + i, len - i);
		s = _mm256_loadu_si256((const __m256i *)tail);
		a = _mm256_add_epi32(a, s);
		b = _mm256_add_epi32(b, a);
		for (unsigned k = 0; k < n; k++)
			il_xor(dst[k] + i, src + i, len - i);
	}
	_mm256_storeu_si256((__m256i *)lane, a);
	_mm256_storeu_si256((__m256i *)(lane + 8), b);
	memcpy(&a0, lane, 16);
	memcpy(&a1, lane + 4, 16);
	memcpy(&b0, lane + 8, 16);
	memcpy(&b1, lane + 12, 16);
	return check_fold(a0, a1, b0, b1, len - off);
}
#endif

uint32_t fec_xor_multi_check(uint8_t *const *dst, unsigned n, const void *src, uint32_t len,
			     uint32_t off)
{
#if FEC_HAVE_AVX2
	if (fec_cpu_avx2())
		return xor_multi_check_avx2(dst, n, src, len, off);
#endif
	for (unsigned k = 0; k < n; k++)
		il_xor(dst[k], src, len);
	return il_fec_payload_check((const uint8_t *)src + off, len - off);
}

bool fec_xor_multi(uint8_t *const *dst, unsigned n, const void *src, uint32_t len)
{
#if FEC_HAVE_AVX2
	if (fec_cpu_avx2()) {
		xor_multi_avx2(dst, n, src, len);
		return true;
	}
#endif
	for (unsigned k = 0; k < n; k++)
		il_xor(dst[k], src, len);
	return false;
}

bool fec_xor1(unsigned impl, void *dst, const void *src, uint32_t len)
{
	impl = fec_impl_in_force(impl);
	if (impl == IL_FEC_XOR_AVX2) {
		uint8_t *d = dst;

		return fec_xor_multi(&d, 1, src, len);
	}
	if (impl != IL_FEC_XOR_REF && aligned32(dst) && aligned32(src)) {
		/* xor_gen wants >= 3 vectors with the destination last; it
		 * reads each block before writing it, so the destination may
		 * also be the first source (checked in the unit tests). */
		void *v[3] = { dst, (void *)(uintptr_t)src, dst };

		if (xor_gen(3, (int)len, v) == 0)
			return true;
	}
	il_xor(dst, src, len);
	return false;
}

bool il_fec_xor_acc(unsigned impl, void *dst, const void *const *src, unsigned n, uint32_t len)
{
	void *v[IL_FEC_MAX_R + 2];
	bool ok;

	impl = fec_impl_in_force(impl);
	if (impl == IL_FEC_XOR_AVX2) {
		uint8_t *d = dst;
		bool simd = n > 0;

		for (unsigned k = 0; k < n; k++)
			simd = fec_xor_multi(&d, 1, src[k], len) && simd;
		return simd;
	}
	ok = impl != IL_FEC_XOR_REF && n >= 1 && n <= IL_FEC_MAX_R && aligned32(dst);

	for (unsigned k = 0; ok && k < n; k++)
		ok = aligned32(src[k]);
	if (ok) {
		v[0] = dst;
		for (unsigned k = 0; k < n; k++)
			v[k + 1] = (void *)(uintptr_t)src[k];
		v[n + 1] = dst;
		if (xor_gen((int)n + 2, (int)len, v) == 0)
			return true;
	}
	for (unsigned k = 0; k < n; k++)
		il_xor(dst, src[k], len);
	return false;
}

/* ---- closed forms (Maelstrom §4.4) ------------------------------------ */

/* Integer powers: keeps the library free of libm. */
static double powu(double b, unsigned e)
{
	double v = 1.0;

	while (e--)
		v *= b;
	return v;
}

double il_fec_li_bound(double p, unsigned r, unsigned c)
{
	double x = 1.0 - powu(1.0 - p, r);

	return 1.0 - powu(x, c);
}

double il_fec_rs_prob(double p, unsigned r, unsigned c)
{
	unsigned n = r + c - 1;
	double sum = 0.0, binom = 1.0;

	for (unsigned z = 0; z < c; z++) {
		if (z > 0)
			binom = binom * (double)(n - z + 1) / (double)z;
		sum += binom * powu(p, z) * powu(1.0 - p, n - z);
	}
	return sum;
}

const char *il_fec_bad_name(unsigned reason)
{
	static const char *const names[IL_FEC_BAD_COUNT_] = {
		[IL_FEC_OK] = "ok",
		[IL_FEC_BAD_SHORT] = "short",
		[IL_FEC_BAD_VERSION] = "version",
		[IL_FEC_BAD_TYPE] = "type",
		[IL_FEC_BAD_HDR_LEN] = "hdr_len",
		[IL_FEC_BAD_LINK] = "link",
		[IL_FEC_BAD_CODE] = "code",
		[IL_FEC_BAD_RATE] = "rate",
		[IL_FEC_BAD_LAYER] = "layer",
		[IL_FEC_BAD_COUNT] = "count",
		[IL_FEC_BAD_ID_LEN] = "id_len",
		[IL_FEC_BAD_INTERLEAVE] = "interleave",
		[IL_FEC_BAD_XOR_LEN] = "xor_len",
		[IL_FEC_BAD_LENGTH] = "length",
	};
	return reason < IL_FEC_BAD_COUNT_ ? names[reason] : "unknown";
}
