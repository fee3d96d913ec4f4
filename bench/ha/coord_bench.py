#!/usr/bin/env python3
"""What etcd costs the appliance pair (docs/ha.md, "Measured"): il_coord's
compare-and-swap latency against a 3-member etcd cluster on localhost
(client on the etcd leader and on a follower), the time a waiting
campaigner takes to lead after the leader's lease lapses, and the time a
txn takes to commit when the etcd leader was SIGKILLed just before.

    /usr/bin/python3 bench/ha/coord_bench.py [--txns 2000] [--rounds 10]
        [--ttl 1,2] [--heartbeat-ms 25 --election-ms 250] [--out FILE.json]

Needs etcd (Debian etcd-server) and a build (IL_BUILD, default ./build).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from etcdrig import EtcdCluster  # noqa: E402

BUILD = Path(os.environ.get("IL_BUILD", ROOT / "build")).resolve()
IL_COORD = str(BUILD / "lib" / "coord" / "il-coord")


def run(eps, *args, timeout=120):
    p = subprocess.run([IL_COORD, "-e", eps] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


def pick(lines, result):
    return next((x for x in lines if x["result"] == result), None)


def lines_until(p, want, timeout):
    out, until = [], time.monotonic() + timeout
    os.set_blocking(p.stdout.fileno(), False)
    while time.monotonic() < until:
        line = p.stdout.readline()
        if line:
            out.append(json.loads(line))
            if out[-1]["result"] == want:
                return out
        elif p.poll() is not None:
            break
        else:
            time.sleep(0.005)
    return out


def txn_latency(c, n):
    lead = c.leader()
    follower = next(i for i in range(c.n) if i != lead)
    res = {}
    for name, i in (("leader", lead), ("follower", follower)):
        key = "/bench/%s/%s" % (uuid.uuid4().hex[:6], name)
        run(c.url(i), "put", key, "0")
        rc, out = run(c.url(i), "bench-txn", key, n)
        assert rc == 0, out
        res[name] = pick(out, "bench")
    return res


def elect_after_lapse(c, ttl, rounds):
    eps, times = c.endpoints(), []
    for _ in range(rounds):
        key = "/bench/%s/leader" % uuid.uuid4().hex[:6]
        a = subprocess.Popen([IL_COORD, "-e", eps, "campaign", key, "A", "--ttl", str(ttl),
                              "--hold-ms", "30000", "--lapse-ms", "300"],
                             stdout=subprocess.PIPE, text=True)
        assert pick(lines_until(a, "leader", 10), "leader")
        b = subprocess.Popen([IL_COORD, "-e", eps, "campaign", key, "B", "--ttl", str(ttl),
                              "--hold-ms", "200"], stdout=subprocess.PIPE, text=True)
        lb = lines_until(b, "leader", ttl + 15)
        la = lines_until(a, "lapse", 2)
        b.wait(timeout=30)
        a.send_signal(signal.SIGTERM)
        a.wait(timeout=30)
        lapse, lead = pick(la, "lapse"), pick(lb, "leader")
        assert lapse and lead, (la, lb)
        times.append(lead["t_ms"] - lapse["last_keepalive_ms"])
    return times


def commit_after_leader_kill(workdir, args, rounds):
    times = []
    for r in range(rounds):
        c = EtcdCluster(os.path.join(workdir, "k%d" % r), heartbeat_ms=args.heartbeat_ms,
                        election_ms=args.election_ms, tag="k%d%s" % (r, uuid.uuid4().hex[:4]))
        try:
            c.start()
            lead = c.leader()
            eps = c.endpoints([lead] + [i for i in range(c.n) if i != lead])
            key = "/bench/kill"
            rc, out = run(eps, "cas", key, 0, "a")
            rev = pick(out, "ok")["rev"]
            t0 = time.monotonic()
            c.kill(lead)
            rc, out = run(eps, "--deadline-ms", "10000", "--attempt-ms", args.attempt_ms, "cas",
                          key, rev, "b")
            assert rc == 0, out
            times.append((time.monotonic() - t0) * 1000)
        finally:
            c.close()
    return times


def summary(xs):
    xs = sorted(xs)
    return {"n": len(xs), "min": xs[0], "median": statistics.median(xs), "max": xs[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--txns", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ttl", default="1,2")
    ap.add_argument("--heartbeat-ms", type=int, default=25)
    ap.add_argument("--election-ms", type=int, default=250)
    ap.add_argument("--attempt-ms", type=int, default=500,
                    help="il_coord's budget for one request to one endpoint")
    ap.add_argument("--out")
    args = ap.parse_args()
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "heartbeat_ms": args.heartbeat_ms, "election_ms": args.election_ms,
           "attempt_ms": args.attempt_ms, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="il-coord-bench-") as wd:
        c = EtcdCluster(os.path.join(wd, "main"), heartbeat_ms=args.heartbeat_ms,
                        election_ms=args.election_ms, tag="b" + uuid.uuid4().hex[:4])
        try:
            c.start()
            res["txn"] = txn_latency(c, args.txns)
            for name, r in res["txn"].items():
                print("txn (CAS) via the etcd %-8s n=%d median %.2f ms p90 %.2f p99 %.2f "
                      "max %.2f" % (name, r["n"], r["median_ms"], r["p90_ms"], r["p99_ms"],
                                    r["max_ms"]), flush=True)
            res["elect"] = {}
            for ttl in [int(x) for x in args.ttl.split(",")]:
                s = summary(elect_after_lapse(c, ttl, args.rounds))
                res["elect"][str(ttl)] = s
                print("lead after lease lapse, TTL %d s: n=%d min %.0f median %.0f max %.0f ms "
                      "(from the last keepalive)" % (ttl, s["n"], s["min"], s["median"],
                                                     s["max"]), flush=True)
        finally:
            c.close()
        s = summary(commit_after_leader_kill(wd, args, max(3, args.rounds // 2)))
        res["commit_after_etcd_leader_kill"] = s
        print("txn commits after SIGKILL of the etcd leader: n=%d min %.0f median %.0f max %.0f ms"
              % (s["n"], s["min"], s["median"], s["max"]), flush=True)
    res["load_after"] = os.getloadavg()
    print("load average before %.1f, after %.1f" % (res["load_before"][0], res["load_after"][0]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
