"""interlink-exporter: the appliance (configs/uto.yaml over net_memif) and interlink-control,
pktgen's --uto senders and receivers as members, the exporter as its own process serving
HTTP. Each scrape is parsed with prometheus_client's parser (Debian's
python3-prometheus-client), the maintained reference for the text format.

Asserted: while traffic runs, every port, stage, group and member is there with the right
type, counters grow between scrapes, and each receiver's ACK and lag are exported; after
the run, the last scrape's counters equal the appliance's JSON summary; every metric family
is documented in docs/operations.md; a source that is not running gives interlink_up 0 and
a scrape that still parses; label values with quotes, backslashes and newlines survive."""
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import ROOT
from harness import CONTROL, UtoMemifRig

prometheus_parser = pytest.importorskip("prometheus_client.parser")
sys.path.insert(0, str(ROOT / "tools" / "monitor"))
import interlink_metrics  # noqa: E402

EXPORTER = ROOT / "tools" / "monitor" / "interlink-exporter"
DASHBOARD = ROOT / "docs" / "grafana-interlink.json"
COUNT = 300000
RATE = 100000  # messages/s in all: three seconds of traffic, members in view throughout

pytestmark = pytest.mark.skipif(not CONTROL.exists(), reason="interlink-control not built")


class Exporter:
    """interlink-exporter --listen 127.0.0.1:0 as a process; .url is where it serves."""

    def __init__(self, tmp, *args):
        self.log = tmp / f"exporter-{time.monotonic_ns()}.log"
        self.p = subprocess.Popen([sys.executable, str(EXPORTER), "--listen", "127.0.0.1:0",
                                   *args], stderr=open(self.log, "w"))
        end = time.time() + 20
        while time.time() < end:
            m = re.search(r"serving (http://\S+/metrics)", self.log.read_text())
            if m:
                self.url = m.group(1)
                return
            assert self.p.poll() is None, self.log.read_text()
            time.sleep(0.05)
        raise AssertionError("the exporter did not start: " + self.log.read_text())

    def get(self, path="/metrics"):
        with urllib.request.urlopen(self.url.replace("/metrics", path), timeout=20) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()

    def scrape(self):
        """{(sample name, frozenset(labels)): value} and {family: type}."""
        status, ctype, text = self.get()
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), ctype
        self.text = text
        samples, types = {}, {}
        for fam in prometheus_parser.text_string_to_metric_families(text):
            types[fam.name] = fam.type
            assert fam.documentation, f"{fam.name} has no HELP"
            for s in fam.samples:
                key = (s.name, frozenset(s.labels.items()))
                assert key not in samples, f"duplicate sample {key}"
                samples[key] = s.value
        return samples, types

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def val(samples, name, /, **labels):
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def select(samples, name, /, **labels):
    """{labels dict as a frozenset: value} of every sample of `name` carrying these labels."""
    want = {(k, str(v)) for k, v in labels.items()}
    return {lab: v for (n, lab), v in samples.items() if n == name and want <= lab}


def test_exporter_scrapes_appliance_and_control(tmp_path):
    d = tmp_path
    ring = f"/dev/shm/ilexp{uuid.uuid4().hex[:8]}-ftring"
    ftlog = d / "ftlog.json"
    # The FT-TCP logger thread too, for its statistics file (idle: no ftcp stage).
    ctl = ["--window", "256", "--exclude-ms", "5000", "--ftcp-dir", str(d / "ftlog"),
           "--ftcp-ring", ring, "--ftcp-sock", str(d / "ftl.sock"), "--ftcp-stats",
           str(ftlog)]
    (d / "ftlog").mkdir()
    with UtoMemifRig(d, ctl) as rig:
        exp = Exporter(d, "--appliance", f"app{rig.tag}", "--chan", rig.chan,
                       "--ftlog-stats", str(ftlog))
        try:
            idle, _ = exp.scrape()
            gen = rig.start_pktgen("--uto", "--senders", "2", "--receivers", "2",
                                   "--groups", "2", "--count", str(COUNT), "--rate",
                                   str(RATE), "--quiet")
            # Scrape until both groups' receivers are members with an ACK, twice.
            during, types, end = [], None, time.time() + 60
            while len(during) < 2 and time.time() < end and gen[0].poll() is None:
                s, types = exp.scrape()
                acked = select(s, "interlink_control_member_acked")
                if len(acked) == 4 and min(acked.values()) > 0:
                    during.append(s)
                    mid_text = exp.text
                time.sleep(0.5)
            rc, log, res = rig.wait_pktgen(gen, timeout=120)
            final, final_types = exp.scrape()
        finally:
            assert exp.stop() == 0, exp.log.read_text()
        summary = rig.stop_appliance()
    Path(ring).unlink(missing_ok=True)
    assert summary is not None, "the appliance died: " + log
    assert rc == 0 and res["pass"], log
    assert len(during) == 2, "the members never showed up with ACKs in a scrape"
    mid = during[0]
    tag = summary["name"]

    # Every source answered, every scrape.
    for s in (idle, mid, final):
        for source in ("appliance", "control", "ftlog"):
            assert val(s, "interlink_up", source=source) == 1, source
    # The logger's file: counters (idle, so zero) and how fresh it is.
    assert val(final, "interlink_ftlog_events_total", counter="records") == 0
    assert val(final, "interlink_ftlog_state", key="replay_build_us_last") == 0
    assert 0 <= val(final, "interlink_ftlog_stats_age_seconds") < 5
    assert val(final, "interlink_appliance_info", name=tag, udp_port=7400) == 1
    assert val(final, "interlink_appliance_epoch") == summary["epoch"]

    # Types: counters end in _total and are typed counter, state is gauge.
    assert types["interlink_stage_events"] == "counter"
    assert types["interlink_port_rx_packets"] == "counter"
    assert types["interlink_control_events"] == "counter"
    assert types["interlink_group_state"] == "gauge"
    assert types["interlink_control_member_lag"] == "gauge"
    assert types["interlink_port_link_up"] == "gauge"

    # Per port, stage (with its type), group and member.
    for port in ("in", "out"):
        assert val(mid, "interlink_port_link_up", port=port) == 1
    stage_types = {"classify": "classify", "seq": "sequencer", "ctrl": "control", "nak": "nak"}
    for st, ty in stage_types.items():
        assert val(final, "interlink_stage_packets_total", stage=st, type=ty) is not None, st
    for gid in (1, 2):
        assert val(mid, "interlink_group_state", stage="seq", type="sequencer", group=gid,
                   key="next") > 1
        assert val(mid, "interlink_control_group_receivers", group=gid) == 2
        assert val(mid, "interlink_control_group_watermark", group=gid) > 1
        for member in (0x10000, 0x10001):  # pktgen's receivers
            assert val(mid, "interlink_control_member_roles", group=gid, member=member) == 2
            assert val(mid, "interlink_control_member_acked", group=gid, member=member) > 0
            assert val(mid, "interlink_control_member_lag", group=gid, member=member) >= 0
        for member in (1, 2):  # its senders: members without an ACK
            assert val(mid, "interlink_control_member_roles", group=gid, member=member) == 1
            assert val(mid, "interlink_control_member_acked", group=gid,
                       member=member) is None
    # The stage's state (not counters) is a gauge, under its own key.
    assert val(final, "interlink_stage_state", stage="ctrl", type="control",
               key="max_poll_gap_us") is not None
    assert val(final, "interlink_stage_events_total", stage="ctrl", type="control",
               counter="max_poll_gap_us") is None

    # Counters grow while traffic runs, up to the run's total.
    stamped = [val(s, "interlink_stage_events_total", stage="seq", type="sequencer",
                   counter="stamped_msgs") for s in (idle, during[0], during[1], final)]
    assert stamped[0] == 0 and 0 < stamped[1] < stamped[2] < stamped[3] == COUNT, stamped
    acks = [val(s, "interlink_control_events_total", counter="acks") for s in
            (during[0], during[1])]
    assert acks[0] < acks[1], acks
    rx = [val(s, "interlink_port_rx_packets_total", port="in") for s in during]
    assert rx[0] < rx[1], rx

    # After the run the data path is idle: the last scrape has the summary's figures, every
    # counter of the stages on it and every value of their groups' state; the control stage
    # (which keeps announcing STABLE) may only have moved on.
    for st, ty in stage_types.items():
        counters = dict(summary["stages"][st])
        assert counters.pop("type") == ty
        exact = ty in ("classify", "sequencer", "nak")
        for k, v in counters.items():
            m = re.match(r"group(\d+)_(.+)$", k)
            if m:
                got = val(final, "interlink_group_state", stage=st, type=ty, group=m.group(1),
                          key=m.group(2))
            elif k in ("pkts_in", "cycles", "poll_cycles"):
                got = val(final, {"pkts_in": "interlink_stage_packets_total",
                                  "cycles": "interlink_stage_cycles_total",
                                  "poll_cycles": "interlink_stage_poll_cycles_total"}[k],
                          stage=st, type=ty)
            else:
                got = val(final, "interlink_stage_events_total", stage=st, type=ty,
                          counter=k)
                if got is None:
                    got = val(final, "interlink_stage_state", stage=st, type=ty, key=k)
            assert got is not None, (st, k)
            if exact and k not in ("cycles", "poll_cycles"):
                assert got == v, (st, k, got, v)
            elif not m and k != "max_poll_gap_us":
                assert got <= v, (st, k, got, v)
    assert val(final, "interlink_port_rx_packets_total", port="in") == \
        summary["ports"]["in"]["rx"]
    assert val(final, "interlink_stage_events_total", stage="seq", type="sequencer",
               counter="stamped_msgs") == summary["messages_ordered"]

    # Prometheus' own linter (names, units, HELP and TYPE) has nothing to say.
    lint = subprocess.run(["promtool", "check", "metrics"], input=mid_text,
                          capture_output=True, text=True, timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr

    # Every family is named in the docs' metric table.
    ops = (ROOT / "docs" / "operations.md").read_text()
    section = ops[ops.index("## Prometheus"):]
    for fam in final_types:
        assert f"`{fam}" in section, f"{fam} is not in operations.md's Prometheus section"


def test_exporter_sources_down(tmp_path):
    """Nothing running: the scrape still answers, says so, and parses; --once too."""
    exp = Exporter(tmp_path, "--appliance", "ilnone-x", "--chan", str(tmp_path / "nochan"))
    try:
        samples, _ = exp.scrape()
        assert val(samples, "interlink_up", source="appliance") == 0
        assert val(samples, "interlink_up", source="control") == 0
        assert not [k for k in samples if k[0].startswith("interlink_port")]
        with pytest.raises(urllib.error.HTTPError) as e:
            exp.get("/nothing")
        assert e.value.code == 404
    finally:
        assert exp.stop() == 0, exp.log.read_text()
    p = subprocess.run([sys.executable, str(EXPORTER), "--once", "--appliance", "ilnone-x",
                        "--chan", ""], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    fams = {f.name: f for f in prometheus_parser.text_string_to_metric_families(p.stdout)}
    assert [s.labels["source"] for s in fams["interlink_up"].samples] == ["appliance"]
    assert "appliance: not running (no telemetry socket" in p.stderr
    bad = subprocess.run([sys.executable, str(EXPORTER), "--listen", "nowhere"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--listen" in bad.stderr and "HOST:PORT" in bad.stderr


def test_exposition_escaping():
    """Label values the appliance could hand over (a stage name is the operator's) come back
    unchanged through the reference parser."""
    e = interlink_metrics.Exposition()
    odd = 'a"b\\c\nd'
    e.counter("interlink_stage_events", 'help with \\ and "quotes"', 7, stage=odd,
              counter="x")
    e.gauge("interlink_stage_state", "h", 2.5, stage="s", key="k")
    e.gauge("interlink_stage_level", "h", float("nan"), stage="s", counter="c")
    fams = {f.name: f for f in prometheus_parser.text_string_to_metric_families(e.render())}
    s = fams["interlink_stage_events"].samples[0]
    assert s.name == "interlink_stage_events_total" and s.value == 7
    assert s.labels == {"stage": odd, "counter": "x"}
    assert fams["interlink_stage_state"].samples[0].value == 2.5
    assert fams["interlink_stage_level"].samples[0].value != \
        fams["interlink_stage_level"].samples[0].value  # NaN
    with pytest.raises(ValueError):
        e.gauge("interlink_stage_events_total", "h", 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dashboard_queries():
    """(panel title, PromQL) of every target, with Grafana's variables filled in."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"].replace("$instance", ".*")
                        .replace("$__rate_interval", "5s")))
    return out


# Panels that stay empty with configs/uto.yaml: no FEC, LEC, FT-TCP or WAN group, and drops
# are shown only where they happen.
MAY_BE_EMPTY = {"Drops by reason/s", "FEC and LEC recovery/s", "FT-TCP", "WAN groups: rate",
                "WAN groups: receivers' RTT", "Shards: strays handed over/s"}


def test_dashboard_queries_on_prometheus(tmp_path):
    """Debian's Prometheus scrapes the exporter every second while traffic runs; every query
    of docs/grafana-interlink.json evaluates, and each panel that applies to this
    deployment has data."""
    prom = shutil.which("prometheus")
    assert prom, "prometheus is not installed (scripts/install-deps.sh installs it)"
    queries = dashboard_queries()
    assert len(queries) >= 15, queries
    with UtoMemifRig(tmp_path, ["--window", "256", "--exclude-ms", "5000"]) as rig:
        exp = Exporter(tmp_path, "--appliance", f"app{rig.tag}", "--chan", rig.chan)
        target = exp.url.split("//")[1].split("/")[0]
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                       "scrape_configs:\n"
                       f"  - {{job_name: interlink, static_configs: [{{targets: ['{target}']}}]}}\n")
        port = free_port()
        plog = tmp_path / "prometheus.log"
        p = subprocess.Popen([prom, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path}/tsdb",
                              f"--web.listen-address=127.0.0.1:{port}"],
                             stdout=subprocess.DEVNULL, stderr=open(plog, "w"))
        gen = rig.start_pktgen("--uto", "--senders", "2", "--receivers", "2", "--groups", "2",
                               "--count", "3000000", "--rate", "100000", "--quiet")
        api = f"http://127.0.0.1:{port}/api/v1/query?query="
        try:
            empty, results, end = None, {}, time.time() + 60
            while time.time() < end and gen[0].poll() is None:
                time.sleep(1)
                try:
                    results = {}
                    for title, q in queries:
                        with urllib.request.urlopen(api + urllib.parse.quote(q), timeout=10) as r:
                            answer = json.loads(r.read())
                        assert answer["status"] == "success", (q, answer)
                        results[title] = results.get(title, 0) + len(answer["data"]["result"])
                except urllib.error.HTTPError as e:
                    raise AssertionError(f"{q}: {e.read().decode()}") from None
                except (urllib.error.URLError, ConnectionError):
                    assert p.poll() is None, plog.read_text()
                    continue  # not listening yet
                empty = sorted(t for t, n in results.items() if n == 0 and t not in MAY_BE_EMPTY)
                if not empty:
                    break
            assert results and empty == [], (empty, results, plog.read_text()[-2000:])
        finally:
            p.terminate()
            p.wait(timeout=30)
            exp.stop()
            gen[0].kill()
            rig.wait_pktgen(gen)
