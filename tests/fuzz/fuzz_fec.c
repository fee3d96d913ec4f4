/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the FEC codec (dataplane/fec: the real encoder and
 * decoder, layered XOR and Reed-Solomon, ISA-L and plain C kernels) on a
 * link the input drives: IPv4 packets go through the encoder and reach
 * the decoder or are lost; the repairs the encoder emits are delivered,
 * dropped, reordered or damaged; repairs made of input bytes alone arrive
 * too; time passes, the encoder flushes, originals come late or twice.
 *
 * Checked, besides memory safety: while every repair the decoder got came
 * from the encoder undamaged, a recovered packet is byte for byte the lost
 * original, was lost and is recovered once. Whatever arrives, a recovery
 * the decoder verifies (verify_l3_off) carries the id it was recovered
 * for.
 *
 * Sixteen encoder/decoder pairs (XOR and RS, ISA-L and plain C kernels,
 * two rates, verification on and off) are made once; an input picks one
 * and resets it (il_fec_enc_reset, il_fec_dec_reset), so it starts from
 * a new codec without allocating. Their memory is sized small (three dozen
 * packets of at most 128 bytes): the decoder's evictions are reached
 * within an input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/fec.h>
#include <interlink/wire.h>

#include "fz.h"

#define MAX_PKTS 48 /* originals an input may send */
#define LAN_MTU 128
#define QMAX 32     /* repairs waiting on the link */

struct orig {
	struct il_fec_id id;
	uint16_t len;
	bool lost, recovered;
	uint8_t b[LAN_MTU];
};

static struct {
	struct orig o[MAX_PKTS];
	unsigned n;
	uint8_t q[QMAX][IL_FEC_REPAIR_HDR_LEN(IL_FEC_MAX_R) + LAN_MTU];
	uint32_t qlen[QMAX];
	unsigned qhead, qn;
	bool tainted; /* the decoder got something the encoder did not make */
	bool verify;
	uint64_t now;
	struct il_fec_dec *d;
} L;

FZ_HARNESS static void emit(void *arg, const uint8_t *msg, uint32_t len,
		 const struct il_fec_repair_info *info)
{
	(void)arg;
	(void)info;
	FZ_CHECK(len <= sizeof(L.q[0]), "a repair of %u bytes", len);
	if (L.qn == QMAX) { /* the link's queue is full: the oldest is lost */
		L.qhead = (L.qhead + 1) % QMAX;
		L.qn--;
	}
	unsigned i = (L.qhead + L.qn++) % QMAX;
	memcpy(L.q[i], msg, len);
	L.qlen[i] = len;
}

FZ_HARNESS static void deliver(void *arg, const uint8_t *span, uint32_t len,
		    const struct il_fec_recovery *rec)
{
	struct il_fec_id id;

	(void)arg;
	if (L.verify) {
		FZ_CHECK(il_fec_id_ipv4(span, len, &id) == 0 && il_fec_id_eq(&id, rec->id),
			 "a verified recovery is not the packet it was recovered for");
	}
	if (L.tainted)
		return;
	for (unsigned i = 0; i < L.n; i++) {
		struct orig *o = &L.o[i];

		if (!il_fec_id_eq(&o->id, rec->id))
			continue;
		FZ_CHECK(len == o->len && !memcmp(span, o->b, len),
			 "packet %u recovered wrong (%u bytes for %u)", i, len, o->len);
		/* A decoder that forgot a packet (evicted it) may recover it
		 * again, or recover one that arrived: it cannot know. */
		const struct il_fec_dec_stats *st = il_fec_dec_stats(L.d);
		if (st->pkt_evict_count + st->pkt_evict_age == 0) {
			FZ_CHECK(o->lost, "packet %u recovered though it arrived", i);
			FZ_CHECK(!o->recovered, "packet %u recovered twice", i);
		}
		o->recovered = true;
		return;
	}
	FZ_CHECK(0, "recovered a packet that was never sent");
}

/* An IPv4/UDP packet of len bytes, unique id n, payload from the input. */
FZ_HARNESS static void make_pkt(struct orig *o, unsigned n, uint16_t len, struct fz *z)
{
	size_t got;
	const uint8_t *p = fz_bytes(z, len - 28u, &got);

	memset(o->b, 0, len);
	o->b[0] = 0x45;
	il_put16(o->b + 2, len);
	il_put16(o->b + 4, (uint16_t)(0x4000 + n));
	o->b[8] = 64;
	o->b[9] = 17;
	il_put32(o->b + 12, 0x0a000001);
	il_put32(o->b + 16, 0x0a000002);
	il_put16(o->b + 20, 5000);
	il_put16(o->b + 22, 6000);
	il_put16(o->b + 24, (uint16_t)(len - 20));
	memcpy(o->b + 28, p, got);
	o->len = len;
	o->lost = o->recovered = false;
	if (il_fec_id_ipv4(o->b, len, &o->id) != 0)
		abort();
}

#define N_CODECS 16
static struct il_fec_enc *encs[N_CODECS];
static struct il_fec_dec *decs[N_CODECS];
static struct il_fec_cfg cfgs[N_CODECS];

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	for (unsigned i = 0; i < N_CODECS; i++) {
		struct il_fec_cfg *cfg = &cfgs[i];

		il_fec_cfg_defaults(cfg);
		cfg->code = i & 1 ? IL_FEC_CODE_RS : IL_FEC_CODE_XOR;
		cfg->xor_impl = i & 2 ? IL_FEC_XOR_REF : i & 8 ? IL_FEC_XOR_AVX2 : IL_FEC_XOR_ISAL;
		cfg->r = i & 4 ? 5 : 3;
		cfg->c = i & 4 ? 3 : 2;
		cfg->interleave[0] = 1;
		cfg->interleave[1] = 3;
		cfg->interleave[2] = 5;
		cfg->verify_l3_off = i & 8 ? 0 : -1;
		cfg->stagger = ((i >> 3) ^ (i >> 2)) & 1;
		cfg->delay_xor = (i >> 1) & 1;
		cfg->lan_mtu = LAN_MTU;
		cfg->dec_max_pkts = 32;
		cfg->dec_max_repairs = 8;
		cfg->dec_max_age_ns = 50000000ull;
		encs[i] = il_fec_enc_create(cfg, emit, NULL, err, sizeof(err));
		decs[i] = il_fec_dec_create(cfg, deliver, NULL, err, sizeof(err));
		if (encs[i] == NULL || decs[i] == NULL) {
			fprintf(stderr, "codec %u: %s\n", i, err);
			abort();
		}
	}
	return 0;
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz z = { data, size };
	unsigned which = fz_u8(&z) % N_CODECS;
	const struct il_fec_cfg *cfg = &cfgs[which];
	struct il_fec_enc *e = encs[which];
	struct il_fec_dec *d = decs[which];

	memset(&L, 0, sizeof(L));
	L.now = 1000000000ull;
	L.verify = cfg->verify_l3_off == 0;
	L.d = d;
	il_fec_enc_reset(e);
	il_fec_dec_reset(d);
	for (unsigned ops = 0; z.n > 0 && ops < 64; ops++) {
		uint8_t op = fz_u8(&z);

		switch (op % 8) {
		case 0:
		case 1: { /* an original packet: through the encoder, then lost or not */
			if (L.n == MAX_PKTS)
				break;
			struct orig *o = &L.o[L.n];

			make_pkt(o, L.n, (uint16_t)(28 + fz_u8(&z) % (LAN_MTU - 27)), &z);
			L.n++;
			FZ_CHECK(il_fec_enc_add(e, &o->id, o->b, o->len) == 0, "span refused");
			L.now += 1000;
			if (op & 0x80) {
				o->lost = true;
			} else {
				enum il_fec_verdict v = il_fec_dec_data(d, &o->id, o->b, o->len,
									L.now);

				if (!L.tainted)
					FZ_CHECK(v == IL_FEC_FORWARD, "an original refused");
			}
			break;
		}
		case 2: /* the next repair arrives */
		case 3: {
			if (L.qn == 0)
				break;
			unsigned i = L.qhead;
			uint32_t len = L.qlen[i];

			L.qhead = (L.qhead + 1) % QMAX;
			L.qn--;
			if (op & 0x80) { /* damaged on the way: one byte, or cut */
				uint16_t at = fz_u16(&z);

				if (op & 0x40)
					len = at % (len + 1);
				else
					L.q[i][at % len] ^= (uint8_t)(1u << (op >> 3 & 7));
				L.tainted = true;
			}
			il_fec_dec_repair(d, L.q[i], len, L.now);
			break;
		}
		case 4: /* the next repair is lost */
			if (L.qn) {
				L.qhead = (L.qhead + 1) % QMAX;
				L.qn--;
			}
			break;
		case 5: { /* a repair made of input bytes: the header right, or not */
			size_t got;
			const uint8_t *b = fz_chunk(&z, sizeof(L.q[0]), &got);
			uint8_t *m = malloc(got ? got : 1);

			if (m == NULL)
				abort();
			memcpy(m, b, got);
			if ((op & 0x80) && got >= IL_HDR_LEN) {
				m[IL_OFF_VERSION] = IL_VERSION;
				m[IL_OFF_TYPE] = IL_T_FEC_REPAIR;
				m[IL_OFF_HDR_LEN] = IL_HDR_LEN;
				il_put16(m + IL_OFF_GROUP_ID, cfg->link_id);
			}
			L.tainted = true;
			il_fec_dec_repair(d, m, (uint32_t)got, L.now);
			free(m);
			break;
		}
		case 6: /* the encoder flushes; time passes */
			il_fec_enc_flush(e, op & 0x80);
			L.now += (uint64_t)fz_u16(&z) * 10000u;
			il_fec_dec_tick(d, L.now);
			break;
		default: { /* an original that was lost arrives late, or one again */
			if (L.n == 0)
				break;
			struct orig *o = &L.o[fz_u8(&z) % L.n];
			enum il_fec_verdict v = il_fec_dec_data(d, &o->id, o->b, o->len, L.now);

			if (!L.tainted && v == IL_FEC_DROP_LATE)
				FZ_CHECK(o->recovered, "a late original dropped, never recovered");
			if (!L.tainted && o->lost && o->recovered &&
			    il_fec_dec_stats(d)->pkt_evict_count + il_fec_dec_stats(d)->pkt_evict_age == 0)
				FZ_CHECK(v == IL_FEC_DROP_LATE, "a recovered packet arrived and was forwarded again");
			o->lost = false;
			break;
		}
		}
	}
	return 0;
}
