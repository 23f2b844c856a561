"""Browsers and every proxy client behind brig's network rules.

Debian's chromium (headless) and playwright-core driving it load a page
from a server on the host's 127.0.0.1, reached through brig's proxy:
`--resolve web.test:127.0.0.1` stands in for DNS and `--allow-cidr
127.0.0.1/32:PORT` lets that one loopback port through the classifier.
Chromium takes ALL_PROXY's socks5h:// for an HTTP proxy and speaks HTTP to
the SOCKS port: both proxy ports serve an HTTP proxy request, SOCKS5 and
SOCKS4/4a alike, under the same judgement (asserted on the host: which
server got which request), and answer what they cannot serve at once, with
a reason in the audit stream. Root and rootless."""
import http.server
import json
import os
import pathlib
import secrets
import shutil
import tempfile
import threading

import pytest

from test_egress import Upstream
from test_escape import attack

REPO = pathlib.Path(__file__).resolve().parents[2]
BROWSER = REPO / "tests" / "browser"
CHROMIUM = "/usr/bin/chromium"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>brig browser test</title></head>
<body><p id="out">not rendered</p><button id="go">go</button>
<script>
  // Only a JavaScript engine produces this: a sum computed at load time.
  let s = 0;
  for (let i = 1; i <= 100; i++) s += i * i;
  const out = document.getElementById('out');
  out.textContent = 'rendered-by-js-' + s;
  document.getElementById('go').onclick = () =>
    fetch('/clicked').then(r => r.text()).then(t => { out.textContent = 'clicked:' + t; out.className = 'done'; });
</script></body></html>
"""


class Web:
    """An HTTP server on the host's 127.0.0.1 that records every request path."""

    def __init__(self):
        self.paths = []
        self.token = secrets.token_hex(8)
        web = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                web.paths.append(self.path)
                if self.path.startswith("/page.html"):
                    body, ctype = PAGE.encode(), "text/html"
                elif self.path == "/clicked":
                    body, ctype = web.token.encode(), "text/plain"
                else:
                    body, ctype = f"path={self.path}\n".encode(), "text/plain"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def allow(self):
        return ["--resolve", "web.test:127.0.0.1", "--allow-host", f"web.test:{self.port}",
                "--allow-cidr", f"127.0.0.1/32:{self.port}"]

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def web():
    w = Web()
    yield w
    w.close()


@pytest.fixture(scope="module")
def victim():
    """Host servers no rule allows: any connection is the attack working."""
    v = Upstream()
    yield v
    v.close()


def need_chromium():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: scripts/install-deps installs Debian's chromium (make check runs it)")


@pytest.fixture(scope="module")
def playwright_dir():
    """tests/browser with its node_modules, copied where `nobody` can read it."""
    need_chromium()
    if not (BROWSER / "node_modules" / "playwright-core").is_dir():
        pytest.fail(f"{BROWSER}/node_modules is missing: run `make browser-deps` (make check does)")
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-pw-", dir="/tmp"))
    d.chmod(0o755)
    shutil.copytree(BROWSER, d / "browser", symlinks=True)
    for root, dirs, files in os.walk(d):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
        for n in files:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
    yield d / "browser"
    shutil.rmtree(d, ignore_errors=True)


def net_events(path):
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "net"]


CHROME = (f"{CHROMIUM} --headless --no-sandbox --disable-gpu --no-first-run "
          "--user-data-dir=\"$HOME/chrome\"")


@pytest.mark.parametrize("net", ["filtered", "proxy"])
def test_chromium_dump_dom_and_screenshot(brig, web, net):
    need_chromium()
    url = f"http://web.test:{web.port}/page.html"
    audit = brig.reports / f"audit-chromium-{net}.jsonl"
    script = (f"{CHROME} --dump-dom '{url}?dom' > dom.html && "
              f"{CHROME} --window-size=640,480 --screenshot=\"$PWD/shot.png\" '{url}?shot'")
    before = len(web.paths)
    r = brig.run("run", "--profile", "browser", "--net", net, *web.allow(), "--audit", str(audit), "--",
                 "sh", "-c", script, timeout=180)
    assert r.returncode == 0, r
    got = web.paths[before:]
    assert "/page.html?dom" in got and "/page.html?shot" in got, (got, r)   # the server really served both
    dom = (brig.workspace / "dom.html").read_text()
    assert "rendered-by-js-338350" in dom and "not rendered" not in dom, dom
    shot = (brig.workspace / "shot.png").read_bytes()
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 1000, len(shot)
    allowed = [e for e in net_events(audit) if e["decision"] == "allow" and e.get("host") == "web.test"]
    assert allowed, net_events(audit)


def test_playwright_core_clicks_a_button(brig, web, playwright_dir):
    before = len(web.paths)
    r = brig.run("run", "--profile", "browser", *web.allow(), "--ro-bind", str(playwright_dir), "--",
                 "node", str(playwright_dir / "click.js"), f"http://web.test:{web.port}/page.html?pw", CHROMIUM,
                 env={"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}, timeout=180)
    assert r.returncode == 0, r
    assert r.stdout.strip() == f"clicked:{web.token}", r
    got = web.paths[before:]
    assert "/page.html?pw" in got and "/clicked" in got, got


# ---- every proxy protocol on either port --------------------------------------

# Run inside with python3: each attempt named on the command line
# (KIND,PORT,HOST,TARGET_PORT,PATH; the target port "web", "victim" or a
# number), one JSON line of results: what the web server answered for PATH
# through the tunnel, or how the proxy refused (REFUSED).
CLIENT = r'''
import ipaddress, json, socket, struct, sys
web, victim = int(sys.argv[1]), int(sys.argv[2])
HTTP, SOCKS = 3128, 1080

def literal(host):
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None

def authority(host, port):
    a = literal(host)
    return f"[{host}]:{port}" if a and a.version == 6 else f"{host}:{port}"

def conn(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s

def read_all(s):
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except OSError as e:
        out += f"<{type(e).__name__}>".encode()
    return out

def get(s, path):
    s.sendall(f"GET {path} HTTP/1.0\r\nHost: web.test\r\n\r\n".encode())
    return read_all(s).decode(errors="replace")

def socks5(port, host, tport, path):
    s = conn(port)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        return "no greeting"
    a = literal(host)
    addr = (b"\x01" if a.version == 4 else b"\x04") + a.packed if a else b"\x03" + bytes([len(host)]) + host.encode()
    s.sendall(b"\x05\x01\x00" + addr + struct.pack(">H", tport))
    rep = s.recv(10)
    if rep[1] != 0:
        return f"socks5 refused {rep[1]}"
    return get(s, path)

def socks4(port, host, tport, path):
    s = conn(port)
    a = literal(host)
    if a and a.version == 4:
        s.sendall(b"\x04\x01" + struct.pack(">H", tport) + a.packed + b"agent\x00")
    else:  # 4a: anything else as a name
        s.sendall(b"\x04\x01" + struct.pack(">H", tport) + b"\x00\x00\x00\x01agent\x00" + host.encode() + b"\x00")
    rep = s.recv(8)
    if len(rep) != 8 or rep[1] != 0x5a:
        return f"socks4 refused {rep[1] if len(rep) > 1 else rep!r}"
    return get(s, path)

def http_forward(port, host, tport, path):
    s = conn(port)
    t = authority(host, tport)
    s.sendall(f"GET http://{t}{path} HTTP/1.1\r\nHost: {t}\r\nConnection: close\r\n\r\n".encode())
    return read_all(s).decode(errors="replace")

def http_connect(port, host, tport, path):
    s = conn(port)
    t = authority(host, tport)
    s.sendall(f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    if b" 200 " not in head.split(b"\r\n")[0]:
        return "connect refused " + head.split(b"\r\n")[0].decode()
    return get(s, path)

def raw(port, data):
    s = conn(port)
    s.sendall(data)
    return read_all(s).hex()

kinds = {"socks5": socks5, "socks4": socks4, "http": http_forward, "connect": http_connect}
out = {}
for spec in sys.argv[3:]:
    kind, port, host, tport, path = spec.split(",")
    port = HTTP if port == "http" else SOCKS
    tport = web if tport == "web" else victim if tport == "victim" else int(tport)
    try:
        if kind == "raw":
            out[spec] = raw(port, bytes.fromhex(host))
        else:
            out[spec] = kinds[kind](port, host, tport, path)
    except OSError as e:
        out[spec] = f"error {e}"
print(json.dumps(out))
'''

# How each kind of attempt reads when the proxy refused it.
REFUSED = {"socks4": "socks4 refused 91", "socks5": "socks5 refused 2", "connect": "connect refused HTTP/1.1 403",
           "http": "HTTP/1.1 403"}


def proxy_client(brig, web, victim, attempts, *args):
    audit = brig.reports / f"audit-{len(list(brig.reports.iterdir()))}.jsonl"
    (brig.workspace / "client.py").write_text(CLIENT)
    brig.chown(brig.workspace / "client.py")
    r = brig.run("run", "--net", "proxy", *web.allow(), "--resolve", "victim.test:127.0.0.1", "--audit", str(audit),
                 *args, "--", "python3", "client.py", str(web.port), str(victim.echo_port), *attempts,
                 report=True, timeout=60)
    assert r.returncode == 0, r
    return r, json.loads(r.stdout.splitlines()[-1]), net_events(audit)


def test_either_port_serves_every_protocol(brig, web, victim):
    """A client that took the wrong variable is served: HTTP to the SOCKS
    port (what Chromium does with ALL_PROXY), SOCKS5 to the HTTP port,
    SOCKS4 and 4a (a bare socks:// URL) to either."""
    attempts = ["http,socks,web.test,web,/http-on-socks", "connect,socks,web.test,web,/connect-on-socks",
                "socks5,http,web.test,web,/socks5-on-http", "socks4,socks,web.test,web,/socks4a-on-socks",
                "socks4,http,127.0.0.1,web,/socks4-on-http"]
    before = len(web.paths)
    r, out, events = proxy_client(brig, web, victim, attempts)
    for a in attempts:
        path = a.split(",")[-1]
        assert f"path={path}" in out[a], (a, out[a])
    assert sorted(web.paths[before:]) == sorted(a.split(",")[-1] for a in attempts)  # each reached the host
    seen = {(e["protocol"], e["proxy_port"]) for e in events if e["decision"] == "allow" and e["phase"] == "connect"}
    assert seen == {("http", 1080), ("http-connect", 1080), ("socks5", 3128), ("socks4", 1080), ("socks4", 3128)}, \
        events


@attack("proxy-protocol-switch", "a refused destination asked for in another proxy protocol than the port's "
        "(SOCKS4/4a, SOCKS5 on the HTTP port, HTTP or CONNECT on the SOCKS port)",
        "every protocol on either proxy port goes through the same judgement")
def test_other_protocols_get_the_same_judgement(brig, web, victim):
    attempts = ["socks4,socks,127.0.0.1,victim,/", "socks4,http,127.0.0.1,victim,/",
                "socks4,socks,victim.test,victim,/", "socks4,http,169.254.169.254,web,/",
                "socks5,http,127.0.0.1,victim,/", "socks5,http,victim.test,victim,/",
                "connect,socks,127.0.0.1,victim,/", "http,socks,victim.test,victim,/",
                "http,socks,web.test,victim,/"]
    bind = "raw,http,040200507f00000100,web,/"                    # SOCKS4 BIND: an inbound port, never judged
    r, out, events = proxy_client(brig, web, victim, attempts + [bind])
    assert victim.connections == 0, (victim.connections, out)     # the host never saw one
    assert out[bind] == "005b000000000000", out
    assert any(e["reason"] == "SOCKS4 BIND not supported" and e["protocol"] == "socks4" for e in events), events
    for a in attempts:
        assert out[a].startswith(REFUSED[a.split(",")[0]]), (a, out[a])
    denied = [e for e in events if e["decision"] == "deny"]
    assert len(denied) == len(attempts) + 1, events
    assert r.report["controls"]["egress"]["denied"] == len(attempts) + 1, r.report["controls"]["egress"]


@attack("proxy-unserved-protocol", "a client speaking what no proxy port serves (TLS to the proxy, "
        "binary garbage), for a silent path or an unlogged probe", "refused at the first byte, answered, logged")
def test_unserved_protocol_is_answered_and_logged(brig, web, victim):
    garbage, tls = "00010203", "160301000501000001" + "00"
    attempts = [f"raw,socks,{garbage},web,/", f"raw,http,{tls},web,/"]
    r, out, events = proxy_client(brig, web, victim, attempts)
    reply = bytes.fromhex(out[attempts[0]]).decode()
    assert reply.startswith("HTTP/1.1 400 "), reply
    assert "no proxy protocol (first byte 0x00) to brig's SOCKS port 1080" in reply, reply
    assert bytes.fromhex(out[attempts[1]]) == b"\x15\x03\x01\x00\x02\x02\x28", out   # a TLS alert
    denied = {e["proxy_port"]: e for e in events if e["decision"] == "deny"}
    assert denied[1080]["protocol"] == "unknown", events
    assert denied[1080]["reason"] == ("the client spoke no proxy protocol (first byte 0x00) to brig's SOCKS port "
                                      "1080, which expects an HTTP proxy request, SOCKS5 or SOCKS4"), events
    assert denied[3128]["protocol"] == "tls", events
    assert denied[3128]["reason"].startswith("the client spoke TLS (first byte 0x16) to brig's HTTP proxy port 3128, "
                                             "which expects an HTTP proxy request, SOCKS5 or SOCKS4"), events
    eg = r.report["controls"]["egress"]
    assert eg["denied"] == 2, eg
    # the report and the end-of-run summary name the port and the reason, and suggest no flag
    dests = {d["port"]: d for d in eg["destinations"]}
    assert dests[1080]["host"] == "localhost" and dests[1080]["reason"] == denied[1080]["reason"], eg
    assert dests[3128]["host"] == "localhost" and dests[3128]["reason"] == denied[3128]["reason"], eg
    why = {x["what"]: x for x in r.report["refusals"]}
    assert why["localhost:1080"]["why"] == denied[1080]["reason"] and why["localhost:1080"]["allow_with"] is None, why
    assert f"localhost:1080 ({denied[1080]['reason']})" in r.stderr, r
