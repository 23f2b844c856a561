"""A bind-mode sandbox's changes through the engine's front ends (issue 22):
brig serve's /diff lists what changed since create, and the sandbox's audit
stream gets a files event when it stops. Root and rootless servers; every
check holds the answer against the files on the HOST."""
import hashlib
import json
import os
import pathlib
import subprocess

import pytest

from serve_helpers import NOBODY, module_server
from test_audit_stream import valid

pytestmark = pytest.mark.xdist_group("serve")

mode, server = module_server("ach-")


def test_serve_diff_and_stop_files_event_of_a_bind_sandbox(server):
    c = server.client()
    ws = server.dir / "ws-changes"
    ws.mkdir()
    (ws / "old.txt").write_text("old\n")
    if server.uid:
        os.chown(ws, NOBODY, NOBODY)
        os.chown(ws / "old.txt", NOBODY, NOBODY)
    a = f"ach-{server.mode}"
    r = c.post("/v1/sandboxes", {"name": a, "workspace": str(ws)})
    assert r.status == 201, r
    res = c.run(a, ["sh", "-c", "echo made > new.txt; rm old.txt"], cwd=str(ws))
    assert res["result"]["exit_code"] == 0, res
    want = hashlib.sha256((ws / "new.txt").read_bytes()).hexdigest()
    changes = {ch["path"]: ch for ch in c.get(f"/v1/sandboxes/{a}/diff").json["changes"]}
    assert changes["new.txt"]["change"] == "added" and changes["new.txt"]["sha256"] == want, changes
    assert changes["old.txt"]["change"] == "deleted" and set(changes) == {"new.txt", "old.txt"}, changes
    # brig log NAME --follow, as the sandbox's user: it ends with the stream's end
    follow = subprocess.Popen(server.brig_cmd("log", a, "--follow", "--json"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=server.brig_env())
    try:
        assert c.post(f"/v1/sandboxes/{a}/stop").json["status"] == "stopped"
        out, errs = follow.communicate(timeout=30)
    finally:
        follow.kill()
        follow.wait()
    assert follow.returncode == 0, errs
    evs = [json.loads(line) for line in out.splitlines()]
    # and once it is stopped, the same stream from its state directory
    log = server.brig("log", a, "--json")
    assert log.returncode == 0 and log.stdout == out, log
    stream = pathlib.Path(f"{server.dir}-run") / "brig" / a / "audit.jsonl"
    assert stream.read_text() == out
    files = [e for e in evs if e["event"] == "files"]
    assert len(files) == 1 and files[0]["complete"], evs
    ch = {x["path"]: x for x in files[0]["changes"]}
    assert ch[f"{ws}/new.txt"]["sha256"] == want and ch[f"{ws}/old.txt"]["change"] == "deleted", ch
    assert evs[-1]["event"] == "end" and evs.index(files[0]) == len(evs) - 2, [e["event"] for e in evs]
    valid(evs)
    assert c.delete(f"/v1/sandboxes/{a}").status == 200
