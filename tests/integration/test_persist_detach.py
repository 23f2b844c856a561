"""brig exec --detach (docs/persistent.md#background-processes-and-pipes):
the command starts in the background with its output in a log inside the
sandbox, brig prints its pid and returns at once — also in a pipeline,
which a background process of a plain `brig exec` would hold open. The
command outlives its client, not its sandbox. Root and rootless."""
import json
import os
import shlex
import subprocess

from persist_helpers import pid_alive, sandboxes  # noqa: F401 (fixture)
from proc_helpers import marker, pids_with, wait_gone, wait_until
from test_escape import attack

# A web server on the sandbox's own loopback, its command line marked so
# the host can find it.
SERVER = ("python3 -c 'import http.server as h; h.ThreadingHTTPServer((\"127.0.0.1\", 8000), "
          "h.SimpleHTTPRequestHandler).serve_forever()' {mark}")
FETCH = ("python3 -c 'import time, urllib.request as u\n"
         "for i in range(100):\n"
         "    try:\n"
         "        print(u.urlopen(\"http://127.0.0.1:8000/\").status); break\n"
         "    except OSError: time.sleep(0.1)'")


def piped(sandboxes, *args, timeout=30):
    """`brig ARGS | cat` through a shell: returns once the pipe is closed."""
    cmd = shlex.join(sandboxes.brig.cmd(*args))
    return subprocess.run(["sh", "-c", f"{cmd} | cat"], cwd=str(sandboxes.brig.workspace),
                          env=sandboxes.brig.env(sandboxes.env()), capture_output=True, text=True, timeout=timeout)


def test_detach_returns_in_a_pipeline_and_the_server_answers_later(brig, sandboxes):
    name, _ = sandboxes.create()
    mark = marker("detach")
    report = brig.reports / "detach.json"
    # The brief's case: a server sent to the background, and `| cat`.
    r = piped(sandboxes, "exec", name, "--detach", "--json-report", report, "--",
              "sh", "-c", SERVER.format(mark=mark) + " & echo started")
    assert r.returncode == 0, r
    words = r.stdout.split()
    assert words[0] == "pid" and words[2] == "log", r
    pid, log = int(words[1]), words[3]
    assert log == f"/tmp/brig-exec-{pid}.log", r
    assert f"brig exec {name} -- cat {log}" in r.stderr, r
    rep = json.loads(report.read_text())
    assert rep["reason"] == "detached" and rep["exit_code"] == 0, rep
    assert rep["detached"] == {"pid": pid, "log": log}, rep
    assert wait_until(lambda: pids_with(mark), 10), "the server is not running on the host"
    # a later exec reaches it, and the log holds what the command printed
    r = sandboxes.sh(name, FETCH)
    assert r.returncode == 0 and r.stdout.strip() == "200", r
    r = sandboxes.exec(name, "--", "cat", log)
    assert r.returncode == 0 and "started" in r.stdout, r


def test_detach_failures_are_reported(brig, sandboxes):
    name, _ = sandboxes.create()
    r = sandboxes.exec(name, "--detach", "--", "no-such-command-here")
    assert r.returncode == 127 and "command not found 'no-such-command-here'" in r.stderr, r
    r = sandboxes.exec(name, "--detach", "--tty", "--", "true")
    assert r.returncode == 125 and "--detach runs the command without a terminal: drop --tty" in r.stderr, r


@attack("detach-log-planted", "symlinks (to a workspace file), FIFOs and stale logs planted at every name the "
        "next detached exec's log could take, /tmp/brig-exec-PID.log (a restored snapshot's /tmp holds such logs "
        "while pids start again): write through the link, block the exec on the FIFO, or keep it from starting",
        "what is at the name is unlinked (which follows nothing) and the log made new as the sandbox user "
        "(O_CREAT|O_EXCL|O_NOFOLLOW); a name that stays (a directory) fails the exec with 125 naming the file")
def test_detach_log_planted_is_never_followed(brig, sandboxes):
    name, _ = sandboxes.create()
    victim = brig.workspace / "victim"
    victim.write_text("original\n")
    brig.chown(victim)
    plant = (f"import os, sys\nme = os.getpid()\n"
             f"for p in range(me + 1, me + 400):\n"
             f"    n = f'/tmp/brig-exec-{{p}}.log'\n"
             f"    if sys.argv[1] == 'dir':\n"
             f"        os.path.lexists(n) and os.unlink(n)\n"
             f"        os.mkdir(n)\n"
             f"    elif p % 3 == 0:\n"
             f"        os.symlink('{victim}', n)\n"
             f"    elif p % 3 == 1:\n"
             f"        os.mkfifo(n)\n"
             f"    else:\n"
             f"        open(n, 'w').write('stale\\n')\n")
    r = sandboxes.exec(name, "--", "python3", "-c", plant, "mixed")
    assert r.returncode == 0, r
    ran = brig.workspace / "ran"
    r = sandboxes.exec(name, "--detach", "--", "sh", "-c", f"echo fresh; touch {ran}", timeout=30)
    assert r.returncode == 0, r                          # it started (it failed on any name there, before)
    log = r.stdout.split()[3]
    assert wait_until(ran.exists, 10), "the detached command did not run"
    assert victim.read_text() == "original\n"            # nothing written through a link
    r = sandboxes.exec(name, "--", "sh", "-c", f"stat -c %F {log}; cat {log}")
    assert r.stdout == "regular file\nfresh\n", r       # its own new log, nothing of what was there
    # a name that cannot be removed: refused, naming the file, and nothing runs
    r = sandboxes.exec(name, "--", "python3", "-c", plant, "dir")
    assert r.returncode == 0, r
    ran.unlink()
    r = sandboxes.exec(name, "--detach", "--", "touch", str(ran), timeout=30)
    assert r.returncode == 125, r
    assert "(made new, never through a link): File exists" in r.stderr, r
    assert not ran.exists()


@attack("detach-outlives-sandbox", "a detached command left running when its client is gone and its "
        "sandbox is stopped or removed, or run past --timeout",
        "it is a process of the sandbox like any exec: the stop kills every process inside, the timeout applies")
def test_detached_command_dies_with_its_sandbox(brig, sandboxes):
    name, _ = sandboxes.create()
    mark, timed = marker("detached"), marker("timed")
    r = sandboxes.exec(name, "--detach", "--", "python3", "-c", "import time; time.sleep(600)", mark)
    assert r.returncode == 0, r
    r = sandboxes.exec(name, "--detach", "--timeout", "1s", "--", "python3", "-c", "import time; time.sleep(600)",
                       timed)
    assert r.returncode == 0, r
    assert wait_until(lambda: pids_with(mark), 10), "the detached command is not running"
    assert wait_gone(timed, 15), "--timeout did not end the detached command"
    pids = pids_with(mark)
    assert pids and all(pid_alive(p) for p in pids)      # its client is long gone: it runs on
    r = sandboxes.brig_cmd("stop", name)
    assert r.returncode == 0, r
    assert wait_gone(mark, 15), f"the detached command outlived its sandbox: {pids_with(mark)}"
    assert not any(os.path.exists(f"/proc/{p}") and pid_alive(p) for p in pids)
