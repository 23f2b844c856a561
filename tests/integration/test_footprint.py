"""An idle sandbox's memory (issue 19): once the supervisor and pid 1 have
been idle for a moment they give back the pages of brig's code and
read-only data that only setup ran (core/footprint.c), and still do their
work afterwards: a signal reaches the command, its status comes back, a
persistent sandbox still runs `brig exec` — and gives back again what
that exec faulted in. Root and rootless.

Asserted on the host, from /proc/PID/smaps of the supervisor and of pid 1:
the resident part of brig's own executable code falls below three
quarters of its size. Setup runs nearly all of it (all of it resident
before the fix, for the sandbox's whole life); the idle loop faults a few
64 KiB windows back in (the kernel's fault-around)."""
import signal
import subprocess

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from proc_helpers import run_popen, sandbox_init, wait_until


def brig_code(pid):
    """(resident KiB, size KiB) of brig's executable mappings (the
    program or libbrig) in pid."""
    rss = size = 0
    cur = False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                parts = line.split()
                if "-" in parts[0] and not parts[0].endswith(":"):
                    path = parts[5] if len(parts) > 5 else ""
                    cur = parts[1].startswith("r-x") and "brig" in path.rsplit("/", 1)[-1]
                    if cur:
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        size += (hi - lo) // 1024
                elif cur and parts[0] == "Rss:":
                    rss += int(parts[1])
    except OSError:
        return None
    return rss, size


def shed(pid):
    c = brig_code(pid)
    return c is not None and c[1] > 0 and c[0] < c[1] * 3 // 4


def test_idle_run_sheds_setup_pages_and_still_supervises(brig):
    p = run_popen(brig, "run", "--", "sh", "-c", "echo ready; exec sleep 60", stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline().strip() == b"ready"
        sup = p.pid  # setpriv execs brig in place
        init = sandbox_init(sup)
        assert wait_until(lambda: shed(sup), 10), f"supervisor kept setup's code mapped: {brig_code(sup)}"
        assert wait_until(lambda: shed(init), 10), f"pid 1 kept setup's code mapped: {brig_code(init)}"
        # still supervising: the signal goes through both, the status back
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_idle_persistent_sandbox_sheds_and_still_execs(sandboxes):  # noqa: F811
    name, _ = sandboxes.create()
    sup = sandboxes.state(name)["supervisor_pid"]
    init = sandbox_init(sup)
    assert wait_until(lambda: shed(sup), 10), f"supervisor kept setup's code mapped: {brig_code(sup)}"
    assert wait_until(lambda: shed(init), 10), f"pid 1 kept setup's code mapped: {brig_code(init)}"
    both = lambda: brig_code(sup)[0] + brig_code(init)[0]  # noqa: E731
    before = both()
    r = sandboxes.sh(name, "echo hello; exit 3")
    assert (r.returncode, r.stdout) == (3, "hello\n"), r
    # the exec faulted code back in (the supervisor ran its control
    # requests, pid 1 its fork); both give it back again once idle
    grown = both()
    assert grown > before + 64, (before, grown)
    assert wait_until(lambda: both() <= before + 64, 10), f"the exec's code stayed mapped: {before} -> {both()} KiB"
