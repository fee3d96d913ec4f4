"""The data plane's `control` stage on its own, through the real binary over net_pcap ports
and with no control process: DATA carries the watermark (STABLE_VALID), a history full of
unstable frames refuses new DATA rather than evicting, control frames from hosts are consumed
and counted (never forwarded), and the stage's config keys are validated by name."""
import uuid
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from interlink_scapy import ILAck, ILAckTfrc, ILMember, Interlink, il_data

MC = "239.1.1.1"
MAC = "01:00:5e:01:01:01"
EPOCH = 77


@pytest.fixture
def chan():
    path = f"/dev/shm/ilcs-{uuid.uuid4().hex[:8]}"
    yield path
    for suffix in ("", ".sock", ".mgmt"):
        Path(path + suffix).unlink(missing_ok=True)


def uto_sets(chan, history=8, extra=()):
    return [f"stages.seq.history={history}",
            f"stages.ctrl={{type: control, sequencer: seq, chan: {chan}}}",
            "pipeline.0.chains.0.stages=[classify, seq, ctrl, nak]",
            f"epoch={EPOCH}", *extra]


def frame(il, src="10.0.0.1"):
    return Ether(src="02:00:00:00:00:01", dst=MAC) / IP(src=src, dst=MC) / \
        UDP(sport=5000, dport=7400) / il


def udp_ok(pkt):
    got = pkt[UDP].chksum
    if got == 0:
        return True
    q = pkt.copy()
    del q[UDP].chksum
    return Ether(bytes(q))[UDP].chksum == got


def test_data_carries_the_watermark_and_the_history_keeps_unstable_frames(run_pcap, chan):
    frames = [frame(il_data(1, 3, i + 1, [b"m%d" % i])) for i in range(12)]
    r = run_pcap(frames, sets=uto_sets(chan, history=8))
    data = [p for p in r.out if Interlink in p and p[Interlink].type == 1]
    # Nothing is stable (no receiver, no control process): the history may not let any
    # frame go, so once it holds 8 the next DATA frames are refused, and counted.
    assert len(data) == 8
    for i, p in enumerate(data):
        il = p[Interlink]
        assert int(il.flags) == 0x05  # STAMPED | STABLE_VALID
        assert il.stable_seq == 0 and il.global_seq == i + 1 and il.epoch == EPOCH
        assert udp_ok(p), "the checksum update must cover stable_seq"
    seq = r.summary["stages"]["seq"]
    assert seq["drop_history_full_unstable"] == 4
    assert seq["history_evicted"] == 0


def test_without_a_control_stage_the_history_still_evicts(run_pcap):
    frames = [frame(il_data(1, 3, i + 1, [b"x"])) for i in range(12)]
    r = run_pcap(frames, sets=["stages.seq.history=8"])
    data = [p for p in r.out if Interlink in p]
    assert len(data) == 12
    assert all(int(p[Interlink].flags) == 0x01 and p[Interlink].stable_seq == 0 for p in data)
    assert r.summary["stages"]["seq"]["history_evicted"] == 4
    assert r.summary["stages"]["seq"]["drop_history_full_unstable"] == 0


def test_control_frames_are_consumed_and_counted(run_pcap, chan):
    def ctl(t, body, group=1, epoch=EPOCH, sender=1001, gseq=0):
        return frame(Interlink(type=t, group_id=group, sender_id=sender, epoch=epoch,
                               global_seq=gseq) / body, src="10.1.0.1")

    frames = [
        ctl(6, ILMember(roles=2, incarnation=1)),           # JOIN
        ctl(8, ILMember(roles=2, incarnation=1)),           # HEARTBEAT
        ctl(4, ILAck(view_id=1, buffer_free=100), gseq=1),  # ACK
        ctl(4, ILAck(), epoch=EPOCH + 1, gseq=5),           # ACK of another epoch
        ctl(4, ILAck(), gseq=100),                          # holds what was never stamped
        ctl(7, ILMember(roles=2, incarnation=1)),           # LEAVE
        ctl(8, ILMember(), group=2),                        # HEARTBEAT, group 2
        ctl(8, ILMember(), group=9),                        # no such group
        frame(Interlink(type=4, group_id=1, sender_id=5, epoch=EPOCH)),  # ACK without body
        frame(il_data(1, 3, 1, [b"d"])),
    ]
    r = run_pcap(frames, sets=uto_sets(chan, history=64))
    # Only the DATA frame goes on: the others are the control process's business.
    assert [p[Interlink].type for p in r.out if Interlink in p] == [1]
    c = r.summary["stages"]["ctrl"]
    assert (c["up_join"], c["up_heartbeat"], c["up_ack"], c["up_leave"]) == (1, 2, 1, 1)
    assert c["drop_stale_epoch"] == 1 and c["drop_ack_future"] == 1
    assert c["drop_bad_body"] == 1
    assert r.summary["stages"]["classify"]["drop_unknown_group"] + c["drop_unknown_group"] == 1
    assert c["drop_chan_full"] == 0


@pytest.mark.parametrize("key,value,needle", [
    ("stages.ctrl.stable_interval_us", "10", "stages.ctrl.stable_interval_us"),
    ("stages.ctrl.wake_interval_us", "20000", "stages.ctrl.wake_interval_us"),
    ("stages.ctrl.up_slots", "1000", "stages.ctrl.up_slots"),
    ("stages.ctrl.tx", "nowhere", "stages.ctrl.tx"),
    ("stages.ctrl.colour", "blue", "colour"),
])
def test_config_errors_name_the_key(run_pcap, chan, key, value, needle):
    r = run_pcap([], sets=uto_sets(chan, extra=[f"{key}={value}"]), expect_rc=2)
    assert needle in r.log, r.log


def test_missing_sequencer_is_named(run_pcap, chan):
    sets = [f"stages.ctrl={{type: control, chan: {chan}}}",
            "pipeline.0.chains.0.stages=[classify, seq, ctrl, nak]"]
    r = run_pcap([], sets=sets, expect_rc=2)
    assert "stages.ctrl.sequencer" in r.log, r.log


def test_long_acks_give_rtt_samples_in_wan_groups_only(run_pcap, chan):
    """Group 1 is WAN: the stage logs when it stamped each DATA frame and a long-form ACK echoing
    one gives an RTT sample; an echo of a sequence never stamped gives none. Group 2 is not WAN:
    the same ACK is consumed as before and nothing is sampled. Short ACKs still work."""
    def ack(body, group, gseq):
        return frame(Interlink(type=4, group_id=group, sender_id=1001, epoch=EPOCH,
                               global_seq=gseq) / body, src="10.1.0.1")

    frames = [
        frame(il_data(1, 3, 1, [b"a"])),                                    # group 1: seq 1
        frame(il_data(2, 3, 1, [b"b"])),                                    # group 2: seq 1
        ack(ILAckTfrc(view_id=1, buffer_free=9, echo_seq=1, delta_us=0, loss_ppm=20000), 1, 2),
        ack(ILAckTfrc(view_id=1, buffer_free=9, echo_seq=1000, delta_us=0, loss_ppm=1), 1, 2),
        ack(ILAckTfrc(view_id=1, buffer_free=9, echo_seq=1, delta_us=0, loss_ppm=5), 2, 2),
        ack(ILAck(view_id=1, buffer_free=9), 1, 2),
    ]
    r = run_pcap(frames, sets=uto_sets(chan, history=64, extra=[
        "groups.0.wan=true", "groups.0.wan_packet_bytes=1000"]))
    c = r.summary["stages"]["ctrl"]
    assert c["up_ack"] == 4 and c["drop_bad_body"] == 0
    assert c["rtt_samples"] == 1 and c["rtt_no_sample"] == 1


@pytest.mark.parametrize("sets,needle", [
    (["groups.0.wan=maybe"], "wan"),
    (["groups.0.wan=true", "groups.0.wan_packet_bytes=10"], "wan_packet_bytes"),
    (["groups.0.wan_packet_bytes=1000"], "wan_packet_bytes' applies to WAN groups only"),
])
def test_wan_config_errors_name_the_key(run_pcap, chan, sets, needle):
    r = run_pcap([], sets=uto_sets(chan, extra=sets), expect_rc=2)
    assert needle in r.log and "groups" in r.log, r.log
