"""Sessions and process groups: pid 1 leaves the caller's process group but
not its session (issue 19: a session of its own cost the child the CPU,
core/child.c), and nothing the sandbox runs shares pid 1's session.

What a session of pid 1's own gave, each now had another way, and tried
here from both sides: a signal the terminal or a shell sends to brig's
process group reaches brig alone (pid 1 leads its own group), and the
caller's terminal, which pid 1's session now has as its controlling
terminal, stays out of the command's reach (the command leads a session
of its own, before it runs anything: command_confine)."""
import os
import pathlib
import signal

import pytest

from proc_helpers import marker, run_popen, shell_quote, wait_until


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (test_escape.py's marker)."""
    return pytest.mark.escape(ident, technique, control)


def _stat(pid):
    """(state, pgrp, session) of a host process, or None once it is gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[2]), int(fields[3])


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(k) for k in pathlib.Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
        out += kids
        todo += kids
    return out


def _sandbox_processes(pid):
    """brig's descendants in another pid namespace than brig's: the
    sandbox's. Not brig's own helpers, such as a root brig's idmapped-
    workspace helper, born in brig's group and reaped a moment after the
    child is released (the clean-clone CI's ASan run met its zombie)."""
    try:
        own = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return []
    out = []
    for q in _descendants(pid):
        try:
            if os.readlink(f"/proc/{q}/ns/pid") != own:
                out.append(q)
        except OSError:
            pass  # gone, or a zombie: in no namespace any more
    return out


@attack("pgrp-signal-reaches-init", "what the caller's terminal or shell sends to brig's process group (Ctrl-C, "
        "Ctrl-Z, a hangup, `kill -STOP -PGID` of a job-control shell or a CI runner) reaching pid 1 as well, now that "
        "pid 1 stays in the caller's session (issue 19): SIGSTOP to the group, then a signal to count",
        "processes")
def test_signals_to_brigs_process_group_reach_brig_alone(brig):
    ws = brig.workspace
    got = ws / "usr1-count"
    script = (f"n=0; trap 'n=$((n+1)); echo $n > {got}' USR1; echo ready; "
              "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done")
    # its own process group, led by brig, as a shell runs a job
    p = run_popen(brig, "run", "--", "sh", "-c", script, start_new_session=True)
    try:
        assert p.stdout.readline() == b"ready\n"
        pgid = os.getpgid(p.pid)
        assert pgid == p.pid
        sandbox = _sandbox_processes(p.pid)
        assert sandbox, "no sandbox process under brig"
        in_group = [q for q in sandbox if (_stat(q) or ("", 0, 0))[1] == pgid]
        assert not in_group, f"ATTACK WORKED: sandbox processes {in_group} are in brig's process group {pgid}"
        # a job-control shell stops the job: brig stops, the sandbox's init
        # does not (SIGSTOP from an ancestor namespace stops even an init)
        os.killpg(pgid, signal.SIGSTOP)
        try:
            assert wait_until(lambda: (_stat(p.pid) or ("T",))[0] == "T", 5), "control: brig was not stopped"
            stopped = [q for q in sandbox if (_stat(q) or ("",))[0] == "T"]
            assert not stopped, f"ATTACK WORKED: SIGSTOP to brig's group stopped sandbox processes {stopped}"
        finally:
            os.killpg(pgid, signal.SIGCONT)
        # and a signal the group gets comes to the command once, from brig
        os.killpg(pgid, signal.SIGUSR1)
        assert wait_until(lambda: got.exists() and got.read_text().strip() == "1", 10), "SIGUSR1 never came"
        os.kill(p.pid, signal.SIGUSR1)  # a second, to brig alone: the count must move to 2, never 3
        assert wait_until(lambda: got.read_text().strip() == "2", 10), got.read_text()
        os.kill(p.pid, signal.SIGTERM)
        p.communicate(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert got.read_text().strip() == "2", f"the command got {got.read_text().strip()} SIGUSR1 for two sent"


PROBE = r'''
import errno, fcntl, os, sys, termios
tag, mark = sys.argv[1], sys.argv[2]
print("BEGIN-" + tag + "-", flush=True)
def attempt(name, f):
    try:
        f()
        print(name + "=ok", flush=True)
    except OSError as e:
        print(name + "=" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
def devtty():
    fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY)
    os.write(fd, ("TTY" + mark + "\r\n").encode())
def sti():
    fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    fcntl.ioctl(fd, termios.TIOCSTI, b" ")
def steal():
    if os.fork() == 0:
        os.setsid()
        try:
            fcntl.ioctl(1, termios.TIOCSCTTY, 1)
            os._exit(0)
        except OSError as e:
            os._exit(e.errno)
    _, st = os.wait()
    if os.waitstatus_to_exitcode(st):
        raise OSError(os.waitstatus_to_exitcode(st), "TIOCSCTTY")
attempt("devtty", devtty)
if tag == "host":  # the control: the rest would take the caller's own shell's terminal
    print("END-" + tag + "-", flush=True)
    sys.exit(0)
attempt("tiocsti", sti)
attempt("join_pid1_group", lambda: os.setpgid(0, int(sys.argv[3])))
attempt("steal_terminal", steal)
print("END-" + tag + "-", flush=True)
'''


def _probe_on(session, prefix, tag, mark, pid1_group):
    line = " ".join([*prefix, "python3", "probe_session.py", tag, mark, str(pid1_group)])
    session.host.send(line + session.done_suffix() + "\n")
    m = session.host.expect(rb"(?s)(.*)" + session._done.encode() + rb"-(\d+)-", 30)
    out = m.group(1).decode(errors="replace")
    body = out.split(f"BEGIN-{tag}-", 1)[-1].split(f"END-{tag}-", 1)[0]
    found = dict(line.strip().split("=", 1) for line in body.splitlines() if "=" in line)
    return out, found


@attack("callers-terminal-via-init-session", "pid 1 now stays in the caller's session, whose controlling "
        "terminal is the caller's: the command opens /dev/tty (the session's terminal) and writes to it, pushes a "
        "byte with TIOCSTI, joins pid 1's process group (same session: allowed), and makes the caller's terminal, "
        "passed through, its own controlling terminal (setsid, TIOCSCTTY), without a pty and with the terminal "
        "passed through", "terminal")
def test_the_caller_terminal_stays_out_of_reach(brig):
    from test_terminal import Session
    (brig.workspace / "probe_session.py").write_text(PROBE)
    brig.chown(brig.workspace / "probe_session.py")
    s = Session(brig)
    try:
        # control: in the caller's session, on the host, each one works
        mark = marker("tty")
        out, found = _probe_on(s, [], "host", mark, 0)
        assert found.get("devtty") == "ok" and "TTY" + mark in out, (found, out)
        for args in (("--no-tty",), ("--no-tty", "--terminal-passthrough")):
            mark = marker("tty")
            tag = "in" + str(len(args))
            # pid 1's group, as the command sees it: 1 in the sandbox's pid namespace
            prefix = [shell_quote(a) for a in (brig.exe, "run", *args, "--")]
            out, found = _probe_on(s, prefix, tag, mark, 1)
            assert found, out
            assert "TTY" + mark not in out, f"ATTACK WORKED: the command wrote on the caller's terminal ({args})"
            assert found.get("devtty") == "ENXIO", (args, found, out)
            assert found.get("tiocsti") == "ENXIO", (args, found, out)
            assert found.get("join_pid1_group") == "EPERM", (args, found, out)
            assert found.get("steal_terminal") in ("EPERM", "ENOTTY"), (args, found, out)
    finally:
        s.close()
