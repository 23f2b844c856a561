"""The sandbox's mount table after issue 19 made it with fewer system calls
(rows 342-345): the masks are copies of one mask of each kind, the device
nodes get their flags in one recursive call, a mount point's directories
are opened with O_DIRECTORY instead of checked by fstat, and a tmpfs is
given its owner only when that differs from the builder's. Each test looks
from the host: the sandbox's own mount table and files are read through
/proc/PID of its command while it waits."""
import contextlib
import os
import subprocess

from fs_helpers import WRITE_REFUSED, assert_refused, assert_worked, field, probe_run
from proc_helpers import marker, pids_with, wait_until
from test_escape import attack

# The device nodes brig binds into its /dev (mounts.c dev_nodes).
DEV_NODES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"]
# The host's built-in secrets that are masked when they exist (plan.c's deny list, a part).
HOST_FILE_MASKS = ["/etc/shadow", "/etc/gshadow"]
HOST_DIR_MASKS = ["/etc/ssl/private", "/proc/acpi"]


@contextlib.contextmanager
def held(brig, *brig_args):
    """A sandbox whose command waits on its stdin; yields the host pid of
    that command (in the sandbox's mount namespace, not ours)."""
    mark = marker("held")
    p = subprocess.Popen(brig.cmd("run", *brig_args, "--", "sh", "-c", f"echo ready; read x; : {mark}"),
                         cwd=str(brig.workspace), env=brig.env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "ready", f"the sandbox did not start: {line!r} {p.stderr.read() if p.poll() is not None else ''}"
        ours = os.readlink("/proc/self/ns/mnt")

        def command():
            for pid in pids_with(mark):
                try:
                    if os.readlink(f"/proc/{pid}/ns/mnt") != ours:
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            if f.read().startswith(b"sh\0"):
                                return pid
                except OSError:
                    pass
            return None
        assert wait_until(lambda: command() is not None, 5), "the sandbox's command is not on the host"
        yield command()
    finally:
        try:
            p.stdin.write("\n")
            p.stdin.close()
        except OSError:
            pass
        p.wait(timeout=30)


def mount_table(pid):
    """{mount point: (per-mount options, filesystem type, root in its fs)}, the last mount on each point."""
    table = {}
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            parts = left.split()
            table[parts[4]] = (set(parts[5].split(",")), right.split()[0], parts[3])
    return table


@attack("mount-flags-in-one-step", "the device nodes' nosuid and noexec set by one recursive mount_setattr over /dev "
        "(not per node), the masks copies of one: the host reads the sandbox's mount table and the command writes "
        "a program into /dev/shm and runs it, writes /dev, /proc/sys and the root",
        "nosuid on every mount; nodev on all but the device nodes, /dev and devpts; noexec on /dev, its nodes, "
        "/dev/shm, /proc and every mask; read-only system binds, root, /dev, /proc's knobs and masks")
def test_every_mount_has_its_flags(brig):
    with held(brig) as pid:
        table = mount_table(pid)
    assert len(table) >= 30, f"the sandbox's mount table is short: {sorted(table)}"
    for point, (opts, fstype, _) in table.items():
        assert "nosuid" in opts, f"{point} is mounted without nosuid: {sorted(opts)}"
        # /dev itself (brig's read-only tmpfs, where nothing can be made)
        # is not nodev either, as before issue 19.
        device = point in DEV_NODES or point in ("/dev", "/dev/pts")
        assert ("nodev" in opts) != device, f"{point}: nodev is {'set' if device else 'missing'}: {sorted(opts)}"
        if point == "/dev" or point.startswith("/dev/") or point == "/proc" or point.startswith("/proc/"):
            assert "noexec" in opts, f"{point} is mounted without noexec: {sorted(opts)}"
    for point in ["/", "/usr", "/etc", "/dev", "/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"]:
        assert point in table and "ro" in table[point][0], f"{point} is not read-only: {table.get(point)}"
    for node in DEV_NODES:
        assert node in table and "rw" in table[node][0] and table[node][1] == "devtmpfs", \
            f"{node} is not the host's node, usable: {table.get(node)}"
    masks = [p for p in HOST_FILE_MASKS + HOST_DIR_MASKS if os.path.exists(p)]
    assert masks, "none of the host's masked paths exists: the masks were not checked"
    for point in masks:
        assert point in table, f"{point} is not masked"
        opts, fstype, _ = table[point]
        assert fstype == "tmpfs" and {"ro", "noexec", "nodev"} <= opts, f"{point}'s mask: {table[point]}"
    # From inside: what the flags refuse.
    res, out = probe_run(brig, [["write", "/dev/shm/prog", "#!/bin/sh\necho ran\n"], ["chmod", "/dev/shm/prog", "755"],
                                ["write", "/dev/brig-new"], ["write", "/proc/sys/kernel/hostname", "x"],
                                ["write", "/brig-new"]])
    assert_worked(out, "write /dev/shm/prog")
    assert_worked(out, "chmod /dev/shm/prog")
    for key in ("write /dev/brig-new", "write /proc/sys/kernel/hostname", "write /brig-new"):
        assert_refused(out, key)
    r = brig.sh("printf '#!/bin/sh\\necho ran\\n' > /dev/shm/p; chmod 755 /dev/shm/p; /dev/shm/p; echo rc=$?")
    assert "ran" not in r.stdout.replace("rc=", "") and "rc=126" in r.stdout, \
        f"ATTACK WORKED: a program in /dev/shm ran: {r}"


@attack("mask-copy-writable", "every mask after the first of its kind is a copy of it (open_tree of the attached "
        "mask): the command writes, creates, chmods and truncates through three denied directories, three denied "
        "files and the host's masked ones, then reads every mask again",
        "each copy keeps the first mask's read-only, nosuid, nodev and noexec (statfs ro on every mask); "
        "writes refused; every masked directory lists empty and every masked file reads empty inside; "
        "the denied files and directories on the host unchanged")
def test_mask_copies_stay_read_only_and_empty(brig):
    ws = brig.workspace
    dirs, files, contents = [], [], {}
    for i in range(3):
        d = ws / f"secret-dir{i}"
        d.mkdir()
        (d / "key").write_text(f"dir-secret-{i}")
        f = ws / f"secret-file{i}"
        f.write_text(f"file-secret-{i}")
        brig.chown(d)
        brig.chown(d / "key")
        brig.chown(f)
        dirs.append(str(d))
        files.append(str(f))
        contents[str(d / "key")] = f"dir-secret-{i}"
        contents[str(f)] = f"file-secret-{i}"
    host_dirs = [p for p in HOST_DIR_MASKS if os.path.isdir(p)]
    host_files = [p for p in HOST_FILE_MASKS if os.path.isfile(p)]
    all_dirs, all_files = dirs + host_dirs, files + host_files
    lines = []
    for d in all_dirs:
        lines += [["write", f"{d}/planted", "x"], ["mkdir", f"{d}/planted.d"], ["chmod", d, "777"], ["statfs", d]]
    for f in all_files:
        lines += [["chmod", f, "666"], ["overwrite", f, "planted"], ["truncate", f], ["statfs", f]]
    deny = [a for p in dirs + files for a in ("--deny", p)]
    res, out = probe_run(brig, lines, *deny)
    for d in all_dirs:
        for key in (f"write {d}/planted", f"mkdir {d}/planted.d", f"chmod {d}"):
            assert_refused(out, key)
        assert field(assert_worked(out, f"statfs {d}"), "flags").startswith("ro,"), f"{d}'s mask is not read-only"
    for f in all_files:
        for key in (f"chmod {f}", f"overwrite {f}", f"truncate {f}"):
            assert_refused(out, key)
        assert field(assert_worked(out, f"statfs {f}"), "flags").startswith("ro,"), f"{f}'s mask is not read-only"
    # After the attempts, in another sandbox with the same masks and in this
    # one: every mask is empty (a write through one copy would show in all).
    script = "; ".join([f"echo \"D {d} $(ls -A {d} | tr '\\n' ' ')\"" for d in all_dirs] +
                       [f"echo \"F {f} $(wc -c < {f})\"" for f in all_files])
    r = brig.sh(script, *deny)
    assert r.returncode == 0, r
    for line in r.stdout.splitlines():
        kind, path, rest = (line.split(" ", 2) + [""])[:3]
        if kind == "D":
            assert rest.strip() == "", f"ATTACK WORKED: the masked directory {path} shows {rest!r}"
        elif kind == "F":
            assert rest.strip() == "0", f"ATTACK WORKED: the masked file {path} holds {rest!r} bytes"
    assert len(r.stdout.splitlines()) == len(all_dirs) + len(all_files), r
    # The host side: the secrets as they were, nothing planted.
    for path, text in contents.items():
        assert open(path).read() == text, f"ATTACK WORKED: {path} changed on the host"
    for d in dirs:
        assert os.listdir(d) == ["key"], f"ATTACK WORKED: {d} on the host holds {os.listdir(d)}"
    for d in host_dirs:
        assert "planted" not in os.listdir(d) and "planted.d" not in os.listdir(d), f"ATTACK WORKED: {d}"


@attack("mount-point-not-a-dir", "grants whose mount points in the workspace are a symlink to a host directory (in "
        "the middle and at the end of the path), a symlink to a host file for a file grant, and a regular file "
        "where a directory is needed; brig opens a directory point with O_DIRECTORY|O_NOFOLLOW and no fstat",
        "RESOLVE_NO_SYMLINKS on every component; a directory's point opened O_DIRECTORY (ENOTDIR for a link: "
        "\"is a symlink or not a directory\"), a file's point checked by fstat; exit 125 naming the point, the "
        "command never runs, nothing created or mounted outside")
def test_mount_points_through_links_and_files_are_refused(brig):
    outside = brig.base / "outside-mp"
    outside.mkdir()
    outside.chmod(0o777)
    (outside / "f").write_text("outside")
    src = brig.base / "mp-src"
    src.mkdir()
    (src / "flag").write_text("src")
    srcfile = brig.base / "mp-src-file"
    srcfile.write_text("srcfile")
    ws = brig.workspace
    (ws / "lnk").symlink_to(outside)
    (ws / "filelnk").symlink_to(outside / "f")
    (ws / "plain").write_text("plain")
    for p in (src, src / "flag", srcfile, ws / "plain"):
        brig.chown(p)
    cases = [(f"{src}:{ws}/lnk/x", "symlink"), (f"{src}:{ws}/lnk", "symlink"),
             (f"{srcfile}:{ws}/filelnk", "symlink"), (f"{src}:{ws}/plain/x", "Not a directory")]
    for grant, words in cases:
        flag = ws / "ran"
        r = brig.sh(f"touch {flag}", "--ro-bind", grant)
        assert r.returncode == 125 and words in r.stderr and "mount point" in r.stderr, \
            f"--ro-bind {grant}: not refused as it should be: {r}"
        assert not flag.exists(), f"ATTACK WORKED: the command ran with --ro-bind {grant}"
        assert sorted(os.listdir(outside)) == ["f"] and (outside / "f").read_text() == "outside", \
            f"ATTACK WORKED: --ro-bind {grant} changed the host directory: {os.listdir(outside)}"
    # What must work: the same grant onto a real directory.
    (ws / "real").mkdir()
    brig.chown(ws / "real")
    r = brig.sh(f"cat {ws}/real/flag", "--ro-bind", f"{src}:{ws}/real")
    assert r.returncode == 0 and r.stdout == "src", r


@attack("tmpfs-owner-default", "brig names a tmpfs's owner only when it differs from the builder's own ids: the "
        "command chmods and writes the root, /dev, /run/brig, /tmp and /dev/shm, and the host reads their owners "
        "and modes through /proc/PID/root",
        "the root, /dev and /run/brig belong to brig's setup user (host root as root, the caller rootless), "
        "read-only; /tmp and /dev/shm 1777 of the same owner; $HOME the sandbox user's; modes unchanged")
def test_tmpfs_owners_seen_from_the_host(brig):
    points = ["", "dev", "run/brig", "tmp", "dev/shm"]
    res, out = probe_run(brig, [["chmod", "/", "777"], ["chmod", "/dev", "777"], ["chmod", "/run/brig", "777"],
                                ["write", "/run/brig/planted"]])
    for key in ("chmod /", "chmod /dev", "chmod /run/brig", "write /run/brig/planted"):
        assert_refused(out, key, WRITE_REFUSED)
    with held(brig) as pid:
        with open(f"/proc/{pid}/status") as f:
            uid = int(next(l for l in f if l.startswith("Uid:")).split()[1])
        st = {p: os.stat(f"/proc/{pid}/root/{p}") for p in points}
        home = os.stat(f"/proc/{pid}/root/{brig.home}")
    setup = 0 if brig.mode == "root" else brig.uid
    for p in points:
        assert st[p].st_uid == setup, f"/{p} belongs to host uid {st[p].st_uid}, not brig's setup user {setup}"
    if brig.mode == "root":
        assert uid != 0, "the command runs as host root"
    for p, mode in (("", 0o755), ("dev", 0o755), ("run/brig", 0o755), ("tmp", 0o1777), ("dev/shm", 0o1777)):
        assert st[p].st_mode & 0o7777 == mode, f"/{p} has mode {oct(st[p].st_mode & 0o7777)}, not {oct(mode)}"
    assert home.st_uid == uid, f"$HOME belongs to host uid {home.st_uid}, not the command's {uid}"


@attack("root-tmpfs-through-its-binds", "/dev and every directory mask are mounts of brig's root tmpfs since "
        "issue 19 (its /dev directory bound over itself, the empty directory under /proc), not tmpfs of their "
        "own: the command writes, makes directories, symlinks and device nodes, renames, links, chmods, chowns "
        "and remounts read-write through /, /dev and each masked directory, to plant something that would show "
        "in every mask of a secret at once or fill the root",
        "each is refused (all read-only mounts, no mount call); from the host, through /proc/PID/root: every "
        "masked directory empty, /dev holds brig's entries only, / brig's mount points only, modes unchanged, "
        "and /, /dev and the masks are one filesystem (the layout this row is about)")
def test_root_tmpfs_binds_stay_read_only_and_empty(brig):
    dirs = [p for p in HOST_DIR_MASKS if os.path.isdir(p)]
    lines = []
    for d in ["/", "/dev"] + dirs:
        base = d.rstrip("/")
        lines += [["write", f"{base}/planted", "x"], ["mkdir", f"{base}/planted.d"],
                  ["symlink", "/etc/shadow", f"{base}/planted.l"], ["mknod", f"{base}/planted.n"],
                  ["chmod", d, "777"], ["chown", d, "0", "0"], ["remount-rw", d]]
    lines += [["rename", "/dev/null", "/dev/planted.r"], ["link", "/dev/null", "/dev/planted.h"],
              ["unlink", "/dev/stdin"]]
    res, out = probe_run(brig, lines)
    for key in out:
        assert_refused(out, key, WRITE_REFUSED | {"EXDEV"})
    with held(brig) as pid:
        root = f"/proc/{pid}/root"
        listed = {d: sorted(os.listdir(root + d)) for d in ["/", "/dev"] + dirs}
        st = {d: os.stat(root + d) for d in ["/", "/dev"] + dirs}
    for d in dirs:
        assert listed[d] == [], f"the mask of {d} is not empty: {listed[d]}"
        assert st[d].st_mode & 0o7777 == 0o555, f"the mask of {d} has mode {oct(st[d].st_mode)}"
    planted = [f"{d} {n}" for d in listed for n in listed[d] if n.startswith("planted")]
    assert not planted, f"ATTACK WORKED: {planted}"
    want_dev = {n.split("/")[-1] for n in DEV_NODES} | {"pts", "shm", "ptmx", "fd", "stdin", "stdout", "stderr",
                                                       "core"}
    assert set(listed["/dev"]) == want_dev, f"/dev holds {sorted(set(listed['/dev']) ^ want_dev)}"
    assert st["/dev"].st_mode & 0o7777 == 0o755 and st["/"].st_mode & 0o7777 == 0o755
    assert len({s.st_dev for s in st.values()}) == 1, "/, /dev and the masks are not one tmpfs"
