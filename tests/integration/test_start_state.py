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
