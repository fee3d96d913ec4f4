#!/usr/bin/python3
"""Uniform total order benchmarks (issue 5), on the rig of tests/integration/test_control_uto.py:
the appliance (configs/uto.yaml, net_af_packet on veth pairs, lcore on CPU 1), interlink-control
and il-uto-members (CPU 0).

  1. Throughput with 1, 2, 4 and 8 receivers: 2 senders as fast as their credit windows allow.
  2. At 10%, 50% and 90% of the measured maximum (3 receivers): PO and UTO latency and
     UTO minus PO per message (the cost of stability), as percentiles; control messages per
     data message (ACK, HEARTBEAT, JOIN, NAK sent; STABLE, VIEW, CREDIT, UNAVAIL received).

Usage (root): IL_BUILD=build-ctl /usr/bin/python3 bench/uto/uto_bench.py [--out DIR] [--quick]
Writes DIR/uto_bench.json and DIR/uto_bench.png; prints Markdown tables. The figures in
docs/control.md (section 14) came from `--out /tmp/utob`, copied to docs/uto-bench.png and
bench/uto/results-2026-11-22.json."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
os.environ.setdefault("IL_BUILD", str(ROOT / "build"))

from test_control_uto import UtoRig  # noqa: E402

CTL = ["--suspect-ms", "200", "--exclude-ms", "3000", "--window", "256"]


def cpu_s(pid):
    """User + system CPU seconds of a live process."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def run(tmp, receivers, count, rate=0, window=256):
    with UtoRig(tmp, CTL) as rig:
        args = ["--senders", "2", "--receivers", str(receivers), "--count", str(count),
                "--window", str(window), "--need-credit", "--size", "64", "--max-s", "60",
                "--no-check"]
        if rate:
            args += ["--rate", str(rate)]
        c0 = cpu_s(rig.ctl.pid)
        rc, out, res = rig.members(*args, timeout=120)
        if res is not None:
            res["control_cpu_us_per_msg"] = (cpu_s(rig.ctl.pid) - c0) * 1e6 / (2 * count)
    if res is None or rc != 0:
        raise RuntimeError(f"run failed (rc {rc}): {out}")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--quick", action="store_true", help="fewer messages, one repetition")
    a = ap.parse_args()
    out = Path(a.out)
    count = 20000 if a.quick else 60000
    reps = 1 if a.quick else 5
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "host": os.uname().nodename, "load_avg": os.getloadavg(), "throughput": {},
              "latency": {}}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        # Round-robin over the receiver counts, so that whatever else the shared machine
        # runs meanwhile weighs on each count alike.
        runs = {r: [] for r in (1, 2, 4, 8)}
        for i in range(reps):
            for r in runs:
                res = run(tmp, r, count)
                runs[r].append(res)
                print(f"receivers {r} run {i}: {res['throughput_msgs_s']:.0f} msg/s, ctl/data "
                      f"{res['ctl_per_data_msg']:.3f}, control CPU "
                      f"{res['control_cpu_us_per_msg']:.2f} us/msg", flush=True)
        for r, rs in runs.items():
            xs = [x["throughput_msgs_s"] for x in rs]
            report["throughput"][r] = {
                "median_msgs_s": statistics.median(xs), "runs": xs,
                "control_cpu_us_per_msg": statistics.median(x["control_cpu_us_per_msg"] for x in rs),
                "ctl_per_data_msg": statistics.median(x["ctl_per_data_msg"] for x in rs)}
        peak = report["throughput"][2]["median_msgs_s"]
        for frac in (0.1, 0.5, 0.9):
            rate = int(peak * frac)
            res = run(tmp, 3, max(2000, int(rate * 4 / 2)), rate=rate)
            lat = res["latency_us"]
            report["latency"][frac] = {"rate_msgs_s": rate, "po_us": lat["po"],
                                       "uto_us": lat["uto"], "uto_minus_po_us": lat["uto_minus_po"],
                                       "ctl_per_data_msg": res["ctl_per_data_msg"],
                                       "ctl": res["ctl"]}
            print(f"load {frac:.0%} ({rate} msg/s): UTO-PO p10/50/90/99 {lat['uto_minus_po']} us, "
                  f"ctl/data {res['ctl_per_data_msg']:.3f}", flush=True)
    report["load_avg_after"] = os.getloadavg()
    out.mkdir(parents=True, exist_ok=True)
    (out / "uto_bench.json").write_text(json.dumps(report, indent=1))

    base = report["throughput"][1]["median_msgs_s"]
    print("\n| receivers | throughput (msg/s, median of runs) | runs (min-max) | vs 1 receiver "
          "| control msgs per data msg | interlink-control CPU (us/msg) |")
    print("|---|---|---|---|---|---|")
    for r, v in report["throughput"].items():
        print(f"| {r} | {v['median_msgs_s']:.0f} | {min(v['runs']):.0f}-{max(v['runs']):.0f} | "
              f"{v['median_msgs_s'] / base:.2f} | {v['ctl_per_data_msg']:.3f} | "
              f"{v['control_cpu_us_per_msg']:.2f} |")
    print("\n| load | rate (msg/s) | PO p50/p90 (us) | UTO p50/p90 (us) | "
          "UTO-PO p10/p50/p90/p99 (us) | control msgs per data msg |")
    print("|---|---|---|---|---|---|")
    for f, v in report["latency"].items():
        print(f"| {f:.0%} | {v['rate_msgs_s']} | {v['po_us'][1]:.0f}/{v['po_us'][2]:.0f} | "
              f"{v['uto_us'][1]:.0f}/{v['uto_us'][2]:.0f} | "
              f"{'/'.join('%.0f' % x for x in v['uto_minus_po_us'])} | "
              f"{v['ctl_per_data_msg']:.3f} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
        rs = list(report["throughput"])
        ax1.bar([str(r) for r in rs], [report["throughput"][r]["median_msgs_s"] for r in rs])
        ax1.set_xlabel("receivers")
        ax1.set_ylabel("messages/s (UTO-delivered)")
        ax1.set_title("Throughput, 2 senders, W=256")
        for i, p in enumerate((10, 50, 90, 99)):
            ax2.plot([f"{f:.0%}" for f in report["latency"]],
                     [v["uto_minus_po_us"][i] for v in report["latency"].values()],
                     marker="o", label=f"p{p}")
        ax2.set_yscale("log")
        ax2.set_xlabel("offered load")
        ax2.set_ylabel("UTO - PO latency (us)")
        ax2.set_title("Cost of stability, 3 receivers")
        ax2.legend()
        fig.tight_layout()
        fig.savefig(out / "uto_bench.png", dpi=90)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
