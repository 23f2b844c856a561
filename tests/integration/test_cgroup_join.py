"""The sandbox joins its cgroup v1 groups itself (issue 19).

On a v1 hierarchy (this host's memory, pids and cpu) there is no
CLONE_INTO_CGROUP: the supervisor opens each group's `tasks` file before
clone3 and the child, single-threaded, writes "0" to each before anything
of the command runs (controls/cgroup.c, cgroup_join_open). These tests
attack what that adds: the descriptors must never reach the sandbox, every
process of the sandbox must be inside every group the policy limits (the
limits really hold, read on the host), and a join that fails must fail the
run, never run it outside. Rootless, this host gives brig no v1 group: the
same checks show no descriptor and no group, and the limits fall back to
rlimits (reported as degraded).
"""
import json
import os
import pathlib
import re
import signal
import subprocess

import pytest

from proc_helpers import descendants, sandbox_init, wait_until

CGROOT = pathlib.Path("/sys/fs/cgroup")


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (the table's row)."""
    return pytest.mark.escape(ident, technique, control)


def v1_hierarchies():
    """{controller: mount dir} of the cgroup v1 hierarchies mounted here."""
    found = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, post = line.split(" - ", 1)
            fstype, _, opts = post.split()[:3]
            if fstype == "cgroup":
                for c in opts.split(","):
                    found.setdefault(c, pathlib.Path(pre.split()[4]))
    return found


V1 = v1_hierarchies()
# The host's v1 hierarchies where the default profile's groups (and --cpus) go.
V1_LIMITED = {"memory", "pids", "cpu"} <= set(V1)
# Root makes v1 groups here; rootless none (nothing writable), nor root on a pure v2 host.
def makes_v1_groups(brig):
    return brig.mode == "root" and V1_LIMITED


def groups_of(brig_pid):
    """{controller: group dir} of brig BRIG_PID's v1 groups."""
    found = {}
    for c, top in V1.items():
        if c in ("memory", "pids", "cpu"):
            for dirpath, dirs, _ in os.walk(top):
                for d in dirs:
                    if d.startswith(f"brig-{brig_pid}-"):
                        found.setdefault(c, pathlib.Path(dirpath) / d)
    return found


def fd_targets(pid):
    """Where each descriptor of host process PID leads."""
    res = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return res
    for n in names:
        try:
            res[int(n)] = os.readlink(f"/proc/{pid}/fd/{n}")
        except OSError:
            pass
    return res


def assert_in_groups(pid, groups, why):
    """Host process PID is in each of GROUPS ({hierarchy: dir}), by its /proc/PID/cgroup."""
    lines = cgroup_lines(pid)
    for h, g in groups.items():
        assert lines[h] == "/" + str(g.relative_to(V1[h])), f"{why}: process {pid}: {h} {lines[h]} (brig's: {g})"


def cgroup_lines(pid):
    """{controller: path} from the host's /proc/PID/cgroup."""
    res = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(","):
                res[c] = path
    return res


# The command: what it can find and try from inside, then it waits for
# the host's look (READY, then GO in the workspace).
INSIDE = r"""
import json, os, sys, time
out = {"fds": {}, "writes": {}}
for n in os.listdir("/proc/self/fd"):
    try:
        out["fds"][n] = os.readlink("/proc/self/fd/" + n)
    except OSError as e:
        out["fds"][n] = "error %d" % e.errno
# a descriptor /proc would not show: every number, by fstat
out["fstat"] = []
for n in range(3, 4096):
    try:
        os.fstat(n)
        out["fstat"].append(n)
    except OSError:
        pass
# pid 1 (brig's init) held them before it told the command to start
try:
    out["init_fds"] = os.listdir("/proc/1/fd")
except OSError as e:
    out["init_fds"] = "error %d" % e.errno
# leave the group: "0" to every descriptor past stdio, to pid 1's, and to
# any cgroup file this sandbox can reach
targets = ["/proc/self/fd/%d" % n for n in out["fstat"]] + ["/proc/1/fd/%d" % n for n in range(3, 64)]
for top in ("/sys/fs/cgroup", "/proc/1/root/sys/fs/cgroup"):
    for dirpath, dirs, files in os.walk(top):
        targets += [os.path.join(dirpath, f) for f in files if f in ("tasks", "cgroup.procs")]
for t in targets:
    try:
        fd = os.open(t, os.O_WRONLY)
    except OSError as e:
        if e.errno != 2:
            out["writes"][t] = "open %d" % e.errno
        continue
    try:
        os.write(fd, b"0")
        out["writes"][t] = "ok"
    except OSError as e:
        out["writes"][t] = "write %d" % e.errno
    os.close(fd)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "limits":
    # to the pids limit: children that wait on a pipe until we close it
    r, w = os.pipe()
    kids = []
    for i in range(200):
        try:
            pid = os.fork()
        except OSError as e:
            out["fork_refused"] = [len(kids), e.errno]
            break
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        kids.append(pid)
    os.close(w)
    for k in kids:
        os.waitpid(k, 0)
    # past the memory limit, in a child of its own
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(256 << 20)
            for i in range(0, len(b), 4096):
                b[i] = 1
        except MemoryError:
            os._exit(3)
        os._exit(0)
    out["hog_status"] = os.waitpid(pid, 0)[1]
out["cgroup"] = open("/proc/self/cgroup").read()
print(json.dumps(out), flush=True)
open("READY", "w").close()
for i in range(6000):
    if os.path.exists("GO"):
        break
    time.sleep(0.01)
"""


def run_and_look(brig, brig_args, mode, look):
    """brig run BRIG_ARGS -- python3 INSIDE MODE; LOOK(brig_pid) runs on the
    host while the command waits. Returns (returncode, inside's JSON, stderr)."""
    ws = brig.workspace
    for f in ("READY", "GO"):
        (ws / f).unlink(missing_ok=True)
    p = subprocess.Popen(brig.cmd("run", *brig_args, "--", "python3", "-c", INSIDE, mode), cwd=ws,
                         env=brig.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: (ws / "READY").exists() or p.poll() is not None, 60), "the command never got ready"
        assert p.poll() is None, p.communicate()
        look(p.pid)
    finally:
        (ws / "GO").touch()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, (out, err)
    return json.loads(out.splitlines()[-1]), err


def sandbox_pids(brig_pid):
    pids = descendants(brig_pid)
    assert len(pids) >= 2, f"no sandbox below brig {brig_pid}: {pids}"  # pid 1 and the command
    return pids


@attack("cgroup-join-fds", "look for the supervisor's descriptors of the cgroup v1 `tasks` files the sandbox joins "
        "through (its own /proc/self/fd and every number by fstat, pid 1's /proc/1/fd) and write \"0\" to them and "
        "to any cgroup file it can reach, to leave its groups",
        "the child writes each once, before anything of the command exists, and closes them (close_range before "
        "exec besides); pid 1 not dumpable; no cgroupfs inside")
def test_join_descriptors_never_reach_the_sandbox(brig):
    seen = {}

    def look(brig_pid):
        groups = groups_of(brig_pid)
        seen["groups"] = groups
        for pid in sandbox_pids(brig_pid):
            fds = fd_targets(pid)
            bad = {n: t for n, t in fds.items() if t.startswith(str(CGROOT)) or t.endswith("/tasks")}
            assert not bad, f"ATTACK WORKED: sandbox process {pid} holds cgroup files: {bad}"
            # whatever it wrote, it is still in each of brig's groups
            assert_in_groups(pid, groups, "ATTACK WORKED: the sandbox left a group")

    inside, err = run_and_look(brig, [], "", look)
    if makes_v1_groups(brig):
        assert {"memory", "pids"} <= set(seen["groups"]), seen  # the default limits, on this host's v1
    else:
        assert seen["groups"] == {}, seen
    leaks = {n: t for n, t in inside["fds"].items() if "cgroup" in t or t.endswith("/tasks")}
    assert not leaks, f"ATTACK WORKED: the command holds {leaks}"
    # 3: the descriptor os.listdir itself had open, gone by the fstat walk
    assert inside["fstat"] == [], f"ATTACK WORKED: open descriptors past stdio: {inside['fstat']} ({inside['fds']})"
    assert isinstance(inside["init_fds"], str), f"ATTACK WORKED: pid 1's descriptors listed: {inside['init_fds']}"
    worked = {t: v for t, v in inside["writes"].items() if v == "ok"}
    assert not worked, f"ATTACK WORKED: wrote to {worked}"


@attack("cgroup-join-membership", "every process of the sandbox (pid 1, the command, its children) outside one of the "
        "groups the policy limits: fork to --pids, allocate past --memory, with --cpus, and read on the host which "
        "groups each process is in and what the groups' counters saw",
        "the child joins every v1 group before the command exists (v2: born inside with CLONE_INTO_CGROUP); "
        "whatever it starts inherits them")
def test_every_sandbox_process_is_in_every_limited_group(brig):
    seen = {}

    def look(brig_pid):
        groups = groups_of(brig_pid)
        seen["groups"] = groups
        pids = sandbox_pids(brig_pid)
        seen["pids"] = pids
        for pid in pids:
            assert_in_groups(pid, groups, "a sandbox process outside a group")
        if groups:
            seen["pids.events"] = (groups["pids"] / "pids.events").read_text()
            seen["oom_control"] = (groups["memory"] / "memory.oom_control").read_text()
            seen["quota"] = (groups["cpu"] / "cpu.cfs_quota_us").read_text().strip()
            seen["tasks"] = {int(x) for h in groups for x in (groups[h] / "tasks").read_text().split()}

    inside, err = run_and_look(brig, ["--memory", "64M", "--pids", "32", "--cpus", "0.5"], "limits", look)
    assert "fork_refused" in inside, inside  # stopped, by the cgroup or RLIMIT_NPROC
    assert inside["fork_refused"][0] < 32, inside
    if brig.mode == "root" and not V1_LIMITED:
        pytest.skip("NO CGROUP V1 MEMORY, PIDS AND CPU HIERARCHIES HERE: the join is v1's (v2 is CLONE_INTO_CGROUP)")
    if brig.mode == "rootless":
        assert seen["groups"] == {}, seen  # no writable v1 group here: rlimits, said so
        assert "WARNING" in err or "degraded" in err or inside["hog_status"] >> 8 == 3, (inside, err)
        return
    assert {"memory", "pids", "cpu"} <= set(seen["groups"]), seen
    # the host's view: every process of the sandbox is in every group...
    assert set(seen["pids"]) <= seen["tasks"], seen
    # ... and the groups' limits held: forks refused at pids.max, the hog
    # killed by the memory cgroup's OOM killer, the quota set
    assert int(seen["pids.events"].split()[1]) >= 1, seen
    assert "oom_kill 1" in seen["oom_control"] or "oom_kill 2" in seen["oom_control"], seen
    assert os.WIFSIGNALED(inside["hog_status"]) and os.WTERMSIG(inside["hog_status"]) == 9, inside
    assert seen["quota"] == "50000", seen
    for line in inside["cgroup"].splitlines():
        _, ctrls, path = line.split(":", 2)
        if set(ctrls.split(",")) & {"memory", "pids", "cpu"}:
            assert path.startswith("/brig-"), inside["cgroup"]


@attack("cgroup-join-refused", "the sandbox's join of its v1 pids group fails (ENOSPC, EACCES: a test hook) and the "
        "command would run outside the group, unlimited", "the child fails the run before anything of the command "
        "runs: exit 125, the message names the flag and the hierarchy")
@pytest.mark.parametrize("errno_", [28, 13])
def test_a_refused_join_fails_the_run(brig, hooks_bindir, errno_):
    _pids_group_refused(brig, hooks_bindir, errno_, "JOIN", "join", "the command ran outside its group")


def _pids_group_refused(brig, hooks_bindir, errno_, hook, verb, worked):
    """brig run with the v1 pids group's HOOK (JOIN, MKDIR) failing with
    errno_: exit 125 naming --pids, VERB and the hierarchy, the command not
    run, no group left."""
    mark = brig.workspace / "RAN"
    mark.unlink(missing_ok=True)
    env = brig.env({f"BRIG_TEST_CGROUP_{hook}_ERRNO": str(errno_), f"BRIG_TEST_CGROUP_{hook}": "pids"})
    cmd = brig.prefix() + [str(hooks_bindir / "brig"), "run", "--", "touch", "RAN"]
    p = subprocess.Popen(cmd, cwd=brig.workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    if not makes_v1_groups(brig):
        # no v1 group here (rootless: nothing writable; or a pure v2 host)
        assert p.returncode == 0 and mark.exists(), (out, err)
        return
    assert p.returncode == 125, (out, err)
    assert not mark.exists(), f"ATTACK WORKED: {worked} ({err})"
    assert f"--pids: {verb} the sandbox's cgroup /sys/fs/cgroup/pids/" in err and "v1 pids hierarchy" in err, err
    assert os.strerror(errno_) in err, err
    assert wait_until(lambda: not groups_of(p.pid), 5), groups_of(p.pid)


@attack("cgroup-make-refused", "the sandbox's v1 pids group cannot be made (ENOSPC, EACCES: a test hook) after clone3, "
        "once the run counted it as enforcing --pids, and the command would run without it",
        "the supervisor fails the run before the child joins anything: exit 125, the message names the flag and the "
        "hierarchy, the memory group made before it removed")
@pytest.mark.parametrize("errno_", [28, 13])
def test_a_group_that_cannot_be_made_fails_the_run(brig, hooks_bindir, errno_):
    _pids_group_refused(brig, hooks_bindir, errno_, "MKDIR", "make", "the command ran without its pids group")


def _stopped(pid):
    """Host process PID is stopped (at a test_pause point: it SIGSTOPs itself)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


@attack("cgroup-join-before-groups", "the command (or anything pid 1 forks) runs, allocates or forks before its v1 "
        "groups exist and hold their limits: the supervisor makes them only after clone3, while the child sets up its "
        "network (a test hook stops it before the mkdirs, then before the limits are written)",
        "the child waits for the groups' descriptors before its mounts and anything of the command; the host sees "
        "pid 1 alone, outside any group, until then; the command runs inside, limited")
def test_nothing_of_the_command_runs_before_its_groups_hold(brig, hooks_bindir):
    if not makes_v1_groups(brig):
        pytest.skip("NO V1 GROUPS MADE HERE (rootless, or a pure v2 host): nothing is made after clone3")
    mark = brig.workspace / "RAN"
    mark.unlink(missing_ok=True)
    env = brig.env({"BRIG_TEST_PAUSE_AT": "cgroup-recorded,cgroup-made"})
    cmd = brig.prefix() + [str(hooks_bindir / "brig"), "run", "--memory", "64M", "--pids", "32", "--",
                           "sh", "-c", "touch RAN; cat /proc/self/cgroup"]
    p = subprocess.Popen(cmd, cwd=brig.workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        for step in ("cgroup-recorded", "cgroup-made"):
            assert wait_until(lambda: _stopped(p.pid) or p.poll() is not None, 30), f"never paused at {step}"
            assert p.poll() is None, p.communicate()
            init = sandbox_init(p.pid)
            # time for a child that did not wait to go on: to its mounts,
            # the command's fork, the command itself
            wait_until(lambda: mark.exists() or pathlib.Path(f"/proc/{init}/task/{init}/children").read_text(), 1)
            kids = pathlib.Path(f"/proc/{init}/task/{init}/children").read_text().split()
            assert kids == [], f"ATTACK WORKED: pid 1 forked before its groups held ({step}): {kids}"
            assert not mark.exists(), f"ATTACK WORKED: the command ran before its groups held ({step})"
            groups = groups_of(p.pid)
            lines = cgroup_lines(init)
            assert not any("brig-" in lines.get(c, "") for c in ("memory", "pids")), (step, lines)
            if step == "cgroup-recorded":
                assert groups == {}, groups  # recorded, not yet made
            else:
                assert {"memory", "pids"} <= set(groups), groups
                # made, the limits not yet written: pid 1 is not in them
                assert (groups["pids"] / "pids.max").read_text().strip() == "max", groups
            seen.append(step)
            os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, (out, err)
    assert seen == ["cgroup-recorded", "cgroup-made"] and mark.exists(), (seen, out, err)
    inside = cgroup_lines_of(out)
    assert "/brig-" in inside["memory"] and "/brig-" in inside["pids"], out


def cgroup_lines_of(text):
    """{controller: path} of a /proc/self/cgroup printed by the command."""
    res = {}
    for line in text.splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(","):
            res[c] = path
    return res


@attack("cgroup-v2-fd-refused", "the supervisor cannot open the sandbox's new cgroup v2 directory (EMFILE: a front end "
        "at its descriptor limit; a test hook) — the only way in is CLONE_INTO_CGROUP with that fd, and without it "
        "the sandbox ran outside the group the report named (here: a persistent sandbox's freezer group)",
        "the create fails: exit 125 naming the directory, the group removed, nothing of the sandbox left")
def test_a_v2_group_it_cannot_enter_fails_the_create(brig, hooks_bindir):
    from conftest import Brig
    from persist_helpers import Sandboxes
    sb = Sandboxes(Brig(hooks_bindir, brig.mode, brig.base))
    name = sb.new_name("v2fd")
    sb.names.append(name)
    before = set(cgroup_dirs("brig-"))
    try:
        r = sb.brig_cmd("create", name, env={"BRIG_TEST_CGROUP_V2_OPEN_ERRNO": "24"})
        if r.returncode == 0:
            # no writable v2 group here (rootless on this host): nothing to enter
            v2 = [g for g in sb.state(name).get("cgroups", []) if g.startswith(str(cgroup_v2_root()))]
            assert v2 == [], f"ATTACK WORKED: made with a v2 group it could not enter: {v2} ({r})"
            return
        assert r.returncode == 125, r
        assert "cgroup: open /sys/fs/cgroup/" in r.stderr and "CLONE_INTO_CGROUP" in r.stderr, r
        assert os.strerror(24) in r.stderr, r
        assert not (sb.root / name).exists(), "ATTACK WORKED: the sandbox was made"
        # its run record goes only once every group it names is gone (reaper.c);
        # and no new v2 group of a brig that is gone (the only hierarchy it got to)
        records = [f for f in (sb.root / "runs").glob("*") if f.name != "spare"]
        assert records == [], records
        assert wait_until(lambda: not dead_owners(set(cgroup_dirs("brig-")) - before), 5), \
            dead_owners(set(cgroup_dirs("brig-")) - before)
    finally:
        problems = sb.cleanup()
    assert not problems, problems


def dead_owners(dirs):
    """The groups among DIRS whose brig (brig-PID-...) is gone: left behind."""
    return {d for d in dirs if not os.path.exists(f"/proc/{os.path.basename(d).split('-')[1]}")}


def cgroup_v2_root():
    return CGROOT / "unified" if (CGROOT / "unified").is_dir() else CGROOT


def cgroup_dirs(prefix):
    """Every cgroup v2 directory whose name starts with PREFIX (on this hybrid
    host the v2 tree holds only persistent sandboxes' freezer groups: another
    test's SIGKILLed brig leaves its v1 groups for the next run, rarely one here)."""
    return [os.path.join(top, d) for top, dirs, _ in os.walk(cgroup_v2_root()) for d in dirs if d.startswith(prefix)]


def _host_cgroups_of(pid):
    """/proc/PID/cgroup as the host sees it, brig's group names made alike."""
    text = pathlib.Path(f"/proc/{pid}/cgroup").read_text()
    return sorted(re.sub(r"brig-\d+-\d+-\d+-\d+", "brig-X", line) for line in text.splitlines())


def test_the_usual_places_name_the_groups_the_mount_table_does(brig, hooks_bindir):
    """cgroup_create finds the hierarchies at their customary places
    (/proc/self/cgroup, statfs, statmount) without reading the mount
    table: the same groups, in the same hierarchies, as the mount table's
    reading (a test hook) gives, for every controller the limits use."""
    seen = {}
    # the usual places with no fallback (a hook): groups there are theirs
    for how, extra in (("usual", {"BRIG_TEST_CGROUP_USUAL_ONLY": "1"}),
                       ("mount table", {"BRIG_TEST_CGROUP_MOUNT_TABLE": "1"})):
        cmd = brig.prefix() + [str(hooks_bindir / "brig"), "run", "--allow-degraded", "memory", "--allow-degraded",
                               "pids", "--allow-degraded", "cpus", "--memory", "64M", "--pids", "64", "--cpus", "1",
                               "--", "sh", "-c", "echo ready; read x; exit 0"]
        p = subprocess.Popen(cmd, cwd=brig.workspace, env=brig.env(extra), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert p.stdout.readline() == b"ready\n", p.stderr.read()
            init = sandbox_init(p.pid)
            dirs = {c: re.sub(r"brig-\d+-\d+-\d+-\d+", "brig-X", str(d)) for c, d in groups_of(p.pid).items()}
            seen[how] = (_host_cgroups_of(init), dirs)
            p.stdin.close()
            assert p.wait(timeout=30) == 0, p.stderr.read()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert seen["usual"] == seen["mount table"], seen
    if makes_v1_groups(brig):
        assert sorted(seen["usual"][1]) == ["cpu", "memory", "pids"], seen
