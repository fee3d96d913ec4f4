/* SPDX-License-Identifier: BSD-3-Clause
 *
 * A lossy link between a FEC encoder and decoder, for the unit and
 * recovery tests: numbered IPv4 packets go out, each followed by the
 * repairs it triggers; every link packet (data or repair) passes the
 * loss model; the decoder gets the survivors, in order. Every recovered
 * packet is checked byte for byte against the packet that was lost.
 */
#ifndef IL_FEC_SIM_H
#define IL_FEC_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/fec.h>
#include <interlink/impair.h>

/* IPv4/UDP packet number x, total length len (>= 28): deterministic
 * content, x in the 8 bytes after the IPv4 header. */
void sim_pkt_build(uint8_t *buf, uint64_t x, uint32_t len);
uint32_t sim_pkt_len(uint64_t x, uint32_t min_len, uint32_t max_len);

struct sim_cfg {
	struct il_fec_cfg fec;
	struct il_loss_cfg loss;  /* applied to every link packet */
	struct il_loss_cfg loss2; /* optional second cause, OR-ed in */
	bool use_loss2;
	uint64_t npkts;
	uint32_t min_len, max_len; /* IPv4 total length range */
	uint64_t link_ns;          /* virtual time per link packet (1000) */
	uint32_t long_run;         /* loss runs this long count as bursts (0: none) */
	/* Called once everything is allocated (phase 0) and once before it
	 * is freed (phase 1): the memory test counts allocations between. */
	void (*hook)(int phase, void *arg);
	void *hook_arg;
};

struct sim_res {
	uint64_t data_sent, data_lost, recovered;
	uint64_t bad_recovered; /* bytes or length wrong */
	uint64_t dup_recovered; /* recovered twice, or recovered though received */
	uint64_t repairs_sent, repairs_lost, link_pkts;
	uint32_t max_repair_len; /* longest repair message (Interlink header on) */
	/* Lost data packets by the length of the link loss run they were in:
	 * singletons (run 1) and long runs (>= sim_cfg.long_run). */
	uint64_t lost_single, rec_single, lost_long, rec_long;
	/* Recovery latency in data packets (newest packet sent minus the
	 * lost one), over all recoveries and over singletons. */
	double lat_mean, lat_p50, lat_p99, lat_max;
	double lat_single_mean, lat_single_p99, lat_single_max;
	double lat_long_mean;
	struct il_fec_enc_stats enc;
	struct il_fec_dec_stats dec;
	size_t enc_bytes, dec_bytes;
};

void sim_cfg_defaults(struct sim_cfg *sc);
/* 0, or -1 with a message on stderr (bad config). */
int sim_run(const struct sim_cfg *sc, struct sim_res *res);

static inline double sim_frac(const struct sim_res *r)
{
	return r->data_lost ? (double)r->recovered / (double)r->data_lost : 1.0;
}

#endif /* IL_FEC_SIM_H */
