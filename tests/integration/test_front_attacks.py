"""The brig command's front end (src/front/brig.c) under attack: a caller
who shapes the command line, the environment and stdio, and a supervisor
that lies or dies. Whatever happens, what the caller sees (stdout, stderr,
the exit status, the signals that end it) must be what brig-engine run
directly with the same argv shows, and nothing but brig's own engine and
the sandbox's own supervisor may be trusted. Rows 446-448 of
docs/security.md. Root and rootless."""
import os
import pathlib
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading

import pytest

from conftest import IS_ROOT
from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, wait_until
from test_escape import attack

OTHER_UID = 65533  # neither root nor the rootless tests' nobody

# struct ctl_hdr (persist/control.h): magic, type, flags, argc, envc, arg,
# exit_code, errnum, timeout_ms, text[1024], struct wire_error (976 bytes)
HDR = struct.Struct("<IIIIIiiiQ1024s976s")
CTL_MAGIC = 0x62726732
CTL_EXEC, CTL_SIGNAL = 1, 2
CTL_OK, CTL_ERROR, CTL_STATUS, CTL_PTY, CTL_STARTED = 100, 101, 102, 103, 104
CTL_MAX_MSG = 128 * 1024
# the wait status of a command that exited with CODE, or was killed by SIG
EXITED = lambda code: code << 8  # noqa: E731
KILLED = lambda sig: sig  # noqa: E731


def hdr(kind, arg=0, exit_code=0, errnum=0, text=b"", magic=CTL_MAGIC, error=b""):
    return HDR.pack(magic, kind, 0, 0, 0, arg, exit_code, errnum, 0, text, error)


def _both(brig, sandboxes, *args, env=None, **kw):
    """brig ARGS through the front end, then through brig-engine itself
    (what brig printed before the front end), with the same environment
    and stdio: the two CompletedProcesses."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    kw.setdefault("capture_output", "stdout" not in kw and "stderr" not in kw)
    kw.setdefault("timeout", 60)
    kw.setdefault("text", True)
    e = brig.env(sandboxes.env(env))
    out = []
    for prog in ("brig", "brig-engine"):
        cmd = brig.prefix() + [str(brig.bindir / prog), *map(str, args)]
        out.append(subprocess.run(cmd, cwd=str(brig.workspace), env=e, **kw))
    return out


def _same(front, engine, what=""):
    assert (front.returncode, front.stdout, front.stderr) == (engine.returncode, engine.stdout, engine.stderr), \
        (what, front, engine)


class FakeSupervisor:
    """A control socket at <state root>/NAME/ctl answered by this test: a
    supervisor that lies, sends what no supervisor sends, or goes away.
    `answer(conn, request)` runs for each connection; the requests it got
    are kept (type, argv, env, how many descriptors came with it). With
    no answer, it closes each connection once its request has come,
    unread (as a supervisor that ends while it stops: the kernel resets
    the connection)."""

    def __init__(self, brig, sandboxes, answer):
        self.name = sandboxes.new_name("fake")
        sandboxes.root.mkdir(mode=0o700, exist_ok=True)
        brig.chown(sandboxes.root)
        d = sandboxes.root / self.name
        d.mkdir(mode=0o700)
        brig.chown(d)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(str(d / "ctl"))
        brig.chown(d / "ctl")
        self.listener.listen(4)
        self.answer = answer
        self.requests = []
        self.errors = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed by close()
            with conn:
                conn.settimeout(30)
                if self.answer is None:
                    select.select([conn], [], [], 30)
                    self.requests.append("unread")
                    continue
                try:
                    msg, anc, _, _ = conn.recvmsg(CTL_MAX_MSG, socket.CMSG_SPACE(4 * 4))
                    fds = []
                    for level, kind, data in anc:
                        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                            fds += struct.unpack(f"{len(data) // 4}i", data[:len(data) // 4 * 4])
                    for fd in fds:
                        os.close(fd)
                    f = HDR.unpack_from(msg)
                    words = msg[HDR.size:].split(b"\0")
                    req = {"type": f[1], "argv": words[1:1 + f[3]], "env": words[1 + f[3]:1 + f[3] + f[4]],
                           "nfds": len(fds)}
                    self.requests.append(req)
                    self.answer(conn, req)
                except Exception as e:  # noqa: BLE001 (said by the test)
                    self.errors.append(repr(e))

    def close(self):
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def fake_supervisor(brig, sandboxes):
    made = []

    def make(answer):
        made.append(FakeSupervisor(brig, sandboxes, answer))
        return made[-1]
    yield make
    for f in made:
        f.close()


def _send(conn, data):
    conn.sendmsg([data])


# ---- what a supervisor sends: lies and garbage -----------------------------

# What a supervisor could send as the end of an exec (after the request):
# each must end the front end as it ends brig-engine.
LIES = {
    "exit 3": [hdr(CTL_STATUS, EXITED(3))],
    "exit 3, a refusal's line": [hdr(CTL_STATUS, EXITED(3)) + b"net: refused.invalid\0\0\0"],
    "killed by 9": [hdr(CTL_STATUS, KILLED(9))],
    "the timeout's code": [hdr(CTL_STATUS, EXITED(0), exit_code=124)],
    "a stopped status": [hdr(CTL_STATUS, 0x137f)],
    "bits past the status": [hdr(CTL_STATUS, 0x7fff0000 | EXITED(5))],
    "a unix refusal, control bytes in its path": [hdr(CTL_STATUS, EXITED(0), errnum=2, text=b"/x\x1b[2J\x07" * 200)],
    "a negative count": [hdr(CTL_STATUS, EXITED(6), errnum=-7)],
    "payload without a NUL": [hdr(CTL_STATUS, EXITED(1)) + b"\x1b]0;title" * 50],
    "other messages first": [hdr(CTL_OK), hdr(CTL_PTY), hdr(CTL_STARTED, 42), hdr(CTL_STATUS, EXITED(2))],
    "an error": [hdr(CTL_ERROR)],
    "an error with a made-up body": [hdr(CTL_ERROR, error=struct.pack("<Iii", 0x62657231, 77, 99999) + b"x" * 964)],
    "the status of an unknown type": [hdr(999, EXITED(1))],
}


@attack("front-supervisor-lies",
        "a supervisor (a control socket the test answers) ends a plain `brig exec NAME -- CMD`, which the front "
        "end runs itself, with messages no real supervisor sends: statuses with a stopped or out-of-range wait "
        "status, the timeout's code on an exit, a negative refusal count, a unix refusal whose path is control "
        "bytes, a payload without its NUL, messages of other types first, errors with a body of made-up codes, "
        "a type that is neither",
        "the front end prints nothing of a status itself and hands every end with something to say to the "
        "engine, which reads it with the checks ctl_recv makes: stdout, stderr (control bytes as text) and the "
        "status are the engine's for each")
def test_a_lying_supervisor_ends_the_front_end_as_the_engine(brig, sandboxes, fake_supervisor):
    for what, replies in LIES.items():
        def answer(conn, req, replies=replies):
            for r in replies:
                _send(conn, r)
        fake = fake_supervisor(answer)
        front, engine = _both(brig, sandboxes, "exec", fake.name, "--", "sh", "-c", "true")
        _same(front, engine, what)
        assert "\x1b" not in front.stderr and "\x07" not in front.stderr, (what, front)
        assert len(fake.requests) == 2 and not fake.errors, (what, fake.requests, fake.errors)
        # the front end sent the engine's request: the command, no
        # environment, our three descriptors
        assert fake.requests[0] == fake.requests[1] == {"type": CTL_EXEC, "argv": [b"sh", b"-c", b"true"],
                                                        "env": [], "nfds": 3}, (what, fake.requests)


@attack("front-supervisor-gone",
        "the supervisor goes away during a plain `brig exec` the front end runs itself: it closes the "
        "connection before any answer, after a message that is not the end, and the real one is SIGKILLed "
        "while the command sleeps",
        "an end that is not a status goes to the engine (no message: the connection ended), which says the "
        "sandbox went away, 125, as when it runs the exec itself")
def test_a_supervisor_that_goes_away_ends_the_front_end_as_the_engine(brig, sandboxes, fake_supervisor):
    for what, replies in {"closed": [], "closed after a message": [hdr(CTL_OK)]}.items():
        def answer(conn, req, replies=replies):
            for r in replies:
                _send(conn, r)
        fake = fake_supervisor(answer)
        front, engine = _both(brig, sandboxes, "exec", fake.name, "--", "true")
        _same(front, engine, what)
        assert front.returncode == 125 and "went away during the exec" in front.stderr, (what, front)
    # closed with the request unread: nothing ran, said so (a pool's run
    # takes another member on it: test_pool_named.py)
    fake = fake_supervisor(None)
    front, engine = _both(brig, sandboxes, "exec", fake.name, "--", "true")
    _same(front, engine, "unread")
    assert front.returncode == 125 and "ended before it took the command" in front.stderr and \
        "nothing ran in it" in front.stderr, front
    assert fake.requests == ["unread", "unread"], fake.requests
    # the real one, killed mid-exec: one sandbox each
    ends = []
    for prog in ("brig", "brig-engine"):
        name, _ = sandboxes.create()
        pid = sandboxes.state(name)["supervisor_pid"]
        ready = brig.workspace / f"ready-{marker()[-8:]}"  # the workspace is the sandbox's cwd
        cmd = brig.prefix() + [str(brig.bindir / prog), "exec", name, "--", "sh", "-c",
                               f"echo > {ready.name}; sleep 60"]
        p = subprocess.Popen(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env()), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert wait_until(ready.exists, 30), "the command never started"
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=30)
        ends.append((p.returncode, out, err.replace(name, "NAME")))
    assert ends[0] == ends[1], ends
    assert ends[0][0] == 125 and "went away during the exec" in ends[0][2], ends


# ---- signals ----------------------------------------------------------------

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH)


def test_every_signal_brig_exec_forwards_reaches_the_supervisor(brig, sandboxes, fake_supervisor):
    """The front end forwards what brig exec forwards, once each, in the
    order sent, to the supervisor (as CTL_SIGNAL), and the command's end
    is still its exit status."""
    got = {}

    def answer(conn, req):
        seen = got.setdefault(len(got), [])
        while len(seen) < len(FORWARDED):
            f = HDR.unpack_from(conn.recv(CTL_MAX_MSG))
            assert f[0] == CTL_MAGIC and f[1] == CTL_SIGNAL, f[:2]
            seen.append(f[5])
        _send(conn, hdr(CTL_STATUS, EXITED(9)))
    fake = fake_supervisor(answer)
    for prog in ("brig", "brig-engine"):
        n = len(fake.requests)
        cmd = brig.prefix() + [str(brig.bindir / prog), "exec", fake.name, "--", "true"]
        p = subprocess.Popen(cmd, env=brig.env(sandboxes.env()), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert wait_until(lambda: len(fake.requests) > n, 30), "no request came"
            for i, sig in enumerate(FORWARDED):
                os.kill(p.pid, sig)
                # one at a time: two of one signal pending at once are one
                assert wait_until(lambda: len(got.get(n, [])) > i, 10), (prog, sig, got)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert (p.returncode, out, err) == (9, "", ""), (prog, p.returncode, out, err)
        assert got[n] == [int(s) for s in FORWARDED], (prog, got)
    assert not fake.errors, fake.errors


def test_a_reader_gone_from_stderr_leaves_the_status_as_the_engines(brig, sandboxes):
    """SIGPIPE: the end printed to a stderr whose reader is gone; the
    status stays the command's (143), not 141, through the front end as
    through the engine."""
    name, _ = sandboxes.create()
    codes = []
    for prog in ("brig", "brig-engine"):
        r, w = os.pipe()
        os.close(r)
        try:
            cmd = brig.prefix() + [str(brig.bindir / prog), "exec", name, "--", "sh", "-c", "kill -TERM $$"]
            codes.append(subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env()),
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w,
                                        timeout=60).returncode)
        finally:
            os.close(w)
    assert codes == [143, 143], codes


# ---- command lines ---------------------------------------------------------

def test_command_lines_read_as_the_engine_reads_them(brig, sandboxes):
    """Option-looking names and commands, `--` placement, --help anywhere,
    an empty command, names no sandbox may have: the front end runs what
    the engine would run, and hands the rest over whole."""
    name, _ = sandboxes.create()
    shapes = [
        ["exec"], ["exec", name], ["exec", name, "--"], ["exec", "--", name, "true"], ["exec", "--help"],
        ["exec", name, "--help"], ["exec", name, "--", "--help"], ["exec", name, "echo", "--help"],
        ["exec", name, "-h", "true"], ["exec", name, "--", ""], ["exec", name, ""], ["exec", name, "-", "x"],
        ["exec", name, "--", "-"], ["exec", name, "--", "--"], ["exec", name, "--", "--", "echo", "x"],
        ["exec", name, "echo", "--", "x"], ["exec", name, "--no-tty", "echo", "x"], ["exec", name, "--e", "x"],
        ["exec", name, "--env=A=b", "--", "sh", "-c", "echo $A"], ["exec", "-" + name, "true"],
        ["exec", "", "true"], ["exec", "cache", "true"], ["exec", "runs", "--", "true"], ["exec", "pools", "true"],
        ["exec", "x" * 65, "true"], ["exec", "a/b", "true"], ["exec", ".hidden", "true"], ["exec", "..", "true"],
        ["exec", name + "\n", "true"], ["exec", "no-such-" + name[:20], "--", "true"],
        ["exec", name, "--", "sh", "-c", 'printf "%s|" "$@"', "x", "", " a b ", "--", "-e"],
        ["exec", name, "--", "no-such-command-xyz"], ["exec", name, "--", "/"],
        ["execute", name, "true"], ["EXEC", name, "true"], ["exec ", name, "true"],
    ]
    for args in shapes:
        front, engine = _both(brig, sandboxes, *args)
        _same(front, engine, args)


def test_an_exec_at_the_message_limit_runs_as_the_engine_runs_it(brig, sandboxes):
    """A command line that makes a request of exactly CTL_MAX_MSG bytes
    runs; one byte more is refused, with the engine's words."""
    name, _ = sandboxes.create()
    # the request: header, "" (cwd), then each argv word with its NUL
    fixed = HDR.size + 1 + len(b"sh\0-c\0echo $#\0")
    for extra, ran in ((0, True), (1, False)):
        pad = CTL_MAX_MSG - fixed + extra
        words = ["y" * 1000] * (pad // 1001)
        rest = pad - len(words) * 1001
        if rest:
            words.append("z" * (rest - 1))
        front, engine = _both(brig, sandboxes, "exec", name, "--", "sh", "-c", "echo $#", *words)
        _same(front, engine, extra)
        if ran:
            assert front.returncode == 0 and front.stdout == f"{len(words) - 1}\n", front  # $0 is the first
        else:
            assert front.returncode == 125 and "exceed" in front.stderr, front


def test_argv0_names_read_as_the_engine_reads_them(brig, sandboxes, scratch):
    """A symlink to brig named brig-oci is the runc command line for the
    engine and for the front end alike; another name is brig."""
    name, _ = sandboxes.create()
    links = scratch / f"links-{marker()[-8:]}"
    links.mkdir()
    for link in ("brig-oci", "brig-anything", "brig-engine"):
        for prog in ("brig", "brig-engine"):
            (links / prog).mkdir(exist_ok=True)
            (links / prog / link).symlink_to(brig.bindir / prog)
        results = []
        for prog in ("brig", "brig-engine"):
            cmd = brig.prefix() + [str(links / prog / link), "exec", name, "--", "echo", "ran"]
            results.append(subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env()),
                                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL))
        _same(*results, what=link)
        if link == "brig-oci":
            assert results[0].returncode != 0 and "ran" not in results[0].stdout, results[0]
        else:
            assert results[0].returncode == 0 and results[0].stdout == "ran\n", results[0]


# ---- stdio ----------------------------------------------------------------

def test_stdio_of_every_kind_is_handled_as_the_engine_handles_it(brig, sandboxes, scratch):
    """A directory, a socket, a terminal on one of the three only: the
    same output and status, the same descriptors in the sandbox."""
    name, _ = sandboxes.create()
    probe = ["exec", name, "--", "sh", "-c",
             "for i in 0 1 2; do echo $i:$(readlink /proc/self/fd/$i | cut -c1-6) >&2; done; echo out; exit 4"]
    d = os.open(str(scratch), os.O_RDONLY | os.O_DIRECTORY)
    a, b = socket.socketpair()
    try:
        front, engine = _both(brig, sandboxes, *probe, stdin=d)
        _same(front, engine, "a directory as stdin")
        assert front.returncode == 125 and "stdin is a directory" in front.stderr, front
        front, engine = _both(brig, sandboxes, *probe, stdin=a.fileno())
        _same(front, engine, "a socket as stdin")
        assert front.returncode == 4, front
        for i in (0, 1, 2):
            results = []
            for prog in ("brig", "brig-engine"):
                mfd, sfd = os.openpty()
                stdio = [subprocess.DEVNULL, subprocess.PIPE, subprocess.PIPE]
                stdio[i] = sfd
                cmd = brig.prefix() + [str(brig.bindir / prog), *probe]
                r = subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env()), stdin=stdio[0],
                                   stdout=stdio[1], stderr=stdio[2], timeout=60)
                os.close(sfd)
                text = b""
                while select.select([mfd], [], [], 0.5)[0]:
                    try:
                        chunk = os.read(mfd, 4096)
                    except OSError:
                        break
                    if not chunk:
                        break
                    text += chunk
                os.close(mfd)
                results.append((r.returncode, r.stdout, r.stderr, text))
            assert results[0] == results[1], (f"a terminal on fd {i}", results)
    finally:
        os.close(d)
        a.close()
        b.close()


# ---- the state root -------------------------------------------------------

def test_state_roots_brig_refuses_are_refused_with_the_engines_words(brig, sandboxes, scratch):
    """XDG_RUNTIME_DIR missing, relative, world-writable, another user's,
    a symlink, a file: the front end connects through none of them and the
    engine says why, as it does alone."""
    name, _ = sandboxes.create()
    base = scratch / f"xdg-{marker()[-8:]}"
    base.mkdir(mode=0o755)
    (base / "open").mkdir(mode=0o777)
    (base / "open").chmod(0o777)
    (base / "theirs").mkdir(mode=0o700)
    os.chown(base / "theirs", OTHER_UID, OTHER_UID) if IS_ROOT else None
    (base / "link").symlink_to(sandboxes.run_dir)
    (base / "file").write_text("")
    cases = {"missing": str(base / "missing"), "relative": "run", "world-writable": str(base / "open"),
             "a file": str(base / "file"), "empty": "", "a symlink to the real one": str(base / "link")}
    if IS_ROOT:
        cases["another user's"] = str(base / "theirs")
    for what, xdg in cases.items():
        front, engine = _both(brig, sandboxes, "exec", name, "--", "echo", "ran", env={"XDG_RUNTIME_DIR": xdg})
        _same(front, engine, what)
        assert front.stdout != "ran\n" or what == "a symlink to the real one", (what, front)


# ---- which engine runs ----------------------------------------------------

@attack("front-engine-planted-relative",
        "a copy of brig with no brig-engine beside it, and a `libexec/brig/brig-engine` planted next to its "
        "directory (where an install puts the engine, relative to brig): in a directory of another user's, "
        "as a symlink beside brig to a planted program, and as a symlink `libexec/brig` into that user's tree",
        "the engine is opened only from a directory of root's or the user's that no one else may write, and only "
        "as a regular file of theirs (core/program.c): each is refused (125, refusing to run) and never runs")
def test_an_engine_planted_where_brig_looks_is_refused(brig, sandboxes, scratch):
    runs_as = 0 if brig.mode == "root" else brig.uid
    cases = []
    for how in ("another user's libexec", "a symlink beside brig", "a symlink to their libexec"):
        top = scratch / f"planted-{marker()[-8:]}"
        (top / "bin").mkdir(parents=True)
        shutil.copy2(brig.bindir / "brig", top / "bin" / "brig")
        ran = scratch / f"planted-ran-{marker()[-8:]}"
        theirs = top / "theirs" / "brig"
        theirs.mkdir(parents=True)
        (theirs / "brig-engine").write_text(f"#!/bin/sh\ntouch {ran}\necho PLANTED\n")
        (theirs / "brig-engine").chmod(0o755)
        if how == "another user's libexec":
            (top / "libexec").mkdir()
            os.rename(theirs, top / "libexec" / "brig")
            owned = [top / "libexec", top / "libexec" / "brig", top / "libexec" / "brig" / "brig-engine"]
        elif how == "a symlink beside brig":
            (top / "bin" / "brig-engine").symlink_to(theirs / "brig-engine")
            owned = [theirs.parent, theirs, theirs / "brig-engine"]
        else:
            (top / "libexec").mkdir()
            (top / "libexec" / "brig").symlink_to(theirs)
            owned = [theirs.parent, theirs, theirs / "brig-engine"]
        for p in owned:
            if IS_ROOT:
                os.chown(p, OTHER_UID if how != "a symlink beside brig" else runs_as, OTHER_UID, follow_symlinks=False)
        for p in (top, top / "bin", top / "bin" / "brig"):
            if IS_ROOT:
                os.chown(p, runs_as, runs_as, follow_symlinks=False)
            if p.is_dir():
                p.chmod(0o755)
        cases.append((how, top, ran))
    if not IS_ROOT:
        pytest.skip("ANOTHER USER'S DIRECTORY NEEDS ROOT: the suite is not running as root")
    name, _ = sandboxes.create()
    for how, top, ran in cases:
        for args in (["version"], ["exec", name, "--", "sh", "-c", "kill -TERM $$"]):
            cmd = brig.prefix() + [str(top / "bin" / "brig"), *args]
            r = subprocess.run(cmd, env=brig.env(sandboxes.env()), capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL, cwd=str(brig.workspace))
            assert r.returncode == 125 and "PLANTED" not in r.stdout, (how, args, r)
            assert "refusing to run" in r.stderr, (how, args, r)
            assert not ran.exists(), f"ATTACK WORKED: brig ran a planted brig-engine ({how})"


def test_an_engine_installed_relative_to_brig_is_found(brig, sandboxes, scratch):
    """The control of the row above: the same layout of the user's own (an
    install's bin/ and libexec/brig/) runs the engine there."""
    top = scratch / f"install-{marker()[-8:]}"
    (top / "bin").mkdir(parents=True)
    (top / "libexec" / "brig").mkdir(parents=True)
    shutil.copy2(brig.bindir / "brig", top / "bin" / "brig")
    shutil.copy2(brig.bindir / "brig-engine", top / "libexec" / "brig" / "brig-engine")
    for p in (top, top / "bin", top / "libexec", top / "libexec" / "brig"):
        p.chmod(0o755)
    r = subprocess.run(brig.prefix() + [str(top / "bin" / "brig"), "version"], env=brig.env(), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("brig "), r
