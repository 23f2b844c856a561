"""brig serve under attack (docs/security.md, rows 221-235): other users,
a caller asking a root server for what it could not reach itself, TCP
without the token, bad and hostile input, slow and vanishing clients, and
the server's own lifetime. Root and rootless; every check on the host."""
import http.server
import json
import os
import pathlib
import socket
import subprocess
import threading
import time

import pytest

from serve_helpers import NOBODY, Client, Server, connect_as, module_server, sandboxes_of, serve_dir

# One worker for every module that runs brig serve (make check: --dist loadgroup):
# a root server lists every sandbox of root, so tests in two workers saw
# each other's sandboxes come and go.
pytestmark = pytest.mark.xdist_group("serve")

IS_ROOT = os.geteuid() == 0
OTHER = 1  # daemon: a second real uid


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (the table's row)."""
    return pytest.mark.escape(ident, technique, control)


mode, server = module_server("sa-", "--socket-mode", "0666", "--max-sandboxes", "3", "--max-execs", "4",
                              "--max-body", "1M", "--max-output", "1M", "--client-timeout", "1s")


def raw(server, data, uid=None, read=True):
    """Send DATA as it is on a new connection; the answer's bytes."""
    s = connect_as(server.sock, server.uid if uid is None else uid)
    s.settimeout(10)
    s.sendall(data)
    out = b""
    while read:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
        if b"\r\n\r\n" in out and b"Content-Length" in out:
            head, _, body = out.partition(b"\r\n\r\n")
            n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            if len(body) >= n:
                break
    s.close()
    return out


def deputy_caller(server):
    """A client of uid NOBODY on the root server (a rootless one has no deputy to confuse)."""
    if server.mode == "rootless":
        pytest.skip("NO DEPUTY TO CONFUSE: a rootless server serves its own uid only (test_users_are_isolated...)")
    return server.client(uid=NOBODY)


@attack("serve-other-user", "uid A creates a sandbox through a root brig serve; uid B (another real user on the same "
        "socket) lists, gets, runs a command in, reads and writes files of, follows the events of, snapshots, "
        "changes the network rules of and deletes it, and creates one of the same name; a rootless server is "
        "asked by a second uid at all",
        "each request's caller from SO_PEERCRED on its connection; a sandbox's owner recorded in the server's own "
        "directory; another user's sandbox answers 404 as one that does not exist; a non-root server serves "
        "its own uid (and root) only: 403")
def test_users_are_isolated_from_each_other(server):
    if server.mode == "rootless":
        other = server.client(uid=OTHER)
        r = other.get("/v1/sandboxes")
        assert r.status == 403 and r.json["error"]["code"] == "forbidden", r
        assert "serves that user only" in r.json["error"]["message"]
        r = other.post("/v1/sandboxes", {"name": "sa-foreign"})
        assert r.status == 403, r
        assert "sa-foreign" not in sandboxes_of(server)
        return
    a, b = server.client(uid=NOBODY), server.client(uid=OTHER)
    name = a.create(name="sa-of-a")
    a.run(name, "echo secret-of-a > /tmp/secret")
    assert name not in [s["name"] for s in b.get("/v1/sandboxes").json["sandboxes"]]
    assert name in [s["name"] for s in server.client().get("/v1/sandboxes").json["sandboxes"]]  # root sees all
    p = f"/v1/sandboxes/{name}"
    tries = [b.get(p), b.post(p + "/execs", {"argv": ["cat", "/tmp/secret"], "wait": True}),
             b.get(p + "/files?path=/tmp/secret"),
             b.put(p + "/files?path=/tmp/secret", b"overwritten", ctype="application/octet-stream"),
             b.get(p + "/events?follow=false"), b.post(p + "/snapshots", {"tag": "stolen"}),
             b.post(p + "/network/rules", {"action": "allow", "host": "example.org"}),
             b.post(p + "/stop"), b.delete(p)]
    for r in tries:
        assert r.status == 404 and r.json["error"]["code"] == "not_found", r
        assert "secret-of-a" not in r.body.decode(errors="replace")
    assert b.post("/v1/sandboxes", {"name": name}).status == 409
    # on the host: A's sandbox runs on, its file unchanged, no snapshot was taken
    assert sandboxes_of(server)[name]["status"] == "running"
    assert a.get(p + "/files?path=/tmp/secret").body == b"secret-of-a\n"
    assert a.get(p + "/snapshots").json["snapshots"] == []
    assert a.delete(p).status == 200
    assert name not in sandboxes_of(server)


@attack("serve-socket-mode", "another uid connects to a brig serve started with the default socket mode",
        "the socket is made 0600 (umask around bind, then chmod): connect(2) fails with EACCES in the kernel")
def test_default_socket_refuses_other_users(bindir, mode):
    if not IS_ROOT:
        pytest.skip("SOCKET MODE NOT TESTED: needs a second uid")
    with serve_dir(mode) as d:
        s = Server(bindir, mode, d).start()
        try:
            assert oct(os.stat(s.sock).st_mode & 0o777) == "0o600"
            with pytest.raises(PermissionError):
                connect_as(s.sock, OTHER)
        finally:
            s.stop()


@attack("serve-confused-deputy", "uid A asks a root brig serve for a sandbox whose policy binds /root and /etc "
        "writable, whose workspace is /root or uid B's 0700 directory, or which keeps the server's environment, "
        "copies in its files, relays its ssh-agent, allows a host unix socket or writes a report or audit file "
        "as root",
        "a caller that is not the server's user is checked AS ITSELF: each host path opened in a child dropped to "
        "its uid and groups (read, and write for a writable one); what names the server's own resources refused; "
        "403 naming the field, nothing created")
def test_a_root_server_grants_a_caller_only_what_it_could_reach(server, scratch):
    a = deputy_caller(server)
    b_dir = scratch / "b-private"
    b_dir.mkdir(mode=0o700)
    os.chown(b_dir, OTHER, OTHER)
    (b_dir / "b-secret").write_text("of b\n")
    own = scratch / "a-own"
    own.mkdir()
    os.chown(own, NOBODY, NOBODY)
    refused = [
        ({"workspace": "/root"}, "workspace"),
        ({"workspace": str(b_dir)}, "workspace"),
        ({"workspace": str(own), "policy": {"filesystem": {"binds": [{"source": "/root"}]}}},
         "policy.filesystem.binds"),
        ({"workspace": str(own), "policy": {"filesystem": {"binds": [{"source": "/etc", "destination": "/mnt"}]}}},
         "policy.filesystem.binds"),
        ({"policy": {"filesystem": {"workspace": str(b_dir)}}}, "workspace"),
        ({"policy": {"process": {"keep_env": ["HOME"]}}}, "policy.process.keep_env"),
        ({"policy": {"tools": {"copy_in": [{"source": "/root/.bashrc", "destination": "~/.bashrc"}]}}},
         "policy.tools"),
        ({"policy": {"tools": {"ssh_agent": True}}}, "policy.tools"),
        ({"policy": {"network": {"allow_unix": ["/run/systemd/private"]}}}, "policy.network.allow_unix"),
        ({"policy": {"report": str(scratch / "report.json")}}, "policy.report"),
        ({"policy": {"audit": str(scratch / "audit.jsonl")}}, "policy.audit"),
    ]
    before = set(sandboxes_of(server))
    for i, (body, field) in enumerate(refused):
        r = a.post("/v1/sandboxes", {"name": f"sa-deputy-{i}", **body})
        assert r.status == 403 and r.json["error"]["details"]["field"] == field, (body, r)
    assert set(sandboxes_of(server)) == before, "a refused create left a sandbox"
    assert not (scratch / "report.json").exists() and not (scratch / "audit.jsonl").exists()
    # what A can reach itself it gets: its own directory, read-only /etc
    name = a.create(name="sa-deputy-ok", workspace=str(own),
                    policy={"filesystem": {"binds": [{"source": "/etc", "destination": "/mnt/etc", "readonly": True}]}})
    res = a.run(name, "echo mine > mine.txt; cat /mnt/etc/hostname >/dev/null", cwd=str(own))
    assert res["result"]["exit_code"] == 0, res
    assert (own / "mine.txt").read_text() == "mine\n"
    assert (b_dir / "b-secret").read_text() == "of b\n" and os.listdir(b_dir) == ["b-secret"]
    assert a.delete(f"/v1/sandboxes/{name}").status == 200


def root_only_file(scratch):
    """A one-line file of root's, 0600: what a caller of a root server must not get read for it."""
    f = scratch / "root-token"
    f.write_text("value-only-root-may-read\n")
    f.chmod(0o600)
    return f


@attack("serve-deputy-secrets", "uid A asks a root brig serve for a sandbox whose policy takes a secret from a "
        "root-only file (@FILE), from the server's environment (env:VAR), and trusts a root-only file as an "
        "upstream CA: the supervisor, running as root, would read each and hand it to A's sandbox's proxy",
        "a secret's @FILE and each upstream_ca opened AS THE CALLER with the binds (a child dropped to its uid "
        "and groups); env:VAR refused for anyone but the server's user and root; 403 naming the field, "
        "nothing created")
def test_a_root_server_reads_no_secret_for_a_caller(server, scratch):
    a, root_only = deputy_caller(server), root_only_file(scratch)
    net = {"mode": "proxy", "allow_hosts": ["api.example.com"]}
    refused = [
        ({**net, "secrets": [{"name": "TOK", "source": f"@{root_only}", "hosts": ["api.example.com"]}]},
         "policy.network.secrets", "run brig serve as uid"),
        ({**net, "secrets": [{"name": "TOK", "source": "env:PATH", "hosts": ["api.example.com"]}]},
         "policy.network.secrets", "server's own environment"),
        ({**net, "upstream_ca": [str(root_only)]}, "policy.network.upstream_ca", "cannot read"),
    ]
    before = set(sandboxes_of(server))
    for i, (netpol, field, words) in enumerate(refused):
        r = a.post("/v1/sandboxes", {"name": f"sa-secret-{i}", "policy": {"network": netpol}})
        assert r.status == 403 and r.json["error"]["details"]["field"] == field, (netpol, r)
        assert words in r.json["error"]["message"], r
        assert "value-only-root-may-read" not in r.body.decode(errors="replace")
    assert set(sandboxes_of(server)) == before, "a refused create left a sandbox"


@attack("serve-deputy-restart", "uid A creates a sandbox through a root brig serve with a secret from its own "
        "file (refused: the supervisor would read it as root after the check, a race a loop of swaps wins), and one "
        "that binds its own directory, snapshots it, then swaps the directory for a symlink to a root-only one and "
        "asks for a fork, a restore, a reset and a start: each starts the sandbox again from its stored policy",
        "a caller's scoped secret through another user's server is refused (403 naming the field); what the deputy "
        "check took at the create is kept in the owner's record and checked AS THE CALLER again before every call "
        "that starts the sandbox from its policy (start, reset, restore, fork): 403 naming the field, no fork")
def test_a_root_server_checks_a_caller_again_at_each_restart(server, scratch):
    a, root_only = deputy_caller(server), root_only_file(scratch)
    own = scratch / "own-token"
    own.write_text("value-of-a\n")
    os.chown(own, NOBODY, NOBODY)
    r = a.post("/v1/sandboxes", {"name": "sa-secret-own", "policy": {"network": {
        "mode": "proxy", "allow_hosts": ["api.example.com"],
        "secrets": [{"name": "TOK", "source": f"@{own}", "hosts": ["api.example.com"]}]}}})
    assert r.status == 403 and r.json["error"]["details"]["field"] == "policy.network.secrets", r
    assert "sa-secret-own" not in sandboxes_of(server)
    own_dir, root_dir = scratch / "own-dir", scratch / "root-dir"
    own_dir.mkdir()
    os.chown(own_dir, NOBODY, NOBODY)
    root_dir.mkdir(mode=0o700)
    (root_dir / "only-root").write_text("value-only-root-may-read\n")
    name = a.create(name="sa-restart", policy={"filesystem": {"binds": [{"source": str(own_dir), "destination": "/mnt/own",
                                                                        "readonly": True}]}})
    p = f"/v1/sandboxes/{name}"
    try:
        assert a.post(p + "/snapshots", {"tag": "t1"}).status == 201
        own_dir.rmdir()
        own_dir.symlink_to(root_dir)  # as A could: the directory is the test's, the link A's to make
        tries = [a.post(p + "/snapshots/t1/restore"), a.post(p + "/reset"), a.post(p + "/start"),
                 a.post(p + "/snapshots/t1/fork", {"name": "sa-restart-fork"})]
        for r in tries:
            assert r.status == 403 and r.json["error"]["details"]["field"] == "policy.filesystem.binds", r
            assert "value-only-root-may-read" not in r.body.decode(errors="replace")
        assert "sa-restart-fork" not in sandboxes_of(server)
        assert sandboxes_of(server)[name]["status"] == "running"
    finally:
        assert a.delete(p).status == 200


@attack("serve-request-smuggling", "a request whose body is framed twice — Content-Length with Transfer-Encoding "
        "(chunked, and an unknown coding), two Content-Lengths — hiding a second request (a create of "
        "sa-smuggled) where a proxy in front that reads the other framing would see only body",
        "a request with more than one framing of its body is refused before its body is read (400 naming "
        "Content-Length) and the connection closed with the answer: the hidden request is never parsed")
def test_a_body_framed_twice_is_refused(server):
    hidden = b'POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n' \
             b'{"name":"sa-smuggled"}'
    head = b"POST /v1/sandboxes/sa-nosuch/stop HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    sends = [head + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % (5 + len(hidden)) + hidden,
             head + b"Transfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + hidden,
             head + b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(hidden) + hidden]
    for data in sends:
        out = raw(server, data)
        assert out.count(b"HTTP/1.1 ") == 1 and out.startswith(b"HTTP/1.1 400 "), out[:400]
        assert b"Content-Length" in out and b"Connection: close" in out, out[:400]
    assert "sa-smuggled" not in sandboxes_of(server)


@attack("serve-tcp-token", "TCP requests without a token, with a wrong one of the right length, a token file "
        "others can read, --listen without --token-file, on 0.0.0.0 and on a name",
        "TCP only on a loopback address and only with --token-file (a 0600 file of the server's user, 16+ bytes), "
        "refused at start with exit 125 naming the flag; every request's bearer token compared in constant "
        "time: 401")
def test_tcp_needs_the_token_and_loopback(server, scratch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tok = scratch / "token"
    tok.write_text("t0ken-of-the-test-0123456789\n")
    if server.uid:
        os.chown(tok, NOBODY, NOBODY)
        os.chown(scratch, NOBODY, NOBODY)
    tok.chmod(0o644)
    bad_starts = [
        ((f"127.0.0.1:{port}", None), "--token-file"),
        ((f"0.0.0.0:{port}", tok), "loopback"),
        ((f"localhost:{port}", tok), "not an address"),
        ((f"127.0.0.1:{port}", tok), "chmod 600"),
    ]
    for (listen, token), words in bad_starts:
        s2 = Server(server.bindir, server.mode, scratch, "--listen", listen,
                    *(["--token-file", str(token)] if token else []))
        s2.sock = scratch / "tcp.sock"
        r = subprocess.run(s2.cmd(), env=s2.env(), capture_output=True, text=True, timeout=30)
        assert r.returncode == 125 and words in r.stderr, (listen, r)
        assert not (scratch / "tcp.sock").exists()
    tok.chmod(0o600)
    s2 = Server(server.bindir, server.mode, scratch, "--listen", f"127.0.0.1:{port}", "--token-file", str(tok))
    s2.sock = scratch / "tcp.sock"
    s2.start()
    try:
        for token in (None, "t0ken-of-the-test-0123456788", "t0ken"):
            c = Client(s2, s2.uid, tcp=("127.0.0.1", port), token=token)
            r = c.get("/v1/sandboxes")
            assert r.status == 401 and r.json["error"]["code"] == "unauthorized", r
        c = Client(s2, s2.uid, tcp=("127.0.0.1", port), token="t0ken-of-the-test-0123456789")
        assert c.get("/v1/health").json == {"status": "ok"}
        assert c.get("/v1/sandboxes").status == 200
    finally:
        s2.stop()


@attack("serve-bad-input", "malformed JSON, a misspelt field (timout_ms), a wrong type, a JSON body without its "
        "content type, a body over --max-body by its length and chunked, sandbox names with '..', '%2f' and "
        "control bytes, a %00 that would cut a name or path short, an unknown sandbox, exec and files on a "
        "stopped sandbox",
        "every body held to its route's fields before anything runs (unknown_field names it: a command is never "
        "run without the timeout it was given); Content-Length over --max-body refused before the body is read, "
        "a chunked one cut off; route parameters checked as the state directory takes names, a URL escaping a "
        "NUL refused before it is decoded; 4xx as {error: {code, message, details}}; the server keeps serving")
def test_bad_input_is_refused_clearly(server):
    c = server.client()
    name = c.create(name=f"sa-bad-{server.mode}")
    base = f"/v1/sandboxes/{name}"
    r = c.post(base + "/execs", b'{"argv": ["true"', ctype="application/json")
    assert r.status == 400 and r.json["error"]["code"] == "invalid_json" and "column" in r.json["error"]["message"]
    r = c.post(base + "/execs", {"argv": ["sleep", "100"], "timout_ms": 1000})
    assert r.status == 400 and r.json["error"] == {"code": "unknown_field", "details": {"field": "timout_ms"},
                                                   "message": "unknown field 'timout_ms' in the body"}, r
    assert c.get(base + "/execs").json["execs"] == [], "a refused body started a command"
    r = c.post(base + "/execs", {"argv": "true"})
    assert r.status == 400 and r.json["error"]["details"]["field"] == "argv", r
    r = c.post(base + "/execs", b'{"argv": ["true"]}', ctype="text/plain")
    assert r.status == 415, r
    r = c.post("/v1/sandboxes", {"name": "../../etc"})
    assert r.status == 400 and r.json["error"]["details"]["field"] == "name", r
    # answered from the headers: the 2 MiB are never sent, let alone held
    ans = raw(server, f"POST {base}/execs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {2 << 20}\r\n\r\n{{\"argv\": [".encode())
    assert ans.startswith(b"HTTP/1.1 413"), ans
    err = json.loads(ans.split(b"\r\n\r\n", 1)[1])["error"]
    assert err["details"] == {"limit": "max_body", "value": 1 << 20} and "--max-body" in err["message"], err
    # chunked, no length to refuse it by: cut off, no command started
    s = connect_as(server.sock, server.uid)
    s.settimeout(10)
    s.sendall(f"POST {base}/execs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              "Transfer-Encoding: chunked\r\n\r\n".encode())
    try:
        for _ in range(40):
            s.sendall(b"10000\r\n" + b" " * 0x10000 + b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.close()
    assert c.get(base + "/execs").json["execs"] == []
    for path in ("/v1/sandboxes/..", "/v1/sandboxes/.hidden", "/v1/sandboxes/a%2f..%2f..%2fetc",
                 "/v1/sandboxes/%2e%2e/files?path=/etc/passwd", "/v1/sandboxes/a%0ab", "/v1/sandboxes/" + "n" * 100,
                 "/v1/sandboxes/" + name + "/execs/../../x", "/v2/sandboxes", "/v1/sandboxes/" + name + "/nothing"):
        r = c.get(path)
        assert r.status in (400, 404, 405), (path, r)
        assert r.json["error"]["code"] in ("bad_request", "not_found", "method_not_allowed"), (path, r)
    assert c.request("PATCH", base).status == 405
    # %00 would end the decoded C string: NAME%00x would reach NAME, keep%00.bak the file keep
    ws = c.get(base).json["workspace"]
    assert c.put(f"{base}/files?path={ws}/keep", b"kept", ctype="application/octet-stream").status == 200
    for r in (c.get(base + "%00x"), c.delete(f"{base}/files?path={ws}/keep%00.bak"),
              c.get(f"{base}%00x/execs")):
        assert r.status == 400 and r.json["error"]["details"] == {"field": "url"}, r
        assert "%00" in r.json["error"]["message"], r
    assert c.get(f"{base}/files?path={ws}/keep").body == b"kept"
    assert c.get(base + "/execs").json["execs"] == []
    for r in (c.get("/v1/sandboxes/sa-nosuch"), c.post("/v1/sandboxes/sa-nosuch/execs", {"argv": ["true"]}),
              c.get("/v1/sandboxes/sa-nosuch/files?path=/tmp"), c.delete("/v1/sandboxes/sa-nosuch")):
        assert r.status == 404 and r.json["error"]["code"] == "not_found", r
    assert c.post(base + "/stop").json["status"] == "stopped"
    for r in (c.post(base + "/execs", {"argv": ["true"], "wait": True}), c.get(base + "/files?path=/tmp")):
        assert r.status == 409 and r.json["error"]["code"] == "not_running", r
        assert "POST .../start" in r.json["error"]["message"]
    assert c.get("/v1/health").json == {"status": "ok"}
    assert c.delete(base).status == 200


@attack("serve-files-links", "links the sandbox plants in its workspace to a host directory and a host file that "
        "are not mounted inside, and '..' past the root: read, write, list, stat, tar and remove through them "
        "over the files API",
        "each operation is brig_sandbox_file: run inside by a child of the sandbox's pid 1, as the sandbox user, "
        "with its mounts; paths resolve in the sandbox's view (the host's are not there: 404), a write replaces "
        "a link at its name; the host checks its directory and file unchanged")
def test_files_api_never_resolves_on_the_host(server, scratch):
    c = server.client()
    victim = scratch / "victim"
    victim.mkdir()
    (victim / "secret").write_text("host secret\n")
    name = c.create(name=f"sa-links-{server.mode}")
    ws = c.get(f"/v1/sandboxes/{name}").json["workspace"]
    res = c.run(name, f"ln -s {victim} dirlink && ln -s {victim}/secret filelink", cwd=ws)
    assert res["result"]["exit_code"] == 0, res
    base = f"/v1/sandboxes/{name}/files"
    for r in (c.get(f"{base}?path={ws}/filelink"), c.get(f"{base}?path={ws}/dirlink/secret"),
              c.get(f"{base}/list?path={ws}/dirlink"), c.get(f"{base}/tar?path={ws}/dirlink"),
              c.put(f"{base}?path={ws}/dirlink/planted", b"x", ctype="application/octet-stream"),
              c.delete(f"{base}?path={ws}/dirlink/secret"),
              c.get(f"{base}?path={ws}/../../../../{victim}/secret")):
        assert r.status in (400, 403, 404), r
        assert b"host secret" not in r.body
    assert c.get(f"{base}/stat?path={ws}/filelink").json["type"] == "symlink"
    # a write to the link's name replaces the link, inside
    assert c.put(f"{base}?path={ws}/filelink", b"sandbox bytes", ctype="application/octet-stream").status == 200
    assert (victim / "secret").read_text() == "host secret\n" and sorted(os.listdir(victim)) == ["secret"]
    assert c.delete(f"/v1/sandboxes/{name}").status == 200


@attack("serve-slow-and-gone-clients", "a client that sends half its headers and waits (slowloris), one that "
        "closes an output stream mid-way and one a follow of the audit stream, while others are served",
        "libmicrohttpd drops a connection idle for --client-timeout; a stream's reader notices the hang-up "
        "(POLLRDHUP) between waits and ends, the command running on; the server's descriptors and threads "
        "return to what they were")
def test_slow_and_vanishing_clients_leak_nothing(server):
    c = server.client()
    name = c.create(name=f"sa-slow-{server.mode}")
    c.run(name, ["true"])
    fds0, threads0 = server.fds(), server.threads()
    slow = connect_as(server.sock, server.uid)
    slow.settimeout(15)
    slow.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    assert c.get("/v1/health").status == 200  # served meanwhile
    assert slow.recv(100) == b"", "a slow client was not dropped"
    assert time.monotonic() - t0 < 12
    slow.close()
    x = c.post(f"/v1/sandboxes/{name}/execs", {"cmd": "while :; do echo tick; sleep 0.05; done"}).json["id"]
    conn, resp = c.stream("GET", f"/v1/sandboxes/{name}/execs/{x}/output")
    assert json.loads(resp.readline())["type"] == "stdout"
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    conn, resp = c.stream("GET", f"/v1/sandboxes/{name}/events")
    assert json.loads(resp.readline())["event"] == "start"
    conn.close()
    assert c.get(f"/v1/sandboxes/{name}/execs/{x}").json["state"] == "running"
    assert c.delete(f"/v1/sandboxes/{name}/execs/{x}").status == 200
    deadline = time.monotonic() + 10
    while (server.fds() > fds0 or server.threads() > threads0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.fds() <= fds0 and server.threads() <= threads0, \
        ("descriptors or threads left by gone clients", (fds0, threads0), os.listdir(f"/proc/{server.proc.pid}/fd"))
    assert c.delete(f"/v1/sandboxes/{name}").status == 200


@attack("serve-limits-as-data", "more sandboxes than --max-sandboxes, more commands than --max-execs, output past "
        "--max-output, a command refused its egress and one past its pids limit",
        "operator limits answer 429 limit_reached naming the limit; what a command met inside is data in its "
        "result (reason, summary, refusals, output_dropped), never a 5xx, and the command is never blocked on "
        "output no one reads")
def test_limits_are_answers_not_failures(server):
    c = server.client()
    names = [c.create(name=f"sa-lim-{i}") for i in range(3)]
    r = c.post("/v1/sandboxes", {"name": "sa-lim-3"})
    assert r.status == 429 and r.json["error"]["details"] == {"limit": "max_sandboxes", "value": 3}, r
    xs = [c.post(f"/v1/sandboxes/{names[0]}/execs", {"argv": ["sleep", "60"]}).json["id"] for _ in range(4)]
    r = c.post(f"/v1/sandboxes/{names[1]}/execs", {"argv": ["true"]})
    assert r.status == 429 and r.json["error"]["details"]["limit"] == "max_execs", r
    for x in xs:
        c.delete(f"/v1/sandboxes/{names[0]}/execs/{x}")
    res = c.run(names[1], "head -c 3000000 /dev/zero; echo done >&2")
    assert res["result"]["exit_code"] == 0 and res["output_dropped"] > 0, {k: v for k, v in res.items() if "std" not in k}
    assert len(res["stdout_b64"]) <= 4 * ((1 << 20) + 2) // 3 + 4
    # a file past --max-body is not staged in the server's memory to be sent
    c.run(names[1], "head -c 2000000 /dev/zero > /tmp/big")
    for path in ("/v1/sandboxes/{}/files?path=/tmp/big", "/v1/sandboxes/{}/files/tar?path=/tmp"):
        r = c.get(path.format(names[1]))
        assert r.status == 413 and r.json["error"]["code"] == "payload_too_large", r
    res = c.run(names[1], "curl -sS -m 5 http://blocked.example/ ; echo rc=$?")
    assert res["result"]["exit_code"] == 0 and res["result"]["refusals"], res["result"]
    for n in names:
        c.delete(f"/v1/sandboxes/{n}")
    assert not [n for n in sandboxes_of(server) if n.startswith("sa-lim")]


class Upstream:
    """An HTTP server on the host's 127.0.0.1 that counts what reaches it."""

    def __init__(self):
        self.paths = []
        up = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                up.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.end_headers()
                self.wfile.write(b"ok\n")

            def log_message(self, *a):
                pass
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@attack("serve-net-rule-live", "a command in a running proxy sandbox fetches a host the policy does not allow; the "
        "API adds an allow rule, then a deny rule, then removes the allow; the command fetches again after each",
        "brig_sandbox_net_rule: the supervisor changes the rules its proxy judges every new connection by; deny "
        "wins; each change a net_rule audit event; the refusal is data in the exec result; the host's upstream "
        "counts exactly the requests the rules in force let through")
def test_live_network_rules_decide_what_reaches_the_host(server):
    up = Upstream()
    try:
        c = server.client()
        name = c.create(name=f"sa-net-{server.mode}", policy={"network": {
            "mode": "proxy", "resolve": ["up.test:127.0.0.1"], "allow_cidrs": ["127.0.0.1/32"]}})
        base = f"/v1/sandboxes/{name}"
        fetch = lambda tag: c.run(name, f"curl -sS -m 10 http://up.test:{up.port}/{tag}; echo; echo rc=$?")
        res = fetch("before")
        assert up.paths == [] and res["result"]["refusals"], res
        assert any("up.test" in line for line in res["result"]["refusals"]), res["result"]["refusals"]
        rules = c.post(base + "/network/rules", {"action": "allow", "host": f"up.test:{up.port}"}).json
        assert rules["allow_hosts"] == [f"up.test:{up.port}"], rules
        res = fetch("allowed")
        assert up.paths == ["/allowed"] and "ok" in res["stdout"], (up.paths, res["stdout"])
        c.post(base + "/network/rules", {"action": "deny", "host": "up.test"})
        fetch("denied")
        c.delete(base + "/network/rules", {"action": "deny", "host": "up.test"})
        c.delete(base + "/network/rules", {"action": "allow", "host": f"up.test:{up.port}"})
        fetch("removed")
        assert up.paths == ["/allowed"], up.paths
        r = c.delete(base + "/network/rules", {"action": "allow", "host": "never.test"})
        assert r.status == 404, r
        r = c.post(base + "/network/rules", {"action": "allow", "host": "*"})
        assert r.status == 400 and r.json["error"]["details"]["field"] == "host", r
        none = c.create(name=f"sa-net-off-{server.mode}")
        r = c.post(f"/v1/sandboxes/{none}/network/rules", {"action": "allow", "host": "up.test"})
        assert r.status == 409 and "proxy or filtered" in r.json["error"]["message"], r
        for n in (name, none):
            assert c.delete(f"/v1/sandboxes/{n}").status == 200
    finally:
        up.close()


@attack("serve-socket-from-inside", "a command in a sandbox of the server's connects to the server's own socket "
        "(its directory bound in read-only so the path is there) and asks it for a new sandbox with the host's "
        "network — as the server's own uid when rootless",
        "the unix socket guard refuses a connect(2) to a pathname socket whose listener is outside the sandbox "
        "(EACCES); the host checks the server made no sandbox")
def test_a_sandbox_cannot_drive_the_server(server):
    c = server.client()
    name = c.create(name=f"sa-inside-{server.mode}", policy={"filesystem": {"binds": [
        {"source": str(server.dir), "destination": "/mnt/serve", "readonly": True}]}})
    res = c.run(name, "curl -sS -m 5 --unix-socket /mnt/serve/serve.sock -H 'Content-Type: application/json' "
                      "-d '{\"name\": \"sa-made-inside\", \"policy\": {\"network\": {\"mode\": \"host\"}}}' "
                      "http://x/v1/sandboxes; echo rc=$?")
    assert "rc=0" not in res["stdout"], res
    assert "sa-made-inside" not in sandboxes_of(server)
    assert any("serve.sock" in line for line in res["result"]["refusals"]), res["result"]
    assert c.delete(f"/v1/sandboxes/{name}").status == 200


@attack("serve-name-takeover", "a caller asks for a sandbox by the name of one that exists: one the server's user "
        "made with brig create, and one another caller made through the server (whose workspace is the "
        "server's); then, as another uid, touches the first",
        "the name's check, the owner's record and the create are one step under a lock; a taken name is 409 and "
        "neither the record nor the workspace of what exists is touched: the host checks the sandbox's owner, "
        "its workspace and a file in it unchanged")
def test_a_taken_name_is_never_reassigned(server, scratch):
    c = server.client()
    ws = scratch / "cli-ws"
    ws.mkdir()
    if server.uid:
        os.chown(ws, NOBODY, NOBODY)
    cli = f"sa-cli-{server.mode}"
    r = server.brig("create", cli, "--workspace", str(ws))
    assert r.returncode == 0, r
    try:
        made = c.create(name=f"sa-made-{server.mode}")
        own_ws = pathlib.Path(c.get(f"/v1/sandboxes/{made}").json["workspace"])
        c.run(made, "echo kept > kept.txt")
        callers = [c] + ([server.client(uid=NOBODY)] if server.mode == "root" else [])
        for caller in callers:
            for name in (cli, made):
                r = caller.post("/v1/sandboxes", {"name": name})
                assert r.status in (404, 409), (caller.uid, name, r)
        assert (own_ws / "kept.txt").read_text() == "kept\n", "a refused create touched the workspace"
        assert c.get(f"/v1/sandboxes/{cli}").json["owner_uid"] == server.uid
        assert c.get(f"/v1/sandboxes/{made}").json["owner_uid"] == server.uid
        if server.mode == "root":
            other = server.client(uid=NOBODY)
            assert other.get(f"/v1/sandboxes/{cli}").status == 404
            assert other.post(f"/v1/sandboxes/{cli}/execs", {"argv": ["true"], "wait": True}).status == 404
        assert c.delete(f"/v1/sandboxes/{made}").status == 200
    finally:
        server.brig("rm", cli)
