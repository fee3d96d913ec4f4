"""A real etcd cluster on localhost for tests and measurements.

Every member listens on 127.0.0.1 ports picked free at start (peer and
client), keeps its data under a directory of the caller's (a pytest tmp
directory), and is stopped and removed by close(), which signals only the
processes this rig started. Members talk etcd's own protocol; the tests
talk to them through the HTTP/JSON gateway, as libil_coord does.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def have_etcd():
    return os.access(ETCD, os.X_OK)


def _free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


class EtcdCluster:
    """n members; heartbeat and election timeouts in ms (etcd's flags)."""

    def __init__(self, workdir, n=3, heartbeat_ms=25, election_ms=250, tag="t"):
        self.workdir = workdir
        self.extra_host = None  # clients also on this address (set before start())
        self.own_session = True  # each member in a session of its own (harig.py)
        self.n = n
        self.hb = heartbeat_ms
        self.el = election_ms
        ports = _free_ports(2 * n)
        self.client = [ports[2 * i] for i in range(n)]
        self.peer = [ports[2 * i + 1] for i in range(n)]
        self.names = ["%s%d" % (tag, i) for i in range(n)]
        self.procs = [None] * n
        self.logs = [None] * n
        self.initial = ",".join("%s=http://127.0.0.1:%d" % (self.names[i], self.peer[i])
                                for i in range(n))
        self.token = "il-%s-%d-%d" % (tag, os.getpid(), ports[0])

    def url(self, i):
        return "http://127.0.0.1:%d" % self.client[i]

    def endpoints(self, order=None, host=None):
        """The client URLs; host: on the extra address instead of 127.0.0.1."""
        return ",".join(self.url(i) if host is None else "http://%s:%d" % (host, self.client[i])
                        for i in (order if order is not None else range(self.n)))

    def _spawn(self, i, state):
        d = os.path.join(self.workdir, self.names[i])
        os.makedirs(d, exist_ok=True)
        self.logs[i] = open(os.path.join(self.workdir, self.names[i] + ".log"), "ab")
        args = [ETCD, "--name", self.names[i], "--data-dir", os.path.join(d, "data"),
                "--listen-client-urls", self.url(i) + (
                    ",http://%s:%d" % (self.extra_host, self.client[i]) if self.extra_host else ""),
                "--advertise-client-urls", self.url(i),
                "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer[i],
                "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer[i],
                "--initial-cluster", self.initial, "--initial-cluster-token", self.token,
                "--initial-cluster-state", state,
                "--heartbeat-interval", str(self.hb), "--election-timeout", str(self.el),
                "--log-level", "warn"]
        # A session of its own: its own autogroup (harig.py), as a service would be.
        self.procs[i] = subprocess.Popen(args, stdout=self.logs[i], stderr=subprocess.STDOUT,
                                         start_new_session=self.own_session)

    def start(self, timeout=30):
        for i in range(self.n):
            self._spawn(i, "new")
        self.wait_leader(timeout)
        return self

    def restart(self, i, timeout=30):
        """Start a member that was killed again, with its data."""
        self._spawn(i, "existing")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status(i)
            if st and int(st.get("leader", 0)) != 0:
                return
            time.sleep(0.05)
        raise RuntimeError("etcd member %d did not rejoin within %ss" % (i, timeout))

    def post(self, i, path, body, timeout=1.0):
        req = urllib.request.Request(self.url(i) + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def status(self, i):
        if self.procs[i] is None or self.procs[i].poll() is not None:
            return None
        try:
            return self.post(i, "/v3/maintenance/status", {}, timeout=0.5)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def leader(self):
        """Index of the member that leads now, or None."""
        ids = {}
        lead = None
        for i in range(self.n):
            st = self.status(i)
            if st:
                ids[st["header"]["member_id"]] = i
                if int(st.get("leader", 0)):
                    lead = st["leader"]
        return ids.get(lead)

    def wait_leader(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            i = self.leader()
            if i is not None:
                # A write must go through: the cluster serves.
                try:
                    self.post(i, "/v3/kv/put", {"key": b64("/rig/ready"), "value": b64("1")})
                    return i
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.05)
        raise RuntimeError("etcd cluster elected no leader within %ss; logs in %s"
                           % (timeout, self.workdir))

    def get(self, key, i=None):
        """Linearizable read through member i (any live one): value or None."""
        for j in ([i] if i is not None else range(self.n)):
            if self.procs[j] is None or self.procs[j].poll() is not None:
                continue
            try:
                r = self.post(j, "/v3/kv/range", {"key": b64(key)}, timeout=2.0)
            except (urllib.error.URLError, OSError):
                continue
            kvs = r.get("kvs") or []
            return base64.b64decode(kvs[0].get("value", "")).decode() if kvs else None
        raise RuntimeError("no etcd member answered a read of %s" % key)

    def signal(self, i, sig):
        if self.procs[i] is not None and self.procs[i].poll() is None:
            self.procs[i].send_signal(sig)

    def kill(self, i):
        self.signal(i, signal.SIGKILL)
        if self.procs[i] is not None:
            self.procs[i].wait(timeout=10)

    def close(self):
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(timeout=10)
            self.procs[i] = None
        for f in self.logs:
            if f:
                f.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
