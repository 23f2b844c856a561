"""A secret hidden at start stays hidden in every later run, whatever an
earlier run did to the tree around it (issue 13, class 3).

A mask hides a path. Run 1 tries to move the secret away from that path —
rename each directory that holds it (up to the grant's root), swap one for
a decoy (RENAME_EXCHANGE), remove and recreate it, move a decoy into its
place, also through a second grant of the same tree — and then leaves a
decoy at the old path. The host must still hold the real secret at its
path and nowhere else; run 2 greps every granted tree for the canary and
must not see it. The same across stop/start and commit of an overlay
persistent sandbox: commit must never move the host's secret.
"""
import os
import pathlib
import shlex
import subprocess

import pytest

from conftest import IS_ROOT
from fs_helpers import assert_refused, assert_worked, marker, parse, probe_script, sh
from persist_helpers import sandboxes  # noqa: F401 (fixture)
from test_escape import attack

MOVED = {"EBUSY", "EXDEV", "EACCES", "EPERM", "ENOTEMPTY", "EROFS"}


def plant(brig, root, rel, canary):
    """The secret ROOT/REL holding CANARY, every directory on the way
    owned by the sandbox user (writable, so only brig can stop a rename)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(canary + "\n")
    path.chmod(0o644)
    for p in (path, *path.relative_to(root).parents):
        q = root / p
        brig.chown(q)
        if q.is_dir():
            q.chmod(0o755)
    return path


def move_attempts(root, masked, is_dir, tag):
    """probe_fs lines that try to move ROOT/MASKED (the path brig masks, a
    file or a directory) or any directory holding it, up to (not
    including) ROOT, away from its path."""
    parts = pathlib.PurePosixPath(masked).parts
    lines = []
    for i, n in enumerate(range(len(parts), 0, -1)):
        target = f"{root}/{'/'.join(parts[:n])}"
        decoy = f"{os.path.dirname(target)}/decoy-{tag}-{i}"
        file = i == 0 and not is_dir
        lines += [["write", decoy, "decoy"] if file else ["mkdir", decoy],
                  ["rename", target, f"{target}.moved-{tag}"], ["exchange", target, decoy],
                  ["unlink" if file else "rmdir", target], ["rename", decoy, target], ["exchange", decoy, target]]
        if file:
            lines.append(["link", target, f"{decoy}.link"])
        lines.append(["umount", target])  # uncover the real directory under its pin
    return lines


def check_attempts(out, lines, busy_only=False, writable=("",)):
    """Every attempt refused, the decoys made below each WRITABLE prefix
    (as root a second grant of a root-owned workspace is not idmapped: the
    sandbox user cannot write there at all); BUSY_ONLY: the mountpoint
    itself refused each move of a masked path or its directories (EBUSY),
    not some other property of the filesystem."""
    for l in lines:
        key = f"{l[0]} {l[1]}"
        if l[0] in ("mkdir", "write"):
            if any(l[1].startswith(w) for w in writable):
                assert_worked(out, key)
        elif l[0] == "umount":
            assert_refused(out, key, {"EPERM"} | ({"ENOENT"} if not any(l[1].startswith(w) for w in writable)
                                                   else set()))
        elif busy_only and l[0] in ("rename", "exchange", "rmdir", "unlink") and "/decoy-" not in l[1]:
            assert_refused(out, key, {"EBUSY"})
        elif any(l[1].startswith(w) for w in writable):
            assert_refused(out, key, MOVED)
        else:
            assert_refused(out, key, MOVED | {"ENOENT"})  # its decoy could not be made


def shell_moves(root, rel):
    """What a shell would do: mv (copy and delete across a mount), rm -rf
    and recreate the path with a decoy."""
    top = f"{root}/{pathlib.PurePosixPath(rel).parts[0]}"
    secret = f"{root}/{rel}"
    return "\n".join([
        f"mv {shlex.quote(top)} {shlex.quote(top + '.mv')} 2>/dev/null",
        f"rm -rf {shlex.quote(top)} 2>/dev/null",
        f"mkdir -p {shlex.quote(os.path.dirname(secret))} 2>/dev/null",
        f"{{ echo decoy > {shlex.quote(secret)}; }} 2>/dev/null",
        "true",
    ])


def quiet(stderr):
    """Nothing on stderr but brig's own lines — warnings (degraded limits,
    rootless) and the end-of-run summary of what it refused (the umount2
    and unshare attempts): no attempt leaked an error message past its
    redirection."""
    return all(l.startswith(("brig: WARNING:", "brig: refused ")) for l in stderr.splitlines())


def host_files_with(root, canary):
    """Every host file below ROOT whose content holds CANARY."""
    found = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                if not os.path.islink(p) and canary.encode() in pathlib.Path(p).read_bytes():
                    found.append(p)
            except OSError:
                pass
    return sorted(found)


def grep_script(canary, *roots):
    q = " ".join(shlex.quote(str(r)) for r in roots)
    return f"grep -r -a -l -- {canary} {q} 2>/dev/null | sed 's/^/FOUND /'; echo GREP-DONE"


def check_run2(res, canary, public):
    """Run 2 saw the public marker (grep could see) and never the canary."""
    assert res.returncode == 0 and "GREP-DONE" in res.stdout, res
    found = [l[6:] for l in res.stdout.splitlines() if l.startswith("FOUND ")]
    assert found and all(public in f for f in found), f"SECRET FOUND inside in run 2: {found} ({res!r})"


def public_file(brig, root, canary):
    """A public file holding the canary's public twin: grep must find it."""
    p = root / f"public-{canary}"
    p.write_text(f"PUBLIC {canary}\n")
    brig.chown(p)
    return p


@attack("deny-parent-rename", "run 1 renames (or swaps with RENAME_EXCHANGE, removes and recreates, moves a "
        "decoy over) each directory holding a --deny file, also through a second grant of the same tree; run 2 "
        "reads the secret at its new path while the mask covers the decoy",
        "every ancestor of a mask inside a writable grant is a mountpoint (EBUSY)")
@pytest.mark.parametrize("layout", ["two-grants", "writable-in-read-only"])
def test_denied_file_cannot_be_moved_between_runs(brig, layout):
    """two-grants: the workspace and --bind WS:/mnt/w, both writable.
    writable-in-read-only: --read-only-workspace with a writable --bind of
    WS/proj at its own place (both mask the same path; only the writable
    one can move it, and it must be pinned too)."""
    ws = brig.workspace
    canary = marker("deny-canary")
    rel = "proj/keys/prod/secret.txt"
    secret = plant(brig, ws, rel, canary)
    probe = brig.program("probe_fs")
    if layout == "two-grants":
        args = ("--ro-bind", probe, "--deny", str(secret), "--bind", f"{ws}:/mnt/w")
        lines = move_attempts(str(ws), rel, False, "ws") + move_attempts("/mnt/w", rel, False, "mnt")
        writable = (str(ws), "/mnt/w") if brig.mode == "rootless" else (str(ws),)
        roots = (ws, "/mnt/w")
    else:
        for d in (ws / "proj", ws / "proj" / "keys", ws / "proj" / "keys" / "prod"):
            d.chmod(0o777)  # as root the --bind is not idmapped: "others" may rename
        args = ("--ro-bind", probe, "--deny", str(secret), "--read-only-workspace", "--bind", f"{ws}/proj")
        lines = move_attempts(f"{ws}/proj", "keys/prod/secret.txt", False, "nest")
        writable = (f"{ws}/proj",)
        roots = (ws,)
    # A mount namespace of its own (where the pins would be its to undo) is refused too.
    unshare = f"unshare -m -r sh -c 'umount -l {ws}/proj; mv {ws}/proj {ws}/gone' 2>/dev/null && echo UNSHARED; true"
    res = sh(brig, probe_script(brig, lines) + "\n" + shell_moves(str(ws), rel) + "\n" + unshare, *args)
    assert res.returncode == 0 and quiet(res.stderr) and "UNSHARED" not in res.stdout, res
    check_attempts(parse(res.stdout, lines, repr(res)), lines, writable=writable)
    assert secret.read_text() == canary + "\n", f"ATTACK WORKED: the secret left {secret}"
    assert host_files_with(ws, canary) == [str(secret)], "ATTACK WORKED: the secret was copied or moved"
    # Run 2: the canary is nowhere inside, by any path.
    tag = canary.split("-")[-1]
    public_file(brig, ws, tag)
    check_run2(sh(brig, grep_script(tag, *roots), *args), canary, "public-")
    assert secret.read_text() == canary + "\n"


# Built-in entries at every depth: ~/.ssh is itself the mask; the others
# sit in directories of their own (~/.config, ~/.local/share, ~/.cargo).
# (secret, the deny entry that masks it)
BUILTIN_SECRETS = [(".ssh/id_ed25519", ".ssh"), (".config/gcloud/credentials.db", ".config/gcloud"),
                   (".local/share/keyrings/login.keyring", ".local/share/keyrings"),
                   (".config/git/credentials", None), (".cargo/credentials.toml", None),
                   (".aws/credentials", ".aws")]


@attack("builtin-parent-rename", "workspace $HOME: run 1 renames, swaps, removes and recreates ~/.config, "
        "~/.local/share, ~/.cargo (which hold ~/.config/gcloud, keyrings, cargo credentials) and ~/.ssh, also "
        "through a second writable grant of the parent; run 2 greps the home for the keys",
        "ancestors of every built-in mask inside a writable grant are mountpoints (EBUSY)")
def test_builtin_secrets_cannot_be_moved_with_home_as_workspace(brig):
    home = brig.home
    tag = marker("home-canary").split("-")[-1]
    secrets = {rel: plant(brig, home, rel, f"SECRET-{tag}-{i}") for i, (rel, _) in enumerate(BUILTIN_SECRETS)}
    probe = brig.program("probe_fs")
    args = ("--ro-bind", probe, "--bind", f"{brig.base}:/mnt/b")
    inside_b = f"/mnt/b/{home.name}"
    # The home itself, seen through the second grant, holds them all.
    lines, shell = [["rename", inside_b, f"{inside_b}.moved"], ["exchange", inside_b, "/mnt/b/ws"]], []
    for i, (rel, masked) in enumerate(BUILTIN_SECRETS):
        lines += (move_attempts(str(home), masked or rel, bool(masked), f"h{i}")
                  + move_attempts(inside_b, masked or rel, bool(masked), f"b{i}"))
        shell.append(shell_moves(str(home), rel))
    res = sh(brig, probe_script(brig, lines) + "\n" + "\n".join(shell), *args, cwd=home)
    assert res.returncode == 0 and quiet(res.stderr), res
    check_attempts(parse(res.stdout, lines, repr(res)), lines,
                   writable=(str(home), inside_b) if brig.mode == "rootless" else (str(home),))
    for i, (rel, path) in enumerate(secrets.items()):
        assert path.read_text() == f"SECRET-{tag}-{i}\n", f"ATTACK WORKED: ~/{rel} left its path"
    assert host_files_with(home, f"SECRET-{tag}") == sorted(map(str, secrets.values())), \
        "ATTACK WORKED: a secret was copied or moved"
    public_file(brig, home, tag)
    check_run2(sh(brig, grep_script(tag, home, inside_b), *args, cwd=home), tag, "public-")


@attack("overlay-parent-rename-commit", "overlay persistent sandbox: move the directories holding a --deny "
        "file in the layer, stop and start (the masks are resolved again on the merged view), read it, commit "
        "(which would move the host's secret)",
        "the pins hold in every start of the sandbox: the rename never reaches the layer or commit")
def test_overlay_secret_cannot_be_moved_across_restart_and_commit(brig, sandboxes):
    ws = brig.workspace
    canary = marker("ovl-canary")
    rel = "proj/keys/secret.txt"
    secret = plant(brig, ws, rel, canary)
    probe = brig.program("probe_fs")
    name, _ = sandboxes.create("--workspace-mode", "overlay", "--ro-bind", probe, "--deny", str(secret))
    lines = move_attempts(str(ws), rel, False, "ovl")
    r = sandboxes.sh(name, probe_script(brig, lines) + "\n" + shell_moves(str(ws), rel))
    assert r.returncode == 0, r
    # On this kernel overlayfs alone refuses to rename a lower directory
    # (EXDEV without redirect_dir; mv then copies the masked, empty file):
    # EBUSY shows the pin refused it, which holds with redirect_dir too.
    check_attempts(parse(r.stdout, lines, repr(r)), lines, busy_only=True)
    assert sandboxes.brig_cmd("stop", name).returncode == 0
    r = sandboxes.brig_cmd("start", name)
    assert r.returncode == 0, r
    # The second start: the same attempts again, then the canary is nowhere.
    lines2 = move_attempts(str(ws), rel, False, "ovl2")
    r = sandboxes.sh(name, probe_script(brig, lines2) + "\n" + shell_moves(str(ws), rel))
    check_attempts(parse(r.stdout, lines2, repr(r)), lines2, busy_only=True)
    tag = canary.split("-")[-1]
    public_file(brig, ws, tag)
    check_run2(sandboxes.sh(name, grep_script(tag, ws)), tag, "public-")
    r = sandboxes.brig_cmd("commit", name)
    assert r.returncode == 0, r
    assert secret.read_text() == canary + "\n", f"ATTACK WORKED: commit moved the host's secret: {r!r}"
    assert host_files_with(ws, canary) == [str(secret)], "ATTACK WORKED: commit copied or moved the secret"
    check_run2(sandboxes.sh(name, grep_script(tag, ws)), tag, "public-")


@attack("secret-another-name", "the same secret under another name: a run plants a hard link where a secret does "
        "not exist yet (`ln ~/notes ~/.netrc`, `ln ~/notes ~/.aws/credentials`); the user later writes a token into "
        "it in place; the next run reads the token as ~/notes while the mask hides ~/.netrc",
        "a denied file in a writable grant (or one directly in a denied directory) with more than one hard "
        "link is refused (125)")
def test_hard_link_planted_at_a_missing_secret_is_refused(brig):
    home = brig.home
    brig.chown(home)
    tag = marker("link-canary").split("-")[-1]
    r = sh(brig, "echo notes > notes && ln notes .netrc && echo notes > notes2 && mkdir .aws && "
                 "ln notes2 .aws/credentials && echo planted", cwd=home)
    assert r.returncode == 0 and "planted" in r.stdout, r
    # The user stores credentials in the files the sandbox planted, in place.
    for i, p in enumerate((home / ".netrc", home / ".aws" / "credentials")):
        with open(p, "a") as f:
            f.write(f"TOKEN-{tag}-{i}\n")
    for fix in (None, ".netrc", ".aws/credentials"):
        if fix:  # the user removes the planted link the error names
            (home / ("notes" if fix == ".netrc" else "notes2")).unlink()
        r = sh(brig, f"cat notes notes2 2>/dev/null; grep -r -a -l -- {tag} . 2>/dev/null; echo RAN", cwd=home)
        assert f"TOKEN-{tag}" not in r.stdout and tag not in r.stdout, f"ATTACK WORKED: the token read: {r!r}"
        if fix == ".aws/credentials":
            assert r.returncode == 0 and "RAN" in r.stdout, r
        else:
            want = ".netrc" if fix is None else ".aws/credentials"
            assert r.returncode == 125 and "RAN" not in r.stdout, r
            assert f"{home}/{want}' is hidden as a secret" in r.stderr and "hard links" in r.stderr, r.stderr


@attack("deny-through-symlink", "a secret named through a symlink in the workspace: $HOME's ~/.config -> "
        "dotfiles/config (stow) holding ~/.config/gcloud, or --deny ws/link/key with link -> real; run 1 removes, "
        "replaces (a directory, a link elsewhere) or renames the symlink; run 2's deny list finds nothing at the "
        "old name and the secret shows at its real path",
        "every symlink a denied path is named through, inside a writable grant, is bound onto itself (EBUSY), "
        "and the directories above it are pinned")
@pytest.mark.parametrize("case", ["builtin-config-link", "deny-through-link"])
def test_symlink_a_secret_is_named_through_cannot_be_replaced(brig, case):
    home = brig.home
    brig.chown(home)
    tag = marker("via-link").split("-")[-1]
    if case == "builtin-config-link":
        plant(brig, home, "dotfiles/config/gcloud/credentials.db", f"SECRET-{tag}")
        link, target, args = home / ".config", "dotfiles/config", []
    else:
        plant(brig, home, "proj/real/keys/id", f"SECRET-{tag}")
        link, target, args = home / "proj" / "link", "real", ["--deny", f"{home}/proj/link/keys/id"]
    link.symlink_to(target)
    os.lchown(link, brig.uid, brig.uid)
    public_file(brig, home, tag)
    rel = link.relative_to(home)
    par = rel.parent
    run1 = "; ".join([f"rm -f {rel} && echo REMOVED", f"mv {rel} {rel}.mv && echo RENAMED",
                      f"mkdir {rel}.d && mv -T {rel}.d {rel} && echo REPLACED-BY-DIR",
                      f"ln -s /nowhere {rel}.l && mv -T {rel}.l {rel} && echo REPLACED-BY-LINK",
                      f"ln -sfn /nowhere {rel} && echo RELINKED"]
                     + ([f"mv {par} {par}.mv && echo PARENT-RENAMED"] if str(par) != "." else []) + ["true"])
    r = sh(brig, run1, *args, cwd=home)
    assert r.returncode == 0, r
    # Run 2 with the same policy never sees the secret, and on the host the
    # symlink is the one the user made, where it was
    check_run2(sh(brig, grep_script(tag, home), *args, cwd=home), tag, "public-")
    assert link.is_symlink() and os.readlink(link) == target, (r, sorted(os.listdir(link.parent)))
    for word in ("REMOVED", "RENAMED", "REPLACED", "RELINKED"):
        assert word not in r.stdout, r


def test_gnupg_lock_links_inside_a_denied_directory_do_not_stop_runs(brig):
    """GnuPG locks its keyring with a hard link (pubring.kbx.lock to its
    .#lk0x... file), held while a gpg runs and left by one killed holding
    it. Both names are in ~/.gnupg, hidden whole: the run goes ahead with
    $HOME as the workspace and the key stays hidden. A third name outside
    the directory is the planted link of row 100: refused."""
    home = brig.home
    brig.chown(home)
    tag = marker("gpg-lock").split("-")[-1]
    plant(brig, home, ".gnupg/private-keys-v1.d/k.key", f"KEY-{tag}")
    lk = home / ".gnupg" / ".#lk0x000055d0c0ffee00.host.4242"
    lk.write_text(f"4242\nhost\nLOCK-{tag}\n")
    brig.chown(lk)
    os.link(lk, home / ".gnupg" / "pubring.kbx.lock")
    r = sh(brig, f"grep -r -a -l -- {tag} . 2>/dev/null; echo RAN", cwd=home)
    assert r.returncode == 0 and r.stdout == "RAN\n", r
    os.link(lk, home / "notes")
    r = sh(brig, f"cat notes >/dev/null; echo RAN", cwd=home)
    assert r.returncode == 125 and "RAN" not in r.stdout and "hard links" in r.stderr, r


def test_pins_keep_nested_grants_and_ordinary_renames(brig, scratch):
    """A pinned directory is a copy of itself with every mount below it: a
    grant nested in it stays visible and writable; renames inside it work,
    and across its edge mv copies (EXDEV); the secret stays hidden."""
    home = brig.home
    tag = marker("nested").split("-")[-1]
    plant(brig, home, ".config/gcloud/credentials.db", f"SECRET-{tag}")
    plant(brig, home, ".config/tool/settings", "settings")
    other = scratch / "other"
    other.mkdir()
    (other / "f").write_text(f"NESTED-{tag}\n")
    other.chmod(0o777)  # as root a --bind is not idmapped: the sandbox user writes as "others"
    (other / "f").chmod(0o644)
    (home / ".config" / "nested").mkdir()
    brig.chown(home / ".config" / "nested")
    script = ("cat .config/nested/f && echo new > .config/nested/g && "
              "mv .config/tool/settings .config/tool/settings.new && mv .config/tool .config/tool2 && "
              "mv .config/tool2/settings.new ./settings && cat settings && "
              f"{{ grep -r -a -l -- SECRET-{tag} . 2>/dev/null; true; }}; echo END")
    r = sh(brig, script, "--bind", f"{other}:{home}/.config/nested", cwd=home)
    assert r.returncode == 0 and r.stdout == f"NESTED-{tag}\nsettings\nEND\n", r
    assert (other / "g").read_text() == "new\n"
    assert (home / "settings").read_text() == "settings\n" and (home / ".config" / "tool2").is_dir()
    assert (home / ".config" / "gcloud" / "credentials.db").read_text() == f"SECRET-{tag}\n"


@attack("secret-another-name", "the same secret under another name: a hard link planted before it existed, or the "
        "host's bind mount showing the home at a second path (`--ro-bind /srv/home-alias`), and `--deny` given "
        "by the second name while the first is granted",
        "denied names are also resolved through the mount table (every name a grant's directories have)")
def test_secret_granted_under_a_second_name_is_hidden(brig, scratch):
    """The host shows the home also at ALIAS (a bind mount, in a private
    mount namespace of the root test runner): a grant of ALIAS hides
    ~/.ssh as a grant of the home would, a grant inside ~/.ssh by that name
    is refused, and a --deny by the alias name hides the file in a grant
    of the home (and pins it there)."""
    if not IS_ROOT:
        pytest.skip("BIND-MOUNT ALIAS NOT TESTED: making one needs the suite to run as root")
    home = brig.home
    tag = marker("alias").split("-")[-1]
    plant(brig, home, ".ssh/id_ed25519", f"SECRET-{tag}-ssh")
    plant(brig, home, "data/keys/k", f"SECRET-{tag}-data")
    for d in (home / "data", home / "data" / "keys"):
        d.chmod(0o777)  # as root the --bind is not idmapped: "others" may rename
    public = public_file(brig, home, tag)
    alias = scratch / "alias"
    alias.mkdir()
    probe = brig.program("probe_fs")
    b = " ".join(shlex.quote(c) for c in brig.cmd())
    def grep(what, where):
        return f"grep -r -a -l -e {tag}-{what} -e PUBLIC.{tag} {where} 2>/dev/null; echo GREP-DONE"
    script = f"""mount --bind {home} {alias}
{b} run --ro-bind {alias}:/mnt/a -- sh -c '{grep("ssh", "/mnt/a")}'; echo "rc1=$?"
{b} run --ro-bind {alias}/.ssh:/mnt/k -- true; echo "rc2=$?"
{b} run --ro-bind {probe} --bind {home}:/mnt/h --deny {alias}/data/keys/k -- sh -c \\
    '{grep("data", "/mnt/h")}; {probe} rename /mnt/h/data/keys /mnt/h/data/moved'; echo "rc3=$?"
"""
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], cwd=brig.workspace,
                       env=brig.env(), capture_output=True, text=True, timeout=120)
    assert "GREP-DONE" in r.stdout and "rc1=0" in r.stdout, r
    found = [l for l in r.stdout.splitlines() if l.startswith("/mnt/")]
    # grep could see (the public file), and saw no secret
    assert found == [f"/mnt/a/{public.name}", f"/mnt/h/{public.name}"], f"SECRET FOUND under a second name: {r!r}"
    assert "rc2=125" in r.stdout and "deny list" in r.stderr, r
    assert "rename /mnt/h/data/keys: fail EBUSY" in r.stdout and "rc3=1" in r.stdout, r
    assert (home / "data" / "keys" / "k").read_text() == f"SECRET-{tag}-data\n"


def test_grant_inside_a_hidden_secret_is_refused_before_anything_is_made(brig, scratch):
    """--bind X:~/.ssh/inner with the workspace $HOME: the mount point
    would be made in the host's ~/.ssh and then hidden by the mask. Refused
    (125, naming the flag) before anything is created."""
    home = brig.home
    plant(brig, home, ".ssh/id_ed25519", "key")
    plant(brig, home, ".config/gcloud/x", "gc")
    other = scratch / "other"
    other.mkdir()
    for flag, spec in (("--bind", f"{other}:{home}/.ssh/inner"), ("--ro-bind", f"{other}:{home}/.config/gcloud/in"),
                       ("--tmpfs", f"{home}/.ssh/t"), ("--bind", f"{other}:{home}/.ssh")):
        r = sh(brig, "echo RAN", flag, spec, cwd=home)
        assert r.returncode == 125 and "RAN" not in r.stdout, (flag, spec, r)
        assert flag in r.stderr and "hidden (secret deny list)" in r.stderr, r.stderr
    assert sorted(os.listdir(home / ".ssh")) == ["id_ed25519"], "a mount point was made in the host's ~/.ssh"
    assert sorted(os.listdir(home / ".config" / "gcloud")) == ["x"]


@attack("secret-another-name", "the same secret under another name: a run makes the missing ~/.aws and plants "
        "~/.aws/credentials -> ../notes; `aws configure` later writes the key through the link into ~/notes",
        "what a symlink directly in a denied directory points to is hidden too, where it really lives")
def test_symlink_planted_in_a_missing_secret_directory_is_followed(brig):
    home = brig.home
    brig.chown(home)
    tag = marker("symlink-canary").split("-")[-1]
    r = sh(brig, "echo notes > notes && mkdir .aws && ln -s ../notes .aws/credentials && echo planted", cwd=home)
    assert r.returncode == 0 and "planted" in r.stdout, r
    with open(home / ".aws" / "credentials", "a") as f:  # the user stores a key, through the link
        f.write(f"KEY-{tag}\n")
    assert f"KEY-{tag}" in (home / "notes").read_text()
    public_file(brig, home, tag)
    r = sh(brig, f"cat notes; grep -r -a -l -- {tag} . 2>/dev/null; echo END", cwd=home)
    assert r.returncode == 0 and r.stdout.endswith("END\n"), r
    assert f"KEY-{tag}" not in r.stdout, f"ATTACK WORKED: the key read through the planted link: {r!r}"
    assert [l for l in r.stdout.splitlines() if tag in l] == [f"./public-{tag}"], r
