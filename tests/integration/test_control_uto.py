"""Uniform total order end to end (issue 5): the appliance (configs/uto.yaml, net_af_packet
ports on veth pairs), interlink-control beside it, and emulated members (il-uto-members,
AF_PACKET on the other ends of the veths). Failure detection, Fast-Join, rejoin after a
wrongful exclusion, flow control under maximum load, and both processes restarted under load.

Timeouts are generous and nothing asserts a tight time: the machine has 2 shared cores."""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import BUILD, INTERLINK, ROOT
from harness import control_groups, control_mgmt, control_status

CONTROL = BUILD / "control" / "interlink-control"
MEMBERS = BUILD / "tools" / "il-uto-members"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veth pairs)")


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class UtoRig:
    """veth pairs <tag>a0/b0 ("in") and <tag>a1/b1 ("out"); the appliance owns the a ends."""

    def __init__(self, tmp: Path, ctl_args=(), app_sets=()):
        self.tmp = tmp
        self.tag = "ilu" + uuid.uuid4().hex[:6]
        self.chan = f"/dev/shm/{self.tag}-chan"
        self.ctl_args = list(ctl_args)
        self.app_sets = list(app_sets)
        self.ctl = self.app = None
        self.links = []
        self.n_app = 0
        self.procs = []
        # Group, address and UDP port of our own: other developers' emulated members on
        # this machine speak the same protocol, and none of their frames must count here.
        r = uuid.uuid4().int
        self.group = 1000 + r % 60000
        self.mcast = f"239.{100 + r % 100}.{(r >> 8) % 250 + 1}.{(r >> 16) % 250 + 1}"
        self.port = 20000 + (r >> 24) % 20000

    # -- set-up and tear-down ---------------------------------------------------------
    def links_up(self):
        for p in (0, 1):
            a, b = f"{self.tag}a{p}", f"{self.tag}b{p}"
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            self.links.append(a)
            for i in (a, b):
                sh("sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1")
                sh("ip", "link", "set", i, "up")
                subprocess.run(["ethtool", "-K", i, "tx", "off", "rx", "off", "tso", "off",
                                "gso", "off", "gro", "off"], capture_output=True)

    def start_control(self):
        log = open(self.tmp / "control.log", "a")
        self.ctl = subprocess.Popen(
            ["taskset", "-c", "0", str(CONTROL), "--chan", self.chan, "-v", *self.ctl_args],
            stdout=log, stderr=subprocess.STDOUT)

    def start_appliance(self):
        self.n_app += 1
        self.prefix = f"{self.tag}{self.n_app}"
        cmd = ["taskset", "-c", "1", str(INTERLINK), "-c", str(ROOT / "configs" / "uto.yaml"),
               "--json", str(self.tmp / f"app{self.n_app}.json"),
               "--set", f"name={self.prefix}",
               "--set", f"ports.in.device=net_af_packet0,iface={self.tag}a0,framecnt=4096",
               "--set", f"ports.out.device=net_af_packet1,iface={self.tag}a1,framecnt=4096",
               "--set", f"stages.ctrl.chan={self.chan}",
               "--set", f"udp_port={self.port}",
               "--set", f"groups.0.id={self.group}",
               "--set", f"groups.0.address={self.mcast}",
               "--set", "status_interval_ms=0",
               "--set", 'eal=[--no-huge, -m, "512", --lcores, "0,1", --log-level, "lib.eal:error"]']
        for s in self.app_sets:
            cmd += ["--set", s]
        for attempt in range(3):
            log = self.tmp / f"app{self.n_app}.log"
            self.app = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
            try:
                # Up once the control process has the data plane's HELLO (its first poll).
                self.wait_for(lambda: self.status().get("dp_incarnation", 0) >= self.n_app,
                              30, "the data plane's HELLO")
                return
            except AssertionError:
                # Seen once right after a SIGKILLed predecessor: the kernel still held
                # its AF_PACKET fanout group. Not ours to fix; try again.
                if "PACKET_FANOUT" not in log.read_text() or attempt == 2:
                    raise
                shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
                time.sleep(1)

    def mgmt(self, cmd, timeout=2.0):
        return control_mgmt(self.chan, cmd, self.tmp, timeout)

    def status(self):
        return control_status(self.chan, self.tmp)

    def wait_for(self, cond, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            if self.app is not None and self.app.poll() is not None:
                raise AssertionError("the appliance exited: " +
                                     (self.tmp / f"app{self.n_app}.log").read_text())
            if cond():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def members(self, *args, wait=True, timeout=90):
        js = self.tmp / f"members-{uuid.uuid4().hex[:6]}.json"
        cmd = ["taskset", "-c", "0", str(MEMBERS), "--tx", f"{self.tag}b0",
               "--rx", f"{self.tag}b1", "--json", str(js), "--group", str(self.group),
               "--mcast", self.mcast, "--udp-port", str(self.port), *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        p.json = js
        self.procs.append(p)
        if not wait:
            return p
        return self.finish(p, timeout)

    @staticmethod
    def finish(p, timeout=90):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            raise AssertionError("il-uto-members did not finish: " + out)
        res = json.loads(p.json.read_text()) if p.json.exists() else None
        return p.returncode, out, res

    def kill_control(self, sig=signal.SIGKILL):
        if self.ctl and self.ctl.poll() is None:
            self.ctl.send_signal(sig)
            self.ctl.wait(timeout=20)

    def kill_appliance(self, sig=signal.SIGINT):
        if self.app and self.app.poll() is None:
            self.app.send_signal(sig)
            try:
                self.app.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.app.kill()
                self.app.wait()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)

    def summary(self, n=None):
        p = self.tmp / f"app{n or self.n_app}.json"
        return json.loads(p.read_text()) if p.exists() else None

    def __enter__(self):
        try:
            self.links_up()
            self.start_control()
            self.start_appliance()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        if self.app is not None:
            self.kill_appliance()
        if self.ctl is not None:
            self.kill_control(signal.SIGTERM)
        for a in self.links:
            subprocess.run(["ip", "link", "del", a], capture_output=True)
        for suffix in ("", ".sock", ".mgmt"):
            Path(self.chan + suffix).unlink(missing_ok=True)


# Heartbeats every 20 ms; the fast detector suspects after 200 ms, the slow one excludes
# after 1.5 s: generous, since on this shared 2-core machine the appliance's lcore has been
# seen descheduled for ~300 ms (its max_poll_gap_us telemetry).
CTL = ["--suspect-ms", "200", "--exclude-ms", "1500", "--window", "256"]


def check_common(res, out):
    assert res is not None, out
    assert res["disagreements"] == 0, out
    assert res["uniform_violations"] == 0, out
    assert res["buffer_drops"] == 0, out


def test_killed_receiver_is_excluded_and_the_watermark_moves_again(tmp_path):
    with UtoRig(tmp_path, CTL) as rig:
        rc, out, res = rig.members("--senders", "2", "--receivers", "4", "--count", "20000",
                                   "--rate", "20000", "--window", "256", "--need-credit",
                                   "--kill", "3@0.5")
        st = rig.status()
    check_common(res, out)
    assert rc == 0, out
    dead = res["receivers"][3]
    assert dead["state"] == "dead"
    # Never before the slow detector's 1.5 s (less the last heartbeat's 20 ms and a tick).
    # Later by as long as the appliance was silent meanwhile (the detectors pause then:
    # several seconds were seen at a load average of 7): the upper bound is loose.
    assert 1.4 <= dead["excluded_after_s"] <= 20, dead
    assert st["exclusions"] >= 1 and st["suspicions"] >= 1, st
    # The watermark moved past where the dead receiver stopped: everything is stable
    # and every live receiver U-delivered every message.
    assert res["stable"] == res["max_g"] >= 40001
    assert dead["uto"] < 40001
    for r in res["receivers"][:3]:
        assert r["state"] == "member" and r["uto"] == res["max_g"] and r["uto_n"] == 40000, r


def test_last_receiver_gone_the_stream_goes_on(tmp_path):
    """A view with senders and no receiver waits for nobody: once the only receiver is
    excluded, everything stamped is stable and the senders' credits keep coming."""
    with UtoRig(tmp_path, CTL) as rig:
        # No --window check: with no receiver, "stable" is what the appliance stamped, which
        # a sender may not have seen yet (a frame its socket dropped, asked for again).
        rc, out, res = rig.members("--senders", "2", "--receivers", "1", "--count", "15000",
                                   "--rate", "15000", "--need-credit", "--kill", "0@0.3")
    check_common(res, out)
    assert rc == 0, out
    assert res["receivers"][0]["state"] == "dead" and res["receivers"][0]["excluded_after_s"] > 0
    assert res["stable"] == res["max_g"] >= 30001
    assert all(s["sent"] == 15000 for s in res["senders"])


def test_joiner_mid_stream_gets_a_consistent_start(tmp_path):
    with UtoRig(tmp_path, CTL) as rig:
        rc, out, res = rig.members("--senders", "3", "--receivers", "3", "--count", "15000",
                                   "--rate", "20000", "--window", "256", "--need-credit",
                                   "--late", "2@1.0")
    check_common(res, out)
    assert rc == 0, out
    late = res["receivers"][2]
    assert 1 < late["start"] < res["max_g"], late
    # Gap-free from its start to the end, and the VIEW's per-sender start points match
    # the stream (each sender's first message at or after the start).
    assert late["uto"] == res["max_g"], late
    assert late["uto_n"] + late["dup_skipped"] == res["max_g"] - late["start"], late
    assert late["fastjoin_senders"] == 3 and late["fastjoin_mismatches"] == 0, late


def test_wrongly_excluded_receiver_rejoins(tmp_path):
    with UtoRig(tmp_path, CTL) as rig:
        rc, out, res = rig.members("--senders", "2", "--receivers", "3", "--count", "30000",
                                   "--rate", "15000", "--window", "256", "--need-credit",
                                   "--silent", "1@0.4:0")  # silent until excluded
        st = rig.status()
    check_common(res, out)
    assert rc == 0, out
    r = res["receivers"][1]
    assert r["rejoins"] == 1 and r["inc"] == 2 and r["state"] == "member", r
    assert r["uto"] == res["max_g"] and r["start"] > 1, r
    assert st["exclusions"] >= 1, st
    for k in (0, 2):
        assert res["receivers"][k]["uto_n"] == 60000


@pytest.mark.parametrize("window,buffer,wake_us", [(128, 1 << 20, 0), (256, 300, 200),
                                                   (256, 1 << 20, 2000)])
def test_flow_control_at_maximum_load(tmp_path, window, buffer, wake_us):
    """Senders as fast as credits allow. With a small receiver buffer the window shrinks
    (buffer_free in ACKs) so that no receiver drops for lack of buffer. The control
    process is woken at most every wake_us (0: no limit; 200: the default): the same
    holds."""
    with UtoRig(tmp_path, ["--suspect-ms", "200", "--exclude-ms", "2000",
                           "--window", str(window)],
                app_sets=[f"stages.ctrl.wake_interval_us={wake_us}"]) as rig:
        # Credits keep the appliance's input from overflowing, so nothing is lost before
        # it; a sender re-sending a message that is merely late (the appliance's lcore was
        # seen descheduled for 3 s here) would add a copy outside the window.
        rc, out, res = rig.members("--senders", "2", "--receivers", "3", "--count", "30000",
                                   "--window", str(window), "--need-credit",
                                   "--buffer", str(buffer), "--resend-ms", "20000")
        rig.kill_appliance()
        app = rig.summary()
    check_common(res, out)
    assert rc == 0, out
    assert res["max_unstable"] <= window, res["senders"]
    assert app["stages"]["seq"]["drop_history_full_unstable"] == 0
    assert app["stages"]["ctrl"]["drop_chan_full"] == 0


def groups(rig):
    """{group: {field: int}} from the management socket; the rig's group is also key 1."""
    out = control_groups(rig.chan, rig.tmp)
    if rig.group in out:
        out[1] = out[rig.group]
    return out


def test_control_process_restarted_under_load(tmp_path):
    """SIGKILL interlink-control mid-stream and start a new one: the data plane re-sends its
    state (HELLO, RESYNC, JOIN and last ACK per member), the view and watermark carry on,
    nothing stable is lost or delivered twice, and the stream completes."""
    with UtoRig(tmp_path, CTL) as rig:
        p = rig.members("--senders", "2", "--receivers", "3", "--count", "30000",
                        "--rate", "15000", "--window", "256", "--need-credit", wait=False)
        rig.wait_for(lambda: groups(rig).get(1, {}).get("watermark", 0) > 5000, 30,
                     "traffic to flow")
        before = groups(rig)[1]
        rig.kill_control(signal.SIGKILL)
        time.sleep(0.5)
        rig.start_control()
        rig.wait_for(lambda: rig.status().get("resyncs", 0) >= 1, 30, "the resync")
        rc, out, res = rig.finish(p)
        st, after = rig.status(), groups(rig)[1]
    check_common(res, out)
    assert rc == 0, out
    assert st["resyncs"] == 1 and st["dp_restarts"] == 0, st
    # The view the members are in survived: same id, same members; the watermark only grew.
    assert after["view"] == before["view"] and after["members"] == before["members"] == 5
    assert after["watermark"] >= before["watermark"]
    assert res["missing"] == 0 and res["redelivered"] == 0 and res["lost_stable"] == 0
    for r in res["receivers"]:
        assert r["uto_n"] == 60000 and r["rejoins"] == 0, r
    assert res["max_unstable"] <= 256


def test_data_plane_restarted_under_load(tmp_path):
    """SIGKILL the appliance mid-stream and start a new one (new epoch). interlink-control
    keeps the members, hands out the old epoch's final watermark (a STABLE with that epoch)
    and a new view starting at 1; receivers U-deliver up to the final watermark, senders
    re-send what was not stable, and every receiver ends with every message exactly once."""
    with UtoRig(tmp_path, CTL, app_sets=[]) as rig:
        # No --window check here: a message lost before the dead appliance is unstable by
        # its sender's count until re-sent, which the appliance's credits cannot know of.
        p = rig.members("--senders", "2", "--receivers", "3", "--count", "30000",
                        "--rate", "15000", "--need-credit", wait=False)
        rig.wait_for(lambda: groups(rig).get(1, {}).get("watermark", 0) > 5000, 30,
                     "traffic to flow")
        rig.kill_appliance(signal.SIGKILL)
        time.sleep(1.2)  # the default epoch is the start time in seconds: let it move
        rig.start_appliance()
        rc, out, res = rig.finish(p)
        st = rig.status()
    check_common(res, out)
    assert rc == 0, out
    assert st["epochs"] == 1 and st["exclusions"] == 0, st
    assert res["epochs"] == 2 and res["finals"] == 1, out
    assert res["missing"] == 0 and res["redelivered"] == 0 and res["lost_stable"] == 0, out
    for r in res["receivers"]:
        assert r["state"] == "member" and r["uto_n"] == 60000 and r["rejoins"] == 0, r
