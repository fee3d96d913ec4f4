"""libil_coord against a real 3-member etcd cluster on localhost (docs/ha.md).

The cluster is started by the tests (free ports, data under pytest's tmp
directory, removed afterwards) and driven through `il-coord`, the library's
command-line front end: compare-and-swap, leadership campaigns with leases,
watches, fail-over to another endpoint when the etcd leader is killed, and a
member cut off from the majority refusing to commit.
"""
import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from conftest import BUILD
from etcdrig import EtcdCluster, have_etcd

IL_COORD = BUILD / "lib" / "coord" / "il-coord"


@pytest.fixture(scope="module", autouse=True)
def need_tools():
    if not have_etcd():
        pytest.fail("etcd is not installed: run scripts/install-deps.sh (Debian etcd-server)")
    if not IL_COORD.exists():
        pytest.fail(f"{IL_COORD} is missing: build first (./scripts/build.sh)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EtcdCluster(str(tmp_path_factory.mktemp("etcd")), tag="m" + uuid.uuid4().hex[:6])
    c.start()
    yield c
    c.close()


@pytest.fixture
def own_cluster(tmp_path):
    """A cluster a test may break."""
    c = EtcdCluster(str(tmp_path / "etcd"), tag="o" + uuid.uuid4().hex[:6])
    c.start()
    yield c
    c.close()


def coord(endpoints, *args, timeout=20, deadline_ms=None):
    cmd = [str(IL_COORD), "-e", endpoints]
    if deadline_ms:
        cmd += ["--deadline-ms", str(deadline_ms)]
    p = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return p.returncode, lines, p.stderr


def first(lines, result):
    return next((x for x in lines if x["result"] == result), None)


def key(name):
    return "/il-test/%s/%s" % (uuid.uuid4().hex[:8], name)


def test_cas_succeeds_and_fails_as_it_should(cluster):
    eps, k = cluster.endpoints(), key("cas")
    # Create only if absent.
    rc, out, err = coord(eps, "cas", k, 0, "v1")
    assert rc == 0, (out, err)
    rev1 = first(out, "ok")["rev"]
    rc, out, _ = coord(eps, "cas", k, 0, "again")
    assert rc == 1 and first(out, "failed")["value"] == "v1"
    # Only on the revision it was read at.
    rc, out, _ = coord(eps, "cas", k, rev1 - 1, "stale")
    assert rc == 1
    cur = first(out, "failed")
    assert cur["value"] == "v1" and cur["mod_rev"] == rev1
    rc, out, _ = coord(eps, "cas", k, rev1, "v2")
    assert rc == 0
    rev2 = first(out, "ok")["rev"]
    assert rev2 > rev1
    # The loser of a race on one revision: exactly one of two writers wins.
    procs = [subprocess.Popen([str(IL_COORD), "-e", eps, "cas", k, str(rev2), "w%d" % i],
                              stdout=subprocess.PIPE, text=True) for i in range(2)]
    codes = sorted(p.wait(timeout=20) for p in procs)
    assert codes == [0, 1]
    assert cluster.get(k) in ("w0", "w1")
    rc, out, _ = coord(eps, "get", k)
    assert rc == 0 and first(out, "found")["mod_rev"] > rev2


def start_campaign(eps, k, value, *extra):
    return subprocess.Popen([str(IL_COORD), "-e", eps, "campaign", k, value] +
                            [str(x) for x in extra], stdout=subprocess.PIPE, text=True)


def read_lines(p, until, want=None):
    """Lines of a campaigner until it exits or `until` (monotonic) passes."""
    out = []
    os.set_blocking(p.stdout.fileno(), False)
    while time.monotonic() < until:
        line = p.stdout.readline()
        if line:
            out.append(json.loads(line))
            if want and out[-1]["result"] == want:
                break
            continue
        if p.poll() is not None:
            break
        time.sleep(0.01)
    return out


def test_two_campaigners_exactly_one_leader(cluster):
    eps = cluster.endpoints()
    for rnd in range(3):
        k = key("leader")
        a = start_campaign(eps, k, "A", "--ttl", 3, "--hold-ms", 1500)
        b = start_campaign(eps, k, "B", "--ttl", 3, "--hold-ms", 1500)
        try:
            la = read_lines(a, time.monotonic() + 10, "leader")
            lb = read_lines(b, time.monotonic() + 10, "leader")
        finally:
            for p in (a, b):
                p.wait(timeout=20)
            la += [json.loads(x) for x in a.stdout.read().splitlines() if x]
            lb += [json.loads(x) for x in b.stdout.read().splitlines() if x]
        lead_a, lead_b = first(la, "leader"), first(lb, "leader")
        # Both lead in the end (the first resigns after 1.5 s), one after
        # the other: never both at once.
        assert lead_a and lead_b, (la, lb)
        one, two = sorted([lead_a, lead_b], key=lambda x: x["t_ms"])
        assert two["t_ms"] >= one["t_ms"] + 1500 - 5, (one, two)
        loser = lb if one is lead_a else la
        assert first(loser, "follower")["value"] == one["value"]
        assert two["rev"] > one["rev"], "the leader key's create revision is the fencing number"


def test_lease_expiry_hands_leadership_over(cluster):
    eps, k = cluster.endpoints(), key("lapse")
    # A leads, then stops renewing its 1 s lease but stays up; B waits.
    a = start_campaign(eps, k, "A", "--ttl", 1, "--hold-ms", 6000, "--lapse-ms", 200)
    la = read_lines(a, time.monotonic() + 10, "leader")
    assert first(la, "leader"), la
    b = start_campaign(eps, k, "B", "--ttl", 1, "--hold-ms", 500)
    try:
        lb = read_lines(b, time.monotonic() + 15, "leader")
        la += read_lines(a, time.monotonic() + 1, "lapse")
    finally:
        b.wait(timeout=20)
        a.send_signal(signal.SIGTERM)
        a.wait(timeout=20)
    lapse, lead_b = first(la, "lapse"), first(lb, "leader")
    assert lapse and lead_b, (la, lb)
    elect = lead_b["t_ms"] - lapse["last_keepalive_ms"]
    # Not before the lease's TTL has run out since A's last renewal, and
    # not long after (etcd checks for expired leases every 500 ms).
    assert 1000 - 50 <= elect <= 1000 + 3000, elect
    print("elect after lease expiry (TTL 1 s): %.0f ms after the last keepalive" % elect)


def test_etcd_leader_killed_client_fails_over(own_cluster):
    c = own_cluster
    lead = c.leader()
    order = [lead] + [i for i in range(c.n) if i != lead]
    eps, k = c.endpoints(order), key("failover")
    rc, out, _ = coord(eps, "cas", k, 0, "before")
    assert rc == 0
    rev = first(out, "ok")["rev"]
    # A watch on the key, on the leader first.
    w = subprocess.Popen([str(IL_COORD), "-e", eps, "watch", k, "--count", "1",
                          "--timeout-ms", "15000"], stdout=subprocess.PIPE, text=True)
    assert read_lines(w, time.monotonic() + 10, "watching")
    time.sleep(0.3)
    c.kill(lead)
    # The client starts at the dead leader and must commit elsewhere.
    t0 = time.monotonic()
    rc, out, err = coord(eps, "cas", k, rev, "after", deadline_ms=5000)
    took = time.monotonic() - t0
    assert rc == 0, (out, err)
    stats = first(out, "stats")
    assert stats["failovers"] >= 1 and stats["endpoint"] != c.url(lead), stats
    assert c.get(k) == "after"
    lw = read_lines(w, time.monotonic() + 15, "done")
    w.wait(timeout=20)
    put = first(lw, "put")
    assert put and put["value"] == "after", lw
    done = first(lw, "done")
    assert done and done["reconnects"] >= 1, lw
    print("txn after killing the etcd leader committed in %.0f ms" % (took * 1000))


def test_minority_member_refuses_commits(own_cluster):
    c = own_cluster
    lead = c.leader()
    alone = next(i for i in range(c.n) if i != lead)
    k = key("minority")
    rc, out, _ = coord(c.endpoints(), "cas", k, 0, "v1")
    assert rc == 0
    rev = first(out, "ok")["rev"]
    others = [i for i in range(c.n) if i != alone]
    for i in others:
        c.kill(i)
    # A follower cut off from the majority: no read, no commit.
    t0 = time.monotonic()
    rc, out, _ = coord(c.url(alone), "cas", k, rev, "minority", deadline_ms=2000)
    assert rc == 2 and first(out, "error")["rc"] == -1, out
    assert time.monotonic() - t0 < 10
    rc, out, _ = coord(c.url(alone), "get", k, deadline_ms=1000)
    assert rc == 2, out
    # The majority back: the refused write never happened, new ones commit.
    for i in others:
        c.restart(i)
    assert c.get(k) == "v1"
    rc, out, _ = coord(c.endpoints(), "cas", k, rev, "v2")
    assert rc == 0 and c.get(k) == "v2"
