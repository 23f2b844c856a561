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
import pathlib
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import Brig
from persist_helpers import Sandboxes, pid_alive, sandboxes  # noqa: F401 (fixture)
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
    # a report asked for says why no member ran it (it was left empty)
    r = _run(sandboxes, "--pool", "no-such-pool", "--json-report", str(rep), "--", "true")
    doc = json.loads(rep.read_text())
    assert r.returncode == 125 and doc["exit_code"] == 125 and doc["sandbox"] is None, (r, doc)
    assert "no pool named 'no-such-pool'" in doc["error"], doc
    assert doc["pool"] == {"served": False, "member": None, "name": "no-such-pool"}, doc
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



def _waits_in_poll(pid):
    """The process waits in poll(2) (its syscall, x86-64's 7): a run that
    has sent its request and waits for the end."""
    try:
        return pathlib.Path(f"/proc/{pid}/syscall").read_text().split()[0] == "7"
    except (OSError, IndexError):
        return False


def test_a_member_that_ends_before_reading_the_run_hands_it_to_another(brig, named):
    """A member whose daemon just died stops, and the run that had claimed
    and connected to it finds its request reset, unread (CI saw "went
    away during the exec: Connection reset by peer", and exit 125). Nothing
    ran in it, so the run takes the next member, and runs once: in the
    front end's run, and in the engine's (an option only it takes)."""
    sandboxes, name = named
    for i, opts in enumerate([[], ["--timeout", "30s"]]):
        assert wait_until(lambda: len(_ready(sandboxes, name)) == 2, 30), _ready(sandboxes, name)
        members = _ready(sandboxes, name)
        pids = {m: sandboxes.state(m)["supervisor_pid"] for m in members}
        for pid in pids.values():
            os.kill(pid, signal.SIGSTOP)  # neither accepts: the request waits in the socket
        out = brig.workspace / marker(f"once{i}")
        try:
            p = subprocess.Popen(brig.prefix() + [str(brig.bindir / "brig"), "run", "--pool", name, *opts, "--",
                                                  "sh", "-c", f"echo ran >> {out.name}; echo ran"],
                                 cwd=str(brig.workspace), env=brig.env(sandboxes.env()), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # claimed (out of ready/), sent, and waiting for the end
            assert wait_until(lambda: len(_ready(sandboxes, name)) == 1 and _waits_in_poll(p.pid), 30), \
                (opts, _ready(sandboxes, name))
            (claimed,) = set(members) - set(_ready(sandboxes, name))
            os.kill(pids[claimed], signal.SIGKILL)  # ends with the request unread
        finally:
            for pid in pids.values():
                if pid_alive(pid):
                    os.kill(pid, signal.SIGCONT)
        stdout, stderr = p.communicate(timeout=60)
        assert (p.returncode, stdout) == (0, "ran\n"), (opts, p.returncode, stdout, stderr)
        assert out.read_text() == "ran\n", (opts, out.read_text())  # once, in the other member


def _workspace(brig, tag, data):
    d = brig.base / marker(tag)[-24:]
    d.mkdir()
    (d / "data").write_text(data)
    brig.chown(d)
    brig.chown(d / "data")
    return d


def _traced(sandboxes, inject, *args, cwd):
    """brig ARGS under strace with one fault injected (strace -e inject=):
    a delay or a signal at the moment a race or a kill would strike."""
    brig = sandboxes.brig
    # not -f: the brig process alone, never the daemon it starts
    cmd = ["strace", "-qq", "-o", "/dev/null", "-e", f"trace={inject.split(':')[0]}", "-e", f"inject={inject}"]
    env = brig.env(sandboxes.env())
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"  # LeakSanitizer cannot run under ptrace
    return subprocess.Popen(cmd + brig.cmd(*args), cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@attack("pool-named-moved-workspace", "the harness moves the last task's checkout away and makes a fresh one at the "
        "same path, then `brig run --pool NAME` (found by attack33: the ready members held the old tree, the "
        "daemon made new ones from its own cwd, which moved with it)", "pool")
def test_a_moved_workspace_is_never_served(brig, sandboxes):
    ws = _workspace(brig, "npws", "task1\n")
    name = marker("npmv")[-20:]
    r = sandboxes.brig_cmd("pool", "--size", "2", "--name", name, cwd=ws)
    assert r.returncode == 0, r
    try:
        old = ws.with_name(ws.name + "-old")
        ws.rename(old)
        ws.mkdir()
        (ws / "data").write_text("task2\n")
        brig.chown(ws)
        brig.chown(ws / "data")
        for _ in range(3):  # the two members made before, then one the daemon made since
            r = _run(sandboxes, "--pool", name, "--", "sh", "-c", "pwd; cat data; echo run >> written", cwd=ws,
                     timeout=90)
            assert r.returncode == 0 and r.stdout == f"{ws}\ntask2\n", r
        # nothing reached the old task's tree
        assert (old / "data").read_text() == "task1\n" and not (old / "written").exists()
        assert (ws / "written").read_text() == "run\n" * 3
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--name", name)


@attack("pool-named-workspace-symlinked", "a root `brig pool --name NAME` in a workspace whose parent another user "
        "(nobody) owns; after a run, that user renames the workspace away and puts a symlink to a directory of "
        "root's in its place; root's next `brig run --pool NAME` from elsewhere (found by an attack round of "
        "session 41: the daemon's next member was made in root's directory, idmapped writable, and the run wrote "
        "there)", "the daemon reaches the pool's workspace path through no symlink (openat2 RESOLVE_NO_SYMLINKS, "
        "then fchdir): it makes no member there and says why; the run ends 125; on the host: root's directory "
        "unchanged")
def test_a_workspace_replaced_by_a_symlink_gets_no_member(brig, sandboxes, scratch):
    if brig.mode != "root":
        pytest.skip("ROOT ONLY: the confused deputy is root's pool in a directory another user may change")
    parent = scratch / "alice"
    ws = parent / "ws"
    ws.mkdir(parents=True)
    for d in (parent, ws):
        os.chown(d, 65534, 65534)
    roots = scratch / "rootdir"
    roots.mkdir(mode=0o755)
    (roots / "config").write_text("original\n")
    name = marker("npsl")[-20:]
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", name, cwd=ws)
    assert r.returncode == 0, r
    try:
        assert _run(sandboxes, "--pool", name, "--", "true", cwd=ws, timeout=90).returncode == 0
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        subprocess.run(as_nobody + ["sh", "-c", f"mv {ws} {ws}.old && ln -s {roots} {ws}"], check=True)
        r = _run(sandboxes, "--pool", name, "--", "sh", "-c", "pwd; echo PWNED > config; echo new > planted",
                 cwd=str(scratch), timeout=90)
        assert r.returncode == 125 and "replaced since the pool started" in r.stderr, r
        assert (roots / "config").read_text() == "original\n" and not (roots / "planted").exists(), \
            "ATTACK WORKED: the pool's run wrote into root's directory"
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--name", name)


@attack("pool-named-name-race", "two `brig pool --name N` at once with different policies, the first held between "
        "its check and its rename of the name (strace -e inject delay): both said 0 and the second caller's runs "
        "got the first pool's policy (found by attack33)", "pool")
def test_two_pools_never_share_a_name(brig, sandboxes):
    wa, wb = _workspace(brig, "npa", "a"), _workspace(brig, "npb", "b")
    name = marker("nprace")[-20:]
    a = _traced(sandboxes, "symlinkat:delay_enter=2000000", "pool", "--size", "1", "--name", name, cwd=wa)
    try:
        time.sleep(1)
        b = sandboxes.brig_cmd("pool", "--size", "1", "--name", name, "--net", "none", cwd=wb, timeout=90)
        out, err = a.communicate(timeout=90)
        assert (a.returncode, b.returncode) == (0, 125) and "already runs" in b.stderr, (a.returncode, err, b)
        r = _run(sandboxes, "--pool", name, "--", "cat", "data")
        assert r.returncode == 0 and r.stdout == "a", r  # the name is A's, and only A's pool runs
        # B's pool, refused its name, was stopped: every member left is A's
        akey = os.readlink(sandboxes.root / "pools" / "names" / name)
        assert wait_until(lambda: all(n.startswith(f"pool-{akey[:8]}-") for n in sandboxes.ls() if n.startswith("pool-")),
                          20), sandboxes.ls()
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
        sandboxes.brig_cmd("pool", "--stop", "--name", name)


def test_a_sweep_and_a_new_name_do_not_cross(brig, sandboxes, hooks_bindir):
    """The sweep (every brig run and brig ls) takes the name of a dead
    pool. Stopped between its look at the name and its unlink (a test
    hook), it must not take the name a new pool is given meanwhile: the
    naming waits for it (found by attack33: the new pool ran unnamed)."""
    ws = _workspace(brig, "npsw", "new")
    name, other = marker("npsw")[-20:], marker("npsk")[-20:]
    # another live name keeps names/ in place (emptied, it is removed and made again)
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", other, "--memory", "256M", cwd=ws)
    assert r.returncode == 0, r
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", name)
    assert r.returncode == 0, r
    daemon = json.loads((_pool_dir(sandboxes, name) / "pool.json").read_text())["supervisor_pid"]
    old_key = os.readlink(sandboxes.root / "pools" / "names" / name)
    os.kill(daemon, 9)
    assert wait_until(lambda: not pid_alive(daemon), 10)
    hooked = Brig(hooks_bindir, brig.mode, brig.base)
    ls = subprocess.Popen(hooked.cmd("ls"), cwd=str(brig.workspace), stdin=subprocess.DEVNULL,
                          env=hooked.env(sandboxes.env({"BRIG_TEST_PAUSE_AT": "pool-name-sweep",
                                                         "BRIG_TEST_PAUSE_NAME": name})),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    namer = None
    try:
        ready, _, _ = select.select([ls.stderr], [], [], 60)
        line = ls.stderr.readline() if ready else "(nothing within 60 s)"
        assert "paused at pool-name-sweep" in line, line
        namer = subprocess.Popen(brig.cmd("pool", "--size", "1", "--name", name, "--net", "none"), cwd=str(ws),
                                 env=brig.env(sandboxes.env()), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        # its pool made, its naming waits for the sweep's lock (unlocked, it would be done: seen here)
        link = sandboxes.root / "pools" / "names" / name

        def renamed():
            try:
                return os.readlink(link) != old_key
            except OSError:
                return False
        wait_until(renamed, 8)

        os.kill(ls.pid, signal.SIGCONT)
        ls.communicate(timeout=60)
        _, err = namer.communicate(timeout=90)
        assert namer.returncode == 0, err
        r = _run(sandboxes, "--pool", name, "--", "cat", "data")
        assert r.returncode == 0 and r.stdout == "new", r
    finally:
        for p in (ls, namer):
            if p and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
        sandboxes.brig_cmd("pool", "--stop", "--name", name)
        sandboxes.brig_cmd("pool", "--stop", "--name", other)


def test_a_pool_whose_naming_was_killed_is_named_by_the_retry(brig, sandboxes):
    """brig pool --name killed between its pool's start and its name (a
    harness's timeout): the pool runs unnamed; the same command again
    names it, rather than refusing a pool that already runs."""
    name = marker("npk")[-20:]
    p = _traced(sandboxes, "symlinkat:signal=SIGKILL", "pool", "--size", "1", "--name", name,
                cwd=sandboxes.brig.workspace)
    p.communicate(timeout=90)
    assert p.returncode == -9 or p.returncode == 137, p.returncode
    try:
        assert not (sandboxes.root / "pools" / "names" / name).exists()
        r = sandboxes.brig_cmd("pool", "--size", "1", "--name", name)
        assert r.returncode == 0, r
        r = _run(sandboxes, "--pool", name, "--", "true")
        assert r.returncode == 0, r
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--name", name)
    assert wait_until(lambda: not [n for n in sandboxes.ls() if n.startswith("pool-")], 20), sandboxes.ls()


def test_a_pool_that_cannot_make_members_says_why(brig, sandboxes):
    """Its workspace removed, the daemon cannot make a member: a run says
    what the daemon said, soon, instead of waiting out its 30 s to blame
    "all in use" (found by attack33)."""
    ws = _workspace(brig, "npgone", "x")
    name = marker("npgone")[-20:]
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", name, cwd=ws)
    assert r.returncode == 0, r
    try:
        shutil.rmtree(ws)
        r = _run(sandboxes, "--pool", name, "--", "true", cwd=brig.workspace, timeout=90)
        assert r.returncode == 125 and "cannot make a member now" in r.stderr and str(ws) in r.stderr, r
        assert "/log)" in r.stderr, r  # where the daemon says more
        listed = [p for p in _pools(sandboxes).values() if name in p["names"]]  # and brig pool --list says it
        assert len(listed) == 1 and str(ws) in (listed[0]["failing"] or ""), listed
        r = sandboxes.brig_cmd("pool", "--list")
        assert "cannot make a member" in r.stdout, r
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--name", name)


def test_a_run_waiting_on_a_stopped_pool_says_it_was_stopped(brig, sandboxes):
    """No member to be had (its workspace removed: the ready one refuses,
    the daemon cannot make another), a run waits; the pool is stopped by
    its name meanwhile: the run says the pool was stopped, not that its
    daemon is gone, which is what a killed daemon leaves (attack33)."""
    ws = _workspace(brig, "npstop", "x")
    name = marker("npstop")[-20:]
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", name, cwd=ws)
    assert r.returncode == 0, r
    waiting = None
    try:
        assert wait_until(lambda: _ready(sandboxes, name), 30)
        shutil.rmtree(ws)
        waiting = subprocess.Popen(sandboxes.brig.cmd("run", "--pool", name, "--", "true"),
                                   env=sandboxes.brig.env(sandboxes.env()), cwd=str(brig.workspace),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # within the 2.5 s before it would say the daemon cannot make one
        assert waiting.poll() is None, waiting.communicate()  # it waits for a member
        assert sandboxes.brig_cmd("pool", "--stop", "--name", name).returncode == 0
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 125 and f"the pool '{name}' was stopped" in err, (out, err)
        assert "daemon is gone" not in err, err
    finally:
        if waiting and waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
        sandboxes.brig_cmd("pool", "--stop", "--name", name)


def _pools(sandboxes):
    r = sandboxes.brig_cmd("pool", "--list", "--json")
    assert r.returncode == 0, r
    return {p["key"]: p for p in json.loads(r.stdout)}


def test_pool_list_says_what_runs(brig, named):
    """brig pool --list: every running pool, its names, size, members
    ready and in use, its daemon and workspace, as the state root has
    them; a stopped pool is no longer listed."""
    sandboxes, name = named
    key = os.readlink(sandboxes.root / "pools" / "names" / name)
    daemon = json.loads((_pool_dir(sandboxes, name) / "pool.json").read_text())["supervisor_pid"]
    assert wait_until(lambda: len(_ready(sandboxes, name)) == 2, 30)
    p = _pools(sandboxes)[key]
    assert p == {"key": key, "names": [name], "size": 2, "ready": 2, "in_use": 0, "daemon_pid": daemon,
                 "workspace": str(sandboxes.brig.workspace), "failing": None}, p
    # a run holding a member: in use while it runs
    held = subprocess.Popen(sandboxes.brig.cmd("run", "--pool", name, "--", "sleep", "5"),
                            env=sandboxes.brig.env(sandboxes.env()), cwd=str(brig.workspace),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: _pools(sandboxes)[key]["in_use"] == 1, 30), _pools(sandboxes)
        # brig ls says which sandboxes are the pool's, and where each stands
        r = sandboxes.brig_cmd("ls", "--json")
        states = sorted(s["pool"]["state"] for s in json.loads(r.stdout) if s.get("pool", {}).get("key") == key)
        assert "in use" in states and len(states) >= 2, (states, r)
        assert "of the warm pool " + key in sandboxes.brig_cmd("ls").stdout
    finally:
        held.kill()
        held.communicate()
    r = sandboxes.brig_cmd("pool", "--list")
    assert r.returncode == 0 and name in r.stdout and key in r.stdout and str(daemon) in r.stdout, r
    r = sandboxes.brig_cmd("pool", "--list", "--size", "2")
    assert r.returncode == 125 and "expected --json" in r.stderr, r
    assert sandboxes.brig_cmd("pool", "--stop", "--name", name).returncode == 0
    assert key not in _pools(sandboxes)


def test_pool_stop_all_ends_every_pool(brig, named):
    """brig pool --stop --all: every pool of the caller ends, named or not
    (one whose options were forgotten too), with its daemon, members and
    names."""
    sandboxes, name = named
    r = sandboxes.brig_cmd("pool", "--size", "1", "--memory", "1G")  # unnamed, another policy
    assert r.returncode == 0, r
    pools = _pools(sandboxes)
    assert len(pools) == 2, pools
    daemons = [p["daemon_pid"] for p in pools.values()]
    r = sandboxes.brig_cmd("pool", "--stop", "--all")
    assert r.returncode == 0 and "2 pools stopped" in r.stderr, r
    assert all(not pid_alive(pid) for pid in daemons), daemons
    assert _pools(sandboxes) == {}
    assert not (sandboxes.root / "pools" / "names" / name).exists()
    assert not [n for n in sandboxes.ls() if n.startswith("pool-")], sandboxes.ls()
    r = sandboxes.brig_cmd("pool", "--stop", "--all")
    assert r.returncode == 0 and "0 pools stopped" in r.stderr, r


def test_two_names_of_one_pool_stop_one_at_a_time(brig, named):
    """A second `brig pool --name Q` with the same policy and workspace
    names the running pool too, and says so (its size was ignored without
    a word); stopping Q leaves the pool to P, and the last name ends it
    (before, stopping Q ended P's pool; found by attack34). BRIG_POLICY
    is refused by brig run --pool as --policy is (it was ignored)."""
    sandboxes, name = named
    other = name[:-1] + "q"
    r = sandboxes.brig_cmd("pool", "--size", "1", "--name", other)
    assert r.returncode == 0 and "ran already (size 2, named " + name in r.stderr, r
    key = os.readlink(sandboxes.root / "pools" / "names" / name)
    assert os.readlink(sandboxes.root / "pools" / "names" / other) == key
    r = sandboxes.brig_cmd("pool", "--stop", "--name", other)
    assert r.returncode == 0 and "no longer names its pool" in r.stderr, r
    assert not (sandboxes.root / "pools" / "names" / other).exists()
    r = _run(sandboxes, "--pool", name, "--", "echo", "still")
    assert r.returncode == 0 and r.stdout == "still\n", r
    policy = brig.workspace / "strict.json"
    policy.write_text('{"limits": {"memory": "64M"}}')
    for extra in ([], ["--timeout", "5s"]):  # the front end's path and the engine's
        r = _run(sandboxes, "--pool", name, *extra, "--", "echo", "ran", env={"BRIG_POLICY": str(policy)})
        assert r.returncode == 125 and "BRIG_POLICY" in r.stderr and "ran" not in r.stdout, r
    r = sandboxes.brig_cmd("pool", "--stop", "--name", name)
    assert r.returncode == 0 and "no longer names" not in r.stderr, r
    assert key not in _pools(sandboxes)


def _supervisor_inodes(bindir):
    """{pid: (role, inode of its program)} of every brig-supervisor running
    from bindir: the pool's daemon ("pool") and its members' ("pool-...")."""
    found = {}
    for d in pathlib.Path("/proc").iterdir():
        try:
            exe = os.readlink(d / "exe")
            argv = (d / "cmdline").read_bytes().split(b"\0")
            ino = os.stat(d / "exe").st_ino
        except (OSError, ValueError):
            continue
        if exe.startswith(f"{bindir}/brig-supervisor") and len(argv) > 1 and argv[0] == b"brig-supervisor":
            found[int(d.name)] = (argv[1].decode(), ino)
    return found


def test_a_pool_outlives_an_upgrade_of_brig_supervisor(brig, scratch):
    """An upgrade or a rebuild replaces brig-supervisor under a running
    pool (rename over it, as dpkg and the linker do). The daemon, whose
    own file that was, still finds the program where it started — before,
    /proc/self/exe named no file, it made no member again and every run
    after the pool's first members ended 125 — and its ready members,
    made by the old program, are made again by the new one, so a fix
    reaches the next run. Asserted on the host: which file each member's
    supervisor runs."""
    own = scratch / "bin"  # a copy of brig's programs of this test's alone: it replaces one
    own.mkdir()
    for f in list(brig.bindir.glob("libbrig.so*")) + [brig.bindir / n for n in ("brig", "brig-engine", "brig-supervisor")]:
        shutil.copy2(f, own / f.name)
        (own / f.name).chmod(0o755)
    sandboxes = Sandboxes(Brig(own, brig.mode, brig.base))
    name = marker("npup")[-20:]
    try:
        r = sandboxes.brig_cmd("pool", "--size", "2", "--name", name)
        assert r.returncode == 0, r
        old = os.stat(own / "brig-supervisor").st_ino
        members = lambda: {p: i for p, (role, i) in _supervisor_inodes(own).items() if role.startswith("pool-")}
        assert wait_until(lambda: len(members()) == 2, 20) and set(members().values()) == {old}, members()
        (daemon,) = [p for p, (role, _) in _supervisor_inodes(own).items() if role == "pool"]
        shutil.copy2(own / "brig-supervisor", own / "brig-supervisor.new")
        os.replace(own / "brig-supervisor.new", own / "brig-supervisor")
        new = os.stat(own / "brig-supervisor").st_ino
        assert new != old
        # the ready members are the new program's, soon, without a run
        assert wait_until(lambda: len(_ready(sandboxes, name)) == 2 and len(members()) == 2 and
                          set(members().values()) == {new}, 20), (members(), new, _ready(sandboxes, name))
        # and runs keep being served, past the pool's size, by members made after the change
        for i in range(4):
            r = _run(sandboxes, "--pool", name, "--", "echo", f"run{i}", timeout=90)
            assert r.returncode == 0 and r.stdout == f"run{i}\n", (i, r)
        assert wait_until(lambda: len(members()) == 2 and set(members().values()) == {new}, 20), members()
        assert _supervisor_inodes(own)[daemon] == ("pool", old)  # the daemon itself lived on
        log = (_pool_dir(sandboxes, name) / "log").read_text()
        assert "brig-supervisor was replaced" in log, log
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--name", name)
        problems = sandboxes.cleanup()
        assert not problems, problems
