"""brig as an OCI runtime (docs/oci.md), driven as an engine drives it:
the rootfs layout, brig oci's lifecycle with bundles made here, the
attacks of the catalogue that matter to containers from inside one, and
hostile config.json files. Root and rootless (the `brig` fixture).
Podman and containerd: test_oci_engines.py."""
import hashlib
import json
import os
import pathlib
import subprocess

import pytest

from oci_helpers import Runtime, config, rootfs  # noqa: F401 (fixture)
from proc_helpers import kv, marker, wait_until
from test_escape import attack


def sha(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


@pytest.fixture
def oci(brig, rootfs):
    return Runtime(brig, rootfs)


def test_rootfs_is_the_root_and_the_host_is_gone(brig, rootfs):
    """A rootfs policy: "/" is the image's, with brig's /dev and /proc on it;
    none of the host's directories are there."""
    pol = brig.base / "rootfs.json"
    pol.write_text(json.dumps({"filesystem": {"rootfs": str(rootfs)}}))
    r = brig.run("run", "--policy", pol, "--", "/bin/sh", "-c",
                 "cat /etc/image-marker; pwd; ls /; test -e /usr && echo HOST-USR; test -e /dev/null && echo dev;"
                 " cat /proc/1/cmdline >/dev/null && echo proc")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0] == "inside the image" and lines[1] == "/", r
    assert "HOST-USR" not in lines and "dev" in lines and "proc" in lines, r
    assert "usr" not in lines and "home" not in lines, r


def test_lifecycle_create_start_exec_kill_delete(oci):
    """create returns with the monitor's pid in --pid-file and the process
    not started; start runs it with create's stdio; exec joins; kill
    reaches the process; the audit stream and the report land in
    --root/logs; delete leaves nothing of the container."""
    b = oci.bundle(config(["/bin/sh", "-c", "echo out-$(hostname); echo err >&2; exec sleep 60"]))
    out, pid_file = oci.brig.base / "stdout", oci.root / "c1.pid"
    r = oci.create(b, "c1", "--pid-file", pid_file, "--no-pivot", stdout=out)
    assert r.returncode == 0, r
    st = oci.state("c1")
    assert st["status"] == "created" and st["pid"] == int(pid_file.read_text()), st
    assert st["bundle"] == str(b) and out.read_text() == "", st
    assert oci.run("start", "c1").returncode == 0
    oci.wait_status("c1", "running")
    wait_until(lambda: out.read_text() == "out-ctr\n", timeout=10)
    r = oci.run("exec", "c1", "/bin/sh", "-c", "echo exec-$(cat /etc/image-marker); exit 4")
    assert r.returncode == 4 and r.stdout == "exec-inside the image\n", r
    proc = oci.brig.base / "process.json"
    proc.write_text(json.dumps({"args": ["/bin/sh", "-c", "pwd"], "cwd": "/etc", "env": ["PATH=/bin"]}))
    r = oci.run("exec", "--process", proc, "c1")
    assert r.returncode == 0 and r.stdout == "/etc\n", r
    r = oci.run("ps", "--format", "json", "c1")
    assert r.returncode == 0 and len(json.loads(r.stdout)) >= 2, r
    assert oci.run("start", "c1").returncode == 125  # once
    r = oci.run("delete", "c1")
    assert r.returncode == 125 and "delete --force" in r.stderr, r
    assert oci.run("kill", "c1", "TERM").returncode == 0
    oci.wait_status("c1", "stopped")
    audit, report = oci.logs("c1")
    rep = json.loads(report.read_text())
    assert rep["exit_code"] == 143 and rep["signal"] == 15, rep
    assert '"event": "start"' in audit.read_text() or '"event":"start"' in audit.read_text()
    assert oci.run("delete", "c1").returncode == 0
    assert not (oci.root / "c1").exists()
    r = oci.run("state", "c1")
    assert r.returncode == 125 and "does not exist" in r.stderr, r


def test_run_exit_code_and_delete_force(oci):
    """run: the process's status is run's; delete --force kills a created
    container that never started."""
    b = oci.bundle(config(["/bin/sh", "-c", "echo ran; exit 7"]))
    r = oci.run("run", "--bundle", b, "r1")
    assert r.returncode == 7 and r.stdout == "ran\n", r
    assert not (oci.root / "r1").exists()
    assert oci.create(b, "r2").returncode == 0
    pid = oci.state("r2")["pid"]
    assert oci.run("delete", "--force", "r2").returncode == 0
    assert not os.path.exists(f"/proc/{pid}/stat") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] in "ZX"
    assert not (oci.root / "r2").exists()


def test_runtime_spec_lifecycle_requirements(oci):
    """The runtime spec's lifecycle requirements as runtime-tools names them
    (specerror/runtime.go, which Debian ships; its validation programs it
    does not, docs/oci.md): an operation without an id, on a container that
    does not exist, start/kill/delete in the wrong state — each an error
    that changes nothing; an id already in use refused."""
    for op in ("state", "start", "kill", "delete"):  # *WithoutIDGenError
        r = oci.run(op)
        assert r.returncode == 125 and "container id is missing" in r.stderr, (op, r)
    r = oci.run("state", "nosuch")  # QueryNonExistGenError
    assert r.returncode == 125 and "does not exist" in r.stderr, r
    b = oci.bundle(config(["/bin/sleep", "60"]))
    assert oci.create(b, "l1").returncode == 0
    try:
        r = oci.create(b, "l1")  # CreateWithUniqueID
        assert r.returncode == 125 and "exists already" in r.stderr, r
        assert oci.state("l1")["status"] == "created"
        assert oci.run("start", "l1").returncode == 0
        oci.wait_status("l1", "running")
        r = oci.run("start", "l1")  # StartNotCreatedGenError, ...HaveNoEffect
        assert r.returncode == 125 and oci.state("l1")["status"] == "running", r
        r = oci.run("delete", "l1")  # DeleteNonStopGenError, ...HaveNoEffect
        assert r.returncode == 125 and oci.state("l1")["status"] == "running", r
        assert oci.run("kill", "l1", "KILL").returncode == 0  # KillSignalImplement
        oci.wait_status("l1", "stopped")
        r = oci.run("kill", "l1", "TERM")  # KillNonCreateRunGenError
        assert r.returncode == 125 and oci.state("l1")["status"] == "stopped", r
    finally:
        oci.run("delete", "--force", "l1")
    assert not (oci.root / "l1").exists()  # DeleteResImplement


@attack("oci-root-squatted", "another user makes brig oci's default root (/tmp/brig-oci-UID, for a caller without "
        "XDG_RUNTIME_DIR and no --root) first, world-writable, with a container whose state.json names the "
        "victim's process and sandbox; the victim's engine then runs `brig oci kill` and `delete --force` on it",
        "the root must be the caller's alone (owner, no group or other write) and so must what leads to it: "
        "refused with exit 125 naming --root before any state is read; on the host: the victim's process lives, "
        "nothing was written into the attacker's directory")
def test_a_default_root_another_user_made_is_refused(bindir, mode):
    if mode == "root":
        pytest.skip("NO ROOT TO SQUAT: root's default is /run/brig-oci, in a directory only root may write")
    if os.geteuid() != 0:
        pytest.skip("OCI ROOT SQUAT NOT TESTED: needs two uids (the suite as root)")
    victim, attacker = 64011, 1  # a uid no other test uses, and daemon
    root = pathlib.Path(f"/tmp/brig-oci-{victim}")
    subprocess.run(["rm", "-rf", str(root)], check=True)
    as_victim = ["setpriv", f"--reuid={victim}", f"--regid={victim}", "--clear-groups"]
    proc = subprocess.Popen(as_victim + ["sleep", "300"])
    try:
        root.mkdir()
        (root / "evil").mkdir()
        (root / "evil" / "state.json").write_text(json.dumps(
            {"id": "evil", "status": "running", "pid": proc.pid, "sandbox": "p1", "bundle": "/"}))
        for p in (root, root / "evil", root / "evil" / "state.json"):
            os.chown(p, attacker, attacker)
            os.chmod(p, 0o777)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}  # no XDG_RUNTIME_DIR, no --root
        for args in (["kill", "evil", "KILL"], ["delete", "--force", "evil"]):
            r = subprocess.run(as_victim + [str(bindir / "brig"), "oci", *args], env=env, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 125, r
            assert f"--root '{root}' belongs to uid {attacker}" in r.stderr, r
        assert proc.poll() is None, "brig oci signalled the process another user's state.json named"
        assert sorted(os.listdir(root)) == ["evil"], "brig oci wrote into another user's directory"
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["rm", "-rf", str(root)], check=True)
