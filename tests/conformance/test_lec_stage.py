"""The appliance-side LEC stage (docs/lec.md) through the real `interlink` binary over net_pcap:
views arrive as VIEW frames, members' addresses as their HEARTBEATs, DATA is stamped by the
sequencer and protected by the `lec` stage. Every repair it sends back out of "in" is checked
with the Scapy layer: addressed to a member of every group it names, field by field, and its
payload the XOR of the stamped frames its ids name (il_lec_xor, computed here from what came
out on "out"). LEC repairs of other members pass the appliance unchanged."""
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from interlink_scapy import (ILLecId, ILLecRepair, ILMember, ILView, ILViewMember, Interlink,
                             il_auth_seal, il_lec_xor)
from test_appliance import MC, data_frame, mcast_mac

APPLIANCE_IP = "192.0.2.1"  # configs/sequencer.yaml
VIEWS = {1: [11, 12, 13], 2: [12, 13, 14]}


def member_mac(i):
    return "02:00:00:00:01:%02x" % i


def member_ip(i):
    return "10.9.1.%d" % i


def view_frame(group, members):
    return (Ether(src="02:00:00:00:00:fe", dst=mcast_mac(MC[group])) /
            IP(src=APPLIANCE_IP, dst=MC[group]) / UDP(sport=7400, dport=7400) /
            Interlink(type=9, group_id=group, flags=0x05, epoch=77, global_seq=1) /
            ILView(view_id=1, members=[ILViewMember(member_id=m, roles=2) for m in members] +
                   [ILViewMember(member_id=1, roles=1)]))  # a sender only: no repairs


def heartbeat(group, member):
    return (Ether(src=member_mac(member), dst=mcast_mac(MC[group])) /
            IP(src=member_ip(member), dst=MC[group]) / UDP(sport=7400, dport=7400) /
            Interlink(type=8, group_id=group, sender_id=member) / ILMember(roles=2, incarnation=3))


# Algorithm 1's composite bins at one node's rate, a unicast copy per target (the defaults
# are one bin per group at the peers' rate, to the group's address: below, and
# tests/unit/lec/test_lec_stage.c)
LEC = ["stages.lec={type: lec, tx: in, r: 8, c: 5, plan: regions, rate: node, repairs_to: members}",
       "pipeline=[{lcore: 1, chains: [{rx: in, stages: [classify, seq, lec, nak], tx: out}, "
       "{rx: out, stages: [classify, nak], tx: in}]}]", "epoch=77"]


# repair_lcore: the bins, the XOR and the repairs' frames on lcore 2 (sharing a CPU with the
# main lcore, which sleeps), the chain's lcore handing it references (docs/lec.md, "A repair
# lcore"); every check below holds for both.
REPAIR_LCORE = ["stages.lec.repair_lcore=2",
                'eal=[--no-huge, -m, "512", --lcores, "0@0,1@1,2@0", --log-level, "lib.eal:error"]']
WHERE = pytest.mark.parametrize("where", ["chain", "repair_lcore"])


def handed_over(st, where, frames):
    """With a repair lcore every DATA, control and NAK frame was handed to it, none refused."""
    if where == "chain":
        assert st["handed_over"] == 0 and "repair_lcore" not in st
    else:
        assert st["repair_lcore"] == 2 and st["drop_repair_lcore_busy"] == 0
        # (no control stage here: no view notes, views come as VIEW frames)
        assert st["handed_over"] == frames == st["repair_lcore_frames"]
        assert st["drop_repair_back_full"] == 0 and st["repair_ring_used"] == 0


@WHERE
def test_appliance_repairs_are_exact_and_go_to_members(run_pcap, where):
    ins = [view_frame(g, m) for g, m in VIEWS.items()]
    ins += [heartbeat(1 if i < 14 else 2, i) for i in (11, 12, 13, 14)]
    # 96 DATA frames, the two groups interleaved, of many lengths (packed, too)
    for i in range(96):
        g = 1 + i % 2
        ins.append(data_frame(g, 1, i // 2 + 1,
                              [bytes([i]) * (1 + (i * 37) % 900)] + ([b"x" * 5] if i % 7 else [])))
    r = run_pcap(ins, sets=LEC + (REPAIR_LCORE if where != "chain" else []))
    stamped = {}
    for p in r.out:
        if Interlink in p and p[Interlink].type == 1:
            il = p[Interlink]
            stamped[(il.group_id, il.global_seq)] = bytes(p[UDP].payload)
    assert len(stamped) == 96
    repairs = [p for p in r.back if Interlink in p and p[Interlink].type == 12]
    st = r.summary["stages"]["lec"]
    print(f"fan-out by reference: {st['fanout_by_reference']}")
    assert st["protected"] == 96 and st["addr_learnt"] == 4 and st["views"] == 2
    handed_over(st, where, len(ins))
    assert len(repairs) == st["repair_copies"] > 0
    assert st["drop_no_addr"] == 0
    groups_of = {m: {g for g, ms in VIEWS.items() if m in ms} for m in (11, 12, 13, 14)}
    per_member = {m: 0 for m in groups_of}
    mixed = 0
    for p in repairs:
        il, rep = p[Interlink], p[ILLecRepair]
        dst = int(p[IP].dst.split(".")[-1])
        # unicast from the appliance to the member's host, as learnt from its HEARTBEAT
        assert p[Ether].dst == member_mac(dst) and p[IP].dst == member_ip(dst)
        assert p[IP].src == APPLIANCE_IP and p[UDP].dport == 7400
        assert (il.version, il.hdr_len, int(il.flags), il.msg_count, il.sender_id, il.epoch,
                il.global_seq, il.stable_seq) == (1, 40, 0, 0, 0, 0, 0, 0)
        assert il.group_id == rep.ids[0].group
        assert (rep.id_len, rep.rate_r, rep.origin) == (16, 8, 1)
        assert rep.count == len(rep.ids) == 8
        assert len(bytes(p[UDP].payload)) == 40 + 8 + 16 * rep.count + rep.len
        frames = []
        for i in rep.ids:
            assert i.reserved == 0 and i.epoch == 77
            assert (i.group, i.seq) in stamped, (i.group, i.seq)
            assert i.group in groups_of[dst], "a repair names a frame of a group its target is not in"
            frames.append(stamped[(i.group, i.seq)])
        assert len({(i.group, i.seq) for i in rep.ids}) == rep.count
        xor, n, lx = il_lec_xor(frames)
        assert (rep.len, rep.len_xor, bytes(rep.data)) == (n, lx, xor)
        per_member[dst] += 1
        mixed += len({i.group for i in rep.ids}) > 1
    assert all(per_member.values()), per_member
    assert mixed > 0  # the composite bin of {1, 2}, for 12 and 13
    # sequence numbers of the appliance's repairs: 1, 2, ... per repair (copies share one)
    assert sorted({p[Interlink].sender_seq for p in repairs}) == \
        list(range(1, st["repairs"] + 1))


GROUP_LEC = ["stages.lec={type: lec, tx: in, r: 8, c: 5}",  # repairs_to: group, the default
             "pipeline=[{lcore: 1, chains: [{rx: in, stages: [classify, seq, lec, nak], "
             "tx: out}, {rx: out, stages: [classify, nak], tx: in}]}]", "epoch=77"]


@WHERE
def test_repairs_to_group_go_once_to_the_group(run_pcap, where):
    """repairs_to: group (the default) with the defaults (one bin per group at the peers'
    rate): groups of 3
    receivers at c = 5 owe each receiver min(5, 2) = 2 repairs of every frame, so each layer's
    repair is for the whole group: it leaves once, on "out", to the group's address and port,
    where its data goes, instead of a unicast copy per receiver on "in". Its fields and XOR are
    checked as the unicast ones are; no member's address is needed (no HEARTBEAT is sent)."""
    ins = [view_frame(g, m) for g, m in VIEWS.items()]
    for i in range(96):
        g = 1 + i % 2
        ins.append(data_frame(g, 1, i // 2 + 1, [bytes([i]) * (1 + (i * 37) % 900)]))
    r = run_pcap(ins, sets=GROUP_LEC + (REPAIR_LCORE if where != "chain" else []))
    stamped, repairs, order = {}, [], []
    for p in r.out:
        if Interlink not in p:
            continue
        il = p[Interlink]
        if il.type == 1:
            stamped[(il.group_id, il.global_seq)] = bytes(p[UDP].payload)
            order.append((il.group_id, il.global_seq))
        elif il.type == 12:
            repairs.append(p)
    assert len(stamped) == 96
    for g in (1, 2):  # the data's order is untouched by the repairs between its frames
        seqs = [q for gg, q in order if gg == g]
        assert seqs == sorted(seqs)
    st = r.summary["stages"]["lec"]
    assert st["protected"] == 96 and st["addr_learnt"] == 0
    handed_over(st, where, len(ins))
    assert not [p for p in r.back if Interlink in p and p[Interlink].type == 12]
    assert st["repair_copies"] == 0 and st["drop_no_addr"] == 0
    assert len(repairs) == st["repairs_to_group"] == st["repairs"] > 0
    for p in repairs:
        il, rep = p[Interlink], p[ILLecRepair]
        g = il.group_id
        assert p[Ether].dst == mcast_mac(MC[g]) and p[IP].dst == MC[g]
        assert p[IP].src == APPLIANCE_IP and p[UDP].dport == 7400 and p[IP].flags.DF
        assert (rep.id_len, rep.rate_r, rep.origin) == (16, 8, 1)
        assert 1 <= rep.count == len(rep.ids) <= 8
        assert {i.group for i in rep.ids} == {g}
        frames = [stamped[(i.group, i.seq)] for i in rep.ids]
        xor, n, lx = il_lec_xor(frames)
        assert (rep.len, rep.len_xor, bytes(rep.data)) == (n, lx, xor)
    # every frame of every full round is in two repairs (c_G = 3 x 2 = 6 targets per frame:
    # two layers of 3); the last round's may be cut short by the end of the capture
    covered = {}
    for p in repairs:
        for i in p[ILLecRepair].ids:
            covered[(i.group, i.seq)] = covered.get((i.group, i.seq), 0) + 1
    assert max(covered.values()) == 2
    assert sum(v == 2 for v in covered.values()) >= 80


@pytest.mark.parametrize("lec, msg", [
    ("{type: lec, repairs_to: group, group_tx: nowhere}",
     "'stages.lec.group_tx': 'nowhere' is not a configured port"),
    ("{type: lec, repairs_to: everyone}",
     "'stages.lec.repairs_to': 'everyone' is not one of: members, group"),
    ("{type: lec, repair_lcore: 1}",
     "'stages.lec.repair_lcore': lcore 1 runs chains (pipeline[0])"),
    ("{type: lec, repair_lcore: 0}", "'stages.lec.repair_lcore': 0 is not a worker lcore"),
    ("{type: lec, repair_lcore: 7}", "'stages.lec.repair_lcore': 7 is not a worker lcore"),
    ("{type: lec, repair_lcore: x}", "'stages.lec.repair_lcore'"),
    ("{type: lec, repair_lcore: [2]}", "'stages.lec.repair_lcore': one lcore without shards"),
    ("{type: lec, repair_lcore: 2, repair_ring: 8}", "'stages.lec.repair_ring'"),
])
def test_repairs_to_config_errors_name_the_key(run_pcap, lec, msg):
    r = run_pcap([], sets=[f"stages.lec={lec}"] + GROUP_LEC[1:], expect_rc=2)
    assert msg in r.log, r.log


def test_member_repairs_pass_unchanged(run_pcap):
    """A LEC repair between two hosts that reaches the appliance (a switch flooding a unicast it
    has not learnt) goes out unchanged, with or without the lec stage."""
    rep = (Ether(src=member_mac(11), dst="02:00:00:00:01:0c") /
           IP(src=member_ip(11), dst=member_ip(12)) / UDP(sport=40000, dport=7400) /
           Interlink(type=12, group_id=1, sender_id=11, sender_seq=5) /
           ILLecRepair(rate_r=8, len_xor=3, ids=[ILLecId(group=1, epoch=77, seq=1),
                                                 ILLecId(group=1, epoch=77, seq=2)],
                       data=b"abc"))
    for sets in ([], LEC):
        r = run_pcap([rep], sets=sets)
        assert [bytes(p) for p in r.out] == [bytes(rep)]
        assert r.back == []


KEY, KEY_ID = bytes(range(0x40, 0x60)), 7


def signed(pkt, counter, key=KEY):
    """The frame with its Interlink message signed (AUTH option), addresses unchanged."""
    body = il_auth_seal(bytes(pkt[Interlink]), key, KEY_ID, counter)
    return (Ether(src=pkt[Ether].src, dst=pkt[Ether].dst) / IP(src=pkt[IP].src, dst=pkt[IP].dst) /
            UDP(sport=pkt[UDP].sport, dport=pkt[UDP].dport) / Raw(body))


def moved(pkt, mac, ip):
    """The same frame (the same bytes of its Interlink message) from another host."""
    return (Ether(src=mac, dst=pkt[Ether].dst) / IP(src=ip, dst=pkt[IP].dst) /
            UDP(sport=pkt[UDP].sport, dport=pkt[UDP].dport) / Raw(bytes(pkt[UDP].payload)))


def test_addresses_learnt_only_from_verified_frames(run_pcap, tmp_path):
    """With auth, the stage learns a member's address only from a frame whose MAC and counter
    verify: a forged HEARTBEAT (unsigned, signed with another key, or a signed one replayed from
    another host) does not redirect the member's repairs, nor does an unsigned VIEW change the
    plan. Without auth the same forged HEARTBEAT does redirect them (what the test guards)."""
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY_ID} {KEY.hex()}\n")
    keys.chmod(0o600)
    evil_mac, evil_ip = "02:00:00:00:0e:01", "10.9.9.9"
    ctr = iter(range(1 << 40, 1 << 41))
    views = [signed(view_frame(g, m), next(ctr)) for g, m in VIEWS.items()]
    hbs = {i: signed(heartbeat(1 if i < 14 else 2, i), next(ctr)) for i in (11, 12, 13, 14)}
    forged = [moved(heartbeat(1, 11), evil_mac, evil_ip),                  # no MAC
              moved(signed(heartbeat(1, 12), next(ctr), key=bytes(32)), evil_mac, evil_ip),
              moved(hbs[13], evil_mac, evil_ip),                           # a replay
              view_frame(1, [11, 99])]                                     # an unsigned VIEW
    data = [data_frame(1 + i % 2, 1, i // 2 + 1, [bytes([i]) * 300]) for i in range(64)]
    for auth in (True, False):
        sets = LEC + ([f"stages.lec.auth.keys={keys}"] if auth else [])
        ins = (views if auth else [view_frame(g, m) for g, m in VIEWS.items()])
        ins = ins + list(hbs.values()) + (forged if auth else forged[:1]) + data
        r = run_pcap(ins, sets=sets)
        st = r.summary["stages"]["lec"]
        repairs = [p for p in r.back if Interlink in p and p[Interlink].type == 12]
        assert st["protected"] == 64 and repairs
        to_evil = [p for p in repairs if p[IP].dst == evil_ip]
        if auth:
            assert st["addr_learnt"] == 4 and st["addr_moved"] == 0, st
            assert st["drop_unauth"] == 4 and st["views"] == 2, st
            assert not to_evil
            for p in repairs:
                m = int(p[IP].dst.split(".")[-1])
                assert p[Ether].dst == member_mac(m) and m in (11, 12, 13, 14)
        else:
            assert st["addr_moved"] == 1, st
            assert to_evil and all(p[Ether].dst == evil_mac for p in to_evil)
