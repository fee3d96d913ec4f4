"""Fault injection in the spirit of Jepsen on an active/standby pair (docs/ha.md, section 11):
the replicated store under load (3 il-kvstore replicas, writers), both appliances on both
switches, a 3-member etcd cluster, then faults in random order:

  kill-active   SIGKILL of the active appliance (data plane and control process), restarted
  kill-dp       SIGKILL of the active's data plane alone (its control process resigns), restarted
  kill-ctl      SIGKILL of the active's control process alone (its data plane's authority runs
                out), restarted
  stop-active   SIGSTOP of the active for 2 s, then SIGCONT: it must be fenced, and must not
                stamp again
  link-down     the active's switch-side link (its "in" or "out") down for 1.5 s
  kill-standby  SIGKILL of the standby, restarted
  kill-etcd     SIGKILL of the etcd leader, restarted
  handover      a planned hand-over (interlink-control's `handover`)

IL_HA_FAULTS faults (default 8: each kind once, in random order; docs/ha.md reports the long
run), IL_HA_SEED replays a schedule. Afterwards the checker: every replica's uniform order is
a prefix of one order and every acknowledged PUT is present exactly once (kvcheck.py); no
(group, epoch, global_seq) was stamped on two different messages (hacheck.py, from captures
of both appliances' "out" links); no frame of its old epoch left an old active after it was
resumed; PO disagreements with the final order are counted and reported; per fault, the time
from the fault to the first message U-delivered in the new epoch."""
import json
import os
import random
import re
import signal
import statistics
import time

import pytest

from etcdrig import have_etcd
from hacheck import frames_after, read_stamps, watermark_moves
from harig import KV, NODES, PairRig, sh, status
from test_ha import CTL, Store, active_epoch

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)"),
              pytest.mark.skipif(not KV.exists(), reason=f"{KV} not built"),
              pytest.mark.skipif(not have_etcd(), reason="etcd is not installed")]

KINDS = ["kill-active", "stop-active", "link-down", "kill-standby", "kill-etcd", "handover",
         "kill-dp", "kill-ctl"]
# IL_HA_KINDS: only these kinds (comma-separated), e.g. to measure one of them.
if os.environ.get("IL_HA_KINDS"):
    KINDS = [k for k in os.environ["IL_HA_KINDS"].split(",") if k in KINDS]
N_FAULTS = int(os.environ.get("IL_HA_FAULTS", str(len(KINDS))))
SEED = int(os.environ.get("IL_HA_SEED", str(int(time.time()) % 100000)))
# Extra interlink-control options (e.g. the detection settings of a measurement).
HA_ARGS = os.environ.get("IL_HA_ARGS", "").split()


def mono():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


LOG_T = r"interlink-control: ha (\w+) ([0-9]+\.[0-9]+): "


def takeover_phases(tmp, epoch):
    """What the control logs say of the takeover that began `epoch` (docs/ha.md, section 10),
    CLOCK_MONOTONIC seconds (the logs' millisecond resolution): decided (T2 submitted),
    t2 (T2 committed, the role and the announcement down), reports (the last report in),
    t4 (the cut committed, the final watermark and the first views down). None if the
    logs do not show that takeover (e.g. a hand-over's)."""
    for log in sorted(tmp.glob("control-*.log")):
        lines = log.read_text(errors="replace").splitlines()
        out = {}
        for i, ln in enumerate(lines):
            m = re.match(LOG_T + r".*T2 takes epoch (\d+)", ln)
            if m and int(m.group(3)) == epoch:
                out = {"node": m.group(1), "decided": float(m.group(2))}
                continue
            if not out:
                continue
            m = re.match(LOG_T + r"T2 committed in [0-9.]+ ms: epoch (\d+)", ln)
            if m and int(m.group(3)) == epoch:
                out["t2"] = float(m.group(2))
            m = re.match(LOG_T + r"reports came [0-9.]+ to ([0-9.]+) ms after the role", ln)
            if m and "t2" in out and "reports" not in out:
                out["reports"] = out["t2"] + float(m.group(3)) / 1e3
            m = re.match(LOG_T + r"cut of epoch \d+ committed .*serving epoch (\d+)", ln)
            if m and int(m.group(3)) == epoch:
                out["t4"] = float(m.group(2))
                return out
            if re.match(LOG_T + r"standby", ln):
                out = {}
    return None


class Faults:
    def __init__(self, rig, store, rng, say):
        self.rig, self.store, self.rng, self.say = rig, store, rng, say
        self.log = []        # one dict per fault
        self.fenced = []     # (node, old epoch, wall time it was resumed)

    def other(self, x):
        return "b" if x == "a" else "a"

    def healthy(self):
        """One active, the other a standby whose data plane is alive, and the etcd cluster
        whole."""
        act = self.rig.active()
        if act is None:
            return False
        sby = self.other(act)
        h = self.rig.ha(sby)
        return h.get("role") == "standby" and h.get("dp_alive") == 1 and \
            h.get("owner") == act and all(p is not None and p.poll() is None
                                          for p in self.rig.etcd.procs)

    def wait_healthy(self, timeout=60):
        self.rig.wait_for(self.healthy, timeout, "the pair to be whole again")

    def taken_over(self, old_active, old_epoch, timeout=20):
        new = self.other(old_active)
        self.rig.wait_for(lambda: self.rig.role(new) == "active" and
                          self.rig.ha(new).get("epoch") != old_epoch, timeout,
                          f"{new} to take over from {old_active}")
        return self.rig.ha(new)["epoch"]

    def run(self, kind):
        rig = self.rig
        # (A takeover the machine's stalls caused may be under way: wait it out.)
        self.wait_healthy()
        act, old = active_epoch(rig)
        sby = self.other(act)
        rec = {"kind": kind, "active": act, "old_epoch": old, "t": mono(), "new_epoch": None}
        # The wall clock beside it: the captures' timestamps are on that clock.
        rec["wall"] = time.time() - (mono() - rec["t"])
        if kind == "kill-active":
            rec["t"], rec["wall"] = mono(), time.time()
            rig.kill(act, signal.SIGKILL)
            rec["new_epoch"] = self.taken_over(act, old)
            time.sleep(self.rng.uniform(0.2, 1.0))
            rig.start_node(act)
        elif kind in ("kill-dp", "kill-ctl"):
            what = "dp" if kind == "kill-dp" else "ctl"
            rec["t"], rec["wall"] = mono(), time.time()
            rig.kill(act, signal.SIGKILL, what)
            rec["new_epoch"] = self.taken_over(act, old)
            time.sleep(self.rng.uniform(0.2, 1.0))
            if what == "dp":
                rig.start_appliance(act)
            else:
                rig.start_control(act)
        elif kind == "stop-active":
            rec["t"], rec["wall"] = mono(), time.time()
            rig.kill(act, signal.SIGSTOP)
            rec["new_epoch"] = self.taken_over(act, old)
            time.sleep(max(0.0, 2.0 - (mono() - rec["t"])))
            wall = time.time()
            rig.kill(act, signal.SIGCONT)
            self.fenced.append((act, old, wall))
            rig.wait_for(lambda: rig.role(act) == "standby", 20,
                         f"{act} fenced after its pause")
        elif kind == "link-down":
            port = self.rng.choice(["i", "o"])
            rec["port"] = "in" if port == "i" else "out"
            ifc = rig.ifc(act, port, 1)
            rec["t"], rec["wall"] = mono(), time.time()
            sh("ip", "link", "set", ifc, "down")
            try:
                rec["new_epoch"] = self.taken_over(act, old)
                time.sleep(max(0.0, 1.5 - (mono() - rec["t"])))
            finally:
                sh("ip", "link", "set", ifc, "up")
        elif kind == "kill-standby":
            rec["t"], rec["wall"] = mono(), time.time()
            rig.kill(sby, signal.SIGKILL)
            time.sleep(self.rng.uniform(0.3, 1.5))
            rig.start_node(sby)
        elif kind == "kill-etcd":
            i = rig.etcd.leader()
            rec["member"] = i
            rec["t"], rec["wall"] = mono(), time.time()
            rig.etcd.kill(i)
            time.sleep(self.rng.uniform(1.0, 2.5))
            rig.etcd.restart(i)
        elif kind == "handover":
            rec["t"], rec["wall"] = mono(), time.time()
            out = rig.mgmt(act, "handover")
            rec["reply"] = out.strip()
            assert out.startswith("ok"), out
            rec["new_epoch"] = self.taken_over(act, old)
        self.wait_healthy()
        rec["active_after"] = rig.active()
        self.log.append(rec)
        self.say(f"fault {len(self.log)}: {kind} of {act} (epoch {old} -> "
                 f"{rec['new_epoch'] or 'unchanged'}), active now {rec['active_after']}")


def test_faults_in_random_order(tmp_path):
    rng = random.Random(SEED)
    t0 = time.time()

    def say(msg):
        print(f"[{time.time() - t0:6.1f} s] {msg}", flush=True)

    say(f"IL_HA_SEED={SEED}, {N_FAULTS} faults")
    with PairRig(tmp_path, 6, CTL, HA_ARGS) as rig:
        caps = [(x, rig.capture(x)) for x in NODES]
        store = Store(rig, tmp_path, n_rep=3, n_wri=3)
        store.start_replicas()
        # Writers that outlast the faults: stopped with SIGTERM at the end, when each says
        # how many of its PUTs are known stable (the acknowledged ones).
        store.start_writers(10 ** 8, 800)
        rig.wait_for(lambda: min(store.applied()) >= 2000, 60, "PUTs before the first fault")
        kinds = []
        while len(kinds) < N_FAULTS:
            batch = KINDS[:]
            rng.shuffle(batch)
            kinds += batch
        faults = Faults(rig, store, rng, say)
        for kind in kinds[:N_FAULTS]:
            time.sleep(rng.uniform(1.0, 2.5))
            faults.run(kind)
        time.sleep(1.0)
        for w, (p, run, st) in store.writers.items():
            p.send_signal(signal.SIGTERM)
        for w, (p, run, st) in store.writers.items():
            p.wait(timeout=60)
            s = status(st)
            run.acked = s.get("sent", 0) - s.get("pending", 0)
            run.count = s.get("sent", 0)
            run.finished = False
        applied_target = sum(r.acked for r in store.runs)
        last = {}

        def settled():
            s = [status(store.rst[r]) for r in store.rst]
            now = tuple((x.get("applied"), x.get("pos")) for x in s)
            done = len(set(now)) == 1 and (now[0][0] or 0) >= applied_target and \
                last.get("v") == now and time.time() - last["t"] >= 2.0
            if last.get("v") != now:
                last.update(v=now, t=time.time())
            return done
        rig.wait_for(settled, 90, "the replicas to settle on one state")
        final = {r: status(store.rst[r]) for r in store.rst}
        for r in store.rst:
            rig.kv_procs[f"replica{r}"].send_signal(signal.SIGTERM)
        for r in store.rst:
            rig.kv_procs[f"replica{r}"].wait(timeout=20)
        rig.stop_captures()
        hstat = {x: rig.ha(x) for x in NODES}
        firsts = store.first_deliveries()

    # -- the checker ------------------------------------------------------------------------
    from kvcheck import verify
    total, _ = verify(list(store.rlog.values()), store.runs, 10_000)
    assert len({final[r]["hash"] for r in final}) == 1, final
    st = read_stamps(caps)
    assert not st.conflicts, f"positions stamped with two messages: {st.conflicts}"
    for node, epoch, wall in faults.fenced:
        late = frames_after(caps, node, epoch, wall + 0.05)
        assert late == 0, f"{node} stamped {late} frames of epoch {epoch} after its pause"
    by_kind = {}
    moves = watermark_moves(caps)
    for rec in faults.log:
        if rec["new_epoch"] and rec["new_epoch"] in firsts:
            ms = (firsts[rec["new_epoch"]] - rec["t"]) * 1e3
            if ms < 0:
                ms = float("nan")  # that epoch began before the fault: not the fault's
        else:
            # The epoch stayed: until the watermark moved again on the link (more messages
            # deliverable as uniform), from the captures.
            after = [t for t in moves if t > rec["wall"]]
            ms = (after[0] - rec["wall"]) * 1e3 if after else float("nan")
        rec["unavailable_ms"] = round(ms, 1)
        by_kind.setdefault(rec["kind"], []).append(ms)
    # The takeover's parts, from the fault on (docs/ha.md, section 10): detection (until T2 is
    # submitted), T2, the reports, T4, and from T4 to the first U-delivery in the new epoch.
    phases = {}
    for rec in faults.log:
        ph = takeover_phases(tmp_path, rec["new_epoch"]) if rec["new_epoch"] else None
        first = firsts.get(rec["new_epoch"]) if rec["new_epoch"] else None
        if not ph or "t4" not in ph or first is None or ph["decided"] < rec["t"]:
            continue
        rep = ph.get("reports", ph["t2"])
        rec["phases_ms"] = {k: round(v * 1e3, 1) for k, v in (
            ("detect", ph["decided"] - rec["t"]), ("t2", ph["t2"] - ph["decided"]),
            ("reports", rep - ph["t2"]), ("t4", ph["t4"] - rep), ("first", first - ph["t4"]))}
        for k, v in rec["phases_ms"].items():
            phases.setdefault(rec["kind"], {}).setdefault(k, []).append(v)
    summary = {}
    for k, v in sorted(by_kind.items()):
        v = [x for x in v if x == x]  # a NaN is a fault whose effect could not be told apart
        if v:
            summary[k] = {"n": len(v), "median_ms": round(statistics.median(v), 1),
                          "worst_ms": round(max(v), 1)}
    # Epochs begun without a fault that changes the epoch: takeovers the machine's stalls
    # caused (a data plane or control loop descheduled beyond the detection settings).
    caused = {r["new_epoch"] for r in faults.log if r["new_epoch"]}
    seen = {e for per in st.by_node.values() for e in per}
    spurious = len(seen - caused) - 1  # less the first epoch
    print(f"\nHA faults (IL_HA_SEED={SEED}): {len(faults.log)} faults, {total} PUTs applied "
          f"once each; {st.frames} frames captured, {st.restamped()} messages stamped at two "
          f"positions, {st.po_disagreements()} PO disagreements with the final order; "
          f"{sum(final[r].get('cut_incomplete', 0) for r in final)} incomplete cuts; "
          f"{max(0, spurious)} epochs begun without a fault")
    print("per fault kind:", json.dumps(summary))
    for k, per in sorted(phases.items()):
        print(f"{k} takeover parts, median (worst) ms: " + ", ".join(
            f"{p} {statistics.median(v):.1f} ({max(v):.1f})" for p, v in per.items()))
    print("faults:", json.dumps(faults.log))
    print("control a:", json.dumps({k: hstat['a'].get(k) for k in
                                    ('takeovers', 'handovers', 'fenced', 'resigns', 'stalls')}))
    print("control b:", json.dumps({k: hstat['b'].get(k) for k in
                                    ('takeovers', 'handovers', 'fenced', 'resigns', 'stalls')}))
    out = os.environ.get("IL_HA_JSON")
    if out:
        with open(out, "w") as f:
            json.dump({"seed": SEED, "faults": faults.log, "summary": summary, "puts": total,
                       "frames": st.frames, "restamped": st.restamped(),
                       "epochs_without_fault": max(0, spurious),
                       "phases": {k: {p: {"median_ms": round(statistics.median(v), 1),
                                          "worst_ms": round(max(v), 1)}
                                      for p, v in per.items()} for k, per in phases.items()},
                       "load": os.getloadavg(),
                       "po_disagreements": st.po_disagreements()}, f, indent=1)
