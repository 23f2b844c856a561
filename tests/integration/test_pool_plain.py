"""A plain `brig run --pooled -- COMMAND` (no other option, no BRIG_POLICY)
served by the front end alone (src/front/brig.c, issue 19): its policy is
the engine's defaults, which the engine wrote down in the state root's
cache (persist/pool_claim.h), so the front end finds the pool, claims a
member and sends the run without exec'ing the engine. The member runs it
only if what it was made for is what the run brings (the policy's JSON,
the workspace and what stands there, the caller's context); anything else
goes to the engine, which says why. Root and rootless."""
import os
import shutil
import stat
import subprocess

import pytest

from cache_tamper import TAMPER, plant
from conftest import IS_ROOT
from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, run_popen, wait_until
from test_escape import attack

def _ready(sb):
    pools = sb.root / "pools"
    return sorted(p.name for d in pools.iterdir() if (d / "ready").is_dir() for p in (d / "ready").iterdir()) \
        if pools.exists() else []


@pytest.fixture
def plain_pool(sandboxes):
    """A pool of 2 for the default policy in the workspace, ready; stopped
    afterwards."""
    r = sandboxes.brig_cmd("pool", "--size", "2")
    assert r.returncode == 0, r
    assert wait_until(lambda: len(_ready(sandboxes)) == 2, 30), _ready(sandboxes)
    yield sandboxes
    sandboxes.brig_cmd("pool", "--stop")
    for name in list(sandboxes.ls()):
        sandboxes.rm(name)


def _cache_file(sb):
    files = list((sb.root / "cache").glob("pooled-plain-*"))
    assert len(files) == 1, files
    return files[0]


def _served_by_front_end(brig, sb, *args, env=None):
    """Run `brig run --pooled ARGS` and tell whether the process the test
    started was still brig's front end while the command ran (an exec of
    the engine replaces it: /proc/PID/exe says which)."""
    m = marker("plain")
    script = f"touch {brig.workspace}/{m}.started; while [ ! -e {brig.workspace}/{m}.go ]; do sleep 0.02; done; echo ran"
    p = run_popen(brig, "run", "--pooled", *args, "--", "sh", "-c", script, env=sb.env(env), text=True)
    try:
        assert wait_until(lambda: (brig.workspace / f"{m}.started").exists() or p.poll() is not None, 30)
        exe = os.readlink(f"/proc/{p.pid}/exe")
        (brig.workspace / f"{m}.go").touch()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return exe, p.returncode, out, err


def test_a_plain_pooled_run_needs_no_engine(brig, plain_pool):
    f = _cache_file(plain_pool)  # written by brig pool, for this build of the engine
    st = os.lstat(f)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_nlink == 1, st
    assert st.st_uid == brig.uid, st
    before = set(_ready(plain_pool))
    exe, rc, out, err = _served_by_front_end(brig, plain_pool)
    assert rc == 0 and out == "ran\n" and "not served" not in err, (rc, out, err)
    assert os.path.basename(exe) == "brig", f"the engine ran this plain pooled run: {exe}"
    assert len(before - set(_ready(plain_pool))) == 1, "no member of the pool served the run"
    # with any other option it is the engine's (and still the pool's)
    assert wait_until(lambda: len(_ready(plain_pool)) == 2, 30)
    exe, rc, out, err = _served_by_front_end(brig, plain_pool, "--quiet")
    assert rc == 0 and out == "ran\n" and "not served" not in err, (rc, out, err)
    assert os.path.basename(exe) == "brig-engine", exe


def test_brig_oci_is_never_served_by_a_pool(brig, plain_pool, scratch):
    """Under the name brig-oci the engine is the runc command line, which
    has no --pooled: the front end serves that name nothing either (found
    by an attack round: a plain `brig-oci run --pooled` was served)."""
    link = scratch / f"oci-{marker()[-8:]}"
    link.mkdir()
    (link / "brig-oci").symlink_to(brig.bindir / "brig")
    r = subprocess.run(brig.prefix() + [str(link / "brig-oci"), "run", "--pooled", "--", "echo", "ran"],
                       cwd=str(brig.workspace), env=brig.env(plain_pool.env()), capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "ran" not in r.stdout, r
    assert len(_ready(plain_pool)) == 2, "a member was used"


def test_a_command_line_longer_than_a_request_runs_in_a_new_sandbox(brig, plain_pool):
    """Arguments past what one control message holds (128 KiB) cannot go
    to a member: the run takes a new sandbox, saying why, as a cold run
    would have run it (found by an attack round: it ended 125)."""
    big = "a" * 120000
    r = plain_pool.brig_cmd("run", "--pooled", "--", "sh", "-c", 'echo ${#1} ${#2}', "x", big, big)
    assert r.returncode == 0 and r.stdout == "120000 120000\n", (r.returncode, r.stdout, r.stderr[-400:])
    assert "not served by the pool: the command and its environment are longer" in r.stderr, r.stderr[-400:]


def test_a_claim_from_another_pid_namespace_is_let_go(brig, plain_pool):
    """A run in a pid namespace of its own (unshare -p -f: the daemon cannot
    tell its pid from a host one) that a pool served: once its member has
    stopped, the claim goes with it (found by an attack round of session
    41: the claim stayed for good, the member listed in use, and the dead
    pool's directory never went)."""
    if brig.mode != "root":
        pytest.skip("ROOT ONLY: a pid namespace without a user namespace needs root")
    pools = plain_pool.root / "pools"
    r = subprocess.run(["unshare", "-p", "-f", "--", *brig.cmd("run", "--pooled", "--", "true")],
                       cwd=str(brig.workspace), env=brig.env(plain_pool.env()), capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "not served" not in r.stderr, r
    claimed = lambda: [c for d in pools.iterdir() if (d / "claimed").is_dir() for c in (d / "claimed").iterdir()]
    assert wait_until(lambda: claimed() == [], 30), f"the claim stayed: {claimed()}"


def test_a_plain_pooled_run_from_another_context_is_the_engines(brig, plain_pool):
    """TZ is part of what a cold run takes from its caller: no member was
    made with this one, so the front end finds no pool and the engine runs
    it in a new sandbox, saying why."""
    r = plain_pool.brig_cmd("run", "--pooled", "--", "sh", "-c", "echo $TZ", env={"TZ": "Europe/Paris"})
    assert r.returncode == 0 and r.stdout == "Europe/Paris\n", r
    assert "--pooled: not served by the pool: no pool runs for this policy" in r.stderr, r
    assert len(_ready(plain_pool)) == 2


@attack("pool-plain-moved-workspace", "the harness moves the last task's checkout away and makes a fresh one at the "
        "same path, then a plain `brig run --pooled` (served by the front end, without the engine)",
        "the request carries what stands at the workspace's path now; the member, made with the old tree, refuses "
        "it (ESTALE) before anything runs, and the engine runs the command in a new sandbox of the new tree")
def test_a_moved_workspace_is_never_served_the_old_tree(brig, plain_pool):
    m = marker("moved")
    old = brig.workspace.with_name("ws-old")
    os.rename(brig.workspace, old)
    brig.workspace.mkdir()
    brig.chown(brig.workspace)
    try:
        r = plain_pool.brig_cmd("run", "--pooled", "--", "sh", "-c", f"touch {brig.workspace}/{m}; echo ran")
        assert r.returncode == 0 and r.stdout == "ran\n", r
        assert (brig.workspace / m).exists(), "the command did not write the workspace that stands at the path now"
        assert not (old / m).exists(), "ATTACK WORKED: the run wrote the tree moved away"
        assert "not served by the pool" in r.stderr, r
    finally:
        plain_pool.brig_cmd("pool", "--stop")  # its members hold the old tree
        shutil.rmtree(old, ignore_errors=True)


@attack("pool-plain-cache-planted", "the file the front end reads a plain --pooled run's policy from (the state "
        "root's cache/pooled-plain-ID) holding the policy of another pool of the user's, one that passes FORGED=1 "
        "into its sandboxes: world- or group-writable, given to another user, with a second hard link, put there as "
        "a symlink, or copied in by a sandbox given the cache directory",
        "read only if a regular file of the user's with one link, writable by no one else, opened without following "
        "a link, in the state root's cache directory (0700, checked; every grant of it refused); else the run is the "
        "engine's, which computes the policy and writes the file anew. The same forgery written as brig writes it is "
        "believed (the test checks that first): who can write the file is what makes it trustworthy")
@pytest.mark.parametrize("how", TAMPER)
def test_a_tampered_plain_policy_file_is_never_trusted(brig, plain_pool, scratch, how):
    if how == "foreign-owner" and not IS_ROOT:
        pytest.skip("FOREIGN-OWNER CACHE NOT TESTED: giving a file to another user needs the suite to run as root")
    sb = plain_pool
    f = _cache_file(sb)
    good = f.read_bytes()
    head = b"\n".join(good.split(b"\n")[:2]) + b"\n"
    # the other pool: same workspace and caller, a policy that says so inside
    r = sb.brig_cmd("pool", "--size", "1", "--env", "FORGED=1")
    assert r.returncode == 0, r
    try:
        shown = sb.brig_cmd("policy", "show", "--env", "FORGED=1")
        assert shown.returncode == 0, shown
        forged = head + shown.stdout.rstrip("\n").encode()
        assert wait_until(lambda: len(_ready(sb)) == 3, 30), _ready(sb)
        probe = ["run", "--pooled", "--", "sh", "-c", "echo FORGED=${FORGED:-unset}"]
        # The forgery is good: written as brig writes it, it is believed.
        f.unlink()
        f.write_bytes(forged)
        f.chmod(0o600)
        brig.chown(f)
        r = sb.brig_cmd(*probe)
        assert r.returncode == 0 and r.stdout == "FORGED=1\n", ("the forged file is not one brig reads", r)
        assert wait_until(lambda: len(_ready(sb)) == 3, 30), _ready(sb)
        f.unlink()
        plant(f, forged, how, brig, scratch, sb.brig_cmd)
        if how == "from-inside":  # refused: as brig pool wrote it, the run below is the front end's again
            f.write_bytes(good)
            f.chmod(0o600)
            brig.chown(f)
        r = sb.brig_cmd(*probe)
        assert r.returncode == 0 and r.stdout == "FORGED=unset\n", f"ATTACK WORKED: a {how} policy file was trusted: {r}"
        # written anew as brig writes it, over the bad one
        st = os.lstat(f)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_nlink == 1, st
        assert st.st_uid == brig.uid and f.read_bytes() == good, st
    finally:
        sb.brig_cmd("pool", "--stop", "--env", "FORGED=1")
