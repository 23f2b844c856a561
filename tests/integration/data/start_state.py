"""What a command's process starts with, as JSON on stdout, beyond what
test_exec_spare.py's PROFILE reads: prctl state, timers, scheduling, I/O
priority, OOM score, personality, keyrings, the time namespace's offsets,
the mount table, which namespaces it shares with pid 1 (test_start_state.py
runs it as `python3 -c` in a cold run, a pooled run and a spare's exec)."""
import ctypes, json, os, re, signal, resource
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def prctl(op, a=0):
    buf = ctypes.c_int(0)
    r = libc.prctl(op, ctypes.byref(buf) if a == "ptr" else a, 0, 0, 0)
    return buf.value if a == "ptr" else r
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.strip()
for k in ("Pid", "PPid", "TracerPid", "Tgid", "Ngid", "NSpid", "NStgid", "NSpgid", "NSsid", "Name",
          "VmPeak", "VmSize", "VmLck", "VmPin", "VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem", "VmData",
          "VmStk", "VmExe", "VmLib", "VmPTE", "VmSwap", "Threads", "voluntary_ctxt_switches",
          "nonvoluntary_ctxt_switches", "HugetlbPages", "SigQ", "untag_mask"):
    st.pop(k, None)
out["status"] = st
fdl = []
for n in os.listdir("/proc/self/fd"):
    try:
        fdl.append(n + ":" + re.sub(r'[0-9]+', 'N', os.readlink('/proc/self/fd/' + n)))
    except OSError:
        pass
out["fds"] = sorted(fdl)
out["limits"] = open("/proc/self/limits").read()
out["ns_same_as_pid1"] = {}
for n in sorted(os.listdir("/proc/self/ns")):
    try:
        out["ns_same_as_pid1"][n] = os.readlink(f"/proc/self/ns/{n}") == os.readlink(f"/proc/1/ns/{n}")
    except OSError as e:
        out["ns_same_as_pid1"][n] = str(e)
out["cgroup"] = open("/proc/self/cgroup").read()
out["env"] = {k: v for k, v in os.environ.items()}
out["cwd"] = os.getcwd()
out["umask"] = os.umask(0)
out["personality"] = libc.personality(0xffffffff)
PR = dict(PDEATHSIG=(2, "ptr"), DUMPABLE=(3, 0), KEEPCAPS=(7, 0), TIMING=(13, 0), TIMERSLACK=(30, 0),
          SECUREBITS=(27, 0), NO_NEW_PRIVS=(39, 0), THP_DISABLE=(42, 0), CHILD_SUBREAPER=(37, "ptr"),
          TSC=(25, "ptr"), SPEC_STORE=(52, 0), MCE_KILL=(34, 0), FP_MODE=(46, 0), IO_FLUSHER=(58, 0),
          MDWE=(66, 0), TAGGED=(56, 0))
out["prctl"] = {}
for name, (op, a) in PR.items():
    if name == "SPEC_STORE":
        out["prctl"][name] = libc.prctl(52, 0, 0, 0, 0)
    elif name == "MCE_KILL":
        out["prctl"][name] = libc.prctl(34, 0, 0, 0, 0)
    else:
        out["prctl"][name] = prctl(op, a)
out["itimer"] = [signal.getitimer(w) for w in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)]
out["timers"] = open("/proc/self/timers").read()
out["sched"] = [os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0))]
out["ioprio"] = libc.syscall(252, 1, 0)
out["oom_score_adj"] = open("/proc/self/oom_score_adj").read()
for f in ("loginuid", "sessionid", "attr/current", "timens_offsets", "coredump_filter", "autogroup"):
    try:
        out[f] = open("/proc/self/" + f).read()
    except OSError as e:
        out[f] = "ERR " + e.strerror
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
# ppid pgrp session tty_nr tpgid
pid = os.getpid()
out["ids"] = dict(ppid=os.getppid(), pgrp_is_self=os.getpgrp() == pid, sid_is_self=os.getsid(0) == pid,
                  pgrp_is_ppid=os.getpgrp() == os.getppid(), tty_nr=stat[4], nice=stat[16])
def keydesc(spec):
    kid = libc.syscall(250, 0, ctypes.c_long(spec), 0)
    if kid < 0:
        return "ERR %d" % ctypes.get_errno()
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(250, 6, kid, buf, 256)
    return buf.value.decode(errors="replace") if n >= 0 else "ERR %d" % ctypes.get_errno()
out["keyrings"] = {"session": keydesc(-3), "process": keydesc(-2), "thread": keydesc(-1), "user": keydesc(-4)}
mi = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    sep = f.index("-")
    mi.append(" ".join([f[4], f[5]] + f[6:sep] + f[sep + 1:sep + 2] + [re.sub(r"size=\d+k|nr_inodes=\d+", lambda m: m.group(0), f[-1])]))
out["mountinfo"] = mi
out["uts"] = os.uname().nodename
out["pid"] = os.getpid()
out["sigs"] = {"blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))}
print(json.dumps(out, indent=1, sort_keys=True))
