/* SPDX-License-Identifier: BSD-3-Clause
 * kseq: the sequencer's raw-mode job written the way a user without DPDK
 * would write it, the kernel-socket baseline of the line-rate benchmark.
 * Receive multicast UDP on one interface with recvmmsg, insert the same
 * 40-byte Interlink header and 4-byte message record the appliance inserts
 * (global sequence per group, FIFO sequence per source address and port),
 * and send the result to the group on another interface with sendmmsg.
 *
 *   kseq --in-addr A --out-addr B [--group 239.1.1.100] [--port 9000]
 *        [--out-port 7400] [--group-id 100] [--batch 64] [--json FILE]
 *
 * Runs until SIGINT/SIGTERM, then prints (and writes) its counters.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/json.h>
#include "rawseq.h"

#define MAX_BATCH 256
#define MAX_PAYLOAD 9000

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"in-addr", 1, NULL, 'i'}, {"out-addr", 1, NULL, 'o'}, {"group", 1, NULL, 'g'},
		{"port", 1, NULL, 'p'}, {"out-port", 1, NULL, 'P'}, {"group-id", 1, NULL, 'G'},
		{"batch", 1, NULL, 'b'}, {"json", 1, NULL, 'j'}, {NULL, 0, NULL, 0},
	};
	const char *in_addr = NULL, *out_addr = NULL, *group = "239.1.1.100", *json = NULL;
	unsigned port = 9000, out_port = 7400, group_id = 100, batch = 64;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'i': in_addr = optarg; break;
		case 'o': out_addr = optarg; break;
		case 'g': group = optarg; break;
		case 'p': port = (unsigned)atoi(optarg); break;
		case 'P': out_port = (unsigned)atoi(optarg); break;
		case 'G': group_id = (unsigned)atoi(optarg); break;
		case 'b': batch = (unsigned)atoi(optarg); break;
		case 'j': json = optarg; break;
		default:
			fprintf(stderr, "usage: kseq --in-addr A --out-addr B [--group G] [--port P] "
					"[--out-port P] [--group-id N] [--batch N] [--json FILE]\n");
			return 2;
		}
	}
	if (!in_addr || !out_addr || !batch || batch > MAX_BATCH) {
		fprintf(stderr, "kseq: --in-addr and --out-addr are required; --batch 1..%d\n",
			MAX_BATCH);
		return 2;
	}

	struct ip_mreq mr;
	struct in_addr out_if;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)out_port)};
	int one = 1, buf = 4 << 20, ttl = 16, loop = 0;
	int rs = socket(AF_INET, SOCK_DGRAM, 0), ss = socket(AF_INET, SOCK_DGRAM, 0);

	if (inet_pton(AF_INET, group, &mr.imr_multiaddr) != 1 ||
	    inet_pton(AF_INET, in_addr, &mr.imr_interface) != 1 ||
	    inet_pton(AF_INET, out_addr, &out_if) != 1 ||
	    inet_pton(AF_INET, group, &sa.sin_addr) != 1 ||
	    inet_pton(AF_INET, group, &dst.sin_addr) != 1) {
		fprintf(stderr, "kseq: bad address\n");
		return 2;
	}
	if (rs < 0 || ss < 0 || setsockopt(rs, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(rs, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(rs, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) ||
	    setsockopt(ss, IPPROTO_IP, IP_MULTICAST_IF, &out_if, sizeof(out_if)) ||
	    setsockopt(ss, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) ||
	    setsockopt(ss, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop)) ||
	    connect(ss, (struct sockaddr *)&dst, sizeof(dst))) {
		perror("kseq: socket set-up");
		return 2;
	}
	/* What a careful user does: big socket buffers (the force variant
	 * ignores rmem_max; we run as root). */
	setsockopt(rs, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(ss, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));

	static uint8_t in[MAX_BATCH][MAX_PAYLOAD], out[MAX_BATCH][MAX_PAYLOAD + RAWSEQ_INSERT];
	static struct mmsghdr rm[MAX_BATCH], sm[MAX_BATCH];
	static struct iovec riov[MAX_BATCH], siov[MAX_BATCH];
	static struct sockaddr_in from[MAX_BATCH];
	uint64_t rx = 0, tx = 0, send_err = 0, calls = 0, gseq = 1;
	uint32_t epoch = (uint32_t)time(NULL);

	for (unsigned i = 0; i < batch; i++) {
		riov[i] = (struct iovec){in[i], MAX_PAYLOAD};
		rm[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof(from[i]),
						.msg_iov = &riov[i], .msg_iovlen = 1};
		siov[i].iov_base = out[i];
		sm[i].msg_hdr = (struct msghdr){.msg_iov = &siov[i], .msg_iovlen = 1};
	}
	rawseq_signals();
	printf("kseq: %s:%u on %s -> %s:%u on %s, batches of %u\n", group, port, in_addr, group,
	       out_port, out_addr, batch);
	fflush(stdout);

	while (!rawseq_quit) {
		for (unsigned i = 0; i < batch; i++)
			rm[i].msg_hdr.msg_namelen = sizeof(from[i]);
		int n = recvmmsg(rs, rm, batch, MSG_WAITFORONE, NULL);
		if (n <= 0) {
			if (n < 0 && errno != EINTR && errno != EAGAIN) {
				perror("kseq: recvmmsg");
				break;
			}
			continue;
		}
		calls++;
		rx += (uint64_t)n;
		for (int i = 0; i < n; i++) {
			unsigned len = rm[i].msg_len;
			rawseq_header(out[i], (uint16_t)group_id, from[i].sin_addr.s_addr,
				      ntohs(from[i].sin_port), epoch, gseq++, (uint16_t)len);
			memcpy(out[i] + RAWSEQ_INSERT, in[i], len);
			siov[i].iov_len = RAWSEQ_INSERT + len;
		}
		int done = 0;
		while (done < n) {
			int k = sendmmsg(ss, sm + done, (unsigned)(n - done), 0);
			if (k < 0) {
				if (errno == EINTR)
					continue;
				/* ENOBUFS: the output queue is full, as a tx ring would be:
				 * the rest of the batch is dropped. */
				send_err += (uint64_t)(n - done);
				break;
			}
			done += k;
			tx += (uint64_t)k;
		}
	}
	printf("kseq: received %" PRIu64 " sent %" PRIu64 " send errors %" PRIu64
	       " in %" PRIu64 " recvmmsg calls (%.1f per call)\n", rx, tx, send_err, calls,
	       calls ? (double)rx / (double)calls : 0.0);
	if (json) {
		FILE *f = fopen(json, "w");
		if (f) {
			struct il_json j;
			il_json_begin(&j, f, 0);
			il_json_obj(&j, NULL);
			il_json_u64(&j, "received", rx);
			il_json_u64(&j, "sent", tx);
			il_json_u64(&j, "send_errors", send_err);
			il_json_u64(&j, "calls", calls);
			il_json_end(&j);
			il_json_finish(&j);
			fclose(f);
		}
	}
	return 0;
}
