"""Stock servers under FT-TCP (no tests here; test_ftcp_servers.py has them): Debian's
nginx, redis-server and `python3 -m http.server`, each with its own configuration, pid,
log and data paths under the test's directory (never the system service's), for
test_ftcp_lib.Rig(server_cmd=...).

Run as a program, this file is also two clients:
  resp --host H --port P --keys N --seed S [--rate ops/s]
      SETs N keys on one connection (a GET of an earlier key after every third), then
      GETs them all back: every reply checked, every acknowledged SET must be there.
  download --url http://H:P/PATH
      a plain HTTP/1.1 GET; prints the body's SHA-256, its length and the longest gap
      between two reads once bytes flowed (the stall a client saw).
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

NGINX, REDIS = "/usr/sbin/nginx", "/usr/bin/redis-server"
REDIS_CLI, REDIS_BENCH = "/usr/bin/redis-cli", "/usr/bin/redis-benchmark"
PY = "/usr/bin/python3"


class Www:
    """A document root nginx's workers (www-data) can read: a directory of its own under
    /tmp (the test's directory is root-only), with one file of `size` pseudo-random
    bytes; removed on exit."""

    def __init__(self, size, name="big.bin", seed=7):
        self.size, self.name, self.seed = size, name, seed

    def __enter__(self):
        self.path = Path(tempfile.mkdtemp(prefix="ilft-www-"))
        os.chmod(self.path, 0o755)
        h, rnd = hashlib.sha256(), random.Random(self.seed)
        block = rnd.randbytes(1 << 20)
        with open(self.path / self.name, "wb") as f:
            for o in range(0, self.size, len(block)):
                piece = block[:min(len(block), self.size - o)]
                # Vary each MiB so a misplaced block changes the checksum.
                piece = o.to_bytes(8, "little") + piece[8:]
                f.write(piece)
                h.update(piece)
        os.chmod(self.path / self.name, 0o644)
        self.sha256 = h.hexdigest()
        (self.path / "tmp").mkdir()
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def nginx_argv(tmp: Path, root: Path, port: int):
    """nginx with Debian's stock settings (/etc/nginx/nginx.conf: user www-data,
    worker_processes auto, sendfile on, tcp_nopush on, gzip on), in the foreground, with
    its pid, logs and temporary files under tmp and root."""
    conf = tmp / "nginx.conf"
    t = root / "tmp"
    conf.write_text(f"""user www-data;
worker_processes auto;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log notice;
daemon off;
events {{
	worker_connections 768;
}}
http {{
	sendfile on;
	tcp_nopush on;
	types_hash_max_size 2048;
	include /etc/nginx/mime.types;
	default_type application/octet-stream;
	access_log {tmp}/nginx-access.log;
	gzip on;
	client_body_temp_path {t}/body;
	proxy_temp_path {t}/proxy;
	fastcgi_temp_path {t}/fastcgi;
	uwsgi_temp_path {t}/uwsgi;
	scgi_temp_path {t}/scgi;
	server {{
		listen {port};
		root {root};
	}}
}}
""")
    return [NGINX, "-c", str(conf), "-p", str(tmp), "-e", str(tmp / "nginx-early.log")]


def redis_argv(tmp: Path, port: int, aof=False, load_delay_us=0):
    """redis-server in the foreground, no persistence (the state after a crash is what
    replay rebuilds) unless aof (an append-only file fsynced at every write), its pid,
    log and directory under tmp. load_delay_us: redis's own `key-load-delay`, a pause per
    key while it loads its file at start (a restart that takes a while to be ready)."""
    d = tmp / "redis"
    d.mkdir(exist_ok=True)
    conf = tmp / "redis.conf"
    conf.write_text(f"""port {port}
bind 0.0.0.0
protected-mode no
daemonize no
supervised no
pidfile {tmp}/redis.pid
logfile {tmp}/redis.log
dir {d}
save ""
""" + ("appendonly yes\nappendfsync always\n" if aof else "appendonly no\n")
                    + (f"key-load-delay {load_delay_us}\n" if load_delay_us else ""))
    return [REDIS, str(conf)]


def http_server_argv(root: Path, port: int, bind=None):
    """Python's stock file server; bind "::" makes it dual-stack."""
    return [PY, "-m", "http.server", str(port), "--directory", str(root),
            *(["--bind", bind] if bind else [])]


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ---- clients ------------------------------------------------------------------
class Resp:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=60)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = f"*{len(args)}\r\n".encode()
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += f"${len(a)}\r\n".encode() + a + b"\r\n"
        self.s.sendall(out)
        line = self.f.readline()
        if not line:
            raise EOFError("connection closed")
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            body = self.f.read(n + 2)
            return body[:-2].decode()
        if line[:1] == b"-":
            raise RuntimeError(line.decode().strip())
        return line[1:].decode().strip()


def resp_main(a):
    r, rnd = Resp(a.host, a.port), random.Random(a.seed)
    acked, errors, t0, slow = {}, [], time.time(), []
    pace = 1 / a.rate if a.rate else 0
    try:
        for i in range(a.keys):
            k, v = f"ft:{a.seed}:{i}", f"v{i}-" + "x" * rnd.randint(1, 200)
            t = time.monotonic()
            if r.cmd("SET", k, v) != "OK":
                errors.append(("SET", k))
            t = time.monotonic() - t
            if t > 0.01:  # a stall the client saw (a kill): when and how long
                slow.append((round(time.time() - t0, 3), round(t, 4)))
            acked[k] = v
            if i % 3 == 2:
                q = rnd.choice(list(acked))
                got = r.cmd("GET", q)
                if got != acked[q]:
                    errors.append(("GET", q, got))
            if pace:
                time.sleep(pace)
        for k, v in acked.items():
            got = r.cmd("GET", k)
            if got != v:
                errors.append(("final GET", k, got))
    except Exception as e:  # noqa: BLE001 - reported, the test fails on it
        errors.append(("exception", repr(e)))
    res = {"ok": not errors, "acked": len(acked), "errors": errors[:10],
           "seconds": time.time() - t0, "stalls": slow, "t0": t0}
    print(json.dumps(res), flush=True)
    return 0 if res["ok"] else 1


def stale_main(a):
    """One connection SETs a key and closes; a second GETs it, says "ready" and waits for
    a line on stdin (the test kills and restarts the server meanwhile), then GETs it
    again on the same connection: the outcome is printed. Without persistence the
    second connection's replay (its first GET) finds the key gone, since the closed
    connection is not replayed."""
    key = f"stale:{a.seed}"
    w = Resp(a.host, a.port)
    assert w.cmd("SET", key, "value") == "OK"
    w.s.close()
    r = Resp(a.host, a.port)
    assert r.cmd("GET", key) == "value"
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    r.s.settimeout(a.wait)
    try:
        got = r.cmd("GET", key)
        outcome = "value" if got == "value" else f"other: {got!r}"
    except (ConnectionResetError, EOFError):
        outcome = "reset"
    except socket.timeout:
        outcome = "timeout"
    except Exception as e:  # noqa: BLE001 - a reply that is not RESP: what the test must not see
        outcome = f"garbage: {e!r}"
    print(json.dumps({"outcome": outcome, "seconds": round(time.monotonic() - t0, 3)}),
          flush=True)
    return 0


def download_main(a):
    """GET a.url; the longest gap between two reads once the body flows."""
    assert a.url.startswith("http://")
    hostport, _, path = a.url[7:].partition("/")
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    # A small receive buffer: a paced reader would otherwise read through a
    # server outage from its buffer and never see the stall.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 << 10)
    s.settimeout(60)
    s.connect((host, int(port)))
    s.sendall(f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n".encode())
    buf, h, total, gap, last, t0 = b"", hashlib.sha256(), 0, 0.0, None, time.time()
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    h.update(body)
    total = len(body)
    last = time.monotonic()
    gap_at, stalls = 0, []
    while True:
        d = s.recv(1 << 20)
        now = time.monotonic()
        if not d:
            break
        if now - last > 0.01:  # a stall the client saw (a kill): when and how long
            stalls.append((round(time.time() - t0, 3), round(now - last, 4)))
        if now - last > gap:
            gap, gap_at = now - last, total
        last = now
        h.update(d)
        total += len(d)
        if a.rate:  # pace the reader: the download lasts long enough to kill into
            time.sleep(len(d) / a.rate)
            last = time.monotonic()
    print(json.dumps({"status": head.split(b"\r\n")[0].decode(), "sha256": h.hexdigest(),
                      "bytes": total, "max_gap_s": gap, "gap_at": gap_at, "stalls": stalls,
                      "t0": t0,
                      "seconds": time.time() - t0}), flush=True)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["resp", "stale", "download"])
    ap.add_argument("--host", default="10.77.0.2")
    ap.add_argument("--port", type=int, default=5001)
    ap.add_argument("--keys", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--url", default="")
    ap.add_argument("--wait", type=float, default=30)
    a = ap.parse_args()
    sys.exit({"resp": resp_main, "stale": stale_main, "download": download_main}[a.role](a))
