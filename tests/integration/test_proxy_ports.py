"""Attacks on the proxy ports' protocol detection (docs/network.md#proxy-ports):
one destination must get one verdict whichever protocol asks for it and
whichever port it reaches, and the many-connections load a sandbox can
put on the proxy must stay bounded in the supervisor and stall no other
client. Asserted on the host: which server got which request, what brig
recorded. Root and rootless."""
import json

from test_browser import REFUSED, proxy_client, victim, web  # noqa: F401 (fixtures)
from test_escape import attack

# destination -> served through every cell, or refused through every cell
DESTINATIONS = {
    "web.test,web": True,                   # the allowed name
    "WEB.TEST.,web": True,                  # the same name, spelt otherwise
    "127.0.0.1,web": True,                  # the address --allow-cidr names
    "::ffff:127.0.0.1,web": True,           # ... IPv4-mapped: SOCKS5 sends its 16 bytes (refused, before)
    "web.test,victim": False,               # the allowed name on a port its rule does not name
    "victim.test,victim": False,            # a name no rule allows (resolves to loopback)
    "localhost,victim": False,
    "127.0.0.1,victim": False,              # loopback literals, in every spelling
    "127.1,victim": False,
    "0x7f000001,victim": False,
    "127.0.0.1.,victim": False,
    "0.0.0.0,victim": False,                # "this host": reaches the host's loopback
    "::,victim": False,
    "::1,victim": False,
    "::ffff:127.0.0.1,victim": False,
    "169.254.169.254,80": False,            # cloud metadata, by address and by name
    "metadata.google.internal,80": False,
}
CELLS = [(p, port) for p in ("http", "connect", "socks5", "socks4") for port in ("http", "socks")]


@attack("proxy-verdict-by-protocol", "one destination asked for through every protocol on every proxy port "
        "(plain HTTP, CONNECT, SOCKS5 by name and address, SOCKS4 and 4a, to 3128 and 1080), the refused ones in "
        "every spelling of loopback (127.1, 0x7f000001, 0.0.0.0, ::1, ::ffff:127.0.0.1), by name and by "
        "metadata address, an allowed name on another port: a cell where the verdict differs",
        "one judgement after the parsers: the name rules, the address classes, the checked address")
def test_every_protocol_and_port_gives_one_verdict(brig, web, victim):
    # one attempt per cell, each fetching its own path: /m0, /m1, ...
    cells = [(dest, kind, port) for dest in DESTINATIONS for kind, port in CELLS]
    attempts = [f"{kind},{port},{dest},/m{i}" for i, (dest, kind, port) in enumerate(cells)]
    before = len(web.paths)
    r, out, events = proxy_client(brig, web, victim, attempts)

    def verdict(a):
        kind, path = a.split(",")[0], a.rsplit(",", 1)[1]
        return "served" if f"path={path}\n" in out[a] else "refused" if out[a].startswith(REFUSED[kind]) else out[a]

    for dest, served in DESTINATIONS.items():
        got = {f"{c[1]} to {c[2]}": verdict(a) for a, c in zip(attempts, cells) if c[0] == dest}
        assert set(got.values()) == {"served" if served else "refused"}, (dest, got)
    # on the host: the web server saw exactly the served cells, the victim nothing
    want = sorted(a.rsplit(",", 1)[1] for a, cell in zip(attempts, cells) if DESTINATIONS[cell[0]])
    assert sorted(web.paths[before:]) == want
    assert victim.connections == 0, victim.connections
    # brig counted one refusal per refused cell, each destination (however
    # spelt) in every cell of the table; and logged one reason for it
    # whatever asked (the audit stream, rate-limited, holds a part)
    eg = r.report["controls"]["egress"]
    assert eg["denied"] == sum(not s for s in DESTINATIONS.values()) * len(CELLS), eg
    counts = [d["count"] for d in eg["destinations"] if d["decision"] == "deny"]
    assert all(c % len(CELLS) == 0 for c in counts), eg["destinations"]
    reasons = {}
    for e in events:
        if e["decision"] == "deny":
            reasons.setdefault((e.get("host") or e.get("address"), e.get("port")), set()).add(e["reason"])
    assert reasons and all(len(v) == 1 for v in reasons.values()), reasons


# Run inside: N connections to the HTTP proxy port, each sending most of a
# 16 KiB request head and never its end (slowloris), held open; then one
# ordinary request. Prints how many heads were answered at once, and what.
FLOOD = r'''
import json, select, socket, sys, time
n, web = int(sys.argv[1]), int(sys.argv[2])
held = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", 3128 if i % 2 else 1080), timeout=10)
    s.sendall(b"GET http://web.test:%d/slow HTTP/1.1\r\nX: " % web + b"a" * 16000)
    held.append(s)
time.sleep(1)
# meanwhile an ordinary client is served at once
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(f"GET http://web.test:{web}/fast HTTP/1.0\r\nHost: web.test\r\n\r\n".encode())
fast = s.recv(100).decode(errors="replace")
answered = {}
p = select.poll()
for h in held:
    p.register(h, select.POLLIN)
by_fd = {h.fileno(): h for h in held}
while True:  # until no more answers come
    ready = p.poll(1000)
    if not ready:
        break
    for fd, _ in ready:
        p.unregister(fd)
        line = by_fd[fd].recv(200).decode(errors="replace").split("\r\n")[0]
        answered[line] = answered.get(line, 0) + 1
print(json.dumps({"fast": fast, "answered": answered}))
'''


@attack("proxy-head-flood", "thousands of connections to both proxy ports (HTTP on the SOCKS port too), each "
        "sending 16000 bytes of a request head and never its end, held open: pin 16 KiB apiece in the "
        "supervisor, outside the sandbox's memory limit, and stall the proxy for other clients",
        "request heads and first bytes share one 32 MiB budget beyond 1 KiB apiece (a head past it: 503, "
        "logged); the proxy is event-driven, others are served meanwhile")
def test_head_flood_is_bounded_and_stalls_no_one(brig, web, victim):
    (brig.workspace / "flood.py").write_text(FLOOD)
    brig.chown(brig.workspace / "flood.py")
    n = 2600  # 32 MiB holds 2048 heads of 16 KiB
    before = len(web.paths)
    r = brig.run("run", "--net", "proxy", *web.allow(), "--", "python3", "flood.py", str(n), str(web.port),
                 report=True, timeout=120)
    assert r.returncode == 0, r
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["fast"].startswith("HTTP/1.0 200"), out
    assert web.paths[before:] == ["/fast"], web.paths[before:]   # the host served the ordinary one, no head
    busy = out["answered"].get("HTTP/1.1 503 Service Unavailable", 0)
    assert busy >= n - 2048, out   # what the budget holds no more is answered at once
    eg = r.report["controls"]["egress"]
    assert eg["denied"] == busy, eg
    why = {x["what"]: x for x in r.report["refusals"]}
    assert why["localhost:3128"]["why"] == "too many large request heads at once (brig holds at most 32 MiB of " \
        "them)", why


@attack("proxy-smuggle-other-port", "a second request smuggled behind an allowed one on the SOCKS port: an HTTP "
        "request pipelined after an allowed one on a kept connection, after Content-Length with "
        "Transfer-Encoding, HTTP after a SOCKS5 greeting, a SOCKS4 request for the victim after an allowed one",
        "every request on a kept connection is judged from scratch; ambiguous framing is refused; what follows "
        "an allowed SOCKS request is the tunnel's payload, for the allowed server alone")
def test_smuggled_requests_on_the_socks_port_reach_no_one(brig, web, victim):
    w, v = web.port, victim.echo_port
    smuggled = {
        "pipelined": f"GET http://web.test:{w}/s1 HTTP/1.1\r\nHost: web.test:{w}\r\n\r\n"
                     f"GET http://127.0.0.1:{v}/ HTTP/1.1\r\nHost: 127.0.0.1:{v}\r\nConnection: close\r\n\r\n",
        "cl-te": f"GET http://web.test:{w}/s2 HTTP/1.1\r\nHost: web.test:{w}\r\nContent-Length: 0\r\n"
                 f"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nCONNECT 127.0.0.1:{v} HTTP/1.1\r\n\r\n",
        "socks5-then-http": f"\x05\x01\x00GET http://127.0.0.1:{v}/ HTTP/1.0\r\n\r\n",
    }
    s4 = bytes([4, 1]) + w.to_bytes(2, "big") + bytes([127, 0, 0, 1]) + b"u\0"
    s4v = bytes([4, 1]) + v.to_bytes(2, "big") + bytes([127, 0, 0, 1]) + b"u\0"
    attempts = {k: f"raw,socks,{d.encode('latin-1').hex()},web,/" for k, d in smuggled.items()}
    end = b"\r\n\r\n"  # the web server answers the second request's bytes 400 and closes
    attempts["socks4-twice"] = f"raw,socks,{(s4 + s4v + end).hex()},web,/"
    before = len(web.paths)
    r, out, events = proxy_client(brig, web, victim, list(attempts.values()))
    assert victim.connections == 0, (victim.connections, out)    # the host's victim never saw one
    answers = {k: bytes.fromhex(out[a]) for k, a in attempts.items()}
    assert answers["pipelined"].startswith(b"HTTP/1.0 200") and b"HTTP/1.1 403 Forbidden" in answers["pipelined"], \
        answers["pipelined"]
    assert answers["cl-te"].startswith(b"HTTP/1.1 400 "), answers["cl-te"]
    assert answers["socks5-then-http"].startswith(b"\x05\x00\x05"), answers["socks5-then-http"]
    assert answers["socks4-twice"].startswith(b"\x00\x5a"), answers["socks4-twice"]   # the first, granted
    assert web.paths[before:] == ["/s1"], web.paths[before:]


# Run inside: N connections to the SOCKS port held open at once, from
# processes of 2800 each (the sandbox's 4096 descriptors apiece), then M
# straight to HOST:PORT (filtered mode redirects them to the same proxy);
# prints how many of each were made.
MANY = r'''
import os, signal, socket, sys, time
n, m, host, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
per, kids, made = 2800, [], 0
for start in range(0, n, per):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        held = [socket.create_connection(("127.0.0.1", 1080), timeout=10) for _ in range(min(per, n - start))]
        os.write(w, b"%d\n" % len(held))
        time.sleep(60)
        os._exit(0)
    made += int(os.read(r, 32))
    kids.append(pid)
time.sleep(0.5)   # the proxy has accepted them all
direct = [socket.create_connection((host, port), timeout=10) for _ in range(m)]
time.sleep(0.5)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(made, len(direct))
'''


@attack("proxy-connection-cap-silent", "more connections to the proxy at once than it serves (8192): those "
        "past the cap (on a proxy port, or redirected in filtered mode) were accepted and closed with no event, "
        "no count and no line — a client failing with nothing to say why, and a flood that left no trace",
        "each one past the cap is a refusal like any other: counted, logged, in the report and the summary, "
        "suggesting no flag (none lifts brig's own bound)")
def test_connections_past_the_cap_are_refused_and_said(brig, web, victim):
    (brig.workspace / "many.py").write_text(MANY)
    brig.chown(brig.workspace / "many.py")
    n, m = 8250, 20
    r = brig.run("run", "--net", "filtered", "--", "python3", "many.py", str(n), str(m), "203.0.113.5", "443",
                 report=True, timeout=120)
    assert r.returncode == 0, r
    assert r.stdout.split()[-2:] == [str(n), str(m)], r
    eg = r.report["controls"]["egress"]
    assert eg["denied"] == n + m - 8192, eg       # brig's own count: every one past the cap
    cap = "brig serves at most 8192 connections of a sandbox at once"
    why = {x["what"]: x for x in r.report["refusals"]}
    assert why["localhost:1080"]["why"] == cap and why["localhost:1080"]["allow_with"] is None, why
    assert why["203.0.113.5:443"]["why"] == cap and why["203.0.113.5:443"]["allow_with"] is None, why
    assert f"localhost:1080 ({cap})" in r.stderr, r
