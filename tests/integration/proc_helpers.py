"""Helpers shared by the process, privilege, terminal and lifecycle tests."""
import errno
import os
import pathlib
import pty
import re
import select
import signal
import subprocess
import time
import uuid


def strip_brig_warnings(text):
    """The command's own stderr: without the "brig: WARNING: ..." lines brig
    adds after a run that ran weaker than asked (rootless without a memory
    cgroup, docs/limits.md). str or bytes."""
    warn = b"brig: WARNING: " if isinstance(text, bytes) else "brig: WARNING: "
    return text[:0].join(l for l in text.splitlines(keepends=True) if not l.startswith(warn))


# Every marker of this test session holds this, so the session-end check
# (conftest.py) tells its own leftovers from another session's on a shared host.
SESSION_MARK = f"-s{uuid.uuid4().hex[:6]}-"


def marker(tag="m"):
    """A string that appears nowhere else on the host."""
    return f"brigmark-{tag}{SESSION_MARK}{uuid.uuid4().hex[:10]}"


def kv(text):
    """The probe's key=value lines as a dict (later keys win)."""
    out = {}
    for line in text.splitlines():
        line = line.strip("\r")
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def probe(brig, *args, brig_args=(), **kw):
    """Run probe_proc inside the sandbox; returns (Result, dict)."""
    kw.setdefault("timeout", 30)
    res = brig.run("run", "--ro-bind", f"{brig.program('probe_proc')}:/probe", *brig_args,
                   "--", "/probe", *map(str, args), **kw)
    return res, kv(res.stdout if isinstance(res.stdout, str) else res.stdout.decode())


def pids_with(mark):
    """Host pids whose command line contains `mark` (never our own)."""
    found = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if mark.encode() in cmd:
            found.append(int(d))
    return found


def descendants(pid):
    """Host pids below PID (its children, theirs, ...)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def sandbox_init(sup, timeout=5.0):
    """Host pid of the sandbox's pid 1 below supervisor SUP: the child that
    is 1 in its own pid namespace (by its NSpid). Not just "the child":
    the supervisor has short-lived children of its own (the idmap helper,
    reaped after the sandbox is already running)."""
    def find():
        try:
            kids = pathlib.Path(f"/proc/{sup}/task/{sup}/children").read_text().split()
        except OSError:
            return None
        for k in kids:
            try:
                status = pathlib.Path(f"/proc/{k}/status").read_text()
            except OSError:
                continue  # a helper that has just gone
            nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
            if len(nspid) > 1 and nspid[-1] == "1":
                return int(k)
        return None
    init = wait_until(find, timeout)
    assert init, f"no pid 1 among the children of {sup}"
    return init


def wait_until(pred, timeout=5.0, step=0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


def wait_gone(mark, timeout=3.0):
    """True when no host process carries `mark` any more."""
    return wait_until(lambda: not pids_with(mark), timeout)


def kill_own(pids, sig=signal.SIGKILL):
    """Kill processes this test started (found by its unique marker)."""
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def sleeping_host_process(brig):
    """Generator for the host_sleeper fixtures: a host shell of the user
    brig runs as (nobody rootless), with a unique marker, in a process
    group of its own; yields (Popen, marker). Its `sleep` child carries no
    marker, so the whole group is killed afterwards (killing the shell
    alone left `sleep 300` behind)."""
    mark = marker("host")
    p = subprocess.Popen(brig.prefix() + ["sh", "-c", f"sleep 300; : {mark}"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: p.pid in pids_with(mark), 5)
        yield p, mark
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=5)


class HostPty:
    """A host program on a fresh pseudo-terminal, as a person's terminal
    would run it: forkpty makes it a session leader with the pty as its
    controlling terminal."""

    def __init__(self, argv, env, cwd, rows=24, cols=80):
        pid, fd = pty.fork()
        if pid == 0:  # child
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid = pid
        self.fd = fd
        self.buf = b""
        self.set_size(rows, cols)

    def set_size(self, rows, cols):
        import fcntl
        import struct
        import termios
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        os.write(self.fd, data)

    def _fill(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError as e:
            if e.errno == errno.EIO:
                raise EOFError
            raise
        if not chunk:
            raise EOFError
        self.buf += chunk
        return True

    def expect(self, pattern, timeout=15):
        """Wait for a regex in the output; returns the match. The buffer
        is consumed up to the end of the match."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        end = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {pattern!r}; output so far: {self.buf[-3000:]!r}")
            try:
                self._fill(min(left, 0.5))
            except EOFError:
                m = rx.search(self.buf)
                if m:
                    return m
                raise AssertionError(f"EOF waiting for {pattern!r}; output: {self.buf[-3000:]!r}")

    def close(self, timeout=5):
        """End the host program (ours) and return its wait status."""
        end = time.monotonic() + timeout
        status = None
        while time.monotonic() < end:
            try:
                self._fill(0.1)
            except (EOFError, OSError):
                pass
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p == self.pid:
                status = st
                break
        if status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return status


def host_shell(brig, extra_env=None):
    """An interactive host `sh` on a pty, running as the brig fixture's
    user (root, or nobody in rootless mode)."""
    env = brig.env({"PS1": "$ ", "TERM": "xterm", "ENV": ""})
    if extra_env:
        env.update(extra_env)
    return HostPty(brig.prefix() + ["/bin/sh", "-i"], env, str(brig.workspace))


def shell_quote(s):
    return "'" + str(s).replace("'", "'\\''") + "'"


def brig_cmdline(brig, *args):
    """The brig argv as a shell command line for a host shell that already
    runs as the fixture's user (so without the setpriv prefix)."""
    return " ".join(shell_quote(a) for a in [brig.exe, *args])


def run_popen(brig, *args, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(brig.cmd(*args), cwd=str(brig.workspace), env=brig.env(kw.pop("env", None)), **kw)


def run_with_report(brig, *args, **kw):
    """`brig run --json-report FILE ARGS...` with FILE outside the
    workspace in a directory the run's user may write (the conftest's
    report=True writes into the root-owned scratch directory, which the
    rootless user cannot). Returns the Result with .report set."""
    import json
    d = brig.base / "reports"
    d.mkdir(exist_ok=True)
    brig.chown(d)
    path = d / f"{marker('rep')}.json"
    assert args and args[0] == "run"
    r = brig.run("run", "--json-report", str(path), *args[1:], **kw)
    r.report = json.loads(path.read_text()) if path.exists() else None
    return r


def sh_with_report(brig, script, *brig_args, **kw):
    return run_with_report(brig, "run", *brig_args, "--", "sh", "-c", script, **kw)
