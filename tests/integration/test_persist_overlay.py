"""--workspace-mode overlay: the sandbox writes to a copy-on-write layer;
brig diff lists the changes, brig commit applies them to the real
workspace (atomically per file, refusing conflicts with host changes, and
never through a symlink), brig reset discards them. Root and rootless."""
import json
import os
import stat

import pytest

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker


def _populate(brig):
    ws = brig.workspace
    for name, text in (("keep", "keep\n"), ("mod", "old\n"), ("ren", "ren\n"), ("perm", "perm\n")):
        (ws / name).write_text(text)
        (ws / name).chmod(0o644)
        brig.chown(ws / name)
    for d in ("gone", "sub"):
        (ws / d).mkdir()
        brig.chown(ws / d)
    (ws / "gone" / "f").write_text("f\n")
    brig.chown(ws / "gone" / "f")


def _snapshot(root):
    """Every entry below root: path -> (type, mode, content or link target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", 0, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode), None)
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode), open(p, "rb").read())
    return out


def _diff(sandboxes, name):
    r = sandboxes.brig_cmd("diff", name, "--json")
    assert r.returncode == 0, r
    return {(d["path"], d["change"], d["type"]) for d in json.loads(r.stdout)}


SCRIPT = ("echo new > added && echo changed > mod && mv ren renamed && rm -r gone && chmod 755 perm "
          "&& mkdir -p newdir/x && echo y > newdir/x/y && ln -s keep link")

EXPECTED = {
    ("added", "added", "file"), ("mod", "modified", "file"), ("ren", "deleted", "file"),
    ("renamed", "added", "file"), ("gone", "deleted", "dir"), ("perm", "modified", "file"),
    ("newdir", "added", "dir"), ("newdir/x", "added", "dir"), ("newdir/x/y", "added", "file"),
    ("link", "added", "symlink"),
}


def test_overlay_diff_commit(brig, sandboxes):
    _populate(brig)
    before = _snapshot(brig.workspace)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    r = sandboxes.sh(name, SCRIPT)
    assert r.returncode == 0, r
    # The sandbox sees its changes; the host workspace is untouched.
    r = sandboxes.sh(name, "cat mod renamed newdir/x/y; readlink link; ls; stat -c %a perm")
    assert r.stdout == "changed\nren\ny\nkeep\nadded\nkeep\nlink\nmod\nnewdir\nperm\nrenamed\nsub\n755\n", r
    assert _snapshot(brig.workspace) == before
    assert _diff(sandboxes, name) == EXPECTED
    r = sandboxes.brig_cmd("diff", name)
    assert r.returncode == 0 and "M mod\n" in r.stdout and "D gone/\n" in r.stdout and "A newdir/x/y\n" in r.stdout, r

    r = sandboxes.brig_cmd("commit", name)
    assert r.returncode == 0 and "committed 10 changes" in r.stderr, r
    ws = brig.workspace
    assert (ws / "added").read_text() == "new\n"
    assert (ws / "mod").read_text() == "changed\n"
    assert not (ws / "ren").exists() and (ws / "renamed").read_text() == "ren\n"
    assert not (ws / "gone").exists()
    assert stat.S_IMODE(os.lstat(ws / "perm").st_mode) == 0o755
    assert (ws / "newdir" / "x" / "y").read_text() == "y\n"
    assert os.readlink(ws / "link") == "keep"
    assert (ws / "keep").read_text() == "keep\n" and (ws / "sub").is_dir()
    # Files land with the owner the workspace has (never the sandbox's nobody as root).
    owner = os.lstat(ws).st_uid
    for p in ("added", "mod", "renamed", "newdir/x/y", "link"):
        assert os.lstat(ws / p).st_uid == owner, p
    # No temporary file is left behind.
    assert not [p for p in _snapshot(ws) if ".brig-commit-" in p]
    # Committed: nothing left to diff, and the sandbox's view is unchanged.
    assert _diff(sandboxes, name) == set()
    assert sandboxes.sh(name, "cat mod").stdout == "changed\n"
    # Later changes show up again, and commit again.
    assert sandboxes.sh(name, "echo again >> mod && rm added").returncode == 0
    assert _diff(sandboxes, name) == {("mod", "modified", "file"), ("added", "deleted", "file")}
    assert sandboxes.brig_cmd("commit", name).returncode == 0
    assert (ws / "mod").read_text() == "changed\nagain\n" and not (ws / "added").exists()


@pytest.mark.parametrize("host_change", ["modify", "delete", "create"])
def test_overlay_conflict_applies_nothing(brig, sandboxes, host_change):
    _populate(brig)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    r = sandboxes.sh(name, "echo sandbox > mod && echo sandbox > both-new && echo fine > other")
    assert r.returncode == 0, r
    ws = brig.workspace
    if host_change == "modify":
        (ws / "mod").write_text("host edit\n")
        path = "mod"
    elif host_change == "delete":
        (ws / "mod").unlink()
        path = "mod"
    else:
        (ws / "both-new").write_text("host\n")
        path = "both-new"
    before = _snapshot(ws)
    r = sandboxes.brig_cmd("commit", name)
    assert r.returncode == 125, r
    assert "conflict" in r.stderr and f"{path}:" in r.stderr and "nothing applied" in r.stderr, r
    # Nothing applied: not the conflicting file, not the harmless one.
    assert _snapshot(ws) == before
    assert not (ws / "other").exists()
    # The sandbox's work is not lost either.
    assert sandboxes.sh(name, "cat other").stdout == "fine\n"
    assert ("other", "added", "file") in _diff(sandboxes, name)


def test_overlay_commit_never_writes_through_a_host_symlink(brig, sandboxes, scratch):
    _populate(brig)
    outside = scratch / "outside"
    outside.mkdir()
    brig.chown(outside)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    assert sandboxes.sh(name, "echo x > sub/new").returncode == 0
    # The host swaps the directory for a symlink to somewhere else.
    (brig.workspace / "sub").rename(brig.workspace / "sub.orig")
    (brig.workspace / "sub").symlink_to(outside)
    r = sandboxes.brig_cmd("commit", name)
    assert r.returncode == 125 and "sub" in r.stderr, r
    assert list(outside.iterdir()) == []


def test_overlay_commit_strips_setuid_and_skips_special_files(brig, sandboxes):
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    assert sandboxes.sh(name, "mkfifo pipe && echo x > tool && chmod 755 tool").returncode == 0
    # Whatever the layer holds: set the bits there directly, as a
    # sandbox that found a way to would.
    upper = sandboxes.root / name / "upper"
    os.chmod(upper / "tool", 0o6755)
    r = sandboxes.brig_cmd("commit", name, "--json")
    assert r.returncode == 0, r
    applied = {d["path"] for d in json.loads(r.stdout)}
    assert applied == {"tool"}, r.stdout
    mode = os.lstat(brig.workspace / "tool").st_mode
    assert stat.S_IMODE(mode) == 0o755, oct(mode)
    assert not (brig.workspace / "pipe").exists()


def test_overlay_reset(brig, sandboxes):
    _populate(brig)
    before = _snapshot(brig.workspace)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    assert sandboxes.sh(name, SCRIPT).returncode == 0
    r = sandboxes.brig_cmd("reset", name)
    assert r.returncode == 125 and "stop it first" in r.stderr, r
    assert _diff(sandboxes, name) == EXPECTED  # nothing lost by the refusal
    assert sandboxes.brig_cmd("stop", name).returncode == 0
    # A stopped sandbox still diffs and could still commit; reset throws it away.
    assert _diff(sandboxes, name) == EXPECTED
    r = sandboxes.brig_cmd("reset", name)
    assert r.returncode == 0, r
    assert _diff(sandboxes, name) == set()
    assert _snapshot(brig.workspace) == before


def test_overlay_bad_input(brig, sandboxes):
    name, _ = sandboxes.create()  # bind mode
    for cmd in ("diff", "commit", "reset"):
        r = sandboxes.brig_cmd(cmd, name)
        if cmd == "diff":  # bind mode: what changed since create (test_audit_changes.py)
            assert r.returncode == 0 and r.stdout == "", r
        else:
            assert r.returncode == 125 and "no overlay" in r.stderr, (cmd, r)
        r = sandboxes.brig_cmd(cmd, "nosuch")
        assert r.returncode == 125 and "no sandbox named" in r.stderr, (cmd, r)
    r = sandboxes.brig_cmd("create", marker("x")[:30], "--workspace-mode", "cow")
    assert r.returncode == 125 and "bind or overlay" in r.stderr, r
    r = sandboxes.brig_cmd("create", marker("x")[:30], "--workspace-mode", "overlay", "--read-only-workspace")
    assert r.returncode == 125 and "exclude" in r.stderr, r


def test_overlay_rm_leaves_nothing(brig, sandboxes):
    _populate(brig)
    before = _snapshot(brig.workspace)
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    st = sandboxes.state(name)
    assert sandboxes.sh(name, SCRIPT).returncode == 0
    assert sandboxes.rm(name).returncode == 0
    sandboxes.assert_gone(name, st)
    assert _snapshot(brig.workspace) == before
