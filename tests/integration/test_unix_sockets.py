"""Pathname unix sockets in grants (issue 13, class 4): a socket file in the
workspace or in any bind, read-only ones included, whose listener is a
HOST process must stay out of reach under every network mode — by path,
relative path, symlink, and through races on the address buffer, the
descriptor number and the socket file — unless --allow-unix names it.
The sandbox's own sockets keep working. Every check is on the host side:
the host's server counts what it accepted and received. Root and rootless.
"""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from persist_helpers import sandboxes  # noqa: F401 (fixture)


def attack(ident, technique, control):
    return pytest.mark.escape(ident, technique, control)


IN_GRANT = attack("unix-socket-in-grant",
                  "connect to a host server's pathname socket in the workspace or a bind (absolute, relative, "
                  "symlink, read-only bind, brig exec, pooled run, --net host)",
                  "unix socket guard: connect notifies, the supervisor judges the inode and connects itself")


ALLOWED = attack("unix-allowed-socket-abuse",
                 "through an --allow-unix permission: rename another host socket (docker.sock) to the allowed name "
                 "in a writable grant, or a directory above it; be taken for the root supervisor by an allowed "
                 "server that trusts SO_PEERCRED, SO_PEERGROUPS or SCM_CREDENTIALS",
                 "an allowed path passes only on a read-only mount; the supervisor's thread calls with the "
                 "sandbox user's uid, gid and groups")


def host_dir(scratch, name):
    """A directory outside the workspace for host sockets, bound in by the test."""
    d = scratch / name
    d.mkdir()
    d.chmod(0o755)
    return d


class HostServer:
    """A host-side unix server (stream or datagram) that records every
    connection and every byte it gets."""

    def __init__(self, path, kind=socket.SOCK_STREAM):
        self.path = str(path)
        self.kind = kind
        self.accepted = 0
        self.data = b""
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.sock.bind(self.path)
        if not self.path.startswith("\0"):
            os.chmod(self.path, 0o777)  # DAC never is what stops the sandbox
        if kind != socket.SOCK_DGRAM:
            self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.stop = False
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def _serve(self):
        while not self.stop:
            try:
                if self.kind == socket.SOCK_DGRAM:
                    self.data += self.sock.recv(65536)
                    continue
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            c.settimeout(1)
            try:
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    self.data += d
            except OSError:
                pass
            c.close()

    def close(self):
        self.stop = True
        self.t.join()
        self.sock.close()

    def reached(self):
        return self.accepted > 0 or self.data != b""


@pytest.fixture
def host_servers():
    servers = []

    def make(path, kind=socket.SOCK_STREAM):
        s = HostServer(path, kind)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


CLIENT = r'''
import errno, os, socket, sys
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ok"
    except OSError as e:
        results[name] = errno.errorcode.get(e.errno, str(e.errno))
def stream(addr):
    def go():
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(addr)
        s.sendall(b"LEAK-" + addr.encode())
        s.close()
    return go
for i, addr in enumerate(sys.argv[1:]):
    attempt(addr, stream(addr))
print("RESULTS " + repr(results))
'''


def results(r):
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULTS ")]
    assert line, r
    import ast
    return ast.literal_eval(line[0][len("RESULTS "):])


def _client(brig, ws):
    p = ws / "client.py"
    p.write_text(CLIENT)
    brig.chown(p)
    return p


@IN_GRANT
@pytest.mark.parametrize("net", ["none", "proxy"])
def test_host_socket_in_workspace_unreachable(brig, host_servers, net):
    ws = brig.workspace
    srv = host_servers(ws / "db.sock")
    (ws / "sub").mkdir()
    brig.chown(ws / "sub")
    os.symlink(str(ws / "db.sock"), ws / "link.sock")
    os.symlink("../db.sock", ws / "sub" / "rel-link")
    client = _client(brig, ws)
    audit = brig.reports / f"audit-{net}.jsonl"
    r = brig.run("run", "--net", net, "--audit", audit, "--", "python3", client,
                 str(ws / "db.sock"), "db.sock", "./sub/../db.sock", "link.sock", "sub/rel-link",
                 str(ws / "sub" / "rel-link"))
    res = results(r)
    assert set(res.values()) == {"EACCES"}, (res, r)
    time.sleep(0.3)
    assert not srv.reached(), (srv.accepted, srv.data)
    # the user is told which socket and which flag lets it through
    assert "refused" in r.stderr and "db.sock" in r.stderr and "--allow-unix" in r.stderr, r
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    refused = [e for e in events if e.get("event") == "unix" and e.get("action") == "refused"]
    assert refused and all(e["call"] == "connect" and e["errno"] == "EACCES" for e in refused), events
    assert {e["path"] for e in refused} >= {str(ws / "db.sock"), "db.sock", "link.sock"}, refused


@IN_GRANT
def test_host_socket_in_readonly_bind_unreachable(brig, host_servers, scratch):
    d = host_dir(scratch, "ro")
    srv = host_servers(d / "docker.sock")
    client = _client(brig, brig.workspace)
    r = brig.run("run", "--ro-bind", d, "--allow-unix", d / "other.sock", "--", "python3", client,
                 str(d / "docker.sock"), report=True)
    assert results(r) == {str(d / "docker.sock"): "EACCES"}, r
    assert r.report["controls"]["unix_sockets"] == {"guard": "on", "allowed": [str(d / "other.sock")],
                                                    "refused": 1}, r.report
    # a symlink in the writable workspace to the read-only bind's socket
    os.symlink(str(d / "docker.sock"), brig.workspace / "via")
    r = brig.run("run", "--ro-bind", d, "--", "python3", client, "via")
    assert results(r) == {"via": "EACCES"}, r
    time.sleep(0.3)
    assert not srv.reached(), (srv.accepted, srv.data)


DGRAM = r'''
import errno, socket, sys
out = {}
target = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for name, fn in (("sendto", lambda: s.sendto(b"LEAK-sendto", target)),
                 ("connect", lambda: s.connect(target)),
                 ("dontwait", lambda: s.sendto(b"LEAK-dontwait", socket.MSG_DONTWAIT, target))):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
print("RESULTS " + repr(out))
'''


@attack("unix-datagram-to-host", "sendto / connect+send to a host unix datagram socket in the workspace", "unix socket guard: sendto with a destination notifies")
def test_host_datagram_socket_unreachable(brig, host_servers):
    ws = brig.workspace
    srv = host_servers(ws / "log.sock", socket.SOCK_DGRAM)
    p = ws / "dgram.py"
    p.write_text(DGRAM)
    r = brig.run("run", "--", "python3", p, str(ws / "log.sock"))
    assert results(r) == {"sendto": "EACCES", "connect": "EACCES", "dontwait": "EACCES"}, r
    time.sleep(0.3)
    assert not srv.reached(), srv.data


RACES = r'''
import ctypes, ctypes.util, errno, os, socket, sys, threading
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
host, own, tries = sys.argv[1], sys.argv[2], int(sys.argv[3])
stop = False
listener = socket.socket(socket.AF_UNIX)
listener.bind(own)
listener.listen(128)
def drain(l):  # accepts for the whole run: a full backlog would block connect
    l.settimeout(0.1)
    while True:
        try:
            l.accept()[0].close()
        except OSError:
            pass
threading.Thread(target=drain, args=(listener,), daemon=True).start()

def addr(path):
    b = path.encode()
    return socket.AF_UNIX.to_bytes(2, "little") + b + b"\0" * (108 - len(b))
A, B = addr(own), addr(host)
buf = ctypes.create_string_buffer(A, 110)
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(128)
TCP = socket.AF_INET.to_bytes(2, "little") + tcp.getsockname()[1].to_bytes(2, "big") + bytes([127, 0, 0, 1]) + b"\0" * 8
leaks = []

# 1. the address buffer flips between our own socket and the host's
def flip():
    while not stop:
        ctypes.memmove(buf, B, 110)
        ctypes.memmove(buf, A, 110)
t = threading.Thread(target=flip); t.start()
for i in range(tries):
    s = socket.socket(socket.AF_UNIX)
    if libc.connect(s.fileno(), buf, 110) == 0:
        try:
            if s.getpeername() == host:
                leaks.append("buffer")
            s.send(b"LEAK-buffer")
        except OSError:
            pass
    s.close()
stop = True; t.join(); stop = False

# 2. the socket file: rename the host's socket over our own name and back
spare = own + ".spare"
def swap():
    while not stop:
        try:
            os.rename(own, spare); os.rename(host, own); os.rename(own, host); os.rename(spare, own)
        except OSError:
            pass
t = threading.Thread(target=swap); t.start()
for i in range(tries):
    s = socket.socket(socket.AF_UNIX)
    if libc.connect(s.fileno(), ctypes.c_char_p(A), 110) == 0:
        try:
            s.send(b"LEAK-rename")
        except OSError:
            pass
    s.close()
stop = True; t.join(); stop = False

# 3. the descriptor number: a TCP connect while a unix socket is dup2'd
#    over its fd and the address turns into the host's path
tbuf = ctypes.create_string_buffer(TCP + b"\0" * (110 - len(TCP)), 110)
u = socket.socket(socket.AF_UNIX)
first = socket.socket()
fdno = os.dup(first.fileno())
threading.Thread(target=drain, args=(tcp,), daemon=True).start()
def dupflip():
    while not stop:
        tcpsock = socket.socket()
        os.dup2(u.fileno(), fdno); ctypes.memmove(tbuf, B, 110)
        os.dup2(tcpsock.fileno(), fdno); ctypes.memmove(tbuf, TCP, 16)
        tcpsock.close()
t = threading.Thread(target=dupflip); t.start()
for i in range(tries):
    libc.connect(fdno, tbuf, 16 if i % 2 else 110)
stop = True; t.join()
print("RESULTS " + repr({"leaks": leaks}))
'''


@attack("unix-connect-toctou", "race the check: flip the sockaddr buffer, rename the host socket over an own one, dup2 a unix socket over a TCP fd (2000 tries each)", "the supervisor connects the socket it took to the inode it judged; never CONTINUE")
def test_races_never_reach_the_host(brig, host_servers):
    ws = brig.workspace
    srv = host_servers(ws / "host.sock")
    p = ws / "races.py"
    p.write_text(RACES)
    r = brig.run("run", "--", "python3", p, str(ws / "host.sock"), str(ws / "own.sock"), "2000", timeout=120)
    assert r.returncode == 0, r
    assert results(r) == {"leaks": []}, r
    time.sleep(0.3)
    assert not srv.reached(), (srv.accepted, srv.data)


OWN = r'''
import os, socket, sys, threading
out = {}
for where in ("ws.sock", "/tmp/t.sock"):
    srv = socket.socket(socket.AF_UNIX); srv.bind(where); srv.listen(4)
    def serve():
        c, _ = srv.accept(); c.sendall(c.recv(100).upper()); c.close()
    threading.Thread(target=serve, daemon=True).start()
    c = socket.socket(socket.AF_UNIX); c.connect(where); c.sendall(b"ping"); out[where] = c.recv(100).decode()
os.symlink("ws.sock", "ln.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind("ws2.sock"); srv.listen(1)
c = socket.socket(socket.AF_UNIX); c.setblocking(False)
try:
    c.connect("ws2.sock"); out["nonblocking"] = "ok"
except BlockingIOError:
    out["nonblocking"] = "EAGAIN"
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind("d.sock")
e = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); e.sendto(b"dgram", "d.sock"); out["dgram"] = d.recv(10).decode()
# a name of this run's: with --net host, abstract names are the host's, shared with the other tests running
abstract = "\0brig-abstract-" + os.urandom(8).hex()
a = socket.socket(socket.AF_UNIX); a.bind(abstract); a.listen(1)
b = socket.socket(socket.AF_UNIX); b.connect(abstract); out["abstract"] = "ok"
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(1)
u = socket.socket(); u.connect(t.getsockname()); out["tcp"] = "ok"
print("RESULTS " + repr(out))
'''


OWN_WORK = attack("unix-own-sockets-keep-working",
                  "the sandbox's own servers (workspace, /tmp, datagram, abstract, TCP) must keep working, also in "
                  "an overlay workspace whose upper is on another filesystem",
                  "own sockets found by NETLINK_SOCK_DIAG in the sandbox's network namespace")


@OWN_WORK
def test_own_sockets_keep_working(brig):
    p = brig.workspace / "own.py"
    p.write_text(OWN)
    r = brig.run("run", "--", "python3", p)
    assert results(r) == {"ws.sock": "PING", "/tmp/t.sock": "PING", "nonblocking": "ok", "dgram": "dgram",
                          "abstract": "ok", "tcp": "ok"}, r
    assert "refused" not in r.stderr, r


@IN_GRANT
def test_allow_unix_lets_exactly_that_socket_through(brig, host_servers, scratch):
    d = host_dir(scratch, "sockets")
    ok = host_servers(d / "pg.sock")
    other = host_servers(d / "docker.sock")
    client = _client(brig, brig.workspace)
    r = brig.run("run", "--ro-bind", d, "--allow-unix", d / "pg.sock", "--", "python3", client,
                 str(d / "pg.sock"), str(d / "docker.sock"))
    assert results(r) == {str(d / "pg.sock"): "ok", str(d / "docker.sock"): "EACCES"}, r
    time.sleep(0.3)
    assert ok.accepted == 1 and b"LEAK-" + str(d / "pg.sock").encode() in ok.data, (ok.accepted, ok.data)
    assert not other.reached(), other.data
    # a symlink at the allowed path does not carry the permission elsewhere
    (d / "pg.sock").unlink()
    os.symlink(str(d / "docker.sock"), d / "pg.sock")
    r = brig.run("run", "--ro-bind", d, "--allow-unix", d / "pg.sock", "--", "python3", client, str(d / "pg.sock"))
    assert results(r) == {str(d / "pg.sock"): "EACCES"}, r
    assert not other.reached(), other.data
    # the same from a policy file, and `brig policy explain` says it
    pol = brig.workspace / "p.json"
    pol.write_text(json.dumps({"network": {"allow_unix": [str(d / "docker.sock")]}}))
    r = brig.run("policy", "explain", "--policy", pol)
    assert r.returncode == 0 and str(d / "docker.sock") in r.stdout and "unix sockets" in r.stdout, r


@pytest.mark.parametrize("bad", ["relative.sock", "/a/../b.sock", "/" + "x" * 120])
def test_allow_unix_bad_paths_exit_125(brig, bad):
    r = brig.run("run", "--allow-unix", bad, "--", "true")
    assert r.returncode == 125 and "--allow-unix" in r.stderr, r


@IN_GRANT
def test_exec_in_persistent_sandbox_is_guarded(brig, host_servers, sandboxes):
    ws = brig.workspace
    srv = host_servers(ws / "db.sock")
    client = _client(brig, ws)
    own = ws / "own.py"
    own.write_text(OWN)
    name, _ = sandboxes.create()
    for _ in range(2):  # every exec gets its own filter and listener
        r = sandboxes.exec(name, "--", "python3", client, str(ws / "db.sock"))
        assert results(r) == {str(ws / "db.sock"): "EACCES"}, r
        # brig exec says it too, for this command alone
        assert "refused 1 connection" in r.stderr and "db.sock" in r.stderr and "--allow-unix" in r.stderr, r
    r = sandboxes.exec(name, "--", "sh", "-c", "cd /tmp && python3 " + str(own))
    assert results(r)["/tmp/t.sock"] == "PING", r
    assert "refused" not in r.stderr, r
    time.sleep(0.3)
    assert not srv.reached(), (srv.accepted, srv.data)


ABSTRACT = r'''
import errno, socket, sys
out = {}
try:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1].replace("@", "\0", 1)); s.sendall(b"LEAK-abstract")
    out["host"] = "ok"
except OSError as e:
    out["host"] = errno.errorcode.get(e.errno, str(e.errno))
print("RESULTS " + repr(out))
'''


@IN_GRANT
def test_net_host_own_sockets_work_host_ones_do_not(brig, host_servers):
    """--net host shares the host's network namespace, so its socket list is
    the host's: own means held by a process of the sandbox. Abstract host
    listeners stay closed too (the supervisor's connect is not Landlock's)."""
    ws = brig.workspace
    srv = host_servers(ws / "db.sock")
    name = "@brig-test-host-" + os.path.basename(str(brig.base))
    abstract = host_servers("\0" + name[1:])
    own = ws / "own.py"
    own.write_text(OWN)
    client = _client(brig, ws)
    r = brig.run("run", "--net", "host", "--", "python3", own)
    assert results(r)["ws.sock"] == "PING" and results(r)["abstract"] == "ok", r
    r = brig.run("run", "--net", "host", "--", "python3", client, str(ws / "db.sock"))
    assert results(r) == {str(ws / "db.sock"): "EACCES"}, r
    p = ws / "abstract.py"
    p.write_text(ABSTRACT)
    r = brig.run("run", "--net", "host", "--", "python3", p, name)
    assert results(r)["host"] in ("EACCES", "EPERM"), r
    time.sleep(0.3)
    assert not srv.reached() and not abstract.reached(), (srv.data, abstract.data)


@IN_GRANT
def test_pooled_run_is_guarded(brig, host_servers, sandboxes):
    from proc_helpers import wait_until
    ws = brig.workspace
    srv = host_servers(ws / "db.sock")
    client = _client(brig, ws)
    pools = sandboxes.root / "pools"

    def ready():
        return sorted(p.name for d in pools.iterdir() for p in (d / "ready").iterdir()) if pools.exists() else []

    try:
        r = sandboxes.brig_cmd("pool", "--size", "1")
        assert r.returncode == 0, r
        assert wait_until(lambda: len(ready()) == 1, 20), ready()
        before = ready()
        r = sandboxes.brig_cmd("run", "--pooled", "--", "python3", client, str(ws / "db.sock"))
        assert results(r) == {str(ws / "db.sock"): "EACCES"}, r
        assert ready() != before, "the run did not use the pool"
    finally:
        sandboxes.brig_cmd("pool", "--stop")
        for name in list(sandboxes.ls()):
            sandboxes.rm(name)
    time.sleep(0.3)
    assert not srv.reached(), (srv.accepted, srv.data)


def test_connect_rule_log_is_still_guarded(brig, host_servers):
    """A user rule "log" on connect would be a plain "continue" for other
    calls; for connect the guard decides, and the call is recorded too."""
    ws = brig.workspace
    srv = host_servers(ws / "db.sock")
    client = _client(brig, ws)
    audit = brig.reports / "audit-log.jsonl"
    r = brig.run("run", "--audit", audit, "--seccomp-rule", "connect=log", "--", "python3", client,
                 str(ws / "db.sock"))
    assert results(r) == {str(ws / "db.sock"): "EACCES"}, r
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    assert any(e["event"] == "syscall" and e["syscall"] == "connect" and e["action"] == "log" for e in events), events
    assert any(e["event"] == "unix" and e["action"] == "refused" for e in events), events
    time.sleep(0.3)
    assert not srv.reached(), (srv.accepted, srv.data)


@pytest.mark.parametrize("args", [("--seccomp-deny", "sendmsg"), ("--audit", "AUDIT", "--seccomp-rule", "sendmsg=log")])
def test_rules_that_would_strand_the_listener_are_refused_up_front(brig, args):
    """The filter's listener reaches the supervisor through sendmsg: a
    policy refusing it would start a command that can report nothing."""
    args = [str(brig.reports / "a.jsonl") if a == "AUDIT" else a for a in args]
    r = brig.run("run", *args, "--", "true")
    assert r.returncode == 125 and "sendmsg" in r.stderr and "let sendmsg through" in r.stderr, r
    r = brig.run("run", "--seccomp-deny", "@network", "--", "true")
    assert r.returncode == 0, r


SWAP = r'''
import errno, os, socket, sys
out = {}
def connect(name, path):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(path); s.sendall(b"LEAK-" + name.encode())
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
ws, allowed, other = sys.argv[1], sys.argv[2], sys.argv[3]
# the file: another host socket renamed to the allowed name
os.rename(allowed, allowed + ".orig"); os.rename(other, allowed)
connect("file", allowed)
os.rename(allowed, other); os.rename(allowed + ".orig", allowed)
# a directory above it: the allowed path now leads through a new one
d = os.path.dirname(allowed)
os.rename(d, d + ".orig"); os.mkdir(d); os.rename(other, allowed)
connect("dir", allowed)
print("RESULTS " + repr(out))
'''


@ALLOWED
def test_allowed_name_in_writable_grant_carries_nothing(brig, host_servers):
    ws = brig.workspace
    (ws / "pg").mkdir()
    brig.chown(ws / "pg")
    pg = host_servers(ws / "pg" / "pg.sock")
    docker = host_servers(ws / "docker.sock")
    p = ws / "swap.py"
    p.write_text(SWAP)
    audit = brig.reports / "audit-swap.jsonl"
    r = brig.run("run", "--allow-unix", ws / "pg" / "pg.sock", "--audit", audit, "--", "python3", p, ws,
                 ws / "pg" / "pg.sock", ws / "docker.sock")
    assert results(r) == {"file": "EACCES", "dir": "EACCES"}, r
    time.sleep(0.3)
    assert not docker.reached(), (docker.accepted, docker.data)
    assert not pg.reached(), (pg.accepted, pg.data)
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    assert any(e.get("event") == "unix" and "--ro-bind" in e.get("reason", "") for e in events), events
    assert "--ro-bind" in r.stderr, r


ABANDON = r'''
import ctypes, ctypes.util, errno, os, signal, socket, sys, time
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
out = {}
for f in ("full.sock", "ok.sock"):
    if os.path.exists(f):
        os.unlink(f)
full = socket.socket(socket.AF_UNIX); full.bind("full.sock"); full.listen(0)
filler = socket.socket(socket.AF_UNIX); filler.connect("full.sock")  # the backlog is full now
kids = []
for i in range(int(sys.argv[1])):  # more clients than workers, each killed while it waits
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect("full.sock")
        except OSError:
            pass
        os._exit(0)
    kids.append(pid)
time.sleep(1)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
time.sleep(0.3)
ok = socket.socket(socket.AF_UNIX); ok.bind("ok.sock"); ok.listen(8)
try:
    c = socket.socket(socket.AF_UNIX); c.connect("ok.sock"); out["after"] = "ok"
except OSError as e:
    out["after"] = errno.errorcode.get(e.errno, str(e.errno))
# a handled signal while a connect waits in the supervisor: the kernel
# (WAIT_KILLABLE_RECV) lets only a signal that kills end the wait, so the
# connect returns what the supervisor's made of it, once the listener
# makes room (a thread, 0.6 s later), and the handler runs then. Before,
# it returned EINTR and the worker connected the socket behind its back.
import threading
signal.signal(signal.SIGALRM, lambda *a: None)
signal.siginterrupt(signal.SIGALRM, True)
s = socket.socket(socket.AF_UNIX)
b = b"full.sock"
addr = ctypes.create_string_buffer(socket.AF_UNIX.to_bytes(2, "little") + b + b"\0", 2 + len(b) + 1)
def room():
    time.sleep(0.6)
    for i in range(int(sys.argv[1]) + 2):  # room in the backlog again
        full.settimeout(0.2)
        try:
            full.accept()[0].close()
        except OSError:
            break
t = threading.Thread(target=room)
t.start()
signal.setitimer(signal.ITIMER_REAL, 0.3)
r = libc.connect(s.fileno(), addr, len(addr))
out["interrupted"] = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
t.join()
time.sleep(0.3)
try:
    out["later"] = "connected" if s.getpeername() is not None else "?"
except OSError as e:
    out["later"] = errno.errorcode.get(e.errno, str(e.errno))
print("RESULTS " + repr(out))
'''


@attack("unix-abandoned-connect", "70 clients wait on a full backlog and are SIGKILLed (the workers kept waiting: "
        "every later connect EAGAIN); a connect interrupted by a signal", "a watcher interrupts the worker of a "
        "notification that went away (SIGKILL, EINTR): pool and socket as after the kernel's own connect")
def test_abandoned_connects_free_their_workers(brig):
    p = brig.workspace / "abandon.py"
    p.write_text(ABANDON)
    for clients in (70, 0):  # 0: the interrupted connect alone, with every worker free
        r = brig.run("run", "--", "python3", p, str(clients), timeout=120)
        assert results(r) == {"after": "ok", "interrupted": "ok", "later": "connected"}, (clients, r)


SIGNALLED = r'''
import ctypes, ctypes.util, errno, os, signal, socket, sys, threading, time
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
mode, n = sys.argv[1], int(sys.argv[2])
res = {}
signal.signal(signal.SIGALRM, lambda *a: None)
signal.siginterrupt(signal.SIGALRM, mode == "interrupt")  # else SA_RESTART: the call restarts
for i in range(n):
    f = "sig%d.sock" % i
    if os.path.exists(f):
        os.unlink(f)
    full = socket.socket(socket.AF_UNIX); full.bind(f); full.listen(0)
    filler = socket.socket(socket.AF_UNIX); filler.connect(f)  # the backlog is full
    s = socket.socket(socket.AF_UNIX); b = f.encode()
    addr = ctypes.create_string_buffer(socket.AF_UNIX.to_bytes(2, "little") + b + b"\0", 2 + len(b) + 1)
    full.settimeout(1)
    def room():  # the listener makes room (restart: while the signals keep coming)
        time.sleep(0.5 if mode == "interrupt" else 0.3)
        try:
            full.accept()[0].close()
        except OSError:
            pass
    t = threading.Thread(target=room); t.start()
    if mode == "interrupt":
        signal.setitimer(signal.ITIMER_REAL, 0.2)
    else:
        signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)
    r = libc.connect(s.fileno(), addr, len(addr)); e = ctypes.get_errno()
    signal.setitimer(signal.ITIMER_REAL, 0)
    if r != 0:
        full.accept()[0].close()  # room the moment the caller gave up
    t.join()
    time.sleep(0.1)
    try:
        s.getpeername(); later = "connected"
    except OSError as ex:
        later = errno.errorcode[ex.errno]
    k = ("ok" if r == 0 else errno.errorcode[e]) + "/" + later
    res[k] = res.get(k, 0) + 1
    for x in (full, filler, s):
        x.close()
    os.unlink(f)
print("RESULTS " + repr(res))
'''


@attack("unix-connect-completed-after-signal", "a blocking connect waits on a full backlog; a handled signal "
        "interrupts it (EINTR) and the listener makes room at once, or a 5 ms SA_RESTART timer keeps "
        "restarting it (found by attack34: the supervisor's worker, interrupted only by the 20 ms watcher, "
        "connected the socket after the caller had given up, and with restarts the caller then hung)",
        "the filter's listener waits killable once the supervisor has the call (WAIT_KILLABLE_RECV): only a "
        "signal that kills ends the wait, so the result is the supervisor's connect's own")
def test_a_signal_never_leaves_a_connect_to_finish_behind_the_caller(brig):
    if tuple(int(x) for x in os.uname().release.split(".")[:2]) < (5, 19):
        pytest.skip("KERNEL BEFORE 5.19: no SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV; the 20 ms window remains")
    p = brig.workspace / "signalled.py"
    p.write_text(SIGNALLED)
    # an interrupt: never EINTR with the socket connected afterwards
    r = brig.run("run", "--timeout", "60s", "--", "python3", p, "interrupt", "10", timeout=90)
    assert results(r) == {"ok/connected": 10}, r
    # restarts every 5 ms: the connect completes once, the caller never hangs
    r = brig.run("run", "--timeout", "60s", "--", "python3", p, "restart", "10", timeout=90)
    assert r.returncode == 0 and results(r) == {"ok/connected": 10}, r


CROWD = r'''
import errno, os, socket, sys, threading, time
n = int(sys.argv[1])
for f in ("crowd.sock",):
    if os.path.exists(f):
        os.unlink(f)
srv = socket.socket(socket.AF_UNIX); srv.bind("crowd.sock"); srv.listen(0)
filler = socket.socket(socket.AF_UNIX); filler.connect("crowd.sock")  # the backlog is full now
host = sys.argv[2] if len(sys.argv) > 2 else None  # a host server's socket: never to be reached
out, lock = {}, threading.Lock()
def one(i):
    s = socket.socket(socket.AF_UNIX)  # blocking (a non-blocking one gets EAGAIN from the kernel here)
    to_host = host and i % 3 == 0
    try:
        s.connect(host if to_host else "crowd.sock")
        if to_host:
            s.sendall(b"LEAK")
        what = "ok"
    except OSError as e:
        what = errno.errorcode.get(e.errno, str(e.errno))
    what = ("host " if to_host else "") + what
    with lock:
        out[what] = out.get(what, 0) + 1
    s.close()
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in ts]
time.sleep(3)  # every connect waits in the supervisor now, or got its answer
srv.setblocking(False)
while any(t.is_alive() for t in ts):
    try:
        srv.accept()[0].close()
    except BlockingIOError:
        time.sleep(0.01)
print("RESULTS " + repr(out))
'''


@attack("unix-guard-crowded", "connects to a host server's socket in the workspace among 300 concurrent ones, "
        "with the supervisor's workers and queue full, and with brig's open-files hard limit at 200 (its "
        "descriptors run out while calls are judged)", "a call the guard cannot take or judge is answered EAGAIN "
        "and not made; the host server gets nothing")
def test_more_concurrent_connects_than_workers_wait_for_one(brig, host_servers):
    """Every connect of the sandbox is made by one of the supervisor's 64
    worker threads. A connect that found none free got EAGAIN, a failure
    the kernel would never give a blocking connect (a hundred concurrent
    connects under AddressSanitizer saw it). Now it waits for a worker, up
    to 192 queued; past that EAGAIN, and stderr says why."""
    p = brig.workspace / "crowd.py"
    p.write_text(CROWD)
    r = brig.run("run", "--", "python3", p, "200", timeout=120)
    assert results(r) == {"ok": 200}, r
    assert "socket guard were busy" not in r.stderr, r
    r = brig.run("run", "--", "python3", p, "300", timeout=120)
    got = results(r)
    assert set(got) <= {"ok", "EAGAIN"} and got.get("ok", 0) >= 256 and got.get("EAGAIN", 0) > 0, r
    assert "all 64 workers of brig's socket guard were busy and 192 calls waited for one already" in r.stderr, r
    # brig with few descriptors (a hard limit of 200): 150 calls in flight
    # would need more of the supervisor's than it has; those it cannot take
    # get EAGAIN, said, and the run goes on
    import resource
    r = brig.run("run", "--", "python3", p, "150", timeout=120,
                 preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200)))
    got = results(r)
    assert r.returncode == 0 and set(got) <= {"ok", "EAGAIN"} and got.get("EAGAIN", 0) > 0, r
    assert "as many calls in flight as its supervisor can hold the descriptors of" in r.stderr, r
    # and among them, connects to a host server's socket in the workspace:
    # refused or EAGAIN, never made, however crowded the guard is
    srv = host_servers(brig.workspace / "host.sock")
    for n, limit in (("300", None), ("150", (200, 200))):
        r = brig.run("run", "--", "python3", p, n, str(brig.workspace / "host.sock"), timeout=120,
                     preexec_fn=(lambda l=limit: resource.setrlimit(resource.RLIMIT_NOFILE, l)) if limit else None)
        got = results(r)
        assert r.returncode == 0 and set(got) <= {"ok", "EAGAIN", "host EACCES", "host EAGAIN"}, r
        assert got.get("host EACCES", 0) + got.get("host EAGAIN", 0) == (int(n) + 2) // 3, r
        time.sleep(0.3)
        assert not srv.reached(), f"ATTACK WORKED: the host server got {srv.accepted} connections, {srv.data!r}"
    # every attempt at the host's socket is in the audit stream, those the
    # guard had no room for too (as refused, EAGAIN)
    audit = brig.reports / "crowd-audit.jsonl"
    r = brig.run("run", "--audit", audit, "--", "python3", p, "150", str(brig.workspace / "host.sock"),
                 timeout=120, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200)))
    got = results(r)
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    host = [e for e in events if e.get("event") == "unix" and e.get("path") == str(brig.workspace / "host.sock")]
    # past its rate limit the stream counts what it held back, and what its
    # writer could not keep up with: the run's end event says both
    end = [e for e in events if "net_suppressed" in e]
    assert end, events[-3:]
    counted = end[-1]["net_suppressed"] + end[-1].get("lost", 0)
    assert got.get("host EAGAIN", 0) > 0 and len(host) + counted >= 50, (got, len(host), end[-1])
    assert all(e["action"] == "refused" for e in host) and any(e.get("errno") == "EAGAIN" for e in host), host[:3]
    assert not srv.reached()


HOLD = r'''
import socket, sys, threading, time
n, hold = int(sys.argv[1]), float(sys.argv[2])
srv = socket.socket(socket.AF_UNIX); srv.bind("hold.sock"); srv.listen(0)
filler = socket.socket(socket.AF_UNIX); filler.connect("hold.sock")  # the backlog is full
def one():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("hold.sock")
    except OSError:
        pass
ts = [threading.Thread(target=one, daemon=True) for _ in range(n)]
[t.start() for t in ts]
print("holding", flush=True)
time.sleep(hold)
'''


def test_a_crowded_guard_leaves_its_supervisor_descriptors(brig, sandboxes):
    """A persistent sandbox whose command keeps 256 connects waiting, with
    brig's open-files limit at 300: the guard takes no more calls than
    leave its supervisor descriptors to spare, so a brig exec beside it
    still works (it said "went away during the exec: Broken pipe"; found
    by attack34)."""
    import resource
    low = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))
    env = brig.env(sandboxes.env())
    name = sandboxes.new_name("crowd")
    sandboxes.names.append(name)  # removed with the test
    r = sandboxes.brig_cmd("create", name, preexec_fn=low)
    assert r.returncode == 0, r
    (brig.workspace / "hold.py").write_text(HOLD)
    holder = subprocess.Popen(brig.cmd("exec", name, "--", "python3", str(brig.workspace / "hold.py"), "256", "6"),
                              env=env, cwd=str(brig.workspace), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        time.sleep(1)
        r = sandboxes.exec(name, "--", "echo", "hi")
        assert r.returncode == 0 and r.stdout == "hi\n", r
        out, err = holder.communicate(timeout=60)
        assert "as many calls in flight as its supervisor can hold" in err, err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()


@OWN_WORK
def test_own_sockets_in_overlay_workspace_on_two_filesystems(brig, host_servers, sandboxes):
    """An overlay workspace whose upper layer is on another filesystem than
    the workspace (the state root in a tmpfs, as /run/user is): stat shows
    a layer's device, the kernel's socket list the overlay's. The
    sandbox's own sockets there were refused with EACCES."""
    shm = pathlib.Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(brig.workspace).st_dev:
        pytest.skip("NO /dev/shm ON ANOTHER FILESYSTEM THAN THE WORKSPACE: the two-filesystem overlay is not built")
    run = pathlib.Path(tempfile.mkdtemp(prefix="brig-unix-", dir=shm))
    try:
        run.chmod(0o700)
        brig.chown(run)
        sandboxes.run_dir, sandboxes.root = run, run / "brig"
        ws = brig.workspace
        srv = host_servers(ws / "db.sock")
        own = ws / "own.py"
        own.write_text(OWN)
        client = _client(brig, ws)
        name, _ = sandboxes.create("--workspace-mode", "overlay")
        r = sandboxes.exec(name, "--", "python3", own)
        assert results(r) == {"ws.sock": "PING", "/tmp/t.sock": "PING", "nonblocking": "ok", "dgram": "dgram",
                              "abstract": "ok", "tcp": "ok"}, r
        r = sandboxes.exec(name, "--", "python3", client, str(ws / "db.sock"))
        assert results(r)[str(ws / "db.sock")] in ("EACCES", "ECONNREFUSED"), r
        time.sleep(0.3)
        assert not srv.reached(), (srv.accepted, srv.data)
    finally:
        problems = sandboxes.cleanup()  # here: the state root goes with the test
        sandboxes.names.clear()
        shutil.rmtree(run, ignore_errors=True)
    assert not problems, f"sanitizer reports in supervisor logs: {problems}"


class CredServer(HostServer):
    """A host server at an --allow-unix path that records who the kernel
    says connected (SO_PEERCRED, SO_PEERGROUPS) or sent (SCM_CREDENTIALS)."""

    def __init__(self, path, kind):
        self.seen = []
        super().__init__(path, kind)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before the sandbox runs

    def _serve(self):
        import struct
        while not self.stop:
            try:
                if self.kind == socket.SOCK_DGRAM:
                    _, anc, _, _ = self.sock.recvmsg(100, socket.CMSG_SPACE(12))
                    for level, typ, data in anc:
                        if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                            _, uid, gid = struct.unpack("3i", data[:12])
                            self.seen.append(("dgram", uid, gid, None))
                    continue
                c, _ = self.sock.accept()
            except OSError:
                continue
            _, uid, gid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            g = c.getsockopt(socket.SOL_SOCKET, 59, 256)  # SO_PEERGROUPS
            self.seen.append(("stream", uid, gid, sorted(struct.unpack("%di" % (len(g) // 4), g))))
            c.close()


CRED_CLIENT = r'''
import socket, sys
open(sys.argv[3] + "/made-inside", "w").close()  # its owner on the host is the sandbox user
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.close()
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.sendto(b"x", sys.argv[2])
print("RESULTS " + repr({"done": 1}))
'''


@ALLOWED
def test_allowed_server_sees_the_sandbox_user_not_the_supervisor(brig, scratch):
    d = host_dir(scratch, "creds")
    stream = CredServer(d / "bus.sock", socket.SOCK_STREAM)
    dgram = CredServer(d / "log.sock", socket.SOCK_DGRAM)
    try:
        p = brig.workspace / "cred.py"
        p.write_text(CRED_CLIENT)
        w = host_dir(scratch, "written")  # not idmapped like a root-owned workspace
        w.chmod(0o777)
        r = brig.run("run", "--ro-bind", d, "--bind", w, "--allow-unix", d / "bus.sock", "--allow-unix",
                     d / "log.sock", "--", "python3", p, d / "bus.sock", d / "log.sock", w)
        assert results(r) == {"done": 1}, r
        time.sleep(0.5)
    finally:
        stream.close()
        dgram.close()
    st = os.stat(scratch / "written" / "made-inside")
    seen = stream.seen + dgram.seen
    assert [k for k, *_ in seen] == ["stream", "dgram"], seen
    for kind, uid, gid, groups in seen:
        assert (uid, gid) == (st.st_uid, st.st_gid), (kind, uid, gid, st.st_uid, st.st_gid)
        if brig.mode == "root":  # the sandbox user has no supplementary groups there
            assert groups in (None, []), (kind, groups)
