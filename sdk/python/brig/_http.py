"""HTTP/1.1 to brig serve over its unix socket or loopback TCP (stdlib only).

The SDK trusts a server only as far as its own user does: on the unix
socket, the process at the other end must run as the caller's uid or as
root (SO_PEERCRED), so a socket another local user planted where the SDK
looks (a shared /tmp, a stale BRIG_SOCKET) is refused before a byte of a
request — commands, files, the token — goes to it. Over TCP the bearer
token goes only to a loopback address, in plain HTTP, which is all the
server listens on; redirects are never followed (http.client does not).
"""
from __future__ import annotations

import http.client
import ipaddress
import json
import os
import socket
import struct
import threading
import urllib.parse
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import errors

# The biggest body the SDK buffers (files.read answers up to the engine's
# 64 MiB cap, plus JSON); bigger is refused rather than taking the
# caller's memory at a server's or a sandbox's word.
MAX_BODY = 80 << 20
# The longest line of a stream (one NDJSON event).
MAX_LINE = 16 << 20


def default_socket() -> str:
    """Where `brig serve` listens by default (docs/serve.md):
    $XDG_RUNTIME_DIR/brig-serve/serve.sock, /run/brig-serve/serve.sock for
    root, else /tmp/brig-serve-UID/serve.sock."""
    if os.geteuid() == 0:
        return "/run/brig-serve/serve.sock"
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return os.path.join(run, "brig-serve", "serve.sock")
    return f"/tmp/brig-serve-{os.geteuid()}/serve.sock"


def _check_loopback_url(url: str) -> Tuple[str, int]:
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname or u.path not in ("", "/") or u.query or u.username:
        raise errors.ConnectionError(f"url {url!r}: expected http://127.0.0.1:PORT (brig serve --listen)",
                                     code="bad_url")
    host = u.hostname
    try:
        loop = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loop = False
    if not loop:
        # The token would cross a network in the clear: brig serve listens
        # on loopback only, so anything else is not it.
        raise errors.ConnectionError(f"url {url!r}: not a loopback address; brig serve --listen takes "
                                     "127.0.0.1 or [::1] only, and the token is never sent elsewhere",
                                     code="bad_url")
    try:
        port = u.port or 80
    except ValueError as e:
        raise errors.ConnectionError(f"url {url!r}: {e}", code="bad_url") from None
    return host, port


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float], trusted: Tuple[int, ...]):
        super().__init__("localhost", timeout=timeout)
        self._path = path
        self._trusted = trusted

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
            pid, uid, gid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
            if uid not in self._trusted:
                raise errors.ConnectionError(
                    f"{self._path}: the server there runs as uid {uid} (pid {pid}), not as you "
                    f"(uid {os.geteuid()}) or root: refusing to talk to it; start your own "
                    "`brig serve`, or pass socket= the one you meant", code="untrusted_server")
        except BaseException:
            s.close()
            raise
        self.sock = s


class Response:
    """A whole response: status, headers (lower-case names), body."""

    def __init__(self, status: int, headers: Dict[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise errors.ProtocolError(f"the server's answer is not JSON: {e}", code="protocol",
                                       status=self.status) from None


class Stream:
    """A response read as it comes (NDJSON lines or raw bytes). Holds its
    connection until closed or read to the end."""

    def __init__(self, transport: "Transport", conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self._t = transport
        self._conn = conn
        self._resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}

    def lines(self) -> Iterator[Any]:
        """Each NDJSON line as a decoded object; ends at the end of the body."""
        try:
            while True:
                line = self._resp.readline(MAX_LINE + 1)
                if not line:
                    return
                if len(line) > MAX_LINE:
                    raise errors.ProtocolError(f"a stream line longer than {MAX_LINE} bytes", code="protocol")
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line.decode("utf-8"))
                except (ValueError, UnicodeDecodeError) as e:
                    raise errors.ProtocolError(f"a stream line is not JSON: {e}", code="protocol") from None
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionError(f"the stream broke: {e}", code="connection") from None
        finally:
            self.close()

    def chunks(self, size: int = 65536) -> Iterator[bytes]:
        """The body in pieces as they arrive."""
        try:
            while True:
                b = self._resp.read1(size)
                if not b:
                    return
                yield b
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionError(f"the stream broke: {e}", code="connection") from None
        finally:
            self.close()

    def close(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        if self._resp.isclosed() and not self._resp.will_close:
            self._t._give_back(conn)
        else:
            conn.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Transport:
    """Requests to one server; thread-safe, keeps idle connections for reuse."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None, token: Optional[str] = None,
                 timeout: float = 120.0, max_body: int = MAX_BODY):
        if socket_path and url:
            raise errors.ConnectionError("give socket= or url=, not both", code="bad_url")
        if not socket_path and not url:
            url = os.environ.get("BRIG_URL") or None
            socket_path = None if url else (os.environ.get("BRIG_SOCKET") or default_socket())
        if url and token is None:
            token = os.environ.get("BRIG_TOKEN") or None
        if url:
            self._host, self._port = _check_loopback_url(url)
            if not token:
                raise errors.ConnectionError(f"url {url!r} needs token= (or BRIG_TOKEN): brig serve "
                                             "--listen answers nothing without its --token-file's token",
                                             code="no_token")
            self.where = url
        else:
            self.where = socket_path
        self._socket = socket_path
        self._token = token
        self.timeout = timeout
        self.max_body = max_body
        self._trusted = tuple(sorted({os.geteuid(), 0}))
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    # ---- connections
    def _new(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._socket:
            return _UnixConnection(self._socket, timeout, self._trusted)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _take(self, timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self._new(timeout), False
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, True

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < 64:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the idle connections (streams in use close themselves)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # ---- requests
    def _send(self, method: str, path: str, body: Optional[bytes], headers: Dict[str, str],
              timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        hdrs = {"Accept": "application/json", **headers}
        if self._token:
            hdrs["Authorization"] = "Bearer " + self._token
        # A kept-alive connection the server closed meanwhile fails before
        # the request reached it: once, on a fresh one.
        for attempt in (0, 1):
            conn, reused = self._take(timeout)
            if attempt and hasattr(body, "seek"):
                body.seek(0)  # type: ignore[union-attr]
            try:
                conn.request(method, path, body=body, headers=hdrs)
                return conn, conn.getresponse()
            except errors.BrigError:
                conn.close()
                raise
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise errors.ConnectionError(f"{self.where}: {e}", code="connection") from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                hint = ""
                if isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
                    hint = " (is `brig serve` running? it listens there by default; or set BRIG_SOCKET)"
                raise errors.ConnectionError(f"{self.where}: {e}{hint}", code="connection") from None
        raise AssertionError("unreachable")

    def request(self, method: str, path: str, query: Optional[Dict[str, Any]] = None, json_body: Any = None,
                body: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None,
                timeout: Optional[float] = -1.0, ok: Tuple[int, ...] = (200, 201, 202, 204)) -> Response:
        """One request read whole; an error status raises its BrigError."""
        path, body, hdrs = self._prepare(path, query, json_body, body, headers)
        conn, resp = self._send(method, path, body, hdrs, self.timeout if timeout == -1.0 else timeout)
        try:
            data = self._read_body(resp)
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._give_back(conn)
        if resp.status not in ok:
            raise errors.from_body(resp.status, data, resp.reason)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)

    def stream(self, method: str, path: str, query: Optional[Dict[str, Any]] = None, json_body: Any = None,
               body: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None,
               timeout: Optional[float] = None) -> Stream:
        """A request whose response is read as it comes (no read timeout
        unless given: a quiet command is not a dead server)."""
        path, body, hdrs = self._prepare(path, query, json_body, body, headers)
        conn, resp = self._send(method, path, body, hdrs, self.timeout)
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        if resp.status >= 300:
            try:
                data = self._read_body(resp)
            finally:
                conn.close()
            raise errors.from_body(resp.status, data, resp.reason)
        return Stream(self, conn, resp)

    def _prepare(self, path: str, query: Optional[Dict[str, Any]], json_body: Any, body: Optional[bytes],
                 headers: Optional[Dict[str, str]]) -> Tuple[str, Optional[bytes], Dict[str, str]]:
        hdrs = dict(headers or {})
        if query:
            q = {k: _qval(v) for k, v in query.items() if v is not None}
            if q:
                path += "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            hdrs.setdefault("Content-Type", "application/json")
        elif body is not None:
            hdrs.setdefault("Content-Type", "application/octet-stream")
        return path, body, hdrs

    def _read_body(self, resp: http.client.HTTPResponse) -> bytes:
        length = resp.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise errors.ProtocolError(f"the server's answer is {length} bytes, more than the SDK's "
                                       f"max_body ({self.max_body}); raise Client(max_body=...)",
                                       code="too_large", status=resp.status)
        parts = []
        n = 0
        try:
            while True:
                b = resp.read(65536)
                if not b:
                    break
                n += len(b)
                if n > self.max_body:
                    raise errors.ProtocolError(f"the server's answer is more than the SDK's max_body "
                                               f"({self.max_body} bytes); raise Client(max_body=...)",
                                               code="too_large", status=resp.status)
                parts.append(b)
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionError(f"{self.where}: reading the answer: {e}", code="connection") from None
        return b"".join(parts)


def _qval(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def quote(segment: str) -> str:
    """One path segment of a URL (a sandbox name, a tag, an id)."""
    return urllib.parse.quote(str(segment), safe="")
