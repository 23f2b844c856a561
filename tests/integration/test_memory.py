"""Memory that --memory must cover beyond a process's private heap (issue 13,
class 7): a memfd filled by write(), a MAP_SHARED region touched by forked
children, System V and POSIX shared memory. Root and rootless.

What the report says is enforced must be: each attack either stops within
the bound — asserted on the host side, with the peak of the sandbox's
cgroup that the supervisor reads from the host's cgroupfs, and the probe's
own count as a second witness — or the report names that kind under
limits.memory_not_bounded, stderr says so, and --require-limits refuses to
run it at all. As root this host has a v1 memory cgroup, so every kind
must stop; rootless (nobody, no delegated cgroup) only /dev/shm does.

The probe (tests/escape/probe_memory.c) stops by itself at the bound plus
a margin (MAX_MB): reaching it proves the limit failed without spending a
real GiB of the shared machine.
"""
import json
import os
import pathlib
import signal
import subprocess
import time
import uuid

import pytest

from conftest import IS_ROOT
from persist_helpers import sandboxes  # noqa: F401 (fixture)

from proc_helpers import kv

MiB = 1 << 20
BOUND_MB = 64
MAX_MB = 2 * BOUND_MB   # the probe stops here: past the bound, the limit did not hold


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (test_escape.py's marker)."""
    return pytest.mark.escape(ident, technique, control)


def probe_run(brig, kind, *extra):
    rep = brig.reports / f"mem-{uuid.uuid4().hex}.json"
    r = brig.run("run", "--json-report", str(rep), "--memory", f"{BOUND_MB}M", "--timeout", "60s", *extra,
                 "--ro-bind", f"{brig.program('probe_memory')}:/probe", "--",
                 "/probe", kind, str(MAX_MB), timeout=90)
    r.report = json.loads(rep.read_text()) if rep.exists() else None
    return r, kv(r.stdout)


def assert_bounded_or_said(brig, kind, name, out, r):
    """The attack stopped within the bound, or the report, stderr and
    --require-limits all say that NAME is not bounded."""
    rep = r.report
    assert rep is not None, r
    lim = rep["limits"]
    assert lim["memory_bytes"] == BOUND_MB * MiB, lim
    assert "stopped_by" in out or rep["reason"] == "oom", f"the probe gave no result: {r}"
    exceeded = out.get("stopped_by") == "max"
    if lim["memory_enforced_by"] == "cgroup":
        assert lim["memory_not_bounded"] == [], lim
        assert not exceeded, f"ATTACK WORKED: {kind} held {out.get('held_mb')} MiB under --memory {BOUND_MB}M: {r}"
        # the cgroup's own peak, read by the supervisor on the host
        assert rep["memory_peak_bytes"] is not None and rep["memory_peak_bytes"] <= BOUND_MB * MiB, rep
        assert int(out.get("held_mb", 0)) <= BOUND_MB, out
        return
    assert lim["memory_enforced_by"] == "rlimit", lim
    if not exceeded:
        assert int(out.get("held_mb", 0)) <= BOUND_MB, out
        return
    # Not bounded here: then the report, stderr and --require-limits say so.
    assert name in lim["memory_not_bounded"], f"UNBOUNDED BUT NOT REPORTED: {kind}: {lim}"
    assert any(d.startswith("memory:") and "not bounded" in d for d in rep["degraded"]), rep["degraded"]
    assert "brig: WARNING: memory:" in r.stderr and "not bounded" in r.stderr, r.stderr
    mark = f"ran-{uuid.uuid4().hex}"
    refused = brig.sh(f"touch {mark}; /probe {kind} {MAX_MB}", "--memory", f"{BOUND_MB}M", "--require-limits",
                      "--ro-bind", f"{brig.program('probe_memory')}:/probe", timeout=60)
    assert refused.returncode == 125, refused
    assert "--require-limits" in refused.stderr and "memory" in refused.stderr, refused
    assert "held_mb" not in refused.stdout, refused
    assert not (brig.workspace / mark).exists(), "--require-limits let the command run"


MEMFD_FILL = attack("memfd-fill", "memfd_create, then write() 1 GiB into it under --memory 64M: no mapping, so RLIMIT_DATA never sees it",
                    "memory cgroup (shmem pages are charged to the sandbox), or one brig runs under; without either, memfd is "
                    "listed as not bounded and --require-limits refuses")


@MEMFD_FILL
def test_memfd_filled_by_write(brig):
    r, out = probe_run(brig, "memfd")
    assert_bounded_or_said(brig, "memfd", "memfd", out, r)
    if brig.mode == "root":
        assert r.report["reason"] == "oom" or out.get("stopped_by") in ("ENOMEM", "ENOSPC"), r


@attack("shared-anon-fork", "one MAP_SHARED|MAP_ANONYMOUS region of 1 GiB, touched by four forked children (RLIMIT_DATA counts private mappings only)",
        "memory cgroup; without one, shared mappings are listed as not bounded and --require-limits refuses")
def test_shared_anonymous_memory_across_children(brig):
    r, out = probe_run(brig, "shared-fork")
    assert_bounded_or_said(brig, "shared-fork", "shared_mappings", out, r)


@attack("sysv-shm-fill", "System V shared memory: one 1 GiB segment, then 8 MiB segments attached and touched",
        "the sandbox's IPC namespace: shmmax and shmall set from --memory (root), and the memory cgroup; rootless without a cgroup, listed as not bounded and --require-limits refuses")
def test_sysv_shared_memory(brig):
    r, out = probe_run(brig, "sysv")
    assert_bounded_or_said(brig, "sysv", "sysv_shm", out, r)
    if brig.mode == "root":
        # kernel.shmmax of the sandbox's own IPC namespace is --memory
        assert out["one_gib_segment"] == "EINVAL", f"ATTACK WORKED: a 1 GiB segment under --memory 64M: {out}"
        assert r.report["limits"]["sysv_ipc_bytes"] == BOUND_MB * MiB, r.report["limits"]


def test_ipc_namespace_limits_follow_memory(brig):
    """The sandbox's IPC namespace's message and segment limits (ipc.c):
    what brig writes (root) and what a new namespace starts with, which
    brig leaves as it is where it is already the value (msgmnb always,
    msgmni under the default --memory)."""
    read = "cat /proc/sys/kernel/msgmnb /proc/sys/kernel/msgmni /proc/sys/kernel/shmmax"
    for memory, msgmni in ((None, 32000), ("64M", 64 * MiB // 16384)):
        r = brig.run("run", *(["--memory", memory] if memory else []), "--", "sh", "-c", read, timeout=30)
        assert r.returncode == 0, r
        mnb, mni, shmmax = (int(x) for x in r.stdout.split())
        assert mnb == 16384, r.stdout
        if brig.mode == "root":
            assert mni == msgmni and shmmax == (64 * MiB if memory else 4 << 30), (memory, r.stdout)
        else:  # rootless: the namespace's own (uid 0 of its user namespace is not mapped)
            assert mni == 32000, r.stdout


@attack("posix-shm-fill", "POSIX shared memory: shm_open in /dev/shm, then write() 1 GiB",
        "/dev/shm is a tmpfs of 64M (--shm-size), whatever the cgroup; and the memory cgroup")
def test_posix_shared_memory(brig):
    r, out = probe_run(brig, "posix-shm")
    assert_bounded_or_said(brig, "posix-shm", "tmpfs", out, r)
    assert out.get("stopped_by") != "max", f"ATTACK WORKED: {out}"
    if out.get("stopped_by") is not None and r.report["reason"] != "oom":
        assert out["stopped_by"] == "ENOSPC", out


def test_allow_degraded_memory_keeps_the_report_but_not_the_warning(brig):
    rep = brig.reports / f"mem-{uuid.uuid4().hex}.json"
    r = brig.run("run", "--json-report", str(rep), "--memory", "64M", "--allow-degraded", "memory", "--",
                 "true", timeout=30)
    assert r.returncode == 0, r
    assert "WARNING: memory" not in r.stderr, r  # (rootless: the pids line has its own --allow-degraded)
    lim = json.loads(rep.read_text())["limits"]
    if brig.mode == "rootless":
        assert "memfd" in lim["memory_not_bounded"], lim
    plain = brig.run("run", "--memory", "64M", "--", "true", timeout=30)
    assert plain.returncode == 0, plain
    assert ("brig: WARNING: memory:" in plain.stderr) == (lim["memory_enforced_by"] == "rlimit"), plain
    if lim["memory_enforced_by"] == "rlimit":
        # one line that names every way out, and says when --memory was not given
        line = next(x for x in plain.stderr.splitlines() if x.startswith("brig: WARNING: memory:"))
        for way in ("--memory 64 MiB bounds", "systemd-run -p MemoryMax=", "--allow-degraded memory",
                    "--require-limits"):
            assert way in line, (way, line)
        r = brig.run("run", "--", "true", timeout=30)
        assert "brig: WARNING: memory: --memory 4 GiB (the default) bounds" in r.stderr, r


# ---- a limit brig already runs under ------------------------------------------------

def own_v1_memory_group():
    """This process's group in the v1 memory hierarchy, or None."""
    root = pathlib.Path("/sys/fs/cgroup/memory")
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(",") and (root / "cgroup.procs").exists():
            return root / path.lstrip("/")
    return None


@pytest.fixture
def limited_group():
    """A v1 memory group of BOUND_MB, no swap, for brig to be started in
    (what `systemd-run -p MemoryMax=` or a container's limit gives on other
    hosts); removed afterwards."""
    if not IS_ROOT:
        pytest.skip("NOT ROOT: CANNOT MAKE A MEMORY CGROUP TO START BRIG IN")
    base = own_v1_memory_group()
    if base is None:
        pytest.skip("NO CGROUP V1 MEMORY HIERARCHY HERE: the inherited limit is tested through v1 only")
    g = base / f"brigtest-{uuid.uuid4().hex[:12]}"
    g.mkdir()
    try:
        (g / "memory.limit_in_bytes").write_text(str(BOUND_MB * MiB))
        if (g / "memory.memsw.limit_in_bytes").exists():
            (g / "memory.memsw.limit_in_bytes").write_text(str(BOUND_MB * MiB))
        yield g
    finally:
        # a brig killed by the OOM killer (the old code) leaves its group in ours
        for sub in [p for p in g.iterdir() if p.is_dir()] + [g]:
            for _ in range(100):
                try:
                    sub.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
        assert not g.exists(), f"test cgroup {g} left behind"


# A container's view: a cgroup namespace rooted at the group, and the
# memory hierarchy mounted afresh in a mount namespace of its own (the
# host's mounts are untouched).
CONTAINER = ["unshare", "-C", "-m", "--propagation", "private", "sh", "-c",
             'umount /sys/fs/cgroup/memory && mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory && exec "$@"', "sh"]


@MEMFD_FILL
@pytest.mark.parametrize("view", ["host", "container"])
def test_memfd_bounded_by_the_cgroup_brig_runs_in(brig, limited_group, view):
    """Row 111 again, with brig started inside a 64 MiB memory cgroup it
    cannot write — seen from the host, or as a container sees its own
    (cgroup namespace): the limit it runs under is found and reported
    (memory_enforced_by "inherited cgroup"), and the sandbox is the OOM
    killer's first choice (oom_score_adj 1000), not brig."""
    if view == "container" and brig.mode == "root":
        pytest.skip("ROOT IN A HALF-MADE CONTAINER (ONLY MEMORY REMOUNTED) WOULD MAKE ITS OTHER GROUPS AT THE HOST'S ROOTS")
    rep = brig.reports / f"mem-{uuid.uuid4().hex}.json"
    cmd = brig.cmd("run", "--json-report", str(rep), "--memory", f"{BOUND_MB}M", "--timeout", "60s",
                   "--ro-bind", f"{brig.program('probe_memory')}:/probe", "--", "/probe", "memfd", str(MAX_MB))
    if view == "container":
        cmd = CONTAINER + cmd
    cp = subprocess.run(["sh", "-c", f'echo $$ > {limited_group}/cgroup.procs && exec "$@"', "sh", *cmd],
                        cwd=brig.workspace, env=brig.env(), capture_output=True, text=True, timeout=90)
    out = kv(cp.stdout)
    assert out.get("stopped_by") != "max", f"ATTACK WORKED: {cp.stdout[-300:]} {cp.stderr}"
    # the host's own count of the group brig ran in
    peak = int((limited_group / "memory.max_usage_in_bytes").read_text())
    assert peak <= BOUND_MB * MiB, peak
    assert rep.exists(), f"brig itself was killed (no report): {cp.stderr}"
    r = json.loads(rep.read_text())
    lim = r["limits"]
    assert lim["memory_not_bounded"] == [], lim
    assert "WARNING: memory" not in cp.stderr, cp.stderr
    if brig.mode == "root":
        assert lim["memory_enforced_by"] == "cgroup", lim        # its own group, below ours
    else:
        assert lim["memory_enforced_by"] == "inherited cgroup", lim
        seen = str(limited_group) if view == "host" else "/sys/fs/cgroup/memory"   # the namespace's root
        assert lim["memory_inherited"] == {"bytes": BOUND_MB * MiB, "cgroup": seen}, lim
        assert r["reason"] == "oom" and cp.returncode == 137, (r, cp.stderr)
        assert "memory limit" in cp.stderr, cp.stderr


def test_doctor_tells_in_advance_how_memory_is_bounded(brig):
    doc = json.loads(brig.run("doctor", "--json", timeout=60).stdout)
    mem = doc["memory_limit"]
    rep = brig.reports / f"mem-{uuid.uuid4().hex}.json"
    r = brig.run("run", "--json-report", str(rep), "--memory", "64M", "--", "true", timeout=30)
    assert r.returncode == 0, r
    assert mem["enforced_by"] == json.loads(rep.read_text())["limits"]["memory_enforced_by"], (mem, r)
    text = brig.run("doctor", timeout=60).stdout
    line = [l for l in text.splitlines() if "memory limit" in l]
    assert len(line) == 1 and (line[0].lstrip().startswith("--") == (mem["enforced_by"] == "rlimit")), text


def test_persistent_sandbox_says_how_memory_holds(brig, sandboxes):
    name, _ = sandboxes.create("--memory", f"{BOUND_MB}M")
    how = sandboxes.state(name)["memory_enforced_by"]
    assert how == ("cgroup" if brig.mode == "root" else "rlimit"), sandboxes.state(name)
    if how == "cgroup":
        return
    r = sandboxes.create("--memory", f"{BOUND_MB}M", "--require-limits", check=False)[1]
    assert r.returncode == 125 and "--require-limits" in r.stderr and "memory" in r.stderr, r


def test_persistent_sandbox_says_memory_is_not_bounded(brig, sandboxes):
    """brig create and brig start print the warning brig run prints after
    its run (the supervisor runs detached), and `brig ls --json` says how
    --memory holds; --allow-degraded memory drops the line."""
    name, r = sandboxes.create("--memory", "64M")
    row = sandboxes.ls()[name]
    rlimit = row["memory_enforced_by"] == "rlimit"
    assert row["memory_enforced_by"] in ("rlimit", "cgroup", "inherited cgroup"), row
    assert (brig.mode == "rootless") == rlimit or not IS_ROOT, row
    said = f"brig: WARNING: create '{name}': memory: --memory 64 MiB bounds each process's private memory only"
    assert (said in r.stderr) == rlimit, r
    assert sandboxes.brig_cmd("stop", name).returncode == 0
    r = sandboxes.brig_cmd("start", name)
    assert r.returncode == 0 and (f"brig: WARNING: start '{name}': memory:" in r.stderr) == rlimit, r
    quiet, r = sandboxes.create("--memory", "64M", "--allow-degraded", "memory")
    assert f"'{quiet}': memory:" not in r.stderr, r
    assert "memory_warning" not in sandboxes.ls()[quiet], sandboxes.ls()[quiet]


def _memory_group(pid):
    """The file with the OOM kill count of the memory cgroup process PID is
    in (v1's memory.oom_control, v2's memory.events), or None."""
    for line in pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        f = (pathlib.Path(f"/sys/fs/cgroup/memory{path}/memory.oom_control") if "memory" in controllers.split(",")
             else pathlib.Path(f"/sys/fs/cgroup{path}/memory.events") if controllers == "" else None)
        if f and f.exists() and _oom_kills(f) is not None:
            return f
    return None


def _oom_kills(group):
    """Its oom_kill count, or None where the kernel keeps none (v1 before 4.13)."""
    counts = [int(v) for k, v in (line.split() for line in group.read_text().splitlines()) if k == "oom_kill"]
    return counts[0] if counts else None


def test_an_exec_killed_for_memory_at_its_very_start_names_the_limit(brig, sandboxes, hooks_bindir):
    """brig exec counts the cgroup's OOM kills from the exec's start: a
    command SIGKILLed while the count rose was ended by --memory, and says
    so. The count was read after the request had gone to pid 1, so a
    command killed before that read (the supervisor preempted, the host
    busy) ended as a bare "signal 9". A test hook stops the supervisor the
    moment the request has left; the command runs into the limit while it
    is stopped; then it goes on."""
    from conftest import Brig
    from proc_helpers import sandbox_init, wait_until
    hooked = Brig(hooks_bindir, brig.mode, brig.base)
    name = sandboxes.new_name("oom")
    sandboxes.names.append(name)
    r = hooked.run("create", name, "--memory", "64M", env=sandboxes.env({"BRIG_TEST_PAUSE_AT": "exec-sent"}))
    assert r.returncode == 0, r
    state = sandboxes.state(name)
    sup = state["supervisor_pid"]
    if state["memory_enforced_by"] != "cgroup":
        pytest.skip(f"MEMORY KILL NOT CHECKED {brig.mode.upper()}: no memory cgroup here (cgroup v1 without "
                    "delegation), --memory is RLIMIT_DATA")
    group = _memory_group(sandbox_init(sup))
    assert group and group != _memory_group(sup), f"the sandbox's memory cgroup, with an OOM kill count: {group}"
    before = _oom_kills(group)
    p = sandboxes.popen_exec(name, "--", "python3", "-c", "x = bytearray(200 << 20)", stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: "\nState:\tT" in pathlib.Path(f"/proc/{sup}/status").read_text(), 20), \
            "the supervisor never stopped at exec-sent"
        assert wait_until(lambda: _oom_kills(group) > before, 30), \
            "the command was not killed for memory while the supervisor was stopped"
        os.kill(sup, signal.SIGCONT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        try:
            os.kill(sup, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert p.returncode == 137 and "raise with --memory" in err, (p.returncode, err)
