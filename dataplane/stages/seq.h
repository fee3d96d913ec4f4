/* SPDX-License-Identifier: BSD-3-Clause
 * Sequencer state shared with the NAK stage (same lcore, by construction).
 */
#ifndef IL_STAGE_SEQ_H
#define IL_STAGE_SEQ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/wire_msg.h>

/* One stamped frame in the history: it covers [first, first + count).
 * The frame itself is either held by reference (m) or, when it is no
 * longer than the stage's copy_max, copied into the group's arena slot of
 * the same index (m == NULL; il_seq_hist_bytes()). */
struct il_hist_ent {
	struct rte_mbuf *m;
	uint64_t first;
	uint16_t count;
	uint16_t len;         /* the frame's length in bytes, as stamped */
	uint32_t sender;      /* sender_id, for credits and Fast-Join */
	uint64_t sender_seq;  /* sender_seq of the first message */
};

/* Per-sender FIFO at the sequencer, in groups with a control stage
 * (docs/control.md, "Sender FIFO"): the next sender_seq expected from each
 * sender, so that a frame lost before the sequencer is noticed (the frames
 * after it are refused and the sender told where to resume) and a frame
 * that was stamped is never stamped twice. An open-addressed table by
 * sender_id; at most IL_SEQ_FIFO_MAX senders per group are checked. */
#define IL_SEQ_FIFO_SLOTS 256u
#define IL_SEQ_FIFO_MAX 192u

struct il_seq_fifo {
	uint32_t id;
	uint32_t incarnation; /* from its last JOIN (or a HEARTBEAT); 0: not known */
	uint64_t next;        /* next sender_seq expected; 0: learn from the next frame */
	bool used;
	bool notify;          /* refused a frame: the control stage tells it `next` */
	bool dup;             /* refused a re-sent frame stamped already: the sender does
			       * not know it stable, the control stage grants again */
	uint64_t dup_tsc;     /* control stage: when it last did for a dup */
	bool mark;            /* a new incarnation: its next stamped frame gets FIFO_START */
	bool ctl_reset;       /* ... and the control stage must forget its old credits */
	uint64_t join_seq;    /* the group's next global seq at that JOIN: frames below
			       * it belong to older incarnations */
	uint64_t told_next;   /* control stage: `next` of the last notice, and when */
	uint64_t told_tsc;
};

/* Raw mode: what stamping a group's raw frames takes that is the same for
 * every frame, made when the first one comes and again whenever the epoch
 * or uto changed since (seq.c raw_plan). Values as stored in the frame. */
struct il_raw_plan {
	struct il_hdr1_tmpl tmpl; /* the header's fixed part */
	uint64_t made_for;        /* raw_plan_key() it was made for; 0: not made */
	uint64_t udp_sum;         /* the UDP checksum's delta, the part all frames share */
	uint32_t dst;             /* the group's address */
	uint16_t dport;           /* the group's out port */
	uint8_t mac[6];           /* the group's Ethernet address */
};

/* Per-group sequence space and retransmission history (a ring of frames,
 * oldest at head - n). Frames hold one mbuf reference each. */
struct il_seq_group {
	uint64_t next;      /* next global sequence to assign (starts at 1) */
	uint32_t head;      /* next slot to write */
	uint32_t n;         /* frames held */
	uint32_t pf;        /* frames of the current burst already prefetched */
	struct il_hist_ent *ring;
	uint8_t *arena;     /* depth slots of il_seq.slot bytes (copy_max > 0): the
			     * bytes of entries with m == NULL */
	/* Uniform total order (set by the control stage on the same lcore):
	 * every sequence below `stable` is held by every receiver of the
	 * view. Stamped into DATA headers; the history frees nothing above. */
	uint64_t stable;
	uint64_t carried;        /* stable_seq stamped on the last DATA frame */
	uint64_t stamped_frames; /* DATA frames stamped so far (idle detection) */
	struct il_raw_plan raw;   /* raw mode: what every frame shares (seq.c raw_plan) */
	struct il_seq_fifo *fifo; /* IL_SEQ_FIFO_SLOTS entries (checked only under uto) */
	uint32_t n_fifo;
};

/* A raw-mode source: (address, port, group index) and its last sender_seq. */
struct il_raw_sender {
	uint64_t key;
	uint64_t seq;
};

struct il_seq {
	struct il_app *app;
	uint32_t depth, mask;
	uint32_t n_owned;          /* groups whose state it keeps (all without shards) */
	uint32_t copy_max;  /* frames up to this many bytes go into the arena (0: none) */
	uint32_t slot;      /* arena bytes per entry: copy_max rounded up to 64 */
	uint32_t epoch;
	bool uto;           /* a control stage is attached: see il_seq_group.stable */
	bool resume_due;    /* some il_seq_fifo.notify is set */
	bool inc_due;       /* some il_seq_fifo.ctl_reset is set */
	struct il_seq_group *groups; /* app->n_groups entries */
	struct il_raw_sender *raw_senders; /* raw_mask + 1 slots (seq.c) */
	uint32_t raw_mask, raw_sender_n, raw_sender_cap;
	/* Frames the history let go during the current burst, freed together. */
	uint16_t n_victims;
	struct rte_mbuf *victims[IL_BURST_CAP];
};

enum seq_ctr {
	SEQ_C_STAMPED_FRAMES,
	SEQ_C_STAMPED_MSGS,
	SEQ_C_RAW_INSERTED,
	SEQ_C_HIST_EVICTED,
	SEQ_C_DROP_RAW_TOO_BIG,
	SEQ_C_DROP_NO_HEADROOM,
	SEQ_C_RAW_SENDER_TABLE_FULL,
	SEQ_C_DROP_HIST_FULL_UNSTABLE,
	SEQ_C_DROP_FIFO_DUP,
	SEQ_C_DROP_FIFO_GAP,
	SEQ_C_FIFO_TABLE_FULL,
	SEQ_C_FIFO_RESETS,
	SEQ_C_RESTAMPED,
	SEQ_C_COUNT
};

/* il_meta.spare of a raw-mode frame that classify's fused raw path has
 * stamped already (classify.c, seq_stamp.h): its kind is DATA and the
 * sequencer stage passes it on untouched. classify clears spare on every
 * other DATA frame, and a stray handed to another shard carries its chain
 * there (a small number), so no other frame has this value. */
#define IL_SEQ_FUSED 0xffffu

/* io->kinds: the burst holds DATA frames classify's fused raw path stamped
 * (a bit no enum il_kind has). The sequencer does not dispatch on it: a
 * burst of such frames only goes past it. classify fuses only where no
 * stage after the sequencer dispatches on DATA. */
#define IL_SEQ_KIND_FUSED 0x80u

/* Start epoch `epoch` at global sequence 1 in every group (seq.c). */
void il_seq_restart(struct il_seq *s, uint32_t epoch);

/* Oldest global sequence still held for group gi (next if none). */
static inline uint64_t il_seq_hist_low(const struct il_seq *s, unsigned gi)
{
	const struct il_seq_group *g = &s->groups[gi];
	if (!g->n)
		return g->next;
	return g->ring[(g->head - g->n) & s->mask].first;
}

/* Index (0 = oldest) of the first held frame whose range ends after seq. */
static inline uint32_t il_seq_hist_find(const struct il_seq *s, unsigned gi, uint64_t seq)
{
	const struct il_seq_group *g = &s->groups[gi];
	uint32_t lo = 0, hi = g->n;
	uint32_t base = g->head - g->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct il_hist_ent *e = &g->ring[(base + mid) & s->mask];
		if (e->first + e->count <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline const struct il_hist_ent *il_seq_hist_at(const struct il_seq *s, unsigned gi,
							 uint32_t idx)
{
	const struct il_seq_group *g = &s->groups[gi];
	return &g->ring[(g->head - g->n + idx) & s->mask];
}

/* The bytes of a copied entry (e->m == NULL) of group gi, e->len of them. */
static inline const uint8_t *il_seq_hist_bytes(const struct il_seq *s, unsigned gi,
					       const struct il_hist_ent *e)
{
	const struct il_seq_group *g = &s->groups[gi];
	return g->arena + (size_t)(e - g->ring) * s->slot;
}

/* The FIFO entry of sender `id` in group gi (created when `create`), or
 * NULL: absent, or the table is full. */
static inline struct il_seq_fifo *il_seq_fifo_get(struct il_seq *s, unsigned gi, uint32_t id,
						  bool create)
{
	struct il_seq_group *g = &s->groups[gi];
	uint32_t i = (id * 0x9e3779b1u) >> 24; /* 256 slots */

	for (;; i = (i + 1) & (IL_SEQ_FIFO_SLOTS - 1)) {
		struct il_seq_fifo *f = &g->fifo[i];

		if (f->used && f->id == id)
			return f;
		if (!f->used) {
			if (!create || g->n_fifo >= IL_SEQ_FIFO_MAX)
				return NULL;
			memset(f, 0, sizeof(*f)); /* no compound literal: C++ includes this */
			f->id = id;
			f->used = true;
			g->n_fifo++;
			return f;
		}
	}
}

#endif
