"""interlink-pktgen as the checking generator: every frame counted, the global sequence
checked for continuity, latency from the TX timestamp in each frame. It sends and receives on
one core, so it cannot saturate a device as cheap as testpmd io (see tpgen.py for the
saturating generator); it measures what needs a receiver: no-drop rates, latency, the kernel
baselines on veth wiring, senders and receivers.

One `interlink-pktgen --serve` process and one connection serve all the trials of one device
and frame size (a memif client reconnecting for every trial costs seconds and, with DPDK
22.11, sometimes the server).
"""
import json
import os
import select
import subprocess
import time
import uuid
from pathlib import Path

import frames
from common import Cfg, log, rm_prefix

PDR_LOSS = 0.005  # CSIT's partial drop rate: loss ratio of at most 0.5%


class GenError(Exception):
    pass


class Generator:
    """interlink-pktgen --serve on the generator's CPU."""

    def __init__(self, tmp, dut, case):
        tx, rx = dut.gen_ports()
        self.prefix = f"lrgen{uuid.uuid4().hex[:8]}"
        self.err = open(Path(tmp) / f"{self.prefix}.log", "w")
        self.errp = Path(tmp) / f"{self.prefix}.log"
        cmd = Cfg.nice + ["taskset", "-c", Cfg.gen_cpu, str(Cfg.build / "pktgen" / "interlink-pktgen"),
               "--serve", "--tx", tx, "--rx", rx, "--mode", case["mode"],
               "--frame", str(case["frame"]), "--groups", "1", "--senders", "8",
               "--receivers", "8", "--tx-drop", "--drain-timeout", "1", "--link-wait", "30",
               # A generator that lost its CPU does not make up with a burst the device
               # would never see from a wire: what it could not send is not offered, and
               # the offered rate that counts is the one achieved.
               "--catch-up-us", "200",
               "--", "--file-prefix", self.prefix, "--lcores", "0", "--no-huge", "-m", "1024",
               "--log-level", "lib.eal:error"]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1)
        self.fd, self.buf = self.p.stdout.fileno(), b""
        line = self.readline(60)
        if line.strip() != "READY":
            self.close()
            raise GenError(f"generator did not start: {line}{self.errp.read_text()}")

    def readline(self, timeout):
        # select() on the raw descriptor with our own buffer: a buffered reader may hold
        # the next lines already, and select() would not say so.
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.time()))
            if not r:
                raise GenError("generator timed out: " + self.errp.read_text())
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise GenError(f"generator exited ({self.p.poll()}): " + self.errp.read_text())
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode() + "\n"

    def trial(self, rate, secs, senders, receivers):
        try:
            self.p.stdin.write(f"trial {int(rate)} {secs} {senders} {receivers}\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise GenError("generator gone: " + self.errp.read_text())
        out = []
        t0 = time.time()
        while True:
            line = self.readline(max(1.0, secs + 30 - (time.time() - t0)))
            if line.strip() == "END":
                break
            out.append(line)
        text = "".join(out)
        if text.startswith("ERROR"):
            raise RuntimeError(text)
        return json.loads(text)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired, ValueError):
                self.p.kill()
                self.p.wait()
        self.err.close()
        rm_prefix(self.prefix)


class Runner:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = Path(tmp)
        self.trials = []
        self.restarts = {}
        self.n = 0
        self.gen, self.gen_key = None, None

    def gen_for(self, dut, case):
        key = (id(dut), dut.tag, case["mode"], case["frame"])
        if self.gen_key != key:
            self.close_gen()
            self.gen = Generator(self.tmp, dut, case)
            self.gen_key = key
            dut.before_stop = self.close_gen
        return self.gen

    def close_gen(self):
        if self.gen:
            self.gen.close()
        self.gen, self.gen_key = None, None

    def trial(self, dut, case, rate_pps=0, duration=None):
        """One trial in count mode on the generator serving this device and frame: frames
        that the port refuses are lost, as on a wire."""
        d = duration or self.args.trial
        r = None
        for attempt in range(3):
            if not dut.alive():
                # DPDK 22.11's memif can panic in the interrupt thread when a peer leaves
                # mid-message (docs/interop.md): count it, start the device again.
                log(f"  ({dut.name} exited: restarting it)")
                self.restarts[dut.name] = self.restarts.get(dut.name, 0) + 1
                self.close_gen()
                dut.stop()
                dut.start()
            try:
                g = self.gen_for(dut, case)
                r = g.trial(rate_pps, d, case.get("senders", 1), case.get("receivers", 1))
                break
            except GenError as e:
                log(f"  (generator failed, retrying: {str(e)[-300:]})")
                self.close_gen()
        if r is None:
            raise RuntimeError("the generator failed three times in a row")
        r.update(dut=dut.name, case=dict(case), target_pps=rate_pps, duration=d)
        r["ok"] = r["lost"] == 0 and r["seq_missing"] == 0 and r["rx_data"] > 0
        self.trials.append(r)
        self.n += 1
        lat = r["latency_us"]
        log(f"  [{self.n:3d}] {dut.name:9s} {case['mode']:6s} {case['frame']:>4} B "
            f"S{case.get('senders', 1)} R{case.get('receivers', 1)}  target "
            f"{rate_pps / 1e6 if rate_pps else float('inf'):6.3f}  offered "
            f"{r['offered_mpps']:6.3f}  fwd {r['rx_mpps']:6.3f} Mpps  lost {r['lost']:>8}  "
            f"p50 {lat['p50']:8.1f} p99 {lat['p99']:9.1f} us  {'ok' if r['ok'] else 'LOSS'}")
        return r

    def mfr(self, dut, case, reps=None):
        """The maximum forwarding rate: the median of reps trials offered as fast as the
        generator goes (one trial is at the mercy of whoever else has the CPU)."""
        reps = reps or self.args.reps
        rs = sorted((self.trial(dut, case) for _ in range(reps)), key=lambda r: r["rx_mpps"])
        m = rs[len(rs) // 2]
        m["mfr_all"] = [r["rx_mpps"] for r in rs]
        return m

    def mfr_ndr(self, dut, case, search=True, mfr=None):
        """Maximum forwarding rate, then the no-drop rate (NDR, zero loss) and the partial-drop
        rate (PDR, loss ratio <= 0.5%) found together, as MLRsearch does: every trial narrows
        both intervals; the next trial serves the target whose interval is still widest."""
        mfr = mfr or self.mfr(dut, case)
        out = {"case": case, "dut": dut.name, "mfr_mpps": mfr["rx_mpps"],
               "mfr_trials_mpps": mfr.get("mfr_all", [mfr["rx_mpps"]]),
               "offered_max_mpps": mfr["offered_mpps"],
               "mfr_gbps": frames.wire_gbps(mfr["rx_mpps"], frames.out_frame(case) if dut.stamps
                                             else case["frame"]),
               "mfr_latency": mfr["latency_us"]}
        if not search:
            return out
        top = max(mfr["offered_mpps"], mfr["rx_mpps"]) * 1e6
        tg = {name: {"tol": tol, "lo": 0.0, "hi": top, "best": None,
                     "width": 0.1 * mfr["rx_mpps"] * 1e6}
              for name, tol in (("ndr", 0.0), ("pdr", PDR_LOSS))}
        rate = mfr["rx_mpps"] * 1e6 * 0.999
        for _ in range(self.args.steps):
            if rate <= 1000:
                break
            r = self.trial(dut, case, rate)
            # On a shared machine one trial is at the mercy of whoever else has the CPU
            # for a few milliseconds: a rate that lost frames is tried again (--retries),
            # and passes if one of its trials loses nothing.
            for _ in range(self.args.retries):
                if r["lost"] == 0 and r["seq_missing"] == 0 and r["rx_data"] > 0:
                    break
                again = self.trial(dut, case, rate)
                if again["lost"] / max(again["offered_frames"], 1) < \
                        r["lost"] / max(r["offered_frames"], 1):
                    r = again
            # The rate tested is what the generator managed to offer, which on a busy
            # machine can fall short of the target.
            tested = min(rate, r["offered_mpps"] * 1e6) if r["offered_mpps"] else rate
            loss = r["lost"] / r["offered_frames"] if r["offered_frames"] else 1.0
            for t in tg.values():
                if r["rx_data"] > 0 and loss <= t["tol"] and r["seq_missing"] <= t["tol"] * \
                        r["offered_frames"]:
                    if tested > t["lo"]:
                        t["lo"], t["best"] = tested, r
                else:
                    t["hi"] = min(t["hi"], tested)
                    if t["lo"] >= t["hi"]:  # a noisy pass above a fail: trust the fail
                        t["lo"], t["best"] = 0.0, None
            open_ = [t for t in tg.values()
                     if not (t["best"] and t["hi"] - t["lo"] <= self.args.precision * t["hi"])]
            if not open_:
                break
            t = open_[0]  # NDR first: it is the lower one, and the PDR search follows it
            if t["best"]:
                rate = (t["lo"] + t["hi"]) / 2
            else:  # widen downwards until a trial passes (MLRsearch's external search)
                rate = max(t["hi"] - t["width"], t["hi"] * 0.05)
                t["width"] *= 2
        # A zero-loss pass is a partial-drop pass too: noise cannot make the PDR the lower.
        if tg["ndr"]["lo"] > tg["pdr"]["lo"]:
            tg["pdr"]["lo"], tg["pdr"]["best"] = tg["ndr"]["lo"], tg["ndr"]["best"]
        for name, t in tg.items():
            out[f"{name}_mpps"] = t["lo"] / 1e6
            out[f"{name}_gbps"] = frames.wire_gbps(t["lo"] / 1e6, case["frame"])
            out[f"{name}_latency"] = t["best"]["latency_us"] if t["best"] else None
        return out

    def sweep(self, dut, case, mfr_mpps, fractions):
        pts = []
        for f in fractions:
            r = self.trial(dut, case, mfr_mpps * 1e6 * f)
            pts.append({"fraction": f, "offered_mpps": r["offered_mpps"],
                        "fwd_mpps": r["rx_mpps"], "lost": r["lost"], "latency": r["latency_us"]})
        return pts


