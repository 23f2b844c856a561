"""brig start, snapshot, restore and fork: the writable state of a
persistent sandbox (overlay layer, $HOME, /tmp) saved, put back and used to
start a second sandbox. Root and rootless."""
import json
import os
import subprocess

import pytest

from persist_helpers import pid_alive, sandboxes  # noqa: F401 (fixture)
from proc_helpers import wait_until


def _state(sandboxes, name, script="cat layerfile ~/hf /tmp/tf 2>&1; ls -A ~"):
    r = sandboxes.sh(name, script)
    return r.stdout


def test_start_after_stop_keeps_the_layer(brig, sandboxes):
    name, _ = sandboxes.create("--workspace-mode", "overlay", "--env", "KEPT=yes")
    assert sandboxes.sh(name, "echo layer > layerfile && echo h > ~/hf").returncode == 0
    first = sandboxes.state(name)
    assert sandboxes.brig_cmd("stop", name).returncode == 0
    r = sandboxes.brig_cmd("start", name)
    assert r.returncode == 0, r
    st = sandboxes.state(name)
    assert st["status"] == "running" and st["supervisor_pid"] != first["supervisor_pid"]
    # The layer survived, the in-memory $HOME did not; the policy came back.
    r = sandboxes.sh(name, 'cat layerfile; ls -A ~; echo "$KEPT"')
    assert r.stdout == "layer\nyes\n", r
    r = sandboxes.brig_cmd("start", name)
    assert r.returncode == 125 and "already running" in r.stderr, r


def test_start_a_dead_sandbox(brig, sandboxes):
    name, _ = sandboxes.create()
    st = sandboxes.state(name)
    os.kill(st["supervisor_pid"], 9)  # the supervisor this test created
    assert wait_until(lambda: not pid_alive(st["supervisor_pid"]), 10)  # the kill is asynchronous
    assert sandboxes.ls()[name]["status"] == "dead"
    r = sandboxes.brig_cmd("start", name)
    assert r.returncode == 0, r
    assert sandboxes.sh(name, "echo up").stdout == "up\n"


@pytest.mark.parametrize("ws_mode", ["overlay", "bind"])  # not "mode": that is conftest's root/rootless
def test_snapshot_restore(brig, sandboxes, ws_mode):
    name, _ = sandboxes.create("--workspace-mode", ws_mode)
    assert sandboxes.sh(name, "echo v1 > layerfile && echo h1 > ~/hf && echo t1 > /tmp/tf "
                              "&& mkdir -p ~/.cache/d && echo c > ~/.cache/d/c").returncode == 0
    r = sandboxes.brig_cmd("snapshot", name, "one")
    assert r.returncode == 0, r
    snap = sandboxes.root / name / "snapshots" / "one"
    meta = json.loads((snap / "meta.json").read_text())
    assert meta["home"] is True and meta["overlay"] is (ws_mode == "overlay"), meta
    assert sandboxes.sh(name, "echo v2 > layerfile && echo h2 > ~/hf && rm /tmp/tf ~/.cache/d/c "
                              "&& echo extra > ~/extra").returncode == 0
    r = sandboxes.brig_cmd("restore", name, "one")
    assert r.returncode == 0, r
    r = sandboxes.sh(name, "cat ~/hf /tmp/tf ~/.cache/d/c; ls -A ~")
    assert r.stdout == "h1\nt1\nc\n.cache\nhf\n", r
    layer = sandboxes.sh(name, "cat layerfile").stdout
    if ws_mode == "overlay":
        assert layer == "v1\n"  # the layer went back too
        assert not (brig.workspace / "layerfile").exists()
    else:
        assert layer == "v2\n"  # bind mode: the workspace is the host's, not the snapshot's
    # The snapshot itself is unchanged by what came after, and can be used again.
    assert sandboxes.sh(name, "echo v3 > layerfile").returncode == 0
    assert sandboxes.brig_cmd("restore", name, "one").returncode == 0
    if ws_mode == "overlay":
        assert sandboxes.sh(name, "cat layerfile").stdout == "v1\n"


def test_fork(brig, sandboxes):
    name, _ = sandboxes.create("--workspace-mode", "overlay", "--env", "FROM=parent")
    assert sandboxes.sh(name, "echo v1 > layerfile && echo h1 > ~/hf && echo t1 > /tmp/tf").returncode == 0
    assert sandboxes.brig_cmd("snapshot", name, "base").returncode == 0
    child = sandboxes.new_name("fork")
    sandboxes.names.append(child)
    r = sandboxes.brig_cmd("fork", name, "base", child)
    assert r.returncode == 0, r
    r = sandboxes.sh(child, 'cat layerfile ~/hf /tmp/tf; echo "$FROM"')
    assert r.stdout == "v1\nh1\nt1\nparent\n", r
    # Two independent sandboxes from here on.
    assert sandboxes.sh(child, "echo child > layerfile").returncode == 0
    assert sandboxes.sh(name, "cat layerfile").stdout == "v1\n"
    assert sandboxes.sh(child, "cat layerfile").stdout == "child\n"
    assert sandboxes.state(child)["supervisor_pid"] != sandboxes.state(name)["supervisor_pid"]
    r = sandboxes.brig_cmd("diff", child, "--json")
    assert {(d["path"], d["change"]) for d in json.loads(r.stdout)} == {("layerfile", "added")}, r
    r = sandboxes.brig_cmd("fork", name, "base", child)
    assert r.returncode == 125 and "already exists" in r.stderr, r


def test_snapshot_bad_input(brig, sandboxes):
    name, _ = sandboxes.create()
    assert sandboxes.brig_cmd("snapshot", name, "a").returncode == 0
    r = sandboxes.brig_cmd("snapshot", name, "a")
    assert r.returncode == 125 and "already has a snapshot" in r.stderr, r
    for cmd in (["snapshot", name, "../x"], ["restore", name, "nosuch"], ["fork", name, "nosuch", "x2"],
                ["snapshot", "nosuch", "a"], ["restore", "nosuch", "a"], ["fork", name, "a", "bad/name"]):
        r = sandboxes.brig_cmd(*cmd)
        assert r.returncode == 125, (cmd, r)
    assert not (sandboxes.root / "x2").exists()
    assert sandboxes.sh(name, "echo fine").stdout == "fine\n"


def test_snapshot_on_a_full_disk_saves_nothing_and_loses_nothing(brig, sandboxes):
    """A file size limit on brig snapshot stands in for a full disk: the
    layer copy fails; no snapshot appears, the sandbox runs on unchanged."""
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    assert sandboxes.sh(name, "head -c 300000 /dev/zero > big && echo h > ~/hf").returncode == 0
    env = brig.env(sandboxes.env())
    cmd = ["sh", "-c", f"trap '' XFSZ; ulimit -f 100; exec {brig.exe} snapshot {name} full"]
    r = subprocess.run(brig.prefix() + cmd, env=env, cwd=str(brig.workspace), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 125 and "nothing saved" in r.stderr, r
    snaps = sandboxes.root / name / "snapshots"
    assert not (snaps / "full").exists()
    assert [p.name for p in snaps.iterdir()] == [], list(snaps.iterdir())
    assert sandboxes.ls()[name]["status"] == "running"  # not left frozen
    r = sandboxes.sh(name, "wc -c < big; cat ~/hf")
    assert r.stdout.split() == ["300000", "h"], r
    assert sandboxes.brig_cmd("snapshot", name, "full").returncode == 0


def test_snapshot_list_and_remove(brig, sandboxes):
    name, _ = sandboxes.create("--workspace-mode", "overlay")
    for tag in ("a", "b"):
        assert sandboxes.brig_cmd("snapshot", name, tag).returncode == 0
    r = sandboxes.brig_cmd("snapshot", "--list", name)
    assert r.returncode == 0, r
    rows = {s["tag"]: s for s in json.loads(r.stdout)}
    assert set(rows) == {"a", "b"} and rows["a"]["overlay"] is True, rows
    assert sandboxes.brig_cmd("snapshot", "--rm", name, "a").returncode == 0
    assert [s["tag"] for s in json.loads(sandboxes.brig_cmd("snapshot", "--list", name).stdout)] == ["b"]
    assert not (sandboxes.root / name / "snapshots" / "a").exists()
    r = sandboxes.brig_cmd("snapshot", "--rm", name, "a")
    assert r.returncode == 125 and "no snapshot 'a'" in r.stderr, r
    r = sandboxes.brig_cmd("restore", name, "a")
    assert r.returncode == 125, r
    assert sandboxes.sh(name, "echo ok").stdout == "ok\n"
