#!/usr/bin/python3
"""Uniform total order benchmarks (issue 5), on the rig of tests/integration/test_control_uto.py:
the appliance (configs/uto.yaml, net_af_packet on veth pairs, lcore on CPU 1), interlink-control
and il-uto-members (CPU 0).

  1. Throughput with 1, 2, 4 and 8 receivers: 2 senders as fast as their credit windows allow,
     runs taken round-robin. Beside it, what each message costs where: CPU time per message of
     il-uto-members (every emulated member's kernel send and receive work) and of
     interlink-control, both on CPU 0; frames into the appliance and its per-packet stage
     cycles per message; and the share of CPUs 0-1 that other processes took meanwhile.
  2. At 10%, 50% and 90% of the measured maximum (3 receivers): PO and UTO latency and
     UTO minus PO per message (the cost of stability), as percentiles; control messages per
     data message (ACK, HEARTBEAT, JOIN, NAK sent; STABLE, VIEW, CREDIT, UNAVAIL received).

Usage (root): IL_BUILD=build-scale /usr/bin/python3 bench/uto/uto_bench.py [--out DIR] [--quick]
       [--receivers 1,2,4,8] [--reps N] [--no-latency] [--members "--ack-every 128"]
       [--set KEY=VALUE]... [--auth (each run also with authenticated control traffic)]
Writes DIR/uto_bench.json and DIR/uto_bench.png; prints Markdown tables. The figures in
docs/control.md (section 14) came from two runs with `--out /tmp/utob`, kept as
bench/uto/results-2026-11-22-1140.json and bench/uto/results-2026-11-22.json, pooled with
`--from-json` (which also drew docs/uto-bench.png)."""
import argparse
import json
import os
import random
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

RUN_KEYS = ("throughput_msgs_s", "span_s", "control_cpu_us_per_msg", "control_wakeups_per_msg",
            "emulator_cpu_us_per_msg", "emulator_frames_tx_per_msg", "emulator_syscalls_per_msg",
            "emulator_waits_per_msg", "ctl_per_data_msg", "foreign_cpu_share", "waited_for_quiet_s", "appliance", "max_loop_gap_ms")
CTL = ["--suspect-ms", "200", "--exclude-ms", "3000", "--window", "256"]


def cpu_s(pid):
    """CPU seconds of a live process, all its threads (schedstat: ns, not clock ticks)."""
    return sum(int((t / "schedstat").read_text().split()[0])
               for t in Path(f"/proc/{pid}/task").iterdir()) / 1e9


def wakeups(pid):
    """Voluntary context switches of a live process, all its threads: how often it slept
    and was woken (interlink-control sleeps in io_uring until the data plane's eventfd)."""
    n = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        for line in (t / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                n += int(line.split()[1])
    return n


def busy_s(cpus=(0, 1)):
    """Time CPUs 0 and 1 were busy (anything but idle and iowait), in seconds."""
    t = 0
    for line in Path("/proc/stat").read_text().splitlines():
        w = line.split()
        if w[0] in {f"cpu{c}" for c in cpus}:
            t += sum(int(x) for i, x in enumerate(w[1:9]) if i not in (3, 4))
    return t / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_wait_s, share=0.15):
    """Before a run, wait (up to max_wait_s) for a second in which CPUs 0-1 were busy less
    than `share` of the time: the shared machine's other benchmarks and tests busy-poll
    them too. Returns the seconds waited; the run goes ahead either way (foreign_cpu_share
    in its report says what it shared the CPUs with)."""
    t0 = time.monotonic()
    while True:
        b0 = busy_s()
        time.sleep(1.0)
        if (busy_s() - b0) / 2 < share or time.monotonic() - t0 > max_wait_s:
            return time.monotonic() - t0


QUIET_WAIT_S = 0      # per run
QUIET_BUDGET_S = 300  # in all, so that a busy machine does not stretch the benchmark


APP_SETS = []
MEMBER_ARGS = []


def auth_keys(tmp):
    """A key file for the runs with authenticated control traffic (mode 0600)."""
    p = tmp / "auth.keys"
    p.write_text("1 " + os.urandom(32).hex() + "\n")
    os.chmod(p, 0o600)
    return p


def run(tmp, receivers, count, rate=0, window=256, auth=False):
    """One run of 2 senders x count messages. Besides il-uto-members' report: CPU per
    message of interlink-control and of the emulator (both on CPU 0), the appliance's
    frames in and stage cycles per message, and how much of CPUs 0-1 other (foreign)
    processes took meanwhile."""
    global QUIET_BUDGET_S
    waited = 0.0
    if QUIET_WAIT_S and QUIET_BUDGET_S > 0:
        waited = wait_quiet(min(QUIET_WAIT_S, QUIET_BUDGET_S))
        QUIET_BUDGET_S -= waited
    sets, extra = list(APP_SETS), []
    if auth:
        # Every ACK, JOIN, HEARTBEAT and NAK signed by il-uto-members and checked by the
        # appliance, every STABLE, VIEW, CREDIT and UNAVAIL signed by the appliance and
        # checked by il-uto-members (docs/operations.md, "Authenticated control traffic").
        keys = auth_keys(tmp)
        sets += [f"stages.ctrl.auth.keys={keys}", f"stages.nak.auth.keys={keys}"]
        extra = ["--auth-keys", str(keys)]
    with UtoRig(tmp, CTL, app_sets=sets) as rig:
        args = ["--senders", "2", "--receivers", str(receivers), "--count", str(count),
                "--window", str(window), "--need-credit", "--size", "64", "--max-s", "60",
                "--no-check", *MEMBER_ARGS, *extra]
        if rate:
            args += ["--rate", str(rate)]
        c0, w0, a0 = cpu_s(rig.ctl.pid), wakeups(rig.ctl.pid), cpu_s(rig.app.pid)
        b0, t0 = busy_s(), time.monotonic()
        p = rig.members(*args, wait=False)
        m = 0.0
        while p.poll() is None:  # the emulator's CPU time, read while it lives
            try:
                m = cpu_s(p.pid)
            except OSError:
                pass
            time.sleep(0.05)
        c1, w1, a1 = cpu_s(rig.ctl.pid), wakeups(rig.ctl.pid), cpu_s(rig.app.pid)
        b1, t1 = busy_s(), time.monotonic()
        rc, out, res = rig.finish(p, 120)
        rig.kill_appliance()
        app = rig.summary()
    if res is None or rc != 0:
        raise RuntimeError(f"run failed (rc {rc}): {out}")
    msgs = 2 * count
    res["control_cpu_us_per_msg"] = (c1 - c0) * 1e6 / msgs
    res["control_wakeups_per_msg"] = (w1 - w0) / msgs
    e = res["emulator"]
    res["emulator_cpu_us_per_msg"] = (e["cpu_user_s"] + e["cpu_sys_s"]) * 1e6 / msgs
    res["emulator_frames_tx_per_msg"] = e["frames_tx"] / msgs
    res["emulator_syscalls_per_msg"] = (e["tx_calls"] + e["rx_calls"] + e["waits"]) / msgs
    # Sleeps with nothing received and nothing to send: a sender short of credit waits
    # here, so these stay rare while CPU 0, not the credit round trip, sets the rate.
    res["emulator_waits_per_msg"] = e["waits"] / msgs
    # What else ran on the two CPUs meanwhile (other developers' benchmarks and tests on
    # the shared machine): busy time not spent in the rig's three processes.
    res["waited_for_quiet_s"] = waited
    res["foreign_cpu_share"] = max(0.0, (b1 - b0) - (c1 - c0) - (a1 - a0) - m) / (2 * (t1 - t0))
    if app:
        st = app["stages"]
        res["appliance"] = {
            "drop_bad_mac": st["ctrl"].get("drop_bad_mac", 0),
            "drop_replay": st["ctrl"].get("drop_replay", 0),
            "frames_in_per_msg": app["ports"]["in"]["rx"] / msgs,
            "acks_up_per_msg": st["ctrl"]["up_ack"] / msgs,
            "max_poll_gap_us": st["ctrl"]["max_poll_gap_us"]}
        if "cycles" in st["classify"]:  # not in a build without stage_cycles
            # classify and seq run per received burst only; ctrl's cycles include its
            # poll of the channel and timers on every loop, idle or not.
            res["appliance"]["classify_seq_cycles_per_msg"] = (
                st["classify"]["cycles"] + st["seq"]["cycles"]) / msgs
            res["appliance"]["ctrl_cycles_per_msg"] = st["ctrl"]["cycles"] / msgs
    return res


def auth_table(runs, auth_runs):
    """Authenticated control traffic off and on, side by side (medians); prints it."""
    out = {}
    print("\n| receivers | auth | msg/s (median) | runs | appliance ctrl cycles/msg | "
          "emulator CPU us/msg | drop_bad_mac, drop_replay |\n|---|---|---|---|---|---|---|")
    for r in runs:
        for name, rs in (("off", runs[r]), ("on", auth_runs[r])):
            med = lambda f: statistics.median(f(x) for x in rs)  # noqa: E731
            row = {"median_msgs_s": med(lambda x: x["throughput_msgs_s"]),
                   "runs": [x["throughput_msgs_s"] for x in rs],
                   "ctrl_cycles_per_msg": med(
                       lambda x: x["appliance"].get("ctrl_cycles_per_msg", 0)),
                   "emulator_cpu_us_per_msg": med(lambda x: x["emulator_cpu_us_per_msg"]),
                   "drops": [sum(x["appliance"][k] for x in rs)
                             for k in ("drop_bad_mac", "drop_replay")]}
            out.setdefault(str(r), {})[name] = row
            print(f"| {r} | {name} | {row['median_msgs_s']:.0f} | "
                  f"{', '.join(f'{v:.0f}' for v in row['runs'])} | "
                  f"{row['ctrl_cycles_per_msg']:.0f} | {row['emulator_cpu_us_per_msg']:.2f} | "
                  f"{row['drops'][0]}, {row['drops'][1]} |")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--quick", action="store_true", help="fewer messages, one repetition")
    ap.add_argument("--from-json", metavar="PATH", nargs="+",
                    help="only print the tables and draw the plot of earlier runs' JSON; "
                         "several: their throughput runs pooled, the last one's latencies")
    ap.add_argument("--seed", type=int, default=int(time.time()),
                    help="of the order of receiver counts in each round")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="appliance config override, e.g. stages.ctrl.wake_interval_us=0")
    ap.add_argument("--quiet-wait", type=float, default=60, metavar="S",
                    help="before each run, wait up to S s (300 s in all) for CPUs 0-1 to be "
                         "idle (0: do not)")
    ap.add_argument("--members", default="", metavar="ARGS",
                    help="more il-uto-members options for every run, e.g. '--ack-every 128' "
                         "(later ones win)")
    ap.add_argument("--receivers", default="1,2,4,8", metavar="LIST",
                    help="receiver counts of the throughput runs")
    ap.add_argument("--reps", type=int, default=0, help="throughput rounds (default 9, 1 quick)")
    ap.add_argument("--no-latency", action="store_true", help="throughput runs only")
    ap.add_argument("--auth", action="store_true",
                    help="each throughput run also with authenticated control traffic (MACs "
                         "signed by the members, checked by the appliance), right after it; "
                         "a side-by-side table of both")
    a = ap.parse_args()
    global QUIET_WAIT_S, APP_SETS, MEMBER_ARGS
    APP_SETS = list(a.set)
    MEMBER_ARGS = a.members.split()
    QUIET_WAIT_S = a.quiet_wait
    if a.from_json:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        reports = [json.loads(Path(f).read_text()) for f in a.from_json]
        merged = dict(reports[-1], throughput={})
        for rep in reports:
            for r, v in rep["throughput"].items():
                merged["throughput"].setdefault(str(r), {"per_run": []})["per_run"] += v["per_run"]
        render(merged, Path(a.out))
        return
    out = Path(a.out)
    count = 30000 if a.quick else 150000
    reps = a.reps or (1 if a.quick else 9)
    counts = [int(x) for x in a.receivers.split(",")]
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "host": os.uname().nodename, "load_avg": os.getloadavg(), "throughput": {},
              "latency": {}}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        # Round-robin over the receiver counts, so that whatever else the shared machine
        # runs meanwhile weighs on each count alike; in a new random order each round, so
        # that no count always follows the same one (a rig's teardown may weigh on the next).
        runs = {r: [] for r in counts}
        auth_runs = {r: [] for r in counts}
        rng = random.Random(a.seed)
        report["seed"], report["order"], report["sets"] = a.seed, [], APP_SETS
        report["members"] = MEMBER_ARGS
        for i in range(reps):
            order = list(runs)
            rng.shuffle(order)
            report["order"].append(order)
            for r in order:
                if a.auth:
                    res = run(tmp, r, count, auth=True)
                    auth_runs[r].append(res)
                    print(f"receivers {r} run {i} auth on: {res['throughput_msgs_s']:.0f} "
                          f"msg/s, CPU us/msg: control {res['control_cpu_us_per_msg']:.2f} "
                          f"emulator {res['emulator_cpu_us_per_msg']:.2f}, appliance "
                          f"{res['appliance']}", flush=True)
                res = run(tmp, r, count)
                runs[r].append(res)
                print(f"receivers {r} run {i}: {res['throughput_msgs_s']:.0f} msg/s, ctl/data "
                      f"{res['ctl_per_data_msg']:.3f}, CPU us/msg: control "
                      f"{res['control_cpu_us_per_msg']:.2f} ({res['control_wakeups_per_msg']:.3f} wake-ups/msg) emulator "
                      f"{res['emulator_cpu_us_per_msg']:.2f}, appliance frames in/msg "
                      f"{res['appliance']['frames_in_per_msg']:.3f}, foreign CPU "
                      f"{res['foreign_cpu_share']:.0%}", flush=True)
        for r, rs in runs.items():
            xs = [x["throughput_msgs_s"] for x in rs]
            med = lambda f: statistics.median(f(x) for x in rs)  # noqa: E731
            report["throughput"][r] = {
                "median_msgs_s": statistics.median(xs), "runs": xs,
                "control_cpu_us_per_msg": med(lambda x: x["control_cpu_us_per_msg"]),
                "control_wakeups_per_msg": med(lambda x: x["control_wakeups_per_msg"]),
                "emulator_cpu_us_per_msg": med(lambda x: x["emulator_cpu_us_per_msg"]),
                "emulator_frames_tx_per_msg": med(lambda x: x["emulator_frames_tx_per_msg"]),
                "emulator_syscalls_per_msg": med(lambda x: x["emulator_syscalls_per_msg"]),
                "ctl_per_data_msg": med(lambda x: x["ctl_per_data_msg"]),
                "foreign_cpu_share": [x["foreign_cpu_share"] for x in rs],
                "appliance": {k: med(lambda x: x["appliance"][k]) for k in rs[0]["appliance"]},
                "per_run": [{k: x[k] for k in RUN_KEYS} for x in rs]}
        if a.auth:
            report["auth"] = auth_table(runs, auth_runs)
        peak = report["throughput"][counts[min(1, len(counts) - 1)]]["median_msgs_s"]
        for frac in () if a.no_latency else (0.1, 0.5, 0.9):
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
    render(report, out)


QUIET = 0.10  # a run is "quiet" when other processes took less than this share of CPUs 0-1


def summarize(rs):
    """Medians over a list of per-run records (bench RUN_KEYS)."""
    med = lambda f: statistics.median(f(x) for x in rs)  # noqa: E731
    return {"n": len(rs), "median_msgs_s": med(lambda x: x["throughput_msgs_s"]),
            "min_msgs_s": min(x["throughput_msgs_s"] for x in rs),
            "max_msgs_s": max(x["throughput_msgs_s"] for x in rs),
            "emulator": med(lambda x: x["emulator_cpu_us_per_msg"]),
            "control": med(lambda x: x["control_cpu_us_per_msg"]),
            "wakeups": med(lambda x: x["control_wakeups_per_msg"]),
            "frames_tx": med(lambda x: x["emulator_frames_tx_per_msg"]),
            "frames_in": med(lambda x: x["appliance"]["frames_in_per_msg"]),
            "cycles": (med(lambda x: x["appliance"]["classify_seq_cycles_per_msg"])
                       if all("classify_seq_cycles_per_msg" in x["appliance"] for x in rs)
                       else None),
            "ctl": med(lambda x: x["ctl_per_data_msg"]),
            "waits": (med(lambda x: x["emulator_waits_per_msg"])
                      if all("emulator_waits_per_msg" in x for x in rs) else None)}


def table(title, sums):
    base = sums[1]["median_msgs_s"] if 1 in sums else None
    print(f"\n{title}\n")
    print("| receivers | runs | throughput, median (msg/s) | min-max | vs 1 receiver "
          "| CPU 0 per msg (us): emulator + control = sum | 1e6 / sum | emulator frames sent "
          "per msg | appliance frames in per msg | appliance classify+seq cycles per msg "
          "| control msgs per data msg | interlink-control wake-ups per msg "
          "| emulator idle waits per msg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r, v in sums.items():
        cpu0 = v["emulator"] + v["control"]
        rel = f"{v['median_msgs_s'] / base:.2f}" if base else "-"
        print(f"| {r} | {v['n']} | {v['median_msgs_s']:.0f} | {v['min_msgs_s']:.0f}-"
              f"{v['max_msgs_s']:.0f} | {rel} | {v['emulator']:.2f} + {v['control']:.2f} = "
              f"{cpu0:.2f} | {1e6 / cpu0:.0f} | {v['frames_tx']:.3f} | {v['frames_in']:.3f} | "
              f"{'-' if v['cycles'] is None else '%.0f' % v['cycles']} | {v['ctl']:.3f} | "
              f"{v['wakeups']:.3f} | "
              f"{'-' if v['waits'] is None else '%.4f' % v['waits']} |")


def render(report, out):
    """Markdown tables and the plot, from a report (also one read back from its JSON)."""
    th = {int(r): v for r, v in report["throughput"].items()}
    lat = {float(f): v for f, v in report["latency"].items()}
    all_runs = {r: summarize(v["per_run"]) for r, v in th.items()}
    quiet = {r: summarize(q) for r, v in th.items()
             if (q := [x for x in v["per_run"] if x["foreign_cpu_share"] < QUIET])}
    table("All runs:", all_runs)
    table(f"Quiet runs only (other processes took < {QUIET:.0%} of CPUs 0-1):", quiet)
    print("\nForeign CPU share per run (by receiver count): " +
          "; ".join(f"{r}: " + " ".join(f"{x['foreign_cpu_share']:.0%}" for x in v["per_run"])
                    for r, v in th.items()))
    print("\n| load | rate (msg/s) | PO p50/p90 (us) | UTO p50/p90 (us) | "
          "UTO-PO p10/p50/p90/p99 (us) | control msgs per data msg |")
    print("|---|---|---|---|---|---|")
    for f, v in lat.items():
        print(f"| {f:.0%} | {v['rate_msgs_s']} | {v['po_us'][1]:.0f}/{v['po_us'][2]:.0f} | "
              f"{v['uto_us'][1]:.0f}/{v['uto_us'][2]:.0f} | "
              f"{'/'.join('%.0f' % x for x in v['uto_minus_po_us'])} | "
              f"{v['ctl_per_data_msg']:.3f} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (ax1, ax3, ax2) = plt.subplots(1, 3, figsize=(15, 4))
    rs = list(th)
    xs = range(len(rs))
    for k, (label, sums) in enumerate((("all runs", all_runs), (f"quiet runs", quiet))):
        have = [r for r in rs if r in sums]
        med = [sums[r]["median_msgs_s"] for r in have]
        ax1.bar([rs.index(r) + (k - 0.5) * 0.38 for r in have], med, width=0.38, label=label,
                yerr=[[m - sums[r]["min_msgs_s"] for m, r in zip(med, have)],
                      [sums[r]["max_msgs_s"] - m for m, r in zip(med, have)]], capsize=3)
        if 1 in sums:
            ax1.axhline(0.9 * sums[1]["median_msgs_s"], color=f"C{k}", ls="--", lw=1)
    ax1.set_xticks(list(xs), [str(r) for r in rs])
    ax1.set_xlabel("receivers")
    ax1.set_ylabel("messages/s (UTO-delivered)")
    ax1.set_title("Throughput, 2 senders, W=256\n(median, min-max; dashed: 90% of 1 receiver)",
                  fontsize=10)
    ax1.legend(loc="lower left", fontsize=8)
    src = quiet if len(quiet) == len(rs) else all_runs
    em = [src[r]["emulator"] for r in rs]
    ct = [src[r]["control"] for r in rs]
    ax3.bar([str(r) for r in rs], em, label="il-uto-members (all emulated members)")
    ax3.bar([str(r) for r in rs], ct, bottom=em, label="interlink-control")
    ax3.set_xlabel("receivers")
    ax3.set_ylabel("CPU 0 time per message (us)")
    ax3.set_title("The saturated CPU 0, per message (median%s)" %
                  (", quiet runs" if src is quiet else ""), fontsize=10)
    ax3.legend(loc="lower left", fontsize=8)
    if lat:
        for i, p in enumerate((10, 50, 90, 99)):
            ax2.plot([f"{f:.0%}" for f in lat], [v["uto_minus_po_us"][i] for v in lat.values()],
                     marker="o", label=f"p{p}")
        ax2.set_yscale("log")
        ax2.legend(fontsize=8)
    else:
        ax2.text(0.5, 0.5, "not measured (--no-latency)", ha="center", va="center",
                 transform=ax2.transAxes)
    ax2.set_xlabel("offered load")
    ax2.set_ylabel("UTO - PO latency (us)")
    ax2.set_title("Cost of stability, 3 receivers", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "uto_bench.png", dpi=90)


if __name__ == "__main__":
    main()
