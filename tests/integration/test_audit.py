"""The audit stream (--audit FILE): every refused call of the default
profile, and every call a "log" rule names, is one JSON line written by
brig's supervisor through seccomp user notification; rate-limited per
syscall; plus the seccomp kill reason in the report."""
import json
import os

import pytest


def audit(brig, script, *args, timeout=60):
    path = brig.reports / f"audit-{len(list(brig.reports.iterdir()))}.jsonl"
    r = brig.sh(script, "--audit", str(path), *args, timeout=timeout)
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return r, events


def syscalls(events, name):
    return [e for e in events if e["event"] == "syscall" and e["syscall"] == name]


def test_refused_call_is_recorded_with_who_and_why(brig):
    r, ev = audit(brig, "unshare -r true; echo rc=$?")
    assert "rc=1" in r.stdout, r
    assert ev[0]["event"] == "start" and ev[-1]["event"] == "end", ev
    hits = syscalls(ev, "unshare")
    assert hits, ev
    e = hits[0]
    assert e["action"] == "deny-log" and e["errno"] == "EPERM", e
    assert e["pid"] > 1 and e["host_pid"] != e["pid"], e      # pid as the sandbox sees it, and the host's
    assert int(e["args"][0], 16) & 0x10000000, e               # CLONE_NEWUSER in the flags
    assert ev[-1]["exit_code"] == 0 and ev[-1]["syscall_events"] >= 1, ev[-1]


def test_unlisted_syscall_is_recorded_as_enosys(brig):
    # lookup_dcookie (212 on x86_64) is in no list: ENOSYS, and recorded.
    r, ev = audit(brig, "python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); "
                        "print(l.syscall(212, 0, 0, 0), ctypes.get_errno())'")
    assert r.stdout.split() == ["-1", "38"], r
    hits = syscalls(ev, "lookup_dcookie")
    assert hits and hits[0]["errno"] == "ENOSYS", ev


def test_log_rule_lets_the_call_run_and_records_it(brig):
    r, ev = audit(brig, "uname -s", "--seccomp-rule", "uname=log")
    assert r.returncode == 0 and r.stdout.strip() == "Linux", r
    hits = syscalls(ev, "uname")
    assert hits and hits[0]["action"] == "log" and "errno" not in hits[0], ev


def test_tight_loop_is_rate_limited_but_counted(brig):
    n = 300
    r, ev = audit(brig, f"python3 -c 'import ctypes; l = ctypes.CDLL(None); "
                        f"[l.mount(b\"x\", b\"/tmp\", b\"tmpfs\", 0, None) for _ in range({n})]'")
    assert r.returncode == 0, r
    recorded = len(syscalls(ev, "mount"))
    suppressed = sum(e["count"] for e in ev if e["event"] == "suppressed" and e["syscall"] == "mount")
    assert recorded <= 40, recorded                             # a flood does not reach the file
    assert recorded + suppressed == n, (recorded, suppressed)   # but nothing goes uncounted
    assert ev[-1]["suppressed"] >= suppressed


def test_audit_counts_in_report(brig):
    path = brig.reports / "audit-report.jsonl"
    r = brig.run("run", "--audit", str(path), "--", "sh", "-c", "unshare -r true", report=True)
    assert r.report["audit"]["path"] == str(path), r.report
    assert r.report["audit"]["syscall_events"] >= 1, r.report


def test_audit_file_symlink_is_refused(brig):
    victim = brig.base / "victim"
    victim.write_text("ORIGINAL\n")
    link = brig.reports / "audit-link.jsonl"
    os.symlink(victim, link)
    r = brig.run("run", "--audit", str(link), "--", "true")
    assert r.returncode == 125 and "symlink" in r.stderr, r
    assert victim.read_text() == "ORIGINAL\n"


def test_seccomp_kill_is_reported(brig):
    r = brig.run("run", "--seccomp-rule", "getppid=kill", "--", "python3", "-c", "import os; os.getppid()",
                 report=True)
    assert r.returncode == 128 + 31, r                          # SIGSYS
    assert r.report["reason"] == "seccomp", r.report
    assert "seccomp" in r.stderr, r


@pytest.mark.parametrize("rule", ["nosuchcall=allow", "@nosuchgroup=kill", "uname=explode", "uname"])
def test_bad_seccomp_rule_is_refused(brig, rule):
    marker = brig.workspace / "ran"
    r = brig.run("run", "--seccomp-rule", rule, "--", "touch", str(marker))
    assert r.returncode == 125, r
    assert rule.split("=")[0].lstrip("@") in r.stderr or "NAME=ACTION" in r.stderr, r
    assert not marker.exists()
