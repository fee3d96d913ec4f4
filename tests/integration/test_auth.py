"""Authenticated control traffic, end to end: the appliance (configs/uto.yaml with
stages.ctrl.auth.keys), interlink-control, and il-uto-members signing its control messages
(--auth-keys), on the veth rig of test_control_uto.py. Then frames of our own on the "in"
veth: forged ones (a wrong MAC, no MAC, an unknown key) and replayed ones (sniffed from
il-uto-members, or signed here with Python's own BLAKE2b and sent twice). Each must be
dropped and counted (drop_bad_mac, drop_replay) and change nothing: the view's members and
the stability watermark stay where they were. The same frames correctly signed do change
them, so each check can fail.

Counts and generous timeouts only: the machine has 2 shared cores."""
import json
import os
import subprocess
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.sendrecv import AsyncSniffer, sendp

from conftest import BUILD
from harness import control_groups
from interlink_scapy import (ILAck, ILMember, ILRange, Interlink, ROLE_RECEIVER,
                             il_auth_seal)
from test_control_stage import chan, uto_sets  # noqa: F401 (a fixture)
from test_control_uto import MEMBERS, UtoRig, check_common

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veth pairs)")

CTL_TOOL = BUILD / "tools" / "monitor" / "interlink-ctl"
KEY, KEY_ID = bytes(range(0x40, 0x60)), 7
# No exclusions during a test: a killed receiver stays in the view and holds the watermark.
CTL = ["--suspect-ms", "200", "--exclude-ms", "600000", "--window", "256"]


def write_keys(tmp, mode=0o600, text=None):
    p = tmp / "keys"
    p.write_text(text if text is not None else f"# test key\n{KEY_ID} {KEY.hex()}\n")
    os.chmod(p, mode)
    return p


class AuthRig(UtoRig):
    def __init__(self, tmp):
        self.keys = write_keys(tmp)
        super().__init__(tmp, CTL, app_sets=[f"stages.ctrl.auth.keys={self.keys}",
                                             f"stages.nak.auth.keys={self.keys}"])
        self.counter = int(time.time() * 1e9) + (1 << 40)  # above il-uto-members' counters

    def ctrl(self, stage="ctrl"):
        """A stage's counters, live."""
        p = subprocess.run([str(CTL_TOOL), "-a", self.prefix, "show", stage],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def view(self):
        """interlink-control's view of our group: members, watermark, ..."""
        return control_groups(self.chan, self.tmp).get(self.group, {})

    def msg(self, il, sign=True, key=KEY, key_id=KEY_ID, counter=None):
        """An Interlink message of ours to the group, signed with a fresh counter."""
        b = bytes(il)
        if sign:
            if counter is None:
                self.counter += 1
                counter = self.counter
            b = il_auth_seal(b, key, key_id, counter)
        return self.wrap(b, il.sender_id)

    def wrap(self, payload, sender):
        return (Ether(src="02:00:00:00:11:01", dst="01:00:5e:00:00:01") /
                IP(src=f"10.0.{(sender >> 8) & 255}.{sender & 255}", dst=self.mcast) /
                UDP(sport=5000, dport=self.port) / Raw(payload))

    def send(self, *frames, port=0):
        """Into the appliance's "in" port (0), or its "out" port (1), where NAKs come in."""
        sendp(list(frames), iface=f"{self.tag}b{port}", verbose=False)

    def wait_counter(self, name, want, what, stage="ctrl"):
        self.wait_for(lambda: self.ctrl(stage).get(name, 0) >= want, 30, what)


def il_frames(pkts, port, types):
    """Interlink payloads of the given types among sniffed frames, in order."""
    out = []
    for p in pkts:
        if UDP in p and p[UDP].dport == port:
            b = bytes(p[UDP].payload)
            if len(b) >= 40 and b[1] in types:
                out.append(b)
    return out


@pytest.fixture
def rig(tmp_path):
    with AuthRig(tmp_path) as r:
        yield r


def run_members(rig, *extra, sniff=False):
    """A short signed stream: 1 sender, 2 receivers. Returns the result and, with sniff,
    the frames il-uto-members sent into the appliance."""
    sn = None
    if sniff:
        sn = AsyncSniffer(iface=f"{rig.tag}b0", store=True,
                          lfilter=lambda p: UDP in p and p[UDP].dport == rig.port)
        sn.start()
        time.sleep(0.5)
    rc, out, res = rig.members("--senders", "1", "--receivers", "2", "--count", "2000",
                               "--rate", "4000", "--auth-keys", str(rig.keys), *extra)
    pkts = sn.stop() if sn else []
    return rc, out, res, pkts


def test_signed_members_run_and_unsigned_ones_are_refused(rig, tmp_path):
    """il-uto-members signing with the key file gets the whole UTO service (views, credits,
    stability) from an appliance that requires MACs, and the appliance's STABLE, VIEW and
    CREDIT frames come signed (checked here with Python's BLAKE2b, and by il-uto-members,
    which drops bad ones). Without the key, or with another key, a member's JOINs are
    dropped as drop_bad_mac and it never gets a view; with another key it also refuses the
    appliance's frames."""
    sn = AsyncSniffer(iface=f"{rig.tag}b1", store=True,
                      lfilter=lambda p: UDP in p and p[UDP].dport == rig.port)
    sn.start()
    time.sleep(0.5)
    rc, out, res, _ = run_members(rig)
    pkts = sn.stop()
    check_common(res, out)
    assert rc == 0, out
    assert res["stable"] == res["max_g"] >= 2001, out
    assert res["auth_bad_mac"] == 0 and res["auth_replay"] == 0, out
    c = rig.ctrl()
    assert c["drop_bad_mac"] == 0 and c["drop_replay"] == 0, c
    assert c["up_join"] >= 3 and c["up_ack"] >= 1, c
    own = il_frames(pkts, rig.port, {5, 9, 10})
    assert {b[1] for b in own} == {5, 9, 10}, "no STABLE, VIEW or CREDIT seen"
    for b in own:
        assert b[3] & 0x20 and b[2] == 68, b[:4].hex()
        body = bytes(b[:40]) + b[68:]
        resigned = il_auth_seal(body, KEY, KEY_ID, int.from_bytes(b[44:52], "big"))
        assert resigned[:68] == bytes(b[:68]), "the appliance's MAC does not verify"
    # Without --auth-keys: every JOIN, ACK and HEARTBEAT is dropped.
    members = [str(MEMBERS), "--tx", f"{rig.tag}b0", "--rx", f"{rig.tag}b1", "--group",
               str(rig.group), "--mcast", rig.mcast, "--udp-port", str(rig.port), "--senders",
               "1", "--receivers", "1", "--count", "10", "--max-s", "3"]
    p = subprocess.run(members, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    bad = rig.ctrl()["drop_bad_mac"]
    assert bad >= 1
    # Another key under the same id: refused both ways.
    other = tmp_path / "other.keys"
    other.write_text(f"{KEY_ID} {bytes(32).hex()}\n")
    os.chmod(other, 0o600)
    js = tmp_path / "other.json"
    p = subprocess.run(members + ["--auth-keys", str(other), "--json", str(js)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert rig.ctrl()["drop_bad_mac"] > bad
    assert json.loads(js.read_text())["auth_bad_mac"] >= 1, p.stdout


def test_forged_and_replayed_join_are_dropped(rig):
    """A JOIN of a new member with a wrong MAC, with none, or with an unknown key id, and
    il-uto-members' own JOINs replayed: none adds a member. The same JOIN correctly signed
    does (so the check can fail)."""
    _, out, res, pkts = run_members(rig, sniff=True)
    assert res is not None, out
    joins = il_frames(pkts, rig.port, {6})
    assert joins, "no JOIN sniffed"
    members = rig.view()["members"]
    base = rig.ctrl()
    join = Interlink(type=6, group_id=rig.group, sender_id=4242,
                     epoch=0) / ILMember(roles=ROLE_RECEIVER, incarnation=1)
    forged = bytearray(il_auth_seal(bytes(join), KEY, KEY_ID, rig.counter + 5))
    forged[-5] ^= 1  # a body byte changed after signing (the roles)
    rig.send(rig.wrap(bytes(forged), 4242),
             rig.msg(join, sign=False),
             rig.msg(join, key=bytes(32)),              # another key under our key id
             rig.msg(join, key_id=KEY_ID + 1))          # a key id not in the file
    rig.wait_counter("drop_bad_mac", base["drop_bad_mac"] + 4, "4 forged JOINs dropped")
    time.sleep(0.5)
    assert rig.view()["members"] == members
    assert rig.ctrl()["up_join"] == base["up_join"]
    # Receiver 0 leaves (signed): its own JOIN, replayed, would bring it back.
    r0 = res["receivers"][0]
    rig.send(rig.msg(Interlink(type=7, group_id=rig.group, sender_id=r0["id"]) /
                     ILMember(roles=ROLE_RECEIVER, incarnation=r0["inc"])))
    rig.wait_for(lambda: rig.view().get("members") == members - 1, 30, "the signed LEAVE")
    mine = [b for b in joins if int.from_bytes(b[8:12], "big") == r0["id"]]
    assert mine, "no JOIN of receiver 0 sniffed"
    rig.send(*[rig.wrap(b, r0["id"]) for b in mine])
    rig.wait_counter("drop_replay", base["drop_replay"] + len(mine), "replayed JOINs dropped")
    time.sleep(0.5)
    assert rig.view()["members"] == members - 1
    # The new member's JOIN, correctly signed, is taken.
    rig.send(rig.msg(join))
    rig.wait_for(lambda: rig.view().get("members") == members, 30, "the signed JOIN")
    c = rig.ctrl()
    assert c["up_join"] == base["up_join"] + 1, c


def test_forged_and_replayed_leave_are_dropped(rig):
    """A LEAVE of a live member with a wrong MAC is dropped and the member stays; a correctly
    signed LEAVE removes it, and that same LEAVE replayed after the member joined again is
    dropped as drop_replay: the member stays."""
    _, out, res, _ = run_members(rig)
    assert res is not None, out
    rid = res["receivers"][0]["id"]
    inc = res["receivers"][0]["inc"]
    members = rig.view()["members"]
    base = rig.ctrl()
    leave = Interlink(type=7, group_id=rig.group, sender_id=rid) / ILMember(
        roles=ROLE_RECEIVER, incarnation=inc)
    forged = bytearray(bytes(rig.msg(leave)[Raw].load))
    forged[60] ^= 0x80  # a MAC byte
    rig.send(rig.wrap(bytes(forged), rid), rig.msg(leave, sign=False))
    rig.wait_counter("drop_bad_mac", base["drop_bad_mac"] + 2, "2 forged LEAVEs dropped")
    time.sleep(0.5)
    assert rig.view()["members"] == members
    good = rig.msg(leave)
    rig.send(good)
    rig.wait_for(lambda: rig.view().get("members") == members - 1, 30, "the signed LEAVE")
    join = Interlink(type=6, group_id=rig.group, sender_id=rid) / ILMember(
        roles=ROLE_RECEIVER, incarnation=inc + 1)
    rig.send(rig.msg(join))
    rig.wait_for(lambda: rig.view().get("members") == members, 30, "the member back")
    rig.send(good)
    rig.wait_counter("drop_replay", base["drop_replay"] + 1, "the replayed LEAVE dropped")
    time.sleep(0.5)
    assert rig.view()["members"] == members
    assert rig.ctrl()["up_leave"] == base["up_leave"] + 1


def test_forged_and_replayed_ack_do_not_raise_the_watermark(rig):
    """Receiver 1 is killed early and never excluded, so it holds the watermark below the
    stream's end. A forged ACK in its name for the whole stream is dropped (drop_bad_mac) and
    the watermark stays; il-uto-members' own ACKs replayed are dropped (drop_replay); the
    same ACK correctly signed raises the watermark to the end."""
    _, out, res, pkts = run_members(rig, "--kill", "1@0.2", "--max-s", "6", sniff=True)
    assert res is not None, out
    dead = res["receivers"][1]
    end = res["max_g"]
    g = rig.view()
    wm = g["watermark"]
    assert wm < end, (g, res["max_g"])
    acks = il_frames(pkts, rig.port, {4})
    assert acks, "no ACK sniffed"
    epoch = int.from_bytes(acks[-1][12:16], "big")
    base = rig.ctrl()
    ack = Interlink(type=4, group_id=rig.group, sender_id=dead["id"], epoch=epoch,
                    global_seq=end) / ILAck(view_id=dead["view"], buffer_free=0xffffffff)
    forged = bytearray(bytes(rig.msg(ack)[Raw].load))
    forged[30] ^= 1  # global_seq changed after signing
    rig.send(rig.wrap(bytes(forged), dead["id"]), rig.msg(ack, sign=False),
             rig.msg(ack, key=bytes(32)))
    rig.wait_counter("drop_bad_mac", base["drop_bad_mac"] + 3, "3 forged ACKs dropped")
    rig.send(*[rig.wrap(b, 0) for b in acks[-20:]])
    rig.wait_counter("drop_replay", base["drop_replay"] + min(20, len(acks)),
                     "replayed ACKs dropped")
    time.sleep(1.0)
    assert rig.view()["watermark"] == wm
    assert rig.ctrl()["up_ack"] == base["up_ack"]
    rig.send(rig.msg(ack))
    rig.wait_for(lambda: rig.view().get("watermark", 0) >= end, 30,
                 "the watermark raised by the signed ACK")


def test_forged_and_replayed_nak_get_no_retransmission(rig):
    """The nak stage with auth.keys: a NAK with a wrong MAC or none is dropped (the nak
    stage's drop_bad_mac) and nothing is retransmitted; a correctly signed one is served;
    that same NAK replayed is dropped (drop_replay) and served no more."""
    _, out, res, _ = run_members(rig)
    assert res is not None, out
    rid = res["receivers"][0]["id"]
    base = rig.ctrl("nak")
    nak = Interlink(type=2, group_id=rig.group, sender_id=rid) / ILRange(first_seq=1,
                                                                        last_seq=8)
    forged = bytearray(bytes(rig.msg(nak)[Raw].load))
    forged[-1] ^= 1  # the range's end changed after signing
    rig.send(rig.wrap(bytes(forged), rid), rig.msg(nak, sign=False), port=1)
    rig.wait_counter("drop_bad_mac", base["drop_bad_mac"] + 2, "2 forged NAKs dropped", "nak")
    time.sleep(0.5)
    assert rig.ctrl("nak")["retransmitted_frames"] == base["retransmitted_frames"]
    good = rig.msg(nak)
    rig.send(good, port=1)
    rig.wait_for(lambda: rig.ctrl("nak")["retransmitted_frames"] > base["retransmitted_frames"],
                 30, "the signed NAK served")
    served = rig.ctrl("nak")
    time.sleep(0.5)  # past the repair hold, so only the MAC check could refuse it
    rig.send(good, port=1)
    rig.wait_counter("drop_replay", base["drop_replay"] + 1, "the replayed NAK dropped", "nak")
    time.sleep(0.5)
    c = rig.ctrl("nak")
    assert c["retransmitted_frames"] == served["retransmitted_frames"], c
    assert c["naks"] == served["naks"], c


@pytest.mark.parametrize("mode,text,needle", [
    (0o644, None, "mode 0644"),
    (0o600, "7 abcd\n", "line 1: expected '<key id> <64 hex digits>'"),
    (0o600, f"7 {'00' * 32}\n7 {'11' * 32}\n", "key id 7 given twice"),
    (0o600, "# nothing\n", "no keys in it"),
    (0o600, "missing", "No such file"),
])
def test_bad_key_files_are_named(tmp_path, run_pcap, chan, mode, text, needle):  # noqa: F811
    keys = write_keys(tmp_path, mode, text) if text != "missing" else tmp_path / "nokeys"
    r = run_pcap([], sets=uto_sets(chan, extra=[f"stages.ctrl.auth.keys={keys}"]), expect_rc=2)
    assert "stages.ctrl.auth.keys" in r.log and needle in r.log, r.log


@pytest.mark.parametrize("value,needle", [
    ("{keys: /x, colour: blue}", "colour"),
    ("{replay_senders: 64}", "stages.ctrl.auth.keys' is missing"),
    ("/some/file", "stages.ctrl.auth' must be a map"),
])
def test_auth_config_errors_name_the_key(tmp_path, run_pcap, chan, value, needle):  # noqa: F811
    r = run_pcap([], sets=uto_sets(chan, extra=[f"stages.ctrl.auth={value}"]), expect_rc=2)
    assert needle in r.log, r.log
