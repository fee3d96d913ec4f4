/* SPDX-License-Identifier: BSD-3-Clause
 * afpseq: the sequencer's raw-mode job on one AF_PACKET socket, the way the
 * end-host sequencers published with network-ordered replication systems
 * do it without kernel bypass: one raw socket bound to the ingress
 * interface, a TPACKET_V2 receive ring and transmit ring mapped into the
 * process, frames handled in batches straight from one ring into the other,
 * one sendto() per batch to kick the transmit ring out of the egress
 * interface (qdisc bypassed). No copy into a socket buffer, no system call
 * per frame: the best a kernel path does short of XDP.
 *
 * The job is the appliance's raw mode (docs/wire-format.md): UDP to the
 * group's raw filter gets the 40-byte Interlink header and a 4-byte message
 * record inserted after the UDP header (flags STAMPED|RAW, sender_id = IPv4
 * source, sender_seq counted per source address and port, the group's next
 * global_seq, the epoch), the destination port becomes the group's output
 * port, IPv4 and UDP lengths and checksums are fixed. Other frames pass
 * through unchanged (a bump in the wire). No history is kept for
 * retransmission, which the appliance does: that favours this baseline.
 *
 *   afpseq --in IFACE --out IFACE [--group 239.1.1.100] [--port 9000]
 *          [--out-port 7400] [--group-id 100] [--frames 4096] [--batch 64]
 *          [--block] [--json FILE]
 *
 * Runs until SIGINT/SIGTERM, then prints (and writes) its counters.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/json.h>
#include "rawseq.h"

#define FRAME_SIZE 2048u /* one ring slot: a 1514-byte frame and the slot header */
#define MAX_FRAME 1514u  /* Ethernet MTU 1500 + 14 */
#define ETH_LEN 14u

struct counters {
	uint64_t rx, stamped, passed, tx_full, too_big, kick_err, batches;
};

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return ntohs(v);
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

struct ring {
	uint8_t *base;
	unsigned n, idx;
};

static struct tpacket2_hdr *slot(struct ring *r, unsigned i)
{
	return (struct tpacket2_hdr *)(r->base + (size_t)i * FRAME_SIZE);
}

struct seqr {
	uint32_t group_be;
	uint16_t raw_port_be, out_port, group_id;
	uint32_t epoch;
	uint64_t gseq;
	struct counters c;
};

/* Build the output frame for one received frame in a transmit slot; returns
 * its length, or 0 to drop it. */
static unsigned handle(struct seqr *s, const uint8_t *in, unsigned len, uint8_t *out)
{
	if (len < ETH_LEN + 20 + 8 || get16(in + 12) != ETHERTYPE_IP)
		goto pass;
	const uint8_t *ip = in + ETH_LEN;
	unsigned ihl = (ip[0] & 0x0f) * 4u;
	unsigned ip_len = get16(ip + 2);
	if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != IPPROTO_UDP || ip_len < ihl + 8 ||
	    ETH_LEN + ip_len > len || (get16(ip + 6) & 0x3fff) != 0)
		goto pass;
	uint32_t dst;
	memcpy(&dst, ip + 16, 4);
	const uint8_t *udp = ip + ihl;
	uint16_t dport_be;
	memcpy(&dport_be, udp + 2, 2);
	if (dst != s->group_be || dport_be != s->raw_port_be)
		goto pass;

	unsigned l4 = ETH_LEN + ihl, payload = ip_len - ihl - 8;
	if (ETH_LEN + ip_len + RAWSEQ_INSERT > MAX_FRAME) {
		s->c.too_big++;
		return 0;
	}
	/* Headers up to the UDP header, then the Interlink header and record,
	 * then the payload (Ethernet padding left behind). */
	memcpy(out, in, l4 + 8);
	uint8_t *h = out + l4 + 8;
	uint32_t saddr;
	memcpy(&saddr, ip + 12, 4);
	rawseq_header(h, s->group_id, saddr, get16(udp), s->epoch, s->gseq++, (uint16_t)payload);
	memcpy(h + RAWSEQ_INSERT, udp + 8, payload);

	uint8_t *oip = out + ETH_LEN, *oudp = out + l4;
	il_put16(oip + 2, (uint16_t)(ip_len + RAWSEQ_INSERT));
	il_put16(oip + 10, 0);
	il_put16(oip + 10, csum_fold(csum_add(0, oip, ihl)));
	il_put16(oudp + 2, s->out_port);
	il_put16(oudp + 4, (uint16_t)(payload + 8 + RAWSEQ_INSERT));
	if (get16(udp + 6)) {
		/* The sender filled the UDP checksum: so do we (zero stays zero,
		 * which IPv4 allows). */
		uint32_t sum = csum_add(0, oip + 12, 8);
		sum += IPPROTO_UDP + (uint32_t)(payload + 8 + RAWSEQ_INSERT);
		il_put16(oudp + 6, 0);
		sum = csum_add(sum, oudp, payload + 8 + RAWSEQ_INSERT);
		uint16_t c = csum_fold(sum);
		il_put16(oudp + 6, c ? c : 0xffff);
	}
	s->c.stamped++;
	return ETH_LEN + ip_len + RAWSEQ_INSERT;
pass:
	s->c.passed++;
	memcpy(out, in, len);
	return len;
}

static int setup_ring(int fd, int opt, unsigned frames)
{
	struct tpacket_req req = {
		.tp_block_size = 4096 * 16,
		.tp_frame_size = FRAME_SIZE,
	};
	req.tp_block_nr = frames / (req.tp_block_size / FRAME_SIZE);
	req.tp_frame_nr = req.tp_block_nr * (req.tp_block_size / FRAME_SIZE);
	return setsockopt(fd, SOL_PACKET, opt, &req, sizeof(req));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"in", 1, NULL, 'i'}, {"out", 1, NULL, 'o'}, {"group", 1, NULL, 'g'},
		{"port", 1, NULL, 'p'}, {"out-port", 1, NULL, 'P'}, {"group-id", 1, NULL, 'G'},
		{"frames", 1, NULL, 'f'}, {"batch", 1, NULL, 'b'}, {"block", 0, NULL, 'B'},
		{"json", 1, NULL, 'j'}, {NULL, 0, NULL, 0},
	};
	const char *in_if = NULL, *out_if = NULL, *group = "239.1.1.100", *json = NULL;
	unsigned port = 9000, out_port = 7400, group_id = 100, frames = 4096, batch = 64;
	bool block = false;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'i': in_if = optarg; break;
		case 'o': out_if = optarg; break;
		case 'g': group = optarg; break;
		case 'p': port = (unsigned)atoi(optarg); break;
		case 'P': out_port = (unsigned)atoi(optarg); break;
		case 'G': group_id = (unsigned)atoi(optarg); break;
		case 'f': frames = (unsigned)atoi(optarg); break;
		case 'b': batch = (unsigned)atoi(optarg); break;
		case 'B': block = true; break;
		case 'j': json = optarg; break;
		default:
			fprintf(stderr, "usage: afpseq --in IFACE --out IFACE [--group G] [--port P] "
					"[--out-port P] [--group-id N] [--frames N] [--batch N] [--block] "
					"[--json FILE]\n");
			return 2;
		}
	}
	if (!in_if || !out_if || !batch || frames < 32 || port > 65535 || out_port > 65535) {
		fprintf(stderr, "afpseq: --in and --out are required; --batch >= 1; --frames >= 32\n");
		return 2;
	}

	struct seqr s = {
		.raw_port_be = htons((uint16_t)port),
		.out_port = (uint16_t)out_port,
		.group_id = (uint16_t)group_id,
		.epoch = (uint32_t)time(NULL),
		.gseq = 1,
	};
	struct in_addr g;
	if (inet_pton(AF_INET, group, &g) != 1) {
		fprintf(stderr, "afpseq: bad --group %s\n", group);
		return 2;
	}
	s.group_be = g.s_addr;
	unsigned in_idx = if_nametoindex(in_if), out_idx = if_nametoindex(out_if);
	if (!in_idx || !out_idx) {
		fprintf(stderr, "afpseq: no interface %s\n", in_idx ? out_if : in_if);
		return 2;
	}

	int fd = socket(AF_PACKET, SOCK_RAW, 0), v = TPACKET_V2, one = 1;
	if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) ||
	    setup_ring(fd, PACKET_RX_RING, frames) || setup_ring(fd, PACKET_TX_RING, frames)) {
		perror("afpseq: socket and rings");
		return 2;
	}
	/* Transmit straight to the driver, as a NIC queue would be fed. */
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	size_t ring_bytes = (size_t)frames * FRAME_SIZE;
	uint8_t *map = mmap(NULL, 2 * ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED |
			    MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED)
		map = mmap(NULL, 2 * ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("afpseq: mmap");
		return 2;
	}
	struct sockaddr_ll bind_ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				      .sll_ifindex = (int)in_idx};
	if (bind(fd, (struct sockaddr *)&bind_ll, sizeof(bind_ll))) {
		perror("afpseq: bind");
		return 2;
	}
	/* Every kick names the egress interface: one socket receives on one
	 * interface and sends on another. */
	struct sockaddr_ll out_ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
				     .sll_ifindex = (int)out_idx};
	struct ring rx = {.base = map, .n = frames}, tx = {.base = map + ring_bytes, .n = frames};
	const unsigned data_off = TPACKET2_HDRLEN - sizeof(struct sockaddr_ll);

	rawseq_signals();
	printf("afpseq: %s:%u on %s -> port %u on %s, %u-frame rings, batches of %u%s\n", group, port,
	       in_if, out_port, out_if, frames, batch, block ? ", blocking when idle" : "");
	fflush(stdout);

	while (!rawseq_quit) {
		unsigned n = 0, queued = 0;
		while (n < batch) {
			struct tpacket2_hdr *rh = slot(&rx, rx.idx);
			if (!(__atomic_load_n(&rh->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
				break;
			struct tpacket2_hdr *th = slot(&tx, tx.idx);
			if (__atomic_load_n(&th->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE) {
				s.c.tx_full++; /* the egress ring is full, as a NIC's can be */
			} else {
				unsigned len = handle(&s, (uint8_t *)rh + rh->tp_mac, rh->tp_snaplen,
						      (uint8_t *)th + data_off);
				if (len) {
					th->tp_len = len;
					__atomic_store_n(&th->tp_status, TP_STATUS_SEND_REQUEST,
							 __ATOMIC_RELEASE);
					tx.idx = (tx.idx + 1) % tx.n;
					queued++;
				}
			}
			__atomic_store_n(&rh->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			rx.idx = (rx.idx + 1) % rx.n;
			n++;
		}
		s.c.rx += n;
		if (queued) {
			s.c.batches++;
			if (sendto(fd, NULL, 0, MSG_DONTWAIT, (struct sockaddr *)&out_ll,
				   sizeof(out_ll)) < 0 && errno != EAGAIN && errno != ENOBUFS)
				s.c.kick_err++;
		} else if (!n && block) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			poll(&p, 1, 100);
		}
	}
	printf("afpseq: received %" PRIu64 " stamped %" PRIu64 " passed %" PRIu64
	       " drop_tx_full %" PRIu64 " drop_raw_too_big %" PRIu64 " in %" PRIu64
	       " batches (%.1f per batch), kick errors %" PRIu64 "\n", s.c.rx, s.c.stamped,
	       s.c.passed, s.c.tx_full, s.c.too_big, s.c.batches,
	       s.c.batches ? (double)(s.c.stamped + s.c.passed) / (double)s.c.batches : 0.0,
	       s.c.kick_err);
	if (json) {
		FILE *f = fopen(json, "w");
		if (f) {
			struct il_json j;
			il_json_begin(&j, f, 0);
			il_json_obj(&j, NULL);
			il_json_u64(&j, "received", s.c.rx);
			il_json_u64(&j, "stamped", s.c.stamped);
			il_json_u64(&j, "passed", s.c.passed);
			il_json_u64(&j, "drop_tx_full", s.c.tx_full);
			il_json_u64(&j, "drop_raw_too_big", s.c.too_big);
			il_json_u64(&j, "batches", s.c.batches);
			il_json_end(&j);
			il_json_finish(&j);
			fclose(f);
		}
	}
	return 0;
}
