"""interlink-pktgen on its own (net_null, net_pcap) and through the appliance (net_memif):
raw mode, IMIX, count mode, pcap replay on the capture's timestamps, capture of a sample.

Rates and timings are asserted loosely: the machine is shared. The precise figures are
in docs/benchmarks.md."""
import json
import shutil
import statistics
import subprocess
import uuid

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from conftest import PKTGEN
from harness import MemifRig
from interlink_scapy import Interlink


def pktgen_alone(tmp_path, tx, *args, rx=None, timeout=60, lcores="0"):
    tag = uuid.uuid4().hex[:8]
    js = tmp_path / f"pg-{tag}.json"
    cmd = ["taskset", "-c", "0", str(PKTGEN), "--tx", tx, "--json", str(js), "--quiet", *args,
           "--", "--file-prefix", f"pg{tag}", "--lcores", lcores, "-m", "256", "--no-huge",
           "--log-level", "lib.eal:error"]
    if rx:
        cmd[6:6] = ["--rx", rx]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(f"/var/run/dpdk/pg{tag}", ignore_errors=True)
    out = json.loads(js.read_text()) if js.exists() else None
    return p.returncode, p.stdout + p.stderr, out


def through_appliance(tmp_path, run, app_sets=()):
    """run(rig) -> (rc, log, res) with the appliance; returns (rc, log, res, appliance summary)."""
    with MemifRig(tmp_path, app_sets=app_sets) as rig:
        rc, log, res = run(rig)
        app = rig.stop_appliance()
    assert app is not None, "the appliance died: " + rig.app_log.read_text() + log
    return rc, log, res, app


def test_paced_rate_over_a_second(tmp_path):
    """100 kpps for one second into net_null: the count is the rate. Never more (a stall of
    the CPU can only make it less); at most 5% less in one of three tries (a shared machine
    can take the CPU away for longer than the pacer makes up)."""
    sent = []
    for _ in range(3):
        rc, log, res = pktgen_alone(tmp_path, "net_null0,no-rx=1", "--mode", "raw", "--frame",
                                    "64", "--check", "count", "--count", "0", "--duration", "1",
                                    "--rate", "100000")
        assert res is not None, log
        assert res["sent_frames"] <= 1.01 * 100000 * res["send_s"], log
        sent.append(res["sent_frames"] / res["send_s"])
        if sent[-1] >= 0.95 * 100000:
            break
    assert max(sent) >= 0.95 * 100000, sent


def test_rate_in_bits_per_second_and_frame_sizes(tmp_path):
    """--rate-bps counts wire bits (frame + FCS + preamble + gap): 100 Mbit/s of 1518-byte
    frames is 8127 frames a second, each handed to the port as 1514 bytes."""
    for attempt in range(3):
        out = tmp_path / f"bps{attempt}.pcap"
        rc, log, res = pktgen_alone(tmp_path, f"net_pcap0,tx_pcap={out}", "--frame", "1518",
                                    "--groups", "1", "--check", "count", "--count", "0",
                                    "--duration", "1", "--rate-bps", "100e6")
        assert res is not None, log
        assert res["sent_frames"] <= 1.01 * 8127 * res["send_s"], log
        if res["sent_frames"] >= 0.95 * 8127:
            break
    assert res["sent_frames"] >= 0.95 * 8127, log
    frames = rdpcap(str(out))
    assert len(frames) == res["sent_frames"]
    assert {len(f) for f in frames} == {1514}
    il = frames[0][Interlink]
    assert il.type == 1 and il.msg_count == 1 and len(il.msgs[0].data) == 1514 - 86


def test_imix_mix_and_packing(tmp_path):
    out = tmp_path / "imix.pcap"
    rc, log, res = pktgen_alone(tmp_path, f"net_pcap0,tx_pcap={out}", "--mode", "raw",
                                "--frame", "imix", "--check", "count", "--count", "1200")
    assert res is not None, log
    sizes = [len(f) for f in rdpcap(str(out))]
    assert len(sizes) == 1200
    # exactly 7:4:1 over whole cycles of 12 (FCS excluded on the port)
    assert sizes.count(60) == 700 and sizes.count(566) == 400 and sizes.count(1514) == 100
    for f in rdpcap(str(out))[:20]:
        assert f[IP].dst == "239.1.1.100" and f[UDP].dport == 9000
    # packing: as many 100-byte messages as fit a 9000-byte MTU
    out2 = tmp_path / "pack.pcap"
    rc, log, res = pktgen_alone(tmp_path, f"net_pcap0,tx_pcap={out2}", "--size", "100",
                                "--pack-bytes", "9000", "--groups", "1", "--check", "count",
                                "--count", "1000")
    assert res is not None, log
    frames = rdpcap(str(out2))
    il = frames[0][Interlink]
    assert il.msg_count == (9000 - 28 - 40) // 104 == 85
    assert len(frames[0]) - 14 <= 9000
    assert sum(f[Interlink].msg_count for f in frames) == 1000


def gapped_capture(path, gaps_us):
    frames, t = [], 1_700_000_000.0
    for i, gap in enumerate([0] + gaps_us):
        t += gap / 1e6
        f = Ether(dst="01:00:5e:01:01:64") / IP(src="10.0.0.9", dst="239.1.1.100") / \
            UDP(sport=5009, dport=9000) / (i.to_bytes(8, "big") + bytes(10))
        f.time = t
        frames.append(f)
    wrpcap(str(path), frames)


def replay_once(tmp_path, src, out, gaps, speed):
    rc, log, res = pktgen_alone(tmp_path, f"net_pcap0,tx_pcap={out}", "--pcap", str(src),
                                "--speed", str(speed), "--pcap-loops", "2")
    assert res is not None, log
    n = len(gaps) + 1
    assert res["mode"] == "pcap" and res["sent_frames"] == 2 * n
    got = rdpcap(str(out))
    assert len(got) == 2 * n
    # the capture's frames, in its order, twice
    assert [bytes(f[UDP].payload)[:8] for f in got] == [i.to_bytes(8, "big") for i in range(n)] * 2
    problems = []
    want = sum(gaps) / 1e6 / speed
    for loop in range(2):
        g = got[loop * n:(loop + 1) * n]
        span = float(g[-1].time - g[0].time)
        # never faster than the capture at that speed; not at speed 1 either
        if not want - 0.002 <= span <= want * 1.6:
            problems.append(f"loop {loop}: span {span:.4f} s, want {want:.4f} s")
        dep = [float(g[i + 1].time - g[i].time) * 1e6 for i in range(n - 1)]
        close = sum(1 for d, gap in zip(dep, gaps) if abs(d - gap / speed) <= 0.2 * gap / speed)
        # a sender ignoring timestamps would match almost none of the gaps
        if close < 0.25 * len(gaps):
            problems.append(f"loop {loop}: {close} of {len(gaps)} gaps within 20%")
    return problems


def test_pcap_replay_honours_timestamps_with_speed(tmp_path):
    """A capture with known gaps (2 ms and 20 ms, alternating) replayed twice at speed 2
    leaves with gaps of 1 ms and 10 ms, in the capture's order, every frame sent. Asserted
    loosely (the precise figures are in docs/benchmarks.md), and up to three times: a busy
    machine can take the CPU away for longer than a gap; a replayer that ignores timestamps
    or the speed fails every time."""
    src = tmp_path / "gapped.pcap"
    gaps = [2000, 20000] * 20
    gapped_capture(src, gaps)
    problems = []
    for attempt in range(3):
        problems = replay_once(tmp_path, src, tmp_path / f"replayed{attempt}.pcap", gaps, 2)
        if not problems:
            break
    assert not problems, problems


def test_raw_mode_through_the_appliance_one_order_and_capture(tmp_path):
    """Raw UDP from 4 senders: the appliance inserts the header, the receivers agree on one
    order, and the captured sample is sequenced Interlink DATA with our payload."""
    cap = tmp_path / "sample.pcap"
    rc, log, res, app = through_appliance(tmp_path, lambda rig: rig.run_pktgen(
        "--mode", "raw", "--frame", "64", "--senders", "4", "--receivers", "3",
        "--count", "20000", "--rate", "50000", "--capture", str(cap),
        "--capture-count", "100", "--quiet"))
    assert res is not None, log
    assert rc == 0, log
    assert res["mode"] == "raw" and res["delivered"] == res["expected"] == 3 * 20000
    assert res["disagreements"] == 0 and res["unrecoverable"] == 0
    assert app["messages_ordered"] == 20000
    frames = rdpcap(str(cap))
    assert len(frames) == res["captured"] == 100
    seqs = []
    for f in frames:
        il = f[Interlink]
        assert il.group_id == 100 and "STAMPED" in str(il.flags) and "RAW" in str(il.flags)
        assert il.msg_count == 1 and len(il.msgs[0].data) == 64 - 4 - 42
        seqs.append(il.global_seq)
    # in sequence order, but for a frame the appliance's full ring refused on a loaded
    # machine, which arrives later as a retransmission
    assert len(set(seqs)) >= 95 and max(seqs) - min(seqs) < 200
    assert sum(1 for a, b in zip(seqs, seqs[1:]) if b == a + 1) >= 90
    assert len({f[IP].src for f in frames}) == 4


def test_count_mode_through_the_appliance_nothing_lost(tmp_path):
    """The line-rate trial's check at a low rate: every frame back, sequence continuous,
    latency measured on every frame."""
    rc, log, res, app = through_appliance(tmp_path, lambda rig: rig.run_pktgen(
        "--check", "count", "--frame", "106", "--groups", "2", "--senders", "8",
        "--receivers", "8", "--count", "50000", "--rate", "100000", "--quiet"))
    assert res is not None, log
    assert res["check"] == "count" and res["offered_frames"] == 50000
    # Every frame is accounted for: back at pktgen, or dropped by the appliance because
    # pktgen's ring was full (a loaded machine can stop pktgen reading for a while), and
    # every gap in the sequence is exactly such a drop.
    dropped = app["ports"]["out"]["drop_tx_full"]
    assert res["rx_data"] + dropped == 50000, (log, app["ports"])
    # a gap shows in the sequence unless it is at the very end (nothing after it arrives)
    assert res["lost"] == dropped and res["seq_missing"] <= dropped
    assert res["seq_reordered"] == 0
    assert (rc == 0) == (dropped == 0), log
    assert res["latency_us"]["samples"] == res["rx_data"] and res["latency_us"]["p50"] > 0


def test_receive_on_a_second_lcore(tmp_path):
    """--rx-lcore: the receive side on lcore 1 (both on CPU 0 here), count check through the
    appliance; every frame accounted for as with one lcore."""
    rc, log, res, app = through_appliance(tmp_path, lambda rig: pktgen_alone(
        tmp_path, f"net_memif0,role=client,socket={rig.sock_in},socket-abstract=no",
        "--rx-lcore", "--check", "count", "--mode", "raw", "--frame", "64",
        "--receivers", "4", "--count", "30000", "--rate", "100000",
        rx=f"net_memif1,role=client,socket={rig.sock_out},socket-abstract=no",
        lcores="0@0,1@0"))
    assert res is not None, log
    dropped = app["ports"]["out"]["drop_tx_full"]
    assert res["offered_frames"] == 30000 and app["messages_ordered"] == 30000
    # a gap shows in the sequence unless it is at the very end (nothing after it arrives)
    assert res["rx_data"] + dropped == 30000 and res["seq_missing"] <= dropped, log
    assert res["latency_us"]["samples"] == res["rx_data"]
    # and it refuses what it cannot do
    rc, log, res = pktgen_alone(tmp_path, "net_null0,no-rx=1", "--rx-lcore", "--count", "10")
    assert rc == 2 and "goes with --check count" in log
    rc, log, res = pktgen_alone(tmp_path, "net_null0,no-rx=1", "--rx-lcore", "--check", "count",
                                "--count", "10")
    assert rc == 2 and "needs a second lcore" in log


def test_count_mode_reports_loss_and_gaps(tmp_path):
    """The check can fail: with 1% loss injected inside the appliance (impair stage), count
    mode sees frames missing and sequence gaps, and exits 1."""
    sets = ["stages.loss={type: impair, loss: bernoulli, p: 0.01, seed: 5}",
            "pipeline=[{lcore: 1, chains: [{rx: in, stages: [classify, seq, loss], tx: out},"
            " {rx: out, stages: [classify, nak], tx: in}]}]"]
    rc, log, res, app = through_appliance(tmp_path, lambda rig: rig.run_pktgen(
        "--check", "count", "--frame", "106", "--groups", "1", "--receivers", "2",
        "--count", "20000", "--rate", "100000", "--quiet"), app_sets=sets)
    assert res is not None, log
    assert rc == 1, log
    injected = app["stages"]["loss"]["lost"]
    assert 100 < injected < 320, app["stages"]
    # pktgen sees exactly what the appliance dropped: the injected losses plus any frame
    # its full output ring refused (a loaded machine)
    assert res["lost"] == injected + app["ports"]["out"]["drop_tx_full"], (res, app["ports"])
    assert res["lost"] - 5 <= res["seq_missing"] <= res["lost"]


def test_usage_errors(tmp_path):
    for args in (["--mode", "bogus"], ["--size", "imix"],
                 ["--mode", "raw", "--groups", "2"], ["--rate", "1", "--rate-bps", "1"],
                 ["--frame", "40"], ["--check", "some"], ["--pcap-loops", "0"],
                 ["--raw-dst", "10.0.0.1:9000"], ["--mode", "raw", "--pack", "4"]):
        p = subprocess.run([str(PKTGEN), "--tx", "net_null0", *args], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "interlink-pktgen:" in p.stderr
