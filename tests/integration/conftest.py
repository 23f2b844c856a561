"""Shared fixtures for brig's integration tests.

Every test that takes the `brig` fixture runs twice: as root, and rootless
(as the unprivileged user `nobody`, through setpriv). The binaries are
copied into a world-readable directory first, so the unprivileged user can
run them wherever the checkout lives.
"""
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / os.environ.get("BRIG_BUILD", "build")
# Escape programs are static and built only without sanitizers.
ESCAPE = REPO / "build" / "tests" / "escape"
NOBODY = 65534
IS_ROOT = os.geteuid() == 0


def _sanitized():
    try:
        opts = json.loads((BUILD / "meson-info" / "intro-buildoptions.json").read_text())
    except (OSError, ValueError):
        return False
    return any(o["name"] == "b_sanitize" and o["value"] not in ("", "none") for o in opts)


# The build under test has ASan+UBSan (make check runs the suite on it after
# the normal build): every brig costs several times more there.
SANITIZED = _sanitized()


def repetitions(n):
    """How often a repetition test (the short soak, N runs in a row) repeats:
    n on the normal build, a fifth (10 at least) on a sanitized one — the
    same make check runs the full count on the normal build, and the
    sanitizers need only see each path a few times."""
    return max(n // 5, 10) if SANITIZED else n


@pytest.fixture(scope="session")
def bindir():
    """brig, brig-engine, brig-supervisor, brig-serve, libbrig and the escape programs in a 0755 directory."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-bin-", dir="/tmp"))
    _OURS["exe_dirs"].append(d)
    d.chmod(0o755)
    for f in BUILD.glob("libbrig.so*"):
        if f.is_file():  # not meson's libbrig.so.*.p/ object directory
            shutil.copy2(f, d / f.name, follow_symlinks=True)
    shutil.copy2(BUILD / "brig", d / "brig")  # the front end (src/front/brig.c) ...
    shutil.copy2(BUILD / "brig-engine", d / "brig-engine")  # ... runs the engine, found beside it
    shutil.copy2(BUILD / "brig-supervisor", d / "brig-supervisor")  # found beside libbrig
    shutil.copy2(BUILD / "brig-serve", d / "brig-serve")  # brig serve execs it, found the same way
    if not ESCAPE.is_dir():
        pytest.fail(f"escape programs not built: {ESCAPE} (run make build)")
    for f in ESCAPE.iterdir():
        if f.is_file() and os.access(f, os.X_OK):
            shutil.copy2(f, d / f.name)
    for f in d.iterdir():
        f.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Result:
    def __init__(self, cp, report=None):
        self.returncode = cp.returncode
        self.stdout = cp.stdout
        self.stderr = cp.stderr
        self.report = report

    def __repr__(self):
        return f"<rc={self.returncode} stdout={self.stdout[-2000:]!r} stderr={self.stderr[-2000:]!r}>"


class Brig:
    """Runs the real brig binary as root or as `nobody`."""

    def __init__(self, bindir, mode, base):
        self.bindir = bindir
        self.mode = mode          # "root" or "rootless"
        self.base = base          # a 0755 scratch directory owned by the test user
        self.uid = 0 if mode == "root" else (NOBODY if IS_ROOT else os.geteuid())
        self.home = base / "home"
        self.home.mkdir(exist_ok=True)
        self.workspace = base / "ws"
        self.workspace.mkdir(exist_ok=True)
        # Reports are written by brig as the test user: a directory it can write.
        self.reports = base / "reports"
        self.reports.mkdir(exist_ok=True)
        self.reports.chmod(0o1777)
        self.chown(self.home)
        self.chown(self.workspace)

    @property
    def exe(self):
        return str(self.bindir / "brig")

    def program(self, name):
        """Host path of an escape program (visible inside only if bound)."""
        return str(self.bindir / name)

    def chown(self, path):
        if self.mode == "rootless" and IS_ROOT:
            os.chown(path, NOBODY, NOBODY)

    def prefix(self):
        if self.mode == "rootless" and IS_ROOT:
            return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        return []

    def cmd(self, *args):
        return self.prefix() + [self.exe, *map(str, args)]

    def env(self, extra=None):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(self.home),
               "LANG": "C.UTF-8"}
        if extra:
            env.update(extra)
        return env

    def run(self, *args, cwd=None, env=None, input=None, timeout=60, report=False, text=True, **kw):
        """`brig ARGS...` with the workspace as cwd; returns a Result."""
        args = list(args)
        rep_path = None
        if report:
            rep_path = self.reports / f"report-{len(list(self.reports.iterdir()))}.json"
            args = ["run", "--json-report", str(rep_path)] + args[1:] if args and args[0] == "run" else args
        cp = subprocess.run(self.cmd(*args), cwd=str(cwd or self.workspace), env=self.env(env),
                            input=input, capture_output=True, timeout=timeout, text=text, **kw)
        rep = None
        if rep_path is not None and rep_path.exists():
            rep = json.loads(rep_path.read_text())
        return Result(cp, rep)

    def sh(self, script, *brig_args, **kw):
        """brig run [brig_args] -- sh -c SCRIPT"""
        return self.run("run", *brig_args, "--", "sh", "-c", script, **kw)


@pytest.fixture(params=["root", "rootless"])
def mode(request):
    if request.param == "root" and not IS_ROOT:
        pytest.skip("ROOT MODE NOT TESTED: the suite is not running as root")
    return request.param


@pytest.fixture
def scratch():
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-test-", dir="/tmp"))
    _OURS["dirs"].append(str(d))
    d.chmod(0o755)
    yield d
    # with the state root a rootless server test gave nobody beside it
    # (serve_helpers.state_env: DIR-run)
    subprocess.run(["rm", "-rf", "--one-file-system", str(d), f"{d}-run"], check=False)


@pytest.fixture
def brig(bindir, mode, scratch):
    return Brig(bindir, mode, scratch)


def mountinfo():
    """The host's mount table, as a sorted list of (mountpoint, source)."""
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            rows.append((parts[4], parts[3]))
    return sorted(rows)


# ---- the escape catalogue's table (test_escape.py, `make escape`) ----------

_ESCAPE_ROWS = {}


# ---- nothing the suite made is left (issue 23) ------------------------------
#
# A snapshot of brig's traces (tests/leftovers.py) when the session starts;
# when it ends, whatever appeared since and is this session's own fails the
# run: processes (brig from this session's binary directories, anything
# holding one of its markers, anything in one of its cgroups), the network
# namespaces they hold, mounts in its scratch directories or naming its
# markers, and brig cgroups (brig-PID-START) whose brig is gone. A cgroup
# is this session's when it lies below the session's own cgroup in some
# hierarchy; where the session runs in every hierarchy's root (a CI
# machine: nobody else runs there) every new one is. Nothing is cleaned
# here: a trace a SIGKILLed brig left for "the next run" is a trace.

sys.path.insert(0, str(REPO / "tests"))
import leftovers  # noqa: E402
from proc_helpers import SESSION_MARK  # noqa: E402

_OURS = {"exe_dirs": [], "dirs": [], "marks": [SESSION_MARK], "before": None}


def _xdist_worker(config):
    """True in a pytest-xdist worker (`pytest -n N`, make check): the
    controller counts, once every worker has ended."""
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if not _xdist_worker(session.config):
        _OURS["before"] = leftovers.snapshot(exe_dirs=["/nonexistent"])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist's controller: what an ended worker's session made (its binary
    and scratch directories, its marker) is this session's."""
    theirs = getattr(node, "workeroutput", {}).get("brig_ours")
    if theirs:
        for k in ("exe_dirs", "dirs", "marks"):
            _OURS[k].extend(theirs[k])


def _own_cgroup_paths():
    with open("/proc/self/cgroup") as f:
        return {line.strip().split(":", 2)[2] for line in f} - {"/"}


def _session_leftovers():
    before = _OURS["before"]
    exe_dirs = [str(d) for d in _OURS["exe_dirs"]] or ["/nonexistent"]
    marks = _OURS["marks"]
    new = leftovers.new_since(before, exe_dirs=exe_dirs, markers=marks)
    own = _own_cgroup_paths()
    names = {os.path.basename(c) for c in new["cgroups"] if not own or any(p + "/" in c for p in own)}
    cgroups = {c for c in new["cgroups"] if os.path.basename(c) in names}

    def ours(item):
        pid = item.split("@")[0]
        try:
            exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            groups = open(f"/proc/{pid}/cgroup").read()
        except OSError:
            return False
        return (os.path.dirname(exe) in exe_dirs or any(m.encode() in cmd for m in marks) or
                any(f"/{n}" in groups for n in names))
    procs = {p for p in new["processes"] if ours(p)}
    mounts = {m for m in new["mounts"] if any(k in m for k in marks) or any(d in m for d in _OURS["dirs"])}
    files = {f for f in new["files"] if any(k in f for k in marks) or any(f.startswith(d) for d in _OURS["dirs"])}
    # the network namespaces those hold, but the session's own (a CI job may run in one)
    netns = leftovers._netns(procs) - {f"net:[{os.stat('/proc/self/ns/net').st_ino}]"}
    return {"mounts": mounts, "cgroups": cgroups, "netns": netns, "processes": procs, "files": files}


def pytest_sessionfinish(session, exitstatus):
    if _xdist_worker(session.config):
        session.config.workeroutput["brig_ours"] = {
            "exe_dirs": [str(d) for d in _OURS["exe_dirs"]], "dirs": list(_OURS["dirs"]), "marks": [SESSION_MARK]}
        return
    if _OURS["before"] is None or not _OURS["exe_dirs"]:
        return  # no brig ran
    left = _session_leftovers()
    deadline = time.monotonic() + 10  # a process being reaped, a cgroup being removed
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _session_leftovers()
    if any(left.values()):
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "LEFT BEHIND BY THIS TEST SESSION (every fixture must remove what it made):\n" + \
               leftovers.describe(left)
        if tr:
            tr.section("leftovers", sep="!", red=True)
            tr.write_line(text)
        else:
            print(text, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config):
    config.addinivalue_line("markers", "escape(id, technique, control): an attack of the red-team catalogue")
    config.addinivalue_line("markers", "whole_host: asserts on what the whole host holds (its mount table, every "
                            "brig cgroup, the shared temporary places): runs while no other test does")


# ---- tests that look at the whole host run alone ------------------------------
#
# make check runs the suite in parallel workers (pytest -n, pytest-xdist),
# and a second session of this checkout may run beside it (the ASan build's
# beside the normal one). A test marked whole_host
# (the mount table before and after, every dead brig's cgroup, what appeared
# in /tmp) would see the others' sandboxes come and go: it holds HOST_LOCK
# exclusively, every other test holds it shared, from its first fixture's
# setup to its last one's teardown (a module's fixtures included: they are
# set up and torn down within its first and last test's protocol). A gate
# taken first keeps new tests from starting while a whole_host test waits,
# so it waits only for the ones already running. The lock is this
# checkout's: suites of other checkouts on a shared machine are not held
# (one stopped in a debugger would stall them all). It lives in the
# checkout (git ignores it), so no run leaves a file in /tmp behind.
HOST_LOCK = str(REPO / f".test-host-{os.geteuid()}.lock")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    alone = item.get_closest_marker("whole_host") is not None
    gate = os.open(HOST_LOCK + ".gate", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    lock = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(gate, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        os.close(lock)
        os.close(gate)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    m = item.get_closest_marker("escape")
    if m is None or (rep.when != "call" and rep.passed):
        return
    params = dict(getattr(item, "callspec", None).params) if hasattr(item, "callspec") else {}
    mode = params.pop("mode", "-")
    extra = ",".join(f"{v}" for k, v in params.items() if isinstance(v, (str, int)))
    # The row travels in the report: an xdist worker's reports are what its
    # controller sees (pytest_runtest_logreport runs there).
    rep.user_properties.append(("brig_escape", {"ident": m.args[0] + (f"[{extra}]" if extra else ""),
                                                "technique": m.args[1], "control": m.args[2],
                                                "test": item.originalname, "mode": mode}))


def pytest_runtest_logreport(report):
    esc = next((v for k, v in report.user_properties if k == "brig_escape"), None)
    if esc is None:
        return
    rep, mode = report, esc["mode"]
    row = _ESCAPE_ROWS.setdefault(esc["ident"], {k: esc[k] for k in ("technique", "control", "test")})
    if rep.skipped:
        row[mode] = "SKIPPED"
    elif rep.failed:
        row[mode] = "NOT CONTAINED" if rep.when == "call" else "ERROR"
    elif rep.when == "call":
        row.setdefault(mode, "contained")


def pytest_terminal_summary(terminalreporter):
    if not _ESCAPE_ROWS:
        return
    tr = terminalreporter
    tr.section("escape catalogue")
    w = max(len(k) for k in _ESCAPE_ROWS)
    tr.write_line(f"{'attack':<{w}}  {'root':<13}  {'rootless':<13}  technique")
    counts = {}
    for ident in sorted(_ESCAPE_ROWS):
        row = _ESCAPE_ROWS[ident]
        cells = [row.get(m, "not run") for m in ("root", "rootless")]
        for m, c in zip(("root", "rootless"), cells):
            counts[(m, c)] = counts.get((m, c), 0) + 1
        tr.write_line(f"{ident:<{w}}  {cells[0]:<13}  {cells[1]:<13}  {row['technique']}")
    attacks = {k.split("[")[0] for k in _ESCAPE_ROWS}
    tr.write_line(f"{len(attacks)} attacks, {len(_ESCAPE_ROWS)} rows; " +
                  ", ".join(f"{m} {c}: {n}" for (m, c), n in sorted(counts.items())))


# A build with test hooks (make build-hooks, meson option test_hooks): it
# honours BRIG_TEST_WRITABLE_BINDS, BRIG_TEST_NO_LANDLOCK,
# BRIG_TEST_NO_NFTABLES, BRIG_TEST_COMMIT_PAUSE, BRIG_TEST_LIBSECCOMP_PATH and
# BRIG_TEST_GVISOR_PID_LATE_MS (among others), to show that one control alone holds or that a
# missing one is handled. Production builds ignore them (tested).
HOOKS = pathlib.Path(__file__).resolve().parents[2] / "build-hooks"


@pytest.fixture(scope="module")
def hooks_bindir():
    if not (HOOKS / "brig").exists():
        pytest.fail(f"{HOOKS}/brig is missing: run `make build-hooks` (make check does)")
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-hooks-", dir="/tmp"))
    _OURS["exe_dirs"].append(d)
    d.chmod(0o755)
    for f in list(HOOKS.glob("libbrig.so*")) + [HOOKS / n for n in ("brig", "brig-engine", "brig-supervisor", "brig-serve")]:
        if f.is_file():
            shutil.copy2(f, d / f.name)
            (d / f.name).chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)
