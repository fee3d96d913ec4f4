/* SPDX-License-Identifier: BSD-3-Clause
 * Classic pcap files, read whole into memory for replay (no file I/O while
 * frames are paced out) and written from a capture buffer filled on the
 * fast path. Both microsecond and nanosecond files, either byte order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgutil.h"

#define MAGIC_US 0xa1b2c3d4u
#define MAGIC_NS 0xa1b23c4du
#define LINKTYPE_ETHERNET 1u

static inline uint32_t sw32(uint32_t v, bool swap)
{
	return swap ? __builtin_bswap32(v) : v;
}

int pg_pcap_load(struct pg_pcap *pc, const char *path, size_t max_frames, char *err,
		 size_t errlen)
{
	uint32_t gh[6], rh[4];
	bool swap, ns;
	size_t cap = 1024, used = 0, dcap = 1 << 20;
	uint64_t t0 = 0;
	FILE *f = fopen(path, "rb");

	memset(pc, 0, sizeof(*pc));
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fread(gh, sizeof(gh), 1, f) != 1)
		goto bad;
	if (gh[0] == MAGIC_US || gh[0] == MAGIC_NS)
		swap = false;
	else if (gh[0] == __builtin_bswap32(MAGIC_US) || gh[0] == __builtin_bswap32(MAGIC_NS))
		swap = true;
	else
		goto bad;
	ns = sw32(gh[0], swap) == MAGIC_NS;
	if (sw32(gh[5], swap) != LINKTYPE_ETHERNET) {
		snprintf(err, errlen, "%s: link type %u, only Ethernet (1) is replayed", path,
			 sw32(gh[5], swap));
		fclose(f);
		return -1;
	}
	pc->rec = malloc(cap * sizeof(*pc->rec));
	pc->data = malloc(dcap);
	if (!pc->rec || !pc->data)
		goto oom;
	while (pc->n < max_frames && fread(rh, sizeof(rh), 1, f) == 1) {
		uint32_t caplen = sw32(rh[2], swap);
		uint64_t ts = (uint64_t)sw32(rh[0], swap) * 1000000000ull +
			      (uint64_t)sw32(rh[1], swap) * (ns ? 1u : 1000u);
		if (caplen > 65535)
			goto bad;
		if (pc->n == cap) {
			cap *= 2;
			void *r = realloc(pc->rec, cap * sizeof(*pc->rec));
			if (!r)
				goto oom;
			pc->rec = r;
		}
		while (used + caplen > dcap) {
			dcap *= 2;
			void *d = realloc(pc->data, dcap);
			if (!d)
				goto oom;
			pc->data = d;
		}
		if (caplen && fread(pc->data + used, caplen, 1, f) != 1)
			goto bad;
		if (!pc->n)
			t0 = ts;
		/* A capture whose clock stepped back keeps its frames in order,
		 * sent back to back. */
		pc->rec[pc->n].ts_ns = ts > t0 ? ts - t0 : 0;
		if (pc->n && pc->rec[pc->n].ts_ns < pc->rec[pc->n - 1].ts_ns)
			pc->rec[pc->n].ts_ns = pc->rec[pc->n - 1].ts_ns;
		pc->rec[pc->n].len = caplen;
		pc->rec[pc->n].off = (uint32_t)used;
		used += caplen;
		pc->n++;
	}
	fclose(f);
	if (!pc->n) {
		snprintf(err, errlen, "%s: no frames", path);
		pg_pcap_free(pc);
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: not a classic pcap file or truncated", path);
	fclose(f);
	pg_pcap_free(pc);
	return -1;
oom:
	snprintf(err, errlen, "%s: out of memory", path);
	fclose(f);
	pg_pcap_free(pc);
	return -1;
}

void pg_pcap_free(struct pg_pcap *pc)
{
	free(pc->rec);
	free(pc->data);
	memset(pc, 0, sizeof(*pc));
}

uint64_t pg_pcap_due(const struct pg_pcap *pc, size_t i, double speed, uint64_t hz)
{
	if (speed <= 0) /* 0: as fast as possible */
		return 0;
	return (uint64_t)((double)pc->rec[i].ts_ns / speed * (double)hz / 1e9);
}

int pg_capture_init(struct pg_capture *c, unsigned count, unsigned snap)
{
	memset(c, 0, sizeof(*c));
	if (!count)
		return 0;
	c->buf = malloc((size_t)count * snap);
	c->len = calloc(count, sizeof(uint32_t));
	c->caplen = calloc(count, sizeof(uint32_t));
	c->ts_ns = calloc(count, sizeof(uint64_t));
	c->snap = snap;
	c->cap = count;
	if (!c->buf || !c->len || !c->caplen || !c->ts_ns) {
		pg_capture_free(c);
		return -1;
	}
	return 0;
}

void pg_capture_add(struct pg_capture *c, const uint8_t *frame, uint32_t len, uint64_t ts_ns)
{
	if (c->n >= c->cap)
		return;
	uint32_t k = len < c->snap ? len : c->snap;
	memcpy(c->buf + (size_t)c->n * c->snap, frame, k);
	c->len[c->n] = len;
	c->caplen[c->n] = k;
	c->ts_ns[c->n] = ts_ns;
	c->n++;
}

int pg_capture_write(const struct pg_capture *c, const char *path, uint64_t base_ns)
{
	uint32_t gh[6] = {MAGIC_NS, 0x00040002u, 0, 0, c->snap ? c->snap : 65535,
			  LINKTYPE_ETHERNET};
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	fwrite(gh, sizeof(gh), 1, f);
	for (unsigned i = 0; i < c->n; i++) {
		uint64_t t = base_ns + c->ts_ns[i];
		uint32_t rh[4] = {(uint32_t)(t / 1000000000ull), (uint32_t)(t % 1000000000ull),
				  c->caplen[i], c->len[i]};
		fwrite(rh, sizeof(rh), 1, f);
		fwrite(c->buf + (size_t)i * c->snap, c->caplen[i], 1, f);
	}
	return fclose(f) ? -1 : 0;
}

void pg_capture_free(struct pg_capture *c)
{
	free(c->buf);
	free(c->len);
	free(c->caplen);
	free(c->ts_ns);
	memset(c, 0, sizeof(*c));
}
