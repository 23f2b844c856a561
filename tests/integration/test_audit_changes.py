"""What changed, on demand and within bounds (issue 22): `brig diff NAME` of a
bind-mode persistent sandbox lists what changed since create, and the walks
behind it, the audit stream's files event and --manifest's workspace hash
stop at --changes-max entries and say so. Every check holds what brig
reports against the files as the HOST sees them. docs/audit.md."""
import hashlib
import json
import os

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import wait_until
from test_audit_stream import attack, audit, valid


def _own(brig, *paths, mode=0o666):
    for p in paths:
        p.chmod(0o777 if p.is_dir() else mode)
        brig.chown(p)


def _files(events):
    files = [e for e in events if e["event"] == "files"]
    assert len(files) == 1, events
    return files[0]


@attack("changes-planted-persistent", "a bind-mode persistent sandbox plants a symlink to a host file, a FIFO, "
        "a directory swapped for a symlink to a host directory, rewrites a file with its size and mtime set back, "
        "and writes into a writable bind; brig diff on the host lists it",
        "changes.c: the record kept at create (runchanges.c's walk: lstat, no symlink followed, no mount "
        "crossed), hashes opened beneath the root without symlinks, non-blocking, regular files only; ctime")
def test_bind_diff_lists_changes_since_create_without_following_what_was_planted(brig, sandboxes):
    secret = brig.base / "host-secret"
    secret.write_text("HOST SECRET CONTENT\n")
    hostdir = brig.base / "hostdir"
    hostdir.mkdir()
    (hostdir / "inside-host-dir").write_text("host\n")
    extra = brig.base / "extra"
    extra.mkdir()
    ws = brig.workspace
    (ws / "same.txt").write_text("aaaa\n")
    (ws / "gone.txt").write_text("x\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "f").write_text("f\n")
    _own(brig, ws / "same.txt", ws / "gone.txt", ws / "sub", ws / "sub" / "f", extra)
    name, _ = sandboxes.create("--bind", str(extra))
    script = (f"ln -s {secret} link-to-host; mkfifo fifo; echo built > out.txt; rm gone.txt; "
              "touch -r same.txt /tmp/ref && echo bbbb > same.txt && touch -r /tmp/ref same.txt; "
              f"rm -r sub && ln -s {hostdir} sub; echo in-bind > {extra}/made.txt")
    r = sandboxes.sh(name, script)
    assert r.returncode == 0, r
    d = sandboxes.brig_cmd("diff", name, "--json", timeout=30)
    assert d.returncode == 0, d
    ch = {c["path"]: c for c in json.loads(d.stdout)}
    want = hashlib.sha256((ws / "out.txt").read_bytes()).hexdigest()
    assert ch["out.txt"]["change"] == "added" and ch["out.txt"]["size"] == 6 and ch["out.txt"]["sha256"] == want, ch
    assert ch["link-to-host"]["type"] == "symlink" and "sha256" not in ch["link-to-host"], ch
    assert ch["fifo"]["type"] == "special" and "sha256" not in ch["fifo"], ch
    assert ch["gone.txt"]["change"] == "deleted", ch
    assert ch["same.txt"]["change"] == "modified", ch  # same inode, size and mtime: ctime tells
    assert (ws / "same.txt").read_text() == "bbbb\n"
    assert ch["sub"] == {**ch["sub"], "change": "modified", "type": "symlink"}, ch
    assert ch["sub/f"]["change"] == "deleted", ch
    assert not any("inside-host-dir" in p for p in ch), "the walk went through the planted directory link"
    assert ch[f"{extra}/made.txt"]["change"] == "added", ch
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in d.stdout, "the planted link's target was read"
    # the text form, and a PATH selecting among them
    t = sandboxes.brig_cmd("diff", name)
    assert t.returncode == 0 and "A out.txt\n" in t.stdout and "D gone.txt\n" in t.stdout, t
    only = sandboxes.brig_cmd("diff", name, "out.txt", "--json")
    assert only.returncode == 0 and [c["path"] for c in json.loads(only.stdout)] == ["out.txt"], only
    # since create: a stopped sandbox still has it
    assert sandboxes.brig_cmd("stop", name).returncode == 0
    again = sandboxes.brig_cmd("diff", name, "--json")
    assert again.returncode == 0 and {c["path"] for c in json.loads(again.stdout)} == set(ch), again


@attack("changes-overlay-bind-unseen", "an overlay-mode persistent sandbox writes its workspace (the layer) and, "
        "to keep it out of brig diff, a writable bind, which is written through to the host",
        "in overlay mode the supervisor records the writable binds at create as in bind mode (changes.c); brig "
        "diff lists the layer's changes and the binds' since create, absolute, with size and sha256")
def test_overlay_diff_lists_what_went_through_a_writable_bind(brig, sandboxes):
    extra = brig.base / "extra-ov"
    extra.mkdir()
    (extra / "old.txt").write_text("old\n")
    _own(brig, extra, extra / "old.txt")
    name, _ = sandboxes.create("--workspace-mode", "overlay", "--bind", str(extra))
    r = sandboxes.sh(name, f"echo layer > in-layer.txt; echo through > {extra}/hidden.txt; rm {extra}/old.txt")
    assert r.returncode == 0, r
    assert (extra / "hidden.txt").read_text() == "through\n" and not (extra / "old.txt").exists()
    assert not (brig.workspace / "in-layer.txt").exists(), "the overlay wrote through"
    d = sandboxes.brig_cmd("diff", name, "--json", timeout=30)
    assert d.returncode == 0, d
    ch = {c["path"]: c for c in json.loads(d.stdout)}
    assert ch["in-layer.txt"]["change"] == "added", ch
    want = hashlib.sha256(b"through\n").hexdigest()
    assert ch[f"{extra}/hidden.txt"] == {**ch[f"{extra}/hidden.txt"], "change": "added", "size": 8,
                                         "sha256": want}, ch
    assert ch[f"{extra}/old.txt"]["change"] == "deleted", ch
    t = sandboxes.brig_cmd("diff", name)
    assert t.returncode == 0 and f"A {extra}/hidden.txt\n" in t.stdout and "A in-layer.txt\n" in t.stdout, t


@attack("changes-buried-past-cap", "a workspace of more entries than the walk records (a change buried past "
        "them), a tree 300 directories deep, and a sandbox that adds more than its --changes-max",
        "runchanges.c: each walk records at most --changes-max entries and 256 levels; past them it stops, "
        "lists only what both walks reached, and says so (stopped_at, errors, complete false, stderr); brig diff "
        "refuses naming the flag")
def test_walks_stop_at_changes_max_and_say_so(brig, sandboxes):
    ws = brig.workspace
    for i in range(60):
        (ws / f"f{i:02}").write_text("x\n")
        _own(brig, ws / f"f{i:02}")
    manifest = brig.reports / "capped.json"
    r, _, ev = audit(brig, "for f in f*; do echo changed > $f; done; for i in $(seq 1 50); do echo > new$i; done",
                     "--changes-max", "20", "--manifest", str(manifest))
    assert r.returncode == 0, r
    files = _files(ev)
    assert files["stopped_at"] == 20 and not files["complete"], files
    assert any("--changes-max" in e for e in files["errors"]), files
    assert len(files["changes"]) <= 20 and {c["change"] for c in files["changes"]} <= {"modified"}, files
    assert "--changes-max" in r.stderr, r.stderr
    valid(ev)
    m = json.loads(manifest.read_text())
    assert m["workspace_tree"]["sha256"] is None and "--changes-max" in m["workspace_tree"]["error"], m
    assert m["outcome"]["files_complete"] is False, m["outcome"]
    # its replay (the workspace's hash unknown: run anyway) says the files were compared in part
    rep = brig.run("replay", manifest, "--allow-changed-workspace", "--json")
    assert rep.returncode in (0, 1) and "compared in part only" in rep.stderr, rep
    assert json.loads(rep.stdout.splitlines()[-1])["files_complete"] is False, rep.stdout
    # a tree deeper than the walk goes: the run ends, and the event says why
    deep = "i=0; while [ $i -lt 300 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done"
    r, _, ev = audit(brig, f"mkdir nest && cd nest && {deep}")
    assert r.returncode == 0, r
    files = _files(ev)
    assert not files["complete"] and any("nested deeper" in e for e in files["errors"]), files
    # a bind-mode sandbox that adds more than its cap: brig diff refuses, naming the flag
    name, _ = sandboxes.create("--changes-max", "100")
    assert sandboxes.sh(name, "for i in $(seq 1 80); do echo > more$i; done").returncode == 0
    d = sandboxes.brig_cmd("diff", name)
    assert d.returncode == 125 and "--changes-max" in d.stderr and d.stdout == "", d


@attack("changes-hidden-unreadable", "the sandbox makes a directory unreadable (chmod 000) after writing into it, "
        "so a rootless walk on the host cannot list it: its new files unseen, its old ones reported deleted",
        "runchanges.c: a directory the walk cannot open is named in errors (complete false), and what is below it "
        "is neither added nor deleted")
def test_unreadable_directory_neither_hides_nor_invents_changes(brig):
    d = brig.workspace / "d"
    d.mkdir()
    (d / "x").write_text("x\n")
    _own(brig, d, d / "x")
    r, _, ev = audit(brig, "echo y > d/y; chmod 000 d")
    os.chmod(d, 0o755)  # the test's cleanup, and the host's view below
    assert r.returncode == 0, r
    assert (d / "x").exists()
    files = _files(ev)
    ch = {c["path"]: c for c in files["changes"]}
    assert f"{d}/x" not in ch, ("a file still there was reported", ch)
    if brig.mode == "root":  # root reads it
        assert ch[f"{d}/y"]["change"] == "added" and files["complete"], files
    else:
        assert not files["complete"] and any(f"{d}: a directory brig cannot read" in e
                                             for e in files["errors"]), files
    valid(ev)


@attack("changes-added-hidden-by-walk", "the sandbox adds files, then makes the walk after the run partial so "
        "that they go unlisted: a directory it makes unreadable anywhere in the workspace (rootless), or more "
        "new entries than --changes-max (root and rootless)",
        "runchanges.c: an entry the walk after reached that a complete walk before did not see is listed as "
        "added, whatever the walk after missed; only deletions wait for both walks to be complete")
def test_a_partial_walk_after_the_run_hides_no_added_file(brig):
    ws = brig.workspace
    # rootless, a directory brig cannot read; as root, none (brig reads it)
    r, _, ev = audit(brig, "echo evil > planted; mkdir d; chmod 000 d")
    os.chmod(ws / "d", 0o755)
    assert r.returncode == 0, r
    files = _files(ev)
    ch = {c["path"]: c for c in files["changes"]}
    sha = hashlib.sha256(b"evil\n").hexdigest()
    assert ch.get(f"{ws}/planted", {}).get("sha256") == sha, ("an added file went unlisted", files)
    if brig.mode != "root":
        assert not files["complete"] and any("a directory brig cannot read" in e for e in files["errors"]), files
    # the cap reached by the walk after only: files made before the flood
    # come first in readdir order on tmpfs; on a hashed directory those the
    # host's readdir puts before it are the ones the walk reached
    r, _, ev = audit(brig, "for i in 0 1 2 3 4 5 6 7; do echo evil > new$i; done; mkdir z; "
                     "for i in $(seq 1 40); do echo > z/$i; done", "--changes-max", "30")
    assert r.returncode == 0, r
    files = _files(ev)
    assert files["stopped_at"] == 30 and not files["complete"], files
    order = [e.name for e in os.scandir(ws)]
    reached = [n for n in order[:order.index("z")] if n.startswith("new")]
    assert reached, ("INCONCLUSIVE: readdir put z before every new file", order)
    ch = {c["path"]: c for c in files["changes"]}
    for n in reached:
        assert ch.get(f"{ws}/{n}", {}).get("change") == "added", (n, "an added file went unlisted", files)
    assert {c["change"] for c in files["changes"]} <= {"added"}, files
    valid(ev)


@attack("replay-unhashed-same", "a run writes a file past the 64 MiB hash cap (sparse: no disk used) whose first "
        "bytes differ in each run, recorded with --manifest: its replay, with different contents, is said the same "
        "(both outcomes hold only \"file\" for it)",
        "manifest.c: a files event with unhashed files gives files_complete false; replay says the files were "
        "compared in part only, naming the hash caps (stderr, --json files_complete)")
def test_replay_of_a_file_past_the_hash_cap_is_not_called_the_same(brig):
    manifest = brig.reports / "unhashed.json"
    script = "truncate -s 65M big && head -c 16 /dev/urandom | dd of=big conv=notrunc status=none"
    r = brig.sh(script, "--manifest", str(manifest))
    assert r.returncode == 0, r
    first = (brig.workspace / "big").read_bytes()[:16]
    m = json.loads(manifest.read_text())
    assert m["outcome"]["files"].get("./big") == "file" and m["outcome"]["files_complete"] is False, m["outcome"]
    rep = brig.run("replay", manifest, "--allow-changed-workspace", "--json")
    assert (brig.workspace / "big").read_bytes()[:16] != first  # the host sees other contents
    assert rep.returncode in (0, 1) and "compared in part only" in rep.stderr and "64 MiB" in rep.stderr, rep
    assert json.loads(rep.stdout.splitlines()[-1])["files_complete"] is False, rep.stdout


@attack("changes-added-hidden-by-walk", "a running bind-mode sandbox adds a file and moves it back and forth "
        "between two directories while brig diff walks, so that each readdir finds it in the other",
        "runchanges.c: brig diff's walk is taken when a second finds the root's and every directory's mtime and "
        "ctime the same (a rename changes both), else walked again; one that never settles is refused (exit 125, "
        "naming brig pause), never a list without the file")
def test_a_file_moved_during_brig_diff_is_never_left_out(brig, sandboxes):
    name, _ = sandboxes.create()
    ws = brig.workspace
    assert sandboxes.sh(name, "mkdir a b && for i in $(seq 1 200); do echo > a/f$i; echo > b/g$i; done").returncode == 0
    mover = ("import os\nopen('a/p', 'w').write('evil')\n"
             "while True:\n    os.rename('a/p', 'b/p'); os.rename('b/p', 'a/p')\n")
    r = sandboxes.brig_cmd("exec", name, "--detach", "--", "python3", "-c", mover)
    assert r.returncode == 0, r
    assert wait_until(lambda: (ws / "a" / "p").exists() or (ws / "b" / "p").exists(), 10)
    listed = refused = 0
    for _ in range(30):
        d = sandboxes.brig_cmd("diff", name)
        if d.returncode == 125:
            assert "kept moving" in d.stderr and "brig pause" in d.stderr and d.stdout == "", d
            refused += 1
            continue
        assert d.returncode == 0, d
        assert any(line.endswith((" a/p", " b/p")) for line in d.stdout.splitlines()), \
            ("ATTACK WORKED: brig diff left out the file the sandbox kept moving", d.stdout)
        listed += 1
    assert listed + refused == 30
