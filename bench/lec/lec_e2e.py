#!/usr/bin/python3
"""Ricochet LEC end to end (issue 14, docs/lec.md "Measured end to end"): libinterlink hosts in
network namespaces (il-lec-host), the appliance with uniform total order on veth pairs and
interlink-control, on the rig of tests/integration/lecrig.py. Each host loses what its RX
socket gets by a loss model of its own (different seeds), data and repairs alike.

  loss    Fig. 12: recovery by LEC (% of the messages lost) and recovery latency (ms, and
          frames received meanwhile) against the loss rate, for uniform, bursty (bursts of
          10) and Markov (bad state 10 frames on average) loss, receiver-side (peers) and
          appliance-side LEC at (8, 5); the NAK backstop's latency in the same runs; XORs per
          data packet and LEC's CPU per packet on the hosts.
  degree  Fig. 10: each host in 2 to 128 groups (libinterlink's most), the groups' rates
          scaled so that every host receives the same aggregate rate: LEC's latency should
          follow the aggregate rate, not the groups.
  burst   Fig. 14: bursts of 10, 50 and 100 at 1% loss, stagger 1 and 6.
  cost    at 5% uniform loss, LEC off (NAK only), peers, appliance and both: the hosts' CPU per
          frame received (the whole process) and LEC's own (thread CPU inside LEC's calls).

Usage (root): IL_BUILD=build /usr/bin/python3 bench/lec/lec_e2e.py [--out DIR] [--quick]
       [--only loss,degree,burst] [--hosts 8] [--size 1000]
Writes DIR/lec_e2e.json and DIR/lec-*.png; prints Markdown tables."""
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

from lecrig import LecRig, lec_stage_sets  # noqa: E402

# A slow detector that does not exclude a host (or see one silent) because the shared machine
# descheduled the appliance or the host for seconds.
CTL = ["--suspect-ms", "2000", "--exclude-ms", "60000", "--window", "512"]
# The aggregate rate every host receives (frames per second, all its groups): the paper's
# 1000 packets per node per second.
AGG = 1000


def layout(n, d, s, seed):
    """n hosts each in exactly d groups of exactly s hosts (n d = g s), at random."""
    g = n * d // s
    rng = random.Random(seed)
    left = {h: d for h in range(1, n + 1)}
    groups = []
    for _ in range(g):
        # the s hosts with the most memberships still to place, ties at random
        hosts = sorted(left, key=lambda h: (-left[h], rng.random()))[:s]
        for h in hosts:
            left[h] -= 1
        groups.append(sorted(hosts))
    assert all(v == 0 for v in left.values())
    return {f"g{k:03d}": x for k, x in enumerate(groups)}


def loss_spec(model, p, burst=10):
    if p == 0:
        return "none"
    if model == "uniform":
        return f"bernoulli:{p}"
    if model == "bursty":
        return f"burst:{p}:{burst}"
    # two states, lossless and lossy, the lossy one lasting 10 frames on average
    return f"ge:{0.1 * p / (1 - p):.6f}:0.1:0:1"


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def one_run(tmp, n, groups, mode, loss, count, rate, size, stagger=1, extra=(), app=None,
            app_extra=()):
    """One rig, one run: every host in its groups, sending in all of them. app: the lec
    stage's plan and rate ({"plan": ..., "rate": ...}; default: the stage's defaults);
    app_extra: more of the appliance's --set overrides."""
    app_sets = lec_stage_sets(stagger=stagger, **(app or {})) \
        if mode in ("appliance", "both") else []
    app_sets = [*app_sets, *app_extra]
    exp = {g: len(h) * count for g, h in groups.items()}
    t0 = time.time()
    with LecRig(tmp, n, groups, CTL, app_sets) as rig:
        specs = {}
        for i in range(1, n + 1):
            specs[f"h{i}"] = (i, dict(lec=mode, loss=loss, seed=1000 + i, count=count,
                                      rate=rate, size=size, expect=exp, timeout=240,
                                      extra=["--stagger", str(stagger),
                                             "--dump", str(tmp / f"h{i}.csv"), *extra]))
        res = rig.run(specs, timeout=300)
    summary = rig.summary()
    out = {"mode": mode, "loss": loss, "stagger": stagger, "hosts": n, "groups": len(groups),
           "app": app or {},
           "count": count, "rate": rate, "size": size, "wall_s": round(time.time() - t0, 1)}
    lat = {"lec": ([], []), "nak": ([], [])}
    for i in range(1, n + 1):
        f = tmp / f"h{i}.csv"
        for line in f.read_text().splitlines() if f.exists() else []:
            via, ms, pk = line.split(",")[:3]
            lat[via][0].append(float(ms))
            lat[via][1].append(float(pk))
    ok = [r for r in res.values() if r is not None]
    out["complete"] = len(ok) == n and all(r["done"] for r in ok) and all(
        g["delivered"] == g["expect"] and g["dups"] == 0 and g["gaps"] == 0
        for r in ok for g in r["groups"])
    tot = lambda k: sum(r[k] for r in ok)  # noqa: E731
    out["lost"] = tot("drop_msgs")
    out["lec"] = tot("via_lec")
    out["nak"] = tot("via_nak")
    out["as_data"] = tot("recovered_as_data")
    # Datagrams the hosts' sockets lost to full receive buffers (the kernel's counters of
    # each namespace): losses beside the ones the loss model chose, data and repairs alike.
    out["udp_rcvbuf_errors"] = sum(r.get("udp", {}).get("RcvbufErrors", 0) for r in ok)
    out["udp_in_datagrams"] = sum(r.get("udp", {}).get("InDatagrams", 0) for r in ok)
    out["lec_pct"] = round(100.0 * out["lec"] / out["lost"], 1) if out["lost"] else None
    for via in ("lec", "nak"):
        ms, pk = lat[via]
        out[f"{via}_ms_p50"] = pct(ms, 0.5)
        out[f"{via}_ms_p90"] = pct(ms, 0.9)
        out[f"{via}_pkts_p50"] = pct(pk, 0.5)
        out[f"{via}_pkts_p90"] = pct(pk, 0.9)
    frames = sum(r["ep"]["data_rx"] for r in ok)
    # LEC's time in its calls (the monotonic clock; calls in which the host was descheduled
    # left out: lec_slow), less the clock's own cost: one reading per call (data and repairs)
    calls = sum(r["ep"]["data_rx"] + r["ep"]["lec_rx"] for r in ok)
    own = sum(r["ep"]["lec_ns"] - r.get("clock_ns", 0) * (r["ep"]["data_rx"] + r["ep"]["lec_rx"])
              for r in ok if r["ep"]["lec_ns"])
    out["host_lec_ns_per_frame"] = round(max(own, 0) / frames, 1) if frames else None
    out["host_lec_ns_per_frame_raw"] = round(sum(r["ep"]["lec_ns"] for r in ok) / frames, 1) \
        if frames else None
    out["host_clock_ns"] = max((r.get("clock_ns", 0) for r in ok), default=0)
    out["host_lec_slow_per_mille"] = round(1000 * sum(r["ep"].get("lec_slow", 0) for r in ok) /
                                           calls, 2) if calls else None
    out["lec_calls_per_frame"] = round(calls / frames, 2) if frames else None
    out["host_cpu_us_per_frame"] = round(1e6 * sum(r["cpu_s"] for r in ok) / frames, 2) \
        if frames else None
    new = sum(r["lec_core"]["data_new"] for r in ok)
    out["host_xor_per_frame"] = round(sum(r["lec_core"]["xor_ops"] + r["lec_core"]["copy_ops"]
                                          for r in ok) / new, 2) if new else None
    out["repairs_rx_per_frame"] = round(sum(r["ep"]["lec_rx"] for r in ok) / frames, 3) \
        if frames else None
    ports = (summary or {}).get("ports", {})
    out["appliance_rx_missed"] = ports.get("in", {}).get("rx_missed")
    out["appliance_rx"] = ports.get("in", {}).get("rx")
    st = (summary or {}).get("stages", {}).get("lec")
    if st and st["protected"]:
        out["stage_xor_per_frame"] = round((st["xor_ops"] + st["copy_ops"]) / st["protected"], 2)
        out["stage_copies_per_frame"] = round(st["repair_copies"] / st["protected"], 3)
        # repairs_to: group: one frame to the group's address instead of the copies
        out["stage_group_sends_per_frame"] = round(st.get("repairs_to_group", 0) /
                                                   st["protected"], 3)
        out["stage_cycles_per_pkt"] = round(st["cycles"] / st["pkts_in"], 1) \
            if st.get("cycles") else None
    eps = [r["ep"] for r in ok]
    out["app_repairs_rx_per_frame"] = None
    if frames and st:
        # unicast repairs from the appliance reach each host's TX socket: the stage's copies
        # per frame any host received (repairs_to: group sends none: repairs_rx counts those)
        out["app_repairs_rx_per_frame"] = round(st["repair_copies"] / frames, 3)
    out["eps_n"] = len(eps)
    return out


def clean_run(tmp_of, retries, *args, **kw):
    """one_run, again (up to `retries` more times) while the appliance's "in" ring overflowed:
    on the shared machine its lcore is sometimes descheduled for long enough, and the frames
    lost before the sequencer make the senders go back N (a storm that says nothing of LEC).
    The run kept says how many were taken and whether it is clean."""
    for attempt in range(retries + 1):
        r = one_run(tmp_of(), *args, **kw)
        r["attempts"] = attempt + 1
        r["clean"] = not r.get("appliance_rx_missed")
        if r["clean"]:
            break
    return r


def table(rows, cols):
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + " |")


def plots(res, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loss = res.get("loss", [])
    if loss:
        fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
        for mode, ls in (("peers", "-"), ("appliance", "--")):
            for model, c in (("uniform", "C0"), ("bursty", "C1"), ("markov", "C2")):
                pts = sorted((r["p"], r) for r in loss if r["mode"] == mode and
                             r["model"] == model)
                if not pts:
                    continue
                x = [100 * p for p, _ in pts]
                ax[0].plot(x, [r["lec_pct"] for _, r in pts], ls, color=c, marker="o",
                           label=f"{model}, {mode}")
                ax[1].plot(x, [r["lec_ms_p50"] for _, r in pts], ls, color=c, marker="o")
                ax[2].plot(x, [r["nak_ms_p50"] for _, r in pts], ls, color=c, marker="x")
        ax[0].axhline(90, color="grey", lw=0.5)
        ax[0].plot([5, 25], [90, 40], "k*", markersize=10, label="paper, Fig. 12")
        ax[0].set(xlabel="loss at each receiver (%)", ylabel="lost messages recovered by LEC (%)",
                  title="Recovery (paper Fig. 12: >90% at 5%, ~40% at 25%)", ylim=(0, 100))
        ax[1].set(xlabel="loss (%)", ylabel="median LEC recovery (ms)", yscale="log",
                  title="LEC recovery latency")
        ax[2].set(xlabel="loss (%)", ylabel="median NAK recovery (ms)", yscale="log",
                  title="NAK backstop latency, same runs")
        ax[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(outdir / "lec-recovery.png", dpi=110)
    deg, bur = res.get("degree", []), res.get("burst", [])
    here = Path(__file__).resolve().parent
    sim_deg = read_csv(here / "results-2026-11-27-sim-degrees.csv")
    sim_bur = read_csv(here / "results-2026-11-27-sim-fig14.csv")
    if deg or bur:
        fig, ax = plt.subplots(1, 2, figsize=(12, 4.4))
        if deg:
            d = sorted(deg, key=lambda r: r["degree"])
            x = [r["degree"] for r in d]
            ax[0].plot(x, [r["lec_ms_p50"] for r in d], "o-", color="C0",
                       label="hosts: median LEC latency (ms)")
            ax[0].plot(x, [r["lec_pkts_p50"] for r in d], "s-", color="C1",
                       label="hosts: median, frames received")
            ax[0].plot(x, [r["lec_pct"] for r in d], "^-", color="C2",
                       label="hosts: recovered by LEC (%)")
        if sim_deg:
            x = [int(r["degree"]) for r in sim_deg]
            ax[0].plot(x, [float(r["lat_mean_msgs"]) for r in sim_deg], "s--", color="C1",
                       alpha=0.6, label="64-node network: mean, messages received")
            ax[0].plot(x, [float(r["recovered_pct"]) for r in sim_deg], "^--", color="C2",
                       alpha=0.6, label="64-node network: recovered (%)")
        ax[0].set_xscale("log", base=2)
        ax[0].set_xticks([2, 4, 8, 16, 32, 64, 128], ["2", "4", "8", "16", "32", "64", "128"])
        ax[0].set(xlabel="groups per node (aggregate rate fixed)", ylim=(0, 105),
                  title="Groups per node (paper Fig. 10)")
        ax[0].legend(fontsize=7)
        for stg, m in ((1, "o"), (6, "s")):
            for mode in ("peers", "appliance"):
                b = sorted(((r["burst"], r) for r in bur if r["stagger"] == stg and
                            r.get("mode", "peers") == mode), key=lambda t: t[0])
                if b:
                    ax[1].plot([x for x, _ in b], [r["lec_pct"] for _, r in b],
                               m + ("-" if mode == "peers" else ":"),
                               label=f"8 hosts, {mode}, stagger {stg}")
            sb = [r for r in sim_bur if int(r["stagger"]) == stg]
            if sb:
                ax[1].plot([int(r["burst"]) for r in sb], [float(r["recovered_pct"]) for r in sb],
                           m + "--", alpha=0.6, label=f"64-node network, stagger {stg}")
        ax[1].plot([100], [90], "k*", markersize=10, label="paper, Fig. 14")
        ax[1].axhline(90, color="grey", lw=0.5)
        ax[1].set(xlabel="burst length (frames), 1% loss", ylabel="recovered by LEC (%)",
                  title="Bursts with stagger (paper Fig. 14)", ylim=(0, 105))
        ax[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(outdir / "lec-groups-bursts.png", dpi=110)


def read_csv(path):
    if not path.exists():
        return []
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    keys = lines[0].split(",")
    return [dict(zip(keys, ln.split(","))) for ln in lines[1:]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="loss,degree,burst,cost",
                    help="parts: loss, degree, burst, cost, density (appliance plans and rates)")
    ap.add_argument("--app-plan", default=None, help="the lec stage's plan (loss, cost)")
    ap.add_argument("--app-rate", default=None, help="the lec stage's rate (loss, cost)")
    ap.add_argument("--app-flush-us", type=int, default=None,
                    help="the lec stage's flush_us (loss, cost)")
    ap.add_argument("--app-repairs-to", default=None,
                    help="the lec stage's repairs_to: members (unicast) or group (loss, cost)")
    ap.add_argument("--app-layer-stride", default=None, choices=("true", "false"),
                    help="the lec stage's layer_stride (loss, cost)")
    ap.add_argument("--models", default="uniform,bursty,markov", help="loss models (loss)")
    ap.add_argument("--ps", default=None, help="loss rates of the loss part, e.g. 0.01,0.05")
    ap.add_argument("--modes", default="peers,appliance", help="modes of the loss part")
    ap.add_argument("--burst-modes", default="peers",
                    help="modes of the burst part (peers, appliance)")
    ap.add_argument("--stagger", type=int, default=1,
                    help="stagger of the loss part's runs (hosts and appliance)")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--degrees", default="2,4,8,16,32,64,128",
                    help="groups per host of the degree part (Fig. 10), at most 128 (the "
                         "appliance's 256 groups at 128 with 8 hosts)")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--agg", type=int, default=AGG,
                    help="frames a second each host receives, all its groups together "
                         f"(default {AGG}, the paper's)")
    ap.add_argument("--from-json", default=None, help="only draw the plots of a result file")
    ap.add_argument("--resume", default=None,
                    help="a result file: its clean points are kept, the others run again")
    ap.add_argument("--retries", type=int, default=3)
    a = ap.parse_args()
    outdir = Path(a.out or tempfile.mkdtemp(prefix="lec-e2e-"))
    outdir.mkdir(parents=True, exist_ok=True)
    if a.from_json:
        plots(json.loads(Path(a.from_json).read_text()), outdir)
        return
    only = set(a.only.split(","))
    n, s = a.hosts, 4
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_before": os.getloadavg(),
           "agg": a.agg}
    secs = 4 if a.quick else 8

    def tmpdir(tag):
        d = Path(tempfile.mkdtemp(prefix=f"lec-{tag}-", dir=outdir))
        return d

    old = json.loads(Path(a.resume).read_text()) if a.resume else {}

    def kept(part, **key):
        for r in old.get(part, []):
            if r.get("appliance_rx_missed") == 0 and all(r.get(k) == v for k, v in key.items()):
                r.setdefault("attempts", 1)
                r["clean"] = True
                return r
        return None

    app = {k: v for k, v in (("plan", a.app_plan), ("rate", a.app_rate),
                             ("flush_us", a.app_flush_us),
                             ("repairs_to", a.app_repairs_to),
                             ("layer_stride", None if a.app_layer_stride is None
                              else a.app_layer_stride == "true")) if v is not None}
    if "loss" in only:
        groups = layout(n, 4, s, 1)
        rate = a.agg / (4 * s)
        ps = [0.05, 0.25] if a.quick else [0.01, 0.05, 0.10, 0.15, 0.20, 0.25]
        if a.ps:
            ps = [float(x) for x in a.ps.split(",")]
        res["loss"] = []
        for mode in a.modes.split(","):
            for model in a.models.split(","):
                for p in (ps if model == "uniform" or a.ps else
                          [q for q in ps if q in (0.01, 0.05, 0.10, 0.25)]):
                    # Past 16 groups (--hosts past 16) the rig's pool holds no more than
                    # 16 groups' default histories: cut as in the degree part.
                    ax = ([f"stages.seq.history={max(256, min(4096, 65536 // len(groups)))}"]
                          if len(groups) > 16 else [])
                    r = kept("loss", mode=mode, model=model, p=p) or clean_run(
                        lambda: tmpdir("loss"), a.retries, n, groups, mode, loss_spec(model, p),
                        int(rate * secs), rate, a.size, stagger=a.stagger, app=app,
                        app_extra=ax)
                    r.update(model=model, p=p, stagger=a.stagger)
                    res["loss"].append(r)
                    print(f"# {mode} {model} {p}: {r['lec_pct']}% by LEC, median "
                          f"{r['lec_ms_p50']} ms / {r['nak_ms_p50']} ms (NAK), complete "
                          f"{r['complete']}", flush=True)
                    (outdir / "lec_e2e.json").write_text(json.dumps(res, indent=1))
    if "degree" in only:
        res["degree"] = []
        for d in (int(x) for x in a.degrees.split(",")):
            groups = layout(n, d, s, 2)
            rate = a.agg / (d * s)
            # Past 8 groups a host's per-group heartbeats would outnumber its data (20 ms
            # each, 50 a second per group): the heartbeat interval grows with the groups so
            # that a host sends as many as with 8; the receive window (65,536 slots per
            # group by default) and the appliance's history are cut to what a group here
            # holds (a group gets 1000 / d frames a second), so 256 groups fit in memory
            many = d > 8
            hx = ["--hb-ms", str(20 * d // 8), "--rx-window", "4096"] if many else []
            # (the rig's pool holds 16 groups of 4,096 frames); and an idle group's STABLE,
            # every 1 ms by default, comes as often in all as with 16 groups (the frames of
            # 256 groups' STABLEs would be 256,000 a second: a UTO cost, not LEC's)
            ax = [f"stages.seq.history={max(256, min(4096, 65536 // len(groups)))}",
                  f"stages.ctrl.stable_interval_us={max(1000, 1000 * len(groups) // 16)}"]
            r = kept("degree", degree=d) or clean_run(
                lambda: tmpdir("deg"), a.retries, n, groups, "peers",
                loss_spec("uniform", 0.05), int(rate * secs), rate, a.size, extra=hx,
                app_extra=ax)
            r.update(degree=d)
            res["degree"].append(r)
            print(f"# degree {d}: {r['lec_pct']}% by LEC, median {r['lec_ms_p50']} ms, "
                  f"{r['lec_pkts_p50']} frames", flush=True)
            (outdir / "lec_e2e.json").write_text(json.dumps(res, indent=1))
    if "burst" in only:
        res["burst"] = []
        groups = layout(n, 4, s, 1)
        rate = a.agg / (4 * s)
        for mode in a.burst_modes.split(","):
            for b in (10, 50, 100):
                for stg in (1, 6):
                    r = kept("burst", burst=b, stagger=stg, mode=mode) or clean_run(
                        lambda: tmpdir("burst"), a.retries, n, groups, mode,
                        loss_spec("bursty", 0.01, b),
                        int(rate * secs * (1 if a.quick else 2)), rate, a.size, stagger=stg,
                        app=app)
                    r.update(burst=b, mode=mode)
                    res["burst"].append(r)
                    print(f"# {mode} burst {b} stagger {stg}: {r['lec_pct']}% by LEC, median "
                          f"{r['lec_ms_p50']} ms", flush=True)
                (outdir / "lec_e2e.json").write_text(json.dumps(res, indent=1))
    if "density" in only:
        # appliance-side LEC: Algorithm 1's composite bins or one per group, at the rate of one
        # node (c targets per message) or of the peers (each member as many repairs of a
        # message as its peers would send it)
        res["density"] = []
        groups = layout(n, 4, s, 1)
        rate = a.agg / (4 * s)
        for p in (0.05, 0.25):
            for plan in ("regions", "groups"):
                for arate in ("node", "peers"):
                    r = kept("density", p=p, plan=plan, rate_mode=arate) or clean_run(
                        lambda: tmpdir("dens"), a.retries, n, groups, "appliance",
                        loss_spec("uniform", p), int(rate * secs), rate, a.size,
                        app={"plan": plan, "rate": arate})
                    r.update(p=p, plan=plan, rate_mode=arate)
                    res["density"].append(r)
                    print(f"# density {plan} {arate} {p}: {r['lec_pct']}% by LEC, median "
                          f"{r['lec_ms_p50']} ms, stage {r.get('stage_xor_per_frame')} XORs "
                          f"and {r.get('stage_copies_per_frame')} copies per frame, "
                          f"{r.get('stage_cycles_per_pkt')} cycles per packet", flush=True)
                    (outdir / "lec_e2e.json").write_text(json.dumps(res, indent=1))
    if "cost" in only:
        res["cost"] = []
        groups = layout(n, 4, s, 1)
        rate = a.agg / (4 * s)
        for mode in ("off", "peers", "appliance", "both"):
            r = kept("cost", mode=mode) or clean_run(
                lambda: tmpdir("cost"), a.retries, n, groups, mode, loss_spec("uniform", 0.05),
                int(rate * secs), rate, a.size, app=app,
                extra=["--nak-delay-us", "100000", "--nak-retry-us", "50000"] if mode == "off"
                else [])
            res["cost"].append(r)
            print(f"# cost {mode}: {r['host_cpu_us_per_frame']} us CPU per frame, LEC "
                  f"{r['host_lec_ns_per_frame']} ns", flush=True)
            (outdir / "lec_e2e.json").write_text(json.dumps(res, indent=1))
    res["load_after"] = os.getloadavg()
    (outdir / "lec_e2e.json").write_text(json.dumps(res, indent=1))
    cols = ["mode", "model", "p", "lost", "lec_pct", "lec_ms_p50", "lec_pkts_p50", "lec_ms_p90",
            "nak", "nak_ms_p50", "host_xor_per_frame", "host_lec_ns_per_frame",
            "stage_xor_per_frame", "complete", "clean", "attempts"]
    if "loss" in res:
        table(res["loss"], cols)
    if "degree" in res:
        table(res["degree"], ["degree", "groups", "rate", "lost", "lec_pct", "lec_ms_p50",
                              "lec_pkts_p50", "lec_ms_p90", "nak_ms_p50", "complete"])
    if "cost" in res:
        table(res["cost"], ["mode", "lost", "lec_pct", "nak", "host_cpu_us_per_frame",
                            "host_lec_ns_per_frame", "host_lec_ns_per_frame_raw", "host_clock_ns",
                            "host_xor_per_frame",
                            "repairs_rx_per_frame", "stage_xor_per_frame",
                            "stage_copies_per_frame", "complete", "clean"])
    if "density" in res:
        table(res["density"], ["p", "plan", "rate_mode", "lost", "lec_pct", "lec_ms_p50",
                               "lec_pkts_p50", "nak_ms_p50", "app_repairs_rx_per_frame",
                               "stage_xor_per_frame", "stage_copies_per_frame",
                               "stage_cycles_per_pkt", "complete", "clean"])
    if "burst" in res:
        table(res["burst"], ["burst", "stagger", "lost", "lec_pct", "lec_ms_p50", "lec_pkts_p50",
                             "nak", "nak_ms_p50", "complete"])
    plots(res, outdir)
    print(f"results in {outdir}")


if __name__ == "__main__":
    main()
