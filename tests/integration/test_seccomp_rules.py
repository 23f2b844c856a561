"""User syscall rules with argument conditions: the rule's action where
all conditions hold, the default decision everywhere else. Each case calls
the syscall both ways from inside, so a rule that matched too much or too
little fails the test."""
import pytest

CALL = """
import ctypes, sys
l = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(512)
def call(nr, *args):
    ctypes.set_errno(0)
    r = l.syscall(nr, *args)
    return 0 if r >= 0 else ctypes.get_errno()
"""

UNAME, MOUNT, GETPRIORITY = 63, 165, 140


def run(brig, rule, body):
    return brig.run("run", "--seccomp-rule", rule, "--", "python3", "-c", CALL + body, timeout=30)


def test_equal_condition_splits_the_syscall(brig):
    r = run(brig, "uname(a0==0)=errno:EIO", f"print(call({UNAME}, None), call({UNAME}, buf))")
    assert r.stdout.split() == ["5", "0"], r          # EIO only where a0 == 0; allowed otherwise


def test_masked_condition_and_default_fallback(brig):
    # mount is refused by default (EPERM); the rule gives EIO only when MS_RDONLY (bit 0) is set
    r = run(brig, "mount(a3&0x1==0x1)=errno:EIO",
            f"print(call({MOUNT}, b'x', b'/tmp', b'tmpfs', 1, None), call({MOUNT}, b'x', b'/tmp', b'tmpfs', 0, None))")
    assert r.stdout.split() == ["5", "1"], r


@pytest.mark.parametrize("cond,hits", [("a0<1", ["13", "0"]), ("a0>=1", ["0", "13"]),
                                       ("a0!=0", ["0", "13"]), ("a0<=0", ["13", "0"]),
                                       ("a0>0", ["0", "13"])])
def test_ordering_conditions(brig, cond, hits):
    # getpriority(which=0 PRIO_PROCESS, 0) vs which=1 (PRIO_PGRP): EACCES (13) where the rule holds
    r = run(brig, f"getpriority({cond})=errno:EACCES",
            f"print(call({GETPRIORITY}, 0, 0), call({GETPRIORITY}, 1, 0))")
    assert r.stdout.split() == hits, r


def test_all_conditions_must_hold(brig):
    r = run(brig, "getpriority(a0==0,a1==0)=errno:EACCES",
            f"print(call({GETPRIORITY}, 0, 0), call({GETPRIORITY}, 0, 1), call({GETPRIORITY}, 1, 0))")
    out = r.stdout.split()
    assert out[0] == "13" and out[1] != "13" and out[2] != "13", r


@pytest.mark.parametrize("rule,why", [
    ("uname(a9==1)=allow", "condition 'a9==1'"),
    ("uname(a0=1)=allow", "condition 'a0=1'"),
    ("uname(a0==x)=allow", "condition 'a0==x'"),
    ("uname()=allow", "empty condition list"),
    ("@mount(a0==1)=allow", "not a group"),
    ("personality(a0==0)=allow", "argument checks of its own"),
    ("uname(a0==1=allow", "expected NAME(aN OP VALUE"),
])
def test_bad_conditions_are_refused(brig, rule, why):
    marker = brig.workspace / "ran"
    r = brig.run("run", "--seccomp-rule", rule, "--", "touch", str(marker))
    assert r.returncode == 125 and why in r.stderr, r
    assert not marker.exists()
