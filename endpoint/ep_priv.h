/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink internals shared by endpoint.c (sockets, ring, event loop)
 * and ep_proto.c (the protocol: frames in and out, timers, delivery).
 */
#ifndef IL_EP_PRIV_H
#define IL_EP_PRIV_H

#include <stdlib.h>

#include <liburing.h>
#include <netinet/in.h>

#include <interlink/auth.h>
#include <interlink/endpoint.h>
#include <interlink/parse.h>
#include <interlink/tfrc.h>

#include "ep_core.h"

#define EP_FRAME_MAX 9000u /* Interlink header + body, jumbo frames included */
#define EP_RXBUF 9216u
#define EP_MAX_FIFO 64
#define EP_MAX_HELD 65536
#define EP_FINAL_WAIT_NS 3000000000ull
#define EP_REPORT_NS 10000000ull    /* EPOCH_REPORT again this often while awaiting */
#define EP_CUT_WAIT_NS 1000000000ull /* T_fin: repairs below a cut take at most this */
#define EP_UD_KIND (0xffull << 32)
#define EP_UD_RX (1ull << 32)
#define EP_UD_TX (2ull << 32)
#define EP_LEC_MAX_VIEW 256

/* A received datagram, kept while any message in it is not U-delivered. */
struct ep_frame {
	uint32_t refs;
	uint32_t len;
	uint8_t data[];
};

static inline void ep_frame_put(struct ep_frame *f)
{
	if (--f->refs == 0)
		free(f);
}

enum ep_gstate { EP_G_JOINING, EP_G_MEMBER };

struct ep_fifo {
	unsigned n;
	struct {
		uint32_t id;
		uint64_t next;
	} s[EP_MAX_FIFO];
};

struct ep_group {
	bool used;
	uint16_t id;
	uint32_t roles;
	struct sockaddr_in dst;
	struct il_ep_callbacks cb;
	void *user;
	enum ep_gstate st;
	uint32_t view_id;
	uint64_t join_ns, hb_ns;
	struct ep_rxw w;     /* receivers */
	struct ep_ack ack;   /* receivers */
	struct ep_credit cr; /* senders */
	struct ep_pace pace; /* senders: CREDIT's rate_kbps (WAN groups) */
	uint64_t tx_bytes;   /* senders: DATA bytes sent */
	/* receivers: the loss-event rate (thesis 4.3.2) over the group's
	 * global sequence, and the latest new frame, echoed in ACKs so the
	 * appliance can take an RTT sample (Fig. 4.3) */
	struct il_tfrc_loss loss;
	struct il_tfrc_flow flow;
	uint64_t echo_seq, echo_ns;
	struct ep_q q;       /* senders: deferred messages */
	struct ep_q sent;    /* senders: sent, not known stable, from sent_base on */
	uint64_t sent_base;
	/* senders: since when sent_base has not moved (the resend timeout) */
	uint64_t watch_base, watch_ns;
	/* receivers: each sender's next FIFO sequence, so that a message its
	 * sender re-sent into a new epoch is delivered once; kept apart for
	 * PO and UTO, since what was P- but not U-delivered in an old epoch
	 * comes again */
	struct ep_fifo po_fifo, uto_fifo;
	/* receivers: lateral error correction (ep_lec.c) */
	uint8_t lec_mode;    /* IL_EP_LEC_* */
	double lec_c;
	bool lec_view;       /* lec_members holds the view in force */
	uint16_t lec_n;
	uint32_t lec_members[EP_LEC_MAX_VIEW]; /* the view's receivers */
	/* receivers, at a cut (docs/ha.md): what is missing below it will not come */
	bool cut_fail;
	/* senders: the newer epoch our unstable messages went again into (at
	 * its first frame, not at the old one's final watermark) */
	uint32_t rewound_epoch;
};

/* New-epoch frames held until the old epoch's final watermark is known. */
struct ep_held {
	uint32_t len;
	uint8_t data[];
};

struct ep_txbuf {
	struct msghdr mh;
	struct iovec iov;
	struct sockaddr_in to;
	uint8_t data[EP_FRAME_MAX];
};

/* Where an endpoint without sockets sends its frames (ep_open_detached). */
typedef void (*ep_tx_tap)(void *arg, const uint8_t *frame, size_t len);

_Static_assert(IL_EP_MAX_GROUPS <= 255, "a group's slot + 1 fits il_ep.gslot");

struct il_ep {
	struct il_ep_config cfg;
	int txfd, rxfd, tx_ifindex, rx_ifindex;
	struct in_addr tx_addr;
	uint32_t member_id, incarnation, epoch;
	size_t max_frame; /* Interlink header + body */
	struct io_uring ring;
	bool ring_ok;
	uint8_t (*rx)[EP_RXBUF];
	struct ep_txbuf *tx;
	unsigned *tx_free, n_tx_free;
	struct ep_group g[IL_EP_MAX_GROUPS];
	/* Loops over the groups stop at n_slots (1 + the highest slot in
	 * use): the calloc'd table costs memory only where it is used. A
	 * group's slot by its id: gslot[id] = slot + 1 (0: not joined). */
	unsigned n_slots;
	uint8_t gslot[65536];
	struct il_ep_stats st;
	/* sequencer restarts (docs/control.md section 4 rule 6) */
	uint32_t final_epoch;   /* the epoch final_wm belongs to */
	uint64_t final_wm;
	bool awaiting;          /* a new epoch began; the old one's final watermark not yet */
	uint32_t new_epoch;
	uint64_t await_until;
	/* a pair's takeover (docs/ha.md): reports until the cut arrives, then
	 * repairs of the old epoch below it */
	uint64_t report_ns;
	bool cutting;
	uint64_t cut, cut_until;
	struct ep_held **held;
	unsigned n_held, cap_held;
	struct ep_lec *lec;     /* ep_lec.c; NULL until a group uses LEC */
	uint8_t rx_via;         /* IL_EP_VIA_LEC while a rebuilt frame is handled */
	/* il_ep_set_auth: our control messages signed, the appliance's checked.
	 * Two replay tables: the appliance's control stage (STABLE, VIEW,
	 * CREDIT) and its nak stage (UNAVAIL) count separately. */
	struct il_auth_keyring *auth;
	const struct il_auth_key *auth_sign;
	uint64_t auth_ctr;
	struct il_auth_replay *auth_ctl, *auth_nak;
	struct il_ep_auth_stats auth_st;
	/* Detached (no sockets, no ring): what would be sent goes here. */
	ep_tx_tap tx_tap;
	void *tx_tap_arg;
};

uint64_t ep_now_ns(void);
/* An endpoint with the protocol and none of the I/O: no sockets, no ring.
 * Its frames go to tap; the caller hands it datagrams (ep_rx_datagram)
 * and runs its timers and deliveries with a clock of its own. The fuzzer
 * and unit tests drive libinterlink's protocol in process this way.
 * cfg->member_id must be set (there is no interface address to take). */
struct il_ep *ep_open_detached(const struct il_ep_config *cfg, ep_tx_tap tap, void *arg,
			       char *err, size_t errlen);
struct io_uring_sqe *ep_sqe(struct il_ep *ep);
struct ep_group *ep_group(struct il_ep *ep, uint16_t id);
void ep_release_held(struct ep_group *g);

/* ep_auth.c */
/* A control message of len bytes at msg, built unsigned, signed in place
 * when auth is on (the buffer has IL_AUTH_OPT_LEN bytes of room): its length. */
size_t ep_auth_seal(struct il_ep *ep, uint8_t *msg, size_t len);
/* Whether a STABLE, VIEW, CREDIT or UNAVAIL of the appliance may be taken
 * (always when auth is off); what is not is counted. */
bool ep_auth_ok(struct il_ep *ep, const uint8_t *msg, size_t len);
void ep_auth_free(struct il_ep *ep);

/* ep_lec.c: lateral error correction */
struct il_ep_view;
void ep_lec_data(struct il_ep *ep, struct ep_group *g, const uint8_t *d, size_t len,
		 uint64_t now);
void ep_lec_repair_rx(struct il_ep *ep, const uint8_t *d, const struct il_parsed *p,
		      uint64_t now);
void ep_lec_rebuilt(struct il_ep *ep, uint64_t now); /* hands rebuilt frames on */
void ep_lec_view(struct il_ep *ep, struct ep_group *g, const void *vb);
void ep_lec_gone(struct il_ep *ep, struct ep_group *g);
void ep_lec_tick(struct il_ep *ep, uint64_t now);
void ep_lec_free(struct il_ep *ep);
/* The most DATA (Interlink header and body) a frame of g may carry. */
size_t ep_frame_room(const struct il_ep *ep, const struct ep_group *g);
/* The NAK timers of g (LEC groups: Ricochet's). */
uint64_t ep_nak_delay_ns(const struct il_ep *ep, const struct ep_group *g);
uint64_t ep_nak_retry_ns(const struct il_ep *ep, const struct ep_group *g);

/* ep_proto.c */
/* One datagram of len bytes to `to`, from the TX socket. */
void ep_send_to(struct il_ep *ep, const uint8_t *d, size_t len, const struct sockaddr_in *to);
void ep_rx_datagram(struct il_ep *ep, const uint8_t *d, size_t len, uint64_t now);
void ep_deliver(struct il_ep *ep, struct ep_group *g);
void ep_timers(struct il_ep *ep, uint64_t now);
void ep_send_member(struct il_ep *ep, struct ep_group *g, uint8_t type);
void ep_epoch_timer(struct il_ep *ep, uint64_t now);

#endif
