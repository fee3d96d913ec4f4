"""Maelstrom FEC link pair end to end (issue 4): Linux hosts in two network namespaces, the
appliance between them (configs/linkpair.yaml: encoder -> impairment -> decoder, both ways,
one lcore). The rig is test_fec_lib.py; the full TCP benchmark is scripts/bench-fec-tcp.sh.

- functional: UDP echo and a TCP transfer cross the pair with FEC on under 2% loss, the decoder
  recovers packets and TCP data arrives intact;
- smoke run: 8 iperf3 TCP flows at 1% loss (50 ms one way, 1 Gbit/s), FEC on and off, a few
  seconds each: FEC on must clearly beat FEC off (the benchmark measures by how much).

Nothing asserts an absolute rate: the machine has 2 shared cores."""
import hashlib
import os

import pytest

from netns import HostPair
from test_fec_lib import Appliance, INTERLINK, linkpair_sets, tcp_trial

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veth pairs)"),
    pytest.mark.skipif(not INTERLINK.exists(), reason="interlink is not built"),
]


def test_echo_and_tcp_transfer_cross_the_pair_with_recovery(tmp_path):
    data = os.urandom(3 << 20)
    src = tmp_path / "blob"
    src.write_bytes(data)
    with HostPair() as hp:
        app = Appliance(hp, tmp_path, linkpair_sets(loss=0.02, fec=True))
        try:
            app.start()
            assert hp.echo(count=3) == 3
            # One TCP transfer of 3 MiB, B listening, A sending; B hashes what it got.
            srv = hp.popen("B", "/usr/bin/python3", "-c",
                           "import socket,hashlib,sys\n"
                           "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                           f"s.bind(('{hp.ip_b}',5301));s.listen(1);print('ready',flush=True)\n"
                           "c,_=s.accept();h=hashlib.sha256();n=0\n"
                           "while True:\n"
                           "  b=c.recv(1<<16)\n"
                           "  if not b: break\n"
                           "  h.update(b);n+=len(b)\n"
                           "print(n,h.hexdigest(),flush=True)\n")
            assert srv.stdout.readline().strip() == "ready"
            cli = hp.run("A", "/usr/bin/python3", "-c",
                         "import socket,sys\n"
                         f"s=socket.create_connection(('{hp.ip_b}',5301),timeout=60)\n"
                         f"s.sendall(open('{src}','rb').read());s.close()\n", timeout=90)
            assert cli.returncode == 0, cli.stderr
            got = srv.communicate(timeout=60)[0].split()
            assert got == [str(len(data)), hashlib.sha256(data).hexdigest()], got
        finally:
            summ = app.stop()
    assert summ is not None, app.output()
    st = summ["stages"]
    # Loss hit the link both ways, and the decoders rebuilt packets from repairs.
    assert st["impair_ab"]["lost"] > 0 and st["impair_ba"]["lost"] > 0, st
    assert st["fec_enc_ab"]["repairs_sent"] > 0 and st["fec_enc_ab"]["protected"] > 0, st
    assert st["fec_dec_ab"]["repairs_in"] > 0, st
    assert st["fec_dec_ab"]["recovered"] + st["fec_dec_ba"]["recovered"] > 0, st
    # ARP crossed the pair unprotected (the hosts resolved each other through it).
    assert st["fec_enc_ab"]["unprotected"] > 0 and st["fec_dec_ab"]["unprotected"] > 0, st
    assert st["fec_dec_ab"]["drop_bad_repair"] == 0 and st["fec_dec_ab"]["verify_fail"] == 0, st


def test_smoke_fec_on_beats_fec_off_at_1pct_loss(tmp_path):
    """The test command's short TCP run; the full table is scripts/bench-fec-tcp.sh."""
    on = tcp_trial(tmp_path, 0.01, True, seconds=8, omit=2)
    off = tcp_trial(tmp_path, 0.01, False, seconds=8, omit=2)
    print(f"1% loss: FEC on {on['gbps'] * 1000:.1f} Mbit/s, off {off['gbps'] * 1000:.1f} Mbit/s, "
          f"ratio {on['gbps'] / max(off['gbps'], 1e-9):.1f}")
    assert on["recovered_ab"] > 0, on
    assert off["fec_dec_ab"].get("recovered", 0) == 0, off
    assert on["gbps"] >= 2 * off["gbps"], (on, off)
