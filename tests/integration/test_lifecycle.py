"""Lifecycle: signals reach the command, pid 1 reaps, nothing the command
started outlives the sandbox (also when the supervisor is SIGKILLed), and
no mounts or temp files are left on the host."""
import os
import pathlib
import select
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import leftovers  # noqa: E402

from conftest import mountinfo
from proc_helpers import kill_own, marker, pids_with, probe, run_popen, sh_with_report, wait_gone, wait_until


def _readline(proc, timeout=15):
    """One line of the child's stdout, or fail after timeout."""
    fd = proc.stdout.fileno()
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        r, _, _ = select.select([fd], [], [], max(left, 0))
        if not r:
            raise AssertionError(f"no line from brig within {timeout}s (got {buf!r})")
        c = os.read(fd, 1)
        if not c:
            break
        buf += c
    return buf.decode()


def _finish(proc, timeout=15):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=5)
        raise AssertionError(f"brig did not end within {timeout}s: {out!r} {err!r}")
    return out.decode(), err.decode()


# ------------------------------------------------------------------ signals

FORWARDED = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH]


@pytest.mark.parametrize("sig", FORWARDED, ids=lambda s: s.name)
def test_signal_reaches_command(brig, sig):
    name = sig.name[3:]
    script = (f"trap 'echo TRAPPED-{name}; exit 7' {name}; echo ready; "
              "i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; echo NOT-DELIVERED")
    p = run_popen(brig, "run", "--", "sh", "-c", script)
    try:
        assert _readline(p) == "ready\n"
        os.kill(p.pid, sig)
        out, err = _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 7, (out, err)
    assert f"TRAPPED-{name}" in out and "NOT-DELIVERED" not in out, (out, err)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_untrapped_signal_gives_128_plus_n(brig, sig):
    d = brig.base / "reports"
    d.mkdir(exist_ok=True)
    brig.chown(d)
    rep = d / f"{marker('rep')}.json"
    p = run_popen(brig, "run", "--json-report", str(rep), "--", "sh", "-c", "echo ready; exec sleep 60")
    try:
        assert _readline(p) == "ready\n"
        time.sleep(0.1)  # the exec of sleep
        os.kill(p.pid, sig)
        _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig
    import json
    report = json.loads(rep.read_text())
    assert report["exit_code"] == 128 + sig and report["signal"] == sig and report["reason"] == "signaled", report


def test_command_cannot_kill_its_init(brig):
    """pid 1 ignores what the command sends it (or forwards it back)."""
    r = brig.sh("kill -KILL 1 2>/dev/null; kill -STOP 1 2>/dev/null; kill -SEGV 1 2>/dev/null; sleep 0.3; "
                "echo ALIVE; exit 4", timeout=20)
    assert r.returncode == 4 and "ALIVE" in r.stdout, r


# ------------------------------------------------------------------ reaping

def test_pid1_reaps_orphans(brig):
    r, k = probe(brig, "zombie")
    assert r.returncode == 0, r
    assert "orphan_pid" in k and k.get("zombies") == "0", r


def test_no_defunct_left_by_shell(brig):
    r = brig.sh("(sleep 0.1 & exec sleep 0.4); for x in 1 2 3 4 5; do (true &); done; sleep 1; "
                "ps -eo stat= | grep -c '^Z' ; ps -e | grep -c '<defunct>'", timeout=20)
    assert r.returncode == 1 or r.returncode == 0, r
    assert r.stdout.split() == ["0", "0"], r


# ------------------------------------------------------- nothing outlives it

def test_background_children_die_with_command(brig):
    m = marker("bg")
    script = (f"sleep 1000 & sh -c 'sleep 1000; : {m}-plain' & "
              f"setsid sh -c 'sleep 1000; : {m}-setsid' & "
              f"nohup sh -c 'trap \"\" HUP TERM INT; sleep 1000; : {m}-nohup' >/dev/null 2>&1 & "
              f"sh -c 'sh -c \"sleep 1000; : {m}-daemon\" & exit 0' & "
              "sleep 0.5; exit 5")
    try:
        r = brig.sh(script, timeout=20)  # would time out if a child held stdout open
        assert r.returncode == 5, r
        assert wait_gone(m, 3), f"still running after brig exited: {pids_with(m)}"
    finally:
        kill_own(pids_with(m))


@pytest.mark.parametrize("ignore", [False, True], ids=["plain", "ignoring-signals"])
def test_supervisor_sigkill_takes_sandbox_down(brig, ignore):
    m = marker("sk")
    trap = "trap '' TERM HUP INT QUIT USR1 USR2; " if ignore else ""
    script = (f"{trap}sh -c '{trap}sleep 1000; : {m}-child' & setsid sh -c '{trap}sleep 1000; : {m}-setsid' & "
              f"echo ready; sleep 1000; : {m}-main")
    p = run_popen(brig, "run", "--", "sh", "-c", script)
    try:
        assert _readline(p) == "ready\n"
        assert wait_until(lambda: len(pids_with(m)) >= 4, 5), pids_with(m)  # supervisor, pid 1, command, children
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        assert wait_gone(m, 3), f"sandbox processes survived the supervisor's SIGKILL: {pids_with(m)}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_own(pids_with(m))


def test_supervisor_sigkill_during_setup_leaves_nothing(brig):
    """SIGKILL at random points of the start-up."""
    m = marker("early")
    try:
        for delay in (0.0, 0.001, 0.003, 0.006, 0.01, 0.02):
            p = run_popen(brig, "run", "--", "sh", "-c", f"sleep 1000; : {m}")
            time.sleep(delay)
            p.kill()
            p.wait(timeout=5)
        assert wait_gone(m, 3), pids_with(m)
    finally:
        kill_own(pids_with(m))


def test_supervisor_sigkill_with_pty(brig):
    """Same with a pseudo-terminal between them (--tty)."""
    m = marker("skpty")
    p = run_popen(brig, "run", "--tty", "--", "sh", "-c", f"echo ready; sleep 1000; : {m}",
                  stdin=subprocess.DEVNULL)
    try:
        assert "ready" in _readline(p)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        assert wait_gone(m, 3), pids_with(m)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_own(pids_with(m))


# ------------------------------------------------------------ host traces

def _tmp_snapshot():
    """brig-made entries in the usual temp places (the test suites' own
    scratch directories excluded, and brig's state roots, which a run keeps
    on purpose: they hold the syscall filter cache)."""
    return leftovers.temp_entries({"/run/brig", f"/tmp/brig-{os.geteuid()}", "/tmp/brig-65534"})


def _mounts_settled(before, timeout=2.0):
    """The mount table equals `before` (other suites may mount briefly)."""
    return wait_until(lambda: mountinfo() == before, timeout, 0.1)


@pytest.mark.whole_host  # the host's mount table and temporary places
def test_no_leftover_mounts_or_files(brig):
    before_mounts = mountinfo()
    before_tmp = _tmp_snapshot()
    m = marker("trace")
    # A normal run, a failing one, and one whose supervisor is killed.
    r = brig.sh("echo x > /tmp/f; echo y > ~/g; touch inws; true", timeout=20)
    assert r.returncode == 0, r
    r = brig.run("run", "--", "/no/such/cmd", timeout=20)
    assert r.returncode == 127, r
    p = run_popen(brig, "run", "--", "sh", "-c", f"echo ready; sleep 1000; : {m}")
    try:
        assert _readline(p) == "ready\n"
        p.kill()
        p.wait(timeout=5)
        assert wait_gone(m, 3)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_own(pids_with(m))
    if not _mounts_settled(before_mounts):
        after = mountinfo()
        added = sorted(set(after) - set(before_mounts))
        removed = sorted(set(before_mounts) - set(after))
        raise AssertionError(f"host mount table changed: added {added} removed {removed}")
    assert _tmp_snapshot() <= before_tmp, _tmp_snapshot() - before_tmp
    # The sandbox's /tmp and $HOME were its own tmpfs: nothing on the host.
    assert not (brig.home / "g").exists()
    assert (brig.workspace / "inws").exists()


def test_sandbox_has_its_own_mount_table(brig):
    host = {mp for mp, _ in mountinfo()}
    r = brig.sh("cut -d' ' -f5 /proc/self/mountinfo", timeout=20)
    assert r.returncode == 0, r
    inside = set(r.stdout.split())
    assert "/" in inside and "/proc" in inside, r
    # Host-only mount points such as /boot or /sys/fs/cgroup are absent.
    for mp in ("/sys/fs/cgroup", "/boot", "/run", "/sys/kernel/security"):
        if mp in host:
            assert mp not in inside, (mp, r.stdout)


def test_exit_code_does_not_wait_for_lingering_pipe_holders(brig):
    """A grandchild that keeps stdout open must not keep brig (or the
    caller reading its pipe) waiting once the command exits."""
    m = marker("pipe")
    try:
        # Waiting for the grandchild would run into the 20 s timeout (an error).
        r = sh_with_report(brig, f"sh -c 'sleep 1000; : {m}' & echo started; exit 0", timeout=20)
        assert r.returncode == 0 and r.stdout.strip() == "started", r
        assert r.report["exit_code"] == 0
        assert wait_gone(m, 3)
    finally:
        kill_own(pids_with(m))


@pytest.mark.whole_host  # the host's mount table and temporary places
def test_many_short_runs_leave_nothing(brig):
    m = marker("many")
    before = mountinfo()
    try:
        for i in range(10):
            r = brig.sh(f"sh -c 'sleep 1000; : {m}' & echo {i}", timeout=20)
            assert r.returncode == 0 and r.stdout.strip() == str(i), r
        assert wait_gone(m, 3), pids_with(m)
    finally:
        kill_own(pids_with(m))
    assert _mounts_settled(before), "host mount table changed"
