"""FEC link-pair rig and the TCP benchmark (no tests here: test_fec_linkpair.py has them).

Hosts A and B in network namespaces (netns.HostPair), the appliance between them running
configs/linkpair.yaml: A -> fec_enc_ab -> impair_ab (loss, 50 ms, 1 Gbit/s) -> fec_dec_ab -> B
and the mirror image, one lcore. FEC off is the same wiring with the four FEC stages set
`enabled: false` (they pass everything).

Run as a program, this file is the TCP benchmark behind scripts/bench-fec-tcp.sh:
  test_fec_lib.py tcp --seconds 20 --loss 0,0.0001,0.001,0.01,0.02,0.05,0.1 --out DIR
  test_fec_lib.py plot DIR/results.json --png docs/fec-tcp.png
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from netns import HostPair, iperf3_gbps, iperf3_retransmits  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = Path(os.environ.get("IL_BUILD", ROOT / "build")).resolve()
INTERLINK = BUILD / "dataplane" / "interlink"
CONFIG = ROOT / "configs" / "linkpair.yaml"
APP_CPU, HOST_CPU = "1", "0"
FEC_STAGES = ("fec_enc_ab", "fec_dec_ab", "fec_enc_ba", "fec_dec_ba")


def linkpair_sets(loss=0.0, fec=True, extra=()):
    """--set overrides for configs/linkpair.yaml: Bernoulli loss p both ways, FEC on/off."""
    sets = []
    for d in ("ab", "ba"):
        if loss > 0:
            sets += [f"stages.impair_{d}.loss=bernoulli", f"stages.impair_{d}.p={loss}"]
    if not fec:
        sets += [f"stages.{s}.enabled=false" for s in FEC_STAGES]
    return sets + list(extra)


class Appliance:
    """interlink on the two root-side veth ends of a HostPair; stop() returns its summary."""

    def __init__(self, hp, tmp, sets=(), config=CONFIG, cpu=APP_CPU):
        self.hp, self.tmp = hp, Path(tmp)
        self.prefix = f"lp{uuid.uuid4().hex[:8]}"
        self.json = self.tmp / f"{self.prefix}.json"
        self.log = self.tmp / f"{self.prefix}.log"
        dev_a, dev_b = hp.devices()
        # Two lcores on one CPU: the main lcore sleeps (status, telemetry), the worker polls.
        self.cmd = ["taskset", "-c", cpu, str(INTERLINK), "-c", str(config), "-q",
                    "--json", str(self.json),
                    "--set", f"name={self.prefix}",
                    "--set", f"ports.lan_a.device={dev_a}",
                    "--set", f"ports.lan_b.device={dev_b}",
                    "--set", 'eal=[--no-huge, -m, "1024", --lcores, "0@' + cpu + ",1@" + cpu +
                    '", --log-level, "lib.eal:error"]']
        for s in sets:
            self.cmd += ["--set", s]
        self.p = None

    def start(self):
        self.p = subprocess.Popen(self.cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        # Ports are up once the worker runs; a UDP echo through it (by the caller) proves it.
        time.sleep(0.5)
        if self.p.poll() is not None:
            raise AssertionError("the appliance exited: " + self.log.read_text())
        return self

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def stop(self):
        if self.p is not None and self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
        if self.json.exists():
            return json.loads(self.json.read_text())
        return None

    def output(self):
        return self.log.read_text() if self.log.exists() else ""

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


def tcp_trial(tmp, loss, fec, seconds, parallel=8, omit=2, sets=(), log=print):
    """One iperf3 run through a fresh rig; returns a result dict."""
    with HostPair() as hp:
        app = Appliance(hp, tmp, linkpair_sets(loss, fec, sets))
        try:
            app.start()
            hp.echo(count=2)
            rep = hp.iperf3(seconds=seconds, parallel=parallel, omit=omit, cpu=HOST_CPU)
        finally:
            summ = app.stop()
            out = app.output()
    if summ is None:
        raise AssertionError("no summary from the appliance: " + out)
    st = summ["stages"]
    res = {"loss": loss, "fec": fec, "seconds": seconds, "parallel": parallel,
           "gbps": iperf3_gbps(rep), "retransmits": iperf3_retransmits(rep),
           "lost_ab": st["impair_ab"]["lost"], "lost_ba": st["impair_ba"]["lost"],
           "queue_full": st["impair_ab"]["queue_full"] + st["impair_ba"]["queue_full"],
           "released_ab": st["impair_ab"]["released"]}
    for s in ("fec_enc_ab", "fec_dec_ab"):
        res[s] = {k: v for k, v in st[s].items() if isinstance(v, int) and v
                  and not k.startswith("lat_")}
    dec = st["fec_dec_ab"]
    res["recovered_ab"] = dec.get("recovered", 0)
    res["unrecoverable_ab"] = dec.get("unrecoverable", 0)
    res["lat_pkts_mean"] = dec["lat_pkts_sum"] / dec["recovered"] if dec.get("recovered") else 0
    res["lat_us_mean"] = dec["lat_us_sum"] / dec["recovered"] if dec.get("recovered") else 0
    log(f"  loss {loss * 100:7.3f}%  FEC {'on ' if fec else 'off'}  {res['gbps'] * 1000:8.1f} Mbit/s"
        f"  retx {res['retransmits']:>6}  lost a->b {res['lost_ab']:>6}  recovered "
        f"{res['recovered_ab']:>6}  unrecoverable {res['unrecoverable_ab']:>4}  queue_full "
        f"{res['queue_full']}")
    return res


# ---- the benchmark ------------------------------------------------------------------
def cmd_tcp(a):
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    losses = [float(x) for x in a.loss.split(",")]
    results = []
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "seconds": a.seconds, "parallel": a.parallel, "omit": a.omit,
            "command": " ".join(sys.argv), "kernel": os.uname().release,
            "cc": "reno", "config": "configs/linkpair.yaml (r=8, c=3, I=(1,11,19))"}
    path = out / "results.json"
    for rep in range(a.repeat):
        for loss in losses:
            for fec in (True, False):
                if loss == 0 and not fec and a.skip_lossless_off:
                    continue
                r = tcp_trial(out, loss, fec, a.seconds, a.parallel, a.omit)
                r["repeat"] = rep
                results.append(r)
                path.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"results: {path}")


def table(results):
    """Median per (loss, fec) of the Gbit/s; returns rows and the markdown table."""
    import statistics
    by = {}
    for r in results:
        by.setdefault((r["loss"], r["fec"]), []).append(r)
    losses = sorted({k[0] for k in by})
    lossless = by.get((0.0, False))
    base = statistics.median(x["gbps"] for x in lossless) if lossless else None
    rows = []
    md = ["| loss | FEC off (Mbit/s) | FEC on (Mbit/s) | on / off | on / lossless | recovered "
          "(a->b) | unrecoverable | mean recovery latency |",
          "|---|---|---|---|---|---|---|---|"]
    for p in losses:
        on = by.get((p, True), [])
        off = by.get((p, False), [])
        g_on = statistics.median(x["gbps"] for x in on) if on else None
        g_off = statistics.median(x["gbps"] for x in off) if off else None
        rec = sum(x["recovered_ab"] for x in on)
        unr = sum(x["unrecoverable_ab"] for x in on)
        lat_p = statistics.mean(x["lat_pkts_mean"] for x in on) if on else 0
        lat_u = statistics.mean(x["lat_us_mean"] for x in on) if on else 0
        rows.append({"loss": p, "on": g_on, "off": g_off})
        f = (lambda g: f"{g * 1000:.0f}" if g is not None else "-")
        ratio = f"{g_on / g_off:.1f}x" if g_on and g_off else "-"
        rel = f"{g_on / base * 100:.0f}%" if g_on and base else "-"
        md.append(f"| {p * 100:g}% | {f(g_off)} | {f(g_on)} | {ratio} | {rel} | {rec} | {unr} | "
                  f"{lat_p:.1f} pkts, {lat_u:.0f} us |" if on and rec else
                  f"| {p * 100:g}% | {f(g_off)} | {f(g_on)} | {ratio} | {rel} | {rec} | {unr} | - |")
    return rows, base, "\n".join(md)


def cmd_plot(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = json.loads(Path(a.results).read_text())
    rows, base, md = table(d["results"])
    print(md)
    xs = [r["loss"] * 100 for r in rows if r["loss"] > 0]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    on = [(r["loss"] * 100, r["on"] * 1000) for r in rows if r["loss"] > 0 and r["on"]]
    off = [(r["loss"] * 100, r["off"] * 1000) for r in rows if r["loss"] > 0 and r["off"]]
    if on:
        ax.plot(*zip(*on), "o-", label="TCP + Maelstrom FEC (r=8, c=3)")
    if off:
        ax.plot(*zip(*off), "s--", label="TCP, no FEC")
    if base:
        ax.axhline(base * 1000, color="grey", ls=":", label=f"lossless ({base * 1000:.0f} Mbit/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:g}" for x in xs])
    ax.set_xlabel("loss rate (%), each direction")
    ax.set_ylabel("throughput (Mbit/s)")
    m = d["meta"]
    ax.set_title(f"8 TCP flows (Reno), 1 Gbit/s, 50 ms one way, {m['seconds']} s per point")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot: {a.png}")
    if a.md:
        Path(a.md).write_text(md + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tcp")
    t.add_argument("--seconds", type=int, default=20)
    t.add_argument("--parallel", type=int, default=8)
    t.add_argument("--omit", type=int, default=2, help="iperf3 -O: seconds of slow start left out")
    t.add_argument("--loss", default="0,0.0001,0.001,0.01,0.02,0.05,0.1")
    t.add_argument("--repeat", type=int, default=1)
    t.add_argument("--skip-lossless-off", action="store_true")
    t.add_argument("--out", required=True)
    p = sub.add_parser("plot")
    p.add_argument("results")
    p.add_argument("--png", required=True)
    p.add_argument("--md")
    a = ap.parse_args()
    {"tcp": cmd_tcp, "plot": cmd_plot}[a.cmd](a)


if __name__ == "__main__":
    main()
