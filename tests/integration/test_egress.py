"""Network egress through brig's proxy (--net proxy): allowed names are
reachable over HTTP forwarding, CONNECT and SOCKS5; everything else —
other names, loopback, private and metadata addresses in any spelling —
is refused with a readable answer, logged to the audit stream and counted
in the report.

The upstream servers run in this test process on the host's 127.0.0.1;
`--resolve test.example:127.0.0.1` stands in for DNS and `--allow-cidr
127.0.0.1/32` lets that loopback address through the classifier. No
packet goes anywhere but loopback."""
import http.server
import json
import socket
import socketserver
import threading

import pytest

BODY = b"hello from upstream\n"


class Upstream:
    """An HTTP server and a TCP echo server on 127.0.0.1, counting connections."""

    def __init__(self):
        self.connections = 0
        self.lock = threading.Lock()
        up = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def setup(self):
                with up.lock:
                    up.connections += 1
                super().setup()

            def do_GET(self):
                body = BODY + f"path={self.path} host={self.headers.get('Host')}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                data = self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        class Echo(socketserver.BaseRequestHandler):
            """Reads until the client half-closes, then answers with
            everything it got, upper-cased: proves both directions and
            the half-close travel through the proxy."""

            def handle(self):
                with up.lock:
                    up.connections += 1
                chunks = []
                while True:
                    d = self.request.recv(65536)
                    if not d:
                        break
                    chunks.append(d)
                self.request.sendall(b"".join(chunks).upper())

        class Threaded(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.echo = Threaded(("127.0.0.1", 0), Echo)
        self.http_port = self.http.server_address[1]
        self.echo_port = self.echo.server_address[1]
        for s in (self.http, self.echo):
            threading.Thread(target=s.serve_forever, daemon=True).start()

    def close(self):
        for s in (self.http, self.echo):
            s.shutdown()
            s.server_close()


@pytest.fixture(scope="module")
def up():
    u = Upstream()
    yield u
    u.close()


def allow(up, *extra):
    return ["--resolve", "test.example:127.0.0.1", "--allow-host", f"test.example:{up.http_port}",
            "--allow-host", f"test.example:{up.echo_port}", "--allow-cidr", "127.0.0.1/32", *extra]


def audited(brig, script, *args, **kw):
    path = brig.reports / f"audit-{len(list(brig.reports.iterdir()))}.jsonl"
    r = brig.sh(script, "--audit", str(path), *args, **kw)
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return r, [e for e in events if e["event"] == "net"]


# A raw proxy client, run inside with python3: CONNECT or SOCKS5 to a
# target, send a payload, half-close, print what comes back.
CLIENT = r'''
import socket, struct, sys
kind, host, port, payload = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
if kind == "connect":
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    target = f"[{host}]" if ":" in host else host
    s.sendall(f"CONNECT {target}:{port} HTTP/1.1\r\nHost: {target}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    status = head.split(b"\r\n")[0].decode()
    if " 200 " not in status:
        rest = s.recv(4096).decode(errors="replace")
        print("REFUSED", status, [l for l in head.decode().split("\r\n") if l.startswith("X-Brig-Deny")], rest.strip())
        sys.exit(0)
else:
    s = socket.create_connection(("127.0.0.1", 1080), timeout=20)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    if kind == "socks-udp":
        s.sendall(b"\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00")
    elif kind == "socks-bind":
        s.sendall(b"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00")
    else:
        h = host.encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
    rep = s.recv(10)
    if rep[1] != 0:
        print("REFUSED", "socks reply", rep[1])
        sys.exit(0)
s.sendall(payload)
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print("GOT", out.decode())
'''


def client(kind, host, port, payload="ping"):
    return f"python3 -c '{CLIENT}' {kind} {host} {port} {payload}"


def test_allowed_host_through_http_proxy_connect_and_socks(brig, up):
    script = "; ".join([
        f"curl -sS http://test.example:{up.http_port}/x?y=1",            # HTTP_PROXY from the environment
        f"curl -sS -p http://test.example:{up.http_port}/tunnel",         # CONNECT
        f"curl -sS --socks5-hostname 127.0.0.1:1080 http://test.example:{up.http_port}/socks",
        f"curl -sS -d posted-body http://test.example:{up.http_port}/post",
        client("connect", "test.example", up.echo_port, "via-connect"),
        client("socks", "test.example", up.echo_port, "via-socks"),
    ])
    r, ev = audited(brig, script, *allow(up))
    assert r.returncode == 0, r
    out = r.stdout
    assert f"path=/x?y=1 host=test.example:{up.http_port}" in out, r   # origin-form upstream, Host = target
    assert "path=/tunnel" in out and "path=/socks" in out, r
    assert "posted-body" in out, r
    assert "GOT VIA-CONNECT" in out and "GOT VIA-SOCKS" in out, r      # both directions, half-close
    opened = [e for e in ev if e.get("phase") == "connect"]
    assert {e["protocol"] for e in opened} == {"http", "http-connect", "socks5"}, ev
    assert all(e["decision"] == "allow" and e["host"] == "test.example" and e["address"] == "127.0.0.1"
               for e in opened), ev
    closed = [e for e in ev if e.get("phase") == "close"]
    assert len(closed) == len(opened), ev
    assert all(e["bytes_down"] > 0 and e["bytes_up"] > 0 for e in closed), ev


def test_denied_host_gets_403_and_socks_refusal_and_is_logged(brig, up):
    before = up.connections
    script = (f"curl -sS -i http://other.example:{up.http_port}/; "
              f"curl -sS --socks5-hostname 127.0.0.1:1080 http://other.example:{up.http_port}/; echo socks_rc=$?; "
              + client("socks", "other.example", up.echo_port))
    r, ev = audited(brig, script, *allow(up, "--resolve", "other.example:127.0.0.1"))
    assert "HTTP/1.1 403 Forbidden" in r.stdout, r
    assert f"X-Brig-Deny: other.example:{up.http_port}; host not in the allow list" in r.stdout, r
    assert "socks_rc=97" in r.stdout, r              # curl: SOCKS connection refused
    assert "REFUSED socks reply 2" in r.stdout, r    # 0x02: not allowed by ruleset
    denied = [e for e in ev if e["decision"] == "deny"]
    assert len(denied) == 3 and all(e["host"] == "other.example" for e in denied), ev
    assert up.connections == before                  # the upstream never saw them


def test_loopback_needs_an_allow_cidr(brig, up):
    before = up.connections
    r, ev = audited(brig, f"curl -sS -i http://test.example:{up.http_port}/",
                    "--resolve", "test.example:127.0.0.1", "--allow-host", f"test.example:{up.http_port}")
    assert "403" in r.stdout and "address 127.0.0.1 is loopback" in r.stdout, r
    assert ev and ev[0]["decision"] == "deny" and ev[0]["address"] == "127.0.0.1", ev
    assert up.connections == before


@pytest.mark.parametrize("target", ["169.254.169.254", "metadata.google.internal", "10.0.0.1",
                                    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "0x7f000001", "2130706433",
                                    "127.1", "::1", "fd00:ec2::254", "localhost"])
def test_special_addresses_and_names_are_refused(brig, up, target):
    before = up.connections
    # test.example is allowed (and the proxy on), but no CIDR rule: the
    # loopback the targets point at stays out of reach in every spelling.
    r = brig.sh(client("connect", target, up.echo_port) + "; " + client("socks", target, up.echo_port),
                "--resolve", "test.example:127.0.0.1", "--allow-host", "test.example")
    assert r.stdout.count("REFUSED") == 2, r
    assert "GOT" not in r.stdout, r
    assert up.connections == before


def test_deny_wins_suffix_patterns_and_ports(brig, up):
    p = up.echo_port
    names = ["good.example.test", "bad.example.test", "example.test", "deep.sub.example.test"]
    args = ["--allow-host", f"*.example.test:{p}", "--deny-host", "bad.example.test", "--allow-cidr", "127.0.0.1/32"]
    for n in names:
        args += ["--resolve", f"{n}:127.0.0.1"]
    script = "; ".join(f"echo {n}; " + client("connect", n, p, n) for n in names)
    script += f"; echo default-port; " + client("connect", "good.example.test", up.http_port)
    r = brig.sh(script, *args)
    lines = r.stdout.splitlines()
    got = dict(zip(lines[0::2], lines[1::2]))
    assert got["good.example.test"] == "GOT GOOD.EXAMPLE.TEST", r
    assert got["deep.sub.example.test"] == "GOT DEEP.SUB.EXAMPLE.TEST", r
    assert got["bad.example.test"].startswith("REFUSED") and "deny-host" in got["bad.example.test"], r
    assert got["example.test"].startswith("REFUSED"), r              # *. names subdomains only
    assert got["default-port"].startswith("REFUSED") and "port" in got["default-port"], r


def test_client_ignoring_the_proxy_reaches_nothing(brig, up):
    """Proxy mode (filtered mode redirects such clients: test_egress_filtered)."""
    script = ("python3 -c '\n"
              "import socket\n"
              f"for a in [(\"127.0.0.1\", {up.http_port}), (\"192.0.2.1\", 80), (\"::1\", {up.http_port})]:\n"
              "    try:\n"
              "        socket.create_connection(a, timeout=5); print(\"CONNECTED\", a)\n"
              "    except OSError as e:\n"
              "        print(\"failed\", e.errno)\n"
              "'; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    r = brig.sh(script, *allow(up), "--net", "proxy")
    assert "CONNECTED" not in r.stdout, r
    assert r.stdout.count("failed") == 3, r
    assert r.stdout.split()[-1] == "lo", r           # the only interface


def test_report_has_egress_counts(brig, up):
    r = brig.run("run", *allow(up), "--", "sh", "-c",
                 f"curl -sS http://test.example:{up.http_port}/; curl -sS http://nope.example/", report=True)
    eg = r.report["controls"]["egress"]
    # allow rules and no mode: filtered, which this host supports
    assert r.report["controls"]["network"] == "filtered", r.report
    assert r.report["degraded"] == [] or "filtered" not in " ".join(r.report["degraded"]), r.report
    assert eg["allowed"] == 1 and eg["denied"] == 1, eg
    assert eg["allow_hosts"] == [f"test.example:{up.http_port}", f"test.example:{up.echo_port}"], eg
    assert eg["allow_cidrs"] == ["127.0.0.1/32"] and eg["resolve"] == ["test.example:127.0.0.1"], eg
    assert {(d["host"], d["decision"]) for d in eg["destinations"]} == {("test.example", "allow"),
                                                                       ("nope.example", "deny")}, eg
    assert eg["bytes_down"] > len(BODY), eg


def test_socks_udp_associate_and_bind_are_refused(brig, up):
    r, ev = audited(brig, client("socks-udp", "x", 0) + "; " + client("socks-bind", "x", 0), *allow(up))
    assert r.stdout.count("REFUSED socks reply 7") == 2, r    # command not supported
    assert [e["reason"] for e in ev] == ["SOCKS5 UDP ASSOCIATE not supported", "SOCKS5 BIND not supported"], ev


def test_malformed_requests_get_errors(brig, up):
    script = ("python3 -c '\n"
              "import socket\n"
              "for req in [b\"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\", b\"GET http://a@b.example/ HTTP/1.1\\r\\n\\r\\n\",\n"
              "            b\"BLAH\\x00\\r\\n\\r\\n\", b\"GET http://test.example/ HTTP/1.1\\r\\n\" + b\"X: \" + b\"a\" * 20000]:\n"
              "    s = socket.create_connection((\"127.0.0.1\", 3128), timeout=20)\n"
              "    s.sendall(req)\n"
              "    print(s.recv(100).split(b\"\\r\\n\")[0].decode())\n"
              "'")
    r = brig.sh(script, *allow(up))
    assert r.stdout.split("\n")[:4] == ["HTTP/1.1 400 Bad Request"] * 3 + ["HTTP/1.1 431 Request Header Fields Too Large"], r


def test_hundred_concurrent_connections(brig, up):
    script = ("python3 -c '\n"
              "import socket, threading\n"
              "ok = []\n"
              "def one(i):\n"
              "    s = socket.create_connection((\"127.0.0.1\", 3128), timeout=60)\n"
              f"    s.sendall(b\"CONNECT test.example:{up.echo_port} HTTP/1.1\\r\\n\\r\\n\")\n"
              "    head = b\"\"\n"
              "    while not head.endswith(b\"\\r\\n\\r\\n\"):\n"
              "        head += s.recv(1)\n"
              "    s.sendall(b\"conn%d \" % i * 1000)\n"
              "    s.shutdown(socket.SHUT_WR)\n"
              "    out = b\"\"\n"
              "    while True:\n"
              "        d = s.recv(65536)\n"
              "        if not d: break\n"
              "        out += d\n"
              "    if out == (b\"CONN%d \" % i * 1000): ok.append(i)\n"
              "ts = [threading.Thread(target=one, args=(i,)) for i in range(100)]\n"
              "[t.start() for t in ts]; [t.join() for t in ts]\n"
              "print(\"ok\", len(ok))\n"
              "'")
    r = brig.sh(script, *allow(up), timeout=120)
    assert "ok 100" in r.stdout, r


@pytest.mark.parametrize("flag,value", [("--allow-host", "bad host!"), ("--allow-host", "*"),
                                        ("--allow-host", "a.*.example"), ("--allow-host", "example.test:99999"),
                                        ("--deny-host", "x..example"), ("--allow-cidr", "10.0.0.0/33"),
                                        ("--allow-cidr", "10.1.0.0/8"), ("--allow-cidr", "not-an-ip/8"),
                                        ("--resolve", "nohostaddr"), ("--resolve", "test.example:999.1.1.1")])
def test_bad_rules_exit_125_naming_the_value(brig, flag, value):
    r = brig.run("run", flag, value, "--", "true")
    assert r.returncode == 125, r
    assert value in r.stderr and flag in r.stderr, r


def test_no_rules_means_no_proxy(brig, up):
    r = brig.sh("echo proxy=${HTTP_PROXY:-none}")
    assert "proxy=none" in r.stdout, r
    r = brig.sh("echo $HTTP_PROXY $ALL_PROXY $no_proxy", *allow(up))
    assert r.stdout.split() == ["http://127.0.0.1:3128", "socks5h://127.0.0.1:1080", "localhost,127.0.0.1,::1"], r


# ---- --upstream-proxy ----------------------------------------------------------------

class ChainProxy:
    """A small upstream HTTP proxy on 127.0.0.1, as a corporate network
    would have: records every CONNECT target; answers `status`, and for 200
    connects to the target's port on 127.0.0.1 — whatever the name or
    address asked for, so nothing ever leaves loopback — and relays both
    ways, half-closes included."""

    def __init__(self):
        self.targets = []
        self.status = 200
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                d = conn.recv(4096)
                if not d:
                    return
                head += d
            head, rest = head.split(b"\r\n\r\n", 1)
            method, target, _ = head.split(b"\r\n")[0].decode().split(" ")
            with self.lock:
                self.targets.append(f"{method} {target}")
            if method != "CONNECT" or self.status != 200:
                conn.sendall(f"HTTP/1.1 {self.status} Forbidden\r\nContent-Length: 0\r\n\r\n".encode())
                return
            dest = socket.create_connection(("127.0.0.1", int(target.rsplit(":", 1)[1])))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\nVia: chain\r\n\r\n")
            dest.sendall(rest)

            def pump(a, b):
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
                b.shutdown(socket.SHUT_WR)

            t = threading.Thread(target=pump, args=(dest, conn), daemon=True)
            t.start()
            pump(conn, dest)
            t.join()
            dest.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def chain():
    c = ChainProxy()
    yield c
    c.close()


def via_chain(up, chain):
    # far.example "resolves" (for brig's own check) to a public address,
    # so no --allow-cidr: the upstream proxy's own 127.0.0.1 is not
    # classified — the user named it. inside.example resolves to a private
    # address and stays refused even though the upstream would resolve it.
    return ["--resolve", "far.example:93.184.216.34", "--allow-host", f"far.example:{up.http_port}",
            "--allow-host", f"far.example:{up.echo_port}",
            "--resolve", "inside.example:10.0.0.1", "--allow-host", f"inside.example:{up.echo_port}",
            "--resolve", "proxy.test:127.0.0.1", "--upstream-proxy", f"http://proxy.test:{chain.port}"]


def test_upstream_proxy_carries_allowed_connections(brig, up, chain):
    script = "; ".join([
        f"curl -sS http://far.example:{up.http_port}/plain",              # absolute URI: tunnelled too
        f"curl -sS -p http://far.example:{up.http_port}/tunnel",          # CONNECT
        f"curl -sS --socks5-hostname 127.0.0.1:1080 http://far.example:{up.http_port}/socks",
        client("connect", "far.example", up.echo_port, "via-connect"),
        client("socks", "far.example", up.echo_port, "via-socks"),
        f"curl -sS -i http://other.example:{up.http_port}/",              # not allowed
        client("connect", "inside.example", up.echo_port),                # allowed name, private address
        client("socks", "inside.example", up.echo_port),
    ])
    r, ev = audited(brig, script, *via_chain(up, chain))
    out = r.stdout
    assert f"path=/plain host=far.example:{up.http_port}" in out, r
    assert "path=/tunnel" in out and "path=/socks" in out, r
    assert "GOT VIA-CONNECT" in out and "GOT VIA-SOCKS" in out, r
    assert "X-Brig-Deny: other.example" in out, r
    assert "REFUSED HTTP/1.1 403 Forbidden" in out and "address 10.0.0.1 is private" in out, r
    assert "REFUSED socks reply 2" in out, r
    # the upstream saw exactly the allowed connections, by name
    assert sorted(chain.targets) == sorted([f"CONNECT far.example:{up.http_port}"] * 3
                                           + [f"CONNECT far.example:{up.echo_port}"] * 2), chain.targets
    opened = [e for e in ev if e.get("phase") == "connect" and e["decision"] == "allow"]
    assert len(opened) == 5, ev
    assert all(e["address"] == "93.184.216.34" and e["upstream_proxy"] == f"proxy.test:{chain.port}"
               for e in opened), ev
    denied = [e for e in ev if e["decision"] == "deny"]
    assert {e["host"] for e in denied} == {"other.example", "inside.example"} and len(denied) == 3, ev


def test_upstream_proxy_refusal_gives_502(brig, up, chain):
    chain.status = 403
    script = "; ".join([
        f"curl -sS -i http://far.example:{up.http_port}/plain",
        client("connect", "far.example", up.echo_port),
        client("socks", "far.example", up.echo_port),
    ])
    r, ev = audited(brig, script, *via_chain(up, chain))
    out = r.stdout
    assert "HTTP/1.1 502 Bad Gateway" in out, r
    assert f"upstream proxy proxy.test:{chain.port} answered 'HTTP/1.1 403 Forbidden'" in out, r
    assert "REFUSED HTTP/1.1 502 Bad Gateway" in out, r
    assert "REFUSED socks reply 5" in out, r                    # connection refused
    assert len(chain.targets) == 3, chain.targets
    upstream = [e for e in ev if e.get("phase") == "upstream"]
    assert len(upstream) == 3 and all(e["decision"] == "deny" and "403 Forbidden" in e["reason"]
                                      for e in upstream), ev
    closed = [e for e in ev if e.get("phase") == "close"]
    assert len(closed) == 3 and all("403" in e["error"] and e["bytes_up"] == 0 for e in closed), ev


@pytest.mark.parametrize("value", ["ftp://x:1", "http://user@x:1", "http://x", "http://:80",
                                   "https://x:443", "http://x:1/path", "http://x:99999"])
def test_bad_upstream_proxy_exits_125_naming_the_value(brig, value):
    r = brig.run("run", "--upstream-proxy", value, "--", "true")
    assert r.returncode == 125, r
    assert "--upstream-proxy" in r.stderr, r
    if "@" in value:
        # named without its credentials: stderr ends up in logs
        assert "credentials" in r.stderr and "user@" not in r.stderr and "***@x:1" in r.stderr, r
    else:
        assert value in r.stderr, r


def test_upstream_proxy_in_a_policy_file_round_trips(brig):
    f = brig.base / "upstream.json"
    f.write_text('{"network": {"allow_hosts": ["pypi.org"], "upstream_proxy": "HTTP://Proxy.Example:3128/"}}')
    r = brig.run("policy", "show", "--policy", str(f))
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["network"]["upstream_proxy"] == "http://proxy.example:3128", r
    shown = brig.base / "shown.json"
    shown.write_text(r.stdout)
    again = brig.run("policy", "show", "--policy", str(shown))
    assert again.returncode == 0 and again.stdout == r.stdout, again
    f.write_text('{"network": {"upstream_proxy": "http://u:p@proxy.example:3128"}}')
    r = brig.run("policy", "check", str(f))
    assert r.returncode == 125 and "credentials" in r.stderr and f"{f}:1:" in r.stderr, r


# ---- plain http keep-alive: one client connection, a request after another ----

class Framed:
    """A raw HTTP server answering per path: /cl Content-Length framed,
    /chunked chunked (in pieces, with a trailer), /close HTTP/1.0 ended by
    closing. One request per connection (brig sends Connection: close);
    counts connections."""

    def __init__(self):
        self.connections = 0
        self.lock = threading.Lock()
        srv = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                with srv.lock:
                    srv.connections += 1
                head = b""
                while b"\r\n\r\n" not in head:
                    d = self.request.recv(4096)
                    if not d:
                        return
                    head += d
                lines = head.split(b"\r\n")
                path = lines[0].split()[1].decode()
                host = [l.split(b":", 1)[1].strip().decode() for l in lines if l.lower().startswith(b"host:")][0]
                body = f"{path} from {host}".encode()
                s = self.request
                if path.startswith("/chunked"):
                    s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                              + b"%x\r\n" % 4 + body[:4] + b"\r\n")
                    rest = body[4:]
                    s.sendall(b"%x;ext=1\r\n" % len(rest) + rest + b"\r\n0\r\nX-Trailer: t\r\n\r\n")
                elif path.startswith("/close"):
                    s.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + body)
                else:
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                              + body)

        class Threaded(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Threaded(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def framed():
    f = Framed()
    yield f
    f.close()


def two_hosts(framed, *extra):
    p = framed.port
    return ["--resolve", "one.example:127.0.0.1", "--resolve", "two.example:127.0.0.1",
            "--resolve", "bad.example:127.0.0.1", "--allow-host", f"one.example:{p}",
            "--allow-host", f"two.example:{p}", "--allow-cidr", "127.0.0.1/32", *extra]


# Requests on ONE connection to the proxy, one after another (seq) or all
# sent at once (pipe); prints each response, then whether the proxy kept
# the connection open.
KEEPALIVE = r'''
import socket, sys
mode, urls = sys.argv[1], sys.argv[2:]
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
f = s.makefile("rb")
def req(u):
    return f"GET {u} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
def response():
    status = f.readline()
    if not status:
        return None
    h = {}
    while True:
        l = f.readline()
        if l in (b"\r\n", b"\n", b""):
            break
        k, v = l.decode().split(":", 1)
        h[k.strip().lower()] = v.strip()
    if "content-length" in h:
        body = f.read(int(h["content-length"]))
    elif h.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                while f.readline() not in (b"\r\n", b""):
                    pass
                break
            body += f.read(n)
            f.readline()
    else:
        body = f.read()
    return status.split()[1].decode(), h.get("connection"), body.decode().strip()
if mode == "pipe":
    s.sendall(b"".join(req(u) for u in urls))
for u in urls:
    if mode == "seq":
        s.sendall(req(u))
    r = response()
    if r is None:
        print("EOF")
        break
    print("RESPONSE", *r)
s.settimeout(2)
try:
    print("CLOSED" if f.read(1) == b"" else "MORE")
except (socket.timeout, TimeoutError):
    print("OPEN")
'''


def keepalive(mode, *urls):
    return f"python3 -c '{KEEPALIVE}' {mode} " + " ".join(urls)


# (not "mode": that is conftest's root/rootless parameter)
@pytest.mark.parametrize("sending", ["seq", "pipe"])
def test_keep_alive_two_hosts_on_one_connection(brig, framed, sending):
    p = framed.port
    before = framed.connections
    r, ev = audited(brig, keepalive(sending, f"http://one.example:{p}/cl", f"http://two.example:{p}/chunked",
                                    f"http://one.example:{p}/cl2"), *two_hosts(framed))
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines == [f"RESPONSE 200 keep-alive /cl from one.example:{p}",
                     f"RESPONSE 200 keep-alive /chunked from two.example:{p}",
                     f"RESPONSE 200 keep-alive /cl2 from one.example:{p}", "OPEN"], r
    opened = [e for e in ev if e.get("phase") == "connect"]
    assert [(e["decision"], e["host"]) for e in opened] == [("allow", "one.example"), ("allow", "two.example"),
                                                             ("allow", "one.example")], ev
    assert len([e for e in ev if e.get("phase") == "close"]) == 3, ev
    assert framed.connections - before == 3     # one upstream connection per request


def test_keep_alive_denied_second_request_gets_403(brig, framed):
    p = framed.port
    before = framed.connections
    r, ev = audited(brig, keepalive("seq", f"http://one.example:{p}/cl", f"http://bad.example:{p}/cl",
                                    f"http://one.example:{p}/never"), *two_hosts(framed))
    lines = r.stdout.splitlines()
    assert lines[0] == f"RESPONSE 200 keep-alive /cl from one.example:{p}", r
    assert lines[1].startswith("RESPONSE 403 close brig: bad.example:") and "host not in the allow list" in lines[1], r
    assert lines[2:] == ["EOF", "CLOSED"], r    # the refusal closes the connection
    assert [(e["decision"], e["host"]) for e in ev if e.get("phase") == "connect"] == \
        [("allow", "one.example"), ("deny", "bad.example")], ev
    assert framed.connections - before == 1


def test_close_delimited_response_closes_the_client_connection(brig, framed):
    p = framed.port
    r = brig.sh(keepalive("seq", f"http://one.example:{p}/close", f"http://two.example:{p}/cl"), *two_hosts(framed))
    assert r.stdout.splitlines() == [f"RESPONSE 200 close /close from one.example:{p}", "EOF", "CLOSED"], r
    # the client asking to close is honoured too
    script = ("python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", 3128), timeout=20); "
              f"s.sendall(b\"GET http://one.example:{p}/cl HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n\"); "
              "d = b\"\"\nwhile True:\n    c = s.recv(4096)\n    if not c: break\n    d += c\n"
              "print(d.decode())'")
    r = brig.sh(script, *two_hosts(framed))
    assert "Connection: close" in r.stdout and r.stdout.rstrip().endswith(f"/cl from one.example:{p}"), r


def test_curl_reuses_the_proxy_connection(brig, framed):
    p = framed.port
    r = brig.run("run", *two_hosts(framed), "--", "sh", "-c",
                 f"curl -sSv http://one.example:{p}/cl http://two.example:{p}/chunked 2>&1", report=True)
    assert f"/cl from one.example:{p}" in r.stdout and f"/chunked from two.example:{p}" in r.stdout, r
    assert "Re-using existing connection" in r.stdout or "Reusing existing" in r.stdout, r
    eg = r.report["controls"]["egress"]
    assert eg["allowed"] == 2 and eg["denied"] == 0, eg
