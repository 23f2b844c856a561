"""The brig command line: bad input is refused with a clear message and exit
125 before anything runs; help, version, doctor; the JSON run report.

Every test taking the `brig` fixture runs as root and rootless.
"""
import ast
import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from conftest import repetitions


SETUP = 125

def brun(brig, *args, **kw):
    return brig.run(*args, **kw)


RUN_OPTIONS = [
    "--workspace", "--ro-bind", "--bind", "--tmpfs", "--tmp-size", "--home-size", "--sys",
    "--deny", "--unsafe-allow-secret", "--env", "--keep-env", "--pass-fd", "--hostname",
    "--tty", "--no-tty", "--json-report",
]


@pytest.fixture
def markdir(brig):
    """A directory every sandbox user can write to, bound into each run, so a
    command that ran leaves a marker behind wherever the workspace is."""
    d = brig.base / "mark"
    d.mkdir()
    d.chmod(0o777)
    return d


def run_marked(brig, markdir, *opts):
    """brig run --bind MARKDIR OPTS... -- sh -c 'touch MARKDIR/ran'; returns
    (result, marker path)."""
    marker = markdir / "ran"
    res = brun(brig, "run", "--bind", str(markdir), *opts, "--", "sh", "-c", f"touch {marker}")
    return res, marker


def assert_refused(res, marker, *mentions):
    assert res.returncode == SETUP, res
    assert not marker.exists(), f"the command ran despite bad input: {res}"
    err = res.stderr
    assert err.strip(), res
    for m in mentions:
        assert m in err, f"stderr does not mention {m!r}: {err!r}"
    # a message, not a crash
    assert "Segmentation" not in err and "Aborted" not in err
    return err


# ---- the control: the same command line does run when the input is good ----

def test_marker_control(brig, markdir):
    res, marker = run_marked(brig, markdir)
    assert res.returncode == 0, res
    assert marker.exists()


def test_marker_control_with_valid_options(brig, markdir):
    res, marker = run_marked(brig, markdir, "--tmpfs", "/x:12M", "--tmp-size", "64M", "--env", "A=1",
                             "--hostname", "box", "--deny", "/srv/nothing-here",
                             "--unsafe-allow-secret", "~/.pgpass")
    assert res.returncode == 0, res
    assert marker.exists()


# ---- bad input ---------------------------------------------------------------

def test_unknown_option(brig, markdir):
    res, marker = run_marked(brig, markdir, "--no-such-option")
    err = assert_refused(res, marker, "--no-such-option")
    assert "unknown option" in err


@pytest.mark.parametrize("cmd", [["run"], ["create", "cli-bad-opt"], ["pool", "--size", "1"], ["policy", "show"]])
def test_unknown_option_names_the_command_it_was_given_to(brig, cmd):
    """`brig create NAME --quiet` said "brig run: unknown option": the
    run options are parsed by one function, the message names the command."""
    res = brig.run(*cmd, "--no-such-option", *(["--", "true"] if cmd == ["run"] else []))
    name = "brig " + " ".join(c for c in cmd[:2] if not c.startswith(("cli-", "--")))
    assert res.returncode == 125, res
    assert f"{name}: unknown option '--no-such-option' (see {name} --help)" in res.stderr, res
    assert not brig.run("ls").stdout.count("cli-bad-opt"), res


def test_unknown_option_with_value(brig, markdir):
    res, marker = run_marked(brig, markdir, "--frobnicate=3")
    assert_refused(res, marker, "--frobnicate", "unknown option")


def test_unknown_short_option_message(brig, markdir):
    res, marker = run_marked(brig, markdir, "-x")
    err = assert_refused(res, marker, "'-x'")
    assert "unknown option" in err and "needs a value" not in err


def test_flag_given_a_value_message(brig, markdir):
    res, marker = run_marked(brig, markdir, "--sys=1")
    err = assert_refused(res, marker, "--sys")
    assert "needs a value" not in err


@pytest.mark.parametrize("opt", ["--workspace", "--ro-bind", "--bind", "--tmpfs", "--tmp-size", "--env",
                                 "--pass-fd", "--hostname", "--deny", "--json-report"])
def test_option_missing_value(brig, opt):
    res = brun(brig, "run", opt)
    assert res.returncode == SETUP, res
    assert opt in res.stderr
    assert "needs a value" in res.stderr


def test_tmpfs_bad_size(brig, markdir):
    res, marker = run_marked(brig, markdir, "--tmpfs", "/x:12Q")
    assert_refused(res, marker, "12Q")


def test_tmpfs_bad_spec(brig, markdir):
    res, marker = run_marked(brig, markdir, "--tmpfs", ":1M")
    assert_refused(res, marker, "--tmpfs", ":1M")


def test_tmpfs_relative_destination(brig, markdir):
    res, marker = run_marked(brig, markdir, "--tmpfs", "rel:1M")
    assert_refused(res, marker, "'rel'")


@pytest.mark.parametrize("dst", ["/", "/proc/x", "/dev/x"])
def test_bind_forbidden_destination(brig, markdir, dst):
    res, marker = run_marked(brig, markdir, "--ro-bind", f"/usr:{dst}")
    assert_refused(res, marker, f"'{dst}'")


@pytest.mark.parametrize("value", ["abc", "", "12X", "-1", "1.5.5G"])
def test_tmp_size_bad(brig, markdir, value):
    res, marker = run_marked(brig, markdir, "--tmp-size", value)
    assert_refused(res, marker, f"'{value}'")


def test_home_size_bad(brig, markdir):
    res, marker = run_marked(brig, markdir, "--home-size", "lots")
    assert_refused(res, marker, "'lots'")


def test_tmp_size_too_small(brig, markdir):
    res, marker = run_marked(brig, markdir, "--tmp-size", "100")
    assert_refused(res, marker, "100")


def test_env_without_equals(brig, markdir):
    res, marker = run_marked(brig, markdir, "--env", "NOEQUALS")
    assert_refused(res, marker, "--env", "NOEQUALS", "NAME=VALUE")


@pytest.mark.parametrize("spec,name", [("1BAD=x", "1BAD"), ("A-B=x", "A-B"), ("=x", "''")])
def test_env_bad_name(brig, markdir, spec, name):
    res, marker = run_marked(brig, markdir, "--env", spec)
    assert_refused(res, marker, name)


def test_keep_env_bad_name(brig, markdir):
    res, marker = run_marked(brig, markdir, "--keep-env", "NO-DASH")
    assert_refused(res, marker, "NO-DASH")


@pytest.mark.parametrize("fd", ["0", "1", "2"])
def test_pass_fd_std(brig, markdir, fd):
    res, marker = run_marked(brig, markdir, "--pass-fd", fd)
    assert_refused(res, marker, f"--pass-fd {fd}")


def test_pass_fd_not_open(brig, markdir):
    res, marker = run_marked(brig, markdir, "--pass-fd", "99")
    assert_refused(res, marker, "--pass-fd 99", "Bad file descriptor")


@pytest.mark.parametrize("value", ["abc", "-3", "3x", ""])
def test_pass_fd_not_a_number(brig, markdir, value):
    res, marker = run_marked(brig, markdir, "--pass-fd", value)
    assert_refused(res, marker, "--pass-fd", f"'{value}'")


def test_workspace_nonexistent(brig, markdir):
    res, marker = run_marked(brig, markdir, "--workspace", "/nonexistent")
    assert_refused(res, marker, "workspace", "'/nonexistent'", "No such file")


def test_workspace_relative_missing(brig, markdir):
    res, marker = run_marked(brig, markdir, "--workspace", "relative-missing")
    # resolved against the caller's directory, and the message says where
    want = os.path.join(str(brig.workspace), "relative-missing")
    assert_refused(res, marker, "workspace", want, "No such file")


def test_workspace_is_a_file(brig, markdir):
    f = brig.workspace / "afile"
    f.write_text("x")
    res, marker = run_marked(brig, markdir, "--workspace", str(f))
    assert_refused(res, marker, "workspace", str(f))


def test_ro_bind_nonexistent(brig, markdir):
    res, marker = run_marked(brig, markdir, "--ro-bind", "/nonexistent")
    assert_refused(res, marker, "/nonexistent", "No such file")


def test_bind_relative_missing(brig, markdir):
    res, marker = run_marked(brig, markdir, "--bind", "relative")
    want = os.path.join(str(brig.workspace), "relative")
    assert_refused(res, marker, want, "No such file")


@pytest.mark.parametrize("spec", ["/usr:", ":/x", ""])
def test_bind_bad_spec(brig, markdir, spec):
    res, marker = run_marked(brig, markdir, "--ro-bind", spec)
    assert_refused(res, marker, "--ro-bind", "SRC[:DST]")


def test_bind_dotdot(brig, markdir):
    res, marker = run_marked(brig, markdir, "--ro-bind", "/usr/../etc:/x")
    assert_refused(res, marker, "/usr/../etc")


@pytest.mark.parametrize("name", ["a b", "a_b", "x" * 65])
def test_hostname_bad(brig, markdir, name):
    res, marker = run_marked(brig, markdir, "--hostname", name)
    assert_refused(res, marker, "hostname", f"'{name}'")


def test_hostname_empty(brig, markdir):
    res, marker = run_marked(brig, markdir, "--hostname", "")
    assert_refused(res, marker, "hostname ''")


@pytest.mark.parametrize("pattern", ["relative", ".ssh", "~foo", "/a/../b"])
def test_deny_bad(brig, markdir, pattern):
    res, marker = run_marked(brig, markdir, "--deny", pattern)
    assert_refused(res, marker, "secret path", f"'{pattern}'")


def test_unsafe_allow_secret_unknown(brig, markdir):
    res, marker = run_marked(brig, markdir, "--unsafe-allow-secret", "/not/builtin")
    assert_refused(res, marker, "'/not/builtin'", "not on the built-in secret list")


def test_unsafe_allow_secret_unknown_no_false_warning(brig, markdir):
    res, marker = run_marked(brig, markdir, "--unsafe-allow-secret", "/not/builtin")
    err = assert_refused(res, marker, "'/not/builtin'")
    assert "removed from the secret deny list" not in err


def test_unsafe_allow_secret_known_warns(brig, markdir):
    res, marker = run_marked(brig, markdir, "--unsafe-allow-secret", "~/.pgpass")
    assert res.returncode == 0, res
    assert marker.exists()
    assert "WARNING" in res.stderr and "~/.pgpass" in res.stderr


def test_bind_inside_secret_refused(brig, markdir):
    ssh = brig.home / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519").write_text("PRIVATE")
    brig.chown(ssh)
    res, marker = run_marked(brig, markdir, "--ro-bind", f"{ssh}:/keys")
    assert_refused(res, marker, str(ssh), "secret deny list")


def test_no_command_after_dashdash(brig, markdir):
    res = brun(brig, "run", "--bind", str(markdir), "--")
    assert res.returncode == SETUP, res
    assert "no command given" in res.stderr
    assert not (markdir / "ran").exists()


def test_options_end_at_dashdash_or_the_command(brig):
    """brig's options end at "--" or at the first word that is none (the
    flags' table is not even made then): what follows is the command's,
    flags and all."""
    for args, out in ((["--", "printf", "%s", "--help"], "--help"), (["printf", "%s", "--hostname"], "--hostname"),
                      (["--", "--"], None), (["--hostname", "box", "--", "hostname"], "box\n")):
        res = brun(brig, "run", *args)
        if out is None:  # the command "--" itself: no such program
            assert res.returncode == 127 and "usage" not in res.stderr, (args, res)
        else:
            assert res.returncode == 0 and res.stdout == out, (args, res)


def test_run_without_anything(brig):
    res = brun(brig, "run")
    assert res.returncode == SETUP, res
    assert "no command given" in res.stderr
    assert "usage: brig run" in res.stderr


def test_no_args(brig):
    res = brun(brig, )
    assert res.returncode == SETUP, res
    assert "usage: brig" in res.stderr
    assert res.stdout == ""


def test_unknown_subcommand(brig):
    res = brun(brig, "nosuchcmd")
    assert res.returncode == SETUP, res
    assert "unknown command 'nosuchcmd'" in res.stderr


def test_doctor_unknown_option(brig):
    res = brun(brig, "doctor", "--bogus")
    assert res.returncode == SETUP, res
    assert "--bogus" in res.stderr


def test_options_after_command_belong_to_it(brig, markdir):
    # "+" in the optstring: the first non-option ends brig's options, so a
    # command's own flag that looks like brig's is not taken by brig.
    marker = markdir / "args"
    res = brun(brig, "run", "--bind", str(markdir), "sh", "-c", f'echo "$@" > {marker}', "sh",
                   "--workspace", "/nonexistent")
    assert res.returncode == 0, res
    assert marker.read_text().strip() == "--workspace /nonexistent"


# ---- help, version, doctor ----------------------------------------------------

def test_run_help(brig):
    res = brun(brig, "run", "--help")
    assert res.returncode == 0, res
    assert "usage: brig run" in res.stdout
    for opt in RUN_OPTIONS:
        assert opt in res.stdout, f"{opt} missing from brig run --help"


def test_top_level_help(brig):
    res = brun(brig, "--help")
    assert res.returncode == 0, res
    for sub in ("run", "doctor", "version"):
        assert sub in res.stdout


@pytest.mark.parametrize("arg", ["version", "--version"])
def test_version(brig, arg):
    res = brun(brig, arg)
    assert res.returncode == 0, res
    assert re.fullmatch(r"brig \d+\.\d+\.\d+\S*\n", res.stdout), res.stdout


def test_doctor(brig):
    res = brun(brig, "doctor")
    assert res.returncode == 0, res
    out = res.stdout + res.stderr
    line = next((ln for ln in out.splitlines() if "user namespaces" in ln), None)
    assert line is not None, out
    assert re.match(r"\s*ok\b", line), line
    assert "rootless" in out if brig.mode == "rootless" else "(root)" in out


def test_doctor_json(brig):
    res = brun(brig, "doctor", "--json")
    assert res.returncode == 0, res
    doc = json.loads(res.stdout)
    for key in ("user_namespaces", "namespaces", "seccomp", "landlock_abi", "cgroup", "overlay_in_userns",
                "nftables_nat_module", "run_defaults_ok"):
        assert key in doc, f"doctor --json lacks {key}"
    assert doc["user_namespaces"] is True
    assert doc["run_defaults_ok"] is True
    assert isinstance(doc["namespaces"], dict)
    for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup"):
        assert doc["namespaces"].get(ns) is True, ns
    assert isinstance(doc["landlock_abi"], int)
    assert isinstance(doc["overlay_in_userns"], bool)
    assert isinstance(doc["nftables_nat_module"], bool)
    # this host has nftables NAT: the real probe (rules written in a
    # throwaway namespace) must say so, root and rootless
    assert doc["filtered_mode"] is True
    assert doc["rootless"] is (brig.mode == "rootless")
    # the seccomp flag that closes the unix guard's signal window (row 456)
    # is Linux 5.19's: said as the kernel's release says
    release = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    assert doc["seccomp"]["wait_killable_recv"] is (release >= (5, 19)), (release, doc["seccomp"])
    line = next(x for x in brun(brig, "doctor").stdout.splitlines() if "seccomp wait-killable" in x)
    assert re.match(r"\s*ok\b" if release >= (5, 19) else r"\s*--", line), line


# ---- the JSON report ------------------------------------------------------------

def report_path(brig, name="report.json"):
    # in the workspace: the test user (root or nobody) can write there
    return brig.workspace / name


def test_report_success(brig):
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--", "true")
    assert res.returncode == 0, res
    rep = json.loads(rp.read_text())
    assert rep["exit_code"] == 0
    assert rep["signal"] is None
    assert rep["reason"] == "exited"
    assert isinstance(rep["duration_ms"], int) and not isinstance(rep["duration_ms"], bool)
    assert rep["duration_ms"] >= 0
    assert "error" not in rep
    assert rep["command"] == ["true"]
    c = rep["controls"]
    for ns in ("user", "mount", "pid", "network", "ipc", "uts", "cgroup"):
        assert ns in c["namespaces"], ns
    assert isinstance(c["user"]["uid"], int)
    assert c["user"]["uid"] != 0
    assert c["user"]["rootless"] is (brig.mode == "rootless")
    ws = os.path.realpath(brig.workspace)
    assert c["workspace"] == ws
    mounts = c["mounts"]
    wsm = [m for m in mounts if m.get("destination") == ws]
    assert wsm, mounts
    assert wsm[-1]["type"] == "bind" and wsm[-1]["source"] == ws and wsm[-1]["readonly"] is False
    usr = [m for m in mounts if m.get("destination") == "/usr"]
    assert usr, mounts
    assert usr[-1]["type"] == "bind" and usr[-1]["readonly"] is True
    tmp = [m for m in mounts if m.get("destination") == "/tmp"]
    assert tmp and tmp[-1]["type"] == "tmpfs"
    assert c["network"] == "none"
    assert c["capabilities"] == []


def test_report_relative_path(brig):
    # a relative --json-report is relative to the caller's directory
    res = brun(brig, "run", "--json-report", "rel-report.json", "--", "true")
    assert res.returncode == 0, res
    rep = json.loads((brig.workspace / "rel-report.json").read_text())
    assert rep["exit_code"] == 0


def test_report_exit_status(brig):
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--", "sh", "-c", "exit 7")
    assert res.returncode == 7, res
    rep = json.loads(rp.read_text())
    assert rep["exit_code"] == 7
    assert rep["signal"] is None
    assert rep["reason"] == "exited"


def test_report_signal(brig):
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--", "sh", "-c", "kill -KILL $$")
    assert res.returncode == 128 + 9, res
    rep = json.loads(rp.read_text())
    assert rep["signal"] == 9
    assert rep["exit_code"] == 137
    assert rep["reason"] == "signaled"


def test_report_user_binds(brig):
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--ro-bind", "/usr/share:/mnt/share", "--tmpfs",
                   "/scratch:1M", "--", "true")
    assert res.returncode == 0, res
    mounts = json.loads(rp.read_text())["controls"]["mounts"]
    share = [m for m in mounts if m.get("destination") == "/mnt/share"]
    assert share and share[0]["source"] == "/usr/share" and share[0]["readonly"] is True
    scratch = [m for m in mounts if m.get("destination") == "/scratch"]
    assert scratch and scratch[0]["type"] == "tmpfs" and scratch[0]["size_bytes"] == 1 << 20


def test_report_on_setup_failure(brig):
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--workspace", "/nonexistent", "--", "true")
    assert res.returncode == SETUP, res
    assert "/nonexistent" in res.stderr
    assert rp.exists(), "no report written when setup failed"
    rep = json.loads(rp.read_text())
    assert rep["exit_code"] == SETUP
    assert rep["reason"] == "error"
    assert "/nonexistent" in rep["error"]
    assert rep["signal"] is None
    assert isinstance(rep["duration_ms"], int) and rep["duration_ms"] >= 0


def test_report_on_sandbox_setup_failure(brig):
    # fails inside the sandbox (the bind source is missing), not while planning
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--ro-bind", "/nonexistent", "--", "true")
    assert res.returncode == SETUP, res
    rep = json.loads(rp.read_text())
    assert rep["exit_code"] == SETUP
    assert rep["reason"] == "error"
    assert "/nonexistent" in rep["error"]


def test_report_command_not_found(brig):
    rp = report_path(brig)
    res = brun(brig, "run", "--json-report", str(rp), "--", "no-such-command-xyz")
    assert res.returncode == 127, res
    assert "no-such-command-xyz" in res.stderr
    rep = json.loads(rp.read_text())
    assert rep["exit_code"] == 127
    assert rep["reason"] == "error"
    assert "no-such-command-xyz" in rep["error"]


# ---- reliability -----------------------------------------------------------------

def test_rootless_start_is_reliable(brig):
    if brig.mode != "rootless":
        pytest.skip("the race needs an unprivileged supervisor")
    failures, n = [], repetitions(100)
    for _ in range(n):
        res = brig.run("run", "--", "true")
        if res.returncode != 0:
            failures.append(res.stderr.strip())
    assert not failures, f"{len(failures)}/{n} runs failed, e.g. {failures[:3]}"


# ---- brig's own lines on stderr --------------------------------------------------

def _own_stderr_writes(brig, *args):
    """brig ARGS under strace: the result, and what brig's own process (not
    the sandbox's) wrote to its stderr, one entry per write(2) or writev(2)."""
    if not shutil.which("strace"):
        pytest.fail("strace is not installed (scripts/install-deps installs it)")
    log = brig.base / "strace-writes"  # -ff: a file per process, so no call of brig's is split by another's
    env = brig.env({"ASAN_OPTIONS": "detect_leaks=0"})  # LeakSanitizer cannot run under ptrace
    cp = subprocess.run(["strace", "-ff", "-qq", "-s", "65536", "-e", "trace=execve,write,writev", "-e",
                         "signal=none", "-o", str(log)] + brig.cmd(*args), cwd=str(brig.workspace), env=env,
                        capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    # brig's own process: the one that exec'd brig (its front end, which then runs its engine in place)
    own = [text.splitlines() for text in (f.read_text() for f in brig.base.glob("strace-writes.*"))
           if f'execve("{brig.exe}"' in text]
    assert len(own) == 1, (len(own), cp.stderr)
    to_stderr = [line for line in own[0] if line.startswith(("write(2, ", "writev(2, "))]
    # strace shows each byte past ASCII as an octal escape: read back as bytes
    writes = [ast.literal_eval("b" + m.group(1)).decode("utf-8", "surrogateescape") for line in to_stderr
              if (m := re.match(r'write\(2, ("(?:[^"\\]|\\.)*"), \d+\) = \d+$', line))]
    assert len(writes) == len(to_stderr), f"a write of brig's this test cannot read (a writev?): {to_stderr}"
    return cp, writes


@pytest.mark.parametrize("case", ["error", "refusal", "unix-refused"])
def test_each_line_of_brigs_leaves_in_one_write(brig, case):
    """stderr is unbuffered: a message written a character at a time was a
    system call each (90 for one refusal line), and another writer to the
    same stderr (the agent's other tools, a command left running) could
    land in the middle of a line; printf writes an unbuffered stream in
    pieces too (glibc up to 2.36: 8 KiB, from 2.37: 128 bytes). Each of
    brig's lines, the sandbox's text in it shown safely, is one write."""
    if case == "error":
        args = ["exec", "no-such-sandbox\x1b[2J", "--", "true"]
        want = ["brig: bad sandbox name 'no-such-sandbox\\x1b[2J': use letters, digits, '_', '.', '-' (at most 64, "
                "starting with a letter or digit)\n"]
    elif case == "refusal":
        args = ["run", "--", "sh", "-c", "mount -t tmpfs none /tmp 2>/dev/null; exit 0"]
        want = None
    else:
        path = str(brig.workspace / "host\x07.sock")  # a host socket in the workspace: refused, its name a control
        args = ["run", "--", "python3", "-c", f"import socket\ntry: socket.socket(socket.AF_UNIX).connect({path!r})\n"
                "except OSError: pass"]
        want = None
    with socket.socket(socket.AF_UNIX) as sock:
        if case == "unix-refused":
            sock.bind(path)
            brig.chown(path)
            sock.listen()
        cp, writes = _own_stderr_writes(brig, *args)
    stderr = cp.stderr.decode("utf-8", "surrogateescape")
    mine = [line + "\n" for line in stderr.split("\n") if line.startswith("brig: ")]
    assert mine, cp
    assert writes == mine, (writes, stderr)
    if want:
        assert cp.returncode == SETUP and writes == want, (writes, cp)
    if case == "refusal":
        assert any("mount" in w and "refused" in w for w in writes), writes
    if case == "unix-refused":
        assert any("refused 1 connection" in w and "host\\x07.sock" in w for w in writes), writes


def test_run_flags_after_the_command_are_the_commands(brig):
    """--pooled and --quiet are brig's only among brig's options: after
    them (the command's first word, or "--") they are the command's own
    arguments, as every other word there is — also after an option whose
    value looks like one (found by an attack round: the engine took them
    out of the command's arguments, and the run became a pooled one)."""
    for args in (["echo", "A", "--quiet", "--pooled", "B"],
                 ["--hostname", "h", "--pooled", "echo", "A", "--quiet", "--pooled", "B"],
                 ["--quiet", "--", "echo", "A", "--quiet", "--pooled", "B"]):
        r = brig.run("run", *args)
        assert r.returncode == 0 and r.stdout == "A --quiet --pooled B\n", (args, r)
    r = brig.run("run", "--hostname", "--pooled", "--", "hostname")
    assert r.returncode == 0 and r.stdout == "--pooled\n", r
