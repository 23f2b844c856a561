"""libbrig as an engine (docs/api.md): the handle API through
examples/engine-demo.c, front ends that die, the supervisor program and
where libbrig takes it from, and the exported symbols."""
import hashlib
import http.server
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import threading

import pytest

from conftest import BUILD, HOOKS, NOBODY, REPO, Brig
from persist_helpers import pid_alive, sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, wait_until
from test_escape import attack


def _demo(brig):
    """engine-demo beside brig's copies (it finds libbrig, and libbrig
    brig-supervisor, in its own directory)."""
    exe = brig.bindir / "engine-demo"
    if not exe.exists():
        shutil.copy2(BUILD / "engine-demo", exe)
        exe.chmod(0o755)
    return str(exe)


def _popen(brig, sandboxes, *args):
    return subprocess.Popen(brig.prefix() + [_demo(brig), *args], cwd=str(brig.workspace),
                            env=brig.env(sandboxes.env()), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _hold(brig, sandboxes, name, *flags):
    """A front end that made sandbox NAME and holds it; returns it running."""
    p = _popen(brig, sandboxes, "hold", name, *flags)
    line = p.stdout.readline()
    assert line.strip() == f"ready {name}", (line, p.stderr.read() if p.poll() is not None else "")
    return p


def test_engine_demo_drives_three_sandboxes_from_one_poll_loop(brig, sandboxes):
    r = subprocess.run(brig.prefix() + [_demo(brig)], cwd=str(brig.workspace), env=brig.env(sandboxes.env()),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "engine-demo: ok" in r.stdout, (r.stdout, r.stderr)
    assert "exit 143 (killed)" in r.stdout
    # Ephemeral: nothing of the three is left in the state root.
    left = [d for d in os.listdir(sandboxes.root) if d.startswith("sb-")] if sandboxes.root.exists() else []
    assert left == [], left


@attack("frontend-sigkill", "a front end embedding libbrig is SIGKILLed while its sandboxes run: a persistent "
        "one must stay usable, an ephemeral one must go with it, leaving no supervisor, pid 1 or state behind",
        "traces")
def test_sigkilled_front_end_leaves_persistent_and_takes_ephemeral(brig, sandboxes):
    keep, eph = sandboxes.new_name("keep"), sandboxes.new_name("eph")
    sandboxes.names += [keep, eph]
    fe1 = _hold(brig, sandboxes, keep)
    fe2 = _hold(brig, sandboxes, eph, "ephemeral")
    eph_sup = sandboxes.state(eph)["supervisor_pid"]
    for p in (fe1, fe2):
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    # persistent: still running and usable by another client
    r = sandboxes.brig_cmd("exec", keep, "--", "sh", "-c", "echo alive")
    assert r.returncode == 0 and r.stdout == "alive\n", r
    assert pid_alive(sandboxes.state(keep)["supervisor_pid"])
    # ephemeral: its supervisor saw its owner end, stopped it and removed its state
    assert wait_until(lambda: not pid_alive(eph_sup), 15), "the ephemeral sandbox's supervisor outlived its owner"
    assert wait_until(lambda: not (sandboxes.root / eph).exists(), 5), os.listdir(sandboxes.root)
    r = sandboxes.brig_cmd("exec", eph, "--", "true")
    assert r.returncode == 125 and "no sandbox named" in r.stderr, r


def _bin_copy(brig, scratch, mode=0o755):
    d = scratch / f"bin-{marker()[-8:]}"
    d.mkdir()
    for f in list(brig.bindir.glob("libbrig.so*")) + [brig.bindir / n for n in ("brig", "brig-engine", "brig-supervisor", "brig-serve")]:
        shutil.copy2(f, d / f.name)
    d.chmod(mode)
    return d


def _planted(scratch):
    """A program that, if run, leaves a file behind: the proof it ran."""
    proof = scratch / f"ran-{marker()[-8:]}"
    prog = scratch / f"evil-{marker()[-8:]}"
    prog.write_text(f"#!/bin/sh\ntouch {proof}\nexit 0\n")
    prog.chmod(0o755)
    return prog, proof


def _plant(d, scratch, prog, name, how):
    """PROG planted as brig's program NAME in the copy D, the way HOW says;
    the environment to run with and the words the refusal must say."""
    target = d / name
    if how == "dir-writable":
        shutil.copy2(prog, target)
        d.chmod(0o777)
        return {}, "writable by others"
    if how == "symlink":
        target.unlink()
        target.symlink_to(prog)
        return {}, "regular file"
    if how == "file-writable":
        shutil.copy2(prog, target)
        target.chmod(0o777)
        return {}, "writable by nobody else"
    target.unlink()
    pathdir = scratch / f"path-{marker()[-8:]}"
    pathdir.mkdir(mode=0o755)
    shutil.copy2(prog, pathdir / name)
    return {"PATH": f"{pathdir}:/usr/bin:/bin", "PWD": str(pathdir)}, "not found"


PLANTS = ["dir-writable", "symlink", "file-writable", "path-only"]


@attack("supervisor-planted", "libbrig made to start a brig-supervisor someone else put there: beside a "
        "libbrig in a directory others can write, a symlink to a program elsewhere, a program others can write, "
        "one only on PATH", "files")
@pytest.mark.parametrize("how", PLANTS)
def test_planted_supervisor_is_never_run(brig, sandboxes, scratch, how):
    prog, proof = _planted(scratch)
    d = _bin_copy(brig, scratch)
    extra, want = _plant(d, scratch, prog, "brig-supervisor", how)
    extra.pop("PWD", None)
    env = dict(sandboxes.env(), **extra)
    name = sandboxes.new_name()
    sandboxes.names.append(name)
    r = subprocess.run(brig.prefix() + [str(d / "brig"), "create", name], cwd=str(brig.workspace),
                       env=brig.env(env), capture_output=True, text=True, timeout=60)
    # in a directory others may write, brig's engine beside it is refused
    # first (the front end looks it up there too: src/front/brig.c)
    refused = "brig-engine" if how == "dir-writable" else "brig-supervisor"
    assert r.returncode == 125 and refused in r.stderr and want in r.stderr, r
    assert not proof.exists(), "the planted program ran"
    assert not (sandboxes.root / name).exists(), "a failed create left its state"


@attack("serve-planted", "brig serve made to exec a brig-serve someone else put there (brig serve is a "
        "program of its own since its libraries left brig's start path): beside brig in a directory others can "
        "write, a symlink to a program elsewhere, a program others can write, one only on PATH or in the cwd",
        "files")
@pytest.mark.parametrize("how", PLANTS)
def test_planted_serve_program_is_never_run(brig, scratch, how):
    prog, proof = _planted(scratch)
    d = _bin_copy(brig, scratch)
    extra, want = _plant(d, scratch, prog, "brig-serve", how)
    # path-only: on PATH and in the cwd (./brig-serve), and nowhere else
    cwd = extra.pop("PWD", str(brig.workspace))
    r = subprocess.run(brig.prefix() + [str(d / "brig"), "serve", "--socket", str(scratch / "never.sock")],
                       cwd=cwd, env=brig.env(extra), capture_output=True, text=True, timeout=15)
    refused = "brig-engine" if how == "dir-writable" else "brig-serve"  # as above
    assert r.returncode == 125 and refused in r.stderr and want in r.stderr, r
    assert not proof.exists(), "the planted program ran"
    assert not (scratch / "never.sock").exists()


def _planted_libs(scratch, tag, *sonames):
    """Libraries of someone else's with these sonames, each with a
    constructor that leaves a file named after it in the returned proofs
    directory: (directory of the libraries, proofs)."""
    m = marker(tag)[-8:]
    proofs = scratch / f"proofs-{m}"
    proofs.mkdir()
    proofs.chmod(0o777)  # the planted constructor runs as whoever loads it
    plant = scratch / f"libs-{m}"
    plant.mkdir(mode=0o755)
    src = scratch / f"fake-{m}.c"
    src.write_text('#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void planted(void)'
                   f' {{ close(open("{proofs}/" LIB, O_CREAT | O_WRONLY, 0644)); }}\n')
    for lib in sonames:
        subprocess.run(["cc", "-shared", "-fPIC", f"-DLIB=\"{lib}\"", f"-Wl,-soname,{lib}", "-o", str(plant / lib),
                        str(src)], check=True)
    return plant, proofs


@attack("openssl-substituted", "a libcrypto.so.3 and a libssl.so.3 of someone else's (a constructor that leaves "
        "a file behind) on LD_LIBRARY_PATH and in the cwd, for the run that needs OpenSSL (an audit stream's hash "
        "chain): since issue 19 brig opens OpenSSL itself, on first use", "files")
def test_openssl_is_the_systems_whatever_the_environment(brig, scratch):
    plant, proofs = _planted_libs(scratch, "ossl", "libcrypto.so.3", "libssl.so.3")
    audit = brig.reports / f"ossl-{plant.name}.jsonl"
    r = brig.run("run", "--audit", str(audit), "--", "true", cwd=plant, env={"LD_LIBRARY_PATH": str(plant)})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(proofs)) == [], "a planted OpenSSL was loaded"
    # ... and the real one did the hashing: each line's prev is the SHA-256 of the line before
    lines = audit.read_bytes().splitlines()
    assert len(lines) >= 2
    for before, line in zip(lines, lines[1:]):
        assert json.loads(line)["prev"] == hashlib.sha256(before).hexdigest(), (before, line)


@attack("cares-substituted", "a libcares.so.2 of someone else's (a constructor that leaves a file behind) on "
        "LD_LIBRARY_PATH and in the cwd, for a run whose allowed host is a name brig must resolve: since issue 19 "
        "brig opens c-ares itself, on first use, as it opens OpenSSL", "network")
def test_cares_is_the_systems_whatever_the_environment(brig, scratch):
    plant, proofs = _planted_libs(scratch, "cares", "libcares.so.2")
    got = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            got.append(self.headers.get("Host"))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    # "localhost" is no --resolve'd name: the supervisor asks c-ares
    # (which reads /etc/hosts), and the request through the proxy reaches
    # the server only if the real c-ares answered
    client = ("import socket; s = socket.create_connection(('127.0.0.1', 3128), timeout=20); "
              f"s.sendall(b'GET http://localhost:{port}/ HTTP/1.0\\r\\nHost: localhost:{port}\\r\\n\\r\\n'); "
              "print(s.recv(64).split(b'\\r\\n')[0].decode())")
    try:
        r = brig.run("run", "--allow-host", f"localhost:{port}", "--allow-cidr", "127.0.0.1/32", "--",
                     "python3", "-c", client, cwd=plant, env={"LD_LIBRARY_PATH": str(plant)})
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(proofs)) == [], "a planted c-ares was loaded"
    assert " 204" in r.stdout and got == [f"localhost:{port}"], (r.stdout, r.stderr, got)


@attack("libseccomp-substituted", "a libseccomp.so.2 of someone else's (a constructor that leaves a file behind) "
        "on LD_LIBRARY_PATH and in the cwd, for a run whose command makes a refused call (its line names the call, "
        "which takes libseccomp's table): since issue 19 brig opens libseccomp itself, on first use", "syscalls")
def test_libseccomp_is_the_systems_whatever_the_environment(brig, scratch):
    plant, proofs = _planted_libs(scratch, "scmp", "libseccomp.so.2")
    # keyctl (250 on x86_64) is refused by the default profile, EPERM
    script = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
              "print(libc.syscall(250, 0, 0), os.strerror(ctypes.get_errno()))")
    # the hooks build's BRIG_TEST_LIBSECCOMP_PATH too: a production build ignores it
    r = brig.run("run", "--", "python3", "-c", script, cwd=plant,
                 env={"LD_LIBRARY_PATH": str(plant), "BRIG_TEST_LIBSECCOMP_PATH": str(plant / "libseccomp.so.2")})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(proofs)) == [], "a planted libseccomp was loaded"
    assert r.stdout.split(None, 1) == ["-1", "Operation not permitted\n"], r.stdout
    assert "refused 1 system call: keyctl" in r.stderr, r.stderr


@attack("jansson-substituted", "a libjansson.so.4 of someone else's (a constructor that leaves a file behind) on "
        "LD_LIBRARY_PATH and in the cwd, for a run that writes JSON (--json-report): since issue 19 brig's engine "
        "opens jansson itself, on first use, as it opens libseccomp", "files")
def test_jansson_is_the_systems_whatever_the_environment(brig, scratch):
    plant, proofs = _planted_libs(scratch, "jansson", "libjansson.so.4")
    report = brig.reports / f"jansson-{plant.name}.json"
    r = brig.run("run", "--json-report", str(report), "--", "true", cwd=plant, env={"LD_LIBRARY_PATH": str(plant)})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(proofs)) == [], "a planted jansson was loaded"
    assert json.loads(report.read_text())["exit_code"] == 0  # written by the real one


def _engine_maps_while_running(brig, *args):
    """/proc/PID/maps of the engine of `brig run ARGS -- sh -c ...` (the
    process we start: the front end and the engine exec in place) while
    its command runs."""
    flag = brig.workspace / f"running-{marker('maps')[-8:]}"
    cmd = brig.cmd("run", *args, "--", "sh", "-c", f"touch {flag}; sleep 2")
    p = subprocess.Popen(cmd, cwd=str(brig.workspace), env=brig.env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(flag.exists, 20), p.communicate()
        with open(f"/proc/{p.pid}/maps") as f:
            maps = f.read()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    assert "brig-engine" in maps, maps  # the engine's own maps, not the front end's
    return maps


def test_a_plain_run_opens_no_jansson(brig, scratch):
    """A run that parses and writes no JSON leaves jansson unopened (its
    loading and relocation were 0.07 ms of every start); one with a policy
    file opens it before the command runs, which shows the probe sees it."""
    assert "libjansson" not in _engine_maps_while_running(brig)
    policy = scratch / f"policy-{marker('p')[-8:]}.json"
    policy.write_text(json.dumps({"limits": {"memory": "1G"}}))
    policy.chmod(0o644)
    assert "libjansson" in _engine_maps_while_running(brig, "--policy", str(policy))


def test_a_missing_libseccomp_refuses_the_run_by_name(brig, hooks_bindir, scratch):
    """A broken install (the hooks build's BRIG_TEST_LIBSECCOMP_PATH points
    at nothing): a run that must compile a filter — a syscall rule of its
    own, or the default profile with no cached program — is refused with
    exit 125 and the library's name, never run unfiltered, never aborted."""
    b = Brig(hooks_bindir, brig.mode, scratch)
    state = scratch / f"state-{brig.mode}"  # no cached program: a compile
    state.mkdir(mode=0o700)
    b.chown(state)
    broken = {"BRIG_TEST_LIBSECCOMP_PATH": str(scratch / "nothing" / "libseccomp.so.2"),
              "XDG_RUNTIME_DIR": str(state)}
    for flags, proof in ((["--seccomp-deny", "mknod"], "RULE"), ([], "DEFAULT")):
        r = b.run("run", *flags, "--", "touch", proof, env=broken)
        assert r.returncode == 125, (flags, r.returncode, r.stderr)
        assert "libseccomp: cannot find" in r.stderr and "reinstall libseccomp2" in r.stderr, r.stderr
        assert "Aborted" not in r.stderr and not (b.workspace / proof).exists(), (flags, r.stderr)
    # the same binary and state with the library where it is: the run runs
    r = b.run("run", "--", "touch", "RAN", env={"XDG_RUNTIME_DIR": str(state)})
    assert r.returncode == 0 and (b.workspace / "RAN").exists(), r.stderr


@attack("library-below-a-users-directory", "the system's own libseccomp, copied into a root-owned 0755 directory "
        "below a directory of nobody's: root's file in a directory only root may write, but nobody can rename the "
        "directory away and put another library in its place", "syscalls")
def test_a_library_below_someone_elses_directory_is_refused(brig, hooks_bindir, scratch):
    b = Brig(hooks_bindir, brig.mode, scratch)
    theirs = scratch / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    lib = theirs / "lib"
    lib.mkdir(mode=0o755)  # root's
    shutil.copy2(os.path.realpath("/usr/lib/x86_64-linux-gnu/libseccomp.so.2"), lib / "libseccomp.so.2")
    r = b.run("run", "--seccomp-deny", "mknod", "--", "touch", "RAN",
              env={"BRIG_TEST_LIBSECCOMP_PATH": str(lib / "libseccomp.so.2")})
    assert r.returncode == 125 and not (b.workspace / "RAN").exists(), (r.returncode, r.stderr)
    assert f"({theirs} is not root's, or others may write it); refusing to load it" in r.stderr, r.stderr
    # the same copy with root's directories all the way up: taken
    os.chown(theirs, 0, 0)
    r = b.run("run", "--seccomp-deny", "mknod", "--", "touch", "RAN",
              env={"BRIG_TEST_LIBSECCOMP_PATH": str(lib / "libseccomp.so.2")})
    assert r.returncode == 0 and (b.workspace / "RAN").exists(), r.stderr


# An installed tree's libbrig finds its own brig-supervisor (libexec/brig)
# from its directory: test_install.py, on a `make install DESTDIR=` tree.


def test_exported_symbols_match_the_header_and_map():
    lib = BUILD / "libbrig.so.1"
    soname = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "[libbrig.so.1]" in soname, soname
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    exported = {line.split()[2].split("@")[0] for line in nm.stdout.splitlines()
                if len(line.split()) == 3 and line.split()[1] in "TDBR"}
    header = (REPO / "include" / "brig.h").read_text()
    declared = set(re.findall(r"BRIG_PUBLIC[^;(]*?\b(brig_\w+)\s*\(", header))
    assert exported == declared, (sorted(exported - declared), sorted(declared - exported))
    mapfile = (REPO / "src" / "lib" / "libbrig.map").read_text()
    assert "LIBBRIG_1" in mapfile and "brig_*" in mapfile and "local: *;" in mapfile


@pytest.mark.parametrize("fds", ["none", "files"])
def test_supervisor_refuses_to_be_run_by_hand(brig, fds):
    """Without libbrig's pipe and sealed memfd on its descriptors: refused at
    once, before it forks (files on 3 and 4, as a shell may leave them,
    made it fork, read no configuration and exit 0)."""
    script = '"$0"' if fds == "none" else '"$0" 3</dev/null 4</dev/null'
    r = subprocess.run(["sh", "-c", script, str(brig.bindir / "brig-supervisor")], capture_output=True, text=True,
                       timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 125 and "not meant to be run by hand" in r.stderr, r


def _host_cmdlines_with(word):
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if word.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


@attack("exec-close-during-wait", "a front end's thread closes an exec handle while another thread is blocked "
        "in brig_exec_wait on it: the handle was freed under the wait (which then wrote its result into freed "
        "memory) and, the blocked recvmsg keeping the socket open, the command the close should kill ran on",
        "handles")
def test_exec_close_while_another_thread_waits_kills_the_command(brig, sandboxes):
    name, _ = sandboxes.create()
    m = marker("cw")
    proof = brig.workspace / f"{m}-proof"
    # a sleep whose argument names it on the host, then the proof that it was not killed
    secs = "3." + "".join(c for c in m if c.isdigit())[-6:].rjust(6, "0")
    r = subprocess.run(brig.prefix() + [_demo(brig), "closewait", name, "sh", "-c", f"sleep {secs}; touch {proof.name}"],
                       cwd=str(brig.workspace), env=brig.env(sandboxes.env()), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "wait: -9 brig_exec_close was called during the wait" in r.stdout, (r.stdout, r.stderr)
    assert wait_until(lambda: not _host_cmdlines_with(secs), 10), "the closed exec's command still runs"
    assert not proof.exists(), "the command of the closed exec ran to its end"
    # the sandbox itself serves on
    r = sandboxes.sh(name, "echo alive")
    assert r.returncode == 0 and r.stdout == "alive\n", r


@attack("policy-lost-in-transit", "a persistent sandbox's policy reaches brig-supervisor as JSON: a --deny pattern "
        "(or an --env value) that is not UTF-8 — a file name with a Latin-1 byte — was left out of that JSON "
        "without a word, and the file it should hide was readable inside", "files")
def test_policy_that_json_cannot_hold_is_refused_not_trimmed(brig, sandboxes):
    m = marker("u8")
    secret = os.fsdecode(b"tok\xff-" + m.encode() + b".txt")
    (brig.workspace / secret).write_text(m + "-SECRET")
    brig.chown(brig.workspace / secret)
    name = sandboxes.new_name()
    sandboxes.names.append(name)
    pattern = str(brig.workspace / os.fsdecode(b"tok\xff-*"))
    r = sandboxes.brig_cmd("create", name, "--deny", pattern, text=False)
    err = r.stderr.decode(errors="replace")
    if r.returncode == 0:
        r2 = sandboxes.sh(name, f"cat {brig.workspace}/tok*", text=False)
        assert (m + "-SECRET").encode() not in r2.stdout, "the --deny pattern was lost on its way to the supervisor"
    assert r.returncode == 125 and "--deny pattern" in err and "UTF-8" in err, (r.returncode, err)
    assert not (sandboxes.root / name).exists(), "a refused create left its state"
    # the same for a value that would be dropped from the command's environment
    r = sandboxes.brig_cmd("create", sandboxes.new_name(), "--env", os.fsdecode(b"A=\xfe"), text=False)
    assert r.returncode == 125 and b"--env value" in r.stderr, r


@attack("owner-killed-at-spawn", "the front end owning an ephemeral sandbox is SIGKILLed the moment its "
        "brig-supervisor has started (a test hook stops it there): the configuration, sent over a socket after the "
        "start, was cut short, the supervisor ended on it and the state directory stayed for good", "traces")
def test_owner_killed_as_its_supervisor_starts_leaves_nothing(brig, sandboxes, hooks_bindir):
    demo = hooks_bindir / "engine-demo"
    if not demo.exists():
        shutil.copy2(HOOKS / "engine-demo", demo)
        demo.chmod(0o755)
    hooked = Brig(hooks_bindir, brig.mode, brig.base)
    name = sandboxes.new_name("eph")
    sandboxes.names.append(name)
    p = subprocess.Popen(hooked.prefix() + [str(demo), "hold", name, "ephemeral"], cwd=str(brig.workspace),
                         env=hooked.env(sandboxes.env({"BRIG_TEST_PAUSE_AT": "supervisor-spawned"})),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    assert "paused at supervisor-spawned" in line, (line, p.stderr.read() if p.poll() is not None else "")
    p.kill()
    p.wait(timeout=10)
    assert wait_until(lambda: not (sandboxes.root / name).exists(), 20), os.listdir(sandboxes.root / name)
    assert wait_until(lambda: not _host_cmdlines_with(name), 10), "a process of the sandbox outlived its owner"


def _hooked_demo(brig, hooks_bindir):
    demo = hooks_bindir / "engine-demo"
    if not demo.exists():
        shutil.copy2(HOOKS / "engine-demo", demo)
        demo.chmod(0o755)
    return Brig(hooks_bindir, brig.mode, brig.base), demo


@attack("ephemeral-dir-orphaned", "the front end making an ephemeral sandbox is SIGKILLed after the state "
        "directory's mkdir and before its supervisor starts (a test hook stops it there, before and after the "
        "directory has its name): nobody was left to remove that directory; the next brig must, and must not take "
        "a live ephemeral sandbox (held by another front end) or a persistent one for such a leftover", "traces")
def test_owner_killed_before_the_spawn_leaves_a_directory_the_reaper_sweeps(brig, sandboxes, hooks_bindir):
    hooked, demo = _hooked_demo(brig, hooks_bindir)
    live, keep = sandboxes.new_name("live"), sandboxes.new_name("keep")
    sandboxes.names += [live, keep]
    holder = _hold(brig, sandboxes, live, "ephemeral")
    sandboxes.create(name=keep)
    sandboxes.brig_cmd("stop", keep)
    left = {}
    for step in ("ephemeral-dir-new", "ephemeral-dir-made"):
        name = sandboxes.new_name("orph")
        sandboxes.names.append(name)
        p = subprocess.Popen(hooked.prefix() + [str(demo), "hold", name, "ephemeral"], cwd=str(brig.workspace),
                             env=hooked.env(sandboxes.env({"BRIG_TEST_PAUSE_AT": step})),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # bounded: a demo that never reaches the hook must fail the test, not hang the suite
        ready, _, _ = select.select([p.stderr], [], [], 60)
        line = p.stderr.readline() if ready else "(nothing within 60 s)"
        assert f"paused at {step}" in line, (line, p.stderr.read() if p.poll() is not None else "")
        p.kill()
        p.wait(timeout=10)
        left[step] = [d for d in os.listdir(sandboxes.root) if d.endswith(name)]
    # what the SIGKILL left, on the host: one directory each
    assert all(len(v) == 1 for v in left.values()), left
    assert left["ephemeral-dir-new"][0].startswith(".eph-") and left["ephemeral-dir-made"][0] != "", left
    r = sandboxes.brig_cmd("ls")  # sweeps what dead brigs left
    assert r.returncode == 0, r
    for step, (d,) in left.items():
        assert not (sandboxes.root / d).exists(), f"{step}: {d} was left in the state root"
    # the live ephemeral one, and the stopped persistent one, stay
    r = sandboxes.brig_cmd("exec", live, "--", "sh", "-c", "echo alive")
    assert r.returncode == 0 and r.stdout == "alive\n", r
    assert (sandboxes.root / keep / "state.json").exists(), os.listdir(sandboxes.root)
    holder.kill()
    holder.wait(timeout=10)


def test_exec_result_and_report_have_the_execs_own_cpu_and_memory(brig, sandboxes):
    """Per exec, not the sandbox's: pid 1 reaps each command with wait4, and
    its CPU time and peak memory travel with the status (docs/api.md)."""
    name, _ = sandboxes.create()
    reports = {}
    for tag, cmd in (("big", "b = b'x' * (96 << 20)\nn = 0\nfor i in range(2000000): n += i"), ("small", "pass")):
        rep = brig.reports / f"{marker(tag)}.json"
        r = sandboxes.exec(name, "--json-report", str(rep), "--", "python3", "-c", cmd)
        assert r.returncode == 0, r
        reports[tag] = json.loads(rep.read_text())
    big, small = reports["big"], reports["small"]
    assert big["memory_peak_bytes"] >= 96 << 20, big
    assert 0 < small["memory_peak_bytes"] < 64 << 20, small  # not the sandbox's, nor the last exec's
    assert big["cpu_user_ms"] + big["cpu_system_ms"] >= 50, big
    assert small["cpu_user_ms"] + small["cpu_system_ms"] < big["cpu_user_ms"] + big["cpu_system_ms"], (small, big)


@attack("brig-run-process-state", "a front end calls brig_run() from a process with its own signal handling and "
        "reads its own signal mask while the command runs (and its mask, dispositions, rlimits, cwd and umask "
        "after): brig_run blocked SIGINT, SIGTERM, SIGCHLD and the others it forwarded for the whole run, so the "
        "program's own handlers never ran", "handles")
def test_brig_run_is_a_wrapper_over_the_handles_with_no_process_wide_effects(brig, sandboxes):
    rep = brig.reports / f"{marker('run')}.json"
    aud = brig.reports / f"{marker('audit')}.jsonl"
    p = subprocess.Popen(brig.prefix() + [_demo(brig), "run", "--report", str(rep), "--audit", str(aud), "sh", "-c",
                                          "echo started; read x; echo \"got $x\"; echo to-stderr >&2; exit 3"],
                         cwd=str(brig.workspace), env=brig.env(sandboxes.env()), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "started\n"
        # the caller's own mask while its command runs, read on the host
        status = pathlib.Path(f"/proc/{p.pid}/status").read_text()
        blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)", status, re.M).group(1), 16)
        out, err = p.communicate("abc\n", timeout=60)
    finally:
        p.kill()
    assert blocked == 0, f"brig_run blocked signals in its caller while the command ran: SigBlk {blocked:#x}"
    assert p.returncode == 3 and out == "got abc\n" and "to-stderr" in err, (p.returncode, out, err)
    assert "FAILED" not in err, err  # mask, dispositions, rlimits, cwd, umask as they were
    doc = json.loads(rep.read_text())
    assert doc["exit_code"] == 3 and doc["command"][0] == "sh" and doc["memory_peak_bytes"] > 0, doc
    events = [json.loads(line)["event"] for line in aud.read_text().splitlines()]
    assert events[0] == "start" and events[-1] == "end", events
    left = [d for d in os.listdir(sandboxes.root) if d.startswith("sb-")] if sandboxes.root.exists() else []
    assert left == [], left
