"""Checks of il-kvstore runs from the replicas' --log files: every PUT a writer was told was
stable is applied exactly once, in its writer's order, the replicas agree on every position
they applied, and their states are what the logs replay to.

A writer's PUTs are reproducible from (--seed, --id, --keys): the same splitmix64 draws as
examples/kvstore/kvstore.c, two per PUT (key, then value | 1), PUT i carrying sender_seq i + 1.
A test gives each run of a writer (each incarnation of its member id) its own seed. The logs
are read as streams (a soak run writes gigabytes), merged by (epoch, global_seq): epochs are
the appliance's start times in seconds, so they sort in the order they happened."""
import heapq
from dataclasses import dataclass, field

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def writer_puts(seed, wid, keys):
    """The (key, value) of each PUT a writer run sends, in order, without end."""
    s = (seed * 1000003 + wid) & M64
    while True:
        s = (s + GOLDEN) & M64
        key = _mix(s) % keys
        s = (s + GOLDEN) & M64
        yield key, _mix(s) | 1


def state_hash(vals):
    """The replica's FNV-1a over the set (key, value) pairs in key order (replica.c)."""
    h = 0xCBF29CE484222325
    for k in sorted(vals):
        for b in k.to_bytes(4, "big") + vals[k].to_bytes(8, "big"):
            h = ((h ^ b) * 0x100000001B3) & M64
    return f"{h:016x}"


def iter_log(path):
    """(epoch, global_seq, sender, sender_seq, key, value) of each line of a replica's --log,
    checked to go forward: a replica never applies a position twice. Lines that are not six
    numbers (the "#" a replica writes when it starts, a line cut by a SIGKILL) are skipped."""
    last = None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 6 or not all(p.isdigit() for p in parts):
                continue
            e = tuple(int(x) for x in parts)
            assert last is None or e[:2] > last, f"{path}: {e} after {last}"
            last = e[:2]
            yield e


def merged(paths):
    """One applied sequence from every replica's log: wherever two replicas applied the same
    (epoch, global_seq) they must have applied the same PUT."""
    prev = None
    for e in heapq.merge(*(iter_log(p) for p in paths), key=lambda e: e[:2]):
        if prev is not None and e[:2] == prev[:2]:
            assert e == prev, f"two replicas applied different PUTs at {e[:2]}: {e} {prev}"
            continue
        prev = e
        yield e


@dataclass
class WriterRun:
    """One run (incarnation) of a writer: its id and seed; `acked`: how many of its PUTs it was
    told were stable (its last status before it was killed); `finished`: it exited 0, so all
    `count` PUTs it sent must be applied."""
    wid: int
    seed: int
    count: int = 0
    acked: int = 0
    finished: bool = False
    applied: int = field(default=0, init=False)


def verify(paths, runs, keys):
    """Walks the merged logs once. Each writer's runs appear in the order they ran, each as a
    contiguous stretch of its PUTs from sender_seq 1 on, one more each time, the values being
    the run's own: every PUT applied at most once, in order, and a prefix of what the run
    sent; then each run must have at least what it was told was stable (all of it if it
    finished). Returns (PUTs applied, the state hash the logs replay to)."""
    by_wid = {}
    for r in runs:
        by_wid.setdefault(r.wid, []).append(r)
    cur = {w: None for w in by_wid}      # the run being walked, and its PUT generator
    nxt = {w: 0 for w in by_wid}         # index in by_wid[w] of the next run to start
    vals, total = {}, 0
    for e in merged(paths):
        _, g, sender, sseq, key, value = e
        assert sender in by_wid, f"applied a PUT of an unknown writer: {e}"
        if sseq == 1:
            # A new run of this writer starts here: the next one whose first PUT this is
            # (runs that got nothing applied are passed over, checked at the end).
            while True:
                assert nxt[sender] < len(by_wid[sender]), f"no run of writer {sender} " \
                    f"left to start at {e}"
                r = by_wid[sender][nxt[sender]]
                nxt[sender] += 1
                gen = writer_puts(r.seed, r.wid, keys)
                if next(gen) == (key, value):
                    cur[sender] = (r, gen)
                    break
        else:
            assert cur[sender] is not None, f"writer {sender}'s PUT {sseq} before its first: {e}"
            r, gen = cur[sender]
            assert sseq == r.applied + 1, \
                f"writer {sender} (seed {r.seed}): PUT {sseq} after {r.applied}: {e}"
            assert next(gen) == (key, value), f"writer {sender} (seed {r.seed}): PUT {sseq} " \
                f"is not the one it sent: {e}"
        r.applied += 1
        vals[key] = value
        total += 1
    for r in runs:
        need = r.count if r.finished else r.acked
        assert r.applied >= need, f"writer {r.wid} (seed {r.seed}): {r.applied} applied, " \
            f"{need} acknowledged as stable"
        assert not r.finished or r.applied == r.count, \
            f"writer {r.wid} (seed {r.seed}): {r.applied} applied of {r.count} sent"
    return total, state_hash(vals)
