"""The appliance owns what it stamps: whatever flags, epoch, global_seq or stable_seq a sender
puts into a DATA frame, what leaves the appliance carries the appliance's own (docs/wire-format.md,
"Flags"), with a correct UDP checksum, in native and raw mode, with and without a control stage;
frames that came in with any of them set are counted (restamped_frames)."""
import uuid
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from interlink_scapy import Interlink, il_data
from test_appliance import udp_ok

STAMPED, RETRANS, STABLE_VALID, RAW, FIFO_START = 0x01, 0x02, 0x04, 0x08, 0x10
EPOCH = 4242

# (flags, epoch, global_seq, stable_seq) as a sender sent them; counted as restamped?
FORGED = [
    ((STABLE_VALID, 0, 0, 1000), True),      # a forged watermark
    ((0, 0, 0, 5), False),                   # a sender's own stable_seq (its oldest unstable)
    ((RETRANS | RAW, 0, 0, 0), True),
    ((STAMPED | STABLE_VALID | FIFO_START, 7, 99, 3), True),  # a stamped frame looped back
    ((0, 0, 0, 0), False),                   # an honest frame
]


def native(i, chksum):
    (flags, epoch, gseq, stable), _ = FORGED[i % len(FORGED)]
    sender = 10 + i  # a sender of its own per frame: the control stage's FIFO learns each anew
    udp = UDP(sport=5000, dport=7400)
    if not chksum:
        udp.chksum = 0
    # sender_seq = the sender's stable_seq when it gives one, so the FIFO check (which learns a
    # new sender's stream from it) takes the frame as its first.
    il = il_data(1, sender, max(stable, 1) if stable <= 5 else 1, [b"m%d" % i],
                 flags=flags, epoch=epoch, global_seq=gseq, stable_seq=stable)
    return Ether(dst="01:00:5e:01:01:01") / IP(src="10.0.0.%d" % sender, dst="239.1.1.1") / \
        udp / il


def raw(i):
    return Ether(dst="01:00:5e:01:01:64") / IP(src="192.168.9.1", dst="239.1.1.100") / \
        UDP(sport=1000, dport=9000) / Raw(bytes(Interlink(flags=STABLE_VALID, stable_seq=1000)) +
                                          b"payload %d" % i)


@pytest.mark.parametrize("control", [False, True], ids=["sequencer", "with-control-stage"])
def test_sender_cannot_forge_what_the_appliance_stamps(run_pcap, control):
    n = 2 * len(FORGED)
    frames = [native(i, chksum=i < len(FORGED)) for i in range(n)] + [raw(0), raw(1)]
    sets = [f"epoch={EPOCH}"]
    chan = Path(f"/dev/shm/ilso-{uuid.uuid4().hex[:8]}")
    if control:
        # No control process: nothing becomes stable, so the watermark is 0 (a large history
        # keeps every frame).
        sets += ["stages.seq.history=64",
                 f"stages.ctrl={{type: control, sequencer: seq, chan: {chan}}}",
                 "pipeline.0.chains.0.stages=[classify, seq, ctrl, nak]"]
    try:
        r = run_pcap(frames, sets=sets)
    finally:
        for f in (chan, chan.with_name(chan.name + ".sock")):
            f.unlink(missing_ok=True)
    data = [p for p in r.out if Interlink in p and p[Interlink].type == 1]
    assert len(data) == n + 2, r.log
    base = STAMPED | (STABLE_VALID if control else 0)
    for i, p in enumerate(data[:n]):
        il = p[Interlink]
        # Without a control stage: STAMPED only and stable_seq 0. With one: STABLE_VALID and the
        # appliance's watermark (0 here), never the sender's 1000. A sender's RETRANS, RAW and
        # FIFO_START are gone (FIFO_START is the appliance's mark of a new incarnation: none
        # of these senders joined).
        assert int(il.flags) == base, (i, FORGED[i % len(FORGED)], int(il.flags))
        assert il.stable_seq == 0, (i, il.stable_seq)
        assert il.epoch == EPOCH and il.global_seq == i + 1
        assert udp_ok(p), f"frame {i}: the checksum update must cover every overwritten field"
        assert (p[UDP].chksum != 0) == (i < len(FORGED))
    for p in data[n:]:
        il = p[Interlink]
        assert int(il.flags) == base | RAW and il.stable_seq == 0 and udp_ok(p)
    counted = sum(1 for _, c in FORGED if c)
    assert r.summary["stages"]["seq"]["restamped_frames"] == 2 * counted
