"""Run the appliance and interlink-pktgen as two processes wired by net_memif."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from conftest import BUILD, INTERLINK, PKTGEN, ROOT

CONTROL = BUILD / "control" / "interlink-control"


def control_mgmt(chan, cmd, tmp: Path, timeout=2.0):
    """One command to interlink-control's management socket (<chan>.mgmt); "" if none."""
    path = tmp / f"m{uuid.uuid4().hex[:6]}.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind(str(path))
        s.settimeout(timeout)
        s.sendto(cmd.encode(), chan + ".mgmt")
        return s.recv(8192).decode()
    except OSError:
        return ""
    finally:
        s.close()
        path.unlink(missing_ok=True)


def control_status(chan, tmp: Path):
    """interlink-control's `status` as {key: int}."""
    out = {}
    for line in control_mgmt(chan, "status", tmp).splitlines():
        k, _, v = line.partition(" ")
        if v.isdigit():
            out[k] = int(v)
    return out


def control_groups(chan, tmp: Path):
    """interlink-control's `groups` as {group: {field: int}}."""
    out = {}
    for line in control_mgmt(chan, "groups", tmp).splitlines():
        w = line.split()
        if len(w) >= 2 and w[0] == "group":
            out[int(w[1])] = {w[i]: int(w[i + 1]) for i in range(2, len(w) - 1, 2)}
    return out


class MemifRig:
    """The appliance (memif servers, pinned to CPU 1) and pktgen (clients, CPU 0)."""

    def __init__(self, tmp: Path, app_sets=(), app_cpu="1", gen_cpu="0"):
        self.tmp = tmp
        self.tag = uuid.uuid4().hex[:8]
        self.app_killed = False  # a test that kills the appliance on purpose says so
        self.sock_in = tmp / "in.sock"
        self.sock_out = tmp / "out.sock"
        self.app_json = tmp / "appliance.json"
        self.app_log = tmp / "appliance.log"
        self.app_sets = list(app_sets)
        self.app_cpu, self.gen_cpu = app_cpu, gen_cpu
        self.app = None

    def start_appliance(self):
        cmd = ["taskset", "-c", self.app_cpu, str(INTERLINK), "--json", str(self.app_json),
               "--set", f"name=app{self.tag}",
               "--set", f"ports.in.device=net_memif0,role=server,socket={self.sock_in},socket-abstract=no",
               "--set", f"ports.out.device=net_memif1,role=server,socket={self.sock_out},socket-abstract=no",
               "--set", 'eal=[--no-huge, -m, "1024", --lcores, "0,1", --log-level, "lib.eal:error"]']
        for s in self.app_sets:
            cmd += ["--set", s]
        self.app = subprocess.Popen(cmd, stdout=open(self.app_log, "w"), stderr=subprocess.STDOUT)
        for _ in range(100):
            if self.sock_in.exists() and self.sock_out.exists():
                return
            if self.app.poll() is not None:
                raise RuntimeError("appliance exited: " + self.app_log.read_text())
            time.sleep(0.05)
        raise RuntimeError("appliance did not create its memif sockets: " +
                           self.app_log.read_text())

    def pktgen_cmd(self, js, *args):
        return ["taskset", "-c", self.gen_cpu, str(PKTGEN),
                "--tx", f"net_memif0,role=client,socket={self.sock_in},socket-abstract=no",
                "--rx", f"net_memif1,role=client,socket={self.sock_out},socket-abstract=no",
                "--json", str(js), *args,
                "--", "--file-prefix", f"gen{self.tag}", "--lcores", "0",
                "--log-level", "lib.eal:error"]

    def run_pktgen(self, *args, timeout=120):
        js = self.tmp / f"pktgen-{uuid.uuid4().hex[:6]}.json"
        try:
            p = subprocess.run(self.pktgen_cmd(js, *args), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as e:
            state = ("running" if self.app is not None and self.app.poll() is None
                     else f"exited ({self.app.returncode if self.app else None})")
            out = b"".join(x for x in (e.stdout, e.stderr) if isinstance(x, bytes))
            raise AssertionError(f"pktgen still running after {timeout} s; the appliance "
                                 f"is {state}; its log:\n{self.app_log.read_text()[-3000:]}"
                                 f"\npktgen's output:\n{out.decode(errors='replace')}"
                                 ) from None
        finally:
            shutil.rmtree(f"/var/run/dpdk/gen{self.tag}", ignore_errors=True)
        out = json.loads(js.read_text()) if js.exists() else None
        return p.returncode, p.stdout + p.stderr, out

    def start_pktgen(self, *args):
        """pktgen in the background: (process, its JSON summary's path, its log's path).
        Collect it with wait_pktgen."""
        js = self.tmp / f"pktgen-{uuid.uuid4().hex[:6]}.json"
        log = js.with_suffix(".log")
        p = subprocess.Popen(self.pktgen_cmd(js, *args), stdout=open(log, "w"),
                             stderr=subprocess.STDOUT)
        return p, js, log

    def wait_pktgen(self, started, timeout=120):
        p, js, log = started
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        finally:
            shutil.rmtree(f"/var/run/dpdk/gen{self.tag}", ignore_errors=True)
        out = json.loads(js.read_text()) if js.exists() else None
        return p.returncode, log.read_text(), out

    def stop_appliance(self, check=True):
        """SIGINT, then its JSON summary (None without one). An appliance that died of a
        signal before (a crash, not a test's own kill: app_killed) fails the test here, with
        its log, unless check is false."""
        rc = self.app.poll() if self.app else None
        if self.app and rc is None:
            self.app.send_signal(signal.SIGINT)
            try:
                self.app.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.app.kill()
                self.app.wait()
                raise AssertionError("the appliance ignored SIGINT for 20 s")
        shutil.rmtree(f"/var/run/dpdk/app{self.tag}", ignore_errors=True)
        if check and rc is not None and rc < 0 and not self.app_killed:
            raise AssertionError(f"the appliance died of signal {-rc} before it was stopped "
                                 f"(dmesg says where); its log:\n"
                                 f"{self.app_log.read_text()[-3000:]}")
        return json.loads(self.app_json.read_text()) if self.app_json.exists() else None

    def __enter__(self):
        try:
            self.start_appliance()
        except BaseException:
            self.stop_appliance()
            raise
        return self

    def __exit__(self, *exc):
        # With the test already failing, its own error is the one to see.
        self.stop_appliance(check=exc[0] is None)


class UtoMemifRig(MemifRig):
    """MemifRig with configs/uto.yaml and interlink-control on a channel of its own."""

    def __init__(self, tmp: Path, ctl_args=(), app_sets=()):
        super().__init__(tmp)
        self.chan = f"/dev/shm/ilpg{self.tag}-chan"
        self.ctl_args = list(ctl_args)
        self.app_sets = [a for s in app_sets for a in ("--set", s)]
        self.ctl = None

    def start_appliance(self):
        log = open(self.tmp / "control.log", "w")
        self.ctl = subprocess.Popen(["taskset", "-c", "0", str(CONTROL), "--chan", self.chan,
                                     *self.ctl_args], stdout=log, stderr=subprocess.STDOUT)
        cmd = ["taskset", "-c", self.app_cpu, str(INTERLINK), "-c",
               str(ROOT / "configs" / "uto.yaml"), "--json", str(self.app_json),
               "--set", f"name=app{self.tag}",
               "--set", f"ports.in.device=net_memif0,role=server,socket={self.sock_in},socket-abstract=no",
               "--set", f"ports.out.device=net_memif1,role=server,socket={self.sock_out},socket-abstract=no",
               "--set", f"stages.ctrl.chan={self.chan}",
               "--set", "status_interval_ms=0",
               "--set", 'eal=[--no-huge, -m, "1024", --lcores, "0,1", --log-level, "lib.eal:error"]',
               *self.app_sets]
        self.app = subprocess.Popen(cmd, stdout=open(self.app_log, "w"), stderr=subprocess.STDOUT)
        end = time.time() + 30
        while time.time() < end:
            if self.app.poll() is not None:
                raise RuntimeError("appliance exited: " + self.app_log.read_text())
            if (self.sock_in.exists() and self.sock_out.exists() and
                    self.status().get("dp_incarnation", 0) >= 1):
                return
            time.sleep(0.05)
        raise RuntimeError("no HELLO from the data plane: " + self.app_log.read_text())

    def mgmt(self, cmd, timeout=2.0):
        return control_mgmt(self.chan, cmd, self.tmp, timeout)

    def status(self):
        return control_status(self.chan, self.tmp)

    def groups(self):
        return control_groups(self.chan, self.tmp)

    def stop_appliance(self, check=True):
        try:
            return super().stop_appliance(check)
        finally:
            if self.ctl is not None and self.ctl.poll() is None:
                self.ctl.send_signal(signal.SIGTERM)
                try:
                    self.ctl.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.ctl.kill()
                    self.ctl.wait()
            for suffix in ("", ".sock", ".mgmt"):
                Path(self.chan + suffix).unlink(missing_ok=True)
