"""FEC link-pair rig and the TCP benchmark (no tests here: test_fec_linkpair.py has them).

Hosts A and B in network namespaces (netns.HostPair), the appliance between them running
configs/linkpair.yaml: A -> fec_enc_ab -> impair_ab (loss, 50 ms, 1 Gbit/s) -> fec_dec_ab -> B
and the mirror image, one lcore. FEC off is the same wiring with the four FEC stages set
`enabled: false` (they pass everything).

Run as a program, this file is the TCP benchmark behind scripts/bench-fec-tcp.sh:
  test_fec_lib.py tcp --seconds 20 --loss 0,0.0001,0.001,0.01,0.02,0.05,0.1 --out DIR
  test_fec_lib.py plot DIR/results.json --png docs/fec-tcp.png
  test_fec_lib.py fwd --frame 1500 --seconds 5 --reps 3    (link pair vs plain forwarding)
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

    def __init__(self, hp, tmp, sets=(), config=CONFIG, cpu=APP_CPU, quiet=True):
        self.hp, self.tmp = hp, Path(tmp)
        self.prefix = f"lp{uuid.uuid4().hex[:8]}"
        self.json = self.tmp / f"{self.prefix}.json"
        self.log = self.tmp / f"{self.prefix}.log"
        dev_a, dev_b = hp.devices()
        # Two lcores on one CPU: the main lcore sleeps (status, telemetry), the worker polls.
        self.cmd = ["taskset", "-c", cpu, str(INTERLINK), "-c", str(config),
                    *(["-q"] if quiet else []), "--json", str(self.json),
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


def tcp_trial(tmp, loss, fec, seconds, parallel=8, omit=2, sets=(), log=print, tries=2):
    """One iperf3 run through a fresh rig; returns a result dict. A rig whose appliance
    forwards nothing at all (on this shared machine an af_packet port has been seen to come
    up dead) is rebuilt once."""
    for t in range(tries):
        try:
            return _tcp_trial(tmp, loss, fec, seconds, parallel, omit, sets, log)
        except RigDead as e:
            log(f"  (rig forwarded nothing, {'retrying' if t + 1 < tries else 'giving up'}: {e})")
            err = e
    raise AssertionError(str(err))


class RigDead(Exception):
    pass


def _tcp_trial(tmp, loss, fec, seconds, parallel, omit, sets, log):
    with HostPair() as hp:
        app = Appliance(hp, tmp, linkpair_sets(loss, fec, sets))
        try:
            app.start()
            try:
                hp.echo(count=2)
            except AssertionError as e:
                raise RigDead(f"{e}; appliance log: {app.output()[-500:]}")
            rep = hp.iperf3(seconds=seconds, parallel=parallel, omit=omit, cpu=HOST_CPU)
            # What the hosts' veths delivered to the appliance's sockets, and the
            # sender's TCP view: timeouts say whether the link or a stall hurt it.
            offered = {s: int(Path(f"/sys/class/net/{i}/statistics/rx_packets").read_text())
                       for s, i in (("a", hp.if_a), ("b", hp.if_b))}
            nst = {}
            for line in hp.run("A", "nstat", "-az", check=False).stdout.splitlines():
                f = line.split()
                if len(f) >= 2 and f[0] in ("TcpRetransSegs", "TcpExtTCPTimeouts",
                                            "TcpExtTCPSpuriousRTOs", "TcpExtTCPLossProbes"):
                    nst[f[0]] = int(f[1])
        finally:
            summ = app.stop()
            out = app.output()
    if summ is None:
        raise AssertionError("no summary from the appliance: " + out)
    st = summ["stages"]
    res = {"loss": loss, "fec": fec, "seconds": seconds, "parallel": parallel,
           "loadavg": os.getloadavg()[0],
           "gbps": iperf3_gbps(rep), "retransmits": iperf3_retransmits(rep),
           "lost_ab": st["impair_ab"]["lost"], "lost_ba": st["impair_ba"]["lost"],
           # Router-buffer overflow (congestion) and line overflow, both ways.
           "queue_full": sum(st[x]["queue_full"] for x in ("rate_ab", "rate_ba", "impair_ab",
                                                           "impair_ba")),
           "released_ab": st["impair_ab"]["released"]}
    # Frames the af_packet rings dropped (the appliance lost its core for too long).
    res["ring_drops"] = sum(max(0, offered[x] - summ["ports"][p]["rx"])
                            for x, p in (("a", "lan_a"), ("b", "lan_b")))
    res["tcp"] = nst
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
        f"{res['queue_full']}  ring_drops {res['ring_drops']}  rto {nst.get('TcpExtTCPTimeouts')}"
        f"  load {res['loadavg']:.1f}", flush=True)
    return res


# ---- the benchmark ------------------------------------------------------------------
def cmd_tcp(a):
    # A benchmark stopped with SIGTERM still tears its rig down (the with-blocks run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    losses = [float(x) for x in a.loss.split(",")]
    results = []
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "seconds": a.seconds, "parallel": a.parallel, "omit": a.omit,
            "command": " ".join(sys.argv), "kernel": os.uname().release,
            "cc": "reno", "config": "configs/linkpair.yaml (r=8, c=3, I=(1,11,19))"}
    path = out / "results.json"
    first = 0
    if a.append and path.exists():
        # More repeats of the same points: keep the earlier ones and their date.
        old = json.loads(path.read_text())
        results, meta = old["results"], old["meta"]
        meta["command"] += " ; " + " ".join(sys.argv)
        first = 1 + max(r.get("repeat", 0) for r in results)
    for rep in range(first, first + a.repeat):
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
    """Median (and range) per (loss, fec) of the Gbit/s; returns rows, the lossless median
    (FEC off, loss 0) and the markdown table."""
    import statistics
    by = {}
    for r in results:
        by.setdefault((r["loss"], r["fec"]), []).append(r)
    losses = sorted({k[0] for k in by})
    lossless = by.get((0.0, False))
    base = statistics.median(x["gbps"] for x in lossless) if lossless else None
    rows = []
    md = ["| loss | FEC off, Mbit/s | FEC on, Mbit/s | on / off | on / lossless | lost / recovered "
          "/ unrecoverable (a->b, all runs) | mean recovery latency | ring drops on / off |",
          "|---|---|---|---|---|---|---|---|"]

    def cell(rs):
        if not rs:
            return "-", None
        g = sorted(x["gbps"] * 1000 for x in rs)
        med = statistics.median(g)
        return (f"**{med:.0f}** ({g[0]:.0f}–{g[-1]:.0f})" if len(g) > 1 else f"**{med:.0f}**"), med

    for p in losses:
        on, off = by.get((p, True), []), by.get((p, False), [])
        c_on, g_on = cell(on)
        c_off, g_off = cell(off)
        rows.append({"loss": p, "on": g_on / 1000 if g_on else None,
                     "off": g_off / 1000 if g_off else None,
                     "on_all": [x["gbps"] for x in on], "off_all": [x["gbps"] for x in off]})
        ratio = f"{g_on / g_off:.1f}x" if g_on and g_off else "-"
        rel = f"{g_on / (base * 1000) * 100:.0f}%" if g_on and base else "-"
        lost = sum(x["lost_ab"] for x in on)
        rec = sum(x["recovered_ab"] for x in on)
        unr = sum(x["unrecoverable_ab"] for x in on)
        recs = [x for x in on if x["recovered_ab"]]
        lat = (f"{statistics.mean(x['lat_pkts_mean'] for x in recs):.1f} pkts, "
               f"{statistics.mean(x['lat_us_mean'] for x in recs):.0f} us") if recs else "-"
        rd = (f"{statistics.median(x.get('ring_drops', 0) for x in on):.0f} / "
              f"{statistics.median(x.get('ring_drops', 0) for x in off):.0f}") if on and off else "-"
        md.append(f"| {p * 100:g}% | {c_off} | {c_on} | {ratio} | {rel} | {lost} / {rec} / {unr} "
                  f"| {lat} | {rd} |")
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
    for key, fmt, label in (("on", "o-", "TCP + Maelstrom FEC (r=8, c=3, I=(1,11,19))"),
                            ("off", "s--", "TCP, no FEC")):
        pts = [r for r in rows if r["loss"] > 0 and r[key]]
        if not pts:
            continue
        x = [r["loss"] * 100 for r in pts]
        y = [r[key] * 1000 for r in pts]
        lo = [y[i] - min(r[key + "_all"]) * 1000 for i, r in enumerate(pts)]
        hi = [max(r[key + "_all"]) * 1000 - y[i] for i, r in enumerate(pts)]
        ax.errorbar(x, y, yerr=[lo, hi], fmt=fmt, capsize=3, label=label + " (median, range)")
    if base:
        ax.axhline(base * 1000, color="grey", ls=":",
                   label=f"lossless, no FEC ({base * 1000:.0f} Mbit/s, median)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:g}" for x in xs])
    ax.set_xlabel("loss rate (%), each direction")
    ax.set_ylabel("throughput (Mbit/s)")
    m = d["meta"]
    n = max(len(r["on_all"]) for r in rows)
    ax.set_title(f"8 TCP flows (Reno), 1 Gbit/s, 50 ms one way, {m['seconds']} s x {n} per point",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot: {a.png}")
    if a.md:
        Path(a.md).write_text(md + "\n")


# ---- forwarding rate: the link pair's stages against plain forwarding -------------------
FWD_CONFIG = """
name: {name}
status_interval_ms: 0
mtu: 1500
eal: [--no-huge, -m, "1024", --lcores, "0@1,1@1", --log-level, "lib.eal:error"]
ports:
  in: {{ device: "net_memif0,role=server,socket={tmp}/{name}-in.sock,socket-abstract=no" }}
  out: {{ device: "net_memif1,role=server,socket={tmp}/{name}-out.sock,socket-abstract=no" }}
groups: [{{ id: 1, address: 239.1.1.1 }}]
stages:
  enc: {{ type: fec_enc, local_ip: 192.0.2.1, peer_ip: 192.0.2.2, link_id: 1 }}
  link: {{ type: impair }}
  dec: {{ type: fec_dec, local_ip: 192.0.2.2, peer_ip: 192.0.2.1, link_id: 1 }}
pipeline:
  - lcore: 1
    chains: [{{ rx: in, stages: {stages}, tx: out }}]
"""


def fwd_trial(tmp, stages, frame, seconds):
    """One pktgen run (CPU 0) through the appliance (CPU 1) over two memif links; returns
    pktgen's summary plus the appliance's."""
    name = f"fw{uuid.uuid4().hex[:8]}"
    cfg = Path(tmp) / f"{name}.yaml"
    cfg.write_text(FWD_CONFIG.format(name=name, tmp=tmp, stages=stages))
    js_app, js_gen = Path(tmp) / f"{name}-app.json", Path(tmp) / f"{name}-gen.json"
    log = open(Path(tmp) / f"{name}.log", "w")
    app = subprocess.Popen(["taskset", "-c", APP_CPU, str(INTERLINK), "-c", str(cfg),
                            "--json", str(js_app)], stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    gen = None
    try:
        t0 = time.time()
        while f"interlink: {name} epoch" not in (Path(tmp) / f"{name}.log").read_text():
            if app.poll() is not None or time.time() - t0 > 30:
                raise AssertionError("appliance: " + (Path(tmp) / f"{name}.log").read_text())
            time.sleep(0.05)
        common = "socket-abstract=no,rsize=12"
        gen = subprocess.run(
            ["taskset", "-c", HOST_CPU, str(BUILD / "pktgen" / "interlink-pktgen"),
             "--tx", f"net_memif0,role=client,socket={tmp}/{name}-in.sock,{common}",
             "--rx", f"net_memif1,role=client,socket={tmp}/{name}-out.sock,{common}",
             "--mode", "native", "--frame", str(frame), "--groups", "1", "--senders", "1",
             "--receivers", "1", "--check", "count", "--tx-drop", "--count", "0",
             "--duration", str(seconds), "--drain-timeout", "1", "--quiet", "--link-wait", "30",
             "--json", str(js_gen), "--", "--file-prefix", f"{name}g", "--lcores", "0",
             "--no-huge", "-m", "1024", "--log-level", "lib.eal:error"],
            capture_output=True, text=True, timeout=seconds + 60)
    finally:
        if app.poll() is None:
            app.send_signal(signal.SIGINT)
            try:
                app.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(app.pid, signal.SIGKILL)
                app.wait()
        log.close()
        for p in (name, f"{name}g"):
            shutil.rmtree(f"/var/run/dpdk/{p}", ignore_errors=True)
    if not js_gen.exists():
        raise AssertionError(f"pktgen failed: {gen.stdout if gen else ''}{gen.stderr if gen else ''}")
    r = json.loads(js_gen.read_text())
    r["appliance"] = json.loads(js_app.read_text()) if js_app.exists() else None
    return r


def cmd_fwd(a):
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = {"plain": "[]", "linkpair": "[enc, link, dec]"}
    res = {k: [] for k in cases}
    for rep in range(a.reps):
        for k, stages in cases.items():
            r = fwd_trial(out, stages, a.frame, a.seconds)
            res[k].append(r["rx_mpps"])
            print(f"  {k:9s} {a.frame} B: offered {r['offered_mpps']:.3f} Mpps, forwarded "
                  f"{r['rx_mpps']:.3f} Mpps ({r['rx_mpps'] * a.frame * 8 / 1e3:.2f} Gbit/s)",
                  flush=True)
    import statistics
    m = {k: statistics.median(v) for k, v in res.items()}
    print(f"median of {a.reps}: plain {m['plain']:.3f} Mpps, link pair {m['linkpair']:.3f} Mpps, "
          f"ratio {m['linkpair'] / m['plain'] * 100:.1f}%")
    (out / "fwd.json").write_text(json.dumps({"frame": a.frame, "seconds": a.seconds,
                                              "mpps": res, "median": m}, indent=1))


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
    t.add_argument("--append", action="store_true", help="add repeats to DIR/results.json")
    t.add_argument("--out", required=True)
    p = sub.add_parser("plot")
    p.add_argument("results")
    p.add_argument("--png", required=True)
    p.add_argument("--md")
    f = sub.add_parser("fwd")
    f.add_argument("--frame", type=int, default=1500)
    f.add_argument("--seconds", type=float, default=5)
    f.add_argument("--reps", type=int, default=3)
    f.add_argument("--out", default="/tmp/il-fec-fwd")
    a = ap.parse_args()
    {"tcp": cmd_tcp, "plot": cmd_plot, "fwd": cmd_fwd}[a.cmd](a)


if __name__ == "__main__":
    main()
