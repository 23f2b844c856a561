"""brig mcp (docs/mcp.md): an agent host drives one sandbox over the Model
Context Protocol on stdio. The client is the official MCP TypeScript SDK's
(tests/mcp/client.mjs, pinned by tests/mcp/package-lock.json, installed by
`make mcp-deps`), root and rootless; the protocol conformance checks speak
JSON-RPC by hand. Every check asserts on the host side too: the workspace
on the host, the upstream server's connection count, `brig ls`."""
import json
import os
import pathlib
import select
import signal
import subprocess
import time

import pytest

from test_egress import Upstream

REPO = pathlib.Path(__file__).resolve().parents[2]
CLIENT = REPO / "tests" / "mcp" / "client.mjs"
TOOLS = {"run_command", "read_file", "write_file", "edit_file", "list_directory", "search_files", "snapshot",
         "restore", "diff", "reset", "network_status"}


@pytest.fixture(scope="module")
def sdk():
    if not (REPO / "tests" / "mcp" / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("tests/mcp/node_modules is missing: run `make mcp-deps` (make check does)")
    return CLIENT


@pytest.fixture(scope="module")
def server():
    s = Upstream()   # counts the connections it gets
    yield s
    s.close()


def drive(brig, sdk, steps, *flags):
    """brig mcp FLAGS under the SDK's client, STEPS in order; the client's
    close ends the session."""
    plan = {"command": brig.cmd("mcp", *flags), "cwd": str(brig.workspace), "env": brig.env(), "steps": steps}
    r = subprocess.run(["node", str(sdk)], input=json.dumps(plan), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    return json.loads(r.stdout)


def sandboxes(brig):
    r = brig.run("ls", "--json")
    assert r.returncode == 0, r
    return {s["name"] for s in json.loads(r.stdout)}


def structured(step):
    assert "error" not in step and not step.get("isError"), step
    return step["structuredContent"]


def tool_error(step):
    assert step.get("isError"), step
    return step["content"][0]["text"]


def test_sdk_client_every_tool(brig, sdk, server):
    """Initialize, list the tools, call each one; an --overlay session so
    diff and reset have a layer, and the host's workspace stays as it was."""
    (brig.workspace / "keep.txt").write_text("host file\n")
    port = server.http_port
    steps = [
        {"op": "listTools"},
        {"tool": "run_command", "arguments": {"command": "echo out; echo err >&2; exit 3"}},
        {"tool": "run_command", "arguments": {"command": ["sh", "-c", "echo $1 $FOO; pwd", "sh", "argv"],
                                              "env": {"FOO": "bar"}, "cwd": "/tmp"}},
        {"tool": "write_file", "arguments": {"path": "notes/a.txt", "content": "first\nsecond\nthird\n",
                                             "create_directories": True}},
        {"tool": "read_file", "arguments": {"path": "notes/a.txt", "start_line": 2, "end_line": 2}},
        {"tool": "edit_file", "arguments": {"path": "notes/a.txt", "old_string": "second", "new_string": "2nd"}},
        {"tool": "read_file", "arguments": {"path": "notes/a.txt"}},
        {"tool": "list_directory", "arguments": {"path": "notes"}},
        {"tool": "search_files", "arguments": {"glob": "*.txt"}},
        {"tool": "search_files", "arguments": {"regex": "^2n", "glob": "*.txt"}},
        {"tool": "snapshot", "arguments": {"tag": "s1"}},
        {"tool": "write_file", "arguments": {"path": "notes/a.txt", "content": "changed\n"}},
        {"tool": "restore", "arguments": {"tag": "s1"}},
        {"tool": "read_file", "arguments": {"path": "notes/a.txt"}},
        {"tool": "diff", "arguments": {}},
        {"tool": "run_command", "arguments": {"command": f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' "
                                                         f"http://evil.test:{port}/; "
                                                         f"curl -sS -m 5 http://svc.test:{port}/ok"}},
        {"tool": "network_status", "arguments": {}},
        {"tool": "run_command", "arguments": {"command": "sleep 30", "timeout_seconds": 1}},
        {"tool": "run_command", "arguments": {"command": "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END"}},
        {"tool": "reset", "arguments": {}},
        {"tool": "read_file", "arguments": {"path": "notes/a.txt"}},
        {"op": "listResources"},
        {"op": "read", "uri": "brig://reports/1"},
        {"op": "read", "uri": "brig://policy"},
    ]
    before = server.connections
    out = drive(brig, sdk, steps, "--overlay", "--resolve", "svc.test:127.0.0.1", "--resolve", "evil.test:127.0.0.1",
                "--allow-cidr", "127.0.0.1/32", "--allow-host", f"svc.test:{port}")
    s = out["steps"]
    assert out["server"]["name"] == "brig" and {"tools", "resources", "logging"} <= set(out["capabilities"])
    listed = {t["name"]: t for t in s[0]["tools"]}
    assert set(listed) == TOOLS
    for t in listed.values():
        assert t["inputSchema"]["type"] == "object" and t["inputSchema"]["additionalProperties"] is False, t
        assert t["outputSchema"]["type"] == "object", t
    r = structured(s[1])
    assert (r["exit_code"], r["stdout"], r["stderr"], r["reason"]) == (3, "out\n", "err\n", "exited"), r
    assert r["ended"] == "exited with status 3"
    assert structured(s[2])["stdout"] == "argv bar\n/tmp\n"
    assert structured(s[3])["bytes_written"] == 19
    assert structured(s[4])["content"] == "second\n"
    assert structured(s[5])["replacements"] == 1
    assert structured(s[6])["content"] == "first\n2nd\nthird\n"
    assert [e["name"] for e in structured(s[7])["entries"]] == ["a.txt"]
    found = {m["path"] for m in structured(s[8])["matches"]}
    assert found == {f"{brig.workspace}/keep.txt", f"{brig.workspace}/notes/a.txt"}, found
    assert structured(s[9])["matches"] == [{"path": f"{brig.workspace}/notes/a.txt", "line": 2, "text": "2nd"}]
    assert "s1" in [x["tag"] for x in structured(s[10])["snapshots"]]
    assert structured(s[13])["content"] == "first\n2nd\nthird\n"          # restored
    assert {c["path"] for c in structured(s[14])["changes"]} >= {"notes", "notes/a.txt"}, s[14]
    # the refused connection, in the command's own result; the server never saw it
    net = structured(s[15])
    assert net["stdout"].startswith("403") and net["stdout"].endswith("path=/ok host=svc.test:%d\n" % port), net
    assert net["refusals"] == [f"connection to evil.test:{port} refused: host not in the allow list "
                               f"(allowed: svc.test:{port}); the user can allow it with --allow-host "
                               f"evil.test:{port}"], net
    assert server.connections == before + 1                                # the allowed one only
    status = structured(s[16])
    assert status["allow_hosts"] == [f"svc.test:{port}"]
    assert [f["what"] for f in status["refusals"]] == [f"evil.test:{port}"], status
    assert status["refusals"][0]["allow_with"] == f"--allow-host evil.test:{port}"
    t = structured(s[17])
    assert (t["reason"], t["exit_code"]) == ("timeout", 124) and "timeout_seconds" in t["ended"], t
    big = structured(s[18])
    assert big["stdout_cut_bytes"] == 3000000 + 5 - 30000, big["stdout_cut_bytes"]
    assert len(big["stdout"]) < 31000 and big["stdout"].endswith("x\nEND\n"), big["stdout"][-100:]
    assert "bytes of stdout cut here" in big["stdout"]
    assert structured(s[19])["reset"] is True
    assert "No such file" in tool_error(s[20]) or "ENOENT" in tool_error(s[20]), s[20]
    uris = {x["uri"] for x in s[21]["resources"]}
    assert {"brig://policy", "brig://audit", "brig://reports/1"} <= uris, uris
    assert json.loads(s[22]["contents"][0]["text"])["exit_code"] == 3
    assert f"svc.test:{port}" in json.loads(s[23]["contents"][0]["text"])["network"]["allow_hosts"]
    assert any("refused" in (m["data"] if isinstance(m["data"], str) else "") for m in out["logs"]), out["logs"]
    # the host's workspace: as it was (an overlay session); the sandbox: gone with the session
    assert sorted(p.name for p in brig.workspace.iterdir()) == ["keep.txt"]
    assert not [n for n in sandboxes(brig) if n.startswith("mcp-")], sandboxes(brig)
