"""The replicated key-value store (issue 5 item 6) on libinterlink, end to end: real Linux hosts
in network namespaces, kernel UDP sockets, the appliance with uniform total order
(configs/uto.yaml) and interlink-control.

    host namespaces (one per replica / writer), each dual-homed:
      tx0 10.S.1.i --veth-- bridge <tag>A --veth-- <tag>a0 = appliance "in"
      rx0 10.S.2.i --veth-- bridge <tag>B --veth-- <tag>a1 = appliance "out"

3 replicas, 4 writers, 100,000 random PUTs; one replica SIGKILLed mid-run and started again
(it rejoins as a new incarnation and fetches a snapshot from a peer, docs/libinterlink.md):
all replicas end with the same state hash, each reflecting every PUT."""
import json
import os
import signal
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from conftest import BUILD
from test_control_uto import UtoRig, sh

# IL_EXAMPLES_BUILD: the examples from another build (e.g. one with -Dsanitize=true), the
# appliance and control process from IL_BUILD.
EXAMPLES = Path(os.environ.get("IL_EXAMPLES_BUILD", BUILD)).resolve() / "examples"
KV = EXAMPLES / "kvstore" / "il-kvstore"

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)"),
              pytest.mark.skipif(not KV.exists(), reason=f"{KV} not built")]


class HostsRig(UtoRig):
    """UtoRig's appliance and control process, with the b ends of its veth pairs in two
    bridges (switch A before the appliance, switch B after it) and one namespace per host."""

    def __init__(self, tmp: Path, n_hosts, ctl_args=(), app_sets=()):
        super().__init__(tmp, ctl_args, app_sets)
        # il-hello and il-kvstore speak group 1 at 239.1.1.1 on port 7400 (configs/uto.yaml);
        # the emulated members' rigs pick a group of their own, these hosts cannot.
        self.group, self.mcast, self.port = 1, "239.1.1.1", 7400
        self.n_hosts = n_hosts
        self.subnet = 150 + zlib.crc32(self.tag.encode()) % 100
        self.netns = []
        self.kv_procs = {}
        # Member ids of this rig's hosts: far from the small ids other tests' emulated members
        # use (a stray frame of theirs must not look like one of ours).
        self.id_base = 0x10000 * (1 + zlib.crc32(self.tag.encode()) % 30000)

    def ns(self, i):
        return f"{self.tag}h{i}"

    def tx_ip(self, i):
        return f"10.{self.subnet}.1.{i}"

    def links_up(self):
        super().links_up()
        for side, p in (("A", 0), ("B", 1)):
            br = f"{self.tag}{side}"
            sh("ip", "link", "add", br, "type", "bridge", "mcast_snooping", "0")
            self.links.append(br)
            sh("sysctl", "-qw", f"net.ipv6.conf.{br}.disable_ipv6=1")
            sh("ip", "link", "set", f"{self.tag}b{p}", "master", br)
            sh("ip", "link", "set", br, "up")
        for i in range(1, self.n_hosts + 1):
            ns = self.ns(i)
            sh("ip", "netns", "add", ns)
            self.netns.append(ns)
            x = ("ip", "netns", "exec", ns)
            sh(*x, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            # Frames come back on rx from the appliance's address and (NAK repairs,
            # our own DATA) from tx subnets: no reverse-path filter, and our own
            # source address on another interface is not a martian here.
            for k, v in (("net.ipv4.conf.all.rp_filter", 0), ("net.ipv4.conf.default.rp_filter", 0),
                         ("net.ipv4.conf.all.accept_local", 1),
                         ("net.ipv4.conf.default.accept_local", 1),
                         ("net.ipv4.conf.all.arp_ignore", 1)):
                sh(*x, "sysctl", "-qw", f"{k}={v}")
            for kind, side, net in (("t", "A", 1), ("r", "B", 2)):
                root, inner = f"{self.tag}{kind}{i}", ("tx0" if kind == "t" else "rx0")
                sh("ip", "link", "add", root, "type", "veth", "peer", "name", inner, "netns", ns)
                sh("sysctl", "-qw", f"net.ipv6.conf.{root}.disable_ipv6=1")
                sh("ip", "link", "set", root, "master", f"{self.tag}{side}")
                sh("ip", "link", "set", root, "up")
                subprocess.run(["ethtool", "-K", root, "tx", "off", "rx", "off", "tso", "off",
                                "gso", "off", "gro", "off"], capture_output=True)
                sh(*x, "ip", "addr", "add", f"10.{self.subnet}.{net}.{i}/24", "dev", inner)
                sh(*x, "ip", "link", "set", inner, "up")
                subprocess.run([*x, "ethtool", "-K", inner, "tx", "off", "rx", "off", "tso", "off",
                                "gso", "off", "gro", "off"], capture_output=True)
                sh(*x, "sysctl", "-qw", f"net.ipv4.conf.{inner}.rp_filter=0")
                sh(*x, "sysctl", "-qw", f"net.ipv4.conf.{inner}.accept_local=1")
            sh(*x, "ip", "link", "set", "lo", "up")

    def kv(self, name, host, *args):
        """il-kvstore in host namespace `host`; stdout/stderr to <tmp>/<name>.log."""
        log = open(self.tmp / f"{name}.log", "a")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(host), str(KV), *args,
                              "--tx", "tx0", "--rx", "rx0"], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.kv_procs[name] = p
        return p

    def __exit__(self, *exc):
        for p in self.kv_procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        try:
            super().__exit__(*exc)
        finally:
            for ns in self.netns:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def status(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


N_REPLICAS, N_WRITERS, PUTS, KEYS = 3, 4, 100_000, 10_000
# PUTs per second per writer: the run lasts at least PUTS / (N_WRITERS * WRITER_RATE) = 5 s, so
# the fault lands mid-run on a fast machine too (unpaced, a CI machine once applied all 100,000
# before the test saw a third of them, and the paused replica had nothing left to miss).
WRITER_RATE = 5000
# The slow detector is generous: on this shared 2-core machine (load average above 10 at
# times) a live host or the appliance lcore has been seen descheduled for about a second.
# The window bounds what is in flight towards the appliance: 4 writers x 256 messages stay
# well inside the af_packet ring of its "in" port (4096 frames) even when its lcore is
# descheduled for a second; a frame dropped there is never stamped and so never applied.
CTL = ["--suspect-ms", "500", "--exclude-ms", "4000", "--window", "256"]
# 2% of the frames leaving the sequencer lost (impair stage, before switch B, so every host
# loses them): gaps that the replicas must detect and NAK. Retransmissions are emitted by the
# nak stage and do not pass the loss stage.
LOSSY = ["stages.loss={type: impair, loss: bernoulli, p: 0.02, seed: 11}",
         "pipeline=[{lcore: 1, chains: [{rx: in, stages: [classify, seq, ctrl, nak, loss], "
         "tx: out}, {rx: out, stages: [classify, nak], tx: in}]}]"]


@pytest.mark.parametrize("app_sets,fault", [((), "crash"), (LOSSY, "crash"), ((), "pause"),
                                             ((), "appliance")],
                         ids=["clean", "loss2pct", "paused-excluded", "appliance-restart"])
def test_replicated_store_survives_a_crashed_replica(tmp_path, app_sets, fault):
    """crash: SIGKILL and restart with --recover (a new incarnation; the control process takes
    its JOIN as a rejoin). paused-excluded: SIGSTOP for longer than the slow detector, so the
    replica is excluded while alive; on SIGCONT it finds a VIEW without itself, rejoins and
    fetches its state again. appliance-restart: the appliance is SIGKILLed instead and started
    again (a new epoch): replicas U-deliver up to the old epoch's final watermark, writers
    re-send what was not stable, and the copies stamped twice are applied once."""
    t0 = time.time()
    with HostsRig(tmp_path, N_REPLICAS + N_WRITERS, CTL, app_sets) as rig:
        rst = {r: tmp_path / f"replica{r}.json" for r in range(1, N_REPLICAS + 1)}

        def replica(r, *extra):
            peers = []
            for q in range(1, N_REPLICAS + 1):
                if q != r:
                    peers += ["--peer", f"{rig.tx_ip(q)}:7500"]
            return rig.kv(f"replica{r}", r, "replica", "--id", str(rig.id_base + 100 + r),
                          "--keys", str(KEYS), "--listen", f"{rig.tx_ip(r)}:7500", *peers,
                          "--status", str(rst[r]),
                          *extra)

        def logs():
            return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}"
                             for p in sorted(tmp_path.glob("*.log")))

        for r in rst:
            replica(r)
        rig.wait_for(lambda: all(status(rst[r]).get("ready") for r in rst), 30,
                     "the replicas to join")
        per = PUTS // N_WRITERS
        writers = [rig.kv(f"writer{w}", N_REPLICAS + w, "writer", "--id", str(rig.id_base + w),
                          "--count", str(per), "--keys", str(KEYS), "--seed", "7",
                          "--rate", str(WRITER_RATE),
                          "--status", str(tmp_path / f"writer{w}.json"))
                   for w in range(1, N_WRITERS + 1)]

        # Crash replica 2 once it has applied about a third of the PUTs, start it again.
        victim = 2
        rig.wait_for(lambda: status(rst[victim]).get("applied", 0) >= PUTS // 3, 90,
                     "replica 2 to apply a third of the PUTs")
        crashed_at = status(rst[victim])["applied"]
        assert crashed_at < PUTS, f"the fault must land mid-run, not after {crashed_at} PUTs"
        if fault == "crash":
            os.killpg(rig.kv_procs[f"replica{victim}"].pid, signal.SIGKILL)
            rig.kv_procs[f"replica{victim}"].wait()
            rst[victim].unlink()
            time.sleep(0.5)
            replica(victim, "--recover")
        elif fault == "appliance":
            rig.kill_appliance(signal.SIGKILL)
            time.sleep(1.2)  # the default epoch is the start time in seconds: let it move
            rig.start_appliance()
        else:
            os.killpg(rig.kv_procs[f"replica{victim}"].pid, signal.SIGSTOP)
            rig.wait_for(lambda: rig.status().get("exclusions", 0) >= 1, 30,
                         "the paused replica's exclusion")
            os.killpg(rig.kv_procs[f"replica{victim}"].pid, signal.SIGCONT)

        for w, p in enumerate(writers, 1):
            try:
                rc = p.wait(timeout=150)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"writer {w} did not finish\n" + logs())
            assert rc == 0, f"writer {w} failed\n" + logs()

        def converged():
            s = [status(rst[r]) for r in rst]
            # A faulted replica must also have fetched its state again (the paused one learns
            # of its exclusion only once it runs again, perhaps after the last PUT).
            moved = fault == "appliance" or s[victim - 1].get("transfers", 0) >= 1
            return moved and all(x.get("ready") and x.get("applied") == PUTS for x in s) and \
                len({x["pos"] for x in s}) == 1
        try:
            rig.wait_for(converged, 60, "every replica to apply every PUT")
        except AssertionError:
            raise AssertionError(json.dumps([status(rst[r]) for r in rst]) + "\n" + logs())
        ctl = rig.status()
        for r in rst:
            rig.kv_procs[f"replica{r}"].send_signal(signal.SIGTERM)
        for r in rst:
            assert rig.kv_procs[f"replica{r}"].wait(timeout=20) == 0, logs()
        final = {r: status(rst[r]) for r in rst}
        wstat = [status(tmp_path / f"writer{w}.json") for w in range(1, N_WRITERS + 1)]

    elapsed = time.time() - t0
    print(f"\nkvstore: {PUTS} PUTs, replica {victim} {fault} at {crashed_at} applied, "
          f"{elapsed:.1f} s in all; final {json.dumps(final)}; writers {json.dumps(wstat)}")
    hashes = {final[r]["hash"] for r in final}
    assert len(hashes) == 1, final
    for r in final:
        # Messages that are not PUTs ("bad") are skipped. There should be none, but on the
        # shared machine foreign frames were seen (docs/libinterlink.md, "Not done"), so they
        # are reported, not asserted on: the state does not depend on them.
        assert final[r]["applied"] == PUTS, final[r]
        assert final[r]["unavail_msgs"] == 0 and final[r]["rx_overflow"] == 0, final[r]
    if fault == "appliance":
        for r in final:
            assert final[r]["epochs"] == 1 and final[r]["lost_stable"] == 0, final[r]
    else:
        # The restarted replica got its state from a peer and the rest from the stream.
        assert final[victim]["transfers"] >= 1, final[victim]
        assert sum(final[r]["served"] for r in final if r != victim) >= 1, final
        # The control process saw it come back as a new incarnation (or excluded it first).
        assert ctl.get("rejoins", 0) + ctl.get("exclusions", 0) >= 1, ctl
    if app_sets:
        # Gaps were detected and repaired by NAKs (nothing was UNAVAIL: unstable frames stay
        # in the appliance's history).
        assert sum(final[r]["nak_tx"] for r in final) > 0, final
    # Writers packed what the credit window held back.
    assert sum(w["packed"] for w in wstat) > PUTS // 2, wstat


@pytest.mark.parametrize("how", ["killed", "after-appliance-restart"])
def test_writer_restarted_with_the_same_id(tmp_path, how):
    """killed: a writer SIGKILLed under load and started again at once with the same member
    id: a new incarnation, numbering its PUTs from 1 again. after-appliance-restart: its
    first run finishes, the appliance is SIGKILLed and started again (a new epoch), then the
    second run starts. Every PUT of both runs that its writer was told was stable (all of the
    second run's: it finished) is applied exactly once and in its order by every replica,
    and the states are what the replicas' logs replay to. Before incarnations reached the
    receivers' FIFO, the second run's PUTs were skipped as duplicates of the first run's
    sender_seqs (in both cases) while it reported "pending 0"."""
    from kvcheck import WriterRun, verify
    n_rep, keys, rate = 3, 10_000, 4000
    with HostsRig(tmp_path, n_rep + 2, CTL) as rig:
        rst = {r: tmp_path / f"replica{r}.json" for r in range(1, n_rep + 1)}
        rlog = {r: tmp_path / f"replica{r}.log.puts" for r in rst}
        for r in rst:
            rig.kv(f"replica{r}", r, "replica", "--id", str(rig.id_base + 100 + r),
                   "--keys", str(keys), "--listen", f"{rig.tx_ip(r)}:7500",
                   "--status", str(rst[r]), "--log", str(rlog[r]))
        rig.wait_for(lambda: all(status(rst[r]).get("ready") for r in rst), 30,
                     "the replicas to join")
        wa, wb = rig.id_base + 1, rig.id_base + 2

        def writer(name, host, wid, seed, count):
            return rig.kv(name, host, "writer", "--id", str(wid), "--count", str(count),
                          "--keys", str(keys), "--seed", str(seed), "--rate", str(rate),
                          "--status", str(tmp_path / f"{name}.json"))

        def logs():
            return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}"
                             for p in sorted(tmp_path.glob("*.log")))

        b = writer("writerB", n_rep + 2, wb, 5, 20_000)
        a1 = writer("writerA1", n_rep + 1, wa, 7, 20_000)

        def acked(name):
            s = status(tmp_path / f"{name}.json")
            return s.get("sent", 0) - s.get("pending", 0) if s else 0
        if how == "killed":
            rig.wait_for(lambda: acked("writerA1") >= 4000, 60, "writer A's first run to be "
                         "acknowledged 4000 PUTs")
            os.killpg(a1.pid, signal.SIGKILL)
            a1.wait()
            acked1 = acked("writerA1")
            assert acked1 < 20_000, "the kill must land mid-run"
        else:
            assert a1.wait(timeout=150) == 0, "writer A's first run failed\n" + logs()
            acked1 = acked("writerA1")
            assert acked1 == 20_000
            rig.kill_appliance(signal.SIGKILL)
            time.sleep(1.2)  # the default epoch is the start time in seconds: let it move
            rig.start_appliance()
        a2 = writer("writerA2", n_rep + 1, wa, 8, 10_000)
        for name, p in (("writerA2", a2), ("writerB", b)):
            try:
                rc = p.wait(timeout=150)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} did not finish\n" + logs())
            assert rc == 0, f"{name} failed\n" + logs()
        least = 20_000 + 10_000 + acked1
        last = {}

        def settled():
            s = [status(rst[r]) for r in rst]
            now = tuple((x.get("applied"), x.get("pos")) for x in s)
            same = len(set(now)) == 1 and (now[0][0] or 0) >= least
            done = same and last.get("v") == now and time.time() - last["t"] >= 1.0
            if last.get("v") != now:
                last.update(v=now, t=time.time())
            return done
        try:
            rig.wait_for(settled, 60, "every replica to apply both runs' PUTs")
        except AssertionError:
            raise AssertionError(f"at least {least} PUTs expected (run 1 acknowledged "
                                 f"{acked1}); replicas: "
                                 f"{json.dumps([status(rst[r]) for r in rst])}\n{logs()}")
        for r in rst:
            rig.kv_procs[f"replica{r}"].send_signal(signal.SIGTERM)
        for r in rst:
            assert rig.kv_procs[f"replica{r}"].wait(timeout=20) == 0, logs()
        final = {r: status(rst[r]) for r in rst}
    def runs():
        return [WriterRun(wa, 7, acked=acked1), WriterRun(wa, 8, 10_000, finished=True),
                WriterRun(wb, 5, 20_000, finished=True)]
    every = runs()
    total, _ = verify(list(rlog.values()), every, keys)
    for r in rst:
        # No replica was restarted: each log alone has the whole sequence, and replays to
        # that replica's state.
        n, replayed = verify([rlog[r]], runs(), keys, replay=True)
        assert n == total and final[r]["applied"] == total, (r, n, total, final[r])
        assert final[r]["hash"] == replayed, (r, final[r], replayed)
    print(f"\nwriter restarted with the same id ({how}): run 1 acknowledged {acked1}, "
          f"applied {every[0].applied}; run 2 applied {every[1].applied}; writer B applied "
          f"{every[2].applied}; {total} in all")
