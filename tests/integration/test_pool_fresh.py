"""A warm pool's member serves exactly one run and passes nothing on: no
process of a run outlives it, no second exec gets into a member, each of
many concurrent pooled runs gets a member of its own, a pooled run gets
the environment a cold run of its caller would, and what a run left in
/tmp, $HOME or its cgroup's counters is never seen by the next. Each check
is made on the host. Root and rootless."""
import concurrent.futures
import json
import os
import pathlib
import shlex
import subprocess
import time

import pytest

from conftest import SANITIZED
from persist_helpers import pid_alive, sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, pids_with, run_popen, sandbox_init, wait_until
from test_escape import attack
from test_persist_pool import _members, _ready, pool  # noqa: F401 (fixture)


def _pid1(pool, name):
    """Host pid of member NAME's pid 1."""
    return sandbox_init(pool.state(name)["supervisor_pid"])


def _pooled(pool, script, *opts, env=None, **kw):
    """brig run --pooled [opts] -- sh -c SCRIPT, with its report (a path of
    its own: runs at once must not share one)."""
    rep = pool.brig.reports / f"{marker('pooled')}.json"
    r = pool.brig_cmd("run", "--pooled", "--json-report", rep, *opts, "--", "sh", "-c", script, env=env, **kw)
    r.report = json.loads(rep.read_text()) if rep.exists() else None
    return r


def _served(r):
    assert r.report and r.report.get("pool", {}).get("served") is True, (r, r.report)
    return r.report["pool"]["member"]


def _claim_live(claim):
    """The run a claim names (MEMBER.PID-START-PIDNS) still runs? A run
    leaves its claim when it exits; the daemon removes both afterwards."""
    pid, start, _ = claim.split(".", 1)[1].split("-")
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19] == start
    except OSError:
        return False


def _claimed(pool):
    """Members held by a run now: claimed/MEMBER.PID-START-PIDNS of a live run."""
    return sorted(p.name.split(".")[0] for d in (pool.root / "pools").iterdir() for p in (d / "claimed").iterdir()
                  if _claim_live(p.name))


def _while_held(pool, script, on_host):
    """A pooled run that holds its member until the host has looked:
    on_host(member) runs while the run waits; then SCRIPT runs. Returns
    (the run's result, what on_host returned)."""
    ws = pool.brig.workspace
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        run = ex.submit(_pooled, pool, f"touch {ws}/holding; while [ ! -e {ws}/go ]; do sleep 0.02; done; {script}")
        assert wait_until(lambda: (ws / "holding").exists(), 30), run.result() if run.done() else "not started"
        (held,) = _claimed(pool)
        seen = on_host(held)
        (ws / "go").touch()
        return run.result(), (held, seen)


@attack("pool-run-leftover", "a pooled run starts a process of its own session (setsid, stdio closed) that "
        "writes into the workspace after brig run --pooled returned and lives on in the used member",
        "processes")
def test_pooled_run_leaves_no_process_behind(brig, pool):
    mark = marker("left")
    late = brig.workspace / f"late-{mark}"
    script = (f"setsid sh -c 'sleep 0.3; echo planted > {late}; sleep 60' {mark} </dev/null >/dev/null 2>&1 & "
              "echo started")
    r = _pooled(pool, script)
    assert r.returncode == 0 and r.stdout == "started\n", r
    member = _served(r)
    # the moment brig returned: nothing of the run runs on, so nothing can write later
    assert pids_with(mark) == [], f"ATTACK WORKED: a process of the pooled run outlived it: {pids_with(mark)}"
    assert not late.exists()
    # and the member it used stops for good
    assert wait_until(lambda: member not in _members(pool), 15), _members(pool)


def _claim_as_gone_run(pool, member):
    """What a brig run --pooled SIGKILLed right after its claim leaves: the
    rename out of ready/ to claimed/MEMBER.PID-START-PIDNS, done by a
    process that then is gone (the claim is nothing but that rename)."""
    claim = ("import os, sys; d = sys.argv[1]; pid = os.getpid(); "
             "start = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[19]; "
             "ns = os.stat('/proc/self/ns/pid').st_ino; "
             "os.rename(f'{d}/ready/{sys.argv[2]}', f'{d}/claimed/{sys.argv[2]}.{pid}-{start}-{ns}')")
    (pdir,) = (pool.root / "pools").iterdir()
    subprocess.run(["python3", "-c", claim, str(pdir), member], check=True)


@attack("pool-run-killed", "brig run --pooled SIGKILLed (a harness's timeout) while its command runs, and "
        "right after its claim, before its exec: the member it held, served or not, lived on with its "
        "supervisor, pid 1 and cgroups until the pool stopped (a member leaked per killed run)", "processes")
def test_killed_pooled_run_leaves_no_member(brig, pool):
    mark = marker("killed")
    ws = brig.workspace
    run = run_popen(pool.brig, "run", "--pooled", "--", "sh", "-c", f"touch {ws}/in; sleep 60; : {mark}",
                    env=pool.env())
    try:
        assert wait_until(lambda: (ws / "in").exists(), 30), run.communicate() if run.poll() is not None else "?"
        (served,) = _claimed(pool)
        served_state = pool.state(served)
    finally:
        run.kill()
        run.wait()
    unserved = _ready(pool)[0]
    unserved_state = pool.state(unserved)
    _claim_as_gone_run(pool, unserved)
    # on the host: each held member goes, its supervisor, processes, cgroups and claim with it
    for name, state in ((served, served_state), (unserved, unserved_state)):
        assert wait_until(lambda: not (pool.root / name).exists(), 15), \
            f"ATTACK WORKED: the member {name} of a killed pooled run lives on: {sorted(_members(pool))}"
        pool.assert_gone(name, state, marks=(mark,))
    # the daemon releases both claims, each just after its member (the
    # member's state goes first: release_gone_claims)
    def claims():
        return [p.name for d in (pool.root / "pools").iterdir() for p in (d / "claimed").iterdir()]
    assert wait_until(lambda: claims() == [], 10), claims()
    # and the pool still serves
    r = _pooled(pool, "echo served")
    assert r.returncode == 0 and r.stdout == "served\n" and _served(r), r


@attack("pool-member-second-exec", "brig exec into a warm pool's member, ready or serving a run (its name is "
        "in brig ls and the run's report): what it leaves in /tmp or as a process is there for the pooled run",
        "processes")
def test_pool_member_takes_no_other_exec(brig, pool):
    member = _ready(pool)[0]
    pid1 = _pid1(pool, member)
    mark = marker("plant")
    r = pool.exec(member, "--", "sh", "-c", f"echo {mark} > /tmp/planted; (sleep 60; : {mark}) &")
    assert r.returncode == 125 and "member of a warm pool" in r.stderr, r
    # on the host, in the member's own tree: nothing was planted
    assert not os.path.exists(f"/proc/{pid1}/root/tmp/planted"), "ATTACK WORKED: a brig exec planted a file"
    assert pids_with(mark) == []
    # nor a file copied in; the refusal names the sandbox once
    planted = brig.workspace / f"{mark}.txt"
    planted.write_text(mark)
    r = pool.brig_cmd("cp", str(planted), f"{member}:/tmp/planted")
    assert r.returncode == 125 and "member of a warm pool" in r.stderr, r
    assert r.stderr.count(f"sandbox '{member}'") == 1, r
    assert not os.path.exists(f"/proc/{pid1}/root/tmp/planted"), "ATTACK WORKED: brig cp planted a file"
    # a member serving a run takes no second exec either
    served, (held, r) = _while_held(pool, "cat /tmp/planted 2>/dev/null; echo end",
                                    lambda m: pool.exec(m, "--", "sh", "-c", "echo second > /tmp/planted"))
    assert r.returncode == 125 and "member of a warm pool" in r.stderr, r
    assert served.returncode == 0 and served.stdout == "end\n", f"ATTACK WORKED: {served}"
    assert _served(served) == held


@attack("pool-claim-race", "many brig run --pooled at once against a pool as large: two runs handed one "
        "member would share its processes, /tmp and cgroup", "processes")
def test_concurrent_pooled_runs_each_get_their_own_member(brig, sandboxes):
    n = 6
    r = sandboxes.brig_cmd("pool", "--size", str(n))
    assert r.returncode == 0, r
    ws = brig.workspace
    try:
        def one(i):
            return _pooled(sandboxes, f"readlink /proc/self/ns/pid > {ws}/ns-{i}; "
                                      f"while [ ! -e {ws}/go ]; do sleep 0.02; done; echo run{i}", timeout=90)

        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            runs = [ex.submit(one, i) for i in range(n)]
            assert wait_until(lambda: all((ws / f"ns-{i}").exists() for i in range(n)), 60), \
                [f.result() for f in runs if f.done()]
            # on the host, while all n hold their member: n claims, n members, n pid namespaces
            held = _claimed(sandboxes)
            host_ns = {m: os.readlink(f"/proc/{_pid1(sandboxes, m)}/ns/pid") for m in held}
            (ws / "go").touch()
            results = [f.result() for f in runs]
        seen = [(ws / f"ns-{i}").read_text().strip() for i in range(n)]
        members = [_served(r) for r in results]
        assert all(r.returncode == 0 for r in results), results
        assert len(held) == n and len(set(members)) == n and sorted(members) == held, (held, members)
        assert len(set(seen)) == n, f"ATTACK WORKED: two pooled runs shared a pid namespace: {seen}"
        assert [host_ns[m] for m in members] == seen, (host_ns, members, seen)
    finally:
        sandboxes.brig_cmd("pool", "--stop")


@attack("pool-env-of-creator", "brig run --pooled --keep-env TOKEN by a caller whose TOKEN (or TERM, HOME) "
        "differs from the environment brig pool was started from: served by a member made from that one, the "
        "command got the pool starter's values", "policy")
def test_pooled_run_gets_its_callers_environment(brig, sandboxes):
    start = {"TOKEN": "starters-token", "TERM": "starters-term"}
    r = sandboxes.brig_cmd("pool", "--size", "1", "--keep-env", "TOKEN", env=start)
    assert r.returncode == 0, r
    script = "echo $TOKEN $TERM $HOME"
    try:
        for env in ({"TOKEN": "callers-token", "TERM": "starters-term"},
                    {"TOKEN": "starters-token", "TERM": "dumb"},
                    {**start, "HOME": str(brig.base)}):
            cold = sandboxes.brig_cmd("run", "--keep-env", "TOKEN", "--", "sh", "-c", script, env=env)
            pooled = _pooled(sandboxes, script, "--keep-env", "TOKEN", env=env)
            assert cold.returncode == 0 and pooled.returncode == 0, (cold, pooled)
            assert "starters" not in pooled.stdout or pooled.stdout == cold.stdout, \
                f"ATTACK WORKED: the pooled run got the pool starter's environment: {pooled.stdout!r}"
            assert pooled.stdout == cold.stdout, (env, pooled, cold)
            assert pooled.report["pool"]["served"] is False, pooled.report
            assert "from this environment" in pooled.stderr, pooled
        # the starter's own environment is served, with the same result as cold
        cold = sandboxes.brig_cmd("run", "--keep-env", "TOKEN", "--", "sh", "-c", script, env=start)
        pooled = _pooled(sandboxes, script, "--keep-env", "TOKEN", env=start)
        assert pooled.stdout == cold.stdout and _served(pooled), (pooled, cold)
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--keep-env", "TOKEN", env=start)


def _umask(mask):
    return lambda: os.umask(mask)


@attack("pool-umask-of-creator", "brig run --pooled by a caller whose umask is 077, served by a member made "
        "from brig pool's 022: the files the command writes into the workspace are readable by every host user "
        "(a cold run's command inherits its caller's umask)", "files")
def test_pooled_run_gets_its_callers_umask(brig, sandboxes):
    r = sandboxes.brig_cmd("pool", "--size", "1", preexec_fn=_umask(0o022))
    assert r.returncode == 0, r
    ws = brig.workspace
    try:
        # a cold run as root with umask 077 ran at all (brig's /run mount point was made 0700)
        cold = sandboxes.brig_cmd("run", "--", "sh", "-c", f"touch {ws}/cold", preexec_fn=_umask(0o077))
        assert cold.returncode == 0, cold
        pooled = _pooled(sandboxes, f"touch {ws}/private", preexec_fn=_umask(0o077))
        assert pooled.returncode == 0, pooled
        # on the host: the file is as private as the caller's umask makes a cold run's
        for name in ("cold", "private"):
            mode = (ws / name).stat().st_mode & 0o777
            assert mode == 0o600, f"ATTACK WORKED: {name} is {mode:o} under the caller's umask 077"
        assert pooled.report["pool"]["served"] is False and "from this environment" in pooled.stderr, pooled
        # the starter's umask is served, with its own result
        same = _pooled(sandboxes, f"touch {ws}/shared", preexec_fn=_umask(0o022))
        assert _served(same) and (ws / "shared").stat().st_mode & 0o777 == 0o644, same
    finally:
        sandboxes.brig_cmd("pool", "--stop", preexec_fn=_umask(0o022))


def _fsize(limit):
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@attack("pool-ulimit-of-creator", "brig run --pooled by a caller that bounds its tool calls with ulimit -f "
        "(RLIMIT_FSIZE 64 KiB), served by a member made without: the command writes 1 MiB into the workspace "
        "(a cold run's command inherits its caller's limits)", "limits")
def test_pooled_run_keeps_its_callers_limits(brig, pool):
    ws = brig.workspace
    script = f"head -c 1048576 /dev/zero > {ws}/big; echo done"
    cold = pool.brig_cmd("run", "--", "sh", "-c", script.replace("big", "cold"), preexec_fn=_fsize(64 << 10))
    pooled = _pooled(pool, script, preexec_fn=_fsize(64 << 10))
    # on the host: neither file grew past the caller's limit
    for name in ("cold", "big"):
        size = (ws / name).stat().st_size
        assert size <= 64 << 10, f"ATTACK WORKED: {name} is {size} bytes past the caller's RLIMIT_FSIZE"
    assert pooled.report["pool"]["served"] is False and "from this environment" in pooled.stderr, pooled
    assert cold.returncode == 0 and pooled.returncode == 0 and pooled.stdout == "done\n", (cold, pooled)


@attack("pool-mount-view-of-creator", "brig run --pooled by a caller in a mount namespace of its own whose "
        "workspace is a scratch tmpfs over the real one (a harness isolating a task): served by a member built "
        "in brig pool's namespace, the command wrote the real workspace", "files")
def test_pooled_run_sees_its_callers_mounts(brig, pool):
    if brig.mode != "root":
        pytest.skip("ROOT ONLY: a rootless caller cannot make a mount namespace without a user namespace, "
                    "which changes its uid (already part of what names a pool)")
    ws = brig.workspace
    inner = " ".join(shlex.quote(a) for a in pool.brig.cmd("run", "--pooled", "--", "sh", "-c", f"touch {ws}/f"))
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        f"mount -t tmpfs scratch {ws} && cd {ws} && {inner} && test -e {ws}/f && echo in-scratch"],
                       cwd="/", env=pool.brig.env(pool.env()), capture_output=True, text=True, timeout=60)
    # on the host: the real workspace is untouched, the file went into the caller's scratch
    assert not (ws / "f").exists(), "ATTACK WORKED: the pooled run wrote the workspace its caller had covered"
    assert r.returncode == 0 and r.stdout == "in-scratch\n" and "from this environment" in r.stderr, r


def _cgroup_counter(pool, member, controller, name):
    for path in pool.state(member)["cgroups"]:
        f = pathlib.Path(path) / name
        if f"/{controller}/" in path and f.exists():
            return int(f.read_text().split()[0])
    return None


@attack("pool-state-carried", "a pooled run fills /tmp and $HOME, raises its cgroup's peak memory and process "
        "count: the next pooled run finds the files and reports the peaks", "files")
def test_next_pooled_run_starts_clean(brig, pool):
    dirty = ("echo dirt > /tmp/dirt; echo dirt > ~/dirt; export DIRT=1; "
             "for i in $(seq 40); do sleep 0.2 & done; python3 -c 'b = b\"x\" * (96 << 20)'; wait")
    r = _pooled(pool, dirty, timeout=90)
    assert r.returncode == 0, r
    first = _served(r)
    # on the host, the member's counters while it serves the second run
    second, (held, (pids_peak, mem_peak)) = _while_held(
        pool, "cat /tmp/dirt ~/dirt 2>/dev/null; echo DIRT=$DIRT",
        lambda m: (_cgroup_counter(pool, m, "pids", "pids.peak"),
                   _cgroup_counter(pool, m, "memory", "memory.max_usage_in_bytes")))
    assert held != first, (held, first)
    assert second.returncode == 0 and second.stdout == "DIRT=\n", f"ATTACK WORKED: {second.stdout!r}"
    assert wait_until(lambda: first not in _members(pool), 15), _members(pool)  # the used one went
    if pids_peak is not None:  # root: the member's own cgroups (rootless here: rlimits)
        assert pids_peak < 40, f"ATTACK WORKED: the second run's cgroup counts {pids_peak} processes"
    if mem_peak is not None:
        assert mem_peak < 64 << 20, f"ATTACK WORKED: the second run's cgroup peaked at {mem_peak} bytes"


@attack("landlock-ruleset-taken", "a command in a persistent sandbox takes the Landlock ruleset its pid 1 "
        "prepared once for every exec (pidfd_getfd, /proc/1/fd) and adds a rule letting the next exec write "
        "/proc", "landlock")
def test_prepared_ruleset_is_out_of_reach(brig, sandboxes):
    name, _ = sandboxes.create()
    steal = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]
got = []
for fd in range(64):
    try:
        pfd = os.pidfd_open(1)
        n = libc.syscall(438, pfd, fd, 0)  # pidfd_getfd
        if n >= 0:
            got.append(n)
    except OSError:
        pass
    try:
        got.append(os.open(f"/proc/1/fd/{fd}", os.O_RDONLY))
    except OSError:
        pass
for f in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{f}").startswith("anon_inode:[landlock"):
            got.append(int(f))
    except OSError:
        pass  # the listing's own descriptor
proc = os.open("/proc", os.O_PATH)
added = 0
for fd in got:
    rule = PathBeneath(1 << 1, proc)  # LANDLOCK_ACCESS_FS_WRITE_FILE beneath /proc
    added += libc.syscall(445, fd, 1, ctypes.byref(rule), 0) == 0  # landlock_add_rule
print("added", added)
"""
    r = sandboxes.exec(name, "--", "python3", "-c", steal)
    assert r.returncode == 0 and "added 0" in r.stdout, f"ATTACK WORKED: {r}"
    # on the host: the next exec still cannot write /proc (its comm would change)
    mark = marker("comm")
    ws = brig.workspace
    r2 = sandboxes.exec(name, "--detach", "--", "sh", "-c",
                        f"echo pwned > /proc/$$/comm; touch {ws}/{mark}; sleep 30", mark)
    assert r2.returncode == 0, r2
    assert wait_until(lambda: (ws / mark).exists(), 30), r2
    pids = pids_with(mark)
    assert pids, "the check's shell is not running"
    comms = [pathlib.Path(f"/proc/{p}/comm").read_text().strip() for p in pids if pid_alive(p)]
    assert "pwned" not in comms, f"ATTACK WORKED: an exec wrote /proc through a planted rule: {comms}"


def test_pooled_run_timings(brig, pool):
    """--timings of a served run: the pooled path's own steps, on stderr and in the report."""
    r = _pooled(pool, "true", "--timings")
    assert r.returncode == 0 and _served(r), r
    steps = r.report["timings"]["steps"]
    assert set(steps) == {"pool_lookup", "claim", "exec"}, r.report["timings"]
    assert all(isinstance(v, int) and v >= 0 for v in steps.values()), steps
    assert "brig: timings:" in r.stderr and "exec in the member" in r.stderr, r
    assert "of the exec in the member:" in r.stderr and "the command, in the sandbox" in r.stderr, r


@attack("pool-clock-start", "brig pool --clock-start 100s, and a run taken from a member made 1.5 s before "
        "(brig run --pooled --clock-start 100s): the member's time namespace took its offsets when it was made, "
        "so the run reads clocks past the value it was promised (and its manifest records)",
        "pool.c: brig pool refuses --clock-start (exit 125 naming it); brig run --pooled --clock-start runs in a "
        "new sandbox, said on stderr; the host reads the uptime the command wrote")
def test_a_pooled_run_reads_the_clock_it_was_promised(brig, sandboxes):
    made = sandboxes.brig_cmd("pool", "--size", "1", "--clock-start", "100s")
    try:
        time.sleep(1.5)  # the attack itself: the member ages before a run takes it
        out = brig.workspace / "uptime"
        r = sandboxes.brig_cmd("run", "--pooled", "--clock-start", "100s", "--", "sh", "-c",
                               f"cat /proc/uptime > {out}")
        assert r.returncode == 0, r
        up = float(out.read_text().split()[0])
        assert up < 101.0, f"ATTACK WORKED: the pooled run read an uptime of {up}, not about 100"
        assert "--clock-start needs a new sandbox" in r.stderr, r
        assert made.returncode == 125 and "a pool takes no --clock-start" in made.stderr, made
    finally:
        sandboxes.brig_cmd("pool", "--stop", "--clock-start", "100s")
        for name in list(sandboxes.ls()):
            sandboxes.rm(name)


def _memory_holds(pid, needle, unless_after=b""):
    """Whether any readable mapping of process PID holds NEEDLE, not right
    after UNLESS_AFTER (the host reads it: root may read a non-dumpable
    process)."""
    def found(buf):
        at = buf.find(needle)
        while at >= 0:
            if not unless_after or buf[max(0, at - len(unless_after)):at] != unless_after:
                return True
            at = buf.find(needle, at + 1)
        return False
    keep = len(needle) + len(unless_after)
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms or line.rstrip().endswith("[vvar]"):
                continue
            lo, hi = (int(x, 16) for x in span.split("-"))
            if hi - lo > 1 << 30:
                continue  # the sanitizers' shadow: reserved, never holds a string
            tail = b""
            try:
                mem.seek(lo)
                for at in range(lo, hi, 1 << 20):
                    chunk = tail + mem.read(min(1 << 20, hi - at))
                    if found(chunk):
                        return True
                    tail = chunk[-keep:]
            except (OSError, OverflowError, ValueError):
                continue
    return False


@attack("pool-context-secret-inside", "a pooled run with a bound secret (--secret NAME=env:VAR): the exec request "
        "carried the caller's context, the secret's real value among it, on to the member's pid 1 inside the "
        "sandbox, where a process that gets pid 1's memory reads it",
        "the supervisor compares the context and forwards the request with an empty one, the context wiped; "
        "the host reads pid 1's memory while the run holds it and finds no value")
def test_pooled_run_hands_no_secret_value_to_pid_1(brig, sandboxes):
    value = "real-value-" + marker("v")
    env = {"BRIG_TEST_TOKEN": value}
    secret = ["--allow-host", "api.example.test", "--secret", "TOK=env:BRIG_TEST_TOKEN", "--secret-host",
              "TOK=api.example.test"]
    r = sandboxes.brig_cmd("pool", "--size", "1", *secret, env=env)
    assert r.returncode == 0, r
    try:
        ws = brig.workspace
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            run = ex.submit(_pooled, sandboxes, f"echo \"$TOK\" > {ws}/seen; touch {ws}/holding; "
                            f"while [ ! -e {ws}/go ]; do sleep 0.02; done", *secret, env=env)
            assert wait_until(lambda: (ws / "holding").exists(), 30), run.result() if run.done() else "not started"
            (held,) = _claimed(sandboxes)
            # A sanitizer's runtime keeps its own copy of the environment
            # it started with (the supervisor's, which pid 1 is a clone
            # of): that copy, NAME=VALUE, is the sanitizers', not brig's.
            inside = _memory_holds(_pid1(sandboxes, held), value.encode(),
                                   b"BRIG_TEST_TOKEN=" if SANITIZED else b"")
            (ws / "go").touch()
            res = run.result()
        assert res.returncode == 0 and _served(res) == held, res
        assert (ws / "seen").read_text().startswith("brig-secret-TOK-"), "the command saw no placeholder"
        assert not inside, "the secret's real value is in the pool member's pid 1"
    finally:
        sandboxes.brig_cmd("pool", "--stop", *secret, env=env)
        for name in list(sandboxes.ls()):
            sandboxes.rm(name)
