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
import shutil
import signal
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


def guide_commands(section="## 1. The emulated deployment"):
    """The three commands of the first sh block of a section of the guide: {verb: argv}."""
    text = GUIDE.read_text()
    block = text[text.index(section):].split("```sh\n", 1)[1]
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
    paths = [f"/run/interlink-deploy/{name}", f"/var/lib/interlink-deploy/{name}"]
    for x in ("", "-a", "-b"):
        paths += [f"/var/run/dpdk/{name}{x}"] + [f"/dev/shm/{name}{x}-chan{sfx}"
                                                for sfx in ("", ".sock", ".mgmt")]
    for path in paths:
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


def test_the_guides_pair_deploys_takes_over_and_leaves_nothing():
    """docs/deploy.md section 3a: `up --pair` (etcd x3 on a management network, two appliances
    with their control processes, replicas, a writer), `status` with the roles and epochs; the
    active appliance (both its processes) SIGKILLed while the writer writes: the standby takes
    over in a new epoch and every replica applies every PUT once (one state hash); `down` twice
    leaves nothing."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed")
    cmds = guide_commands("### The emulated pair")
    assert "--pair" in cmds["up"]
    name = "ilt" + uuid.uuid4().hex[:6]
    pids = []
    try:
        p = run(renamed(cmds["up"], name))
        assert p.returncode == 0, p.stdout + p.stderr
        rc, st = status(name)
        # `up` returns once b is a's standby; on a loaded machine the pair may change hands on
        # its own after that (a data plane descheduled past the detection settings), so the
        # roles are taken from status, not assumed.
        assert rc == 0 and st["healthy"] and st["active"] in ("a", "b"), st
        act = st["active"]
        sby = "b" if act == "a" else "a"
        assert st["pair"][sby]["role"] == "standby" and st["pair"][sby]["owner"] == act, st
        pids = [v["pid"] for v in st["procs"].values()]
        p = run(renamed(cmds["status"], name))
        assert p.returncode == 0, p.stdout + p.stderr
        lines = {m.group(1): m.group(2) for m in re.finditer(r"control-([ab]) .* running +(.*)",
                                                             p.stdout)}
        owner = re.search(r"owner ([ab])", lines["a"]).group(1)
        assert re.match(rf"active, epoch \d+, owner {owner}", lines[owner]), p.stdout
        assert re.match(rf"standby, epoch 0, owner {owner}", lines["b" if owner == "a" else "a"]), \
            p.stdout
        # The writer writes 10,000 PUTs in 5 s: fail the active half-way.
        end = time.time() + 60
        while time.time() < end and min(
                st["procs"][r].get("applied", 0) for r in ("replica1", "replica2", "replica3")) < 2000:
            time.sleep(0.2)
            rc, st = status(name)
        while time.time() < end and st.get("active") not in ("a", "b"):
            time.sleep(0.2)  # a takeover of its own under way: until it is done
            rc, st = status(name)
        act = st["active"]
        assert act in ("a", "b"), st
        sby = "b" if act == "a" else "a"
        epoch = int(st["pair"][act]["epoch"])
        for what in (f"appliance-{act}", f"control-{act}"):
            os.kill(st["procs"][what]["pid"], signal.SIGKILL)
        end = time.time() + 30
        while time.time() < end:
            rc, st = status(name)
            h = st.get("pair", {}).get(sby, {})
            if h.get("role") == "active" and int(h.get("epoch", 0)) != epoch:
                break
            time.sleep(0.2)
        assert st["active"] == sby and st["pair"][sby]["owner"] == sby, st
        assert int(st["pair"][sby]["epoch"]) != epoch, st
        assert rc == 1 and not st["healthy"]  # one is down: degraded, and says so
        st = wait_applied(name, 10000)
        for r in ("replica1", "replica2", "replica3"):
            assert st["procs"][r]["cut_incomplete"] == 0 and st["procs"][r]["epochs"] >= 1, st
    finally:
        down = run(renamed(cmds["down"], name))
    assert down.returncode == 0, down.stdout + down.stderr
    again = run(renamed(cmds["down"], name))
    assert again.returncode == 0, again.stdout + again.stderr
    assert leftovers(name, pids) == []
