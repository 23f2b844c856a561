"""The image the OCI tests run: a static busybox tree (Debian's
busybox-static, installed by scripts/install-deps), made once per module."""
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from conftest import _OURS

BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "ls", "echo", "cat", "id", "true", "false", "sleep", "wget", "nc", "touch", "mkdir",
           "ps", "kill", "test", "tty", "ln", "rm", "stat", "head", "dd", "grep", "env", "pwd", "hostname")


def make_rootfs(parent):
    """A busybox tree under PARENT/rootfs (0755, root's or the caller's)."""
    if not shutil.which("busybox") or subprocess.run([BUSYBOX, "--list"], capture_output=True).returncode:
        pytest.fail("busybox-static missing: scripts/install-deps installs it")
    root = pathlib.Path(parent) / "rootfs"
    for d in ("bin", "etc", "tmp", "proc", "dev", "sys", "root", "var"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for a in APPLETS:
        os.symlink("busybox", root / "bin" / a)
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
