"""Checks of il-kvstore runs from the replicas' --log files: every PUT a writer was told was
stable is applied exactly once and in its writer's order, the replicas agree on every position
they applied, and (optionally) their states are what the logs replay to.

A writer names each PUT in its value: its --seed in the high 32 bits, the PUT's number from 1
in the low 32 bits (examples/kvstore/kvstore.c); its key is splitmix64 draw number i of the
seed. A test gives each run of a writer (each incarnation of its member id) its own seed. A
replica logs runs of PUTs applied one after the other, "epoch global_seq sender sender_seq n
value" (replica.c). The logs are read as streams (a soak run writes hundreds of megabytes),
merged by (epoch, global_seq): epochs are the appliance's start times in seconds, so they sort
in the order they happened."""
import heapq
from dataclasses import dataclass, field

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def put_key(seed, wid, i, keys):
    """The key of PUT number i (from 0) of a writer run."""
    return _mix((seed * 1000003 + wid + (i + 1) * GOLDEN) & M64) % keys


def state_hash(vals):
    """The replica's FNV-1a over the set (key, value) pairs in key order (replica.c)."""
    h = 0xCBF29CE484222325
    for k in sorted(vals):
        for b in k.to_bytes(4, "big") + vals[k].to_bytes(8, "big"):
            h = ((h ^ b) * 0x100000001B3) & M64
    return f"{h:016x}"


def iter_log(path):
    """(epoch, global_seq, sender, sender_seq, n, value) of each run in a replica's --log,
    checked to go forward: a replica never applies a position twice. Lines that are not six
    numbers (the "#" a replica writes when it starts, a line cut by a SIGKILL) are skipped."""
    end = None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 6 or not all(p.isdigit() for p in parts):
                continue
            e = tuple(int(x) for x in parts)
            assert e[4] >= 1 and (end is None or e[:2] >= end), f"{path}: {e} before {end}"
            end = (e[0], e[1] + e[4])
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


def verify(paths, runs, keys, replay=False):
    """Walks the replicas' logs merged in global order once. Where logs overlap they must name
    the same PUTs (same sender, sender_seq and value at each position). Each PUT first seen is
    checked against its run: the next one the run has not had applied (so every PUT at most
    once, in order, a prefix of what the run sent), with sender_seq = its number. Then each run
    must have at least what it was told was stable (all of it if it finished). Returns (PUTs
    applied, the state hash the logs replay to when `replay`, else None)."""
    by_tag = {}
    for r in runs:
        assert (r.wid, r.seed) not in by_tag, f"two runs of writer {r.wid} with seed {r.seed}"
        by_tag[(r.wid, r.seed)] = r
    vals, total = {}, 0
    epoch, upto = None, 0      # the positions below `upto` of `epoch` are checked
    recent = []                # checked runs that may overlap what comes next
    for e in heapq.merge(*(iter_log(p) for p in paths), key=lambda e: e[:2]):
        ep, g, sender, sseq, n, value = e
        if ep != epoch:
            epoch, upto, recent = ep, 0, []
        recent = [x for x in recent if x[1] + x[4] > g]
        for x in recent:  # the part another replica's log already gave: the same PUTs
            assert (x[2], x[3] - x[1], x[5] - x[1]) == (sender, sseq - g, value - g), \
                f"replicas applied different PUTs around {(ep, g)}: {e} and {x}"
        recent.append(e)
        if g + n <= upto:
            continue
        skip = max(0, upto - g)
        g, sseq, value, n = g + skip, sseq + skip, value + skip, n - skip
        upto = g + n
        r = by_tag.get((sender, value >> 32))
        assert r is not None, f"applied PUTs nobody sent: {e}"
        i = (value & 0xFFFFFFFF) - 1
        assert i == r.applied and sseq == i + 1, \
            f"writer {r.wid} (seed {r.seed}): PUTs {i + 1}.. (sender_seq {sseq}) applied " \
            f"after {r.applied}: {e}"
        if replay:
            for k in range(i, i + n):
                vals[put_key(r.seed, r.wid, k, keys)] = (r.seed << 32) | (k + 1)
        r.applied += n
        total += n
    for r in runs:
        need = r.count if r.finished else r.acked
        assert r.applied >= need, f"writer {r.wid} (seed {r.seed}): {r.applied} applied, " \
            f"{need} acknowledged as stable"
        assert not r.finished or r.applied == r.count, \
            f"writer {r.wid} (seed {r.seed}): {r.applied} applied of {r.count} sent"
    return total, state_hash(vals) if replay else None
