/* SPDX-License-Identifier: BSD-3-Clause
 * FT-TCP south-side wrapper: per-connection state (docs/ft-tcp.md).
 */
#ifndef INTERLINK_STAGE_FTCP_H
#define INTERLINK_STAGE_FTCP_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <interlink/stage.h>

#include <interlink/ftcp_ring.h>

enum ftcp_strategy { FTCP_BASIC, FTCP_LAZY, FTCP_EAGER, FTCP_CONDITIONAL };

/* An explicit state machine rather than the paper's restarting/recovering
 * flag pair (digest G9). */
enum ftcp_state {
	FT_SYN = 1,     /* client SYN seen and logged */
	FT_SYNACK_HELD, /* server SYN-ACK held until both ISNs are durable */
	FT_EST,         /* normal operation */
	FT_RECOVERING,  /* server crashed: closed-window acks, fabricated SYN */
	FT_CLOSING,     /* both sides closed (or RST): lingers, then removed */
};

/* Lists of flows with something due (ftcp_timer.h). */
enum ftcp_list_id { FTL_CLOSING, FTL_SYN, FTL_CRASH, FTL_COUNT };
#define FTL_SLOTS 2
#define FTL_NIL (-1)

struct ftcp_link {
	int32_t prev, next; /* flow positions */
	uint8_t list;       /* 0: on none, else enum ftcp_list_id + 1 */
};

struct ftcp_list {
	int32_t head, tail;
	uint32_t len;
};

struct ftcp_flow {
	struct ftc_key key;
	uint8_t state;
	bool isns_logged;
	bool close_ok;      /* the shim announced close/shutdown */
	bool fin_c, fin_s;
	bool clamped_pending; /* Conditional: TCP tried to ack past stable_seq */
	bool syn_sent;      /* recovery: fabricated SYN out */
	bool crash_rec_pending; /* FR_CRASHED still to be queued to the logger */
	bool has_cws;
	bool post_pending;  /* stable_seq moved: strategy work after the burst */
	uint8_t cws;        /* client's window scale */
	uint8_t sws_orig;   /* server window scale the client knows */
	uint8_t sws_cur;    /* window scale of the current server TCP */
	uint8_t cmac[6], smac[6];
	bool moved; /* smac taken from a gratuitous ARP (fail-over): fence the old host */
	bool recovered;     /* handshake with a restarted server done (new_isn valid) */
	uint16_t mss;
	uint16_t syn_win;
	uint16_t last_cwin; /* client's last raw window field */
	uint32_t client_isn, server_isn;
	uint32_t delta_seq;  /* client-visible outstream seq - server TCP seq */
	uint32_t stable_seq; /* lowest instream seq not known to be logged */
	uint32_t server_seq; /* recovery: first outstream seq the new server sends */
	/* The last out_tail_len bytes of the server's output, ending at
	 * client-visible seq out_tail_end: FR_CRASHED carries them, so the
	 * restarted server's output is compared with them (docs/ft-tcp.md). */
	uint32_t out_tail_end;
	uint8_t out_tail_len;
	uint8_t out_tail[FTC_OUT_TAIL];
	uint32_t fab_isn;
	uint32_t new_isn;    /* the restarted server's ISN (its SYN-ACK may come again) */
	uint32_t c2s_next;   /* end of the instream bytes passed on */
	uint32_t c_seen;     /* end of the highest client segment seen, the outage's too */
	uint32_t out_nxt;    /* client-visible end of the outstream sent */
	/* The highest of it ever sent, across recoveries: the seq of the
	 * stage's own acks (closed windows, the window update that ends a
	 * recovery, made-up acks). A restarted server resends from server_seq,
	 * which may be below what the client last saw (G5): an ack with a seq
	 * below the one that closed the client's window would not reopen it
	 * (RFC 793's window update rule) and the client would wait for its
	 * persist timer. */
	uint32_t seq_hi;
	uint32_t srv_nxt;    /* the same in the current server TCP's space */
	uint32_t last_asn;   /* server TCP's latest ack (its rcv_nxt) */
	uint32_t last_win_bytes;
	uint32_t max_edge;   /* right edge advertised to the client (ack + window) */
	bool have_edge;
	uint32_t held_asn;
	uint32_t lag_seq;
	struct rte_mbuf *held_synack;
	struct rte_mbuf *held_ack; /* Lazy: newest pure ack above stable_seq */
	/* Recovery: the client's first segment with data (or FIN) that came
	 * during the outage, passed to the new server once its handshake is
	 * done, so the client need not wait for its retransmission timer. */
	struct rte_mbuf *held_rec;
	uint32_t held_rec_seq;
	uint64_t lag_tsc;
	uint64_t rec_tsc, syn_tsc, close_tsc;
	struct ftcp_link link[FTL_SLOTS];
};

enum {
	C_CONNS, C_SEGS_LOGGED, C_BYTES_LOGGED, C_BYTES_STABLE, C_LAG_BYTES, C_LAG_US_LAST,
	C_LAG_US_MAX, C_ACKS_TO_CLIENT, C_ACKS_CLAMPED, C_ACKS_GENERATED, C_ACKS_HELD,
	C_SYNACK_HELD, C_CLOSED_WINDOW_ACKS, C_RECOVERIES, C_RECOVERY_US_LAST,
	C_RECOVERY_US_TOTAL, C_FAB_SYNS, C_RST_TO_SERVER, C_FLOWS_ACTIVE, C_LOGGER_MSGS,
	C_DROP_RING_FULL, C_DROP_BAD_CSUM, C_DROP_UNANNOUNCED_FIN, C_DROP_UNANNOUNCED_RST,
	C_DROP_IN_RECOVERY, C_DROP_FLOW_TABLE_FULL, C_DROP_SERVER_DEAD, C_DROP_NO_MBUF,
	C_SERVER_MAC_MOVES, C_FLOWS_MOVED, C_DROP_FENCED,
	C_SYNACK_REACKED, C_RECOVERIES_ABANDONED, C_RECOVERIES_CLIENT_RESET,
	C_HELD_IN_RECOVERY, C_HELD_PASSED, C_DROP_REFUSAL_IN_OUTAGE,
	C_COUNT
};
_Static_assert(C_COUNT <= IL_MAX_STAGE_COUNTERS, "raise IL_MAX_STAGE_COUNTERS");

#define FTCP_MAX_PROTECT 16

struct ftcp {
	struct il_app *app;
	uint16_t cport, sport; /* app port index towards clients / servers */
	int strategy;
	unsigned n_protect;
	uint32_t prot_ip[FTCP_MAX_PROTECT]; /* network order */
	uint16_t prot_port[FTCP_MAX_PROTECT];
	/* Fail-over: the MAC a protected address was last claimed from by a
	 * gratuitous ARP on the server side (new connections go there too). */
	uint8_t prot_mac[FTCP_MAX_PROTECT][6];
	bool prot_known[FTCP_MAX_PROTECT];
	/* A protected server crashed (FD_CRASH) and has not yet answered a
	 * SYN again: until this TSC (0: none), its kernel's refusal of a new
	 * connection (an RST to a SYN, nothing listening) is dropped, so the
	 * client retransmits its SYN to the restarted server (hold_refusals_ms). */
	uint64_t prot_down_until[FTCP_MAX_PROTECT];
	uint64_t refusal_hold_tsc;
	struct rte_hash *h;
	struct ftcp_flow *flows;
	uint32_t max_flows;
	struct ftc_ring *ring;
	bool pend; /* records reserved, not yet published */
	int wake_fd;
	struct sockaddr_un wake_addr;
	uint64_t hz, next_scan, linger_tsc, syn_rto_tsc;
	struct ftcp_list due[FTL_COUNT];
	char ring_path[256];
	/* Flows whose stable_seq moved during this call: their Lazy release
	 * or Eager/Conditional ack is made after the burst, so it carries the
	 * newest values and never goes out behind a newer ack (the stage's
	 * own packets follow the burst's survivors on the wire). */
	uint16_t n_post;
	int32_t post[64];
};

/* Flows a timer tick may expire or serve before the rest waits for the
 * next poll: a bound on the work of one poll, whatever the flow count. */
#define FTCP_TICK_BUDGET 64

/* ftcp.c */
uint16_t ftcp_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n);
extern const char *const ftcp_counter_names[];

#endif
