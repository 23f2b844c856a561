"""Secrets stay hidden even when a parent directory is granted.

Fake secrets with unique markers are planted for EVERY "~/" entry of the
built-in deny list (read from src/lib/policy/policy.c, so a new entry is covered
automatically) next to public files with their own markers; the sandbox
then greps the granted tree. Finding a secret marker fails the test; not
finding a public one fails it too (the grep must be able to see).
"""
import os
import pathlib
import re
import shlex
import uuid

import pytest

from conftest import IS_ROOT, REPO, mountinfo
from fs_helpers import (WRITE_REFUSED, assert_refused, assert_worked, field, marker, parse, probe_run,
                        probe_script, run, run_cmd, sh)


def builtin_deny():
    src = (REPO / "src" / "lib" / "policy" / "policy.c").read_text()
    body = re.search(r"default_deny\[\]\s*=\s*\{(.*?)NULL", src, re.S)
    assert body, "default_deny[] not found in src/lib/policy/policy.c"
    entries = re.findall(r'"([^"]+)"', body.group(1))
    assert len(entries) > 20, entries
    return entries


BUILTIN = builtin_deny()
HOME_ENTRIES = [e[2:] for e in BUILTIN if e.startswith("~/")]
# Entries that are directories in real life; the rest are planted as files.
DIR_ENTRIES = {".ssh", ".gnupg", ".password-store", ".local/share/keyrings", ".aws", ".azure",
               ".config/gcloud", ".kube", ".docker", ".oci", ".config/doctl", ".terraform.d",
               ".config/rclone", ".config/gh", ".config/hub", ".config/openai", ".mozilla",
               ".config/google-chrome", ".config/chromium", ".config/BraveSoftware",
               ".config/microsoft-edge", ".thunderbird"}
# Non-secret neighbours: must stay readable wherever their home is granted.
PUBLIC = ["notes.txt", ".bashrc", ".config/public.conf", ".local/share/other/data.txt",
          ".cargo/config.toml", ".m2/repository.txt", ".claude/settings.json", ".codex/config.toml",
          ".gem/specs.txt", "project/README"]


class Planted:
    """A fake home full of secrets and public files, all world-readable."""

    def __init__(self, home):
        self.home = pathlib.Path(home)
        self.tag = uuid.uuid4().hex
        self.secrets = {}   # relative path of the deny entry -> its marker
        self.public = {}
        for rel in HOME_ENTRIES:
            m = f"SECRET-{self.tag}-{len(self.secrets)}"
            p = self.home / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if rel in DIR_ENTRIES:
                p.mkdir(exist_ok=True)
                (p / "secret").write_text(m + "\n")
                (p / "secret").chmod(0o644)
                p.chmod(0o755)
            else:
                p.write_text(m + "\n")
                p.chmod(0o644)
            self.secrets[rel] = m
        for rel in PUBLIC:
            p = self.home / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"PUBLIC-{self.tag}-{rel}\n")
            p.chmod(0o644)
            self.public[rel] = f"PUBLIC-{self.tag}-{rel}"
        for d in [self.home, *self.home.rglob("*")]:
            if d.is_dir():
                d.chmod(0o755)

    def secret_file(self, rel):
        return self.home / rel / "secret" if rel in DIR_ENTRIES else self.home / rel

    def unchanged(self):
        for rel, m in self.secrets.items():
            assert self.secret_file(rel).read_text() == m + "\n", f"host secret ~/{rel} was changed"


def check_view(brig, planted, inside_home, *brig_args, public_root=None, writable=False, **kw):
    """Run inside with the planted home visible at `inside_home`: grep it,
    read, list and attack every secret; check the public files."""
    probe = brig.program("probe_fs")
    lines = []
    for rel in HOME_ENTRIES:
        p = f"{inside_home}/{rel}"
        if rel in DIR_ENTRIES:
            lines += [["list", p], ["read", f"{p}/secret"], ["write", f"{p}/new"], ["rmdir", p],
                      ["rename", p, f"{p}.moved"], ["umount", p]]
        else:
            lines += [["read", p], ["overwrite", p, "pwned"], ["unlink", p], ["umount", p],
                      ["link", p, f"{p}.hardlink"]]
    for rel in PUBLIC:
        lines.append(["read", f"{inside_home}/{rel}"])
    root = public_root or inside_home
    script = (f"grep -r -a -l -- {planted.tag} {shlex.quote(str(root))} 2>/dev/null | sed 's/^/FOUND /'\n"
              + probe_script(brig, lines))
    res = sh(brig, script, "--ro-bind", probe, *brig_args, **kw)
    out = parse(res.stdout, lines, repr(res))
    found = {l[len("FOUND "):] for l in res.stdout.splitlines() if l.startswith("FOUND ")}
    leaked = [rel for rel, m in planted.secrets.items() if m in res.stdout]
    assert not leaked, f"SECRET READABLE inside: {leaked}"
    expected = {f"{inside_home}/{rel}" for rel in PUBLIC}
    assert found == expected, (f"grep over {root}: secrets found {sorted(found - expected)}, "
                               f"public files missing {sorted(expected - found)}")
    for rel in HOME_ENTRIES:
        p = f"{inside_home}/{rel}"
        if rel in DIR_ENTRIES:
            assert field(assert_worked(out, f"list {p}"), "n") == "0", f"~/{rel} does not look empty"
            assert_refused(out, f"read {p}/secret", {"ENOENT"})
            assert_refused(out, f"write {p}/new")
            assert_refused(out, f"rmdir {p}", WRITE_REFUSED | {"EBUSY"})
            assert_refused(out, f"rename {p}", WRITE_REFUSED | {"EBUSY"})
        else:
            assert field(assert_worked(out, f"read {p}"), "size") == "0", f"~/{rel} does not look empty"
            assert_refused(out, f"overwrite {p}")
            assert_refused(out, f"unlink {p}", WRITE_REFUSED | {"EBUSY"})
            assert_refused(out, f"link {p}", WRITE_REFUSED | {"EXDEV"})
        assert_refused(out, f"umount {p}", {"EPERM"})
    for rel in PUBLIC:
        data = field(assert_worked(out, f"read {inside_home}/{rel}"), "data")
        assert data.startswith(planted.public[rel]), data
    planted.unchanged()
    return res, out


# ---- a granted parent never shows the secrets -----------------------------


def test_deny_list_entries_are_all_planted():
    assert HOME_ENTRIES and set(DIR_ENTRIES) <= set(HOME_ENTRIES), sorted(set(DIR_ENTRIES) - set(HOME_ENTRIES))
    for must in (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".netrc",
                 ".git-credentials", ".npmrc", ".pypirc", ".password-store", ".local/share/keyrings",
                 ".vault-token", ".mozilla", ".config/google-chrome", ".config/chromium",
                 ".config/BraveSoftware"):
        assert must in HOME_ENTRIES, f"~/{must} missing from the built-in deny list"
    for must in ("/etc/shadow", "/etc/gshadow", "/etc/ssh/*key*", "/etc/ssl/private"):
        assert must in BUILTIN, f"{must} missing from the built-in deny list"


def test_secrets_hidden_when_workspace_is_home(brig):
    """An agent started in the home directory: the home is the (writable)
    workspace, and every secret in it is an empty read-only stub."""
    planted = Planted(brig.home)
    brig.chown(brig.home)
    check_view(brig, planted, str(brig.home), cwd=brig.home)


def test_secrets_hidden_when_parent_bound_elsewhere_read_only(brig):
    planted = Planted(brig.home)
    check_view(brig, planted, f"/mnt/p/{brig.home.name}", "--ro-bind", f"{brig.base}:/mnt/p",
               public_root="/mnt/p")


def test_secrets_hidden_when_parent_bound_elsewhere_writable(brig):
    planted = Planted(brig.home)
    res, out = check_view(brig, planted, f"/mnt/p/{brig.home.name}", "--bind", f"{brig.base}:/mnt/p",
                          public_root="/mnt/p")
    assert "/mnt/p" in res.stdout


def test_secrets_hidden_when_parent_bound_at_same_path(brig):
    """--ro-bind PARENT: the home inside is brig's empty tmpfs, the public
    file beside it is visible, no marker anywhere under PARENT."""
    planted = Planted(brig.home)
    top = brig.base / "public-top.txt"
    top.write_text(f"PUBLIC-{planted.tag}-top\n")
    top.chmod(0o644)
    res = sh(brig, f"grep -r -a -l -- {planted.tag} {brig.base} 2>/dev/null; ls -A {brig.home} | wc -l",
             "--ro-bind", brig.base)
    lines = res.stdout.split()
    assert lines == [str(top), "0"], res


# A bind of / itself is refused (it holds brig's state root, see
# test_host_paths.py); the widest grants are a parent of the home and /etc.
def _wide_binds(brig):
    return ["--ro-bind", f"{brig.base}:/mnt/host{brig.base}", "--ro-bind", "/etc:/mnt/host/etc"]


def test_secrets_hidden_when_root_is_bound(brig):
    """Even a bind of a parent of the home and of /etc (elsewhere in the
    sandbox) shows no secret of the host."""
    planted = Planted(brig.home)
    res = sh(brig, f"grep -r -a -l -- SECRET-{planted.tag} /mnt/host{brig.base} 2>/dev/null;"
                   f" cat /mnt/host{brig.home}/.ssh/secret /mnt/host{brig.home}/.netrc 2>/dev/null;"
                   " wc -c < /mnt/host/etc/shadow; ls -A /mnt/host/etc/ssl/private | wc -l",
             *_wide_binds(brig))
    assert planted.tag not in res.stdout, f"SECRET READABLE: {res.stdout}"
    assert res.stdout.split() == ["0", "0"], res


def test_root_bind_shows_the_host_root(brig):
    planted = Planted(brig.home)
    check_view(brig, planted, f"/mnt/host{brig.home}", *_wide_binds(brig),
               public_root=f"/mnt/host{brig.base}")


def test_rename_of_a_parent_does_not_uncover_secrets(brig):
    """Moving a directory that holds masked secrets moves the masks too."""
    planted = Planted(brig.home)
    brig.chown(brig.home)
    for d in (".config", ".local"):
        brig.chown(brig.home / d)
    probe = brig.program("probe_fs")
    h = brig.home
    script = (f"{probe} rename {h}/.config {h}/cfg-moved; {probe} rename {h}/.local {h}/local-moved;"
              f" cat {h}/cfg-moved/gcloud/secret {h}/local-moved/share/keyrings/secret 2>&1;"
              f" grep -r -a -l -- SECRET-{planted.tag} {h} 2>/dev/null | sed 's/^/FOUND /'")
    try:
        res = sh(brig, script, "--ro-bind", probe, cwd=h)
        assert "FOUND" not in res.stdout and f"SECRET-{planted.tag}" not in res.stdout, res
    finally:
        for a, b in ((".config", "cfg-moved"), (".local", "local-moved")):
            if (h / b).exists():
                (h / b).rename(h / a)


def test_host_etc_secrets_are_empty(brig):
    res, out = probe_run(brig, [["read", "/etc/shadow"], ["read", "/etc/gshadow"], ["stat", "/etc/shadow"],
                                ["list", "/etc/ssl/private"], ["read", "/etc/passwd", "5"],
                                ["overwrite", "/etc/shadow", "x"], ["umount", "/etc/shadow"]])
    for f in ("/etc/shadow", "/etc/gshadow"):
        if os.path.exists(f):
            assert os.path.getsize(f) > 0
            assert field(assert_worked(out, f"read {f}"), "size") == "0", f"{f} not masked"
    assert field(assert_worked(out, "stat /etc/shadow"), "size") == "0"
    assert field(assert_worked(out, "list /etc/ssl/private"), "n") == "0"
    assert field(assert_worked(out, "read /etc/passwd"), "data") == "root:"
    assert_refused(out, "overwrite /etc/shadow")
    assert_refused(out, "umount /etc/shadow", {"EPERM"})


def in_private_mountns(brig, setup, *brig_args, script):
    """Run brig inside a private mount namespace of the (root) test runner
    after `setup` (a root shell snippet that mounts fakes over host files),
    so the fakes can be world-readable without touching the host."""
    if not IS_ROOT:
        pytest.skip("HOST-SECRET FAKES NOT TESTED: planting fakes over /etc needs the suite to run as root")
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-ec", setup + '\nexec "$@"', "sh",
           *brig.cmd("run", *brig_args, "--", "sh", "-c", script)]
    return run_cmd(cmd, cwd=brig.workspace, env=brig.env())


def test_host_secrets_hidden_with_readable_fakes(brig):
    """World-readable fake /etc/shadow, gshadow, ssh host keys and TLS keys
    (mounted over the real ones in a private mount namespace): inside they
    are empty, at /etc and through --ro-bind /etc:/mnt/etc; ssh_config is not."""
    m = marker("hostsecret")
    fake = brig.base / "fake"
    (fake / "ssh").mkdir(parents=True)
    (fake / "private").mkdir()
    for name in ("shadow", "gshadow"):
        (fake / name).write_text(f"{m}-{name}\n")
    for name in ("ssh_host_ed25519_key", "ssh_host_rsa_key", "ssh_host_ed25519_key.pub"):
        (fake / "ssh" / name).write_text(f"{m}-{name}\n")
    (fake / "ssh" / "ssh_config").write_text(f"PUBLIC-{m}\n")
    (fake / "private" / "server.key").write_text(f"{m}-tls\n")
    for p in [fake, *fake.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    setup = "\n".join([
        f"mount --bind {fake}/shadow /etc/shadow", f"mount --bind {fake}/gshadow /etc/gshadow",
        f"mount --bind {fake}/ssh /etc/ssh", f"mount --bind {fake}/private /etc/ssl/private",
    ])
    probe = brig.program("probe_fs")
    lines = []
    for base in ("/etc", "/mnt/etc"):
        lines += [["read", f"{base}/shadow"], ["read", f"{base}/gshadow"],
                  ["read", f"{base}/ssh/ssh_host_ed25519_key"], ["read", f"{base}/ssh/ssh_host_rsa_key"],
                  ["read", f"{base}/ssh/ssh_host_ed25519_key.pub"], ["read", f"{base}/ssh/ssh_config"],
                  ["list", f"{base}/ssl/private"]]
    script = (f"grep -r -a -l -- {m} /etc /mnt/etc 2>/dev/null | sed 's/^/FOUND /'\n" + probe_script(brig, lines))
    cp = in_private_mountns(brig, setup, "--ro-bind", probe, "--ro-bind", "/etc:/mnt/etc", script=script)
    out = parse(cp.stdout, lines, f"rc={cp.returncode} out={cp.stdout!r} err={cp.stderr!r}")
    found = sorted(l[6:] for l in cp.stdout.splitlines() if l.startswith("FOUND "))
    assert found == ["/etc/ssh/ssh_config", "/mnt/etc/ssh/ssh_config"], f"grep found {found}"
    assert f"{m}-" not in cp.stdout, "SECRET READABLE inside"
    for base in ("/etc", "/mnt/etc"):
        for f in ("shadow", "gshadow", "ssh/ssh_host_ed25519_key", "ssh/ssh_host_rsa_key", "ssh/ssh_host_ed25519_key.pub"):
            assert field(assert_worked(out, f"read {base}/{f}"), "size") == "0", f"{base}/{f} not masked"
        assert field(assert_worked(out, f"read {base}/ssh/ssh_config"), "data") == f"PUBLIC-{m}\\x0a"
        assert field(assert_worked(out, f"list {base}/ssl/private"), "n") == "0"


def test_every_passwd_home_is_protected(brig):
    """~/ entries cover every home in /etc/passwd, not only the caller's."""
    other = brig.base / "otheruser"
    other.mkdir()
    planted = Planted(other)
    fake_passwd = brig.base / "passwd"
    fake_passwd.write_text(pathlib.Path("/etc/passwd").read_text()
                           + f"brigother:x:4711:4711::{other}:/bin/sh\n")
    fake_passwd.chmod(0o644)
    probe = brig.program("probe_fs")
    lines = [["read", f"/mnt/p/otheruser/{rel}" + ("/secret" if rel in DIR_ENTRIES else "")]
             for rel in HOME_ENTRIES]
    lines += [["read", f"/mnt/p/otheruser/{rel}"] for rel in PUBLIC]
    script = probe_script(brig, lines)
    cp = in_private_mountns(brig, f"mount --bind {fake_passwd} /etc/passwd", "--ro-bind", probe,
                            "--ro-bind", f"{brig.base}:/mnt/p", script=script)
    out = parse(cp.stdout, lines, f"rc={cp.returncode} out={cp.stdout!r} err={cp.stderr!r}")
    assert f"SECRET-{planted.tag}" not in cp.stdout, "SECRET READABLE in another user's home"
    for rel in HOME_ENTRIES:
        key = f"read /mnt/p/otheruser/{rel}" + ("/secret" if rel in DIR_ENTRIES else "")
        ok, detail = out[key]
        assert not ok or field(detail, "size") == "0", f"~brigother/{rel}: {detail}"
    for rel in PUBLIC:
        assert field(assert_worked(out, f"read /mnt/p/otheruser/{rel}"), "data").startswith(planted.public[rel])


def test_home_with_glob_characters_is_protected(brig):
    home = brig.base / "we[ir]d-home"
    home.mkdir()
    planted = Planted(home)
    brig.chown(home)
    res = sh(brig, f"cat .ssh/secret .aws/secret .netrc 2>/dev/null; echo done", cwd=home,
             env={"HOME": str(home)})
    assert res.returncode == 0 and "done" in res.stdout, res
    assert f"SECRET-{planted.tag}" not in res.stdout, f"SECRET READABLE: {res.stdout}"


# ---- --deny and --unsafe-allow-secret -------------------------------------


def test_user_deny_entries(brig):
    m = marker("userdeny")
    h = brig.home
    (h / ".myapp").mkdir()
    (h / ".myapp" / "token").write_text(m)
    (h / "data").mkdir()
    (h / "data" / "api.key").write_text(m)
    (h / "data" / "readme").write_text("PUBLIC-" + m + "\n")
    for p in [h, *h.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
        brig.chown(p)
    res = sh(brig, f"cat .myapp/token data/api.key data/readme 2>&1; wc -c < data/api.key; ls -A .myapp | wc -l",
             "--deny", "~/.myapp", "--deny", str(h / "data" / "api.key"), cwd=h)
    assert res.returncode == 0, res
    text = res.stdout.replace("PUBLIC-" + m, "")
    assert m not in text, f"user --deny entry readable: {res.stdout}"
    assert "PUBLIC-" + m in res.stdout
    assert res.stdout.split()[-2:] == ["0", "0"], res
    res = sh(brig, "true", "--deny", "relative/path")
    assert res.returncode == 125, res
    res = sh(brig, "true", "--deny", "~/../etc")
    assert res.returncode == 125, res


def test_unsafe_allow_secret_removes_an_entry_loudly(brig):
    planted = Planted(brig.home)
    brig.chown(brig.home)
    res = sh(brig, "cat .netrc; cat .ssh/secret 2>/dev/null; echo end", "--unsafe-allow-secret", "~/.netrc",
             cwd=brig.home)
    assert res.returncode == 0, res
    assert "WARNING" in res.stderr and ".netrc" in res.stderr, res.stderr
    assert planted.secrets[".netrc"] in res.stdout, "the allowed secret should now be readable"
    assert planted.secrets[".ssh"] not in res.stdout, "other secrets must stay hidden"
    res = sh(brig, "echo ran", "--unsafe-allow-secret", "~/.not-a-builtin")
    assert res.returncode == 125 and "ran" not in res.stdout, res


@pytest.mark.whole_host  # the host's whole mount table, before and after
def test_bind_source_inside_a_secret_is_refused(brig):
    planted = Planted(brig.home)
    h = brig.home
    before = mountinfo()
    for spec in (f"{h}/.ssh", f"{h}/.ssh/secret:/x", f"{h}//.ssh", f"{h}/./.ssh", f"{h}/.ssh/",
                 f"{h}/.config/gcloud:/x", f"{h}/.netrc:/x", f"{h}/.local/share/keyrings/secret:/x",
                 "/etc/shadow:/x", "/etc/ssl/private:/x"):
        for flag in ("--ro-bind", "--bind"):
            res = sh(brig, "echo RAN; cat /x/secret /x 2>/dev/null", flag, spec)
            assert res.returncode == 125, f"{flag} {spec}: {res!r}"
            assert "RAN" not in res.stdout and planted.tag not in res.stdout
            assert "deny list" in res.stderr, f"{flag} {spec}: {res.stderr!r}"
    res = sh(brig, "echo RAN", "--ro-bind", f"{h}/.ssh/../.ssh:/x")
    assert res.returncode == 125 and "RAN" not in res.stdout, res
    assert mountinfo() == before


# ---- symlink attacks --------------------------------------------------------


def test_workspace_symlinks_do_not_reach_host_files(brig):
    planted = Planted(brig.home)
    ws = brig.workspace
    links = {"to_root": "/root", "to_ssh": f"{brig.home}/.ssh", "to_home": str(brig.home),
             "to_parent": str(brig.base), "to_shadow": "/etc/shadow", "rel_ssh": "../home/.ssh",
             "rel_up": "../../../../../../" + str(brig.home).lstrip("/")}
    for name, target in links.items():
        (ws / name).symlink_to(target)
    script = "; ".join(f"cat {n}/.ssh/secret {n}/secret {n} {n}/notes.txt 2>/dev/null" for n in links)
    script += f"; grep -r -a -l -R -- {planted.tag} . 2>/dev/null | sed 's/^/FOUND /'; echo end"
    res = sh(brig, script)
    assert res.returncode == 0 and res.stdout.rstrip().endswith("end"), res
    assert planted.tag not in res.stdout, f"host file reached through a workspace symlink: {res.stdout}"


def test_bind_source_with_symlink_component_is_refused(brig):
    planted = Planted(brig.home)
    ws = brig.workspace
    (ws / "sshlink").symlink_to(brig.home / ".ssh")
    (ws / "homelink").symlink_to(brig.home)
    for spec in (f"{ws}/sshlink/secret:/x", f"{ws}/homelink/.ssh:/x", f"{ws}/homelink/notes.txt:/x"):
        res = sh(brig, "echo RAN; cat /x /x/secret 2>/dev/null", "--ro-bind", spec)
        assert res.returncode == 125 and "RAN" not in res.stdout, f"{spec}: {res!r}"
        assert "symlink" in res.stderr, res.stderr
        assert planted.tag not in res.stdout


def test_bind_source_symlink_never_exposes_a_secret(brig):
    """Whatever brig does with a trailing symlink in a bind source, the
    secret it points to is not readable inside."""
    planted = Planted(brig.home)
    ws = brig.workspace
    (ws / "sshlink").symlink_to(brig.home / ".ssh")
    (ws / "netrclink").symlink_to(brig.home / ".netrc")
    for spec in (f"{ws}/sshlink:/x", f"{ws}/netrclink:/x"):
        for extra in ([], ["--ro-bind", f"{brig.base}:{brig.base}"]):
            res = sh(brig, "cat /x /x/secret 2>/dev/null; ls -A /x/ 2>/dev/null; echo end", "--ro-bind", spec, *extra)
            assert res.returncode in (0, 125), res
            assert planted.tag not in res.stdout, f"SECRET READABLE through --ro-bind {spec}: {res.stdout}"


def test_bind_source_trailing_symlink_is_refused(brig):
    Planted(brig.home)
    ws = brig.workspace
    (ws / "sshlink").symlink_to(brig.home / ".ssh")
    (ws / "notelink").symlink_to(brig.home / "notes.txt")
    for spec in (f"{ws}/sshlink:/x", f"{ws}/notelink:/x", f"{ws}/sshlink"):
        res = sh(brig, "echo RAN", "--ro-bind", spec)
        assert res.returncode == 125 and "RAN" not in res.stdout, f"{spec}: {res!r}"
        assert "symlink" in res.stderr, res.stderr


@pytest.mark.whole_host  # the host's whole mount table, before and after
def test_destination_symlink_in_workspace_cannot_redirect_a_mount(brig):
    outside = brig.base / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    src = brig.base / "src"
    src.mkdir()
    (src / "f").write_text("x")
    ws = brig.workspace
    (ws / "link").symlink_to(outside)
    (ws / "rel").symlink_to("../outside")
    before = mountinfo()
    for args in (["--tmpfs", f"{ws}/link"], ["--bind", f"{src}:{ws}/link"], ["--ro-bind", f"{src}:{ws}/rel"],
                 ["--tmpfs", f"{ws}/link/sub"], ["--bind", f"{src}:{ws}/link/sub"], ["--tmpfs", f"{ws}/rel/sub"],
                 ["--tmpfs", f"{ws}/link/a/b/c:1M"]):
        res = sh(brig, f"echo RAN; touch {ws}/link/planted", *args)
        assert res.returncode == 125 and "RAN" not in res.stdout, f"{args}: {res!r}"
        assert list(outside.iterdir()) == [], f"{args}: created outside: {list(outside.iterdir())}"
    assert (ws / "link").is_symlink() and os.readlink(ws / "link") == str(outside)
    assert mountinfo() == before


def test_destination_symlink_is_refused_as_symlink(brig):
    outside = brig.base / "outside"
    outside.mkdir()
    (brig.base / "file").write_text("x")
    ws = brig.workspace
    (ws / "link").symlink_to(outside)
    (ws / "flink").symlink_to(outside / "f")
    for args in (["--ro-bind", f"{brig.base / 'file'}:{ws}/flink"], ["--tmpfs", f"{ws}/link"],
                 ["--bind", f"{outside}:{ws}/link"], ["--tmpfs", f"{ws}/link/sub"]):
        res = sh(brig, "echo RAN", *args)
        assert res.returncode == 125 and "RAN" not in res.stdout, f"{args}: {res!r}"
        assert "is a symlink" in res.stderr, f"{args}: {res.stderr!r}"


def test_dotdot_paths_are_refused(brig):
    planted = Planted(brig.home)
    outside = brig.base / "escape"
    ws = brig.workspace
    for args in (["--ro-bind", f"{ws}/../home/.ssh:/x"], ["--ro-bind", "../home:/x"],
                 ["--bind", f"{ws}/..:/x"], ["--tmpfs", f"{ws}/../escape"], ["--bind", f"{ws}:{ws}/../escape"],
                 ["--tmpfs", "/tmp/../proc/x"], ["--ro-bind", f"{ws}:/../../proc/self"],
                 ["--workspace", f"{ws}/.."]):
        res = sh(brig, "echo RAN; cat /x/secret 2>/dev/null", *args)
        assert res.returncode == 125 and "RAN" not in res.stdout, f"{args}: {res!r}"
        assert planted.tag not in res.stdout
    assert not outside.exists()
