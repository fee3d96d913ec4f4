"""The saturating generator: dpdk-testpmd, a generator nobody here wrote, on a core of its own.

  raw frames     --forward-mode=txonly: UDP from 198.18.0.1:9000 to the raw filter
                 239.1.1.100:9000, --txpkts = frame - FCS, UDP checksum 0
  native frames  --forward-mode=io from a net_pcap port replaying one frame from memory
                 (infinite_rx) to the device: txonly cannot write an Interlink header

It only transmits, into the device's "in" memif ring, as fast as the ring takes frames; what the
ring refuses is dropped and counted by testpmd (TX-dropped). Offered = taken + refused: the rate
at which the generator made frames. The device's own counters say what it forwarded. When a
device forwards (nearly) all that was offered, the generator, not the device, set the rate: that
trial does not measure the device's capacity, and a ratio whose ceiling trial is such a trial is
marked invalid.
"""
import os
import re
import select
import subprocess
import time
import uuid
from pathlib import Path

import frames
from common import TESTPMD, Cfg, log, no_huge, rm_prefix, wait_for

FWD_RE = re.compile(r"Forward statistics for port (\d+)\s+-+\s+RX-packets:\s+(\d+)\s+"
                    r"RX-dropped:\s+(\d+)\s+RX-total:\s+\d+\s+TX-packets:\s+(\d+)\s+"
                    r"TX-dropped:\s+(\d+)")


class GenError(Exception):
    pass


class TestpmdGen:
    """An interactive testpmd whose stdin and stdout are pipes (testpmd's command line works
    without a terminal, unlike Pktgen-DPDK's)."""

    def __init__(self, tmp, in_dev, case, burst=32):
        frames.check(case)
        self.tag = uuid.uuid4().hex[:8]
        self.prefix = f"lrtg{self.tag}"
        self.tmp = Path(tmp)
        self.kind = "txonly" if case["mode"] == "raw" else "pcap"
        self.case = case
        eal = [*no_huge(), "-m", "1024", "--file-prefix", self.prefix, "--no-pci",
               "--lcores", f"0@{Cfg.gen_cpu},1@{Cfg.gen_cpu}", "--log-level", "lib.eal:error"]
        common = ["-i", f"--burst={burst}", "--total-num-mbufs=32768"]
        if self.kind == "txonly":
            self.port = 0
            args = eal + ["--vdev", in_dev, "--", *common, "--forward-mode=txonly",
                          f"--eth-peer=0,{frames.RAW_DST_MAC}",
                          f"--tx-ip={frames.SRC_IP},{frames.RAW_DST}",
                          f"--tx-udp={frames.SRC_PORT},{frames.RAW_PORT}",
                          f"--txpkts={case['frame'] - frames.FCS}"]
        else:
            pcap = frames.pcap_for(case, self.tmp / f"gen-{self.tag}.pcap")
            # Two ports, paired: the capture's frames go to the device; anything the device
            # sends back on "in" is dropped by the pcap port (no tx file given).
            self.port = 1
            in_dev = re.sub(r"^net_memif\d+", "net_memif1", in_dev)
            args = eal + ["--vdev", f"net_pcap0,rx_pcap={pcap},infinite_rx=1",
                          "--vdev", in_dev, "--", *common, "--forward-mode=io"]
        self.cmdline = "dpdk-testpmd " + " ".join(args)
        self.logp = self.tmp / f"gen-{self.tag}.log"
        # Line-buffered: testpmd prints with stdio and its prompt with write(); a pipe would
        # otherwise hold the statistics back behind the prompt.
        self.p = subprocess.Popen(Cfg.nice + ["stdbuf", "-oL", "taskset", "-c", Cfg.gen_cpu,
                                              TESTPMD, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        self.buf = b""
        self.transcript = open(self.logp, "wb")
        self.until_prompt(60)

    def until_prompt(self, timeout=20):
        """Read testpmd's output up to its next prompt (no newline after it)."""
        deadline = time.time() + timeout
        while not self.buf.endswith(b"testpmd> "):
            left = deadline - time.time()
            r, _, _ = select.select([self.p.stdout], [], [], max(0.0, left))
            if not r:
                raise GenError("testpmd generator timed out: " + self.tail())
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                raise GenError(f"testpmd generator exited ({self.p.poll()}): " + self.tail())
            self.buf += chunk
            self.transcript.write(chunk)
            self.transcript.flush()
        out, self.buf = self.buf.decode(errors="replace"), b""
        return out

    def tail(self):
        self.transcript.flush()
        return self.logp.read_text(errors="replace")[-2000:]

    def cmd(self, line, timeout=20):
        try:
            self.p.stdin.write(line.encode() + b"\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise GenError("testpmd generator gone: " + self.tail())
        return self.until_prompt(timeout)

    def offered(self):
        """(frames taken by the device's ring, frames refused, time) so far on the port that
        feeds the device."""
        out = self.cmd("show fwd stats all")
        t = time.monotonic()
        for m in FWD_RE.finditer(out):
            if int(m.group(1)) == self.port:
                return int(m.group(4)), int(m.group(5)), t
        raise GenError("no forward statistics for port %d in: %s" % (self.port, out[-1500:]))

    def close(self):
        if self.p.poll() is None:
            try:
                self.cmd("stop")
                self.p.stdin.write(b"quit\n")
                self.p.stdin.flush()
                self.p.wait(timeout=20)
            except (GenError, BrokenPipeError, subprocess.TimeoutExpired, ValueError):
                self.p.kill()
                self.p.wait()
        self.transcript.close()
        rm_prefix(self.prefix)


def session(tmp, dut, case, windows, secs, sink=None):
    """One device session: the generator connects, forwards until the device forwards, then
    `windows` measurement windows of `secs` each. Returns one dict per window."""
    gen = TestpmdGen(tmp, dut.gen_ports()[0], case)
    dut.before_stop = gen.close
    sk = None
    try:
        if dut.out == "sink":
            from duts import Sink
            sk = Sink(tmp, dut.out_sock)
        gen.cmd("start")
        # memif links come up a moment after the client connects; the first bursts are
        # refused until then. Measure only once the device forwards.
        f0 = dut.fwd_count()
        wait_for(lambda: dut.fwd_count() > f0 + 1000, gen.p, "forwarding", timeout=20,
                 logp=gen.logp)
        time.sleep(0.2)
        out = []
        for _ in range(windows):
            a, fa, ca = gen.offered(), dut.fwd_count(), dut.stage_cycles()
            time.sleep(secs)
            b, fb, cb = gen.offered(), dut.fwd_count(), dut.stage_cycles()
            dt = b[2] - a[2]
            taken, refused = b[0] - a[0], b[1] - a[1]
            w = {"offered_mpps": (taken + refused) / dt / 1e6, "taken_mpps": taken / dt / 1e6,
                 "fwd_mpps": (fb - fa) / dt / 1e6, "secs": dt}
            w["refused"] = refused / max(taken + refused, 1)
            if ca and cb:
                w["cycles_per_frame"] = {
                    s: (cb[s][1] - ca[s][1]) / max(cb[s][0] - ca[s][0], 1)
                    for s in cb if s in ca and cb[s][0] > ca[s][0]}
            out.append(w)
        return out
    finally:
        dut.before_stop = None
        if sk:
            sk.close()
        gen.close()


def saturated(w, margin):
    """Did the device, not the generator, set the rate of this window?"""
    return w["fwd_mpps"] < (1.0 - margin) * w["offered_mpps"]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0.0


def best_window(ws):
    """The window with the median forwarded rate."""
    return sorted(ws, key=lambda w: w["fwd_mpps"])[len(ws) // 2]


def run_pairs(tmp, case, pairs, windows, secs, margin, mk_app, mk_ceiling, retries=2):
    """Appliance and ceiling sessions alternated `pairs` times (the load of a shared machine
    drifts over minutes; a pair sees about the same). Each session's figure is its median
    window."""
    rows = []
    for i in range(pairs):
        row = {}
        for name, mk in (("appliance", mk_app), ("ceiling", mk_ceiling)):
            for attempt in range(retries + 1):
                try:
                    with mk(tmp) as d:
                        ws = session(tmp, d, case, windows, secs)
                    break
                except (GenError, RuntimeError) as e:
                    if attempt == retries:
                        raise
                    log(f"  ({name} session failed, again: {str(e)[-300:]})")
            w = dict(best_window(ws), windows=ws)
            w["saturated"] = saturated(w, margin)
            row[name] = w
            log(f"  [{i + 1}/{pairs}] {name:9s} {case['mode']:6s} {case['frame']:>4} B  offered "
                f"{w['offered_mpps']:6.2f}  taken {w['taken_mpps']:6.2f}  forwarded "
                f"{w['fwd_mpps']:6.2f} Mpps  refused {100 * w['refused']:5.1f}%  "
                f"{'device-bound' if w['saturated'] else 'GENERATOR-BOUND'}")
        a, c = row["appliance"]["fwd_mpps"], row["ceiling"]["fwd_mpps"]
        row["ratio"] = a / c if c else 0.0
        row["valid"] = row["ceiling"]["saturated"]
        rows.append(row)
    return summarize(case, rows)


def bound_of(r):
    """What one pair says about the ratio appliance / ceiling: exact when both devices set
    their own rates; a lower bound when only the ceiling did (the appliance kept up with the
    generator); an upper bound when only the appliance did (the ceiling forwarded all that was
    offered, so it goes faster than measured); nothing when neither did."""
    a, c = r["appliance"]["saturated"], r["ceiling"]["saturated"]
    return {(True, True): "exact", (False, True): "lower", (True, False): "upper",
            (False, False): "none"}[(a, c)]


def summarize(case, rows):
    """The pairs of one frame size. A ratio is valid where the ceiling set its own rate; where
    it did not, the pairs in which the appliance did still bound the ratio from above."""
    for r in rows:
        r["bound"] = bound_of(r)
    valid = [r for r in rows if r["valid"]]
    ratios = [r["ratio"] for r in valid]
    upper = [r["ratio"] for r in rows if r["bound"] == "upper"]
    s = {"case": case, "pairs": rows, "n_pairs": len(rows), "n_valid": len(valid),
         "ratio_valid_median": median(ratios) if ratios else None,
         "ratio_valid_range": [min(ratios), max(ratios)] if ratios else None,
         "valid_lower": any(r["bound"] == "lower" for r in valid),
         "ratio_upper_bound": min(upper) if upper else None}
    for name in ("appliance", "ceiling"):
        s[name] = {k: median([r[name][k] for r in rows])
                   for k in ("offered_mpps", "taken_mpps", "fwd_mpps", "refused")}
        s[name]["saturated_pairs"] = sum(1 for r in rows if r[name]["saturated"])
        cyc = [r[name].get("cycles_per_frame") for r in rows if r[name].get("cycles_per_frame")]
        if cyc:
            s[name]["cycles_per_frame"] = {st: median([c[st] for c in cyc if st in c])
                                           for st in cyc[0]}
    s["out_frame"] = frames.out_frame(case)
    return s


def generator_alone(tmp, case, secs, mk_dut):
    """What the generator offers into a device that takes everything (net_null) or into a
    memif ring read by testpmd rxonly on the other core."""
    with mk_dut(tmp) as d:
        if d.name == "null":
            gen = TestpmdGen(tmp, "net_null0,no-rx=1", case)
            try:
                gen.cmd("start")
                time.sleep(0.3)
                a = gen.offered()
                time.sleep(secs)
                b = gen.offered()
            finally:
                gen.close()
            dt = b[2] - a[2]
            return {"into": "net_null", "case": case, "generator": gen.kind,
                    "offered_mpps": (b[0] - a[0] + b[1] - a[1]) / dt / 1e6,
                    "taken_mpps": (b[0] - a[0]) / dt / 1e6}
        ws = session(tmp, d, case, 1, secs)
        return {"into": "memif, testpmd rxonly on the other core", "case": case,
                "generator": "txonly" if case["mode"] == "raw" else "pcap",
                "offered_mpps": ws[0]["offered_mpps"], "taken_mpps": ws[0]["taken_mpps"]}
