"""Persistent sandboxes behind the gVisor wall (issue 21, docs/walls.md):
`brig create --wall gvisor` starts one gVisor container, and each
`brig exec` is a `runsc exec` into it, as root and rootless.

- an exec's command is a task of gVisor's kernel, never a host process
  (looked for on the host while it runs); stdin, stdout, exit status, env,
  cwd; it reaches no host loopback service (a listener on the host sees
  nothing);
- what runsc exec does not do by itself brig does through runsc kill: a
  client's signal reaches the command, a client killed with SIGKILL and a
  --timeout take the command down inside gVisor (checked there with ps);
- stop and rm leave nothing: supervisor, runsc sandbox and gofer,
  cgroups, state, mounts (checked on the host);
- the rows of test_persist.py that hold behind the wall, run again with
  `--wall gvisor` (the others differ for reasons docs/walls.md lists);
- what the wall cannot do yet (file operations, --detach) is refused by
  name."""
import os
import signal
import socket

import pytest

import test_persist as tp
from conftest import Brig, mountinfo
from persist_helpers import Sandboxes, pid_alive, sandboxes_of
from proc_helpers import marker, pids_with, wait_until
from test_gvisor import Gvisor, attack, descendants, gv, rootless_without_cgroup  # noqa: F401 (fixture)


@pytest.fixture
def gvsb(gv):
    yield from sandboxes_of(gv)


def argv0(pid):
    """A process's name as it gave it (runsc's processes are all /proc/self/exe
    by comm, runsc-sandbox and runsc-gofer by argv[0])."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0")[0].decode(errors="replace"))
    except OSError:
        return None


def inside_ps(gvsb, name):
    """The command lines of every task in the sandbox's gVisor kernel."""
    r = gvsb.exec(name, "--", "ps", "-eo", "args")
    assert r.returncode == 0, r
    return r.stdout


def own_mounts(brig):
    return [m for m in mountinfo() if m[0].startswith(str(brig.base)) or ".brig-gvisor" in m[0]]


@attack("gvisor-exec-host-process", "brig exec into a --wall gvisor sandbox: run as a host process in brig's "
        "namespaces (where a kernel exploit would meet the host kernel), reach a host loopback service",
        "each exec is a runsc exec into the sandbox's gVisor container: a task of the Sentry below runsc-sandbox, "
        "its sockets in brig's network namespace")
def test_gvisor_create_exec_rm(gv, gvsb):
    brig = gv
    assert own_mounts(brig) == []
    name, r = gvsb.create("--env", "FROM_CREATE=c1")
    st = gvsb.state(name)
    r = gvsb.sh(name, 'read x; echo "got:$x"; pwd; echo "$FROM_CREATE $ONLY_EXEC"; echo made > ws-file; exit 7',
                "--env", "ONLY_EXEC=e1", input="hello\n")
    assert r.returncode == 7 and r.stdout == f"got:hello\n{brig.workspace}\nc1 e1\n", r
    assert (brig.workspace / "ws-file").read_text() == "made\n"
    # A host listener on loopback: the exec's connect meets brig's own lo.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    m = marker("gvexec")
    p = gvsb.popen_exec(name, "--", "sh", "-c",
                        f"python3 -c 'import socket; s = socket.socket(); print(s.connect_ex((\"127.0.0.1\", {port})))'; "
                        f"echo ready; sleep 300; : {m}")
    try:
        assert p.stdout.readline().strip() != b"0", "ATTACK WORKED: the exec connected to the host's loopback"
        assert p.stdout.readline() == b"ready\n"
        with pytest.raises(BlockingIOError):
            srv.accept()
        # On the host: no process runs the command; brig's pid 1 has runsc's
        # sandbox below it, and the exec is its runsc exec.
        assert [pid for pid in pids_with(m) if pid != p.pid] == [], \
            "ATTACK WORKED: the exec's command is a host process"
        below = descendants(st["supervisor_pid"])
        names = [argv0(pid) for pid in below]
        assert "runsc-sandbox" in names and "runsc-gofer" in names and "runsc" in names, names
        assert not {"sleep", "sh", "python3"} & set(names), f"ATTACK WORKED: the command runs on the host: {names}"
        assert m in inside_ps(gvsb, name)
        p.kill()  # SIGKILL: the client cannot forward anything
        p.wait()
        assert wait_until(lambda: m not in inside_ps(gvsb, name), 10), "the command outlived its brig exec"
    finally:
        srv.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    m = marker("gvtimeout")
    r = gvsb.sh(name, f"sleep 300 & sleep 301; : {m}", "--timeout", "1s")
    assert r.returncode == 124 and "timeout" in r.stderr, r
    assert wait_until(lambda: "sleep 30" not in inside_ps(gvsb, name), 10), "a timed-out exec's tree runs on"
    # rm: nothing left on the host
    r = gvsb.rm(name)
    assert r.returncode == 0, r
    gvsb.assert_gone(name, st)
    assert not [pid for pid in below if pid_alive(pid)], "runsc's processes outlived the sandbox"
    assert own_mounts(brig) == []


@attack("gvisor-sandbox-dies", "the runsc sandbox of a --wall gvisor sandbox dies (killed, or an exec allocating past "
        "--memory, which the host's OOM killer answers by ending the Sentry); hope the next brig exec runs anyway, "
        "outside gVisor",
        "brig's pid 1 reaps the runsc sandbox and ends the sandbox with it: the exec is refused (stopped), nothing left")
def test_gvisor_sandbox_death_ends_the_sandbox(gv, gvsb):
    name, _ = gvsb.create()
    st = gvsb.state(name)
    assert gvsb.sh(name, "echo up").stdout == "up\n"
    below = descendants(st["supervisor_pid"])
    sandbox = [pid for pid in below if argv0(pid) == "runsc-sandbox"]
    assert len(sandbox) == 1, [argv0(pid) for pid in below]
    os.kill(sandbox[0], signal.SIGKILL)  # the runsc sandbox this test's sandbox started
    assert wait_until(lambda: not pid_alive(st["supervisor_pid"]), 10), "the sandbox outlived its gVisor"
    made = gv.workspace / "ran-without-gvisor"
    r = gvsb.sh(name, f"touch {made}")
    assert r.returncode == 125 and "stopped" in r.stderr, r
    assert not made.exists(), "ATTACK WORKED: an exec ran after gVisor was gone"
    assert not [pid for pid in below if pid_alive(pid)], "runsc's processes outlived the sandbox"
    assert gvsb.rm(name).returncode == 0
    gvsb.assert_gone(name, st)
    if gv.mode == "rootless" and rootless_without_cgroup(gv._brig):
        return  # no memory bound here, accepted by --allow-degraded (test_gvisor_fails_closed)
    # An exec past --memory: the host's OOM killer ends the Sentry, which
    # holds every exec's memory, so the whole sandbox ends (docs/walls.md)
    name, _ = gvsb.create("--memory", "192M")
    st = gvsb.state(name)
    r = gvsb.exec(name, "--", "python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))")
    assert r.returncode == 125 and "--memory" in r.stderr and "Sentry" in r.stderr, r
    assert wait_until(lambda: not pid_alive(st["supervisor_pid"]), 10), "the sandbox outlived its gVisor"
    r = gvsb.sh(name, f"touch {made}")
    assert r.returncode == 125 and not made.exists(), r


@attack("gvisor-exec-refused", "brig exec --detach and file operations (brig cp, brig files) into a --wall gvisor "
        "sandbox, which would run outside gVisor's view (brig's root, brig's /tmp)",
        "pid 1 refuses both by name (exit 125) before anything runs")
def test_gvisor_exec_refuses_what_the_wall_lacks(gv, gvsb, scratch):
    name, _ = gvsb.create()
    made = gv.workspace / "detached-ran"
    r = gvsb.exec(name, "--detach", "--", "touch", str(made))
    assert r.returncode == 125 and "--wall gvisor" in r.stderr and "--detach" in r.stderr, r
    r = gvsb.brig_cmd("files", name, "list", str(gv.workspace))
    assert r.returncode == 125 and "--wall gvisor" in r.stderr and "file operations" in r.stderr, r
    assert not made.exists(), "ATTACK WORKED: the refused exec ran"
    assert gvsb.sh(name, "echo alive").stdout == "alive\n"


# test_persist.py's rows that hold behind the wall, with their own
# assertions; docs/walls.md explains the others.
PERSIST_ROWS = ["test_files_home_tmp_and_workspace_persist_across_execs", "test_sandbox_timeout_applies_to_each_exec",
                "test_two_concurrent_execs", "test_many_execs_in_parallel", "test_signal_to_exec_client_reaches_command",
                "test_state_dir_and_socket_are_private", "test_bad_names_duplicates_and_unknown",
                "test_egress_proxy_serves_every_exec"]


@attack("gvisor-persist-rows", "test_persist.py's rows, attempted again in a --wall gvisor sandbox",
        "runsc exec into the sandbox's container; brig's supervisor, state and egress around it")
@pytest.mark.parametrize("row", PERSIST_ROWS)
def test_gvisor_persist_rows(gv, gvsb, row):
    getattr(tp, row)(gv, gvsb)
    assert gv.runs, f"{row} created no sandbox through the fixture: it did not test the wall"


# ------------------------------------------------------------------ the terminal

TTY_SCRIPT = ('test -t 0 && echo IS-TTY; echo READY; read x; echo "read:$x"; '
              'for i in 1 2 3 4 5 6 7 8 9 10; do s=$(stty size); [ "$s" = "40 120" ] && break; sleep 0.2; done; '
              'echo "size:$s"; ')


def drive_terminal(argv, env, cwd, interrupt):
    """A person at a terminal: a resize reaches the command (brig relays
    it into the sandbox's pty), typing reaches its read, and ^C its
    foreground group (interrupt) or the command ends with its status.
    Returns the exit status."""
    from proc_helpers import HostPty
    t = HostPty(argv, env, cwd)
    try:
        t.expect("IS-TTY")
        t.expect("READY")
        t.set_size(40, 120)
        t.send("typed\n")
        t.expect("read:typed")
        t.expect("size:40 120")
        if interrupt:
            t.expect("SLEEPING")
            t.send("\x03")
            t.expect(r"\^C")
    finally:
        status = t.close()
    assert b"NOT-INTERRUPTED" not in t.buf, t.buf
    return status


def test_gvisor_pty_run_and_exec(gv, gvsb):
    """brig run --tty and brig exec --tty behind the wall: gVisor's own
    terminal over the sandbox's pty (runsc's terminal mode)."""
    env = gv.env({"TERM": "xterm", "XDG_RUNTIME_DIR": str(gvsb.run_dir)})
    script = TTY_SCRIPT + "echo SLEEPING; sleep 100; echo NOT-INTERRUPTED"
    status = drive_terminal(gv.cmd("run", "--tty", "--", "sh", "-c", script), env, str(gv.workspace), True)
    assert os.WEXITSTATUS(status) == 128 + signal.SIGINT, status
    # brig exec --tty: not ^C, which runsc exec sometimes does not carry
    # into gVisor (docs/walls.md, "The terminal")
    name, _ = gvsb.create()
    status = drive_terminal(gv.cmd("exec", name, "--tty", "--", "sh", "-c", TTY_SCRIPT + "exit 3"), env,
                            str(gv.workspace), False)
    assert os.WEXITSTATUS(status) == 3, status


@attack("gvisor-tiocsti", "TIOCSTI from behind the gVisor wall: push a command into the caller's shell from brig run "
        "(--tty, --no-tty, --no-tty --terminal-passthrough) and brig exec --tty",
        "the command's terminal is gVisor's over the sandbox's own pty (brig relays it); with the caller's terminal "
        "passed through, gVisor's Sentry holds it as a plain file and answers TIOCSTI itself")
def test_gvisor_tiocsti_into_callers_shell(gv, gvsb):
    from proc_helpers import shell_quote
    from test_escape import host_dir
    from test_terminal import Session, legacy_tiocsti
    if not legacy_tiocsti():
        pytest.skip("TIOCSTI NOT TESTABLE: dev.tty.legacy_tiocsti=0, the kernel forbids TIOCSTI to everyone")
    probe = gv.program("probe_proc")
    name, _ = gvsb.create("--ro-bind", f"{probe}:/probe")
    s = Session(gv)
    marks = host_dir(gv, "marks", 0o777)
    try:
        ctl = marks / marker("control")
        s.run_line(f"{shell_quote(probe)} tiocsti {shell_quote(f'touch {ctl}' + chr(92) + 'n')}")
        s.sync()
        assert ctl.exists(), "control: TIOCSTI on the host terminal did not inject; the test could not fail"
        runs = [("run", *gv._extra, "--ro-bind", f"{probe}:/probe", *args)
                for args in (("--tty",), ("--no-tty",), ("--no-tty", "--terminal-passthrough"))]
        runs.append(("exec", name, "--tty"))
        for args in runs:
            target = marks / marker("PWNED")
            line = " ".join(shell_quote(a) for a in (gv.exe, *args, "--", "/probe", "tiocsti", f"touch {target}\\n"))
            rc = s.run_line(f"XDG_RUNTIME_DIR={shell_quote(gvsb.run_dir)} {line}")
            assert rc == 0, f"{args}: the probe did not run behind the wall (exit {rc}): {s.host.buf[-800:]!r}"
            # what was injected is queued before the next line typed
            s.sync()
            s.sync()
            assert not target.exists(), f"ATTACK WORKED: TIOCSTI ran a command in the caller's shell ({args})"
    finally:
        s.close()


class LatePidFile(Sandboxes):
    """Sandboxes of the hooked build whose pid 1 sees an exec's gVisor pid
    only once runsc exec's pid file is 3 s old: the gap a loaded host
    leaves between the command printing and runsc exec writing its pid."""

    def create(self, *args, name=None, check=True):
        name = name or self.new_name()
        self.names.append(name)
        r = self.brig_cmd("create", name, *args, env={"BRIG_TEST_GVISOR_PID_LATE_MS": "3000"})
        if check:
            assert r.returncode == 0, r
        return name, r


def test_gvisor_signal_before_runsc_wrote_the_pid(gv, hooks_bindir):
    """A client's SIGTERM that comes while runsc exec has not yet written the
    command's gVisor pid reaches the command, after the pid is known; before,
    pid 1 sent it to runsc exec itself, which died of it and left the command
    running on in the container (the clean-clone CI saw NOT-DELIVERED)."""
    hooked = Gvisor(Brig(hooks_bindir, gv.mode, gv.base), gv.mode == "rootless" and rootless_without_cgroup(gv._brig))
    s = LatePidFile(hooked)
    try:
        tp.test_signal_to_exec_client_reaches_command(hooked, s)
    finally:
        problems = s.cleanup()
    assert not problems, problems


def test_a_pooled_gvisor_run_with_another_runsc_is_not_served(gvsb):
    """BRIG_RUNSC (and PATH, where it finds runsc) pick a --wall gvisor
    run's runsc: part of what names a pool of such runs, so a run asking
    for another runsc is a cold run's, which refuses a runsc that is not
    there (found by an attack round of session 41: the pool served it with
    the runsc its members were made with)."""
    gv = gvsb.brig
    r = gvsb.brig_cmd("pool", "--size", "1", *gv._extra)
    assert r.returncode == 0, r
    try:
        assert wait_until(lambda: any((d / "ready").is_dir() and list((d / "ready").iterdir())
                                      for d in (gvsb.root / "pools").iterdir()), 60)
        r = gvsb.brig_cmd("run", "--pooled", *gv._extra, "--", "echo", "served", env={"BRIG_RUNSC": "/nonexistent/runsc"})
        assert r.returncode == 125 and "served" not in r.stdout, r
        assert "/nonexistent/runsc" in r.stderr, r
        r = gvsb.brig_cmd("run", "--pooled", *gv._extra, "--", "echo", "served")
        assert r.returncode == 0 and r.stdout == "served\n" and "not served" not in r.stderr, r
    finally:
        gvsb.brig_cmd("pool", "--stop", *gv._extra)
