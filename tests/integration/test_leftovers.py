"""Nothing left behind, whatever is killed when (issue 24; docs/security.md
rows 158-162). tests/leftovers.py counts what brig may leave; these tests
kill brig, a supervisor, a sandbox's pid 1 and the pool daemon at chosen
points and assert, on the host, that nothing stays once the next brig ran."""
import json
import os
import pathlib
import shlex
import signal
import stat
import subprocess
import sys
import time
import uuid

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import leftovers  # noqa: E402

IS_ROOT = os.geteuid() == 0
# Every test here counts what the whole host holds (leftovers.py, the soak).
pytestmark = pytest.mark.whole_host


def _dead_pid():
    """A pid that runs nothing now (a child we made and reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _own_v1_pids_group():
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.strip().split(":", 2)
            if "pids" in ctrls.split(","):
                return pathlib.Path("/sys/fs/cgroup/pids" + (path if path != "/" else ""))
    return None


def test_counter_sees_what_it_should(tmp_path):
    """The counter itself can fail: planted traces of each kind are seen,
    a live process's group is not."""
    run = tmp_path / "run"
    (run / "brig" / "cache").mkdir(parents=True)
    (run / "brig" / "cache" / "seccomp-0123456789abcdef.bpf").write_text("kept")
    before = leftovers.snapshot(state_roots=[run / "brig"])
    (run / "brig" / "sb1").mkdir()
    (run / "brig" / "cache" / "seccomp-0123456789abcdef.bpf.7.tmp").write_text("x")
    made = []
    parent = _own_v1_pids_group()
    if IS_ROOT and parent and parent.is_dir():
        dead, me = _dead_pid(), os.getpid()
        with open(f"/proc/{me}/stat") as f:
            my_start = f.read().rsplit(")", 1)[1].split()[19]
        made = [parent / f"brig-{dead}-12345", parent / f"brig-{me}-{my_start}"]
        for d in made:
            d.mkdir()
    try:
        new = leftovers.new_since(before, state_roots=[run / "brig"])
        assert new["files"] == {str(run / "brig" / "sb1"),
                                str(run / "brig" / "cache" / "seccomp-0123456789abcdef.bpf.7.tmp")}, new
        if made:
            # a dead brig's group counts; one whose brig (here: us) runs does not
            assert new["cgroups"] == {str(made[0])}, new
        else:
            pytest.skip("CGROUP PART NOT RUN: needs root and a v1 pids hierarchy")
    finally:
        for d in made:
            d.rmdir()


# ---- kills at chosen points ------------------------------------------------

from conftest import Brig, repetitions  # noqa: E402
from persist_helpers import Sandboxes, pid_alive  # noqa: E402
from proc_helpers import marker, wait_until  # noqa: E402
from test_escape import attack  # noqa: E402

SOAK = pathlib.Path(__file__).resolve().parents[1] / "soak" / "soak.py"
# brig run's cgroups are removed by its teardown helper after the status
# (core/teardown.c): "status-given" is brig before it hands them over (the
# helper itself: test_teardown_after_the_status_is_guaranteed)
RUN_STEPS = ("cgroup-recorded", "cgroup-made", "cloned", "released", "ended", "status-given")


sys.path.insert(0, str(SOAK.parent))
from soak import paused, proc_state as _proc_state  # noqa: E402


class World:
    """A test's view: its own state root (XDG_RUNTIME_DIR), the normal and
    the hooks build, and a snapshot of the host's traces before it began."""

    def __init__(self, brig, hooks_bindir):
        self.brig = brig
        self.sb = Sandboxes(brig)
        self.hooks = Brig(hooks_bindir, brig.mode, brig.base)
        self.root = self.sb.root
        self.exe_dirs = [brig.bindir, hooks_bindir]
        self.before = leftovers.snapshot(state_roots=[self.root])

    def env(self, extra=None):
        return self.sb.env(extra)

    def popen(self, *args, hooks=True, env=None):
        b = self.hooks if hooks else self.brig
        return subprocess.Popen(b.cmd(*args), cwd=str(b.workspace), env=b.env(self.env(env)), text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(self, *args, env=None, hooks=False, **kw):
        b = self.hooks if hooks else self.brig
        return b.run(*args, env=self.env(env), **kw)

    def kill_at(self, step, *args):
        """Start brig ARGS paused at `step`, SIGKILL the paused process."""
        p = self.popen(*args, env={"BRIG_TEST_PAUSE_AT": step})
        pids = paused(self.hooks.exe)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=30)
        assert pids, f"brig never reached the pause point {step}: rc={p.returncode} {err!r}"
        return pids

    def left(self):
        # the sandbox of a SIGKILLed supervisor takes a moment to die
        wait_until(lambda: not any(self.new().values()), 5, 0.1)
        return self.new()

    def assert_clean(self):
        left = self.left()
        assert not any(left.values()), leftovers.describe(left)

    def new_sandbox(self, *args):
        """brig create NAME ARGS; removed after the test if still there."""
        name = self.sb.new_name()
        self.sb.names.append(name)
        if args:
            r = self.run("create", name, *args)
            assert r.returncode == 0, r
        return name

    def new(self):
        new = leftovers.new_since(self.before, state_roots=[self.root], exe_dirs=self.exe_dirs)
        # files: this test's state root only (the temporary places are
        # shared with other suites running meanwhile; test_lifecycle and
        # the soak look there)
        new["files"] = {f for f in new["files"] if f.startswith(str(self.root) + "/")}
        return new


import signal  # noqa: E402


@pytest.fixture
def world(brig, hooks_bindir):
    w = World(brig, hooks_bindir)
    yield w
    problems = w.sb.cleanup()
    assert not problems, f"sanitizer reports in supervisor logs: {problems}"


@attack("sigkill-leaves-cgroup", "SIGKILL brig run at each step of its setup and teardown (group recorded, made, "
        "child cloned, released, ended, groups being removed)", "traces")
@pytest.mark.parametrize("step", RUN_STEPS)
def test_sigkill_at_each_setup_step_leaves_nothing(world, step):
    world.kill_at(step, "run", "--memory", "64M", "--pids", "64", "--", "sleep", "0.3")
    # the next brig of the same user removes what the dead one left
    assert world.run("run", "--", "true").returncode == 0
    world.assert_clean()


def _record_of(root, pid):
    """brig PID's run record in state root ROOT (runs/PID-START-PIDNS-SEQ), or None."""
    return next((f for f in (root / "runs").glob(f"{pid}-*")), None)


def test_the_next_run_takes_the_last_records_file(world):
    """A finished run leaves its record, emptied, as runs/spare; the next
    run's record is that very file (its inode), written afresh, and the
    next brig's sweep leaves the spare alone."""
    _skip_rootless_without_cgroups(world.brig, "run records")
    spare = world.root / "runs" / "spare"
    assert world.run("run", "--", "true").returncode == 0
    assert wait_until(spare.exists, 5), list((world.root / "runs").iterdir())
    assert spare.stat().st_size == 0 and (spare.stat().st_mode & 0o777) == 0o600
    ino = spare.stat().st_ino
    p = world.popen("run", "--", "true", env={"BRIG_TEST_PAUSE_AT": "cgroup-made"})
    try:
        pids = paused(world.hooks.exe, proc=p)
        assert pids, p.communicate()
        rec = _record_of(world.root, pids[0])
        assert rec is not None and not spare.exists(), list((world.root / "runs").iterdir())
        assert rec.stat().st_ino == ino, "the record is a new file: the spare was not taken"
        doc = json.loads(rec.read_text())
        assert doc["name"] == "brig-" + rec.name and len(doc["cgroups"]) >= 2, doc
        os.kill(pids[0], signal.SIGCONT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    assert wait_until(spare.exists, 5) and spare.stat().st_size == 0
    world.assert_clean()


def _start_ticks(pid):
    """Field 22 of /proc/PID/stat: when the process started, as run records name it."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def test_a_live_runs_record_stays_unless_written_in_another_boot(world):
    """The sweep keeps the record of a run whose owner lives, unless the
    record names another boot (its pid names another process now). The
    boot is read as brig writes it, {"boot":"ID",..., without a JSON parser
    (the engine opens jansson on first use: src/cli/jansson_lazy.c)."""
    assert world.run("run", "--", "true").returncode == 0  # the state root made
    runs = world.root / "runs"
    if not runs.exists():  # rootless here makes no cgroup, so no record, so no runs/
        runs.mkdir(mode=0o700)
        world.brig.chown(runs)
    me = os.getpid()  # alive for the whole test: the owner
    owner = f"{me}-{_start_ticks(me)}-{os.stat('/proc/self/ns/pid').st_ino}"
    boot = pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    this, other = runs / f"{owner}-901", runs / f"{owner}-902"
    try:
        for path, b in ((this, boot), (other, str(uuid.uuid4()))):
            path.write_text(json.dumps({"boot": b, "name": "brig-" + path.name, "cgroups": []},
                                       separators=(",", ":")))
            path.chmod(0o600)
            world.brig.chown(path)
        assert world.run("run", "--", "true").returncode == 0
        assert this.exists(), "the record of a live run of this boot was reaped"
        assert not other.exists(), "a record of another boot was kept: its pid names another process now"
    finally:
        this.unlink(missing_ok=True)
        other.unlink(missing_ok=True)


@attack("run-record-spare-planted", "runs/spare, the file a run's record is written into, planted in brig's state "
        "root as a symlink to a file of the user's, a hard link to one (a second name), a FIFO (an open for writing "
        "blocks) and a directory", "the spare is taken only as a plain file of brig's with one name, opened without "
        "following a link and without blocking; anything else is removed and the record made afresh: the file "
        "linked to unchanged, the run not stalled")
@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo", "dir"])
def test_a_planted_spare_is_not_written_through(world, tmp_path, kind):
    _skip_rootless_without_cgroups(world.brig, "run records")
    assert world.run("run", "--", "true").returncode == 0  # the state root and runs/ made
    runs = world.root / "runs"
    spare = runs / "spare"
    wait_until(spare.exists, 5)
    if spare.exists():
        spare.unlink()
    victim = (world.root if kind == "hardlink" else tmp_path) / "victim"
    victim.write_text("the user's own\n")
    victim.chmod(0o600)
    if kind == "symlink":
        spare.symlink_to(victim)
    elif kind == "hardlink":
        os.link(victim, spare)
    elif kind == "fifo":
        os.mkfifo(spare, 0o600)
    else:
        spare.mkdir(mode=0o700)
    r = world.run("run", "--", "true", timeout=30)
    assert r.returncode == 0, r
    assert victim.read_text() == "the user's own\n", f"ATTACK WORKED: the record was written through the {kind}"
    # what was planted is gone (a directory cannot be taken or removed as a
    # file: it stays, and the runs go on without a spare)
    if kind == "dir":
        assert spare.is_dir(), list(runs.iterdir())
        spare.rmdir()
    else:
        assert wait_until(lambda: spare.exists() and not spare.is_symlink() and spare.stat().st_nlink == 1 and
                          stat.S_ISREG(spare.stat().st_mode), 5), list(runs.iterdir())
    if kind == "hardlink":
        victim.unlink()
    world.assert_clean()


@attack("idmap-helper-orphan", "SIGKILL brig run (root) while the helper whose user namespace the idmapped "
        "workspace's mount uses is alive: the helper, a clone sharing brig's memory since issue 19, must not live on "
        "as an orphan holding brig's address space", "traces")
def test_sigkill_beside_the_idmap_helper_leaves_nothing(world):
    if world.brig.mode == "rootless":
        pytest.skip("ROOTLESS NOT RUN: a rootless brig makes no idmapped workspace (its workspace is the caller's "
                    "own), so no helper")
    world.kill_at("idmap-helper", "run", "--", "true")
    # (the dead brig's run record is the next brig's to remove)
    assert world.run("run", "--", "true").returncode == 0
    world.assert_clean()


def _own_cgroup(controller):
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.strip().split(":", 2)
            if controller in ctrls.split(","):
                return pathlib.Path(f"/sys/fs/cgroup/{controller}" + (path if path != "/" else ""))
    return None


def _groups_of(pid):
    return [g for g in leftovers._cgroups(None) | _live_groups() if f"/brig-{pid}-" in g]


def _procs_in(group):
    try:
        return (pathlib.Path(group) / "cgroup.procs").read_text().split()
    except OSError:
        return []


def _live_groups():
    out = set()
    for top in pathlib.Path("/sys/fs/cgroup").iterdir():
        for dirpath, dirnames, _ in os.walk(top):
            out |= {os.path.join(dirpath, d) for d in dirnames if d.startswith("brig-")}
    return out


def _skip_rootless_without_cgroups(brig, what):
    if brig.mode == "rootless":
        pytest.skip(f"ROOTLESS NOT RUN: {what} — this hybrid host gives nobody no cgroup (v1 controllers, nothing "
                    "delegated), so a rootless brig makes none to leave")


@attack("sigkill-leaves-cgroup", "SIGKILL a brig run that was started in another cgroup than the next brig "
        "(a CI job's scope, a systemd unit), one in a cgroup whose name has what the run record (JSON) must escape "
        "or carry as it is (a quote, a backslash, a tab, a letter beyond ASCII), and one whose parent has not "
        "reaped it yet (a zombie)", "traces")
@pytest.mark.parametrize("how", ["other-cgroup", "odd-name", "zombie"])
def test_sigkilled_brig_elsewhere_is_cleaned_by_the_next(world, brig, how):
    _skip_rootless_without_cgroups(brig, "a cgroup left in another parent")
    made = []
    cmd = brig.cmd("run", "--memory", "64M", "--pids", "64", "--", "sleep", "100")
    if how in ("other-cgroup", "odd-name"):
        odd = ' "quoted" back\\slash\ttab \u00fc' if how == "odd-name" else ""
        for ctrl in ("memory", "pids"):
            own = _own_cgroup(ctrl)
            d = own / f"brig-test-{os.getpid()}-{ctrl}{odd}"
            d.mkdir()
            made.append(d)
        moves = "; ".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in made)
        cmd = ["sh", "-c", f"{moves}; exec \"$@\"", "sh", *cmd]
    p = subprocess.Popen(cmd, cwd=str(brig.workspace), env=brig.env(world.env()), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: len(_groups_of(p.pid)) >= 2, 10), _live_groups()
        os.kill(p.pid, signal.SIGKILL)
        if how == "zombie":
            # not reaped: the next brig must not take the zombie for a live brig
            assert wait_until(lambda: _proc_state(p.pid) == "Z", 5)
        # the kernel's part first: the sandbox dies with its supervisor
        assert wait_until(lambda: not any(_procs_in(g) for g in _groups_of(p.pid)), 10)
        assert world.run("run", "--", "true").returncode == 0
        assert _groups_of(p.pid) == [], "the dead brig's cgroups survived the next run"
    finally:
        p.wait()
        for g in _groups_of(p.pid):  # a failed test's leak must not outlive it
            os.rmdir(g)
        for d in made:
            wait_until(lambda: not (d / "cgroup.procs").read_text().strip(), 5)
            d.rmdir()
    world.assert_clean()


def _marked_procs(mark):
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and mark.encode() in pathlib.Path(f"/proc/{d}/cmdline").read_bytes():
                out.append(int(d))
        except OSError:
            pass
    return out


@attack("teardown-after-status", "brig run gives the caller the command's status before the sandbox is torn "
        "down (pid 1 still ending, the cgroups still there): SIGKILL brig the moment it has handed the teardown to "
        "its helper, or stop the helper before it removes anything and SIGKILL it", "traces")
@pytest.mark.parametrize("victim", ["teardown-handed-over", "teardown-helper"])
def test_teardown_after_the_status_is_guaranteed(world, brig, victim):
    _skip_rootless_without_cgroups(brig, "no cgroup, so nothing is left for a helper to remove")
    p = world.popen("run", "--memory", "64M", "--pids", "64", "--", "sh", "-c", "sleep 30 & exit 7",
                    env={"BRIG_TEST_PAUSE_AT": victim})
    try:
        pids = paused(world.hooks.exe, proc=p)
        assert pids, f"brig never reached {victim}: rc={p.poll()}"
        if victim == "teardown-helper":
            # the caller has the status while the helper, stopped, has
            # removed nothing: the groups are still there
            out, err = p.communicate(timeout=30)
            assert p.returncode == 7, (p.returncode, err)
            assert _groups_of(p.pid), "the groups were gone before the helper ran: not the path under test"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        p.communicate(timeout=30)
        if victim == "teardown-helper":
            # its record stays: the next brig removes the groups
            assert world.run("run", "--", "true").returncode == 0
        else:
            # the helper finishes on its own, brig gone: no other brig runs
            assert wait_until(lambda: not _groups_of(p.pid), 5), f"LEFT BEHIND: {_groups_of(p.pid)}"
    finally:
        p.wait()
    world.assert_clean()


# a writer that stamps CLOCK_MONOTONIC (the host's: brig sets no offset)
# as fast as it can, told apart from brig's own command line by its mark
WRITER = ("import os, sys, time\n"
          "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
          "while True:\n"
          "    os.write(fd, b'%d\\n' % time.clock_gettime_ns(time.CLOCK_MONOTONIC))\n")
# the steps after the status (timings.c): not in its moment
AFTER_STATUS = ("init_exit", "teardown")


@attack("orphan-after-status", "the command leaves a background process that keeps writing into the workspace, "
        "to outlive the status brig gives its caller (and the report's walk of the workspace) now that the "
        "status no longer waits for the sandbox's pid 1 to end", "processes")
def test_nothing_of_the_sandbox_runs_once_the_status_is_given(world):
    mark = f"brig-orphan-{uuid.uuid4().hex[:8]}"
    out = world.brig.workspace / f"{mark}.txt"
    rep = world.brig.workspace / f"{mark}.json"
    script = (f"python3 -c \"$0\" {out.name} {mark} & while [ ! -s {out.name} ]; do :; done; exit 0")
    p = world.popen("run", "--timings", "--json-report", str(rep), "--", "sh", "-c", script, WRITER,
                    env={"BRIG_TEST_PAUSE_AT": "status-given", "BRIG_TEST_INIT_LINGER_MS": "300"})
    try:
        pids = paused(world.hooks.exe, proc=p)
        assert pids, f"brig never reached status-given: rc={p.poll()} {p.stderr.read() if p.poll() is not None else ''}"
        # brig has the status and wrote its report, pid 1 lingers (test
        # hook) before its end: on the host, the writer is gone already,
        # not only dying (brig's own command line names the mark; its
        # pid 1 blanked its copy)
        left = [pid for pid in _marked_procs(mark) if pid != p.pid]
        assert left == [], f"ATTACK WORKED: the command's background process outlived the status: {left}"
        size = out.stat().st_size
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        o, e = p.communicate(timeout=30)
        assert p.returncode == 0, e
        assert out.stat().st_size == size, "ATTACK WORKED: the workspace changed after the status"
        # and it wrote nothing after the moment the supervisor had the
        # status (the steps are whole microseconds: 1 us each of slack)
        t = json.loads(rep.read_text())["timings"]
        before = [v for k, v in t["steps"].items() if k not in AFTER_STATUS]
        assert "status" in t["steps"], t
        status_ns = t["t0_ns"] + sum(before) * 1000 + len(before) * 1000
        last = int(out.read_text().split()[-1])
        assert last <= status_ns, f"ATTACK WORKED: the writer ran {(last - status_ns) / 1000:.0f} us after the status"
    finally:
        p.kill()
        p.wait()
    world.assert_clean()


# processes that keep changing their pid: each forks its successor and
# exits at once, eight chains of them, so that a kill sweeping the
# sandbox's processes once always misses the ones made during it
RUNAWAY = ("import os, sys\n"
           "for i in range(8):\n"
           "    if os.fork() == 0:\n"
           "        while True:\n"
           "            try:\n"
           "                if os.fork():\n"
           "                    os._exit(0)\n"
           "            except OSError:\n"
           "                pass\n"
           "open(sys.argv[1], 'w').close()\n")


@attack("runaway-forks-at-exit", "the command leaves eight chains of processes that each fork their "
        "successor and exit at once (the pid changes all the time, as a kill that sweeps the sandbox once "
        "misses), then exits, to outlive the status that brig run now gives before the sandbox is torn down",
        "pid 1 kills every process of the pid namespace again after each reaping until none is left before it "
        "sends the status (end_everyone, init.c), else says it is not alone and the supervisor waits for its end "
        "as before; the host, at the moment brig has the status, finds no process of the chains, and after it "
        "nothing left behind")
def test_runaway_forks_do_not_outlive_the_status(world):
    mark = f"brig-runaway-{uuid.uuid4().hex[:8]}"
    started = world.brig.workspace / f"{mark}.started"
    # the command's last sleep is exec'd: a fork of it, with the chains holding
    # every one of the 64 pids, failed ("Cannot fork") one run in three
    script = f"python3 -c \"$0\" {started.name} {mark}; while [ ! -e {started.name} ]; do :; done; exec sleep 0.05"
    p = world.popen("run", "--pids", "64", "--", "sh", "-c", script, RUNAWAY,
                    env={"BRIG_TEST_PAUSE_AT": "status-given", "BRIG_TEST_INIT_LINGER_MS": "300"})
    try:
        pids = paused(world.hooks.exe, proc=p)
        assert pids, f"brig never reached status-given: rc={p.poll()} {p.stderr.read() if p.poll() is not None else ''}"
        assert started.exists(), "the chains never started: not the path under test"
        # gone, not only dying (a zombie's command line is empty)
        left = [pid for pid in _marked_procs(mark) if pid != p.pid]
        assert left == [], f"ATTACK WORKED: {len(left)} processes of the chains outlived the status: {left[:8]}"
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        o, e = p.communicate(timeout=30)
        assert p.returncode == 0, e
    finally:
        p.kill()
        p.wait()
    assert wait_until(lambda: not [q for q in _marked_procs(mark) if pid_alive(q)], 5), "LEFT BEHIND"
    world.assert_clean()


@attack("foreign-cgroup-removal", "groups named like a dead brig's but another user's (owned by nobody), and one "
        "named after a live process: the next root brig must leave both", "traces")
def test_only_our_own_dead_groups_are_removed(world, brig):
    _skip_rootless_without_cgroups(brig, "planted groups")
    parent = _own_cgroup("pids")
    dead = _dead_pid()
    with open("/proc/self/stat") as f:
        my_start = f.read().rsplit(")", 1)[1].split()[19]
    ns = os.stat("/proc/self/ns/pid").st_ino
    theirs = parent / f"brig-{dead}-1234-{ns}-1"       # dead, but nobody's
    live = parent / f"brig-{os.getpid()}-{my_start}-{ns}-1"  # ours, alive (this test)
    other_ns = parent / f"brig-{dead}-1234-{ns + 1}-1"   # another pid namespace's
    ours_dead = parent / f"brig-{dead}-1234-{ns}-2"      # ours and dead: goes
    for d in (theirs, live, other_ns, ours_dead):
        d.mkdir()
    os.chown(theirs, 65534, 65534)
    try:
        assert world.run("run", "--", "true").returncode == 0
        assert not ours_dead.exists(), "the sweep did not run"
        assert theirs.exists(), "another user's group was removed"
        assert live.exists(), "a live brig's group was removed"
        assert other_ns.exists(), "a group of another pid namespace was removed"
    finally:
        for d in (theirs, live, other_ns, ours_dead):
            if d.exists():
                d.rmdir()


@attack("dead-supervisor-traces", "SIGKILL the pool daemon: its ready members (live supervisors) served nobody "
        "and stayed forever, with the pool's directory", "traces")
def test_sigkilled_pool_daemon_members_removed_by_next_brig(world, brig):
    r = world.run("pool", "--size", "2", "--net", "none")
    assert r.returncode == 0, r
    st = json.loads(next(world.root.glob("pools/*/pool.json")).read_text())
    members = [json.loads((world.root / n.name / "state.json").read_text())
               for n in world.root.glob("pools/*/ready/*")]
    assert len(members) == 2, members
    os.kill(st["supervisor_pid"], signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(st["supervisor_pid"]), 5)
    # a pooled run now is served by a new sandbox, and says why
    r = world.run("run", "--pooled", "--net", "none", "--", "echo", "fresh")
    assert r.returncode == 0 and r.stdout == "fresh\n", r
    assert "the pool's daemon is gone" in r.stderr, r
    # the members see their daemon go (a pidfd) and stop: no process stays
    assert wait_until(lambda: not any(pid_alive(m["supervisor_pid"]) for m in members), 15), members
    # their files go with the next brig (the pooled run above may have been it)
    assert world.run("run", "--", "true").returncode == 0
    assert not (world.root / "pools").exists(), list(world.root.rglob("*"))
    assert not any((world.root / m["name"]).exists() for m in members)
    world.assert_clean()


import json  # noqa: E402


def _in_syscall(pid, nr):
    try:
        return pathlib.Path(f"/proc/{pid}/syscall").read_text().split()[0] == str(nr)
    except (OSError, IndexError):
        return False


def test_member_refuses_a_run_once_its_daemon_is_gone(world, brig):
    """The member, not the run, checks the daemon (its pidfd of it, at the
    exec): here the member's supervisor is stopped while the daemon dies
    and the run connects, so the run's request comes before the member's
    loop has seen the death; it is refused all the same and a new sandbox
    runs the command."""
    r = world.run("pool", "--size", "1", "--net", "none")
    assert r.returncode == 0, r
    st = json.loads(next(world.root.glob("pools/*/pool.json")).read_text())
    member = next(world.root.glob("pools/*/ready/*")).name
    sup = world.sb.state(member)["supervisor_pid"]
    os.kill(sup, signal.SIGSTOP)
    try:
        os.kill(st["supervisor_pid"], signal.SIGKILL)
        assert wait_until(lambda: not pid_alive(st["supervisor_pid"]), 5)
        p = world.popen("run", "--pooled", "--net", "none", "--", "echo", "fresh", hooks=False)
        # the run has sent its request and waits for the answer (poll, system call 7)
        assert wait_until(lambda: _in_syscall(p.pid, 7), 30), "the pooled run never sent its request"
    finally:
        os.kill(sup, signal.SIGCONT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and out == "fresh\n", (p.returncode, out, err)
    assert "the pool's daemon is gone" in err, err
    assert wait_until(lambda: not pid_alive(sup), 15)
    assert world.run("run", "--", "true").returncode == 0
    world.assert_clean()


def test_pooled_run_in_flight_survives_its_daemons_death(world, brig):
    """The member a run holds serves that run to its end, then goes."""
    r = world.run("pool", "--size", "1", "--net", "none")
    assert r.returncode == 0, r
    st = json.loads(next(world.root.glob("pools/*/pool.json")).read_text())
    p = world.popen("run", "--pooled", "--net", "none", "--", "sh", "-c", "echo started; sleep 1; echo done",
                    hooks=False)
    assert p.stdout.readline() == "started\n"
    os.kill(st["supervisor_pid"], signal.SIGKILL)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and out == "done\n", (p.returncode, out, err)
    # the replacement the daemon was making may still be stopping: a later
    # brig (here brig ls) finishes
    assert world.run("run", "--", "true").returncode == 0
    assert wait_until(lambda: world.run("ls").returncode == 0 and not (world.root / "pools").exists(), 15), \
        list(world.root.rglob("*"))
    world.assert_clean()


def _nice(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def _pooled(world, script):
    """brig run --pooled -- sh -c SCRIPT, served by the pool: its stdout."""
    r = world.run("run", "--pooled", "--net", "none", "--", "sh", "-c", script)
    assert r.returncode == 0 and "not served by the pool" not in r.stderr, r
    return r.stdout


def _autogroup_nice(pid):
    """The nice value of pid's session's scheduler group, None without autogroups."""
    try:
        return int(pathlib.Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except OSError:
        return None


def _paused_pool(world, step, script, why):
    """A pool of one whose processes stop at test hook STEP, one pooled run
    of SCRIPT (its stdout), and the one process then paused at STEP."""
    r = world.run("pool", "--size", "1", "--net", "none", hooks=True, env={"BRIG_TEST_PAUSE_AT": step})
    assert r.returncode == 0, r
    out = _pooled(world, script)
    pids = paused(world.hooks.exe)
    assert len(pids) == 1, f"{why} ({step}): {pids}"
    return out, pids[0]


@attack("pool-end-starved", "a pool member that served its run ends at nice 10, so that the next run does not "
        "share the cores with its end: stop the end there (a test hook), busy every core of the host at nice 0, "
        "let it go on; the end must still finish with nothing left, and the next pooled run's command must start "
        "at its caller's nice 0, not at the end's", "traces")
def test_served_members_end_yields_and_still_finishes(world, brig):
    nice = f"cut -d' ' -f19 /proc/self/stat; : {marker('end')}"
    mine = f"{os.getpriority(os.PRIO_PROCESS, 0)}\n"  # the caller's (0, unless the suite runs under nice)
    out, sup = _paused_pool(world, "pool-member-end", nice, "the served member's end never reached its low priority")
    try:
        assert out == mine
        (pid1,) = map(int, pathlib.Path(f"/proc/{sup}/task/{sup}/children").read_text().split())
        assert (_nice(sup), _nice(pid1)) == (max(10, int(mine)),) * 2, \
            "the served member's end runs at the next run's priority"
        # and in the idle class, so that the client, woken by the status, takes the core at once
        assert (os.sched_getscheduler(sup), os.sched_getscheduler(pid1)) == (os.SCHED_IDLE,) * 2, \
            "the served member's end keeps the core its client is woken on"
        # A nice value counts only within a session when the kernel groups
        # sessions (autogroup): the member's (its supervisor's and pid 1's) and
        # the daemon's groups yield too. Root may change them at will; rootless
        # is refused for a tenth of a second after any change on the host.
        (daemon,) = [json.loads(p.read_text())["supervisor_pid"] for p in world.root.glob("pools/*/pool.json")]
        if brig.mode == "root" and _autogroup_nice(sup) is not None:
            assert (_autogroup_nice(sup), _autogroup_nice(pid1), _autogroup_nice(daemon)) == (10, 10, 10), \
                "the served member's end and the pool daemon share the cores with the runs' sessions as equals"
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        try:
            os.kill(sup, signal.SIGCONT)
            assert wait_until(lambda: not pid_alive(sup) and not pid_alive(pid1), 30), \
                "ATTACK WORKED: the served member's end never finished on a busy host"
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        # the member made next starts as its daemon (nice 0): so does its run
        assert wait_until(lambda: any(world.root.glob("pools/*/ready/*")), 30), list(world.root.rglob("*"))
        assert _pooled(world, nice) == mine
        for pid in paused(world.hooks.exe):
            os.kill(pid, signal.SIGCONT)
        assert world.run("pool", "--stop", "--net", "none").returncode == 0
        assert world.run("run", "--", "true").returncode == 0
    finally:
        # a failed assertion above must not leave the member stopped at the
        # hook, with its pid 1, for good
        for pid in paused(world.hooks.exe, timeout=0.5):
            os.kill(pid, signal.SIGKILL)
    world.assert_clean()


@attack("pool-claim-left", "a pooled run leaves its claim (claimed/MEMBER.PID-START-PIDNS) when it exits, for "
        "the pool daemon to remove the used member: SIGKILL the daemon at that moment (a test hook), so that "
        "nobody removes it; the member's supervisor, pid 1, cgroups and state must still all go, by the member "
        "itself and the next brig", "traces")
def test_daemon_killed_before_it_removes_a_used_member_leaves_nothing(world, brig):
    _, daemon = _paused_pool(world, "pool-run-gone", "true", "the daemon never came to remove the used member")
    (claim,) = [p.name for p in world.root.glob("pools/*/claimed/*")]
    member = claim.split(".")[0]
    state = world.sb.state(member)
    os.kill(daemon, signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(daemon), 5)
    assert wait_until(lambda: not pid_alive(state["supervisor_pid"]), 15), "ATTACK WORKED: the used member lives on"
    assert world.run("run", "--", "true").returncode == 0  # the next brig sweeps the dead pool
    assert not (world.root / member).exists(), list((world.root / member).rglob("*"))
    world.assert_clean()


@attack("dead-supervisor-traces", "SIGKILL a persistent sandbox's supervisor while it runs, and brig create with its "
        "supervisor while it is being created: brig ls says dead and why, brig rm removes every trace", "traces")
@pytest.mark.parametrize("when", ["running", "creating"])
def test_dead_sandbox_shows_why_and_rm_removes_everything(world, brig, when):
    if when == "running":
        name = world.new_sandbox("--memory", "64M", "--workspace-mode", "overlay")
        os.kill(world.sb.state(name)["supervisor_pid"], signal.SIGKILL)
        want = "died without stopping it"
    else:
        name = world.new_sandbox()
        # the supervisor pauses once its state says "creating"; brig create waits for it
        p = world.popen("create", name, "--memory", "64M", env={"BRIG_TEST_PAUSE_AT": "supervisor-started"})
        sup = paused(world.hooks.exe)
        assert sup, p
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        os.kill(sup[0], signal.SIGKILL)
        want = "died while creating it"
    row = {}
    assert wait_until(lambda: row.update(world.sb.ls().get(name, {})) or row.get("status") == "dead", 10), row
    assert want in row.get("reason", ""), row
    table = world.run("ls")
    assert want in table.stdout and "brig rm" in table.stdout, table
    assert world.sb.rm(name).returncode == 0
    world.assert_clean()


@attack("dead-supervisor-traces", "SIGKILL brig commit after it wrote a file under its temporary name in the "
        "workspace, before the rename: the name stayed in the user's workspace", "traces")
@pytest.mark.parametrize("then", ["commit", "rm"])
def test_killed_commit_leaves_nothing_in_the_workspace(world, brig, then):
    name = world.new_sandbox("--workspace-mode", "overlay")
    assert world.sb.sh(name, "mkdir -p sub && echo new > sub/f && echo two > g").returncode == 0
    world.kill_at("commit-temp-made", "commit", name)
    temps = lambda: sorted(str(p) for p in brig.workspace.rglob(".brig-commit-*"))  # noqa: E731
    assert temps(), "the kill came before the temporary file: nothing tested"
    if then == "commit":
        r = world.run("commit", name)
        assert r.returncode == 0, r
        assert (brig.workspace / "sub" / "f").read_text() == "new\n" and (brig.workspace / "g").read_text() == "two\n"
    else:
        assert world.sb.rm(name).returncode == 0
    assert temps() == [], "a killed commit's temporary file stayed in the workspace"
    assert not list(world.root.glob(f"{name}/commit.*"))


@attack("write-refused-at-setup", "the state root's filesystem full (ENOSPC: a 16 KiB tmpfs in a private mount "
        "namespace): brig run with limits, brig create", "traces")
def test_full_state_root_fails_clearly_and_leaves_nothing(brig, scratch):
    run = scratch / "full"
    run.mkdir(mode=0o700)
    before = leftovers.snapshot()
    user = brig.prefix()
    b = " ".join(brig.cmd())
    script = f"""
        mount -t tmpfs -o size=16k,mode=0700 brigtest {run} || exit 99
        chown {brig.uid} {run}
        head -c 1M /dev/zero > {run}/filler 2>/dev/null; rm -f {run}/filler.small
        cd {brig.workspace}
        XDG_RUNTIME_DIR={run} {b} run --memory 64M --pids 64 -- true; echo "rc-run=$?"
        XDG_RUNTIME_DIR={run} {b} create fullsb; echo "rc-create=$?"
        find {run} -mindepth 1 ! -name filler | sort | sed 's/^/left: /'
    """
    assert user is not None
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                       text=True, timeout=60, env=brig.env())
    assert "rc-create=" in r.stdout, r
    lines = r.stdout.splitlines()
    rc_run = int(next(x for x in lines if x.startswith("rc-run="))[7:])
    rc_create = int(next(x for x in lines if x.startswith("rc-create="))[10:])
    cgroups_made = brig.mode == "root"
    if cgroups_made:
        assert rc_run == 125, r
        assert "No space left on device" in r.stderr and "XDG_RUNTIME_DIR" in r.stderr, r
    else:
        assert rc_run == 0, r  # no cgroup to record here: nothing the run needs to write
    assert rc_create == 125 and "No space left on device" in r.stderr, r
    create_line = next(x for x in r.stderr.splitlines() if "create 'fullsb'" in x)
    assert "XDG_RUNTIME_DIR" in create_line, r
    left = [x for x in lines if x.startswith("left: ") and not x.endswith(("/brig", "/brig/cache", "/brig/runs"))]
    assert left == [], left
    cgroups = leftovers.new_since(before, exe_dirs=[brig.bindir])["cgroups"]
    assert cgroups == set(), cgroups


@attack("write-refused-at-setup", "the cgroup controllers' files refuse writes (ENOSPC, EROFS, EACCES: a test hook) "
        "while brig sets --memory", "traces")
@pytest.mark.parametrize("errno_", [28, 30, 13])
def test_refused_cgroup_write_fails_clearly_and_leaves_nothing(world, brig, errno_):
    _skip_rootless_without_cgroups(brig, "refused cgroup writes")
    r = world.run("run", "--memory", "64M", "--", "true", hooks=True, env={"BRIG_TEST_CGROUP_WRITE_ERRNO": str(errno_)})
    assert r.returncode == 125, r
    assert "--memory: write /sys/fs/cgroup/" in r.stderr and os.strerror(errno_) in r.stderr, r
    world.assert_clean()


@attack("soak-kills", "50 runs (plain, proxy, filtered, limits hit, persistent create/exec/snapshot/rm, pooled) "
        "with SIGKILLs of brig, supervisor, pid 1 and the pool daemon, half at chosen setup steps", "traces")
def test_short_soak_leaves_nothing(brig, hooks_bindir):
    args = [sys.executable, str(SOAK), "--brig", brig.exe, "--hooks-brig", str(hooks_bindir / "brig"),
            "--runs", str(repetitions(50)), "--kill-fraction", "0.2", "--seed", "24", "--seconds", "120"]
    if brig.mode == "rootless":
        args.append("--rootless")
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "left: mounts 0, cgroups 0, netns 0, processes 0, files 0" in r.stdout, r.stdout


@attack("run-record-forged-path", "a run record in brig's state root (as one a sandbox could once write through "
        "`brig cp`) naming a dead run whose group path leads, through a symlink, to a cgroup of the right name "
        "elsewhere, with a live process in it", "the sweep acts only on a group named by the path brig made it at: "
        "no symlink on the way (realpath), a directory of that name on a cgroup filesystem, owned by the user; "
        "the process lives and its group stays")
def test_a_record_through_a_symlink_kills_nothing(world, tmp_path):
    if world.brig.mode == "rootless":
        pytest.skip("ROOT ONLY: the test's group to aim at is made by root, and a rootless sweep touches only its "
                    "user's own groups anyway")
    # a hierarchy to make the aimed-at group in: v1's pids, hybrid's or pure v2's unified one
    roots = [pathlib.Path(p) for p in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")]
    pids_root = next((r for r in roots if (r / "cgroup.procs").exists()), None)
    if pids_root is None:
        pytest.skip("NO CGROUP HIERARCHY HERE: the forged path needs a cgroup directory to aim at")
    assert world.run("run", "--", "true").returncode == 0  # the state root and runs/ made
    record = "99999-1-4026531836-x"
    parent = pids_root / f"brig-test-aim-{os.getpid()}"
    target = parent / f"brig-{record}"
    target.mkdir(parents=True)
    victim = subprocess.Popen(["sleep", "300"])
    try:
        (target / "cgroup.procs").write_text(str(victim.pid))
        link = tmp_path / "cglink"
        link.symlink_to(parent)
        runs = world.root / "runs"
        rec = runs / record
        rec.write_text(json.dumps({"boot": "x", "name": f"brig-{record}", "cgroups": [str(link / target.name)]}))
        rec.chmod(0o600)
        assert world.run("run", "--", "true").returncode == 0  # its sweep reads the record
        assert victim.poll() is None, "ATTACK WORKED: the sweep killed a process through the record's symlink"
        assert target.is_dir(), "ATTACK WORKED: the sweep removed a group through the record's symlink"
    finally:
        victim.kill()
        victim.wait()
        (world.root / "runs" / record).unlink(missing_ok=True)
        for d in (target, parent):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
