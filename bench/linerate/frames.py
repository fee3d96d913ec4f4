"""Frame sizes and the frames the testpmd generator sends.

Sizes are RFC 2544 frame sizes: the 4-byte FCS is included, the 20 bytes of preamble, start
delimiter and inter-frame gap are not. A PMD is handed the frame without its FCS, so a "64 B"
frame is 60 bytes in an mbuf.

  raw 64 B    Ethernet 14 + IPv4 20 + UDP 8 + 18 B of payload (+ FCS 4) = 64 B in; the appliance
              inserts the 40-byte Interlink header and one 4-byte message record (44 B) and sends
              a 108 B frame on.
  native 106  Ethernet 14 + IPv4 20 + UDP 8 + header 40 + record 4 + 16 B of payload (a sender's
              timestamp and tag) + FCS 4 = 106 B, stamped in place: 106 B out.
"""
import struct
import sys
from pathlib import Path

FCS = 4
WIRE_OVERHEAD = 20  # preamble 7 + start delimiter 1 + inter-frame gap 12
HDRS = 14 + 20 + 8
IL_HDR, IL_REC = 40, 4
RAW_INSERT = IL_HDR + IL_REC
NATIVE_MIN = HDRS + IL_HDR + IL_REC + 16 + FCS  # 106

# The default configuration's raw group (configs/sequencer.yaml) and its multicast MAC.
RAW_DST, RAW_PORT, RAW_GROUP_ID = "239.1.1.100", 9000, 100
RAW_DST_MAC = "01:00:5e:01:01:64"
SRC_IP, SRC_PORT = "198.18.0.1", 9000
IL_PORT = 7400


def out_frame(case):
    """The size of the frame the appliance sends for one it receives."""
    return case["frame"] + (RAW_INSERT if case["mode"] == "raw" else 0)


def wire_gbps(mpps, frame):
    """Bits per second on an Ethernet wire for frames of this size (FCS included)."""
    return mpps * 1e6 * (frame + WIRE_OVERHEAD) * 8 / 1e9


def check(case):
    f = case["frame"]
    if case["mode"] == "native" and f < NATIVE_MIN:
        raise ValueError(f"native frames are at least {NATIVE_MIN} B (got {f})")
    if case["mode"] == "raw" and f < 64:
        raise ValueError(f"Ethernet frames are at least 64 B (got {f})")


def _ip_csum(hdr):
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def _ip(s):
    return bytes(int(x) for x in s.split("."))


def udp_frame(size, dst, dport, payload=b""):
    """size bytes (no FCS) of Ethernet/IPv4/UDP to dst:dport, UDP checksum 0 (as testpmd's
    txonly sends), the payload zero-padded to fill the frame."""
    ulen = size - 14 - 20
    body = payload + bytes(ulen - 8 - len(payload))
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, 0, 0x4000, 64, 17, 0,
                               _ip(SRC_IP), _ip(dst)))
    ip[10:12] = struct.pack("!H", _ip_csum(bytes(ip)))
    mc = _ip(dst)
    dmac = bytes([0x01, 0x00, 0x5E, mc[1] & 0x7F, mc[2], mc[3]])
    eth = dmac + _mac("02:00:00:00:00:01") + b"\x08\x00"
    return eth + bytes(ip) + struct.pack("!HHHH", SRC_PORT, dport, ulen, 0) + body


def native_frame(frame):
    """A native DATA frame of group 100 with one message, frame bytes on the wire. Built with
    the project's Scapy layer, so the harness follows the wire format wherever it goes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    from interlink_scapy import il_data  # noqa: E402 (Scapy is slow to import: only here)
    msg = bytes(frame - FCS - HDRS - IL_HDR - IL_REC)
    il = bytes(il_data(RAW_GROUP_ID, sender=0xC6120001, sender_seq=1, msgs=[msg]))
    f = udp_frame(frame - FCS, RAW_DST, IL_PORT, il)
    assert len(f) == frame - FCS, (len(f), frame)
    return f


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 0, i, len(fr), len(fr)))
            f.write(fr)


def pcap_for(case, path, copies=64):
    """A capture the generator replays from memory (net_pcap infinite_rx): copies of one frame
    (the sequencer stamps every DATA frame whatever its sender_seq outside UTO groups)."""
    check(case)
    fr = (native_frame(case["frame"]) if case["mode"] == "native"
          else udp_frame(case["frame"] - FCS, RAW_DST, RAW_PORT))
    write_pcap(path, [fr] * copies)
    return path
