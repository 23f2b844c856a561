"""Privileges: no capabilities and no way to regain any, no root, setuid
binaries inert, no namespaces, mounts, chroot, hostname or reboot."""
import os
import shutil
import stat
import subprocess

import pytest

from proc_helpers import kv, marker, probe


ZERO = "0000000000000000"


def test_capabilities_all_zero(brig):
    r, k = probe(brig, "caps")
    assert r.returncode == 0 and k.get("capget") == "ok", r
    assert k["cap_effective"] == ZERO and k["cap_permitted"] == ZERO and k["cap_inheritable"] == ZERO, r
    assert k["bounding"] == "" and k["bounding_err"] == "none", r
    assert k["ambient"] == "", r
    assert k["no_new_privs"] == "1", r
    sb = int(k["securebits"], 16)
    assert sb & 0x3 == 0x3, f"SECBIT_NOROOT and its lock not set: {sb:#x}"


def test_capabilities_cannot_be_regained(brig):
    r, k = probe(brig, "caps")
    for key in ("capset_all", "ambient_raise_sys_admin", "set_securebits_0", "keepcaps"):
        assert k.get(key) == "EPERM", (key, r)


def test_proc_status_shows_no_privilege(brig):
    r = brig.sh("grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Uid|Gid):' /proc/self/status", timeout=20)
    assert r.returncode == 0, r
    rows = dict(l.split(":", 1) for l in r.stdout.splitlines())
    rows = {k: v.split() for k, v in rows.items()}
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert rows[cap] == [ZERO], (cap, r.stdout)
    assert rows["NoNewPrivs"] == ["1"], r.stdout
    assert "0" not in rows["Uid"] and "0" not in rows["Gid"], r.stdout


def test_not_root_and_cannot_become_root(brig):
    r, k = probe(brig, "setuid")
    assert r.returncode == 0, r
    # EINVAL: uid 0 is not even mapped (rootless); EPERM: mapped, but no CAP_SETUID.
    for key in ("setuid0", "setresuid0", "seteuid0", "setgid0", "setresgid0", "setgroups0", "setfsuid0"):
        assert k.get(key) in ("EPERM", "EINVAL"), (key, r)
    for key in ("ruid", "euid", "suid", "rgid", "egid", "sgid"):
        assert k[key] != "0", (key, r)
    if brig.mode == "rootless":
        assert k["ruid"] == str(brig.uid), r
    assert "0" not in k["groups"].split(","), r


@pytest.fixture
def suid_dir(brig):
    """Root-owned setuid/setgid copies of id and of the probe, as a host
    might have them (a directory the sandbox is given)."""
    d = brig.base / f"suid-{marker('d')}"
    d.mkdir()
    d.chmod(0o755)
    for src, name in (("/usr/bin/id", "id"), (brig.program("probe_proc"), "probe_suid")):
        dst = d / name
        shutil.copy2(src, dst)
        os.chown(dst, 0, 0)
        dst.chmod(0o6755)
        assert dst.stat().st_mode & stat.S_ISUID
    return d


@pytest.mark.parametrize("how", ["ro-bind", "bind"])
def test_setuid_binary_is_inert(brig, suid_dir, how):
    if os.geteuid() != 0:
        pytest.skip("SETUID TEST NOT RUN: creating a root-owned setuid file needs the suite to run as root")
    r = brig.sh("/suid/id; /suid/id -u; /suid/id -g; /suid/probe_suid ids", f"--{how}", f"{suid_dir}:/suid",
                timeout=20)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert "euid=0" not in lines[0] and "uid=0(" not in lines[0] and "egid=0" not in lines[0], r
    assert lines[1] != "0" and lines[2] != "0", r
    k = kv(r.stdout)
    for key in ("ruid", "euid", "suid", "rgid", "egid", "sgid"):
        assert k[key] != "0", (key, r)


def test_setuid_binary_in_workspace_is_inert(brig):
    if os.geteuid() != 0:
        pytest.skip("SETUID TEST NOT RUN: creating a root-owned setuid file needs the suite to run as root")
    dst = brig.workspace / "suid-probe"
    shutil.copy2(brig.program("probe_proc"), dst)
    os.chown(dst, 0, 0)
    dst.chmod(0o6755)
    r = brig.run("run", "--", "./suid-probe", "ids", timeout=20)
    assert r.returncode == 0, r
    k = kv(r.stdout)
    for key in ("ruid", "euid", "suid", "rgid", "egid", "sgid"):
        assert k[key] != "0", (key, r)


def test_sandbox_cannot_plant_root_setuid_binary_on_host(brig, request):
    """What the command leaves in the workspace must not become a
    setuid-root (or setgid-root) program on the host, which any local user
    who can reach the workspace could run to become root."""
    name = marker("planted")
    r = brig.sh(f"cp /bin/sh ./{name} && chmod 6755 ./{name}; ls -ln ./{name}", timeout=20)
    assert r.returncode == 0, r
    st = (brig.workspace / name).stat()
    assert not (st.st_mode & stat.S_ISUID and st.st_uid == 0), f"setuid-root file planted: {oct(st.st_mode)} uid {st.st_uid}"
    assert not (st.st_mode & stat.S_ISGID and st.st_gid == 0), f"setgid-root file planted: {oct(st.st_mode)} gid {st.st_gid}"


def test_no_namespaces_can_be_made(brig):
    r, k = probe(brig, "unshare")
    assert r.returncode == 0, r
    for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time", "all"):
        assert k.get(f"unshare_{ns}") in ("EPERM", "ENOSPC", "EINVAL"), (ns, r)
    r, k = probe(brig, "clone")
    # clone3 may be refused outright (ENOSYS, so libc falls back to clone).
    for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"):
        assert k.get(f"clone_{ns}") in ("EPERM", "ENOSPC", "EINVAL", "ENOSYS"), (ns, r)
    for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup"):
        assert k.get(f"clone_legacy_{ns}") in ("EPERM", "ENOSPC", "EINVAL"), (ns, r)


def test_no_nested_user_namespace(brig):
    r = brig.sh("cat /proc/sys/user/max_user_namespaces; echo 99 > /proc/sys/user/max_user_namespaces 2>/dev/null;"
                " cat /proc/sys/user/max_user_namespaces;"
                " unshare -r id 2>&1; echo rc=$?; unshare -U true 2>&1; echo rc2=$?;"
                " unshare -m true 2>&1; echo rc3=$?; unshare -n true 2>&1; echo rc4=$?", timeout=20)
    lines = r.stdout.splitlines()
    assert lines[0] == "0" and lines[1] == "0", r
    k = kv(r.stdout)
    for rc in ("rc", "rc2", "rc3", "rc4"):
        assert k.get(rc) not in (None, "0"), (rc, r)
    assert "uid=0" not in r.stdout, r


@pytest.mark.skipif(not shutil.which("strace"), reason="NO STRACE: the sandbox's own lookups are not traced")
def test_sandbox_sysctls_go_through_its_own_proc(brig, tmp_path):
    """pid 1 writes its sysctls (max_user_namespaces, the IPC limits)
    through the sandbox's own proc, never by a name in the host's
    /proc/sys: a lookup there from the sandbox's user namespace leaves the
    host's dentry cache an entry of that namespace's, and every later
    lookup of the name on the host walks them while they last. Only brig
    itself, in the host's namespaces, opens the host's /proc/sys."""
    trace = tmp_path / "trace"
    cp = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace),
                         *brig.cmd("run", "--memory", "512m", "--", "true")],
                        # LeakSanitizer cannot run under ptrace: an ASan build would fail its exit
                        cwd=str(brig.workspace), env=brig.env({"ASAN_OPTIONS": "detect_leaks=0"}),
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp
    lines = trace.read_text().splitlines()
    brig_pid = lines[0].split()[0]
    sysctls = [line for line in lines if '"/proc/sys/' in line]
    assert any(line.split()[0] == brig_pid for line in sysctls), lines  # the trace sees the host side's own
    assert all(line.split()[0] == brig_pid for line in sysctls), sysctls
    # the IPC limits are written where uid 0 of the sandbox is mapped to its builder: as root
    wanted = ["sys/user/max_user_namespaces"] + (["sys/kernel/shmmax"] if brig.mode == "root" else [])
    for name in wanted:
        opened = [line for line in lines if f'"{name}", O_WRONLY' in line and "= -1" not in line]
        assert len(opened) == 1, (name, lines)


def test_no_chroot_mount_hostname_reboot(brig):
    r, k = probe(brig, "chroot")
    assert k.get("chroot") == "EPERM", r
    r, k = probe(brig, "mount")
    for key in ("mount_tmpfs", "remount_root_rw", "bind_root", "umount_proc", "mount_proc", "pivot_root",
                "fsopen_tmpfs", "open_tree_clone"):
        assert k.get(key) == "EPERM", (key, r)
    r, k = probe(brig, "sethostname")
    assert k.get("sethostname") == "EPERM" and k.get("setdomainname") == "EPERM", r
    # EINVAL would mean CAP_SYS_BOOT in the sandbox's pid namespace.
    r, k = probe(brig, "reboot")
    assert k.get("reboot_cad_off") == "EPERM", r


def test_init_is_not_traceable_nor_readable(brig):
    r, k = probe(brig, "ptrace", 1)
    for key in ("ptrace_attach_1", "ptrace_seize_1", "process_vm_readv_1"):
        assert k.get(key) == "EPERM", (key, r)
    r, k = probe(brig, "procopen", 1)
    # pid 1 holds the caller's environment and brig's descriptors.
    for key in ("open_environ", "open_mem", "readlink_exe"):
        assert k.get(key) == "EACCES", (key, r)
    r = brig.sh("ls /proc/1/fd 2>&1; ls /proc/1/map_files 2>&1; cat /proc/1/environ 2>&1 | head -c 100; echo", timeout=20)
    assert "Permission denied" in r.stdout, r
    assert "PATH=" not in r.stdout and "HOME=" not in r.stdout, r


def test_sudo_su_do_not_give_root(brig):
    r = brig.sh("sudo -n id -u </dev/null 2>/dev/null; su -c 'id -u' root </dev/null 2>/dev/null; "
                "newgrp root </dev/null 2>/dev/null; echo END", timeout=20)
    assert "END" in r.stdout, r
    assert "0" not in r.stdout.split(), r


def test_report_not_written_through_planted_symlink(brig):
    """The report path is in the workspace the command controls: the
    command replaces it with a symlink to a file only the caller may
    write, and brig must not write through it."""
    secret = brig.base / "private"
    secret.mkdir()
    brig.chown(secret)
    secret.chmod(0o700)
    victim = secret / "victim"
    content = marker("victim") + "\n"
    victim.write_text(content)
    brig.chown(victim)
    rep = brig.workspace / "report.json"
    r = brig.run("run", "--json-report", str(rep), "--", "sh", "-c", f"ln -sf {victim} report.json", timeout=20)
    assert r.returncode in (0, 125), r
    assert victim.read_text() == content, "brig wrote its report through the sandbox's symlink"
