"""brig run --timings: the breakdown of a cold run (docs/benchmarks.md).
Timings are never asserted: only that every step was stamped, by the
process that does it, and that nothing of the stamps reaches the command."""

STEPS = ["policy", "host_probe", "cgroup_create", "seccomp_compile", "egress", "idmapped_workspace", "prepare",
         "clone3", "cgroup_attach", "uid_map", "child_wakes", "network", "mounts", "privileges", "fork_command", "landlock",
         "seccomp_load", "command_setup", "command", "teardown"]


def test_timings_every_step_stamped_and_the_page_gone_at_exec(brig):
    # the command lists its own mappings: the supervisor's shared page of
    # stamps (a MAP_SHARED anonymous mapping shows as /dev/zero) must not
    # be among them, or the command could write the host's copy
    r = brig.run("run", "--timings", "--", "cat", "/proc/self/maps", report=True, timeout=30)
    assert r.returncode == 0, r
    assert "/dev/zero" not in r.stdout, r.stdout
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
