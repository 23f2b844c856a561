"""File operations on a persistent sandbox as the sandbox sees them (brig cp,
brig files, brig_sandbox_file; docs/persistent.md): each runs inside, forked
by the sandbox's pid 1 as an exec is and as confined. The sandbox is the
attacker: what it plants in its workspace (links out of it, '..', a path it
swaps during the call, a FIFO, a huge file, a name with control characters)
must never make brig touch a host file the sandbox could not. Every check
is on the host side. Root and rootless."""
import io
import json
import os
import tarfile
import threading

from persist_helpers import sandboxes  # noqa: F401 (fixture)
from test_escape import attack
from test_persist_attacks import OTHER_UID, _outside, _tree


def _fs(sandboxes, name, *args, **kw):
    return sandboxes.brig_cmd("files", name, *args, **kw)


def _cp(sandboxes, *args, **kw):
    return sandboxes.brig_cmd("cp", *args, **kw)


def test_round_trips(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create()
    data = bytes(range(256)) * 1000
    r = _cp(sandboxes, "--mode", "0640", "-", f"{name}:{ws}/f.bin", input=data, text=False)
    assert r.returncode == 0, r
    assert (ws / "f.bin").read_bytes() == data  # the host sees the sandbox's write
    assert (ws / "f.bin").stat().st_mode & 0o777 == 0o640
    assert not [p for p in os.listdir(ws) if p.startswith(".brig-write")]
    r = _cp(sandboxes, f"{name}:{ws}/f.bin", "-", text=False)
    assert r.returncode == 0 and r.stdout == data, r
    host_copy = brig.reports / "copy.bin"  # a directory the test user may write
    r = _cp(sandboxes, f"{name}:{ws}/f.bin", str(host_copy))
    assert r.returncode == 0 and host_copy.read_bytes() == data, r
    assert _fs(sandboxes, name, "mkdir", f"{ws}/d").returncode == 0
    assert (ws / "d").is_dir()
    st = json.loads(_fs(sandboxes, name, "stat", f"{ws}/f.bin").stdout)
    assert st["type"] == "file" and st["size"] == len(data) and st["mode"] == 0o640
    r = _fs(sandboxes, name, "list", str(ws))
    entries = {e["name"]: e["type"] for e in json.loads(r.stdout)}
    assert entries == {"f.bin": "file", "d": "dir"}, r
    r = _fs(sandboxes, name, "tar-out", str(ws), text=False)
    assert r.returncode == 0, r
    names = sorted(m.name for m in tarfile.open(fileobj=io.BytesIO(r.stdout)).getmembers())
    assert names == [".", "./d", "./f.bin"]
    r = _fs(sandboxes, name, "tar-in", f"{ws}/d", input=r.stdout, text=False)
    assert r.returncode == 0, r
    assert (ws / "d" / "f.bin").read_bytes() == data
    assert _fs(sandboxes, name, "rm", f"{ws}/d/f.bin").returncode == 0
    assert _fs(sandboxes, name, "rm", f"{ws}/d/d").returncode == 0
    assert _fs(sandboxes, name, "rm", f"{ws}/d").returncode == 0
    assert not (ws / "d").exists()
    # the sandbox's own errno, said
    r = _cp(sandboxes, f"{name}:{ws}/nope", "-")
    assert r.returncode == 1 and "No such file" in r.stderr, r
    r = _cp(sandboxes, f"{name}:{ws}", "-")
    assert r.returncode == 1 and "Is a directory" in r.stderr, r
    r = _fs(sandboxes, name, "rm", "/usr")
    assert r.returncode == 1 and ("Read-only" in r.stderr or "not empty" in r.stderr), r


@attack("cp-host-path-planted", "brig cp's HOST path in the workspace, where the sandbox planted what the host side "
        "then meets: a symlink (the file itself, or a directory on the way) to a file of the user's outside it, "
        "written through (NAME:/PATH HOST) and read through into the sandbox (HOST NAME:/PATH); a FIFO at either; "
        "and a HOST path in brig's own state root (its seccomp filter cache, a sandbox's policy.json)",
        "the host path opened as brig opens its reports (output_open, input_open): openat2 RESOLVE_NO_SYMLINKS "
        "over every component, nothing in the state root, a regular file (one link for a write), O_NONBLOCK; "
        "refused with exit 125 naming the symlink, nothing written or read")
def test_cp_host_path_follows_nothing_the_sandbox_planted(brig, sandboxes, scratch):
    out = _outside(brig, scratch)
    before = _tree(out)
    ws = brig.workspace
    name, _ = sandboxes.create()
    r = sandboxes.sh(name, f"echo evil > /tmp/x && ln -s {out}/victim to-file && ln -s {out} to-dir && "
                           f"ln -s {out}/victim from-file && mkfifo fifo")
    assert r.returncode == 0, r
    for dst in (f"{ws}/to-file", f"{ws}/to-dir/victim"):
        r = _cp(sandboxes, f"{name}:/tmp/x", dst, timeout=30)
        assert r.returncode == 125 and "is a symlink" in r.stderr, r
    assert _tree(out) == before, "brig cp wrote through a symlink the sandbox planted"
    for src in (f"{ws}/from-file", f"{ws}/to-dir/victim"):
        r = _cp(sandboxes, src, f"{name}:/tmp/stolen", timeout=30)
        assert r.returncode == 125 and "is a symlink" in r.stderr, r
    r = sandboxes.sh(name, "cat /tmp/stolen")
    assert r.returncode != 0 and "original" not in r.stdout, r
    r = _cp(sandboxes, f"{name}:/tmp/x", f"{ws}/fifo", timeout=30)  # no reader: never hangs
    assert r.returncode == 125 and "not a regular file" in r.stderr, r
    r = _cp(sandboxes, f"{ws}/fifo", f"{name}:/tmp/f", timeout=30)  # no writer: never hangs
    assert r.returncode == 125 and "not a regular file" in r.stderr, r
    # brig's own state: refused by where it is, whatever the path's spelling
    cache = sandboxes.root / "cache"
    state = sandboxes.root / name
    assert cache.is_dir() and state.is_dir()
    policy = (state / "policy.json").read_bytes()
    for dst in (cache / "seccomp-planted.bpf", state / "policy.json"):
        r = _cp(sandboxes, f"{name}:/tmp/x", str(dst), timeout=30)
        assert r.returncode == 125 and "brig's state directory" in r.stderr, r
    assert not (cache / "seccomp-planted.bpf").exists()
    assert (state / "policy.json").read_bytes() == policy
    r = _cp(sandboxes, str(state / "policy.json"), f"{name}:/tmp/policy", timeout=30)
    assert r.returncode == 125 and "brig's state directory" in r.stderr, r
    # a plain host path still works both ways
    plain = brig.reports / "plain.txt"
    assert _cp(sandboxes, f"{name}:/tmp/x", str(plain)).returncode == 0 and plain.read_text() == "evil\n"
    assert _cp(sandboxes, str(plain), f"{name}:/tmp/back").returncode == 0
    assert sandboxes.sh(name, "cat /tmp/back").stdout == "evil\n"


@attack("fileops-symlink-out", "links planted in the workspace (same path on the host) to a host file and directory, via /proc/1/root, and '..' out of it: read, stat, write, list, tar-out, mkdir, rm, tar-in through each",
        "fileop_main: the operation runs inside, confined as the sandbox; no host-side resolution")
def test_planted_links_and_dotdot_reach_no_host_file(brig, sandboxes, scratch):
    out = _outside(brig, scratch)
    before = _tree(out)
    ws = brig.workspace
    name, _ = sandboxes.create()
    # The workspace is at the same path inside and out: a brig resolving
    # these on the host would follow them to the victim.
    r = sandboxes.sh(name, f"ln -s {out}/victim lf && ln -s {out} ld && ln -s /proc/1/root/{out} lp && "
                           f"mkdir -p sub")
    assert r.returncode == 0, r
    for path in (f"{ws}/lf", f"{ws}/ld/victim", f"{ws}/lp/victim", f"{ws}/sub/../../outside/victim",
                 f"{out}/victim"):
        r = _cp(sandboxes, f"{name}:{path}", "-")
        assert r.returncode != 0 and "original" not in r.stdout, (path, r)
        r = _fs(sandboxes, name, "stat", path)  # the link itself, never what it names
        assert (r.returncode == 0 and json.loads(r.stdout)["type"] == "symlink") if path == f"{ws}/lf" \
            else r.returncode != 0, (path, r)
        r = _cp(sandboxes, "-", f"{name}:{path}", input="pwned\n")
        if path == f"{ws}/lf":
            # replaced the link inside the workspace, never wrote through it
            assert r.returncode == 0, r
            assert not (ws / "lf").is_symlink() and (ws / "lf").read_text() == "pwned\n"
        else:
            assert r.returncode != 0, (path, r)
    for path in (f"{ws}/ld", f"{ws}/lp", str(out)):
        for op in ("list", "tar-out"):
            r = _fs(sandboxes, name, op, path, text=False)
            assert r.returncode != 0 and b"victim" not in r.stdout, (op, path, r)
        assert _fs(sandboxes, name, "mkdir", f"{path}/new").returncode != 0
        assert _fs(sandboxes, name, "rm", f"{path}/victim").returncode != 0
        tar = io.BytesIO()
        with tarfile.open(fileobj=tar, mode="w") as t:
            info = tarfile.TarInfo("dropped")
            info.size = 6
            t.addfile(info, io.BytesIO(b"pwned\n"))
        assert _fs(sandboxes, name, "tar-in", path, input=tar.getvalue(), text=False).returncode != 0
    assert _tree(out) == before


@attack("fileops-path-swap", "a loop inside swaps a directory and a link to a host directory while brig cp reads and writes below it",
        "fileop_main: resolved inside by the sandbox's own kernel view; a swap reaches only what it could")
def test_path_swapped_during_the_call(brig, sandboxes, scratch):
    out = _outside(brig, scratch)
    before = _tree(out)
    ws = brig.workspace
    name, _ = sandboxes.create()
    # Inside, a loop swaps sw between a real directory and a link to the
    # victim's directory while the host reads and writes sw/victim.
    swapper = sandboxes.popen_exec(name, "--", "sh", "-c",
                                   f"cd {ws} && mkdir -p real && echo inside > real/victim && "
                                   f"while :; do ln -sfn {out} sw.new; mv -T sw.new sw; "
                                   f"rm -f sw; ln -sfn real sw.new; mv -T sw.new sw; done")
    try:
        outputs = []

        def hammer():
            for _ in range(15):
                r = _cp(sandboxes, f"{name}:{ws}/sw/victim", "-")
                outputs.append(r.stdout)
                _cp(sandboxes, "-", f"{name}:{ws}/sw/victim", input="pwned\n")
        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        swapper.kill()
        swapper.wait()
    assert all("original" not in o for o in outputs), outputs
    assert any(o for o in outputs), "the swap left no read to succeed: the test tested nothing"
    assert _tree(out) == before


@attack("fileops-fifo-device", "brig cp out of a FIFO, /dev/zero, /dev/tty, /proc/self/fd/0",
        "op_read: O_PATH then fstat; only a regular file is opened (through its own inode), a FIFO never")
def test_fifo_and_devices_do_not_hang(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create()
    assert sandboxes.sh(name, f"mkfifo {ws}/fifo").returncode == 0
    for path in (f"{ws}/fifo", "/dev/zero", "/dev/tty", "/proc/self/fd/0"):
        r = _cp(sandboxes, f"{name}:{path}", "-", timeout=20)  # a hang fails as TimeoutExpired
        assert r.returncode == 1 and r.stdout == "", (path, r)
    r = _cp(sandboxes, f"{name}:{ws}/fifo", "-", timeout=20)
    assert "not a regular file" in r.stderr, r
    assert (ws / "fifo").is_fifo()


@attack("fileops-huge-file", "a sparse 300M file read out, a 2M one and a 2M write past --max-size 1M",
        "fileops.c: read and write capped (64M, --max-size): the size checked first and counted while copied")
def test_huge_files_are_capped(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create()
    assert sandboxes.sh(name, f"truncate -s 300M {ws}/huge && truncate -s 2M {ws}/mid").returncode == 0
    r = _cp(sandboxes, f"{name}:{ws}/huge", "-", text=False)
    assert r.returncode == 1 and r.stdout == b"" and b"--max-size" in r.stderr, r
    r = _cp(sandboxes, "--max-size", "1M", f"{name}:{ws}/mid", "-", text=False)
    assert r.returncode == 1 and r.stdout == b"", r
    r = _cp(sandboxes, "--max-size", "1M", "-", f"{name}:{ws}/written", input=b"x" * (2 << 20), text=False)
    assert r.returncode == 1 and b"--max-size" in r.stderr, r
    assert not (ws / "written").exists()
    assert sorted(os.listdir(ws)) == ["huge", "mid"]  # no temporary file left


@attack("fileops-control-chars", "a write to a name with an OSC 52 sequence and a newline; such a name and a non-UTF-8 one planted and listed",
        "path_problem: a path with a control character is refused (exit 125); names listed as escaped JSON")
def test_control_characters_in_names(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create()
    evil = "a\x1b]52;c;cHduZWQ=\x07\nb"
    r = _cp(sandboxes, "-", f"{name}:{ws}/{evil}", input="x")
    assert r.returncode == 125 and "control character" in r.stderr, r
    assert os.listdir(ws) == []
    # planted inside: listed as JSON, the bytes escaped, never raw
    r = sandboxes.sh(name, f"cd {ws} && printf x > \"$(printf 'a\\033]52;c;cHduZWQ=\\007b')\" && "
                           f"printf x > \"$(printf 'bad\\377')\"")
    assert r.returncode == 0, r
    r = _fs(sandboxes, name, "list", str(ws), text=False)
    assert r.returncode == 0, r
    assert all(c >= 0x20 and c < 0x7f for c in r.stdout.rstrip(b"\n")), r.stdout
    entries = json.loads(r.stdout)
    got = {e["name"] or bytes.fromhex(e["name_hex"]).decode("latin-1") for e in entries}
    assert got == {"a\x1b]52;c;cHduZWQ=\x07b", "bad\xff"}, entries


@attack("fileops-as-sandbox-user", "read another host user's 0600 file in the workspace, write into /etc",
        "command_exec: the operation runs as the sandbox user with its Landlock and seccomp, not as brig")
def test_operations_have_only_the_sandbox_users_rights(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create()
    # Another host user's 0600 file in the workspace: brig (root when the
    # test runs as root) could read it; the sandbox user cannot.
    secret = ws / "otheruser"
    secret.write_text("secret\n")
    os.chown(secret, OTHER_UID, OTHER_UID)
    secret.chmod(0o600)
    r = _cp(sandboxes, f"{name}:{secret}", "-")
    assert r.returncode == 1 and "secret" not in r.stdout and "Permission denied" in r.stderr, r
    r = _cp(sandboxes, "-", f"{name}:/etc/brig-fileops-pwned", input="x")
    assert r.returncode == 1, r
    assert not os.path.exists("/etc/brig-fileops-pwned")


@attack("fileops-tar-unbounded", "tar-out of a directory the sandbox filled with an 8M (sparse) file, and a 3M "
        "tar stream unpacked by tar-in, each with --max-size 1M: a tar stream, in or out, was as long as the "
        "sandbox or the caller made it",
        "op_tar: the stream passes through brig's non-dumpable confined child, which counts it and kills tar past "
        "the cap (EFBIG naming --max-size; default 1G)")
def test_tar_streams_are_capped(brig, sandboxes):
    ws = brig.workspace
    name, _ = sandboxes.create()
    assert sandboxes.sh(name, f"mkdir {ws}/big && truncate -s 8M {ws}/big/sparse").returncode == 0
    r = _fs(sandboxes, name, "--max-size", "1M", "tar-out", f"{ws}/big", text=False)
    assert r.returncode == 1 and b"--max-size" in r.stderr and b"cap of 1048576" in r.stderr, r.stderr
    assert len(r.stdout) <= 1 << 20, len(r.stdout)  # the host got no byte past the cap
    assert _fs(sandboxes, name, "tar-out", f"{ws}/big", text=False).returncode == 0  # 1G by default
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("in.bin")
        info.size = 3 << 20
        t.addfile(info, io.BytesIO(b"y" * info.size))
    assert sandboxes.sh(name, f"mkdir {ws}/into").returncode == 0
    r = _fs(sandboxes, name, "--max-size", "1M", "tar-in", f"{ws}/into", input=buf.getvalue(), text=False)
    assert r.returncode == 1 and b"--max-size" in r.stderr, r.stderr
    got = ws / "into" / "in.bin"
    assert not got.exists() or got.stat().st_size <= 1 << 20, got.stat().st_size  # cut off on the host side
    # --max-size is no other operation's
    r = _fs(sandboxes, name, "--max-size", "1M", "list", str(ws))
    assert r.returncode == 125 and "--max-size bounds tar-out and tar-in" in r.stderr, r
