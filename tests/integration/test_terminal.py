"""Terminal: the command gets its own pseudo-terminal (or none), never the
caller's; TIOCSTI/TIOCLINUX cannot push keystrokes into the caller's
terminal; interactive use (job control, window size) works.

Every test drives a real host shell on a real pty (forkpty: the shell is a
session leader with the pty as controlling terminal, as in a person's
terminal) and types the brig command line into it."""
import fcntl
import os
import pty
import subprocess
import termios
import time

import pytest

from proc_helpers import HostPty, host_shell, marker, shell_quote


def legacy_tiocsti():
    try:
        with open("/proc/sys/dev/tty/legacy_tiocsti") as f:
            return f.read().strip() == "1"
    except OSError:
        return True  # kernels before 6.2 have no switch: TIOCSTI is always legal


class Session:
    """A host shell on a pty, running as the fixture's user."""

    def __init__(self, brig, rows=24, cols=80):
        self.brig = brig
        self.host = host_shell(brig)
        self.host.set_size(rows, cols)
        self.host.expect(r"\$ ")

    def sync(self, timeout=15):
        """Wait until the host shell has run everything typed so far. Only
        when no program reads the terminal: type-ahead would go to it."""
        self.host.send(self.done_suffix()[2:] + "\n")
        self.expect_done(timeout)

    def done_suffix(self):
        """`; echo DONE-<marker>-<status>`, split so the echo of the typed
        line does not match."""
        self._done = marker("done")
        a, b = self._done[:8], self._done[8:]
        return f"; echo {a}''{b}-$?-"

    def expect_done(self, timeout=20):
        """The exit status of the line sent with done_suffix()."""
        return int(self.host.expect(self._done + r"-(\d+)-", timeout).group(1))

    def run_line(self, line, timeout=20):
        """Type a command line and wait for it to finish; its status."""
        self.host.send(line + self.done_suffix() + "\n")
        return self.expect_done(timeout)

    def brig_line(self, *args):
        return " ".join(shell_quote(a) for a in (self.brig.exe, *args))

    def last_rc(self):
        self.host.send("echo RC-$?\n")
        return int(self.host.expect(r"RC-(\d+)").group(1))

    def close(self):
        try:
            self.host.send("\nexit\n")
        except OSError:
            pass
        return self.host.close()


@pytest.fixture
def session(brig):
    s = Session(brig)
    yield s
    s.close()


@pytest.fixture
def marks(brig):
    """A directory the host shell may write and the sandbox cannot see."""
    d = brig.base / "marks"
    d.mkdir(exist_ok=True)
    d.chmod(0o777)
    return d


# ------------------------------------------------------------------ TIOCSTI

@pytest.fixture
def tiocsti_works(session, marks, brig):
    """Control: the same probe run directly on the host shell's terminal
    does inject, so the checks below can fail."""
    if not legacy_tiocsti():
        pytest.skip("TIOCSTI NOT TESTABLE: dev.tty.legacy_tiocsti=0, the kernel forbids TIOCSTI to everyone")
    ctl = marks / marker("control")
    session.run_line(f"{shell_quote(brig.program('probe_proc'))} tiocsti {shell_quote(f'touch {ctl}' + chr(92) + 'n')}")
    session.sync()
    assert ctl.exists(), "control failed: TIOCSTI on the host terminal did not inject; the test could not fail"
    return True


def _inject(session, brig, marks, *brig_args, sub="tiocsti", pipe=False):
    target = marks / marker("PWNED")
    text = f"touch {target}\\n"  # the probe turns backslash-n into a newline
    line = session.brig_line("run", "--ro-bind", f"{brig.program('probe_proc')}:/probe", *brig_args,
                             "--", "/probe", sub, text)
    if pipe:
        line += " | cat"
    session.run_line(line)
    # Whatever was injected is now queued before the next line we type,
    # and the host shell would run it first.
    session.sync()
    session.sync()
    time.sleep(0.2)
    return target


def test_tiocsti_default_pty_cannot_reach_caller(session, marks, brig, tiocsti_works):
    target = _inject(session, brig, marks)
    assert not target.exists(), "TIOCSTI from the sandbox ran a command in the caller's shell"


@pytest.mark.parametrize("args", [("--no-tty",), ("--no-tty", "--terminal-passthrough")],
                         ids=["no-tty", "no-tty-passthrough"])
def test_tiocsti_no_tty_cannot_reach_caller(session, marks, brig, tiocsti_works, args):
    # With passthrough the command holds the caller's terminal itself.
    target = _inject(session, brig, marks, *args)
    assert not target.exists(), f"TIOCSTI from the sandbox ({args}) ran a command in the caller's shell"


def test_tiocsti_stdout_piped_cannot_reach_caller(session, marks, brig, tiocsti_works):
    # stdin is the caller's terminal, stdout a pipe: no pty is made.
    target = _inject(session, brig, marks, pipe=True)
    assert not target.exists(), "TIOCSTI from the sandbox (stdout piped) ran a command in the caller's shell"


@pytest.mark.parametrize("args", [("--no-tty",), ("--no-tty", "--terminal-passthrough"), ()],
                         ids=["no-tty", "no-tty-passthrough", "default"])
def test_tiocscty_cannot_steal_callers_terminal(session, marks, brig, tiocsti_works, args):
    target = _inject(session, brig, marks, *args, sub="tiocscty")
    assert not target.exists(), "the sandbox adopted the caller's terminal (TIOCSCTTY) and injected into it"


def test_tiocsti_reports_failure_on_callers_terminal(brig, session, marks, tiocsti_works):
    """--no-tty --terminal-passthrough: fd 0 is the caller's terminal (by
    default it would be brig's socket instead), and every push fails."""
    out = marks / marker("out")
    session.run_line(session.brig_line("run", "--no-tty", "--terminal-passthrough", "--ro-bind", f"{brig.program('probe_proc')}:/probe",
                                        "--", "/probe", "tiocsti", "x") + f" > {out}")
    text = out.read_text()
    assert "isatty0=1" in text, text
    for key in ("tiocsti_fd0", "tiocsti_fd1", "tiocsti_fd2"):
        assert f"{key}=ok" not in text, text
    assert "open_dev_tty=ENXIO" in text, text


@pytest.mark.parametrize("how", ["no-tty", "stdout-pipe"])
def test_tiocsti_into_sessionless_terminal(brig, how):
    """The caller's stdin is a terminal that is nobody's controlling
    terminal (a pty a harness opened without a session): after setsid the
    command may adopt it (TIOCSCTTY), so only the seccomp filter on
    TIOCSTI (also with junk in the upper 32 bits of the command) keeps it
    from pushing input into it."""
    if not legacy_tiocsti():
        pytest.skip("TIOCSTI NOT TESTABLE: dev.tty.legacy_tiocsti=0")
    master, slave = pty.openpty()
    try:
        text = f"echo {marker('INJECTED')}\n"
        # --terminal-passthrough: the terminal itself goes in, so only the
        # seccomp filter stands in the way.
        args = ["run", "--terminal-passthrough"] + (["--no-tty"] if how == "no-tty" else []) + [
            "--ro-bind", f"{brig.program('probe_proc')}:/probe", "--", "/probe", "tiocscty", text]
        cp = subprocess.run(brig.cmd(*args), stdin=slave,
                            stdout=slave if how == "no-tty" else subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(brig.workspace), env=brig.env(), start_new_session=True, timeout=20)
        assert cp.returncode == 0, cp
        out = cp.stdout.decode() if cp.stdout else ""
        if out:
            assert "tiocsti_after_tiocscty=ok" not in out and "tiocsti_hibits_after_tiocscty=ok" not in out, out
        # What is queued as input on the terminal now would be read by the
        # next program the caller runs on it.
        fl = fcntl.fcntl(slave, fcntl.F_GETFL)
        fcntl.fcntl(slave, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        try:
            queued = os.read(slave, 4096)
        except BlockingIOError:
            queued = b""
        assert text.strip().encode() not in queued, f"injected into the caller's terminal: {queued!r}"
    finally:
        os.close(master)
        os.close(slave)


def test_tioclinux_fails(brig, session, marks):
    out = marks / marker("out")
    session.run_line(session.brig_line("run", "--no-tty", "--ro-bind", f"{brig.program('probe_proc')}:/probe",
                                        "--", "/probe", "tioclinux") + f" > {out}")
    text = out.read_text()
    assert "tioclinux_paste_fd0=" in text, text
    assert "=ok" not in text, text


# -------------------------------------------------------------- interactive

INNER = "in> "


def _start_inner(session, *brig_args, cmd=("sh",)):
    """`brig run -- sh` typed into the host shell; session.expect_done()
    gives brig's exit status once the inner shell has ended."""
    session.host.send(session.brig_line("run", "--env", f"PS1={INNER}", *brig_args, "--", *cmd)
                      + session.done_suffix() + "\n")
    session.host.expect(INNER, 20)


def _inner(session, line, pattern, timeout=10):
    session.host.send(line + "\n")
    m = session.host.expect(pattern, timeout)
    return m


def test_interactive_shell_gets_its_own_pty(session):
    session.host.send("echo HOST-TTY=$(tty)\n")
    host_tty = session.host.expect(r"HOST-TTY=(/dev/pts/\d+)").group(1)
    _start_inner(session)
    m = _inner(session, "echo T-$(tty)-$((6*7))", rb"T-(\S+)-42")
    inner_tty = m.group(1).decode()
    assert inner_tty.startswith("/dev/pts/"), inner_tty
    # /dev/tty is its controlling terminal, and the session is its own.
    _inner(session, "(exec 3</dev/tty) 2>/dev/null && echo CTTY-$((1+1))", r"CTTY-2")
    _inner(session, "ls /dev/pts/ | tr '\\n' ' '; echo PTS-$((2+2))", r"PTS-4")
    session.host.send("exit\n")
    assert session.expect_done() == 0
    assert host_tty.startswith(b"/dev/pts/")


def test_interactive_input_and_exit_status(session):
    _start_inner(session)
    _inner(session, "read v; echo GOT-$v-$((1+1))", r"\r?\n")
    session.host.send("typed-value\n")
    session.host.expect(r"GOT-typed-value-2")
    session.host.send("exit 7\n")
    assert session.expect_done() == 7


def test_job_control(session):
    _start_inner(session)
    _inner(session, "sleep 100 &", INNER)
    _inner(session, "jobs; echo J-$((3+4))", rb"\[1\][ +]*Running[^\r\n]*sleep 100[\s\S]*J-7")
    # KILL: a TERM that lands before the job has reset the interactive
    # shell's ignored TERM would be lost (a dash race, not brig's).
    _inner(session, "kill -KILL %1; wait; jobs; echo K-$((2+3))", r"K-5")
    # Ctrl-C reaches the foreground job through the sandbox's own pty.
    session.host.send("sleep 100\n")
    time.sleep(0.5)
    session.host.send("\x03")
    _inner(session, "echo C-$((3+3))", r"C-6", timeout=5)
    # Ctrl-Z stops it, fg resumes it, Ctrl-C ends it.
    session.host.send("sleep 100\n")
    time.sleep(0.5)
    session.host.send("\x1a")
    _inner(session, "jobs; echo Z-$((4+4))", rb"Stopped[\s\S]*Z-8", timeout=5)
    session.host.send("fg\n")
    time.sleep(0.3)
    session.host.send("\x03")
    _inner(session, "echo F-$((5+5))", r"F-10", timeout=5)
    session.host.send("exit\n")
    assert session.expect_done() == 0


def test_window_size_follows_caller(brig):
    s = Session(brig, rows=37, cols=101)
    try:
        _start_inner(s)
        _inner(s, "echo S-$(stty size)-S", r"S-37 101-S")
        s.host.set_size(41, 123)  # the kernel sends SIGWINCH to brig, brig resizes the inner pty
        for _ in range(20):
            s.host.send("echo S-$(stty size)-S\n")
            m = s.host.expect(r"S-(\d+ \d+)-S")
            if m.group(1) == b"41 123":
                break
            time.sleep(0.1)
        assert m.group(1) == b"41 123"
        s.host.send("exit\n")
        assert s.expect_done() == 0
    finally:
        s.close()


def test_caller_terminal_restored(session):
    session.host.send("echo SG=$(stty -g)\n")
    before = session.host.expect(r"SG=([0-9a-f:]+)").group(1)
    _start_inner(session)
    session.host.send("exit 3\n")
    assert session.expect_done() == 3
    session.host.send("echo SG=$(stty -g)\n")
    after = session.host.expect(r"SG=([0-9a-f:]+)").group(1)
    assert before == after, "brig left the caller's terminal in another mode (raw?)"


def test_no_tty_option_gives_no_terminal(session, marks):
    out = marks / marker("out")
    rc = session.run_line(session.brig_line(
        "run", "--no-tty", "--", "sh", "-c",
        "(exec 3</dev/tty) 2>/dev/null && echo CTTY=yes || echo CTTY=no; ls /dev/pts | wc -l | sed s/^/NPTS=/")
        + f" > {out}")
    assert rc == 0
    text = out.read_text()
    assert "CTTY=no" in text, text
    assert "NPTS=1" in text, text  # only ptmx: no pty was made


def test_tty_option_with_pipes(brig):
    r = brig.run("run", "--tty", "--", "sh", "-c", "tty; test -t 0 && echo IN-TTY; test -t 1 && echo OUT-TTY",
                 stdin=subprocess.DEVNULL, timeout=20)
    assert r.returncode == 0, r
    lines = [l.strip() for l in r.stdout.splitlines()]
    assert lines[0].startswith("/dev/pts/"), r
    assert "IN-TTY" in lines and "OUT-TTY" in lines, r


def test_pty_output_and_exit_without_input(brig):
    """A pty run whose command ignores stdin still ends, with all output."""
    m = marker("out")[:14]
    s = Session(brig)
    try:
        s.host.send(s.brig_line("run", "--", "sh", "-c", f"i=0; while [ $i -lt 2000 ]; do echo {m}-$i; i=$((i+1)); done")
                    + s.done_suffix() + "\n")
        s.host.expect(rf"{m}-1999\r?\n", 20)
        assert s.expect_done() == 0
    finally:
        s.close()
