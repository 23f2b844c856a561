"""The default filter decides as the reference does, for every syscall
number: the program the kernel really holds for a sandbox's command (read
from the host with PTRACE_SECCOMP_GET_FILTER) against the reference kept
in the tree (data/seccomp-default.txt: the default profile's program as
brig compiled it before any change of layout), judged by an evaluator of
the tests' own (seccomp_bpf.py) for every number 0-1023, every argument
value either program tests for that number (each constant, its
neighbours, each masked bit flipped), the x32 and i386 spellings. An
optimisation of the filter's layout (the binary tree, an order of rules)
can never drop or change a rule without this failing; nor can a number
the kernel decided from its constant-action cache fall out of it.

And from inside: every number the reference refuses, called, is refused
with the reference's answer.

The reference changes only when the default profile does, on purpose:
    BRIG_SECCOMP_REFERENCE=write python3 -m pytest -q \\
        tests/integration/test_seccomp_decisions.py -k 'reference and root'
writes the loaded program there (then review the diff of its decisions:
seccomp_bpf.decisions of the old and new text)."""
import json
import os
import pathlib
import signal
import struct
import subprocess

import pytest

import seccomp_bpf as bpf
from conftest import IS_ROOT
from proc_helpers import wait_until
from test_escape import attack

REFERENCE = pathlib.Path(__file__).parent / "data" / "seccomp-default.txt"


def state_env(brig, name):
    """A state root of the test's own, so the first run compiles the filter
    and the second loads it from the cache."""
    d = brig.base / name
    d.mkdir(mode=0o700)
    brig.chown(d)
    return {"XDG_RUNTIME_DIR": str(d)}


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                s = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if int(s[s.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d))
    return out


def descendant_named(pid, comm):
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            if open(f"/proc/{p}/comm").read().strip() == comm:
                return p
        except OSError:
            continue
        todo += children(p)
    return None


def loaded_program(brig, env, args=(), exe=None):
    """The filter the kernel holds for an idle sandbox's command (brig run
    ARGS, by the brig at exe if given)."""
    cmd = brig.prefix() + [str(exe or brig.exe), "run", *args, "--", "/bin/sh", "-c", "echo ready; exec sleep 60"]
    p = subprocess.Popen(cmd,
                         cwd=str(brig.workspace), env=brig.env(env), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout.readline().strip() == b"ready", p.stderr.read()
        pid = wait_until(lambda: descendant_named(p.pid, "sleep"), 5)
        assert pid, "the sandbox's command is not found on the host"
        return bpf.loaded_filter(pid)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def describe(key, a, b, names):
    nr, arch, args = key
    return (f"{names.get(nr, nr)} (nr {nr:#x}, arch {arch:#x}, args {dict((i, hex(x)) for i, x in enumerate(args) if x)}): "
            f"reference {bpf.action_name(a)}, loaded {bpf.action_name(b)}")


@attack("seccomp-layout-drops-rule", "an optimisation of the default filter's layout (libseccomp's binary tree, "
        "rules reordered, the cached program) drops or changes one rule, or an argument check on a hot call "
        "takes it out of the kernel's constant-action cache",
        "the program the kernel holds for a sandbox, compiled and from the cache, decides as the reference does "
        "for every number, argument boundary and architecture; every number the reference decides constantly "
        "still is")
def test_loaded_filter_decides_as_the_reference(brig):
    if not IS_ROOT:
        pytest.skip("NOT ROOT: READING A SANDBOX'S LOADED FILTER (PTRACE_SECCOMP_GET_FILTER) NEEDS CAP_SYS_ADMIN")
    env = state_env(brig, "state")
    compiled = loaded_program(brig, env)
    cached = loaded_program(brig, env)
    if os.environ.get("BRIG_SECCOMP_REFERENCE") == "write":
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text("# the default profile's program (brig run), written by test_seccomp_decisions.py\n"
                             + bpf.to_text(compiled))
    ref = bpf.from_text(REFERENCE.read_text())
    names = bpf.syscall_names()
    for label, prog in (("compiled", compiled), ("cached", cached)):
        if prog == ref:
            continue  # the same program, instruction for instruction
        want, got = bpf.decisions(ref, prog, wide=True), bpf.decisions(prog, ref, wide=True)  # the same inputs
        wrong = [describe(k, want[k], v, names) for k, v in got.items() if v != want[k]]
        assert not wrong, f"{label}: {len(wrong)} decisions differ: " + "; ".join(wrong[:12])
        lost = [names.get(nr, nr) for nr in range(1024)
                if bpf.const_action(ref, nr) == bpf.RET_ALLOW and bpf.const_action(prog, nr) != bpf.RET_ALLOW]
        assert not lost, f"{label}: out of the kernel's constant-action cache now: {lost}"
    # The hot calls the bench measures never run the filter at all.
    for name in ("getppid", "read", "write", "close", "futex", "mmap", "newfstatat"):
        nr = next(n for n, s in names.items() if s == name)
        assert bpf.const_action(compiled, nr) == bpf.RET_ALLOW, name


# Rule sets whose programs take every other path of the compile: an audit
# stream (refusals and execs notify), the user's conditional rules (one
# on a call with a guard of its own is refused, so none here), groups,
# a refused sendmsg (refusals as plain errnos), connect and sendto logged.
RULE_SETS = [
    [],
    ["--audit", "{audit}"],
    ["--seccomp-rule", "kill(a1==9)=errno:EACCES", "--seccomp-deny", "@mount:EACCES", "--seccomp-allow", "keyctl",
     "--seccomp-rule", "getpriority(a0==0)=log", "--seccomp-rule", "kcmp(a2&0x3==0x1)=allow",
     "--seccomp-rule", "uselib(a0>=7)=deny-log", "--seccomp-deny", "getppid"],
    ["--seccomp-deny", "sendmsg", "--seccomp-deny", "@network"],
    ["--audit", "{audit}", "--seccomp-rule", "sendto=log", "--seccomp-rule", "connect=log",
     "--seccomp-allow", "@debug", "--seccomp-deny", "sysinfo:EIO"],
]


@attack("seccomp-dispatch-drops-rule", "brig's own number dispatch (ranges of syscall numbers of one decision, in "
        "front of libseccomp's argument checks) decides one number, argument value, x32 number or i386 call "
        "otherwise than libseccomp's whole program for the same rules, under an audit stream, the user's "
        "conditional rules, groups, a refused sendmsg, a logged connect",
        "the programs the kernel holds, dispatch and libseccomp's alone (test hook), decide alike for every "
        "number 0-1023, the numbers at 2^30, 2^31 and 2^32, every x32 and i386 number and every argument "
        "boundary, for each rule set; numbers libseccomp's decides constantly stay so; the production build "
        "ignores the hook")
def test_dispatch_decides_as_libseccomps_program(brig, hooks_bindir):
    if not IS_ROOT:
        pytest.skip("NOT ROOT: READING A SANDBOX'S LOADED FILTER (PTRACE_SECCOMP_GET_FILTER) NEEDS CAP_SYS_ADMIN")
    names = bpf.syscall_names()
    reports = brig.base / "audit"
    reports.mkdir()
    brig.chown(reports)
    # The program does not depend on the mode: each mode takes half the sets.
    for i, rules in list(enumerate(RULE_SETS))[brig.mode == "rootless"::2]:
        def fill(tag):
            return [a.format(audit=reports / f"audit-{i}-{tag}.jsonl") for a in rules]
        ours = loaded_program(brig, state_env(brig, f"d{i}"), fill("d"), hooks_bindir / "brig")
        whole_env = {**state_env(brig, f"w{i}"), "BRIG_TEST_SECCOMP_WHOLE": "1"}
        whole = loaded_program(brig, whole_env, fill("w"), hooks_bindir / "brig")
        assert len(ours) < len(whole), (rules, len(ours), len(whole))  # the hook took the other path
        want, got = bpf.decisions(whole, ours, wide=True), bpf.decisions(ours, whole, wide=True)
        wrong = [describe(k, want[k], v, names) for k, v in got.items() if v != want[k]]
        assert not wrong, f"{rules}: {len(wrong)} decisions differ: " + "; ".join(wrong[:12])
        lost = [names.get(nr, nr) for nr in range(1024)
                if bpf.const_action(whole, nr) is not None and bpf.const_action(ours, nr) != bpf.const_action(whole, nr)]
        assert not lost, f"{rules}: out of the kernel's constant-action cache now: {lost}"
    # The production build has no such hook: its program is the dispatch.
    plain = loaded_program(brig, {**state_env(brig, "p"), "BRIG_TEST_SECCOMP_WHOLE": "1"})
    assert len(plain) < len(whole) and plain == loaded_program(brig, state_env(brig, "p2"))


# What /probe every (tests/escape/probe_syscall.c) and brig's own start of
# the command need (strace of the probe; sendmsg hands the listener over;
# an ASan build of brig runs its own code after the filter is loaded).
PROBE_NEEDS = {"read", "write", "close", "fstat", "newfstatat", "mmap", "mprotect", "munmap", "brk", "rt_sigaction",
               "rt_sigprocmask", "rt_sigreturn", "ioctl", "sendmsg", "clone", "fork", "vfork", "execve", "exit",
               "wait4", "alarm", "exit_group", "readlink", "arch_prctl", "set_tid_address", "set_robust_list",
               "rseq", "prlimit64", "getrandom", "futex", "getpid", "gettid", "uretprobe", "uprobe",
               "sigaltstack", "madvise", "sched_yield"}
# Adjacent numbers get different errnos: every number is a range of its
# own, and a range edge one off gives the neighbour's errno.
RANGE_ERRNOS = ["EIO", "ENXIO", "E2BIG", "ENOEXEC", "ENOTBLK", "ETXTBSY", "EMLINK"]


@attack("seccomp-dispatch-many-ranges", "the user's own rules make about 400 ranges of one decision (every named "
        "number the probe does not need refused, each with another errno than its neighbours, every third logged "
        "so that the supervisor answers it from the same dispatch, some also with a conditional rule routed to "
        "libseccomp's argument checks): the dispatch's tree is past what a conditional jump reaches (its far "
        "jumps, its leaves without shared returns); from inside, every number 0-499 and 1000 is called with -1 "
        "arguments, and x32 and int 0x80 calls are made, from a compiled and a cached program and under --audit",
        "each refused number answers its own rule's errno (the kernel's, or the supervisor's for a logged one: "
        "never a call let through), every other number what it answers without the rules, x32 and i386 kill; "
        "the report and the audit stream on the host name the logged ones; the cached program has a jump of more "
        "than 255 instructions")
def test_many_ranges_of_the_users_rules_decide_from_inside(brig):
    names = bpf.syscall_names()
    want, logged, rules = {}, set(), []
    for i, nr in enumerate(nr for nr in sorted(names) if nr < 500 and names[nr] not in PROBE_NEEDS):
        if i % 3 == 1:  # notified: the supervisor answers from the same rules' dispatch (seccomp_replies_build)
            want[f"nr{nr}"] = "EPERM"
            logged.add(names[nr])
            rules += ["--seccomp-rule", f"{names[nr]}=deny-log"]
            continue
        e = RANGE_ERRNOS[i % len(RANGE_ERRNOS)]
        want[f"nr{nr}"] = e
        rules += ["--seccomp-deny", f"{names[nr]}:{e}"]
        if i % 25 == 3:  # the fallback is the deny above: the argument checks answer it
            rules += ["--seccomp-rule", f"{names[nr]}(a0==7)=errno:EPERM"]
    assert len(want) > 300, len(want)
    env = state_env(brig, "ranges")
    audit = brig.reports / "ranges-audit.jsonl"

    def probe(*args, extra=(), report=False):
        r = brig.run("run", "--ro-bind", f"{brig.program('probe_syscall')}:/probe", *extra, "--", "/probe", *args,
                     env=env, timeout=120, report=report)
        assert r.returncode == 0, r
        return r, dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)

    _, plain = probe("every")
    assert len(plain) > 490, plain
    for how, extra in (("compiled", rules), ("cached", rules), ("audit", [*rules, "--audit", str(audit)])):
        r, got = probe("every", extra=extra, report=True)
        wrong = {k: (got.get(k), want.get(k, plain[k])) for k in plain if got.get(k) != want.get(k, plain[k])}
        assert not wrong, f"{how}: (got, want) for {len(wrong)} numbers: {dict(list(wrong.items())[:12])}"
        seen = {x["what"] for x in r.report["refusals"] if x["kind"] == "syscall"}
        # and nothing else but the default profile's own refusals of what it keeps (clone's guard)
        others = {n for n in seen - logged if n not in PROBE_NEEDS and not n.startswith("syscall_")}
        assert seen & logged and not others, (how, sorted(others)[:10], len(seen & logged))
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    audited = {e.get("call") or e.get("syscall") for e in events if e.get("event") in ("syscall", "refused", "denied")}
    assert audited & logged, f"the audit stream names none of the refused calls: {sorted(audited)[:10]}"
    _, abi = probe("abi", extra=rules)
    assert [abi.get(k) for k in ("x32_getpid", "x32_mount", "int80_getpid")] == ["SYS"] * 3, abi
    # the argument guards kept among the ranges (ioctl's TIOCSTI and TIOCLINUX with their high bits, clone's
    # namespace flags): a program of their own each, whose default is the call's other decision
    for guard, refused in (("ioctl", "tiocsti_highbits_stdin"), ("clone", "clone_newuser_highbits")):
        _, base = probe(guard)
        _, ruled = probe(guard, extra=rules)
        assert base.get(refused) == "EPERM" and ruled == base, (guard, ruled, base)
    # the program run above, as cached: far jumps (the path this test is for)
    cache = pathlib.Path(env["XDG_RUNTIME_DIR"]) / "brig" / "cache"
    # (the policy step keeps a file of its own there too: core/dircache.c)
    files = sorted(cache.glob("seccomp-*.bpf"), key=lambda f: f.stat().st_size)
    assert len(files) == 3, f"the rules' programs were not cached: {files}"
    data = files[-1].read_bytes()
    (klen,) = struct.unpack_from("<I", data)
    prog = list(struct.iter_unpack("<HBBI", data[4 + klen:]))
    far = [k for c, jt, jf, k in prog if c == 0x05 and k > 255]  # BPF_JMP|BPF_JA
    assert far, f"no jump past 255 instructions in the {len(prog)} cached: the test missed the far path"


PROBE = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for nr in map(int, sys.argv[1:]):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(0)] * 6)
    print(nr, r, ctypes.get_errno(), flush=True)
"""


@attack("refused-number-called", "from inside, call every system call number the reference filter refuses "
        "(with zero arguments), named or not: one the filter's layout, its cache or the supervisor's replies "
        "let through reaches the kernel",
        "each is refused with the reference's answer: its errno where the filter answers, EPERM or ENOSYS from "
        "the supervisor where it notifies (EAFNOSUPPORT for a socket family), and the run's report counts those refusals on the host")
def test_every_number_the_reference_refuses_is_refused_inside(brig):
    ref = bpf.from_text(REFERENCE.read_text())
    # x86_64's uretprobe (335, Linux 6.11) and uprobe (336, 6.17) pass every
    # seccomp filter unjudged (kernel/seccomp.c, seccomp_uprobe_exception):
    # called anywhere but from the kernel's own uprobe trampoline they do
    # nothing but SIGILL the caller or fail with ENXIO, on the host too.
    # connect (42) notifies to be judged by the unix socket guard: an allowed
    # call, not a refusal.
    numbers = [nr for nr in range(512) if bpf.run(ref, nr) != bpf.RET_ALLOW and nr not in (42, 335, 336)]
    (brig.workspace / "probe.py").write_text(PROBE)
    reports = brig.base / "reports"
    brig.chown(reports)
    rep_path = reports / "refused.json"
    r = brig.run("run", "--json-report", str(rep_path), "--timeout", "60", "--", "/usr/bin/python3",
                 str(brig.workspace / "probe.py"), *map(str, numbers), timeout=90)
    assert r.returncode == 0, r
    seen = {}
    for line in r.stdout.splitlines():
        nr, ret, err = map(int, line.split())
        seen[nr] = (ret, err)
    names = bpf.syscall_names()
    wrong = []
    notified = 0
    for nr in numbers:
        act = bpf.run(ref, nr)
        ret, err = seen.get(nr, (None, None))
        if act & 0xFFFF0000 == 0x00050000:
            ok = ret == -1 and err == act & 0xFFFF
        else:
            assert act == 0x7FC00000, (names.get(nr, nr), bpf.action_name(act))
            notified += 1
            ok = ret == -1 and err in (1, 38, 97)  # EPERM, ENOSYS, EAFNOSUPPORT: the supervisor's answers
        if not ok:
            wrong.append(f"{names.get(nr, nr)} ({nr}): reference {bpf.action_name(act)}, got {ret} errno {err}")
    assert not wrong, "; ".join(wrong)
    rep = json.loads(rep_path.read_text())
    counted = len([x for x in rep["refusals"] if x["kind"] == "syscall"]) + rep.get("refusals_dropped", 0)
    # clone3 and openat2 are routine fallbacks, not counted (report.md)
    assert counted >= notified - 2, (counted, notified, rep["refusals"][:3])
