"""brig oci under Debian's engines (docs/oci.md): podman (conmon) and
containerd (ctr through the io.containerd.runc.v2 shim), with brig-oci —
a symlink to brig — as their runtime binary. The image is made here (a
static busybox tree with the escape probe, `podman import`; containerd
runs the same tree with `ctr run --rootfs`); no registry is named or
reached.

podman keeps its storage, run and tmp directories, and brig oci its state
(--runtime-flag root=...), in the module's directory; every container runs
with --network none (brig makes the network namespace, and podman's
bridge would change the host's network). containerd runs as a daemon of
the module's own, on a socket in that directory, in a namespace of its own.

Root only: rootless podman needs subordinate ids for the test user and
rootless containerd a rootlesskit setup, neither of which this host has
(brig oci itself is tested rootless in test_oci.py)."""
import json
import os
import pathlib
import pty
import select
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import _OURS, IS_ROOT
from oci_helpers import make_rootfs
from proc_helpers import kill_own, kv, pids_with, wait_until
from test_escape import attack

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="ENGINES NOT TESTED: podman and containerd need root here")

PY = "/usr/bin/python3"


def _need(tool):
    if not shutil.which(tool):
        pytest.fail(f"{tool} missing: scripts/install-deps installs it")


@pytest.fixture(scope="module")
def world(bindir):
    for tool in ("podman", "conmon", "containerd", "ctr", "containerd-shim-runc-v2"):
        _need(tool)
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-oci-eng-", dir="/tmp"))
    _OURS["dirs"].append(str(d))
    d.chmod(0o755)
    runtime = d / "brig-oci"
    os.symlink(bindir / "brig", runtime)
    root = make_rootfs(d)
    subprocess.run(["tar", "-C", str(root), "-cf", str(d / "image.tar"), "."], check=True)
    w = {"dir": d, "runtime": runtime, "state": d / "oci-state", "rootfs": root, "image": "localhost/brig-oci-bb:1"}
    w["podman"] = ["podman", "--root", str(d / "storage"), "--runroot", str(d / "run"), "--tmpdir", str(d / "tmp"),
                   "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
                   "--runtime", str(runtime), "--runtime-flag", f"root={d / 'oci-state'}"]
    r = subprocess.run(w["podman"] + ["import", str(d / "image.tar"), w["image"]], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r
    yield w
    subprocess.run(w["podman"] + ["rm", "-af", "-t", "0"], capture_output=True, timeout=120)
    subprocess.run(w["podman"] + ["system", "reset", "-f"], capture_output=True, timeout=120)
    subprocess.run(["umount", "-R", str(d / "storage")], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False)


def podman(w, *args, timeout=60, **kw):
    kw.setdefault("capture_output", True)
    return subprocess.run(w["podman"] + list(args), text=True, timeout=timeout, **kw)


def prun(w, *args, **kw):
    """podman run --network none ... IMAGE ARGS (args before "--" are podman's)."""
    args = list(args)
    opts, cmd = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else ([], args)
    return podman(w, "run", "--network", "none", *opts, w["image"], *cmd, **kw)


def _ended(w, cid):
    # "stopped" until podman's cleanup has run, then "exited"
    return podman(w, "inspect", "--format", "{{.State.Status}}", cid).stdout.strip() in ("exited", "stopped")


def test_podman_run_exit_codes_stdout_rootfs_and_the_audit_file(world):
    r = prun(world, "--rm", "--", "/bin/sh", "-c", "echo out-$(cat /etc/image-marker); echo err >&2; exit 7")
    assert r.returncode == 7 and r.stdout == "out-inside the image\n" and "err" in r.stderr, r
    r = prun(world, "--rm", "--", "/nonexistent")
    assert r.returncode in (126, 127), r
    # podman's --user reaches process.user; its root stays brig's sandbox user
    r = prun(world, "--rm", "--user", "1000:1000", "--", "/bin/sh", "-c", "id -u; id -g")
    assert r.returncode == 0 and r.stdout == "1000\n1000\n", r
    r = prun(world, "--rm", "--", "/bin/id", "-u")
    assert r.returncode == 0 and r.stdout.strip() not in ("", "0"), r
    copy = world["dir"] / "rootfs-copy"
    subprocess.run(["cp", "-a", str(world["rootfs"]), str(copy)], check=True)
    (copy / "etc" / "image-marker").write_text("from --rootfs\n")
    r = podman(world, "run", "--rm", "--network", "none", "--rootfs", str(copy), "/bin/cat", "/etc/image-marker")
    assert r.returncode == 0 and r.stdout == "from --rootfs\n", r
    cid = prun(world, "-d", "--", "/bin/sh", "-c", "echo logged").stdout.strip()
    assert wait_until(lambda: _ended(world, cid), timeout=20)
    audit = world["state"] / "logs" / f"{cid}.audit.jsonl"
    report = json.loads((world["state"] / "logs" / f"{cid}.report.json").read_text())
    events = [json.loads(line)["event"] for line in audit.read_text().splitlines()]
    assert "start" in events and report["exit_code"] == 0, (events, report)
    assert podman(world, "rm", cid).returncode == 0
    assert not (world["state"] / cid).exists()


def test_podman_it_has_a_terminal(world):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("podman", world["podman"] + ["run", "--rm", "-it", "--network", "none", world["image"],
                                               "/bin/sh", "-c", "test -t 0 && test -t 1 && echo IS-A-TTY; tty"])
    out = b""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if select.select([fd], [], [], 1)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, out
    text = out.decode(errors="replace")
    assert "IS-A-TTY" in text and "/dev/pts/" in text, text


def test_podman_exec_stop_kill(world):
    name = f"brig-t-{uuid.uuid4().hex[:8]}"
    assert prun(world, "-d", "--name", name, "--", "sleep", "300").returncode == 0
    try:
        r = podman(world, "exec", name, "/bin/sh", "-c", "echo exec-$(cat /etc/image-marker); ps -o pid,args")
        assert r.returncode == 0 and r.stdout.startswith("exec-inside the image\n") and "sleep 300" in r.stdout, r
        r = podman(world, "exec", "-i", name, "/bin/sh", "-c", "read x; echo got-$x; exit 3", input="abc\n")
        assert r.returncode == 3 and r.stdout == "got-abc\n", r
        assert podman(world, "stop", "-t", "5", name).returncode == 0
        assert podman(world, "inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "143"
        assert podman(world, "start", name).returncode == 0
        assert podman(world, "kill", name).returncode == 0
        assert wait_until(lambda: _ended(world, name), timeout=20)
        assert podman(world, "inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "137"
    finally:
        podman(world, "rm", "-f", name)


def test_podman_memory_and_pids_limits(world):
    r = prun(world, "--rm", "--memory", "64m", "--", "/probe", "memhog", "512")
    assert r.returncode == 137 and "stopped_by=max" not in r.stdout, r
    r = prun(world, "--rm", "--pids-limit", "24", "--", "/probe", "forkbomb", "200")
    out = kv(r.stdout)
    assert r.returncode == 0 and int(out["forked"]) < 24 and out["stopped_by"] == "EAGAIN", r


UPSTREAM = r'''
import http.server, sys
addr, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open(log, "a").write(f"{port} {self.path}\n")
        body = f"hello from {port}\n".encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer((addr, port), H).serve_forever()
'''


def _csv(value):
    """podman reads --annotation as a CSV field: JSON's quotes and commas quoted."""
    return '"' + value.replace('"', '""') + '"'


@attack("oci-annotation-egress", "a container reaches a host its annotations do not allow (by name, and the "
        "allowed server on another port)", "dev.brig.policy / dev.brig.allow-hosts become the sandbox's egress rules")
def test_podman_annotation_allowlist(world):
    """podman runs in a network namespace of the test's (so brig's
    supervisor connects from there); two servers listen in another,
    joined to it by a veth pair. The annotations allow ok.test:8080 only."""
    ns = f"brig-oci-{uuid.uuid4().hex[:6]}"
    client, addr = ns + "-c", "10.77.0.2"
    log = world["dir"] / f"{ns}.log"
    log.write_text("")
    servers = []
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "netns", "add", client], check=True)
        subprocess.run(["ip", "link", "add", "vc", "netns", client, "type", "veth", "peer", "name", "vs", "netns", ns],
                       check=True)
        for n, dev, a in ((ns, "vs", addr), (client, "vc", "10.77.0.1")):
            for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{a}/24", "dev", dev],
                        ["ip", "link", "set", dev, "up"]):
                subprocess.run(["ip", "netns", "exec", n, *cmd], check=True)
        script = world["dir"] / "upstream.py"
        script.write_text(UPSTREAM)
        for port in (8080, 8081):
            servers.append(subprocess.Popen(["ip", "netns", "exec", ns, PY, str(script), addr, str(port), str(log)]))
        policy = {"network": {"resolve": [f"ok.test:{addr}", f"no.test:{addr}"],
                              "allow_private_hosts": ["ok.test:8080"]}}
        for port in (8080, 8081):  # both really listen: a refusal below is brig's
            wait_until(lambda: subprocess.run(["ip", "netns", "exec", client, "curl", "-s", "--noproxy", "*", "-m", "2",
                                               f"http://{addr}:{port}/ready"], capture_output=True).returncode == 0,
                       timeout=10)
        r = subprocess.run(["ip", "netns", "exec", client, *world["podman"], "run", "--rm", "--network", "none",
                            "--annotation", _csv(f"dev.brig.policy={json.dumps(policy)}"),
                            "--annotation", "dev.brig.allow-hosts=ok.test:8080", world["image"], "/bin/sh", "-c",
                            "wget -q -O- http://ok.test:8080/allowed; echo rc1=$?;"
                            " wget -q -O- http://no.test:8081/refused-by-name; echo rc2=$?;"
                            " wget -q -O- http://ok.test:8081/refused-port; echo rc3=$?;"
                            f" wget -q -O- http://{addr}:8081/refused-address; echo rc4=$?"],
                           capture_output=True, text=True, timeout=120)
        assert "hello from 8080" in r.stdout and "rc1=0" in r.stdout, r
        assert "rc2=0" not in r.stdout and "rc3=0" not in r.stdout and "rc4=0" not in r.stdout, r
        seen = log.read_text().splitlines()
        assert "8080 /allowed" in seen and not any("refused" in line for line in seen), seen
    finally:
        for s in servers:
            s.kill()
            s.wait()
        subprocess.run(["ip", "netns", "del", client], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture(scope="module")
def containerd(world):
    d = world["dir"] / "containerd"
    d.mkdir()
    sock = d / "c.sock"
    (d / "config.toml").write_text(
        f'version = 2\nroot = "{d}/root"\nstate = "{d}/state"\n'
        f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{sock}.ttrpc"\n'
        '[plugins."io.containerd.grpc.v1.cri"]\n  disable = true\n')
    log = open(d / "containerd.log", "w")
    daemon = subprocess.Popen(["containerd", "--config", str(d / "config.toml")], stdout=log, stderr=log)
    ns = f"brigtest-{uuid.uuid4().hex[:6]}"
    ctr = ["ctr", "--address", str(sock), "--namespace", ns]
    # the shims' fixed directories (fifo/, runc/, s/): ours to remove when we made them
    run_dir_made = not os.path.exists("/run/containerd")
    try:
        wait_until(lambda: subprocess.run(ctr + ["version"], capture_output=True).returncode == 0, timeout=20)
        yield {"ctr": ctr, "ns": ns, "runtime_root": pathlib.Path("/run/containerd/runc") / ns}
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()
        kill_own(pids_with(ns))  # a shim a failed test left running (its command line names the namespace)
        shutil.rmtree(pathlib.Path("/run/containerd/runc") / ns, ignore_errors=True)
        if run_dir_made:
            for sub in ("fifo", "runc", "s", ""):
                try:
                    os.rmdir(pathlib.Path("/run/containerd") / sub)
                except OSError:
                    pass


def test_containerd_run_exec_kill_delete_and_nothing_left(world, containerd):
    ctr, rt = containerd["ctr"], world["runtime"]
    rootfs = str(world["rootfs"])
    r = subprocess.run(ctr + ["run", "--rm", "--runc-binary", str(rt), "--rootfs", rootfs, "c-run", "/bin/sh", "-c",
                              "echo hi-$(cat /etc/image-marker); exit 4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 4 and r.stdout == "hi-inside the image\n", r
    r = subprocess.run(ctr + ["run", "-d", "--runc-binary", str(rt), "--rootfs", rootfs, "c-long", "sleep", "300"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    r = subprocess.run(ctr + ["task", "exec", "--exec-id", "e1", "c-long", "/bin/sh", "-c", "echo in-exec; exit 5"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 5 and r.stdout == "in-exec\n", r
    tasks = subprocess.run(ctr + ["task", "ls"], capture_output=True, text=True).stdout
    pid = int(next(line.split()[1] for line in tasks.splitlines() if line.startswith("c-long")))
    state = containerd["runtime_root"]
    sandbox = json.loads((state / "c-long" / "state.json").read_text())["sandbox"]
    assert subprocess.run(ctr + ["task", "kill", "-s", "SIGTERM", "c-long"]).returncode == 0
    assert wait_until(lambda: "STOPPED" in subprocess.run(ctr + ["task", "ls"], capture_output=True,
                                                          text=True).stdout, timeout=20)
    assert subprocess.run(ctr + ["task", "delete", "c-long"], capture_output=True).returncode == 0
    assert subprocess.run(ctr + ["container", "rm", "c-long"], capture_output=True).returncode == 0
    # nothing left: the monitor, the sandbox's supervisor and its state, the container's directory
    assert not os.path.exists(f"/proc/{pid}"), "the container's monitor outlived delete"
    assert not (state / "c-long").exists() and not (state / "c-run").exists(), list(state.iterdir())
    left = subprocess.run(["pgrep", "-f", f"brig-supervisor {sandbox}"], capture_output=True, text=True).stdout
    assert left == "", f"the sandbox's supervisor outlived delete: {left}"
    assert not pathlib.Path(f"/run/brig/{sandbox}").exists()
    assert (state / "logs" / "c-long.report.json").exists()
