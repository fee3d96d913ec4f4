"""The Scapy layers as a user gets them (docs/scapy-wireshark.md): the documented install
commands into a fresh venv, offline; the documented ten-line test on a capture of the real
appliance (passing, and failing on a capture with a gap); sniff() decoding a live datagram."""
import os
import re
import shutil
import subprocess
import uuid

import pytest
from scapy.utils import wrpcap

from conftest import ROOT
from test_appliance import data_frame

DOC = ROOT / "docs" / "scapy-wireshark.md"


def doc_block(after, lang):
    """The first ```lang block after a heading or sentence of the doc."""
    text = DOC.read_text()
    rest = text[text.index(after):]
    return rest.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv made by the doc's commands, with python/ copied as the doc's ./python."""
    work = tmp_path_factory.mktemp("pkg")
    shutil.copytree(ROOT / "python", work / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = venv_env()
    env["PIP_NO_INDEX"] = "1"  # nothing may come from the network
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    home = work / "home"
    home.mkdir()
    env["HOME"] = str(home)
    for line in doc_block("## The Scapy package", "sh").splitlines():
        if line.strip():
            # The doc says python3: the system interpreter, which Debian's packages serve.
            cmd = line.replace("python3 ", "/usr/bin/python3 ", 1) if line.startswith("python3 ") \
                else line
            p = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True,
                               text=True, timeout=300)
            assert p.returncode == 0, f"{cmd}\n{p.stdout}{p.stderr}"
    py = home / "il-venv" / "bin" / "python"
    assert py.exists()
    return work, py


def venv_env():
    """The environment without anything that would find the tree's copy of the package."""
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(k, None)
    return env


def test_installed_package_is_the_one_imported(venv):
    work, py = venv
    p = subprocess.run([str(py), "-c", "import interlink_scapy, scapy; "
                        "print(interlink_scapy.__file__); print(interlink_scapy.__version__)"],
                       cwd="/", env=venv_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    path, version = p.stdout.split()
    assert path.startswith(str(py.parent.parent)) and "site-packages" in path, path
    assert version == re.search(r'^version = "(.*)"', (ROOT / "python" / "pyproject.toml")
                                .read_text(), re.M)[1]


def test_the_documented_ten_line_test_runs_on_a_capture(venv, run_pcap):
    work, py = venv
    code = doc_block("### Your own test in ten lines", "python")
    assert len(code.strip().splitlines()) <= 10
    user = work / "user"
    user.mkdir()
    (user / "test_my_capture.py").write_text(code)
    frames = [data_frame(1, 1 + i % 2, i // 2 + 1, [b"m%d" % j for j in range(1 + i % 3)])
              for i in range(12)]
    r = run_pcap(frames)
    assert len(r.out) == 12

    def run_user_test(pkts):
        wrpcap(str(user / "capture.pcap"), pkts)
        return subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "test_my_capture.py"], cwd=user, env=venv_env(),
                              capture_output=True, text=True, timeout=120)

    ok = run_user_test(r.out)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 passed" in ok.stdout
    # The same test must catch a lost frame (a gap in the global sequence)...
    gap = run_user_test(r.out[:5] + r.out[6:])
    assert gap.returncode == 1 and "1 failed" in gap.stdout, gap.stdout
    # ... and a frame the appliance did not stamp.
    raw = run_user_test(frames)
    assert raw.returncode == 1 and "1 failed" in raw.stdout, raw.stdout


SNIFF = """
import socket, sys
from scapy.all import sniff
from interlink_scapy import Interlink, il_data

def send():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(bytes(il_data(4, 3, 7, [b"hi", b"there"])), ("127.0.0.1", 7400))

pkts = sniff(iface="lo", filter="udp dst port 7400", count=1, timeout=30, started_callback=send)
il = pkts[0][Interlink]
print(il.type, il.group_id, il.sender_id, il.sender_seq, b",".join(m.data for m in il.msgs).decode())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace, sniffing)")
def test_sniff_decodes_live_traffic(venv):
    work, py = venv
    ns = "ilsc" + uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        p = subprocess.run(["ip", "netns", "exec", ns, str(py), "-c", SNIFF], cwd="/",
                           env=venv_env(), capture_output=True, text=True, timeout=90)
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["1", "4", "3", "7", "hi,there"]
