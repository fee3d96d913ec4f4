/* SPDX-License-Identifier: BSD-3-Clause
 * Ring operations for bench_shm_ring.cc, on the control channel's API and
 * on the FT-TCP ring's inline functions.
 */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <interlink/chan.h>

#include "ftcp_proto.h"
#include "ring_ops.h"

#define MAX_BURST 256u
#define FTCP_UP_BYTES (1u << 20)

/* The producer's and the consumer's state apart (two threads use them),
 * as two processes' would be. */
struct ring_bench {
	enum ring_kind kind;
	char path[128];
	struct il_chan *dp, *ctl;
	struct ftc_ring_hdr *prod, *cons; /* two mappings, as two processes have */
	void *spacer;
	struct {
		alignas(128) uint64_t head, cached_tail;
		struct il_cmsg msgs[MAX_BURST];
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
		b->prod = ftc_ring_open(b->path, FTCP_UP_BYTES, err, sizeof(err));
		b->cons = b->prod ? ftc_ring_open(b->path, 0, err, sizeof(err)) : NULL;
		if (b->cons == NULL)
			goto fail;
		b->p.head = atomic_load(&b->prod->up_head);
		b->p.cached_tail = atomic_load(&b->prod->up_tail);
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
	ftc_ring_close(b->prod);
	ftc_ring_close(b->cons);
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
		uint64_t nh;
		struct ftc_rec *r = (struct ftc_rec *)ftc_up_reserve(b->prod, b->p.head,
								      &b->p.cached_tail, len, &nh);
		if (r == NULL) {
			b->prod->up_drops++;
			break;
		}
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
		b->p.head = nh;
	}
	ftc_up_publish(b->prod, b->p.head);
	b->p.sink += ftc_up_wants_wake(b->prod);
	return k;
}

static unsigned up_recv(struct ring_bench *b, unsigned n)
{
	struct ftc_ring_hdr *h = b->cons;
	uint64_t tail = atomic_load_explicit(&h->up_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&h->up_head, memory_order_acquire);
	unsigned k = 0, sum = 0;

	while (tail != head && k < n) {
		const struct ftc_rec *r =
			(const struct ftc_rec *)(ftc_up_data(h) + (tail & (h->up_size - 1)));

		tail += r->len;
		if (r->type == FR_PAD)
			continue;
		sum += r->type;
		k++;
	}
	atomic_store_explicit(&h->up_tail, tail, memory_order_release);
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

			if (!ftc_down_send(b->cons, &d))
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
		k = ftc_down_recv(b->prod, b->c.down_out, n);
		for (unsigned i = 0; i < k; i++)
			sum += b->c.down_out[i].type;
		break;
	}
	b->c.sink += sum;
	return k;
}
