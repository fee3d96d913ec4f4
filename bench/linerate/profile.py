#!/usr/bin/env python3
"""Where a device's cycles go while the saturating generator drives it: one session of the
line-rate harness's paired part (dpdk-testpmd txonly, or io from a capture, into the device's
"in" memif ring; the device sends into net_null), with `perf record -e cpu-clock` on the
device's process for the length of the window. Prints the device's forwarded and offered rates,
its stages' cycles per frame, and perf's flat profile; keeps perf.data for `perf report`.

  bench/linerate/profile.py --dut appliance --frame 64 --secs 5 --out /tmp/prof-app
  bench/linerate/profile.py --dut testpmd --frame 64 --out /tmp/prof-io

perf's samples count CPU time, so a device that keeps its core busy (it polls) spends its
samples in proportion to its cost per frame only while the generator saturates it: the window
says whether it did (offered above forwarded).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import duts  # noqa: E402
import tpgen  # noqa: E402
from common import Cfg, log  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dut", choices=("appliance", "testpmd"), default="appliance")
    ap.add_argument("--frame", type=int, default=64,
                    help="frame size: 64 is raw mode, larger native (default 64)")
    ap.add_argument("--mode", choices=("raw", "native"),
                    help="raw or native (default: raw at 64 B, native above)")
    ap.add_argument("--secs", type=float, default=5.0, help="profiled window (default 5 s)")
    ap.add_argument("--build", default=str(Cfg.build))
    ap.add_argument("--gen-cpu", default="0")
    ap.add_argument("--dut-cpu", default="1")
    ap.add_argument("--out", help="directory for perf.data and the logs (default: temporary)")
    ap.add_argument("--no-perf", action="store_true", help="rates and stage cycles only")
    ap.add_argument("--rt", action="store_true",
                    help="run the generator and the device SCHED_RR (chrt -r 1): other work on a "
                         "shared machine then waits, instead of taking their CPUs")
    ap.add_argument("--huge", action="store_true",
                    help="DPDK's memory in 2 MB hugepages for the generator and the device "
                         "(a mounted hugetlbfs with 1024 free pages), instead of --no-huge")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an appliance configuration override, as interlink's --set")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("profile.py: run as root (memif sockets, perf on another process)")
    Cfg.build = Path(a.build).resolve()
    Cfg.gen_cpu, Cfg.dut_cpu = a.gen_cpu, a.dut_cpu
    Cfg.huge = a.huge
    if a.rt:
        Cfg.nice = ["chrt", "-r", "1"]
    mode = a.mode or ("raw" if a.frame == 64 else "native")
    case = {"mode": mode, "frame": a.frame}
    out = Path(a.out or tempfile.mkdtemp(prefix="ilprof"))
    out.mkdir(parents=True, exist_ok=True)

    dut = (duts.Appliance if a.dut == "appliance" else duts.Testpmd)(out, out="null")
    if a.set:
        if a.dut != "appliance":
            sys.exit("profile.py: --set is for the appliance")
        dut.extra_args = [x for kv in a.set for x in ("--set", kv)]
    with dut:
        gen = tpgen.TestpmdGen(out, dut.gen_ports()[0], case)
        dut.before_stop = gen.close
        try:
            gen.cmd("start")
            f0 = dut.fwd_count()
            t0 = time.time()
            while dut.fwd_count() < f0 + 100000:
                if time.time() - t0 > 20:
                    sys.exit("profile.py: the device does not forward")
                time.sleep(0.05)
            time.sleep(0.3)
            g0, fa, ca = gen.offered(), dut.fwd_count(), dut.stage_cycles()
            perf = None
            if not a.no_perf:
                perf = subprocess.Popen(
                    ["perf", "record", "-e", "cpu-clock", "-F", "4999", "-g",
                     "-p", str(dut.proc.pid), "-o", str(out / "perf.data"), "--",
                     "sleep", str(a.secs)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                perf.wait()
            else:
                time.sleep(a.secs)
            g1, fb, cb = gen.offered(), dut.fwd_count(), dut.stage_cycles()
        finally:
            dut.before_stop = None
            gen.close()
    dt = g1[2] - g0[2]
    offered = ((g1[0] - g0[0]) + (g1[1] - g0[1])) / dt / 1e6
    fwd = (fb - fa) / dt / 1e6
    log(f"{a.dut}, {a.frame} B {mode}: offered {offered:.2f} Mpps, forwarded {fwd:.2f} Mpps"
        f" ({'saturated' if tpgen.saturated({'fwd_mpps': fwd, 'offered_mpps': offered}, 0.03) else 'NOT saturated: the generator set the rate'})")
    if ca and cb:
        per = {s: (cb[s][1] - ca[s][1]) / max(cb[s][0] - ca[s][0], 1)
               for s in cb if s in ca and cb[s][0] > ca[s][0]}
        log("stage cycles per frame: " + ", ".join(f"{s} {v:.0f}" for s, v in per.items()))
    if fwd > 0:
        # The device's CPU is busy all the time: cycles per frame is its clock over its rate.
        tsc = tsc_hz()
        if tsc:
            log(f"whole device: {tsc / (fwd * 1e6):.0f} TSC cycles per forwarded frame "
                f"(clock {tsc / 1e9:.2f} GHz, /proc/cpuinfo)")
    if not a.no_perf:
        rep = subprocess.run(["perf", "report", "-i", str(out / "perf.data"), "--no-children",
                              "--stdio", "--sort", "symbol", "-g", "none",
                              "--percent-limit", "0.7"],
                             capture_output=True, text=True)
        lines = [ln for ln in rep.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
        log("\n".join(lines[:40]))
        log(f"perf data: {out / 'perf.data'}")


def tsc_hz():
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            # A VM reports its TSC's rate here (constant_tsc, tsc_known_freq).
            if ln.startswith("cpu MHz"):
                return float(ln.split(":")[1]) * 1e6
    except (OSError, ValueError):
        pass
    return None


if __name__ == "__main__":
    main()
