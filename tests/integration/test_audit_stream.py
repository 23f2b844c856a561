"""The audit stream as a record of what ran (issue 22): exec and exit events
from seccomp user notification, the hash chain and `brig log verify`, the
timeline `brig log` prints. Every check reads the stream the HOST got from
brig's supervisor; what the sandbox writes itself never becomes an event.
docs/audit.md."""
import hashlib
import json
import os
import pathlib
import subprocess
import time

import jsonschema
import pytest

SCHEMA = json.loads((pathlib.Path(__file__).resolve().parents[2] / "docs" / "audit.schema.json").read_text())


def valid(events):
    """Every line is one event of docs/audit.schema.json."""
    v = jsonschema.Draft202012Validator(SCHEMA)
    for e in events:
        v.validate(e)


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (test_escape.py's marker)."""
    return pytest.mark.escape(ident, technique, control)


def audit(brig, script, *args, timeout=60, name=None):
    path = brig.reports / (name or f"audit-{len(list(brig.reports.iterdir()))}.jsonl")
    r = brig.sh(script, "--audit", str(path), *args, timeout=timeout)
    text = path.read_text() if path.exists() else ""
    return r, path, [json.loads(line) for line in text.splitlines()]


def execs(events):
    return [e for e in events if e["event"] == "exec"]


def log(brig, *args):
    """`brig log ...` on the host (it reads a file: no sandbox)."""
    return subprocess.run([str(brig.bindir / "brig"), "log", *map(str, args)], capture_output=True, text=True,
                          timeout=30)


PIPELINE = "ls / | wc -l >/dev/null; /bin/true; sh -c 'exit 3'; exec /proc/self/exe -c 'echo hi' x"
MEMFD = ("import os; fd = os.memfd_create('hidden'); "
         "os.write(fd, open('/bin/echo', 'rb').read()); os.execve(fd, ['innocent', 'from-memfd'], {})")


def test_exec_events_pipeline_self_exe_memfd_and_exits(brig):
    r, path, ev = audit(brig, PIPELINE + "; true")
    assert r.returncode == 0 and "hi" in r.stdout, r
    by_argv = {tuple(e["argv"]): e for e in execs(ev)}
    for argv in (("ls", "/"), ("wc", "-l"), ("/bin/true",), ("sh", "-c", "exit 3")):
        assert argv in by_argv, (argv, execs(ev))
    ls = by_argv[("ls", "/")]
    assert ls["path"].endswith("/ls") and ls["pid"] > 1 and ls["host_pid"] != ls["pid"], ls
    assert ls["cwd"] == "/work" or ls["cwd"].startswith("/"), ls
    assert ls["ppid"] == by_argv[("/bin/true",)]["ppid"], ev          # the same shell started both
    # /proc/self/exe: the event says which program the kernel will run
    self_exe = by_argv[("/proc/self/exe", "-c", "echo hi", "x")]
    assert self_exe["path"] == "/proc/self/exe" and self_exe["file"].endswith("dash"), self_exe
    exits = {e["host_pid"]: e for e in ev if e["event"] == "exit"}
    assert exits[ls["host_pid"]]["exit_code"] == 0, exits
    assert exits[by_argv[("sh", "-c", "exit 3")]["host_pid"]]["exit_code"] == 3, exits
    assert all(e["duration_ms"] >= 0 for e in exits.values()), exits
    # memfd: fexecve names no path; the event names the descriptor's file
    r, path, ev = audit(brig, f"python3 -c \"{MEMFD}\"")
    assert r.returncode == 0 and "from-memfd" in r.stdout, r
    m = [e for e in execs(ev) if e["argv"] == ["innocent", "from-memfd"]]
    assert m and m[0]["call"] == "execveat" and m[0]["path"] == "", execs(ev)
    assert m[0]["file"].startswith("/memfd:hidden"), m[0]
    assert ev[-1]["event"] == "end" and ev[-1]["execs"] >= 2, ev[-1]
    valid(ev)


@attack("audit-forged-from-inside", "event-shaped JSON on stdout, stderr, in files, as a program name and inside an argv with a newline",
        "exec events come from seccomp user notification, the stream from the supervisor alone")
def test_forged_events_from_inside_are_not_events(brig):
    """The command prints event-shaped JSON to stdout and stderr, writes it
    into files (the workspace, /tmp), names a program like an event, and
    puts a newline and a whole forged line into an argv: the stream the
    host reads holds only brig's events, one per line, the forgery as the
    argv text of a real exec event, and the hash chain holds."""
    forged = '{"event":"exec","argv":["FORGED"],"pid":1,"seq":2}'
    script = (f"echo '{forged}'; echo '{forged}' >&2; echo '{forged}' > forged.jsonl; "
              f"echo '{forged}' > /tmp/audit.jsonl; "
              f"cp /bin/true '/tmp/{{\"event\":\"end\"}}' && '/tmp/{{\"event\":\"end\"}}'; "
              f"/bin/true \"$(printf 'x\\n{forged}')\"")
    r, path, ev = audit(brig, script)
    assert r.returncode == 0, r
    lines = path.read_text().splitlines()
    assert len(lines) == len(ev) and all(json.loads(line)["seq"] == i + 1 for i, line in enumerate(lines)), lines
    assert not [e for e in ev if e.get("argv") == ["FORGED"]], ev
    assert [e["event"] for e in ev].count("end") == 1 and ev[-1]["event"] == "end", ev
    planted = [e for e in execs(ev) if e["path"] == '/tmp/{"event":"end"}']
    assert planted, execs(ev)                      # the planted name is a path of a real exec event
    newline = [e for e in execs(ev) if len(e["argv"]) == 2 and e["argv"][0] == "/bin/true"]
    assert newline and newline[0]["argv"][1] == "x\n" + forged, execs(ev)
    assert log(brig, "verify", path).returncode == 0
    # the timeline shows the forged text escaped, on the exec's own line
    out = log(brig, "--only", "exec", path).stdout
    assert "x\\x0a{" in out and "\n{" not in out, out


@attack("audit-log-terminal-injection", "an argv holding OSC 52 and CSI sequences, for the terminal of whoever reads brig log",
        "brig log shows every string of the stream with control characters as \\xNN")
def test_log_does_not_pass_escape_sequences_to_the_terminal(brig):
    """A program run with an OSC 52 (clipboard) sequence and a CSI in its
    argv: `brig log` prints them as text, never as bytes a terminal
    acts on."""
    r, path, ev = audit(brig, "/bin/true \"$(printf '\\033]52;c;ZXZpbA==\\a\\033[2J')\"")
    assert r.returncode == 0, r
    assert any("\x1b]52" in a for e in execs(ev) for a in e["argv"]), execs(ev)
    out = log(brig, path).stdout
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]52;c;" in out, repr(out)


@attack("audit-log-edited-fields", "a stream edited after the run: OSC 52 and CSI in every string brig log prints "
        "(a unix event's action and call, a net event's decision and type, errno, a net rule's change, a file "
        "change, brig_version, policy_sha256)",
        "brig log writes every field of the file through one escaping writer; none goes out by printf's %s")
def test_log_escapes_every_field_of_an_edited_stream(brig):
    """brig log reads files anyone may have edited. Each event kind it
    prints, with an escape sequence in each of its string fields: the
    timeline shows all of them as text, none as bytes. Found by
    fuzz_auditlog: six fields went out by printf's %s unescaped."""
    r, path, ev = audit(brig, "/bin/true")
    assert r.returncode == 0, r
    evil = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x7f"
    base = {"v": 1, "time": "2026-12-01T16:56:50.103Z"}
    forged = [
        {"event": "start", "command": ["sh"], "brig_version": evil, "net": evil, "policy_sha256": evil},
        {"event": "unix", "action": evil, "call": evil, "path": evil, "reason": evil},
        {"event": "net", "decision": evil, "host": evil, "port": 443, "reason": evil},
        {"event": "dns", "decision": evil, "name": evil, "type": evil, "reason": evil},
        {"event": "syscall", "action": "log", "syscall": evil, "pid": 2, "errno": evil},
        {"event": "net_rule", "change": evil, "action": evil, "host": evil},
        {"event": "files", "added": 1, "modified": 0, "deleted": 0,
         "changes": [{"change": evil, "path": evil, "type": evil}]},
    ]
    edited = brig.reports / "edited-fields.jsonl"
    edited.write_text("".join(json.dumps({**base, **e}) + "\n" for e in forged) + path.read_text())
    out = log(brig, edited)
    assert out.returncode in (0, 1), out
    for bad in ("\x1b", "\x07", "\x7f"):
        assert bad not in out.stdout and bad not in out.stderr, (bad, out.stdout)
    # every forged field is there as text: one per string field printed
    shown = out.stdout.count("\\x1b]52;c;")
    assert shown >= 20, (shown, out.stdout)


@attack("audit-exec-storm", "a fork-exec loop of 600 programs, to flood the disk or bury what ran",
        "exec and exit events share 100 lines a second; the rest are counted (suppressed, end's exec_suppressed)")
def test_fork_exec_storm_is_rate_limited_and_counted(brig):
    n = 600
    r, path, ev = audit(brig, f"i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done")
    assert r.returncode == 0, r
    recorded = len([e for e in execs(ev) if e["argv"] == ["/bin/true"]])
    end = ev[-1]
    suppressed = sum(e["count"] for e in ev if e["event"] == "suppressed" and e.get("exec") == "*")
    assert end["exec_suppressed"] == suppressed, (end, suppressed)
    assert recorded < n and suppressed > 0, (recorded, suppressed)
    # the shell's own exec and each /bin/true are counted, written or not
    assert end["execs"] >= n + 1, end
    per_second = max(1, end["duration_ms"] / 1000 + 1)
    assert len([e for e in ev if e["event"] in ("exec", "exit")]) <= 100 * per_second + 100, len(ev)
    assert log(brig, "verify", path).returncode == 0


@attack("audit-stream-tampered", "after the run: alter, remove, reorder, truncate, append lines; alter the end event",
        "a hash chain: each line carries seq and the previous line's SHA-256, end the stream's; brig log verify")
def test_tampering_is_found_and_located(brig):
    rep = brig.reports / "tamper-report.json"
    r, path, ev = audit(brig, "ls / >/dev/null; /bin/true; cat /nonexistent; true", "--json-report", str(rep),
                        name="tamper.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) >= 6, lines
    ok = log(brig, "verify", path, "--sha256", json.loads(rep.read_text())["audit"]["sha256"])
    assert ok.returncode == 0 and "intact" in ok.stdout, ok

    def check(name, new_lines, where, words):
        p = brig.reports / name
        p.write_text("".join(new_lines))
        v = log(brig, "verify", p)
        assert v.returncode == 1, (name, v)
        assert f"{p}:{where}:" in v.stderr and words in v.stderr, (name, v.stderr)

    altered = list(lines)
    altered[2] = altered[2].replace('"pid":', '"pid":1', 1)
    check("altered.jsonl", altered, 3, "line 3 was altered")
    check("removed.jsonl", lines[:3] + lines[4:], 4, "seq 4 of this stream is missing")
    check("reordered.jsonl", lines[:2] + [lines[3], lines[2]] + lines[4:], 3, "reordered")
    check("truncated.jsonl", lines[:-2], len(lines) - 1, "without an end event")
    check("added.jsonl", lines + [lines[1]], len(lines) + 1, "after the end event")
    end = list(lines)
    end[-1] = end[-1].replace('"exit_code":0', '"exit_code":1')
    p = brig.reports / "end.jsonl"
    p.write_text("".join(end))
    v = log(brig, "verify", p, "--sha256", json.loads(rep.read_text())["audit"]["sha256"])
    assert v.returncode == 1 and "end event" in v.stderr, v


def test_log_timeline_filters_json_and_summary(brig):
    r, path, ev = audit(brig, "/bin/true; unshare -r true 2>/dev/null; exit 0")
    valid(ev)
    out = log(brig, path)
    assert out.returncode == 0, out
    assert "exec" in out.stdout and "syscall  deny   unshare" in out.stdout, out.stdout
    assert out.stdout.splitlines()[-1].startswith("summary: ran ") and "1 system call refused: unshare" in \
        out.stdout, out.stdout
    denied = log(brig, "--denied", path).stdout.splitlines()
    assert denied[:-1] and all("deny" in line for line in denied[:-1]), denied
    only = [json.loads(line) for line in log(brig, "--only", "exec", "--json", path).stdout.splitlines()]
    assert only and {e["event"] for e in only} <= {"exec", "exit"}, only
    assert log(brig, "--summary", path).stdout.startswith("ran "), out
    bad = log(brig, "--only", "exec,bogus", path)
    assert bad.returncode == 125 and "--only: 'bogus'" in bad.stderr, bad


def test_audit_no_exec_leaves_them_out(brig):
    r, path, ev = audit(brig, "/bin/true", "--audit-no-exec")
    assert r.returncode == 0, r
    assert not execs(ev) and ev[0]["host"]["exec_events"] is False, ev


@attack("audit-files-planted", "plant a symlink to a host file and a FIFO, rewrite a file in place with its size and "
        "mtime set back, in the workspace and a writable bind",
        "runchanges.c: the overlay's walk (lstat, O_NOFOLLOW, no mount crossing), hashes opened beneath the "
        "root without symlinks, non-blocking, regular files only; ctime in each record")
def test_file_changes_do_not_follow_what_the_sandbox_planted(brig):
    """The files event at the end lists what changed in the workspace and a
    writable bind: a planted symlink is a symlink (its target's content is
    never hashed), a FIFO does not hold brig up, a file rewritten with its
    size and mtime restored is still modified, and the hashes are those of
    the files the HOST sees."""
    secret = brig.base / "host-secret"
    secret.write_text("HOST SECRET CONTENT\n")
    secret.chmod(0o644)
    extra = brig.base / "extra"
    extra.mkdir()
    extra.chmod(0o777)
    (brig.workspace / "same.txt").write_text("aaaa\n")
    (brig.workspace / "gone.txt").write_text("x\n")
    for p in (brig.workspace / "same.txt", brig.workspace / "gone.txt"):
        p.chmod(0o666)
    brig.workspace.chmod(0o777)
    script = (f"ln -s {secret} link-to-host; mkfifo fifo; echo built > out.txt; rm gone.txt; "
              "touch -r same.txt /tmp/ref && echo bbbb > same.txt && touch -r /tmp/ref same.txt; "
              f"echo in-bind > {extra}/made.txt")
    r, path, ev = audit(brig, script, "--bind", str(extra), timeout=60)
    assert r.returncode == 0, r
    files = [e for e in ev if e["event"] == "files"]
    assert len(files) == 1 and files[0]["complete"], ev
    ch = {c["path"]: c for c in files[0]["changes"]}
    ws = str(brig.workspace)
    assert ch[f"{ws}/link-to-host"]["type"] == "symlink" and "sha256" not in ch[f"{ws}/link-to-host"], ch
    assert ch[f"{ws}/fifo"]["type"] == "other" and "sha256" not in ch[f"{ws}/fifo"] or \
        ch[f"{ws}/fifo"].get("sha256") is None, ch
    want = hashlib.sha256((brig.workspace / "out.txt").read_bytes()).hexdigest()
    assert ch[f"{ws}/out.txt"] == {"change": "added", "path": f"{ws}/out.txt", "type": "file", "size": 6,
                                   "mode": ch[f"{ws}/out.txt"]["mode"], "sha256": want}, ch
    assert ch[f"{ws}/gone.txt"]["change"] == "deleted", ch
    assert ch[f"{ws}/same.txt"]["change"] == "modified", ch   # same inode, size and mtime: ctime tells
    assert (brig.workspace / "same.txt").read_text() == "bbbb\n"
    assert ch[f"{extra}/made.txt"]["change"] == "added", ch
    secret_hash = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert secret_hash not in path.read_text(), "the planted link's target was read"
    valid(ev)


def _build_tree(d):
    d.mkdir(exist_ok=True)
    (d / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n')
    (d / "Makefile").write_text("hello: hello.c\n\tcc -O2 -o hello hello.c\n")
    for p in (d, d / "hello.c", d / "Makefile"):
        p.chmod(0o777 if p.is_dir() else 0o666)


BUILD = "make >/dev/null && ./hello; [ -e /cfg/flag ] && getent hosts evil.example; true"


@attack("replay-hidden-difference", "a build replayed: once as recorded, once on a changed workspace (a file "
        "rewritten with its size and mtime kept), once with a read-only input changed so the program reaches "
        "for a refused name", "the manifest's content hash of the workspace tree (refused, exit 125, naming "
        "--allow-changed-workspace) and its outcome: programs, files by content hash, network decisions")
def test_replay_same_build_changed_workspace_and_changed_decisions(brig):
    cfg = brig.base / "cfg"
    cfg.mkdir()
    cfg.chmod(0o755)
    _build_tree(brig.workspace)
    copies = [brig.base / f"ws{i}" for i in range(3)]
    for c in copies:
        _build_tree(c)
    manifest = brig.reports / "manifest.json"
    r = brig.sh(BUILD, "--manifest", str(manifest), "--ro-bind", f"{cfg}:/cfg")
    assert r.returncode == 0 and "hello" in r.stdout, r
    m = json.loads(manifest.read_text())
    assert m["argv"][:2] == ["sh", "-c"] and m["workspace"] == str(brig.workspace), m
    assert m["workspace_tree"]["entries"] == 2 and len(m["workspace_tree"]["sha256"]) == 64, m
    assert m["system"]["dpkg_status_sha256"], m["system"]
    out = m["outcome"]
    assert "/usr/bin/make" in out["programs"] and any(p.endswith("/cc1") for p in out["programs"]), out
    want = hashlib.sha256((brig.workspace / "hello").read_bytes()).hexdigest()
    assert out["files"]["./hello"] == want and out["net"] == [], out
    # the same build again, on a copy of the workspace as it started: the same
    same = brig.run("replay", manifest, "--workspace", copies[0], "--json")
    assert same.returncode == 0, same
    doc = json.loads(same.stdout.splitlines()[-1])
    assert doc["same"] and doc["outcome"]["files"]["./hello"] == want, doc
    assert hashlib.sha256((copies[0] / "hello").read_bytes()).hexdigest() == want
    # a changed workspace: refused, and the flag named
    src = copies[1] / "hello.c"
    st = src.stat()
    src.write_text(src.read_text().replace("hello", "HELLO"))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = brig.run("replay", manifest, "--workspace", copies[1])
    assert changed.returncode == 125 and "--allow-changed-workspace" in changed.stderr, changed
    assert not (copies[1] / "hello").exists(), "it ran anyway"
    # a read-only input changed: the program now asks for a refused name
    (cfg / "flag").write_text("1")
    differs = brig.run("replay", manifest, "--workspace", copies[2])
    assert differs.returncode == 1, differs
    assert "differs: net: [\"+deny dns evil.example\"]" in differs.stderr, differs.stderr
    assert "+/usr/bin/getent" in differs.stderr, differs.stderr


@attack("manifest-kept-env-value", "run with --keep-env API_TOKEN and --manifest: the manifest recorded the "
        "command's environment with the token's value, a credential written to a file that lives on (and is "
        "shared to replay the run)", "manifest")
def test_manifest_keeps_a_kept_variable_by_name_only(brig):
    manifest = brig.reports / "kept.json"
    token = "tok-" + "7" * 24
    r = brig.sh('echo "got=$API_TOKEN"', "--keep-env", "API_TOKEN", "--manifest", str(manifest),
                env={"API_TOKEN": token})
    assert r.returncode == 0 and f"got={token}" in r.stdout, r
    text = manifest.read_text()
    assert token not in text, "the kept variable's value is in the manifest"
    assert "API_TOKEN" in json.loads(text)["env"], text
    # the replay keeps it from its own caller's environment, as the policy says
    again = brig.run("replay", manifest, env={"API_TOKEN": "tok-replayed"})
    assert again.returncode in (0, 1) and "got=tok-replayed" in again.stdout, again


WHEN_C = '#include <stdio.h>\nint main(void) { puts(__DATE__ " " __TIME__); return 0; }\n'
CLOCKED = ("cc -O2 -o when when.c && ./when > built-at.txt && awk '{print int($1)}' /proc/uptime > uptime.txt && "
           "date -u -d \"@$SOURCE_DATE_EPOCH\" +%s > sde.txt")


def _clock_tree(d):
    d.mkdir(exist_ok=True)
    (d / "when.c").write_text(WHEN_C)
    for p in (d, d / "when.c"):
        p.chmod(0o777 if p.is_dir() else 0o666)


@attack("replay-clock-difference", "a build that embeds the date (__DATE__ __TIME__) and writes what the clocks "
        "read (/proc/uptime), recorded and replayed later on a copy; and the same replay with the clock pin taken "
        "out of the manifest", "--clock-start: time namespace offsets taken as the sandbox starts (timens.c), "
        "in the manifest's policy and clock record; SOURCE_DATE_EPOCH replayed with the environment")
def test_replay_pins_the_clocks_a_build_reads(brig):
    _clock_tree(brig.workspace)
    copies = [brig.base / f"clk{i}" for i in range(2)]
    for c in copies:
        _clock_tree(c)
    manifest = brig.reports / "clocked.json"
    r = brig.sh(CLOCKED, "--clock-start", "100000", "--env", "SOURCE_DATE_EPOCH=1700000000",
                "--manifest", str(manifest))
    assert r.returncode == 0, r
    host_uptime = float(open("/proc/uptime").read().split()[0])
    assert abs(host_uptime - 100000) > 60, "THE HOST'S OWN UPTIME IS THE PINNED VALUE: nothing to tell apart"
    ws = brig.workspace
    assert (ws / "uptime.txt").read_text() == "100000\n", (ws / "uptime.txt").read_text()  # not the host's
    assert (ws / "built-at.txt").read_text() == "Nov 14 2023 22:13:20\n"  # SOURCE_DATE_EPOCH, not today
    assert (ws / "sde.txt").read_text() == "1700000000\n"
    m = json.loads(manifest.read_text())
    clock = m["clock"]
    assert clock["pinned"] and clock["start_ns"] == 100000 * 10**9 and clock["source_date_epoch"] == "1700000000", m
    boot_now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    assert abs(clock["boottime_offset_ns"] + boot_now - 100000 * 10**9) < 120 * 10**9, clock  # the offset itself
    assert m["policy"]["process"]["clock_start"] == "100000", m["policy"]["process"]
    want = hashlib.sha256((ws / "when").read_bytes()).hexdigest()
    # replayed later on a copy: the same clocks read, the same binary
    same = brig.run("replay", manifest, "--workspace", copies[0], "--json")
    assert same.returncode == 0, same
    assert (copies[0] / "uptime.txt").read_text() == "100000\n"
    assert hashlib.sha256((copies[0] / "when").read_bytes()).hexdigest() == want
    # without the pin the replay reads the host's clock, and says it differs
    del m["policy"]["process"]["clock_start"]
    unpinned = brig.reports / "unpinned.json"
    unpinned.write_text(json.dumps(m))
    differs = brig.run("replay", unpinned, "--workspace", copies[1])
    assert differs.returncode == 1 and "differs: files" in differs.stderr and "uptime.txt" in differs.stderr, differs
    assert (copies[1] / "uptime.txt").read_text() != "100000\n"
