"""The emulated deployment of docs/deploy.md, brought up with scripts/deploy-netns.sh exactly as
the guide prints it: switches as bridges in namespaces, the appliance on net_af_packet ports with
interlink-control, il-kvstore replicas and a writer in host namespaces. Every PUT must be applied
on every replica (the same state hash), `status` must say so, and `down` (twice) must leave
nothing behind: no namespace, process, DPDK runtime directory, channel file or state directory.
Two deployments side by side: taking one down leaves the other running."""
import json
import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import BUILD, ROOT

KV = BUILD / "examples" / "kvstore" / "il-kvstore"
GUIDE = ROOT / "docs" / "deploy.md"

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, bridges)"),
              pytest.mark.skipif(not KV.exists(), reason=f"{KV} not built")]


def guide_commands():
    """The three commands of the guide's first sh block: {verb: argv}."""
    text = GUIDE.read_text()
    block = text[text.index("## 1. The emulated deployment"):].split("```sh\n", 1)[1]
    block = block.split("```", 1)[0]
    cmds = {}
    for line in block.splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            cmds[argv[1]] = argv
    assert set(cmds) == {"up", "status", "down"}, block
    return cmds


def run(argv, timeout=180):
    env = dict(os.environ, IL_BUILD=str(BUILD))
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def renamed(argv, name):
    return [name if a == "demo" else a for a in argv]


def status(name):
    p = run(["./scripts/deploy-netns.sh", "status", "--name", name, "--json"], timeout=60)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        return p.returncode, {}


def wait_applied(name, puts, timeout=150):
    """Until every replica applied `puts` PUTs with one state hash and the writers are done."""
    end = time.time() + timeout
    st = {}
    while time.time() < end:
        rc, st = status(name)
        procs = st.get("procs", {})
        reps = [v for k, v in procs.items() if k.startswith("replica")]
        writers = [v for k, v in procs.items() if k.startswith("writer")]
        if reps and all(r.get("applied") == puts for r in reps) and \
                len({r.get("hash") for r in reps}) == 1 and all(w.get("done") for w in writers):
            return st
        assert rc in (0, 1), st
        time.sleep(0.5)
    logs = "\n".join(f"--- {p}\n{p.read_text()[-2000:]}"
                     for p in sorted(Path(f"/run/interlink-deploy/{name}").glob("*.log")))
    raise AssertionError(f"replicas did not apply {puts} PUTs: {json.dumps(st)}\n{logs}")


def leftovers(name, pids):
    out = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += [n for n in re.findall(r"^(\S+)", ns, re.M) if n.startswith(name + "-")]
    for path in (f"/var/run/dpdk/{name}", f"/dev/shm/{name}-chan", f"/dev/shm/{name}-chan.sock",
                 f"/dev/shm/{name}-chan.mgmt", f"/run/interlink-deploy/{name}"):
        if os.path.exists(path):
            out.append(path)
    out += [f"pid {p}" for p in pids if p and os.path.exists(f"/proc/{p}")]
    return out


def test_the_guides_commands_deploy_pass_traffic_and_leave_nothing():
    cmds = guide_commands()
    name = "ilt" + uuid.uuid4().hex[:6]
    pids = []
    try:
        p = run(renamed(cmds["up"], name))
        assert p.returncode == 0, p.stdout + p.stderr
        st = wait_applied(name, 10000)  # the guide's defaults: 1 writer, 10,000 PUTs
        pids = [v["pid"] for v in st["procs"].values()]
        assert st["healthy"] and st["appliance_info"]["name"] == name
        assert st["control"]["dp_incarnation"] >= 1 and st["control"]["exclusions"] == 0
        assert sorted(st["procs"]) == ["appliance", "control", "replica1", "replica2",
                                       "replica3", "writer1"]
        for r in ("replica1", "replica2", "replica3"):
            assert st["procs"][r]["unavail_msgs"] == 0, st["procs"][r]
        p = run(renamed(cmds["status"], name))
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"deployment {name}: up" in p.stdout
        assert p.stdout.count("applied 10000") == 3 and "sent 10000, pending 0" in p.stdout
    finally:
        down = run(renamed(cmds["down"], name))
    assert down.returncode == 0, down.stdout + down.stderr
    again = run(renamed(cmds["down"], name))
    assert again.returncode == 0, again.stdout + again.stderr
    assert leftovers(name, pids) == []
    rc, st = status(name)
    assert rc == 3 and st == {"name": name, "up": False}


def test_two_deployments_side_by_side():
    a, b = ("ilt" + uuid.uuid4().hex[:6] for _ in range(2))
    up = ["./scripts/deploy-netns.sh", "up", "--replicas", "2", "--puts", "2000"]
    try:
        for name in (a, b):
            p = run(up + ["--name", name])
            assert p.returncode == 0, p.stdout + p.stderr
        # The same name twice is refused, and the refusal touches nothing.
        p = run(up + ["--name", a])
        assert p.returncode == 2 and "exists" in p.stderr
        sa, sb = wait_applied(a, 2000), wait_applied(b, 2000)
        pa = [v["pid"] for v in sa["procs"].values()]
        p = run(["./scripts/deploy-netns.sh", "down", "--name", a])
        assert p.returncode == 0, p.stdout + p.stderr
        assert leftovers(a, pa) == []
        rc, sb2 = status(b)
        assert rc == 0 and sb2["healthy"], sb2
        assert {k: v["pid"] for k, v in sb2["procs"].items() if v["running"]} == \
            {k: v["pid"] for k, v in sb["procs"].items() if v["running"]}
    finally:
        for name in (a, b):
            run(["./scripts/deploy-netns.sh", "down", "--name", name])
