/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the FT-TCP logger's log loader and replay planner
 * (control/ftlog/seglog.c, replay.c), on a segment of the shared log in
 * memory: what a restarted logger reads back (ftl_load_image: the records
 * applied as a restart applies them, for one connection's key or for
 * every connection, tombstones, copies forward and holes included) and
 * what recovery then plans from it (ftl_replay_prepare, then the steps
 * ftl_replay_build takes over each span of the connection's records:
 * ftl_replay_plan_init, _add, _finish: the logged reads and the extents of
 * the log that give the instream bytes).
 *
 * The input is either a raw image (a damaged or hostile segment, with or
 * without a segment header the harness puts in front, of format version 1,
 * or 2 whose records must also match their CRCs), or a program that
 * writes a segment header and records with well-formed headers for two
 * connections (SYN, SYN-ACK, DATA anywhere around the stream, reads,
 * truncation records, tombstones, copies forward whose announced length
 * may or may not be there, the others) and maybe a torn tail. In the
 * programs, every DATA payload byte is a function of its connection and
 * its stream position, as in TCP, where a retransmission carries the same
 * bytes.
 *
 * Checked: the loader stops at a record boundary inside the image; the
 * connection's spans lie inside it; the replay's extents lie inside DATA
 * payloads of that connection's records, cover exactly the stream the
 * connection's state says is logged, and (programs) give back its bytes in
 * order; no replayed read is empty, none exceeds what is logged, and their
 * total is what the plan says; a well-formed log that the loader says is
 * logged up to some byte always has a replay.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftlog.h"
#include "fz.h"

static struct ftl l;
static const struct ftc_key K1 = {.cip = 0x0100000a, .sip = 0x0200000a, .cport = 0x3930,
				   .sport = 0x8913};
static const struct ftc_key K2 = {.cip = 0x0300000a, .sip = 0x0200000a, .cport = 0x3a30,
				   .sport = 0x8913};

#define IMG_MAX 8192
#define SEG_HDR 56 /* FR_SEG: a record header and its 8-byte magic */

FZ_HARNESS static uint8_t stream_byte(const struct ftc_key *k, uint32_t seq)
{
	uint8_t b = (uint8_t)(seq * 131u + (seq >> 8) * 7u);

	return k == &K1 ? b : (uint8_t)(b ^ 0x5a);
}

/* The segment's header record, for a segment starting at start, of
 * format version 1 (records unchecked) or 2 (each record's CRC checked). */
FZ_HARNESS static void seg_header(uint8_t *img, uint64_t start, uint32_t version)
{
	struct ftc_rec *r = (struct ftc_rec *)img;

	*r = (struct ftc_rec){.len = SEG_HDR, .type = FR_SEG, .plen = 8, .seq = (uint32_t)start,
			      .ack = (uint32_t)(start >> 32), .aux = version};
	memcpy(r + 1, FTC_SEG_MAGIC, 8);
	ftl_rec_seal(r);
}

/* Records from a program, after the header; returns the image length. */
FZ_HARNESS static size_t program(struct fz *z, uint8_t *img, size_t len)
{
	uint32_t isn = fz_u8(z) & 1 ? fz_u32(z) : 0xfffffff0u - fz_u8(z);

	while (z->n > 0) {
		uint8_t op = fz_u8(z), flags = 0;
		uint16_t type, plen = 0;
		uint32_t seq = 0, aux = 0, ack = 0;
		const struct ftc_key *k = op & 0x40 ? &K2 : &K1;

		switch (op % 8) {
		case 0:
			type = FR_SYN;
			seq = op & 0x80 ? isn + fz_u8(z) : isn;
			break;
		case 1:
			type = FR_SYNACK;
			seq = fz_u32(z);
			break;
		case 2:
		case 3: /* client data around the stream, retransmissions included */
			type = FR_DATA;
			seq = op & 0x80 ? fz_u32(z) : isn + 1 + fz_u16(z) % 512;
			plen = fz_u8(z) % 96;
			flags = fz_u8(z) & 0x11; /* ACK, FIN */
			ack = fz_u32(z);
			break;
		case 4:
		case 5:
			type = FR_READ;
			aux = op & 0x80 ? fz_u32(z) : fz_u8(z);
			if ((op & 0x30) == 0x30) { /* a truncation record */
				flags = 0xff;
				seq = fz_u8(z);
				ack = fz_u32(z);
			}
			break;
		case 6:
			type = (uint16_t)(op & 0x80 ? FR_CRASHED : FR_CLOSED);
			seq = fz_u32(z);
			break;
		default:
			if (op & 0x80) {
				/* A copy forward: its length (the records that
				 * follow), whole or not. */
				type = op & 0x20 ? FR_MOVED : FR_RECOVERED;
				seq = (uint32_t)fz_u8(z) * 8;
			} else {
				type = fz_u16(z);
				seq = fz_u32(z);
			}
			break;
		}
		uint32_t sz = ftc_rec_size(plen);
		if (len + sz > IMG_MAX)
			break;
		struct ftc_rec *r = (struct ftc_rec *)(img + len);
		*r = (struct ftc_rec){.len = sz, .type = type, .plen = plen, .key = *k,
				      .seq = seq, .ack = ack, .flags = flags, .aux = aux};
		uint8_t *pl = img + len + sizeof(*r);
		for (uint32_t i = 0; i < plen; i++)
			pl[i] = stream_byte(k, seq + i);
		memset(pl + plen, 0, sz - sizeof(*r) - plen);
		ftl_rec_seal(r); /* as the logger appends it */
		len += sz;
	}
	return len;
}

/* The extent's bytes lie in the payload of one DATA record of K1's. */
FZ_HARNESS static bool in_data_payload(const uint8_t *img, size_t len, uint64_t off, uint32_t n)
{
	size_t o = 0;

	while (o + sizeof(struct ftc_rec) <= len) {
		const struct ftc_rec *r = (const struct ftc_rec *)(img + o);

		if (r->len < sizeof(*r) || o + r->len > len || sizeof(*r) + r->plen > r->len)
			break;
		if (r->type == FR_DATA && !memcmp(&r->key, &K1, sizeof(K1)) &&
		    off >= o + sizeof(*r) && off + n <= o + sizeof(*r) + r->plen)
			return true;
		o += r->len;
	}
	return false;
}

/* Whether a DATA record of K1's carries a FIN whose sequence number is
 * not fin_seq (the connection's last logged one). */
FZ_HARNESS static bool fin_elsewhere(const uint8_t *img, size_t len, uint32_t fin_seq)
{
	size_t o = 0;

	while (o + sizeof(struct ftc_rec) <= len) {
		const struct ftc_rec *r = (const struct ftc_rec *)(img + o);

		if (r->len < sizeof(*r) || o + r->len > len || sizeof(*r) + r->plen > r->len)
			break;
		if (r->type == FR_DATA && (r->flags & 0x01) && !memcmp(&r->key, &K1, sizeof(K1)) &&
		    r->seq + r->plen != fin_seq)
			return true;
		o += r->len;
	}
	return false;
}

FZ_HARNESS static void reset(void)
{
	struct ftl_conn *c;

	/* The live connections and their buffers (a freed one keeps its
	 * buffers in its slot for the next: reachable, reused), then the
	 * segment table; not the whole table of 4096 slots per input. */
	FTL_FOR_EACH_LIVE(&l, c) {
		ftl_conn_free(&l, c);
		free(c->spans);
		free(c->hole_s);
		free(c->hole_e);
		c->spans = NULL;
		c->hole_s = c->hole_e = NULL;
		c->cap_spans = c->cap_holes = 0;
	}
	ftl_log_close(&l);
	memset(&l.st, 0, sizeof(l.st));
	l.written = l.durable = 0;
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t img_static[IMG_MAX];
	struct fz z = { data, size };
	uint8_t mode = fz_u8(&z);
	bool prog = mode & 1, all_keys = mode & 4;
	uint64_t start = (uint64_t)fz_u32(&z) << 3;
	size_t len;
	uint8_t *img;

	l.dir = "/var/lib/interlink/ftlog";
	if (prog) {
		seg_header(img_static, start, FTC_LOG_VERSION);
		len = program(&z, img_static, SEG_HDR);
		/* a torn tail: part of one more record */
		size_t got, tail = fz_u8(&z) % 48;
		const uint8_t *t = fz_bytes(&z, tail, &got);
		if (len + got <= IMG_MAX) {
			memcpy(img_static + len, t, got);
			len += got;
		}
	} else {
		size_t off = mode & 2 ? 0 : SEG_HDR; /* a header of the harness's */
		/* version 1 mostly: the records' parsing, not their CRCs, is
		 * what a raw image reaches */
		if (off)
			seg_header(img_static, start, mode & 8 ? FTC_LOG_VERSION : 1);
		len = z.n < IMG_MAX - off ? z.n : IMG_MAX - off;
		memcpy(img_static + off, z.p, len);
		len += off;
	}
	/* Exact size on the heap: ASan sees a read past the segment's end. */
	img = malloc(len ? len : 1);
	if (img == NULL)
		abort();
	memcpy(img, img_static, len);

	struct ftl_conn *c = NULL;
	size_t good = ftl_load_image(&l, img, len, all_keys ? NULL : &K1, all_keys ? NULL : &c);

	FZ_CHECK(good <= len, "loaded %zu of %zu bytes", good, len);
	if (good == 0)
		goto out;
	start = (uint64_t)((const struct ftc_rec *)img)->ack << 32 |
		((const struct ftc_rec *)img)->seq;
	if (all_keys)
		c = ftl_conn_find(&l, &K1);
	if (c == NULL || !c->have_syn)
		goto out;
	/* As ftl_load_dir leaves a loaded connection. */
	l.written = l.durable = start + good;
	ftl_conn_durable(c);

	struct ftl_replay j;
	struct ftl_replay_plan p;
	uint64_t log_bytes = 0;

	if (ftl_replay_prepare(&l, c, &j))
		goto out;
	for (uint32_t i = 0; i < j.n_spans; i++) {
		FZ_CHECK(j.spans[i].start >= start && j.spans[i].start <= j.spans[i].end &&
				 j.spans[i].end <= start + good,
			 "span %u [%lu, %lu) outside the segment", i,
			 (unsigned long)j.spans[i].start, (unsigned long)j.spans[i].end);
		log_bytes += j.spans[i].end - j.spans[i].start;
	}
	/* ftl_replay_build's steps, over the image instead of the mapped
	 * segments. */
	int rc = ftl_replay_plan_init(&p, &j, log_bytes);
	for (uint32_t i = 0; rc == 0 && i < j.n_spans; i++)
		rc = ftl_replay_plan_add(&p, &j, img + (j.spans[i].start - start),
					 (size_t)(j.spans[i].end - j.spans[i].start),
					 j.spans[i].start);
	if (rc == 0)
		rc = ftl_replay_plan_finish(&p, &j);
	else
		ftl_replay_plan_free(&p);
	ftl_replay_done(&l, NULL, &j);

	/* Whatever was logged contiguously has a replay: with the client's
	 * FIN as the last thing logged, the bytes before it (the FIN is an
	 * end of stream, not a byte). A FIN in the middle of the logged
	 * stream (not a TCP stream) leaves a sequence number no byte stands
	 * for: no replay. */
	if (prog && c->n_holes == 0 && !fin_elsewhere(img, good, c->contig_durable - 1))
		FZ_CHECK(rc == 0, "logged up to %u bytes past the base, no replay",
			 c->contig - j.base);
	FZ_CHECK(!j.fin || (c->have_fin && j.data_len + 1 == c->contig_durable - j.base),
		 "a FIN replayed that is not the last thing logged");
	if (rc != 0)
		goto out;
	uint64_t covered = 0, reads = 0;

	for (uint32_t i = 0; i < p.n_ext; i++) {
		const struct ftc_replay_ext *e = &p.ext[i];

		FZ_CHECK(e->len > 0 && e->log_off >= start &&
				 in_data_payload(img, good, e->log_off - start, e->len),
			 "extent %u (%lu + %u) is not inside a DATA payload", i,
			 (unsigned long)e->log_off, e->len);
		if (prog)
			for (uint32_t k = 0; k < e->len; k++)
				FZ_CHECK(img[e->log_off - start + k] ==
						 stream_byte(&K1, j.base + (uint32_t)covered + k),
					 "replayed stream byte %lu is wrong",
					 (unsigned long)(covered + k));
		covered += e->len;
	}
	FZ_CHECK(covered == j.data_len, "extents cover %lu of %u", (unsigned long)covered,
		 j.data_len);
	for (uint32_t i = 0; i < p.n_reads; i++) {
		FZ_CHECK(p.lens[i] > 0, "read %u of 0 bytes replayed", i);
		reads += p.lens[i];
	}
	FZ_CHECK(reads == p.read_total && reads <= j.data_len && p.n_reads <= j.nmax,
		 "reads %lu (plan %lu) of %u logged bytes", (unsigned long)reads,
		 (unsigned long)p.read_total, j.data_len);
	ftl_replay_plan_free(&p);
out:
	free(img);
	reset();
	return 0;
}
