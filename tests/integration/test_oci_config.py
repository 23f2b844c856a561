"""Hostile config.json (docs/oci.md, "Bad input"): each one gets a located
error — the JSON pointer of the field — on stderr and in the JSON log the
engine reads, exit 125, no container left in --root, and never a weaker
container: the hook never ran, nothing was mounted through a symlink.
Root and rootless."""
import json
import os

import pytest

from oci_helpers import Runtime, config, rootfs  # noqa: F401 (fixture)
from proc_helpers import marker
from test_escape import attack


@pytest.fixture
def oci(brig, rootfs):
    return Runtime(brig, rootfs)


def _refused(oci, cfg, where, *words, bundle=None):
    b = bundle or oci.bundle(cfg)
    log = oci.root / "oci.log"
    r = oci.run("--log", log, "--log-format", "json", "create", "--bundle", b, "bad", stdin=open(os.devnull))
    assert r.returncode == 125, r
    assert where in r.stderr and all(w in r.stderr for w in words), (where, words, r.stderr)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries[-1]["level"] == "error" and where in entries[-1]["msg"], entries
    assert not (oci.root / "bad").exists(), "a container was left behind"
    log.unlink()
    return r


def _with(path, value, base=None):
    """config() with the field at PATH (a JSON pointer) set to VALUE."""
    c = base or config(["/bin/true"])
    keys = path.strip("/").split("/")
    o = c
    for k in keys[:-1]:
        o = o[int(k)] if isinstance(o, list) else o.setdefault(k, {})
    if isinstance(o, list):
        o[int(keys[-1])] = value
    else:
        o[keys[-1]] = value
    return c


@attack("oci-config-hostile", "config.json with unknown fields, absurd values, wrong types, joined namespaces, "
        "devices, a seccomp agent, bad annotations", "config.c: every field checked, unknown ones refused; 125 with the JSON pointer")
def test_hostile_fields_are_refused_where_they_are(oci):
    cases = [
        (_with("/process/seccompAgent", "x"), "/process", "unknown field 'seccompAgent'"),
        (_with("/linux/futureRestriction", True), "/linux", "unknown field"),
        (_with("/mounts/0/propagationMagic", 1), "/mounts/0", "unknown field"),
        (_with("/linux/resources/memory/limit", -5), "/linux/resources/memory/limit", "integer"),
        (_with("/linux/resources/memory/limit", 10), "/linux/resources/memory/limit", "at least 1 MiB"),
        (_with("/linux/resources/pids/limit", 1 << 40), "/linux/resources/pids/limit", "integer"),
        (_with("/linux/resources/cpu", {"quota": 50000, "period": 1}), "/linux/resources/cpu/period", "1000"),
        (_with("/process/rlimits/0", {"type": "RLIMIT_NOFILE", "hard": 10, "soft": 100}), "/process/rlimits/0",
         "above hard"),
        (_with("/process/rlimits/0", {"type": "RLIMIT_BOGUS", "hard": 1, "soft": 1}), "/process/rlimits/0",
         "unknown rlimit"),
        (_with("/process/args", []), "/process/args", "empty"),
        (_with("/process/args", ["/bin/sh", 3]), "/process/args", "string"),
        (_with("/process/cwd", "relative"), "/process/cwd", "absolute"),
        (_with("/process/env", ["NOEQUALS"]), "/process/env", "NAME=VALUE"),
        (_with("/hostname", "bad host name"), "/hostname", "unexpected character"),
        (_with("/ociVersion", "2.0.0"), "/ociVersion", "version 1"),
        (_with("/linux/namespaces/0", {"type": "pid", "path": "/proc/1/ns/pid"}), "/linux/namespaces/0",
         "joining"),
        (_with("/linux/devices", [{"path": "/dev/sda", "type": "b", "major": 8, "minor": 0}]), "/linux/devices",
         "not supported"),
        (_with("/linux/seccomp", {"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock"}),
         "/linux/seccomp/listenerPath", "agent"),
        (_with("/annotations", {"dev.brig.policy": "{\"limits\": {\"memory\": \"lots\"}}"}),
         "/annotations/dev.brig.policy", "lots"),
        (_with("/annotations", {"dev.brig.allow-hosts": "bad host!"}), "/annotations/dev.brig.allow-hosts", ""),
    ]
    for cfg, where, words in cases:
        _refused(oci, cfg, where, words)
    # not JSON at all: line and column
    _refused(oci, '{"ociVersion": "1.0.2",\n  "process": }', "config.json:2:", "")


@attack("oci-mount-over-proc", "config.json binds a host path over /proc, /proc/sys, /dev, /sys inside; other fs types; '..'",
        "config.c: brig mounts /proc /dev /sys itself, nothing else there; binds and tmpfs only")
def test_mounts_onto_proc_dev_sys_are_refused(oci):
    for dst in ("/proc", "/proc/sys", "/proc/self/attr", "/dev/kmsg", "/sys/kernel", "/dev"):
        m = {"destination": dst, "type": "bind", "source": "/etc", "options": ["rbind"]}
        cfg = config(["/bin/true"])
        cfg["mounts"].append(m)
        _refused(oci, cfg, f"/mounts/{len(cfg['mounts']) - 1}", "brig mounts /proc, /dev and /sys itself")
    cfg = config(["/bin/true"])
    cfg["mounts"].append({"destination": "/mnt", "type": "nfs", "source": "host:/x"})
    _refused(oci, cfg, "/mounts/4", "binds and tmpfs only")
    cfg = config(["/bin/true"])
    cfg["mounts"].append({"destination": "/x/../../etc", "type": "tmpfs", "source": "tmpfs"})
    _refused(oci, cfg, "/mounts/4", "'..'")


@attack("oci-mount-through-symlink", "a mount destination through a symlink the image holds, to a host directory",
        "mount points walked with openat2 RESOLVE_NO_SYMLINKS inside the rootfs (make_mountpoint)")
def test_mount_through_a_rootfs_symlink_lands_nowhere(oci):
    target = oci.brig.base / "host-target"
    target.mkdir()
    oci.brig.chown(target)
    src = oci.brig.base / "host-src"
    src.mkdir()
    (src / "planted").write_text(marker("planted"))
    cfg = config(["/bin/true"])
    cfg["mounts"].append({"destination": "/etc/escape/evil", "type": "bind", "source": str(src),
                          "options": ["rbind", "ro"]})
    b = oci.bundle(cfg)
    os.symlink(str(target), b / "rootfs" / "etc" / "escape")
    r = oci.create(b, "bad")
    assert r.returncode == 125 and "symlink" in r.stderr, r
    assert list(target.iterdir()) == [], "the mount point was made on the host, through the image's symlink"
    assert not (oci.root / "bad").exists()


@attack("oci-rootfs-symlink", "root.path is a symlink to '/', or an absolute path through one",
        "realpath compared; the rootfs opened with RESOLVE_NO_SYMLINKS at the run")
def test_symlinked_rootfs_is_refused(oci):
    b = oci.bundle(config(["/bin/true"]))
    os.rename(b / "rootfs", b / "real-rootfs")
    os.symlink("/", b / "rootfs")
    _refused(oci, None, "/root/path", "symlink", bundle=b)
    cfg = config(["/bin/true"], root={"path": str(b / "rootfs")})
    _refused(oci, cfg, "/root/path", "symlink")


@attack("oci-host-hook", "hooks (prestart, createRuntime, poststart ...) that run a host program",
        "config.c: any hook is refused; brig runs none")
def test_hooks_never_run(oci):
    mark = oci.brig.base / marker("hook")
    for kind in ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"):
        cfg = config(["/bin/true"], hooks={kind: [{"path": "/bin/sh", "args": ["sh", "-c", f"touch {mark}"]}]})
        _refused(oci, cfg, "/hooks", f"'{kind}' hooks would run on the host")
    assert not mark.exists(), "a hook ran on the host"
