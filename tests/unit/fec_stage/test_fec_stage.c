/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The fec_enc and fec_dec stages on real mbufs (EAL --no-huge): the link
 * stream the encoder makes (originals unmodified, repairs as UDP behind
 * them), every single loss of that stream recovered through the decoder
 * stage exactly once and byte for byte (layered XOR and Reed-Solomon), a late original dropped and
 * counted, non-IPv4 frames passing both stages untouched, FEC off,
 * configuration errors naming their keys (the link-MTU rule), counters and
 * telemetry state, and every mbuf back in the pool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <interlink/app.h>
#include <interlink/fec.h>
#include <interlink/wire.h>

#include "../tu_state.h"

extern const struct il_stage_type il_stage_fec_enc;
extern const struct il_stage_type il_stage_fec_dec;

#define POOL_SIZE 16383
#define N_DATA 240     /* data frames in the recorded stream */
#define MAX_LINK 512   /* data + repairs */

static struct il_app app;

/* Common to both ends; the encoder sends 192.0.2.1 -> 192.0.2.2:7401. */
#define CODE "r: 8, c: 3, interleaves: [1, 11, 19], link_id: 5, port: 7401"
static const char *enc_yaml = "{" CODE ", local_ip: 192.0.2.1, peer_ip: 192.0.2.2, "
			      "idle_flush_us: 1}";
static const char *dec_yaml = "{" CODE ", local_ip: 192.0.2.2, peer_ip: 192.0.2.1, "
			      "store_pkts: 1024, store_repairs: 256}";
/* Reed-Solomon at the same (r, c), blocks of 8 consecutive packets. */
#define RS_CODE "mode: rs, r: 8, c: 3, interleaves: [1], link_id: 5, port: 7401"
static const char *enc_rs_yaml = "{" RS_CODE ", local_ip: 192.0.2.1, peer_ip: 192.0.2.2, "
				 "idle_flush_us: 1}";
static const char *dec_rs_yaml = "{" RS_CODE ", local_ip: 192.0.2.2, peer_ip: 192.0.2.1}";

/* The recorded link stream: what fec_enc emitted, as bytes. */
struct frame {
	uint16_t len;
	bool repair;
	int data_idx; /* index into data[] for originals */
	uint8_t b[2048];
};
static struct frame data[N_DATA];
static struct frame link_s[MAX_LINK];
static unsigned n_link;

static int ctr_idx(const struct il_stage_type *t, const char *name)
{
	for (unsigned i = 0; i < t->n_counters; i++)
		if (!strcmp(t->counter_names[i], name))
			return (int)i;
	fail_msg("no counter '%s' in %s", name, t->name);
	return -1;
}

static uint64_t ctr(const struct il_stage *st, const char *name)
{
	return st->ctr[ctr_idx(st->type, name)];
}

static int stage_new(struct il_stage *st, const struct il_stage_type *t, const char *yaml,
		     char *err, size_t errlen)
{
	struct il_cfg *cfg;
	char wrapped[512];
	int rc;

	memset(st, 0, sizeof(*st));
	snprintf(st->name, sizeof(st->name), "%s0", t->name);
	st->type = t;
	st->app = &app;
	st->lcore = -1;
	/* Under a key, as in an appliance config, so errors carry a path. */
	snprintf(wrapped, sizeof(wrapped), "{test: %s}", yaml);
	cfg = il_cfg_load_string(wrapped, "test", err, errlen);
	if (cfg == NULL)
		return -1;
	rc = t->create(st, il_cfg_get(cfg, "test"), &app, err, errlen);
	il_cfg_free(cfg);
	if (rc == 0 && t->bind && t->bind(st, err, errlen) != 0) {
		t->destroy(st);
		return -1;
	}
	return rc;
}

static void stage_new_ok(struct il_stage *st, const struct il_stage_type *t, const char *yaml)
{
	char err[1024];

	if (stage_new(st, t, yaml, err, sizeof(err)) != 0)
		fail_msg("create %s %s: %s", t->name, yaml, err);
}

static void stage_del(struct il_stage *st)
{
	st->type->destroy(st);
}

/* A UDP/IPv4 frame of `len` bytes (14 + IP), its payload from the seed. */
static void make_data(struct frame *f, unsigned k, uint16_t len)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f->b;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint32_t x = k * 2654435761u + 1;

	memset(f, 0, sizeof(*f));
	f->len = len;
	f->data_idx = (int)k;
	memset(&eth->dst_addr, 0x02, 6);
	memset(&eth->src_addr, 0x04, 6);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(len - 14));
	ip->packet_id = rte_cpu_to_be_16((uint16_t)k);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(0x0a000001u);
	ip->dst_addr = rte_cpu_to_be_32(0x0a000002u);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16(5000);
	udp->dst_port = rte_cpu_to_be_16(6000);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(len - 34));
	for (unsigned i = 42; i < len; i++) {
		x = x * 1103515245u + 12345u;
		f->b[i] = (uint8_t)(x >> 16);
	}
}

static struct rte_mbuf *mbuf_of(const uint8_t *b, uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(app.pool);
	void *p;

	assert_non_null(m);
	p = rte_pktmbuf_append(m, len);
	assert_non_null(p);
	memcpy(p, b, len);
	/* Junk where the stages' tags live, as a PMD leaves it: a recovered
	 * frame made in a recycled mbuf must not carry it on (feed checks). */
	memset(il_meta(m), 0xa5, sizeof(struct il_meta));
	return m;
}

static bool is_repair(const struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	return m->data_len > 42 && f[23] == IPPROTO_UDP && f[36] == 7401 >> 8 &&
	       f[37] == (7401 & 0xff);
}

/* Run the encoder over data[] in bursts of 32, then let it go idle so
 * it flushes its open bins; record everything it sends. */
static void record_stream_with(const char *yaml)
{
	struct il_stage enc;
	struct rte_mbuf *pkts[IL_BURST_CAP];
	unsigned next = 0, idle = 0;

	stage_new_ok(&enc, &il_stage_fec_enc, yaml);
	n_link = 0;
	while (next < N_DATA || idle++ < 3) {
		uint16_t n = 0, out;

		while (next < N_DATA && n < IL_BURST)
			pkts[n++] = mbuf_of(data[next].b, data[next].len), next++;
		if (n == 0)
			rte_delay_us_block(50); /* idle past idle_flush_us */
		out = enc.type->process(&enc, pkts, n);
		assert_true(out >= n);
		for (uint16_t i = 0; i < out; i++) {
			struct frame *f = &link_s[n_link++];

			assert_true(n_link <= MAX_LINK);
			f->len = pkts[i]->data_len;
			memcpy(f->b, rte_pktmbuf_mtod(pkts[i], void *), f->len);
			f->repair = is_repair(pkts[i]);
			f->data_idx = -1;
			if (i < n) {
				/* The originals lead the burst, unmodified. */
				assert_false(f->repair);
				f->data_idx = (int)(next - n + i);
				assert_int_equal(f->len, data[f->data_idx].len);
				assert_memory_equal(f->b, data[f->data_idx].b, f->len);
			} else {
				assert_true(f->repair);
			}
			rte_pktmbuf_free(pkts[i]);
		}
	}
	assert_int_equal(ctr(&enc, "protected"), N_DATA);
	assert_int_equal(ctr(&enc, "unprotected"), 0);
	assert_int_equal(ctr(&enc, "repairs_sent"), n_link - N_DATA);
	assert_int_equal(ctr(&enc, "repairs_sent"),
			 ctr(&enc, "repairs_l0") + ctr(&enc, "repairs_l1") +
				 ctr(&enc, "repairs_l2"));
	assert_true(ctr(&enc, "idle_flushes") >= 1);
	/* XOR: bins of layers 11 and 19 are open at the end (RS: 240 packets
	 * fill 30 blocks of 8 exactly, nothing to flush). */
	if (strstr(yaml, "mode: rs") == NULL)
		assert_true(ctr(&enc, "flushed_repairs") >= 1);
	stage_del(&enc);
}

static void record_stream(void)
{
	record_stream_with(enc_yaml);
}

static void check_repair_frame(const struct frame *f)
{
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(f->b + 14);
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)(ip + 1);
	const uint8_t *h = (const uint8_t *)(udp + 1);
	struct rte_ipv4_hdr h0 = *ip;

	h0.hdr_checksum = 0;
	assert_int_equal(ip->hdr_checksum, rte_ipv4_cksum(&h0));
	assert_int_equal(rte_be_to_cpu_32(ip->src_addr), 0xc0000201u);
	assert_int_equal(rte_be_to_cpu_32(ip->dst_addr), 0xc0000202u);
	assert_int_equal(rte_be_to_cpu_16(ip->fragment_offset), RTE_IPV4_HDR_DF_FLAG);
	assert_int_equal(rte_be_to_cpu_16(ip->total_length), f->len - 14);
	assert_int_equal(rte_be_to_cpu_16(udp->dgram_len), f->len - 34);
	assert_int_equal(h[0], IL_VERSION);
	assert_int_equal(h[1], IL_T_FEC_REPAIR);
	assert_int_equal(il_get16(h + IL_OFF_GROUP_ID), 5);
	/* Ethernet addresses follow the data (no peer_mac configured). */
	assert_memory_equal(f->b, data[0].b, 12);
}

/* Feed link_s[] without the frame `skip` (-1: none) through a fresh
 * decoder; count each data frame delivered and check its bytes. */
static void feed(struct il_stage *dec, int skip, unsigned *seen)
{
	struct rte_mbuf *pkts[IL_BURST_CAP], *in[IL_BURST];
	unsigned i = 0;

	memset(seen, 0, sizeof(*seen) * N_DATA);
	while (i < n_link) {
		uint16_t n = 0, out;

		for (; i < n_link && n < IL_BURST; i++)
			if ((int)i != skip)
				pkts[n++] = mbuf_of(link_s[i].b, link_s[i].len);
		memcpy(in, pkts, n * sizeof(in[0]));
		out = dec->type->process(dec, pkts, n);
		for (uint16_t j = 0; j < out; j++) {
			const uint8_t *b = rte_pktmbuf_mtod(pkts[j], const uint8_t *);
			uint16_t id = (uint16_t)(b[18] << 8 | b[19]);
			bool made = true;

			for (uint16_t k = 0; k < n; k++)
				made &= in[k] != pkts[j];
			/* A recovered frame starts untagged: no stale tags from
			 * the recycled mbuf it was copied into. */
			if (made)
				assert_int_equal(il_meta(pkts[j])->kind, IL_K_NONE);

			/* Only data leaves the decoder: repairs are consumed. */
			assert_false(is_repair(pkts[j]));
			assert_true(id < N_DATA);
			assert_int_equal(pkts[j]->data_len, data[id].len);
			assert_memory_equal(b, data[id].b, data[id].len);
			seen[id]++;
			rte_pktmbuf_free(pkts[j]);
		}
	}
}

static void every_single_loss(const char *enc_y, const char *dec_y, bool rs)
{
	unsigned seen[N_DATA], avail0 = rte_mempool_avail_count(app.pool);
	unsigned lost_data = 0;

	record_stream_with(enc_y);
	for (unsigned i = 0; i < n_link; i++)
		if (link_s[i].repair)
			check_repair_frame(&link_s[i]);
	for (int skip = -1; skip < (int)n_link; skip++) {
		struct il_stage dec;

		stage_new_ok(&dec, &il_stage_fec_dec, dec_y);
		feed(&dec, skip, seen);
		for (unsigned k = 0; k < N_DATA; k++)
			if (seen[k] != 1)
				fail_msg("lost link frame %d: data %u delivered %u times", skip, k,
					 seen[k]);
		assert_int_equal(ctr(&dec, "repairs_in"),
				 n_link - N_DATA - (skip >= 0 && link_s[skip].repair));
		if (skip >= 0 && !link_s[skip].repair) {
			lost_data++;
			assert_int_equal(ctr(&dec, "recovered"), 1);
			assert_int_equal(ctr(&dec, "recovered_l0") + ctr(&dec, "recovered_l1") +
						 ctr(&dec, "recovered_l2"),
					 1);
			assert_int_equal(ctr(&dec, "data_in"), N_DATA - 1);
			assert_int_equal(ctr(&dec, "recovered_rs"), rs ? 1 : 0);
		} else {
			assert_int_equal(ctr(&dec, "recovered"), 0);
			assert_int_equal(ctr(&dec, "data_in"), N_DATA);
		}
		assert_int_equal(ctr(&dec, "unrecoverable"), 0);
		assert_int_equal(ctr(&dec, "drop_bad_repair"), 0);
		assert_int_equal(ctr(&dec, "verify_fail"), 0);
		stage_del(&dec);
	}
	assert_int_equal(lost_data, N_DATA);
	assert_int_equal(rte_mempool_avail_count(app.pool), avail0);
}

static void test_every_single_loss_recovered(void **state)
{
	(void)state;
	every_single_loss(enc_yaml, dec_yaml, false);
}

static void test_every_single_loss_recovered_rs(void **state)
{
	(void)state;
	every_single_loss(enc_rs_yaml, dec_rs_yaml, true);
	record_stream(); /* the later tests use the XOR stream */
}

static void test_late_original_dropped_and_counted(void **state)
{
	struct rte_mbuf *pkts[IL_BURST_CAP];
	unsigned seen[N_DATA], avail0 = rte_mempool_avail_count(app.pool);
	struct il_stage dec;
	static struct tu_state ts;
	unsigned skip = 0;
	bool hist = false;

	(void)state;
	if (n_link == 0)
		record_stream();
	while (link_s[skip].repair || link_s[skip].data_idx != 100)
		skip++;
	stage_new_ok(&dec, &il_stage_fec_dec, dec_yaml);
	feed(&dec, (int)skip, seen);
	assert_int_equal(seen[100], 1);
	assert_int_equal(ctr(&dec, "recovered"), 1);
	/* The original turns up after all: dropped, so B never gets it twice. */
	pkts[0] = mbuf_of(link_s[skip].b, link_s[skip].len);
	assert_int_equal(dec.type->process(&dec, pkts, 1), 0);
	assert_int_equal(ctr(&dec, "drop_late_original"), 1);
	/* Telemetry: the latency histograms hold the recovery. */
	tu_state_collect(&dec, &ts);
	for (unsigned i = 0; i < ts.n; i++) {
		if (!strncmp(ts.key[i], "lat_pkts_", 9) && strcmp(ts.key[i], "lat_pkts_sum") &&
		    ts.val[i])
			hist = true;
		if (!strcmp(ts.key[i], "store_pkts_live"))
			assert_true(ts.val[i] > 0);
		/* Received frames held as mbuf references, not copied ... */
		if (!strcmp(ts.key[i], "by_reference"))
			assert_int_equal(ts.val[i], 1);
		/* ... and their payload checks taken from the repairs: computed
		 * only for the late original, to tell it from a new packet. */
		if (!strcmp(ts.key[i], "checks_computed"))
			assert_int_equal(ts.val[i], 1);
	}
	assert_true(hist);
	/* The store holds references: those mbufs are not back yet. */
	assert_true(rte_mempool_avail_count(app.pool) < avail0);
	stage_del(&dec);
	assert_int_equal(rte_mempool_avail_count(app.pool), avail0);
}

static void test_non_ipv4_passes_both_stages(void **state)
{
	static const uint8_t arp[42] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1,
					 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1 };
	uint8_t v6[74] = { 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, 0x60 };
	struct rte_mbuf *pkts[IL_BURST_CAP];
	unsigned avail0 = rte_mempool_avail_count(app.pool);
	struct il_stage enc, dec;

	(void)state;
	stage_new_ok(&enc, &il_stage_fec_enc, enc_yaml);
	stage_new_ok(&dec, &il_stage_fec_dec, dec_yaml);
	for (unsigned round = 0; round < 40; round++) {
		uint16_t n;

		pkts[0] = mbuf_of(arp, sizeof(arp));
		pkts[1] = mbuf_of(v6, sizeof(v6));
		n = enc.type->process(&enc, pkts, 2);
		assert_int_equal(n, 2); /* no repairs for what is not protected */
		n = dec.type->process(&dec, pkts, n);
		assert_int_equal(n, 2);
		assert_int_equal(pkts[0]->data_len, sizeof(arp));
		assert_memory_equal(rte_pktmbuf_mtod(pkts[0], void *), arp, sizeof(arp));
		assert_memory_equal(rte_pktmbuf_mtod(pkts[1], void *), v6, sizeof(v6));
		rte_pktmbuf_free_bulk(pkts, 2);
	}
	assert_int_equal(ctr(&enc, "unprotected"), 80);
	assert_int_equal(ctr(&enc, "protected"), 0);
	assert_int_equal(ctr(&enc, "repairs_sent"), 0);
	assert_int_equal(ctr(&dec, "unprotected"), 80);
	assert_int_equal(ctr(&dec, "data_in"), 0);
	stage_del(&enc);
	stage_del(&dec);
	assert_int_equal(rte_mempool_avail_count(app.pool), avail0);
}

static void test_fec_off_passes_everything(void **state)
{
	struct rte_mbuf *pkts[IL_BURST_CAP];
	struct il_stage enc, dec;
	uint16_t n;

	(void)state;
	stage_new_ok(&enc, &il_stage_fec_enc, "{enabled: false}");
	stage_new_ok(&dec, &il_stage_fec_dec, "{enabled: false}");
	for (unsigned i = 0; i < IL_BURST; i++)
		pkts[i] = mbuf_of(data[i].b, data[i].len);
	n = enc.type->process(&enc, pkts, IL_BURST);
	assert_int_equal(n, IL_BURST);
	n = dec.type->process(&dec, pkts, n);
	assert_int_equal(n, IL_BURST);
	for (unsigned i = 0; i < IL_BURST; i++)
		assert_memory_equal(rte_pktmbuf_mtod(pkts[i], void *), data[i].b, data[i].len);
	rte_pktmbuf_free_bulk(pkts, n);
	assert_int_equal(ctr(&enc, "protected") + ctr(&enc, "repairs_sent"), 0);
	stage_del(&enc);
	stage_del(&dec);
}

/* Bad repairs addressed to us are consumed and counted; frames too long
 * for lan_mtu pass unprotected. */
static void test_bad_repair_and_too_long(void **state)
{
	struct rte_mbuf *pkts[IL_BURST_CAP];
	struct il_stage enc, dec;
	struct frame f;
	unsigned r = 0;

	(void)state;
	if (n_link == 0)
		record_stream();
	while (!link_s[r].repair)
		r++;
	stage_new_ok(&dec, &il_stage_fec_dec, dec_yaml);
	f = link_s[r];
	f.b[42 + 1] = IL_T_DATA; /* not a repair type */
	pkts[0] = mbuf_of(f.b, f.len);
	f = link_s[r];
	f.len -= 3; /* truncated */
	pkts[1] = mbuf_of(f.b, f.len);
	((struct rte_ipv4_hdr *)(rte_pktmbuf_mtod(pkts[1], uint8_t *) + 14))->total_length =
		rte_cpu_to_be_16((uint16_t)(f.len - 14));
	((struct rte_udp_hdr *)(rte_pktmbuf_mtod(pkts[1], uint8_t *) + 34))->dgram_len =
		rte_cpu_to_be_16((uint16_t)(f.len - 34));
	assert_int_equal(dec.type->process(&dec, pkts, 2), 0);
	assert_int_equal(ctr(&dec, "drop_bad_repair"), 2);
	stage_del(&dec);

	stage_new_ok(&enc, &il_stage_fec_enc, "{lan_mtu: 576}");
	r = 0;
	while (data[r].len <= 576 + 14)
		r++;
	pkts[0] = mbuf_of(data[r].b, data[r].len);
	assert_int_equal(enc.type->process(&enc, pkts, 1), 1);
	assert_int_equal(ctr(&enc, "too_long"), 1);
	assert_int_equal(ctr(&enc, "protected"), 0);
	rte_pktmbuf_free(pkts[0]);
	stage_del(&enc);
}

static void test_config_errors_name_the_key(void **state)
{
	static const struct {
		const struct il_stage_type *t;
		const char *yaml, *names[2];
	} bad[] = {
		{ &il_stage_fec_enc, "{r: 1}", { "'test.r'", "2..32" } },
		{ &il_stage_fec_enc, "{c: 2}", { "interleaves", "c = 2" } },
		{ &il_stage_fec_enc, "{interleaves: [1, 0, 19]}", { "interleaves[1]", "1..4096" } },
		{ &il_stage_fec_enc, "{interleaves: [1, 11]}", { "interleaves", "3 interleaves" } },
		{ &il_stage_fec_enc, "{mode: ldpc}", { "'test.mode'", "xor" } },
		{ &il_stage_fec_enc, "{link_mtu: 1500}", { "test.link_mtu", "1734" } },
		{ &il_stage_fec_enc, "{store_pkts: 10}", { "'test.store_pkts'", "allowed here" } },
		{ &il_stage_fec_enc, "{peer_mac: nope}", { "'test.peer_mac'", "MAC" } },
		{ &il_stage_fec_dec, "{idle_flush_us: 5}", { "'test.idle_flush_us'", "allowed here" } },
		{ &il_stage_fec_dec, "{store_pkts: 20}", { "test.store_pkts", "134" } },
		{ &il_stage_fec_dec, "{local_ip: 1.2.3}", { "'test.local_ip'", "IPv4" } },
	};
	struct il_stage st;
	char err[1024];

	(void)state;
	for (size_t i = 0; i < RTE_DIM(bad); i++) {
		err[0] = '\0';
		if (stage_new(&st, bad[i].t, bad[i].yaml, err, sizeof(err)) == 0)
			fail_msg("%s %s was accepted", bad[i].t->name, bad[i].yaml);
		for (unsigned j = 0; j < 2; j++)
			if (strstr(err, bad[i].names[j]) == NULL)
				fail_msg("%s %s: error does not name %s: %s", bad[i].t->name,
					 bad[i].yaml, bad[i].names[j], err);
	}
	/* A link MTU that carries the largest repair is fine. */
	stage_new_ok(&st, &il_stage_fec_enc, "{link_mtu: 1734}");
	stage_del(&st);
}

int main(int argc, char **argv)
{
	char *eal_args[] = {
		argv[0], "--no-huge", "-m", "256", "--no-pci", "-l", "0",
		"--file-prefix", "il-fec-stage-test", "--log-level=lib.eal:error",
		"--no-telemetry",
	};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_errors_name_the_key),
		cmocka_unit_test(test_every_single_loss_recovered),
		cmocka_unit_test(test_every_single_loss_recovered_rs),
		cmocka_unit_test(test_late_original_dropped_and_counted),
		cmocka_unit_test(test_non_ipv4_passes_both_stages),
		cmocka_unit_test(test_fec_off_passes_everything),
		cmocka_unit_test(test_bad_repair_and_too_long),
	};
	int rc;

	(void)argc;
	if (rte_eal_init((int)RTE_DIM(eal_args), eal_args) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	app.pool = rte_pktmbuf_pool_create("il_fec_stage_test", POOL_SIZE, 256, 0,
					   RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (app.pool == NULL) {
		fprintf(stderr, "mbuf pool: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	app.frame_max = 1514;
	app.appliance_ip = 0xc0000201u;
	app.epoch = 7;
	/* Frame lengths 60..1514 spread over the stream. */
	for (unsigned k = 0; k < N_DATA; k++)
		make_data(&data[k], k, (uint16_t)(60 + (k * 389u) % 1455u));
	rc = cmocka_run_group_tests_name("fec_stage", tests, NULL, NULL);
	rte_mempool_free(app.pool);
	rte_eal_cleanup();
	return rc;
}
