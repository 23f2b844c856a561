"""The brig command's front end (src/front/brig.c): it runs a plain
`brig exec NAME -- COMMAND` itself and hands everything else to brig's
engine (brig-engine). What the user reads and the exit status must be the
engine's, whoever printed them; the engine it runs must be brig's own; and
nothing the caller's environment says may turn one exec into another."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, wait_until


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (docs/security.md's row)."""
    return pytest.mark.escape(ident, technique, control)


def _engine(brig, sandboxes, *args, **kw):
    """The same command line run by brig-engine itself: what brig exec
    printed before the front end."""
    cmd = brig.prefix() + [str(brig.bindir / "brig-engine"), *map(str, args)]
    return subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env(kw.get("env"))),
                          capture_output=True, text=True, timeout=kw.get("timeout", 60), stdin=subprocess.DEVNULL)


def _front(brig, sandboxes, *args, **kw):
    return sandboxes.brig_cmd(*args, stdin=subprocess.DEVNULL, **kw)


def _execs_traced(brig, sandboxes, *args):
    """brig ARGS under strace: the programs it executed (execve and
    execveat), and its result."""
    if not shutil.which("strace"):
        pytest.fail("strace is not installed (scripts/install-deps installs it)")
    log = brig.base / f"strace-{marker()[-8:]}"
    cmd = ["strace", "-f", "-qq", "-e", "trace=execve,execveat", "-o", str(log)] + brig.cmd(*args)
    env = brig.env(sandboxes.env())
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"  # LeakSanitizer cannot run under ptrace
    r = subprocess.run(cmd, cwd=str(brig.workspace), env=env, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return log.read_text(), r


def test_plain_exec_starts_no_engine(brig, sandboxes):
    name, _ = sandboxes.create()
    trace, r = _execs_traced(brig, sandboxes, "exec", name, "--", "sh", "-c", "echo ran; exit 5")
    assert r.returncode == 5 and r.stdout == "ran\n" and r.stderr == "", r
    assert "execveat(" not in trace, trace  # the engine is run through the descriptor it was checked on
    # --cwd and --env, in getopt's spellings, are the front end's too
    trace, r = _execs_traced(brig, sandboxes, "exec", name, "--cwd", "/tmp", "--env", "A=1", "--env=B=2", "--", "sh",
                             "-c", "pwd; echo $A$B")
    assert r.returncode == 0 and r.stdout == "/tmp\n12\n", r
    assert "execveat(" not in trace, trace
    # another option, or an end with something to say, is the engine's
    trace, r = _execs_traced(brig, sandboxes, "exec", name, "--timeout", "20s", "--", "pwd")
    assert r.returncode == 0 and r.stdout.startswith("/"), r
    assert "execveat(" in trace, trace
    trace, r = _execs_traced(brig, sandboxes, "exec", name, "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15 and "brig: command killed by signal 15 (TERM)" in r.stderr, r
    assert "execveat(" in trace and "BRIG_EXEC_OUTCOME_FD" not in r.stderr, trace


def test_every_end_reads_as_the_engines(brig, sandboxes):
    """Each way an exec can end, through the front end and through the
    engine alone: the same stdout, stderr and exit status."""
    name, _ = sandboxes.create("--net", "proxy", "--timeout", "2s", "--kill-after", "1s")
    ends = {
        "exit 0": ["sh", "-c", "echo out; echo err >&2"],
        "exit 7": ["sh", "-c", "exit 7"],
        "signal": ["sh", "-c", "kill -KILL $$"],
        "not found": ["no-such-command-xyz"],
        "timeout": ["sh", "-c", "echo start; sleep 30"],
        # the proxy refuses a host no rule allows: a refusal to print
        "refused": ["sh", "-c", "curl -s -o /dev/null --max-time 5 http://refused.invalid/; echo curl $?"],
    }
    boxes = {what: name for what in ends}
    if brig.mode == "root":  # rootless on v1 cgroups (this host) --memory is RLIMIT_DATA: no kill to print
        ends["memory"] = ["python3", "-c", "x = bytearray(200 << 20)"]
        boxes["memory"], _ = sandboxes.create("--memory", "64M")
    seen = {}
    for what, cmd in ends.items():
        front = _front(brig, sandboxes, "exec", boxes[what], "--", *cmd)
        engine = _engine(brig, sandboxes, "exec", boxes[what], "--", *cmd)
        assert (front.returncode, front.stdout, front.stderr) == (engine.returncode, engine.stdout, engine.stderr), \
            (what, front, engine)
        seen[what] = front
    assert seen["exit 0"].stdout == "out\n" and seen["exit 0"].stderr == "err\n"
    assert seen["exit 7"].returncode == 7 and seen["exit 7"].stderr == ""
    assert seen["signal"].returncode == 137 and "signal 9" in seen["signal"].stderr
    assert seen["timeout"].returncode == 124 and "raise with --timeout" in seen["timeout"].stderr
    assert "refused 1 connection: refused.invalid:80" in seen["refused"].stderr, seen["refused"]
    if "memory" in seen:
        assert seen["memory"].returncode == 137 and "raise with --memory" in seen["memory"].stderr, seen["memory"]


def test_command_lines_read_as_the_engine_reads_them(brig, sandboxes):
    """The options the front end takes, their spellings getopt takes too,
    the ones it leaves to the engine, and values the engine refuses: the
    same run (or the same refusal) either way."""
    name, _ = sandboxes.create()
    lines = [
        ["--", "pwd"], ["pwd"], ["--cwd", "/tmp", "pwd"], ["--cwd=/tmp", "--", "pwd"], ["--cwd", "/", "--cwd", "/tmp",
                                                                                         "--", "pwd"],
        ["--env", "A=1", "--env=B=x=y", "--", "sh", "-c", "echo $A $B"], ["--env", "A=", "--", "sh", "-c", "echo [$A]"],
        ["--", "--help"], ["--", "-x"], ["-", "x"],
        # the engine's to refuse: relative, empty, missing values; no NAME=
        ["--cwd", "tmp", "--", "pwd"], ["--cwd=", "--", "pwd"], ["--cwd"], ["--env", "X", "--", "true"],
        ["--env", "=x", "--", "true"], ["--env"], ["--"], [""], ["--", ""],
        # the engine's to read: an abbreviation, other options, --help
        ["--cw", "/tmp", "--", "pwd"], ["--en", "A=1", "--", "sh", "-c", "echo $A"], ["--quiet", "--", "true"],
        ["--help"], ["-h", "--", "true"], ["--nope", "--", "true"],
    ]
    for args in lines:
        front = _front(brig, sandboxes, "exec", name, *args)
        engine = _engine(brig, sandboxes, "exec", name, *args)
        assert (front.returncode, front.stdout, front.stderr) == (engine.returncode, engine.stdout, engine.stderr), \
            (args, front, engine)


def test_no_such_sandbox_is_said_by_the_engine(brig, sandboxes):
    sandboxes.create()  # the state root is there: the name is what is missing
    front = _front(brig, sandboxes, "exec", "no-such-sandbox-xyz", "--", "true")
    engine = _engine(brig, sandboxes, "exec", "no-such-sandbox-xyz", "--", "true")
    assert front.returncode == 125 and "no-such-sandbox-xyz" in front.stderr, front
    assert (front.returncode, front.stderr) == (engine.returncode, engine.stderr)
    bad = _front(brig, sandboxes, "exec", "../escape", "--", "true")
    assert bad.returncode == 125 and "bad sandbox name" in bad.stderr, bad


@attack("front-end-outcome-variable", "BRIG_EXEC_OUTCOME_FD set by the caller to a descriptor of its own: the engine "
        "would print a forged end instead of running the command", "the front end drops it and names only its own "
        "memfd")
def test_a_callers_outcome_variable_is_never_passed_on(brig, sandboxes):
    """BRIG_EXEC_OUTCOME_FD names the front end's own memfd to the engine.
    Set by the caller, it must not make the engine print an end read from
    the caller's descriptor instead of running the command."""
    name, _ = sandboxes.create()
    fake = brig.base / f"fake-end-{marker()[-8:]}"
    fake.write_bytes(b"\0" * 64)
    with open(fake, "rb") as f:
        for args in (["--cwd", "/", "--", "sh", "-c", "echo ran"], ["--", "sh", "-c", "echo ran"]):
            r = sandboxes.brig_cmd("exec", name, *args, env={"BRIG_EXEC_OUTCOME_FD": str(f.fileno())},
                                   pass_fds=(f.fileno(),), stdin=subprocess.DEVNULL)
            assert r.returncode == 0 and r.stdout == "ran\n", (args, r)
        # ... also for a command the engine runs from the start
        r = sandboxes.brig_cmd("run", "--", "sh", "-c", "echo ran", env={"BRIG_EXEC_OUTCOME_FD": str(f.fileno())},
                               pass_fds=(f.fileno(),), stdin=subprocess.DEVNULL)
        assert r.returncode == 0 and r.stdout == "ran\n", r


def _front_copy(brig, scratch, engine_mode=None, dir_mode=0o755):
    d = scratch / f"front-{marker()[-8:]}"
    d.mkdir()
    shutil.copy2(brig.bindir / "brig", d / "brig")
    (d / "brig").chmod(0o755)
    if engine_mode is not None:
        ran = scratch / f"planted-ran-{marker()[-8:]}"
        (d / "brig-engine").write_text(f"#!/bin/sh\ntouch {ran}\necho PLANTED\n")
        (d / "brig-engine").chmod(engine_mode)
    else:
        ran = None
    d.chmod(dir_mode)
    return d, ran


@attack("front-end-engine-planted", "a brig-engine planted beside a copied brig in a directory others may write, "
        "or writable by others itself, or none at all", "core/program.c: found beside brig or in libexec/brig, "
        "checked on its descriptor, run through it (fexecve)")
def test_engine_is_found_only_where_brig_trusts(brig, sandboxes, scratch):
    # an engine in a directory others may write, or writable by others
    # itself: refused, and not run
    for engine_mode, dir_mode in ((0o755, 0o777), (0o757, 0o755)):
        d, ran = _front_copy(brig, scratch, engine_mode, dir_mode)
        r = subprocess.run(brig.prefix() + [str(d / "brig"), "version"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 125 and "refusing to run" in r.stderr and "PLANTED" not in r.stdout, r
        assert not ran.exists(), "ATTACK WORKED: brig ran a brig-engine others could write"
    # none beside it, none installed: said, with what to do
    d, _ = _front_copy(brig, scratch)
    r = subprocess.run(brig.prefix() + [str(d / "brig"), "version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 125 and "brig-engine not found" in r.stderr and "installed completely" in r.stderr, r
    # ... and no exec either: the front end sends nothing it cannot end
    name, _ = sandboxes.create()
    r = subprocess.run(brig.prefix() + [str(d / "brig"), "exec", name, "--", "sh", "-c", "kill -TERM $$"],
                       env=brig.env(sandboxes.env()), capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 125 and "brig-engine not found" in r.stderr, r


def test_front_end_keeps_the_engines_name(brig, sandboxes):
    """The engine runs under the name the user ran: ps, the sandbox's pid 1."""
    r = brig.run("run", "--", "cat", "/proc/1/comm")
    assert r.returncode == 0 and r.stdout == "brig\n", r


def test_front_end_alone_says_why_in_one_write(brig, scratch):
    """The front end copied without its engine refuses (125) and names
    what is missing, in one line that leaves in one write: musl's printf
    writes an unbuffered stderr 80 bytes at a time."""
    if not shutil.which("strace"):
        pytest.fail("strace is not installed (scripts/install-deps installs it)")
    lone = scratch / "lone"
    lone.mkdir()
    lone.chmod(0o755)
    shutil.copy2(brig.exe, lone / "brig")
    log = scratch / "strace-lone"
    # strace as the caller; rootless, setpriv execs brig in the process it traces
    cmd = ["strace", "-qq", "-s", "4096", "-e", "trace=write,writev", "-e", "signal=none", "-o", str(log)] + \
        brig.prefix() + [str(lone / "brig"), "run", "--", "true"]
    r = subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(), capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 125 and r.stderr.count("\n") == 1 and "brig-engine not found" in r.stderr, r
    calls = [line for line in log.read_text().splitlines() if line.startswith(("write(2,", "writev(2,"))]
    assert len(calls) == 1 and f"= {len(r.stderr)}" in calls[0], (calls, r.stderr)


def test_a_signal_while_connecting_ends_the_exec_unsent(brig, sandboxes):
    """A brig exec whose connection waits (here the supervisor is stopped
    and its listen backlog full) ends at SIGTERM with nothing sent: its
    command runs neither then nor once the supervisor goes on. The front
    end blocks the signals it forwards only once it is connected; blocked
    during the connect, the SIGTERM waited in its signalfd, the request
    left when the connection came, and the command the caller gave up on
    ran."""
    name, _ = sandboxes.create()
    sup = sandboxes.state(name)["supervisor_pid"]
    ctl = str(sandboxes.root / name / "ctl")
    ran = brig.workspace / f"ran-{marker()[-8:]}"
    fillers, p, ended_stopped = [], None, None
    os.kill(sup, signal.SIGSTOP)
    try:
        for _ in range(1000):  # connections no accept takes, until the next one would wait
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.setblocking(False)
            try:
                s.connect(ctl)
            except BlockingIOError:
                s.close()
                break
            fillers.append(s)
        else:
            pytest.fail("the control socket's backlog never filled")
        p = sandboxes.popen_exec(name, "--", "touch", str(ran), stdin=subprocess.DEVNULL)
        time.sleep(1)
        assert p.poll() is None, p.communicate()  # waiting in its connect
        p.send_signal(signal.SIGTERM)
        ended_stopped = wait_until(lambda: p.poll() is not None, 10)
    finally:
        os.kill(sup, signal.SIGCONT)
        for s in fillers:
            s.close()
        if p and p.poll() is None:
            p.kill()
        if p:
            p.wait(timeout=60)
    assert ended_stopped and p.returncode == -signal.SIGTERM, p.returncode
    # the supervisor serves again, and what it had queued is gone
    r = sandboxes.exec(name, "--", "true")
    assert r.returncode == 0, r
    time.sleep(0.5)
    assert not ran.exists()
