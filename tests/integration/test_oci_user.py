"""process.user in brig oci (docs/oci.md "process.user"): the container's
processes are the uid, gid and supplementary groups the config asks for,
inside the container's user namespace, each mapped to the host id its
linux.uidMappings / gidMappings range gives (else brig's sandbox user's);
inside 0 is brig's own. What no range holds, what would be host root and,
rootless, any host id but the caller's or a supplementary group is
refused, located. Checked on the host: the owner and mode of a file the
process made. Root and rootless (the `brig` fixture)."""
import json
import os

import pytest

from oci_helpers import Runtime, config, rootfs  # noqa: F401 (fixture)
from proc_helpers import kv
from test_escape import attack, refused
from test_oci_config import _refused

NOBODY = 65534


@pytest.fixture
def oci(brig, rootfs):
    return Runtime(brig, rootfs)


def _user_config(args, user, uid_map=None, gid_map=None):
    c = config(args)
    c["process"]["user"] = user
    if uid_map is not None or gid_map is not None:
        c["linux"]["namespaces"].append({"type": "user"})
        c["linux"]["uidMappings"] = uid_map or []
        c["linux"]["gidMappings"] = gid_map or []
    return c


def _maps(oci):
    """Ranges as an engine writes them; rootless, onto the caller's own ids
    (the only ones a rootless brig can map)."""
    if oci.brig.mode == "rootless":
        return [{"containerID": 1000, "hostID": NOBODY, "size": 1}], \
               [{"containerID": 1000, "hostID": NOBODY, "size": 1}], (NOBODY, NOBODY)
    return [{"containerID": 1000, "hostID": 101000, "size": 10}], \
           [{"containerID": 1000, "hostID": 101000, "size": 10}, {"containerID": 2000, "hostID": 102000, "size": 1}], \
           (101000, 101000)


@attack("oci-user-unmapped", "config.json asks for uid 0 when linux.uidMappings has no 0, an id past the map, a "
        "group no range holds, an id that maps to host root, and (rootless) supplementary groups",
        "policy.c: each id looked up in its map, host 0 and (rootless) others' ids refused; 125 at /process/user")
def test_unmappable_users_are_refused(oci):
    uids, gids, _ = _maps(oci)
    rootless = oci.brig.mode == "rootless"
    cases = [
        ({"uid": 0, "gid": 1000}, uids, gids, "/process/user/uid", "uid 0 is not in the uid map"),
        ({"uid": 1010 if not rootless else 1001, "gid": 1000}, uids, gids, "/process/user/uid", "not in the uid map"),
        ({"uid": 1000, "gid": 5}, uids, gids, "/process/user/gid", "gid 5 is not in the gid map"),
        ({"uid": 1000, "gid": 1000, "additionalGids": [3000]}, uids, gids, "/process/user/additionalGids",
         "cannot set supplementary groups" if rootless else "not in the gid map"),
        ({"uid": 1000, "gid": 1000}, [{"containerID": 1000, "hostID": 0, "size": 1}], gids, "/process/user/uid",
         "can map only your own" if rootless else "host root"),
        ({"uid": 1000, "gid": 1000}, None, [{"containerID": 1000, "hostID": 0, "size": 1}], "/process/user/gid",
         "can map only your own" if rootless else "host root"),
    ]
    if not rootless:  # no gid map: no host group brig could give it
        cases.append(({"uid": 1000, "gid": 1000, "additionalGids": [27]}, None, None, "/process/user/additionalGids",
                      "has no host gid"))
    for user, um, gm, where, words in cases:
        _refused(oci, _user_config(["/bin/true"], user, um, gm), where, words)


@attack("oci-user-escalate", "a container whose config names a user tries to become root again: setgroups to "
        "group 0, setgid/setuid/setresuid 0; and files it makes carry the ids it asked for",
        "the ids are the user namespace's only ones (userns.c), no capability is left, seccomp; host owner checked")
def test_user_is_honoured_and_stays(oci):
    uids, gids, (host_uid, host_gid) = _maps(oci)
    rootless = oci.brig.mode == "rootless"
    user = {"uid": 1000, "gid": 1000, "umask": 0o077}
    if not rootless:
        user["additionalGids"] = [2000, 0]  # 0 is brig's: left out
    b = oci.bundle(_user_config(["/bin/sh", "-c", "/probe become-root; touch /tmp/made; mkdir /tmp/dir"], user,
                                uids, gids))
    r = oci.run("run", "--bundle", b, "u1")
    assert r.returncode == 0, r
    out = kv(r.stdout)
    assert out["uid"] == "1000" and out["gid"] == "1000", out
    assert set(out["groups"].split(",")) - {""} <= ({"1000"} if rootless else {"1000", "2000"}), out
    if not rootless:
        assert "2000" in out["groups"].split(","), out
    for k in ("setgroups_root", "setgid_root", "setresgid_root", "setuid_root", "setresuid_root"):
        refused(out, k, {"EPERM", "EINVAL"})
    made, d = os.stat(b / "rootfs" / "tmp" / "made"), os.stat(b / "rootfs" / "tmp" / "dir")
    assert (made.st_uid, made.st_gid) == (host_uid, host_gid), f"ATTACK WORKED: owned by {made.st_uid}:{made.st_gid}"
    assert made.st_mode & 0o777 == 0o600 and d.st_mode & 0o777 == 0o700, (oct(made.st_mode), oct(d.st_mode))

    # uid 0 asked for: brig's sandbox user, not root inside nor on the host
    b = oci.bundle(_user_config(["/bin/sh", "-c", "/probe become-root; touch /tmp/root-made"],
                                {"uid": 0, "gid": 0, "additionalGids": [0, 1, 2]}))
    r = oci.run("run", "--bundle", b, "u2")
    out = kv(r.stdout)
    assert r.returncode == 0 and out["uid"] != "0" and out["gid"] != "0", r
    for k in ("setgroups_root", "setuid_root", "setresuid_root"):
        refused(out, k, {"EPERM", "EINVAL"})
    made = os.stat(b / "rootfs" / "tmp" / "root-made")
    assert made.st_uid != 0 and made.st_gid != 0, f"ATTACK WORKED: host root made {made}"


@attack("oci-host-passwd", "a container reads /etc/passwd: the host's user names and home directories, bound "
        "over the image's own by brig's tools layer", "a rootfs keeps the image's passwd; brig's runtime tmpfs (and "
        "its mount point in the image) only for a CA, copy-ins or the agent")
def test_image_keeps_its_passwd_and_gets_no_mount_point(oci):
    image_passwd = (oci.image / "etc" / "passwd").read_text()
    host_names = {line.split(":")[0] for line in open("/etc/passwd")} - {"root", "nobody"}
    assert host_names, "the host has no user but root and nobody: the check below would prove nothing"
    b = oci.bundle(config(["/bin/sh", "-c", "cat /etc/passwd; test -e /run/brig && echo RUN-BRIG; exit 0"]))
    r = oci.run("run", "--bundle", b, "pw1")
    assert r.returncode == 0, r
    assert r.stdout == image_passwd, f"ATTACK WORKED: /etc/passwd inside is not the image's: {r.stdout}"
    assert not (b / "rootfs" / "run" / "brig").exists(), "brig made a mount point in the image"


def test_exec_runs_as_the_containers_user(oci):
    """exec --process: the container's user (its own process's is the same);
    another user is refused at /process/user, before anything runs."""
    uids, gids, _ = _maps(oci)
    b = oci.bundle(_user_config(["/bin/sleep", "300"], {"uid": 1000, "gid": 1000}, uids, gids))
    assert oci.create(b, "e1").returncode == 0
    try:
        assert oci.run("start", "e1").returncode == 0
        oci.wait_status("e1", "running")
        proc = oci.brig.base / "process.json"
        proc.write_text(json.dumps({"args": ["/bin/sh", "-c", "id -u; id -g"], "cwd": "/",
                                    "user": {"uid": 1000, "gid": 1000}}))
        r = oci.run("exec", "--process", proc, "e1")
        assert r.returncode == 0 and r.stdout == "1000\n1000\n", r
        proc.write_text(json.dumps({"args": ["/bin/sh", "-c", "touch /tmp/exec-ran"], "cwd": "/",
                                    "user": {"uid": 0, "gid": 0}}))
        r = oci.run("exec", "--process", proc, "e1")
        assert r.returncode == 125 and "/process/user" in r.stderr and "not the container's user" in r.stderr, r
        assert not (b / "rootfs" / "tmp" / "exec-ran").exists()
    finally:
        oci.run("delete", "--force", "e1")
