/* SPDX-License-Identifier: BSD-3-Clause
 * igmp: IGMPv2 membership reports for this appliance's groups on one port
 * (docs/scaling.md 2.1). Several appliances side by side between the same
 * two switches, each owning other groups: a switch that snoops IGMP then
 * delivers each group's traffic (the hosts' DATA, NAKs and control frames,
 * all sent to the group's address) to its owner alone.
 *
 * Reports go out at start, every interval_ms (well within a snooping
 * switch's membership timeout: 260 s by default in IGMPv2 and in Linux
 * bridges), and right after a query is seen on the chain (a general query:
 * every group; a group-specific one: that group), and a leave for each
 * when the appliance stops (to 224.0.0.2). The addresses reported
 * are those the hosts send to: each group's address, and a raw-mode
 * group's raw.dst when it is multicast.
 *
 * Place it first in the chain that receives from `port`: it looks at every
 * frame for queries (two loads on a frame the port just wrote) before
 * classify, which may drop what is not Interlink traffic (`other: drop`).
 * Queries are left in the burst. Place the same instance first in the
 * chains that receive from the other ports too: there it removes IGMP
 * membership reports and leaves from the bursts (the receivers' own, sent
 * on switch B), which the appliance that forwards other traffic would
 * otherwise carry to switch A, where they would draw their groups to it.
 * The appliances speak for their groups' membership on switch A.
 */
#include <string.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include <interlink/app.h>
#include <interlink/csum.h>
#include <interlink/err.h>
#include <interlink/frame.h>
#include <interlink/wire.h>

enum {
	IG_C_REPORTS,
	IG_C_QUERIES,
	IG_C_DROP_NO_MBUF,
	IG_C_DROP_FOREIGN_REPORTS,
	IG_C_LEAVES,
	IG_C_COUNT
};

static const char *const ig_counter_names[IG_C_COUNT] = {
	[IG_C_REPORTS] = "reports",
	[IG_C_QUERIES] = "queries",
	[IG_C_DROP_NO_MBUF] = "drop_no_mbuf",
	[IG_C_DROP_FOREIGN_REPORTS] = "drop_foreign_reports",
	[IG_C_LEAVES] = "leaves",
};

#define IGMP_FRAME 60     /* 14 + 24 (IPv4 with Router Alert) + 8, padded */
#define IGMP_QUERY 0x11
#define IGMP_V2_REPORT 0x16
#define IGMP_LEAVE 0x17
#define IGMP_ALL_ROUTERS 0xe0000002u /* 224.0.0.2: where leaves go (RFC 2236, 3) */

struct igmp {
	struct il_app *app;
	uint16_t port;
	uint64_t every_tsc, next_tsc;
	unsigned n_addr, cursor; /* cursor < n_addr: a round of reports is under way */
	uint32_t addr[];         /* host order, unique, multicast */
};

static bool is_mcast(uint32_t a)
{
	return (a >> 28) == 0xe && (a >> 8) != 0xe00000; /* 224/4, not 224.0.0/24 */
}

/* An IGMPv2 message of `type` about `group`, to `to` (the group itself
 * for a report, all routers for a leave); NULL without an mbuf (counted). */
static struct rte_mbuf *igmp_msg(struct il_stage *st, struct igmp *g, uint8_t type, uint32_t to,
				 uint32_t group)
{
	uint8_t *f;
	struct rte_mbuf *m = il_app_frame_alloc(g->app, IGMP_FRAME, &f);

	if (m == NULL) {
		st->ctr[IG_C_DROP_NO_MBUF]++;
		return NULL;
	}
	uint8_t dst[6];

	memset(f, 0, IGMP_FRAME);
	il_mcast_mac(dst, to);
	uint8_t *ip = il_eth_put(f, dst, g->app->ports[g->port].mac, 0x0800);
	ip[0] = 0x46;          /* IPv4, 24-byte header: the Router Alert option */
	ip[1] = 0xc0;          /* internetwork control */
	il_put16(ip + 2, 24 + 8);
	ip[8] = 1;             /* TTL 1 (RFC 2236, 2) */
	ip[9] = 2;             /* IGMP */
	il_put32(ip + 12, g->app->appliance_ip);
	il_put32(ip + 16, to);
	ip[20] = 0x94;         /* Router Alert (RFC 2113) */
	ip[21] = 4;
	/* The checksums are sums of the raw memory words: stored as they are. */
	uint16_t ck = il_ipv4_hdr_csum(ip);
	memcpy(ip + 10, &ck, 2);
	uint8_t *ig = ip + 24;
	ig[0] = type;
	il_put32(ig + 4, group);
	ck = (uint16_t)~il_csum_fold(il_csum_sum(ig, 8, 0));
	memcpy(ig + 2, &ck, 2);
	return m;
}

static void report(struct il_stage *st, struct igmp *g, uint32_t group)
{
	struct rte_mbuf *m = igmp_msg(st, g, IGMP_V2_REPORT, group, group);

	if (m == NULL)
		return;
	il_emit(st, g->port, m);
	st->ctr[IG_C_REPORTS]++;
}

/* IGMP in frame f of len bytes: its type, or 0. */
static uint8_t igmp_type(const uint8_t *f, uint32_t len)
{
	if (len < 14 + 20 + 8 || f[12] != 0x08 || f[13] != 0x00 || f[23] != 2 || (f[14] >> 4) != 4)
		return 0;
	unsigned ihl = (f[14] & 0x0fu) * 4u;
	return ihl >= 20 && len >= 14 + ihl + 8 ? f[14 + ihl] : 0;
}

/* From another port: the hosts' membership reports and leaves go no further. */
static uint16_t drop_foreign_reports(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t out = 0;

	for (uint16_t i = 0; i < n; i++) {
		uint8_t t = igmp_type(rte_pktmbuf_mtod(pkts[i], const uint8_t *), pkts[i]->data_len);

		if (unlikely(t == 0x12 || t == IGMP_V2_REPORT || t == 0x17 || t == 0x22)) {
			il_drop(st, IG_C_DROP_FOREIGN_REPORTS, pkts[i]);
			continue;
		}
		pkts[out++] = pkts[i];
	}
	return out;
}

/* A query in the burst: a round of reports follows at once. */
static void look_for_queries(struct il_stage *st, struct igmp *g, struct rte_mbuf **pkts,
			     uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		if (igmp_type(rte_pktmbuf_mtod(pkts[i], const uint8_t *), pkts[i]->data_len) !=
		    IGMP_QUERY)
			continue;
		st->ctr[IG_C_QUERIES]++;
		/* General or group-specific: answering every group is what a
		 * host with several memberships does for a general query, and
		 * for a specific one it costs a few frames more. Sent after
		 * the burst that brought the query (a round under way ends
		 * first). */
		g->next_tsc = 0;
	}
}

static uint16_t igmp_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct igmp *g = st->ctx;
	uint64_t now;

	if (st->io->rx_port != g->port)
		return n ? drop_foreign_reports(st, pkts, n) : 0;
	if (n)
		look_for_queries(st, g, pkts, n);
	if (g->cursor >= g->n_addr) {
		now = rte_rdtsc();
		if (now < g->next_tsc)
			return n;
		g->next_tsc = now + g->every_tsc;
		g->cursor = 0;
	}
	/* A round of many groups goes out over several polls. */
	while (g->cursor < g->n_addr && il_emit_room(st) > IL_BURST_CAP)
		report(st, g, g->addr[g->cursor++]);
	return n;
}

static int igmp_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app, char *err,
		       size_t errlen)
{
	static const char *const keys[] = {"type", "port", "interval_ms", NULL};
	const char *port;
	uint64_t ival;

	if (il_cfg_check_keys(p, keys, err, errlen) ||
	    il_cfg_str(p, "port", "in", &port, err, errlen) ||
	    il_cfg_u64(p, "interval_ms", 10000, 100, 120000, &ival, err, errlen))
		return -1;
	int pi = il_app_port_index(app, port);
	if (pi < 0)
		return ERR("config: key '%s.port': '%s' is not a configured port", il_cfg_path(p),
			   port);
	if (app->appliance_ip == 0)
		return ERR("config: key 'appliance_ip' is missing: stage '%s' sends its IGMP reports "
			   "from it", st->name);
	struct igmp *g = rte_zmalloc("il_igmp", sizeof(*g) + 2 * app->n_groups * sizeof(uint32_t),
				     RTE_CACHE_LINE_SIZE);
	if (g == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = g;
	g->app = app;
	g->port = (uint16_t)pi;
	g->every_tsc = rte_get_tsc_hz() / 1000 * ival;
	for (unsigned i = 0; i < app->n_groups; i++) {
		const struct il_group *gr = &app->groups[i];
		uint32_t a[2] = { gr->address, gr->raw ? gr->raw_dst_ip : 0 };

		for (unsigned k = 0; k < 2; k++) {
			bool dup = false;

			if (!is_mcast(a[k]))
				continue;
			for (unsigned j = 0; j < g->n_addr; j++)
				dup |= g->addr[j] == a[k];
			if (!dup)
				g->addr[g->n_addr++] = a[k];
		}
	}
	if (g->n_addr == 0)
		return ERR("config: stage '%s': no group has a multicast address to report "
			   "(groups[i].address or raw.dst in 224.0.1.0-239.255.255.255)", st->name);
	g->cursor = g->n_addr; /* the first round at the first poll */
	return 0;
}

/* The appliance stops: a leave for every address it reported, so that a
 * snooping switch stops delivering its groups here at once rather than
 * when the membership times out (260 s by default): another appliance
 * that takes a group over is then the only one that gets it. */
static void igmp_stop(struct il_stage *st)
{
	struct igmp *g = st->ctx;

	if (g == NULL || st->ctr[IG_C_REPORTS] == 0)
		return; /* reported nothing; a muted appliance sends none (il_app_send_now) */
	for (unsigned i = 0; i < g->n_addr; i++) {
		struct rte_mbuf *m = igmp_msg(st, g, IGMP_LEAVE, IGMP_ALL_ROUTERS, g->addr[i]);

		if (m != NULL && il_app_send_now(g->app, g->port, m) == 0)
			st->ctr[IG_C_LEAVES]++;
	}
}

static void igmp_destroy(struct il_stage *st)
{
	rte_free(st->ctx);
	st->ctx = NULL;
}

static void igmp_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct igmp *g = st->ctx;

	il_state_put(out, -1, "addresses", g->n_addr);
	il_state_put(out, -1, "port", g->port);
}

const struct il_stage_type il_stage_igmp = {
	.name = "igmp",
	.help = "IGMPv2 membership reports for the groups on a port (appliances side by side, "
		"steered by snooping switches)",
	.counter_names = ig_counter_names,
	.n_counters = IG_C_COUNT,
	.create = igmp_create,
	.process = igmp_process,
	.poll = true,
	.destroy = igmp_destroy,
	.stop = igmp_stop,
	.state = igmp_state,
	.kinds_kept = true,
};
