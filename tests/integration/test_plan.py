"""The plan a run is given, and the short cuts that make it (issue 19).

The policy step (core/plan.c) takes short cuts to the same plan: the deny
list's "~/" entries are not looked at one by one in a home no bind
reaches, an entry without a glob character is lstat'ed instead of
globbed (from the home opened once), an entry below a first directory a
home lacks is not looked up, a home lstat cannot find is not realpath'ed,
a hit's real path is its directory's and its name when it is no symlink,
and a one-thread process reads its umask by setting it back. The test-hooks build writes the plan
it made (BRIG_TEST_PLAN=FILE, core/plan_dump.c) and takes the long way
when asked (BRIG_TEST_PLAN_LONG_WAY=1): both must write the same plan,
for secrets behind symlinks, homes with glob characters, grants of
homes, and the user's own deny globs. The plan of fixed inputs is locked
as well: what is hidden and pinned, the user's name, the umask.
"""
import json
import os
import pwd
import subprocess

import pytest

from conftest import IS_ROOT, NOBODY
from test_escape import attack


def scenario(brig, base):
    """The caller's home with secrets the deny list names: ~/.ssh and ~/.aws
    (with a link in it pointing out), ~/.config a symlink to dotfiles/config
    holding gcloud, ~/.netrc a symlink to dotfiles/netrc, a history file; another user's home (v) with ~/.kube, and
    a third reached through a symlink (l), both in the passwd database the
    run reads (fake_passwd); one home with glob characters in its name."""
    u = base / "home" / "u"
    for d in (".ssh", ".aws", "dotfiles/config/gcloud", "src", "../v/.kube", "../l/.docker"):
        (u / d).mkdir(parents=True, exist_ok=True)
    (u / ".ssh" / "id_ed25519").write_text("key\n")
    (u / ".aws" / "credentials").write_text("aws\n")
    (u / "notes").write_text("notes\n")
    (u / ".aws" / "link").symlink_to("../notes")
    (u / ".config").symlink_to("dotfiles/config")
    (u / "dotfiles" / "config" / "gcloud" / "token").write_text("gcloud\n")
    (u / "dotfiles" / "config" / "my-token").write_text("mine\n")
    (u / "dotfiles" / "config" / ".dot-token").write_text("a glob's * leaves it\n")  # FNM_PERIOD
    (u / ".bash_history").write_text("export TOKEN=x\n")
    (u / "dotfiles" / "netrc").write_text("machine x password y\n")
    (u / ".netrc").symlink_to("dotfiles/netrc")  # a secret that is itself a link
    odd = base / "home" / "we[ir]d*home"
    (odd / ".ssh").mkdir(parents=True, exist_ok=True)
    (odd / ".ssh" / "key").write_text("odd\n")
    (base / "home" / "v" / ".kube" / "config").write_text("kube\n")
    (base / "homelink").symlink_to("home")
    for root, dirs, files in os.walk(base / "home"):
        for n in dirs + files + [""]:
            p = os.path.join(root, n)
            if brig.mode == "rootless" and IS_ROOT:
                os.lchown(p, NOBODY, NOBODY)
    return u, odd


def fake_passwd(base):
    """The host's /etc/passwd with the scenario's other users, to be bound
    over /etc/passwd in a mount namespace of brig's own (unshare -m)."""
    path = base / "passwd"
    with open("/etc/passwd") as f:
        host = f.read()
    path.write_text(host + f"v:x:4242:4242::{base}/home/v:/bin/sh\n"
                    f"l:x:4243:4243::{base}/homelink/l:/bin/sh\n"
                    f"w:x:4244:4244::{base}/home/we[ir]d*home:/bin/sh\n")
    path.chmod(0o644)
    return path


def plan_of(brig, hooks_bindir, args, home, long_way, umask=0o022, passwd=None, extra_env=None):
    out = brig.reports / f"plan-{len(list(brig.reports.iterdir()))}.json"
    env = brig.env({"HOME": str(home), "BRIG_TEST_PLAN": str(out), **(extra_env or {})})
    if long_way:
        env["BRIG_TEST_PLAN_LONG_WAY"] = "1"
    cmd = brig.prefix() + [str(hooks_bindir / "brig"), "run", "--allow-degraded", "memory", "--allow-degraded",
                           "pids", *map(str, args), "--", "/bin/true"]
    if passwd:
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/passwd && exec "$@"', str(passwd)] + cmd
    cp = subprocess.run(cmd, cwd=brig.workspace, env=env, capture_output=True, text=True, timeout=60,
                        preexec_fn=lambda: os.umask(umask))
    assert cp.returncode == 0, cp
    plan = json.loads(out.read_text())
    out.unlink()
    return plan


CASES = {
    # the default layout: the homes of /etc/passwd inside /usr (bin, games, ...)
    "default": lambda b, u, odd: ([], u),
    "bind-a-home": lambda b, u, odd: (["--bind", f"{u}:/mnt/u"], u),
    "ro-bind-all-homes-with-globs": lambda b, u, odd: (
        ["--ro-bind", f"{b}/home:/h", "--deny", "~/.config/*token*", "--deny", f"{u}/src/*"], u),
    "home-with-glob-characters": lambda b, u, odd: (["--ro-bind", f"{b}/home:/h"], odd),
    "workspace-is-the-home": lambda b, u, odd: (["--workspace", str(u)], u),
    "system-homes-granted": lambda b, u, odd: (
        ["--ro-bind", "/var:/v", "--ro-bind", "/dev:/d", "--unsafe-allow-secret", "~/.bash_history"], u),
}


def passwd_for_test(base):
    if not IS_ROOT:
        pytest.skip("OTHER USERS' HOMES NOT TESTED: binding a passwd database of the test's over /etc/passwd "
                    "(unshare -m) needs root")
    return fake_passwd(base)


@pytest.mark.parametrize("case", sorted(CASES))
def test_short_cuts_give_the_long_ways_plan(brig, hooks_bindir, scratch, case):
    u, odd = scenario(brig, scratch)
    passwd = passwd_for_test(scratch)
    args, home = CASES[case](scratch, u, odd)
    short = plan_of(brig, hooks_bindir, args, home, long_way=False, passwd=passwd)
    long = plan_of(brig, hooks_bindir, args, home, long_way=True, passwd=passwd)
    for key in sorted(set(short) | set(long)):
        assert short.get(key) == long.get(key), f"{case}: the short cuts changed the plan's {key}"
    assert short["masks"], short  # /etc/shadow at least: a plan, not an empty file


@pytest.mark.parametrize("case", sorted(CASES))
def test_directory_cache_gives_the_long_ways_plan(brig, hooks_bindir, scratch, case):
    """The directory cache (core/dircache.c) on: a first run records what
    the homes lack (no margin: the scenario's homes are a moment old), a
    second one skips those lookups; both plan what the long way plans
    (which never reads the cache)."""
    u, odd = scenario(brig, scratch)
    passwd = passwd_for_test(scratch)
    args, home = CASES[case](scratch, u, odd)
    run = scratch / "run"
    run.mkdir(mode=0o700)
    brig.chown(run)
    env = {"XDG_RUNTIME_DIR": str(run), "BRIG_TEST_DIRCACHE_MARGIN_MS": "0"}
    first = plan_of(brig, hooks_bindir, args, home, long_way=False, passwd=passwd, extra_env=env)
    assert (run / "brig" / "cache" / "dirs-1").exists(), "the first run kept nothing: the test would prove nothing"
    cached = plan_of(brig, hooks_bindir, args, home, long_way=False, passwd=passwd, extra_env=env)
    long = plan_of(brig, hooks_bindir, args, home, long_way=True, passwd=passwd, extra_env=env)
    for key in sorted(set(first) | set(long)):
        assert first.get(key) == long.get(key) and cached.get(key) == long.get(key), \
            f"{case}: the directory cache changed the plan's {key}"


def test_plan_of_fixed_inputs(brig, hooks_bindir, scratch):
    u, _ = scenario(brig, scratch)
    passwd = passwd_for_test(scratch)
    for long_way in (False, True):
        plan = plan_of(brig, hooks_bindir, ["--bind", f"{u}:/mnt/u", "--ro-bind", f"{scratch}/home/v:/mnt/v",
                                            "--ro-bind", f"{scratch}/home/l:/mnt/l"], u, long_way, umask=0o027,
                       passwd=passwd)
        # other users' homes (l's named through a symlink in passwd)
        assert "/mnt/v/.kube" in plan["masks"] and "/mnt/l/.docker" in plan["masks"], (long_way, plan["masks"])
        mine = sorted(m for m in plan["masks"] if m.startswith("/mnt/u"))
        # ~/.aws/link points out to ~/notes: hidden where it lives too
        assert mine == ["/mnt/u/.aws", "/mnt/u/.bash_history", "/mnt/u/.ssh", "/mnt/u/dotfiles/config/gcloud",
                        "/mnt/u/dotfiles/netrc", "/mnt/u/notes"], (long_way, plan["masks"])
        # the symlink the secret was named through, and the directories
        # above the real secret, made mountpoints (a run cannot move them)
        assert sorted(plan["pins"]) == ["/mnt/u/.config", "/mnt/u/.netrc", "/mnt/u/dotfiles",
                                        "/mnt/u/dotfiles/config"], plan
        assert plan["umask"] == 0o027, (long_way, oct(plan["umask"]))
        try:
            name = pwd.getpwuid(plan["host_uid"]).pw_name
        except KeyError:
            name = "sandbox"
        assert f"USER={name}" in plan["env"] and f"LOGNAME={name}" in plan["env"], plan["env"]
        assert f"HOME={u}" in plan["env"], plan["env"]


@attack("deny-short-cut-home", "the policy step's short cuts (a home no bind reaches skipped whole, entries "
        "lstat'ed instead of globbed, first directories looked at once, homes lstat cannot find not realpath'ed) "
        "would leave a secret unmasked: another user's ~/.kube in a granted /home, a home named in passwd "
        "through a symlink, one with glob characters in its name, the caller's ~/.config/gcloud behind a "
        "symlinked ~/.config and the file a link in ~/.aws points to; the sandbox reads them",
        "files: the deny list expanded for every home any bind reaches, by their real names (plan.c)")
def test_secrets_in_homes_the_short_cuts_pass_stay_hidden(brig, scratch):
    u, odd = scenario(brig, scratch)
    passwd = passwd_for_test(scratch)
    (scratch / "home" / "v" / "public").write_text("PUBLIC-V\n")
    (scratch / "home" / "l" / ".docker" / "config.json").write_text("docker\n")
    secrets = {"h/v/.kube/config": "kube", "h/l/.docker/config.json": "docker", "h/we[ir]d*home/.ssh/key": "odd",
               "h/u/dotfiles/config/gcloud/token": "gcloud", "h/u/.aws/credentials": "aws", "h/u/notes": "notes",
               "h/u/.ssh/id_ed25519": "key", "h/u/.netrc": "password", "h/u/dotfiles/netrc": "password"}
    script = "cat /h/v/public; " + "; ".join(f"cat '/{p}' 2>/dev/null" for p in secrets) + "; true"
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount --bind "$0" /etc/passwd && exec "$@"',
           str(passwd)] + brig.cmd("run", "--ro-bind", f"{scratch}/home:/h", "--", "sh", "-c", script)
    cp = subprocess.run(cmd, cwd=brig.workspace, env=brig.env({"HOME": str(u)}), capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, cp
    assert "PUBLIC-V" in cp.stdout, f"the grant itself did not work: {cp}"
    for path, content in secrets.items():
        assert content not in cp.stdout, f"ATTACK WORKED: /{path} was read inside: {cp.stdout!r}"
