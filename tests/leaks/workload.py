"""The representative sandbox's workload, run inside `brig run` by
tests/leaks/run: everything that makes the supervisor allocate — the
egress proxy (plain-HTTP forwarding with keep-alive, a CONNECT tunnel,
SOCKS5 by name, a refused name), seccomp refusals that reach the audit
stream, a few child processes and some output. Exits 0 when every
answer is the one expected; says which one was not otherwise.

    python3 workload.py PORT [filtered]   (PORT: the upstream on the host)

With "filtered" (brig run --net filtered) it also connects the way a
program that ignores the proxy settings would: a name through the
sandbox's DNS stub, a direct TCP connection (the kernel hands it to brig),
and a refused name (NXDOMAIN)."""
import ctypes
import http.client
import os
import socket
import struct
import subprocess
import sys

PORT = int(sys.argv[1])
FILTERED = len(sys.argv) > 2 and sys.argv[2] == "filtered"
HOST = "test.example"
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


# Plain-HTTP forwarding, two requests on one kept-alive connection.
c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
for i in range(2):
    c.request("GET", f"http://{HOST}:{PORT}/keepalive/{i}")
    r = c.getresponse()
    check(f"forward #{i}", r.status == 200 and r.read().startswith(b"hello"))
c.close()

# A CONNECT tunnel (plain HTTP inside, no TLS needed for the proxy's work).
t = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
t.set_tunnel(HOST, PORT)
t.request("GET", "/tunnel")
r = t.getresponse()
check("CONNECT", r.status == 200 and r.read().startswith(b"hello"))
t.close()

# SOCKS5 CONNECT by name, then one HTTP/1.0 request through it.
s = socket.create_connection(("127.0.0.1", 1080), timeout=20)
s.sendall(b"\x05\x01\x00")
check("socks greeting", s.recv(2) == b"\x05\x00")
name = HOST.encode()
s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack(">H", PORT))
check("socks connect", s.recv(10)[:2] == b"\x05\x00")
s.sendall(b"GET /socks HTTP/1.0\r\nHost: test.example\r\n\r\n")
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
check("socks response", b"hello" in data)
s.close()

# A name the policy does not allow: refused by the proxy, and audited.
c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
c.request("GET", "http://denied.example/")
check("denied name", c.getresponse().status == 403)
c.close()

if FILTERED:
    # No proxy: the DNS stub answers, the kernel redirects, brig judges.
    c = http.client.HTTPConnection(HOST, PORT, timeout=20)
    c.request("GET", "/direct")
    r = c.getresponse()
    check("direct through the redirect", r.status == 200 and r.read().startswith(b"hello"))
    c.close()
    try:
        socket.getaddrinfo("denied.example", 80)
        check("refused name gets no address", False)
    except socket.gaierror:
        pass

# Calls the seccomp filter refuses (audited), and a few processes.
libc = ctypes.CDLL(None, use_errno=True)
check("mount refused", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) != 0)
check("unshare refused", libc.unshare(0x10000000) != 0)  # CLONE_NEWUSER
for i in range(4):
    check(f"child {i}", subprocess.run(["/bin/true"]).returncode == 0)
sys.stdout.write("x" * 65536 + "\n")

if failures:
    print("workload: unexpected answers: " + ", ".join(failures), file=sys.stderr)
    sys.exit(1)
print("workload: ok", file=sys.stderr)
