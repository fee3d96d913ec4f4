"""The Wireshark dissector (tools/wireshark/interlink.lua) against the Scapy layers, field by
field, on captures of what the real appliance sends: Debian's tshark decodes them with the Lua
script (PDML output), Scapy decodes the same frames, and every field of every Interlink frame
must agree, in order. Every message type is in the captures: stamped DATA (native and raw mode,
with and without the watermark), retransmissions, UNAVAIL, STABLE made by the control stage,
FEC repairs made by the fec_enc stage, LEC repairs made by the lec stage, and ACK (both forms),
JOIN, LEAVE, HEARTBEAT, VIEW, CREDIT, LEC_REPAIR and FTCP_LOG passed through by an appliance
without a control stage."""
import shutil
import subprocess
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from conftest import ROOT
from interlink_scapy import (ILAck, ILAckTfrc, ILAuth, ILCredit, ILEpochReport, ILFecId, ILFecRepair, ILMember,
                             ILMsg, ILRange, ILStable, ILView, ILViewMember, ILViewSender,
                             ILLecId, ILLecRepair, Interlink, IL_TYPES, il_auth_seal, il_data)
from test_appliance import MC, data_frame, mcast_mac, nak_frame

LUA = ROOT / "tools" / "wireshark" / "interlink.lua"
TSHARK = shutil.which("tshark")

pytestmark = pytest.mark.skipif(TSHARK is None,
                                reason="tshark is missing: ./scripts/install-deps.sh installs it")

# Scapy layer -> the dissector's field prefix (ilink.<prefix>.<field>).
PREFIX = {ILMsg: "msg", ILRange: "range", ILAck: "ack", ILAckTfrc: "ack", ILStable: "stable",
          ILMember: "member", ILView: "view", ILViewMember: "view.member",
          ILViewSender: "view.sender", ILCredit: "credit", ILFecRepair: "fec",
          ILEpochReport: "epoch_report",
          ILFecId: "fec.id", ILLecRepair: "lec", ILLecId: "lec.id"}
BYTES = {"ilink.options", "ilink.auth.mac", "ilink.msg.data", "ilink.fec.data", "ilink.lec.data",
         "ilink.body", "ilink.trailing"}
IPV4 = {"ilink.fec.id.src", "ilink.fec.id.dst"}
# Containers and values the dissector computes (not on the wire) are not compared.
SKIP = {"ilink.msg", "ilink.view.member", "ilink.view.sender", "ilink.fec.id", "ilink.lec.id",
        "ilink.msg.global_seq", "ilink.fec.id.packet"}
FLAG_BITS = [("stamped", 0x01), ("retrans", 0x02), ("stable_valid", 0x04), ("raw", 0x08),
             ("fifo_start", 0x10), ("auth", 0x20)]


def frame(il, port=7400, src="10.0.0.1", group=1):
    return (Ether(src="02:00:00:00:00:01", dst=mcast_mac(MC[group])) /
            IP(src=src, dst=MC[group]) / UDP(sport=5000, dport=port) / il)


def scapy_fields(il):
    """What the dissector should show for one Interlink layer: (field, value) in tree order."""
    out = []
    for name in ("version", "type", "hdr_len", "flags"):
        out.append((f"ilink.{name}", int(il.getfieldval(name))))
    flags = int(il.flags)
    out += [(f"ilink.flags.{n}", int(bool(flags & bit))) for n, bit in FLAG_BITS]
    out.append(("ilink.flags.reserved", flags >> 6))
    for name in ("group_id", "msg_count", "sender_id", "epoch", "sender_seq", "global_seq",
                 "stable_seq"):
        out.append((f"ilink.{name}", il.getfieldval(name)))
    opts = bytes(il.options)
    if flags & 0x20 and len(opts) >= 28:
        a = ILAuth(opts[:28])
        out += [("ilink.auth.key_id", a.key_id), ("ilink.auth.counter", a.counter),
                ("ilink.auth.mac", bytes(a.mac))]
        opts = opts[28:]
    if opts:
        out.append(("ilink.options", opts))
    for m in il.msgs:
        out += body_fields(m)
    body = il.payload
    if isinstance(body, Raw):
        out.append(("ilink.body", bytes(body.load)))
    elif type(body) in PREFIX:
        out += body_fields(body)
        if body.payload:  # bytes after the body (Scapy calls them padding)
            out.append(("ilink.trailing", bytes(body.payload)))
    return out


def body_fields(pkt):
    prefix = PREFIX[type(pkt)]
    out = []
    for f in pkt.fields_desc:
        v = pkt.getfieldval(f.name)
        if isinstance(v, list):
            for sub in v:
                out += body_fields(sub)
            continue
        name = f"ilink.{prefix}.{f.name}"
        if name in BYTES:
            if v:  # the dissector shows no empty data item
                out.append((name, bytes(v)))
            continue
        out.append((name, v if name in IPV4 else int(v)))
        if f.name == "roles":
            out += [("ilink.roles.sender", v & 1), ("ilink.roles.receiver", (v >> 1) & 1)]
    return out


def walk(node, out, experts):
    """The dissector's fields under `node` in tree order; expert infos apart."""
    for f in node.findall("field"):
        name = f.get("name")
        if name == "_ws.expert":
            experts.append(f.get("showname"))
            continue
        if name.startswith("ilink.") and name not in SKIP and f.get("size") != "0":
            if name in BYTES:
                out.append((name, bytes.fromhex(f.get("value"))))
            elif name in IPV4:
                out.append((name, f.get("show")))
            else:
                out.append((name, int(f.get("show"), 0)))
        walk(f, out, experts)


def tshark_fields(pcap):
    """Per frame, the dissector's fields in tree order, or None for frames without Interlink."""
    p = subprocess.run([TSHARK, "-n", "-r", str(pcap), "-X", f"lua_script:{LUA}", "-T", "pdml"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Lua: Error" not in p.stderr and "lua_script" not in p.stderr, p.stderr
    frames = []
    for pkt in ET.fromstring(p.stdout).iter("packet"):
        proto = [x for x in pkt.iter("proto") if x.get("name") == "ilink"]
        if not proto:
            frames.append(None)
            continue
        out, experts = [], []
        walk(proto[0], out, experts)
        frames.append((out, experts))
    return frames


def control_frames():
    """One of each type an appliance without a control stage passes through unchanged."""
    return [
        frame(Interlink(type=4, group_id=1, sender_id=0x10001, global_seq=9) /
              ILAck(view_id=3, buffer_free=0xFFFFFFFF)),
        frame(Interlink(type=4, group_id=1, sender_id=0x10002, epoch=5, global_seq=1 << 40) /
              ILAckTfrc(view_id=3, buffer_free=77, echo_seq=8, delta_us=1234,
                        loss_ppm=1000000)),
        frame(Interlink(type=5, group_id=2, flags=0x05, global_seq=12, stable_seq=11) /
              ILStable(view_id=4), group=2),
        frame(Interlink(type=6, group_id=1, sender_id=7) / ILMember(roles=1, incarnation=42)),
        frame(Interlink(type=7, group_id=1, sender_id=7) / ILMember(roles=2, incarnation=42)),
        frame(Interlink(type=8, group_id=1, sender_id=8) / ILMember(roles=3, incarnation=1)),
        # signed (the AUTH option): the dissector shows key id, counter and MAC
        frame(Interlink(il_auth_seal(bytes(Interlink(type=6, group_id=1, sender_id=9) /
                                           ILMember(roles=2, incarnation=5)),
                                     bytes(range(32)), 3, 1 << 60))),
        frame(Interlink(type=9, group_id=1, global_seq=5) /
              ILView(view_id=7, members=[ILViewMember(member_id=1, roles=3),
                                         ILViewMember(member_id=0x10002, roles=2)],
                     senders=[ILViewSender(sender_id=1, next_sender_seq=42),
                              ILViewSender(sender_id=3, incarnation=7, next_sender_seq=1 << 33)])),
        frame(Interlink(type=9, group_id=2, global_seq=1) / ILView(view_id=1), group=2),
        frame(Interlink(type=10, group_id=1, sender_id=3, sender_seq=17) /
              ILCredit(limit_seq=300, window=256, rate_kbps=12000)),
        frame(Interlink(type=14, group_id=1, sender_id=0x10001, epoch=5, global_seq=77) /
              ILEpochReport(new_epoch=9, view_id=4, stable_seen=70, high=1 << 35)),
        frame(Interlink(type=12, group_id=1, sender_id=4, sender_seq=3) /
              ILLecRepair(rate_r=8, len_xor=0x1234,
                          ids=[ILLecId(group=1, epoch=9, seq=1 << 35),
                               ILLecId(group=2, epoch=9, seq=7)], data=b"lateral repair")),
        frame(Interlink(type=13, group_id=1, sender_id=4, options=b"\x01\x02\x03\x04") /
              Raw(b"log record")),
    ]


@pytest.fixture
def captures(run_pcap, tmp_path):
    """What the appliance sent in three runs, plus what went in, as one pcap file."""
    chan = f"/dev/shm/ilds-{uuid.uuid4().hex[:8]}"
    frames = []
    try:
        # 1. The plain sequencer: native DATA of two groups, raw-mode UDP (group 100), NAKs
        #    answered with retransmissions and an UNAVAIL, control types passed through.
        ins = [data_frame(1, 1, i + 1, [b"m%d" % i, b"x" * i]) for i in range(6)]
        ins += [data_frame(2, 2, 1, [b"a", b"", b"c" * 300])]
        ins += [frame(Raw(b"raw payload %d" % i), port=9000, group=100,
                      src="192.168.9.1") for i in range(3)]
        ins += control_frames()
        ins += [nak_frame(1, 9, 1, 2), nak_frame(1, 9, 5, 6)]
        r = run_pcap(ins, sets=["stages.seq.history=4"])
        frames += ins + r.out
        # 2. With a control stage and no control process: DATA carries STABLE_VALID, and the
        #    stage multicasts STABLE to the idle groups.
        ins = [data_frame(1, 3, i + 1, [b"w%d" % i]) for i in range(3)]
        r = run_pcap(ins, idle_ms=600, sets=[
            f"stages.ctrl={{type: control, sequencer: seq, chan: {chan}}}",
            "pipeline.0.chains.0.stages=[classify, seq, ctrl, nak]", "epoch=77"])
        frames += ins + r.out
        # 3. A FEC encoder (r=4, c=2): UDP in, the same UDP plus XOR repairs out (port 7401).
        ins = [Ether(dst="02:00:00:00:00:02") / IP(src="10.5.0.1", dst="10.5.0.2", id=100 + i) /
               UDP(sport=4000, dport=5001) / Raw(bytes([i]) * (20 + 13 * i)) for i in range(12)]
        r = run_pcap(ins, sets=[
            "stages={enc: {type: fec_enc, r: 4, c: 2, interleaves: [1, 3], link_id: 5, "
            "local_ip: 192.0.2.1, peer_ip: 192.0.2.2, port: 7401}}",
            "pipeline=[{lcore: 1, chains: [{rx: in, stages: [enc], tx: out}]}]"])
        frames += r.out
        # 4. The lec stage: the appliance's LEC repairs, back out of "in" to the members.
        from test_lec_stage import LEC, VIEWS, heartbeat, view_frame
        ins = [view_frame(g, m) for g, m in VIEWS.items()]
        ins += [heartbeat(1 if i < 14 else 2, i) for i in (11, 12, 13, 14)]
        ins += [data_frame(1 + i % 2, 1, i // 2 + 1, [bytes([i]) * (5 + 11 * i)])
                for i in range(32)]
        r = run_pcap(ins, sets=LEC)
        lec = [p for p in r.back if Interlink in p and p[Interlink].type == 12]
        assert lec
        frames += lec
    finally:
        for suffix in ("", ".sock", ".mgmt"):
            Path(chan + suffix).unlink(missing_ok=True)
    # Malformed ones, for the expert info.
    frames += [frame(Interlink(version=2)), frame(Interlink(flags=0x30, msg_count=0)),
               frame(bytes(il_data(1, 1, 1, [b"abc"]))[:-1]), frame(Raw(b"short"))]
    pcap = tmp_path / "interlink.pcap"
    wrpcap(str(pcap), frames)
    return pcap, frames


def test_every_field_of_every_type_matches_scapy(captures):
    pcap, frames = captures
    decoded = tshark_fields(pcap)
    assert len(decoded) == len(frames)
    seen, compared = set(), 0
    for i, (pkt, got) in enumerate(zip(frames, decoded)):
        pkt = Ether(bytes(pkt))
        if i >= len(frames) - 4:
            break  # the malformed tail: see the next test
        if Interlink not in pkt:
            assert got is None, f"frame {i + 1} is not Interlink, the dissector took it"
            continue
        assert got is not None, f"frame {i + 1}: tshark did not dissect it as Interlink"
        fields, experts = got
        want = scapy_fields(pkt[Interlink])
        assert fields == want, f"frame {i + 1} ({pkt.summary()})"
        assert experts == [], f"frame {i + 1}: {experts}"
        compared += len(want)
        il = pkt[Interlink]
        seen.add(il.type)
        if il.type == 1:
            seen.add(("data", int(il.flags)))
        if il.type == 4:
            seen.add(("ack", type(il.payload).__name__))
    print(f"\n{len(frames) - 4} frames, {compared} fields compared")
    # Every message type of the wire format was in the captures, and the interesting forms.
    assert {t for t in seen if isinstance(t, int)} == set(IL_TYPES)
    assert {("data", 0), ("data", 0x01), ("data", 0x09), ("data", 0x05)} <= seen
    assert {("ack", "ILAck"), ("ack", "ILAckTfrc")} <= seen


def test_malformed_frames_get_expert_info(captures):
    pcap, frames = captures
    tail = tshark_fields(pcap)[-4:]
    want = [["drop_bad_version"], ["drop_bad_flags", "drop_bad_packing"], ["drop_truncated_packing"],
            ["Shorter than"]]
    for (fields, experts), what in zip(tail, want):
        for w in what:
            assert any(w in e for e in experts), (w, experts)
