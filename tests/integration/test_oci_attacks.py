"""The catalogue's container-relevant attacks, made from inside a container
brig oci runs (docs/security.md rows 286-293): the runtime CVEs replayed
(CVE-2019-5736 through /proc/*/exe, CVE-2024-21626 through descriptors and
a working directory brig oci exec was handed), what a config.json grants
that brig does not (capabilities, the host's network namespace, a laxer
seccomp profile), and the kernel surface containers escaped through.
The probe is the static tests/escape/probe_attack at /probe in the image.
Root and rootless; each checks the host side (hashes, the host's files)."""
import hashlib
import os
import pathlib

import pytest

from oci_helpers import Runtime, config, rootfs  # noqa: F401 (fixture)
from proc_helpers import kv, marker
from test_escape import attack, refused


@pytest.fixture
def oci(brig, rootfs):
    return Runtime(brig, rootfs)


def sha(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _run(oci, script, **over):
    b = oci.bundle(config(["/bin/sh", "-c", script], **over))
    r = oci.run("run", "--bundle", b, f"a{oci.n}")
    return r, kv(r.stdout)


@attack("oci-exe-overwrite", "CVE-2019-5736 in an OCI container: write the runtime through /proc/self/exe and "
        "/proc/1/exe (brig's init), and the probe's own binary", "pid 1 not dumpable; nothing of brig oci runs inside; "
        "/proc/self/exe reopen refused")
def test_runtime_binary_out_of_reach(oci):
    bins = [oci.brig.exe, str(oci.brig.bindir / "brig-engine"), str(oci.brig.bindir / "brig-supervisor")] + \
        [str(p) for p in oci.brig.bindir.glob("libbrig.so*")]
    before = {b: sha(b) for b in bins}
    r, out = _run(oci, "/probe exe")
    assert r.returncode == 0, r
    for k in ("init_exe_opath", "init_exe_rdonly", "init_exe_wronly", "init_exe_readlink", "init_map_files"):
        refused(out, k, {"EACCES", "EPERM"})
    for k in ("self_exe_wronly", "self_exe_rdwr", "self_exe_reopen_wronly"):
        refused(out, k)
    assert {b: sha(b) for b in bins} == before, "brig's binary or library changed"


@attack("oci-exec-leaked-fd", "CVE-2024-21626 through brig oci exec: host directories leaked to it, and "
        "--cwd /proc/self/fd/N", "only stdio travels to pid 1; cwd resolved inside the root (RESOLVE_IN_ROOT)")
def test_exec_takes_no_host_descriptor_in(oci):
    b = oci.bundle(config(["/bin/sleep", "300"]))
    secret = oci.brig.base / "leaked"
    secret.mkdir()
    mark = marker("leak")
    (secret / "flag").write_text(mark)
    dfd = os.open(secret, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert oci.create(b, "x1").returncode == 0
        assert oci.run("start", "x1").returncode == 0
        oci.wait_status("x1", "running")
        r = oci.run("exec", "x1", "/probe", "fds", pass_fds=(dfd,))
        assert r.returncode == 0 and kv(r.stdout).get("open_fds") == "", f"ATTACK WORKED: {r}"
        for n in sorted({dfd, *range(3, 12)}):
            r = oci.run("exec", "--cwd", f"/proc/self/fd/{n}", "x1", "/probe", "cwd", pass_fds=(dfd,))
            assert mark not in r.stdout, r
            if r.returncode == 0:
                out = kv(r.stdout)
                assert out["getcwd"].startswith("/") and out["dotdot_is_root"] == "yes", f"ATTACK WORKED: {out}"
            else:
                assert r.returncode == 125 and "cwd" in r.stderr, r
    finally:
        os.close(dfd)
        oci.run("delete", "--force", "x1")


@attack("oci-create-fds", "descriptors of the engine's (a host directory) left open in brig oci create reach "
        "the container's process", "the monitor keeps them; only stdio goes to the sandbox's pid 1")
def test_create_hands_no_descriptor_in(oci):
    secret = oci.brig.base / "leaked-create"
    secret.mkdir()
    dfd = os.open(secret, os.O_RDONLY | os.O_DIRECTORY)
    try:
        b = oci.bundle(config(["/probe", "fds"]))
        r = oci.run("run", "--bundle", b, "x2", pass_fds=(dfd,))
    finally:
        os.close(dfd)
    assert r.returncode == 0 and kv(r.stdout).get("open_fds") == "", f"ATTACK WORKED: {r}"


@attack("oci-spec-privileges", "config.json grants every capability, noNewPrivileges false, uid 0",
        "brig grants no capability whatever the spec lists; no_new_privs always; the sandbox user")
def test_spec_capabilities_are_not_granted(oci):
    caps = ["CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE", "CAP_DAC_OVERRIDE", "CAP_SETUID", "CAP_MKNOD"]
    cfg = config(["/bin/sh", "-c", "grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status;"
                  " id -u"])
    cfg["process"].update({"capabilities": {k: caps for k in ("bounding", "effective", "permitted", "inheritable",
                                                                "ambient")}, "noNewPrivileges": False})
    b = oci.bundle(cfg)
    r = oci.run("run", "--bundle", b, "x3")
    assert r.returncode == 0, r
    st = dict(line.split(":\t") for line in r.stdout.splitlines() if ":\t" in line)
    for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(st[k], 16) == 0, f"ATTACK WORKED: {k}={st[k]}"
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    assert r.stdout.splitlines()[-1] != "0", "the process is root inside"


@attack("oci-host-netns", "config.json joins the host's network namespace (linux.namespaces network path "
        "/proc/1/ns/net)", "brig makes the container's network namespace itself; the path is not joined")
def test_host_network_namespace_is_not_joined(oci):
    over = config(["/bin/true"])["linux"]
    over["namespaces"] = [{"type": "network", "path": "/proc/1/ns/net"}, {"type": "pid"}, {"type": "mount"}]
    host_ifs = {line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]}
    assert host_ifs - {"lo"}, "the host has no interface but lo: the check below would prove nothing"
    r, _ = _run(oci, "cat /proc/net/dev", linux=over)
    assert r.returncode == 0, r
    inside = {line.split(":")[0].strip() for line in r.stdout.splitlines()[2:]}
    assert inside == {"lo"}, f"ATTACK WORKED: the host's interfaces inside: {inside}"


@attack("oci-seccomp-merge", "config.json's seccomp profile allows what brig's floor refuses (keyctl, unshare, "
        "mount) and refuses mkdir", "the stricter wins: the spec's refusals are added, its allows widen nothing")
def test_seccomp_profiles_merge_stricter(oci):
    over = config(["/bin/true"])["linux"]
    over["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
                       "syscalls": [{"names": ["keyctl", "add_key", "unshare", "mount"], "action": "SCMP_ACT_ALLOW"},
                                    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}
    r, out = _run(oci, "mkdir /tmp/d; echo mkdir=$?; /probe keyctl; /probe userns", linux=over)
    assert "mkdir=1" in r.stdout, f"the spec's refusal was lost: {r}"
    for k in ("join_session_keyring", "add_key_user"):
        refused(out, k, {"EPERM"})
    refused(out, "unshare_newuser", {"EPERM"})


@attack("oci-kernel-surface", "from a container: cgroup v1 release_agent (CVE-2022-0492), mknod of the host "
        "disk, core_pattern, nested user namespaces, keyrings, pid 1's descriptors",
        "seccomp floor, nodev, /proc/sys read-only, pid 1 keeps nothing, as for brig run")
def test_container_kernel_surface(oci):
    core = open("/proc/sys/kernel/core_pattern").read()
    r, out = _run(oci, "/probe cgroup; /probe mknod /tmp; /probe write /proc/sys/kernel/core_pattern '|/tmp/pwn';"
                  " /probe pid1")
    for k in ("unshare_cgroup", "unshare_mount", "mount_cgroup_memory", "mount_cgroup2", "fsopen_cgroup"):
        refused(out, k, {"EPERM"})
    assert out["release_agents_visible"] == "0", out
    for k in ("mknod_blk_sda", "mknod_chr_mem"):
        refused(out, k)
    refused(out, "open_write", {"EROFS", "EACCES", "EPERM"})
    assert open("/proc/sys/kernel/core_pattern").read() == core
    assert out["init_fds_opened"] == "0" and out["pidfd_getfd_got"] == "0", out
