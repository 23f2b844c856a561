"""Landlock: the second statement of the grants, in the kernel's LSM layer.

Landlock is only visible where it says something the mounts do not: /proc
is a writable mount, but Landlock grants it read-only; TCP bind/connect
(ABI 4) and the scoping of abstract unix sockets and signals to the
sandbox (ABI 6) have no mount equivalent. Each such test shows the mount
would have allowed the access, so only Landlock can have refused it."""
import json
import os
import subprocess

import pytest

from conftest import Brig
from proc_helpers import kv, marker, pids_with, wait_until

IS_ROOT = os.geteuid() == 0


def host_abi():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return max(abi, 0)


ABI = host_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason="LANDLOCK NOT TESTED: the host has no Landlock")


def probe(brig, *args, brig_args=(), **kw):
    kw.setdefault("timeout", 30)
    r = brig.run("run", "--ro-bind", f"{brig.program('probe_syscall')}:/probe", *brig_args,
                 "--", "/probe", *map(str, args), **kw)
    return r, kv(r.stdout)


@needs_landlock
def test_report_names_the_abi(brig):
    path = brig.home / "report.json"
    r = brig.run("run", "--json-report", path, "--", "true")
    assert r.returncode == 0, r
    assert json.loads(path.read_text())["controls"]["landlock_abi"] == ABI, r


@needs_landlock
def test_grants_still_work(brig):
    """The allow side: everything the grants give must survive Landlock."""
    r = brig.sh("set -e; echo a > ws-file; mkdir -p d/e && mv ws-file d/e/ && rm -r d; "
                "echo b > /tmp/t && truncate -s 0 /tmp/t && ln -s t /tmp/l && mkfifo /tmp/f; "
                "echo c > \"$HOME/h\"; echo d > /dev/shm/s; echo e > /dev/null; "
                "head -c 4 /dev/urandom | wc -c; cat /etc/passwd > /dev/null; ls / > /dev/null; "
                "ls /proc/self/fd > /dev/null; cat /proc/self/status > /dev/null; "
                "cp /usr/bin/true /tmp/mytrue && /tmp/mytrue && echo all-ok")
    assert r.returncode == 0 and "all-ok" in r.stdout, r


@needs_landlock
@pytest.mark.parametrize("path", ["/proc/self/comm", "/proc/self/oom_score_adj"])
def test_proc_writes_stopped_by_landlock_alone(brig, path):
    # The mount allows it: /proc is mounted read-write inside...
    r = brig.sh("awk '$5 == \"/proc\" {print $6}' /proc/self/mountinfo")
    assert r.stdout.split(",")[0].strip() == "rw", r
    # ...and the file is the process's own (DAC allows it), yet the write fails.
    r, k = probe(brig, "write", path)
    assert k.get("open_write") == "EACCES", r


def test_loopback_tcp_inside_works_but_reaches_only_the_sandbox(brig):
    """Network mode "none": the namespace is the wall. A local server and
    client inside work (test suites need them); the host's loopback stays
    unreachable, which a host listener on the same port proves."""
    host = __import__("socket").socket()
    host.bind(("127.0.0.1", 0))
    host.listen(1)
    port = host.getsockname()[1]
    try:
        r = brig.sh("exec python3 - <<'EOF'\n"
                    "import socket, errno, threading\n"
                    f"port = {port}\n"
                    "try:\n"
                    "    socket.create_connection(('127.0.0.1', port), timeout=2); print('host reached')\n"
                    "except OSError as e: print('host', errno.errorcode.get(e.errno, e))\n"
                    "srv = socket.socket(); srv.bind(('127.0.0.1', port)); srv.listen(1)\n"
                    "threading.Thread(target=lambda: srv.accept()[0].sendall(b'own'), daemon=True).start()\n"
                    "print('inside', socket.create_connection(('127.0.0.1', port), timeout=2).recv(3).decode())\n"
                    "EOF")
    finally:
        host.close()
    assert r.returncode == 0, r
    assert "host ECONNREFUSED" in r.stdout, r   # the host's listener is not there
    assert "inside own" in r.stdout, r


@needs_landlock
@pytest.mark.skipif(ABI < 6, reason="LANDLOCK SCOPES NOT TESTED: ABI < 6")
def test_signal_outside_the_domain_refused(brig):
    """brig's pid 1 runs as the same user but outside the command's Landlock
    domain: without the signal scope, kill(1, 0) would succeed."""
    r, k = probe(brig, "signal", 1)
    assert k.get("signal0") == "EPERM", r
    r = brig.sh("sleep 5 & kill -0 $! && echo inside-ok; kill $!")
    assert "inside-ok" in r.stdout, r


@needs_landlock
@pytest.mark.skipif(ABI < 6, reason="LANDLOCK SCOPES NOT TESTED: ABI < 6")
def test_abstract_socket_of_the_sandbox_itself_works(brig):
    r, k = probe(brig, "abstract-self")
    assert k.get("abstract_listen") == "ok" and k.get("abstract_connect_self") == "ok", r


@needs_landlock
@pytest.mark.skipif(ABI < 6, reason="LANDLOCK SCOPES NOT TESTED: ABI < 6")
@pytest.mark.skipif(not IS_ROOT, reason="ABSTRACT SOCKET SCOPE NOT TESTED: nsenter needs root")
def test_abstract_socket_of_a_host_process_refused(brig):
    """A host process listens on an abstract socket in the sandbox's own
    network namespace (joined with nsenter): only the Landlock scope stands
    between the command and that socket."""
    mark = marker("abs")
    name = f"brig-test-{mark}"
    ready = brig.workspace / "ready"
    script = (f": {mark}; while [ ! -e ready ]; do sleep 0.05; done; "
              f"/probe abstract {name}; /probe abstract-self")
    p = subprocess.Popen(brig.cmd("run", "--ro-bind", f"{brig.program('probe_syscall')}:/probe", "--",
                                  "sh", "-c", script),
                         cwd=str(brig.workspace), env=brig.env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    listener = None
    try:
        host_net = os.readlink("/proc/self/ns/net")

        def netns(pid):
            try:
                return os.readlink(f"/proc/{pid}/ns/net")
            except OSError:
                return host_net

        def inside():  # brig's own command line has the mark too: skip the host's
            return [q for q in pids_with(mark) if netns(q) != host_net]
        pids = wait_until(inside, timeout=10)
        assert pids, "the sandboxed shell never appeared"
        listen = ("import socket, sys, time\n"
                  "s = socket.socket(socket.AF_UNIX)\n"
                  f"s.bind('\\0{name}'); s.listen(4)\n"
                  f"open('{ready}', 'w').close(); time.sleep(20)\n")
        listener = subprocess.Popen(["nsenter", f"--net=/proc/{pids[0]}/ns/net", "--",
                                     "/usr/bin/python3", "-c", listen])
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
        if listener:
            listener.kill()
            listener.wait()
    k = kv(out)
    # Without the scope this is "ok": same netns, same abstract namespace.
    assert k.get("abstract_connect") == "EPERM", (out, err)
    assert k.get("abstract_connect_self") == "ok", (out, err)


# ---- Landlock alone, with the mounts deliberately wrong ------------------------
#
# A build with test hooks (make build-hooks) honours BRIG_TEST_WRITABLE_BINDS=1
# and leaves read-only binds writable at the mount level: the only thing left
# to refuse a write to them is Landlock.

@needs_landlock
def test_landlock_alone_refuses_writes_to_read_only_grants(mode, scratch, hooks_bindir):
    b = Brig(hooks_bindir, mode, scratch)
    grant = scratch / "granted"
    grant.mkdir()
    (grant / "file").write_text("ORIGINAL\n")
    # DAC must allow the write, whoever the sandbox user is: only the mount
    # and Landlock are left to refuse it.
    grant.chmod(0o777)
    (grant / "file").chmod(0o666)
    script = ("echo CHANGED > /data/file; echo w=$?; touch /data/new; echo c=$?; "
              "grep -q ' /data .*ro,' /proc/self/mounts && echo mount=ro || echo mount=rw")
    relaxed = b.run("run", "--ro-bind", f"{grant}:/data", "--", "sh", "-c", script,
                    env={"BRIG_TEST_WRITABLE_BINDS": "1"})
    assert "mount=rw" in relaxed.stdout, relaxed          # the mount really is writable
    assert "w=0" not in relaxed.stdout and "c=0" not in relaxed.stdout, relaxed
    assert "Permission denied" in relaxed.stderr, relaxed  # EACCES: Landlock, not EROFS
    assert (grant / "file").read_text() == "ORIGINAL\n"
    assert not (grant / "new").exists()
    # The control: the same relaxed run without Landlock writes the file,
    # so the refusal above is Landlock's alone.
    control = b.run("run", "--ro-bind", f"{grant}:/data", "--", "sh", "-c", "echo CHANGED > /data/file",
                    env={"BRIG_TEST_WRITABLE_BINDS": "1", "BRIG_TEST_NO_LANDLOCK": "1"})
    assert control.returncode == 0, control
    assert (grant / "file").read_text() == "CHANGED\n"


def test_production_build_ignores_the_test_hooks(brig):
    """The normal build must not honour the hooks: the bind stays read-only."""
    grant = brig.base / "granted2"
    grant.mkdir()
    (grant / "file").write_text("ORIGINAL\n")
    grant.chmod(0o777)
    (grant / "file").chmod(0o666)
    r = brig.run("run", "--ro-bind", f"{grant}:/data", "--", "sh", "-c", "echo CHANGED > /data/file",
                 env={"BRIG_TEST_WRITABLE_BINDS": "1", "BRIG_TEST_NO_LANDLOCK": "1"})
    assert r.returncode != 0 and "Read-only file system" in r.stderr, r
    assert (grant / "file").read_text() == "ORIGINAL\n"
