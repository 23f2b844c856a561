"""What the OCI tests share (docs/oci.md): the image — a static busybox
tree (Debian's busybox-static, installed by scripts/install-deps) with
the static escape probe at /probe — made once per module, bundles made
from it, and brig oci driven as an engine drives it."""
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import _OURS, ESCAPE

BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "ls", "echo", "cat", "id", "true", "false", "sleep", "wget", "nc", "touch", "mkdir",
           "ps", "kill", "test", "tty", "ln", "rm", "stat", "head", "dd", "grep", "env", "pwd", "hostname")


def make_rootfs(parent):
    """A busybox tree under PARENT/rootfs."""
    if not os.path.exists(BUSYBOX) or subprocess.run([BUSYBOX, "--list"], capture_output=True).returncode:
        pytest.fail("busybox-static missing: scripts/install-deps installs it")
    root = pathlib.Path(parent) / "rootfs"
    # No run/brig: brig mounts its runtime tmpfs in a rootfs only for what
    # needs it (a CA, copy-ins, the agent), so a rootless brig needs no
    # mount point of its own in root's image (test_oci_user.py proves it).
    for d in ("bin", "etc", "tmp", "proc", "dev", "sys", "root", "run", "var"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for a in APPLETS:
        os.symlink("busybox", root / "bin" / a)
    shutil.copy(ESCAPE / "probe_attack", root / "probe")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
    (root / "etc" / "image-marker").write_text("inside the image\n")
    return root


@pytest.fixture(scope="module")
def rootfs():
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-oci-", dir="/tmp"))
    _OURS["dirs"].append(str(d))
    d.chmod(0o755)
    yield make_rootfs(d)
    shutil.rmtree(d, ignore_errors=True)


def config(args, **over):
    """A config.json as engines write it, trimmed: ARGS, and OVER's keys
    replacing the top-level ones."""
    c = {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": list(args),
                    "env": ["PATH=/bin", "TERM=xterm"], "cwd": "/",
                    "capabilities": {"bounding": ["CAP_CHOWN"], "effective": ["CAP_CHOWN"]},
                    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
                    "noNewPrivileges": True},
        "root": {"path": "rootfs"},
        "hostname": "ctr",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]},
                   {"destination": "/dev/pts", "type": "devpts", "source": "devpts"},
                   {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro"]}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"},
                                 {"type": "mount"}],
                  "resources": {"memory": {"limit": 256 << 20}, "pids": {"limit": 64}},
                  "maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"]},
    }
    c.update(over)
    return c


class Runtime:
    """brig oci, as the test user of BRIG (root, or nobody), with a state
    directory of its own; bundles from the module's image."""

    def __init__(self, brig, image):
        self.brig = brig
        self.image = image
        self.root = brig.base / "oci-state"
        self.n = 0
        self.root.mkdir()
        brig.chown(self.root)

    def bundle(self, cfg, name=None):
        self.n += 1
        b = self.brig.base / (name or f"bundle{self.n}")
        b.mkdir()
        subprocess.run(["cp", "-a", str(self.image), str(b / "rootfs")], check=True)
        (b / "config.json").write_text(json.dumps(cfg) if not isinstance(cfg, str) else cfg)
        if self.brig.mode == "rootless":
            subprocess.run(["chown", "-R", "nobody:nogroup", str(b)], check=True)
        return b

    def cmd(self, *args):
        return self.brig.cmd("oci", "--root", self.root, *args)

    def run(self, *args, timeout=60, **kw):
        kw.setdefault("capture_output", True)
        return subprocess.run(self.cmd(*args), cwd=str(self.brig.workspace), env=self.brig.env(), text=True,
                              timeout=timeout, **kw)

    def create(self, bundle, cid, *args, stdout=None):
        """create: the container's stdio is create's, kept by its monitor
        (a file here, so no pipe stays open); (returncode, stderr)."""
        out = stdout or self.brig.base / f"{cid}.out"
        err = self.brig.base / f"{cid}.err"
        with open(out, "w") as so, open(err, "w") as se:
            r = subprocess.run(self.cmd("create", "--bundle", bundle, *args, cid), cwd=str(self.brig.workspace),
                               env=self.brig.env(), stdin=subprocess.DEVNULL, stdout=so, stderr=se, timeout=60)
        r.stderr = err.read_text()
        return r

    def state(self, cid):
        r = self.run("state", cid)
        assert r.returncode == 0, r
        return json.loads(r.stdout)

    def wait_status(self, cid, status, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.state(cid)["status"] == status:
                return
            time.sleep(0.05)
        raise AssertionError(f"{cid} never became {status}: {self.state(cid)}")

    def logs(self, cid):
        return self.root / "logs" / f"{cid}.audit.jsonl", self.root / "logs" / f"{cid}.report.json"
