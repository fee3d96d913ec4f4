/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the `ftcp` stage's segment path (dataplane/stages/
 * ftcp.c, ftcp_pkt.h) on a real appliance: EAL with --no-huge, net_ring
 * ports, the real mbuf pool, three stage instances (lazy, eager,
 * conditional) made once. The target plays the logger on each stage's
 * rings, as the stage's unit test does.
 *
 * The input is a program: client and server segments of two connections
 * (flags, sequence numbers near the ISNs or anywhere, windows, options:
 * what Linux sends, nothing, or input bytes, payloads), frames of input
 * bytes from either side, ARP from the server side, the logger's messages
 * (STABLE, CRASH, RECOVER, CLOSE_OK, ABANDON with values near the
 * connection's or anywhere), the logger reading its ring (and answering
 * as a logger would), empty polls. Each input starts from empty flow
 * tables and rings, so inputs do not depend on each other.
 *
 * Checked: every frame the stage makes carries valid IPv4 and TCP
 * checksums, and so does every segment it passes on that came in with
 * them; every record on the ring is whole; no mbuf is lost (the pool is
 * full again once held segments are let go).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_hash.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/csum.h>
#include <interlink/frame.h>

#include "ftcp.h"
#include "ftcp_timer.h"
#include "fz.h"

#define N_ST 3
static const char *const names[N_ST] = {"ftl", "fte", "ftc"};
static const uint16_t sports[N_ST] = {5001, 5002, 5003};

static struct il_app app;
static struct il_cfg *cfg;
static uint16_t P_CLIENT, P_SERVER;
static unsigned pool_avail0;

static struct {
	struct il_stage *st;
	struct ftcp *f;
	struct ftc_ring *ring; /* the logger's handle */
	char path[96];
	/* The stage's own handle, here too: the stage keeps it in DPDK memory,
	 * which LeakSanitizer does not scan, and would call it lost. */
	struct ftc_ring *stage_ring;
} T[N_ST];

#define CIP 0x0a4d0001u /* 10.77.0.1 */
#define SIP 0x0a4d0002u /* 10.77.0.2 */
static const uint8_t CMAC[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t SMAC[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint8_t SYN_OPT[20] = {2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x11, 0x22, 0x33, 0x44,
				    0, 0, 0, 0, 1, 3, 3, 7};

static char rundir[96]; /* DPDK's runtime directory of this process */

FZ_HARNESS static void cleanup(void)
{
	for (unsigned s = 0; s < N_ST; s++)
		if (T[s].path[0])
			unlink(T[s].path);
	/* Its files (config, fbarrays); EAL leaves the directory behind. */
	DIR *d = rundir[0] ? opendir(rundir) : NULL;
	struct dirent *e;
	char p[sizeof(rundir) + 260];

	while (d && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", rundir, e->d_name);
			unlink(p);
		}
	if (d) {
		closedir(d);
		rmdir(rundir);
	}
}

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[512], text[4096], prefix[64], name[32];

	/* The name prefixes memzone names (at most 31 bytes): short. */
	snprintf(name, sizeof(name), "fzft%d", (int)getpid());
	snprintf(prefix, sizeof(prefix), "il-fuzz-ftcp-%d", (int)getpid());
	snprintf(rundir, sizeof(rundir), "/var/run/dpdk/%s", prefix);
	for (unsigned s = 0; s < N_ST; s++)
		snprintf(T[s].path, sizeof(T[s].path), "/dev/shm/%s-%s", prefix, names[s]);
	atexit(cleanup);
	snprintf(text, sizeof(text),
		 "name: %s\n"
		 "ports:\n"
		 "  client: { device: net_ring0 }\n"
		 "  server: { device: net_ring1 }\n"
		 "groups:\n"
		 "  - { id: 1, address: 239.1.1.1 }\n"
		 "stages:\n"
		 "  ftl: { type: ftcp, client_port: client, server_port: server, strategy: lazy,\n"
		 "         ring: %s, ring_size: 65536, max_flows: 16, linger_ms: 0,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5001 } ] }\n"
		 "  fte: { type: ftcp, client_port: client, server_port: server, strategy: eager,\n"
		 "         ring: %s, ring_size: 65536, max_flows: 16,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5002 } ] }\n"
		 "  ftc: { type: ftcp, client_port: client, server_port: server,\n"
		 "         strategy: conditional, ring: %s, ring_size: 65536, max_flows: 16,\n"
		 "         protect: [ { address: 10.77.0.2, port: 5003 } ] }\n"
		 "pipeline:\n"
		 "  - lcore: 1\n"
		 "    chains:\n"
		 "      - { rx: client, stages: [ftl, fte, ftc], tx: server }\n"
		 "      - { rx: server, stages: [ftl, fte, ftc], tx: client }\n",
		 name, T[0].path, T[1].path, T[2].path);
	char *eal[] = {(*argv)[0], "--no-huge", "--no-shconf", "-m", "256", "--no-pci",
		       "--file-prefix", prefix, "--lcores", "0,1", "--no-telemetry",
		       "--log-level", "lib.eal:error", "--log-level", "pmd.*:error",
		       "--vdev", "net_ring0", "--vdev", "net_ring1", NULL};
	(void)argc;
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0)
		abort();
	cfg = il_cfg_load_string(text, "fuzz", err, sizeof(err));
	if (!cfg || il_app_configure(&app, cfg, err, sizeof(err)) ||
	    il_app_start(&app, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	P_CLIENT = (uint16_t)il_app_port_index(&app, "client");
	P_SERVER = (uint16_t)il_app_port_index(&app, "server");
	for (unsigned s = 0; s < N_ST; s++) {
		T[s].st = il_app_stage(&app, names[s]);
		T[s].f = T[s].st->ctx;
		T[s].stage_ring = T[s].f->ring;
		T[s].ring = ftc_ring_open(T[s].path, 0, FTC_LOGGER, err, sizeof(err));
		if (!T[s].ring) {
			fprintf(stderr, "%s\n", err);
			abort();
		}
		unlink(T[s].path); /* both sides have it mapped */
	}
	pool_avail0 = rte_mempool_avail_count(app.pool);
	return 0;
}

/* A valid IPv4 header checksum, and (for TCP) a valid TCP checksum. */
FZ_HARNESS static bool csums_ok(struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t len = rte_pktmbuf_data_len(m);

	if (len < 14 + 20 + 20 || f[12] != 0x08 || f[13] != 0x00 || (f[14] >> 4) != 4 ||
	    f[14 + 9] != 6)
		return true; /* not TCP over IPv4: nothing to judge */
	uint32_t ihl = (f[14] & 0xfu) * 4u, tot = il_get16(f + 16);
	if (ihl < 20 || tot < ihl + 20 || 14 + tot > len)
		return true;
	if (il_csum_fold(il_csum_sum(f + 14, ihl, 0)) != 0xffff)
		return false;
	return il_ipv4_l4_csum_ok(f + 14);
}

FZ_HARNESS static void dump(const char *what, struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	fprintf(stderr, "%s (%u bytes):", what, rte_pktmbuf_data_len(m));
	for (unsigned i = 0; i < rte_pktmbuf_data_len(m); i++)
		fprintf(stderr, "%s%02x", i % 16 ? " " : "\n  ", f[i]);
	fputc('\n', stderr);
}

/* The frames of this input and whether they came with valid checksums:
 * a segment the stage held (a SYN-ACK, a Lazy ack) goes out later among
 * the frames it emits, as it came; what it makes itself must be valid. */
static struct {
	struct rte_mbuf *m;
	bool ok;
} sent[256];
static unsigned n_sent;

FZ_HARNESS static bool came_ok(struct rte_mbuf *m, bool forget)
{
	for (unsigned i = n_sent; i-- > 0;)
		if (sent[i].m == m) {
			bool ok = sent[i].ok;

			if (forget)
				sent[i] = sent[--n_sent];
			return ok;
		}
	return true; /* made by the stage */
}

FZ_HARNESS static void out_check(const char *what, struct rte_mbuf *m)
{
	bool ok = came_ok(m, true);

	if (ok && !csums_ok(m)) {
		dump(what, m);
		FZ_CHECK(0, "%s with a bad checksum", what);
	}
	rte_pktmbuf_free(m);
}

FZ_HARNESS static void drain_emitted(void)
{
	struct il_lcore_io *io = T[0].st->io; /* one io for all the stages */

	for (unsigned i = 0; i < io->n_defer; i++)
		out_check("a frame emitted", io->defer[i]);
	io->n_defer = 0;
}

/* One burst of n frames through stage t; the survivors are checked and freed. */
FZ_HARNESS static void burst(unsigned t, struct rte_mbuf **p, uint16_t n)
{
	for (uint16_t i = 0; i < n && n_sent < 256; i++) {
		sent[n_sent].m = p[i];
		sent[n_sent++].ok = csums_ok(p[i]);
	}
	uint16_t k = T[t].st->type->process(T[t].st, p, n);
	FZ_CHECK(k <= IL_BURST_CAP, "%u survivors", k);
	for (uint16_t i = 0; i < k; i++)
		out_check("a segment passed on", p[i]);
	drain_emitted();
	/* What the stage still holds keeps its entry; the rest it freed (a
	 * drop), and the pool may hand those mbufs out again, to a frame
	 * of ours or of the stage's, which a stale entry would misname. */
	const struct ftcp *f = T[t].f;

	for (unsigned i = n_sent; i-- > 0;) {
		bool held = false;

		for (uint32_t j = 0; j < f->max_flows && !held; j++)
			held = f->flows[j].held_synack == sent[i].m ||
			       f->flows[j].held_ack == sent[i].m || f->flows[j].held_rec == sent[i].m;
		if (!held)
			sent[i] = sent[--n_sent];
	}
}

FZ_HARNESS static struct rte_mbuf *frame_of(const uint8_t *b, size_t len, uint16_t port)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(app.pool);

	if (m == NULL)
		abort();
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)len);
	if (d == NULL)
		abort();
	memcpy(d, b, len);
	m->port = app.ports[port].port_id;
	return m;
}

/* A TCP segment of one of two connections of stage t's server. */
FZ_HARNESS static struct rte_mbuf *segment(struct fz *z, unsigned t, bool to_server, uint32_t *isn)
{
	uint8_t f[14 + 20 + 60 + 128];
	uint8_t sel = fz_u8(z), fl = fz_u8(z), opt[40];
	unsigned optlen = 0, plen = fz_u8(z) % 128;
	uint16_t cport = 40000 + (sel & 1);
	uint32_t *cisn = &isn[2 * (sel & 1)], *sisn = &isn[2 * (sel & 1) + 1];
	uint32_t seq, ack;

	switch ((sel >> 1) & 3) {
	case 0:
		break;
	case 1:
		memcpy(opt, SYN_OPT, sizeof(SYN_OPT));
		optlen = sizeof(SYN_OPT);
		break;
	default: {
		size_t got;
		const uint8_t *o = fz_bytes(z, 4u * (fz_u8(z) % 11), &got);

		memcpy(opt, o, got);
		optlen = (unsigned)got & ~3u;
		break;
	}
	}
	/* Near the connection's sequence space, or anywhere. */
	uint32_t *mine = to_server ? cisn : sisn, *theirs = to_server ? sisn : cisn;
	seq = sel & 0x10 ? fz_u32(z) : *mine + fz_u16(z) % 4096;
	ack = sel & 0x20 ? fz_u32(z) : *theirs + fz_u16(z) % 4096;
	if ((fl & 0x02) && !(sel & 0x10)) /* a SYN sets the connection's ISN */
		*mine = seq = *mine + (sel & 0x40 ? 0x10000 : 0);
	struct il_path path = { .ttl = 64, .df = true, .src_port = to_server ? cport : sports[t],
				.dst_port = to_server ? sports[t] : cport,
				.src_ip = to_server ? CIP : SIP, .dst_ip = to_server ? SIP : CIP };
	memcpy(path.src_mac, to_server ? CMAC : SMAC, 6);
	memcpy(path.dst_mac, to_server ? SMAC : CMAC, 6);
	uint16_t thl = (uint16_t)(IL_TCP_HLEN + optlen);
	uint8_t *ip = il_eth_put(f, path.dst_mac, path.src_mac, IL_ETHERTYPE_IPV4);
	uint8_t *tcp = il_ipv4_put(ip, &path, IL_IPPROTO_TCP, 1, (uint16_t)(thl + plen));
	uint16_t len = (uint16_t)(IL_ETH_HLEN + IL_IPV4_HLEN + thl + plen);

	il_put16(tcp, path.src_port);
	il_put16(tcp + 2, path.dst_port);
	il_put32(tcp + 4, seq);
	il_put32(tcp + 8, ack);
	tcp[12] = (uint8_t)((thl / 4) << 4);
	tcp[13] = fl & 0x3f;
	il_put16(tcp + 14, fz_u16(z));
	il_put32(tcp + 16, 0);
	memcpy(tcp + IL_TCP_HLEN, opt, optlen);
	size_t got;
	const uint8_t *d = fz_bytes(z, plen, &got);
	memset(tcp + thl, 'p', plen);
	memcpy(tcp + thl, d, got);
	il_tcp_csum_set(ip);
	if (fl & 0x80) /* a checksum damaged on the way */
		tcp[16] ^= 0x40;
	return frame_of(f, len, to_server ? P_CLIENT : P_SERVER);
}

/* The logger reads what the stage logged; a good logger says it is durable. */
FZ_HARNESS static void logger_read(unsigned t, bool answer)
{
	const struct ftc_rec *x;
	uint32_t len;
	int got;

	while ((got = il_shm_rec_next(&T[t].ring->rx, (const void **)&x, &len)) > 0) {
		FZ_CHECK(len == x->len && x->len == ftc_rec_size(x->plen) && x->len >= sizeof(*x),
			 "a torn record on the ring");
		if (answer && (x->type == FR_DATA || x->type == FR_SYN)) {
			struct ftc_down d = { .type = FD_STABLE, .flags = FD_F_ISNS, .key = x->key,
					      .a = x->seq + x->plen + (x->type == FR_SYN) +
						   (x->flags & 1) };
			il_shm_send(&T[t].ring->tx, &d, 1);
		}
		il_shm_release(&T[t].ring->rx);
	}
	FZ_CHECK(got == 0, "the up ring is damaged");
}

FZ_HARNESS static void reset(unsigned t)
{
	struct ftcp *f = T[t].f;
	struct ftc_down d[32];

	for (uint32_t i = 0; i < f->max_flows; i++) {
		rte_pktmbuf_free(f->flows[i].held_synack);
		rte_pktmbuf_free(f->flows[i].held_ack);
		rte_pktmbuf_free(f->flows[i].held_rec);
	}
	rte_hash_reset(f->h);
	memset(f->flows, 0, sizeof(*f->flows) * f->max_flows);
	ftl_init(f);
	f->n_post = 0;
	memset(f->prot_known, 0, sizeof(f->prot_known));
	memset(T[t].st->ctr, 0, sizeof(T[t].st->ctr[0]) * T[t].st->type->n_counters);
	logger_read(t, false);
	while (il_shm_recv(&f->ring->rx, d, 32) > 0)
		;
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz z = { data, size };
	unsigned t = fz_u8(&z) % N_ST;
	uint32_t isn[4] = {0xfffff000u, 0x10000000u, 0x7ffffff0u, 0x80000000u};
	struct rte_mbuf *p[IL_BURST_CAP];
	uint16_t n = 0;

	n_sent = 0;
	for (unsigned ops = 0; z.n > 0 && ops < 64; ops++) {
		uint8_t op = fz_u8(&z);

		switch (op % 8) {
		case 0:
		case 1:
		case 2: /* a segment: to the server, or from it */
			p[n++] = segment(&z, t, op % 8 != 2, isn);
			break;
		case 3: { /* a frame of input bytes, from either side */
			size_t got;
			const uint8_t *b = fz_chunk(&z, 256, &got);

			p[n++] = frame_of(b, got, op & 0x80 ? P_SERVER : P_CLIENT);
			break;
		}
		case 4: { /* ARP from the server side: a server moved */
			uint8_t a[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
			size_t got;
			const uint8_t *mac = fz_bytes(&z, 6, &got);

			memcpy(a + 6, mac, got);
			a[12] = 0x08;
			a[13] = 0x06;
			il_put16(a + 14, 1);
			il_put16(a + 16, 0x0800);
			a[18] = 6;
			a[19] = 4;
			il_put16(a + 20, op & 0x80 ? 2 : 1);
			memcpy(a + 22, mac, got);
			il_put32(a + 28, op & 0x40 ? SIP : fz_u32(&z));
			il_put32(a + 38, op & 0x40 ? SIP : fz_u32(&z));
			p[n++] = frame_of(a, sizeof(a), op & 0x20 ? P_CLIENT : P_SERVER);
			break;
		}
		case 5: { /* a logger message */
			uint8_t c = op >> 7;
			struct ftc_down d = {
				.type = (uint16_t)(fz_u8(&z) % 7), .flags = fz_u8(&z) & 1,
				.key = { .cip = htonl(CIP), .sip = htonl(SIP),
					 .cport = htons((uint16_t)(40000 + c)),
					 .sport = htons(sports[t]) },
			};
			uint8_t v = fz_u8(&z);

			d.a = v & 1 ? fz_u32(&z) : isn[2 * c] + fz_u16(&z) % 4096;
			d.b = v & 2 ? fz_u32(&z) : isn[2 * c + 1] + fz_u16(&z) % 4096;
			d.c = fz_u32(&z);
			il_shm_send(&T[t].ring->tx, &d, 1);
			break;
		}
		case 6:
			logger_read(t, op & 0x80);
			break;
		default: /* the burst goes (or an empty poll) */
			burst(t, p, n);
			n = 0;
			break;
		}
		if (n == 32) {
			burst(t, p, n);
			n = 0;
		}
	}
	if (n)
		burst(t, p, n);
	reset(t);
	FZ_CHECK(rte_mempool_avail_count(app.pool) == pool_avail0, "%u mbufs lost",
		 pool_avail0 - rte_mempool_avail_count(app.pool));
	return 0;
}
