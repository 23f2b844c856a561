"""Helpers for the persistent-sandbox tests: each test gets its own state
root (XDG_RUNTIME_DIR in its scratch directory, owned by the test user),
and every sandbox it creates is removed afterwards, also when it fails."""
import json
import os
import pathlib
import signal
import subprocess

import pytest

from proc_helpers import marker, run_popen, wait_until


def cgroup_dirs_named(prefix):
    """Every cgroup directory (any hierarchy) whose name starts with prefix."""
    found = []
    for top in pathlib.Path("/sys/fs/cgroup").iterdir():
        for dirpath, dirnames, _ in os.walk(top):
            for d in dirnames:
                if d.startswith(prefix):
                    found.append(os.path.join(dirpath, d))
            if dirpath.count("/") > 8:
                dirnames[:] = []
    return found


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class Sandboxes:
    def __init__(self, brig):
        self.brig = brig
        self.run_dir = brig.base / "run"
        self.run_dir.mkdir(exist_ok=True)
        self.run_dir.chmod(0o700)
        brig.chown(self.run_dir)
        self.root = self.run_dir / "brig"
        self.names = []

    def env(self, extra=None):
        e = {"XDG_RUNTIME_DIR": str(self.run_dir)}
        if extra:
            e.update(extra)
        return e

    def brig_cmd(self, *args, **kw):
        kw["env"] = self.env(kw.get("env"))
        kw.setdefault("timeout", 60)
        return self.brig.run(*args, **kw)

    def new_name(self, tag="sb"):
        return marker(tag)[:40]

    def create(self, *args, name=None, check=True):
        name = name or self.new_name()
        self.names.append(name)
        r = self.brig_cmd("create", name, *args)
        if check:
            assert r.returncode == 0, r
        return name, r

    def exec(self, name, *args, **kw):
        """brig exec NAME [args]; args holds the options and `--`."""
        return self.brig_cmd("exec", name, *args, **kw)

    def sh(self, name, script, *opts, **kw):
        return self.exec(name, *opts, "--", "sh", "-c", script, **kw)

    def popen_exec(self, name, *args, **kw):
        return run_popen(self.brig, "exec", name, *args, env=self.env(), **kw)

    def state(self, name):
        return json.loads((self.root / name / "state.json").read_text())

    def ls(self):
        r = self.brig_cmd("ls", "--json")
        assert r.returncode == 0, r
        return {row["name"]: row for row in json.loads(r.stdout)}

    def rm(self, name):
        return self.brig_cmd("rm", name)

    def assert_gone(self, name, state, marks=()):
        """Nothing of the sandbox left: state, supervisor, cgroups, processes."""
        assert not (self.root / name).exists(), list((self.root / name).rglob("*"))
        pid, start = state["supervisor_pid"], state["supervisor_start"]
        assert wait_until(lambda: not pid_alive(pid), 10), f"supervisor {pid} still runs"
        assert cgroup_dirs_named(f"brig-{pid}-{start}") == []
        from proc_helpers import wait_gone
        for m in marks:
            assert wait_gone(m, 10), f"a process with {m} outlived the sandbox"

    SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

    def supervisor_problems(self, name):
        """Sanitizer reports in a supervisor's log (ASan builds write them
        there when the supervisor ends)."""
        try:
            text = (self.root / name / "log").read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if any(m in line for m in self.SANITIZER_MARKS)]

    def cleanup(self):
        problems = {}
        for name in self.names:
            if (self.root / name).exists():
                # stop first, so a sanitizer's exit report lands in the log
                self.brig_cmd("stop", name)
                found = self.supervisor_problems(name)
                if found:
                    problems[name] = found
                r = self.rm(name)
                if r.returncode != 0 and (self.root / name).exists():
                    # last resort: kill the supervisor we started, by its pid
                    try:
                        st = self.state(name)
                        os.kill(st["supervisor_pid"], signal.SIGKILL)
                    except (OSError, ValueError, KeyError):
                        pass
                    self.rm(name)
        return problems


def sandboxes_of(brig):
    """The fixture's body for any brig-like fixture (test_gvisor_persist.py
    passes its --wall gvisor one)."""
    s = Sandboxes(brig)
    yield s
    problems = s.cleanup()
    assert not problems, f"sanitizer reports in supervisor logs: {problems}"


@pytest.fixture
def sandboxes(brig):
    yield from sandboxes_of(brig)
