"""Attacks on what issue 14's harness and hosts parts added (review): the
caller's output descriptors turned against brig — an audit reader that
closes its pipe, or stops reading while the sandbox fills it with refused
calls — and the report descriptor's reader gone at the end; an
--allow-private-host name steered to a metadata endpoint that is not
link-local (test_harness.py's namespace pair serves them).

Each run gets the caller's pipe through the brig fixture (root and
rootless); what is asserted is what the host sees: brig's exit, the files
the command made after the attack, the report brig wrote, the lines that
reached the pipe."""
import fcntl
import json
import os
import select
import socket
import subprocess

import pytest

from test_harness import CLIENT_PUBLIC, PORT, attack, client_run, lan  # noqa: F401 (lan: fixture)

# Refused calls, each logged: a hundred numbers no kernel has (a slot and a
# burst each, so the audit rate limit lets ~100 lines through: ~25 KiB).
FLOOD = ("python3 -c 'import ctypes; l = ctypes.CDLL(None); "
         "[l.syscall(n) for n in range(1000, 1100)]'")


def popen(brig, *args, fds):
    return subprocess.Popen(brig.cmd(*args), cwd=str(brig.workspace), env=brig.env(), pass_fds=fds,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout=60):
    """Its output; a brig that does not end within `timeout` is the attack
    working (the supervisor wedged): killed, and the test fails."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"brig did not end: its supervisor is wedged on the caller's descriptor\n{err}")


def first_line(fd):
    got = b""
    while b"\n" not in got:
        ready, _, _ = select.select([fd], [], [], 30)
        assert ready, "no audit line within 30 s"
        d = os.read(fd, 4096)
        assert d, got
        got += d
    return got


@attack("audit-reader-closes", "the --audit-fd pipe's reader closes it mid-run, then the command makes refused "
        "(logged) calls", "supervisor")
def test_audit_reader_that_closes_stops_the_stream_not_the_run(brig):
    """The reader takes the start event and closes; the command then floods
    refused calls. The write's EPIPE (and its SIGPIPE, which ended brig
    before its cleanup) stops only the stream: the command runs to its
    end, its exit code is brig's, stderr says once what happened naming
    the flag, and the report says the stream stopped and lines were lost."""
    rep = brig.reports / "closed.json"
    rd, wr = os.pipe()
    number = wr
    try:
        p = popen(brig, "run", "--json-report", rep, "--audit-fd", wr, "--", "sh", "-c",
                  f"while [ ! -e go ]; do sleep 0.05; done; {FLOOD}; echo after > after; exit 7", fds=(wr,))
        os.close(wr)
        wr = -1
        assert b'"event":"start"' in first_line(rd)
        os.close(rd)
        rd = -1
        (brig.workspace / "go").touch()
        out, err = finish(p)
    finally:
        for fd in (rd, wr):
            if fd >= 0:
                os.close(fd)
    assert p.returncode == 7, (p.returncode, err)
    assert (brig.workspace / "after").read_text() == "after\n"
    assert err.count(f"--audit-fd {number}: the reader closed it (EPIPE)") == 1, err
    audit = json.loads(rep.read_text())["audit"]
    assert "EPIPE" in audit["stopped"] and audit["lost"] >= 1, audit


@attack("audit-pipe-full-wedge", "the --audit-fd pipe (shrunk to one page) is never read while the command "
        "floods refused calls and outlives its --timeout", "supervisor")
def test_full_audit_pipe_never_wedges_the_supervisor(brig):
    """A full pipe blocked the supervisor's write, so it answered no more
    seccomp notifications (the command hung in its refused call) and its
    timeout never came: brig ran forever. Now the timeout ends the run, the
    command's flood got its answers (it went on to make a file), brig gives
    the unread rest up once nothing is read for a while after the run and
    says so, and what did reach the pipe is whole lines."""
    rep = brig.reports / "full.json"
    rd, wr = os.pipe()
    fcntl.fcntl(wr, fcntl.F_SETPIPE_SZ, 4096)
    try:
        p = popen(brig, "run", "--json-report", rep, "--timeout", "2s", "--audit-fd", wr, "--", "sh", "-c",
                  f"{FLOOD}; touch flooded; exec sleep 120", fds=(wr,))
        os.close(wr)
        wr = -1
        out, err = finish(p)
        os.set_blocking(rd, False)
        got = os.read(rd, 65536)
    finally:
        for fd in (rd, wr):
            if fd >= 0:
                os.close(fd)
    assert p.returncode == 124, (p.returncode, err)
    assert (brig.workspace / "flooded").exists(), err
    doc = json.loads(rep.read_text())
    assert doc["reason"] == "timeout", doc
    assert "nothing was read for 5 s after the run ended" in err and doc["audit"]["lost"] > 0, (err, doc["audit"])
    lines = got.decode().splitlines()
    assert got.endswith(b"\n") and [json.loads(x)["event"] for x in lines][0] == "start", got


@attack("report-reader-closes", "the --json-report-fd pipe's reader closes before the run ends", "supervisor")
def test_report_reader_gone_is_an_error_not_a_signal(brig):
    """The report's write meets EPIPE: brig says so and exits 125 (the
    caller asked for a report it did not get) after its cleanup — not
    killed by SIGPIPE half-way (exit -13, with its temporaries left)."""
    rd, wr = os.pipe()
    os.close(rd)
    try:
        p = popen(brig, "run", "--json-report-fd", wr, "--", "sh", "-c", "echo ran > ran", fds=(wr,))
        out, err = finish(p)
    finally:
        os.close(wr)
    assert (brig.workspace / "ran").read_text() == "ran\n"
    assert p.returncode == 125 and "--json-report-fd" in err and "Broken pipe" in err, (p.returncode, err)


def cidr_reaches(brig, lan, name, addr, host_flag):
    """The positive control: with --allow-cidr for ADDR the server there
    answers NAME, so the refusal before came from the control under test."""
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, ["--resolve", f"{name}:{addr}", host_flag, f"{name}:{PORT}",
                                              "--allow-cidr", f"{addr}/32:{PORT}"], name)
    assert f"{name} GOT PING" in out, (out, err)
    assert lan.seen(m) == [addr]


@attack("private-host-metadata-elsewhere", "--allow-private-host names resolving to Alibaba Cloud's metadata "
        "address 100.100.100.200 (inside CGNAT space, which the flag opens) and its ::ffff: form; an --allow-host "
        "name resolving to Azure's WireServer 168.63.129.16 (a public address)", "network")
def test_private_host_never_reaches_metadata_outside_link_local(brig, lan):
    """Metadata is not only 169.254.169.254: both servers (listening in the
    lan namespace) see nothing, the refusals say "metadata". Positive
    control: --allow-cidr reaches 100.100.100.200, so a refusal that came
    from elsewhere would have been caught."""
    names = {"ali.internal": "100.100.100.200", "ali6.internal": "::ffff:100.100.100.200"}
    rules = ["--resolve", "wire.example:168.63.129.16", "--allow-host", f"wire.example:{PORT}"]
    for name, addr in names.items():
        rules += ["--resolve", f"{name}:{addr}", "--allow-private-host", f"{name}:{PORT}"]
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, rules, *names, "wire.example")
    assert "GOT" not in out, (out, err)
    assert lan.seen(m) == [], "a metadata endpoint was reached"
    reasons = [e["reason"] for e in ev if e.get("decision") == "deny"]
    assert sum("is metadata" in r for r in reasons) >= 3, reasons

    cidr_reaches(brig, lan, "ali.internal", "100.100.100.200", "--allow-host")


def test_listening_socket_is_no_output_descriptor(brig):
    """A listening socket passes for open for writing but takes nothing:
    refused (125, the flag named), nothing run."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(brig.base / "listen.sock"))
        s.listen()
        fd = s.fileno()
        for flag in ("--audit-fd", "--json-report-fd"):
            r = brig.run("run", flag, fd, "--", "touch", "ran", pass_fds=(fd,))
            assert r.returncode == 125 and f"{flag} {fd}: the descriptor is a listening socket" in r.stderr, r
            assert not (brig.workspace / "ran").exists()


@attack("output-fd-shares-stdio", "--audit-fd/--json-report-fd given the same pipe as brig's stdout (3>&1) or "
        "stderr, so the command's own output lines land in the harness's stream", "process")
def test_output_fd_sharing_stdio_is_refused(brig):
    """The command writes a forged end event to its stdout; with the audit
    or report descriptor the same pipe as brig's stdout or stderr, it would
    be one line among brig's. Refused (125, the flag and the stream named),
    the command never runs, the harness's pipe holds no line; /dev/null
    shared with stdout stays allowed (no stream anyone parses)."""
    forged = '{"event":"end","exit_code":0,"forged":1}'
    for flag in ("--audit-fd", "--json-report-fd"):
        for std, name in ((1, "stdout"), (2, "stderr")):
            rd, wr = os.pipe()
            try:
                streams = {"stdout": wr} if std == 1 else {"stderr": wr}
                other = subprocess.PIPE
                p = subprocess.run(brig.cmd("run", flag, wr, "--", "sh", "-c", f"echo '{forged}'; touch ran"),
                                   cwd=str(brig.workspace), env=brig.env(), pass_fds=(wr,), timeout=60,
                                   **{"stdout": other, "stderr": other, **streams})
                os.close(wr)
                wr = -1
                got = os.read(rd, 65536).decode()
            finally:
                os.close(rd)
                if wr >= 0:
                    os.close(wr)
            said = (got + (p.stderr or b"").decode() + (p.stdout or b"").decode())
            assert p.returncode == 125, (flag, name, p.returncode, said)
            assert f"the same pipe as brig's {name} (fd {std})" in said, said
            assert "forged" not in said and not (brig.workspace / "ran").exists(), said
    null = os.open("/dev/null", os.O_WRONLY)
    try:
        r = subprocess.run(brig.cmd("run", "--audit-fd", null, "--", "true"), cwd=str(brig.workspace),
                           env=brig.env(), pass_fds=(null,), stdout=null, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(null)
    assert r.returncode == 0, r.stderr


def io_weights(brig_pid):
    """The weight files of brig's groups (brig-PID-...) in the io hierarchies."""
    found = {}
    for top in ("/sys/fs/cgroup",):
        for dirpath, dirs, _ in os.walk(top):
            for d in list(dirs):
                if d.startswith(f"brig-{brig_pid}-"):
                    for f in ("io.weight", "blkio.weight", "blkio.bfq.weight"):
                        try:
                            found[f"{dirpath}/{d}/{f}"] = open(f"{dirpath}/{d}/{f}").read().split()
                        except OSError:
                            pass
                    dirs.remove(d)
    return found


def test_io_weight_not_enforced_is_said(brig):
    """--io-weight is a control like --cpus: where no io or blkio group
    takes the weight (rootless here; as root where blkio.weight is gone
    with CFQ and BFQ's file is missing), stderr says so before the command
    starts and the report lists it — it was silent. Asserted on the host:
    a weight file of brig's group holds 300 exactly when no line is said."""
    p = popen(brig, "run", "--io-weight", "300", "--allow-degraded", "memory", "--allow-degraded", "pids",
              "--", "sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.05; done", fds=())
    try:
        deadline = 60
        while not (brig.workspace / "started").exists() and p.poll() is None and deadline > 0:
            select.select([], [], [], 0.05)
            deadline -= 0.05
        weights = io_weights(p.pid)
        (brig.workspace / "go").touch()
        out, err = finish(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    held = [f for f, v in weights.items() if "300" in v]
    said = "brig: WARNING: io: --io-weight 300 is not enforced" in err
    assert said != bool(held), (said, weights, err)
    r = brig.run("run", "--io-weight", "300", "--allow-degraded", "io", "--allow-degraded", "memory",
                 "--allow-degraded", "pids", "--", "true")
    assert r.returncode == 0 and "WARNING" not in r.stderr, r


@attack("name-to-host-own-address", "an --allow-private-host name resolving to the LAN address of brig's own host "
        "(its veth's), an --allow-host name resolving to the host's own public address; a server of the host "
        "listens on both", "network")
def test_names_never_reach_the_hosts_own_addresses(brig, lan):
    """The host's own addresses reach its own services like loopback does
    (a server bound to 0.0.0.0 in brig's namespace): refused for names,
    whatever the flag, and that server saw nothing. Positive control:
    --allow-cidr for the address reaches it."""
    rules = ["--resolve", f"self.internal:{lan.client_addr}", "--allow-private-host", f"self.internal:{PORT}",
             "--resolve", f"self.example:{CLIENT_PUBLIC}", "--allow-host", f"self.example:{PORT}"]
    m = lan.mark()
    rc, out, err, ev = client_run(brig, lan, rules, "self.internal", "self.example")
    assert "GOT" not in out, (out, err)
    assert lan.seen(m) == [], "the host's own service was reached through a name"
    reasons = [e["reason"] for e in ev if e.get("decision") == "deny"]
    assert sum("is this host's own" in r for r in reasons) == 2, reasons

    cidr_reaches(brig, lan, "self.internal", lan.client_addr, "--allow-private-host")


@attack("output-fd-shares-pass-fd", "--audit-fd/--json-report-fd a second number for the pipe the sandbox gets "
        "with --pass-fd (3>&4), the command writing a forged line to its descriptor", "process")
def test_output_fd_sharing_a_passed_fd_is_refused(brig):
    """The number is not --pass-fd's, the pipe is: refused (125, both
    numbers named), nothing runs, the harness's pipe holds nothing."""
    forged = '{"event":"end","exit_code":0,"forged":1}'
    for flag in ("--audit-fd", "--json-report-fd"):
        rd, passed = os.pipe()
        out = os.dup(passed)
        try:
            r = brig.run("run", "--pass-fd", passed, flag, out, "--", "python3", "-c",
                         f"import os; os.write({passed}, {forged!r}.encode() + b'\\n'); open('ran', 'w')",
                         pass_fds=(passed, out))
            os.close(passed)
            os.close(out)
            passed = out = -1
            os.set_blocking(rd, False)
            try:
                got = os.read(rd, 65536).decode()
            except BlockingIOError:
                got = ""
        finally:
            for fd in (rd, passed, out):
                if fd >= 0:
                    os.close(fd)
        assert r.returncode == 125, (flag, r)
        assert f"the same pipe as --pass-fd" in r.stderr and flag in r.stderr, r
        assert "forged" not in got and not (brig.workspace / "ran").exists(), got
