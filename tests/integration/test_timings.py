"""brig run --timings: the breakdown of a cold run (docs/benchmarks.md).
Timings are never asserted: only that every step was stamped, by the
process that does it, and that nothing of the stamps reaches the command."""
from test_escape import attack

STEPS = ["policy", "host_probe", "cgroup_create", "seccomp_compile", "egress", "idmapped_workspace", "prepare",
         "clone3", "cgroup_attach", "uid_map", "child_wakes", "network", "sysctls",
         "mounts", "privileges", "fork_command", "landlock",
         "seccomp_load", "command_setup", "command", "status", "init_exit", "teardown"]


PROBE = ("grep -c /dev/zero /proc/self/maps; "
         "cat /proc/1/maps >/dev/null 2>&1 && echo maps=ok || echo maps=refused; "
         "head -c1 /proc/1/mem >/dev/null 2>&1 && echo mem=ok || echo mem=refused; "
         "ls /proc/1/map_files/ >/dev/null 2>&1 && echo map_files=ok || echo map_files=refused")


@attack("timings-page-write", "with --timings, the command looks for the supervisor's shared page of stamps (a "
        "MAP_SHARED mapping inherited through clone3) in its own mappings, and in pid 1's through /proc/1/maps, "
        "/proc/1/mem and /proc/1/map_files, to write it", "execve drops the page; pid 1 is non-dumpable")
def test_timings_every_step_stamped_and_the_page_gone_at_exec(brig):
    # a MAP_SHARED anonymous mapping shows as /dev/zero: none in the
    # command; pid 1, which keeps the page for the run, is out of reach
    r = brig.run("run", "--timings", "--", "sh", "-c", PROBE, report=True, timeout=30)
    assert r.returncode == 0, r
    lines = r.stdout.split()
    assert lines[0] == "0", f"ATTACK WORKED: the page is mapped in the command: {r.stdout}"
    assert lines[1:] == ["maps=refused", "mem=refused", "map_files=refused"], f"ATTACK WORKED: {r.stdout}"
    t = r.report["timings"]
    assert t["unit"] == "us" and t["t0_ns"] > 0
    # the child's and the command's fork's stamps (clone3 onwards) reached
    # the supervisor through the shared page, in order (one whose stamp
    # came before the last one kept would be left out)
    assert sorted(t["steps"]) == sorted(STEPS), t
    assert all(isinstance(v, int) and v >= 0 for v in t["steps"].values())
    lines = r.stderr.split("brig: timings:\n", 1)[1].splitlines()
    assert len(lines) == len(STEPS) + 1 and lines[-1].split()[0] == "total", r.stderr
    assert any(ln.strip().startswith("mounts ") for ln in lines), r.stderr
    # off: nothing stamped, nothing reported
    r = brig.run("run", "--", "true", report=True, timeout=30)
    assert r.returncode == 0 and "timings" not in r.report and "timings:" not in r.stderr, r
