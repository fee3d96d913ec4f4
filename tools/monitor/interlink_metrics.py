"""A snapshot of the sources (interlink_monitor.collect) in Prometheus' text exposition format
(version 0.0.4): every counter of the appliance per port, stage and group, and of
interlink-control per group and member. Metric names and labels are listed, with what each
means, in docs/operations.md ("Prometheus")."""
import math
import re

from interlink_monitor import CHANNEL_KEY, CHANNEL_STATE_KEYS, CONTROL_STATE_KEYS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DOCS = "docs/operations.md"

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_:]")


def metric_name(s):
    s = _NAME_BAD.sub("_", s)
    return "_" + s if s[:1].isdigit() else s


def label_value(v):
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def number(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


class Exposition:
    """Families in the order first added; each has one TYPE and HELP and its samples."""

    def __init__(self):
        self.families = {}

    def add(self, name, mtype, help_, value, /, **labels):
        name = metric_name(name)
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = (mtype, help_, [])
        elif fam[0] != mtype:
            raise ValueError(f"{name} is a {fam[0]} and a {mtype}")
        fam[2].append((labels, value))

    def counter(self, name, help_, value, /, **labels):
        self.add(name if name.endswith("_total") else name + "_total", "counter", help_,
                 value, **labels)

    def gauge(self, name, help_, value, /, **labels):
        self.add(name, "gauge", help_, value, **labels)

    def render(self):
        out = []
        for name, (mtype, help_, samples) in self.families.items():
            out.append(f"# HELP {name} {help_.replace(chr(92), chr(92) * 2)}")
            out.append(f"# TYPE {name} {mtype}")
            for labels, value in samples:
                if labels:
                    ls = ",".join(f'{metric_name(k)}="{label_value(v)}"'
                                  for k, v in labels.items())
                    out.append(f"{name}{{{ls}}} {number(value)}")
                else:
                    out.append(f"{name} {number(value)}")
        return "\n".join(out) + "\n"


PORT_HELP = {
    "rx_packets": "Frames received on the port (counted by the workers).",
    "tx_packets": "Frames the port accepted for sending.",
    "rx_missed": "Frames the port dropped before the appliance saw them (PMD imissed, "
                 "and for af_packet the kernel's ring drops).",
    "rx_errors": "Receive errors and mbuf allocation failures reported by the PMD.",
    "tx_errors": "Transmit errors reported by the PMD.",
    "drop_tx_full": "Frames dropped because the port's tx ring was full, or emitted by a stage "
                    "while the poll's emit queue was full.",
    "drop_link_down": "Frames not sent because the port's link was down (memif: no peer "
                      "connected).",
}


def appliance_metrics(e, a):
    info = a.info
    e.gauge("interlink_appliance_info", "The appliance's identity (value 1).", 1,
            name=info.get("name", ""), udp_port=info.get("udp_port", ""))
    e.gauge("interlink_appliance_epoch", "Sequencer epoch stamped on every frame.",
            info.get("epoch", 0))
    e.gauge("interlink_appliance_uptime_seconds", "Seconds since the appliance started.",
            info.get("uptime_s", 0))
    e.gauge("interlink_appliance_groups", "Configured groups.", info.get("groups", 0))
    e.gauge("interlink_appliance_workers", "Worker lcores.", info.get("workers", 0))
    e.counter("interlink_appliance_drops", "Every dropped frame: stage drop_* counters and "
              "port drops together.", info.get("drops_total", 0))
    for port, vals in a.ports.items():
        for k, v in vals.items():
            if k == "link_up":
                e.gauge("interlink_port_link_up", "1 while the port has a link (memif: a "
                        "peer is connected).", v, port=port)
            elif isinstance(v, (int, float)):
                e.counter(f"interlink_port_{k}", PORT_HELP.get(k, f"Port counter {k}."), v,
                          port=port)
    shard_help = {
        "handoff_out": "Frames of another shard's groups this shard received and handed "
                       "over to their owner (strays).",
        "handoff_in": "Frames this shard took over from other shards' hand-over rings.",
        "drop_handoff_full": "Strays dropped because the owner's hand-over ring was full "
                             "(also in interlink_appliance_drops).",
        "drop_handoff_nombuf": "Strays dropped because this shard's pool had no mbuf to "
                               "copy them into (also in interlink_appliance_drops).",
    }
    for k in sorted(a.shards, key=lambda x: int(x) if str(x).isdigit() else 0):
        sh = a.shards[k]
        if not isinstance(sh, dict):
            continue
        lab = {"shard": k, "lcore": sh.get("lcore", "")}
        for c, help_ in shard_help.items():
            if isinstance(sh.get(c), (int, float)):
                e.counter(f"interlink_shard_{c}", help_, sh[c], **lab)
        if isinstance(sh.get("pool_avail"), (int, float)):
            e.gauge("interlink_shard_pool_avail", "Free mbufs in the shard's own pool.",
                    sh["pool_avail"], **lab)
        groups = sh.get("groups") or []
        e.gauge("interlink_shard_groups", "Groups the shard owns (stamps, serves NAKs for).",
                len(groups), **lab)
        for g in groups:
            e.gauge("interlink_group_shard", "The shard that owns the group (docs/scaling.md).",
                    int(k), group=g)
    for st in a.stages:
        lab = {"stage": st.name, "type": st.type}
        for k, v in st.counters.items():
            if k == "pkts_in":
                e.counter("interlink_stage_packets", "Packets handed to the stage.", v, **lab)
            elif k == "cycles":
                e.counter("interlink_stage_cycles", "TSC cycles the stage spent on bursts "
                          "of packets.", v, **lab)
            elif k == "poll_cycles":
                e.counter("interlink_stage_poll_cycles", "TSC cycles a polled stage spent "
                          "on calls without packets (timers, housekeeping).", v, **lab)
            else:
                e.counter("interlink_stage_events", "A stage's counter; counter=\"drop_*\" "
                          f"are drops by reason ({DOCS}, Counters).", v, **lab, counter=k)
        for k, v in st.levels.items():
            e.gauge("interlink_stage_level", "A stage's counter that is a level, not a "
                    "running total (flows_active, logger lag...).", v, **lab, counter=k)
        for k, v in st.state.items():
            e.gauge("interlink_stage_state", "A stage's state beyond its counters (queue "
                    "depths, configuration read back...).", v, **lab, key=k)
        for gid in sorted(st.groups):
            for k, v in st.groups[gid].items():
                e.gauge("interlink_group_state", "A stage's state for one group (the "
                        "sequencer's next sequence and history, the control stage's "
                        "watermark, view, members, window, rate).", v, **lab, group=gid,
                        key=k)


CONTROL_GROUP_HELP = {
    "receivers": "Live receivers of the group (those the watermark waits for).",
    "watermark": "Stability watermark: every sequence below it is held by every live "
                 "receiver.",
    "published": "Watermark last handed to the data plane.",
    "view": "Current view id (bumps on every change of the member set).",
    "members": "Members of the current view (senders and receivers).",
    "suspected": "Members suspected by the fast failure detector.",
    "window": "Current credit window per sender (0: no flow control).",
    "s_bytes": "WAN group: the packet size s of eq. 4.1.",
    "rate_kbps": "WAN group: the TCP-friendly rate handed to senders (0: no limit).",
    "slow_start": "WAN group: 1 while in TFRC slow start.",
}
CONTROL_MEMBER_HELP = {
    "roles": "Member roles: 1 sender, 2 receiver, 3 both.",
    "incarnation": "The member's incarnation (changes when it restarts).",
    "suspected": "1 while the fast failure detector suspects the member.",
    "quiet_seconds": "Seconds since the member was last heard from.",
    "buffer_free": "Receive buffer room from its last ACK (4294967295: no limit).",
    "acked": "The receiver's cumulative ACK (it holds every sequence below it).",
    "lag": "Messages the receiver's ACK is behind the group's most advanced receiver.",
    "srtt_seconds": "WAN group: the receiver's smoothed RTT.",
    "last_rtt_seconds": "WAN group: the receiver's last RTT sample.",
    "loss_ppm": "WAN group: the loss-event rate the receiver reports, per million.",
}


def control_metrics(e, c):
    for k, v in c.status.items():
        ch = CHANNEL_KEY.match(k)
        if ch and ch.group(2) in CHANNEL_STATE_KEYS:
            e.gauge("interlink_control_channel_state", "One shard's channel (interlink-control "
                    "--shards): the data-plane incarnation on it.", v, channel=int(ch.group(1)),
                    key=ch.group(2))
        elif ch:
            e.counter("interlink_control_channel_events", "One shard's channel "
                      "(interlink-control --shards): messages up and down, drops.", v,
                      channel=int(ch.group(1)), counter=ch.group(2))
        elif k in CONTROL_STATE_KEYS:
            e.gauge("interlink_control_state", "interlink-control's identities and levels "
                    "(incarnation, dp_epoch, groups...).", v, key=k)
        else:
            e.counter("interlink_control_events", "interlink-control's counters (its "
                      "`status` command, docs/control.md).", v, counter=k)
    for gid in sorted(c.groups):
        for k, v in c.groups[gid].items():
            e.gauge(f"interlink_control_group_{k}",
                    CONTROL_GROUP_HELP.get(k, f"Group field {k}."), v, group=gid)
    for (gid, mid) in sorted(c.members):
        for k, v in c.members[(gid, mid)].items():
            # Times in seconds, Prometheus' base unit.
            for suffix, div in (("_ms", 1e3), ("_us", 1e6)):
                if k.endswith(suffix):
                    k, v = k[:-len(suffix)] + "_seconds", v / div
            if k == "samples":
                e.counter("interlink_control_member_rtt_samples", "WAN group: RTT samples "
                          "taken of the receiver.", v, group=gid, member=mid)
            else:
                e.gauge(f"interlink_control_member_{k}",
                        CONTROL_MEMBER_HELP.get(k, f"Member field {k}."), v, group=gid,
                        member=mid)
    if c.has_members:
        e.gauge("interlink_control_members_truncated", "Members left out of the `members` "
                "reply (it is one datagram).", c.members_truncated)


def ftlog_metrics(e, f):
    for k, v in f.values.items():
        if k.endswith("_last"):
            e.gauge("interlink_ftlog_state", "The FT-TCP logger's latest values.", v, key=k)
        else:
            e.counter("interlink_ftlog_events", "The FT-TCP logger's counters (docs/ft-tcp.md).",
                      v, counter=k)
    e.gauge("interlink_ftlog_stats_age_seconds", "Age of the statistics file (rewritten "
            "every 200 ms while the logger runs).", round(f.age, 3))


def exposition(snap):
    """The text of one scrape."""
    e = Exposition()
    for source in snap.configured:
        e.gauge("interlink_up", "1 if the source answered this scrape.",
                0 if source in snap.errors else 1, source=source)
    for source in snap.configured:
        e.gauge("interlink_source_query_seconds", "How long reading the source took.",
                round(snap.seconds.get(source, 0.0), 6), source=source)
    if snap.appliance is not None:
        appliance_metrics(e, snap.appliance)
    if snap.control is not None:
        control_metrics(e, snap.control)
    if snap.ftlog is not None:
        ftlog_metrics(e, snap.ftlog)
    return e.render()
