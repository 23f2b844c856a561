"""Host paths brig writes or removes that a sandbox can reach (issue 13,
classes 2 and 8): the output files the user names (--json-report, --audit,
brig exec --json-report), which may lie in a workspace whose directories
the sandbox can swap for symlinks, and the overlay layer a sandbox fills
with a tree as deep and wide as it likes, which brig rm must still remove.
Each test really attempts the attack from inside, root and rootless, and
checks the host: nothing in the target directory, the layer gone, the
canary kept."""
import json
import os
import pathlib
import stat
import subprocess

import pytest

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from test_escape import attack


def _target(brig, scratch):
    """A host directory outside the workspace, writable by the user brig
    runs as (root, or nobody rootless): only brig's refusal keeps it empty."""
    d = scratch / "target"
    (d / "sub").mkdir(parents=True)
    brig.chown(d)
    brig.chown(d / "sub")
    return d


def _files_below(d):
    return sorted(os.path.relpath(os.path.join(p, n), d) for p, ds, fs in os.walk(d) for n in fs)


def _out_dirs(brig):
    ws = brig.workspace
    (ws / "out" / "sub").mkdir(parents=True)
    brig.chown(ws / "out")
    brig.chown(ws / "out" / "sub")


# ---- class 2: output paths follow no symlink --------------------------------


@attack("output-path-dir-symlink",
        "an earlier run replaces a directory on a --json-report or --audit path in the workspace (the parent or "
        "one above) by a symlink to a host directory; the next run's brig, perhaps root, writes there",
        "output files opened with openat2(RESOLVE_NO_SYMLINKS) over the whole path (a walk with O_NOFOLLOW "
        "without openat2): exit 125 before the command")
@pytest.mark.parametrize("opt", ["--json-report", "--audit"])
@pytest.mark.parametrize("swap", ["out/sub", "out"])
def test_output_path_directory_swapped_for_symlink(brig, scratch, opt, swap):
    target = _target(brig, scratch)
    ws = brig.workspace
    _out_dirs(brig)
    # Run 1, the attacker: the directory becomes a symlink to the target.
    into = target / "sub" if swap == "out/sub" else target
    r = brig.sh(f"rm -r {swap} && ln -s {into} {swap} && ls -ld {swap}")
    assert r.returncode == 0, r
    assert os.path.islink(ws / swap)
    # Run 2, the victim: absolute, and relative to the caller's directory.
    for path in (str(ws / "out/sub/r.json"), "out/sub/r.json"):
        r = brig.sh("echo ran > ran", opt, path)
        assert r.returncode == 125, r
        assert "is a symlink" in r.stderr and f"{swap}'" in r.stderr and opt in r.stderr, r
        assert "give a path without symlinks" in r.stderr, r
        assert not (ws / "ran").exists(), "the command ran"
    assert _files_below(target) == [], "brig wrote through the planted symlink"


@attack("output-path-live-swap",
        "a running persistent sandbox swaps a directory of the output path in its workspace for a symlink to a "
        "host directory between two execs; the next brig exec --json-report (or a brig run --json-report/--audit "
        "into that workspace) writes there",
        "the same openat2(RESOLVE_NO_SYMLINKS) open for brig exec's report: exit 125, the command does not run")
def test_output_path_swapped_by_a_live_sandbox(brig, sandboxes, scratch):
    target = _target(brig, scratch)
    ws = brig.workspace
    _out_dirs(brig)
    name, _ = sandboxes.create()
    report = ws / "out" / "sub" / "r.json"
    # Exec 1 writes its report, and swaps the directory while it runs.
    r = sandboxes.sh(name, f"rm -r out && ln -s {target} out", "--json-report", str(report))
    assert r.returncode == 0, r
    assert os.path.islink(ws / "out")
    # Exec 2: its report path now leads into the target.
    r = sandboxes.sh(name, "echo ran > ran", "--json-report", str(report))
    assert r.returncode == 125, r
    assert "is a symlink" in r.stderr and "--json-report" in r.stderr, r
    assert not (ws / "ran").exists(), "the command ran"
    # A brig run writing its report or audit stream into the live workspace.
    for opt, file in (("--json-report", "r2.json"), ("--audit", "a.jsonl")):
        r = brig.sh("true", opt, str(ws / "out" / "sub" / file))
        assert r.returncode == 125, r
    assert _files_below(target) == [], "brig wrote through the symlink the sandbox swapped in"


@attack("output-path-hard-link",
        "an earlier run plants the output file as a hard link to a workspace file (ln notes.txt r.json); the next "
        "--json-report or --audit r.json would overwrite notes.txt",
        "an existing output file with more than one link is refused before anything is truncated or written")
@pytest.mark.parametrize("opt", ["--json-report", "--audit"])
def test_output_path_planted_hard_link(brig, opt):
    ws = brig.workspace
    notes = ws / "notes.txt"
    notes.write_text("precious\n")
    brig.chown(notes)
    r = brig.sh("ln notes.txt r.json")
    assert r.returncode == 0, r
    assert os.stat(ws / "r.json").st_nlink == 2
    r = brig.sh("echo ran > ran", opt, str(ws / "r.json"))
    assert r.returncode == 125, r
    assert "hard links" in r.stderr and opt in r.stderr, r
    assert not (ws / "ran").exists()
    assert notes.read_text() == "precious\n"


@attack("output-report-trailing-forgery",
        "the command writes 50 KB to its own --json-report file in the workspace, then a forged report after it "
        "(exit_code 0); brig wrote its report over the start and left the rest (found by attack34: a reader saw "
        "two documents, the second the sandbox's)", "the report's file ends where brig's report does (ftruncate "
        "after the write), for brig run and brig exec")
def test_report_file_is_brigs_report_alone(brig, sandboxes):
    ws = brig.workspace
    forge = ('head -c 50000 /dev/zero | tr "\\0" " " > rep.json; '
             'printf "{\\"exit_code\\":0,\\"forged\\":true}" >> rep.json; exit 3')
    r = brig.sh(forge, "--json-report", str(ws / "rep.json"))
    assert r.returncode == 3, r
    doc = json.loads((ws / "rep.json").read_text())  # one document: json.loads refuses extra data
    assert doc["exit_code"] == 3 and "forged" not in doc, doc
    name, _ = sandboxes.create()
    r = sandboxes.exec(name, "--json-report", str(ws / "rep.json"), "--", "sh", "-c", forge)
    assert r.returncode == 3, r
    doc = json.loads((ws / "rep.json").read_text())
    assert doc["exit_code"] == 3 and "forged" not in doc, doc
    # a report appended to a log of reports (N>>FILE) keeps what was there
    log = brig.reports / "reports.jsonl"
    log.write_text('{"earlier": true}\n')
    cp = subprocess.run(["sh", "-c", 'exec "$@" 3>>' + str(log), "sh", *brig.cmd("run", "--json-report-fd", "3",
                                                                              "--", "true")],
                        env=brig.env(), cwd=str(ws), capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp
    lines = log.read_text().splitlines()
    assert json.loads(lines[0]) == {"earlier": True} and len(lines) > 1, lines


def test_output_path_in_the_state_root_is_refused(brig, sandboxes):
    """--json-report or --audit into brig's own state directory (a pool's
    pool.json, a sandbox's state) is refused before anything runs: a run
    of `brig run --pool P --json-report ROOT/pools/KEY/pool.json` made the
    pool vanish (found by attack34)."""
    name, _ = sandboxes.create()
    state = sandboxes.root / name / "state.json"
    before = state.read_text()
    for opt, path in (("--json-report", sandboxes.root / "r.json"), ("--audit", state),
                      ("--json-report", state)):
        r = sandboxes.brig_cmd("run", opt, str(path), "--", "sh", "-c", "echo ran > ran")
        assert r.returncode == 125 and "brig's state directory" in r.stderr and opt in r.stderr, r
        assert not (brig.workspace / "ran").exists()
    r = sandboxes.exec(name, "--json-report", str(state), "--", "true")
    assert r.returncode == 125 and "brig's state directory" in r.stderr, r
    assert state.read_text() == before and not (sandboxes.root / "r.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "socket", "directory"])
def test_output_path_that_is_not_a_file_is_refused_in_words(brig, kind):
    """A FIFO or a socket an earlier run left at the output path (or a
    directory): refused before the command runs, saying what it is, not
    'No such device or address'; nothing hangs."""
    ws = brig.workspace
    make = {"fifo": "mkfifo r.json", "directory": "mkdir r.json",
            "socket": "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"r.json\")'"}[kind]
    assert brig.sh(make).returncode == 0
    r = brig.sh("echo ran > ran", "--json-report", str(ws / "r.json"), timeout=20)
    assert r.returncode == 125 and not (ws / "ran").exists(), r
    want = "Is a directory" if kind == "directory" else "is not a regular file (a FIFO or a socket)"
    assert want in r.stderr and "--json-report" in r.stderr, r.stderr



@pytest.mark.parametrize("opt", ["--json-report", "--audit"])
def test_output_path_on_a_kernel_interface_is_refused_before_the_run(brig, opt):
    """An output path on procfs or sysfs (root may open /proc/version for
    writing; its write fails) was refused only after the command had run,
    with 125, so a caller that retries on 125 ran it twice (found by
    attack34); under /proc/sys a report would set the kernel. Refused
    before anything runs, naming the filesystem; the file is unchanged.
    (Only files whose writes fail are tried here: the host's settings are
    never risked.)"""
    ws = brig.workspace
    before = pathlib.Path("/proc/version").read_text()
    r = brig.sh("echo ran >> ran", opt, "/proc/version")
    assert r.returncode == 125 and not (ws / "ran").exists(), r
    # rootless, the open itself is refused; root opens it, and is refused its filesystem
    words = "a file of procfs" if brig.mode == "root" else "Permission denied"
    assert opt in r.stderr and words in r.stderr, r.stderr
    assert pathlib.Path("/proc/version").read_text() == before

def test_output_path_plain_file_still_written(brig):
    """The refusals above leave ordinary output paths alone: a new file, an
    existing one (truncated), one in a directory reached through '..'."""
    ws = brig.workspace
    _out_dirs(brig)
    old = ws / "out" / "old.json"
    old.write_text("x" * 100000)
    brig.chown(old)
    for path in (str(ws / "out/sub/new.json"), str(old), "out/sub/../sub/rel.json"):
        r = brig.sh("true", "--json-report", path)
        assert r.returncode == 0, r
    assert (ws / "out/sub/new.json").read_text().startswith("{")
    assert old.read_text().startswith("{") and len(old.read_text()) < 100000
    assert (ws / "out/sub/rel.json").exists()


# ---- class 8: removal of any tree a sandbox makes ----------------------------

DEPTH = 5000
WIDTH = 20000

# Run inside the sandbox, in its workspace (the overlay): a chain of DEPTH
# directories (paths far past PATH_MAX) with a file, a symlink to the host
# directory and a chmod 000 directory at the bottom; a directory of WIDTH
# entries, half of them non-empty directories; directories made
# unreadable and unwritable; a symlink to the host directory at the top.
MAKE_TREE = r"""
import os, sys
depth, width, host = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
fd = os.open(".", os.O_RDONLY)
for i in range(depth):
    os.mkdir("d", dir_fd=fd)
    sub = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = sub
    if i % 1000 == 999:
        os.symlink(host, "link", dir_fd=fd)
os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
os.mkdir("locked", dir_fd=fd)
os.chmod("locked", 0, dir_fd=fd)
os.makedirs("wide")
for i in range(width):
    if i % 2:
        os.mkdir(f"wide/s{i}")
        open(f"wide/s{i}/f", "w").close()
    else:
        open(f"wide/f{i}", "w").close()
os.makedirs("ro/inner/deeper")
open("ro/inner/file", "w").close()
os.chmod("ro/inner", 0)
os.chmod("ro", 0o500)
os.symlink(host, "hostlink")
print("made")
"""


# One row of the catalogue for the three tests below: removal, and what
# diff, commit and the layer copies do with the same trees.
DEEP_LAYER = attack(
    "deep-layer-cleanup",
    "an overlay sandbox fills its layer with 5000 nested directories (paths far past PATH_MAX), a 20000-entry "
    "directory, chmod 000 directories and files, symlinks to a host directory; brig rm failed past 256 levels "
    "(exit 125) and left the layer on the host and the sandbox listed as dead forever; diff, commit, snapshot, "
    "restore and fork of such layers",
    "tree_remove_at: an iterative walk with at most 16 directory streams open, up by '..' checked against the "
    "recorded (st_dev, st_ino), no symlink followed, no other mount entered; diff, commit and layer copies stop "
    "at 256 levels with a clear error and change nothing; copies open chmod 000 entries for the moment they "
    "read them; rootless diff and commit refuse unreadable entries up front; commit sets directory modes "
    "deepest first")


def _host_canary(brig, scratch):
    d = scratch / "hostdir"
    d.mkdir()
    brig.chown(d)
    (d / "canary").write_text("alive\n")
    brig.chown(d / "canary")
    return d


def _make_tree(sandboxes, name, host, depth=DEPTH, width=WIDTH):
    r = sandboxes.exec(name, "--", "python3", "-c", MAKE_TREE, str(depth), str(width), str(host), timeout=300)
    assert r.returncode == 0 and "made" in r.stdout, r


def _layer_depth(upper):
    """How deep the chain of d/ goes in the layer on the host (by fd)."""
    n, fd = 0, os.open(upper, os.O_RDONLY)
    try:
        while True:
            try:
                sub = os.open("d", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                return n
            os.close(fd)
            fd, n = sub, n + 1
    finally:
        os.close(fd)


@DEEP_LAYER
def test_rm_of_a_deep_wide_locked_layer(brig, sandboxes, scratch):
    host = _host_canary(brig, scratch)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    _make_tree(sandboxes, name, host)
    upper = sandboxes.root / name / "upper"
    assert _layer_depth(upper) == DEPTH
    state = sandboxes.state(name)
    # With 32 descriptors at most: the walk holds a bounded number open.
    r = subprocess.run(["prlimit", "--nofile=32:32", "--"] + brig.cmd("rm", name), cwd=str(brig.workspace),
                       env=brig.env(sandboxes.env()), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r
    assert name not in sandboxes.ls()
    sandboxes.assert_gone(name, state)
    assert (host / "canary").read_text() == "alive\n"
    assert sorted(os.listdir(host)) == ["canary"]


@DEEP_LAYER
def test_diff_commit_snapshot_of_a_too_deep_layer(brig, sandboxes, scratch):
    host = _host_canary(brig, scratch)
    ws = brig.workspace
    before = sorted(os.listdir(ws))
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    _make_tree(sandboxes, name, host, width=100)
    # (unreadable entries have their own refusal: test_diff_commit_of_a_locked_layer)
    r = sandboxes.sh(name, "chmod 700 ro/inner")
    assert r.returncode == 0, r
    for cmd in (("diff", name), ("commit", name), ("snapshot", name, "t1")):
        r = sandboxes.brig_cmd(*cmd)
        assert r.returncode == 125, r
        assert "nested more than 256 deep" in r.stderr and "brig reset" in r.stderr, r
    assert sorted(os.listdir(ws)) == before, "commit applied part of the tree"
    snaps = sandboxes.root / name / "snapshots"
    assert not snaps.exists() or os.listdir(snaps) == [], "a half-made snapshot was left"
    r = sandboxes.sh(name, "test -L hostlink && test -d d/d/d && echo alive")  # still runs, tree intact
    assert r.returncode == 0 and "alive" in r.stdout, r
    r = sandboxes.brig_cmd("stop", name)
    assert r.returncode == 0, r
    r = sandboxes.brig_cmd("reset", name)
    assert r.returncode == 0, r
    assert os.listdir(sandboxes.root / name / "upper") == []
    r = sandboxes.brig_cmd("diff", name)
    assert r.returncode == 0, r
    assert (host / "canary").read_text() == "alive\n"


@DEEP_LAYER
def test_snapshot_restore_fork_of_a_locked_layer(brig, sandboxes, scratch):
    host = _host_canary(brig, scratch)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    _make_tree(sandboxes, name, host, depth=200, width=2000)
    r = sandboxes.sh(name, "echo secret > d/d/g && chmod 0 d/d/g wide/f0 && echo ok")
    assert r.returncode == 0 and "ok" in r.stdout, r
    upper = sandboxes.root / name / "upper"
    modes = {p: stat.S_IMODE(os.lstat(upper / p).st_mode) for p in ("ro", "ro/inner", "d/d/g", "wide/f0")}
    r = sandboxes.brig_cmd("snapshot", name, "s1")
    assert r.returncode == 0, r
    saved = sandboxes.root / name / "snapshots" / "s1" / "upper"
    assert _layer_depth(saved) == 200 and len(os.listdir(saved / "wide")) == 2000
    for p, m in modes.items():  # the copy and the layer keep the sandbox's modes
        assert stat.S_IMODE(os.lstat(saved / p).st_mode) == m, p
        assert stat.S_IMODE(os.lstat(upper / p).st_mode) == m, p
    r = sandboxes.sh(name, "rm -rf wide && echo ok")
    assert r.returncode == 0, r
    r = sandboxes.brig_cmd("restore", name, "s1")
    assert r.returncode == 0, r
    fork = sandboxes.new_name("fk")
    sandboxes.names.append(fork)
    r = sandboxes.brig_cmd("fork", name, "s1", fork)
    assert r.returncode == 0, r
    for sb in (name, fork):
        r = sandboxes.sh(sb, "ls wide | wc -l; test -L hostlink && test -d d/d/d && echo alive")
        assert r.returncode == 0 and "2000" in r.stdout and "alive" in r.stdout, r
    for sb in (name, fork):
        st = sandboxes.state(sb)
        r = sandboxes.rm(sb)
        assert r.returncode == 0, r
        sandboxes.assert_gone(sb, st)
    assert sorted(os.listdir(host)) == ["canary"]


@DEEP_LAYER
def test_diff_commit_of_a_locked_layer(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    r = sandboxes.sh(name, "mkdir -p a/b ro/x && echo hi > a/b/f && echo y > ro/x/y && chmod 0 a/b/f && chmod 0 a/b "
                           "&& chmod 500 a ro/x ro && echo ok")
    assert r.returncode == 0 and "ok" in r.stdout, r
    if brig.mode == "rootless":
        # Unreadable to the caller as to the sandbox: said, nothing applied
        # (diff skipped a/b without a word, commit stopped halfway).
        for cmd in ("diff", "commit"):
            r = sandboxes.brig_cmd(cmd, name)
            assert r.returncode == 125, r
            assert "'a/b' is not readable" in r.stderr and "chmod u+rx" in r.stderr, r
        assert not (ws / "a").exists() and not (ws / "ro").exists(), "commit applied part of the layer"
        r = sandboxes.sh(name, "chmod 500 a/b && chmod 400 a/b/f && echo ok")
        assert r.returncode == 0, r
    r = sandboxes.brig_cmd("diff", name)
    assert r.returncode == 0 and "a/b/f" in r.stdout and "ro/x/y" in r.stdout, r
    r = sandboxes.brig_cmd("commit", name)
    assert r.returncode == 0, r
    # Read-only directories arrive filled, with the sandbox's modes.
    assert (ws / "ro/x/y").read_text() == "y\n"
    assert stat.S_IMODE(os.lstat(ws / "ro").st_mode) == 0o500
    assert stat.S_IMODE(os.lstat(ws / "ro/x").st_mode) == 0o500
    assert stat.S_IMODE(os.lstat(ws / "a").st_mode) == 0o500
    assert os.stat(ws / "a/b/f").st_size == 3
    for d in ("a/b", "a", "ro/x", "ro"):  # let the scratch cleanup remove them
        os.chmod(ws / d, 0o700)


@DEEP_LAYER
def test_overlay_create_over_a_too_deep_workspace(brig, sandboxes, scratch):
    # An earlier run (bind mode) leaves a deep tree in the workspace: the
    # record an overlay sandbox starts from is refused with a clear error,
    # and nothing of the half-made sandbox stays.
    host = _host_canary(brig, scratch)
    r = brig.run("run", "--", "python3", "-c", MAKE_TREE, "300", "10", str(host), timeout=120)
    assert r.returncode == 0 and "made" in r.stdout, r
    name, r = sandboxes.create("--workspace-mode", "overlay", check=False)
    assert r.returncode == 125, r
    assert "nested more than 256" in r.stderr and "--workspace-mode bind" in r.stderr, r
    assert name not in sandboxes.ls() and not (sandboxes.root / name).exists()
    assert sorted(os.listdir(host)) == ["canary"]
