"""Every unit on a connection is judged: each HTTP request, pipelined or
kept alive, in the explicit proxy and in filtered mode's redirected
plain-HTTP path; a name visible in the first bytes (TLS SNI, HTTP Host)
beats a CIDR rule when a deny rule names it; a name that cannot be read
within brig's limits (size, time) is a refusal, never an allowance; and
what RFC 9112 forbids (bare CR, ambiguous framing) never reaches an
upstream. Issue 13, classes 5 and 6; rows 105-110 of the catalogue.

The upstream here is a *lenient* recorder (RECORDER below): it serves
every request it can find on a connection, kept alive whatever the
request says, and logs each request's Host and request line. That is the
server a smuggled request works against, and its log is the host-side
proof: a request brig refused must not be in it. It runs on the host's
127.0.0.1 for the proxy tests and inside the test's upstream namespace
(test_egress_netns.py's `net`) for filtered mode."""
import json
import secrets
import subprocess

import pytest

from test_escape import attack
from test_egress_filtered import tls  # a TLS client with a chosen SNI
from test_egress_netns import PY, audit_path, net, ws  # noqa: F401 (fixtures)

RECORDER = r'''
import socket, sys, threading
addr, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
def note(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")
def read_until(conn, data, mark):
    while mark not in data:
        d = conn.recv(65536)
        if not d:
            raise EOFError
        data += d
    return data
def serve(conn):
    conn.settimeout(3)
    data = b""
    try:
        data = conn.recv(65536)
        if not data:
            note("empty")   # a connection that carried nothing
            return
        if data[0] == 0x16:   # TLS: only counted
            n = len(data)
            while True:
                d = conn.recv(65536)
                if not d:
                    break
                n += len(d)
            note("tls-bytes %d" % n)
            return
        while True:
            data = read_until(conn, data, b"\r\n\r\n")
            head, data = data.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            hdrs = {}
            for l in lines[1:]:
                k, _, v = l.partition(b":")
                hdrs[k.strip().lower()] = v.strip()
            host = hdrs.get(b"host", b"-").decode(errors="replace")
            note("request " + host + " " + lines[0].decode(errors="replace"))
            if b"upgrade" in hdrs.get(b"connection", b"").lower() and hdrs.get(b"upgrade"):
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                while True:   # the new protocol: an upper-casing echo
                    if data:
                        conn.sendall(data.upper())
                    data = conn.recv(65536)
                    if not data:
                        raise EOFError
            body = b""
            if b"chunked" in hdrs.get(b"transfer-encoding", b"").lower():
                while True:
                    data = read_until(conn, data, b"\r\n")
                    size, data = data.split(b"\r\n", 1)
                    n = int(size.split(b";")[0], 16)
                    if n == 0:
                        data = read_until(conn, data, b"\r\n")
                        data = data.split(b"\r\n", 1)[1]
                        break
                    while len(data) < n + 2:
                        d = conn.recv(65536)
                        if not d:
                            raise EOFError
                        data += d
                    body, data = body + data[:n], data[n + 2:]
            else:
                n = int(hdrs.get(b"content-length", b"0"))
                while len(data) < n:
                    d = conn.recv(65536)
                    if not d:
                        raise EOFError
                    data += d
                body, data = data[:n], data[n:]
            out = ("served " + host + " " + lines[0].split()[1].decode(errors="replace")).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
    except (EOFError, OSError, ValueError, IndexError):
        if data[:1] == b"\x16":
            note("tls-bytes %d" % len(data))
    finally:
        conn.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(128)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


class Recorder:
    """RECORDER as a process (optionally inside a namespace); its log."""

    def __init__(self, tmp, addr="127.0.0.1", port=0, netns=None):
        self.log = tmp / f"recorder-{secrets.token_hex(3)}.log"
        self.log.touch()
        script = tmp / "recorder.py"
        script.write_text(RECORDER)
        cmd = [PY, str(script), addr, str(port), str(self.log)]
        if netns:
            cmd = ["ip", "netns", "exec", netns] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"recorder did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.port = int(line)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=5)

    def mark(self):
        return self.log.stat().st_size

    def requests(self, since=0):
        """["request HOST GET /path HTTP/1.1", ...] since mark()."""
        with open(self.log) as f:
            f.seek(since)
            return f.read().splitlines()


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recorder")
    r = Recorder(tmp)
    yield r
    r.close()


def events(path):
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "net"]


def audited(brig, script, *args):
    path = audit_path(brig)
    r = brig.run("run", "--audit", str(path), *args, "--", "sh", "-c", script, report=True)
    # with BRIG_BUILD=build-asan: the supervisor's leaks, and UB in the egress code, show here
    assert "Sanitizer" not in r.stderr, r.stderr
    assert not [line for line in r.stderr.splitlines() if "runtime error:" in line and "/net/" in line], r.stderr
    return r, events(path)


# Raw bytes to a TCP address (the proxy, or in filtered mode anything),
# sent in pieces with pauses between them; prints every response's status
# line and body, then how the connection ended. Pieces are given in
# python's bytes-escape syntax.
RAW = r'''
import socket, sys, time
host, port, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
pieces = [p.encode().decode("unicode_escape").encode("latin-1") for p in sys.argv[4:]]
s = socket.create_connection((host, port), timeout=15)
for i, p in enumerate(pieces):
    if i:
        time.sleep(pause)
    s.sendall(p)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    end = "EOF"
except ConnectionResetError:
    end = "RESET"
except socket.timeout:
    end = "TIMEOUT"
for part in out.split(b"HTTP/1.1 ")[1:]:
    head, _, body = part.partition(b"\r\n\r\n")
    print("STATUS", head.split(b"\r\n")[0].decode(), "BODY", body.decode(errors="replace").strip()[:200])
print(end)
'''


def raw(host, port, *pieces, pause=0.0):
    q = " ".join("'" + p.replace("'", "'\\''") + "'" for p in pieces)
    return f"python3 -c '{RAW}' {host} {port} {pause} {q}"


def proxy_rules(rec, *extra):
    p = rec.port
    return ["--net", "proxy", "--resolve", "good.example:127.0.0.1", "--resolve", "bad.example:127.0.0.1",
            "--allow-host", f"good.example:{p}", "--deny-host", "bad.example", "--allow-cidr", "127.0.0.1/32",
            *extra]


# ---- class 6: the explicit proxy ------------------------------------------------

@attack("proxy-bare-cr-header", "a bare CR inside a header value through the HTTP proxy", "network")
def test_bare_cr_in_a_header_is_refused_not_forwarded(brig, rec):
    """A bare CR is a line end to some parsers: 'X-A: a<CR>Host: bad' would
    name another host to them. RFC 9112 2.2: refuse it."""
    p = rec.port
    mark = rec.mark()
    r, ev = audited(brig, raw("127.0.0.1", 3128, f"GET http://good.example:{p}/cr HTTP/1.1\\r\\n"
                                                 "X-A: a\\rHost: bad.example\\r\\n\\r\\n"),
                    *proxy_rules(rec))
    assert "STATUS 400 Bad Request BODY brig: bare CR in the head" in r.stdout, r
    assert rec.requests(mark) == [], "the request with a bare CR reached the upstream"
    assert any(e["decision"] == "deny" and e["reason"] == "bare CR in the head" for e in ev), ev
    # control: the same request without the CR is served
    r, _ = audited(brig, raw("127.0.0.1", 3128, f"GET http://good.example:{p}/ok HTTP/1.1\\r\\n"
                                                "X-A: a\\r\\nConnection: close\\r\\n\\r\\n"), *proxy_rules(rec))
    assert f"BODY served good.example:{p} /ok" in r.stdout, r
    assert rec.requests(mark) == [f"request good.example:{p} GET /ok HTTP/1.1"]


@attack("proxy-pipelined-after-chunked-body",
        "a chunked request body, then a pipelined request to a denied host", "network")
@pytest.mark.parametrize("gap", [0.0, 0.3])
def test_request_after_a_chunked_body_is_judged(brig, rec, gap):
    """A chunked POST, then (in the same write, or a moment later) a
    request to a denied host: the first goes to its upstream with its
    body and no byte more; the second is judged on its own — 403 — and
    the upstream never sees it."""
    p = rec.port
    mark = rec.mark()
    first = (f"POST http://good.example:{p}/post HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
             "5\\r\\nhello\\r\\n0\\r\\n\\r\\n")
    second = f"GET http://bad.example:{p}/smuggled HTTP/1.1\\r\\nHost: bad.example\\r\\n\\r\\n"
    pieces = [first + second] if gap == 0 else [first, second]
    r, ev = audited(brig, raw("127.0.0.1", 3128, *pieces, pause=gap), *proxy_rules(rec))
    lines = r.stdout.splitlines()
    assert lines[0] == f"STATUS 200 OK BODY served good.example:{p} /post", r
    assert lines[1].startswith("STATUS 403 Forbidden BODY brig: bad.example:") and "--deny-host" in lines[1], r
    assert rec.requests(mark) == [f"request good.example:{p} POST /post HTTP/1.1"], "a smuggled request arrived"
    assert [(e["decision"], e["host"]) for e in ev if e.get("phase") == "connect"] == \
        [("allow", "good.example"), ("deny", "bad.example")], ev


@attack("proxy-ambiguous-framing",
        "CL+TE, two Content-Lengths, TE not chunked, chunked twice, obs-fold, NUL", "network")
@pytest.mark.parametrize("framing", [
    "Transfer-Encoding: chunked\\r\\nContent-Length: 5",
    "Content-Length: 5\\r\\nContent-Length: 6",
    "Transfer-Encoding: gzip",
    "Transfer-Encoding: chunked, chunked",
    "X-A: a\\r\\n folded",
    "X-A: a\\x00b",
])
def test_ambiguous_framing_is_refused(brig, rec, framing):
    """Framing two parsers may read differently — the smuggling
    primitives of RFC 9112 6.1/6.3 and 5.2 — is 400, not forwarded."""
    p = rec.port
    mark = rec.mark()
    r, ev = audited(brig, raw("127.0.0.1", 3128, f"POST http://good.example:{p}/f HTTP/1.1\\r\\n{framing}\\r\\n\\r\\n"
                                                 "5\\r\\nhello\\r\\n0\\r\\n\\r\\n"), *proxy_rules(rec))
    assert "STATUS 400 Bad Request" in r.stdout, r
    assert rec.requests(mark) == [], "an ambiguously framed request reached the upstream"
    assert any(e["decision"] == "deny" for e in ev), ev


def test_keep_alive_chunked_uploads_are_framed(brig, rec):
    """Positive control: chunked uploads on one kept-alive connection,
    bare chunk-line LFs refused, each request its own upstream connection."""
    p = rec.port
    mark = rec.mark()
    post = (f"POST http://good.example:{p}/%d HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
            "3\\r\\nabc\\r\\n0\\r\\nX-T: 1\\r\\n\\r\\n")
    r, ev = audited(brig, raw("127.0.0.1", 3128, post % 1 + post % 2,
                              f"POST http://good.example:{p}/3 HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
                              "3\\nabc\\r\\n0\\r\\n\\r\\n", pause=0.3), *proxy_rules(rec))
    lines = r.stdout.splitlines()
    assert lines[:2] == [f"STATUS 200 OK BODY served good.example:{p} /1",
                         f"STATUS 200 OK BODY served good.example:{p} /2"], r
    assert rec.requests(mark)[:2] == [f"request good.example:{p} POST /1 HTTP/1.1",
                                      f"request good.example:{p} POST /2 HTTP/1.1"], rec.requests(mark)
    # the third one's body is malformed: the connection ends there, and
    # the upstream got the head but never a complete (smuggling) body
    assert lines[-1] in ("EOF", "RESET"), r


# ---- class 5: filtered mode ------------------------------------------------------

@pytest.fixture(scope="module")
def nrec(net):
    """The recorder inside the upstream namespace, on port 8080."""
    r = Recorder(net.tmp, "0.0.0.0", 8080, netns=net.name)
    yield r
    r.close()


def filtered_rules(net, *extra):
    return ["--net", "filtered", "--resolve", f"secure.test:{net.addr}", "--allow-host", "secure.test",
            "--allow-host", "secure.test:8080", "--deny-host", "denied.test", *extra]


@attack("filtered-cidr-deny-host-by-name", "--allow-cidr for an address, --deny-host for a name; a TLS SNI or HTTP "
        "Host naming the denied host, sent to that address", "network")
def test_deny_host_beats_allow_cidr_when_a_name_is_visible(ws, net):
    brig = ws
    mark = net.mark()
    script = "; ".join([
        tls(net.addr, "denied.test"),
        f"curl -sS --noproxy '*' -m 10 -H 'Host: denied.test' http://{net.addr}/hello.txt; echo",
        # controls: names no rule denies go through on the CIDR rule, and are recorded
        tls(net.addr, "secure.test"),
        f"curl -sS --noproxy '*' -m 10 -H 'Host: other.test' http://{net.addr}/hello.txt",
    ])
    r, ev = audited(brig, script, *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    lines = r.stdout.splitlines()
    assert lines[0].startswith("FAILED"), r
    assert "refused: denied by --deny-host denied.test (its HTTP Host)" in lines[1], r
    assert "TLS hello from the netns upstream" in r.stdout and r.stdout.endswith("hello from the netns upstream\n"), r
    assert [line.split()[0] for line in net.seen(mark)] == ["https", "http"], "only the controls may arrive"
    deny = [e for e in ev if e["decision"] == "deny"]
    assert sorted((e["protocol"], e["host"]) for e in deny) == \
        [("http-direct", "denied.test"), ("tls", "denied.test")], ev
    assert all("--deny-host denied.test" in e["reason"] and e["address"] == net.addr for e in deny), ev
    allow = [e for e in ev if e["decision"] == "allow" and e["phase"] == "connect"]
    assert sorted((e["protocol"], e["host"]) for e in allow) == \
        [("http-direct", "other.test"), ("tls", "secure.test")], ev
    assert all("--allow-cidr" in e["reason"] for e in allow), ev


@attack("filtered-cidr-deny-host-by-name", "the same, disguised: empty lines first (servers skip them), a long "
        "method, an odd target, a bare-LF head, runs of spaces between the words or after the version, a version "
        "with more digits (nginx takes them all)", "network")
@pytest.mark.parametrize("disguise", ["leading-crlf", "long-method", "odd-target", "bare-lf", "double-space",
                                      "trailing-space", "odd-version"])
def test_disguised_requests_to_a_cidr_address_are_still_judged(ws, net, nrec, disguise):
    """What some server would take as a request is one to brig too: judged
    (here: the deny rule), never relayed as nameless bytes."""
    brig = ws
    nmark = nrec.mark()
    req = {"leading-crlf": "\\r\\n\\r\\nGET /x HTTP/1.1\\r\\nHost: denied.test:8080\\r\\n\\r\\n",
           "long-method": "PROPFINDEXTENDEDX /x HTTP/1.1\\r\\nHost: denied.test:8080\\r\\n\\r\\n",
           "odd-target": "GET denied.test/x HTTP/1.1\\r\\nHost: denied.test:8080\\r\\n\\r\\n",
           "bare-lf": "GET /x HTTP/1.1\\nHost: denied.test:8080\\n\\n",
           "double-space": "GET  /x  HTTP/1.1\\r\\nHost: denied.test:8080\\r\\n\\r\\n",
           "trailing-space": "GET /x HTTP/1.1  \\r\\nHost: denied.test:8080\\r\\n\\r\\n",
           "odd-version": "GET /x HTTP/01.10\\r\\nHost: denied.test:8080\\r\\n\\r\\n"}[disguise]
    r, ev = audited(brig, raw(net.addr, 8080, req), *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    assert r.stdout.split(" ")[:2] in (["STATUS", "403"], ["STATUS", "400"], ["STATUS", "501"], ["STATUS", "505"]), r
    assert nrec.requests(nmark) == [], "a disguised request reached the upstream"
    deny = [e for e in ev if e["decision"] == "deny"]
    assert len(deny) == 1 and deny[0]["protocol"] == "http-direct", ev
    # control: the same disguise naming a host no rule denies is served (or refused as malformed)
    if disguise in ("leading-crlf", "bare-lf"):
        nl = "\\n" if disguise == "bare-lf" else "\\r\\n"
        ok = req.replace("denied.test:8080", f"secure.test:8080{nl}Connection: close")
        r, _ = audited(brig, raw(net.addr, 8080, ok), *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
        assert r.stdout.startswith("STATUS 200 OK BODY served secure.test:8080 /x"), r


GET = "GET /{path} HTTP/1.1\\r\\nHost: {host}:8080\\r\\n\\r\\n"
CHUNKED = "POST /{path} HTTP/1.1\\r\\nHost: {host}:8080\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n3\\r\\nabc\\r\\n0\\r\\n\\r\\n"


@attack("filtered-second-request-on-a-connection", "plain HTTP straight to an allowed server (brig's address for "
        "its name, or a CIDR-allowed one), then on the same connection a request whose Host is denied", "network")
@pytest.mark.parametrize("how", ["keep-alive", "pipelined", "after-chunked", "late-first-bytes"])
@pytest.mark.parametrize("to", ["name", "cidr"])
def test_every_request_on_a_redirected_connection_is_judged(ws, net, nrec, how, to):
    brig = ws
    mark, nmark = net.mark(), nrec.mark()
    first = (CHUNKED if how == "after-chunked" else GET).format(path="one", host="secure.test")
    second = GET.format(path="two", host="denied.test")
    pieces, pause = {"keep-alive": ([first, second], 0.3), "pipelined": ([first + second], 0),
                     "after-chunked": ([first + second], 0),
                     # nothing for longer than brig waits for a server that speaks first
                     "late-first-bytes": (["", first, second], 0.5)}[how]
    # the upstream's address is "benchmarking": the CIDR rule lets secure.test reach it either way
    target = "secure.test" if to == "name" else net.addr
    r, ev = audited(brig, raw(target, 8080, *pieces, pause=pause),
                    *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    lines = r.stdout.splitlines()
    method = "POST" if how == "after-chunked" else "GET"
    assert lines[0] == "STATUS 200 OK BODY served secure.test:8080 /one", r
    why = ("sent to brig's address for secure.test, but its HTTP Host names denied.test" if to == "name"
           else "denied by --deny-host denied.test (its HTTP Host)")
    assert lines[1].startswith("STATUS 403 Forbidden") and why in lines[1], r
    got = nrec.requests(nmark)
    if how == "late-first-bytes":
        # the connection made for a server that speaks first, closed unused
        assert "empty" in got, got
        got = [line for line in got if line != "empty"]
    assert got == [f"request secure.test:8080 {method} /one HTTP/1.1"], "a request brig refused reached the upstream"
    assert net.seen(mark) == [], "something reached the namespace's other upstreams"
    judged = [(e["decision"], e["host"]) for e in ev if e.get("phase") == "connect"]
    want = [("allow", "secure.test"), ("deny", "secure.test" if to == "name" else "denied.test")]
    if how == "late-first-bytes":
        # the connection was let through for a server that speaks first;
        # the request that came then started over, judged like any
        want.insert(0, ("allow", "secure.test" if to == "name" else None))
    assert judged == want, ev
    assert all(e["protocol"] == "http-direct" for e in ev[2 if how == "late-first-bytes" else 0:]), ev


# A hand-made TLS ClientHello (padding extension, RFC 7685, to SIZE bytes;
# the server_name after it), cut into records of REC bytes, sent after a
# DELAY as: the first 100 bytes, a STALL, then the rest in four pieces
# PAUSE apart.
HELLO = r'''
import socket, struct, sys, time
addr, port, sni, size, rec, pause, stall, delay = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
def ext(t, body):
    return struct.pack("!HH", t, len(body)) + body
sni_ext = ext(0, struct.pack("!H", len(sni) + 3) + b"\x00" + struct.pack("!H", len(sni)) + sni)
others = ext(0x2b, b"\x02\x03\x04") + ext(0x0a, b"\x00\x02\x00\x1d") + ext(0x0d, b"\x00\x02\x08\x04") + ext(0x33, struct.pack("!H", 36) + b"\x00\x1d\x00\x20" + bytes(range(1, 33)))
fixed = struct.pack("!H", 0x0303) + bytes(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
pad = max(0, size - (4 + len(fixed) + 2 + len(others) + 4 + len(sni_ext)))
exts = others + ext(0x15, bytes(pad)) + sni_ext
body = fixed + struct.pack("!H", len(exts)) + exts
hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
wire = b"".join(b"\x16\x03\x01" + struct.pack("!H", len(hs[i:i + rec])) + hs[i:i + rec] for i in range(0, len(hs), rec))
try:
    s = socket.create_connection((addr, port), timeout=10)
    time.sleep(delay)
    s.sendall(wire[:100])
    time.sleep(stall)
    rest = wire[100:]
    step = len(rest) // 4 + 1
    for i in range(0, len(rest), step):
        s.sendall(rest[i:i + step])
        time.sleep(pause)
    d = s.recv(65536)
    print("ANSWERED" if d else "EOF", len(hs))
except (ConnectionResetError, BrokenPipeError):
    print("RESET", len(hs))
except socket.timeout:
    print("TIMEOUT", len(hs))
'''


def hello(addr, sni, size, rec=16384, pause=0.05, stall=0.05, delay=0.0, port=443):
    return f"python3 -c '{HELLO}' {addr} {port} {sni} {size} {rec} {pause} {stall} {delay}"


MAPPED = "$(getent ahostsv4 secure.test | head -1 | cut -d' ' -f1)"


@attack("filtered-unreadable-clienthello", "a ClientHello larger than brig reads, or stalled mid-way, or spread "
        "over many records and segments with a denied name at its end", "network")
@pytest.mark.parametrize("case", ["oversized", "stalled", "fragmented-denied", "fragmented-mismatch"])
def test_a_client_hello_whose_name_cannot_be_read_is_refused(ws, net, case):
    brig = ws
    mark = net.mark()
    script, why = {
        # past the documented bound (32 KiB of handshake), three records
        "oversized": (hello(MAPPED, "secure.test", 40000), "TLS ClientHello is longer than 32768 bytes"),
        # the first 100 bytes, then nothing for longer than brig waits
        "stalled": (hello(MAPPED, "secure.test", 600, stall=2.6), "TLS ClientHello was not whole within 2000 ms"),
        # 20 KB in 500-byte records over five segments; the name at its end
        "fragmented-denied": (hello(net.addr, "denied.test", 20000, rec=500), "denied by --deny-host denied.test"),
        "fragmented-mismatch": (hello(MAPPED, "other.test", 20000, rec=500),
                                "sent to brig's address for secure.test, but its TLS SNI names other.test"),
    }[case]
    r, ev = audited(brig, script, *filtered_rules(net, "--allow-cidr", f"{net.addr}/32", "--allow-host", "other.test"))
    assert r.stdout.startswith("RESET") or r.stdout.startswith("EOF"), r
    assert net.seen(mark) == [], "the connection reached the upstream"
    deny = [e for e in ev if e["decision"] == "deny"]
    assert len(deny) == 1 and why in deny[0]["reason"] and deny[0]["protocol"] == "tls", ev
    # control: the same 20 KB fragmented hello naming the right host passes
    r, ev = audited(brig, hello(MAPPED, "secure.test", 20000, rec=500),
                    *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    assert [line.split()[0] for line in net.seen(mark)] == ["https"], r
    assert [(e["decision"], e["host"]) for e in ev if e.get("phase") == "connect"] == [("allow", "secure.test")], ev


def test_websocket_handshake_passes_on_a_redirected_connection(ws, net, nrec):
    """Positive control: ws:// straight to an allowed name — the Upgrade
    goes upstream, and after its 101 both directions are the new protocol's."""
    brig = ws
    nmark = nrec.mark()
    hs = "GET /chat HTTP/1.1\\r\\nHost: secure.test:8080\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n"
    script = raw("secure.test", 8080, hs, "frame one", pause=0.3)
    r, ev = audited(brig, f"timeout 5 {script}; true", *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    assert nrec.requests(nmark) == ["request secure.test:8080 GET /chat HTTP/1.1"], nrec.requests(nmark)
    assert "FRAME ONE" in r.stdout, r


@attack("filtered-unreadable-clienthello", "wait out the 250 ms brig gives a server that speaks first, then send "
        "a ClientHello naming another host (to brig's address for a name) or a denied one (to a CIDR address)",
        "network")
@pytest.mark.parametrize("to", ["late-to-name", "late-to-cidr"])
def test_a_late_client_hello_is_judged_before_it_goes_upstream(ws, net, nrec, to):
    brig = ws
    nmark = nrec.mark()
    target, sni, why = {"late-to-name": (MAPPED, "other.test", "but its TLS SNI names other.test"),
                        "late-to-cidr": (net.addr, "denied.test", "denied by --deny-host denied.test (its TLS SNI)")}[to]
    rules = filtered_rules(net, "--allow-cidr", f"{net.addr}/32", "--allow-host", "other.test:8080")
    r, ev = audited(brig, hello(target, sni, 600, delay=0.6, port=8080), *rules)
    assert r.stdout.startswith("RESET") or r.stdout.startswith("EOF"), r
    # the upstream connection was made for a server that speaks first, but
    # not one byte of the hello reached it
    assert all(line == "empty" for line in nrec.requests(nmark)), nrec.requests(nmark)
    assert any(e["decision"] == "deny" and why in e["reason"] for e in ev), ev
    # control: the same late hello naming the right host goes through
    r, ev = audited(brig, hello(target, "secure.test", 600, delay=0.6, port=8080), *rules)
    assert nrec.requests(nmark)[-1] == "tls-bytes %d" % (600 + 5), nrec.requests(nmark)


def refused_before_upstream(nrec, nmark, ev, why):
    """Host side: not a byte reached the recorder (a connection made for a
    server that speaks first, closed unused, is "empty"); one refusal, why."""
    assert [line for line in nrec.requests(nmark) if line != "empty"] == [], "refused bytes reached the upstream"
    deny = [e for e in ev if e["decision"] == "deny"]
    assert len(deny) == 1 and why in deny[0]["reason"], ev


@attack("filtered-stalled-first-word", "the first bytes of a request's method (\"G\", or empty lines), then a pause "
        "past brig's 2 s wait, then the rest with a denied Host, to a CIDR-allowed address and to brig's address "
        "for an allowed name", "network")
@pytest.mark.parametrize("first", ["G", "\\r\\n"])
@pytest.mark.parametrize("to", ["name", "cidr"])
def test_a_request_begun_then_stalled_is_refused_not_relayed(ws, net, nrec, first, to):
    """Servers wait far longer than 2 s for a request line: a first word
    that can still become one is a message begun, refused when not whole
    in time — never decided nameless and relayed as bytes."""
    brig = ws
    nmark = nrec.mark()
    rest = "ET /x HTTP/1.1\\r\\nHost: denied.test:8080\\r\\n\\r\\n" if first == "G" else GET.format(path="x",
                                                                                                     host="denied.test")
    target = "secure.test" if to == "name" else net.addr
    r, ev = audited(brig, raw(target, 8080, first, rest, pause=2.6),
                    *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    assert "served denied.test" not in r.stdout, r
    refused_before_upstream(nrec, nmark, ev, "HTTP request head was not whole within 2000 ms")


@attack("filtered-overlong-method", "a request whose method is 64 letters or more (nginx and Go servers take any "
        "token), naming a denied host, to a CIDR-allowed address and to brig's address for an allowed name",
        "network")
@pytest.mark.parametrize("to", ["name", "cidr"])
def test_an_overlong_method_is_a_request_and_refused(ws, net, nrec, to):
    brig = ws
    nmark = nrec.mark()
    target = "secure.test" if to == "name" else net.addr
    req = "P" * 80 + " /x HTTP/1.1\\r\\nHost: denied.test:8080\\r\\n\\r\\n"
    r, ev = audited(brig, raw(target, 8080, req), *filtered_rules(net, "--allow-cidr", f"{net.addr}/32"))
    assert r.stdout.startswith("STATUS 501"), r
    refused_before_upstream(nrec, nmark, ev, "method too long")


# A ClientHello cut short (its last CUT bytes never sent), then the
# client's end shut (shutdown(SHUT_WR)): what an SNI router (nginx's
# ssl_preread, which routes on the name as soon as it has read it) takes
# and forwards to the backend the name picks, bytes and all.
CUT_HELLO = r'''
import socket, struct, sys
addr, port, sni, cut = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), int(sys.argv[4])
def ext(t, body):
    return struct.pack("!HH", t, len(body)) + body
exts = ext(0, struct.pack("!H", len(sni) + 3) + b"\x00" + struct.pack("!H", len(sni)) + sni) + ext(0x15, b"secret" * 100)
body = struct.pack("!H", 0x0303) + bytes(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00" + struct.pack("!H", len(exts)) + exts
hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
wire = b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs
try:
    s = socket.create_connection((addr, port), timeout=10)
    s.sendall(wire[:len(wire) - cut])
    s.shutdown(socket.SHUT_WR)
    print("ANSWERED" if s.recv(65536) else "EOF")
except (ConnectionResetError, BrokenPipeError):
    print("RESET")
except socket.timeout:
    print("TIMEOUT")
'''


@attack("filtered-unreadable-clienthello", "a ClientHello naming a denied host (or another host than brig's address "
        "is for) with its secret-carrying padding, cut short and the client's end shut: an SNI router routes on the "
        "name it has read and forwards what came", "network")
@pytest.mark.parametrize("to", ["name", "cidr"])
@pytest.mark.parametrize("delay", ["at-once", "late"])
def test_a_client_hello_ended_before_it_was_whole_is_refused(ws, net, nrec, to, delay):
    brig = ws
    nmark = nrec.mark()
    target, sni = (MAPPED, "other.test") if to == "name" else (net.addr, "denied.test")
    cut = f"python3 -c '{CUT_HELLO}' {target} 8080 {sni} 10"
    if delay == "late":   # past the 250 ms brig waits for a server that speaks first
        cut = cut.replace("s.sendall(wire", "__import__(\"time\").sleep(0.6); s.sendall(wire")
    rules = filtered_rules(net, "--allow-cidr", f"{net.addr}/32", "--allow-host", "other.test:8080")
    r, ev = audited(brig, cut, *rules)
    assert r.stdout.startswith("RESET") or r.stdout.startswith("EOF"), r
    refused_before_upstream(nrec, nmark, ev, "TLS ClientHello ended before it was whole")
