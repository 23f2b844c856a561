"""Helpers of the SDK tests (test_sdk_python.py, test_sdk_typescript.py):
a live `brig serve` per mode, running test code as the mode's user, a
server that lies (for the attacks an SDK must survive), crafted tars."""
import io
import json
import os
import pathlib
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback

import pytest

from conftest import IS_ROOT, NOBODY, REPO, _OURS

SDK_PY = REPO / "sdk" / "python"
SDK_TS = REPO / "sdk" / "typescript"
# Another unprivileged user than the sandbox's (the planted server's).
OTHER_UID = 65533

# The catalogue's SDK rows (docs/security.md, 236-240): id -> (technique,
# control), marked on the Python and the TypeScript test of each.
ATTACKS = {
    "sdk-download-outside": ("a tar from the server or the sandbox (names with '..' or absolute, links out, a link "
                             "then a file through it, link chains, hard links out) unpacked by files.download()",
                             "sdk download"),
    "sdk-download-modes": ("a tar with a setuid-root and world-writable file, a setgid directory, a device node and "
                           "a FIFO, owned by another uid, unpacked by files.download()", "sdk download"),
    "sdk-planted-socket": ("another local user's server at the socket the SDK connects to (a stale BRIG_SOCKET, a "
                           "shared /tmp): it would receive commands, files and tokens", "sdk transport"),
    "sdk-unbounded-answer": ("a server (or a sandbox's bytes relayed by it) answers without end: a body declared "
                             "10 GiB, a chunked body that never ends, an NDJSON line that never ends", "sdk transport"),
    "sdk-hostile-sandbox-download": ("a sandbox fills the directory a caller downloads: links out of the target "
                                     "(through a link to '..', and plain), a setuid file, a world-writable "
                                     "directory, a FIFO", "sdk download"),
}


def mode_uid(mode):
    return 0 if mode == "root" else (NOBODY if IS_ROOT else os.geteuid())


def prefix_for(uid):
    if uid == os.geteuid():
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


_MADE = []


def user_dir(prefix, uid, mode=0o700):
    """A scratch directory owned by uid (removed by remove_dirs(), which
    the test modules' mode fixture calls at its end)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    _OURS["dirs"].append(str(d))
    _MADE.append(d)
    d.chmod(mode)
    if uid != os.geteuid():
        os.chown(d, uid, uid)
    return d


class Serve:
    """`brig serve --socket DIR/serve.sock` as the mode's user."""

    def __init__(self, bindir, mode, extra=()):
        self.mode = mode
        self.uid = mode_uid(mode)
        self.bindir = bindir
        self.dir = user_dir("brig-serve-", self.uid, 0o711)
        self.home = self.dir / "home"
        self.home.mkdir()
        self.socket = str(self.dir / "serve.sock")
        self.log = open(self.dir / "serve.log", "w+b")
        env = self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(self.home),
                          "LANG": "C.UTF-8", "XDG_RUNTIME_DIR": str(self.dir)}
        if self.uid != os.geteuid():
            os.chown(self.home, self.uid, self.uid)
        self.proc = subprocess.Popen(prefix_for(self.uid) + [str(bindir / "brig"), "serve", "--socket", self.socket,
                                                              "--remove-on-exit", *extra],
                                     cwd=str(self.dir), env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"brig serve did not come up ({self.proc.returncode}): {self.output()}")
            time.sleep(0.02)

    def brig(self, *args):
        """The brig CLI as the server's user, with its state (brig pool for its pools)."""
        return subprocess.run(prefix_for(self.uid) + [str(self.bindir / "brig"), *args], cwd=str(self.dir),
                              env=self.env, capture_output=True, text=True, timeout=60)

    def _answers(self):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-4000:]

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def remove_dirs():
    """Remove what user_dir() made (a module's fixture calls it at its end)."""
    while _MADE:
        subprocess.run(["rm", "-rf", "--one-file-system", str(_MADE.pop())], check=False)


@pytest.fixture(scope="module", params=["root", "rootless"], name="mode")
def module_mode(request):
    """conftest's `mode`, for a whole module (one server, one node run per
    mode); then the directories the module made go. A test module takes
    it with `mode = module_mode`."""
    if request.param == "root" and not IS_ROOT:
        pytest.skip("ROOT MODE NOT TESTED: the suite is not running as root")
    yield request.param
    remove_dirs()


def run_as(uid, fn, *args):
    """fn(*args) in a child process running as uid (the caller's own
    process when uid is ours); its return value, or its failure re-raised
    here with the child's traceback."""
    if uid == os.geteuid():
        return fn(*args)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            out = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
            out = ("err", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        try:
            data = pickle.dumps(out)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps(("err", f"result not picklable: {e}"))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    if not data:
        raise AssertionError("the test child died without an answer")
    kind, val = pickle.loads(data)
    if kind == "err":
        raise AssertionError(f"in the child as uid {uid}:\n{val}")
    return val


# ---- a server that lies --------------------------------------------------
#
# Serves canned answers on a unix socket and logs every request (method,
# path, headers, body) to LOG, one JSON line each: the host-side proof of
# what an SDK sent it. Run as any user (setpriv).
LYING_SERVER = r'''
import http.server, json, socketserver, sys, os
sock, answers_path, log_path = sys.argv[1:4]
answers = json.load(open(answers_path))
log = open(log_path, "a", buffering=1)
LIMIT = 512 << 20

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def _any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        log.write(json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers),
                              "body": body.decode("latin-1")}) + "\n")
        path = self.path.split("?")[0]
        for prefix, (status, ctype, data_file) in answers.items():
            if path.endswith(prefix):
                data = open(data_file, "rb").read()
                if data.startswith(b"ENDLESS "):
                    return self._endless(status, ctype, data.split()[1].decode())
                break
        else:
            status, ctype = 404, "application/json"
            data = b'{"error":{"code":"not_found","message":"no","details":null}}'
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = do_DELETE = _any

    def _endless(self, status, ctype, how):
        # An answer that never ends (up to LIMIT): a declared 10 GiB
        # body, a chunked one, or one NDJSON line without its newline.
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if how == "length":
            self.send_header("Content-Length", str(10 << 30))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        block = (b'{"type":"stdout","data":"' if how == "line" else b"") + b"A" * (1 << 20)
        sent = 0
        try:
            while sent < LIMIT:
                piece = block if sent == 0 else b"A" * (1 << 20)
                self.wfile.write(piece if how == "length" else b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
        except OSError:
            pass
        log.write(json.dumps({"endless": how, "sent": sent}) + "\n")
        self.close_connection = True

class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

srv = S(sock, H)
os.chmod(sock, 0o777)
print("ready", flush=True)
srv.serve_forever()
'''


class LyingServer:
    def __init__(self, uid, answers):
        """answers: {path suffix: (status, content type, bytes)}."""
        self.dir = user_dir("brig-liar-", uid, 0o755)
        self.socket = str(self.dir / "serve.sock")
        self.log = self.dir / "requests.jsonl"
        self.log.touch()
        files = {}
        for i, (suffix, (status, ctype, data)) in enumerate(answers.items()):
            p = self.dir / f"answer{i}"
            p.write_bytes(data)
            files[suffix] = (status, ctype, str(p))
        (self.dir / "answers.json").write_text(json.dumps(files))
        (self.dir / "server.py").write_text(LYING_SERVER)
        if uid != os.geteuid():
            os.chown(self.log, uid, uid)
        self.proc = subprocess.Popen(prefix_for(uid) + [sys.executable, str(self.dir / "server.py"), self.socket,
                                                         str(self.dir / "answers.json"), str(self.log)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if b"ready" not in line:
            self.proc.kill()
            pytest.fail(f"the lying server did not start: {self.proc.stderr.read()!r}")

    def requests(self):
        return [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def sandbox_json(name):
    return json.dumps({"name": name, "status": "running", "owner_uid": 0}).encode()


def crafted_tar(entries):
    """A tar of TarInfo-like dicts: name, type (file, dir, sym, hard, chr,
    fifo), data, linkname, mode."""
    b = io.BytesIO()
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
             "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.type = kinds[e.get("type", "file")]
            ti.mode = e.get("mode", 0o644)
            ti.uid = ti.gid = e.get("uid", 0)
            ti.linkname = e.get("linkname", "")
            if ti.type == tarfile.CHRTYPE:
                ti.devmajor, ti.devminor = e.get("dev", (1, 3))
            data = e.get("data", b"")
            ti.size = len(data) if ti.type == tarfile.REGTYPE else 0
            tf.addfile(ti, io.BytesIO(data) if ti.size else None)
    return b.getvalue()


def tree(root):
    """Every path below root (not following links) with its type and mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_uid)
    return out


def links_leaving(root):
    """Links below root whose target resolves outside it."""
    root = os.path.realpath(root)
    bad = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                real = os.path.realpath(p)
                if real != root and not real.startswith(root + "/"):
                    bad.append((os.path.relpath(p, root), os.readlink(p), real))
    return bad


def copy_tree_for(uid, src, prefix):
    """A copy of src readable by uid (a checkout may live where it cannot read)."""
    d = user_dir(prefix, uid, 0o755)
    dst = d / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    for dirpath, dirnames, filenames in os.walk(d):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    return dst
