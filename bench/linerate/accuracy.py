#!/usr/bin/python3
"""How exact interlink-pktgen's pacing and pcap replay are (the figures of the "Generator
accuracy" paragraph in docs/benchmarks.md). Run as root after a build:

  /usr/bin/python3 bench/linerate/accuracy.py [BUILD]

1. --rate R for 1 s into net_null: frames sent against R, for several R.
2. A capture with known gaps (100 us .. 10 ms, 2000 frames) replayed with --speed 1 and 4 into
   net_pcap's tx_pcap: each inter-departure time against the capture's gap divided by speed.
"""
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build").resolve()
PKTGEN = BUILD / "pktgen" / "interlink-pktgen"


def pktgen(tmp, *args):
    tag = uuid.uuid4().hex[:8]
    js = Path(tmp) / f"{tag}.json"
    try:
        subprocess.run(["taskset", "-c", "0", str(PKTGEN), *args, "--json", str(js), "--quiet",
                        "--", "--file-prefix", f"acc{tag}", "--lcores", "0", "--no-huge",
                        "-m", "512", "--log-level", "lib.eal:error"],
                       capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(f"/var/run/dpdk/acc{tag}", ignore_errors=True)
    return json.loads(js.read_text())


def main():
    tmp = tempfile.mkdtemp()
    out = {"rate": [], "replay": []}
    for rate in (10_000, 100_000, 1_000_000, 10_000_000):
        errs = []
        for _ in range(3):
            r = pktgen(tmp, "--tx", "net_null0,no-rx=1", "--mode", "raw", "--frame", "64",
                       "--check", "count", "--count", "0", "--duration", "1",
                       "--rate", str(rate))
            errs.append(100 * (r["sent_frames"] / r["send_s"] / rate - 1))
        out["rate"].append({"rate": rate, "error_pct": errs})
        print(f"--rate {rate:>9}: achieved rate error over 1 s: "
              + ", ".join(f"{e:+.3f}%" for e in errs), flush=True)
    rnd = random.Random(7)
    gaps = [rnd.choice([100, 250, 1000, 10000]) for _ in range(1999)]
    frames, t = [], 1_700_000_000.0
    for i, g in enumerate([0] + gaps):
        t += g / 1e6
        f = Ether(dst="01:00:5e:01:01:64") / IP(src="10.0.0.9", dst="239.1.1.100") / \
            UDP(sport=5009, dport=9000) / (i.to_bytes(8, "big") + bytes(10))
        f.time = t
        frames.append(f)
    src = Path(tmp) / "gaps.pcap"
    wrpcap(str(src), frames)
    for speed in (1, 4):
        dst = Path(tmp) / f"out{speed}.pcap"
        pktgen(tmp, "--tx", f"net_pcap0,tx_pcap={dst}", "--pcap", str(src), "--speed",
               str(speed))
        got = rdpcap(str(dst))
        dep = [float(got[i + 1].time - got[i].time) * 1e6 for i in range(len(got) - 1)]
        err = [d - g / speed for d, g in zip(dep, gaps)]
        aerr = sorted(abs(e) for e in err)
        span = float(got[-1].time - got[0].time)
        want = sum(gaps) / 1e6 / speed
        res = {"speed": speed, "frames": len(got), "median_abs_error_us": statistics.median(aerr),
               "p99_abs_error_us": aerr[int(0.99 * len(aerr))],
               "span_error_pct": 100 * (span / want - 1)}
        out["replay"].append(res)
        print(f"replay --speed {speed}: {len(got)} frames, inter-departure error median "
              f"{res['median_abs_error_us']:.1f} us, p99 {res['p99_abs_error_us']:.1f} us; "
              f"whole span {res['span_error_pct']:+.3f}%", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
