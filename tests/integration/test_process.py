"""Processes: exit statuses and the report, what the sandbox sees and can
signal of the host, inherited descriptors, environment, stdio plumbing,
hostname and network namespace."""
import os
import signal
import subprocess
import time

import pytest

from proc_helpers import (kv, marker, probe, run_with_report, sh_with_report,
                          sleeping_host_process, strip_brig_warnings)


# ---------------------------------------------------------------- exit codes

@pytest.mark.parametrize("script,code", [("exit 0", 0), ("exit 3", 3), ("exit 255", 255)])
def test_exit_status_is_the_commands(brig, script, code):
    r = sh_with_report(brig, script, timeout=20)
    assert r.returncode == code, r
    assert r.report is not None, r
    assert r.report["exit_code"] == code
    assert r.report["reason"] == "exited"
    assert r.report["signal"] in (None, 0)
    assert isinstance(r.report["duration_ms"], int) and r.report["duration_ms"] >= 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGABRT])
def test_exit_status_128_plus_signal(brig, sig):
    r = sh_with_report(brig, f"kill -{sig.name[3:]} $$; sleep 5; exit 9", timeout=20)
    assert r.returncode == 128 + sig, r
    assert r.report["exit_code"] == 128 + sig
    assert r.report["signal"] == sig
    assert r.report["reason"] == "signaled"


def test_bad_option_is_125_with_one_line(brig):
    r = brig.run("run", "--no-such-option-xyz", "--", "true", timeout=20)
    assert r.returncode == 125, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("brig"), r
    assert r.stdout == ""


def test_bad_pass_fd_is_125(brig):
    r = run_with_report(brig, "run", "--pass-fd", "57", "--", "true", timeout=20)
    assert r.returncode == 125, r
    assert r.stderr.startswith("brig"), r


def test_not_executable_is_126(brig):
    f = brig.workspace / "notexec.sh"
    f.write_text("#!/bin/sh\necho RAN\n")
    f.chmod(0o644)
    brig.chown(f)
    r = run_with_report(brig, "run", "--", "./notexec.sh", timeout=20)
    assert r.returncode == 126, r
    assert "RAN" not in r.stdout
    # one line of its own (rootless adds the degraded-limit lines at start)
    assert len(strip_brig_warnings(r.stderr).strip().splitlines()) == 1 and r.stderr.startswith("brig: "), r
    assert r.report["exit_code"] == 126 and r.report["reason"] == "error"


def test_directory_is_126(brig):
    (brig.workspace / "adir").mkdir()
    r = brig.run("run", "--", "./adir", timeout=20)
    assert r.returncode == 126, r


@pytest.mark.parametrize("cmd", ["/no/such/binary-xyz", "no-such-command-xyz"])
def test_missing_command_is_127(brig, cmd):
    r = run_with_report(brig, "run", "--", cmd, timeout=20)
    assert r.returncode == 127, r
    # one line of its own (rootless adds the degraded-limit lines at start)
    assert len(strip_brig_warnings(r.stderr).strip().splitlines()) == 1 and r.stderr.startswith("brig: "), r
    assert r.report["exit_code"] == 127 and r.report["reason"] == "error"


def test_report_lists_controls(brig):
    r = sh_with_report(brig, "true", timeout=20)
    assert r.returncode == 0, r
    c = r.report["controls"]
    for ns in ("user", "mount", "pid", "network", "ipc", "uts", "cgroup"):
        assert ns in c["namespaces"], c["namespaces"]
    assert c["no_new_privs"] is True
    assert c["capabilities"] == []
    assert c["user"]["uid"] != 0 and c["user"]["host_uid"] != 0, c["user"]
    assert "/etc/shadow" in c["hidden"]


# ---------------------------------------------------- host processes stay out

@pytest.fixture
def host_sleeper(brig):
    """A host process of the same user as brig runs (nobody in rootless
    mode, which could normally signal it), with a unique marker."""
    yield from sleeping_host_process(brig)


def test_host_process_cannot_be_signalled(brig, host_sleeper):
    p, mark = host_sleeper
    r, kvs = probe(brig, "kill", p.pid)
    assert r.returncode == 0, r
    for k in ("kill0", "killterm", "killpg", "sigqueue", "pidfd_open"):
        assert kvs.get(f"{k}_{p.pid}") == "ESRCH", (k, r)
    time.sleep(0.2)
    assert p.poll() is None, "the host process was killed from inside the sandbox"
    # The shell's kill builtin too, with every signal a shell would try.
    r = brig.sh(f"for s in TERM KILL HUP INT; do kill -$s {p.pid} 2>/dev/null && echo KILLED-$s; done; "
                f"kill -KILL -{p.pid} 2>/dev/null && echo KILLED-PG; echo done", timeout=20)
    assert r.returncode == 0, r
    assert "KILLED" not in r.stdout and "done" in r.stdout, r
    assert p.poll() is None


def test_host_process_invisible_in_proc(brig, host_sleeper):
    p, mark = host_sleeper
    r, kvs = probe(brig, "procopen", p.pid)
    assert r.returncode == 0, r
    for k in ("open_status", "open_cmdline", "open_environ", "open_stat", "open_mem", "readlink_exe", "access_dir"):
        assert kvs.get(k) == "ENOENT", (k, r)
    # The marker split in two, so the script's own command line does not match.
    a, b = mark[:10], mark[10:]
    r = brig.sh(f"a={a}; b={b}; printf %s%s $a $b > /tmp/pat; grep -l -F -f /tmp/pat /proc/[0-9]*/cmdline 2>/dev/null; ls /proc | grep -x {p.pid}; echo end",
                timeout=20)
    assert r.stdout.strip() == "end", r


def test_host_process_cannot_be_traced(brig, host_sleeper):
    p, _ = host_sleeper
    r, kvs = probe(brig, "ptrace", p.pid, 1)
    assert r.returncode == 0, r
    # ESRCH: no such pid in the sandbox; EPERM: ptrace refused altogether.
    for k in (f"ptrace_attach_{p.pid}", f"ptrace_seize_{p.pid}", f"process_vm_readv_{p.pid}"):
        assert kvs.get(k) in ("ESRCH", "EPERM"), (k, r)
    # pid 1 is brig's init: not the host's, and not traceable either.
    for k in ("ptrace_attach_1", "ptrace_seize_1", "process_vm_readv_1"):
        assert kvs.get(k) == "EPERM", (k, r)


def test_ps_shows_only_the_sandbox(brig, host_sleeper):
    _, mark = host_sleeper
    r = brig.sh("ps -eo pid=,comm= ; echo END", timeout=20)
    assert r.returncode == 0, r
    rows = [l.split(None, 1) for l in r.stdout.splitlines() if l.strip() and l.strip() != "END"]
    pids = sorted(int(p) for p, _ in rows)
    comms = {c.strip() for _, c in rows}
    assert mark not in r.stdout
    assert pids[0] == 1 and len(pids) <= 4, r.stdout
    assert comms <= {"brig", "sh", "ps"}, r.stdout
    assert "systemd" not in r.stdout and "init" not in comms


def test_pid_namespace_numbers(brig):
    r = brig.sh("echo $$; cat /proc/1/comm", timeout=20)
    assert r.returncode == 0, r
    pid, comm = r.stdout.split()
    assert int(pid) <= 3, r
    assert comm == "brig", r


# ------------------------------------------------------- inherited descriptors

@pytest.fixture
def secret_file(brig):
    mark = marker("fdsecret")
    path = brig.base / "fd-secret.txt"
    path.write_text(mark + "\n")
    path.chmod(0o600)  # owned by root: only the descriptor gives access
    return path, mark


def _dup_to(fd, targets):
    def pre():
        for t in targets:
            os.dup2(fd, t)
    return pre


@pytest.mark.parametrize("target", [7, 63])
def test_inherited_fd_is_closed(brig, secret_file, target):
    path, mark = secret_file
    fd = os.open(path, os.O_RDWR)
    try:
        r, kvs = probe(brig, "writefd", target, "OVERWRITTEN",
                       preexec_fn=_dup_to(fd, [target]), close_fds=False)
        assert r.returncode == 0, r
        assert kvs.get(f"fcntl_{target}") == "EBADF", r
        assert kvs.get(f"write_{target}") == "EBADF", r
        assert kvs.get(f"read_{target}") == "EBADF", r
        assert mark not in r.stdout
        r, kvs = probe(brig, "fds", preexec_fn=_dup_to(fd, [target, 5, 9, 33]), close_fds=False)
        assert r.returncode == 0, r
        assert kvs.get("open_fds") == "" and kvs.get("proc_fds_above_2") == "0", r
    finally:
        os.close(fd)
    assert path.read_text() == mark + "\n"


def test_pass_fd_keeps_exactly_one(brig, secret_file):
    path, mark = secret_file
    fd = os.open(path, os.O_RDONLY)
    try:
        r, kvs = probe(brig, "writefd", 7, "x", brig_args=("--pass-fd", "7"),
                       preexec_fn=_dup_to(fd, [7, 8]), close_fds=False)
        assert r.returncode == 0, r
        assert kvs.get("fcntl_7") == "ok", r
        assert kvs.get("read_data_7") == mark, r
        r, kvs = probe(brig, "fds", brig_args=("--pass-fd", "7"),
                       preexec_fn=_dup_to(fd, [7, 8]), close_fds=False)
        assert kvs.get("open_fds") == "7", r
    finally:
        os.close(fd)


# ---------------------------------------------------------------- environment

SECRETS = {"AWS_SECRET_ACCESS_KEY": "aws", "SSH_AUTH_SOCK": "ssh", "GITHUB_TOKEN": "gh",
           "LD_PRELOAD": "ld", "BASH_ENV": "bashenv", "OPENAI_API_KEY": "oai"}


def _secret_env():
    return {k: marker(v) for k, v in SECRETS.items()}


def test_secret_environment_is_cleared(brig):
    env = _secret_env()
    env["LD_PRELOAD"] = ""  # a real path would affect brig itself; an empty one must not leak either
    r = brig.sh("env; echo ---; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; "
                "cat /proc/self/environ | tr '\\0' '\\n'; echo END", env=env, timeout=20)
    assert r.returncode == 0 and "END" in r.stdout, r
    for k, v in env.items():
        assert k not in r.stdout, (k, r.stdout)
        if v:
            assert v not in r.stdout, (k, r.stdout)
    names = {l.split("=", 1)[0] for l in r.stdout.split("---")[0].splitlines() if "=" in l}
    allowed = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "COLORTERM", "PWD",
               "SHLVL", "OLDPWD", "_",
               # brig's own: with the network off, package managers are told not to retry (plan.c)
               "npm_config_fetch_retries", "PIP_RETRIES", "CARGO_NET_RETRY"}
    extra = {n for n in names if n not in allowed and not n.startswith("LC_")}
    assert not extra, extra


def test_keep_env_and_env_pass_values(brig):
    env = _secret_env()
    val = marker("set")
    r = brig.sh("echo T=$GITHUB_TOKEN; echo F=$FOO; echo A=$AWS_SECRET_ACCESS_KEY; echo L=$LC_ALL; echo Z=$TZ",
                "--keep-env", "GITHUB_TOKEN", "--env", f"FOO={val}", env={**env, "LC_ALL": "C", "TZ": "UTC"},
                timeout=20)
    assert r.returncode == 0, r
    out = kv(r.stdout)
    assert out["T"] == env["GITHUB_TOKEN"], r
    assert out["F"] == val, r
    assert out["A"] == "", r
    assert out["L"] == "C" and out["Z"] == "UTC", r


# ------------------------------------------------------------------ plumbing

def test_100mb_stdout_through_a_pipe(brig):
    r = brig.sh("head -c 100000000 /dev/zero; echo TAIL-OK >&2", text=False, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == 100_000_000
    assert r.stdout.count(b"\0") == 100_000_000
    assert strip_brig_warnings(r.stderr).strip() == b"TAIL-OK"


def test_piped_stdin_10mb(brig):
    data = os.urandom(10 * 1024 * 1024)
    r = brig.run("run", "--", "cat", input=data, text=False, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == data


def test_stdin_eof_reaches_command(brig):
    r = brig.sh("wc -c", input="abc", timeout=20)
    assert r.returncode == 0 and r.stdout.strip() == "3", r


def test_stderr_is_separate(brig):
    r = brig.sh("echo OUT-1; echo ERR-1 >&2; echo OUT-2; echo ERR-2 >&2", timeout=20)
    assert r.returncode == 0, r
    assert r.stdout == "OUT-1\nOUT-2\n", r
    # rootless without a memory cgroup, brig adds its own warning line after the run
    assert strip_brig_warnings(r.stderr) == "ERR-1\nERR-2\n", r


def test_no_tty_without_terminal(brig):
    r = brig.sh("tty; echo rc=$?", timeout=20, stdin=subprocess.DEVNULL)
    assert "not a tty" in r.stdout and "rc=1" in r.stdout, r


# ---------------------------------------------------------- uts and network

def test_hostname_is_brig(brig):
    r = brig.sh("hostname; cat /proc/sys/kernel/hostname; uname -n", timeout=20)
    assert r.returncode == 0, r
    assert r.stdout.split() == ["brig"] * 3, r


def test_hostname_option_and_cannot_change_it(brig):
    r = brig.sh("hostname; hostname evil 2>/dev/null && echo CHANGED; hostname", "--hostname", "agentbox",
                timeout=20)
    assert r.stdout.split() == ["agentbox", "agentbox"], r
    r, kvs = probe(brig, "sethostname")
    assert kvs.get("sethostname") == "EPERM" and kvs.get("setdomainname") == "EPERM", r


def test_network_has_only_loopback(brig):
    r = brig.sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo ---; "
                "tail -n +2 /proc/net/route | wc -l; echo ---; ip -o link", timeout=20)
    assert r.returncode == 0, r
    ifaces, routes, links = r.stdout.split("---")
    assert ifaces.split() == ["lo"], r
    assert routes.strip() == "0", r  # no IPv4 route: no way out
    links = links.strip().splitlines()
    assert len(links) == 1 and " lo: " in links[0] and "UP" in links[0], r
