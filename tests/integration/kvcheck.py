"""Checks of il-kvstore runs from the replicas' --log files: every PUT a writer was told was
stable is applied exactly once, in its writer's order, by every replica that was up to apply
it, and the replicas' states are what their logs replay to.

A writer's PUTs are reproducible from (--seed, --id, --keys): the same splitmix64 draws as
examples/kvstore/kvstore.c, two per PUT (key, then value | 1). A test gives each run of a
writer its own seed, so the runs of one member id (its incarnations) are told apart by value."""
import json
from dataclasses import dataclass
from pathlib import Path

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def writer_puts(seed, wid, count, keys):
    """The (key, value) of each PUT a writer run sends, in order."""
    s = (seed * 1000003 + wid) & M64
    out = []
    for _ in range(count):
        s = (s + GOLDEN) & M64
        key = _mix(s) % keys
        s = (s + GOLDEN) & M64
        out.append((key, _mix(s) | 1))
    return out


def state_hash(vals):
    """The replica's FNV-1a over the set (key, value) pairs in key order (replica.c)."""
    h = 0xCBF29CE484222325
    for k in sorted(vals):
        for b in k.to_bytes(4, "big") + vals[k].to_bytes(8, "big"):
            h = ((h ^ b) * 0x100000001B3) & M64
    return f"{h:016x}"


def read_log(path):
    """[(epoch, global_seq, sender, sender_seq, key, value)] of a replica's --log."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text().splitlines():
        f = line.split()
        if len(f) == 6:  # a replica killed mid-write may leave a partial last line
            out.append(tuple(int(x) for x in f))
    return out


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class WriterRun:
    """One run (incarnation) of a writer: its id, seed and --count; `acked`: how many of its
    PUTs it was told were stable (its last status before it was killed, or all of them when
    it finished); `finished`: it exited 0, so every PUT it sent must be applied."""
    wid: int
    seed: int
    count: int
    acked: int = 0
    finished: bool = False


def merge_logs(logs):
    """One applied sequence from every replica's log: each (epoch, global_seq) must name the
    same PUT wherever it appears, and no replica applies one twice. Returns the merged
    entries in delivery order (epochs in the order they were first seen)."""
    seen = {}
    first_epoch = {}
    for name, entries in logs.items():
        mine = set()
        for e in entries:
            at = (e[0], e[1])
            assert at not in mine, f"{name} applied {at} twice"
            mine.add(at)
            first_epoch.setdefault(e[0], len(first_epoch))
            if at in seen:
                assert seen[at] == e, f"{name} applied {e}, another replica {seen[at]}"
            else:
                seen[at] = e
    return [seen[k] for k in sorted(seen, key=lambda k: (first_epoch[k[0]], k[1]))]


def check_exactly_once(merged, runs, keys):
    """Every PUT in `merged` is one that some run of its sender sent, none is applied twice,
    each run's applied PUTs are a prefix of what it sent, in its order, at least as long as
    what it was told was stable (all of it for a run that finished). Returns per-run counts."""
    by_value = {}
    for i, r in enumerate(runs):
        for n, (k, v) in enumerate(writer_puts(r.seed, r.wid, r.count, keys)):
            assert (r.wid, v) not in by_value, "two PUTs share a value: pick other seeds"
            by_value[(r.wid, v)] = (i, n, k)
    applied = [[] for _ in runs]
    for e in merged:
        hit = by_value.get((e[2], e[5]))
        assert hit is not None, f"applied a PUT nobody sent: {e}"
        i, n, k = hit
        assert e[4] == k, f"PUT {n} of run {i} applied with key {e[4]}, sent with {k}"
        applied[i].append(n)
    for i, (r, got) in enumerate(zip(runs, applied)):
        assert len(set(got)) == len(got), \
            f"run {i} (writer {r.wid}, seed {r.seed}): {len(got) - len(set(got))} PUTs " \
            "applied twice"
        assert got == list(range(len(got))), \
            f"run {i} (writer {r.wid}, seed {r.seed}): not a prefix in order: " \
            f"{got[:5]}... ({len(got)} applied)"
        need = r.count if r.finished else r.acked
        assert len(got) >= need, \
            f"run {i} (writer {r.wid}, seed {r.seed}): {len(got)} applied, {need} " \
            f"acknowledged as stable"
    return [len(a) for a in applied]


def replay_hash(merged):
    vals = {}
    for e in merged:
        vals[e[4]] = e[5]
    return state_hash(vals)
