"""The TypeScript SDK (sdk/typescript): its `node --test` suite, which
starts its own `brig serve`, run once as root and once as nobody (from a
copy the user can read), each of its tests reported here; the catalogue's
SDK attacks are marked on the tests that attempt them, and what only the
host can see (the planted server received nothing) is checked here."""
import re
import shutil
import subprocess

import pytest

from sdk_helpers import (ATTACKS, OTHER_UID, SDK_TS, LyingServer, copy_tree_for, mode_uid, module_mode,
                         prefix_for, sandbox_json)
from test_escape import attack

# One worker for every module that runs brig serve (make check: --dist loadgroup):
# a root server lists every sandbox of root, so tests in two workers saw
# each other's sandboxes come and go.
pytestmark = pytest.mark.xdist_group("serve")

NODE = shutil.which("node")


mode = module_mode  # conftest's, for the whole module


@pytest.fixture(scope="module")
def suite(mode, bindir):
    """{test name: (ok, TAP details)} of one run of the node suite."""
    if NODE is None:
        pytest.fail("node is missing: scripts/install-deps installs nodejs")
    uid = mode_uid(mode)
    tree = copy_tree_for(uid, SDK_TS, "brig-sdk-ts-")
    liar = LyingServer(OTHER_UID, {"/v1/sandboxes/box": (200, "application/json", sandbox_json("box")),
                                   "/v1/sandboxes": (201, "application/json", sandbox_json("box"))})
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tree.parent),
           "BRIG_BIN": str(bindir / "brig"), "BRIG_TEST_FOREIGN_SOCKET": liar.socket}
    files = sorted(str(p.relative_to(tree)) for p in (tree / "test").glob("*.test.js"))
    try:
        cp = subprocess.run(prefix_for(uid) + [NODE, "--test", "--test-reporter=tap", *files], cwd=str(tree), env=env,
                            capture_output=True, text=True, timeout=300)
        received = liar.requests()
    finally:
        liar.stop()
    results = {}
    blocks = re.split(r"^# Subtest: ", cp.stdout, flags=re.M)
    for block in blocks[1:]:
        m = re.search(r"^(not ok|ok) \d+ - (.*?)(?: # (SKIP|TODO).*)?$", block, re.M)
        if m:
            results[m.group(2)] = (m.group(1) == "ok" and not m.group(3), block[:6000])
    return {"results": results, "rc": cp.returncode, "out": cp.stdout[-8000:] + cp.stderr[-4000:],
            "foreign_requests": received, "mode": mode}


def _check(suite, tag):
    hits = {k: v for k, v in suite["results"].items() if tag in k}
    assert hits, f"no test named {tag!r} ran (node exit {suite['rc']}):\n{suite['out']}"
    for name, (ok, block) in hits.items():
        assert ok, f"{name} ({suite['mode']}):\n{block}"


def test_typescript_suite_passes(suite):
    assert suite["results"], suite["out"]
    failed = [k for k, (ok, _) in suite["results"].items() if not ok]
    assert not failed and suite["rc"] == 0, f"{failed}:\n{suite['out']}"


@attack("sdk-download-outside", *ATTACKS["sdk-download-outside"])
def test_ts_download_outside(suite):
    _check(suite, "[sdk-download-outside]")


@attack("sdk-download-modes", *ATTACKS["sdk-download-modes"])
def test_ts_download_modes(suite):
    _check(suite, "[sdk-download-modes]")


@attack("sdk-planted-socket", *ATTACKS["sdk-planted-socket"])
def test_ts_planted_socket(suite):
    _check(suite, "[sdk-planted-socket]")
    assert suite["foreign_requests"] == [], "the planted server received a request"


def test_ts_forged_output(suite):
    _check(suite, "[forged-output]")


@attack("sdk-unbounded-answer", *ATTACKS["sdk-unbounded-answer"])
def test_ts_unbounded_answer(suite):
    _check(suite, "[sdk-unbounded-answer]")


@attack("sdk-hostile-sandbox-download", *ATTACKS["sdk-hostile-sandbox-download"])
def test_ts_hostile_sandbox_download(suite):
    _check(suite, "[sdk-hostile-sandbox-download]")
