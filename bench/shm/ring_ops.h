/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The ring operations the ring microbenchmark times, in C: the ring
 * headers use C11 atomics, which C++17 cannot include. Each call is one
 * burst as its real user makes it (the data plane's producer side, the
 * control process's or the logger's consumer side).
 */
#ifndef IL_BENCH_RING_OPS_H
#define IL_BENCH_RING_OPS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ring_bench;

/* What a benchmark drives. */
enum ring_kind {
	RB_CHAN,       /* control channel, up ring: 64-byte messages */
	RB_FTCP_UP,    /* FT-TCP up ring: 48-byte record header + payload */
	RB_FTCP_DOWN,  /* FT-TCP down ring: 32-byte messages, sent one by one */
};

/* Open a fresh ring file under /dev/shm (a name unique to this process)
 * with both ends mapped. NULL with a message on stderr on failure. */
struct ring_bench *rb_open(enum ring_kind kind);
void rb_close(struct ring_bench *b);

/* Producer: enqueue n messages (records of plen payload bytes for
 * RB_FTCP_UP), publish and do the wake-up check once. Returns how many
 * went in (fewer when the ring is full). */
unsigned rb_send(struct ring_bench *b, unsigned n, unsigned plen);

/* Consumer: dequeue up to n messages, reading each one's type. */
unsigned rb_recv(struct ring_bench *b, unsigned n);

#ifdef __cplusplus
}
#endif

#endif
