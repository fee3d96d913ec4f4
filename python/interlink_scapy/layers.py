"""Scapy layers for the Interlink wire format (include/interlink/wire.h, fec_wire.h,
lec_wire.h).

Importing them binds UDP port 7400 (and 7401, the default port of FEC repairs), so frames read
with rdpcap() or caught with sniff() dissect as Interlink:

    from interlink_scapy import Interlink, ILMsg, ILRange, il_data
    pkt = Ether()/IP(dst="239.1.1.1")/UDP(sport=5000, dport=7400)/il_data(1, 3, 7, [b"hi"])
"""
from scapy.fields import (ByteEnumField, ByteField, FieldLenField, FlagsField, IntField,
                          IPField, LongField, PacketListField, ShortField, StrLenField,
                          XIntField, XStrLenField)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers, Raw

IL_UDP_PORT = 7400
IL_FEC_UDP_PORT = 7401  # default `port` of the fec_enc/fec_dec stages
IL_VERSION = 1
IL_HDR_LEN = 40

IL_TYPES = {
    1: "DATA", 2: "NAK", 3: "UNAVAIL", 4: "ACK", 5: "STABLE", 6: "JOIN", 7: "LEAVE",
    8: "HEARTBEAT", 9: "VIEW", 10: "CREDIT", 11: "FEC_REPAIR", 12: "LEC_REPAIR",
    13: "FTCP_LOG", 14: "EPOCH_REPORT",
}
# Bit i of the flags byte, least significant first.
IL_FLAGS = ["STAMPED", "RETRANS", "STABLE_VALID", "RAW", "FIFO_START", "AUTH", "R6", "R7"]
IL_F_AUTH = 0x20
IL_AUTH_OPT_LEN = 28
IL_AUTH_MAC_LEN = 16


class ILMsg(Packet):
    """One packed application message of a DATA frame."""
    name = "InterlinkMsg"
    fields_desc = [
        FieldLenField("len", None, length_of="data", fmt="!H"),
        ShortField("msg_flags", 0),
        StrLenField("data", b"", length_from=lambda p: p.len),
    ]

    def extract_padding(self, s):
        return b"", s


class ILRange(Packet):
    """Body of NAK and UNAVAIL: an inclusive range of global sequences."""
    name = "InterlinkRange"
    fields_desc = [LongField("first_seq", 0), LongField("last_seq", 0)]

    def extract_padding(self, s):
        return b"", s


class ILAck(Packet):
    """ACK body; the header's global_seq is the receiver's next expected sequence."""
    name = "InterlinkAck"
    fields_desc = [IntField("view_id", 0), IntField("buffer_free", 0xFFFFFFFF)]

    def extract_padding(self, s):
        return b"", s


class ILAckTfrc(Packet):
    """ACK body, long form (24 bytes, WAN groups): the short form, then the RTT echo (the
    frame's global_seq and the receiver's hold time) and the loss-event rate in ppm."""
    name = "InterlinkAckTfrc"
    fields_desc = [IntField("view_id", 0), IntField("buffer_free", 0xFFFFFFFF),
                   LongField("echo_seq", 0), IntField("delta_us", 0), IntField("loss_ppm", 0)]

    def extract_padding(self, s):
        return b"", s


IL_ACK_TFRC_LEN = 24


class ILStable(Packet):
    name = "InterlinkStable"
    fields_desc = [IntField("view_id", 0), IntField("reserved", 0)]

    def extract_padding(self, s):
        return b"", s


class ILMember(Packet):
    """JOIN, LEAVE and HEARTBEAT body."""
    name = "InterlinkMember"
    fields_desc = [IntField("roles", 3), IntField("incarnation", 0)]

    def extract_padding(self, s):
        return b"", s


class ILViewMember(Packet):
    name = "InterlinkViewMember"
    fields_desc = [IntField("member_id", 0), IntField("roles", 0)]

    def extract_padding(self, s):
        return b"", s


class ILViewSender(Packet):
    name = "InterlinkViewSender"
    fields_desc = [IntField("sender_id", 0), IntField("incarnation", 0),
                   LongField("next_sender_seq", 0)]

    def extract_padding(self, s):
        return b"", s


class ILView(Packet):
    name = "InterlinkView"
    fields_desc = [
        IntField("view_id", 0),
        FieldLenField("n_members", None, count_of="members", fmt="!H"),
        FieldLenField("n_senders", None, count_of="senders", fmt="!H"),
        PacketListField("members", [], ILViewMember, count_from=lambda p: p.n_members),
        PacketListField("senders", [], ILViewSender, count_from=lambda p: p.n_senders),
    ]

    def extract_padding(self, s):
        return b"", s


class ILEpochReport(Packet):
    """EPOCH_REPORT body (docs/ha.md): a receiver's standing in the epoch its header names,
    answering a newer one; the header's global_seq is its cumulative point there."""
    name = "InterlinkEpochReport"
    fields_desc = [IntField("new_epoch", 0), IntField("view_id", 0), LongField("stable_seen", 0),
                   LongField("high", 0)]

    def extract_padding(self, s):
        return b"", s


class ILCredit(Packet):
    name = "InterlinkCredit"
    fields_desc = [LongField("limit_seq", 0), IntField("window", 0), IntField("rate_kbps", 0)]

    def extract_padding(self, s):
        return b"", s


IL_FEC_CODES = {1: "XOR", 2: "RS"}
IL_FEC_ID_LEN = 16


class ILFecId(Packet):
    """One recipe entry of a FEC repair: the identity of an IPv4 packet it covers."""
    name = "InterlinkFecId"
    fields_desc = [IPField("src", "0.0.0.0"), IPField("dst", "0.0.0.0"), ShortField("ip_id", 0),
                   ShortField("ip_len", 0), XIntField("csum", 0)]

    def extract_padding(self, s):
        return b"", s


class ILFecRepair(Packet):
    """FEC_REPAIR body (include/interlink/fec_wire.h): the 24-byte FEC header, `count`
    recipe entries, then `xor_len` bytes of repair payload."""
    name = "InterlinkFecRepair"
    fields_desc = [
        ByteEnumField("code", 1, IL_FEC_CODES),
        ByteField("layer", 0),
        ByteField("rate_r", 0),
        ByteField("rate_c", 0),
        FieldLenField("count", None, count_of="recipe", fmt="B"),
        ByteField("id_len", IL_FEC_ID_LEN),
        ShortField("interleave", 1),
        FieldLenField("xor_len", None, length_of="data", fmt="!H"),
        ShortField("len_code", 0),
        IntField("reserved", 0),
        LongField("x_first", 0),
        PacketListField("recipe", [], ILFecId, count_from=lambda p: p.count),
        StrLenField("data", b"", length_from=lambda p: p.xor_len),
    ]

    def extract_padding(self, s):
        return b"", s


IL_LEC_ID_LEN = 16
IL_LEC_ORIGINS = {0: "MEMBER", 1: "APPLIANCE"}


class ILLecId(Packet):
    """One id of a LEC repair: a stamped DATA frame of a group, named by its first message's
    global sequence."""
    name = "InterlinkLecId"
    fields_desc = [ShortField("group", 0), ShortField("reserved", 0), IntField("epoch", 0),
                   LongField("seq", 0)]

    def extract_padding(self, s):
        return b"", s


class ILLecRepair(Packet):
    """LEC_REPAIR body (include/interlink/lec_wire.h): the 8-byte LEC header, `count` ids, then
    `len` bytes: the XOR of the frames the ids name (UDP payloads), each zero-padded to the
    longest."""
    name = "InterlinkLecRepair"
    fields_desc = [
        FieldLenField("count", None, count_of="ids", fmt="B"),
        ByteField("id_len", IL_LEC_ID_LEN),
        ByteField("rate_r", 8),
        ByteEnumField("origin", 0, IL_LEC_ORIGINS),
        FieldLenField("len", None, length_of="data", fmt="!H"),
        ShortField("len_xor", 0),
        PacketListField("ids", [], ILLecId, count_from=lambda p: p.count),
        StrLenField("data", b"", length_from=lambda p: p.len),
    ]

    def extract_padding(self, s):
        return b"", s


def il_lec_xor(frames):
    """The repair payload, len and len_xor of frames (bytes: UDP payloads of stamped DATA), as
    a LEC node computes them: the XOR of all, each zero-padded to the longest."""
    n = max(len(f) for f in frames)
    acc = bytearray(n)
    lx = 0
    for f in frames:
        for i, b in enumerate(f):
            acc[i] ^= b
        lx ^= len(f)
    return bytes(acc), n, lx


class ILAuth(Packet):
    """The AUTH option (flag AUTH): the 28 bytes after the fixed header, in the `options`
    field of Interlink. ILAuth(bytes(pkt[Interlink].options)) reads it."""
    name = "Interlink AUTH"
    fields_desc = [
        IntField("key_id", 0),
        LongField("counter", 0),
        XStrLenField("mac", b"\0" * IL_AUTH_MAC_LEN, length_from=lambda p: IL_AUTH_MAC_LEN),
    ]

    def extract_padding(self, s):
        return b"", s


def il_auth_seal(msg, key, key_id, counter):
    """Signs an Interlink message (bytes of the UDP payload, a 40-byte header and its body):
    inserts the AUTH option, sets the flag and hdr_len, and the MAC, a keyed BLAKE2b of 16
    bytes (the same function as libsodium's crypto_generichash) over header bytes 0..51 and
    the body. key: 32 bytes."""
    import hashlib
    msg = bytes(msg)
    hdr = bytearray(msg[:IL_HDR_LEN])
    hdr[2] = IL_HDR_LEN + IL_AUTH_OPT_LEN
    hdr[3] |= IL_F_AUTH
    body = msg[IL_HDR_LEN:]
    covered = bytes(hdr) + key_id.to_bytes(4, "big") + counter.to_bytes(8, "big")
    mac = hashlib.blake2b(covered + body, digest_size=IL_AUTH_MAC_LEN, key=key).digest()
    return covered + mac + body


IL_BODIES = {2: "ILRange", 3: "ILRange", 4: "ILAck", 5: "ILStable", 6: "ILMember",
             7: "ILMember", 8: "ILMember", 9: "ILView", 10: "ILCredit", 11: "ILFecRepair",
             12: "ILLecRepair", 14: "ILEpochReport"}
ROLE_SENDER, ROLE_RECEIVER = 1, 2


class Interlink(Packet):
    name = "Interlink"
    fields_desc = [
        ByteField("version", IL_VERSION),
        ByteEnumField("type", 1, IL_TYPES),
        ByteField("hdr_len", None),
        FlagsField("flags", 0, 8, IL_FLAGS),
        ShortField("group_id", 0),
        ShortField("msg_count", None),
        IntField("sender_id", 0),
        IntField("epoch", 0),
        LongField("sender_seq", 0),
        LongField("global_seq", 0),
        LongField("stable_seq", 0),
        XStrLenField("options", b"",
                     length_from=lambda p: max(0, (p.hdr_len or IL_HDR_LEN) - IL_HDR_LEN)),
        PacketListField("msgs", [], ILMsg,
                        count_from=lambda p: p.msg_count if p.type == 1 else 0),
    ]

    def post_build(self, pkt, pay):
        if self.hdr_len is None:
            pkt = pkt[:2] + bytes([IL_HDR_LEN + len(self.options)]) + pkt[3:]
        if self.msg_count is None:
            n = len(self.msgs) if self.type == 1 else 0
            pkt = pkt[:6] + n.to_bytes(2, "big") + pkt[8:]
        return pkt + pay

    def guess_payload_class(self, payload):
        if self.type == 4 and len(payload) >= IL_ACK_TFRC_LEN:
            return ILAckTfrc  # the body's length says which ACK form it is
        body = IL_BODIES.get(self.type)
        return globals()[body] if body else Raw


# The contract test walks these in order: (C field name, Scapy field name).
HEADER_FIELDS = ["version", "type", "hdr_len", "flags", "group_id", "msg_count", "sender_id",
                 "epoch", "sender_seq", "global_seq", "stable_seq"]

def bind_port(port):
    """Dissect UDP traffic to or from `port` as Interlink too (a config's `udp_port`, a group's
    `port` or a FEC stage's `port` other than the defaults)."""
    bind_layers(UDP, Interlink, dport=port)
    bind_layers(UDP, Interlink, sport=port)


bind_port(IL_UDP_PORT)
bind_layers(UDP, Interlink, dport=IL_FEC_UDP_PORT)


def il_data(group, sender, sender_seq, msgs, **kw):
    """A native DATA message as a sender builds it (unstamped)."""
    return Interlink(type=1, group_id=group, sender_id=sender, sender_seq=sender_seq,
                     msgs=[ILMsg(data=m) for m in msgs], **kw)


def il_nak(group, receiver, first, last, **kw):
    return Interlink(type=2, group_id=group, sender_id=receiver, **kw) / ILRange(
        first_seq=first, last_seq=last)
