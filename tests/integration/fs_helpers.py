"""Helpers for the filesystem and secrets attack tests: run
tests/escape/probe_fs inside the sandbox and read its result lines."""
import shlex
import subprocess
import uuid

# What a write to a read-only place may fail with: EROFS from the mount,
# EACCES/EPERM when the permission check comes first (the sandbox user does
# not own the file). Read-only mounts are proven separately with statfs.
WRITE_REFUSED = {"EROFS", "EACCES", "EPERM"}

def marker(tag="m"):
    return f"BRIG-{tag}-{uuid.uuid4().hex}"


def run(brig, *args, **kw):
    return brig.run(*args, **kw)


def sh(brig, script, *brig_args, **kw):
    return run(brig, "run", *brig_args, "--", "sh", "-c", script, **kw)


def run_cmd(cmd, **kw):
    """subprocess.run for a hand-built command line."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def probe_script(brig, lines):
    probe = brig.program("probe_fs")
    return "\n".join(shlex.join([probe, *map(str, l)]) for l in lines)


def parse(stdout, lines, context=""):
    out = {}
    for line in stdout.splitlines():
        head, sep, tail = line.partition(": ")
        if not sep:
            continue
        status, _, detail = tail.partition(" ")
        if status in ("ok", "fail"):
            out[head] = (status == "ok", detail)
    for l in lines:
        key = f"{l[0]} {l[1]}"
        assert key in out, f"probe_fs gave no result for {key!r}: {context or stdout!r}"
    return out


def probe_run(brig, lines, *brig_args, **kw):
    """Run probe_fs invocations inside; returns (Result, {key: (ok, detail)}).

    `lines` are argument lists for probe_fs; the key of a result is
    "OP ARG" (the first two words), as printed by probe_fs.
    """
    probe = brig.program("probe_fs")
    res = sh(brig, probe_script(brig, lines), "--ro-bind", probe, *brig_args, **kw)
    return res, parse(res.stdout, lines, repr(res))


def assert_refused(out, key, allowed=WRITE_REFUSED):
    ok, detail = out[key]
    assert not ok, f"ATTACK WORKED: {key}: ok {detail}"
    err = detail.split()[0]
    assert err in allowed, f"{key}: refused with {err}, expected one of {sorted(allowed)}"


def assert_worked(out, key):
    ok, detail = out[key]
    assert ok, f"{key} should work inside the sandbox but failed: {detail}"
    return detail


def field(detail, name):
    for w in detail.split():
        if w.startswith(name + "="):
            return w[len(name) + 1:]
    raise AssertionError(f"no {name}= in {detail!r}")
