"""What a harness driving brig needs (issue 14, "internal hosts" and
"harness plumbing"): one rule for a named host on a private address, the
report and audit stream on descriptors the harness holds, brig run --pooled
saying whether the pool served it, brig diff/commit limited to paths, and
brig restore saying it stops what runs.

The internal-host tests build their own pair of network namespaces (root
only): `lan` holds a TCP echo server on port 5432 listening on every
address — its veth address 10.X.77.2 (private), and 10.X.78.2 (a second
private address), 169.254.169.254, 100.100.100.200 and 168.63.129.16 on its
loopback — and the client namespace, where brig runs (nsenter --net),
routes those over the veth and has a second echo server on all its own
addresses (127.0.0.1, its veth's 10.X.77.1, 203.0.114.9 on its loopback). Every connection either server accepts is logged with the
address it was made to, so "refused" means the server really saw nothing,
and the positive controls (--allow-cidr) show a classifier mistake would
have landed there. Nothing is sent anywhere but these namespaces."""
import json
import os
import secrets
import shutil
import subprocess
import time

import pytest

from conftest import IS_ROOT
from test_egress_netns import namespaces_up
from persist_helpers import sandboxes  # noqa: F401 (fixture)

PORT = 5432
# Metadata and platform endpoints outside link-local (Alibaba Cloud's in
# CGNAT space, Azure's WireServer in public space): the lan serves them too.
METADATA_ELSEWHERE = ("100.100.100.200", "168.63.129.16")
# A public-class address on the client namespace's own loopback: brig's host
# then has a "public" address of its own (as a cloud VM does).
CLIENT_PUBLIC = "203.0.114.9"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (test_escape.py's marker)."""
    return pytest.mark.escape(ident, technique, control)


# ------------------------------------------------------------ internal hosts

ECHO_SERVER = r'''
import asyncio, sys
host, log_path = sys.argv[1], sys.argv[2]
log = open(log_path, "a", buffering=1)

async def echo(r, w):
    log.write(w.get_extra_info("sockname")[0] + " " + w.get_extra_info("peername")[0] + "\n")
    try:
        d = await r.read(65536)
        w.write(d.upper())
        await w.drain()
    except OSError:
        pass
    finally:
        w.close()

async def main():
    srv = await asyncio.start_server(echo, host, %(port)d)
    print("READY", flush=True)
    async with srv:
        await srv.serve_forever()

asyncio.run(main())
''' % {"port": PORT}

# Inside: connect to each HOST (resolved by the sandbox's own resolver,
# brig's DNS stub in filtered mode), send "ping", print "HOST GOT PING" or
# "HOST FAILED why". A file name after the hosts: wait for it between them.
CLIENT = r'''
import os, socket, sys, time
for host in sys.argv[1:]:
    if host.startswith("wait:"):
        open(host[5:] + ".reached", "w").close()
        while not os.path.exists(host[5:]):
            time.sleep(0.05)
        continue
    try:
        s = socket.create_connection((host, %(port)d), timeout=10)
        s.sendall(b"ping")
        s.shutdown(socket.SHUT_WR)
        got = s.recv(100).decode()
        print(host, "GOT", got if got else "nothing (closed)", flush=True)
    except OSError as e:
        print(host, "FAILED", e, flush=True)
''' % {"port": PORT}


def sh(*cmd):
    return subprocess.run(list(map(str, cmd)), check=True, capture_output=True, text=True)


class Lan:
    def __init__(self, tmp):
        tag = secrets.token_hex(3)
        self.tmp = tmp
        self.ns, self.client = f"brig-h-{tag}", f"brig-h-{tag}-c"
        x = secrets.randbelow(250) + 1
        self.client_addr, self.addr = f"10.{x}.77.1", f"10.{x}.77.2"
        self.addr2 = f"10.{x}.78.2"
        self.log = tmp / "accepted.log"
        self.log.touch()
        self.procs = []

    def up(self):
        sh("ip", "netns", "add", self.ns)
        sh("ip", "netns", "add", self.client)
        cl, ns = ["ip", "-n", self.client], ["ip", "-n", self.ns]
        veth = "bh" + self.ns[-6:]
        sh(*cl, "link", "add", veth + "c", "type", "veth", "peer", "name", veth + "n")
        sh(*cl, "link", "set", veth + "n", "netns", self.ns)
        for cmd, dev, addr in ((cl, veth + "c", self.client_addr), (ns, veth + "n", self.addr)):
            sh(*cmd, "link", "set", "lo", "up")
            sh(*cmd, "addr", "add", f"{addr}/30", "dev", dev)
            sh(*cmd, "link", "set", dev, "up")
        for a in ("169.254.169.254", self.addr2) + METADATA_ELSEWHERE:
            sh(*ns, "addr", "add", f"{a}/32", "dev", "lo")
            sh(*cl, "route", "add", f"{a}/32", "via", self.addr)
        sh(*cl, "addr", "add", f"{CLIENT_PUBLIC}/32", "dev", "lo")   # the client's own "public" address
        script = self.tmp / "echo.py"
        script.write_text(ECHO_SERVER)
        for where, host in ((self.ns, "0.0.0.0"), (self.client, "0.0.0.0")):
            p = subprocess.Popen(["ip", "netns", "exec", where, PY, str(script), host, str(self.log)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            if p.stdout.readline().strip() != "READY":
                raise RuntimeError(f"echo server did not start: {p.stderr.read()[-2000:]}")
        deadline = time.time() + 10   # the veth's carrier comes up asynchronously
        while subprocess.run(["ip", "netns", "exec", self.client, PY, "-c",
                              f"import socket; socket.create_connection(('{self.addr}', {PORT}), timeout=1)"],
                             capture_output=True).returncode != 0:
            if time.time() > deadline:
                raise RuntimeError(f"{self.addr} not reachable")
            time.sleep(0.1)
        # The server logs the probe that got through when it gets to it: a
        # line written after the truncation would be counted by the first
        # test as a connection brig let through (seen once under load).
        while not self.log.read_text():
            if time.time() > deadline:
                raise RuntimeError("the echo server did not log the reachability probe")
            time.sleep(0.02)
        self.log.write_text("")

    def down(self):
        for p in self.procs:
            p.terminate()
            p.wait(timeout=5)
        for n in (self.client, self.ns):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)

    def mark(self):
        return self.log.stat().st_size

    def seen(self, since):
        """The local addresses connections were accepted on since mark()."""
        with open(self.log) as f:
            f.seek(since)
            return [line.split()[0] for line in f.read().splitlines()]


@pytest.fixture(scope="module")
def lan():
    if not IS_ROOT:
        pytest.skip("INTERNAL HOST TESTS NEED ROOT: building network namespaces and a veth pair takes root "
                    "(the brig under test runs as root and as nobody)")
    for tool in ("ip", "nsenter", "unshare"):
        if not shutil.which(tool):
            pytest.skip(f"INTERNAL HOST TESTS NEED {tool.upper()}")
    yield from namespaces_up(Lan, "brig-lan-")


def in_client(brig, lan, *args, hosts_file=None, **kw):
    """brig ARGS in the client namespace; with hosts_file, in a mount
    namespace of its own where that file is /etc/hosts (the host's stays)."""
    cmd = ["nsenter", f"--net=/run/netns/{lan.client}"] + brig.cmd(*args)
    if hosts_file:
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts_file)] + cmd
    return subprocess.Popen(cmd, cwd=str(brig.workspace), env=brig.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def client_run(brig, lan, rules, *hosts, hosts_file=None, between=None):
    """Run CLIENT inside with RULES; returns (rc, stdout, stderr, net events).
    between(name) runs on the host when the client reaches "wait:name"."""
    audit = brig.reports / f"audit-{secrets.token_hex(4)}.jsonl"
    (brig.workspace / "client.py").write_text(CLIENT)
    p = in_client(brig, lan, "run", "--audit", audit, *rules, "--", "python3", "client.py", *hosts,
                  hosts_file=hosts_file)
    for h in hosts:
        if h.startswith("wait:"):
            flag = brig.workspace / h[5:]
            reached = brig.workspace / (h[5:] + ".reached")
            deadline = time.time() + 60
            while not reached.exists() and p.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            between(h[5:])
            flag.touch()
    out, err = p.communicate(timeout=90)
    events = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
    return p.returncode, out, err, [e for e in events if e["event"] == "net"]


def test_private_host_allowed_with_the_flag_refused_without_naming_it(brig, lan):
    """A named host on a private address: --allow-host alone is refused
    (the refusal names the one flag that allows it), --allow-private-host
    reaches it; a literal connection to the same address stays refused."""
    resolve = ["--resolve", f"db.internal:{lan.addr}"]
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, resolve + ["--allow-host", f"db.internal:{PORT}"], "db.internal")
    assert "db.internal GOT" not in out, (out, err)
    assert lan.seen(m) == [], "the private server was reached without --allow-private-host"
    deny = [e for e in ev if e.get("decision") == "deny"]
    assert deny and deny[0]["reason"] == f"address {lan.addr} is private", ev
    assert f"allow with --allow-private-host db.internal:{PORT}" in err, err   # the end-of-run summary

    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, resolve + ["--allow-private-host", f"db.internal:{PORT}"],
                                  "db.internal", lan.addr)
    assert "db.internal GOT PING" in out, (out, err)
    assert f"{lan.addr} GOT" not in out, out   # the address itself is no host rule
    assert lan.seen(m) == [lan.addr], lan.seen(m)
    allow = [e for e in ev if e.get("decision") == "allow"]
    assert "--allow-private-host" in allow[0]["reason"], allow


def test_private_host_flag_is_not_a_port_or_a_wildcard_for_others(brig, lan):
    """The flag is scoped to its names and port: another name on the same
    address, the same name on another port, are refused."""
    rules = ["--resolve", f"db.internal:{lan.addr}", "--resolve", f"other.internal:{lan.addr}",
             "--allow-private-host", f"db.internal:{PORT + 1}", "--allow-host", f"other.internal:{PORT}"]
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, rules, "db.internal", "other.internal")
    assert "GOT" not in out, (out, err)
    assert lan.seen(m) == []


def test_policy_file_key_allow_private_hosts(brig):
    """network.allow_private_hosts is the flag's key: shown, checked, and a
    bad pattern refused with its place in the file."""
    good = brig.base / "private.json"
    good.write_text(json.dumps({"network": {"allow_private_hosts": ["db.internal:5432", "*.corp.example"]}}))
    r = brig.run("policy", "show", "--policy", good)
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["network"]["allow_private_hosts"] == ["db.internal:5432", "*.corp.example"], r
    bad = brig.base / "private-bad.json"
    bad.write_text(json.dumps({"network": {"allow_private_hosts": ["db.internal:99999"]}}))
    r = brig.run("policy", "check", bad)
    assert r.returncode == 125 and "private-bad.json:1:38:" in r.stderr and "bad port" in r.stderr, r


@attack("private-host-to-metadata", "an --allow-private-host name resolving to the metadata address or loopback",
        "network")
def test_private_host_never_reaches_metadata_or_loopback(brig, lan):
    """--allow-private-host for names that resolve to the cloud metadata
    address (the exact metadata name too) and to loopback: refused, and the
    servers on 169.254.169.254 and the client namespace's 127.0.0.1 saw
    nothing. Positive control: --allow-cidr reaches the metadata server, so
    a classifier mistake would have been counted."""
    names = {"meta.internal": "169.254.169.254", "metadata.google.internal": "169.254.169.254",
             "lo.internal": "127.0.0.1", "lo6.internal": "::ffff:127.0.0.1"}
    rules = []
    for name, addr in names.items():
        rules += ["--resolve", f"{name}:{addr}", "--allow-private-host", f"{name}:{PORT}"]
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, rules, *names)
    assert "GOT" not in out, (out, err)
    assert lan.seen(m) == [], "a private-host rule reached metadata or loopback"
    reasons = " | ".join(e["reason"] for e in ev if e.get("decision") == "deny")
    assert "is metadata" in reasons and "is loopback" in reasons, reasons

    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, ["--resolve", "meta.internal:169.254.169.254",
                                              "--allow-host", f"meta.internal:{PORT}",
                                              "--allow-cidr", f"169.254.169.254/32:{PORT}"], "meta.internal")
    assert "meta.internal GOT PING" in out, (out, err)
    assert lan.seen(m) == ["169.254.169.254"]


@attack("private-host-rebinding",
        "the host's /etc/hosts rebinding an allowed private name, mid-run, to another private address, to the "
        "metadata address, then to loopback", "network")
def test_etc_hosts_names_are_judged_and_rebinding_is_contained(brig, lan):
    """Names from the host's /etc/hosts (a file of the test's own mount
    namespace) go through the same judgement: an --allow-host name there on
    a private address is refused, the --allow-private-host one reaches it.
    Then the hosts file rebinds that name, mid-run, to a second private
    address, to the metadata address and to loopback: all refused, the
    servers saw only the first connection. Positive control: a run whose
    first lookup gives the second address reaches it. The sandbox only ever
    saw brig's own address for the name."""
    hosts = lan.tmp / f"hosts-{secrets.token_hex(3)}"
    hosts.write_text(f"127.0.0.1 localhost\n{lan.addr} db.internal other.internal\n")
    hosts.chmod(0o644)
    rules = ["--allow-private-host", f"db.internal:{PORT}", "--allow-host", f"other.internal:{PORT}"]
    steps = iter([lan.addr2, "169.254.169.254", "127.0.0.1"])

    def rebind(_):
        hosts.write_text(f"127.0.0.1 localhost\n{next(steps)} db.internal\n")

    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, rules, "other.internal", "db.internal", "wait:lan2", "db.internal",
                                  "wait:meta", "db.internal", "wait:lo", "db.internal", hosts_file=hosts,
                                  between=rebind)
    lines = out.splitlines()
    assert "GOT" not in lines[0], (out, err)
    assert lines[1] == "db.internal GOT PING", (out, err)
    assert len(lines) == 5 and all("GOT PING" not in line for line in lines[2:]), (out, err)
    assert lan.seen(m) == [lan.addr], lan.seen(m)
    reasons = [e["reason"] for e in ev if e.get("decision") == "deny"]
    assert f"address {lan.addr} is private" in reasons, reasons        # other.internal: --allow-host only
    assert f"allow with --allow-private-host other.internal:{PORT}" in err, err
    assert any(f"db.internal now resolves to {lan.addr2}, but to {lan.addr} at its first lookup" in r
               for r in reasons), reasons
    assert any("169.254.169.254 is metadata" in r for r in reasons), reasons
    assert any("127.0.0.1 is loopback" in r for r in reasons), reasons

    hosts.write_text(f"{lan.addr2} db.internal\n")
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, rules, "db.internal", hosts_file=hosts)
    assert out.strip() == "db.internal GOT PING", (out, err)
    assert lan.seen(m) == [lan.addr2]


# ------------------------------------------------- report and audit on pipes

def read_all(fd):
    out = b""
    while True:
        d = os.read(fd, 65536)
        if not d:
            return out
        out += d


@attack("output-fd-inside", "write to (or read) the descriptor brig was given for the report or the audit stream",
        "process")
def test_report_and_audit_fds_are_pipes_the_sandbox_never_holds(brig):
    """--json-report-fd and --audit-fd: the harness's pipes, written by brig
    (the report whole, the audit stream's start, syscall and end events),
    and not open inside: /proc/self/fd shows only stdio, and writing to
    either number fails. Both pipes reach EOF when brig exits, so nothing
    inside (or left behind) holds a write end."""
    rep_r, rep_w = os.pipe()
    aud_r, aud_w = os.pipe()
    try:
        script = (f"ls /proc/self/fd | tr '\\n' ' '; echo; "
                  f"(printf X%sX OWNED >&{rep_w}) 2>/dev/null && echo WROTE-REPORT; "
                  f"(printf X%sX OWNED >&{aud_w}) 2>/dev/null && echo WROTE-AUDIT; "
                  "mount -t tmpfs none /tmp 2>/dev/null; exit 3")
        r = brig.run("run", "--json-report-fd", rep_w, "--audit-fd", aud_w, "--", "sh", "-c", script,
                     pass_fds=(rep_w, aud_w))
        os.close(rep_w)
        os.close(aud_w)
        rep_w = aud_w = -1
        report, audit = read_all(rep_r).decode(), read_all(aud_r).decode()
    finally:
        for fd in (rep_r, rep_w, aud_r, aud_w):
            if fd >= 0:
                os.close(fd)
    assert r.returncode == 3, r
    fds = r.stdout.splitlines()[0].split()
    assert set(fds) <= {"0", "1", "2", "3"}, fds      # 3: ls's own directory
    assert str(rep_w) not in fds and "WROTE" not in r.stdout, r
    doc = json.loads(report)
    assert doc["exit_code"] == 3 and "XOWNEDX" not in report + audit
    assert doc["audit"]["fd"] is not None and doc["audit"]["path"] is None, doc["audit"]
    events = [json.loads(line)["event"] for line in audit.splitlines()]
    assert events[0] == "start" and events[-1] == "end" and "syscall" in events, events


def test_bad_output_fds_are_refused_naming_the_flag(brig):
    """A descriptor brig does not hold, one open only for reading, stdio, or
    one also given to --pass-fd: exit 125 with the flag named, nothing run."""
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        cases = [(["--json-report-fd", "97"], "--json-report-fd 97: no such open descriptor"),
                 (["--audit-fd", str(fd)], f"--audit-fd {fd}: the descriptor is not open for writing"),
                 (["--audit-fd", "1"], "--audit-fd 1: 0, 1 and 2 are the command's stdio"),
                 (["--json-report-fd", "x"], "--json-report-fd 'x': expected a file descriptor number"),
                 (["--pass-fd", str(fd), "--audit-fd", str(fd)], "also given to --pass-fd")]
        for args, words in cases:
            marker = brig.workspace / "ran"
            r = brig.run("run", *args, "--", "touch", "ran", pass_fds=(fd,))
            assert r.returncode == 125 and words in r.stderr, (args, r)
            assert not marker.exists()
    finally:
        os.close(fd)


# ------------------------------------------------------------------ restore

def test_restore_says_it_stops_running_processes(brig, sandboxes):
    """brig restore on a running sandbox says on stderr, before it acts, that
    the processes inside end and do not come back — and they really do end."""
    name, _ = sandboxes.create()
    assert sandboxes.brig_cmd("snapshot", name, "t1").returncode == 0
    p = sandboxes.popen_exec(name, "--", "sh", "-c", "echo started; exec sleep 600", text=True)
    assert p.stdout.readline().strip() == "started"
    r = sandboxes.brig_cmd("restore", name, "t1")
    assert r.returncode == 0, r
    assert f"restore 't1': stopping sandbox '{name}' first: every process running in it ends" in r.stderr, r
    assert p.wait(timeout=30) != 0
    assert sandboxes.sh(name, "pgrep -x sleep || echo none").stdout.strip() == "none"
    # stopped: nothing to stop, nothing said
    assert sandboxes.brig_cmd("stop", name).returncode == 0
    r = sandboxes.brig_cmd("restore", name, "t1")
    assert r.returncode == 0 and "stopping" not in r.stderr, r


# ------------------------------------------------------ diff/commit by path

def listing(r):
    assert r.returncode == 0, r
    return r.stdout.splitlines()


def test_diff_and_commit_take_paths_and_excludes(brig, sandboxes):
    """After an npm-like install: brig diff NAME src/ --exclude node_modules
    lists only src's own changes; brig commit with the same selection
    applies exactly those (and the directories they need), the rest stays
    in the layer for a later commit."""
    (brig.workspace / "src").mkdir()
    (brig.workspace / "src" / "keep.c").write_text("old\n")
    brig.chown(brig.workspace / "src")
    brig.chown(brig.workspace / "src" / "keep.c")
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    r = sandboxes.sh(name, "echo new > src/keep.c; echo a > src/a.c; mkdir -p src/node_modules/x src/lib/deep "
                           "node_modules/y docs; for i in 1 2 3; do echo $i > src/node_modules/x/$i.js; done; "
                           "echo z > node_modules/y/z.js; echo n > src/lib/deep/n.c; echo l > src/build.log; "
                           "echo d > docs/readme")
    assert r.returncode == 0, r
    assert len(listing(sandboxes.brig_cmd("diff", name))) == 16
    sel = listing(sandboxes.brig_cmd("diff", name, "src/", "--exclude", "node_modules", "--exclude", "*.log"))
    assert sel == ["A src/a.c", "M src/keep.c", "A src/lib/", "A src/lib/deep/", "A src/lib/deep/n.c"], sel
    assert listing(sandboxes.brig_cmd("diff", name, str(brig.workspace / "docs"))) == ["A docs/", "A docs/readme"]
    assert listing(sandboxes.brig_cmd("diff", name, "--exclude", "/src", "--exclude", "y")) == \
        ["A docs/", "A docs/readme", "A node_modules/"]
    r = sandboxes.brig_cmd("commit", name, "./src/lib/deep/n.c", "src/a.c", "--json")
    assert r.returncode == 0, r
    assert [c["path"] for c in json.loads(r.stdout)] == ["src/a.c", "src/lib", "src/lib/deep", "src/lib/deep/n.c"]
    ws = brig.workspace
    assert (ws / "src/lib/deep/n.c").read_text() == "n\n" and (ws / "src/a.c").exists()
    assert (ws / "src/keep.c").read_text() == "old\n"
    assert not (ws / "src/node_modules").exists() and not (ws / "docs").exists()
    r = sandboxes.brig_cmd("commit", name, "src", "--exclude", "node_modules")
    assert r.returncode == 0 and "committed 2 changes" in r.stderr, r
    assert (ws / "src/keep.c").read_text() == "new\n" and (ws / "src/build.log").exists()
    assert not (ws / "src/node_modules").exists()
    left = listing(sandboxes.brig_cmd("diff", name))
    assert "A src/node_modules/x/1.js" in left and "A docs/readme" in left and len(left) == 10, left
    # the conflict check covers what is applied, and only that
    (ws / "docs").mkdir()
    (ws / "docs" / "readme").write_text("host\n")
    r = sandboxes.brig_cmd("commit", name, "docs")
    assert r.returncode == 125 and "docs/readme: created on the host since brig create" in r.stderr, r
    assert (ws / "docs" / "readme").read_text() == "host\n"
    r = sandboxes.brig_cmd("commit", name, "node_modules")
    assert r.returncode == 0 and (ws / "node_modules/y/z.js").exists(), r


@attack("commit-filter-escape", "brig commit with paths that leave the workspace ('..', absolute) and a path "
        "below a directory the sandbox replaced by a symlink to outside", "filesystem")
def test_commit_paths_never_reach_outside_the_workspace(brig, sandboxes):
    """The paths only select among the layer's changes (by name) and are
    refused when they leave the workspace; a directory the sandbox turned
    into a symlink to a host directory gets nothing written through it."""
    outside = brig.base / f"outside-{secrets.token_hex(3)}"
    outside.mkdir()
    brig.chown(outside)
    (brig.workspace / "src").mkdir()
    (brig.workspace / "src" / "keep.c").write_text("host\n")
    brig.chown(brig.workspace / "src")
    brig.chown(brig.workspace / "src" / "keep.c")
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    r = sandboxes.sh(name, f"rm -rf src && ln -s {outside} src && mkdir -p lib && echo x > lib/keep.c && "
                           f"ln -s {outside} out")
    assert r.returncode == 0, r
    for bad in ("../" + outside.name, str(outside), "lib/../../" + outside.name, str(outside / "keep.c")):
        r = sandboxes.brig_cmd("commit", name, bad)
        assert r.returncode == 125, (bad, r)
        assert "not in the workspace" in r.stderr or "'..' is not allowed" in r.stderr, r
    r = sandboxes.brig_cmd("commit", name, "src/keep.c", "out/keep.c", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r   # nothing below a symlink is a change
    assert (brig.workspace / "src" / "keep.c").read_text() == "host\n"
    r = sandboxes.brig_cmd("commit", name, "src", "out", "lib")
    assert r.returncode == 0, r
    assert (brig.workspace / "src").is_symlink() and (brig.workspace / "out").is_symlink()
    assert list(outside.iterdir()) == [], "a commit wrote through the sandbox's symlink"


# --------------------------------------------------------------- --pooled

def test_pooled_run_says_whether_the_pool_served_it(brig, sandboxes):
    """--json-report works with --pooled and says in "pool" whether a member
    served the run; when it did not (--audit and --manifest need a new sandbox, another
    policy has no pool) the report and stderr say why."""
    r = sandboxes.brig_cmd("pool", "--size", "1")
    assert r.returncode == 0, r
    try:
        rep = brig.reports / f"pooled-{secrets.token_hex(3)}.json"
        r = sandboxes.brig_cmd("run", "--pooled", "--json-report", rep, "--", "sh", "-c", "exit 3")
        assert r.returncode == 3 and "not served" not in r.stderr, r
        doc = json.loads(rep.read_text())
        assert doc["pool"]["served"] is True and doc["pool"]["member"].startswith("pool-"), doc
        assert doc["exit_code"] == 3, doc

        audit = brig.reports / f"pooled-{secrets.token_hex(3)}.jsonl"
        r = sandboxes.brig_cmd("run", "--pooled", "--json-report", rep, "--audit", audit, "--", "true")
        assert r.returncode == 0, r
        assert "brig: --pooled: not served by the pool: --audit and --manifest need a new sandbox" in r.stderr, r
        doc = json.loads(rep.read_text())
        assert doc["pool"] == {"served": False, "member": None,
                               "reason": doc["pool"]["reason"]} and "--audit" in doc["pool"]["reason"], doc
        assert "controls" in doc, doc   # the full run report of the new sandbox

        rd, wr = os.pipe()
        r = sandboxes.brig_cmd("run", "--pooled", "--memory", "1G", "--json-report-fd", wr, "--", "true",
                               pass_fds=(wr,))
        os.close(wr)
        doc = json.loads(read_all(rd))
        os.close(rd)
        assert r.returncode == 0 and "no pool runs for this policy and workspace" in r.stderr, r
        assert doc["pool"]["served"] is False and "brig pool --size N" in doc["pool"]["reason"], doc
    finally:
        sandboxes.brig_cmd("pool", "--stop")
        for name in list(sandboxes.ls()):
            sandboxes.rm(name)
