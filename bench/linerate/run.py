#!/usr/bin/python3
"""The line-rate benchmark in one command.

Two generators, each for what it can measure:

  testpmd    dpdk-testpmd (txonly for raw UDP, io from an in-memory capture for native
             frames) on the generator's CPU, transmit only: it offers more than the devices
             take, so the device sets the rate. Maximum forwarding rates of the appliance and
             of the ceiling (testpmd io) in pairs, the generator's offered rate beside each.
  pktgen     interlink-pktgen: sends and receives on one core and checks every frame (count,
             global-sequence continuity, latency). No-drop rates, latency, the kernel
             baselines, senders and receivers.

Devices (bench/linerate/duts.py): the appliance and testpmd io over net_memif; on veth pairs,
the appliance through net_af_packet, afpseq (one AF_PACKET socket, TPACKET rings) and kseq
(UDP sockets), the same raw-mode job three ways.

  ./scripts/bench-linerate.sh            # full run (~5 min), writes docs/benchmarks.md
  ./scripts/bench-linerate.sh --quick    # one short point of each kind (smoke test, no verdicts)
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duts
import frames
import pgen
import tpgen
from common import HERE, ROOT, Cfg, cpus, log

RAW64 = {"mode": "raw", "frame": 64}
PARTS = ("generator", "paired", "fec", "veth", "memif", "senders", "sweep")
SIZES = [RAW64, {"mode": "native", "frame": 106}, {"mode": "native", "frame": 512},
         {"mode": "native", "frame": 1500}]


def machine():
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "load_at_start": os.getloadavg()}


def build_tool(name, outdir):
    """The kernel baselines are single C files (plus the project's JSON writer), built here so
    that the harness needs no build option."""
    exe = Path(outdir) / name
    srcs = [HERE / f"{name}.c", ROOT / "lib" / "util" / "json.c"]
    deps = srcs + [HERE / "rawseq.h", ROOT / "include" / "interlink" / "wire.h",
                   ROOT / "include" / "interlink" / "json.h"]
    if not exe.exists() or exe.stat().st_mtime < max(d.stat().st_mtime for d in deps):
        subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
                        "-I", str(ROOT / "include"), "-o", str(exe)] + [str(s) for s in srcs],
                       check=True)
    return exe


def options():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("IL_BUILD", str(ROOT / "build")))
    ap.add_argument("--quick", action="store_true",
                    help="one short point of each kind: a smoke test, no verdicts")
    ap.add_argument("--pairs", type=int,
                    help="appliance/ceiling session pairs per frame size (default 3; quick 1)")
    ap.add_argument("--windows", type=int,
                    help="measurement windows per session, median taken (default 2; quick 1)")
    ap.add_argument("--window", type=float,
                    help="seconds per measurement window (default 1; quick 0.3)")
    ap.add_argument("--margin", type=float, default=0.03,
                    help="a device that forwards more than (1 - margin) of what was offered "
                         "did not set the rate: the generator did (default 0.03)")
    ap.add_argument("--trial", type=float, help="seconds per pktgen trial (default 1; quick 0.3)")
    ap.add_argument("--steps", type=int, help="NDR search trials per case (default 6; quick 1)")
    ap.add_argument("--reps", type=int,
                    help="pktgen trials per maximum forwarding rate, median taken "
                         "(default 3; quick 1)")
    ap.add_argument("--retries", type=int,
                    help="extra trials at a rate that lost frames before it counts as failed "
                         "(default 1; quick 0)")
    ap.add_argument("--precision", type=float, default=0.03,
                    help="stop the NDR search when (hi - lo) / hi is below this (default 0.03)")
    ap.add_argument("--sizes", help="frame sizes of the paired runs, e.g. 64,106,512,1500 "
                                    "(64 is raw mode, larger native; default all four)")
    ap.add_argument("--gen-cpu", default="0", help="CPU of the generators (default 0)")
    ap.add_argument("--dut-cpu", default="1", help="CPU of the devices under test (default 1)")
    ap.add_argument("--sink-cpu",
                    help="a third CPU: the paired runs' devices send into a memif ring read by "
                         "testpmd rxonly there, instead of into net_null inside the device")
    ap.add_argument("--out", help="results directory (default bench/linerate/results; quick: "
                                  "a temporary directory)")
    ap.add_argument("--docs", action="store_true",
                    help="write the section of docs/benchmarks.md and the plots (default for a "
                         "full run)")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--skip-kernel", action="store_true", help="no veth devices")
    ap.add_argument("--only", default=",".join(PARTS),
                    help="parts to run, comma-separated (default all: %(default)s)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run the generators and the devices at this nice value (default 0: "
                         "a fair share of a shared machine; -10 to push other work aside). "
                         "With the kernel's autogroup scheduling, nice only ranks processes "
                         "of one session, so the run moves to a session of its own and sets "
                         "that session's nice as well")
    a = ap.parse_args()
    q = a.quick
    for k, full, quick in (("pairs", 3, 1), ("windows", 2, 1), ("window", 1.0, 0.3),
                           ("trial", 1.0, 0.3), ("reps", 3, 1), ("retries", 1, 0),
                           ("steps", 6, 1)):
        if getattr(a, k) is None:
            setattr(a, k, quick if q else full)
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else [c["frame"] for c in SIZES]
    a.cases = [{"mode": "raw" if s < frames.NATIVE_MIN else "native", "frame": s}
               for s in sizes]
    if q:
        a.cases = a.cases[:1]
    a.parts = set(a.only.split(","))
    if a.skip_kernel:
        a.parts.discard("veth")
    if a.parts - set(PARTS):
        ap.error(f"--only: unknown part(s) {', '.join(sorted(a.parts - set(PARTS)))}; "
                 f"parts are {', '.join(PARTS)}")
    for c in a.cases:
        try:
            frames.check(c)
        except ValueError as e:
            ap.error(f"--sizes: {e}")
    have = {str(c) for c in cpus()}
    for k in ("gen_cpu", "dut_cpu", "sink_cpu"):
        v = getattr(a, k)
        if v is not None and v not in have:
            ap.error(f"--{k.replace('_', '-')} {v}: not a CPU this process may use "
                     f"({', '.join(sorted(have))})")
    return a


def main():
    a = options()
    if a.nice and Path("/proc/self/autogroup").exists():
        if os.getsid(0) != os.getpid():
            # setsid forks when we lead a process group; -w passes the exit status on.
            os.execvp("setsid", ["setsid", "-w", sys.executable, *sys.argv])
        Path("/proc/self/autogroup").write_text(str(a.nice))
    Cfg.build = Path(a.build).resolve()
    Cfg.nice = ["nice", "-n", str(a.nice)] if a.nice else []
    Cfg.gen_cpu, Cfg.dut_cpu, Cfg.sink_cpu = a.gen_cpu, a.dut_cpu, a.sink_cpu
    for b in (Cfg.build / "dataplane" / "interlink", Cfg.build / "pktgen" / "interlink-pktgen"):
        if not b.exists():
            sys.exit(f"{b} is missing: build first (./scripts/build.sh)")
    if os.geteuid() != 0:
        sys.exit("run as root (memif sockets, network namespaces)")
    out = Path(a.out) if a.out else (Path(tempfile.mkdtemp(prefix="linerate-")) if a.quick
                                      else HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    write_docs = (a.docs or not a.quick) and not a.no_docs
    tools = Cfg.build / "linerate"
    tools.mkdir(exist_ok=True)
    Cfg.kseq, Cfg.afpseq = build_tool("kseq", tools), build_tool("afpseq", tools)
    # SIGTERM (a timeout, a CI job cancelled) unwinds like Ctrl-C: every device is stopped
    # and every namespace removed by the with blocks.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    started = datetime.datetime.now(datetime.timezone.utc)
    res = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
           "command": " ".join(["./scripts/bench-linerate.sh"] +
                               [x for x in sys.argv[1:]
                                if not x.startswith("--build") and x != str(a.build)]),
           "quick": a.quick, "pairs": a.pairs, "windows": a.windows, "window_s": a.window,
           "margin": a.margin, "trial_s": a.trial, "reps": a.reps, "retries": a.retries,
           "nice": a.nice, "cpus": {"generator": a.gen_cpu, "device": a.dut_cpu,
                                    "sink": a.sink_cpu},
           "paired_out": "memif to a testpmd rxonly sink" if a.sink_cpu else "net_null"}
    tmp = tempfile.mkdtemp(prefix="linerate-run-")
    t0 = time.time()
    try:
        measure(a, res, tmp, out)
    except KeyboardInterrupt:
        log("interrupted: devices stopped, namespaces removed")
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(130)
    except Exception:
        keep = out / "failed-run-logs"
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(tmp, ignore_errors=True)
        log(f"failed: the devices' logs are in {keep}")
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    res["elapsed_s"] = round(time.time() - t0, 1)
    save(out, res)
    log(f"== done in {res['elapsed_s']:.0f} s: {out / 'linerate.json'}")
    import report
    report.write(res, out, ROOT / "docs" if write_docs else out, write_docs)
    return 0


def measure(a, res, tmp, out):
    R = pgen.Runner(a, tmp)
    if "generator" in a.parts:
        generators(a, res, tmp, out, R)
    if "paired" in a.parts:
        paired(a, res, tmp, out)
    if "fec" in a.parts:
        fec(a, res, tmp, out)
    if "veth" in a.parts:
        veth(a, res, tmp, out, R)
    if "memif" in a.parts:
        memif(a, res, tmp, out, R)
    if "senders" in a.parts:
        senders(a, res, tmp, out, R)
    if "sweep" in a.parts:
        sweep(a, res, tmp, R)
    res["trials"] = R.trials
    res["dut_restarts"] = R.restarts


def generators(a, res, tmp, out, R):
    q = a.quick
    log("== the generators alone (one core, as fast as they go)")
    res["generator"] = []
    gen_cases = [RAW64] if q else [RAW64, {"mode": "native", "frame": 106}]
    for c in gen_cases:
        res["generator"].append(tpgen.generator_alone(tmp, c, a.window, duts.Null))
    if not q:
        res["generator"].append(tpgen.generator_alone(tmp, RAW64, a.window, duts.RxOnly))
    with duts.Null(tmp) as d:
        r = R.trial(d, RAW64, duration=max(a.trial, 0.3))
        res["generator"].append({"into": "net_null", "case": RAW64, "generator": "pktgen",
                                 "offered_mpps": r["tx_mpps"], "taken_mpps": r["tx_mpps"]})
    for g in res["generator"]:
        log(f"  {g['generator']:6s} {g['case']['frame']:>4} B {g['case']['mode']:6s} into "
            f"{g['into']}: {g['offered_mpps']:.2f} Mpps offered, {g['taken_mpps']:.2f} taken")
    save(out, res)


def paired(a, res, tmp, out):
    paired_out = "sink" if a.sink_cpu else "null"
    log(f"== appliance and ceiling (testpmd io) in pairs, testpmd generator, out: {paired_out}")
    res["paired"] = []
    for c in a.cases:
        res["paired"].append(tpgen.run_pairs(
            tmp, c, a.pairs, a.windows, a.window, a.margin,
            lambda t: duts.Appliance(t, out=paired_out),
            lambda t: duts.Testpmd(t, out=paired_out)))
        save(out, res)


def fec(a, res, tmp, out):
    """The FEC link pair's two ends against plain forwarding, 1500 B UDP from testpmd txonly
    (a protected IPv4 packet each), both devices in the same wiring; the decoder keeping
    packets by reference (default) and, for comparison, copying them (hold: copy)."""
    paired_out = "sink" if a.sink_cpu else "null"
    case = {"mode": "raw", "frame": 1500}
    log(f"== FEC link pair against plain forwarding, 1500 B, testpmd generator, out: {paired_out}")
    res["fec"] = []
    for hold in ("ref", "copy"):
        r = tpgen.run_pairs(tmp, case, a.pairs, a.windows, a.window, a.margin,
                            lambda t: duts.FecPair(t, out=paired_out, hold=hold),
                            lambda t: duts.FecPair(t, out=paired_out, plain=True))
        r["hold"] = hold
        res["fec"].append(r)
        save(out, res)


def veth(a, res, tmp, out, R):
    log("== the same raw-mode job on veth pairs: appliance (net_af_packet), afpseq "
        "(AF_PACKET rings), kseq (UDP sockets); interlink-pktgen, 64 B raw")
    res["veth"] = {}
    for cls in (duts.ApplianceVeth, duts.KernelPacket, duts.KernelSockets):
        with cls(tmp) as d:
            # Let the namespace settle (IGMP reports, link-local chatter) first.
            time.sleep(0.2)
            res["veth"][d.name] = R.mfr_ndr(d, RAW64)
            mark(res["veth"][d.name], a.margin)
        save(out, res)


def memif(a, res, tmp, out, R):
    log("== over memif with a receiver that checks every frame (interlink-pktgen, 64 B raw)")
    res["memif"] = {}
    for cls in (duts.Appliance, duts.Testpmd):
        with cls(tmp) as d:
            res["memif"][d.name] = R.mfr_ndr(d, RAW64)
            mark(res["memif"][d.name], a.margin)
    save(out, res)


def senders(a, res, tmp, out, R):
    q = a.quick
    log("== senders and receivers (appliance, 64 B raw, maximum forwarding rate)")
    res["senders"], res["receivers"] = [], []
    with duts.Appliance(tmp) as d:
        for key in ("senders", "receivers"):
            cases = [dict(RAW64, **{key: n}) for n in ([8] if q else [1, 4, 8])]
            # Interleaved, so that a busy spell of the machine does not land on one
            # count only; the median of the repetitions is the figure.
            runs = {i: [] for i in range(len(cases))}
            for _ in range(a.reps):
                for i, c in enumerate(cases):
                    runs[i].append(R.trial(d, c))
            for i, c in enumerate(cases):
                rs = sorted(runs[i], key=lambda r: r["rx_mpps"])
                m = dict(rs[len(rs) // 2], mfr_all=[r["rx_mpps"] for r in rs])
                res[key].append(R.mfr_ndr(d, c, search=False, mfr=m))
    save(out, res)


def sweep(a, res, tmp, R):
    """Latency at fractions of each device's maximum rate (found by the memif and veth
    parts; a device whose part did not run is not swept)."""
    log("== offered-load sweep with latency (interlink-pktgen, 64 B raw)")
    res["sweep"] = {}
    fractions = [0.5] if a.quick else [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    found = dict(res.get("memif") or {}, **(res.get("veth") or {}))
    for cls in (duts.Appliance, duts.Testpmd, duts.ApplianceVeth, duts.KernelPacket,
                duts.KernelSockets):
        if cls.name in found:
            with cls(tmp) as d:
                res["sweep"][d.name] = R.sweep(d, RAW64, found[cls.name]["mfr_mpps"], fractions)


def mark(r, margin):
    """A pktgen maximum rate where the device forwarded (nearly) all that was offered says
    how fast pktgen went, not how fast the device goes."""
    r["saturated"] = r["mfr_mpps"] < (1.0 - margin) * r["offered_max_mpps"]


def save(out, res):
    (out / "linerate.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(main())
