"""Filtered mode (--net filtered, the default with allow rules): programs
that ignore proxy settings are still held to the host rules, by the kernel.

Same test namespaces as test_egress_netns.py (upstreams in one, brig in the
other, joined by a veth: nothing touches the host's own network). Every
client here ignores HTTP_PROXY: a C program doing getaddrinfo + connect,
curl --noproxy '*', python sockets. Each test attacks one promise and
checks the upstreams' own connection log, so "refused" means the upstream
really saw nothing."""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess

import pytest

from conftest import Brig
from proc_helpers import wait_until
from test_egress_netns import ECHO, HELLO, HTTP, audit_path, net, run_inside, ws  # noqa: F401 (fixtures)

CLIENT_C = r'''
/* getaddrinfo + connect + a plain HTTP GET, no proxy support at all. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
        int e = getaddrinfo(argv[1], argv[2], &hints, &res);
        if (e) {
                printf("RESOLVE-FAILED %s\n", gai_strerror(e));
                return 2;
        }
        int fd = -1;
        for (ai = res; ai; ai = ai->ai_next) {
                fd = socket(ai->ai_family, ai->ai_socktype, 0);
                if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                if (fd >= 0)
                        close(fd);
                fd = -1;
        }
        if (fd < 0) {
                printf("CONNECT-FAILED %s\n", strerror(errno));
                return 3;
        }
        dprintf(fd, "GET /hello.txt HTTP/1.0\r\nHost: %s\r\n\r\n", argv[1]);
        char buf[4096];
        ssize_t n, total = 0;
        while ((n = read(fd, buf, sizeof buf)) > 0) {
                fwrite(buf, 1, (size_t)n, stdout);
                total += n;
        }
        if (n < 0 || total == 0)
                printf("\nREAD-FAILED %s\n", n < 0 ? strerror(errno) : "closed");
        return 0;
}
'''

# A raw TCP client (no SNI, no Host: ssh-style): "GOT <echo>" or "FAILED <why>".
RAW = r'''
import socket, sys
host, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
try:
    s = socket.create_connection((host, port), timeout=20)
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    print("GOT", out.decode() if out else "nothing")
except (OSError, socket.gaierror) as e:
    print("FAILED", type(e).__name__, getattr(e, "errno", ""))
'''

# TLS with a chosen SNI to a chosen address: "TLS <body>" or "FAILED <why>".
TLS = r'''
import socket, ssl, sys
addr, sni = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile="ca.pem")
ctx.check_hostname = False
try:
    raw = socket.create_connection((addr, 443), timeout=20)
    s = ctx.wrap_socket(raw, server_hostname=sni)
    s.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: secure.test\r\n\r\n")
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    print("TLS", out.decode().split("\r\n\r\n", 1)[-1], end="")
except (OSError, ssl.SSLError) as e:
    print("FAILED", type(e).__name__)
'''


def raw(host, port, payload="ping"):
    return f"python3 -c '{RAW}' {host} {port} {payload}"


def tls(addr, sni):
    return f"python3 -c '{TLS}' {addr} {sni}"


def rules(net, *extra):
    """secure.test (ports 80, 443, ECHO) at the upstream's one address."""
    return ["--resolve", f"secure.test:{net.addr}", "--allow-host", "secure.test",
            "--allow-host", f"secure.test:{ECHO}", "--allow-cidr", f"{net.addr}/32", *extra]


def events(path, kind):
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == kind]


def audited(brig, script, *args):
    path = audit_path(brig)
    r = brig.run("run", "--audit", str(path), *args, "--", "sh", "-c", script, report=True)
    return r, events(path, "net"), events(path, "dns")


@pytest.fixture
def client(ws):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.fail("no C compiler: scripts/install-deps installs build-essential")
    src = ws.workspace / "client.c"
    src.write_text(CLIENT_C)
    subprocess.run([cc, "-O1", "-o", str(ws.workspace / "client"), str(src)], check=True)
    (ws.workspace / "client").chmod(0o755)
    return "./client"


def test_clients_without_proxy_support_reach_allowed_hosts_only(ws, net, client):
    brig = ws
    mark = net.mark()
    script = (f"{client} secure.test 80; {client} denied.test 80; "
              "curl -sS --noproxy '*' http://secure.test/hello.txt; "
              "curl -sS --noproxy '*' http://denied.test/hello.txt; echo curl_rc=$?; "
              + raw("secure.test", ECHO) + "; " + raw("denied.test", ECHO))
    r, net_ev, dns_ev = audited(brig, script, *rules(net))
    out = r.stdout
    assert out.count(HELLO) == 2, r                              # C client and curl
    assert "RESOLVE-FAILED" in out and "curl_rc=6" in out, r     # denied.test: no address at all
    assert "GOT PING" in out and "FAILED gaierror" in out, r
    assert r.report["controls"]["network"] == "filtered", r.report
    assert r.report["controls"]["egress"]["dns"]["refused"] >= 3, r.report
    # the upstream saw exactly the allowed connections, from brig's side
    seen = sorted(line.split()[0] for line in net.seen(mark))
    assert seen == ["echo", "http", "http"], seen
    allowed = [e for e in net_ev if e["decision"] == "allow" and e["phase"] == "connect"]
    assert sorted(e["protocol"] for e in allowed) == ["http-direct", "http-direct", "tcp"], net_ev
    assert all(e["host"] == "secure.test" and e["address"] == net.addr for e in allowed), net_ev
    assert any(e["name"] == "denied.test" and e["decision"] == "deny" for e in dns_ev), dns_ev
    assert any(e["name"] == "secure.test" and e["decision"] == "allow" and e["answers"] for e in dns_ev), dns_ev


def test_https_is_judged_by_its_sni(ws, net):
    brig = ws
    mark = net.mark()
    r, net_ev, _ = audited(brig, "curl -sS --noproxy '*' --cacert ca.pem https://secure.test/hello.txt",
                           *rules(net))
    assert r.stdout == HELLO, r
    assert [line.split()[0] for line in net.seen(mark)] == ["https"]
    tls_ev = [e for e in net_ev if e["protocol"] == "tls" and e["phase"] == "connect"]
    assert len(tls_ev) == 1 and tls_ev[0]["decision"] == "allow" and tls_ev[0]["host"] == "secure.test", net_ev


def test_dns_answers_allowed_names_only(ws, net):
    """UDP to any nameserver (resolv.conf's, a hard-coded one, the
    upstream's own "nameserver") and TCP: all answered by brig's stub;
    a denied name is NXDOMAIN and the question never leaves."""
    brig = ws
    mark = net.mark()
    query = r'''
import socket, struct, sys
def q(name):
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return bytes.fromhex("abcd01000001000000000000") + labels + b"\x00\x00\x01\x00\x01"
for ns in [sys.argv[1], "127.0.0.53", "8.8.8.8"]:
    for name in ["secure.test", "denied.test"]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(q(name), (ns, 53))
        a = s.recv(512)
        print("UDP", name, "rcode", a[3] & 15, "answers", struct.unpack("!H", a[6:8])[0])
t = socket.create_connection((sys.argv[1], 53), timeout=5)
m = q("denied.test")
t.sendall(struct.pack("!H", len(m)) + m)
a = t.recv(600)
print("TCP denied.test rcode", a[2 + 3] & 15)
'''
    script = ("getent hosts denied.test; echo getent_rc=$?; getent ahostsv4 secure.test | head -1; "
              f"python3 -c '{query}' {net.addr}")
    r, _, dns_ev = audited(brig, script, *rules(net))
    out = r.stdout
    assert "getent_rc=2" in out, r
    assert out.count("UDP secure.test rcode 0 answers 1") == 3, r
    assert out.count("UDP denied.test rcode 3 answers 0") == 3, r   # NXDOMAIN
    assert "TCP denied.test rcode 3" in out, r
    assert "100.64." in out, r                                      # brig's own address for the name
    assert net.seen(mark) == [], "a DNS question reached the upstream's nameserver"
    denied = [e for e in dns_ev if e["name"] == "denied.test"]
    assert denied and all(e["decision"] == "deny" for e in denied), dns_ev
    assert {e["transport"] for e in denied} == {"udp", "tcp"}, dns_ev


def test_raw_tcp_to_an_allowed_name_and_port_only(ws, net):
    """ssh-style: no SNI, no Host; the address brig handed out names the host."""
    brig = ws
    mark = net.mark()
    script = raw("secure.test", ECHO) + "; " + raw("secure.test", ECHO + 1) + "; " + raw("denied.test", ECHO)
    r, net_ev, _ = audited(brig, script, *rules(net))
    lines = r.stdout.splitlines()
    assert lines[0] == "GOT PING", r
    assert lines[1].startswith("FAILED"), r          # the name is allowed, that port is not
    assert lines[2].startswith("FAILED gaierror"), r
    assert [line.split()[0] for line in net.seen(mark)] == ["echo"]
    deny = [e for e in net_ev if e["decision"] == "deny"]
    assert any(e["port"] == ECHO + 1 and "port" in e["reason"] for e in deny), net_ev


def test_udp_icmp_and_raw_sockets_are_refused(ws, net):
    brig = ws
    mark = net.mark()
    script = r'''
import socket, sys
target = socket.gethostbyname("secure.test")
for addr in [target, sys.argv[1]]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x" * 10, (addr, %d)); s.settimeout(2); s.recv(10); print("UDP ANSWERED")
    except OSError as e:
        print("udp refused", e.errno)
for kind, args in [("icmp", (socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)),
                   ("raw", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                   ("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0))]:
    try:
        socket.socket(*args).sendto(b"\x08\x00\x00\x00\x00\x00\x00\x00", (sys.argv[1], 0)); print(kind, "SENT")
    except OSError as e:
        print(kind, "refused", e.errno)
''' % ECHO
    r, _, _ = audited(brig, f"python3 -c '{script}' {net.addr}", *rules(net))
    assert r.stdout.count("udp refused") == 2 and "ANSWERED" not in r.stdout, r
    assert "SENT" not in r.stdout and r.stdout.count("refused") == 5, r
    assert net.seen(mark) == [], "a datagram reached the upstream"


def test_sni_or_host_of_an_allowed_name_does_not_carry_another_address(ws, net):
    """Spoofing: the name in the first bytes must match where the
    connection goes."""
    brig = ws
    mark = net.mark()
    mapped = "$(getent ahostsv4 secure.test | head -1 | cut -d' ' -f1)"
    script = (
        # brig's address for secure.test, but the SNI names another allowed host
        tls(mapped, "other.test") + "; "
        # a bare address (the client side's own) that is not secure.test's
        + tls(net.host_addr, "secure.test") + "; "
        # plain HTTP: a Host of an allowed name sent to that other address
        + f"curl -sS --noproxy '*' -H 'Host: secure.test' http://{net.host_addr}/hello.txt; echo curl_rc=$?; "
        # control: the real SNI to brig's address for it goes through
        + tls(mapped, "secure.test"))
    r, net_ev, _ = audited(brig, script, *rules(net, "--allow-host", "other.test"))
    lines = r.stdout.splitlines()
    assert lines[0].startswith("FAILED") and lines[1].startswith("FAILED"), r
    # curl gets brig's 403, whose body says why
    assert f"refused: {net.host_addr} is not an address of secure.test (the HTTP Host names it)" in r.stdout, r
    assert r.stdout.rstrip().endswith("TLS " + HELLO.rstrip()), r
    assert [line.split()[0] for line in net.seen(mark)] == ["https"], "only the control may arrive"
    reasons = [e["reason"] for e in net_ev if e["decision"] == "deny"]
    assert any("its TLS SNI names other.test" in x for x in reasons), reasons
    assert any(f"{net.host_addr} is not an address of secure.test" in x for x in reasons), reasons


def test_bare_address_without_a_name_needs_a_cidr_rule(ws, net):
    brig = ws
    mark = net.mark()
    base = ["--allow-host", "secure.test", "--resolve", f"secure.test:{net.addr}"]
    r, net_ev, _ = audited(brig, raw(net.addr, ECHO), *base)
    assert r.stdout.startswith("FAILED"), r
    assert net.seen(mark) == []
    assert any("bare address" in e.get("reason", "") for e in net_ev if e["decision"] == "deny"), net_ev
    # control: a CIDR rule for that address lets the same client through
    r, net_ev, _ = audited(brig, raw(net.addr, ECHO), *base, "--allow-cidr", f"{net.addr}/32")
    assert r.stdout == "GOT PING\n", r
    assert [line.split()[0] for line in net.seen(mark)] == ["echo"]


def test_direct_connection_to_the_redirect_port_is_refused(ws, net):
    brig = ws
    r, net_ev, _ = audited(brig, raw("127.0.0.1", 15001, "GET"), *rules(net))
    assert r.stdout.startswith("FAILED"), r
    assert any("no original destination" in e.get("reason", "") for e in net_ev), net_ev


def test_metadata_and_internal_addresses_stay_closed(ws, net):
    """brig inside the upstreams' namespace, where 169.254.169.254 and
    10.0.0.1 are local and the upstreams listen: only brig's judgement
    stands between a client that ignores the proxy and them."""
    brig = ws
    mark = net.mark()
    script = ("curl -sS --noproxy '*' -m 10 http://169.254.169.254/latest/meta-data/; echo rc=$?; "
              "curl -sS --noproxy '*' -m 10 -H 'Host: secure.test' http://10.0.0.1/hello.txt; echo rc=$?; "
              + raw("169.254.169.254", ECHO) + "; " + raw("10.0.0.1", ECHO) + "; "
              + raw("meta.test", ECHO))
    r = run_inside(brig, net, script, *rules(net, "--allow-host", f"meta.test:{ECHO}",
                                             "--resolve", "meta.test:169.254.169.254"))
    assert HELLO not in r.stdout and "GOT" not in r.stdout, r
    assert r.stdout.count("FAILED") == 3, r
    assert net.seen(mark) == [], "a metadata or internal address was reached"


# ---- where the host can't: fallback, or refusal when filtered was asked for ----

def test_without_nftables_falls_back_to_proxy_and_says_so(mode, scratch, hooks_bindir):
    b = Brig(hooks_bindir, mode, scratch)
    no_nft = {"BRIG_TEST_NO_NFTABLES": "1"}
    script = "echo proxy=$HTTP_PROXY; cat /proc/net/nf_conntrack 2>/dev/null | head -1; echo done"
    r = b.run("run", "--allow-host", "example.test", "--", "sh", "-c", script, env=no_nft, report=True)
    assert r.returncode == 0 and "proxy=http://127.0.0.1:3128" in r.stdout, r
    assert r.report["controls"]["network"] == "proxy", r.report
    assert "nftables" in r.report["controls"]["network_fallback"], r.report
    assert any("filtered mode unavailable" in d for d in r.report["degraded"]), r.report
    # asked for explicitly: refuse to run, name the missing control
    r = b.run("run", "--net", "filtered", "--allow-host", "example.test", "--", "touch", "ran", env=no_nft)
    assert r.returncode == 125 and "nftables" in r.stderr, r
    assert not (b.workspace / "ran").exists()
    # the same binary without the hook: filtered
    r = b.run("run", "--allow-host", "example.test", "--", "true", report=True)
    assert r.report["controls"]["network"] == "filtered", r.report


def test_a_setup_failure_is_named_whatever_the_supervisor_sent_meanwhile(mode, scratch, hooks_bindir):
    """The child fails its network step (filtered mode asked for, no
    nftables) after the supervisor has sent it its v1 cgroups to join
    (root here; cgroup.c), and the supervisor reads the child's error only
    once the child has ended (paused there, a hook). A unix socket closed
    with a message unread resets its peer: the supervisor's read got
    ECONNRESET instead of the error, and the run said "pid 1 ended
    unexpectedly (status 125): Protocol error" (the clean-clone CI met it)
    instead of naming nftables. Rootless here sends no groups: the same
    pause, the same answer."""
    b = Brig(hooks_bindir, mode, scratch)
    env = {"BRIG_TEST_NO_NFTABLES": "1", "BRIG_TEST_PAUSE_AT": "cgroups-sent"}
    p = subprocess.Popen(b.cmd("run", "--net", "filtered", "--allow-host", "example.test", "--", "touch", "ran"),
                         cwd=str(b.workspace), env=b.env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        said = []  # the rootless run's warnings come first
        while not (m := re.search(r"paused at cgroups-sent \(pid (\d+)\)", said[-1] if said else "")):
            said.append(p.stderr.readline())
            assert said[-1], (said, p.poll())
        sup = int(m.group(1))
        # stopped indeed: it says so just before it stops, and a SIGCONT
        # sent in between would leave it stopped for good
        assert wait_until(lambda: proc_state(sup) == "T", 10), proc_state(sup)
        kids = pathlib.Path(f"/proc/{sup}/task/{sup}/children").read_text().split()
        assert kids, "no sandbox child"
        # the child has sent its error and ended, the groups' message unread (or taken)
        assert wait_until(lambda: all(proc_state(k) in ("Z", None) for k in kids), 10), \
            [proc_state(k) for k in kids]
        os.kill(sup, signal.SIGCONT)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 125 and "nftables" in err and "unexpectedly" not in err, (p.returncode, err)
    assert not (b.workspace / "ran").exists()


def proc_state(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_production_build_ignores_the_nftables_hook(brig):
    r = brig.run("run", "--allow-host", "example.test", "--", "true", env={"BRIG_TEST_NO_NFTABLES": "1"},
                 report=True)
    assert r.report["controls"]["network"] == "filtered", r.report


def test_a_dns_flood_is_counted_but_cannot_fill_the_audit_log(ws, net):
    brig = ws
    flood = r'''
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
q = bytes.fromhex("000001000001000000000000") + b"\x06denied\x04test\x00\x00\x01\x00\x01"
for i in range(2000):
    s.sendto(q, ("127.0.0.1", 53))
    s.recv(512)
print("sent")
'''
    path = audit_path(brig)
    r = brig.run("run", "--audit", str(path), *rules(net), "--", "sh", "-c", f"python3 -c '{flood}'", report=True)
    assert r.stdout == "sent\n", r
    dns = r.report["controls"]["egress"]["dns"]
    assert dns["refused"] == 2000, dns                      # every question counted
    dns_ev = events(path, "dns")
    left_out = sum(e["count"] for e in events(path, "suppressed") if e.get("net") == "*")
    assert len(dns_ev) + left_out == 2000, (len(dns_ev), left_out)   # and accounted for in the stream
    assert left_out > 0 and len(dns_ev) <= 100 * 30, (len(dns_ev), left_out)
