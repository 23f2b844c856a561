"""The tools agents use (docs/tools.md): files copied in for the sandbox
user (--copy-in, --copy-in-secret), the ssh-agent relay (--ssh-agent), the
sandbox user's passwd entry, config without credentials (--git-identity,
--carry-config).

The SSH tests use the real OpenSSH client inside against a real sshd (from
Debian's openssh-server) that the test runs in a network namespace of its
own (unshare -n), on that namespace's loopback, with its own config and
host key in the test's scratch directory; brig runs in the same namespace,
so the sandbox reaches it through brig's filtered mode with an allow rule,
and nothing listens on the host's network. The sshd is killed by its pid
when the command ends. Every attack asserts on the host side: what the
host's agent still holds, what sshd accepted, which files exist."""
import json
import os
import pathlib
import socket
import stat
import subprocess

import pytest

from conftest import IS_ROOT, NOBODY, Result
from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import descendants, wait_until

SSHD = "/usr/sbin/sshd"
PORT = 2222
NET = ["--allow-host", f"git.test:{PORT}", "--resolve", "git.test:127.0.0.1", "--allow-cidr", f"127.0.0.1/32:{PORT}"]
SSH = f"ssh -o StrictHostKeyChecking=accept-new -o BatchMode=yes -p {PORT}"


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (test_escape.py's marker)."""
    return pytest.mark.escape(ident, technique, control)


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path


def fingerprint(pub):
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout.split()[1]


# ---- an sshd in a network namespace of the test's own -------------------------

RUN_SH = r'''
set -u
ip link set lo up
"$SSHD_BIN" -D -e -f "$SSHD_DIR/sshd_config" 2>>"$SSHD_DIR/log" &
pid=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$SSHD_PORT) 2>/dev/null && break; sleep 0.05; done
"$@"
rc=$?
kill "$pid"
wait "$pid" 2>/dev/null
exit $rc
'''

# sshd runs the client's command only when it is a git fetch; anything else
# just says so (no shell on the host for the sandbox's key).
FORCED = r'''#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  "git-upload-pack '"*) exec sh -c "$SSH_ORIGINAL_COMMAND" ;;
  *) echo "SSH-OK as $(id -un): $SSH_ORIGINAL_COMMAND" ;;
esac
'''


class Sshd:
    def __init__(self, d):
        self.dir = d
        d.mkdir()
        d.chmod(0o755)
        keygen(d / "host_key")
        (d / "authorized_keys").write_text("")
        (d / "forced.sh").write_text(FORCED)
        (d / "forced.sh").chmod(0o755)
        (d / "run.sh").write_text(RUN_SH)
        (d / "log").write_text("")
        (d / "sshd_config").write_text(
            f"Port {PORT}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
            "PidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"PermitRootLogin prohibit-password\nForceCommand {d}/forced.sh\nLogLevel VERBOSE\n")

    def authorize(self, pub):
        with open(self.dir / "authorized_keys", "a") as f:
            f.write(pathlib.Path(pub).read_text())

    def accepted(self):
        return [line for line in (self.dir / "log").read_text().splitlines() if "Accepted publickey" in line]

    def run(self, brig, *args, env=None, timeout=90):
        """`brig ARGS` in the sshd's network namespace (rootless: as nobody there)."""
        e = brig.env(env)
        e.update({"SSHD_BIN": SSHD, "SSHD_DIR": str(self.dir), "SSHD_PORT": str(PORT)})
        cp = subprocess.run(["unshare", "-n", "bash", str(self.dir / "run.sh"), *brig.cmd(*args)],
                            cwd=str(brig.workspace), env=e, capture_output=True, text=True, timeout=timeout)
        return Result(cp)


@pytest.fixture
def sshd(brig):
    if not IS_ROOT:
        pytest.skip("SSH TESTS NOT RUN: the test's sshd needs root for its network namespace (unshare -n)")
    if not os.access(SSHD, os.X_OK):
        pytest.fail(f"{SSHD} missing: scripts/install-deps installs openssh-server")
    # sshd refuses to start without its privilege separation directory;
    # the package's service makes it at boot, which a CI container lacks.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    return Sshd(brig.base / "sshd")


class Agent:
    """An ssh-agent of the user brig runs as, killed by its pid."""

    def __init__(self, brig):
        self.brig = brig
        d = brig.base / "agent"
        d.mkdir()
        brig.chown(d)
        d.chmod(0o700)
        self.sock = d / "agent.sock"
        self.proc = subprocess.Popen(brig.prefix() + ["ssh-agent", "-D", "-a", str(self.sock)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if self.sock.exists():
                break
            subprocess.run(["sleep", "0.05"])
        self.env = {"SSH_AUTH_SOCK": str(self.sock)}

    def add_new_key(self):
        """A new key (brig.base/agentkey, the user's), loaded into the agent."""
        key = keygen(self.brig.base / "agentkey")
        self.brig.chown(key)
        assert self.ssh_add(key).returncode == 0
        return key

    def ssh_add(self, *args):
        return subprocess.run(self.brig.prefix() + ["ssh-add", *map(str, args)], env={**self.brig.env(), **self.env},
                              capture_output=True, text=True, timeout=30)

    def close(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def agent(brig):
    a = Agent(brig)
    yield a
    a.close()


def bare_repo(where, readme):
    """where/repo.git with one commit: a README holding README."""
    repo = where / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    seed = where / "seed"
    subprocess.run(["git", "clone", "-q", str(repo), str(seed)], check=True, capture_output=True)
    (seed / "README").write_text(readme)
    g = ["git", "-C", str(seed), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(g + ["add", "README"], check=True)
    subprocess.run(g + ["commit", "-q", "-m", "one"], check=True)
    subprocess.run(g + ["push", "-q", "origin", "HEAD"], check=True, capture_output=True)
    return repo


def deploy_key(brig):
    """A deploy key in the host home's ~/.ssh, 0600, owned by the user brig runs as."""
    ssh = brig.home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    key = keygen(ssh / "deploy")
    brig.chown(ssh)
    brig.chown(key)
    return key


# ---- HOME ---------------------------------------------------------------------

def test_sandbox_users_passwd_home_is_its_home(brig):
    """Tools that ask the passwd database (OpenSSH) find the sandbox's
    writable $HOME, not /nonexistent or the host's home."""
    r = brig.sh('getent passwd "$(id -u)" | cut -d: -f6; echo "$HOME"; touch ~/w && echo writable; id -un')
    assert r.returncode == 0, r
    passwd_home, home, writable, name = r.stdout.split("\n")[:4]
    assert passwd_home == home == str(brig.home), r
    assert writable == "writable" and name, r


# ---- --copy-in ------------------------------------------------------------------

def test_copy_in_a_root_only_deploy_key_ssh_and_git_clone(brig, sshd):
    """The deploy key is 0600 and the host user's (root's, as root): the
    sandbox user gets its own 0400 copy; ssh -T and git clone with it."""
    key = deploy_key(brig)
    sshd.authorize(f"{key}.pub")
    repo = bare_repo(brig.base, "cloned over ssh\n")
    script = (f'ls -lL ~/.ssh/id_ed25519 | cut -c1-10; {SSH} root@git.test hello && '
              f'GIT_SSH_COMMAND="{SSH}" git clone -q ssh://root@git.test{repo} clone && echo CLONED')
    r = sshd.run(brig, "run", "--copy-in-secret", f"{key}:~/.ssh/id_ed25519", *NET, "--", "sh", "-c", script)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[0] == "-r--------", r
    assert "SSH-OK as root: hello" in r.stdout and "CLONED" in r.stdout, r
    assert (brig.workspace / "clone" / "README").read_text() == "cloned over ssh\n"
    assert len(sshd.accepted()) == 2 and fingerprint(f"{key}.pub") in sshd.accepted()[0], sshd.accepted()


def test_copy_in_of_a_secret_needs_copy_in_secret(brig):
    key = deploy_key(brig)
    r = brig.run("run", "--copy-in", f"{key}:~/.ssh/id", "--", "cat", "/run/brig/copy-in/1-id")
    assert r.returncode == 125, r
    assert "secret deny list" in r.stderr and "--copy-in-secret" in r.stderr, r
    assert "PRIVATE KEY" not in r.stdout
    # a file that is no secret needs no more than --copy-in
    plain = brig.base / "token.txt"
    plain.write_text("plain\n")
    r = brig.run("run", "--copy-in", f"{plain}:/tmp/t", "--", "sh", "-c", "cat /tmp/t; stat -c '%a %u' -L /tmp/t; id -u",
                 report=True)
    assert r.returncode == 0, r
    out = r.stdout.splitlines()
    assert out[0] == "plain" and out[1] == f"400 {out[2]}", r
    # the report says what was handed in (paths, never contents)
    tools = r.report["controls"]["tools"]
    assert tools == {"copied_in": [{"path": "/tmp/t", "flag": "--copy-in", "bytes": 6}], "generated": [],
                     "ssh_agent": False}, tools
    assert {"destination": "/run/brig", "type": "brig"} in r.report["controls"]["mounts"], r.report


@attack("copy-in-secret-other-name", "--copy-in of a secret by another name of it: ~/.ssh bind-mounted elsewhere, "
        "the key file itself bind-mounted elsewhere (in the test's own mount namespace)", "the deny list is tested "
        "on every name the mount table gives the source")
def test_copy_in_of_a_secret_by_another_name_needs_copy_in_secret(brig):
    key = deploy_key(brig)
    dirs, one = brig.base / "keys-alias", brig.base / "key-alias"
    dirs.mkdir()
    one.write_text("")
    for p in (dirs, one):
        brig.chown(p)
    # the binds exist only in a mount namespace of the test's (private: the host's table never sees them)
    script = 'mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 && exec "$@"'
    for src in (dirs / key.name, one):
        out = brig.workspace / "got"
        cp = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                             str(key.parent), str(dirs), str(key), str(one),
                             *brig.cmd("run", "--copy-in", f"{src}:~/k", "--", "sh", "-c", "cat ~/k > got")],
                            cwd=str(brig.workspace), env=brig.env(), capture_output=True, text=True, timeout=60)
        r = Result(cp)
        # the host: the key's bytes never reached the workspace
        assert not out.exists() or "PRIVATE KEY" not in out.read_text(), (src, r)
        assert r.returncode == 125, (src, r)
        assert "secret deny list ('~/.ssh')" in r.stderr and f"also '{key}' in the mount table" in r.stderr, r
        assert f"--copy-in-secret {src}:~/k" in r.stderr, r


@attack("copy-in-write-outside", "--copy-in with a destination in the workspace, a bind, through '..', or a "
        "bind over /run: make brig write on the host", "destination only in the sandbox's own tmpfs")
def test_copy_in_never_writes_outside_the_sandboxs_tmpfs(brig):
    plain = brig.base / "plain.txt"
    plain.write_text("x\n")
    ro = brig.base / "ro"
    ro.mkdir()
    run_host = brig.base / "fake-run"
    run_host.mkdir()
    brig.chown(run_host)
    cases = [
        (["--copy-in", f"{plain}:{brig.workspace}/planted"], "never on the host through a bind"),
        (["--copy-in", f"{plain}:{brig.workspace}/sub/planted"], "never on the host through a bind"),
        (["--ro-bind", f"{ro}:/srv/ro", "--copy-in", f"{plain}:/srv/ro/planted"], "--ro-bind"),
        (["--copy-in", f"{plain}:/etc/planted"], "never on the host through a bind"),
        (["--copy-in", f"{plain}:~/../../etc/planted"], "'..' are not allowed"),
        (["--copy-in", f"{plain}:/run/brig/passwd"], "brig's own"),
        (["--copy-in", f"{plain}:/usr/planted"], "never on the host through a bind"),
        (["--bind", f"{run_host}:/run"], "brig mounts its own tmpfs"),
        (["--tmpfs", "/run/brig"], "brig mounts its own tmpfs"),
    ]
    for args, why in cases:
        r = brig.run("run", *args, "--", "true")
        assert r.returncode == 125, (args, r)
        assert why in r.stderr, (args, r)
    assert not (brig.workspace / "planted").exists() and not (brig.workspace / "sub").exists()
    assert not (ro / "planted").exists() and not os.path.exists("/etc/planted") and not os.path.exists("/usr/planted")
    assert list(run_host.iterdir()) == [], "a bind over /run must not get brig's directory made in it"
    # control: the same file to a tmpfs destination is copied ($HOME, a --tmpfs)
    r = brig.run("run", "--copy-in", f"{plain}:~/sub/ok", "--tmpfs", "/scratch", "--copy-in", f"{plain}:/scratch/k",
                 "--", "cat", f"{brig.home}/sub/ok", "/scratch/k")
    assert r.returncode == 0 and r.stdout == "x\nx\n", r


@attack("copy-in-source-swap", "the sandbox replaces a --copy-in source in the workspace with a symlink to a host "
        "secret, a FIFO, a device or a huge file before the next run", "no symlink in the source's path, regular "
        "files only (opened O_NONBLOCK), 1 MiB cap; refused with 125")
def test_copy_in_source_planted_by_the_sandbox_is_refused(brig):
    key = deploy_key(brig)
    secret = key.read_text()
    r = brig.sh(f'ln -s {key} ws-link; mkfifo fifo; ln -s /dev/zero zero; head -c 2097152 /dev/zero > big; '
                'mkdir dir; echo x > orig; ln orig hardlink; echo planted')
    assert r.returncode == 0 and r.stdout == "planted\n", r
    cases = [("ws-link", "symlink"), ("fifo", "not a regular file"), ("zero", "symlink"), ("big", "larger than"),
             ("dir", "not a regular file"), ("hardlink", "hard links")]
    for name, why in cases:
        for flag in ("--copy-in", "--copy-in-secret"):
            r = brig.run("run", flag, f"{brig.workspace}/{name}:~/k", "--", "cat", "~/k", timeout=30)
            assert r.returncode == 125, (name, flag, r)
            assert why in r.stderr, (name, flag, r)
            assert secret not in r.stdout
    r = brig.run("run", "--copy-in-secret", "/dev/zero:~/k", "--", "true", timeout=30)
    assert r.returncode == 125 and "not a regular file" in r.stderr, r


@attack("copy-in-host-original", "read the host original of a copied-in key (its path, a bind of its parent) or "
        "change the copy", "the deny list hides the original; the copy is 0400 on a read-only tmpfs")
def test_copied_key_original_stays_hidden_and_copy_read_only(brig):
    key = deploy_key(brig)
    secret = key.read_text()
    script = (f'cat {key} /hostbase/home/.ssh/deploy 2>/dev/null; ls /hostbase/home/.ssh; '
              'echo x >> ~/.ssh/id_ed25519 || echo COPY-RO; rm -f /run/brig/copy-in/* 2>/dev/null || echo RM-RO; '
              'chmod 644 /run/brig/copy-in/1-id_ed25519 2>/dev/null || echo CHMOD-RO; head -1 ~/.ssh/id_ed25519')
    r = brig.run("run", "--copy-in-secret", f"{key}:~/.ssh/id_ed25519", "--ro-bind", f"{brig.base}:/hostbase",
                 "--", "sh", "-c", script)
    assert r.returncode == 0, r
    assert r.stdout.count("PRIVATE KEY") == 1, r     # the copy, once; never the original
    for word in ("COPY-RO", "RM-RO", "CHMOD-RO"):
        assert word in r.stdout, r
    assert key.read_text() == secret
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


@attack("copy-in-in-snapshot", "snapshot a persistent sandbox holding a copied-in key: the key's bytes in the state "
        "directory", "the bytes live in /run/brig (never saved); $HOME holds a symlink to them")
def test_snapshot_never_saves_the_copied_key(brig, sandboxes):
    key = deploy_key(brig)
    secret_line = key.read_text().splitlines()[1]
    name, _ = sandboxes.create("--copy-in-secret", f"{key}:~/.ssh/id_ed25519")
    r = sandboxes.sh(name, "head -2 ~/.ssh/id_ed25519 | tail -1; echo note > ~/note")
    assert r.returncode == 0 and r.stdout.strip() == secret_line, r
    assert sandboxes.brig_cmd("snapshot", name, "t1").returncode == 0
    snap = sandboxes.root / name / "snapshots" / "t1"
    blobs = b"".join(p.read_bytes() for p in snap.rglob("*") if p.is_file())
    assert b"note" in blobs, "the snapshot saved $HOME"
    assert secret_line.encode() not in blobs
    # restored, the key is there again: copied anew from the host at start
    assert sandboxes.brig_cmd("restore", name, "t1").returncode == 0
    r = sandboxes.sh(name, "head -2 ~/.ssh/id_ed25519 | tail -1; cat ~/note")
    assert r.returncode == 0 and r.stdout.split() == [secret_line, "note"], r


# ---- --ssh-agent ----------------------------------------------------------------

def test_ssh_through_the_agent_relay(brig, sshd, agent):
    key = agent.add_new_key()
    sshd.authorize(f"{key}.pub")
    r = sshd.run(brig, "run", "--ssh-agent", *NET, "--", "sh", "-c",
                 f'echo "$SSH_AUTH_SOCK"; ssh-add -l | cut -d" " -f2; {SSH} root@git.test via-agent', env=agent.env)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0] == "/run/brig/ssh-agent.sock" and lines[1] == fingerprint(f"{key}.pub"), r
    assert "SSH-OK as root: via-agent" in r.stdout, r
    assert len(sshd.accepted()) == 1, sshd.accepted()


def test_agent_relay_keeps_destination_constraints(brig, sshd, agent):
    """A key the user limited to hosts (ssh-add -h) signs through the relay
    for those hosts only: the client's session-bind@openssh.com passes, and
    the host's agent checks it against the constraint."""
    other = keygen(brig.base / "otherhost")
    for name, host_pub, tag in (("git.test", sshd.dir / "host_key.pub", "allowed"),
                                ("other.test", f"{other}.pub", "elsewhere")):
        key = keygen(brig.base / f"key-{tag}")
        brig.chown(key)
        known = brig.base / f"known-{tag}"
        known.write_text(f"{name} {' '.join(pathlib.Path(host_pub).read_text().split()[:2])}\n")
        assert agent.ssh_add("-H", known, "-h", name, key).returncode == 0
        sshd.authorize(f"{key}.pub")
        r = sshd.run(brig, "run", "--ssh-agent", *NET, "--", "sh", "-c", f"{SSH} root@git.test {tag}",
                     env=agent.env)
        assert agent.ssh_add("-D").returncode == 0
        if tag == "allowed":
            assert "SSH-OK as root: allowed" in r.stdout, r
        else:
            assert "SSH-OK" not in r.stdout, r
    # the host: sshd accepted the key limited to it, not the other
    assert len(sshd.accepted()) == 1, sshd.accepted()


def test_ssh_agent_with_the_hosts_network(brig, agent):
    """--net host: no process inside holds the relay's listener (the
    supervisor does); the unix socket guard still lets the sandbox reach it,
    and only it."""
    key = agent.add_new_key()
    r = brig.run("run", "--net", "host", "--ssh-agent", "--", "sh", "-c",
                 f'ssh-add -l | cut -d" " -f2; SSH_AUTH_SOCK={agent.sock} ssh-add -l; echo direct=$?', env=agent.env)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[0] == fingerprint(f"{key}.pub"), r
    assert "direct=2" in r.stdout or "direct=1" in r.stdout, r  # the host's socket itself stays out


def test_ssh_agent_without_an_agent_is_refused(brig):
    r = brig.run("run", "--ssh-agent", "--", "true")
    assert r.returncode == 125 and "SSH_AUTH_SOCK is not set" in r.stderr, r


# Raw agent messages: lock with a password (22), an extension (27), and a
# length the protocol does not allow; then a plain list still works.
RAW_AGENT = r'''
import os, socket, struct
def ask(payload):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["SSH_AUTH_SOCK"])
    s.sendall(struct.pack(">I", len(payload)) + payload)
    d = s.recv(100)
    return d[4] if len(d) > 4 else "closed"
pw = b"sandbox-pw"
print("lock", ask(bytes([22]) + struct.pack(">I", len(pw)) + pw))
ext = b"session-bind@openssh.com"
print("extension", ask(bytes([27]) + struct.pack(">I", len(ext)) + ext))
print("sign-extra-bytes", ask(bytes([13]) + struct.pack(">I", 0) + struct.pack(">I", 0) + struct.pack(">I", 0) + b"!"))
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["SSH_AUTH_SOCK"])
s.sendall(b"\xff\xff\xff\xff" + b"x" * 64)
print("oversized", s.recv(100) or "closed")
print("list", ask(bytes([11])))
'''


@attack("agent-key-management", "through the forwarded agent: add a key, remove all, lock it with a password of "
        "the sandbox's, send extensions and malformed requests", "the relay passes on only list-identities and "
        "well-formed sign requests; everything else answered failure by brig")
def test_agent_relay_refuses_everything_but_list_and_sign(brig, agent):
    key = keygen(brig.base / "agentkey")
    other = keygen(brig.base / "otherkey")
    for k in (key, other):
        brig.chown(k)
    assert agent.ssh_add(key).returncode == 0
    script = ('ssh-add ~/.ssh/other; echo add=$?; ssh-add -D; echo del=$?; ssh-add -d ~/agentkey.pub; echo rm=$?; '
              'python3 -c "$RAW"')
    # the sandbox's own key (a copy it can read), and the agent's public one
    r = brig.run("run", "--ssh-agent", "--copy-in", f"{other}:~/.ssh/other", "--copy-in", f"{key}.pub:~/agentkey.pub",
                 "--env", f"RAW={RAW_AGENT}", "--", "sh", "-c", script, env=agent.env)
    assert r.returncode == 0, r
    out = r.stdout.splitlines()
    assert out[:3] == ["add=1", "del=1", "rm=1"], r
    assert out[3:8] == ["lock 5", "extension 5", "sign-extra-bytes 5", "oversized closed", "list 12"], r
    # what the agent in the loop reads: each kind of request brig answered itself
    assert "Could not add identity" in r.stderr and "agent refused operation" in r.stderr, r
    for what in ("SSH_AGENTC_ADD_IDENTITY (adds a key", "SSH_AGENTC_REMOVE_ALL_IDENTITIES (removes all keys",
                 "SSH_AGENTC_REMOVE_IDENTITY (removes a key", "SSH_AGENTC_LOCK (locks the agent with a password",
                 "SSH_AGENTC_EXTENSION (an extension", "SSH_AGENTC_SIGN_REQUEST (malformed"):
        assert f"ssh-agent request: {what}" in r.stderr, (what, r)
    assert "brig's --ssh-agent relay passes on only listing keys and signing)" in r.stderr, r
    # the host's agent: still exactly the one key, and not locked
    listed = agent.ssh_add("-l")
    assert listed.returncode == 0, listed
    assert listed.stdout.split()[1] == fingerprint(f"{key}.pub") and len(listed.stdout.splitlines()) == 1, listed


# Signatures the sandbox asks for through the relay: an SSHSIG of a commit
# it forges (git's gpg.format=ssh, ssh-keygen -Y sign: kept in armored form
# in the workspace, for the host to verify), and the shape of a login
# (RFC 4252 userauth request) with the key it lists, which must still pass.
SIGN_AGENT = r'''
import base64, hashlib, os, socket, struct
def s(b):
    return struct.pack(">I", len(b)) + b
def ask(payload):
    c = socket.socket(socket.AF_UNIX)
    c.connect(os.environ["SSH_AUTH_SOCK"])
    c.sendall(s(payload))
    n = struct.unpack(">I", c.recv(4))[0]
    d = b""
    while len(d) < n:
        d += c.recv(n - len(d))
    return d
ids = ask(bytes([11]))
key = ids[9:9 + struct.unpack(">I", ids[5:9])[0]]
msg = open("commit.txt", "rb").read()
tbs = b"SSHSIG" + s(b"git") + s(b"") + s(b"sha512") + s(hashlib.sha512(msg).digest())
got = ask(bytes([13]) + s(key) + s(tbs) + struct.pack(">I", 0))
print("sshsig", got[0])
if got[0] == 14:
    blob = b"SSHSIG" + struct.pack(">I", 1) + s(key) + s(b"git") + s(b"") + s(b"sha512") + got[1:]
    b64 = base64.b64encode(blob).decode()
    open("commit.sig", "w").write("-----BEGIN SSH SIGNATURE-----\n" +
        "\n".join(b64[i:i + 70] for i in range(0, len(b64), 70)) + "\n-----END SSH SIGNATURE-----\n")
login = (s(b"\x07" * 32) + bytes([50]) + s(b"git") + s(b"ssh-connection") + s(b"publickey") + bytes([1]) +
         s(b"ssh-ed25519") + s(key))
print("login", ask(bytes([13]) + s(key) + s(login) + struct.pack(">I", 0))[0])
other = login[:-len(s(key))] + s(key[:-1] + bytes([key[-1] ^ 1]))
print("login-other-key", ask(bytes([13]) + s(key) + s(other) + struct.pack(">I", 0))[0])
print("login-trailing", ask(bytes([13]) + s(key) + s(login + b"x") + struct.pack(">I", 0))[0])
'''


@attack("agent-sign-anything", "through the forwarded agent: sign data of the sandbox's choosing (an SSHSIG of a "
        "forged commit, valid after the run)", "the relay signs only SSH login (userauth) requests for the key they "
        "name")
def test_agent_relay_signs_only_logins(brig, agent):
    key = agent.add_new_key()
    (brig.workspace / "commit.txt").write_text("tree 0000\nauthor Mallory\n\nforged\n")
    r = brig.run("run", "--ssh-agent", "--", "python3", "-c", SIGN_AGENT, env=agent.env)
    assert r.returncode == 0, r
    # the host: no signature of the agent's key on the forged commit exists
    sig = brig.workspace / "commit.sig"
    if sig.exists():
        check = subprocess.run(["ssh-keygen", "-Y", "check-novalidate", "-n", "git", "-s", str(sig)],
                               stdin=open(brig.workspace / "commit.txt"), capture_output=True, text=True)
        assert check.returncode != 0, ("the sandbox got a valid signature of the host's key", check, r)
    assert r.stdout.splitlines() == ["sshsig 5", "login 14", "login-other-key 5", "login-trailing 5"], r
    assert "refused 3 ssh-agent requests: SSH_AGENTC_SIGN_REQUEST (data that is not an SSH login" in r.stderr, r


# 64 connections that each send a length and never the rest, one that
# pipelines list requests and never reads an answer: the relay's threads.
FLOOD_AGENT = r'''
import os, socket, struct, time
held = []
for i in range(64):
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(os.environ["SSH_AUTH_SOCK"])
        c.sendall(struct.pack(">I", 1000))
        held.append(c)
    except OSError:
        break
slow = socket.socket(socket.AF_UNIX)
slow.connect(os.environ["SSH_AUTH_SOCK"])
slow.setblocking(False)
try:
    for _ in range(100000):
        slow.send(struct.pack(">I", 1) + bytes([11]))
except OSError:
    pass
print("held", len(held), flush=True)
time.sleep(60)
'''


@attack("agent-relay-flood", "through --ssh-agent: 64 connections holding half a message, one pipelining "
        "requests and never reading (a thread per connection in the supervisor)", "at most 16 connections relayed "
        "at once, the rest closed; each blocks only its own thread: the supervisor's timeout still kills")
def test_agent_relay_flood_is_bounded(brig, agent):
    key = agent.add_new_key()
    p = subprocess.Popen(brig.cmd("run", "--ssh-agent", "--timeout", "3s", "--", "python3", "-c", FLOOD_AGENT),
                         cwd=str(brig.workspace), env=brig.env(agent.env), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        # the host: brig's supervisor (this process) runs a bounded number of
        # relays (threads named brig-agent) and threads in all
        # (a relay whose connection was just closed may end between the
        # listing and its read: it is no longer there to count)
        tasks = [c for t in os.listdir(f"/proc/{p.pid}/task") if (c := proc_comm(f"{p.pid}/task/{t}")) is not None]
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
        p.wait()
    assert line.startswith("held"), (line, err)
    # (the sandbox's count is no measure: a connection is closed after its
    # first bytes were taken) at most 16 relays, and brig's own few beside
    # them (more, briefly, under load), never a thread a connection for the
    # 65 made
    assert 0 < tasks.count("brig-agent") <= 16, (tasks, err)
    assert len(tasks) < 40, (tasks, err)
    assert "wall-clock timeout 3 s reached" in err, err
    listed = agent.ssh_add("-l")
    assert listed.returncode == 0 and fingerprint(f"{key}.pub") in listed.stdout, listed


def sandbox_command(pid, comm):
    """The sandbox's command below PID, by its name: not the first child at
    each level, which for a root brig can be its idmapped workspace's
    user-namespace helper, a zombie with no root of its own until brig
    reaps it (the clean-clone CI's ASan run met one)."""
    found = wait_until(lambda: [d for d in descendants(pid) if proc_comm(d) == comm], 10)
    assert found, f"no {comm} below {pid}"
    return found[0]


def proc_comm(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


@attack("agent-socket-other-host-user", "a host process of another user — as root, the very uid the sandbox runs "
        "as on the host (nobody) — reaches the relay and the copied-in file through /proc/PID/root/run/brig",
        "the kernel's ptrace check on /proc/PID/root: outside the sandbox's user namespace it takes CAP_SYS_PTRACE "
        "in it, which only its owner (root, or the rootless caller) holds")
def test_agent_socket_and_copies_unreachable_for_other_host_users(brig, agent):
    if not IS_ROOT:
        pytest.skip("OTHER HOST USER NOT TESTED: needs root to act as another user (setpriv)")
    key = agent.add_new_key()
    tok = brig.base / "tok"
    tok.write_text("COPIEDTOKEN\n")
    brig.chown(tok)
    p = subprocess.Popen(brig.cmd("run", "--ssh-agent", "--copy-in", f"{tok}:~/tok", "--", "sh", "-c",
                                  "echo ready; exec sleep 30"),
                         cwd=str(brig.workspace), env=brig.env(agent.env), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        run = f"/proc/{sandbox_command(p.pid, 'sleep')}/root/run/brig"
        other = NOBODY if brig.mode == "root" else 1  # rootless: brig is nobody; daemon is another user
        as_other = ["setpriv", f"--reuid={other}", f"--regid={other}", "--clear-groups", "--"]
        env = {**brig.env(), "SSH_AUTH_SOCK": f"{run}/ssh-agent.sock"}
        # the path is right: root (the namespace's ancestor's) reaches both
        assert subprocess.run(["ssh-add", "-l"], env=env, capture_output=True).returncode == 0
        assert "COPIEDTOKEN" in pathlib.Path(f"{run}/copy-in/1-tok").read_text()
        # another host user reaches neither
        listed = subprocess.run(as_other + ["ssh-add", "-l"], env=env, capture_output=True, text=True)
        read = subprocess.run(as_other + ["cat", f"{run}/copy-in/1-tok"], capture_output=True, text=True)
    finally:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    assert listed.returncode != 0 and "Permission denied" in listed.stderr, listed
    assert read.returncode != 0 and "COPIEDTOKEN" not in read.stdout, read


@attack("agent-upstream-in-grant", "SSH_AUTH_SOCK in the workspace (an agent started there, or a symlink to it "
        "elsewhere): the sandbox puts a symlink to another host socket in its place, then asks the relay",
        "the agent's socket is taken by its real path, and refused when any name of it lies in a writable grant")
def test_agent_socket_in_a_writable_grant_is_refused(brig):
    # a host service outside every grant, which records who connects
    svc_dir = brig.base / "svc"
    svc_dir.mkdir()
    svc = svc_dir / "svc.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(svc))
    svc.chmod(0o777)
    srv.listen(8)
    srv.settimeout(0.5)
    sock = brig.workspace / "agent.sock"
    agent = subprocess.Popen(brig.prefix() + ["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    link = brig.base / "agent-link"
    link.symlink_to(sock)
    swap = (f"mv agent.sock agent.old && ln -s {svc} agent.sock && "
            "python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.settimeout(2); "
            "c.connect(\"/run/brig/ssh-agent.sock\"); c.sendall(bytes([0, 0, 0, 1, 11])); c.recv(100)'")
    try:
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"])
        results = [brig.run("run", "--ssh-agent", "--", "sh", "-c", swap, env={"SSH_AUTH_SOCK": str(name)})
                   for name in (sock, link)]
        # the host: brig never connected to the service
        try:
            srv.accept()[0].close()
            reached = True
        except socket.timeout:
            reached = False
    finally:
        agent.kill()
        agent.wait()
        srv.close()
    assert not reached, results
    for r, name in zip(results, (sock, link)):
        assert r.returncode == 125, r
        assert f"SSH_AUTH_SOCK '{name}'" in r.stderr and f"lies in the writable workspace '{brig.workspace}'" in r.stderr, r


# ---- config without credentials ---------------------------------------------------

def host_file(brig, rel, text):
    p = brig.home / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    for d in [p] + list(p.parents):
        if d == brig.home:
            break
        brig.chown(d)
    return p


def test_git_identity_carries_name_and_email_only(brig):
    host_file(brig, ".gitconfig", '[user]\n\tname = Ada \\"L\\" Lovelace\n\temail = ada@example.org\n'
                                  '[credential]\n\thelper = store\n[url "https://tok123@example.org/"]\n'
                                  '\tinsteadOf = https://example.org/\n')
    r = brig.sh("git config --global user.name; git config --global user.email; cat ~/.gitconfig", "--git-identity")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[:2] == ['Ada "L" Lovelace', "ada@example.org"], r
    assert "tok123" not in r.stdout and "helper" not in r.stdout, r
    # a name longer than any identity (and than a pipe holds): refused, not hung
    (brig.home / ".gitconfig").write_text("[user]\n\tname = " + "A" * 100000 + "\n\temail = a@b\n")
    r = brig.run("run", "--git-identity", "--", "true", timeout=30)
    assert r.returncode == 125 and "user.name is longer than" in r.stderr, r
    # without an identity on the host: a clear refusal naming the fix
    (brig.home / ".gitconfig").write_text("[core]\n\tpager = less\n")
    r = brig.run("run", "--git-identity", "--", "true")
    assert r.returncode == 125 and "--git-identity" in r.stderr and "user.name" in r.stderr, r


@attack("config-token-as-key", "a bare token on a line of its own in the host's ~/.npmrc and pip.conf, with "
        "base64's '=' padding (or a '=' after it): it parses as key=value, and the comment naming what was left out "
        "carried the key", "a key is named only when each of its words reads as one; otherwise only what it is not")
def test_carry_config_never_names_a_token_as_a_key(brig):
    token = "dXNlcjpzM2NyZXQtcGFzc3dvcmQtMTIz"  # base64 of a user:password
    host_file(brig, ".npmrc", f"registry=https://npm.example.test/\n_auth =\n{token}==\nnpm_Xk29Qz81Lm={token}\n")
    host_file(brig, ".config/pip/pip.conf", f"[global]\ntimeout = 30\n{token}=\n")
    r = brig.sh("cat ~/.npmrc ~/.config/pip/pip.conf", "--carry-config", "npm", "--carry-config", "pip")
    assert r.returncode == 0, r
    for t in (token, token[:12], "Xk29Qz81Lm"):
        assert t not in r.stdout, (t, r)
    assert "# brig left out '_auth'" in r.stdout and "timeout = 30" in r.stdout, r
    assert r.stdout.count("# brig left out a line (not on brig's allow list of") == 3, r


@attack("config-token-carry", "a token in the host's ~/.npmrc or pip.conf (auth keys, credentials in a registry "
        "URL) carried into the sandbox by --carry-config", "an allow list of keys; values with credentials left out "
        "and named")
def test_carry_config_leaves_tokens_out(brig):
    host_file(brig, ".npmrc", "registry=https://npm.example.test/\n//npm.example.test/:_authToken=NPMTOKEN123\n"
                              "_auth=QVVUSDEyMw==\nstrict-ssl=false\n@corp:registry=https://u:NPMPASS@corp.test/\n"
                              "email=me@example.org\n")
    host_file(brig, ".config/pip/pip.conf", "[global]\nindex-url = https://pypi.example.test/simple\n"
                                           "extra-index-url =\n    https://ok.example.test/simple\n"
                                           "    https://u:PIPPASS@private.example.test/simple\n"
                                           "client-cert = /home/me/cert.pem\ntimeout = 30\n")
    r = brig.sh("cat ~/.npmrc ~/.config/pip/pip.conf; /usr/bin/python3 -m pip config list",
                "--carry-config", "npm", "--carry-config", "pip")
    assert r.returncode == 0, r
    for token in ("NPMTOKEN123", "QVVUSDEyMw", "NPMPASS", "PIPPASS", "cert.pem"):
        assert token not in r.stdout, (token, r)
    assert "registry=https://npm.example.test/" in r.stdout and "strict-ssl=false" in r.stdout, r
    assert "index-url = https://pypi.example.test/simple" in r.stdout and "https://ok.example.test/simple" in r.stdout
    assert "# brig left out '//npm.example.test/:_authToken'" in r.stdout, r
    assert "# brig left out '@corp:registry' (a URL with credentials)" in r.stdout, r
    assert "global.index-url='https://pypi.example.test/simple'" in r.stdout, r  # pip itself reads the carried file
    # nothing to carry: said so
    (brig.home / ".npmrc").unlink()
    r = brig.run("run", "--carry-config", "npm", "--", "true")
    assert r.returncode == 125 and "no npm on the host" in r.stderr, r


def test_tools_in_a_policy_file(brig):
    plain = brig.base / "token.txt"
    plain.write_text("from-policy\n")
    host_file(brig, ".gitconfig", "[user]\n\tname = P\n\temail = p@example.org\n")
    pol = brig.base / "tools.json"
    pol.write_text('{"tools": {"copy_in": [{"source": "%s", "destination": "~/t"}], "git_identity": true}}' % plain)
    r = brig.run("run", "--policy", str(pol), "--", "sh", "-c", "cat ~/t; git config --global user.email")
    assert r.returncode == 0 and r.stdout == "from-policy\np@example.org\n", r
    shown = brig.run("policy", "show", "--policy", str(pol))
    assert shown.returncode == 0 and '"git_identity": true' in shown.stdout and "~/t" in shown.stdout, shown
    import jsonschema
    schema = json.loads((pathlib.Path(__file__).resolve().parents[2] / "docs" / "policy.schema.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(json.loads(shown.stdout))]
    assert not errors, errors
    told = brig.run("policy", "explain", "--policy", str(pol))
    assert told.returncode == 0, told
    assert f"{brig.home}/t  (--copy-in: a read-only copy" in told.stdout, told
    assert f"{brig.home}/.gitconfig  (--git-identity: generated, without credentials)" in told.stdout, told
    assert "/run/brig" not in told.stdout.split("hidden")[0], told  # brig's tmpfs is not one of the writable ones
    bad = brig.base / "bad.json"
    bad.write_text('{"tools": {"copy_in": [{"source": "relative", "destination": "~/t"}]}}')
    r = brig.run("policy", "check", str(bad))
    assert r.returncode == 125 and "bad.json:1:" in r.stderr and "absolute path or ~/PATH" in r.stderr, r


# ---- the recipes of docs/recipes.md that run offline ------------------------------

class Served:
    """A directory served over HTTP (or HTTPS with a cert) on the host's
    loopback by a thread of the test; `seen` lists the paths requested."""

    def __init__(self, root, cert=None):
        import http.server
        import ssl
        import threading
        self.seen = []
        seen = self.seen

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(root), **kw)

            def log_message(self, fmt, *args):
                seen.append(self.path)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*cert)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def rules(self, name):
        return ["--allow-host", f"{name}:{self.port}", "--resolve", f"{name}:127.0.0.1",
                "--allow-cidr", f"127.0.0.1/32:{self.port}"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wheel(index, name="brig_demo", version="1.0", body="GREETING = 'hello from a local index'\n"):
    """A pure-Python wheel, made by hand, in a PEP 503 directory index."""
    import base64
    import hashlib
    import zipfile
    files = {f"{name}/__init__.py": body.encode(),
             f"{name}-{version}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n".encode(),
             f"{name}-{version}.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: brig-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}

    def digest(b):
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    record = "".join(f"{p},{digest(b)},{len(b)}\n" for p, b in files.items())
    record += f"{name}-{version}.dist-info/RECORD,,\n"
    project = index / "simple" / name.replace("_", "-")
    project.mkdir(parents=True)
    whl = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(project / whl, "w") as z:
        for p, b in files.items():
            z.writestr(p, b)
        z.writestr(f"{name}-{version}.dist-info/RECORD", record)
    (project / "index.html").write_text(f'<a href="{whl}">{whl}</a>\n')
    (index / "simple" / "index.html").write_text(f'<a href="{name.replace("_", "-")}/">x</a>\n')


def test_recipe_pip_from_a_local_index(brig):
    index = brig.base / "index"
    wheel(index)
    srv = Served(index)
    try:
        r = brig.sh("python3 -m pip install -q --no-cache-dir --target ./vendor --trusted-host pypi.internal "
                    f"--index-url http://pypi.internal:{srv.port}/simple/ brig-demo && "
                    "PYTHONPATH=vendor python3 -c 'import brig_demo; print(brig_demo.GREETING)'",
                    *srv.rules("pypi.internal"), timeout=120)
    finally:
        srv.close()
    assert r.returncode == 0, r
    assert r.stdout.strip() == "hello from a local index", r
    assert any(p.endswith(".whl") for p in srv.seen), srv.seen      # the host's server really served it
    assert (brig.workspace / "vendor" / "brig_demo" / "__init__.py").exists()


def test_recipe_git_over_https_through_the_proxy(brig):
    tmp = brig.base / "https"
    tmp.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp / "key.pem"),
                    "-out", str(tmp / "ca.pem"), "-days", "2", "-subj", "/CN=git.internal",
                    "-addext", "subjectAltName=DNS:git.internal"], check=True, capture_output=True)
    served = tmp / "srv"
    served.mkdir()
    repo = bare_repo(served, "cloned over https\n")
    subprocess.run(["git", "-C", str(repo), "update-server-info"], check=True)  # the dumb HTTP protocol
    srv = Served(served, cert=(str(tmp / "ca.pem"), str(tmp / "key.pem")))
    try:
        r = brig.run("run", *srv.rules("git.internal"), "--copy-in", f"{tmp}/ca.pem:~/git-ca.pem",
                     "--env", f"GIT_SSL_CAINFO={brig.home}/git-ca.pem", "--", "git", "clone", "-q",
                     f"https://git.internal:{srv.port}/repo.git", "clone", timeout=120)
        # and a host the rules do not name stays out, through the same proxy
        denied = brig.run("run", *srv.rules("git.internal"), "--resolve", "other.internal:127.0.0.1",
                          "--", "git", "clone", "-q", f"https://other.internal:{srv.port}/repo.git", "x", timeout=60)
    finally:
        srv.close()
    assert r.returncode == 0, r
    assert (brig.workspace / "clone" / "README").read_text() == "cloned over https\n"
    assert denied.returncode != 0 and not (brig.workspace / "x").exists(), denied
    assert "refused" in denied.stderr and "other.internal" in denied.stderr, denied


def test_recipe_toolchain_in_home(brig):
    """A toolchain installed in $HOME (pyenv, nvm, rustup): granted
    read-only, its bin directory first on PATH."""
    tool = brig.home / ".mytool" / "versions" / "1.2" / "bin"
    tool.mkdir(parents=True)
    (tool / "mytool").write_text("#!/bin/sh\necho mytool 1.2 \"$@\"\n")
    (tool / "mytool").chmod(0o755)
    for d in [tool / "mytool", tool, tool.parent, tool.parent.parent, tool.parent.parent.parent]:
        brig.chown(d)
    r = brig.run("run", "--ro-bind", f"{brig.home}/.mytool", "--env", f"PATH={tool}:/usr/bin:/bin", "--",
                 "sh", "-c", "mytool works; touch ~/.mytool/x 2>/dev/null || echo read-only; touch ~/ok && echo home-rw")
    assert r.returncode == 0, r
    assert r.stdout.splitlines() == ["mytool 1.2 works", "read-only", "home-rw"], r


def test_recipe_long_lived_dev_sandbox(brig, sandboxes):
    host_file(brig, ".gitconfig", "[user]\n\tname = Dev\n\temail = dev@example.org\n")
    (brig.workspace / "app.txt").write_text("v1\n")
    brig.chown(brig.workspace / "app.txt")
    name, _ = sandboxes.create("--workspace-mode", "overlay", "--git-identity")
    r = sandboxes.sh(name, "echo v2 > app.txt && git init -q . && git add app.txt && git commit -qm change && "
                           "git log --format=%an")
    assert r.returncode == 0 and r.stdout == "Dev\n", r
    assert (brig.workspace / "app.txt").read_text() == "v1\n"  # not yet committed to the host
    diff = sandboxes.brig_cmd("diff", name, "--exclude", ".git")
    assert diff.returncode == 0 and "app.txt" in diff.stdout, diff
    assert sandboxes.brig_cmd("commit", name, "--exclude", ".git").returncode == 0
    assert (brig.workspace / "app.txt").read_text() == "v2\n"
