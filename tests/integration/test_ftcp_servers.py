"""FT-TCP with the servers people run, as Debian ships them: nginx (its stock settings:
workers as www-data, sendfile on), redis-server, `python3 -m http.server` (dual-stack by
default). Each is SIGKILLed mid-transfer (nginx: master and workers at once) and
restarted under the shim; the stock clients (curl, redis-cli, redis-benchmark) must see
no error and get every byte right. The rig is test_ftcp_lib.Rig (client and server in
network namespaces, the appliance between them), each server with its own config, pid
and log paths under the test's directory.
"""
import json
import os
import random
import re
import subprocess
import time

import pytest

from ftcp_servers import (NGINX, REDIS, REDIS_BENCH, REDIS_CLI, Www, http_server_argv,
                          nginx_argv, redis_argv, sha256_file)
from test_ftcp import assert_capture_clean
from test_ftcp_lib import (CONTROL, EVSERVER, INTERLINK, PORT, PY, SERVER_IP, SHIM, V6, Rig,
                           crash_seed, sh)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, AF_PACKET)"),
    pytest.mark.skipif(not (CONTROL.exists() and SHIM.exists() and INTERLINK.exists()),
                       reason="FT-TCP binaries not built"),
]
HERE = os.path.dirname(os.path.abspath(__file__))
needs = lambda *p: pytest.mark.skipif(not all(os.path.exists(x) for x in p),  # noqa: E731
                                      reason=f"{p} not installed (scripts/install-deps.sh)")


def curl(r, url, out, rate, timeout=120):
    return subprocess.Popen(["ip", "netns", "exec", r.ns_c, "curl", "-sS", "--fail",
                             "--limit-rate", rate, "--max-time", str(timeout), "-o", str(out),
                             url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs, timeout=150):
    res = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        res.append((p.returncode, out, err))
    return res


def logs(tmp, *names):
    return {n: (tmp / n).read_text()[-3000:] for n in names if (tmp / n).exists()}


def counters(summary):
    return summary["stages"]["ftcp"]


def logger_stats(r):
    return json.loads(r.logger_stats.read_text())


@needs(NGINX)
def test_nginx_sendfile_download_survives_kill(tmp_path):
    """nginx with its stock settings (workers as www-data, sendfile on) serves 32 MiB to
    curl; master and workers are SIGKILLed mid-download and nginx is started again: curl
    finishes with the file's SHA-256 and the capture shows no RST."""
    seed = crash_seed()
    kill_at = random.Random(seed).uniform(1.0, 2.5)
    print(f"seed {seed}: kill at {kill_at:.2f} s")
    with Www(32 << 20) as www, Rig(tmp_path, server_cmd=nginx_argv(tmp_path, www.path, PORT)) as r:
        users = {subprocess.run(["ps", "-o", "user=", "-p", str(p)], capture_output=True,
                                text=True).stdout.strip() for p in r.server_pids()[1:]}
        assert users == {"www-data"}, users  # the workers dropped their privileges
        r.start_capture()
        c = curl(r, f"http://{SERVER_IP}:{PORT}/{www.name}", tmp_path / "dl", "10M")
        r.wait_established(1)
        time.sleep(kill_at)
        r.kill_server()
        r.start_server()
        (rc, out, err), = finish([c])
        r.stop_capture()
        summary = r.stop_appliance()
        lg = logs(tmp_path, "ftlog.log", "nginx-error.log", "server2.log", "appliance.log")
        assert rc == 0, (seed, err, lg)
        assert sha256_file(tmp_path / "dl") == www.sha256, seed
        ctr = counters(summary)
        # Once per process death the logger sees: one, or two when a worker's death is
        # seen after the master's and the recovery it started (the restarted nginx's
        # accept of it is then recovered again).
        assert 1 <= ctr["recoveries"] <= 2 and ctr["conns_protected"] == 1, (ctr, lg)
        assert_capture_clean(r)
        assert not list(r.logdir.glob("*.replay*")), "replay files left behind"


@needs(REDIS, REDIS_CLI, REDIS_BENCH)
@pytest.mark.parametrize("mode", ["memory", "aof-wait-merge"])
def test_redis_sets_and_gets_survive_kill(tmp_path, mode):
    """redis-server (no persistence: after the kill its state is what replay rebuilds)
    with a client doing SETs and GETs on one connection and redis-benchmark's SETs on four
    more; SIGKILLed and restarted mid-run: no client sees an error, every acknowledged SET
    reads back, and redis-cli on a fresh connection counts every key.

    aof-wait-merge: redis with its append-only file fsynced at every write, the shim with
    ILFTCP_READY=wait (recovery once the file is loaded) and ILFTCP_REPLAY=merge (a
    replayed read returns as many of the crashed server's reads as fit: redis syncs once
    per pass of its loop, so a replay of one read per pass costs an fsync per request).
    The same outcome, and the shim's marks show the merge: every connection's replay took
    at most as many reads as the crashed server made, the busiest far fewer.

    redis-benchmark runs one test (SET) on the same four connections throughout, so the
    kill always finds exactly five connections to recover: each of its tests opens four
    new ones (a connect() during the outage waits for the restarted server:
    test_connect_while_the_server_is_down_reaches_the_restarted_one), and its GET test's
    replies depend on keys set by the SET test's connections, closed by then and never
    replayed (test_redis_state_of_a_closed_connection_resets_not_hangs)."""
    seed = crash_seed()
    kill_at = random.Random(seed).uniform(0.3, 1.0)
    print(f"seed {seed}: kill at {kill_at:.2f} s")
    keys = 3000
    aof = mode != "memory"
    env = {"ILFTCP_READY": "wait", "ILFTCP_REPLAY": "merge", "ILFTCP_TIMING": "1"} if aof else {}
    with Rig(tmp_path, strategy="lazy", server_cmd=redis_argv(tmp_path, PORT, aof=aof),
             server_env=env) as r:
        cl = subprocess.Popen(["ip", "netns", "exec", r.ns_c, PY, f"{HERE}/ftcp_servers.py",
                               "resp", "--keys", str(keys), "--seed", str(seed), "--rate",
                               "800"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        bench = subprocess.Popen(["ip", "netns", "exec", r.ns_c, REDIS_BENCH, "-h", SERVER_IP,
                                  "-p", str(PORT), "-c", "4", "-n", "100000", "-t", "set",
                                  "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        r.wait_established(5)
        time.sleep(kill_at)
        # Both clients still on their first connections (else the kill is not the case).
        assert cl.poll() is None and bench.poll() is None, (cl.poll(), bench.poll())
        r.kill_server()
        r.start_server()
        (rc, out, err), (brc, bout, berr) = finish([cl, bench])
        n = subprocess.run(["ip", "netns", "exec", r.ns_c, REDIS_CLI, "-h", SERVER_IP, "-p",
                            str(PORT), "--scan", "--pattern", f"ft:{seed}:*"],
                           capture_output=True, text=True, timeout=60)
        summary = r.stop_appliance()
        lg = logs(tmp_path, "ftlog.log", "redis.log", "appliance.log", "server2.log")
        assert rc == 0, (seed, out, err[-2000:], lg)
        res = json.loads(out.strip().splitlines()[-1])
        assert res["ok"] and res["acked"] == keys, res
        assert brc == 0 and "rror" not in bout + berr, (bout, berr[-2000:])
        assert len(n.stdout.split()) == keys, (n.stdout[-500:], n.stderr)
        ctr = counters(summary)
        assert ctr["recoveries"] == 5, ctr  # ours and redis-benchmark's four
        assert ctr["recoveries_abandoned"] == 0, ctr
        if aof:
            calls = replay_reads((tmp_path / "server2.log").read_text())
            print(f"replayed reads (calls, logged) per connection: {calls}")
            assert len(calls) == 5, (calls, lg)
            assert all(c <= n for c, n in calls.values()), calls
            c, n = max(calls.values(), key=lambda x: x[1])
            assert n >= 20 and c * 4 <= n, calls


def replay_reads(log):
    """Per client port, from the shim's ILFTCP_TIMING marks: (reads the replay took,
    reads the crashed server made)."""
    done, logged = {}, {}
    for m in re.finditer(r"ilftcp-timing (replay_done|replay_logged_reads) \d+ port (\d+) "
                         r"bytes (\d+)", log):
        (done if m.group(1) == "replay_done" else logged)[int(m.group(2))] = int(m.group(3))
    return {p: (done[p], logged[p]) for p in done if p in logged}


# A restart that is slow to be ready: FILL_KEYS more keys in the append-only file, loaded at
# LOAD_DELAY_US each (redis's key-load-delay): about 2.5 s of loading, during which redis
# serves events after every 1024 commands it loads (and answers -LOADING).
FILL_KEYS, LOAD_DELAY_US = 2500, 1000


def fill_redis(r, n):
    """n keys SET on a local connection in the server's namespace (not through the
    appliance: not protected, only in the append-only file)."""
    cmds = "".join(f"SET fill:{i} x\r\n" for i in range(n))
    res = subprocess.run(["ip", "netns", "exec", r.ns_s, REDIS_CLI, "-p", str(PORT), "--pipe"],
                         input=cmds, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and f"replies: {n}" in res.stdout, (res.stdout, res.stderr)


def stale_run(tmp_path, aof, slow_load=False, server_env=None):
    seed = crash_seed()
    argv = redis_argv(tmp_path, PORT, aof=aof, load_delay_us=LOAD_DELAY_US if slow_load else 0)
    with Rig(tmp_path, strategy="lazy", server_cmd=argv, server_env=server_env,
             logger_args=("--catchup-ms", "1500")) as r:
        if slow_load:
            fill_redis(r, FILL_KEYS)
        cl = subprocess.Popen(["ip", "netns", "exec", r.ns_c, PY, f"{HERE}/ftcp_servers.py",
                               "stale", "--seed", str(seed), "--wait", "30"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        assert cl.stdout.readline().strip() == "ready", cl.stderr.read()
        r.kill_server()
        r.start_server()
        time.sleep(0.5)  # the client's connection recovered (or its owed output pending)
        out, err = cl.communicate("go\n", timeout=60)
        time.sleep(0.5)  # the logger's counters file is rewritten every 200 ms
        lgs = logger_stats(r)
        summary = r.stop_appliance()
        lg = logs(tmp_path, "ftlog.log", f"server{r.server_starts}.log")
    assert cl.returncode == 0, (out, err)
    return json.loads(out.strip().splitlines()[-1]), lgs, counters(summary), lg


@needs(REDIS)
def test_redis_state_of_a_closed_connection_resets_not_hangs(tmp_path):
    """What FT-TCP cannot rebuild, said rather than hung or garbled: redis without
    persistence, a key SET on a connection that then closed, GET on a second connection
    that stays open. After the kill, the second connection's replay (its GET) meets the
    restarted redis without that key: the reply is shorter than the one the client
    already has, so the output owed never comes. The client's next GET is held back from
    the server meanwhile (its reply would go out cut to fit the client's stream), and the
    logger resets the connection --ftcp-catchup-ms after the replay was read: the client
    sees a reset, and the counters say why."""
    res, lgs, ctr, lg = stale_run(tmp_path, aof=False)
    assert res["outcome"] == "reset", (res, lg)
    assert res["seconds"] < 10, res  # the deadline, not the client's 30 s
    assert lgs["recover_abandoned_diverged"] == 1, lgs
    assert ctr["recoveries_abandoned"] == 1, ctr
    assert "did not write again" in lg["ftlog.log"], lg


@needs(REDIS, REDIS_CLI)
def test_redis_loading_its_aof_is_reset_not_garbled(tmp_path):
    """The same with redis's append-only file: the restarted redis has the key, but it
    listens before it has loaded the file (about 2.5 s here: FILL_KEYS keys, a pause per
    key), and a replay it takes in while loading gets `-LOADING Redis is loading the
    dataset in memory`, a reply longer than the one the client had. The shim compares what
    it discards with the crashed server's last output (kept by the stage, handed over in
    the replay): they differ at the first byte, so the connection is reset at once: the
    client's next GET sees a reset, never the rest of the error (what it got before that
    check). ILFTCP_READY=wait (the next test) is the cure."""
    res, lgs, ctr, lg = stale_run(tmp_path, aof=True, slow_load=True)
    assert res["outcome"] == "reset", (res, lg)
    assert lgs["recover_abandoned_diverged"] >= 1, lgs
    assert "wrote other bytes than the client had" in lg["ftlog.log"], lg


def timing_marks(log):
    """The shim's ILFTCP_TIMING marks in a server's log: name -> first time (s)."""
    marks = {}
    for line in log.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == "ilftcp-timing":
            marks.setdefault(f[1], int(f[2]) / 1e9)
    return marks


@needs(REDIS, REDIS_CLI)
def test_redis_loading_its_aof_recovers_when_ready_is_wait(tmp_path):
    """The same slow restart with ILFTCP_READY=wait: the shim announces redis's listen
    only when redis first blocks waiting for events, which it does once the file is
    loaded (while loading it polls with a zero timeout), so the logger recovers the
    connection after the load: the replayed GET is answered with the value, as the crashed
    redis answered it, and the client's next GET reads the value too. The shim's marks
    show the wait: ready at least a second after listen."""
    res, lgs, ctr, lg = stale_run(tmp_path, aof=True, slow_load=True,
                                  server_env={"ILFTCP_READY": "wait", "ILFTCP_TIMING": "1"})
    assert res["outcome"] == "value", (res, lg)
    # the GET connection, and the SET one too if its close had not completed at the kill
    assert ctr["recoveries"] >= 1 and ctr["recoveries_abandoned"] == 0, ctr
    assert lgs["recover_abandoned_diverged"] == 0, lgs
    marks = timing_marks(lg["server2.log"])
    assert "listen" in marks and "ready" in marks, lg
    print(f"listen to ready: {marks['ready'] - marks['listen']:.2f} s")
    assert marks["ready"] - marks["listen"] > 1.0, marks


@needs(PY)
@pytest.mark.parametrize("var,value,allowed", [("ILFTCP_READY", "later", ("listen", "wait")),
                                               ("ILFTCP_REPLAY", "fast", ("exact", "merge"))])
def test_bad_shim_setting_stops_the_server_with_a_message(tmp_path, var, value, allowed):
    """A value of ILFTCP_READY or ILFTCP_REPLAY the shim does not know is a configuration
    error: the process stops at once (exit status 2) and says what is allowed, rather than
    run with recoveries that start at the wrong time or replay otherwise than asked."""
    env = dict(os.environ, LD_PRELOAD=str(SHIM), ILFTCP_SOCK=str(tmp_path / "none.sock"),
               **{var: value})
    res = subprocess.run([PY, "-c", "print('ran')"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 2, res
    assert "ran" not in res.stdout
    assert f"{var}={value}" in res.stderr and all(a in res.stderr for a in allowed), res.stderr


@needs(PY)
def test_twenty_downloads_one_kill(tmp_path):
    """Twenty curl downloads from `python3 -m http.server` (its listen backlog is 5), one
    kill: the logger lets the recovered connections into the accept queue a few at a time,
    so all twenty recover and finish with the right checksum, none is given up and no
    replay file is left."""
    seed = crash_seed()
    kill_at = random.Random(seed).uniform(1.5, 3.0)
    print(f"seed {seed}: kill at {kill_at:.2f} s")
    n = 20
    # 32 MiB at 1 MB/s: more than the kernel's send and receive buffers plus what the
    # clients read before the kill, so every download is still mid-transfer when the
    # server dies, however loaded the machine. The receive buffers are capped at 2 MiB:
    # a machine whose tcp_rmem allows 32 MiB (this VM; namespaces inherit it) let a
    # fast connection's whole file reach the client's kernel before the kill, its server
    # close it (announced) and the connection need no recovery (8 of 20 in a CI run).
    with Www(32 << 20) as www, \
            Rig(tmp_path, server_cmd=http_server_argv(www.path, PORT, bind="0.0.0.0")) as r:
        sh("ip", "netns", "exec", r.ns_c, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 2097152")
        # The clients connect a backlog's worth at a time: twenty SYNs at once overflow
        # the accept queue of a server slow to accept (a loaded machine), and a client
        # whose SYN is dropped a few times connects 15 to 60 s later, after the first
        # downloads have ended. What is tested is the recovery of twenty at once.
        cs = []
        for i in range(n):
            cs.append(curl(r, f"http://{SERVER_IP}:{PORT}/{www.name}", tmp_path / f"dl{i}",
                           "1M", timeout=240))
            if len(cs) % 5 == 0:
                r.wait_established(len(cs), timeout=60)
        time.sleep(kill_at)
        r.kill_server()
        r.start_server()
        res = finish(cs, timeout=260)
        summary = r.stop_appliance()
        lgs = logger_stats(r)
        lg = logs(tmp_path, "ftlog.log", "server2.log")
        bad = [(i, rc, err) for i, (rc, _, err) in enumerate(res) if rc != 0]
        assert not bad, (seed, bad, lgs, lg)
        for i in range(n):
            assert sha256_file(tmp_path / f"dl{i}") == www.sha256, (seed, i)
        ctr = counters(summary)
        assert ctr["recoveries"] == lgs["crashes"] == n, (ctr, lgs)
        assert lgs["recover_abandoned_timeout"] == lgs["recover_abandoned_replay"] == \
            lgs["recover_abandoned_diverged"] == 0, lgs
        assert lgs["recover_paced"] > 0, lgs  # the backlog did limit the window
        assert not list(r.logdir.glob("*.replay*")), "replay files left behind"


@needs(PY)
def test_dual_stack_listener(tmp_path):
    """`python3 -m http.server --bind ::` listens dual-stack (IPV6_V6ONLY off; what it does
    without --bind on a host whose resolver lists :: first). An IPv6 client's
    download passes through the appliance untouched and unprotected; an IPv4 client's (a
    v4-mapped connection on the IPv6 socket) is protected end to end: it finishes (its
    final FIN is announced) and survives a kill."""
    with Www(48 << 20) as www, \
            Rig(tmp_path, ipv6=True,
                                server_cmd=http_server_argv(www.path, PORT, bind="::")) as r:
        v6 = curl(r, f"http://[{V6[SERVER_IP]}]:{PORT}/{www.name}", tmp_path / "dl6", "50M")
        (rc6, _, err6), = finish([v6])
        assert rc6 == 0, err6
        assert sha256_file(tmp_path / "dl6") == www.sha256
        c = curl(r, f"http://{SERVER_IP}:{PORT}/{www.name}", tmp_path / "dl4", "8M")
        r.wait_established(1)
        time.sleep(1.0)
        r.kill_server()
        r.start_server()
        (rc, _, err), = finish([c])
        summary = r.stop_appliance()
        assert rc == 0, (err, logs(tmp_path, "ftlog.log", "server2.log"))
        assert sha256_file(tmp_path / "dl4") == www.sha256
        ctr = counters(summary)
        assert ctr["conns_protected"] == 1 and ctr["recoveries"] == 1, ctr


@needs(EVSERVER)
@pytest.mark.parametrize("api", ["epoll-lt", "epoll-et", "epoll-oneshot", "epoll-pwait", "poll",
                                 "ppoll", "select", "pselect", "epoll-et/splice"])
def test_event_loop_readiness_after_kill(tmp_path, api):
    """An event-driven server (non-blocking sockets from accept4, recvmsg/readv in,
    sendmsg/writev out) sleeping in one readiness call is killed while it thinks about a
    request it has read (the client waits for the reply and sends nothing more) and
    restarted: the replayed request is in the shim, not in the kernel, so the connection
    must be reported readable by that call or the server and the client wait for each
    other for ever. Every reply must come back right. With /splice its bytes go through a
    pipe both ways (splice from and to the socket: the replay is written into the pipe, the
    discarded prefix read out of it)."""
    seed = crash_seed()
    api, _, io = api.partition("/")
    with Rig(tmp_path, server_cmd=[str(EVSERVER), "--api", api, "--port", str(PORT),
                                   "--delay-ms", "150", *(["--io", io] if io else [])]) as r:
        c = r.client("--mode", "mirror", "--bytes", str(192 << 10), "--seed", str(seed))
        log = tmp_path / "server1.log"
        for _ in range(500):  # the third request read: its reply is 150 ms away
            if "req 3" in log.read_text():
                break
            time.sleep(0.01)
        time.sleep(0.03)
        r.kill_server()
        r.start_server()
        (rc, out, err), = finish([c], timeout=60)
        summary = r.stop_appliance()
        assert rc == 0, (seed, out, err[-2000:], logs(tmp_path, "ftlog.log", "server2.log"))
        ctr = counters(summary)
        assert ctr["recoveries"] == 1, ctr


@needs(EVSERVER)
def test_request_held_during_owed_output_wakes_an_edge_triggered_server(tmp_path):
    """A request that arrives while the restarted server still owes output is held in the
    socket (ilf_hold_input: a diverged server's reply to it would be cut to fit the client's
    stream); when the owed output is written, an edge-triggered server must be told that the
    connection is readable again, because the kernel reported those bytes once already,
    when the read was refused. The server thinks asynchronously (a timer per request, the
    loop goes on reading, as a proxy does), so it reads while its replies wait; the client
    pipelines: request 3 sent before the kill, request 4 once the restarted server has read
    the replay, then it waits for both replies and sends nothing more. Without the wake-up
    the server never reads request 4 and both wait for ever. The shim's ILFTCP_TIMING marks
    show the read held and the wake-up."""
    seed = crash_seed()
    with Rig(tmp_path, server_cmd=[str(EVSERVER), "--api", "epoll-et", "--port", str(PORT),
                                   "--delay-ms", "1000", "--think", "async"],
             server_env={"ILFTCP_TIMING": "1"}) as r:
        c = r.client("--mode", "mirror", "--bytes", str(1 << 30), "--go-after", "2",
                     "--seed", str(seed), stdin=subprocess.PIPE)
        line = c.stdout.readline()
        assert json.loads(line) == {"sent_request": 3}, (line, c.stderr.read() if not line
                                                         else "")
        log1, log2 = tmp_path / "server1.log", tmp_path / "server2.log"
        for _ in range(500):  # the server read request 3: its reply is a second away
            if "req 3" in log1.read_text():
                break
            time.sleep(0.01)
        r.kill_server()
        r.start_server()
        for _ in range(1000):  # the restarted server read the replay (requests 1 to 3)
            if "req 3" in log2.read_text():
                break
            time.sleep(0.01)
        assert "req 3" in log2.read_text(), log2.read_text()
        c.stdin.write("go\n")  # request 4, while the replies to 1 and 2 are still owed
        c.stdin.flush()
        (rc, out, err), = finish([c], timeout=60)
        summary = r.stop_appliance()
    text = log2.read_text()
    assert rc == 0, (seed, out, err[-2000:], text[-2000:],
                     logs(tmp_path, "ftlog.log"))
    assert json.loads(out.splitlines()[-1])["ok"], out
    assert "req 4" in text, text
    # The path under test was taken: a read refused while output was owed, then the wake-up.
    assert "ilftcp-timing held" in text and "ilftcp-timing rearm" in text, text
    assert counters(summary)["recoveries"] == 1, counters(summary)
