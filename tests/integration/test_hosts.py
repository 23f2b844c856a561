"""Hosts as they are (issue 14): no silent downgrade, the cgroup found where
`ip netns exec` hides it, refusals that name the restriction a host put on
user namespaces (AppArmor, sysctls, a container's seccomp profile), and
errors that say what to change (unknown policy keys, a command that is a
link into a hidden directory). Root and rootless.
"""
import contextlib
import json
import os
import pathlib
import select
import subprocess
import time
import uuid

import pytest

from conftest import IS_ROOT
from test_escape import attack

MiB = 1 << 20
BOUND_MB = 64


# ---- ip netns exec: a fresh sysfs without the cgroup mounts -----------------------

@pytest.fixture
def netns():
    """A network namespace of the test's own (`ip netns add`), deleted after."""
    if not IS_ROOT:
        pytest.skip("IP NETNS EXEC NOT TESTED: the suite is not running as root")
    name = f"brighosts{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


def in_netns(brig, netns, *args):
    """`ip netns exec NS [setpriv nobody] brig ARGS` (ip execs: same pid)."""
    return ["ip", "netns", "exec", netns] + brig.cmd(*args)


def own_groups(pid):
    """Every directory of the host's cgroup hierarchies, from the caller's
    own group up to the root, where brig-PID-* groups would be made."""
    mounts = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, post = line.split(" - ")
            fstype, _, opts = post.split()[:3]
            if fstype == "cgroup2":
                mounts[""] = pre.split()[4]
            elif fstype == "cgroup":
                for c in ("memory",):
                    if c in opts.split(","):
                        mounts[c] = pre.split()[4]
    found = []
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        key = "" if ctrls == "" else ("memory" if "memory" in ctrls.split(",") else None)
        if key is None or key not in mounts:
            continue
        d = pathlib.Path(mounts[key] + (path if path != "/" else ""))
        while True:
            found += list(d.glob(f"brig-{pid}-*"))
            if str(d) == mounts[key]:
                break
            d = d.parent
    return found


def memory_limit_of(group):
    for f in ("memory.max", "memory.limit_in_bytes"):
        p = group / f
        if p.exists():
            return int(p.read_text().split()[0])
    return None


@contextlib.contextmanager
def waiting(cmd, **kw):
    """Popen CMD (a command that says "ready" and then reads a line) with
    pipes; yields it and its output until then once ready; then lets it go
    on and end with 0."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    try:
        out = read_until(p.stdout, "ready")
        assert "ready" in out, f"the command did not start: {out}"
        yield p, out
        p.stdin.write(b"go\n")
        p.stdin.close()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def read_until(stream, want, seconds=20):
    """Lines of STREAM (a pipe) until one contains WANT; all of them."""
    got = b""
    end = time.monotonic() + seconds
    while want.encode() not in got and time.monotonic() < end:
        ready, _, _ = select.select([stream], [], [], 0.2)
        if ready:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            got += chunk
    return got.decode(errors="replace")


@attack("netns-exec-hidden-cgroup", "under `ip netns exec` (a fresh sysfs: no cgroup mounts) a memfd filled by write() past --memory 64M", "cgroup")
def test_ip_netns_exec_finds_the_hidden_memory_cgroup(brig, netns):
    """Under `ip netns exec` /sys is a fresh sysfs without /sys/fs/cgroup's
    mounts: brig ran on RLIMIT_DATA alone, so a memfd filled by write()
    grew past --memory. As root brig reaches the hierarchies it lives in
    through a detached mount: its group exists on the host during the run
    with the limit, and the memfd hog is OOM-killed within the bound.
    Rootless it cannot, and says so on stderr before the command runs."""
    with waiting(in_netns(brig, netns, "run", "--memory", f"{BOUND_MB}M", "--", "sh", "-c",
                          "ls -l /proc/self/fd/ /proc/1/fd/ 2>&1; echo ready; read x"),
                 cwd=brig.workspace, env=brig.env()) as (p, out):
        # brig's detached mount of the hierarchy (a link to "/") stays brig's
        links = [ln.split(" -> ")[1] for ln in out.splitlines() if " -> " in ln]
        assert links and not [t for t in links if t == "/" or "cgroup" in t], out
        groups = own_groups(p.pid)
        # said at the start, while the command still runs, not only after
        early = read_until(p.stderr, "WARNING: memory:", seconds=2 if brig.mode == "root" else 20)
        if brig.mode == "root":
            assert groups, f"NO CGROUP: brig made no group on the host under ip netns exec: {early}"
            assert any(memory_limit_of(g) == BOUND_MB * MiB for g in groups), groups
            assert "WARNING: memory:" not in early, early
        else:
            assert not groups, groups
            assert "brig: WARNING: memory: --memory 64 MiB bounds each process's private memory only" in early, early
    assert not own_groups(p.pid), "the group outlived the run"
    doctor = json.loads(subprocess.run(in_netns(brig, netns, "doctor", "--json"), env=brig.env(),
                                       capture_output=True, text=True, timeout=60).stdout)
    mem = doctor["memory_limit"]
    if brig.mode == "root":
        assert mem["enforced_by"] == "cgroup" and "not mounted here" in mem["detail"], mem
    else:
        assert mem["enforced_by"] == "rlimit", mem

    rep = brig.reports / f"hosts-{uuid.uuid4().hex}.json"
    cp = subprocess.run(in_netns(brig, netns, "run", "--json-report", str(rep), "--memory", f"{BOUND_MB}M",
                                 "--ro-bind", f"{brig.program('probe_memory')}:/probe", "--",
                                 "/probe", "memfd", str(2 * BOUND_MB)),
                        cwd=brig.workspace, env=brig.env(), capture_output=True, text=True, timeout=90)
    report = json.loads(rep.read_text())
    lim = report["limits"]
    if brig.mode == "root":
        assert lim["memory_enforced_by"] == "cgroup", (lim, cp.stderr)
        assert "stopped_by=max" not in cp.stdout, f"ATTACK WORKED: the memfd outgrew --memory: {cp.stdout}"
        assert report["reason"] == "oom" or "stopped_by=" in cp.stdout, (report["reason"], cp.stdout, cp.stderr)
        assert report["memory_peak_bytes"] <= BOUND_MB * MiB, report["memory_peak_bytes"]
    else:
        assert lim["memory_enforced_by"] == "rlimit", lim
        assert "memfd" in lim["memory_not_bounded"], lim
        assert any(d.startswith("memory:") for d in report["degraded"]), report["degraded"]


def test_degraded_limits_are_said_once_each_and_can_be_accepted(brig):
    """A limit no cgroup enforces is one stderr line each (memory, pids,
    cpus), in the report too; --allow-degraded NAME drops that line only."""
    rep = brig.reports / f"hosts-{uuid.uuid4().hex}.json"
    r = brig.run("run", "--json-report", str(rep), "--cpus", "1", "--pids", "100", "--", "true")
    assert r.returncode == 0, r
    report = json.loads(rep.read_text())
    lines = [x for x in r.stderr.splitlines() if x.startswith("brig: WARNING: ")]
    if report["limits"]["enforced_by"] == "cgroup":
        assert lines == [], r
        return
    said = {x.split(":")[2].strip(): x for x in lines}
    assert len(said) == len(lines), lines  # one line per control
    assert "--allow-degraded pids" in said["pids"] and "--pids 100 is held by RLIMIT_NPROC" in said["pids"], lines
    assert "--cpus 1.00 is not enforced" in said["cpus"] and "--allow-degraded cpus" in said["cpus"], lines
    assert any(d.startswith("pids:") for d in report["degraded"]), report["degraded"]
    assert any(d.startswith("cpus:") for d in report["degraded"]), report["degraded"]
    r = brig.run("run", "--cpus", "1", "--pids", "100", "--allow-degraded", "pids", "--allow-degraded", "cpus",
                 "--allow-degraded", "memory", "--", "true")
    assert r.returncode == 0 and "WARNING" not in r.stderr, r


# ---- refusals that say what to change ---------------------------------------------

def test_unknown_policy_key_lists_the_keys_of_its_place(brig):
    f = brig.base / "p.json"
    f.write_text('{"network": {"allow": ["example.org"]}}')
    r = brig.run("run", "--policy", str(f), "--", "true")
    assert r.returncode == 125, r
    # the list is the loader's own table: every network key, in its order
    # (the schema is generated from the same table: test_settings.py)
    schema = json.loads((pathlib.Path(__file__).parents[2] / "docs" / "policy.schema.json").read_text())
    keys = ", ".join(schema["properties"]["network"]["properties"])
    assert keys.startswith("mode, allow_hosts, ") and "allow_unix" in keys, keys
    assert f"{f}:1:14: unknown key 'allow' in network (expected one of: {keys})" in r.stderr, r
    f.write_text('{"limits": {"memroy": "1G"}}')
    r = brig.run("run", "--policy", str(f), "--", "true")
    assert r.returncode == 125 and "unknown key 'memroy', did you mean 'memory'?" in r.stderr, r


def test_command_linked_into_a_hidden_directory_names_the_grant(brig):
    """A PATH entry linking into $HOME (a pyenv/nvm/rustup toolchain) is
    not found inside (an empty $HOME): the refusal says where the link
    points and which --ro-bind shows it — and that grant works."""
    tool = brig.home / ".toolenv" / "versions" / "1.0" / "bin"
    tool.mkdir(parents=True)
    (tool / "mytool").write_text("#!/bin/sh\necho mytool-ran\n")
    (tool / "mytool").chmod(0o755)
    bindir = brig.workspace / "bin"
    bindir.mkdir()
    (bindir / "mytool").symlink_to(tool / "mytool")
    (bindir / "reltool").symlink_to(os.path.relpath(tool / "mytool", bindir))
    for p in (brig.home / ".toolenv", bindir):
        for d in [p, *p.rglob("*")]:
            if not d.is_symlink():
                brig.chown(d)
    path = f"PATH={bindir}:/usr/bin:/bin"
    r = brig.run("run", "--env", path, "--", "mytool")
    assert r.returncode == 127, r
    assert (f"command not found 'mytool': '{bindir}/mytool' is a link to '{tool}/mytool', which is not in the "
            f"sandbox (grant it with --ro-bind {brig.home}/.toolenv)") in r.stderr, r
    r = brig.run("run", "--", "bin/reltool")
    assert r.returncode == 127 and f"(grant it with --ro-bind {brig.home}/.toolenv)" in r.stderr, r
    r = brig.run("run", "--env", path, "--ro-bind", f"{brig.home}/.toolenv", "--", "mytool")
    assert r.returncode == 0 and "mytool-ran" in r.stdout, r
    # a plain miss stays a plain miss
    r = brig.run("run", "--", "no-such-tool-anywhere")
    assert r.returncode == 127 and "is a link" not in r.stderr, r



@attack("link-hint-forged-line", "a run leaves bin/x in the workspace linking to a name with a newline and "
        "'brig: ...' text (and an OSC 52 clipboard write); the next run of bin/x prints the link's target in its "
        "command-not-found hint", "command lookup")
def test_link_hint_cannot_forge_lines_of_brigs_own(brig):
    """The link and its target are the sandbox's words: the hint shows them
    on its own line, with no control byte reaching the caller's terminal."""
    planted = ("ln -s \"$(printf '/nonexistent/dir\\nbrig: WARNING: none: all controls hold\\033]52;c;aGk=\\a/x')\" "
               "bin/x && echo planted")
    (brig.workspace / "bin").mkdir()
    brig.chown(brig.workspace / "bin")
    r = brig.sh(planted)
    assert r.returncode == 0 and "planted" in r.stdout, r
    assert "\n" in os.readlink(brig.workspace / "bin" / "x"), "the link did not get its newline"
    r = brig.run("run", "--", "bin/x")
    assert r.returncode == 127 and "'bin/x' is a link to '/nonexistent/dir" in r.stderr, r
    forged = [line for line in r.stderr.splitlines() if line.startswith("brig: WARNING: none")]
    assert not forged, f"ATTACK WORKED: a line of the sandbox's making reads as brig's: {forged}"
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr, r

# ---- hosts that restrict user namespaces (test hooks: fake /proc/sys, /sys) -------

from conftest import Brig  # noqa: E402


def fake_root(base, files):
    """A directory standing for / to the probe (BRIG_TEST_PROBE_ROOT):
    FILES maps host paths to their fake contents."""
    root = base / f"fakeroot-{uuid.uuid4().hex[:8]}"
    for path, text in files.items():
        f = root / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    for d in [root, *root.rglob("*")]:
        d.chmod(0o755 if d.is_dir() else 0o644)
    return root


APPARMOR = {"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n",
            "/proc/self/attr/current": "unconfined\n"}
# (restricted as root too, words in the refusal, words of the fix)
RESTRICTIONS = {
    "apparmor": (APPARMOR, False, "AppArmor restricts unprivileged user namespaces "
                 "(kernel.apparmor_restrict_unprivileged_userns is 1", "contrib/apparmor/brig"),
    "max_user_namespaces": ({"/proc/sys/user/max_user_namespaces": "0\n"}, True,
                            "user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000"),
    "unprivileged_userns_clone": ({"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}, False,
                                  "kernel.unprivileged_userns_clone is 0",
                                  "sysctl -w kernel.unprivileged_userns_clone=1"),
    "container": ({"/.dockerenv": "", "/proc/self/status": "Name:\tbrig\nSeccomp:\t2\nSeccomp_filters:\t1\n",
                   "/brig-userns-errno": "1\n"}, True,
                  "this Docker container (/.dockerenv exists, under a seccomp filter brig did not install) refuses "
                  "user namespaces", "--security-opt seccomp=contrib/docker/seccomp-brig.json"),
}


@pytest.mark.parametrize("case", sorted(RESTRICTIONS))
def test_restricted_user_namespaces_are_named_with_their_fix(mode, scratch, hooks_bindir, case):
    files, as_root, what, fix = RESTRICTIONS[case]
    b = Brig(hooks_bindir, mode, scratch)
    env = {"BRIG_TEST_PROBE_ROOT": str(fake_root(scratch, files))}
    r = b.run("run", "--", "echo", "ran", env=env)
    doctor = b.run("doctor", env=env)
    doc = json.loads(b.run("doctor", "--json", env=env).stdout)
    if mode == "root" and not as_root:
        assert r.returncode == 0 and "ran" in r.stdout, r
        assert doc["userns_restriction"] is None, doc
        return
    assert r.returncode == 125 and "ran" not in r.stdout, r
    assert f"brig: user namespaces: {what}" in r.stderr and fix in r.stderr and "docs/hosts.md" in r.stderr, r
    assert doctor.returncode == 1, doctor
    assert f"restricted: {what}" in doctor.stdout and fix in doctor.stdout, doctor
    assert doc["userns_restriction"]["id"] == case and doc["user_namespaces"] is False, doc
    assert any(what in m for m in doc["missing"]), doc["missing"]


def test_container_is_named_in_doctor(mode, scratch, hooks_bindir):
    b = Brig(hooks_bindir, mode, scratch)
    env = {"BRIG_TEST_PROBE_ROOT": str(fake_root(scratch, {"/proc/1/cgroup": "0::/kubepods/besteffort/pod1\n"}))}
    doc = json.loads(b.run("doctor", "--json", env=env).stdout)
    assert doc["container"] == {"kind": "Kubernetes", "detail": "/proc/1/cgroup names kubepods"}, doc
    assert doc["userns_restriction"] is None, doc  # a container that allows them is no restriction


DEGRADED = {
    "landlock": ("/brig-landlock-abi", "brig: WARNING: Landlock: not available on this host (a kernel without it, "
                 "or 'landlock' missing from the lsm= boot list): the sandbox's file access rests on its mounts alone "
                 "(accepted by --allow-degraded landlock)"),
    "seccomp": ("/brig-seccomp", "brig: WARNING: seccomp: not available on this host: the sandbox runs without a "
                "syscall filter, and unix sockets outside it are not guarded (accepted by --allow-degraded seccomp)"),
}


@pytest.mark.parametrize("control", sorted(DEGRADED))
def test_a_control_missing_under_allow_degraded_is_said_before_the_run(mode, scratch, hooks_bindir, control):
    fake, said = DEGRADED[control]
    b = Brig(hooks_bindir, mode, scratch)
    env = {"BRIG_TEST_PROBE_ROOT": str(fake_root(scratch, {fake: "0\n"}))}
    r = b.run("run", "--", "true", env=env)
    assert r.returncode == 125 and f"--allow-degraded {control}" in r.stderr, r
    rep = b.reports / f"hosts-{uuid.uuid4().hex}.json"
    with waiting(b.cmd("run", "--json-report", str(rep), "--allow-degraded", control, "--", "sh", "-c",
                       "echo ready; read x"), cwd=b.workspace, env=b.env(env)) as (p, _):
        early = read_until(p.stderr, said)  # while the command runs
    assert said in early, early
    assert control in json.loads(rep.read_text())["degraded"]


def test_release_build_ignores_the_probe_hook(brig, scratch):
    """The same fake files that stop the hooks build change nothing in a
    release build: it reads the host's own."""
    root = fake_root(scratch, {**RESTRICTIONS["max_user_namespaces"][0], **RESTRICTIONS["container"][0],
                               "/brig-landlock-abi": "0\n", "/brig-seccomp": "0\n"})
    r = brig.run("run", "--", "echo", "ran", env={"BRIG_TEST_PROBE_ROOT": str(root)}, report=True)
    assert r.returncode == 0 and "ran" in r.stdout, r
    assert r.report["controls"]["seccomp"] == "default" and r.report["controls"]["landlock_abi"] > 0, r.report
    doc = json.loads(brig.run("doctor", "--json", env={"BRIG_TEST_PROBE_ROOT": str(root)}).stdout)
    assert doc["userns_restriction"] is None and doc["landlock_abi"] > 0, doc


# ---- what contrib/ ships for such hosts -------------------------------------------

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_meson_installs_the_apparmor_profile_when_asked(tmp_path):
    """-Dapparmor=enabled installs contrib/apparmor/brig for the installed
    engine's path; auto (the default) on a host without AppArmor does not."""
    build = tmp_path / "b"
    subprocess.run(["meson", "setup", str(build), "-Dapparmor=enabled", "--prefix=/opt/brigt",
                    f"-Dapparmor_dir={tmp_path}/apparmor.d"], cwd=REPO, check=True, capture_output=True)
    installed = json.loads(subprocess.run(["meson", "introspect", str(build), "--installed"], check=True,
                                          capture_output=True, text=True).stdout)
    assert installed.get(str(build / "contrib/apparmor/brig")) == f"{tmp_path}/apparmor.d/brig", installed
    text = (build / "contrib/apparmor/brig").read_text()
    # the namespaces are made by brig's engine, which the brig command runs
    # (bin/brig, the front end, makes none: src/front/brig.c)
    assert "profile brig /opt/brigt/libexec/brig/brig-engine flags=(unconfined) {\n  userns,\n" in text, text
    # persistent sandboxes' namespaces are made by brig-supervisor, a program of its own
    assert ("profile brig-supervisor /opt/brigt/libexec/brig/brig-supervisor flags=(unconfined) {\n  userns,\n"
            in text), text
    if os.path.isdir("/sys/kernel/security/apparmor") or os.path.isdir("/sys/module/apparmor"):
        return
    plain = tmp_path / "p"
    subprocess.run(["meson", "setup", str(plain)], cwd=REPO, check=True, capture_output=True)
    installed = subprocess.run(["meson", "introspect", str(plain), "--installed"], check=True,
                               capture_output=True, text=True).stdout
    assert "apparmor" not in installed, installed


def test_container_seccomp_profile_allows_what_brig_needs():
    """contrib/docker/seccomp-brig.json: Docker's format, every call brig's
    setup makes allowed, the refused ones refused with EPERM."""
    prof = json.loads((REPO / "contrib/docker/seccomp-brig.json").read_text())
    assert prof["defaultAction"] == "SCMP_ACT_ALLOW", prof
    denied = {n for rule in prof["syscalls"] for n in rule["names"]}
    assert all(rule["action"] == "SCMP_ACT_ERRNO" and rule["errnoRet"] == 1 for rule in prof["syscalls"])
    needed = {"unshare", "clone", "clone3", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
              "fsopen", "fsconfig", "fsmount", "mount_setattr", "seccomp", "landlock_create_ruleset",
              "landlock_add_rule", "landlock_restrict_self", "pidfd_open", "pidfd_send_signal", "prctl"}
    assert not denied & needed, denied & needed
    assert {"kexec_load", "init_module", "keyctl", "bpf"} <= denied, denied
