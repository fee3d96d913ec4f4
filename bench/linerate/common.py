"""What the harness's parts share: logging, waiting for processes, DPDK runtime directories,
the DPDK telemetry socket and the CPUs each party runs on."""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TESTPMD = shutil.which("dpdk-testpmd") or "/usr/bin/dpdk-testpmd"


class Cfg:
    """Set once by run.py from its options."""
    build = ROOT / "build"
    gen_cpu, dut_cpu, sink_cpu = "0", "1", None
    nice = []  # ["nice", "-n", "-10"] with --nice
    huge = False  # DPDK's memory in hugepages (profile.py --huge), not --no-huge


def no_huge():
    """The EAL option for DPDK's memory: 4 KB pages (--no-huge), unless Cfg.huge."""
    return [] if Cfg.huge else ["--no-huge"]


def log(msg):
    print(msg, flush=True)


def rm_prefix(prefix):
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def wait_for(cond, proc, what, timeout=30, logp=None):
    """Poll cond() until true; fail early when proc exits (its log in the message)."""
    t0 = time.time()
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: " +
                               (Path(logp).read_text()[-2000:] if logp else ""))
        if time.time() - t0 > timeout:
            raise RuntimeError(f"{what} did not come up in {timeout} s: " +
                               (Path(logp).read_text()[-2000:] if logp else ""))
        time.sleep(0.05)


def log_has(path, text):
    p = Path(path)
    return p.exists() and text in p.read_text(errors="replace")


def telemetry(prefix, cmd, timeout=5):
    """One DPDK telemetry command against the process with this file prefix."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    try:
        s.connect(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2")
        s.recv(16384)  # the greeting
        s.send(cmd.encode())
        return json.loads(s.recv(1 << 20).decode())[cmd.split(",")[0]]
    finally:
        s.close()


def port_ids(prefix):
    """{device name: ethdev port id} of a running DPDK process."""
    return {telemetry(prefix, f"/ethdev/info,{p}")["name"]: p
            for p in telemetry(prefix, "/ethdev/list")}


def port_stats(prefix, port):
    return telemetry(prefix, f"/ethdev/stats,{port}")


def cpus():
    return sorted(os.sched_getaffinity(0))
