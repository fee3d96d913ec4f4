"""The C header, docs/wire-format.md and the Scapy layer describe one wire format."""
import json
import re
import subprocess

from scapy.packet import NoPayload

from conftest import ROOT, WIRE_DUMP
from interlink_scapy import (HEADER_FIELDS, IL_FLAGS, IL_HDR_LEN, IL_TYPES, IL_UDP_PORT, IL_VERSION,
                       ROLE_RECEIVER, ROLE_SENDER, IL_ACK_TFRC_LEN, IL_FEC_CODES, IL_FEC_ID_LEN,
                       ILAck, ILAckTfrc, ILCredit, ILEpochReport, ILFecId, ILFecRepair, ILMember, ILMsg, ILRange,
                       ILStable, ILView, ILViewMember, ILViewSender, Interlink, ILAuth,
                       il_auth_seal, IL_LEC_ID_LEN, IL_LEC_ORIGINS, ILLecId, ILLecRepair,
                       il_lec_xor)

DOC = ROOT / "docs" / "wire-format.md"
FEC_DOC = ROOT / "docs" / "fec.md"
FEC_H = ROOT / "include" / "interlink" / "fec_wire.h"
LEC_H = ROOT / "include" / "interlink" / "lec_wire.h"


def c_wire():
    return json.loads(subprocess.run([str(WIRE_DUMP)], capture_output=True, text=True,
                                     check=True).stdout)


def doc_table(heading, doc=DOC):
    """Rows of the first markdown table after a heading, as lists of cells."""
    text = doc.read_text()
    i = text.index(heading)
    rows = []
    for line in text[i:].splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set(cells[0]) <= set("-") and cells[0]:
                continue
            rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header row


def doc_example_bytes():
    """The bytes of the DATA example in the doc (each line: hex, three or more spaces, a
    comment)."""
    text = DOC.read_text()
    block = text[text.index("## Examples"):].split("```")[1]
    hexes = "".join(re.split(r"\s{3,}", line)[0] for line in block.splitlines() if line)
    return bytes.fromhex(hexes.replace(" ", ""))


def scapy_layout(cls, names):
    """(offset, size) of each field, found by setting it to all-ones alone."""
    base = bytes(cls(**{n: 0 for n in names}))
    out = {}
    for n in names:
        for width in (8, 4, 2, 1):
            try:
                b = bytes(cls(**{m: (2 ** (8 * width) - 1 if m == n else 0) for m in names}))
            except Exception:
                continue
            diff = [i for i in range(min(len(b), len(base))) if b[i] != base[i]]
            if diff and len(b) == len(base):
                out[n] = (diff[0], diff[-1] - diff[0] + 1)
                break
        assert n in out, f"cannot locate Scapy field {n}"
    return out


def test_constants_agree():
    c = c_wire()
    assert c["version"] == IL_VERSION
    assert c["udp_port"] == IL_UDP_PORT
    assert c["header_len"] == IL_HDR_LEN == len(bytes(Interlink(hdr_len=40, msg_count=0)))
    assert c["msg_header_len"] == len(bytes(ILMsg(data=b"")))
    assert c["range_len"] == len(bytes(ILRange()))


def test_header_fields_c_vs_scapy():
    c = c_wire()
    assert [f["name"] for f in c["header"]] == HEADER_FIELDS
    lay = scapy_layout(Interlink, HEADER_FIELDS)
    for f in c["header"]:
        assert lay[f["name"]] == (f["offset"], f["size"]), f["name"]


def test_header_fields_c_vs_doc():
    c = c_wire()
    rows = doc_table("## The common header")
    assert [(int(r[0]), int(r[1]), r[2]) for r in rows] == \
        [(f["offset"], f["size"], f["name"]) for f in c["header"]]


def test_bodies_c_vs_doc_vs_scapy():
    c = c_wire()
    for heading, key, cls in (("## DATA message record", "msg", None),
                              ("## NAK and UNAVAIL body", "range", ILRange)):
        rows = doc_table(heading)
        assert [(int(r[0]), int(r[1]), r[2]) for r in rows] == \
            [(f["offset"], f["size"], f["name"]) for f in c[key]], heading
        if cls:
            lay = scapy_layout(cls, [f["name"] for f in c[key]])
            for f in c[key]:
                assert lay[f["name"]] == (f["offset"], f["size"])
    # The message record: len is a length field, check by building one.
    b = bytes(ILMsg(msg_flags=0xabcd, data=b"xyz"))
    assert b[0:2] == (3).to_bytes(2, "big") and b[2:4] == b"\xab\xcd" and b[4:] == b"xyz"


def test_types_agree():
    c = c_wire()
    doc = {r[1]: int(r[0]) for r in doc_table("## Message types")}
    assert c["types"] == doc
    assert c["types"] == {v: k for k, v in IL_TYPES.items()}


def test_flags_agree():
    c = c_wire()
    doc = {r[2]: int(r[1], 16) for r in doc_table("### Flags")}
    assert c["flags"] == doc
    for name, value in c["flags"].items():
        assert IL_FLAGS[value.bit_length() - 1] == name


def test_doc_example_matches_scapy():
    """The hex example in the doc is what the Scapy layer builds."""
    from interlink_scapy import il_data
    assert bytes(il_data(1, 3, 7, [b"hi", b"there"])) == doc_example_bytes()


BODIES = [("## ACK body", "ack", ILAck), ("## ACK body, long form", "ack_tfrc", ILAckTfrc),
          ("## STABLE body", "stable", ILStable),
          ("## MEMBER body", "member", ILMember), ("## VIEW body", "view", None),
          ("Member entry", "view_member", ILViewMember), ("Sender entry", "view_sender", ILViewSender),
          ("## CREDIT body", "credit", ILCredit), ("## EPOCH_REPORT body", "epoch_report", ILEpochReport),
          ("## AUTH option", "auth", None)]


def test_auth_mac_agrees():
    """The AUTH option as the C library (libsodium) signs a JOIN, and as the Scapy package
    signs the same unsigned JOIN with Python's own BLAKE2b: the same bytes, so the MAC's
    definition in docs/wire-format.md is what both compute. The signed frame dissects."""
    from scapy.layers.l2 import Ether
    c = c_wire()
    # Scapy's AUTH layer has the C layout (key_id, counter, a 16-byte mac).
    assert bytes(ILAuth(key_id=1, counter=2, mac=bytes(range(16)))) == \
        (1).to_bytes(4, "big") + (2).to_bytes(8, "big") + bytes(range(16))
    assert [(f["offset"], f["size"]) for f in c["auth"]] == [(0, 4), (4, 8), (12, 16)]
    e = c["auth_example"]
    unsigned, signed = bytes.fromhex(e["unsigned"]), bytes.fromhex(e["signed"])
    assert il_auth_seal(unsigned[42:], bytes.fromhex(e["key"]), e["key_id"],
                        e["counter"]) == signed[42:]
    il = Ether(signed)[Interlink]
    assert il.hdr_len == IL_HDR_LEN + 28 and "AUTH" in str(il.flags)
    a = ILAuth(bytes(il.options))
    assert (a.key_id, a.counter, len(a.mac)) == (e["key_id"], e["counter"], 16)
    assert (il[ILMember].roles, il[ILMember].incarnation) == (ROLE_RECEIVER, 9)


def test_control_bodies_agree():
    c = c_wire()
    for heading, key, cls in BODIES:
        rows = doc_table(heading)
        assert [(int(r[0]), int(r[1]), r[2]) for r in rows] == \
            [(f["offset"], f["size"], f["name"]) for f in c[key]], heading
        if cls:
            lay = scapy_layout(cls, [f["name"] for f in c[key]])
            for f in c[key]:
                assert lay[f["name"]] == (f["offset"], f["size"]), (key, f["name"])
    assert c["roles"] == {"SENDER": ROLE_SENDER, "RECEIVER": ROLE_RECEIVER}


def test_view_layout_by_example():
    """VIEW's counted lists: the fixed part as in the header, then members, then senders."""
    c = c_wire()
    v = ILView(view_id=7, members=[ILViewMember(member_id=1, roles=3)],
               senders=[ILViewSender(sender_id=9, incarnation=5, next_sender_seq=42)])
    b = bytes(v)
    fixed = {f["name"]: f for f in c["view"]}
    assert len(b) == 8 + 8 + 16
    assert b[fixed["n_members"]["offset"]:][:2] == (1).to_bytes(2, "big")
    assert b[fixed["n_senders"]["offset"]:][:2] == (1).to_bytes(2, "big")
    assert b[8:16] == (1).to_bytes(4, "big") + (3).to_bytes(4, "big")
    assert b[16:] == (9).to_bytes(4, "big") + (5).to_bytes(4, "big") + (42).to_bytes(8, "big")
    # and it dissects behind a header
    pkt = Interlink(bytes(Interlink(type=9, group_id=1, global_seq=5) / v))
    assert pkt[ILView].senders[0].next_sender_seq == 42


def test_ack_forms_by_length():
    """Both ACK forms: their lengths agree everywhere, the long form starts with the short one,
    and the Scapy layer dissects each by the body's length."""
    c = c_wire()
    assert c["ack_len"] == len(bytes(ILAck())) == 8
    assert c["ack_tfrc_len"] == IL_ACK_TFRC_LEN == len(bytes(ILAckTfrc()))
    assert [f["name"] for f in c["ack_tfrc"][:2]] == [f["name"] for f in c["ack"]]
    assert "## ACK body, long form (24 bytes)" in DOC.read_text()
    short = Interlink(bytes(Interlink(type=4, group_id=1, global_seq=9) /
                            ILAck(view_id=3, buffer_free=77)))
    assert ILAck in short and ILAckTfrc not in short and short[ILAck].buffer_free == 77
    long_ = Interlink(bytes(Interlink(type=4, group_id=1, global_seq=9) /
                            ILAckTfrc(view_id=3, buffer_free=77, echo_seq=8, delta_us=1234,
                                      loss_ppm=c["ack_ppm_max"] // 100)))
    b = long_[ILAckTfrc]
    assert (b.view_id, b.buffer_free, b.echo_seq, b.delta_us, b.loss_ppm) == \
        (3, 77, 8, 1234, 10000)


C_TYPES = {"uint8_t": 1, "uint16_t": 2, "uint32_t": 4, "uint64_t": 8}


def c_struct(text, name):
    """Fields of a packed struct of fixed-width integers in a C header: name, offset, size."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = re.search(r"struct %s \{(.*?)\} __attribute__" % name, text, re.S).group(1)
    out, off = [], 0
    for ctype, field in re.findall(r"\b(uint\d+_t)\s+(\w+);", body):
        out.append({"name": field, "offset": off, "size": C_TYPES[ctype]})
        off += C_TYPES[ctype]
    return out


def test_fec_repair_c_vs_doc_vs_scapy():
    """FEC_REPAIR (type 11): fec_wire.h, docs/fec.md and the Scapy layer agree on the body,
    the recipe entry, the codes and the dissection behind a header."""
    text = FEC_H.read_text()
    body = c_struct(text, "il_fec_body")
    # The header's offset macros are checked against offsetof by the compiler: the parse
    # above must find the same offsets.
    for f in body:
        m = re.search(r"#define IL_FEC_OFF_%s (\d+)" % f["name"].upper(), text)
        assert m and int(m.group(1)) == f["offset"], f
    assert sum(f["size"] for f in body) == int(re.search(r"IL_FEC_BODY_LEN (\d+)u", text)[1])
    rows = doc_table("FEC body (`struct il_fec_body`)", FEC_DOC)
    assert [(int(r[0]), int(r[1]), r[2].strip("`")) for r in rows] == \
        [(f["offset"], f["size"], f["name"]) for f in body]
    lay = scapy_layout(ILFecRepair, [f["name"] for f in body])
    for f in body:
        assert lay[f["name"]] == (f["offset"], f["size"]), f["name"]
    codes = dict(re.findall(r"#define IL_FEC_CODE_(\w+) (\d+)", text))
    assert {int(v): k for k, v in codes.items()} == IL_FEC_CODES
    ent = c_struct(text, "il_fec_id_wire")
    assert [(f["name"], f["offset"], f["size"]) for f in ent] == \
        [("src", 0, 4), ("dst", 4, 4), ("ip_id", 8, 2), ("ip_len", 10, 2), ("csum", 12, 4)]
    assert int(re.search(r"IL_FEC_ID_LEN (\d+)u", text)[1]) == IL_FEC_ID_LEN
    b = bytes(ILFecId(src="10.0.0.1", dst="10.0.0.2", ip_id=0x1234, ip_len=0x5678,
                      csum=0x9abcdef0))
    assert b == bytes([10, 0, 0, 1, 10, 0, 0, 2, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0])
    # count and xor_len follow the lists, and a repair dissects behind a header on port 7401.
    rep = ILFecRepair(code=1, layer=2, rate_r=8, rate_c=3, interleave=11, len_code=0x55,
                      x_first=99, recipe=[ILFecId(src="10.0.0.1"), ILFecId(src="10.0.0.3")],
                      data=b"xyz")
    raw = bytes(Interlink(type=11, group_id=5, sender_seq=4) / rep)
    assert raw[40 + 4] == 2 and raw[40 + 8:40 + 10] == (3).to_bytes(2, "big")
    assert len(raw) == 40 + 24 + 2 * 16 + 3
    back = Interlink(raw)[ILFecRepair]
    assert (back.count, back.xor_len, back.x_first, back.data) == (2, 3, 99, b"xyz")
    assert back.recipe[1].src == "10.0.0.3"


def test_lec_repair_c_vs_doc_vs_scapy():
    """LEC_REPAIR (type 12): lec_wire.h (through il-wire-dump and parsed as text), the tables of
    docs/wire-format.md and the Scapy layer agree on the body, the id, the origins and the
    dissection behind a header; the XOR the Scapy package computes is the C library's."""
    c = c_wire()
    text = LEC_H.read_text()
    for key, struct in (("lec_body", "il_lec_body"), ("lec_id", "il_lec_id_wire")):
        assert c_struct(text, struct) == c[key], key
    for f in c["lec_body"]:
        m = re.search(r"#define IL_LEC_OFF_%s (\d+)" % f["name"].upper(), text)
        assert m and int(m.group(1)) == f["offset"], f
    for heading, key, cls in (("## LEC_REPAIR body", "lec_body", ILLecRepair),
                              ("LEC id (16 bytes)", "lec_id", ILLecId)):
        rows = doc_table(heading)
        assert [(int(r[0]), int(r[1]), r[2]) for r in rows] == \
            [(f["offset"], f["size"], f["name"]) for f in c[key]], heading
        names = [f["name"] for f in c[key]]
        lay = scapy_layout(cls, names) if cls is ILLecId else \
            scapy_layout(lambda **kw: cls(ids=[], data=b"x", **kw),
                         [n for n in names if n not in ("count", "len")])
        for f in c[key]:
            if f["name"] in lay:
                assert lay[f["name"]] == (f["offset"], f["size"]), (key, f["name"])
    assert sum(f["size"] for f in c["lec_id"]) == IL_LEC_ID_LEN
    assert {v: k for k, v in c["lec_origins"].items()} == IL_LEC_ORIGINS
    assert c["lec_max_ids"] == 32 and "| 0 | 1 | count | Ids that follow, 1..32. |" in \
        DOC.read_text()
    # count and len follow the lists; the length is exact
    rep = ILLecRepair(rate_r=8, origin=1, len_xor=0x33,
                      ids=[ILLecId(group=1, epoch=2, seq=3), ILLecId(group=4, epoch=5, seq=6)],
                      data=b"abcd")
    raw = bytes(Interlink(type=12, group_id=1, sender_seq=1) / rep)
    assert raw[40] == 2 and raw[44:46] == (4).to_bytes(2, "big")
    assert len(raw) == 40 + 8 + 2 * 16 + 4
    back = Interlink(raw)[ILLecRepair]
    assert (back.count, back.len, back.origin, back.data) == (2, 4, 1, b"abcd")
    assert [(i.group, i.epoch, i.seq) for i in back.ids] == [(1, 2, 3), (4, 5, 6)]
    assert il_lec_xor([b"\x01\x02", b"\x10\x20\x30"]) == (b"\x11\x22\x30", 3, 1)


def test_every_type_has_a_decoder():
    """Every type of wire.h either has a Scapy body or none by design (DATA's records are part
    of the header layer; FTCP_LOG has no body format yet)."""
    from interlink_scapy.layers import IL_BODIES
    c = c_wire()
    no_body = {"DATA", "FTCP_LOG"}
    assert {n for n, v in c["types"].items() if v not in IL_BODIES} == no_body


def test_library_frames_dissect_as_built():
    """One frame of every message type as the wire library (lib/wire) builds it, printed by
    il-wire-dump: the Scapy layers read back the values it was built from, and Scapy agrees
    with its IPv4 and UDP lengths and checksums."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    c = c_wire()
    seen = set()
    for fr in c["frames"]:
        t, body = fr["type"], fr["body"]
        pkt = Ether(bytes.fromhex(fr["hex"]))
        assert Interlink in pkt, t
        assert pkt[IP].len == len(pkt) - 14 and pkt[UDP].len == len(pkt) - 34, t
        q = pkt.copy()
        del q[IP].chksum, q[UDP].chksum
        q = Ether(bytes(q))
        assert (q[IP].chksum, q[UDP].chksum) == (pkt[IP].chksum, pkt[UDP].chksum), t
        il = pkt[Interlink]
        assert (il.version, il.hdr_len) == (IL_VERSION, IL_HDR_LEN)
        for k, v in fr["header"].items():
            assert int(getattr(il, k)) == v, (t, k)
        if t == "DATA":
            assert [bytes(m.data).hex() for m in il.msgs] == body["msgs"]
            # the sender's frame of docs/wire-format.md, byte for byte
            assert bytes(pkt[UDP].payload) == doc_example_bytes()
        elif t == "VIEW":
            v = pkt[ILView]
            assert v.view_id == body["view_id"]
            assert [[m.member_id, m.roles] for m in v.members] == body["members"]
            assert [[s.sender_id, s.incarnation, s.next_sender_seq]
                    for s in v.senders] == body["senders"]
        else:
            layer = il.payload
            for k, v in body.items():
                if k not in ("ids", "data"):
                    assert int(getattr(layer, k)) == v, (t, k)
            if t == "FEC_REPAIR":
                assert len(layer.recipe) == body["count"] and len(layer.data) == body["xor_len"]
            if t == "LEC_REPAIR":
                assert [[i.group, i.epoch, i.seq] for i in layer.ids] == body["ids"]
                assert all(i.reserved == 0 for i in layer.ids)
                assert bytes(layer.data).hex() == body["data"]
            assert isinstance(layer.payload, NoPayload), t
        seen.add(t)
    assert seen == set(IL_TYPES.values()) - {"FTCP_LOG"}


def test_library_tcp_segment_as_built():
    """The TCP segment the FT-TCP stage fabricates with the library: Scapy agrees with its
    fields, options and both checksums."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    s = c_wire()["tcp_segment"]
    pkt = Ether(bytes.fromhex(s["hex"]))
    t = pkt[TCP]
    assert (t.seq, t.ack, int(t.flags), t.window) == (s["seq"], s["ack"], s["flags"], s["window"])
    assert ("MSS", 1460) in t.options and ("WScale", 7) in t.options
    assert pkt[IP].flags == "DF" and pkt[IP].ttl == 64
    q = pkt.copy()
    del q[IP].chksum, q[TCP].chksum
    q = Ether(bytes(q))
    assert (q[IP].chksum, q[TCP].chksum) == (pkt[IP].chksum, t.chksum)
