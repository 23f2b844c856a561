"""What brig hands back to the harness that drives it (issue 14, loose
ends): the refusals of a brig exec (and of brig run --pooled, which is
one) in its JSON report as brig run's has them; brig's own lines to a
stdout/stderr whose reader has gone never kill brig (the exit status stays
the command's, the cleanup happens); a report descriptor that no one reads
does not keep brig from ending.

Each runs as root and rootless (the brig fixture) and asserts on what the
harness gets: the report's fields, the exit status, what is left on the
host (tests/leftovers.py)."""
import json
import os
import subprocess
import time

import pytest

import leftovers
from persist_helpers import sandboxes  # noqa: F401 (fixture)
from test_escape import attack

# a DNS name refused with the network off, and a system call refused by the
# default profile: two causes of two kinds
KCMP = ("python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); "
        "l.syscall(312, os.getpid(), os.getpid(), 0, 0, 0)'")
REFUSED = "getent hosts one.test; " + KCMP
ONE_TEST = {"kind": "dns", "what": "one.test", "why": "network is off for this sandbox",
            "allow_with": "--allow-host one.test", "count": 2}


def kinds(doc):
    return sorted((f["kind"], f["what"]) for f in doc["refusals"])


@attack("exec-report-hides-refusals", "a command in a persistent sandbox is refused a name and a system call; "
        "the harness reads brig exec's --json-report", "report")
def test_exec_report_lists_what_its_command_was_refused(brig, sandboxes):
    """refusals[] of the exec's report holds what its command was refused,
    counted since it began (an earlier exec's are not in it), as brig run's
    report does; a clean exec's is empty."""
    name, _ = sandboxes.create()
    rep = brig.reports / "exec-first.json"
    r = sandboxes.sh(name, "getent hosts one.test", "--json-report", rep)
    assert r.returncode == 2, r
    doc = json.loads(rep.read_text())
    assert doc["refusals"] == [ONE_TEST] and "refusals_dropped" not in doc, doc
    r = sandboxes.sh(name, REFUSED, "--json-report", rep)
    doc = json.loads(rep.read_text())
    assert kinds(doc) == [("dns", "one.test"), ("syscall", "kcmp")], doc
    assert [f["count"] for f in doc["refusals"] if f["kind"] == "dns"] == [2], doc   # not 4: since it began
    syscall = [f for f in doc["refusals"] if f["kind"] == "syscall"][0]
    assert syscall["why"].startswith("refused on purpose") and syscall["allow_with"] is None, doc
    r = sandboxes.sh(name, "true", "--json-report", rep)
    assert r.returncode == 0 and json.loads(rep.read_text())["refusals"] == [], r


def test_exec_report_counts_the_causes_it_dropped(brig, sandboxes):
    """More causes than the sandbox keeps (64): the report counts the
    refusals it dropped, as brig run's does."""
    name, _ = sandboxes.create()
    rep = brig.reports / "exec-many.json"
    r = sandboxes.sh(name, "for i in $(seq 1 80); do getent hosts n$i.test; done", "--json-report", rep)
    doc = json.loads(rep.read_text())
    # refusals of the 16 causes over: two lookups each (A, AAAA)
    assert len(doc["refusals"]) == 64 and doc["refusals_dropped"] == 32, (r, doc)


def test_pooled_run_report_lists_refusals(brig, sandboxes):
    """brig run --pooled, served by a pool member: its report's refusals[]
    is the command's, as a new sandbox's would be."""
    r = sandboxes.brig_cmd("pool", "--size", "1")
    assert r.returncode == 0, r
    try:
        rep = brig.reports / "pooled-refused.json"
        r = sandboxes.brig_cmd("run", "--pooled", "--json-report", rep, "--", "sh", "-c", REFUSED)
        doc = json.loads(rep.read_text())
        assert doc["pool"]["served"] is True, (r, doc)
        assert kinds(doc) == [("dns", "one.test"), ("syscall", "kcmp")], doc
    finally:
        sandboxes.brig_cmd("pool", "--stop")
        for name in list(sandboxes.ls()):
            sandboxes.rm(name)


# The command writes to brig's stderr until its reader has gone (it ignores
# SIGPIPE itself, so its own writes fail with EPIPE), then is refused a name,
# so brig has a summary line to write to the closed pipe, and exits 7.
UNTIL_GONE = "trap '' PIPE; while echo line >&2; do sleep 0.05; done; getent hosts one.test; exit 7"


def reader_exits_early(brig, *brig_args, script=UNTIL_GONE, env=None, stderr=None):
    """`brig ... 2>&1 | head -1`: the reader takes one line and exits.
    brig's status, and what the run left on the host."""
    before = leftovers.snapshot(exe_dirs=[str(brig.bindir)])
    rd, wr = os.pipe()
    p = subprocess.Popen(brig.cmd(*brig_args, "--", "sh", "-c", script), cwd=str(brig.workspace),
                         env=brig.env(env), stdout=wr, stderr=wr if stderr is None else stderr,
                         stdin=subprocess.DEVNULL)
    os.close(wr)
    head = subprocess.run(["head", "-1"], stdin=rd, capture_output=True, text=True, timeout=60)
    os.close(rd)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("brig did not end after its reader had gone")
    # rootless without a memory cgroup, the line it took is brig's warning
    # at start: then brig's and the command's writes all meet the closed pipe
    assert head.stdout in ("line\n", "y\n") or head.stdout.startswith("brig: WARNING: "), head
    return rc, leftovers.new_since(before, settle=5, exe_dirs=[str(brig.bindir)])


@attack("stderr-reader-gone", "`brig run ... 2>&1 | head -1`: the command writes on until the reader has gone, "
        "then is refused a name, so brig's end-of-run summary meets the closed pipe", "process")
@pytest.mark.whole_host  # leftovers.new_since: the whole host's
def test_stderr_reader_gone_keeps_the_commands_status(brig):
    """brig's own lines fail with EPIPE instead of killing it with SIGPIPE:
    the exit status is the command's 7 (was 141), and nothing of the run
    is left on the host."""
    rc, left = reader_exits_early(brig, "run")
    assert rc == 7, f"brig exited {rc}: killed by SIGPIPE writing its own lines" if rc == 141 else rc
    assert not any(left.values()), leftovers.describe(left)


def test_stderr_reader_gone_keeps_the_exec_status(brig, sandboxes):
    """The same for brig exec, whose summary comes back from the sandbox's
    supervisor."""
    name, _ = sandboxes.create()
    rc, _ = reader_exits_early(brig, "exec", name, env=sandboxes.env())
    assert rc == 7, rc


def test_the_command_still_gets_sigpipe(brig):
    """brig blocks SIGPIPE for itself only: a command writing to a pipe
    whose reader has gone dies of it as it would outside brig (141)."""
    rc, _ = reader_exits_early(brig, "run", script="while echo line >&2; do sleep 0.05; done; exit 7")
    assert rc == 128 + 13, rc


@pytest.mark.whole_host  # leftovers.new_since: the whole host's
def test_tty_relay_to_a_gone_reader_hangs_the_command_up(brig):
    """--tty with stdout a pipe: brig relays the pty's output itself; when
    that write meets EPIPE the relay ends and the pty is hung up, as a
    closed terminal would be: the command gets SIGHUP (129, its status),
    not an endless write into nothing (was: brig killed by SIGPIPE, 141)."""
    rc, left = reader_exits_early(brig, "run", "--tty", script="yes; exit 9", stderr=subprocess.DEVNULL)
    assert rc == 128 + 1, rc
    assert not any(left.values()), leftovers.describe(left)


def full_pipe():
    """A pipe whose buffer is full (the smallest the kernel allows): a
    write to it blocks until someone reads, and no one will."""
    import fcntl
    rd, wr = os.pipe()
    fcntl.fcntl(wr, 1031, 4096)  # F_SETPIPE_SZ
    os.set_blocking(wr, False)
    try:
        while True:
            os.write(wr, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(wr, True)
    return rd, wr


@attack("report-reader-never-reads", "--json-report-fd given a pipe that no one reads (its buffer full): brig's "
        "report write after the cleanup would block for ever", "supervisor")
@pytest.mark.whole_host  # leftovers.new_since: the whole host's
def test_report_fd_never_read_gives_up_and_says_so(brig):
    """brig waits 5 s for the reader to take something, then gives up: 125,
    a line naming --json-report-fd and what to do; the command ran and the
    run's cleanup happened (was: brig hung for ever)."""
    before = leftovers.snapshot(exe_dirs=[str(brig.bindir)])
    rd, wr = full_pipe()
    try:
        p = subprocess.Popen(brig.cmd("run", "--json-report-fd", wr, "--", "sh", "-c", "echo ran > ran"),
                             cwd=str(brig.workspace), env=brig.env(), pass_fds=(wr,), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail("brig hung writing the report to a pipe no one reads")
    finally:
        os.close(wr)
        os.close(rd)
    assert (brig.workspace / "ran").read_text() == "ran\n"
    assert p.returncode == 125, (p.returncode, err)
    assert f"brig: --json-report-fd {wr}: nothing was read for 5 s after the run ended" in err, err
    assert time.monotonic() - start < 50
    left = leftovers.new_since(before, settle=5, exe_dirs=[str(brig.bindir)])
    assert not any(left.values()), leftovers.describe(left)


def test_report_fd_slow_reader_gets_all_of_it(brig):
    """A reader that takes the report slowly, a bit at a time, gets all of
    it: the bound is on no progress, not on the whole write."""
    rd, wr = full_pipe()
    try:
        p = subprocess.Popen(brig.cmd("run", "--json-report-fd", wr, "--", "true"), cwd=str(brig.workspace),
                             env=brig.env(), pass_fds=(wr,), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        os.close(wr)
        data = b""
        while True:
            time.sleep(0.2)
            chunk = os.read(rd, 4096)
            if not chunk:
                break
            data += chunk
        _, err = p.communicate(timeout=60)
    finally:
        os.close(rd)
    assert p.returncode == 0, err
    doc = json.loads(data.lstrip(b"x"))
    assert doc["exit_code"] == 0, doc
