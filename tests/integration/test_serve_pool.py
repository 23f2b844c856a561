"""brig serve's warm pools (docs/serve.md, POST /v1/pools/{name}/execs):
the one run of a ready member of a pool started with `brig pool --name`,
root and rootless. Each run gets a member of its own, as the pool made it
(its policy: a read-only workspace here), leaves nothing to the next, and
its member's state goes while the server lives on; another user of a root
server neither sees the pool nor uses up its members. Every check on the
host."""
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import pytest

import json
import socket

from proc_helpers import pids_with, wait_gone, wait_until
from serve_helpers import (NOBODY, Server, brig_as_cmd, brig_as_env, connect_as, module_server, sandboxes_of,
                           serve_dir)

# One worker for every module that runs brig serve (make check: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("serve")

OTHER = 1  # daemon: a second real uid

mode, server = module_server("sp-", "--socket-mode", "0666")


def attack(ident, technique, control):
    return pytest.mark.escape(ident, technique, control)


def workspace(server, name):
    ws = server.dir / name
    ws.mkdir()
    (ws / "host.txt").write_text("from the host\n")
    if server.uid:
        os.chown(ws, NOBODY, NOBODY)
    return ws


def start_pool(server, name, ws, *opts, size=2):
    r = server.brig("pool", "--size", str(size), "--name", name, "--workspace", str(ws), *opts)
    assert r.returncode == 0, r.stderr
    c = server.client()
    ready = lambda: [p for p in c.get("/v1/pools").json["pools"] if name in p["names"] and p["ready"] >= size]
    pools = wait_until(ready, 30)
    assert pools, f"pool {name}: not {size} ready in 30 s: {c.get('/v1/pools').json}"
    return pools[0]


def stop_pool(server, name):
    r = server.brig("pool", "--stop", "--name", name)
    assert r.returncode == 0, r.stderr


def gone_within(server, member, seconds=15):
    return wait_until(lambda: member not in sandboxes_of(server), seconds, step=0.1)


def test_each_run_is_a_member_of_its_own_as_the_pool_made_it(server):
    c = server.client()
    name = f"sp-{server.mode}-ro"
    ws = workspace(server, "ws-ro")
    pool = start_pool(server, name, ws, "--read-only-workspace")
    assert pool["workspace"] == str(ws) and pool["size"] == 2, pool
    marker = f"4242.{os.getpid()}"
    try:
        # the first run: reads the workspace, cannot write it (the pool's
        # policy), leaves a file in /tmp and a process in the background
        r = c.post(f"/v1/pools/{name}/execs",
                   {"argv": ["sh", "-c", f"cat host.txt; echo left > /tmp/left; (setsid sleep {marker} &); "
                                         f"touch {ws}/written; echo touch=$?"], "wait": True, "cwd": str(ws)})
        assert r.status == 200, r
        first = r.json["sandbox"]
        assert first.startswith("pool-"), r.json
        assert r.json["stdout"] == "from the host\ntouch=1\n", r.json
        assert r.json["result"]["exit_code"] == 0, r.json
        assert not (ws / "written").exists()
        # the member's pid 1 took what the run left with it before the answer
        assert pids_with(marker) == []

        # the next run: another member, none of the first one's files
        r = c.post(f"/v1/pools/{name}/execs", {"cmd": "cat /tmp/left; exit 7", "wait": True})
        assert r.status == 200 and r.json["sandbox"] != first, r.json
        assert r.json["result"]["exit_code"] == 7 and r.json["stdout"] == "", r.json
        second = r.json["sandbox"]

        # a run in the background, then served by the member's exec routes
        x = c.post(f"/v1/pools/{name}/execs", {"argv": ["sh", "-c", "read line; echo got $line"], "stdin": True})
        assert x.status == 201 and x.json["state"] == "running", x
        member, xid = x.json["sandbox"], x.json["id"]
        assert member not in (first, second)
        w = c.post(f"/v1/sandboxes/{member}/execs/{xid}/stdin", {"data": "typed\n", "eof": True})
        assert w.status == 200, w
        done = c.post(f"/v1/sandboxes/{member}/execs/{xid}/wait", {"timeout_ms": 10000}).json
        assert done["state"] == "exited" and done["result"]["exit_code"] == 0, done
        out = c.lines("GET", f"/v1/sandboxes/{member}/execs/{xid}/output?follow=false")
        assert "".join(e["data"] for e in out if e["type"] == "stdout") == "got typed\n", out
        # a member serves its one run only
        # (refused when it starts, gone as it stops, or already stopped:
        # whichever the moment, nothing runs)
        r = c.post(f"/v1/sandboxes/{member}/execs", {"cmd": "true", "wait": True})
        if r.status == 200:
            assert r.json["result"]["exit_code"] == 125, r
            assert re.search(r"is stopping|member of a warm pool|went away", r.json["result"]["error"]), r.json
        else:
            assert (r.status, r.json["error"]["code"]) == (409, "not_running"), r
        assert c.delete(f"/v1/sandboxes/{member}/execs/{xid}").status == 200

        # used members go while the server lives on (it claimed them: the
        # claim is let go with the exec, not with the server's exit)
        for m in (first, second, member):
            assert gone_within(server, m), f"{m} is still there: {sandboxes_of(server).get(m)}"
        assert [p["in_use"] for p in c.get("/v1/pools").json["pools"] if name in p["names"]] == [0]
    finally:
        stop_pool(server, name)
    assert name not in [n for p in c.get("/v1/pools").json["pools"] for n in p["names"]]
    r = c.post(f"/v1/pools/{name}/execs", {"cmd": "true", "wait": True})
    assert r.status == 404 and r.json["error"]["details"] == {"pool": name}, r
    assert "brig pool --name" in r.json["error"]["message"], r


def test_a_pool_nobody_started(server):
    c = server.client()
    r = c.post("/v1/pools/sp-none/execs", {"cmd": "true", "wait": True})
    assert r.status == 404 and r.json["error"]["code"] == "not_found", r
    assert "no pool named 'sp-none' runs" in r.json["error"]["message"], r
    r = c.post("/v1/pools/sp-none/execs", {"cmd": "true", "wait": True, "bogus": 1})
    assert r.status == 400 and r.json["error"]["code"] == "unknown_field", r
    assert c.post("/v1/pools/..x/execs", {"cmd": "true"}).status == 400


@attack("serve-pool-other-user", "uid B asks a root brig serve for the pools it runs as root (started with `brig pool "
        "--name`, a writable workspace of root's) and for a run in one, which would write into that workspace; a "
        "rootless server is asked by a second uid",
        "a pool is its maker's, as its members are (owner_of: the server's user): a caller that is neither root nor "
        "the server's user lists none and its run answers 404 as a pool that does not exist, before any member is "
        "claimed; a non-root server serves its own uid (and root) only: 403")
def test_another_user_neither_sees_nor_uses_the_servers_pools(server):
    name = f"sp-{server.mode}-own"
    ws = workspace(server, "ws-own")
    start_pool(server, name, ws, size=1)
    try:
        intruder = server.client(uid=OTHER if server.mode == "rootless" else NOBODY)
        listed = intruder.get("/v1/pools")
        r = intruder.post(f"/v1/pools/{name}/execs", {"cmd": f"touch {ws}/pwned", "wait": True})
        if server.mode == "rootless":
            assert listed.status == 403 and r.status == 403, (listed, r)
        else:
            assert listed.status == 200 and listed.json == {"pools": []}, listed
            assert r.status == 404 and r.json["error"]["code"] == "not_found", r
        # on the host: nothing ran, the member is still there for its maker
        assert not (ws / "pwned").exists()
        pool = [p for p in server.client().get("/v1/pools").json["pools"] if name in p["names"]][0]
        assert (pool["ready"], pool["in_use"]) == (1, 0), pool
        r = server.client().post(f"/v1/pools/{name}/execs", {"cmd": f"touch {ws}/mine", "wait": True})
        assert r.status == 200 and r.json["result"]["exit_code"] == 0, r
        assert (ws / "mine").exists()
    finally:
        stop_pool(server, name)


def _left_mid_call(server, name, body):
    """POST BODY to the pool's execs and hang up before the answer."""
    s = connect_as(server.sock, server.uid)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/pools/%s/execs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (name.encode(), len(data), data))
    time.sleep(1)  # the run has begun
    s.close()


def test_a_pool_run_whose_client_left_goes_with_it(server):
    """A pool run is one call: asked with wait or stream, its client's
    hang-up before the end takes the command and lets the member go (found
    by an attack round of session 41: the member stayed claimed, and the
    exec unforgotten, while the server ran)."""
    c = server.client()
    name = f"sp-{server.mode}-left"
    ws = workspace(server, "ws-left")
    start_pool(server, name, ws)
    marker = f"4343.{os.getpid()}"
    try:
        for how in ("wait", "stream"):
            before = set(sandboxes_of(server))
            _left_mid_call(server, name, {"argv": ["sleep", marker], how: True})
            assert wait_gone(marker, 15), "the command outlived its caller"
            ids = [x["id"] for m in before for x in c.get(f"/v1/sandboxes/{m}/execs").json.get("execs", [])]
            assert ids == [], f"{how}: an exec stayed: {ids}"
        in_use = lambda: [p["in_use"] for p in c.get("/v1/pools").json["pools"] if name in p["names"]]
        assert wait_until(lambda: in_use() == [0], 15, step=0.1), c.get("/v1/pools").json
    finally:
        stop_pool(server, name)


def test_a_pool_run_whose_client_left_while_it_waited_takes_no_member(server):
    """A client that hangs up while its pool run waits for a member (all in
    use) gets no member and no command (found by session 42: the server
    waited on, claimed the next member the daemon made, started the
    command and killed it). The test's pool daemon is held (SIGSTOP) while
    its one member is in use, so the wait is sure to be a wait. On the
    host: the next member stays ready and serves the next run, and the
    left run's file never appears."""
    c = server.client()
    name = f"sp-{server.mode}-waited"
    ws = workspace(server, "ws-waited")
    daemon = start_pool(server, name, ws, size=1)["daemon_pid"]
    marker = f"4444.{os.getpid()}"
    ready = lambda: [m for m, row in sandboxes_of(server).items()
                     if m.startswith("pool-") and (row.get("pool") or {}).get("state") == "ready"]
    try:
        os.kill(daemon, signal.SIGSTOP)  # no member made meanwhile
        try:
            busy = c.post(f"/v1/pools/{name}/execs", {"argv": ["sleep", marker]})
            assert busy.status == 201, busy
            assert ready() == [], sandboxes_of(server)
            _left_mid_call(server, name, {"argv": ["touch", f"{ws}/left"], "wait": True})
        finally:
            os.kill(daemon, signal.SIGCONT)
        made = wait_until(ready, 30)
        assert made and len(made) == 1, sandboxes_of(server)
        time.sleep(1)  # what the left call's thread would do with it, it has done by now
        assert ready() == made, (made, sandboxes_of(server))
        r = c.post(f"/v1/pools/{name}/execs", {"cmd": "echo next", "wait": True})
        assert r.status == 200 and r.json["result"]["exit_code"] == 0 and r.json["sandbox"] == made[0], r.json
        assert not (ws / "left").exists(), "the left run's command ran"
        assert c.delete(f"/v1/sandboxes/{busy.json['sandbox']}/execs/{busy.json['id']}").status == 200
    finally:
        stop_pool(server, name)


def test_a_finished_pool_run_is_read_after_its_pool_is_gone(server):
    """The result of a pool run asked in the background is the server's:
    read and forgotten by its id also once the pool stopped and removed the
    member (found by an attack round of session 41: every route answered
    404 and the claim stayed)."""
    c = server.client()
    name = f"sp-{server.mode}-gone"
    ws = workspace(server, "ws-gone")
    start_pool(server, name, ws, size=1)
    try:
        x = c.post(f"/v1/pools/{name}/execs", {"cmd": "echo fin"})
        assert x.status == 201, x
        member, xid = x.json["sandbox"], x.json["id"]
        done = c.post(f"/v1/sandboxes/{member}/execs/{xid}/wait", {"timeout_ms": 10000}).json
        assert done["result"]["exit_code"] == 0, done
    finally:
        stop_pool(server, name)
    assert gone_within(server, member), sandboxes_of(server).get(member)
    out = c.lines("GET", f"/v1/sandboxes/{member}/execs/{xid}/output?follow=false")
    assert "".join(e["data"] for e in out if e["type"] == "stdout") == "fin\n", out
    assert c.delete(f"/v1/sandboxes/{member}/execs/{xid}").status == 200
    assert c.get(f"/v1/sandboxes/{member}/execs/{xid}").status == 404


@attack("serve-pool-moved-workspace", "the harness moves the last task's checkout away and makes a fresh one at "
        "the same path, then POST /v1/pools/{name}/execs, waited for and in the background: the ready members hold "
        "the old tree (found by session 42: the member's refusal came to the wait, and the run answered a failed "
        "run, 125)", "a member whose workspace is no longer at its path refuses the start (ESTALE): its supervisor "
        "says so before the command is anyone's (CTL_EXEC_ACK), and the next member is taken, then one the daemon "
        "made since; on the host: the old tree unchanged, the fresh one has every run's line")
def test_a_moved_workspace_is_never_served_over_the_api(server):
    c = server.client()
    name = f"sp-{server.mode}-mv"
    ws = workspace(server, "ws-mv")
    start_pool(server, name, ws)
    try:
        held = {m for m, row in sandboxes_of(server).items()
                if m.startswith("pool-") and (row.get("pool") or {}).get("state") == "ready"}
        assert len(held) == 2, sandboxes_of(server)
        old = ws.with_name("ws-mv-old")
        ws.rename(old)
        workspace(server, "ws-mv")
        (ws / "host.txt").write_text("task2\n")
        script = ["sh", "-c", "pwd; cat host.txt; echo run >> written"]
        r = c.post(f"/v1/pools/{name}/execs", {"argv": script, "wait": True, "cwd": str(ws)})
        assert r.status == 200 and r.json["result"]["exit_code"] == 0, r.json
        assert r.json["stdout"] == f"{ws}\ntask2\n", r.json
        assert r.json["sandbox"] not in held, (r.json["sandbox"], held)  # the members of the old tree refused it
        # in the background: the start is the answer brig_pool_exec_start gives
        x = c.post(f"/v1/pools/{name}/execs", {"argv": script, "cwd": str(ws)})
        assert x.status == 201, x
        member, xid = x.json["sandbox"], x.json["id"]
        assert member not in held, (member, held)
        done = c.post(f"/v1/sandboxes/{member}/execs/{xid}/wait", {"timeout_ms": 20000}).json
        assert done["state"] == "exited" and done["result"]["exit_code"] == 0, done
        assert c.delete(f"/v1/sandboxes/{member}/execs/{xid}").status == 200
        assert (old / "host.txt").read_text() == "from the host\n" and not (old / "written").exists()
        assert (ws / "written").read_text() == "run\n" * 2
    finally:
        stop_pool(server, name)


@attack("serve-pool-ready-member-changed", "the pool's own user changes ready members before a run takes them: "
        "POST .../network/rules allow on one, .../pause on the other (found by session 42: the member took the rule, "
        "which the run then had beside the pool's policy, and a paused one refused the run it was claimed for)",
        "a ready member refuses rules, limits, pause and resume (403, saying to start the pool with what its runs "
        "should have); on the host: the rules in force are the pool's, and both members serve their runs")
def test_a_ready_member_stays_as_the_pool_made_it(server):
    c = server.client()
    name = f"sp-{server.mode}-asmade"
    ws = workspace(server, "ws-asmade")
    pool = start_pool(server, name, ws, "--net", "proxy")
    try:
        members = sorted(m for m, row in sandboxes_of(server).items()
                         if (row.get("pool") or {}).get("key") == pool["key"] and row["pool"]["state"] == "ready")
        assert len(members) == 2, sandboxes_of(server)
        ruled, paused = members
        r = c.post(f"/v1/sandboxes/{ruled}/network/rules", {"action": "allow", "host": "example.org"})
        assert r.status == 403 and "ready member of a warm pool" in r.json["error"]["message"], r
        assert "start the pool with the --allow-host" in r.json["error"]["message"], r
        for verb in ("pause", "resume"):
            r = c.post(f"/v1/sandboxes/{paused}/{verb}")
            assert r.status == 403 and "ready member of a warm pool" in r.json["error"]["message"], (verb, r)
        # on the host: the supervisors' rules and state are the pool's
        for m in members:
            assert c.get(f"/v1/sandboxes/{m}/network").json["allow_hosts"] == [], m
            assert sandboxes_of(server)[m]["status"] == "running", sandboxes_of(server)[m]
        # and both serve their runs (each run takes one: the two, one after
        # the other); a member a run took is the run's, and takes the rule
        # it refused while ready
        x = c.post(f"/v1/pools/{name}/execs", {"argv": ["sleep", "60"]})
        assert x.status == 201, x
        took = x.json["sandbox"]
        r = c.post(f"/v1/sandboxes/{took}/network/rules", {"action": "allow", "host": "example.org"})
        assert r.status in (200, 201), r
        assert "example.org" in c.get(f"/v1/sandboxes/{took}/network").json["allow_hosts"], took
        assert c.delete(f"/v1/sandboxes/{took}/execs/{x.json['id']}").status == 200
        r = c.post(f"/v1/pools/{name}/execs", {"cmd": "echo served", "wait": True})
        assert r.status == 200 and r.json["result"]["exit_code"] == 0 and r.json["stdout"] == "served\n", r.json
        served = {took, r.json["sandbox"]}
        assert served == set(members), (served, members)
    finally:
        stop_pool(server, name)


def _stopped_supervisors(server, key):
    """The pids of the pool KEY's members' supervisors that are stopped."""
    found = []
    for row in sandboxes_of(server).values():
        pid = row.get("supervisor_pid")
        try:
            if (row.get("pool") or {}).get("key") == key and pid and \
                    "\nState:\tT" in pathlib.Path(f"/proc/{pid}/status").read_text():
                found.append(pid)
        except OSError:
            pass
    return found


@attack("serve-pool-member-silent-after-start", "a pool member's supervisor goes quiet (stopped) or dies right "
        "after it handed the run's command to pid 1 and before it said so (a test hook stops it there; the test "
        "then leaves it stopped, or SIGKILLs it) (found by a review of session 43: the start waited on the answer "
        "with no bound, and took a member that ended for one that refused, running the command in the next "
        "member a second time)", "the start waits 10 s for the answer (504 timeout, saying the command may have "
        "started), and a member that ends without one fails the run (409) with no other member tried; on the "
        "host: each run's command ran once, and the server serves the next run")
def test_a_member_silent_after_the_hand_off_never_runs_the_command_twice(server, hooks_bindir):
    c = server.client()
    name = f"sp-{server.mode}-silent"
    ws = workspace(server, "ws-silent")
    # the members' supervisors from the test-hooks build, each stopping
    # itself once it has handed a run's command to its pid 1
    env = {**brig_as_env(server.mode, server.dir), "BRIG_TEST_PAUSE_AT": "exec-sent"}
    r = subprocess.run(brig_as_cmd(hooks_bindir, server.mode, "pool", "--size", "2", "--name", name,
                                   "--workspace", str(ws)), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ready = lambda: [m for m, row in sandboxes_of(server).items()
                     if m.startswith("pool-") and (row.get("pool") or {}).get("state") == "ready"]
    members = wait_until(lambda: ready() if len(ready()) == 2 else None, 30)
    assert members, sandboxes_of(server)
    key = sandboxes_of(server)[members[0]]["pool"]["key"]
    stopped = []
    try:
        for how in ("quiet", "killed"):
            answer = {}

            def post():
                try:
                    answer["r"] = c.post(f"/v1/pools/{name}/execs",
                                         {"argv": ["sh", "-c", f"echo {how} >> {ws}/ran"], "wait": True})
                except OSError as e:  # the client's own 30 s
                    answer["error"] = e
            run = threading.Thread(target=post)
            run.start()
            new = wait_until(lambda: [p for p in _stopped_supervisors(server, key) if p not in stopped], 20, step=0.05)
            assert new and len(new) == 1, f"no member's supervisor stopped at exec-sent ({how}): {sandboxes_of(server)}"
            sup = new[0]
            stopped.append(sup)
            # the command was handed on: pid 1 runs it while the supervisor is stopped
            assert wait_until(lambda: (ws / "ran").exists() and how in (ws / "ran").read_text(), 20), how
            if how == "killed":
                os.kill(sup, signal.SIGKILL)
            run.join(30)
            assert not run.is_alive() and "r" in answer, \
                f"the start still waits on a member that is {how}: {answer.get('error')}"
            got = answer["r"]
            if how == "quiet":
                assert got.status == 504 and "did not say within 10 s" in got.json["error"]["message"], got
            else:
                assert got.status == 409 and "ended before it said" in got.json["error"]["message"], got
            assert "may have started" in got.json["error"]["message"], got
            time.sleep(1)  # a retry in another member would have run by now
            assert (ws / "ran").read_text().splitlines().count(how) == 1, (ws / "ran").read_text()
    finally:
        for sup in set(stopped + _stopped_supervisors(server, key)):
            try:
                os.kill(sup, signal.SIGCONT)
            except ProcessLookupError:
                pass
        stop_pool(server, name)


def test_pool_runs_held_are_bounded_by_max_execs(bindir, mode):
    """Pool runs started in the background and never forgotten each hold a
    member: --max-execs bounds them as it bounds running commands (found
    by an attack round of session 41: five members held with --max-execs 1)."""
    if os.geteuid() != 0:
        pytest.skip("BRIG SERVE NOT TESTED: the server runs as root and as nobody, which needs root")
    with serve_dir(mode) as d:
        s = Server(bindir, mode, d, "--max-execs", "1").start()
        try:
            c = s.client()
            name = f"sp-{mode}-max"
            ws = workspace(s, "ws-max")
            start_pool(s, name, ws)
            try:
                first = c.post(f"/v1/pools/{name}/execs", {"argv": ["true"]})
                assert first.status == 201, first
                member, xid = first.json["sandbox"], first.json["id"]
                assert c.post(f"/v1/sandboxes/{member}/execs/{xid}/wait", {}).json["state"] == "exited"
                r = c.post(f"/v1/pools/{name}/execs", {"argv": ["true"]})
                assert r.status == 429 and "pool runs are held" in r.json["error"]["message"], r
                assert c.delete(f"/v1/sandboxes/{member}/execs/{xid}").status == 200
                r = c.post(f"/v1/pools/{name}/execs", {"argv": ["true"], "wait": True})
                assert r.status == 200, r
            finally:
                stop_pool(s, name)
        finally:
            s.stop()
