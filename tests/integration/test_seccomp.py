"""The syscall filter: every refusal of the default profile really attempted
from inside (probe_syscall), user rules on top, and the toolchains an agent
uses running cleanly under it."""
import json
import signal

import pytest

from proc_helpers import kv

# The default profile's EPERM list (probe_syscall denied prints one key each).
DENIED = [
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "pivot_root", "chroot", "unshare", "setns",
    "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "fanotify_init",
    "sethostname", "setdomainname", "iopl", "ioperm", "syslog",
]

# Calls whose probe arguments make the kernel itself fail with something
# other than EPERM (EFAULT, EBADF, ESRCH...) when the filter lets them
# through: for these, EPERM under the default profile can only be the filter.
DISTINCT_WHEN_EXECUTED = [
    "keyctl", "add_key", "request_key", "perf_event_open", "io_uring_enter", "ptrace",
    "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "mount", "umount2", "open_tree",
    "fsconfig", "chroot", "unshare", "setns", "name_to_handle_at", "quotactl_fd", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex",
]


def probe(brig, *args, brig_args=(), **kw):
    kw.setdefault("timeout", 30)
    r = brig.run("run", "--ro-bind", f"{brig.program('probe_syscall')}:/probe", *brig_args,
                 "--", "/probe", *map(str, args), **kw)
    return r, kv(r.stdout)


def test_every_denied_syscall_is_refused(brig):
    r, k = probe(brig, "denied")
    assert r.returncode == 0, r
    for name in DENIED:
        assert k.get(name) == "EPERM", (name, k.get(name), r)
    # Unnamed calls get the allowlist's ENOSYS; allowed calls reach the kernel.
    assert k["unlisted_lookup_dcookie"] == "ENOSYS" and k["unlisted_modify_ldt"] == "ENOSYS", r
    assert k["allowed_read_badfd"] == "EBADF" and k["allowed_stat_fault"] == "EFAULT", r


def test_eperm_comes_from_the_filter(brig):
    """The same probe with the calls allowed: the kernel answers differently,
    so the default profile's EPERM was the filter, not the kernel."""
    allow = [a for n in DISTINCT_WHEN_EXECUTED for a in ("--seccomp-allow", n)]
    r, k = probe(brig, "denied", brig_args=allow)
    assert r.returncode == 0, r
    for name in DISTINCT_WHEN_EXECUTED:
        assert k.get(name) not in ("EPERM", "ENOSYS", None), (name, k.get(name), r)
    # Calls not named stay refused.
    assert k["bpf"] == "EPERM" and k["sethostname"] == "EPERM", r


def test_clone_with_namespace_flags_refused(brig):
    r, k = probe(brig, "clone")
    assert r.returncode == 0, r
    assert k["clone_plain"] == "ok", r  # fork through clone still works
    for key in ("clone_newuser", "clone_newns", "clone_newnet", "clone_newpid", "clone_newuser_highbits"):
        assert k.get(key) == "EPERM", (key, r)


def test_clone3_is_enosys(brig):
    r, k = probe(brig, "clone3")
    assert k.get("clone3") == "ENOSYS" and k.get("clone3_newuser") == "ENOSYS", r


def test_unshare_and_setns_refused(brig):
    r, k = probe(brig, "unshare")
    for key in ("unshare_newuser", "unshare_newns", "setns_self_user"):
        assert k.get(key) == "EPERM", (key, r)


def test_terminal_injection_refused_even_with_high_bits(brig):
    r, k = probe(brig, "ioctl")
    assert r.returncode == 0, r
    for key in ("tiocsti_stdin", "tiocsti_highbits_stdin", "tiocsti_allbits_stdin",
                "tioclinux_stdin", "tioclinux_highbits_stdin"):
        assert k.get(key) == "EPERM", (key, r)
    # Neighbouring commands reach the kernel (ENOTTY/EBADF), never the filter.
    for key in ("neighbour_tiocgwinsz", "neighbour_fionread", "neighbour_0x5410", "neighbour_0x5413",
                "neighbour_0x541d", "neighbour_0x1005412"):
        assert k.get(key) in ("ok", "ENOTTY", "EBADF", "EINVAL"), (key, r)


def test_non_native_abis_are_killed(brig):
    r, k = probe(brig, "abi")
    assert r.returncode == 0, r
    # An x32 call (nr | 0x40000000) and the i386 entry must never run: the
    # process attempting it dies of SIGSYS (the filter's bad-arch action).
    for key in ("x32_getpid", "x32_mount", "int80_getpid"):
        assert k.get(key) == "SYS", (key, r)


def test_socket_families(brig):
    r, k = probe(brig, "sockets")
    assert r.returncode == 0, r
    for key in ("af_unix", "af_inet", "af_inet6", "af_netlink_route", "socketpair_unix"):
        assert k.get(key) == "ok", (key, r)
    for key in ("af_alg", "af_packet", "af_vsock", "af_bluetooth", "af_tipc", "af_key",
                "af_packet_highbits", "af_netlink_audit", "af_netlink_uevent", "af_netlink_route_highbits",
                "socketpair_tipc"):
        assert k.get(key) == "EAFNOSUPPORT", (key, r)


def test_io_uring_refused(brig):
    r, k = probe(brig, "denied")
    assert k["io_uring_setup"] == "EPERM" and k["io_uring_enter"] == "EPERM", r


def test_personality(brig):
    r, k = probe(brig, "personality")
    for key in ("query", "linux", "linux32", "restore"):
        assert k.get(key) == "ok", (key, r)
    for key in ("addr_no_randomize", "read_implies_exec", "mmap_page_zero"):
        assert k.get(key) == "EPERM", (key, r)


def test_ptrace_of_a_sibling_refused(brig):
    r, k = probe(brig, "ptrace")
    assert r.returncode == 0, r
    for key in ("ptrace_attach", "ptrace_seize", "process_vm_readv", "pidfd_getfd"):
        assert k.get(key) == "EPERM", (key, r)


# ---- user rules -------------------------------------------------------------

def test_user_deny_with_errno_name_and_number(brig):
    r = brig.run("run", "--seccomp-deny", "uname:EIO", "--", "uname")
    assert r.returncode == 1 and "Input/output error" in r.stderr, r
    r = brig.run("run", "--seccomp-deny", "mkdir:13", "--", "mkdir", "/tmp/x")
    assert r.returncode == 1 and "Permission denied" in r.stderr, r
    r = brig.run("run", "--seccomp-deny", "mkdir", "--", "mkdir", "/tmp/x")
    assert r.returncode == 1 and "Operation not permitted" in r.stderr, r


def test_user_group_rules(brig):
    r, k = probe(brig, "sockets", brig_args=("--seccomp-deny", "@network:EACCES"))
    assert k.get("af_unix") == "EACCES" and k.get("socketpair_unix") == "EACCES", r
    r, k = probe(brig, "denied", brig_args=("--seccomp-allow", "@mount"))
    assert k["mount"] == "EFAULT" and k["chroot"] == "EFAULT", r   # reached the kernel
    assert k["keyctl"] == "EPERM", r


def test_later_rule_wins(brig):
    r = brig.run("run", "--seccomp-deny", "uname:EIO", "--seccomp-allow", "uname", "--", "uname")
    assert r.returncode == 0 and r.stdout.strip() == "Linux", r
    r = brig.run("run", "--seccomp-allow", "uname", "--seccomp-deny", "uname:EIO", "--", "uname")
    assert r.returncode == 1 and "Input/output error" in r.stderr, r


@pytest.mark.parametrize("args,needle", [
    (("--seccomp-allow", "no_such_call"), "'no_such_call'"),
    (("--seccomp-deny", "@no-such-group"), "'@no-such-group'"),
    (("--seccomp-deny", "read:ENOTANERRNO"), "'ENOTANERRNO'"),
    (("--seccomp-deny", "read:0"), "'0'"),
    (("--seccomp-deny", "read:99999"), "'99999'"),
    (("--seccomp-allow", "socketcall"), "'socketcall'"),  # not a call on x86_64
])
def test_unknown_names_are_errors(brig, args, needle):
    r = brig.run("run", *args, "--", "true")
    assert r.returncode == 125 and needle in r.stderr, r


def test_report_says_seccomp_is_on(brig):
    path = brig.home / "report.json"
    r = brig.run("run", "--json-report", path, "--", "true")
    assert r.returncode == 0, r
    assert json.loads(path.read_text())["controls"]["seccomp"] == "default", r


# ---- compatibility ----------------------------------------------------------

def test_python_threads_and_subprocess(brig):
    r = brig.sh("python3 - <<'EOF'\n"
                "import threading, subprocess, os, socket, multiprocessing\n"
                "out = []\n"
                "ts = [threading.Thread(target=lambda i=i: out.append(i * i)) for i in range(8)]\n"
                "[t.start() for t in ts]; [t.join() for t in ts]\n"
                "print('threads', sorted(out) == [i * i for i in range(8)])\n"
                "print('sub', subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout.strip())\n"
                "print('addr', socket.getaddrinfo('localhost', 80)[0][4][0] in ('127.0.0.1', '::1'))\n"
                "with multiprocessing.Pool(2) as p: print('pool', p.map(abs, [-1, -2]))\n"
                "EOF", timeout=60)
    assert r.returncode == 0, r
    assert "threads True" in r.stdout and "sub hi" in r.stdout and "addr True" in r.stdout, r
    assert "pool [1, 2]" in r.stdout, r


def test_gcc_make_and_a_pthread_program(brig):
    (brig.workspace / "hello.c").write_text(
        '#include <pthread.h>\n#include <stdio.h>\n'
        'static void *run(void *a) { return a; }\n'
        'int main(void) { pthread_t t[4]; long s = 0; void *r;\n'
        '  for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, run, (void *)i);\n'
        '  for (int i = 0; i < 4; i++) { pthread_join(t[i], &r); s += (long)r; }\n'
        '  printf("hello %ld\\n", s); return 0; }\n')
    (brig.workspace / "Makefile").write_text("hello: hello.c\n\tgcc -O2 -pthread -o $@ $<\n")
    brig.chown(brig.workspace / "hello.c")
    brig.chown(brig.workspace / "Makefile")
    r = brig.sh("make -s && ./hello", timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "hello 6", r


def test_git_in_the_workspace(brig):
    r = brig.sh("git init -q repo && cd repo && echo a > f && git add f && "
                "git -c user.name=t -c user.email=t@e commit -qm one && git log --oneline | wc -l",
                timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "1", r


def test_coreutils_pipelines_and_job_control(brig):
    r = brig.sh("seq 1 1000 | sort -rn | head -3 | tr '\\n' ' '; echo; "
                "bash -c 'sleep 1 & wait; echo waited'; "
                "bash -c 'sleep 5 & kill $!; wait $!; echo killed-$?'", timeout=60)
    assert r.returncode == 0, r
    assert "1000 999 998" in r.stdout and "waited" in r.stdout and "killed-143" in r.stdout, r


def test_an_x32_call_ends_the_command_with_sigsys(brig):
    r = brig.sh("exec python3 -c 'import ctypes; "
                "ctypes.CDLL(None).syscall(0x40000000 | 39); print(\"survived\")'")
    assert r.returncode == 128 + signal.SIGSYS and "survived" not in r.stdout, r
