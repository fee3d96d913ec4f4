"""A control frame lost on its way to a host must not wedge a group (issue 14's 64 groups per
host found it: VIEWs lost to a full "out" ring left joiners retrying their JOIN for ever).

The real appliance (configs/uto.yaml on veth pairs) and interlink-control, as in
test_control_uto.py; the members are Scapy frames sent on the veths' far ends, so a frame can
be "lost" deterministically: the member just acts as if it never came.

- A VIEW lost: the joiner's retried JOIN (same incarnation) gets the same view again (same
  view id, same start), and no view change is made (test_membership.c checks that a retry
  within 20 ms of the view, which crossed it, gets nothing).
- A CREDIT lost: a sender that used its whole window and whose grant was lost sends
  HEARTBEATs only; the appliance sends the grant again.
- An exclusion lost: a member excluded while alive, whose VIEW without it was lost, is heard
  again (HEARTBEATs) and gets that view again.
- A last grant lost: a sender sends its stable tail again; the sequencer refuses it (stamped
  already) and the grant goes again.
- None dropped at the source: with 256 groups the control stage puts off what one poll cannot
  send instead of dropping it as tx_full."""
import os
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.sendrecv import AsyncSniffer, sendp

from interlink_scapy import ILAck, ILCredit, ILMember, ILView, Interlink, bind_port, il_data
from test_control_uto import UtoRig

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veth pairs)")

T_DATA, T_ACK, T_JOIN, T_HEARTBEAT, T_VIEW, T_CREDIT = 1, 4, 6, 8, 9, 10
WINDOW = 64
CTL = ["--suspect-ms", "2000", "--exclude-ms", "10000", "--window", str(WINDOW)]
# An idle group's STABLE every 50 ms, not every 1 ms: Scapy's sniffer dissects every frame in
# Python, and a thousand STABLEs a second on a loaded machine overflow its socket, losing the
# very frames these tests wait for.
QUIET = ["stages.ctrl.stable_interval_us=50000"]


class Member:
    """A member on the rig's veths: frames into "in", everything "out" sends kept."""

    def __init__(self, rig, mid, roles, inc=1, src="10.9.0.1", sniff=True):
        self.rig, self.mid, self.roles, self.inc, self.src = rig, mid, roles, inc, src
        bind_port(rig.port)
        self.got = []  # AsyncSniffer's results come only when it stops
        self.sn = None
        if sniff:
            self.sn = AsyncSniffer(iface=f"{rig.tag}b1", store=False, prn=self.got.append,
                                   lfilter=lambda p: Interlink in p and
                                   p[Interlink].group_id == rig.group and
                                   p[Interlink].type in (T_DATA, T_VIEW, T_CREDIT))
            self.sn.start()
            time.sleep(0.3)

    def frame(self, il, dst=None):
        return Ether(src="02:00:00:00:09:01", dst="01:00:5e:00:00:01") / \
            IP(src=self.src, dst=dst or self.rig.mcast) / UDP(sport=self.rig.port,
                                                             dport=self.rig.port) / il

    def send(self, il):
        sendp(self.frame(il), iface=f"{self.rig.tag}b0", verbose=False)

    def member_msg(self, t):
        self.send(Interlink(type=t, group_id=self.rig.group, sender_id=self.mid) /
                  ILMember(roles=self.roles, incarnation=self.inc))

    def seen(self, t):
        return [p[Interlink] for p in list(self.got) if p[Interlink].type == t]

    def views(self):
        return [(v.global_seq, v[ILView].view_id) for v in self.seen(T_VIEW)
                if self.mid in [m.member_id for m in v[ILView].members]]

    def epoch(self):
        return self.seen(T_VIEW)[-1].epoch

    def credits(self):
        return [c[ILCredit].limit_seq for c in self.seen(T_CREDIT) if c.sender_id == self.mid]

    def wait(self, cond, what, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; control log:\n" +
                             (self.rig.tmp / "control.log").read_text()[-2000:])

    def stop(self):
        if self.sn is not None:
            self.sn.stop()


def test_a_lost_view_is_sent_again_when_the_joiner_retries(tmp_path):
    with UtoRig(tmp_path, CTL, QUIET) as rig:
        m = Member(rig, 7001, roles=2)
        try:
            m.member_msg(T_JOIN)
            m.wait(lambda: m.views(), "the joiner's VIEW")
            first = m.views()[0]
            # The joiner never got it: it sends its JOIN again, as libinterlink does every
            # join_retry_ms, and again.
            for _ in range(3):
                time.sleep(0.1)
                m.member_msg(T_JOIN)
            m.wait(lambda: len(m.views()) >= 2, "the VIEW sent again", timeout=3)
            # The same view: its id and start did not move, no view change was made for a
            # retry (a retry is not a rejoin).
            assert set(m.views()) == {first}, m.views()
            st = rig.status()
            assert st.get("view_repeats", 0) >= 1, st
        finally:
            m.stop()
    ctrl = rig.summary()["stages"]["ctrl"]
    assert ctrl["tx_view_repeat"] >= 1 and ctrl["views"] == 1, ctrl


def test_a_lost_credit_is_sent_again_to_a_blocked_sender(tmp_path):
    with UtoRig(tmp_path, CTL, QUIET) as rig:
        s = Member(rig, 7002, roles=3)  # sender and receiver: its own ACKs move the watermark
        try:
            s.member_msg(T_JOIN)
            s.wait(lambda: s.views() and s.credits(), "the sender's VIEW and first CREDIT")
            view_id = s.views()[-1][1]
            start = s.views()[-1][0]
            # Its first report (an ACK of nothing yet) opens the window from W/8 to W.
            s.send(Interlink(type=T_ACK, group_id=rig.group, sender_id=s.mid, epoch=s.epoch(),
                             global_seq=start) / ILAck(view_id=view_id))
            s.wait(lambda: max(s.credits()) == 1 + WINDOW, "the whole window granted")
            time.sleep(0.2)
            # The whole window, 16 messages a frame.
            for k in range(0, WINDOW, 16):
                s.send(il_data(rig.group, s.mid, 1 + k, [b"m%d" % (k + j) for j in range(16)]))
            s.wait(lambda: sum(d.msg_count for d in s.seen(T_DATA)) >= WINDOW,
                   "the window's messages stamped")
            top = max(d.global_seq + d.msg_count for d in s.seen(T_DATA))
            # It holds them all: the watermark moves past them and a new grant follows,
            # which this sender "loses" (it goes on as if it never came).
            n_before = len(s.credits())
            s.send(Interlink(type=T_ACK, group_id=rig.group, sender_id=s.mid, epoch=s.epoch(),
                             global_seq=top) / ILAck(view_id=view_id))
            s.wait(lambda: len(s.credits()) > n_before, "the grant after the watermark moved")
            grant = max(s.credits())
            assert grant == 1 + 2 * WINDOW, s.credits()
            n_grant = len(s.credits())
            # Blocked, it only sends HEARTBEATs (every 20 ms, as libinterlink does).
            end = time.time() + 2
            while time.time() < end and len(s.credits()) == n_grant:
                s.member_msg(T_HEARTBEAT)
                time.sleep(0.02)
            assert len(s.credits()) > n_grant, "the lost grant was never sent again"
            assert max(s.credits()) == grant, s.credits()
        finally:
            s.stop()
    assert rig.summary()["stages"]["ctrl"]["tx_credit_repeat"] >= 1


def test_a_lost_exclusion_is_told_again_when_the_excluded_member_is_heard(tmp_path):
    ctl = ["--suspect-ms", "200", "--exclude-ms", "500", "--window", str(WINDOW)]
    with UtoRig(tmp_path, ctl, QUIET) as rig:
        m = Member(rig, 7003, roles=2)
        try:
            m.member_msg(T_JOIN)
            m.wait(lambda: m.views(), "the joiner's VIEW")
            joined = m.views()[0][1]
            # Silent past --exclude-ms: a view without it goes down, which it "loses".
            m.wait(lambda: any(v[ILView].view_id > joined for v in m.seen(T_VIEW)),
                   "the VIEW that excludes it")
            out = [v[ILView].view_id for v in m.seen(T_VIEW) if v[ILView].view_id > joined]
            assert all(7003 not in [x.member_id for x in v[ILView].members]
                       for v in m.seen(T_VIEW) if v[ILView].view_id > joined)
            n = len(out)
            # Alive after all, it goes on with its HEARTBEATs, believing itself a member.
            end = time.time() + 2
            while time.time() < end and len(m.seen(T_VIEW)) - 1 == n:
                m.member_msg(T_HEARTBEAT)
                time.sleep(0.02)
            again = [v[ILView].view_id for v in m.seen(T_VIEW) if v[ILView].view_id > joined]
            assert len(again) > n, "the excluded member was never told again"
            assert set(again) == {out[-1]}, again  # the same view, not a new one
        finally:
            m.stop()


def test_a_lost_grant_is_sent_again_to_a_sender_that_sends_its_tail_again(tmp_path):
    """The grant that tells a sender its last messages are stable is lost: it does not know
    them stable and, after resend_ms, sends them again (libinterlink's go-back-N). The
    sequencer refuses them (stamped already) and the grant goes again."""
    with UtoRig(tmp_path, CTL, QUIET) as rig:
        s = Member(rig, 7004, roles=3)
        try:
            s.member_msg(T_JOIN)
            s.wait(lambda: s.views() and s.credits(), "the sender's VIEW and first CREDIT")
            view_id, start = s.views()[-1][1], s.views()[-1][0]
            s.send(Interlink(type=T_ACK, group_id=rig.group, sender_id=s.mid, epoch=s.epoch(),
                             global_seq=start) / ILAck(view_id=view_id))
            s.wait(lambda: max(s.credits()) == 1 + WINDOW, "the whole window granted")
            tail = il_data(rig.group, s.mid, 1, [b"t%d" % j for j in range(5)])
            s.send(tail)
            s.wait(lambda: s.seen(T_DATA), "the tail stamped")
            top = max(d.global_seq + d.msg_count for d in s.seen(T_DATA))
            s.send(Interlink(type=T_ACK, group_id=rig.group, sender_id=s.mid, epoch=s.epoch(),
                             global_seq=top) / ILAck(view_id=view_id))
            # Five stable messages are less than W/8: the grant that says so goes on the
            # group's next idle tick. It is lost.
            s.wait(lambda: max(s.credits()) == 6 + WINDOW, "the grant for the tail")
            time.sleep(0.3)
            n = len(s.credits())
            s.send(tail)  # the tail again: it does not know it stable
            s.wait(lambda: len(s.credits()) > n, "the grant sent again", timeout=3)
            assert s.credits()[n:] == [6 + WINDOW], s.credits()
            assert len([d for d in s.seen(T_DATA)]) == 1  # refused: stamped once
        finally:
            s.stop()
    ctrl = rig.summary()["stages"]["ctrl"]
    assert ctrl["tx_credit_dup"] == 1, ctrl
    assert rig.summary()["stages"]["seq"]["drop_fifo_dup"] == 1


def test_no_control_frame_is_dropped_for_want_of_room_with_256_groups(tmp_path):
    """A poll may send at most 256 frames of a stage's own (il_emit_room). With 256 groups a
    stable tick alone is 256 STABLEs, and the views of 256 joins come with their grants: the
    control stage puts off what does not fit to the next poll instead of dropping it
    (found at 128 groups per host: 17,745 frames dropped on "out", VIEWs among them)."""
    n = 256
    groups = [(1000 + k, f"239.77.{1 + k // 250}.{1 + k % 250}") for k in range(n)]
    with UtoRig(tmp_path, CTL, app_sets=[]) as rig:
        groups[0] = (rig.group, rig.mcast)
        rig.kill_appliance()
        rig.app_sets = ["groups=[" + ", ".join(f"{{id: {g}, address: {a}}}" for g, a in groups) +
                        "]", "stages.seq.history=64"]
        rig.start_appliance()
        m = Member(rig, 7005, roles=3, sniff=False)  # the counters say it all
        try:
            sendp([m.frame(Interlink(type=T_JOIN, group_id=g, sender_id=m.mid) /
                           ILMember(roles=3, incarnation=1), dst=a) for g, a in groups],
                  iface=f"{rig.tag}b0", verbose=False)
            m.wait(lambda: rig.status().get("views", 0) >= n, "256 views", timeout=20)
            time.sleep(1.0)  # a thousand stable ticks of 256 STABLEs each
        finally:
            m.stop()
    s = rig.summary()
    ctrl = s["stages"]["ctrl"]
    assert s["ports"]["out"]["drop_tx_full"] == 0, s["ports"]["out"]
    assert ctrl["tx_view"] == n, ctrl  # one each: none lost, so none repeated
    assert ctrl["tx_stable"] >= 100 * n, ctrl
    assert ctrl["emit_deferred"] > 0, ctrl
