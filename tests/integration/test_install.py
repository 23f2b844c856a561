"""make install (README: Install): the installed tree runs on its own — the
CLI (libbrig linked in) finds its brig-supervisor and brig-serve in
libexec/brig, brig-serve its libbrig through its RUNPATH,
root and rootless — its man pages render without warnings and document
exactly the options each command's --help lists, its bash completion
offers each command's options and the sandboxes' names, its zsh completion
parses and names every option, and brig.pc builds a program against the
installed header and library."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import BUILD, REPO, _OURS
from persist_helpers import sandboxes  # noqa: F401 (fixture)

PREFIX = "usr/local"
# brig create's --help: "Every option of brig run applies ... except" these
# (and --quiet and --pooled, which only a run has); brig pool and brig
# policy show|explain refuse or ignore them too.
RUN_ONLY = {"--pool", "--pass-fd", "--json-report", "--json-report-fd", "--audit", "--audit-fd", "--manifest", "--timings",
            "--quiet",
            "--pooled"}
# The commands that take brig run's options after their own.
TAKES_RUN_OPTIONS = {"create", "pool", "policy", "mcp"}


@pytest.fixture(scope="module")
def dest():
    """One `make install PREFIX=/usr/local DESTDIR=...` for the module, in
    a directory the unprivileged user can traverse."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="brig-install-", dir="/tmp"))
    _OURS["dirs"].append(str(d))
    d.chmod(0o755)
    r = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "install", f"BUILD={BUILD}",
                        "PREFIX=/usr/local", f"DESTDIR={d}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _libdir(dest):
    return next((dest / PREFIX).rglob("libbrig.so.1")).parent


def _loaded(exe, env=None):
    """What the loader loads for EXE."""
    return subprocess.run([str(exe)], env={**(env or {}), "LD_TRACE_LOADED_OBJECTS": "1"}, capture_output=True,
                          text=True, timeout=10).stdout


def _loaded_libbrig(exe, env=None):
    """Where the loader takes libbrig.so.1 from for EXE (resolved)."""
    out = _loaded(exe, env)
    m = re.search(r"libbrig\.so\.1 => (/\S+) ", out)
    assert m, out
    return pathlib.Path(os.path.realpath(m.group(1)))


def _help(*cmd):
    r = subprocess.run([str(BUILD / "brig"), *cmd, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stderr == "", (cmd, r)
    return r.stdout


def _help_options(text):
    """The options a --help text lists: those of its synopsis lines
    ("usage: brig pool --size N ...") and those that start an indented
    line ("  --tty / --no-tty  ...", "  --nproc N  --fsize SIZE ..."),
    never the ones its prose mentions."""
    opts = set()
    for line in text.splitlines():
        if re.match(r"\s*(usage:\s+)?brig\b", line):
            opts |= set(re.findall(r"(?<![\w-])--[a-z][\w-]*", re.split(r"\s{2,}", line.strip())[0]))
        elif re.match(r"\s+--[a-z]", line):
            for field in re.split(r"\s{2,}", line.strip()):
                if not field.startswith("--"):
                    break
                toks = field.split()
                for i, tok in enumerate(toks):
                    if i == 0 or toks[i - 1] == "/":
                        opts.add(re.match(r"--[a-z][\w-]*", tok).group(0))
    return opts


def _commands():
    """brig --help's commands ("stop|start|rm NAME..." is three, and
    "commit NAME ... / reset NAME" two)."""
    cmds = []
    for line in _help().splitlines():
        m = re.match(r"  ([a-z][a-z|]*)\b", line)
        if m:
            cmds += m.group(1).split("|") + re.findall(r" / ([a-z]+) [A-Z]", line)
    assert {"run", "create", "exec", "ls", "version"} <= set(cmds), cmds
    return cmds


def _command_help_options(cmd):
    return _help_options(_help(cmd))


def _page_options(text):
    """The options a page documents: its .TP tags' --options."""
    lines = text.splitlines()
    return {"--" + o.replace("\\-", "-") for i, line in enumerate(lines[1:], 1) if lines[i - 1] == ".TP"
            for o in re.findall(r"\\-\\-((?:[a-z0-9]|\\-)+)", line)}


def _page_commands(text):
    """The commands a page is for, from its NAME line: brig\\-stop, ... \\- ..."""
    name = text.split(".SH NAME\n", 1)[1].split("\n", 1)[0]
    return [c.replace("brig\\-", "") for c in name.split(" \\- ")[0].split(", ")]


def test_installed_brig_runs_with_its_own_library_and_supervisor(brig, sandboxes, dest):
    exe = dest / PREFIX / "bin" / "brig"
    sup = dest / PREFIX / "libexec" / "brig" / "brig-supervisor"
    engine = dest / PREFIX / "libexec" / "brig" / "brig-engine"
    # brig's engine has libbrig linked in, and loads neither it nor brig
    # serve's libmicrohttpd (docs/benchmarks.md: its start); brig-serve
    # takes libbrig from the installed tree
    # (RUNPATH $ORIGIN/../../LIBDIR), with no LD_LIBRARY_PATH.
    assert "libbrig" not in _loaded(engine) and "libmicrohttpd" not in _loaded(engine), _loaded(engine)
    assert _loaded_libbrig(dest / PREFIX / "libexec" / "brig" / "brig-serve").parent == _libdir(dest)
    r = subprocess.run(brig.prefix() + [str(exe), "serve", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("usage: brig serve"), r
    env = brig.env(sandboxes.env())
    run = subprocess.run(brig.prefix() + [str(exe), "run", "--", "sh", "-c", "echo inside $(id -u)"],
                         cwd=str(brig.workspace), env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("inside "), run
    name = sandboxes.new_name("inst")
    sandboxes.names.append(name)
    r = subprocess.run(brig.prefix() + [str(exe), "create", name], cwd=str(brig.workspace), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    state = sandboxes.state(name)
    assert os.readlink(f"/proc/{state['supervisor_pid']}/exe") == str(sup)
    r = subprocess.run(brig.prefix() + [str(exe), "exec", name, "--", "echo", "installed"],
                       cwd=str(brig.workspace), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "installed\n", r
    # The installed completion offers the sandbox by name, as the user who
    # made it (`brig ls --json`).
    assert name in _complete(dest, [str(exe), "exec", name[:6]], prefix=brig.prefix(), env=env)
    assert name in _zcomplete(dest, f"{exe} exec {name[:6]}", prefix=brig.prefix(), env=env)
    r = subprocess.run(brig.prefix() + [str(exe), "rm", name], cwd=str(brig.workspace), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    sandboxes.assert_gone(name, state)


def test_installed_tree_moved_elsewhere_still_finds_its_library(dest, scratch):
    moved = scratch / "opt" / "brig"
    shutil.copytree(dest / PREFIX, moved, symlinks=True)
    assert _loaded_libbrig(moved / "libexec" / "brig" / "brig-serve").is_relative_to(moved)
    r = subprocess.run([str(moved / "bin" / "brig"), "version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("brig "), r
    # brig-serve found from brig's own directory (bin/../libexec/brig): the
    # configured prefix's is a DESTDIR tree's, not on this host
    assert not pathlib.Path("/", PREFIX, "libexec", "brig", "brig-serve").exists()
    r = subprocess.run([str(moved / "bin" / "brig"), "serve", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("usage: brig serve"), r


def _pages(dest):
    pages = sorted((dest / PREFIX / "share" / "man" / "man1").glob("brig*.1"))
    assert [p.name for p in pages] == sorted(p.name for p in (REPO / "docs" / "man").glob("*.1")), pages
    return pages


def test_man_pages_render_without_warnings(dest):
    for page in _pages(dest):
        r = subprocess.run(["man", "--warnings", "-l", str(page)], env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin",
                           "LANG": "C.UTF-8"}, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stderr == "" and "NAME" in r.stdout, (page.name, r.stderr)


def test_man_pages_document_exactly_the_options_of_each_help(dest):
    """Every option a command's --help lists is documented on its page, and
    the page documents no other: a flag added, renamed or removed on one
    side fails here."""
    covered = {}
    for page in _pages(dest):
        text = page.read_text()
        if page.name == "brig.1":
            assert _page_options(text) == {"--help", "--version"}
            covered["version"] = page.name
            continue
        cmds = _page_commands(text)
        want = set().union(*(_command_help_options(c) for c in cmds))
        got = _page_options(text)
        assert got == want, (page.name, "undocumented:", sorted(want - got), "not in --help:", sorted(got - want))
        for c in cmds:
            covered[c] = page.name
    lines = (REPO / "docs" / "man" / "brig.1").read_text().split(".SH COMMANDS\n")[1].split(".SH ")[0].splitlines()
    listed = " ".join(line for i, line in enumerate(lines[1:], 1) if lines[i - 1] == ".TP")
    for cmd in _commands():
        assert cmd in covered, f"no man page documents brig {cmd}"
        assert re.search(rf"(?<![\w-]){cmd}(?![\w-])", listed), f"brig(1) lists no command {cmd}"
    assert _help_options(_help("run")) >= {"--workspace", "--nproc", "--stack", "--no-tty", "--pooled"}


def test_help_lists_every_option_the_parser_takes():
    """The other side of the pages: what brig run's and brig exec's getopt
    tables (and run's take_flag) accept is what their --help lists. brig
    run's getopt table is libbrig's table of settings (brig-settings flags
    lists it)."""
    flags = subprocess.run([str(BUILD / "tests" / "brig-settings"), "flags"], capture_output=True, text=True,
                           check=True).stdout
    for src, cmd in (("run.c", "run"), ("sandbox.c", "exec")):
        text = (REPO / "src" / "cli" / src).read_text()
        parsed = {"--" + o for o in re.findall(r'\{ "([a-z][\w-]*)", (?:no|required|optional)_argument', text)}
        if cmd == "run":
            parsed |= {"--" + line.split("\t")[0] for line in flags.splitlines()}
        parsed |= set(re.findall(r'take_flag\(&argc, argv, "(--[\w-]+)"\)', text))
        if cmd == "run":  # brig run --pool NAME, read first (run.c)
            parsed |= set(re.findall(r'strcmp\(argv\[1\], "(--[\w-]+)"\) == 0', text))
        assert len(parsed) > 5, (src, parsed)
        assert parsed - {"--help"} == _help_options(_help(cmd)), (cmd, parsed ^ _help_options(_help(cmd)))


def _complete(dest, words, prefix=(), env=None):
    """What the installed bash completion offers for WORDS (the last one
    is being completed)."""
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _brig; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    comp = dest / PREFIX / "share" / "bash-completion" / "completions" / "brig"
    r = subprocess.run([*prefix, "bash", "--norc", "--noprofile", "-c", script, "bash", str(comp), *words],
                       env=env or {"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r
    return set(r.stdout.split())


def test_bash_completion_offers_each_commands_options(dest):
    brig = str(dest / PREFIX / "bin" / "brig")
    cmds = set(_commands())
    first = _complete(dest, [brig, ""])
    assert cmds <= first and first - cmds <= {"help", "--help", "--version"}, first ^ cmds
    assert _complete(dest, [brig, "di"]) == {"diff"}
    run = _command_help_options("run")
    for cmd in sorted(cmds - {"version"}):
        words = {"exec": [cmd, "NAME"], "policy": [cmd, "show"]}.get(cmd, [cmd])
        want = _command_help_options(cmd) | {"--help"}
        if cmd in TAKES_RUN_OPTIONS:
            want |= run - RUN_ONLY
        got = _complete(dest, [brig, *words, "-"])
        assert got == want, (cmd, "missing:", sorted(want - got), "not in --help:", sorted(got - want))
    assert _complete(dest, [brig, "run", "--net", ""]) == {"none", "proxy", "filtered", "host"}
    assert _complete(dest, [brig, "create", "x", "--workspace-mode", "o"]) == {"overlay"}
    assert _complete(dest, [brig, "policy", ""]) == {"show", "check", "explain", "--help"}
    assert _complete(dest, [brig, "files", "NAME", "tar"]) == {"tar-out", "tar-in"}
    assert "sh" in _complete(dest, [brig, "run", "--memory", "1G", "--", "s"])


# Completes LINE in an interactive zsh on a pty (zsh/zpty) with the
# installed _brig in $fpath, and prints each candidate compadd is given.
# The markers are put together at run time so the echo of the typed
# commands never matches them.
ZSH_COMPLETE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT= ; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; m=Z; m+=HIT:"
zpty -w z 'compprefuncs=( setup ); setup() { compadd() { builtin compadd -O hits "$@"; print -l -- ${hits/#/$m} >/dev/tty; builtin compadd "$@" } }'
zpty -w z 'comppostfuncs=( done_ ); done_() { print -- "<<DO""NE>>" >/dev/tty }'
zpty -w z "$2"$'\t'
zpty -r z out '*<<DONE>>*'
print -r -- "$out" | tr -d '\r' | grep -ao 'ZHIT:.*' | sed 's/^ZHIT://'
zpty -d z
"""


def _zcomplete(dest, line, prefix=(), env=None):
    r = subprocess.run([*prefix, "zsh", "-f", "-c", ZSH_COMPLETE, "zsh",
                        str(dest / PREFIX / "share" / "zsh" / "site-functions"), line],
                       env={**(env or {}), "PATH": "/usr/bin:/bin", "TERM": "dumb"}, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r
    return set(r.stdout.split()) - {"--"}


def test_zsh_completion_parses_and_names_every_option(dest):
    zsh = shutil.which("zsh")
    if not zsh:
        pytest.fail("zsh is not installed: scripts/install-deps installs it")
    comp = dest / PREFIX / "share" / "zsh" / "site-functions" / "_brig"
    r = subprocess.run([zsh, "-n", str(comp)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r
    text = comp.read_text()
    assert text.startswith("#compdef brig\n")
    named = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)[=\[]", text))
    for cmd in _commands():
        missing = _command_help_options(cmd) - named
        assert not missing, (cmd, sorted(missing))
        assert f"'{cmd}:" in text, f"zsh completion lists no command {cmd}"
    brig = str(dest / PREFIX / "bin" / "brig")
    assert _zcomplete(dest, f"{brig} ") == set(_commands())
    assert _zcomplete(dest, f"{brig} exec NAME --") == _command_help_options("exec") | {"--help"}
    assert _zcomplete(dest, f"{brig} run --net ") == {"none", "proxy", "filtered", "host"}
    assert _zcomplete(dest, f"{brig} files NAME tar") == {"tar-out", "tar-in"}


def test_pkg_config_builds_a_program_against_the_installed_library(dest, scratch):
    libdir = _libdir(dest)
    env = {"PATH": "/usr/bin:/bin", "PKG_CONFIG_PATH": str(libdir / "pkgconfig"),
           "PKG_CONFIG_SYSROOT_DIR": str(dest)}
    r = subprocess.run(["pkg-config", "--modversion", "brig"], env=env, capture_output=True, text=True, timeout=10)
    version = subprocess.run([str(BUILD / "brig"), "version"], capture_output=True, text=True).stdout.split()[1]
    assert r.returncode == 0 and r.stdout.strip() == version, r
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "brig"], env=env, capture_output=True, text=True,
                           timeout=10)
    assert flags.returncode == 0 and f"-I{dest}/{PREFIX}/include" in flags.stdout, flags
    src = scratch / "hello.c"
    src.write_text('#include <brig.h>\n#include <stdio.h>\n'
                   'int main(void) { brig_policy *p = brig_policy_new(); if (!p) return 1;\n'
                   '        brig_policy_free(p); printf("libbrig %s\\n", brig_version()); return 0; }\n')
    # A sanitizer build's libbrig needs the program linked with the runtime.
    sanitize = [f"-fsanitize={o['value']}" for o in json.loads(subprocess.run(
        ["meson", "introspect", str(BUILD), "--buildoptions"], capture_output=True, text=True, check=True).stdout)
        if o["name"] == "b_sanitize" and o["value"] != "none"]
    r = subprocess.run(["cc", "-Wall", "-Werror", *sanitize, "-o", str(scratch / "hello"), str(src),
                        *flags.stdout.split()],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    r = subprocess.run([str(scratch / "hello")], env={"LD_LIBRARY_PATH": str(libdir)}, capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0 and r.stdout == f"libbrig {version}\n", r
    assert _loaded_libbrig(scratch / "hello", {"LD_LIBRARY_PATH": str(libdir)}).parent == libdir
