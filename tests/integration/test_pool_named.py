"""A named warm pool (issue 19): `brig pool --size N --name NAME` keeps
sandboxes ready, `brig run --pool NAME -- CMD` runs CMD in one of them as
the pool made it (its policy, workspace and environment: the caller
chose the pool by its name, so no policy is read), and the brig front end
does it alone, without starting the engine. Each member serves one run
and goes; two runs never share one; nothing of one run reaches the next.
Root and rootless; asserted on the host (processes traced, the state
root, the members' state directories)."""
import concurrent.futures
import json
import os
import subprocess

import pytest

from persist_helpers import pid_alive, sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, wait_until
from test_escape import attack
from test_front import _execs_traced


@pytest.fixture
def named(sandboxes):
    """A pool of 2 named after the test; always stopped afterwards."""
    name = marker("np")[-20:]
    r = sandboxes.brig_cmd("pool", "--size", "2", "--name", name)
    assert r.returncode == 0, r
    yield sandboxes, name
    sandboxes.brig_cmd("pool", "--stop", "--name", name)
    for n in list(sandboxes.ls()):
        sandboxes.rm(n)


def _pool_dir(sandboxes, name):
    return sandboxes.root / "pools" / os.readlink(sandboxes.root / "pools" / "names" / name)


def _ready(sandboxes, name):
    return sorted(p.name for p in (_pool_dir(sandboxes, name) / "ready").iterdir())


def _run(sandboxes, *args, **kw):
    return sandboxes.brig_cmd("run", *args, stdin=subprocess.DEVNULL, **kw)


def test_named_pool_run_is_the_front_ends_alone_and_uses_a_member_once(brig, named):
    sandboxes, name = named
    before = set(_ready(sandboxes, name))
    assert len(before) == 2, before
    trace, r = _execs_traced(brig, sandboxes, "run", "--pool", name, "--", "sh", "-c",
                             "echo pooled > ~/mark; touch /tmp/mark; id -u; exit 7")
    assert r.returncode == 7 and r.stdout.strip() == brig.sh("id -u").stdout.strip() and r.stderr == "", r
    assert "execveat(" not in trace, trace  # no engine: the front end claimed and ran it
    used = before - set(_ready(sandboxes, name))
    assert len(used) == 1, (before, _ready(sandboxes, name))
    # the member that served is gone for good (its state too), and a fresh one took its place
    (member,) = used
    assert wait_until(lambda: not (sandboxes.root / member).exists() and len(_ready(sandboxes, name)) == 2, 20), \
        (member, _ready(sandboxes, name))
    # nothing of that run in the next one; --cwd and --env are the run's, the rest the pool's
    r = _run(sandboxes, f"--pool={name}", "--cwd", "/tmp", "--env", "A=1", "--", "sh", "-c",
             "ls -A ~ /tmp; pwd; echo $A")
    assert r.returncode == 0 and "mark" not in r.stdout and r.stdout.endswith("/tmp\n1\n"), r
    # confined as a cold run is
    script = "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status"
    pooled, plain = _run(sandboxes, "--pool", name, "--", "sh", "-c", script), sandboxes.brig_cmd("run", "--", "sh",
                                                                                                    "-c", script)
    assert pooled.returncode == 0 and pooled.stdout == plain.stdout and "Seccomp:\t2" in pooled.stdout, (pooled, plain)


@attack("pool-named-shared", "eight `brig run --pool NAME` at once on a pool of 2: each looks for what another run "
        "left in /tmp and $HOME, leaves its own, and holds its member a moment", "pool")
def test_concurrent_named_runs_never_share_a_member(brig, named):
    sandboxes, name = named
    script = ("for f in /tmp/seen ~/seen; do test -e $f && { echo SHARED; exit 9; }; done; "
              "touch /tmp/seen ~/seen; sleep 0.2; echo ok")

    def one(_):
        return _run(sandboxes, "--pool", name, "--", "sh", "-c", script, timeout=90)

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(one, range(8)))
    assert all(r.returncode == 0 and r.stdout == "ok\n" for r in results), results  # runs beyond 2 waited for one
    assert wait_until(lambda: len(_ready(sandboxes, name)) == 2, 30), _ready(sandboxes, name)


def test_named_pool_ends_are_the_engines_and_mistakes_say_what_to_do(brig, named):
    sandboxes, name = named
    # a signal's end: handed to the engine, said as brig exec says it
    r = _run(sandboxes, "--pool", name, "--", "sh", "-c", "kill -KILL $$")
    assert r.returncode == 128 + 9 and "killed by signal 9" in r.stderr, r
    # the engine's own path (an option the front end leaves to it) gives the same
    r = _run(sandboxes, "--pool", name, "--timeout", "30s", "--", "sh", "-c", "exit 4")
    assert r.returncode == 4, r
    rep = sandboxes.brig.reports / f"{marker('npr')}.json"
    r = _run(sandboxes, "--pool", name, "--json-report", str(rep), "--", "true")
    assert r.returncode == 0, r
    pool = json.loads(rep.read_text())["pool"]
    assert pool["name"] == name and pool["member"].startswith("pool-"), pool
    cases = [
        (["--pool", "no-such-pool", "--", "true"], "brig pool --name no-such-pool --size N"),
        (["--pool", "../x", "--", "true"], "pool name '../x'"),
        (["--pool", "", "--", "true"], "--pool needs the pool's name"),
        (["--memory", "1G", "--pool", name, "--", "true"], "--pool NAME comes first"),
        (["--pool", name, "--detach", "--", "true"], "no --detach"),
        (["--pool", name], "no command given"),
    ]
    for args, words in cases:
        r = _run(sandboxes, *args)
        assert r.returncode == 125 and words in r.stderr, (args, r)
    # a name a live pool has is not given again (another policy)
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", name, "--memory", "1G")
    assert r.returncode == 125 and "already runs" in r.stderr, r
    # stopped by its name: the name goes with it
    r = sandboxes.brig_cmd("pool", "--stop", "--name", name)
    assert r.returncode == 0, r
    assert not (sandboxes.root / "pools" / "names" / name).exists()
    r = _run(sandboxes, "--pool", name, "--", "true")
    assert r.returncode == 125 and f"no pool named '{name}'" in r.stderr, r


def test_a_killed_pool_daemon_takes_its_name_with_it(brig, named):
    """SIGKILLed, the daemon removes nothing itself: a run then says the
    pool is not running, and the next brig's sweep removes the name."""
    sandboxes, name = named
    pdir = _pool_dir(sandboxes, name)
    daemon = json.loads((pdir / "pool.json").read_text())["supervisor_pid"]
    os.kill(daemon, 9)
    assert wait_until(lambda: not pid_alive(daemon), 10)
    r = _run(sandboxes, "--pool", name, "--", "true")
    # its members stop by themselves; a run finds none ready, or one stopping, and says so
    assert r.returncode == 125 and "not running" in r.stderr, r
    assert sandboxes.brig_cmd("run", "--", "true").returncode == 0  # a brig run sweeps what dead pools left
    assert not (sandboxes.root / "pools" / "names" / name).exists(), list((sandboxes.root / "pools").rglob("*"))
