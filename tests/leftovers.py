"""What brig may have left on the host, counted (issue 24).

    import leftovers
    before = leftovers.snapshot()
    ...
    new = leftovers.new_since(before)       # {category: set of items}
    assert not any(new.values()), leftovers.describe(new)

snapshot() looks at every place a brig of any user may leave something:

  mounts     /proc/self/mountinfo lines that name a brig state root (a
             mount point or an overlay's upperdir/workdir below one)
  cgroups    directories named brig-PID-START[-...] in every hierarchy
             under /sys/fs/cgroup (v1 and v2) whose brig is gone, or whose
             brig is one of `exe_dirs`' (a live run of ours)
  netns      network namespaces other than the host's held by the
             processes counted below (brig names none: a sandbox's lives
             as long as its processes and descriptors)
  processes  processes whose executable is a `brig` (in `exe_dirs` when
             given), processes still inside a cgroup whose brig is gone,
             and processes whose command line holds one of `markers`
  files      everything under each state root (/run/brig, /run/user/*/brig,
             /tmp/brig-UID and `state_roots`) except the syscall filter
             cache (cache/seccomp-*.bpf), the directory cache
             (cache/dirs-1) and the plain pooled policy
             (cache/pooled-plain-*), kept on purpose, the runs/
             directory itself and its spare (runs/spare: the last run's
             record, emptied for the next one's), and the run records and cache temporaries
             of brigs still running (theirs, in use); and entries with
             "brig" in their name in /tmp, /var/tmp, /dev/shm, /run (the test
             suites' own scratch directories, OWN_TEMP, excluded)

Several users (and test sessions) share one host: items are host paths,
pids and inodes, so new_since() of a snapshot taken first shows only what
appeared meanwhile; `exe_dirs` narrows "live brig" to one's own binaries.
Run as root to see every user's; unprivileged it sees what it may read.
"""
import os
import time
import re

CATEGORIES = ("mounts", "cgroups", "netns", "processes", "files")
CGROUP_ROOT = "/sys/fs/cgroup"
TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/run/user")
# the test suites' own scratch and binary directories (integration, unit,
# the soak), never brig's: brig makes no temporary file outside its root
OWN_TEMP = ("brig-test-", "brig-bin-", "brig-hooks-", "brig-soak-", "brig-lan-", "brig-netns-", "brig-unix-",
            "brig-unit-", "brig-hostfs-", "brig-esc-", "brig-mutation-", "brig-pw-", "brig-seccomp-", "brig-t-",
            "brig-bench", "brig-leaks", "brigstage", "brig-install-", "brig-secrets-")
GROUP_NAME = re.compile(r"^brig-(\d+)-(\d+)(?:-(\d+))?$")


def _start_time(pid):
    """/proc/PID/stat field 22, None when the pid is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if rest[0] in ("Z", "X") else int(rest[19])


def _pid_ns():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def group_owner_alive(name):
    """For a brig-PID-START[-PIDNS] cgroup name: True when its brig still
    runs, False when it is gone, None when it was made in another pid
    namespace (it cannot be told from here) or the name is not brig's."""
    m = GROUP_NAME.match(name)
    if not m:
        return None
    if m.group(3) and _pid_ns() is not None and int(m.group(3)) != _pid_ns():
        return None
    return _start_time(int(m.group(1))) == int(m.group(2))


def _exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _is_brig_exe(exe, exe_dirs):
    if not exe:
        return False
    exe = exe[:-len(" (deleted)")] if exe.endswith(" (deleted)") else exe
    # the front end, the engine it runs, the supervisor of a persistent sandbox
    if os.path.basename(exe) not in ("brig", "brig-engine", "brig-supervisor"):
        return False
    return not exe_dirs or any(os.path.dirname(exe) == os.path.normpath(str(d)) for d in exe_dirs)


def _cgroups(exe_dirs):
    found = set()
    try:
        tops = [os.path.join(CGROUP_ROOT, t) for t in os.listdir(CGROUP_ROOT)]
    except OSError:
        return found
    seen = set()
    for top in tops:
        real = os.path.realpath(top)  # cpu and cpuacct are links to one hierarchy
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        for dirpath, dirnames, _ in os.walk(real):
            for d in dirnames:
                m = GROUP_NAME.match(d)
                if not m:
                    continue
                alive = group_owner_alive(d)
                if alive is False or (alive and _is_brig_exe(_exe(int(m.group(1))), exe_dirs)):
                    found.add(os.path.join(dirpath, d))
            if dirpath.count("/") - real.count("/") >= 8:
                dirnames[:] = []
    return found


def _in_dead_group(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                for part in line.strip().split(":", 2)[-1].split("/"):
                    if GROUP_NAME.match(part) and group_owner_alive(part) is False:
                        return True
    except OSError:
        pass
    return False


def _processes(exe_dirs, markers):
    found = {}
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me or _start_time(d) is None:
            continue
        pid = int(d)
        hit = _is_brig_exe(_exe(pid), exe_dirs) or _in_dead_group(pid)
        if not hit and markers:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            hit = any(m.encode() in cmd for m in markers)
        if hit:
            found[pid] = _start_time(pid)
    return {f"{pid}@{start}" for pid, start in found.items()}


def _netns(processes):
    found = set()
    host = None
    try:
        host = os.stat("/proc/1/ns/net").st_ino
    except OSError:
        pass
    for p in processes:
        try:
            ino = os.stat(f"/proc/{p.split('@')[0]}/ns/net").st_ino
        except OSError:
            continue
        if ino != host:
            found.add(f"net:[{ino}]")
    return found


def default_state_roots(extra=()):
    roots = {"/run/brig"}
    for parent, pattern in (("/run/user", None), ("/tmp", re.compile(r"^brig-\d+$"))):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for n in names:
            if pattern is None:
                roots.add(os.path.join(parent, n, "brig"))
            elif pattern.match(n):
                roots.add(os.path.join(parent, n))
    roots |= {os.path.normpath(str(r)) for r in extra}
    return sorted(roots)


OWNER = re.compile(r"(\d+)-(\d+)-(\d+)")


def _in_use(name):
    """A run record or cache temporary (PID-START-PIDNS in its name) of a
    brig that still runs."""
    m = OWNER.search(name)
    return bool(m) and group_owner_alive(f"brig-{m.group(1)}-{m.group(2)}-{m.group(3)}") is not False


def _kept(rel):
    """The syscall filter cache, the policy step's directory cache
    (cache/dirs-1) and a plain pooled run's policy (cache/pooled-plain-ID,
    persist/pool_claim.h) are kept across runs on purpose, and so is the directory
    of run records with its spare (core/reaper.h); a live brig's record or
    temporary is in use."""
    parts = rel.split("/")
    if len(parts) == 2 and parts[0] in ("runs", "cache") and OWNER.search(parts[1]) and _in_use(parts[1]):
        return True
    return parts in (["cache"], ["runs"], ["runs", "spare"], ["cache", "dirs-1"]) or (len(parts) == 2 and parts[0] == "cache" and
                                  re.fullmatch(r"seccomp-[0-9a-f]{16}\.bpf|pooled-plain-[0-9a-f]{16}", parts[1]) is not None)


def _files(state_roots):
    found = set()
    for root in state_roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                path = os.path.join(dirpath, n)
                if not _kept(os.path.relpath(path, root)):
                    found.add(path)
    return found | temp_entries(state_roots)


def temp_entries(state_roots):
    """Entries with "brig" in their name in the temporary places, but the
    state roots and the test suites' own (OWN_TEMP)."""
    found = set()
    for d in TEMP_ROOTS:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            path = os.path.join(d, n)
            if "brig" in n.lower() and not n.startswith(OWN_TEMP) and path not in set(state_roots):
                found.add(path)
    return found


def _mounts(state_roots):
    found = set()
    roots = [r.rstrip("/") + "/" for r in state_roots]
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        mp = parts[4].replace("\\040", " ")
        rest = line.split(" - ", 1)[1] if " - " in line else ""
        under = any((mp + "/").startswith(r) for r in roots)
        opts = rest.split()[2] if len(rest.split()) > 2 else ""
        layer = any(f"{k}={r}" in opts for r in roots for k in ("upperdir", "workdir"))
        if under or layer:
            found.add(f"{mp} ({parts[2]})")
    return found


def snapshot(state_roots=(), exe_dirs=None, markers=()):
    """Every trace of brig on the host now: {category: set of items}."""
    roots = default_state_roots(state_roots)
    procs = _processes(exe_dirs, markers)
    return {
        "mounts": _mounts(roots),
        "cgroups": _cgroups(exe_dirs),
        "netns": _netns(procs),
        "processes": procs,
        "files": _files(roots),
    }


def counts(snap=None, **kw):
    """{category: number}; of a snapshot, or of one taken now."""
    snap = snapshot(**kw) if snap is None else snap
    return {c: len(snap[c]) for c in CATEGORIES}


def new_since(before, after=None, settle=0, **kw):
    """What `after` (default: a snapshot now) has that `before` had not.
    With settle, snapshots are taken again for up to that many seconds
    until nothing is new: `brig run` returns the command's status before
    the kernel has finished ending its pid 1 (its namespaces, the process
    itself) and before its teardown helper removes the cgroups, so what a
    run leaves for a moment is not what it leaves behind."""
    if after is not None:
        return {c: after[c] - before[c] for c in CATEGORIES}
    deadline = time.monotonic() + settle
    while True:
        after = snapshot(**kw)
        new = {c: after[c] - before[c] for c in CATEGORIES}
        if not any(new.values()) or time.monotonic() >= deadline:
            return new
        time.sleep(0.05)


def describe(snap, limit=10):
    """One line per non-empty category, for an assertion message."""
    out = []
    for c in CATEGORIES:
        items = sorted(snap[c])
        if items:
            more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
            out.append(f"{c}: {len(items)}: {', '.join(items[:limit])}{more}")
    return "\n".join(out) or "nothing left"
