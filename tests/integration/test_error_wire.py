"""An error crossing a process boundary (issue 15): the one wire form
(core/error.h), decoded where it arrives, as root and rootless.

The attack: the sandbox chooses the words of an error brig hands to its
caller. A link it leaves in the workspace names a target holding terminal
control sequences; executing the link fails inside, and the message the
child sends the supervisor quotes that target. The CLI escapes what it
prints, but every other front end (the handle API, brig serve, brig mcp)
passes the message on as it got it. Asserted on the host side: the error
libbrig gives the embedding program holds no control byte, only its \\xNN
text.
"""
import json
import subprocess
import sys

from test_escape import attack

# A front end embedding libbrig (include/brig.h) through ctypes: brig_run
# of ./tool in the workspace, the error it returns as hex.
EMBED = r'''
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
class Err(ctypes.Structure):
    _fields_ = [("exit_code", ctypes.c_int), ("errnum", ctypes.c_int), ("msg", ctypes.c_char_p)]
lib.brig_policy_new.restype = ctypes.c_void_p
p = ctypes.c_void_p(lib.brig_policy_new())
err = ctypes.POINTER(Err)()
assert lib.brig_policy_set_workspace(p, sys.argv[2].encode(), ctypes.byref(err)) == 0
argv = (ctypes.c_char_p * 2)(b"./tool", None)
result = ctypes.create_string_buffer(1 << 16)  # brig_result, larger than it is
r = lib.brig_run(p, argv, result, ctypes.byref(err))
e = err.contents if err else None
print(json.dumps({"r": r, "exit_code": e.exit_code if e else None, "msg": e.msg.hex() if e else ""}))
'''

def sanitizer_env(lib):
    """A libbrig built with ASan (BRIG_BUILD=build-asan) loads into python
    only behind its runtime: preload it (python's own leaks are not brig's)."""
    ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
    asan = [line.split("=>")[1].split()[0] for line in ldd.splitlines() if "libasan" in line and "=>" in line]
    return {"LD_PRELOAD": asan[0], "ASAN_OPTIONS": "detect_leaks=0"} if asan else {}


# C1 controls in UTF-8: U+009B (CSI to xterm: clear the screen) and U+009D
# (OSC: the window title), and a C0 escape the child already turns to '?'.
TARGET_PRINTF = r"/gone/\302\2332J\302\2350;owned\033[31m"


@attack("error-text-controls", "a link left in the workspace whose target holds C1 CSI/OSC sequences is run; the "
        "error quoting the target reaches a front end embedding libbrig",
        "wire_error_decode: control bytes of an error from the other side arrive as \\xNN text")
def test_error_from_the_sandbox_carries_no_control_bytes(brig):
    r = brig.sh(f"ln -s \"$(printf '{TARGET_PRINTF}')\" tool && echo planted")
    assert r.returncode == 0 and r.stdout == "planted\n", r
    lib = brig.bindir / "libbrig.so"
    cp = subprocess.run(brig.prefix() + [sys.executable, "-c", EMBED, str(lib), str(brig.workspace)],
                        cwd=str(brig.workspace), env=brig.env(sanitizer_env(lib)), capture_output=True, timeout=60)
    assert cp.returncode == 0, cp
    out = json.loads(cp.stdout.decode().strip().splitlines()[-1])
    msg = bytes.fromhex(out["msg"])
    assert out["r"] < 0 and out["exit_code"] == 127, out
    assert b"is a link to" in msg, msg  # the sandbox's words did reach the message ...
    assert b"\xc2\x9b" not in msg and b"\xc2\x9d" not in msg, f"ATTACK WORKED: raw C1 controls in {msg!r}"
    assert not [b for b in msg if b < 0x20 and b != 0x0a] and 0x7f not in msg, msg
    assert b"\\xc2\\x9b2J" in msg and b"\\xc2\\x9d0;owned" in msg, msg  # ... as text
