"""Filesystem attacks from inside the sandbox.

Every test really attempts a forbidden thing with tests/escape/probe_fs
(or the shell) and fails if it works; each also checks something that must
work, so a sandbox that refuses everything cannot pass by accident.
"""
import os
import pathlib
import shlex

import pytest

from conftest import IS_ROOT, NOBODY, Brig, mountinfo
from fs_helpers import (WRITE_REFUSED, assert_refused, assert_worked, field, marker, probe_run,
                        run_cmd, sh)

TMPFS_MAGIC = "0x1021994"
PROC_MAGIC = "0x9fa0"
SYSFS_MAGIC = "0x62656572"

# ---- system directories and the root ------------------------------------


SYSTEM_DIRS = ["/", "/usr", "/etc", "/usr/bin", "/bin", "/sbin", "/usr/lib", "/opt"]


def test_system_dirs_are_read_only(brig):
    name = marker("sysdir")
    lines = []
    for d in SYSTEM_DIRS:
        base = d.rstrip("/")
        lines += [["write", f"{base}/{name}"], ["mkdir", f"{base}/{name}.d"],
                  ["symlink", f"{base}/{name}.target", f"{base}/{name}.l"], ["statfs", d]]
    lines += [["mknod", f"/etc/{name}.n"], ["rename", "/etc/hostname", f"/etc/{name}.r"],
              ["unlink", "/etc/hostname"], ["chmod", "/usr/bin", "777"], ["remount-rw", "/usr"],
              ["remount-rw", "/"], ["umount", "/usr"], ["opath-reopen", "/etc/passwd", "w"],
              ["read", "/etc/passwd", "16"]]
    try:
        res, out = probe_run(brig, lines)
        for d in SYSTEM_DIRS:
            base = d.rstrip("/")
            assert_refused(out, f"write {base}/{name}")
            assert_refused(out, f"mkdir {base}/{name}.d")
            assert_refused(out, f"symlink {base}/{name}.target")
            flags = field(assert_worked(out, f"statfs {d}"), "flags")
            assert flags.startswith("ro,nosuid,nodev"), f"{d} is not mounted ro,nosuid,nodev inside: {flags}"
        assert_refused(out, f"mknod /etc/{name}.n")
        assert_refused(out, "rename /etc/hostname")
        assert_refused(out, "unlink /etc/hostname")
        assert_refused(out, "chmod /usr/bin")
        for key in ("remount-rw /usr", "remount-rw /", "umount /usr"):
            assert_refused(out, key, {"EPERM"})
        assert_refused(out, "opath-reopen /etc/passwd")
        assert field(assert_worked(out, "read /etc/passwd"), "data").startswith("root:")
    finally:
        leaked = [p for d in SYSTEM_DIRS for p in pathlib.Path(d).glob(name + "*")]
        for p in leaked:
            if p.is_dir() and not p.is_symlink():
                p.rmdir()
            else:
                p.unlink()
        assert not leaked, f"ATTACK WORKED: created on the host: {leaked}"
    assert pathlib.Path("/etc/hostname").exists()


def test_outside_workspace_is_invisible(brig):
    """A host dir that is not granted, and a file next to the workspace, are
    not there inside, by name or by climbing out of the workspace."""
    m = marker("outside")
    sibling = brig.base / "sibling.txt"
    sibling.write_text(m)
    sibling.chmod(0o644)
    other = brig.base / "notgranted"
    other.mkdir()
    (other / "f").write_text(m)
    (other / "f").chmod(0o644)
    hostdir = pathlib.Path("/var/tmp") / marker("outside-dir")
    hostdir.mkdir()
    try:
        (hostdir / "f").write_text(m)
        (hostdir / "f").chmod(0o644)
        hostdir.chmod(0o755)
        ws = brig.workspace
        res, out = probe_run(brig, [
            ["read", str(sibling)], ["read", str(other / "f")], ["read", str(hostdir / "f")],
            ["stat", str(other)], ["read", f"{ws}/../sibling.txt"], ["list", f"{ws}/.."],
            ["dotdot", str(ws), "1"], ["dotdot", ".", "40"],
            ["read", f"/proc/1/root{sibling}"], ["read", f"/proc/self/cwd/../sibling.txt"],
            ["list", "/proc/self/root/"], ["read", f"/proc/self/root{sibling}"], ["list", "/var"],
            ["write", str(brig.base / "planted")], ["mkdir", str(brig.base / "planted.d")],
            ["handle", str(ws)], ["chroot-escape", "/tmp"],
            ["write", f"{ws}/inside-ok"],
        ])
        for key in (f"read {sibling}", f"read {other / 'f'}", f"read {hostdir / 'f'}", f"stat {other}",
                    f"read {ws}/../sibling.txt", f"read /proc/1/root{sibling}", f"read /proc/self/root{sibling}",
                    "read /proc/self/cwd/../sibling.txt", "list /var"):
            assert_refused(out, key, {"ENOENT", "EACCES"} if "/proc/" in key else {"ENOENT"})
        # only the mount points brig made: the workspace and the empty home tmpfs
        granted = {ws.name, brig.home.name}
        assert set(field(assert_worked(out, f"list {ws}/.."), "entries").split(",")) <= granted
        assert set(field(assert_worked(out, f"dotdot {ws}"), "entries").split(",")) <= granted
        top = field(assert_worked(out, "dotdot ."), "entries").split(",")
        assert "proc" in top and "usr" in top and "var" not in top and "home" not in top, top
        assert field(assert_worked(out, "list /proc/self/root/"), "entries").split(",") == top
        # The workspace's parent exists inside only as mount-point directories
        # brig made (in the sandbox's own /tmp tmpfs when the workspace lives
        # under /tmp): writing there may work, reaching the host must not.
        assert_refused(out, f"handle {ws}", {"EPERM"})
        assert_refused(out, "chroot-escape /tmp", {"EPERM"})
        assert_worked(out, f"write {ws}/inside-ok")
        assert f"data={m}" not in res.stdout
        assert not (brig.base / "planted").exists() and not (brig.base / "planted.d").exists()
    finally:
        for f in hostdir.iterdir():
            f.unlink()
        hostdir.rmdir()


def test_no_escape_through_cross_mount_links(brig):
    """Hard links and renames cannot move files across the sandbox's mounts."""
    ws = brig.workspace
    (ws / "mine").write_text("x")
    brig.chown(ws / "mine")
    res, out = probe_run(brig, [
        ["link", "/etc/passwd", f"{ws}/pw"], ["link", "/usr/bin/sh", f"{ws}/sh"],
        ["rename", f"{ws}/mine", "/tmp/mine"], ["rename", f"{ws}/mine", "/usr/mine"],
        ["link", f"{ws}/mine", "/tmp/mine2"], ["mknod", f"{ws}/mem"], ["mknod", "/tmp/mem"],
        ["chown", f"{ws}/mine", "0", "0"], ["mount-tmpfs", str(ws)], ["bind", "/", f"{ws}"],
        ["link", f"{ws}/mine", f"{ws}/mine.hard"],
    ])
    assert_refused(out, f"link /etc/passwd", {"EXDEV", "EPERM"})
    assert_refused(out, f"link /usr/bin/sh", {"EXDEV", "EPERM"})
    assert_refused(out, f"rename {ws}/mine", {"EXDEV", "EROFS"})
    assert_refused(out, f"mknod {ws}/mem", {"EPERM"})
    assert_refused(out, "mknod /tmp/mem", {"EPERM"})
    assert_refused(out, f"chown {ws}/mine", {"EPERM", "EINVAL", "EOVERFLOW"})  # uid 0 unmapped
    assert_refused(out, f"mount-tmpfs {ws}", {"EPERM"})
    assert_refused(out, "bind /", {"EPERM"})
    assert_worked(out, f"link {ws}/mine")  # last link line: same mount works
    assert not (ws / "pw").exists() and not (ws / "sh").exists() and not (ws / "mem").exists()
    assert (ws / "mine.hard").exists()


# ---- the workspace --------------------------------------------------------


def test_workspace_files_reach_the_host_with_the_right_owner(brig):
    m = marker("ws")
    res = sh(brig, f"id -u; echo {m} > created.txt && mkdir sub && echo {m} > sub/f && pwd")
    assert res.returncode == 0, res
    uid_inside, pwd = res.stdout.split()
    assert pwd == str(brig.workspace)
    assert uid_inside == str(NOBODY)
    f = brig.workspace / "created.txt"
    assert f.read_text().strip() == m
    assert (brig.workspace / "sub" / "f").read_text().strip() == m
    expected = 0 if brig.mode == "root" else NOBODY
    for p in (f, brig.workspace / "sub", brig.workspace / "sub" / "f"):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (expected, expected), f"{p} owned by {st.st_uid}:{st.st_gid}"


def test_root_runs_as_the_workspace_owner(bindir, scratch):
    if not IS_ROOT:
        pytest.skip("ROOT-ONLY CHECK NOT RUN: needs the suite to run as root")
    b = Brig(bindir, "root", scratch)
    os.chown(b.workspace, 4242, 4243)
    res = sh(b, "id -u; id -g; touch made && stat -c %u:%g made; touch /etc/x 2>/dev/null || echo refused")
    assert res.returncode == 0, res
    assert res.stdout.split() == ["4242", "4243", "4242:4243", "refused"], res
    st = (b.workspace / "made").stat()
    assert (st.st_uid, st.st_gid) == (4242, 4243)


def test_ro_bind_is_read_only_and_bind_is_writable(brig):
    m = marker("bind")
    ro = brig.base / "ro"
    rw = brig.base / "rw"
    for d in (ro, rw):
        d.mkdir()
        (d / "f").write_text(m)
        (d / "f").chmod(0o666)
        (d / "sub").mkdir()
        d.chmod(0o777)
        (d / "sub").chmod(0o777)
    lines = []
    for op in (["write", f"{ro}/new"], ["overwrite", f"{ro}/f", "pwned"], ["unlink", f"{ro}/f"],
               ["rename", f"{ro}/f", f"{ro}/g"], ["mkdir", f"{ro}/d"], ["rmdir", f"{ro}/sub"],
               ["truncate", f"{ro}/f"], ["chmod", f"{ro}/f", "777"], ["opath-reopen", f"{ro}/f", "w"],
               ["symlink", "/x", f"{ro}/l"], ["remount-rw", str(ro)], ["umount", str(ro)],
               ["statfs", str(ro)], ["read", f"{ro}/f"],
               ["statfs", "/mnt/rw"], ["write", "/mnt/rw/new", m], ["overwrite", "/mnt/rw/f", "changed"],
               ["mkdir", "/mnt/rw/d"], ["rmdir", "/mnt/rw/sub"]):
        lines.append(op)
    res, out = probe_run(brig, lines, "--ro-bind", ro, "--bind", f"{rw}:/mnt/rw")
    for key in (f"write {ro}/new", f"overwrite {ro}/f", f"unlink {ro}/f", f"rename {ro}/f",
                f"mkdir {ro}/d", f"rmdir {ro}/sub", f"truncate {ro}/f", f"chmod {ro}/f",
                f"opath-reopen {ro}/f", f"symlink /x"):
        assert_refused(out, key, {"EROFS"})
    assert_refused(out, f"remount-rw {ro}", {"EPERM"})
    assert_refused(out, f"umount {ro}", {"EPERM"})
    assert field(assert_worked(out, f"statfs {ro}"), "flags").startswith("ro,nosuid,nodev")
    assert field(assert_worked(out, f"read {ro}/f"), "data") == m
    assert field(assert_worked(out, "statfs /mnt/rw"), "flags").startswith("rw,nosuid,nodev")
    for key in ("write /mnt/rw/new", "overwrite /mnt/rw/f", "mkdir /mnt/rw/d", "rmdir /mnt/rw/sub"):
        assert_worked(out, key)
    assert (ro / "f").read_text() == m and sorted(p.name for p in ro.iterdir()) == ["f", "sub"]
    assert (rw / "new").read_text() == m
    assert (rw / "f").read_text().startswith("changed")
    assert (rw / "d").is_dir() and not (rw / "sub").exists()


def test_ro_bind_covers_submounts(brig):
    """A host mount below a --ro-bind source is read-only inside too."""
    if not IS_ROOT:
        pytest.skip("SUBMOUNT CHECK NOT RUN: mounting a host tmpfs needs root")
    src = brig.base / "withsub"
    (src / "inner").mkdir(parents=True)
    src.chmod(0o777)
    probe = brig.program("probe_fs")
    script = shlex.join([probe, "write", f"{src}/inner/x"]) + "; " + shlex.join([probe, "statfs", f"{src}/inner"])
    setup = f"mount -t tmpfs -o mode=1777 none {shlex.quote(str(src / 'inner'))}"
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", setup + ' && exec "$@"', "sh",
           *brig.cmd("run", "--ro-bind", probe, "--ro-bind", src, "--", "sh", "-c", script)]
    cp = run_cmd(cmd, cwd=brig.workspace, env=brig.env())
    assert f"write {src}/inner/x: fail EROFS" in cp.stdout, (cp.stdout, cp.stderr)
    assert f"statfs {src}/inner: ok flags=ro" in cp.stdout, (cp.stdout, cp.stderr)


# ---- /tmp, $HOME and --tmpfs ----------------------------------------------


def test_tmp_and_home_are_empty_private_tmpfs(brig):
    m = marker("home")
    for name in ("planted.txt", ".bashrc", ".profile"):
        (brig.home / name).write_text(m)
        (brig.home / name).chmod(0o644)
    hostfile = pathlib.Path("/tmp") / f"{m}.txt"
    hostfile.write_text(m)
    hostfile.chmod(0o644)
    try:
        res, out = probe_run(brig, [
            ["list", str(brig.home)], ["read", f"{brig.home}/planted.txt"], ["statfs", str(brig.home)],
            ["stat", str(brig.home)], ["read", str(hostfile)], ["statfs", "/tmp"], ["stat", "/tmp"],
            ["write", f"{brig.home}/new", m], ["write", f"/tmp/new-{m}", m],
        ])
        assert field(assert_worked(out, f"list {brig.home}"), "n") == "0"
        assert_refused(out, f"read {brig.home}/planted.txt", {"ENOENT"})
        assert_refused(out, f"read {hostfile}", {"ENOENT"})
        for d in (str(brig.home), "/tmp"):
            detail = assert_worked(out, f"statfs {d}")
            assert field(detail, "magic") == TMPFS_MAGIC and field(detail, "flags").startswith("rw,nosuid,nodev"), detail
        st = assert_worked(out, f"stat {brig.home}")
        assert field(st, "uid") == str(NOBODY) and field(st, "mode") == "0700", st
        assert field(assert_worked(out, "stat /tmp"), "mode") == "1777"
        assert_worked(out, f"write {brig.home}/new")
        assert_worked(out, f"write /tmp/new-{m}")
    finally:
        hostfile.unlink()
    assert not (brig.home / "new").exists(), "sandbox write reached the real HOME"
    assert not pathlib.Path(f"/tmp/new-{m}").exists(), "sandbox write reached the host /tmp"
    assert (brig.home / "planted.txt").read_text() == m


def test_tmp_home_and_tmpfs_sizes_are_enforced(brig):
    mb = 1 << 20
    res, out = probe_run(brig, [
        ["fill", "/tmp/big", str(3 * mb)], ["fill", f"{brig.home}/big", str(3 * mb)],
        ["fill", "/mnt/t/big", str(3 * mb)], ["statfs", "/mnt/t"], ["list", "/mnt/t"],
        ["fill", "/mnt/t2/small", str(mb // 2)],
    ], "--tmp-size", "1M", "--home-size", "1M", "--tmpfs", "/mnt/t:1M", "--tmpfs", "/mnt/t2:1M")
    for key in ("fill /tmp/big", f"fill {brig.home}/big", "fill /mnt/t/big"):
        assert_refused(out, key, {"ENOSPC"})
        assert int(field(out[key][1], "written")) <= mb
    detail = assert_worked(out, "statfs /mnt/t")
    assert field(detail, "magic") == TMPFS_MAGIC and field(detail, "flags").startswith("rw")
    assert int(field(detail, "blocks")) * int(field(detail, "bsize")) <= mb
    assert field(assert_worked(out, "list /mnt/t"), "n") in ("0", "1")
    assert_worked(out, "fill /mnt/t2/small")


# ---- /proc, /sys, /dev ----------------------------------------------------


def test_proc_shows_only_sandbox_processes(brig):
    host_pid = os.getpid()
    res = sh(brig, "ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; echo $$;"
                   f" if test -e /proc/{host_pid}/status; then head -1 /proc/{host_pid}/status; else echo absent; fi")
    assert res.returncode == 0, res
    pids_line, me, hostpid = res.stdout.splitlines()[:3]
    pids = [int(p) for p in pids_line.split()]
    assert pids and max(pids) < 50 and len(pids) <= 6, f"host processes visible in /proc: {pids}"
    assert int(me) in pids and int(me) < 50
    if host_pid not in pids:
        assert hostpid == "absent", f"the test's own process is visible inside: {hostpid}"


MASKED_PROC = ["kcore", "keys", "timer_list", "sched_debug", "latency_stats", "timer_stats", "interrupts"]
MASKED_PROC_DIRS = ["acpi", "scsi", "asound"]


def test_proc_masked_and_read_only_paths(brig):
    present = [n for n in MASKED_PROC if os.path.exists(f"/proc/{n}")]
    present_dirs = [n for n in MASKED_PROC_DIRS if os.path.isdir(f"/proc/{n}")]
    if not present:
        pytest.fail(f"none of {MASKED_PROC} exists on this host: the masking cannot be tested")
    lines = [["read", f"/proc/{n}", "4096"] for n in present]
    lines += [["list", f"/proc/{n}"] for n in present_dirs]
    lines += [["statfs", "/proc"], ["statfs", "/proc/sys"], ["statfs", "/proc/bus"], ["statfs", "/proc/irq"],
              ["statfs", "/proc/fs"],
              ["overwrite", "/proc/sys/kernel/hostname", "pwned"], ["overwrite", "/proc/sys/vm/drop_caches", "3"],
              ["overwrite", "/proc/sys/kernel/core_pattern", "|/tmp/x"],
              ["overwrite", "/proc/sysrq-trigger", "h"], ["umount", "/proc/sys"], ["umount", f"/proc/{present[0]}"],
              ["mount-tmpfs", "/proc/sys"], ["remount-rw", "/proc/sys"],
              ["opath-reopen", "/proc/sys/kernel/hostname", "w"], ["read", "/proc/self/status", "64"]]
    res, out = probe_run(brig, lines)
    for n in present:
        detail = out[f"read /proc/{n}"]
        assert not detail[0] or field(detail[1], "size") == "0", f"/proc/{n} is not masked: {detail}"
    for n in present_dirs:
        assert field(assert_worked(out, f"list /proc/{n}"), "n") == "0", f"/proc/{n} not masked"
    assert field(assert_worked(out, "statfs /proc"), "magic") == PROC_MAGIC
    for p in ("sys", "bus", "irq", "fs"):
        if os.path.exists(f"/proc/{p}"):
            assert field(assert_worked(out, f"statfs /proc/{p}"), "flags").startswith("ro"), p
    for key in ("overwrite /proc/sys/kernel/hostname", "overwrite /proc/sys/vm/drop_caches",
                "overwrite /proc/sys/kernel/core_pattern", "opath-reopen /proc/sys/kernel/hostname"):
        assert_refused(out, key)
    allowed = WRITE_REFUSED if os.path.exists("/proc/sysrq-trigger") else WRITE_REFUSED | {"ENOENT"}
    assert_refused(out, "overwrite /proc/sysrq-trigger", allowed)
    for key in ("umount /proc/sys", f"umount /proc/{present[0]}", "mount-tmpfs /proc/sys", "remount-rw /proc/sys"):
        assert_refused(out, key, {"EPERM"})
    assert field(assert_worked(out, "read /proc/self/status"), "data").startswith("Name:")
    assert open("/proc/sys/kernel/core_pattern").read().strip() != "|/tmp/x"


def test_sys_absent_by_default_and_read_only_with_flag(brig):
    res, out = probe_run(brig, [["stat", "/sys"], ["list", "/"]])
    assert_refused(out, "stat /sys", {"ENOENT"})
    assert "sys" not in field(assert_worked(out, "list /"), "entries").split(",")
    res, out = probe_run(brig, [
        ["statfs", "/sys"], ["list", "/sys/class/net"], ["overwrite", "/sys/kernel/uevent_helper", "/tmp/x"],
        ["mkdir", "/sys/fs/cgroup/brigprobe"], ["write", "/sys/brigprobe"], ["remount-rw", "/sys"],
        ["umount", "/sys"],
    ], "--sys")
    detail = assert_worked(out, "statfs /sys")
    assert field(detail, "magic") == SYSFS_MAGIC and field(detail, "flags").startswith("ro"), detail
    assert field(assert_worked(out, "list /sys/class/net"), "entries") == "lo", "host interfaces visible"
    for key in ("overwrite /sys/kernel/uevent_helper", "mkdir /sys/fs/cgroup/brigprobe", "write /sys/brigprobe"):
        assert_refused(out, key, WRITE_REFUSED | {"ENOENT"})
    assert_refused(out, "remount-rw /sys", {"EPERM"})
    assert_refused(out, "umount /sys", {"EPERM"})


DEV_EXPECTED = {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
                "fd", "stdin", "stdout", "stderr", "core"}


def test_dev_is_minimal(brig):
    res, out = probe_run(brig, [
        ["list", "/dev"], ["statfs", "/dev"], ["read", "/dev/mem"], ["read", "/dev/kmsg"], ["read", "/dev/sda"],
        ["read", "/dev/vda"], ["read", "/dev/port"], ["read", "/dev/kvm"], ["read", "/dev/core"],
        ["write", "/dev/brigprobe"], ["mknod", "/dev/mem2"], ["mknod", "/dev/shm/mem"],
        ["read", "/dev/zero", "8"], ["overwrite", "/dev/null", "x"], ["read", "/dev/urandom", "8"],
        ["mount-tmpfs", "/dev"], ["umount", "/dev/null"],
    ])
    entries = set(field(assert_worked(out, "list /dev"), "entries").split(","))
    assert entries == DEV_EXPECTED, f"unexpected /dev entries: {sorted(entries ^ DEV_EXPECTED)}"
    assert field(assert_worked(out, "statfs /dev"), "flags").startswith("ro")
    for n in ("mem", "kmsg", "sda", "vda", "port", "kvm"):
        assert_refused(out, f"read /dev/{n}", {"ENOENT"})
    # /dev/core points at /proc/kcore, which is absent or masked
    assert not out["read /dev/core"][0] or field(out["read /dev/core"][1], "size") == "0"
    assert_refused(out, "write /dev/brigprobe")
    assert_refused(out, "mknod /dev/mem2")
    assert_refused(out, "mknod /dev/shm/mem", {"EPERM"})
    assert_refused(out, "mount-tmpfs /dev", {"EPERM"})
    assert_refused(out, "umount /dev/null", {"EPERM"})
    assert field(assert_worked(out, "read /dev/zero"), "data") == "\\x00" * 8
    assert_worked(out, "overwrite /dev/null")
    assert field(assert_worked(out, "read /dev/urandom"), "size") == "8"


# ---- traces ---------------------------------------------------------------


@pytest.mark.whole_host  # the host's whole mount table, before and after
def test_no_mounts_left_on_the_host(brig):
    before = mountinfo()
    (brig.base / "src").mkdir()
    (brig.base / "src").chmod(0o777)
    runs = [
        sh(brig, "touch a; mount -t tmpfs none /tmp 2>/dev/null; true", "--ro-bind", brig.base / "src",
                "--tmpfs", "/mnt/x", "--sys"),
        sh(brig, "true", "--bind", f"{brig.base / 'src'}:/mnt/y", "--tmpfs", "/mnt/z:1M"),
        sh(brig, "true", "--ro-bind", brig.base / "does-not-exist"),
        sh(brig, "true", "--tmpfs", "/proc/x"),
        sh(brig, "sleep 30 & exit 3"),
    ]
    assert [r.returncode for r in runs] == [0, 0, 125, 125, 3], runs
    after = mountinfo()
    assert after == before, f"mounts changed: +{sorted(set(after) - set(before))} -{sorted(set(before) - set(after))}"


def test_rootless_start_has_no_map_race(bindir, scratch):
    """Rootless starts must not fail at random (regression: the child once
    turned non-dumpable before the parent wrote its uid/gid maps, so about
    one start in ten failed with 'open /proc/N/setgroups: Permission denied')."""
    b = Brig(bindir, "rootless", scratch)
    failures = []
    for _ in range(60):
        cp = b.run("run", "--", "true")
        if cp.returncode != 0:
            failures.append((cp.returncode, cp.stderr.strip()))
    assert not failures, f"{len(failures)}/60 rootless starts failed, e.g. {failures[:3]}"
