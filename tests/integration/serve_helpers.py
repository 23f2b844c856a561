"""A live `brig serve` for tests, and a client that connects AS a given
uid (the connecting process's credentials are what SO_PEERCRED reports),
records every route it used against docs/api/openapi.json, and checks
each JSON answer against the document's schema for that status."""
import contextlib
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import jsonschema
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
OPENAPI = json.loads((REPO / "docs" / "api" / "openapi.json").read_text())
NOBODY = 65534


def routes():
    """{(METHOD, template)} of the document."""
    return {(m.upper(), p) for p, ops in OPENAPI["paths"].items() for m in ops}


def _template_of(method, path):
    for tmpl, ops in OPENAPI["paths"].items():
        if method.lower() not in ops:
            continue
        rx = "^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(tmpl)) + "/?$"
        if re.match(rx, path):
            return tmpl
    return None


_resolver_doc = {"components": OPENAPI["components"]}


def check_schema(method, tmpl, status, ctype, doc):
    op = OPENAPI["paths"][tmpl][method.lower()]
    resp = op["responses"].get(str(status)) or op["responses"].get("default")
    assert resp is not None, f"{method} {tmpl}: status {status} is not in the document"
    if "$ref" in resp:
        resp = OPENAPI["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
    content = resp.get("content", {})
    assert ctype in content, f"{method} {tmpl} {status}: content type {ctype} is not in the document ({list(content)})"
    schema = dict(content[ctype]["schema"])
    schema["components"] = OPENAPI["components"]
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def connect_as(path, uid, gid=None):
    """A unix socket connected to PATH by a child running as UID (its
    groups cleared): the server sees UID through SO_PEERCRED."""
    if uid == os.geteuid():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(path))
        return s
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            a.close()
            os.setgroups([])
            g = uid if gid is None else gid
            os.setresgid(g, g, g)
            os.setresuid(uid, uid, uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                socket.send_fds(b, [b"ok"], [s.fileno()])
            except OSError as e:
                b.sendall(f"err {e.errno}".encode())
        except BaseException:
            code = 1
        os._exit(code)
    b.close()
    msg, fds, _, _ = socket.recv_fds(a, 64, 1)
    os.waitpid(pid, 0)
    a.close()
    if not fds:
        raise PermissionError(int(msg.split()[1]) if msg.startswith(b"err") else 0, msg.decode())
    return socket.socket(fileno=fds[0])


class Conn(http.client.HTTPConnection):
    def __init__(self, sock_path, uid):
        super().__init__("localhost", timeout=30)
        self.sock_path, self.uid = sock_path, uid

    def connect(self):
        self.sock = connect_as(self.sock_path, self.uid)
        self.sock.settimeout(30)


class Answer:
    def __init__(self, status, ctype, body):
        self.status, self.ctype, self.body = status, ctype, body

    @property
    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<{self.status} {self.ctype} {self.body[:600]!r}>"


class Client:
    """One caller (a uid) of one server; `used` collects (METHOD, template)."""

    def __init__(self, server, uid, used=None, tcp=None, token=None):
        self.server, self.uid, self.used = server, uid, used if used is not None else set()
        self.tcp, self.token = tcp, token

    def conn(self):
        if self.tcp:
            return http.client.HTTPConnection(*self.tcp, timeout=30)
        return Conn(self.server.sock, self.uid)

    def request(self, method, path, body=None, ctype=None, headers=None, check=True):
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            ctype = ctype or "application/json"
        if ctype:
            h["Content-Type"] = ctype
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        c = self.conn()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            ans = Answer(r.status, (r.getheader("Content-Type") or "").split(";")[0], data)
        finally:
            c.close()
        tmpl = _template_of(method, path.split("?")[0])
        if tmpl:
            self.used.add((method, tmpl))
        if check and tmpl and ans.ctype == "application/json":
            check_schema(method, tmpl, ans.status, ans.ctype, ans.json)
        return ans

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body if body is not None else b"", **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body=body, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body=body, **kw)

    def stream(self, method, path, body=None):
        """(connection, response) of a streamed answer: read lines from it."""
        h = {"Content-Type": "application/json"} if body is not None else {}
        c = self.conn()
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=h)
        r = c.getresponse()
        tmpl = _template_of(method, path.split("?")[0])
        if tmpl:
            self.used.add((method, tmpl))
        return c, r

    def lines(self, method, path, body=None):
        """Every NDJSON event of a stream, each checked against the document."""
        c, r = self.stream(method, path, body)
        tmpl = _template_of(method, path.split("?")[0])
        out = []
        try:
            assert r.status == 200, (r.status, r.read())
            assert r.getheader("Content-Type").startswith("application/x-ndjson")
            for line in r:
                if line.strip():
                    ev = json.loads(line)
                    check_schema(method, tmpl, 200, "application/x-ndjson", ev)
                    out.append(ev)
        finally:
            c.close()
        return out

    def create(self, **body):
        r = self.post("/v1/sandboxes", body)
        assert r.status == 201, r
        return r.json["name"]

    def run(self, name, argv, **kw):
        body = {"argv": argv, "wait": True, **kw} if isinstance(argv, list) else {"cmd": argv, "wait": True, **kw}
        r = self.post(f"/v1/sandboxes/{name}/execs", body)
        assert r.status == 200, r
        return r.json


class Server:
    """brig serve as USER ("root" or "rootless"), its socket in DIR."""

    def __init__(self, bindir, mode, d, *args):
        self.mode, self.dir = mode, pathlib.Path(d)
        self.uid = 0 if mode == "root" else NOBODY
        self.sock = self.dir / "serve.sock"
        self.args = list(args)
        self.bindir = bindir
        self.log = self.dir / "serve.log"
        if self.uid:
            os.chown(self.dir, NOBODY, NOBODY)
        self.proc = None

    def cmd(self, *extra):
        pre = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"] if self.uid else []
        # --state: this test's own owners and workspaces, not those of every root server on the host
        return pre + [str(self.bindir / "brig"), "serve", "--socket", str(self.sock), "--state", str(self.dir),
                      *self.args, *extra]

    def env(self):
        return state_env(self.mode, self.dir, {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                                               "HOME": str(self.dir), "LANG": "C.UTF-8"})

    def brig(self, *args, timeout=60):
        """The brig CLI as the server's user, seeing the same sandboxes."""
        return brig_as(self.bindir, self.mode, *args, timeout=timeout, d=self.dir)

    def brig_cmd(self, *args):
        """The same as an argv, with brig_env() its environment (a Popen)."""
        return brig_as_cmd(self.bindir, self.mode, *args)

    def brig_env(self):
        return brig_as_env(self.mode, self.dir)

    def start(self, *extra, wait=True):
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(self.cmd(*extra), env=self.env(), stdout=self.logf, stderr=self.logf,
                                     cwd=str(self.dir))
        if wait:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(f"brig serve exited {self.proc.returncode}: {self.log.read_text()}")
                try:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(str(self.sock))
                    s.close()
                    return self
                except OSError:
                    time.sleep(0.02)
            raise AssertionError("brig serve did not listen: " + self.log.read_text())
        return self

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        if self.proc:
            self.logf.close()
            # an ASan build (BRIG_BUILD=build-asan) reports leaks and errors at exit
            log = self.log.read_text(errors="replace")
            assert "Sanitizer" not in log and "runtime error" not in log, log[-6000:]
        return self.proc.returncode if self.proc else None

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def threads(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def client(self, uid=None, used=None):
        return Client(self, self.uid if uid is None else uid, used)


def state_env(mode, d, env):
    """A state root of the test's own (XDG_RUNTIME_DIR, DIR-run beside the
    server's directory), as persist_helpers gives each test: rootless,
    /tmp/brig-65534 is every rootless run's on this host, its filter cache
    included; as root, /run/brig holds every root sandbox, which a root
    server lists and the whole-host checks of other tests count."""
    run = pathlib.Path(f"{d}-run")
    if not run.exists():
        run.mkdir(mode=0o700)
        if mode == "rootless":
            os.chown(run, NOBODY, NOBODY)
    return {**env, "XDG_RUNTIME_DIR": str(run)}


def brig_as_cmd(bindir, mode, *args):
    """The argv of the brig CLI as the server's user."""
    pre = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"] if mode == "rootless" else []
    return pre + [str(bindir / "brig"), *args]


def brig_as_env(mode, d):
    return state_env(mode, d, {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"})


def brig_as(bindir, mode, *args, timeout=60, d):
    """The brig CLI as the server's user (what it sees of the sandboxes)."""
    return subprocess.run(brig_as_cmd(bindir, mode, *args), capture_output=True, text=True, timeout=timeout,
                          env=brig_as_env(mode, d))


@contextlib.contextmanager
def serve_dir(mode):
    """A 0755 directory in /tmp (nobody reaches it) for a server's socket and log."""
    d = pathlib.Path(tempfile.mkdtemp(prefix=f"brig-test-serve-{mode}-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(f"{d}-run", ignore_errors=True)


def sandboxes_of(server):
    """{name: row} of `brig ls --json` as the server's user."""
    r = server.brig("ls", "--json")
    return {s["name"]: s for s in json.loads(r.stdout or "[]")}


def module_server(prefix, *args):
    """The fixtures `mode` (root, rootless: the catalogue's columns read
    this name) and `server`: one brig serve per module and mode, started
    with ARGS; what a failed test left named PREFIX* is removed after."""
    @pytest.fixture(scope="module", params=["root", "rootless"])
    def mode(request):
        return request.param

    @pytest.fixture(scope="module")
    def server(mode, bindir):
        if os.geteuid() != 0:
            pytest.skip("BRIG SERVE NOT TESTED: the server runs as root and as nobody, which needs root")
        with serve_dir(mode) as d:
            s = Server(bindir, mode, d, *args).start()
            yield s
            s.stop()
            for n in sandboxes_of(s):
                if n.startswith(prefix):
                    s.brig("rm", n)
    return mode, server
