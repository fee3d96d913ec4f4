"""The Debian packages built from the tree, installed into an empty root, as a user gets them.

Builds the packages once for the module (dpkg-buildpackage -us -uc -b on a copy of the tree,
about a minute), unpacks them with dpkg -x into a fresh directory, and checks there:
libinterlink shared and static, self-contained, with its soname and only the public API
exported; the one public header and interlink.pc; an example program built against them with
`pkg-config --cflags --libs interlink` (shared, and static through the shipped Makefile) that
runs and puts Interlink JOINs on the loopback interface; the systemd units; a man page for every
installed program naming exactly the options of its --help.
"""
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("dpkg-buildpackage") is None
                                or not Path("/usr/share/perl5/Debian/Debhelper").exists(),
                                reason="needs dpkg-dev and debhelper (scripts/install-deps.sh)")

TRIPLET = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                         text=True).stdout.strip() if shutil.which("dpkg-architecture") else ""
VERSION = re.search(r"version:\s*'([^']+)'", (ROOT / "meson.build").read_text()).group(1)
SOMAJOR = VERSION.split(".")[0]
PACKAGES = ["interlink", "libinterlink0", "libinterlink-dev"]
# The tree without build directories, VCS data or caches.
SKIP = shutil.ignore_patterns("build", "build-*", ".git", "__pycache__", ".pytest_cache",
                              "obj-*", "*.egg-info", "out")


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 60)
    return subprocess.run(cmd, **kw)


@pytest.fixture(scope="module")
def work():
    d = Path(tempfile.mkdtemp(prefix="il-pkg-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def debs(work):
    """The .deb files built from a copy of the tree, by package name."""
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=SKIP, symlinks=True)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck noddebs parallel=2")
    p = run(["nice", "-n", "10", "dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
            timeout=1200)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    out = {}
    for f in work.glob("*.deb"):
        out[f.name.split("_")[0]] = f
    assert sorted(out) == sorted(PACKAGES), out
    return out


@pytest.fixture(scope="module")
def root(work, debs):
    """An empty directory with every package unpacked into it (dpkg -x: the files as dpkg
    installs them, no maintainer scripts, nothing of the host's changed)."""
    r = work / "root"
    r.mkdir()
    for deb in debs.values():
        p = run(["dpkg", "-x", str(deb), str(r)])
        assert p.returncode == 0, p.stderr
    return r


def field(deb, name):
    return run(["dpkg-deb", "-f", str(deb), name]).stdout.strip()


def test_package_versions_and_dependencies(debs):
    for name, deb in debs.items():
        assert field(deb, "Version") == VERSION, name
    assert f"libinterlink0 (= {VERSION})" in field(debs["libinterlink-dev"], "Depends")
    assert "liburing-dev" in field(debs["libinterlink-dev"], "Depends")
    assert "liburing2" in field(debs["libinterlink0"], "Depends")
    deps = field(debs["interlink"], "Depends")
    # DPDK's plugins that no soname names: the mempool driver every mbuf pool needs, and memif.
    assert re.search(r"librte-mempool-ring\d+", deps) and re.search(r"librte-net-memif\d+", deps)
    assert "python3" in deps  # interlink-exporter, interlink-top


def test_library_is_self_contained_with_soname_and_public_api_only(root):
    lib = root / "usr" / "lib" / TRIPLET
    real = lib / f"libinterlink.so.{VERSION}"
    assert real.is_file()
    assert os.readlink(lib / f"libinterlink.so.{SOMAJOR}") == real.name
    assert os.readlink(lib / "libinterlink.so") == f"libinterlink.so.{SOMAJOR}"
    dyn = run(["readelf", "-d", str(real)]).stdout
    assert f"Library soname: [libinterlink.so.{SOMAJOR}]" in dyn
    needed = set(re.findall(r"Shared library: \[([^\]]+)\]", dyn))
    assert needed <= {"liburing.so.2", "libsodium.so.23", "libm.so.6", "libc.so.6"}, needed
    ldd = run(["ldd", str(real)]).stdout
    assert "not found" not in ldd, ldd
    # Exported: the public API alone, versioned; nothing of the folded-in internal libraries.
    exported = {s.split("@")[0] for s in
                run(["nm", "-D", "--defined-only", str(real)]).stdout.split() if "@" in s}
    exported = {s for s in exported if not s.startswith("INTERLINK_0")}  # version nodes
    assert exported and all(s.startswith("il_ep_") for s in exported), sorted(exported)
    assert "il_ep_version" in exported
    # Undefined in the shared library: only what libc, libm, liburing and libsodium define.
    undef = run(["nm", "-D", "--undefined-only", str(real)]).stdout
    assert not re.search(r" U (il_|ep_)", undef), undef
    # The static library carries the internal objects it needs (util, tfrc, ep_core).
    members = run(["ar", "t", str(lib / "libinterlink.a")]).stdout.split()
    for obj in ("ep_core.c.o", "err.c.o", "tbucket.c.o", "endpoint.c.o"):
        assert obj in members, members
    assert any("tfrc" in m for m in members), members
    # Headers: what a host program includes, nothing internal.
    assert sorted(p.name for p in (root / "usr" / "include").rglob("*.h")) == ["endpoint.h"]


def pkg_env(root):
    """pkg-config finds interlink.pc in the root first (its paths prefixed with the root) and
    its dependency liburing among the host's packages, where apt would have put it."""
    return dict(os.environ, PKG_CONFIG_SYSROOT_DIR=str(root),
                PKG_CONFIG_PATH=str(root / "usr" / "lib" / TRIPLET / "pkgconfig"),
                LD_LIBRARY_PATH=str(root / "usr" / "lib" / TRIPLET))


def listener(group, port):
    """A UDP socket on lo joined to the group: it sees what the example sends."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    mreqn = struct.pack("4s4si", socket.inet_aton(group), socket.inet_aton("0.0.0.0"),
                        socket.if_nametoindex("lo"))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreqn)
    s.settimeout(0.2)
    return s


def run_example(exe, env):
    """Runs the example on a port and group of this run; returns its output and the Interlink
    frames it put on lo, decoded by the Scapy layer."""
    from interlink_scapy import Interlink, ILMember

    port = random.randrange(20000, 60000)
    group = f"239.{random.randrange(100, 200)}.{random.randrange(256)}.{random.randrange(1, 255)}"
    member = random.randrange(1000, 1 << 30)
    s = listener(group, port)
    try:
        p = run([str(exe), str(port), group, str(member)], env=env, timeout=30)
        frames = []
        while True:
            try:
                frames.append(Interlink(s.recv(2048)))
            except socket.timeout:
                break
    finally:
        s.close()
    assert p.returncode == 0, p.stdout + p.stderr
    joins = [f for f in frames if f.type == 6 and f.sender_id == member]
    assert joins, [f.summary() for f in frames]
    assert joins[0].group_id == 1 and ILMember in joins[0]
    assert any(f.type == 7 and f.sender_id == member for f in frames)  # LEAVE at the end
    return p.stdout


def test_example_builds_with_pkg_config_and_runs(root, work):
    env = pkg_env(root)
    pc = run(["pkg-config", "--cflags", "--libs", "interlink"], env=env)
    assert pc.returncode == 0, pc.stderr
    assert run(["pkg-config", "--modversion", "interlink"], env=env).stdout.strip() == VERSION
    # The example as the package ships it, built the way docs/libinterlink.md says.
    ex = work / "example"
    shutil.copytree(root / "usr" / "share" / "doc" / "libinterlink-dev" / "examples", ex)
    cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "loopback.c", "-o", "il-loopback"]
    p = run(cc + pc.stdout.split(), cwd=ex, env=env)
    assert p.returncode == 0, p.stderr
    ldd = run(["ldd", str(ex / "il-loopback")], env=env).stdout
    assert re.search(rf"libinterlink\.so\.{SOMAJOR} => {re.escape(str(root))}/", ldd), ldd
    out = run_example(ex / "il-loopback", env)
    assert f"libinterlink {VERSION}\n" in out
    assert re.search(r"\b[1-9]\d* JOINs sent", out), out

    # Static, through the shipped Makefile: libinterlink.a alone is enough (with liburing and
    # libsodium).
    p = run(["make", "static"], cwd=ex, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    ldd = run(["ldd", str(ex / "il-loopback-static")], env=env).stdout
    assert "libinterlink" not in ldd, ldd
    assert re.search(r" T il_ep_version$", run(["nm", str(ex / "il-loopback-static")]).stdout,
                     re.M)
    out = run_example(ex / "il-loopback-static", env)
    assert f"libinterlink {VERSION}\n" in out


def test_systemd_units_verify(root, work):
    units = root / "lib" / "systemd" / "system"
    names = sorted(p.name for p in units.iterdir())
    assert names == ["interlink-control@.service", "interlink@.service"]
    # Verified with the root's binaries and man pages standing in for /usr's.
    check = work / "units"
    check.mkdir(exist_ok=True)
    for n in names:
        text = (units / n).read_text()
        assert "ExecStart=/usr/bin/" in text and "/etc/interlink/%i." in text
        (check / n).write_text(text.replace("/usr/bin/", f"{root}/usr/bin/"))
    env = dict(os.environ, MANPATH=str(root / "usr" / "share" / "man"))
    p = run(["systemd-analyze", "verify", "--man=yes"] + [str(check / n) for n in names],
            env=env)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr


OPT = re.compile(r"(?:(?<=[\s\[(,|'])|^)(--?[A-Za-z][A-Za-z0-9-]*)")


def options(text):
    return set(OPT.findall(text)) - {"-"}


def man_text(root, prog):
    pages = list((root / "usr" / "share" / "man").glob(f"man[18]/{prog}.[18].gz"))
    assert len(pages) == 1, f"no man page for {prog}"
    p = run(["man", "-l", str(pages[0])], env=dict(os.environ, MANWIDTH="200"))
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_every_program_has_a_man_page_with_the_options_of_its_help(root):
    progs = sorted(p.name for p in (root / "usr" / "bin").iterdir())
    assert progs == sorted(["interlink", "interlink-control", "interlink-pktgen", "il-coord",
                            "interlink-exporter", "interlink-top", "interlink-ctl"])
    env = dict(os.environ, LD_LIBRARY_PATH=str(root / "usr" / "lib" / TRIPLET))
    for prog in progs:
        h = run([str(root / "usr" / "bin" / prog), "--help"], env=env, timeout=30)
        assert h.returncode == 0, f"{prog} --help: {h.stderr}"
        helped = options(h.stdout + h.stderr)
        page = man_text(root, prog)
        # Every option --help names is in the page...
        missing = helped - options(page)
        assert not missing, f"{prog}(man) lacks {sorted(missing)}"
        # ...and every option the page describes (its OPTIONS entries) is in --help.
        section = page.split("\nOPTIONS\n", 1)[1].split("\nEXIT STATUS\n")[0].split("\nEXAMPLES\n")[0]
        described = set()
        for line in section.splitlines():
            m = re.match(r"\s{7}(-\S.*)$", line)  # an entry's term line
            if m:
                described |= options(m.group(1))
        extra = described - helped
        assert not extra, f"{prog}(man) describes {sorted(extra)}, not in --help"
