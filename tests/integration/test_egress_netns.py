"""Network egress through brig's proxy to upstreams in a network namespace
the test builds itself.

The module fixture makes two namespaces, `brig-t-<random>` (the upstreams)
and `brig-t-<random>-c` (where brig runs: the "client" side), joined by a
veth pair with addresses from the benchmarking range 198.18.0.0/15
(198.18.X.1/30 on the client side, 198.18.X.2 on the upstreams'), and
starts the upstreams (`ip netns exec`), listening on 0.0.0.0:
  - plain HTTP on port 80 (a directory: hello.txt and a bare git repository
    served over git's dumb HTTP protocol),
  - HTTPS on port 443 with a certificate for `secure.test` signed by a test
    CA made here with openssl,
  - a TCP echo server on port 7000 (upper-cases what it reads),
  - a UDP listener on port 53 (a "nameserver" that only takes notes).
Every connection and datagram the upstreams receive is appended to a log,
so a test can prove the upstream saw nothing.

brig runs in the client namespace (the `ws` fixture wraps every command in
nsenter --net; the supervisor reaches 198.18.X.2 through the veth), with
`--resolve` standing in for DNS. The host's own network namespace gets
nothing: no address, no route, no interface. 198.18/15 is classified
"benchmarking", so it takes `--allow-cidr 198.18.0.0/15` to reach it.

The tests that point an allowed name at loopback, private or metadata
addresses run brig *inside* the namespace (nsenter --net), where 10.0.0.1
and 169.254.169.254 are local addresses and the upstreams listen on every
address: a classifier mistake would land at the upstream and be counted
(the positive controls show it would), and no packet can leave the test's
own namespaces. Nothing here sends a packet anywhere but loopback, the veth
and the namespaces. Needs root to build the namespace (brig itself still
runs as root and as nobody)."""
import json
import os
import pathlib
import resource
import secrets
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import IS_ROOT, Brig

HTTP, HTTPS, ECHO, DNS = 80, 443, 7000, 53
HELLO = "hello from the netns upstream\n"
README = "cloned over dumb http\n"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")

UPSTREAM = r'''
import asyncio, http.server, os, resource, socket, ssl, sys, threading
root, log_path, cert, key = sys.argv[1:5]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
lock = threading.Lock()
log = open(log_path, "a", buffering=1)

def note(kind, peer):
    with lock:
        log.write(f"{kind} {peer[0]}\n")

class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=root, **kw)
    def log_message(self, *a):
        pass

class Plain(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    def finish_request(self, request, addr):
        note("http", addr)
        super().finish_request(request, addr)

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)

class TLS(Plain):
    def finish_request(self, request, addr):
        note("https", addr)
        request.settimeout(30)
        try:
            request = ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        http.server.ThreadingHTTPServer.finish_request(self, request, addr)

servers = [Plain(("0.0.0.0", %(http)d), Handler), TLS(("0.0.0.0", %(https)d), Handler)]
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()

async def echo(r, w):
    note("echo", w.get_extra_info("peername"))
    try:
        while True:
            d = await r.read(65536)
            if not d:
                break
            w.write(d.upper())
            await w.drain()
    except OSError:
        pass
    finally:
        w.close()

class Udp(asyncio.DatagramProtocol):
    def datagram_received(self, data, addr):
        note("udp", addr)

async def main():
    srv = await asyncio.start_server(echo, "0.0.0.0", %(echo)d, backlog=4096)
    await asyncio.get_running_loop().create_datagram_endpoint(Udp, local_addr=("0.0.0.0", %(dns)d))
    print("READY", flush=True)
    async with srv:
        await srv.serve_forever()

asyncio.run(main())
''' % {"http": HTTP, "https": HTTPS, "echo": ECHO, "dns": DNS}


def sh(*cmd, **kw):
    return subprocess.run(list(map(str, cmd)), check=True, capture_output=True, text=True, **kw)


class Netns:
    """The namespace, its veth, its upstreams and their connection log."""

    def __init__(self, tmp):
        self.tmp = tmp
        tag = secrets.token_hex(3)
        self.name = f"brig-t-{tag}"
        self.client = f"brig-t-{tag}-c"
        self.veth_host = f"bt{tag}h"
        self.veth_ns = f"bt{tag}n"
        x = secrets.randbelow(254) + 1   # private namespaces: no clash with anything
        self.host_addr = f"198.18.{x}.1"
        self.addr = f"198.18.{x}.2"
        self.log = tmp / "connections.log"
        self.log.touch()
        self.proc = None
        self.made_ns = self.made_client = False

    def up(self):
        sh("ip", "netns", "add", self.name)
        self.made_ns = True
        sh("ip", "netns", "add", self.client)
        self.made_client = True
        cl = ["ip", "-n", self.client]
        # made inside the client namespace: it never exists on the host
        sh(*cl, "link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns)
        sh(*cl, "link", "set", self.veth_ns, "netns", self.name)
        sh(*cl, "link", "set", "lo", "up")
        sh(*cl, "addr", "add", f"{self.host_addr}/30", "dev", self.veth_host)
        sh(*cl, "link", "set", self.veth_host, "up")
        ns = ["ip", "-n", self.name]
        sh(*ns, "link", "set", "lo", "up")
        sh(*ns, "addr", "add", f"{self.addr}/30", "dev", self.veth_ns)
        sh(*ns, "link", "set", self.veth_ns, "up")
        # Local inside the namespace only: where a classifier mistake would
        # land when brig runs in here (see run_inside).
        for a in ("10.0.0.1/32", "169.254.169.254/32"):
            sh(*ns, "addr", "add", a, "dev", "lo")
        self._content()
        script = self.tmp / "upstream.py"
        script.write_text(UPSTREAM)
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.name, PY, str(script), str(self.tmp / "www"), str(self.log),
             str(self.tmp / "srv.pem"), str(self.tmp / "srv.key")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"upstream did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        deadline = time.time() + 10   # the veth's carrier comes up asynchronously
        while b"hello" not in subprocess.run(
                ["ip", "netns", "exec", self.client, "curl", "-s", "--noproxy", "*", "-m", "2",
                 f"http://{self.addr}/hello.txt"],
                capture_output=True).stdout:
            if time.time() > deadline:
                raise RuntimeError(f"{self.addr} not reachable over {self.veth_host}")
            time.sleep(0.1)

    def _content(self):
        t = self.tmp
        www = t / "www"
        www.mkdir()
        (www / "hello.txt").write_text(HELLO)
        # A test CA and a server certificate for secure.test.
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        sh("openssl", "req", "-x509", *ec, "-keyout", t / "ca.key", "-out", t / "ca.pem", "-days", "2",
           "-subj", "/CN=brig test CA", "-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        sh("openssl", "req", *ec, "-keyout", t / "srv.key", "-out", t / "srv.csr", "-subj", "/CN=secure.test")
        (t / "ext.cnf").write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                                   "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:secure.test\n"
                                   "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
        sh("openssl", "x509", "-req", "-in", t / "srv.csr", "-CA", t / "ca.pem", "-CAkey", t / "ca.key",
           "-CAcreateserial", "-out", t / "srv.pem", "-days", "2", "-extfile", t / "ext.cnf")
        # A tiny repository for git's dumb HTTP protocol.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(t), "GIT_CONFIG_NOSYSTEM": "1"}
        git = ["git", "-c", "user.name=brig", "-c", "user.email=brig@secure.test", "-c", "init.defaultBranch=main"]
        sh(*git, "init", "-q", t / "work", env=env)
        (t / "work" / "README").write_text(README)
        sh(*git, "-C", t / "work", "add", "README", env=env)
        sh(*git, "-C", t / "work", "commit", "-q", "-m", "one", env=env)
        sh(*git, "clone", "-q", "--bare", t / "work", www / "repo.git", env=env)
        sh("git", "-C", www / "repo.git", "update-server-info", env=env)

    def down(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.made_client:  # the veth pair goes with it
            subprocess.run(["ip", "netns", "del", self.client], capture_output=True)
        if self.made_ns:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def mark(self):
        return self.log.stat().st_size

    def seen(self, since):
        """What the upstreams received since mark(): ["http 198.18.x.1", ...]."""
        with open(self.log) as f:
            f.seek(since)
            return f.read().splitlines()

    def allow(self, *extra):
        return ["--resolve", f"secure.test:{self.addr}", "--allow-host", "secure.test",
                "--allow-host", f"secure.test:{ECHO}", "--allow-cidr", "198.18.0.0/15", *extra]


@pytest.fixture(scope="module")
def net():
    if not IS_ROOT:
        pytest.skip("NETNS TESTS NEED ROOT: building a network namespace and a veth pair takes root "
                    "(the brig under test runs as root and as nobody)")
    for tool in ("ip", "openssl", "git", "curl", "nsenter"):
        if not shutil.which(tool):
            pytest.skip(f"NETNS TESTS NEED {tool}")
    yield from namespaces_up(Netns, "brig-netns-")


def namespaces_up(cls, prefix):
    """cls(a scratch directory).up(), yielded; then down() and the
    directory removed, whatever happened (for module fixtures)."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    tmp.chmod(0o755)
    n = cls(tmp)
    try:
        n.up()
        yield n
    finally:
        n.down()
        shutil.rmtree(tmp, ignore_errors=True)


class InClientNamespace:
    """The `brig` fixture, with every brig command run in the test's client
    namespace (nsenter as root first, then setpriv for rootless)."""

    run = Brig.run
    sh = Brig.sh

    def __init__(self, brig, netns):
        self._brig = brig
        self._netns = netns

    def __getattr__(self, name):
        return getattr(self._brig, name)

    def cmd(self, *args):
        return ["nsenter", f"--net=/run/netns/{self._netns}"] + self._brig.cmd(*args)


@pytest.fixture
def ws(brig, net):
    """brig in the client namespace, and the test CA in the workspace, for
    curl --cacert and python's cafile."""
    shutil.copy(net.tmp / "ca.pem", brig.workspace / "ca.pem")
    (brig.workspace / "ca.pem").chmod(0o644)
    return InClientNamespace(brig, net.client)


def audit_path(brig):
    return brig.reports / f"audit-{secrets.token_hex(4)}.jsonl"


def net_events(path):
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "net"]


def audited(brig, script, *args, **kw):
    path = audit_path(brig)
    r = brig.sh(script, "--audit", str(path), *args, **kw)
    return r, net_events(path)


def run_inside(brig, net, script, *args, timeout=60):
    """brig run ARGS -- sh -c SCRIPT, with brig itself in the test namespace."""
    plain = getattr(brig, "_brig", brig)   # not through the client namespace
    cmd = ["nsenter", f"--net=/run/netns/{net.name}"] + plain.cmd("run", *args, "--", "sh", "-c", script)
    return subprocess.run(cmd, cwd=str(brig.workspace), env=brig.env(), capture_output=True, text=True,
                          timeout=timeout)


# A raw CONNECT client, run inside with python3: prints "GOT <echo>" or
# "REFUSED <status line> <X-Brig-Deny>".
CONNECT = r'''
import socket, sys
host, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
target = f"[{host}]" if ":" in host else host
s.sendall(f"CONNECT {target}:{port} HTTP/1.1\r\nHost: {target}:{port}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(1)
    if not d:
        break
    head += d
lines = head.decode(errors="replace").split("\r\n")
if " 200 " not in lines[0] + " ":
    print("REFUSED", lines[0], [l for l in lines if l.lower().startswith("x-brig-deny")])
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


def connect(host, port, payload="ping"):
    return f"python3 -c '{CONNECT}' {host} {port} {payload}"


def test_benchmark_range_is_refused_without_allow_cidr(ws, net):
    brig = ws
    mark = net.mark()
    script = ("curl -sS -i http://secure.test/hello.txt; "
              "curl -sS --cacert ca.pem https://secure.test/hello.txt; echo https_rc=$?; "
              + connect("secure.test", ECHO))
    r, ev = audited(brig, script, "--resolve", f"secure.test:{net.addr}", "--allow-host", "secure.test",
                    "--allow-host", f"secure.test:{ECHO}")
    assert "HTTP/1.1 403 Forbidden" in r.stdout, r
    assert f"address {net.addr} is benchmarking" in r.stdout, r
    assert "https_rc=56" in r.stdout, r                    # curl: CONNECT answered 403
    assert "REFUSED HTTP/1.1 403" in r.stdout and "GOT" not in r.stdout, r
    assert len(ev) == 3 and all(e["decision"] == "deny" and e["address"] == net.addr for e in ev), ev
    assert net.seen(mark) == [], "the upstream saw a refused connection"
    # The same with the rule: it goes through, from the host side of the veth.
    r, ev = audited(brig, "curl -sS http://secure.test/hello.txt", *net.allow())
    assert r.stdout == HELLO, r
    assert net.seen(mark) == [f"http {net.host_addr}"]


def test_curl_http_https_and_tunnel_reach_the_netns(ws, net):
    brig = ws
    mark = net.mark()
    script = ("curl -sS http://secure.test/hello.txt; "            # absolute-URI forwarding
              "curl -sS --cacert ca.pem https://secure.test/hello.txt; "   # CONNECT + TLS to the test CA
              "curl -sS -p http://secure.test/hello.txt; "          # CONNECT for plain http
              + connect("secure.test", ECHO, "via-tunnel"))
    r, ev = audited(brig, script, *net.allow())
    assert r.returncode == 0, r
    assert r.stdout == HELLO * 3 + "GOT VIA-TUNNEL\n", r
    opened = [e for e in ev if e.get("phase") == "connect"]
    assert [e["protocol"] for e in opened] == ["http", "http-connect", "http-connect", "http-connect"], ev
    assert all(e["decision"] == "allow" and e["host"] == "secure.test" and e["address"] == net.addr
               for e in opened), ev
    assert sorted(net.seen(mark)) == sorted([f"http {net.host_addr}", f"https {net.host_addr}",
                                             f"http {net.host_addr}", f"echo {net.host_addr}"])


def test_python_urllib_uses_the_proxy_from_the_environment(ws, net):
    brig = ws
    script = ("python3 -c '\n"
              "import os, ssl, urllib.request\n"
              "assert os.environ[\"HTTP_PROXY\"] and os.environ[\"HTTPS_PROXY\"]\n"
              "print(urllib.request.urlopen(\"http://secure.test/hello.txt\", timeout=20).read().decode(), end=\"\")\n"
              "ctx = ssl.create_default_context(cafile=\"ca.pem\")\n"
              "print(urllib.request.urlopen(\"https://secure.test/hello.txt\", timeout=20, context=ctx).read().decode(), end=\"\")\n"
              "'")
    mark = net.mark()
    r = brig.sh(script, *net.allow())
    assert r.returncode == 0, r
    assert r.stdout == HELLO * 2, r
    assert sorted(net.seen(mark)) == [f"http {net.host_addr}", f"https {net.host_addr}"]


def test_git_clone_over_dumb_http(ws, net):
    brig = ws
    r = brig.sh("GIT_TERMINAL_PROMPT=0 git clone -q http://secure.test/repo.git /tmp/clone "
                "&& cat /tmp/clone/README && git -C /tmp/clone log --format=%s", *net.allow())
    assert r.returncode == 0, r
    assert r.stdout == README + "one\n", r


def test_denied_host_gets_403_and_an_audit_line(ws, net):
    brig = ws
    mark = net.mark()
    script = ("curl -sS -i http://denied.test/hello.txt; "
              "curl -sS --cacert ca.pem https://denied.test/hello.txt; echo https_rc=$?; "
              + connect("denied.test", ECHO))
    r, ev = audited(brig, script, *net.allow("--resolve", f"denied.test:{net.addr}"))
    assert "HTTP/1.1 403 Forbidden" in r.stdout, r
    assert "X-Brig-Deny: denied.test:80; host not in the allow list" in r.stdout, r
    assert "https_rc=56" in r.stdout, r
    assert "REFUSED HTTP/1.1 403 Forbidden ['X-Brig-Deny: denied.test:7000; host not in the allow list']" \
        in r.stdout, r
    assert [(e["host"], e["port"], e["decision"]) for e in ev] == \
        [("denied.test", 80, "deny"), ("denied.test", 443, "deny"), ("denied.test", ECHO, "deny")], ev
    assert all(e["reason"] == "host not in the allow list" for e in ev), ev
    assert net.seen(mark) == [], "the upstream saw a denied host"


@pytest.mark.parametrize("addr", ["127.0.0.1", "10.0.0.1", "169.254.169.254"])
def test_allowed_name_resolving_to_special_address_is_refused(ws, net, addr):
    """brig runs inside the namespace, where ADDR is local and the upstreams
    listen: only the classifier stands between the request and them."""
    brig = ws
    rules = ["--resolve", f"evil.test:{addr}", "--allow-host", "evil.test", "--allow-host", f"evil.test:{ECHO}",
             "--allow-cidr", "198.18.0.0/15"]
    script = ("curl -sS -i http://evil.test/hello.txt; "
              "curl -sS --cacert ca.pem https://evil.test/hello.txt; echo https_rc=$?; "
              + connect("evil.test", ECHO) + "; " + connect(addr, ECHO))
    mark = net.mark()
    r = run_inside(brig, net, script, *rules)
    assert "HTTP/1.1 403 Forbidden" in r.stdout and f"address {addr} is" in r.stdout, r
    assert "https_rc=56" in r.stdout, r
    assert r.stdout.count("REFUSED HTTP/1.1 403") == 2 and "GOT" not in r.stdout, r
    assert net.seen(mark) == [], "the upstream saw a connection to a refused address"
    # Control: named by --allow-cidr, the same address does reach the upstream.
    r = run_inside(brig, net, connect("evil.test", ECHO, "control"), *rules, "--allow-cidr", f"{addr}/32")
    assert r.stdout == "GOT CONTROL\n", r
    assert [line.split()[0] for line in net.seen(mark)] == ["echo"]


@pytest.mark.parametrize("literal,embedded,cls", [
    ("::ffff:10.0.0.1", "10.0.0.1", "private"), ("::ffff:a00:1", "10.0.0.1", "private"),
    ("::ffff:127.0.0.1", "127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "169.254.169.254", "metadata"),
    ("::ffff:NETNS", "NETNS", "benchmarking")])
def test_v4_mapped_ipv6_literal_is_refused(ws, net, literal, embedded, cls):
    """As a CONNECT target, an absolute URI and a --resolve answer, judged by
    the embedded IPv4 address; brig runs inside the namespace, where that
    address is local and the upstreams listen on it."""
    brig = ws
    literal, embedded = literal.replace("NETNS", net.addr), embedded.replace("NETNS", net.addr)
    # Without the rule for 198.18/15 the namespace's own address must stay
    # out of reach in its mapped spelling too.
    rules = () if cls == "benchmarking" else ("--allow-cidr", "198.18.0.0/15")
    mark = net.mark()
    r = run_inside(brig, net, connect(literal, ECHO) + "; " + connect(literal, HTTP) + "; "
                   f"curl -sS -i http://[{literal}]/hello.txt; "
                   f"curl -sS -i http://v6.test/hello.txt",
                   "--allow-host", "secure.test", "--resolve", f"v6.test:{literal}", "--allow-host", "v6.test",
                   *rules)
    assert r.stdout.count("REFUSED HTTP/1.1 403") == 2 and "GOT" not in r.stdout, r
    assert r.stdout.count("HTTP/1.1 403 Forbidden") == 4 and HELLO not in r.stdout, r
    deny = [line for line in r.stdout.splitlines() if "X-Brig-Deny" in line]
    assert len(deny) == 4 and all(f"; address {embedded} is {cls}" in line for line in deny), r
    assert net.seen(mark) == []


def test_literal_metadata_address_is_refused(ws, net):
    brig = ws
    mark = net.mark()
    r = run_inside(brig, net, "curl -sS -i http://169.254.169.254/latest/meta-data/; "
                   + connect("169.254.169.254", HTTP), *net.allow())
    assert "HTTP/1.1 403 Forbidden" in r.stdout and "REFUSED HTTP/1.1 403" in r.stdout, r
    assert r.stdout.count("; address 169.254.169.254 is metadata") == 2 and "GOT" not in r.stdout, r
    assert net.seen(mark) == []


def test_direct_connect_from_inside_fails(ws, net):
    """Proxy mode: only loopback inside (filtered mode: test_egress_filtered)."""
    brig = ws
    mark = net.mark()
    script = ("python3 -c '\n"
              "import socket\n"
              f"for a in [(\"{net.addr}\", {HTTP}), (\"{net.addr}\", {ECHO}), (\"{net.host_addr}\", {HTTP}),\n"
              f"          (\"::ffff:{net.addr}\", {ECHO})]:\n"
              "    fam = socket.AF_INET6 if \":\" in a[0] else socket.AF_INET\n"
              "    s = socket.socket(fam, socket.SOCK_STREAM)\n"
              "    s.settimeout(5)\n"
              "    try:\n"
              "        s.connect(a); print(\"CONNECTED\", a)\n"
              "    except OSError as e:\n"
              "        print(\"failed\", e.errno)\n"
              "';"
              f"curl -sS --noproxy '*' -m 5 http://{net.addr}/hello.txt; echo curl_rc=$?; "
              f"curl -sS --noproxy '*' -m 5 --resolve secure.test:80:{net.addr} http://secure.test/hello.txt; "
              "echo curl_rc=$?")
    r = brig.sh(script, *net.allow(), "--net", "proxy")
    assert "CONNECTED" not in r.stdout and HELLO not in r.stdout, r
    assert r.stdout.count("failed 101") == 4, r          # ENETUNREACH: only lo inside
    assert r.stdout.count("curl_rc=7") == 2, r
    assert net.seen(mark) == []


def test_raw_and_packet_sockets_fail(ws, net):
    brig = ws
    script = ("python3 -c '\n"
              "import socket\n"
              "for name, args in [(\"raw icmp\", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),\n"
              "                   (\"raw ip\", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)),\n"
              "                   (\"raw udp\", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)),\n"
              "                   (\"raw icmp6\", (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)),\n"
              "                   (\"packet raw\", (socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))),\n"
              "                   (\"packet dgram\", (socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x800)))]:\n"
              "    try:\n"
              "        socket.socket(*args); print(\"OPENED\", name)\n"
              "    except OSError as e:\n"
              "        print(\"failed\", name, e.errno)\n"
              "'")
    r = brig.sh(script, *net.allow())
    assert "OPENED" not in r.stdout, r
    assert r.stdout.count("failed") == 6, r


def test_dns_from_inside_fails(ws, net):
    """Proxy mode: no DNS inside at all (filtered mode answers allowed names:
    test_egress_filtered)."""
    brig = ws
    mark = net.mark()
    # A DNS query for secure.test (id 0x1234, RD), sent over UDP to the
    # namespace's "nameserver" and to the sandbox's own loopback.
    script = ("getent hosts secure.test; echo getent_rc=$?; "
              "python3 -c '\n"
              "import socket\n"
              "q = bytes.fromhex(\"123401000001000000000000\") + b\"\\x06secure\\x04test\\x00\\x00\\x01\\x00\\x01\"\n"
              f"for ns in [\"{net.addr}\", \"127.0.0.53\", \"127.0.0.1\"]:\n"
              "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              "    s.settimeout(1)\n"
              "    try:\n"
              "        s.sendto(q, (ns, 53)); print(\"ANSWER\", ns, s.recvfrom(512))\n"
              "    except OSError as e:\n"
              "        print(\"failed\", ns, e.errno)\n"
              "'")
    r = brig.sh(script, *net.allow(), "--net", "proxy")
    assert "getent_rc=2" in r.stdout, r                    # not found
    assert "ANSWER" not in r.stdout, r
    assert f"failed {net.addr} 101" in r.stdout, r         # ENETUNREACH
    assert r.stdout.count("failed") == 3, r
    assert net.seen(mark) == []


MANY = r'''
import asyncio, sys
n, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
errors, state = {}, {"open": 0, "done": 0, "ok": 0, "peak": 0}
all_open = asyncio.Event()

def settled():
    state["done"] += 1
    if state["done"] == n:
        all_open.set()

async def one(i, sem):
    w = None
    try:
        async with sem:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", 3128), 60)
            w.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 60)
            if not head.startswith(b"HTTP/1.1 200"):
                body = await asyncio.wait_for(r.read(300), 10)
                raise RuntimeError(head.split(b"\r\n")[0].decode() + ": " + body.decode(errors="replace").strip())
        state["open"] += 1
        state["peak"] = max(state["peak"], state["open"])
        settled()
        await all_open.wait()     # every tunnel is open at the same time
        msg = b"hello %d\n" % i
        w.write(msg)
        await w.drain()
        if await asyncio.wait_for(r.readexactly(len(msg)), 60) == msg.upper():
            state["ok"] += 1
    except Exception as e:
        k = f"{type(e).__name__}: {e}"[:100]
        errors[k] = errors.get(k, 0) + 1
        if w is None or not all_open.is_set():
            settled()
    finally:
        if w is not None:
            w.close()

async def main():
    sem = asyncio.Semaphore(256)
    await asyncio.gather(*(one(i, sem) for i in range(n)))
    print("peak", state["peak"], "ok", state["ok"], "errors", errors)

asyncio.run(main())
'''


NOFILE_HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


@pytest.mark.parametrize("n", [
    2000,
    5000,
])
def test_concurrent_tunnels(ws, net, n):
    """N CONNECT tunnels to the echo server, all open at once, each sending
    and receiving a few bytes."""
    brig = ws
    mark = net.mark()
    (brig.workspace / "many.py").write_text(MANY)
    audit = audit_path(brig)
    r = brig.run("run", *net.allow(), "--audit", audit, "--nofile", "16384", "--",
                 "python3", "many.py", n, "secure.test", ECHO, timeout=120)
    assert r.returncode == 0, r
    failures = {}
    for e in net_events(audit):
        why = e.get("error") or (e["reason"] if e["decision"] != "allow" else None)
        if why:
            failures[why] = failures.get(why, 0) + 1
    assert f"peak {n} ok {n} errors {{}}" in r.stdout, (r, failures)
    seen = net.seen(mark)
    assert len(seen) == n and all(s == f"echo {net.host_addr}" for s in seen), seen[:5]
