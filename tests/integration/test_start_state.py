"""A command starts the same whichever way brig starts it (issue 19's
shortcuts: pid 1 vforks a cold run's command; a persistent sandbox's and a
pool member's pid 1 fork and confine the next exec's child ahead of it).
data/start_state.py reads, in the command's own process, what
test_exec_spare.py's profile does not: prctl state (parent death signal,
dumpable, securebits, keepcaps, timer slack, child subreaper, THP, MDWE),
interval and POSIX timers, scheduling policy, nice, affinity and I/O
priority, OOM score, personality, coredump filter, keyrings, the time
namespace's offsets, the mount table and which namespaces it shares with
pid 1. The host compares a cold brig run, a pooled run and an exec the
spare served: the same, but for what differs between any two sandboxes.
Root and rootless."""
import json
import pathlib
import re
import subprocess

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import wait_until
from test_escape import attack
from test_exec_spare import _nspid, _spare
from test_persist_pool import pool  # noqa: F401 (fixture)

PROBE = (pathlib.Path(__file__).parent / "data" / "start_state.py").read_text()


def _state(r):
    assert r.returncode == 0, r
    s = json.loads(r.stdout)
    s.pop("pid")
    # what differs between any two sandboxes or processes: the group's
    # name, the autogroup's number, the size the fd table once grew to
    s["cgroup"] = re.sub(r"brig-[0-9-]+", "brig-GROUP", s["cgroup"])
    s["autogroup"] = re.sub(r"autogroup-[0-9]+", "autogroup-N", s["autogroup"])
    s["status"].pop("FDSize", None)
    return s


def _diff(a, b):
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


@attack("start-state-of-shortcut", "a command started by one of issue 19's shortcuts (pid 1's vfork of a cold "
        "run's command, the spare a pool member's or a persistent sandbox's pid 1 forked and confined ahead of "
        "the request) keeps something of pid 1 or of the moment the spare was made that a forked command would "
        "not have: a parent death signal, dumpable or securebits, timer slack, an armed interval or POSIX timer, "
        "a child subreaper flag, another scheduling class, nice, affinity, I/O priority or OOM score, a "
        "personality, a keyring, time namespace offsets, another mount table or namespace",
        "the spare and the vforked child take command_confine's path and exec the command; the host compares "
        "the command's own reading of all of it in a cold run, a pooled run and an exec the spare served "
        "(its pid the one the host saw waiting): the same")
def test_shortcuts_start_the_command_as_a_cold_run_does(brig, pool):
    cmd = ("--", "python3", "-c", PROBE)
    cold = _state(pool.brig_cmd("run", *cmd, stdin=subprocess.DEVNULL))
    rep = brig.workspace / "pooled.json"
    pooled_r = pool.brig_cmd("run", "--pooled", "--json-report", str(rep), *cmd, stdin=subprocess.DEVNULL)
    assert json.loads(rep.read_text())["pool"]["served"] is True, pooled_r
    pooled = _state(pooled_r)
    name, _ = pool.create()
    assert pool.sh(name, "true").returncode == 0  # forked: the next one is the spare's
    spare = _nspid(_spare(pool, name))
    served = pool.exec(name, *cmd, stdin=subprocess.DEVNULL)
    assert served.returncode == 0 and json.loads(served.stdout)["pid"] == spare, \
        f"the exec was not the spare ({spare}): {served}"
    spared = _state(served)
    assert _diff(cold, pooled) == {}, f"ATTACK WORKED: the pooled run differs from a cold run: {_diff(cold, pooled)}"
    assert _diff(cold, spared) == {}, f"ATTACK WORKED: the spare's exec differs from a cold run: {_diff(cold, spared)}"
    # the probe read what it says (not a table of errors)
    assert cold["prctl"]["NO_NEW_PRIVS"] == 1 and cold["status"]["Seccomp"] == "2" and cold["mountinfo"], cold


@attack("pool-workspace-replaced", "a harness moves the last task's checkout away and makes a fresh one at the "
        "same path (or replaces a --ro-bind source the same way), then runs the next task with brig run "
        "--pooled: served by a member made before, the command sees the last task's files and writes into them, "
        "where a cold run binds what stands at the path now",
        "what names a member includes the device and inode of the workspace and of each bind source as they "
        "stood when it was made (plan_sources_identity, in pool_identity); the run sends them as they stand now "
        "and a member made from others refuses (ESTALE): a cold run. The host finds the new task's file in the "
        "new checkout, nothing of it in the old, and the old one's file unseen")
def test_pooled_run_binds_what_stands_at_the_paths_now(brig, sandboxes):
    ws = brig.workspace
    data = brig.base / "data"
    data.mkdir()
    (data / "old-set").write_text("old\n")
    brig.chown(data / "old-set")
    brig.chown(data)
    bind = ("--ro-bind", f"{data}:/data")
    (ws / "task-a").write_text("task A's file\n")
    brig.chown(ws / "task-a")
    r = sandboxes.brig_cmd("pool", "--size", "1", *bind)
    assert r.returncode == 0, r
    try:
        rep = brig.reports / "replaced.json"
        script = "ls -A; ls -A /data; touch task-b"
        run = lambda: sandboxes.brig_cmd("run", "--pooled", "--json-report", str(rep), *bind,  # noqa: E731
                                         "--", "sh", "-c", script)
        first = run()
        assert first.returncode == 0 and json.loads(rep.read_text())["pool"]["served"] is True, first
        (ws / "task-b").unlink()
        served = json.loads(rep.read_text())["pool"]["member"]
        ready = lambda: [m for m in (sandboxes.root / "pools").glob("*/ready/*") if m.name != served]  # noqa: E731
        assert wait_until(ready, 30), "no member made after the first run"
        # the next task: a fresh checkout and data set at the same paths
        old = brig.base / "checkout-a"
        ws.rename(old)
        ws.mkdir()
        brig.chown(ws)
        data.rename(brig.base / "data-a")
        data.mkdir()
        brig.chown(data)
        (data / "new-set").write_text("new\n")
        brig.chown(data / "new-set")
        second = run()
        assert second.returncode == 0, second
        assert not (old / "task-b").exists() and "task-a" not in second.stdout, \
            f"ATTACK WORKED: the pooled run worked in the last task's checkout: {second.stdout!r}"
        assert "old-set" not in second.stdout, f"ATTACK WORKED: the pooled run read the old data set: {second.stdout!r}"
        assert (ws / "task-b").exists() and "new-set" in second.stdout, second
        assert json.loads(rep.read_text())["pool"]["served"] is False and "a bind's path" in second.stderr, second
    finally:
        sandboxes.brig_cmd("pool", "--stop", *bind)
