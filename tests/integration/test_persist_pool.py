"""Warm pool: brig pool --size N keeps sandboxes ready; brig run --pooled
runs in one of them (same policy and workspace), which then serves no other
run; anything else runs as a plain brig run. Root and rootless."""
import concurrent.futures
import json
import os
import pathlib
import time

import pytest

from persist_helpers import cgroup_dirs_named, pid_alive, sandboxes  # noqa: F401 (fixture)
from proc_helpers import wait_until
from test_escape import attack


@pytest.fixture
def pool(sandboxes):
    """A pool of 2 for the default policy; always stopped afterwards."""
    r = sandboxes.brig_cmd("pool", "--size", "2")
    assert r.returncode == 0, r
    yield sandboxes
    sandboxes.brig_cmd("pool", "--stop")
    for name in list(sandboxes.ls()):
        sandboxes.rm(name)


def _members(sandboxes):
    return {n: row for n, row in sandboxes.ls().items() if n.startswith("pool-")}


def _ready(sandboxes):
    pools = sandboxes.root / "pools"
    return sorted(p.name for d in pools.iterdir() for p in (d / "ready").iterdir()) if pools.exists() else []


def test_pool_fills_and_pooled_run_uses_one_member_once(brig, pool):
    members = _members(pool)
    assert len(members) == 2 and all(m["status"] == "running" for m in members.values()), members
    before = set(_ready(pool))
    assert before == set(members)
    r = pool.brig_cmd("run", "--pooled", "--", "sh", "-c", "echo pooled > ~/mark; id -u; exit 7")
    assert r.returncode == 7, r
    assert r.stdout.strip() == brig.sh("id -u").stdout.strip(), r
    # The member that served is gone for good, and a fresh one took its place.
    used = before - set(_ready(pool))
    assert len(used) == 1, (before, _ready(pool))
    assert wait_until(lambda: len(_ready(pool)) == 2 and not (used & set(_members(pool))), 15), _members(pool)
    # Nothing of that run is visible to the next one.
    r = pool.brig_cmd("run", "--pooled", "--", "sh", "-c", "ls -A ~; echo done")
    assert r.returncode == 0 and r.stdout == "done\n", r


def test_pooled_run_is_confined_like_run(brig, pool):
    script = "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status; cat /proc/1/cmdline | tr '\\0' ' '"
    pooled = pool.brig_cmd("run", "--pooled", "--", "sh", "-c", script)
    plain = pool.brig_cmd("run", "--", "sh", "-c", script)
    assert pooled.returncode == 0 and plain.returncode == 0, (pooled, plain)
    assert pooled.stdout.splitlines()[:3] == plain.stdout.splitlines()[:3], (pooled, plain)
    assert "NoNewPrivs:\t1" in pooled.stdout and "Seccomp:\t2" in pooled.stdout


def test_other_policy_or_no_pool_runs_plain(brig, pool):
    before = _ready(pool)
    r = pool.brig_cmd("run", "--pooled", "--memory", "1G", "--", "echo", "plain")
    assert r.returncode == 0 and r.stdout == "plain\n", r
    assert _ready(pool) == before  # no member was taken
    r = pool.brig_cmd("run", "--pooled", "--", "no-such-cmd-xyz")
    assert r.returncode == 127, r


def test_concurrent_pooled_runs(brig, pool):
    def one(i):
        return pool.brig_cmd("run", "--pooled", "--", "sh", "-c", f"echo run{i}")

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(one, range(4)))
    assert sorted(r.stdout for r in results) == [f"run{i}\n" for i in range(4)], results
    assert all(r.returncode == 0 for r in results), results


def test_refill_goes_on_while_runs_never_pause(brig, pool):
    """The refill waits for a quiet pool (no run, claim or hand-back for a
    moment: pool.c's POOL_QUIET_MS), so that making a member does not share
    the cores with a run; runs that follow each other without a pause hold
    it back a bounded time only. Here none waits for a member: still some
    are served by members made while the runs went on."""
    served, end = 0, time.monotonic() + 30
    rep = brig.reports / "burst.json"
    while served < 4 and time.monotonic() < end:
        r = pool.brig_cmd("run", "--pooled", "--json-report", rep, "--", "true")
        assert r.returncode == 0, r
        served += bool(json.loads(rep.read_text()).get("pool", {}).get("served"))
    assert served >= 4, f"{served} pooled runs of a burst served: the refill never went on"


def test_pool_stop_removes_everything(brig, sandboxes):
    assert sandboxes.brig_cmd("pool", "--size", "2").returncode == 0
    members = _members(sandboxes)
    states = [sandboxes.state(n) for n in members]
    r = sandboxes.brig_cmd("pool", "--size", "2")
    assert r.returncode == 125 and "already runs" in r.stderr, r
    assert sandboxes.brig_cmd("pool", "--stop").returncode == 0
    assert _members(sandboxes) == {}
    assert not (sandboxes.root / "pools").exists()
    for st in states:
        assert wait_until(lambda: not pid_alive(st["supervisor_pid"]), 10)
        assert cgroup_dirs_named(f"brig-{st['supervisor_pid']}-{st['supervisor_start']}") == []
    r = sandboxes.brig_cmd("pool", "--stop")
    assert r.returncode == 125 and "no pool" in r.stderr, r
    r = sandboxes.brig_cmd("run", "--pooled", "--", "echo", "fine")
    assert r.returncode == 0 and r.stdout == "fine\n", r


def test_pool_bad_input(brig, sandboxes):
    for args in (["pool"], ["pool", "--size", "0"], ["pool", "--size", "x"], ["pool", "--size", "1", "--stop"],
                 ["pool", "--size", "1", "--pass-fd", "1"]):
        r = sandboxes.brig_cmd(*args)
        assert r.returncode == 125, (args, r)
    assert _members(sandboxes) == {}
    r = sandboxes.brig_cmd("create", "pools")
    assert r.returncode == 125, r


@attack("pool-daemon-forked", "a front end (a threaded server holding locks, a big heap) starts a warm pool: its "
        "daemon was a bare fork of that process, running on with a copy of its memory, locks and descriptors",
        "processes")
def test_pool_daemon_is_the_supervisor_program(brig, pool):
    json_files = list((pool.root / "pools").glob("*/pool.json"))
    assert len(json_files) == 1, json_files
    pid = json.loads(json_files[0].read_text())["supervisor_pid"]
    # on the host: what that process runs, and that it is nobody's fork of brig
    exe = os.readlink(f"/proc/{pid}/exe")
    assert os.path.basename(exe) == "brig-supervisor", f"the pool daemon runs {exe}, a fork of its caller"
    assert pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "brig-supervisor"
    # its members are started by it, and serve as before
    for row in _members(pool).values():
        sup = row["supervisor_pid"]
        assert os.path.basename(os.readlink(f"/proc/{sup}/exe")) == "brig-supervisor", row
    r = pool.brig_cmd("run", "--pooled", "--", "echo", "served")
    assert r.returncode == 0 and r.stdout == "served\n", r
