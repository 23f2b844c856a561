"""The Python SDK (sdk/python, package `brig`) against a live `brig serve`,
as root and rootless: the server runs as the mode's user, and so does the
SDK (test bodies run in a child as that user, sdk_helpers.run_as).

The attacks an SDK must survive come from the sandbox (the bytes it
makes: file names, links, modes, output) and from whatever answers on
the socket (a server that lies, or one another user planted). Each is
asserted on the host: what exists outside the download target, what the
planted server received.
"""
import os
import stat
import sys
import threading
import time

import pytest

from sdk_helpers import (OTHER_UID, SDK_PY, LyingServer, Serve, crafted_tar, links_leaving, mode_uid, run_as,
                         sandbox_json, tree, user_dir)
from test_escape import attack

sys.path.insert(0, str(SDK_PY))
import brig as sdk  # noqa: E402


# ---- attacks through the download path (no server needed: one that lies) --

def _outside_cases(outside):
    o = os.path.basename(outside)
    return [
        ("dotdot", [{"name": f"../{o}/pwned"}]),
        ("absolute", [{"name": f"{outside}/pwned"}]),
        ("inner-dotdot", [{"name": "sub/x"}, {"name": f"sub/../../{o}/pwned"}]),
        ("link-then-write", [{"name": "lnk", "type": "sym", "linkname": f"../{o}"}, {"name": "lnk/pwned"}]),
        ("link-absolute", [{"name": "abs", "type": "sym", "linkname": outside}]),
        ("link-climbs", [{"name": "deep/a/b", "type": "dir"}, {"name": "deep/esc", "type": "sym",
                                                                 "linkname": f"../../{o}"}]),
        # d/up -> .. is inside (it names the target itself); d/esc goes
        # through it and one more '..': lexically inside, outside once the
        # kernel follows d/up.
        ("link-chain", [{"name": "d", "type": "dir"}, {"name": "d/up", "type": "sym", "linkname": ".."},
                        {"name": "d/esc", "type": "sym", "linkname": f"up/../{o}"}]),
        ("hardlink-out", [{"name": "hl", "type": "hard", "linkname": f"../{o}/target"}]),
        ("hardlink-absolute", [{"name": "hl", "type": "hard", "linkname": f"{outside}/target"}]),
    ]


@attack("sdk-download-outside", "a tar from the server or the sandbox (names with '..' or absolute, links out, "
        "a link then a file through it, link chains, hard links out) unpacked by files.download()",
        "sdk download")
def test_download_never_writes_outside_target(mode):
    uid = mode_uid(mode)
    base = user_dir("brig-sdk-dl-", uid, 0o755)
    outside = base / "outside"
    outside.mkdir()
    (outside / "target").write_text("host file\n")
    if uid != os.geteuid():
        for p in (outside, outside / "target"):
            os.chown(p, uid, uid)
    cases = _outside_cases(str(outside))
    # One server per case: the case's tar answers every files/tar request.
    results = {}
    for label, entries in cases:
        liar = LyingServer(uid, {"/v1/sandboxes/box": (200, "application/json", sandbox_json("box")),
                                 "/files/tar": (200, "application/x-tar",
                                                crafted_tar([{"name": "ok.txt", "data": b"fine"}] + entries))})
        dest = str(base / f"dest-{label}")

        def body(sock=liar.socket, dest=dest):
            sb = sdk.Client(socket=sock).connect("box")
            try:
                sb.files.download("/work", dest)
                return "unpacked"
            except sdk.UnsafeArchive as e:
                return f"refused: {e.message}"
        try:
            results[label] = run_as(uid, body)
        finally:
            liar.stop()
        assert sorted(os.listdir(outside)) == ["target"], (label, os.listdir(outside))
        assert os.stat(outside / "target").st_nlink == 1, label
        assert (outside / "target").read_text() == "host file\n"
        assert not links_leaving(dest), (label, links_leaving(dest))
        assert not os.path.exists(base / "pwned")
    refused = {k: v for k, v in results.items() if v.startswith("refused")}
    assert set(refused) == {label for label, _ in cases}, results


@attack("sdk-download-modes", "a sandbox's tar with a setuid-root, world-writable file, a device node and a FIFO, "
        "owned by another uid, unpacked by files.download()", "sdk download")
def test_download_drops_setuid_owner_and_devices(mode):
    uid = mode_uid(mode)
    base = user_dir("brig-sdk-dl-", uid, 0o755)
    entries = [{"name": "suid", "data": b"#!/bin/sh\nid\n", "mode": 0o4777, "uid": 4242},
               {"name": "sgid-dir", "type": "dir", "mode": 0o2777},
               {"name": "sgid-dir/f", "data": b"x", "mode": 0o2666},
               {"name": "null", "type": "chr", "dev": (1, 3), "mode": 0o666},
               {"name": "fifo", "type": "fifo"}]
    liar = LyingServer(uid, {"/v1/sandboxes/box": (200, "application/json", sandbox_json("box")),
                             "/files/tar": (200, "application/x-tar", crafted_tar(entries))})
    dest = base / "dest"

    def body():
        d = sdk.Client(socket=liar.socket).connect("box").files.download("/work", str(dest))
        return sorted(d.paths), sorted(n for n, _ in d.skipped)
    try:
        paths, skipped = run_as(uid, body)
    finally:
        liar.stop()
    assert skipped == ["fifo", "null"]
    got = tree(dest)
    assert set(got) == {"suid", "sgid-dir", "sgid-dir/f"}, got
    for name, (m, owner) in got.items():
        assert not m & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), (name, oct(m))
        assert not m & (stat.S_IWGRP | stat.S_IWOTH), (name, oct(m))
        assert owner == uid, (name, owner)
    assert stat.S_IMODE(got["suid"][0]) == 0o755


@attack("sdk-planted-socket", "another local user's server at the socket the SDK connects to (a stale "
        "BRIG_SOCKET, a shared /tmp): the SDK would send it commands, files and the token", "sdk transport")
def test_sdk_refuses_a_server_of_another_user(mode):
    uid = mode_uid(mode)
    liar = LyingServer(OTHER_UID, {"/v1/sandboxes/box": (200, "application/json", sandbox_json("box")),
                                   "/execs": (200, "application/json", b"{}")})
    own = LyingServer(uid, {"/v1/health": (200, "application/json", b'{"status":"ok"}')})

    def body():
        out = {"own": sdk.Client(socket=own.socket).health()["status"]}
        try:
            sb = sdk.Client(socket=liar.socket).connect("box")
            sb.run(["sh", "-c", "echo secret"])
            out["liar"] = "talked"
        except sdk.ConnectionError as e:
            out["liar"] = e.code
            out["message"] = e.message
        return out
    try:
        out = run_as(uid, body)
    finally:
        liar.stop()
        own.stop()
    assert out["own"] == "ok"  # the same SDK talks to a server of its own user
    assert out["liar"] == "untrusted_server", out
    assert f"uid {OTHER_UID}" in out["message"] and "socket=" in out["message"]
    assert liar.requests() == [], "the planted server received a request"
