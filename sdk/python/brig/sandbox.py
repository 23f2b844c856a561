"""Sandboxes, commands, files, snapshots and network rules over brig serve.

The routes and objects are docs/api/openapi.json's; this module only
gives them Python shapes. Nothing here decides what a sandbox may do: the
server and libbrig do.
"""
from __future__ import annotations

import base64
import io
import os
import shlex
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _http, _tar, errors
from ._http import quote

Command = Union[str, Sequence[str]]


def _b64(s: Optional[str]) -> bytes:
    if not s:
        return b""
    try:
        return base64.b64decode(s, validate=True)
    except (ValueError, TypeError):
        raise errors.ProtocolError("a *_b64 field is not base64", code="protocol") from None


@dataclass
class Result:
    """How a command ended (the server's Result) and what it wrote.

    ``exit_code`` follows brig's convention: the command's status, 128+N
    for signal N, 124 timeout, 125 brig's own failure, 126/127 not
    executable / not found. ``reason`` is ``exited``, ``signaled``,
    ``timeout``, ``oom``, ``pids``, ``seccomp`` or ``error``; a limit hit
    or a refused connection is data here (``summary``, ``refusals``),
    never an exception.
    """
    exit_code: int
    reason: str
    signal: int = 0
    summary: str = ""
    refusals: List[str] = field(default_factory=list)
    warning: str = ""
    error: Optional[str] = None
    duration_ms: Optional[int] = None
    report: Optional[Dict[str, Any]] = None
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    output_dropped: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def stdout(self) -> str:
        """stdout as text (invalid UTF-8 replaced)."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """stderr as text (invalid UTF-8 replaced)."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0 and self.reason == "exited"

    @property
    def usage(self) -> Dict[str, Any]:
        """CPU, memory and process figures of the report (the sandbox's)."""
        rep = self.report or {}
        keys = ("duration_ms", "cpu_user_ms", "cpu_system_ms", "memory_peak_bytes", "pids_peak")
        out = {k: rep[k] for k in keys if k in rep}
        if self.duration_ms is not None:
            out.setdefault("duration_ms", self.duration_ms)
        return out

    def check(self) -> "Result":
        """Raise CommandFailed unless the command exited 0; returns self."""
        if not self.ok:
            raise CommandFailed(self)
        return self

    @classmethod
    def _from(cls, res: Dict[str, Any], stdout: bytes = b"", stderr: bytes = b"", dropped: int = 0) -> "Result":
        if not isinstance(res, dict) or "exit_code" not in res or "reason" not in res:
            raise errors.ProtocolError(f"an exec result without exit_code/reason: {res!r:.200}", code="protocol")
        return cls(exit_code=int(res["exit_code"]), reason=str(res["reason"]), signal=int(res.get("signal") or 0),
                   summary=res.get("summary") or "", refusals=list(res.get("refusals") or []),
                   warning=res.get("warning") or "", error=res.get("error"),
                   duration_ms=res.get("duration_ms"), report=res.get("report"),
                   stdout_bytes=stdout, stderr_bytes=stderr, output_dropped=dropped, raw=res)


class CommandFailed(errors.BrigError):
    """Result.check() of a command that did not exit 0."""

    def __init__(self, result: Result):
        why = result.summary or result.error or f"exit {result.exit_code}"
        super().__init__(f"command failed: {why}", code="command_failed", details={"exit_code": result.exit_code})
        self.result = result


@dataclass
class Chunk:
    """A piece of a command's output, as it came: ``stream`` is ``stdout``
    or ``stderr``; ``data`` the exact bytes; ``text`` them decoded."""
    stream: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def _argv(cmd: Command) -> Dict[str, Any]:
    if isinstance(cmd, str):
        return {"cmd": cmd}
    argv = [str(a) for a in cmd]
    if not argv:
        raise errors.BadRequest("an empty command", code="bad_request")
    return {"argv": argv}


def _exec_body(cmd: Command, timeout: Optional[float], env: Optional[Dict[str, str]], cwd: Optional[str],
               tty: bool = False, stdin: bool = False, input: Union[str, bytes, None] = None,
               rows: Optional[int] = None, cols: Optional[int] = None) -> Dict[str, Any]:
    body = _argv(cmd)
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if cwd is not None:
        body["cwd"] = cwd
    if timeout is not None:
        body["timeout_ms"] = max(0, int(timeout * 1000))
    if tty:
        body["tty"] = True
        if rows:
            body["rows"] = rows
        if cols:
            body["cols"] = cols
    if stdin:
        body["stdin"] = True
    if input is not None:
        if isinstance(input, str):
            body["input"] = input
        else:
            body["input_b64"] = base64.b64encode(input).decode("ascii")
    return body


def _finished(done: Dict[str, Any]) -> Result:
    """The Result of an exec answered at its end (``wait``)."""
    if done.get("result") is None:
        raise errors.ProtocolError(f"a finished exec without a result: {done!r:.200}", code="protocol")
    out = _b64(done["stdout_b64"]) if "stdout_b64" in done else str(done.get("stdout", "")).encode()
    err = _b64(done["stderr_b64"]) if "stderr_b64" in done else str(done.get("stderr", "")).encode()
    return Result._from(done["result"], out, err, int(done.get("output_dropped") or 0))


class _Output:
    """Reads an exec's NDJSON events: output chunks until `exit`.

    Only the documented event types are taken; the result is the `exit`
    event's own `result` object — the sandbox's bytes live only inside a
    `data` string, so nothing a command prints can pass for an event."""

    def __init__(self, stream: _http.Stream):
        self._stream = stream
        self.result: Optional[Result] = None
        self.exec: Optional[Dict[str, Any]] = None
        self.events = 0

    def __iter__(self) -> Iterator[Chunk]:
        for ev in self._stream.lines():
            if not isinstance(ev, dict):
                raise errors.ProtocolError(f"an output event that is not an object: {ev!r:.200}", code="protocol")
            t = ev.get("type")
            if t in ("stdout", "stderr"):
                self.events += 1
                data = _b64(ev["data_b64"]) if "data_b64" in ev else str(ev.get("data", "")).encode("utf-8")
                yield Chunk(t, data)
            elif t == "start":
                self.exec = ev.get("exec")
            elif t == "exit":
                self.result = Result._from(ev.get("result"))
            elif t == "error":
                err = ev.get("error")
                if isinstance(err, dict):
                    raise errors.error_for_status(0, str(err.get("code", "error")), str(err.get("message", "")),
                                                  err.get("details"))
                raise errors.BrigError(f"the output stream ended: {err}", code="stream_error")
            # other types: newer servers may add some; they are not output.

    def close(self) -> None:
        self._stream.close()


class Stream:
    """``sb.stream(cmd)``: iterate Chunks as the command writes them; once
    the iteration ends, ``result`` holds how it ended."""

    def __init__(self, out: _Output):
        self._out = out

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self._out)

    @property
    def result(self) -> Optional[Result]:
        return self._out.result

    @property
    def id(self) -> Optional[str]:
        return (self._out.exec or {}).get("id")

    def close(self) -> None:
        """Stop reading (the command keeps running; the server keeps its output)."""
        self._out.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Stdin:
    def __init__(self, proc: "Process"):
        self._proc = proc

    def write(self, data: Union[str, bytes]) -> int:
        return self._proc.write(data)

    def close(self) -> None:
        self._proc.close_stdin()


class Process:
    """A command started with ``sb.start()`` (or ``sb.exec()``): it runs in
    the background, between requests, until it ends or is killed.

    Iterate it for its output as it comes (from the start: the server
    keeps it), write its stdin, signal it, wait for its Result."""

    def __init__(self, sandbox: "Sandbox", info: Dict[str, Any]):
        self.sandbox = sandbox
        self.id: str = str(info["id"])
        self.info = info
        self.stdin = _Stdin(self)
        self._result: Optional[Result] = None

    @property
    def _path(self) -> str:
        return f"{self.sandbox._path}/execs/{quote(self.id)}"

    def output(self, follow: bool = True, offset: int = 0) -> Iterator[Chunk]:
        """Its output events from ``offset`` (a count of chunks already
        read), live until it ends when ``follow``."""
        out = _Output(self.sandbox._t.stream("GET", self._path + "/output",
                                             query={"follow": follow, "offset": offset or None}))
        try:
            yield from out
        finally:
            out.close()
        if out.result is not None:
            self._result = out.result

    def __iter__(self) -> Iterator[Chunk]:
        return self.output()

    def write(self, data: Union[str, bytes], eof: bool = False) -> int:
        """Write to its stdin (started with ``stdin=True`` or ``tty=True``);
        returns the bytes written."""
        body: Dict[str, Any] = {"eof": eof}
        if isinstance(data, str):
            body["data"] = data
        else:
            body["data_b64"] = base64.b64encode(bytes(data)).decode("ascii")
        r = self.sandbox._t.request("POST", self._path + "/stdin", json_body=body).json()
        return int(r.get("written", 0))

    def close_stdin(self) -> None:
        """End of file on its stdin."""
        self.sandbox._t.request("POST", self._path + "/stdin", json_body={"eof": True})

    def signal(self, sig: Union[int, str] = "TERM") -> None:
        """Send a signal (a number, or a name: ``TERM``, ``SIGINT`` ...)."""
        self.sandbox._t.request("POST", self._path + "/signal", json_body={"signal": sig})

    def kill(self, sig: Union[int, str] = "KILL") -> None:
        """SIGKILL it (or ``sig``)."""
        self.signal(sig)

    def resize(self, rows: int, cols: int) -> None:
        """Resize its terminal (``tty=True`` only)."""
        self.sandbox._t.request("POST", self._path + "/resize", json_body={"rows": rows, "cols": cols})

    def wait(self, timeout: Optional[float] = None) -> Optional[Result]:
        """Its Result once it ended; None if ``timeout`` (seconds) passed first."""
        if self._result is not None:
            return self._result
        body = {} if timeout is None else {"timeout_ms": max(0, int(timeout * 1000))}
        info = self.sandbox._t.request("POST", self._path + "/wait", json_body=body, timeout=None).json()
        return self._take(info)

    def poll(self) -> Optional[Result]:
        """Its Result if it ended, else None (does not block)."""
        if self._result is not None:
            return self._result
        return self._take(self.sandbox._t.request("GET", self._path).json())

    def _take(self, info: Dict[str, Any]) -> Optional[Result]:
        self.info = info
        if info.get("state") == "exited" and info.get("result") is not None:
            self._result = Result._from(info["result"], dropped=int(info.get("output_dropped") or 0))
        return self._result

    def forget(self) -> None:
        """Kill it if it still runs and let the server free its output."""
        self.sandbox._t.request("DELETE", self._path)

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.forget()
        except errors.NotFound:
            pass


class Files:
    """``sb.files``: the sandbox's files as the sandbox sees them (each
    operation runs inside it, as its user; a link resolves in its view)."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    @property
    def _path(self) -> str:
        return self._sb._path + "/files"

    def read(self, path: str) -> bytes:
        """A regular file's bytes."""
        return self._sb._t.request("GET", self._path, query={"path": path},
                                   headers={"Accept": "application/octet-stream"}).body

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding, "replace")

    def write(self, path: str, data: Union[str, bytes], mode: int = 0o644) -> int:
        """Write a file atomically; returns the bytes written."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        r = self._sb._t.request("PUT", self._path, query={"path": path, "mode": "%04o" % mode}, body=bytes(data))
        return int(r.json().get("bytes", len(data)))

    def list(self, path: str) -> List[Dict[str, Any]]:
        """A directory's entries: name, type, size, mode, uid, gid, mtime, target."""
        return list(self._sb._t.request("GET", self._path + "/list", query={"path": path}).json()["entries"])

    def stat(self, path: str) -> Dict[str, Any]:
        """The path itself (a link is not followed)."""
        return self._sb._t.request("GET", self._path + "/stat", query={"path": path}).json()

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except errors.NotFound:
            return False

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """One directory; its parent must exist."""
        self._sb._t.request("POST", self._path + "/mkdir", query={"path": path, "mode": "%04o" % mode})

    def makedirs(self, path: str, mode: int = 0o755) -> None:
        """The directory and its missing parents (an existing one is fine)."""
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            try:
                if self.stat(d).get("type") == "dir":
                    continue
            except errors.NotFound:
                pass
            self.mkdir(d, mode)

    def remove(self, path: str) -> None:
        """A file, a link (never what it names) or an empty directory."""
        self._sb._t.request("DELETE", self._path, query={"path": path})

    def upload(self, local: str, remote_dir: str) -> None:
        """Copy a host file or directory into the sandbox directory
        ``remote_dir`` (made if missing; a directory's contents go into
        it). Host links are sent as links, never followed."""
        arc = "." if os.path.isdir(local) else os.path.basename(local)
        self.makedirs(remote_dir)
        with tempfile.TemporaryFile() as tmp:
            _tar.pack(local, tmp, arcname=arc)
            size = tmp.tell()
            tmp.seek(0)
            self._sb._t.request("PUT", self._path + "/tar", query={"path": remote_dir}, body=tmp,  # type: ignore[arg-type]
                                headers={"Content-Type": "application/x-tar", "Content-Length": str(size)},
                                timeout=None)

    def download_tar(self, remote_dir: str) -> bytes:
        """The sandbox directory as tar bytes, unopened (untrusted: unpack
        with download(), or as carefully)."""
        return self._sb._t.request("GET", self._path + "/tar", query={"path": remote_dir},
                                   headers={"Accept": "application/x-tar"}, timeout=None).body

    def download(self, remote_dir: str, local_dir: str, max_bytes: int = 1 << 30,
                 max_entries: int = 100000) -> "Download":
        """Copy the sandbox directory ``remote_dir`` into the host directory
        ``local_dir`` (made if missing). Nothing is written outside
        ``local_dir`` whatever the archive says: absolute or ``..`` names
        and links leading out raise UnsafeArchive; devices and FIFOs are
        skipped; setuid/setgid bits and owners are dropped (brig._tar)."""
        st = self._sb._t.stream("GET", self._path + "/tar", query={"path": remote_dir},
                                headers={"Accept": "application/x-tar"})
        with st:
            paths, skipped = _tar.extract(_Reader(st), local_dir, max_bytes=max_bytes, max_entries=max_entries)
        return Download(local_dir, paths, skipped)


@dataclass
class Download:
    """What files.download() made: paths relative to ``dest`` (directories
    end in '/') and the entries it skipped, with why."""
    dest: str
    paths: List[str]
    skipped: List[Tuple[str, str]]


class _Reader(io.RawIOBase):
    """A Stream as a file for tarfile's stream mode."""

    def __init__(self, st: _http.Stream):
        self._it = st.chunks()
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class Network:
    """``sb.network``: the egress rules of the running sandbox, changed live
    (each change an audit event)."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def get(self) -> Dict[str, Any]:
        """mode, allow_hosts, deny_hosts, allow_cidrs, live rules."""
        return self._sb._t.request("GET", self._sb._path + "/network").json()

    def allow(self, host: str) -> Dict[str, Any]:
        """Allow new connections to ``host`` (``pypi.org``, ``*.example.org``, ``:PORT``)."""
        return self._rule("POST", "allow", host)

    def deny(self, host: str) -> Dict[str, Any]:
        """Refuse ``host`` from now on (deny wins over allow)."""
        return self._rule("POST", "deny", host)

    def remove(self, host: str, action: str = "allow") -> Dict[str, Any]:
        """Remove one allow (or deny) rule."""
        return self._rule("DELETE", action, host)

    def _rule(self, method: str, action: str, host: str) -> Dict[str, Any]:
        return self._sb._t.request(method, self._sb._path + "/network/rules",
                                   json_body={"action": action, "host": host}).json()


class Client:
    """A connection to one brig serve: the default socket, ``BRIG_URL`` +
    ``BRIG_TOKEN``, ``BRIG_SOCKET``, or ``socket=`` / ``url=`` + ``token=``
    (``token_file=`` reads it from a file). Thread-safe; share one."""

    def __init__(self, socket: Optional[str] = None, url: Optional[str] = None, token: Optional[str] = None,
                 token_file: Optional[str] = None, timeout: float = 120.0, max_body: int = _http.MAX_BODY):
        if token_file is not None and token is None:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        self._t = _http.Transport(socket, url, token, timeout=timeout, max_body=max_body)

    def health(self) -> Dict[str, Any]:
        return self._t.request("GET", "/v1/health").json()

    def version(self) -> Dict[str, Any]:
        return self._t.request("GET", "/v1/version").json()

    def doctor(self) -> Dict[str, Any]:
        return self._t.request("GET", "/v1/doctor", timeout=None).json()

    def list(self) -> List["Sandbox"]:
        """Your sandboxes (root: all of the server's)."""
        rows = self._t.request("GET", "/v1/sandboxes").json()["sandboxes"]
        return [Sandbox(self, r["name"], r) for r in rows]

    def create(self, policy: Optional[Dict[str, Any]] = None, profile: Optional[str] = None,
               workspace: Optional[str] = None, overlay: bool = True, name: Optional[str] = None,
               audit: bool = True) -> "Sandbox":
        """Create and start a sandbox (see Sandbox.create)."""
        body: Dict[str, Any] = {"workspace_mode": "overlay" if overlay else "bind", "audit": audit}
        if name is not None:
            body["name"] = name
        if policy is not None:
            body["policy"] = policy
        if profile is not None:
            body["profile"] = profile
        if workspace is not None:
            body["workspace"] = os.path.abspath(workspace)
        info = self._t.request("POST", "/v1/sandboxes", json_body=body, timeout=None).json()
        return Sandbox(self, info["name"], info)

    def pools(self) -> List[Dict[str, Any]]:
        """The server's warm pools (``brig pool --size N --name NAME``, started
        as the server's user): each one's names, size, members ready and in
        use, and why it cannot make members (``failing``), if so."""
        return self._t.request("GET", "/v1/pools").json()["pools"]

    def run_in_pool(self, pool: str, cmd: Command, timeout: Optional[float] = None,
                    env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                    input: Union[str, bytes, None] = None) -> Result:
        """Run a command to its end in a fresh sandbox: a ready member of the
        warm pool named ``pool``, as the pool made it (its policy,
        workspace and environment; ``env`` and ``cwd`` on top). The member
        serves this run only, and goes with what the command left; the
        next call gets another. About one exec's time, not a sandbox's
        creation. NotFound when no pool has the name, Conflict when it
        cannot serve (its daemon gone, or failing), ServerError (504) when
        no member became ready within 30 s."""
        body = _exec_body(cmd, timeout, env, cwd, input=input)
        body["wait"] = True
        return _finished(self._t.request("POST", f"/v1/pools/{quote(pool)}/execs", json_body=body,
                                         timeout=None).json())

    def connect(self, name: str) -> "Sandbox":
        """An existing sandbox of yours, by name (NotFound otherwise)."""
        sb = Sandbox(self, name, {})
        sb.refresh()
        return sb

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_default: Optional[Client] = None
_default_lock = threading.Lock()


def _client(client: Optional[Client], kw: Dict[str, Any]) -> Client:
    global _default
    if client is not None:
        return client
    if kw:
        return Client(**kw)
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


class Sandbox:
    """A sandbox of brig serve. Make one with ``Sandbox.create()`` (as a
    context manager it is removed on exit), find one with
    ``Sandbox.connect(name)`` or ``Sandbox.list()``."""

    def __init__(self, client: Client, name: str, info: Dict[str, Any]):
        self.client = client
        self.name = name
        self.info = info
        self.files = Files(self)
        self.network = Network(self)
        self._remove_on_exit = False

    @property
    def _t(self) -> _http.Transport:
        return self.client._t

    @property
    def _path(self) -> str:
        return "/v1/sandboxes/" + quote(self.name)

    def __repr__(self) -> str:
        return f"<brig.Sandbox {self.name} {self.info.get('status', '?')}>"

    # ---- making and finding
    @classmethod
    def create(cls, policy: Optional[Dict[str, Any]] = None, profile: Optional[str] = None,
               workspace: Optional[str] = None, overlay: bool = True, name: Optional[str] = None,
               audit: bool = True, client: Optional[Client] = None, **connect: Any) -> "Sandbox":
        """Create and start a sandbox.

        ``policy`` is a policy file's JSON as a dict (docs/policy.md),
        ``profile`` a built-in profile (default, strict, build, browser)
        applied first; ``workspace`` a host directory (default: a new empty
        one the server removes with the sandbox); ``overlay=True`` (the
        default) keeps the workspace untouched and collects the sandbox's
        writes for diff()/commit()/reset(); ``overlay=False`` binds it
        read-write. Connection keywords (socket=, url=,
        token=, token_file=) or client= choose the server.
        As ``with Sandbox.create(...) as sb:`` the sandbox is removed on exit."""
        sb = _client(client, connect).create(policy=policy, profile=profile, workspace=workspace,
                                             overlay=overlay, name=name, audit=audit)
        sb._remove_on_exit = True
        return sb

    @classmethod
    def connect(cls, name: str, client: Optional[Client] = None, **connect: Any) -> "Sandbox":
        """An existing sandbox of yours by name (NotFound otherwise)."""
        return _client(client, connect).connect(name)

    @classmethod
    def list(cls, client: Optional[Client] = None, **connect: Any) -> List["Sandbox"]:
        """Your sandboxes."""
        return _client(client, connect).list()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._remove_on_exit:
            self.remove(missing_ok=True)

    # ---- state
    def refresh(self) -> Dict[str, Any]:
        """Status, policy and usage, fresh from the server."""
        self.info = self._t.request("GET", self._path).json()
        return self.info

    @property
    def status(self) -> str:
        return str(self.refresh().get("status"))

    def remove(self, missing_ok: bool = False) -> None:
        """Stop it if needed and remove every trace."""
        try:
            self._t.request("DELETE", self._path, timeout=None)
        except errors.NotFound:
            if not missing_ok:
                raise

    def _lifecycle(self, what: str) -> "Sandbox":
        self.info = self._t.request("POST", f"{self._path}/{what}", timeout=None).json()
        return self

    def stop(self) -> "Sandbox":
        return self._lifecycle("stop")

    def start_sandbox(self) -> "Sandbox":
        """Start a stopped sandbox again with its policy (``brig start``;
        ``start(cmd)`` starts a command)."""
        return self._lifecycle("start")

    def pause(self) -> "Sandbox":
        return self._lifecycle("pause")

    def resume(self) -> "Sandbox":
        return self._lifecycle("resume")

    # ---- commands
    def run(self, cmd: Command, timeout: Optional[float] = None, env: Optional[Dict[str, str]] = None,
            cwd: Optional[str] = None, input: Union[str, bytes, None] = None) -> Result:
        """Run a command to its end: ``cmd`` an argv list or a shell string
        (``/bin/sh -c``); ``timeout`` seconds (then exit 124, reason
        ``timeout``). Returns its Result with stdout and stderr."""
        body = _exec_body(cmd, timeout, env, cwd, input=input)
        body["wait"] = True
        return _finished(self._t.request("POST", self._path + "/execs", json_body=body, timeout=None).json())

    def stream(self, cmd: Command, timeout: Optional[float] = None, env: Optional[Dict[str, str]] = None,
               cwd: Optional[str] = None, tty: bool = False, input: Union[str, bytes, None] = None) -> Stream:
        """Run a command and iterate its output Chunks as they come;
        ``.result`` after the loop says how it ended."""
        body = _exec_body(cmd, timeout, env, cwd, tty=tty, input=input)
        body["stream"] = True
        return Stream(_Output(self._t.stream("POST", self._path + "/execs", json_body=body)))

    def start(self, cmd: Command, timeout: Optional[float] = None, env: Optional[Dict[str, str]] = None,
              cwd: Optional[str] = None, stdin: bool = True, tty: bool = False, rows: Optional[int] = None,
              cols: Optional[int] = None, input: Union[str, bytes, None] = None) -> Process:
        """Start a command in the background and return its Process (its
        stdin open for writing unless ``stdin=False``)."""
        body = _exec_body(cmd, timeout, env, cwd, tty=tty, stdin=stdin and not tty, input=input, rows=rows,
                          cols=cols)
        return Process(self, self._t.request("POST", self._path + "/execs", json_body=body).json())

    exec = start

    def processes(self) -> List[Process]:
        """The commands the server keeps for this sandbox."""
        rows = self._t.request("GET", self._path + "/execs").json()["execs"]
        return [Process(self, r) for r in rows]

    # ---- overlay workspace
    def diff(self, paths: Sequence[str] = (), excludes: Sequence[str] = ()) -> List[Dict[str, Any]]:
        """overlay=True: what the sandbox changed in the workspace."""
        q = [("path", p) for p in paths] + [("exclude", e) for e in excludes]
        path = self._path + "/diff" + ("?" + urllib.parse.urlencode(q) if q else "")
        return list(self._t.request("GET", path, timeout=None).json()["changes"])

    def commit(self, paths: Sequence[str] = (), excludes: Sequence[str] = ()) -> List[Dict[str, Any]]:
        """overlay=True: apply the changes (or the selected ones) to the real
        workspace; Conflict, applying nothing, if the host changed them too."""
        body: Dict[str, Any] = {}
        if paths:
            body["paths"] = list(paths)
        if excludes:
            body["excludes"] = list(excludes)
        return list(self._t.request("POST", self._path + "/commit", json_body=body, timeout=None).json()["changes"])

    def reset(self) -> "Sandbox":
        """overlay=True, stopped: discard the changes."""
        return self._lifecycle("reset")

    # ---- snapshots
    def snapshot(self, tag: str) -> Dict[str, Any]:
        """Save the writable state (layer, $HOME, /tmp) as ``tag``."""
        return self._t.request("POST", self._path + "/snapshots", json_body={"tag": tag}, timeout=None).json()

    def snapshots(self) -> List[Dict[str, Any]]:
        return list(self._t.request("GET", self._path + "/snapshots").json()["snapshots"])

    def restore(self, tag: str) -> "Sandbox":
        """Back to ``tag`` (the sandbox restarts; its commands end)."""
        self.info = self._t.request("POST", f"{self._path}/snapshots/{quote(tag)}/restore", timeout=None).json()
        return self

    def fork(self, tag: str, name: Optional[str] = None) -> "Sandbox":
        """A new sandbox with this one's policy and the state of ``tag``
        (removed on exit when used as a context manager)."""
        body = {"name": name or f"{self.name[:40]}-fork-{os.urandom(4).hex()}"}
        info = self._t.request("POST", f"{self._path}/snapshots/{quote(tag)}/fork", json_body=body,
                               timeout=None).json()
        sb = Sandbox(self.client, info["name"], info)
        sb._remove_on_exit = True
        return sb

    def remove_snapshot(self, tag: str) -> None:
        self._t.request("DELETE", f"{self._path}/snapshots/{quote(tag)}")

    # ---- audit
    def events(self, follow: bool = True) -> Iterator[Dict[str, Any]]:
        """The audit stream (docs/audit.md) from its start; live with ``follow``."""
        st = self._t.stream("GET", self._path + "/events", query={"follow": follow})
        try:
            for ev in st.lines():
                yield ev
        finally:
            st.close()


def shell_join(argv: Sequence[str]) -> str:
    """An argv list as one shell string (for logs)."""
    return " ".join(shlex.quote(a) for a in argv)
