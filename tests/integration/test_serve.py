"""brig serve (docs/serve.md): every route of docs/api/openapi.json walked
against a live server, root and rootless, each JSON answer checked against
the document's schema; the server's lifetime (restart, SIGTERM, limits)."""
import base64
import io
import json
import os
import pathlib
import signal
import subprocess
import tarfile
import threading
import time

import pytest

from serve_helpers import NOBODY, Server, brig_as, module_server, routes, sandboxes_of, serve_dir

# One worker for every module that runs brig serve (make check: --dist loadgroup):
# a root server lists every sandbox of root, so tests in two workers saw
# each other's sandboxes come and go.
pytestmark = pytest.mark.xdist_group("serve")

IS_ROOT = os.geteuid() == 0


mode, server = module_server("sv-", "--max-output", "1M")


def workspace(server, name):
    ws = server.dir / name
    ws.mkdir()
    if server.uid:
        os.chown(ws, NOBODY, NOBODY)
    return ws


def test_every_route_of_the_document(server):
    """Each (method, path) of openapi.json once at least, against the live
    server: statuses and bodies as the document says; what the API did is
    checked on the host (files committed to the workspace, the sandbox's
    supervisor, its state directory gone after the delete)."""
    used = set()
    c = server.client(used=used)
    mode = server.mode
    assert c.get("/v1/health").json == {"status": "ok"}
    assert c.get("/v1/version").json["api"] == "1"
    doc = c.get("/v1/doctor").json
    assert "ok" in doc and isinstance(doc["doctor"], dict)

    ws = workspace(server, "ws-routes")
    (ws / "host.txt").write_text("from the host\n")
    a = f"sv-{mode}-a"
    r = c.post("/v1/sandboxes", {"name": a, "workspace": str(ws), "workspace_mode": "overlay",
                                 "policy": {"network": {"mode": "proxy"}, "limits": {"pids": 256}}})
    assert r.status == 201, r
    assert r.json["status"] == "running" and r.json["owner_uid"] == server.uid
    assert r.json["policy"]["limits"]["pids"] == 256
    assert a in [s["name"] for s in c.get("/v1/sandboxes").json["sandboxes"]]
    assert c.get(f"/v1/sandboxes/{a}").json["workspace_mode"] == "overlay"

    # exec: waited for, streamed, in the background with stdin, a tty, a signal
    res = c.run(a, ["sh", "-c", "cat host.txt; echo oops >&2; exit 3"], cwd=str(ws))
    assert (res["stdout"], res["stderr"], res["result"]["exit_code"]) == ("from the host\n", "oops\n", 3), res
    evs = c.lines("POST", f"/v1/sandboxes/{a}/execs", {"cmd": "echo one; sleep 0.1; echo two", "stream": True})
    assert [e["type"] for e in evs] == ["start", "stdout", "stdout", "exit"], evs
    assert "".join(e["data"] for e in evs if e["type"] == "stdout") == "one\ntwo\n"

    x = c.post(f"/v1/sandboxes/{a}/execs", {"argv": ["cat"], "stdin": True})
    assert x.status == 201 and x.json["state"] == "running", x
    xid = x.json["id"]
    assert xid in [e["id"] for e in c.get(f"/v1/sandboxes/{a}/execs").json["execs"]]
    assert c.get(f"/v1/sandboxes/{a}/execs/{xid}").json["state"] == "running"
    w = c.post(f"/v1/sandboxes/{a}/execs/{xid}/stdin", {"data": "typed in\n"})
    assert w.json == {"written": 9, "eof": False}, w
    w = c.post(f"/v1/sandboxes/{a}/execs/{xid}/stdin", {"data_b64": "AAE=", "eof": True})
    assert w.json["eof"], w
    done = c.post(f"/v1/sandboxes/{a}/execs/{xid}/wait", {"timeout_ms": 10000}).json
    assert done["state"] == "exited" and done["result"]["exit_code"] == 0, done
    out = c.lines("GET", f"/v1/sandboxes/{a}/execs/{xid}/output?follow=false")
    assert out[-1]["type"] == "exit", out
    assert b"".join(base64.b64decode(e["data_b64"]) for e in out if e["type"] == "stdout") == b"typed in\n\x00\x01"
    assert "".join(e["data"] for e in out[:-1]).startswith("typed in\n\ufffd"), out  # NUL as U+FFFD in text
    # a reader that comes back with the count it has gets the rest only
    rest = c.lines("GET", f"/v1/sandboxes/{a}/execs/{xid}/output?offset={len(out) - 1}")
    assert [e["type"] for e in rest] == ["exit"], rest
    assert c.delete(f"/v1/sandboxes/{a}/execs/{xid}").json == {"removed": xid}
    assert c.get(f"/v1/sandboxes/{a}/execs/{xid}").status == 404

    t = c.post(f"/v1/sandboxes/{a}/execs", {"cmd": "read x; stty size; echo got $x", "tty": True,
                                            "rows": 20, "cols": 70})
    tid = t.json["id"]
    assert c.post(f"/v1/sandboxes/{a}/execs/{tid}/resize", {"rows": 33, "cols": 111}).status == 200
    c.post(f"/v1/sandboxes/{a}/execs/{tid}/stdin", {"data": "yes\n"})
    assert c.post(f"/v1/sandboxes/{a}/execs/{tid}/wait", {}).json["state"] == "exited"
    tty_out = "".join(e.get("data", "") for e in c.lines("GET", f"/v1/sandboxes/{a}/execs/{tid}/output"))
    assert "33 111" in tty_out and "got yes" in tty_out, tty_out

    s = c.post(f"/v1/sandboxes/{a}/execs", {"argv": ["sleep", "60"]}).json["id"]
    assert c.post(f"/v1/sandboxes/{a}/execs/{s}/signal", {"signal": "TERM"}).status == 200
    res = c.post(f"/v1/sandboxes/{a}/execs/{s}/wait", {"timeout_ms": 10000}).json["result"]
    assert (res["reason"], res["signal"]) == ("signaled", 15), res

    # files, inside, as the sandbox sees them; the overlay keeps them off the host
    f = str(ws / "from-api.txt")
    assert c.put(f"/v1/sandboxes/{a}/files?path={f}&mode=0600", b"api bytes\n",
                 ctype="application/octet-stream").json == {"path": f, "bytes": 10}
    assert c.get(f"/v1/sandboxes/{a}/files?path={f}").body == b"api bytes\n"
    st = c.get(f"/v1/sandboxes/{a}/files/stat?path={f}").json
    assert (st["type"], st["size"], st["mode"]) == ("file", 10, 0o600), st
    d = str(ws / "sub")
    assert c.post(f"/v1/sandboxes/{a}/files/mkdir?path={d}").status == 200
    listing = c.get(f"/v1/sandboxes/{a}/files/list?path={ws}")
    assert listing.status == 200, listing
    names = [e["name"] for e in listing.json["entries"]]
    assert {"host.txt", "from-api.txt", "sub"} <= set(names), names
    assert c.delete(f"/v1/sandboxes/{a}/files?path={d}").status == 200
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = b"in a tar\n"
        info = tarfile.TarInfo("untarred.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    assert c.put(f"/v1/sandboxes/{a}/files/tar?path=/tmp", buf.getvalue(), ctype="application/x-tar").status == 200
    tar = c.get(f"/v1/sandboxes/{a}/files/tar?path=/tmp")
    assert tar.ctype == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(tar.body)) as tf:
        assert tf.extractfile("./untarred.txt").read() == b"in a tar\n"
    assert not (ws / "from-api.txt").exists(), "an overlay sandbox wrote through to the host before the commit"
    changes = c.get(f"/v1/sandboxes/{a}/diff?path=from-api.txt").json["changes"]
    assert [ch["path"] for ch in changes] == ["from-api.txt"], changes
    applied = c.post(f"/v1/sandboxes/{a}/commit", {"paths": ["from-api.txt"]}).json["changes"]
    assert [ch["path"] for ch in applied] == ["from-api.txt"], applied
    assert (ws / "from-api.txt").read_bytes() == b"api bytes\n"

    # lifecycle
    p = c.post(f"/v1/sandboxes/{a}/pause")
    if p.status == 409:
        # rootless without a delegated cgroup v2 group: no freezer, and it says so
        assert mode == "rootless" and "freezer" in p.json["error"]["message"], p
        assert c.post(f"/v1/sandboxes/{a}/resume").status == 409
    else:
        assert p.json["status"] == "paused", p
        assert c.post(f"/v1/sandboxes/{a}/resume").json["status"] == "running"
    c.put(f"/v1/sandboxes/{a}/files?path={ws}/discarded.txt", b"x", ctype="application/octet-stream")
    assert c.post(f"/v1/sandboxes/{a}/stop").json["status"] == "stopped"
    assert c.post(f"/v1/sandboxes/{a}/reset").status == 200
    assert c.post(f"/v1/sandboxes/{a}/start").json["status"] == "running"
    assert c.get(f"/v1/sandboxes/{a}/files/stat?path={ws}/discarded.txt").status == 404

    # snapshots and a fork
    c.put(f"/v1/sandboxes/{a}/files?path=/tmp/state", b"v1", ctype="application/octet-stream")
    assert c.post(f"/v1/sandboxes/{a}/snapshots", {"tag": "t1"}).status == 201
    assert [s["tag"] for s in c.get(f"/v1/sandboxes/{a}/snapshots").json["snapshots"]] == ["t1"]
    c.put(f"/v1/sandboxes/{a}/files?path=/tmp/state", b"v2", ctype="application/octet-stream")
    assert c.post(f"/v1/sandboxes/{a}/snapshots/t1/restore").json["status"] == "running"
    assert c.get(f"/v1/sandboxes/{a}/files?path=/tmp/state").body == b"v1"
    b = f"sv-{mode}-b"
    assert c.post(f"/v1/sandboxes/{a}/snapshots/t1/fork", {"name": b}).json["name"] == b
    assert c.get(f"/v1/sandboxes/{b}/files?path=/tmp/state").body == b"v1"
    assert c.delete(f"/v1/sandboxes/{a}/snapshots/t1").json == {"removed": "t1"}

    # network rules, live, each one an audit event
    net = c.get(f"/v1/sandboxes/{a}/network").json
    assert (net["mode"], net["allow_hosts"]) == ("proxy", []), net
    net = c.post(f"/v1/sandboxes/{a}/network/rules", {"action": "allow", "host": "pypi.org"}).json
    assert net["allow_hosts"] == ["pypi.org"], net
    net = c.post(f"/v1/sandboxes/{a}/network/rules", {"action": "deny", "host": "*.evil.example"}).json
    assert net["deny_hosts"] == ["*.evil.example"], net
    assert c.delete(f"/v1/sandboxes/{a}/network/rules", {"action": "allow", "host": "pypi.org"}).json[
        "allow_hosts"] == []
    # the supervisor's audit writer is a thread of its own: the lines land soon after
    deadline = time.monotonic() + 10
    while True:
        evs = c.lines("GET", f"/v1/sandboxes/{a}/events?follow=false")
        rules = [(e["change"], e["action"], e["host"]) for e in evs if e["event"] == "net_rule"]
        if len(rules) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert rules == [("add", "allow", "pypi.org"), ("add", "deny", "*.evil.example"),
                     ("remove", "allow", "pypi.org")], rules

    # warm pools: one the server's user started, and one run in a member of it
    pws = workspace(server, "ws-pool")
    pname = f"sv-{mode}-pool"
    made = server.brig("pool", "--size", "1", "--name", pname, "--workspace", str(pws))
    assert made.returncode == 0, made.stderr
    try:
        deadline = time.monotonic() + 30
        while not any(pname in p["names"] and p["ready"] for p in c.get("/v1/pools").json["pools"]):
            assert time.monotonic() < deadline, c.get("/v1/pools").json
            time.sleep(0.05)
        res = c.post(f"/v1/pools/{pname}/execs", {"cmd": "echo pooled > out.txt", "cwd": str(pws), "wait": True}).json
        assert res["result"]["exit_code"] == 0 and res["sandbox"].startswith("pool-"), res
        assert (pws / "out.txt").read_text() == "pooled\n"
    finally:
        assert server.brig("pool", "--stop", "--name", pname).returncode == 0

    # remove: every trace on the host
    for n in (a, b):
        sup = c.get(f"/v1/sandboxes/{n}").json["supervisor_pid"]
        assert c.delete(f"/v1/sandboxes/{n}").json == {"removed": n}
        assert c.get(f"/v1/sandboxes/{n}").status == 404
        assert not os.path.exists(f"/proc/{sup}") or open(f"/proc/{sup}/stat").read().split()[2] == "Z"
    assert a not in sandboxes_of(server) and b not in sandboxes_of(server)

    missing = routes() - used
    assert not missing, f"routes of openapi.json this walk did not reach: {sorted(missing)}"


def test_default_workspace_is_the_servers_and_goes_with_the_sandbox(server):
    c = server.client()
    name = c.create(name=f"sv-{server.mode}-ws")
    ws = pathlib.Path(c.get(f"/v1/sandboxes/{name}").json["workspace"])
    assert ws.is_dir() and ws.parent.name == "workspaces", ws
    assert oct(ws.stat().st_mode & 0o777) == "0o700"
    c.run(name, "echo made > made.txt")
    assert (ws / "made.txt").read_text() == "made\n"
    c.delete(f"/v1/sandboxes/{name}")
    assert not ws.exists(), "the server's own workspace outlived its sandbox"


def test_restart_drain_idle_and_remove_on_exit(bindir, mode):
    """SIGTERM finishes a request in flight and leaves the sandboxes running
    under their supervisors; a new server finds them with their owners;
    --idle-timeout stops one no request touched; --remove-on-exit removes
    what that server created, and only that."""
    if not IS_ROOT:
        pytest.skip("BRIG SERVE NOT TESTED: the server runs as root and as nobody, which needs root")
    with serve_dir(mode) as d:
        try:
            s1 = Server(bindir, mode, d).start()
            c = s1.client()
            kept = c.create(name=f"sv-{mode}-kept")
            sup = c.get(f"/v1/sandboxes/{kept}").json["supervisor_pid"]
            x = c.post(f"/v1/sandboxes/{kept}/execs", {"argv": ["sleep", "30"]}).json["id"]
            # the server's descriptors once the connections before are gone:
            # then one more is the wait's connection, accepted (in flight)
            seen = []
            while len(seen) < 5 or len(set(seen[-5:])) > 1:
                seen.append(s1.fds())
                time.sleep(0.02)
            answer = {}
            waiter = threading.Thread(target=lambda: answer.update(
                r=c.post(f"/v1/sandboxes/{kept}/execs/{x}/wait", {"timeout_ms": 30000})))
            waiter.start()
            deadline = time.monotonic() + 10
            while s1.fds() <= seen[-1] and time.monotonic() < deadline:
                time.sleep(0.01)
            s1.proc.send_signal(signal.SIGTERM)
            assert s1.proc.wait(timeout=20) == 0, s1.log.read_text()
            waiter.join(timeout=20)
            assert answer["r"].status == 200 and answer["r"].json["state"] == "running", answer
            assert "finishing what 1 connection asked" in s1.log.read_text()
            assert not s1.sock.exists()
            # on the host: the sandbox runs on, under the same supervisor
            row = {r["name"]: r for r in json.loads(s1.brig("ls", "--json").stdout)}[kept]
            assert (row["status"], row["supervisor_pid"]) == ("running", sup), row
            s1.logf.close()

            # a warm pool of the same user's: its sandboxes wait for a run, they are not idle
            pool = f"sv-{mode}-pool"
            assert s1.brig("pool", "--size", "1", "--name", pool).returncode == 0
            pooled = [r["name"] for r in json.loads(s1.brig("ls", "--json").stdout) if "pool" in r]
            assert len(pooled) == 1, pooled
            s2 = Server(bindir, mode, d, "--idle-timeout", "1s", "--remove-on-exit").start()
            c2 = s2.client()
            again = c2.get(f"/v1/sandboxes/{kept}").json
            assert (again["status"], again["owner_uid"], again["supervisor_pid"]) == ("running", s2.uid, sup), again
            made = c2.create(name=f"sv-{mode}-made")
            # idle: neither is touched now; the server stops them on its own (seen on the host)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                rows = {r["name"]: r["status"] for r in json.loads(s1.brig("ls", "--json").stdout)}
                if rows.get(kept) == "stopped" and rows.get(made) == "stopped":
                    break
                time.sleep(0.1)
            assert rows.get(kept) == "stopped" and rows.get(made) == "stopped", rows
            assert "stopped after --idle-timeout" in s2.log.read_text()
            time.sleep(1.5)  # another sweep past the timeout
            rows = {r["name"]: r["status"] for r in json.loads(s1.brig("ls", "--json").stdout)}
            assert rows.get(pooled[0]) == "running", rows
            assert pooled[0] not in s2.log.read_text()
            assert s1.brig("pool", "--stop", "--name", pool).returncode == 0
            assert s2.stop() == 0
            rows = {r["name"] for r in json.loads(s1.brig("ls", "--json").stdout)}
            assert made not in rows, "--remove-on-exit left the sandbox it created"
            assert kept in rows, "--remove-on-exit removed a sandbox another server created"
            assert s1.brig("rm", kept).returncode == 0
        finally:
            for srv in ("s1", "s2"):
                if srv in locals() and locals()[srv].proc.poll() is None:
                    locals()[srv].proc.kill()
            for n in (f"sv-{mode}-kept", f"sv-{mode}-made"):
                brig_as(bindir, mode, "rm", n, d=d)
            brig_as(bindir, mode, "pool", "--stop", "--all", d=d)
