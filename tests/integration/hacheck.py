"""Checks of a pair's runs from what the appliances sent (docs/ha.md, invariant I3 and the
fencing of an old active), read from tcpdump captures of each appliance's "out" link on the
switch side. A plain pcap reader: the captures hold hundreds of thousands of frames, too many
for Scapy's dissector in a test's time."""
import struct
from collections import defaultdict
from dataclasses import dataclass, field

IL_T_DATA = 1
IL_T_STABLE = 5
IL_F_STAMPED = 0x01
IL_F_STABLE_VALID = 0x04


def pcap_frames(path):
    """(time in s, frame bytes (possibly cut at the snap length)) of each record."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            return
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
        else:
            raise ValueError(f"{path}: not a pcap file")
        nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _ = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield sec + frac / (1e9 if nano else 1e6), data


def data_header(fr, port=7400):
    """(group, epoch, global_seq, msg_count, sender, sender_seq) of a stamped DATA frame of
    the Interlink port, or None."""
    if len(fr) < 82 or fr[12:14] != b"\x08\x00" or fr[23] != 17:
        return None
    ihl = (fr[14] & 0x0F) * 4
    l4 = 14 + ihl
    if len(fr) < l4 + 8 + 40 or struct.unpack("!H", fr[l4 + 2:l4 + 4])[0] != port:
        return None
    h = l4 + 8
    if fr[h + 1] != IL_T_DATA or not fr[h + 3] & IL_F_STAMPED:
        return None
    group, count, sender, epoch, sseq, gseq = struct.unpack("!HHIIQQ", fr[h + 4:h + 32])
    return group, epoch, gseq, count, sender, sseq


def final_watermark(fr, port=7400):
    """(group, epoch, cut) of a final watermark (STABLE of an epoch that ended, global_seq 0),
    or None."""
    if len(fr) < 82 or fr[12:14] != b"\x08\x00" or fr[23] != 17:
        return None
    l4 = 14 + (fr[14] & 0x0F) * 4
    if len(fr) < l4 + 48 or struct.unpack("!H", fr[l4 + 2:l4 + 4])[0] != port:
        return None
    h = l4 + 8
    if fr[h + 1] != IL_T_STABLE or not fr[h + 3] & IL_F_STABLE_VALID:
        return None
    group, epoch, gseq, stable = struct.unpack("!H6xI8xQQ", fr[h + 4:h + 40])
    return (group, epoch, stable) if gseq == 0 else None


@dataclass
class Stamps:
    """Every message position seen stamped, by whom and when."""
    at: dict = field(default_factory=dict)        # (group, epoch, gseq) -> (sender, sseq)
    conflicts: list = field(default_factory=list)  # positions seen with two messages
    positions: dict = field(default_factory=lambda: defaultdict(set))  # msg -> {positions}
    by_node: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    frames: int = 0
    last: dict = field(default_factory=dict)      # (node, epoch) -> time of its last frame
    first: dict = field(default_factory=dict)     # (node, epoch) -> time of its first frame
    cuts: dict = field(default_factory=dict)      # (group, epoch) -> final watermark

    def add(self, node, t, hdr):
        group, epoch, gseq, count, sender, sseq = hdr
        self.frames += 1
        self.by_node[node][epoch] += 1
        key = (node, epoch)
        self.first.setdefault(key, t)
        self.last[key] = max(self.last.get(key, t), t)
        for i in range(count):
            pos = (group, epoch, gseq + i)
            msg = (group, sender, sseq + i)
            had = self.at.get(pos)
            if had is None:
                self.at[pos] = msg
            elif had != msg and len(self.conflicts) < 20:
                self.conflicts.append((pos, had, msg, node))
            self.positions[msg].add((epoch, gseq + i))

    def restamped(self):
        """Messages stamped at more than one position (sent again into a new epoch)."""
        return sum(1 for p in self.positions.values() if len(p) > 1)

    def po_disagreements(self):
        """Messages stamped at a position at or above its epoch's cut (never U-delivered
        there: a receiver that P-delivered them there disagrees with the final order) and
        stamped again elsewhere."""
        n = 0
        for (group, _, _), pos in self.positions.items():
            if len(pos) < 2:
                continue
            if any((group, e) in self.cuts and g >= self.cuts[(group, e)] for e, g in pos):
                n += 1
        return n


def read_stamps(captures, port=7400):
    """captures: [(node, path)]."""
    st = Stamps()
    for node, path in captures:
        for t, fr in pcap_frames(path):
            h = data_header(fr, port)
            if h is not None:
                st.add(node, t, h)
                continue
            c = final_watermark(fr, port)
            if c is not None:
                st.cuts[(c[0], c[1])] = c[2]
    return st


def frames_after(captures, node, epoch, t0, port=7400):
    """DATA frames of `epoch` that appliance `node` sent after wall-clock time t0."""
    n = 0
    for nd, path in captures:
        if nd != node:
            continue
        for t, fr in pcap_frames(path):
            h = data_header(fr, port)
            if h is not None and h[1] == epoch and t > t0:
                n += 1
    return n


def stable_header(fr, port=7400):
    """(epoch, group, stable_seq) of a stamped frame that carries a watermark (DATA, STABLE,
    VIEW, CREDIT), or None."""
    if len(fr) < 82 or fr[12:14] != b"\x08\x00" or fr[23] != 17:
        return None
    l4 = 14 + (fr[14] & 0x0F) * 4
    if len(fr) < l4 + 48 or struct.unpack("!H", fr[l4 + 2:l4 + 4])[0] != port:
        return None
    h = l4 + 8
    if not fr[h + 3] & IL_F_STABLE_VALID or fr[h + 1] not in (1, 5, 9, 10):
        return None
    group, epoch, gseq, stable = struct.unpack("!H6xI8xQQ", fr[h + 4:h + 40])
    if fr[h + 1] == IL_T_STABLE and gseq == 0:
        return None  # a final watermark
    return epoch, group, stable


def watermark_moves(captures, port=7400):
    """Wall-clock times at which some appliance published a higher watermark of an epoch
    than any before: when more messages became deliverable as uniform. Sorted."""
    best, out = {}, []
    for _, path in captures:
        for t, fr in pcap_frames(path):
            h = stable_header(fr, port)
            if h is None:
                continue
            key = (h[0], h[1])
            if h[2] > best.get(key, 0):
                best[key] = h[2]
                out.append(t)
    out.sort()
    return out
