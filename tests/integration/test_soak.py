"""Soak: the emulated deployment of docs/libinterlink.md (il-kvstore replicas and writers in host
namespaces, the appliance with a control stage and interlink-control) at about half its maximum
rate, with random faults for IL_SOAK_SECONDS (default 120; docs/soak.md reports a 30-minute
run):

  - replicas SIGKILLed and started again with --recover (one at a time: a state transfer
    needs a donor),
  - writers SIGKILLed and started again at once with the same member id (a new incarnation),
  - interlink-control SIGKILLed and started again,
  - loss bursts from two impairment stages (Gilbert-Elliott), one before the sequencer
    (frames never stamped: go-back-N) and one after it (stamped frames lost: NAKs).

At the end every replica must hold the same state, every PUT a writer was told was stable
must have been applied exactly once and in its writer's order (kvcheck.py, from the replicas'
logs of applied PUTs), and the states must be what the logs replay to. A progress line every
~10 s. IL_SOAK_SEED replays a fault schedule."""
import json
import os
import random
import signal
import subprocess
import time

import pytest

from kvcheck import WriterRun, verify
from test_kvstore import HostsRig, status

SOAK_S = float(os.environ.get("IL_SOAK_SECONDS", "120"))
SEED = int(os.environ.get("IL_SOAK_SEED", str(int(time.time()) % 100000)))
N_REP, N_WRI, KEYS = 3, 3, 10_000
CTL = ["--suspect-ms", "500", "--exclude-ms", "4000", "--window", "256"]


def impair_sets(seed):
    """Loss bursts: pure Gilbert chains (the bad state loses everything), about 1% of the frames
    in bursts of 20 on average before the sequencer and 2.4% in bursts of 50 after it."""
    ge = "{{type: impair, loss: gilbert-elliott, ge_p_gb: 0.0005, ge_p_bg: {bg}, seed: {s}}}"
    return [f"stages.loss_in={ge.format(bg=0.05, s=seed)}",
            f"stages.loss_out={ge.format(bg=0.02, s=seed + 1)}",
            "pipeline=[{lcore: 1, chains: [{rx: in, stages: [classify, loss_in, seq, ctrl, nak, "
            "loss_out], tx: out}, {rx: out, stages: [classify, nak], tx: in}]}]"]


class Soak:
    def __init__(self, rig, tmp, rng, say):
        self.rig, self.tmp, self.rng, self.say = rig, tmp, rng, say
        self.runs = []        # every writer run, in the order they started
        self.writing = {}     # writer index -> (Popen, WriterRun, status path)
        self.rst = {r: tmp / f"replica{r}.json" for r in range(1, N_REP + 1)}
        self.rlog = {r: tmp / f"replica{r}.puts" for r in self.rst}
        self.killed = set()   # processes we killed (their exit is no failure)
        self.down = None      # (replica, when to start it again) while one is down
        self.rate = 0
        self.n = {"replica": 0, "writer": 0, "control": 0, "runs_done": 0}

    def logs(self):
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted(self.tmp.glob("*.log")))

    # -- processes ------------------------------------------------------------------
    def replica(self, r, recover=False):
        peers = []
        for q in self.rst:
            if q != r:
                peers += ["--peer", f"{self.rig.tx_ip(q)}:7500"]
        self.rig.kv(f"replica{r}", r, "replica", "--id", str(self.rig.id_base + 100 + r),
                    "--keys", str(KEYS), "--listen", f"{self.rig.tx_ip(r)}:7500", *peers,
                    "--status", str(self.rst[r]), "--log", str(self.rlog[r]),
                    *(["--recover"] if recover else []))

    def writer(self, w, rate=None, count=None):
        run = WriterRun(self.rig.id_base + w, 1000 + len(self.runs), count or 0)
        st = self.tmp / f"writer{w}-{len(self.runs)}.json"
        self.runs.append(run)
        args = ["writer", "--id", str(run.wid), "--count", str(run.count or 10 ** 9),
                "--keys", str(KEYS), "--seed", str(run.seed), "--status", str(st)]
        if rate:
            args += ["--rate", str(rate)]
        p = self.rig.kv(f"writer{w}-{len(self.runs) - 1}", N_REP + w, *args)
        self.writing[w] = (p, run, st)

    @staticmethod
    def acked(st):
        s = status(st)
        return s.get("sent", 0) - s.get("pending", 0) if s else 0

    def kill(self, p):
        self.killed.add(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    def kill_writer(self, w):
        p, run, st = self.writing.pop(w)
        self.kill(p)
        run.acked = self.acked(st)

    def applied(self):
        return [status(self.rst[r]).get("applied", 0) for r in self.rst]

    def ready(self):
        return self.down is None and all(status(self.rst[r]).get("ready") for r in self.rst)

    # -- the run ----------------------------------------------------------------------
    def calibrate(self):
        """Every writer unpaced for 4 s: the deployment's maximum rate is what the replicas
        apply meanwhile (from 1 s to 4 s); then half of it, split among the writers."""
        for w in range(1, N_WRI + 1):
            self.writer(w)
        time.sleep(1)
        a0, t0 = self.applied()[0], time.time()
        time.sleep(3)
        top = (self.applied()[0] - a0) / (time.time() - t0)
        for w in range(1, N_WRI + 1):
            self.kill_writer(w)
        self.rate = max(100, int(top / 2 / N_WRI))
        self.say(f"[soak] maximum {top:.0f} PUTs/s applied with {N_WRI} unpaced writers; "
                 f"soaking at {self.rate} PUTs/s per writer ({N_WRI * self.rate} in all)")
        return top

    def new_run(self, w):
        lo, hi = min(10, SOAK_S / 6), min(40, SOAK_S / 3)
        self.writer(w, self.rate, int(self.rate * self.rng.uniform(lo, hi)) + 1)

    def check_procs(self):
        for w, (p, run, st) in list(self.writing.items()):
            if p.poll() is None:
                continue
            assert p.returncode == 0, f"writer run {run} failed\n" + self.logs()
            run.finished = True
            run.acked = run.count
            self.n["runs_done"] += 1
            del self.writing[w]
        for name, p in self.rig.kv_procs.items():
            if name.startswith("replica") and p.poll() is not None and p.pid not in self.killed:
                raise AssertionError(f"{name} exited {p.returncode}\n" + self.logs())

    def fault(self, kind):
        if kind == "replica":
            r = self.rng.choice(list(self.rst))
            self.kill(self.rig.kv_procs[f"replica{r}"])
            self.rst[r].unlink(missing_ok=True)
            self.down = (r, time.time() + self.rng.uniform(0.3, 1.5))
        elif kind == "writer":
            w = self.rng.choice(sorted(self.writing))
            self.kill_writer(w)
            self.new_run(w)  # at once, with the same member id: a new incarnation
        else:
            self.rig.kill_control(signal.SIGKILL)
            time.sleep(self.rng.uniform(0.2, 1.0))
            self.rig.start_control()
        self.n[kind] += 1

    def soak(self):
        for w in range(1, N_WRI + 1):
            self.new_run(w)
        t0 = time.time()
        first = ["replica", "writer", "control"]
        self.rng.shuffle(first)
        next_fault, next_line = t0 + self.rng.uniform(3, 8), t0 + 10
        line_applied, line_t = max(self.applied()), t0
        while time.time() - t0 < SOAK_S:
            time.sleep(0.2)
            self.check_procs()
            for w in range(1, N_WRI + 1):
                if w not in self.writing:
                    self.new_run(w)
            if self.down and time.time() >= self.down[1]:
                self.replica(self.down[0], recover=True)
                self.down = None
            if time.time() >= next_fault and self.ready() and self.writing:
                kind = first.pop() if first else self.rng.choices(
                    ["replica", "writer", "control"], [0.35, 0.45, 0.2])[0]
                self.fault(kind)
                next_fault = time.time() + self.rng.uniform(3, 8)
            if time.time() >= next_line:
                # A replica that is down or fetching its state has no figure: not shown.
                a = [x for x in self.applied() if x] or [0]
                rate = (max(a) - line_applied) / (time.time() - line_t)
                self.say(f"[soak {time.time() - t0:6.0f}s/{SOAK_S:.0f}s] applied "
                         f"{min(a)}..{max(a)} PUTs ({rate:.0f}/s); writer runs {len(self.runs)} "
                         f"({self.n['runs_done']} done, {self.n['writer']} killed); replicas "
                         f"restarted {self.n['replica']}, control restarted {self.n['control']}")
                line_applied, line_t = max(a), time.time()
                next_line += 10

    def drain(self):
        """No more faults or runs: the replica that is down comes back, the writers finish
        their runs, and the replicas settle on one state."""
        if self.down:
            time.sleep(max(0.0, self.down[1] - time.time()))
            self.replica(self.down[0], recover=True)
            self.down = None
        for w, (p, run, st) in list(self.writing.items()):
            try:
                rc = p.wait(timeout=180)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"writer run {run} did not finish\n" + self.logs())
            assert rc == 0, f"writer run {run} failed\n" + self.logs()
            run.finished, run.acked = True, run.count
            self.n["runs_done"] += 1
            del self.writing[w]
        last = {}

        def settled():
            self.check_procs()
            s = [status(self.rst[r]) for r in self.rst]
            now = tuple((x.get("ready"), x.get("applied"), x.get("pos")) for x in s)
            done = len(set(now)) == 1 and now[0][0] and last.get("v") == now and \
                time.time() - last["t"] >= 2
            if last.get("v") != now:
                last.update(v=now, t=time.time())
            return done
        try:
            self.rig.wait_for(settled, 120, "the replicas to settle on one state")
        except AssertionError:
            raise AssertionError(json.dumps([status(self.rst[r]) for r in self.rst]) + "\n" +
                                 self.logs())
        for r in self.rst:
            self.rig.kv_procs[f"replica{r}"].send_signal(signal.SIGTERM)
        for r in self.rst:
            assert self.rig.kv_procs[f"replica{r}"].wait(timeout=30) == 0, self.logs()
        return {r: status(self.rst[r]) for r in self.rst}


def test_soak(tmp_path, capsys):
    def say(line):
        with capsys.disabled():
            print(line, flush=True)

    rng = random.Random(SEED)
    say(f"\n[soak] {SOAK_S:.0f} s, seed {SEED} (IL_SOAK_SEED replays the fault schedule)")
    t_start = time.time()
    with HostsRig(tmp_path, N_REP + N_WRI, CTL, impair_sets(SEED)) as rig:
        s = Soak(rig, tmp_path, rng, say)
        for r in s.rst:
            s.replica(r)
        rig.wait_for(lambda: all(status(s.rst[r]).get("ready") for r in s.rst), 30,
                     "the replicas to join")
        top = s.calibrate()
        s.soak()
        final = s.drain()
    app = json.loads((tmp_path / "app1.json").read_text())["stages"]
    t_verify = time.time()
    total, replayed = verify(list(s.rlog.values()), s.runs, KEYS, replay=True)
    hashes = {final[r]["hash"] for r in final}
    assert hashes == {replayed}, (final, replayed)
    assert all(final[r]["applied"] == total for r in final), (final, total)
    assert s.n["replica"] >= 1 and s.n["writer"] >= 1 and s.n["control"] >= 1, s.n
    killed = [r for r in s.runs if not r.finished]
    figures = {
        "seconds": SOAK_S, "seed": SEED, "max_puts_per_s": round(top),
        "rate_per_writer": s.rate, "writers": N_WRI, "replicas": N_REP,
        "puts_applied": total, "writer_runs": len(s.runs), "runs_finished": s.n["runs_done"],
        "writers_killed": len(killed), "acked_of_killed_runs": sum(r.acked for r in killed),
        "applied_of_killed_runs": sum(r.applied for r in killed),
        "replica_restarts": s.n["replica"], "control_restarts": s.n["control"],
        "lost_before_seq": app["loss_in"]["lost"], "lost_after_seq": app["loss_out"]["lost"],
        "drop_fifo_gap": app["seq"]["drop_fifo_gap"], "fifo_resets": app["seq"]["fifo_resets"],
        "naks": app["nak"]["naks"], "retransmitted_frames": app["nak"]["retransmitted_frames"],
        "wall_s": round(time.time() - t_start), "verify_s": round(time.time() - t_verify),
    }
    say("[soak] passed: " + json.dumps(figures))
    (tmp_path / "soak.json").write_text(json.dumps(figures, indent=1))
    for p in s.rlog.values():
        p.unlink()  # gigabytes after a long run; kept when the test fails
