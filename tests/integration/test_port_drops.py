"""Every drop is counted, including the kernel's: a net_af_packet port whose
ring overflows loses frames in the kernel, which DPDK 22.11's PMD does not
report (imissed stays 0). The appliance reads them from the PMD's sockets
(PACKET_STATISTICS) into rx_missed. Here the appliance is stopped (SIGSTOP)
while a host sends more broadcast frames than its 64-frame ring holds; after
SIGCONT, rx + rx_missed must account for every frame sent."""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from netns import HostPair

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = Path(os.environ.get("IL_BUILD", ROOT / "build")).resolve()
INTERLINK = BUILD / "dataplane" / "interlink"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, af_packet)"),
    pytest.mark.skipif(not INTERLINK.exists(), reason="appliance not built"),
]

SEND = ("import socket\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "s.setsockopt(socket.SOL_SOCKET,socket.SO_BROADCAST,1)\n"
        "for i in range({n}):\n"
        "  s.sendto(b'x'*200,('{dst}',9))\n")


def test_af_packet_ring_overflow_is_counted(tmp_path):
    n, ring = 2000, 64
    with HostPair("pd" + uuid.uuid4().hex[:6], nic_rate=None) as hp:
        dev_a, dev_b = hp.devices(framecnt=ring)
        js = tmp_path / "app.json"
        app = subprocess.Popen(
            [str(INTERLINK), "-c", str(ROOT / "configs" / "ftcp.yaml"), "-q", "--json", str(js),
             "--set", f"name={hp.tag}",
             "--set", f"ports.client.device={dev_a}", "--set", f"ports.server.device={dev_b}",
             "--set", f"stages.ftcp.ring=/dev/shm/il-{hp.tag}",
             "--set", "stages.ftcp.protect=[{address: 10.9.9.9, port: 1}]",
             "--set", 'eal=[--no-huge, -m, "512", --lcores, "0,1", --log-level, "lib.eal:error"]'],
            stdout=open(tmp_path / "app.log", "w"), stderr=subprocess.STDOUT)
        try:
            time.sleep(1.5)
            assert app.poll() is None, (tmp_path / "app.log").read_text()
            bcast = hp.ip_a.rsplit(".", 1)[0] + ".255"
            os.kill(app.pid, signal.SIGSTOP)
            try:
                hp.run("A", "/usr/bin/python3", "-c", SEND.format(n=n, dst=bcast))
                time.sleep(0.3)
            finally:
                os.kill(app.pid, signal.SIGCONT)
            time.sleep(1.0)
            app.send_signal(signal.SIGINT)
            app.wait(timeout=20)
        finally:
            if app.poll() is None:
                app.kill()
            Path(f"/dev/shm/il-{hp.tag}").unlink(missing_ok=True)
            shutil.rmtree(f"/var/run/dpdk/{hp.tag}", ignore_errors=True)
    port = json.loads(js.read_text())["ports"]["client"]
    # Other frames (the host's own ARP or IGMP) may be in there too.
    assert port["rx_missed"] >= n - 2 * ring - 32, port
    assert port["rx"] + port["rx_missed"] >= n, port
    assert port["rx"] <= 2 * ring + 64, port
