#!/usr/bin/env bash
# FT-TCP benchmarks: bulk-transfer throughput through the appliance
# with FT-TCP on, as a percentage of the same transfer with FT-TCP off, per
# ack strategy and durability mode, with acks sent to the client relative to
# FT-TCP off (each row paired with FT-TCP-off runs taken alternately with its
# own); and recovery: restart time (server process start -> the
# fabricated handshake accepted), replay time per MB and the time from the
# restart to the first new byte. Real Linux TCP in
# network namespaces, as in tests/integration/test_ftcp.py. Needs root and a
# build (IL_BUILD, default ./build).
#
#   ./scripts/bench-ftcp.sh                  # 1 GB transfers, 64 MB replay
#   BYTES=$((256<<20)) REPLAY_MB=32 ./scripts/bench-ftcp.sh
#   RUNS=3 ./scripts/bench-ftcp.sh           # repeat each row, report median
#   FTLOG_NICE=-15 ./scripts/bench-ftcp.sh   # the logger (interlink-control) at a higher priority
#   FTLOG_RT=10 ./scripts/bench-ftcp.sh      # the logger thread at SCHED_FIFO 10 (--ftcp-rt-priority)
#   ONLY=recovery ./scripts/bench-ftcp.sh    # the recovery figures alone
#   ONLY=lazy/none,eager/none ./scripts/bench-ftcp.sh   # some rows (+ FT-TCP off)
#   ONLY=servers ./scripts/bench-ftcp.sh     # stock servers: nginx and redis
#
# ONLY=servers: Debian's nginx (stock settings, sendfile on) serving NGINX_BYTES
# (1 GiB) to curl and redis-benchmark (REDIS_N requests, 50 clients, SET and GET)
# with FT-TCP on and off, paired (off, on, off, on, ...; RUNS pairs, medians);
# and the stall a client sees per kill (KILLS kills of one long nginx download
# and one redis SET stream), with the restarted server's own start-up (process
# start to its listen(), from the shim's ILFTCP_TIMING marks) beside it.
# PARTS=nginx,redis,stall picks some of them (default: all); REDIS_DUR=group,none the
# durability modes of the redis rows. PARTS=stall-aof: the same stall for redis with
# its append-only file (fsynced at every write) under ILFTCP_READY=wait, its start-up
# to the shim's "ready" (the file loaded) beside it; then the same with the replayed
# reads merged (ILFTCP_REPLAY=merge).
set -euo pipefail
cd "$(dirname "$0")/.."
export IL_BUILD="${IL_BUILD:-$PWD/build}"
export BYTES="${BYTES:-$((1 << 30))}" REPLAY_MB="${REPLAY_MB:-64}" RUNS="${RUNS:-1}"
# Rows with fsync (group, sync) move less: their rate is bound by the disk.
export SYNC_BYTES="${SYNC_BYTES:-$((32 << 20))}"
export NGINX_BYTES="${NGINX_BYTES:-$((1 << 30))}" REDIS_N="${REDIS_N:-200000}" KILLS="${KILLS:-5}"
exec /usr/bin/python3 - "$@" <<'PY'
import json, os, re, signal, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path.cwd() / "tests" / "integration"))
import test_ftcp_lib as L

BYTES, REPLAY_MB, RUNS = int(os.environ["BYTES"]), int(os.environ["REPLAY_MB"]), int(os.environ["RUNS"])
SYNC_BYTES = int(os.environ["SYNC_BYTES"])
OFF = ["stages.ftcp.protect=[{address: 10.77.0.2, port: 5999}]"]  # bump in the wire only


def bulk(strategy, durability, off=False, nbytes=BYTES):
    tmp = Path(tempfile.mkdtemp(prefix="bench-ftcp-"))
    with L.Rig(tmp, strategy=strategy, durability=durability, app_sets=OFF if off else (),
               trace=False) as r:
        # A row slower than 8 MB/s (plus a minute) is reported as failed.
        limit = 60 + nbytes // 8_000_000
        c = r.client("--mode", "sink", "--bytes", str(nbytes), "--timeout", str(limit))
        try:
            out, err = c.communicate(timeout=limit + 90)
        except Exception:
            c.kill()
            out, err = c.communicate()
        s = r.stop_appliance()
    res = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"ok": False}
    if not res.get("ok"):
        raise SystemExit(f"transfer failed ({strategy}/{durability}): {out} {err[-2000:]}")
    st = s["stages"]["ftcp"]
    return {"MBps": nbytes / res["seconds"] / 1e6, "MB": nbytes / 1e6, "acks": s["ports"]["client"]["tx"],
            "clamped": st["acks_clamped"], "generated": st["acks_generated"],
            "held": st["acks_held"], "lag_us_max": st["logger_lag_us_max"]}


def median_row(fn, *a, **k):
    rows = [fn(*a, **k) for _ in range(RUNS)]
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def recovery():
    tmp = Path(tempfile.mkdtemp(prefix="bench-ftcp-rec-"))
    n = REPLAY_MB << 20
    with L.Rig(tmp, strategy="lazy", durability="none", server_env={"ILFTCP_TIMING": "1"},
               trace=False) as r:
        c = r.client("--mode", "sink", "--bytes", str(n), "--hold", "6", "--timeout", "600")
        for _ in range(6000):  # until everything is logged, then crash the server
            try:
                if json.loads(r.logger_stats.read_text())["bytes_logged"] >= n:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        time.sleep(0.2)
        r.kill_server()
        r.start_server()
        out, err = c.communicate(timeout=600)
        s = r.stop_appliance()
        log = (tmp / "server2.log").read_text()
    t = {m.group(1): int(m.group(2)) for m in re.finditer(r"ilftcp-timing (\S+) (\d+)", log)}
    res = json.loads(out.strip().splitlines()[-1])
    assert res["ok"], (out, err)
    mb = n / 1e6
    lg = json.loads(r.logger_stats.read_text())
    return {"restart_ms": (t["handshake_accepted"] - t["start"]) / 1e6,
            "listen_to_accept_ms": (t["handshake_accepted"] - t["listen"]) / 1e6,
            "first_new_byte_ms": (t["replay_done"] - t["start"]) / 1e6,
            "replay_s": (t["replay_done"] - t["handshake_accepted"]) / 1e9,
            "replay_s_per_MB": (t["replay_done"] - t["handshake_accepted"]) / 1e9 / mb,
            "build_ms": lg["replay_build_us_last"] / 1e3,
            "crash_to_handshake_ms": s["stages"]["ftcp"]["recovery_us_last"] / 1e3,
            "MB": mb}


def servers():
    import subprocess
    import ftcp_servers as S
    nb, rn, kills = int(os.environ["NGINX_BYTES"]), int(os.environ["REDIS_N"]), int(os.environ["KILLS"])
    here = Path.cwd() / "tests" / "integration"
    def rig(tmp, cmd, off=False, durability="none", env=None):
        return L.Rig(tmp, strategy="lazy", durability=durability, server_cmd=cmd,
                     app_sets=OFF if off else (), server_env=env, trace=False)

    def cpu_s(pid):
        """User + system CPU seconds of a process, all its threads (dead ones too)."""
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError):
            return 0.0

    def nginx_once(off):
        tmp = Path(tempfile.mkdtemp(prefix="bench-ftcp-nginx-"))
        with S.Www(nb) as www, rig(tmp, S.nginx_argv(tmp, www.path, L.PORT), off) as r:
            pids = r.server_pids() + [r.logger.pid]
            cpu0 = sum(cpu_s(p) for p in pids)
            t = time.monotonic()
            with open(tmp / "curl.err", "w") as ce:
                c = subprocess.Popen(["ip", "netns", "exec", r.ns_c, "curl", "-sS", "--fail", "-o",
                                      str(tmp / "dl"), f"http://{L.SERVER_IP}:{L.PORT}/{www.name}"],
                                     stdout=subprocess.DEVNULL, stderr=ce)
                _, status, ru = os.wait4(c.pid, 0)
            dt = time.monotonic() - t
            cpu = sum(cpu_s(p) for p in pids) - cpu0 + ru.ru_utime + ru.ru_stime
            ok = status == 0 and S.sha256_file(tmp / "dl") == www.sha256
            os.unlink(tmp / "dl")
            r.stop_appliance()
            time.sleep(0.3)
            try:
                lg = json.loads(r.logger_stats.read_text())
            except (OSError, ValueError):
                lg = {}
        if not ok:
            raise SystemExit(f"nginx download failed: {(tmp / 'curl.err').read_text()}")
        print(f"  {'off' if off else 'on'}: {nb / dt / 1e6:.1f} MB/s, nginx + logger + curl CPU "
              f"{cpu / (nb / 1e9):.2f} s/GB; logger: records {lg.get('records')}, writes "
              f"{lg.get('writes')}, ring_wakeups {lg.get('ring_wakeups')}; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        return nb / dt / 1e6

    def redis_once(off, durability):
        tmp = Path(tempfile.mkdtemp(prefix="bench-ftcp-redis-"))
        with rig(tmp, S.redis_argv(tmp, L.PORT), off, durability,
                 ) as r:
            # CPU time (user + system, all threads) of the server and the
            # logger's process per request: less at the mercy of other load on
            # the machine than the rate.
            cpu0 = cpu_s(r.server.pid) + cpu_s(r.logger.pid)
            b = subprocess.Popen(["ip", "netns", "exec", r.ns_c, S.REDIS_BENCH, "-h", L.SERVER_IP,
                                  "-p", str(L.PORT), "-c", "50", "-n", str(rn), "-t", "set,get",
                                  "--csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
            out, err = b.communicate(timeout=900)
            cpu1 = cpu_s(r.server.pid) + cpu_s(r.logger.pid)
            c = subprocess.CompletedProcess(b.args, b.returncode, out, err)
            r.stop_appliance()
            time.sleep(0.3)  # the logger's counters, rewritten every 200 ms
            try:
                lg = json.loads(r.logger_stats.read_text())
            except (OSError, ValueError):
                lg = {}
        rows = [l.split(",") for l in c.stdout.splitlines() if l.startswith('"SET"') or l.startswith('"GET"')]
        if c.returncode or len(rows) != 2:
            raise SystemExit(f"redis-benchmark failed: {c.stdout} {c.stderr}")
        res = {x[0].strip('"'): float(x[1].strip('"')) for x in rows}
        res["cpu_us"] = 1e6 * (cpu1 - cpu0) / (2 * rn)
        print(f"  {'off' if off else 'on'}, {durability}: SET {res['SET']:.0f}, GET {res['GET']:.0f} req/s, "
              f"server + logger CPU {res['cpu_us']:.1f} us/request; logger: sync_rounds "
              f"{lg.get('sync_rounds')} ({lg.get('sync_us', 0) / max(lg.get('sync_rounds') or 1, 1):.0f} us "
              f"of fdatasync each), fsyncs {lg.get('fsyncs')}, writes {lg.get('writes')}, "
              f"ring_wakeups {lg.get('ring_wakeups')}, reads_logged {lg.get('reads_logged')}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        return res

    def paired(fn_on, fn_off):
        offs, ons = [], []
        for _ in range(RUNS):
            offs.append(fn_off())
            ons.append(fn_on())
        return offs, ons

    parts = os.environ.get("PARTS", "nginx,redis,stall").split(",")
    rt = os.environ.get("FTLOG_RT")
    print(f"# FT-TCP with stock servers {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{RUNS} pair(s) per row (medians)"
          f"{f', the logger thread at SCHED_FIFO {rt} (--ftcp-rt-priority)' if rt else ''}",
          flush=True)
    if "nginx" in parts:
        offs, ons = paired(lambda: nginx_once(False), lambda: nginx_once(True))
        mo, mn = statistics.median(offs), statistics.median(ons)
        print(f"nginx {nb / 1e6:.0f} MB to curl (lazy, durability none): off {mo:.1f} MB/s, on {mn:.1f} MB/s"
              f" = {100 * mn / mo:.1f}% (runs off {[round(x, 1) for x in offs]}, on {[round(x, 1) for x in ons]})", flush=True)
    durs = os.environ.get("REDIS_DUR", "group,none").split(",")
    for dur in (durs if "redis" in parts else ()):
        offs, ons = paired(lambda: redis_once(False, dur), lambda: redis_once(True, dur))
        for op in ("SET", "GET"):
            mo = statistics.median(x[op] for x in offs)
            mn = statistics.median(x[op] for x in ons)
            pairs = sorted(100 * b[op] / a[op] for a, b in zip(offs, ons))
            print(f"redis-benchmark -c 50 -n {rn} {op} (lazy, durability {dur}): off {mo:.0f} req/s, "
                  f"on {mn:.0f} req/s = {100 * mn / mo:.1f}% (runs off {[round(x[op]) for x in offs]}, "
                  f"on {[round(x[op]) for x in ons]}; pairs {[round(x) for x in pairs]}%)", flush=True)
        co = statistics.median(x["cpu_us"] for x in offs)
        cn = statistics.median(x["cpu_us"] for x in ons)
        print(f"redis (durability {dur}): server + logger CPU per request off {co:.1f} us, on {cn:.1f} us "
              f"(+{cn - co:.1f} us)", flush=True)

    def stall(kind):
        tmp = Path(tempfile.mkdtemp(prefix=f"bench-ftcp-stall-{kind}-"))
        env = {"ILFTCP_TIMING": "1"}
        aof = kind.startswith("redis-aof")
        if aof:  # recovery once the file is loaded (docs/ft-tcp.md "When recovery starts")
            env["ILFTCP_READY"] = "wait"
        if kind.endswith("-merge"):  # replayed reads merged ("What the shim covers")
            env["ILFTCP_REPLAY"] = "merge"
        www = S.Www(512 << 20) if kind == "nginx" else None
        if www:
            www.__enter__()
        try:
            cmd = (S.nginx_argv(tmp, www.path, L.PORT) if www else
                   S.redis_argv(tmp, L.PORT, aof=aof))
            with rig(tmp, cmd, env=env) as r:
                if www:
                    cl = ["download", "--url", f"http://{L.SERVER_IP}:{L.PORT}/{www.name}",
                          "--rate", "16e6"]
                else:
                    cl = ["resp", "--keys", "40000", "--rate", "1500"]
                c = subprocess.Popen(["ip", "netns", "exec", r.ns_c, L.PY, str(here / "ftcp_servers.py"),
                                      *cl], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                r.wait_established(1)
                starts, killed = [], []
                for k in range(kills):
                    time.sleep(3.0)
                    killed.append(time.time())
                    r.kill_server()
                    r.start_server()
                out, err = c.communicate(timeout=600)
                summ = r.stop_appliance()
                fc = (summ or {}).get("stages", {}).get("ftcp", {})
                for n in range(2, r.server_starts + 1):
                    t = {}
                    for m in re.finditer(r"ilftcp-timing (\S+) (\d+)", (tmp / f"server{n}.log").read_text()):
                        t.setdefault(m.group(1), int(m.group(2)))
                    starts.append((t["ready" if aof else "listen"] - t["start"]) / 1e6)
        finally:
            if www:
                www.__exit__(None, None, None)
        res = json.loads(out.strip().splitlines()[-1])
        ok = res.get("ok", res.get("sha256") == (www.sha256 if www else None))
        # Per kill: the longest stall the client saw that began within 2.5 s after
        # it (a killed server's kernel may still send what it had queued for a
        # moment, so the stall can start after the kill; 0: buffers covered it),
        # however long it lasted. The client reports each stall by its end and
        # length.
        st = []
        for k in killed:
            over = [d for at, d in res["stalls"] if k - 0.05 <= res["t0"] + at - d < k + 2.5]
            st.append(1e3 * max(over, default=0.0))
        print(f"{kind}: {kills} kills, client ok {ok}; stalls seen by the client (ms): "
              f"{[round(x) for x in st]}; median {statistics.median(st) if st else 0:.0f}, "
              f"worst {max(st) if st else 0:.0f}; server start-up (process start -> "
              f"{'ready' if aof else 'listen'}, ms): "
              f"{[round(x) for x in starts]}, median {statistics.median(starts):.0f}; appliance: "
              + ", ".join(f"{n} {fc.get(n, '?')}" for n in
                          ("recoveries", "closed_window_acks", "held_in_recovery", "held_passed",
                           "drop_in_recovery")), flush=True)

    if "stall" in parts:
        stall("nginx")
        stall("redis")
    if "stall-aof" in parts:
        stall("redis-aof")
        stall("redis-aof-merge")


print(f"# FT-TCP benchmark {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
      f"{BYTES / 1e6:.0f} MB bulk transfer, {RUNS} run(s) per row (median)", flush=True)
ONLY = os.environ.get("ONLY", "")
if ONLY == "servers":
    servers()
    sys.exit(0)
ROWS = [("basic", "none"), ("lazy", "none"), ("eager", "none"),
        ("conditional", "none"), ("lazy", "group"), ("eager", "group"),
        ("conditional", "group"), ("lazy", "sync"), ("eager", "sync"),
        ("conditional", "sync")]
if ONLY == "recovery":
    ROWS = []
elif ONLY:  # e.g. ONLY=lazy/none,eager/none
    ROWS = [tuple(x.split("/")) for x in ONLY.split(",")]
# Each row is paired with FT-TCP-off runs of the same size taken right
# before its own runs (off, on, off, on, ...), so that the shared machine's
# load weighs on both sides of a ratio alike.
print(f"| configuration | MB moved | MB/s (FT-TCP off, same runs) | MB/s | % of FT-TCP off | acks to client | acks vs off | clamped | generated | held | max logger lag (us) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for strategy, dur in ROWS:
    n = BYTES if dur == "none" else SYNC_BYTES
    offs, ons, err = [], [], None
    for _ in range(RUNS):
        try:
            offs.append(bulk("lazy", "none", off=True, nbytes=n))
            ons.append(bulk(strategy, dur, nbytes=n))
        except SystemExit as e:
            err = e
            break
    if err is not None or not ons:
        print(f"| {strategy}, durability {dur} | {n / 1e6:.0f} | - | failed or too slow: {str(err)[:60]} |", flush=True)
        continue
    base = {k: statistics.median(r[k] for r in offs) for k in offs[0]}
    r = {k: statistics.median(x[k] for x in ons) for k in ons[0]}
    print(f"| {strategy}, durability {dur} | {n / 1e6:.0f} | {base['MBps']:.1f} | {r['MBps']:.1f} | "
          f"{100 * r['MBps'] / base['MBps']:.1f}% | {r['acks']:.0f} | {r['acks'] / base['acks']:.2f}x | "
          f"{r['clamped']:.0f} | {r['generated']:.0f} | {r['held']:.0f} | {r['lag_us_max']:.0f} |", flush=True)
if ONLY not in ("", "recovery"):
    sys.exit(0)
rec = median_row(recovery)
print(f"\nrecovery ({rec['MB']:.0f} MB log, logger local): restart {rec['restart_ms']:.1f} ms "
      f"(process start -> fabricated handshake accepted; "
      f"{rec['listen_to_accept_ms']:.1f} ms of it from the server's listen()), replay {rec['replay_s']:.3f} s = "
      f"{rec['replay_s_per_MB']:.4f} s/MB (accept -> last logged byte read; includes the "
      f"{rec['build_ms']:.1f} ms the logger's worker took to build the replay file), "
      f"process start -> first new byte {rec['first_new_byte_ms']:.1f} ms, "
      f"crash -> handshake in the appliance {rec['crash_to_handshake_ms']:.1f} ms")
PY
