"""brig as an OCI runtime (docs/oci.md): the rootfs layout, brig oci's
command line driven directly with bundles made here."""
import json

from oci_helpers import rootfs  # noqa: F401 (fixture)


def test_rootfs_is_the_root_and_the_host_is_gone(brig, rootfs):
    """A rootfs policy: "/" is the image's, with brig's /dev and /proc on it;
    none of the host's directories are there, and the image stays the
    sandbox user's to read only where brig ran as root."""
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
