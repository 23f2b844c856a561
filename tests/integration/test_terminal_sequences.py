"""Terminal sequences that act beyond the screen (docs/security.md, "What
reaches your terminal"): OSC 52 sets the user's clipboard, OSC 0/2 the
window title, OSC 8 makes deceptive links, DCS/APC reach tmux and kitty's
file transfer, and queries (DSR, DA, DECRQM, 21t) make the terminal type
its answer into the input. Whatever way the sandbox's bytes reach the
caller's terminal — brig run's pty, brig run without a pty (stdout or
stderr a terminal), brig exec with and without a pty — they arrive
filtered, unless --terminal-passthrough.

Each test owns the host side of a pty, runs brig on its slave as root and
rootless, has the sandbox write the sequences one byte per write() (so the
relay sees them cut at every byte boundary), and asserts on the bytes the
host side received."""
import base64
import fcntl
import os
import pty
import select
import stat
import struct
import subprocess
import termios
import time

import pytest

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker
from test_escape import attack

CANARY = marker("CANARY")[:24]
CLIP = base64.b64encode(f"touch /tmp/{CANARY}; echo pasted".encode()).decode()
HEAD = "head-\u00fc\u20ac\U0001F600-"
TAIL = "-tail-\u00fc\u20ac\U0001F600"
ESC = "\x1b"
# (name, bytes, "gone": what must not reach the terminal)
SEQUENCES = [
    ("osc52-clipboard", f"{ESC}]52;c;{CLIP}\x07", [f"{ESC}]52", CLIP]),
    ("osc52-st", f"{ESC}]52;p;{CLIP}{ESC}\\", [f"{ESC}]52", CLIP]),
    ("osc52-query", f"{ESC}]52;c;?\x07", [f"{ESC}]52"]),
    ("title", f"{ESC}]0;T-{CANARY}\x07{ESC}]2;T-{CANARY}{ESC}\\", [f"{ESC}]0", f"{ESC}]2", f"T-{CANARY}"]),
    ("osc8-link", f"{ESC}]8;;http://evil.invalid/{CANARY}{ESC}\\LINKTEXT{ESC}]8;;{ESC}\\",
     [f"{ESC}]8", "evil.invalid"]),
    ("osc-colour", f"{ESC}]11;?\x07{ESC}]4;1;rgb:ff/00/00\x07", [f"{ESC}]11", f"{ESC}]4"]),
    ("osc-notify", f"{ESC}]9;N-{CANARY}\x07{ESC}]777;notify;a;N-{CANARY}\x07", [f"N-{CANARY}"]),
    ("dcs-decrqss", f"{ESC}P$qm{ESC}\\", [f"{ESC}P"]),
    ("dcs-tmux", f"{ESC}Ptmux;{ESC}{ESC}]52;c;{CLIP}\x07{ESC}\\", [f"{ESC}P", CLIP]),
    ("apc-kitty", f"{ESC}_Ga=T,t=f;L2V0Yy9wYXNzd2Q={ESC}\\", [f"{ESC}_", "L2V0Yy9wYXNzd2Q="]),
    ("pm-sos", f"{ESC}^P-{CANARY}{ESC}\\{ESC}XS-{CANARY}{ESC}\\", [f"P-{CANARY}", f"S-{CANARY}"]),
    ("c1-utf8", "\u009d52;c;Wg==\u009c\u009b6n\u0090$qm\u009c\u009fGx\u009c",
     ["\u009d", "\u009b", "\u0090", "\u009f", "\u009c"]),
    ("queries", f"{ESC}[6n{ESC}[5n{ESC}[c{ESC}[>c{ESC}[=c{ESC}[?2026$p{ESC}[21t{ESC}[14t{ESC}[>q{ESC}Z\x05",
     [f"{ESC}[6n", f"{ESC}[5n", f"{ESC}[c", f"{ESC}[>c", f"{ESC}[=c", "$p", f"{ESC}[21t", f"{ESC}[14t",
      f"{ESC}[>q", f"{ESC}Z", "\x05"]),
]
KEPT = [HEAD, TAIL, "LINKTEXT", f"{ESC}[31mred{ESC}[0m", f"{ESC}[?2004h", f"{ESC}[2;5H"]
# Raw 8-bit C1 bytes are not UTF-8: written one by one they must not arrive.
RAW_C1 = b"\x9d52;c;Wg==\x07\x9b6n"


def payload():
    body = HEAD.encode()
    for _, seq, _ in SEQUENCES:
        body += seq.encode() + b"|"
    body += f"{ESC}[31mred{ESC}[0m{ESC}[?2004h{ESC}[2;5H".encode() + RAW_C1 + TAIL.encode() + b"\n"
    return body


# The writer inside: one byte per write(), a little apart, so the relay
# reads the stream in pieces cut at every byte boundary. fd is the
# descriptor it writes to (0, 1 or 2).
WRITER = ("import os, sys, time\n"
          "d = open('/payload', 'rb').read()\n"
          "fd = int(sys.argv[1])\n"
          "for i in range(len(d)):\n"
          "    os.write(fd, d[i:i + 1])\n"
          "    time.sleep(0.0005)\n")


@pytest.fixture
def writer(brig):
    p = brig.base / "payload"
    p.write_bytes(payload())
    p.chmod(0o644)
    w = brig.base / "writer.py"
    w.write_text(WRITER)
    w.chmod(0o644)
    return ["--ro-bind", f"{p}:/payload", "--ro-bind", f"{w}:/writer.py"]


def read_all(master, proc, timeout=60):
    """Everything the host side receives until brig has exited and the
    slave is closed (or a second after that: a process left in a persistent
    sandbox may hold it)."""
    out = b""
    end = time.monotonic() + timeout
    exited_at = None
    while time.monotonic() < end:
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        if exited_at is not None and time.monotonic() - exited_at > 1:
            break
        r, _, _ = select.select([master], [], [], 0.1)
        if not r:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every slave descriptor is closed
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=max(1, end - time.monotonic()))
    return out


def on_pty(cmd, env, cwd, stdin="pty", stdout="pty", keep=False):
    """Run cmd with stderr (and stdin, or /dev/null; stdout, or a file) on a
    fresh pty whose host side the test holds; returns (returncode, output)
    or, with keep, also the master (the caller closes it) and the slave's
    name."""
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        out = slave if stdout == "pty" else open(os.path.join(cwd, "stdout.txt"), "wb")
        proc = subprocess.Popen(cmd, stdin=slave if stdin == "pty" else subprocess.DEVNULL, stdout=out,
                                stderr=slave, cwd=cwd, env=env, start_new_session=True)
        if out != slave:
            out.close()
    finally:
        os.close(slave)
    out = read_all(master, proc)
    if keep:
        return proc.returncode, out, master, name
    os.close(master)
    return proc.returncode, out


def assert_filtered(out, where):
    text = out.decode("utf-8", "strict")  # the filter writes valid UTF-8 only
    for name, _, gone in SEQUENCES:
        for g in gone:
            assert g not in text, f"ATTACK WORKED ({where}): {name}: {g!r} reached the terminal: {out!r}"
    assert not [c for c in text if 0x80 <= ord(c) <= 0x9f], f"ATTACK WORKED ({where}): a C1 control: {out!r}"
    assert b"\x9d" not in out and b"\x9b6n" not in out, f"ATTACK WORKED ({where}): raw 8-bit C1: {out!r}"
    for k in KEPT:
        assert k in text, f"({where}) ordinary output {k!r} lost: {out!r}"


def assert_passed(out, where):
    for name, seq, _ in SEQUENCES:
        assert seq.encode() in out, f"({where}) --terminal-passthrough: {name} did not arrive: {out!r}"
    assert RAW_C1 in out, out


# ---- brig run ---------------------------------------------------------------


@attack("term-osc52-clipboard", "OSC 52 (clipboard: a command pasted later runs on the host), titles, OSC 8 links, "
        "DCS/APC (tmux passthrough, kitty graphics), C1 forms, queries (answers typed into the input) through brig "
        "run's pty, one byte per write", "the relay's output filter (term_filter.c)")
def test_run_pty_drops_sequences_beyond_the_screen(brig, writer):
    rc, out = on_pty(brig.cmd("run", *writer, "--", "python3", "/writer.py", "1"), brig.env(), brig.workspace)
    assert rc == 0, out
    assert_filtered(out, "brig run, pty")
    rc, out = on_pty(brig.cmd("run", "--terminal-passthrough", *writer, "--", "python3", "/writer.py", "1"),
                     brig.env(), brig.workspace)
    assert rc == 0, out
    assert_passed(out, "brig run, pty")


@attack("term-direct-tty-fd", "without a pty (stdin not a terminal, or --no-tty) the command got the caller's "
        "terminal as stdout/stderr and read-write stdin, and wrote the sequences to it directly",
        "a caller's terminal among stdio is replaced by a pipe (stdin: a read-only socket), relayed through the filter")
@pytest.mark.parametrize("how", ["stdin-null", "stdout-file", "no-tty"])
def test_run_without_pty_drops_sequences(brig, writer, how):
    args = ["--no-tty"] if how == "no-tty" else []
    stdin = "null" if how == "stdin-null" else "pty"
    stdout = "file" if how == "stdout-file" else "pty"
    fds = {"stdin-null": ("1", "2"), "stdout-file": ("0", "2"), "no-tty": ("0", "1", "2")}[how]
    for fd in fds:
        rc, out = on_pty(brig.cmd("run", *args, *writer, "--", "python3", "/writer.py", fd), brig.env(),
                         brig.workspace, stdin=stdin, stdout=stdout)
        if fd == "0":
            # fd 0 is read-only for the command now: its write fails, nothing arrives.
            assert CLIP.encode() not in out and b"\x1b]" not in out, f"ATTACK WORKED: written through stdin: {out!r}"
            assert b"\x1b[6n" not in out, out
            continue
        assert rc == 0, out
        assert_filtered(out, f"brig run {how}, fd {fd}")
    # Nothing of the caller's terminal inside, and the order of stdout and stderr kept.
    rc, out = on_pty(brig.cmd("run", *args, "--", "sh", "-c",
                              "for f in 0 1 2; do test -t $f && echo TTY-$f >&2; done; echo A; echo B >&2; echo C"),
                     brig.env(), brig.workspace, stdin=stdin, stdout=stdout)
    assert rc == 0, out
    assert b"TTY-" not in out, f"the caller's terminal was handed in: {out!r}"
    if stdout == "pty":
        assert b"A\r\nB\r\nC" in out or b"A\nB\nC" in out, out
    rc, out = on_pty(brig.cmd("run", *args, "--terminal-passthrough", *writer, "--", "python3", "/writer.py", "2"),
                     brig.env(), brig.workspace, stdin=stdin, stdout=stdout)
    assert rc == 0, out
    assert_passed(out, f"brig run {how}")


def test_run_without_pty_stdin_still_works(brig):
    """stdin that is the caller's terminal reaches the command through brig
    (and EOF with it); stdout a pipe."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(brig.cmd("run", "--", "sh", "-c", "read v; echo GOT-$v; cat; echo EOF-SEEN"),
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=brig.workspace,
                                env=brig.env(), start_new_session=True)
        os.write(master, b"typed\n")
        time.sleep(0.5)
        os.write(master, b"more\n\x04")
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0, (out, err)
    assert b"GOT-typed" in out and b"more" in out and b"EOF-SEEN" in out, (out, err)


# ---- brig exec --------------------------------------------------------------


@attack("term-exec-sequences", "the same sequences through brig exec into a persistent sandbox, with and without "
        "a pty", "the exec client's relay runs the same filter; stdio terminals replaced as in brig run")
def test_exec_pty_drops_sequences(brig, sandboxes, writer):
    name, _ = sandboxes.create(*writer)
    env = brig.env(sandboxes.env())
    rc, out = on_pty(brig.cmd("exec", name, "--tty", "--", "python3", "/writer.py", "1"), env, brig.workspace)
    assert rc == 0, out
    assert_filtered(out, "brig exec --tty")
    rc, out = on_pty(brig.cmd("exec", name, "--no-tty", "--", "python3", "/writer.py", "2"), env, brig.workspace)
    assert rc == 0, out
    assert_filtered(out, "brig exec --no-tty")
    rc, out = on_pty(brig.cmd("exec", name, "--tty", "--terminal-passthrough", "--", "python3", "/writer.py", "1"),
                     env, brig.workspace)
    assert rc == 0, out
    assert_passed(out, "brig exec --tty")


def holders(path, exclude=()):
    """Host pids that hold the terminal at path open. By device number, not
    by name: a process in another mount namespace (the sandbox's) sees its
    descriptor under another name, or none."""
    rdev = os.stat(path).st_rdev
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in exclude:
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                st = os.stat(f"/proc/{pid}/fd/{fd}")
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == rdev:
                    found.append(int(pid))
                    break
        except OSError:
            continue
    return found


def describe(pid):
    """What a host process is, for a failure message."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/status") as f:
            ppid = next((l.split()[1] for l in f if l.startswith("PPid:")), "?")
        pidns = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError as e:
        return f"{pid} (gone: {e.strerror})"
    return f"{pid} ppid {ppid} {pidns} {cmd!r}"


@attack("term-exec-leftover", "a process left behind by brig exec --no-tty in a persistent sandbox kept the "
        "caller's terminal after brig exec returned: writes OSC 52 into the host shell's terminal later, reads what "
        "the user types next", "the command never gets the terminal: pipes the client closes when the exec ends")
def test_exec_leftover_process_keeps_no_terminal(brig, sandboxes):
    name, _ = sandboxes.create()
    env = brig.env(sandboxes.env())
    late = marker("LATE")[:20]
    # fd 3: a background list's stdin is /dev/null in a shell without job
    # control, so the leftover reads the terminal (what the user types next)
    # through a copy made before.
    script = (f"exec 3<&0; (trap '' HUP; sleep 2; printf '\\033]52;c;{CLIP}\\007{late}' >&2; printf '{late}' >&1; "
              f"cat <&3 > /tmp/stolen) & echo started")
    rc, out, master, tty = on_pty(brig.cmd("exec", name, "--no-tty", "--", "sh", "-c", script), env,
                                  brig.workspace, keep=True)
    try:
        assert rc == 0 and b"started" in out, out
        # brig exec has returned: nothing of the sandbox may hold the terminal now.
        # A process of the sandbox would hold it for good (the leftover's
        # cat runs until the sandbox is removed); what else holds it for a
        # moment is a fork of this test process (another thread's, between
        # its fork and exec, the slave still open here), gone well within the
        # second waited here, while the leftover sleeps for two first.
        deadline = time.monotonic() + 1
        while (held := holders(tty, exclude=(os.getpid(),))) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not held, (f"ATTACK WORKED: processes still hold the caller's terminal after brig exec: "
                          f"{[describe(pid) for pid in held]}")
        os.write(master, b"typed-after-exit\n")
        time.sleep(3)
        later = b""
        while select.select([master], [], [], 0.2)[0]:
            try:
                later += os.read(master, 65536)
            except OSError:
                break
        assert CLIP.encode() not in later and late.encode() not in later, \
            f"ATTACK WORKED: the sandbox wrote to the terminal after brig exec returned: {later!r}"
    finally:
        os.close(master)
    r = sandboxes.sh(name, "cat /tmp/stolen 2>/dev/null; echo END")
    assert "typed-after-exit" not in r.stdout, f"ATTACK WORKED: keystrokes read after exit: {r.stdout!r}"


def test_pass_fd_terminal_refused_without_passthrough(brig):
    """--pass-fd of a terminal would be a way around the filter: refused
    (125, naming the flag), allowed with --terminal-passthrough."""
    master, slave = pty.openpty()
    try:
        for extra, want in (((), 125), (("--terminal-passthrough",), 0)):
            cp = subprocess.run(brig.cmd("run", *extra, "--pass-fd", str(slave), "--", "true"), pass_fds=(slave,),
                                stdin=subprocess.DEVNULL, capture_output=True, cwd=brig.workspace, env=brig.env(),
                                timeout=30)
            assert cp.returncode == want, cp
            if want:
                assert b"is a terminal" in cp.stderr and b"--terminal-passthrough" in cp.stderr, cp
    finally:
        os.close(slave)
        os.close(master)
