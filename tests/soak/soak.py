#!/usr/bin/python3
"""brig soak (issue 24): many runs of a mix — plain, proxy and filtered
network, limits hit, persistent create/exec/snapshot/rm, pooled runs — with
brig, the supervisor, the sandbox's pid 1 or the pool daemon SIGKILLed at a
random moment (or, with a hooks build, at a chosen setup step) in a
fraction of them; then what a user does (brig rm of what brig ls shows,
brig pool --stop, one more brig run) and a count of what is left on the
host (tests/leftovers.py). One line of figures; exit 1 if anything is left
or a run failed without saying why.

    tests/soak/soak.py --brig build/brig [--hooks-brig build-hooks/brig]
        [--runs 1000] [--seconds 1800] [--kill-fraction 0.15] [--rootless]
        [--enospc] [--cgroup-fail] [--seed N]

--enospc runs everything with the state root on a tmpfs of 64 KiB that is
nearly full, in a private mount namespace (unshare -m; the host's mount
table is never touched). --cgroup-fail (hooks build) makes the cgroup
controllers' files refuse writes in a third of the runs. Run as root;
--rootless runs brig as nobody through setpriv.
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import leftovers  # noqa: E402

NOBODY = 65534
# setup steps a hooks build can pause at (src/lib: test_pause)
RUN_STEPS = ("cgroup-recorded", "cgroup-made", "cloned", "released", "ended", "status-given", "teardown-helper")
CREATE_STEPS = ("supervisor-started", "cgroup-recorded", "cgroup-made", "cloned", "released")
POOL_STEPS = ("pool-member-made",)
ENOSPC_ERRNO = 28


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def paused(exe, timeout=10, proc=None):
    """Pids of processes running `exe` (or the brig-engine beside it, which
    the brig front end runs, or the brig-supervisor beside it, which
    persistent sandboxes run) stopped at a test_pause() point
    (src/lib/core/reaper.c), once there is one; [] after `timeout`, or once
    `proc` (the brig that was started) ended without pausing."""
    exes = (str(exe), *(os.path.join(os.path.dirname(str(exe)), n) for n in ("brig-engine", "brig-supervisor")))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ended = proc is not None and proc.poll() is not None
        found = []
        for d in os.listdir("/proc"):
            if d.isdigit() and proc_state(d) == "T":
                try:
                    if os.readlink(f"/proc/{d}/exe") in exes:
                        found.append(int(d))
                except OSError:
                    pass
        if found or ended:
            return found
        time.sleep(0.01)
    return []


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, TypeError):
        return False


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.base = pathlib.Path(tempfile.mkdtemp(prefix="brig-soak-", dir="/tmp"))
        self.base.chmod(0o755)
        self.bindir = self.base / "bin"
        self.bindir.mkdir()
        self.exe = self._copy(pathlib.Path(a.brig), "plain")
        self.hooks = self._copy(pathlib.Path(a.hooks_brig), "hooks") if a.hooks_brig else None
        self.ws = self.base / "ws"
        self.home = self.base / "home"
        self.run = self.base / "run"
        for d in (self.ws, self.home, self.run):
            d.mkdir()
            self.own(d)
        self.run.chmod(0o700)
        self.root = self.run / "brig"
        self.names = set()
        self.fig = {"runs": 0, "kills": 0, "brig": 0, "supervisor": 0, "pid1": 0, "pool": 0, "at_step": 0,
                    "refused": 0, "odd": 0}
        self.odd = []
        self.refused = {}  # each kind of refusal once: its last line -> the command
        self.pool_args = ["--net", "none", "--memory", "64M"]

    def _copy(self, exe, sub):
        d = self.bindir / sub
        d.mkdir()
        for f in list(exe.parent.glob("libbrig.so*")) + [exe, exe.parent / "brig-engine", exe.parent / "brig-supervisor"]:
            if f.is_file():
                shutil.copy2(f, d / f.name)
                (d / f.name).chmod(0o755)
        d.chmod(0o755)
        return d / "brig"

    def own(self, p):
        if self.a.rootless:
            os.chown(p, NOBODY, NOBODY)

    def cmd(self, *args, hooks=False):
        pre = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"] if self.a.rootless else []
        return pre + [str(self.hooks if hooks else self.exe), *map(str, args)]

    def env(self, extra=None):
        e = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(self.home), "LANG": "C.UTF-8",
             "XDG_RUNTIME_DIR": str(self.run)}
        e.update(extra or {})
        return e

    def popen(self, *args, hooks=False, env=None):
        return subprocess.Popen(self.cmd(*args, hooks=hooks), cwd=self.ws, env=self.env(env), text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def brig(self, *args, timeout=60, env=None):
        return subprocess.run(self.cmd(*args), cwd=self.ws, env=self.env(env), text=True, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)

    # ---- judging a run that was not killed ----------------------------------
    def judge(self, what, rc, err, ok=(0,)):
        if rc in ok or (self.a.enospc and 0 < rc < 125):
            return  # on a full state root the command's own writes (an overlay layer) fail too
        if rc == 125 and "brig" in (err or ""):
            self.fig["refused"] += 1  # a clear refusal (ENOSPC, a refused cgroup write)
            self.refused.setdefault((err or "").strip().splitlines()[-1][:200], what)
            return
        self.fig["odd"] += 1
        self.odd.append(f"{what}: rc={rc} {(err or '').strip()[-300:]!r}")

    def wait(self, p, what, ok=(0,), timeout=60):
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(p.pid)
            _, err = p.communicate()
            self.fig["odd"] += 1
            self.odd.append(f"{what}: hung for {timeout} s")
            return
        self.judge(what, p.returncode, err, ok)

    def killed(self, p):
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill(p.pid)
            p.communicate()

    def kill_at_step(self, steps, target, *args, env=None):
        """brig ARGS (hooks build) paused at one of `steps`; SIGKILL what
        paused there (brig itself, or a supervisor it started)."""
        env = dict(env or {}, BRIG_TEST_PAUSE_AT=self.rng.choice(steps))
        p = self.popen(*args, hooks=True, env=env)
        stopped = paused(self.hooks, proc=p)
        for pid in stopped:
            kill(pid)
        if stopped:
            self.fig["at_step"] += 1
            self.note_kill(target)
        self.killed(p)

    def note_kill(self, target):
        self.fig["kills"] += 1
        self.fig[target] += 1

    # ---- the kinds of run -----------------------------------------------------
    def run_args(self):
        k = self.rng.choice(("plain", "proxy", "filtered", "memory", "pids"))
        if k == "plain":
            return ["run", "--", "sh", "-c", "echo hi; sleep 0.05"], (0,)
        if k == "proxy":
            return ["run", "--net", "proxy", "--allow-host", "example.invalid", "--", "sh", "-c", "sleep 0.05"], (0,)
        if k == "filtered":
            return ["run", "--net", "filtered", "--allow-host", "example.invalid", "--", "sh", "-c", "sleep 0.05"], (0,)
        if k == "memory":
            return ["run", "--memory", "16M", "--", "sh", "-c",
                    "a=$(head -c 40000000 /dev/zero | tr '\\0' x); echo ${#a}"], (0, 1, 2, 137, 139, 141)
        return ["run", "--pids", "16", "--", "sh", "-c", "for i in $(seq 40); do sleep 0.2 & done; wait"], (0, 1, 2)

    def one_run(self, kill_it):
        args, ok = self.run_args()
        env = {}
        if self.a.cgroup_fail and self.hooks and self.rng.random() < 0.33:
            env["BRIG_TEST_CGROUP_WRITE_ERRNO"] = str(self.rng.choice((ENOSPC_ERRNO, 30, 13)))
            args = args[:1] + ["--memory", "64M"] + args[1:]
        if not kill_it:
            self.wait(self.popen(*args, hooks=bool(env), env=env), " ".join(args[:4]), ok)
            return
        target = self.rng.choice(("brig", "pid1"))
        if self.hooks and self.rng.random() < 0.5:
            self.kill_at_step(RUN_STEPS, "brig", *args, env=env)
            return
        p = self.popen(*args, hooks=bool(env), env=env)
        time.sleep(self.rng.uniform(0, 0.15))
        pid = p.pid if target == "brig" else next(iter(children(p.pid)), None)
        if pid and kill(pid):
            self.note_kill(target)
        self.killed(p)

    def persistent(self, kill_it):
        name = f"soak{self.rng.randrange(1 << 30):x}"
        self.names.add(name)
        if kill_it and self.hooks and self.rng.random() < 0.5:
            # the supervisor, paused in its setup
            self.kill_at_step(CREATE_STEPS, "supervisor", "create", name, "--memory", "64M", "--workspace-mode",
                              "overlay")
            return
        r = self.brig("create", name, "--memory", "64M", "--workspace-mode", "overlay")
        self.judge("create", r.returncode, r.stderr)
        if r.returncode != 0:
            return
        try:
            sup = json.loads((self.root / name / "state.json").read_text())["supervisor_pid"]
        except (OSError, ValueError, KeyError):
            sup = None
        if kill_it:
            target = self.rng.choice(("brig", "supervisor", "pid1"))
            p = self.popen("exec", name, "--", "sh", "-c", "echo x > f; sleep 0.3")
            time.sleep(self.rng.uniform(0, 0.2))
            pid = {"brig": p.pid, "supervisor": sup, "pid1": next(iter(children(sup or 0)), None)}[target]
            if pid and kill(pid):
                self.note_kill(target)
            self.killed(p)
        else:
            self.wait(self.popen("exec", name, "--", "sh", "-c", "echo x > f"), "exec")
            r = self.brig("snapshot", name, "t")
            self.judge("snapshot", r.returncode, r.stderr)
        r = self.brig("rm", name)
        self.judge("rm", r.returncode, r.stderr)
        if r.returncode == 0:
            self.names.discard(name)

    def pool_daemon(self):
        for st in self.root.glob("pools/*/pool.json"):
            try:
                return json.loads(st.read_text())["supervisor_pid"]
            except (OSError, ValueError, KeyError):
                pass
        return None

    def pooled(self, kill_it):
        if not self.pool_daemon():
            if kill_it and self.hooks and self.rng.random() < 0.5:
                self.kill_at_step(POOL_STEPS, "pool", "pool", "--size", "1", *self.pool_args)
                return
            r = self.brig("pool", "--size", "1", *self.pool_args)
            self.judge("pool", r.returncode, r.stderr)
        p = self.popen("run", "--pooled", *self.pool_args, "--", "sh", "-c", "echo pooled")
        if kill_it:
            time.sleep(self.rng.uniform(0, 0.1))
            target = self.rng.choice(("pool", "brig"))
            pid = self.pool_daemon() if target == "pool" else p.pid
            if pid and kill(pid):
                self.note_kill(target)
            self.killed(p)
        else:
            self.wait(p, "run --pooled")

    # ---- the soak -------------------------------------------------------------
    def main(self):
        before = leftovers.snapshot(state_roots=[self.root])
        t0 = time.monotonic()
        kinds = [self.one_run] * 5 + [self.persistent] * 2 + [self.pooled] * 2
        while self.fig["runs"] < self.a.runs and time.monotonic() - t0 < self.a.seconds:
            kill_it = self.rng.random() < self.a.kill_fraction
            self.rng.choice(kinds)(kill_it)
            self.fig["runs"] += 1
        elapsed = time.monotonic() - t0
        self.cleanup()
        left = leftovers.new_since(before, settle=5, state_roots=[self.root], exe_dirs=[self.exe.parent] +
                                   ([self.hooks.parent] if self.hooks else []))
        counts = leftovers.counts(left)
        mode = "rootless" if self.a.rootless else "root"
        variant = "+enospc" if self.a.enospc else ""
        variant += "+cgroup-fail" if self.a.cgroup_fail else ""
        f = self.fig
        print(f"soak {mode}{variant}: {f['runs']} runs in {elapsed:.0f} s, {f['kills']} SIGKILLs (brig {f['brig']}, "
              f"supervisor {f['supervisor']}, pid 1 {f['pid1']}, pool daemon {f['pool']}; {f['at_step']} at a setup "
              f"step), {f['refused']} refused with a clear error, {f['odd']} odd; left: " +
              ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
        for o in self.odd[:20]:
            print(f"  odd: {o}", file=sys.stderr)
        for line, what in list(self.refused.items())[:8]:
            print(f"  refused ({what}): {line}", file=sys.stderr)
        if any(counts.values()):
            print(leftovers.describe(left), file=sys.stderr)
        return 1 if any(counts.values()) or f["odd"] else 0

    def cleanup(self):
        """What a user does afterwards: stop the pool, brig rm what brig ls
        shows, one more brig run (the next invocation sweeps)."""
        if self.pool_daemon():
            self.brig("pool", "--stop", *self.pool_args)
        r = self.brig("ls", "--json")
        try:
            for row in json.loads(r.stdout):
                self.brig("rm", row["name"])
        except ValueError:
            self.odd.append(f"ls: {r.stderr!r}")
            self.fig["odd"] += 1
        self.brig("run", "--", "true")
        time.sleep(0.5)  # sandboxes killed just now finish dying

    def close(self):
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.base)], check=False)


def small_tmpfs(run, rootless):
    """A private mount namespace with run/ on a nearly full 64 KiB tmpfs."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "soak", str(run)], check=True)
    if rootless:
        os.chown(run, NOBODY, NOBODY)
    filler = run / "filler"
    with open(filler, "wb") as f:
        try:
            f.write(b"\0" * (64 << 10))
        except OSError:
            pass
    # leave a few pages: some runs get their record in, some do not
    os.truncate(filler, max(0, os.path.getsize(filler) - (12 << 10)))
    os.chmod(filler, 0o644)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brig", required=True)
    ap.add_argument("--hooks-brig")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=1800)
    ap.add_argument("--kill-fraction", type=float, default=0.15)
    ap.add_argument("--rootless", action="store_true")
    ap.add_argument("--enospc", action="store_true")
    ap.add_argument("--cgroup-fail", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv):
    a = parse(argv)
    if os.geteuid() != 0:
        sys.exit("soak: run as root (--rootless runs brig as nobody)")
    if a.enospc and not a.in_namespace:
        # everything again inside a private mount namespace of our own
        os.execvp("unshare", ["unshare", "-m", "--propagation", "private", sys.executable, __file__, *argv,
                              "--in-namespace"])
    s = Soak(a)
    try:
        if a.enospc:
            small_tmpfs(s.run, a.rootless)
            s.root = s.run / "brig"
        return s.main()
    finally:
        if a.enospc:
            subprocess.run(["umount", "-l", str(s.run)], check=False)
        s.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
