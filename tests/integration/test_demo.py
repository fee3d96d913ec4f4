"""The README's demo command, twice at once: each demo uses file prefixes and memif sockets of its
own, both pass, and the one that ends first removes only its own runtime files while the other
still runs. (With the fixed names of before, the second one failed with "EAL initialisation
failed" and its clean-up removed the first one's runtime directory.)"""
import os
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the demo runs as root")

BANNER = re.compile(r"== interlink demo (\S+): .*file prefix (\S+)\),.*file prefix (\S+)\), "
                    r"memif sockets in (\S+) ==")


def readme_commands():
    """The README's two set-up commands, as printed (without their comments)."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## Set-up: two commands"):].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].split() for line in block.splitlines() if line.strip()]


def test_readme_commands_run_as_printed_by_root():
    """A fresh Debian machine run as root has no sudo: the commands must not need it, and must
    be the scripts CI and the demo test run."""
    assert readme_commands() == [["./scripts/demo.sh"], ["./scripts/test.sh"]]
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec ./scripts/test.sh")


def readline(p, deadline):
    """One line of p's output, or None at the deadline."""
    while time.time() < deadline:
        if select.select([p.stdout], [], [], 0.5)[0]:
            return p.stdout.readline()
        if p.poll() is not None:
            return p.stdout.readline()
    return None


def test_two_demos_side_by_side():
    # The long one: about 15 s of traffic at 100,000 messages/s.
    demo = readme_commands()[0]
    long = subprocess.Popen(demo + ["--count", "1500000", "--rate", "100000"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    out = []
    try:
        deadline = time.time() + 300  # it may have to build first
        m = None
        while m is None:
            line = readline(long, deadline)
            assert line, "the first demo printed no banner:\n" + "".join(out)
            out.append(line)
            m = BANNER.search(line)
        _, app_prefix, gen_prefix, tmp = m.groups()
        runtime = [Path(f"/var/run/dpdk/{app_prefix}"), Path(tmp)]
        # Wait until its pktgen runs too (its status lines come from the pktgen).
        while not any(x.startswith("[pktgen]") for x in out):
            line = readline(long, deadline)
            assert line, "the first demo's pktgen did not start:\n" + "".join(out)
            out.append(line)

        short = subprocess.run(demo + ["--count", "100000", "--rate", "200000"],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert short.returncode == 0, short.stdout + short.stderr
        assert "demo: PASS" in short.stdout
        m2 = BANNER.search(short.stdout)
        assert m2 and m2.group(2) != app_prefix and m2.group(4) != tmp
        for path in (f"/var/run/dpdk/{m2.group(2)}", f"/var/run/dpdk/{m2.group(3)}",
                     m2.group(4)):
            assert not os.path.exists(path), f"the second demo left {path} behind"
        # The first one still runs, its files untouched by the second one's clean-up.
        assert long.poll() is None, "the first demo ended before the second: " + "".join(out)
        for path in runtime:
            assert path.exists(), f"the second demo's clean-up removed {path}"

        rest, _ = long.communicate(timeout=300)
        out.append(rest)
    finally:
        if long.poll() is None:
            os.killpg(long.pid, 15)
            long.wait(timeout=30)
    text = "".join(out)
    assert long.returncode == 0, text
    assert "demo: PASS" in text
    for path in runtime + [Path(f"/var/run/dpdk/{gen_prefix}")]:
        assert not path.exists(), f"the first demo left {path} behind"
