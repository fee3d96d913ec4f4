/* SPDX-License-Identifier: BSD-3-Clause
 * Ring operations for bench_shm_ring.cc, through the control channel's API
 * and the FT-TCP rings' handles, as their users make them.
 */
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <interlink/chan.h>
#include <interlink/ftcp_ring.h>

#include "ring_ops.h"

#define MAX_BURST 256u
#define FTCP_UP_BYTES (1u << 20)

/* The producer's and the consumer's state apart (two threads use them),
 * as two processes' would be. */
struct ring_bench {
	enum ring_kind kind;
	char path[128];
	struct il_chan *dp, *ctl;
	struct ftc_ring *dp_ft, *logger; /* the two ends, as two processes have them */
	void *spacer;
	struct {
		alignas(128) struct il_cmsg msgs[MAX_BURST];
		uint8_t payload[2048];
		volatile unsigned sink;
	} p;
	struct {
		alignas(128) struct il_cmsg out[MAX_BURST];
		struct ftc_down down_out[MAX_BURST];
		volatile unsigned sink;
	} c;
};

struct ring_bench *rb_open(enum ring_kind kind)
{
	static unsigned seq;
	struct ring_bench *b = aligned_alloc(128, sizeof(*b));
	char err[256];

	if (b == NULL)
		return NULL;
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	snprintf(b->path, sizeof(b->path), "/dev/shm/il-bench-ring-%d-%u", (int)getpid(), seq++);
	unlink(b->path);
	if (kind == RB_CHAN) {
		struct il_chan_params p = { .up_slots = 4096, .down_slots = 64 };
		int efd;

		/* The spacer keeps the two handles' heap blocks apart. */
		if (il_chan_open(b->path, IL_CHAN_CONTROL, &p, &b->ctl, err, sizeof(err)) != 0 ||
		    (b->spacer = malloc(256)) == NULL ||
		    il_chan_open(b->path, IL_CHAN_DATAPLANE, NULL, &b->dp, err, sizeof(err)) != 0)
			goto fail;
		/* With a wake fd the producer runs its wake-up check on every
		 * burst, as the data plane does. */
		efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		il_chan_set_wake_fd(b->dp, efd);
		for (unsigned i = 0; i < MAX_BURST; i++) {
			b->p.msgs[i].type = IL_CM_ACK;
			b->p.msgs[i].len = sizeof(b->p.msgs[i].u.ack);
			b->p.msgs[i].u.ack.receiver = i;
			b->p.msgs[i].u.ack.cum_seq = i;
		}
	} else {
		b->dp_ft = ftc_ring_open(b->path, FTCP_UP_BYTES, FTC_DATAPLANE, err, sizeof(err));
		b->spacer = b->dp_ft ? malloc(256) : NULL;
		b->logger = b->spacer ? ftc_ring_open(b->path, 0, FTC_LOGGER, err, sizeof(err))
				      : NULL;
		if (b->logger == NULL)
			goto fail;
	}
	return b;
fail:
	fprintf(stderr, "ring bench: %s\n", err);
	rb_close(b);
	return NULL;
}

void rb_close(struct ring_bench *b)
{
	if (b == NULL)
		return;
	il_chan_close(b->dp);
	il_chan_close(b->ctl);
	ftc_ring_close(b->dp_ft);
	ftc_ring_close(b->logger);
	unlink(b->path);
	free(b->spacer);
	free(b);
}

static unsigned up_send(struct ring_bench *b, unsigned n, unsigned plen)
{
	static const struct ftc_key key = { 0x0100000a, 0x0200000a, 0x3930, 0x5000 };
	uint32_t len = ftc_rec_size(plen);
	unsigned k;

	for (k = 0; k < n; k++) {
		struct ftc_rec *r = il_shm_reserve(&b->dp_ft->tx, len);

		if (r == NULL)
			break;
		r->len = len;
		r->type = FR_DATA;
		r->plen = (uint16_t)plen;
		r->key = key;
		r->seq = k;
		r->ack = 0;
		r->win = 0;
		r->flags = 0;
		r->spare = 0;
		r->aux = 0;
		r->ts_ns = 0;
		memcpy(r + 1, b->p.payload, plen);
	}
	il_shm_publish(&b->dp_ft->tx);
	b->p.sink += il_shm_wake_due(&b->dp_ft->tx);
	return k;
}

static unsigned up_recv(struct ring_bench *b, unsigned n)
{
	const struct ftc_rec *r;
	uint32_t len;
	unsigned k = 0, sum = 0;

	while (k < n && il_shm_rec_next(&b->logger->rx, (const void **)&r, &len) == 1) {
		sum += r->type;
		k++;
	}
	il_shm_release(&b->logger->rx);
	b->c.sink += sum;
	return k;
}

unsigned rb_send(struct ring_bench *b, unsigned n, unsigned plen)
{
	unsigned k = 0;

	if (n > MAX_BURST)
		n = MAX_BURST;
	switch (b->kind) {
	case RB_CHAN:
		return il_chan_send_burst(b->dp, b->p.msgs, n);
	case RB_FTCP_UP:
		return up_send(b, n, plen);
	case RB_FTCP_DOWN:
		/* The logger sends its messages one at a time. */
		for (; k < n; k++) {
			struct ftc_down d = { .type = FD_STABLE, .a = k };

			if (il_shm_send(&b->logger->tx, &d, 1) != 1)
				break;
		}
		return k;
	}
	return 0;
}

unsigned rb_recv(struct ring_bench *b, unsigned n)
{
	unsigned k = 0, sum = 0;

	if (n > MAX_BURST)
		n = MAX_BURST;
	switch (b->kind) {
	case RB_CHAN:
		k = il_chan_recv_burst(b->ctl, b->c.out, n);
		for (unsigned i = 0; i < k; i++)
			sum += b->c.out[i].type;
		break;
	case RB_FTCP_UP:
		return up_recv(b, n);
	case RB_FTCP_DOWN:
		k = il_shm_recv(&b->dp_ft->rx, b->c.down_out, n);
		for (unsigned i = 0; i < k; i++)
			sum += b->c.down_out[i].type;
		break;
	}
	b->c.sink += sum;
	return k;
}
