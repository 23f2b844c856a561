"""What attack20 found in the front end (and one problem of the engine's
it kept), each test failing on 4ad6409 and passing since the fixes: a
caller's RLIMIT_FSIZE, a signal while the end is printed, an exec sent
before the engine was found, a broken connection named as an end, and a
closed stdio handing the command brig's control connection."""
import fcntl
import os
import resource
import shutil
import signal
import subprocess
import time

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, wait_until
from test_front_attacks import CTL_OK, _both, _same, _send, fake_supervisor, hdr  # noqa: F401 (fixture)


def test_a_small_file_size_limit_ends_the_front_end_as_the_engine(brig, sandboxes):
    """A caller that bounds what its tool calls may write (ulimit -f):
    the front end wrote the supervisor's last message (2142 bytes for a
    signal's end) into a memfd, which RLIMIT_FSIZE bounds like any file:
    SIGXFSZ kills it (153 in a shell, nothing said), where brig-engine,
    which writes no file, says the command was killed and exits 143."""
    name, _ = sandboxes.create()
    for limit in (0, 2048):
        def bounded(limit=limit):
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        front, engine = _both(brig, sandboxes, "exec", name, "--", "sh", "-c", "kill -TERM $$", preexec_fn=bounded)
        _same(front, engine, limit)


def test_a_signal_while_the_end_is_printed_ends_brig_as_the_engine(brig, sandboxes):
    """hand_over execs the engine with the signals the front end forwards
    still blocked (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGWINCH):
    a brig exec stuck printing its end (a stderr nobody reads) ignores
    SIGTERM and Ctrl-C; brig-engine alone restores its mask after the
    exec and dies of them."""
    name, _ = sandboxes.create()
    ends = []
    for prog in ("brig", "brig-engine"):
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            while True:
                os.write(w, b"x" * 4096)
        except BlockingIOError:
            pass
        fcntl.fcntl(w, fcntl.F_SETFL, 0)
        cmd = brig.prefix() + [str(brig.bindir / prog), "exec", name, "--", "sh", "-c", "kill -TERM $$"]
        p = subprocess.Popen(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env()), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=w)
        os.close(w)
        blocked = wait_until(lambda: "pipe_write" in open(f"/proc/{p.pid}/wchan").read(), 30)
        p.send_signal(signal.SIGTERM)
        ended = wait_until(lambda: p.poll() is not None, 5)
        os.close(r)
        p.wait(30)
        ends.append((blocked, ended, p.returncode))
    assert ends[0] == ends[1] == (True, True, -signal.SIGTERM), ends


def test_an_exec_the_front_end_cannot_end_is_never_sent(brig, sandboxes, scratch):
    """test_front's test_engine_is_found_only_where_brig_trusts says "the
    front end sends nothing it cannot end", but the engine is looked for
    only at the end: without one, the command runs (its file is made),
    and brig says 125, "brig-engine not found ... is brig installed
    completely?", a setup failure a caller retries: the command runs
    twice."""
    name, _ = sandboxes.create()
    d = scratch / f"alone-{marker()[-8:]}"
    d.mkdir(mode=0o755)
    shutil.copy2(brig.bindir / "brig", d / "brig")
    ran = brig.workspace / f"ran-{marker()[-8:]}"
    r = subprocess.run(brig.prefix() + [str(d / "brig"), "exec", name, "--", "sh", "-c",
                                        f"echo > {ran.name}; kill -TERM $$"],
                       cwd=str(brig.workspace), env=brig.env(sandboxes.env()), capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 125 and "brig-engine not found" in r.stderr, r
    assert not ran.exists(), "the command ran, and brig said it could not start"


def test_a_broken_connection_is_named_as_the_engine_names_it(brig, sandboxes, fake_supervisor):
    """hand_over(argv, NULL, 0) for every n <= 0 of ctl_recv: the engine
    is told the connection ended (EPIPE, "Broken pipe") when it broke
    otherwise: a message no supervisor sends (EBADMSG: too short, another
    magic, past CTL_MAX_MSG) or a reset (ECONNRESET: the supervisor went
    with a forwarded signal unread). brig-engine names the real errno."""
    for what, reply in {"too short": b"\x32grb", "another magic": hdr(102, magic=0x31677262),
                        "past CTL_MAX_MSG": hdr(102) + b"\0" * (128 * 1024)}.items():
        fake = fake_supervisor(lambda conn, req, reply=reply: _send(conn, reply))
        front, engine = _both(brig, sandboxes, "exec", fake.name, "--", "true")
        _same(front, engine, what)


def test_closed_stdio_does_not_hand_the_command_brigs_control_connection(brig, sandboxes):
    """A caller with stdin, stdout or stderr closed (`<&-`, a daemon): the
    front end hands such an exec to the engine, whose socket() to the
    supervisor takes the lowest free descriptor, 0, 1 or 2, and which
    then sends it as the command's stdio. The command holds the
    connection of its own exec to the host's supervisor, which takes any
    request on it (control.c on_client): it adds network allow rules
    (CTL_NET_RULE), raises its own --pids/--memory/--cpus
    (CTL_SET_LIMIT), stops or pauses the sandbox. brig-engine alone does
    the same (not the front end's doing)."""
    name, _ = sandboxes.create("--net", "proxy", "--pids", "64")
    poc = ("import socket,struct,sys\n"
           "H=struct.Struct('<IIIIIiiiQ1024s976s')\n"
           "fd=int(sys.argv[1])\n"
           "import os,stat\n"
           "if not stat.S_ISSOCK(os.fstat(fd).st_mode): sys.exit(0)\n"
           "s=socket.socket(fileno=fd)\n"
           "s.send(H.pack(0x62726732,6,0,0,0,1,0,0,0,b'leak%d.attacker.example'%fd,b''))\n"
           "s.send(H.pack(0x62726732,8,0,0,0,1,0,0,0,b'100000',b''))\n"
           "s.detach()\n")
    (brig.workspace / "poc.py").write_text(poc)
    for fd in (0, 1, 2):
        cmd = brig.prefix() + [str(brig.bindir / "brig"), "exec", name, "--", "python3", "poc.py", str(fd)]
        subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(sandboxes.env()), timeout=30,
                       preexec_fn=lambda fd=fd: os.close(fd), stdin=subprocess.DEVNULL if fd else None,
                       stdout=subprocess.DEVNULL if fd != 1 else None, stderr=subprocess.DEVNULL if fd != 2 else None)
    time.sleep(0.5)
    ask = ("import socket,struct,sys\n"
           "H=struct.Struct('<IIIIIiiiQ1024s976s')\n"
           "c=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET); c.connect(sys.argv[1])\n"
           "c.send(H.pack(0x62726732,7,0,0,0,0,0,0,0,b'',b''))\n"  # CTL_NET_RULES, as brig's user
           "print(c.recv(1<<17)[H.size:].rstrip(b'\\0').decode())\n")
    rules = subprocess.run(brig.prefix() + ["/usr/bin/python3", "-c", ask, str(sandboxes.root / name / "ctl")],
                           capture_output=True, text=True, timeout=30)
    assert "allow_hosts" in rules.stdout, rules
    rules = rules.stdout
    assert "attacker" not in rules, ("the command added its own network rules", rules)
