"""Network attacks, run inside the sandbox with the host's python3.

Every subcommand really tries and prints "key=value" lines; the test on
the host decides. Values: "ok" when a step worked, an errno name, or a
status code. Nothing here talks to anything but the addresses given, and
the tests give only loopback, the sandbox's own proxy, and addresses that
must stay unreachable.

  direct HOST PORT          TCP connect, then GET / (prints the status line)
  proxy-connect HOST PORT   CONNECT HOST:PORT through brig's HTTP proxy
  proxy-get URL             absolute-URI GET through brig's HTTP proxy
  socks HOST PORT           SOCKS5 CONNECT by name or address
  resolve NAME              getaddrinfo
  deny-loop N HOST PORT     N CONNECTs in a row (to a host the proxy refuses)
  confuse PORT              parser confusion: CONNECT, absolute-URI and SOCKS5
                            requests that spell evil.test so a careless parser
                            might judge good.test (userinfo, fragments, case,
                            trailing dots, brackets, NULs, port overflow,
                            header injection, a second request on the connection)
  flood N HOST PORT [READY RELEASE]
                            hold N connections to the proxy open (and, given
                            the two paths, create READY and wait for RELEASE
                            to exist), close half, then CONNECT HOST:PORT
"""
import errno
import socket
import struct
import sys

PROXY = ("127.0.0.1", 3128)
SOCKS = ("127.0.0.1", 1080)


def out(key, value):
    print(f"{key}={value}", flush=True)


def err(e):
    if isinstance(e, socket.timeout):
        return "ETIMEDOUT"
    if isinstance(e, socket.gaierror):
        return f"EAI{e.errno}"
    return errno.errorcode.get(e.errno, f"E{e.errno}") if getattr(e, "errno", None) else type(e).__name__


def head(s):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        d = s.recv(4096)
        if not d:
            break
        data += d
    return data


def status_of(data):
    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split()
    return parts[1] if len(parts) > 1 and parts[0].startswith("HTTP/") else "none"


def bracket(host):
    return f"[{host}]" if ":" in host else host


def direct(host, port):
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
    except OSError as e:
        out("direct", err(e))
        return
    out("direct", "ok")
    try:
        s.sendall(f"GET / HTTP/1.0\r\nHost: {bracket(host)}\r\n\r\n".encode())
        data = head(s)
        out("direct_status", status_of(data))
        out("direct_bytes", len(data))
    except OSError as e:
        out("direct_status", err(e))


def proxy_connect(host, port):
    try:
        s = socket.create_connection(PROXY, timeout=10)
        t = f"{bracket(host)}:{port}"
        s.sendall(f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n".encode())
        data = head(s)
        out("connect_status", status_of(data))
        if status_of(data) == "200":
            s.sendall(f"GET / HTTP/1.0\r\nHost: {t}\r\n\r\n".encode())
            out("tunnel_status", status_of(head(s)))
    except OSError as e:
        out("connect_status", err(e))


def proxy_get(url):
    try:
        s = socket.create_connection(PROXY, timeout=10)
        host = url.split("/")[2]
        s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        out("get_status", status_of(head(s)))
    except OSError as e:
        out("get_status", err(e))


def socks(host, port):
    try:
        s = socket.create_connection(SOCKS, timeout=10)
        s.sendall(b"\x05\x01\x00")
        if s.recv(2) != b"\x05\x00":
            out("socks_reply", "badauth")
            return
        h = host.encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", int(port)))
        rep = s.recv(10)
        out("socks_reply", rep[1] if len(rep) > 1 else "short")
    except OSError as e:
        out("socks_reply", err(e))


def resolve(name):
    try:
        addrs = sorted({a[4][0] for a in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)})
        out("resolve", ",".join(addrs))
    except OSError as e:
        out("resolve", err(e))


def flood(n, host, port, ready=None, release=None):
    held = []
    first_error = "none"
    for _ in range(int(n)):
        try:
            s = socket.socket()
            s.settimeout(5)
            s.connect(PROXY)
            held.append(s)
        except OSError as e:
            first_error = err(e)
            s.close()
            break
    out("flood_opened", len(held))
    out("flood_stopped_by", first_error)
    if ready:
        import os
        import time
        open(ready, "w").close()
        for _ in range(600):
            if os.path.exists(release):
                break
            time.sleep(0.1)
    # Half the flood goes away; the proxy must serve a new client again.
    for s in held[: len(held) // 2]:
        s.close()
    proxy_connect(host, port)


def deny_loop(n, host, port):
    done = 0
    for _ in range(int(n)):
        try:
            s = socket.create_connection(PROXY, timeout=10)
            s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\n\r\n".encode())
            s.recv(4096)
            s.close()
            done += 1
        except OSError:
            pass
    out("attempts", done)


def raw(req, follow=False):
    """Send REQ to the HTTP proxy; the first status line (and, through an
    opened tunnel, the first status line of a GET)."""
    try:
        s = socket.create_connection(PROXY, timeout=10)
        s.sendall(req)
        data = head(s)
        st = status_of(data)
        if st == "200" and follow:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            st += "+" + status_of(head(s))
        return st
    except OSError as e:
        return err(e)


def confuse(port):
    p = int(port)
    auths = [f"evil.test:{p}", f"good.test@evil.test:{p}", f"good.test:{p}@evil.test:{p}", f"EVIL.TEST:{p}",
             f"evil.test.:{p}", f"evil.test\\good.test:{p}", f"evil.test;good.test:{p}", f"evil.test%00good.test:{p}",
             f"evil.test/good.test:{p}", f"[evil.test]:{p}", f"evil.test:{p}#good.test:{p}", f"evil.test:{p + 65536}",
             f"good.test:{p} evil.test:{p}", f"evil.test\tgood.test:{p}", f"good.test:{p}\r\nHost: evil.test:{p}",
             f"evil.test\x00good.test:{p}"]
    for i, a in enumerate(auths):
        out(f"connect_{i}", raw(f"CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n".encode(errors="replace"), True))
    urls = [f"http://evil.test:{p}/", f"http://good.test@evil.test:{p}/", f"http://good.test:{p}@evil.test:{p}/",
            f"http://evil.test:{p}\\@good.test:{p}/", f"http://evil.test:{p}#@good.test:{p}/",
            f"http://evil.test:{p}?@good.test:{p}/", f"http://EVIL.test:{p}/", f"http://evil.test.:{p}/",
            f"http://[evil.test]:{p}/", f"HTTP://evil.test:{p}/", f"http://evil.test:{p + 65536}/"]
    for i, u in enumerate(urls):
        out(f"get_{i}", raw(f"GET {u} HTTP/1.1\r\nHost: good.test:{p}\r\nConnection: close\r\n\r\n".encode()))
    # Two requests in one write: the second must be judged on its own.
    try:
        s = socket.create_connection(PROXY, timeout=10)
        s.sendall(f"GET http://good.test:{p}/ HTTP/1.1\r\nHost: good.test:{p}\r\n\r\n"
                  f"GET http://evil.test:{p}/ HTTP/1.1\r\nHost: evil.test:{p}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        codes = [l.split()[1].decode() for l in data.split(b"\r\n") if l.startswith(b"HTTP/1.") and len(l.split()) > 1]
        out("pipelined", "+".join(codes))
    except OSError as e:
        out("pipelined", err(e))
    for i, h in enumerate(["evil.test", "good.test\x00evil.test", "EVIL.TEST", "evil.test.", "good.test"]):
        try:
            s = socket.create_connection(SOCKS, timeout=10)
            s.sendall(b"\x05\x01\x00")
            s.recv(2)
            hb = h.encode()
            s.sendall(b"\x05\x01\x00\x03" + bytes([len(hb)]) + hb + struct.pack(">H", p))
            rep = s.recv(10)
            out(f"socks_{i}", rep[1] if len(rep) > 1 else "short")
        except OSError as e:
            out(f"socks_{i}", err(e))


def main(argv):
    cmd, args = argv[1], argv[2:]
    {"direct": direct, "proxy-connect": proxy_connect, "proxy-get": proxy_get, "socks": socks,
     "resolve": resolve, "flood": flood, "deny-loop": deny_loop,
     "confuse": confuse}[cmd](*args)


if __name__ == "__main__":
    main(sys.argv)
