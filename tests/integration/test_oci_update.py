"""brig oci update (docs/oci.md "update"): a running container's memory,
pids and cpu limits changed live through the engine
(brig_sandbox_set_limit: the supervisor writes its cgroup), from runc's
flags or -r FILE, never above the operator's policy's. Checked on the
host: the cgroup files hold the new values and a process over them is
stopped. Root and rootless (rootless brig here has no cgroup of its own
to change: the refusal names why)."""
import json
import os
import pathlib
import subprocess

import pytest

from oci_helpers import Runtime, config, rootfs  # noqa: F401 (fixture)
from proc_helpers import kv, wait_until
from test_escape import attack


@pytest.fixture
def oci(brig, rootfs):
    return Runtime(brig, rootfs)


def _mounts():
    """cgroup mount points: {controller: dir} for v1, and "" for v2."""
    out = {}
    for line in open("/proc/self/mountinfo"):
        left, right = line.split(" - ")
        fstype, _, opts = right.split()[:3]
        where = left.split()[4]
        if fstype == "cgroup2":
            out.setdefault("", where)
        elif fstype == "cgroup":
            for o in opts.split(","):
                out.setdefault(o, where)
    return out


def _cgroup_file(pid, controller, v1_name, v2_name):
    """The file of PID's cgroup holding CONTROLLER's limit, or None."""
    m = _mounts()
    for line in open(f"/proc/{pid}/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        if controller in ctrls.split(",") and controller in m:
            f = pathlib.Path(m[controller] + path) / v1_name
            if f.exists():
                return f
        if ctrls == "" and "" in m:
            f = pathlib.Path(m[""] + path) / v2_name
            if f.exists():
                return f
    return None


def _container_pid(oci, cid, comm):
    r = oci.run("ps", "--format", "json", cid)
    assert r.returncode == 0, r
    for pid in json.loads(r.stdout):
        try:
            if open(f"/proc/{pid}/comm").read().strip() == comm:
                return pid
        except OSError:
            pass
    raise AssertionError(f"no {comm} in {cid}: {r.stdout}")


def _update(oci, *args, policy=None, stdin=None):
    env = oci.brig.env()
    if policy:
        env["BRIG_OCI_POLICY"] = str(policy)
    return subprocess.run(oci.cmd("update", *args), env=env, text=True, capture_output=True, timeout=60,
                          input=stdin, cwd=str(oci.brig.workspace))


@attack("oci-update-limits", "after brig oci update lowers a running container's limits, its processes fork "
        "and allocate past the new ones; an update above the operator's ceiling, and runc knobs brig has no "
        "control for", "brig_sandbox_set_limit: the supervisor writes its own cgroup (cgroup.c); the ceiling "
        "checked first; unknown knobs refused by name")
def test_update_changes_the_live_limits(oci):
    cfg = config(["/bin/sleep", "300"])  # memory 256M, pids 64; a cpu limit, so a cpu group
    cfg["linux"]["resources"]["cpu"] = {"quota": 200000, "period": 100000}
    b = oci.bundle(cfg)
    assert oci.create(b, "up1").returncode == 0
    try:
        assert oci.run("start", "up1").returncode == 0
        oci.wait_status("up1", "running")
        pid = _container_pid(oci, "up1", "sleep")
        pids_max = _cgroup_file(pid, "pids", "pids.max", "pids.max")
        if pids_max is None or "brig" not in str(pids_max):
            assert oci.brig.mode == "rootless", f"brig's container has no pids cgroup as root: {pids_max}"
            r = _update(oci, "--pids-limit", "20", "up1")
            assert r.returncode == 125 and "--pids" in r.stderr and "cannot change while it runs" in r.stderr, r
            return
        mem = _cgroup_file(pid, "memory", "memory.limit_in_bytes", "memory.max")
        assert pids_max.read_text().strip() == "64" and int(mem.read_text()) == 256 << 20

        r = _update(oci, "--pids-limit", "20", "--memory", "64M", "up1")
        assert r.returncode == 0, r
        assert pids_max.read_text().strip() == "20" and int(mem.read_text()) == 64 << 20
        r = oci.run("exec", "up1", "/probe", "forkbomb", "60")
        out = kv(r.stdout)
        assert int(out["forked"]) < 20 and out["stopped_by"] == "EAGAIN", f"ATTACK WORKED: {r}"
        r = oci.run("exec", "up1", "/probe", "memhog", "160")
        assert r.returncode == 137 and "allocated_mb=160" not in r.stdout, f"ATTACK WORKED: {r}"

        # -r FILE (and stdin, as containerd's shim sends it) loosens again
        res = oci.brig.base / "res.json"
        res.write_text(json.dumps({"memory": {"limit": 128 << 20, "swap": 128 << 20}, "pids": {"limit": 40},
                                   "cpu": {"quota": 50000, "period": 100000, "shares": 512}}))
        oci.brig.chown(res)
        assert _update(oci, "-r", res, "up1").returncode == 0
        assert pids_max.read_text().strip() == "40" and int(mem.read_text()) == 128 << 20
        cpu = _cgroup_file(pid, "cpu", "cpu.cfs_quota_us", "cpu.max")
        assert cpu.read_text().split()[0] == "50000", cpu.read_text()
        assert _update(oci, "-r", "-", "up1", stdin='{"pids": {"limit": 30}}').returncode == 0
        assert pids_max.read_text().strip() == "30"

        # the operator's ceiling, runc's other knobs, a bad file: refused, nothing changed
        ceiling = oci.brig.base / "operator.json"
        ceiling.write_text(json.dumps({"limits": {"pids": 50, "memory": "200M"}}))
        oci.brig.chown(ceiling)
        r = _update(oci, "--pids-limit", "60", "up1", policy=ceiling)
        assert r.returncode == 125 and "above the operator's 50" in r.stderr and str(ceiling) in r.stderr, r
        r = _update(oci, "--memory", "1G", "up1", policy=ceiling)
        assert r.returncode == 125 and "memory limit" in r.stderr, r
        assert _update(oci, "--pids-limit", "45", "up1", policy=ceiling).returncode == 0
        r = _update(oci, "--cpu-shares", "5", "up1")
        assert r.returncode == 125 and "--cpu-shares is not supported" in r.stderr, r
        r = _update(oci, "-r", "-", "up1", stdin='{"pids": {"limit": "many"}}')
        assert r.returncode == 125 and "/linux/resources/pids/limit" in r.stderr, r
        r = _update(oci, "up1")
        assert r.returncode == 125 and "nothing to change" in r.stderr, r
        r = oci.run("run", "--memory", "1G", "--bundle", b, "up2")  # not silently dropped elsewhere
        assert r.returncode == 125 and "are update's" in r.stderr, r
        assert pids_max.read_text().strip() == "45"

        audit, _ = oci.logs("up1")
        wait_until(lambda: audit.exists() and audit.read_text().count('"limit_change"') >= 6, timeout=10)
    finally:
        oci.run("delete", "--force", "up1")


@attack("oci-operator-ceiling", "a container's config.json asks for more processes than the operator's policy "
        "allows, or its dev.brig.policy annotation (applied after the operator's file) for no limit at all",
        "the operator's memory, pids and cpu limits are ceilings at create and update; 125 naming the field")
def test_operator_ceiling_holds_at_create(oci):
    """The operator's limits are the most a container gets at create too:
    config.json's and dev.brig.policy's above them are refused, located."""
    ceiling = oci.brig.base / "operator.json"
    ceiling.write_text(json.dumps({"limits": {"pids": 50}}))
    oci.brig.chown(ceiling)
    env = {**oci.brig.env(), "BRIG_OCI_POLICY": str(ceiling)}
    for over in ({"linux": dict(config([])["linux"], resources={"pids": {"limit": 64}})},
                 {"linux": dict(config([])["linux"], resources={}),
                  "annotations": {"dev.brig.policy": '{"limits": {"pids": 0}}'}}):
        b = oci.bundle(config(["/bin/true"], **over))
        r = subprocess.run(oci.cmd("run", "--bundle", b, "cap1"), env=env, text=True, capture_output=True,
                           timeout=60, cwd=str(oci.brig.workspace))
        assert r.returncode == 125 and "/linux/resources/pids" in r.stderr and "above the operator's 50" in r.stderr, r
        assert not (oci.root / "cap1").exists()
    b = oci.bundle(config(["/bin/true"], linux=dict(config([])["linux"], resources={"pids": {"limit": 40}})))
    r = subprocess.run(oci.cmd("run", "--bundle", b, "cap2"), env=env, text=True, capture_output=True, timeout=60,
                       cwd=str(oci.brig.workspace))
    assert r.returncode == 0, r
