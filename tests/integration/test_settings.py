"""The table of policy settings (src/lib/policy/settings.c) drives brig
run's flags and --help, policy files, their schema and the dump: each of
those is held to the table here, so a setting added as one entry is also
documented (man page, completions) and round-trips. `brig-settings` (built
in tests/, not installed) prints the table through libbrig's public API."""
import json
import os
import re
import subprocess

from conftest import BUILD, REPO
from persist_helpers import sandboxes  # noqa: F401 (fixture)

SETTINGS = BUILD / "tests" / "brig-settings"

# One valid value per flag that a policy file holds; every such flag of the
# table must be here (a new setting: add its example).
EXAMPLES = {
    "workspace": "/srv", "read-only-workspace": None, "ro-bind": "/usr/share:/opt/share", "bind": "/var/tmp",
    "tmpfs": "/scratch:16M", "tmp-size": "1G", "home-size": "128M", "shm-size": "32M", "sys": None,
    "deny": "~/.secret-tokens", "unsafe-allow-secret": "~/.netrc", "env": "GREETING=hello", "keep-env": "TERM",
    "cwd": "/srv/sub", "hostname": "box", "clock-start": "100000", "tty": None, "no-tty": None, "terminal-passthrough": None,
    "memory": "2G", "pids": "99", "cpus": "1.5", "io-weight": "200", "timeout": "1h30m", "kill-after": "2s",
    "cpu-time": "90s", "nofile": "512", "nproc": "77", "fsize": "64M", "stack": "8M", "require-limits": None,
    "seccomp-allow": "personality", "seccomp-deny": "kcmp:EACCES", "seccomp-rule": "getpriority(a0==0)=log",
    "allow-degraded": "landlock", "wall": "gvisor", "net": "proxy", "allow-host": "pypi.org", "allow-private-host": "git.lan",
    "deny-host": "bad.example", "allow-cidr": "10.1.0.0/16:5432", "resolve": "pypi.org:192.0.2.7",
    "upstream-proxy": "http://127.0.0.1:3128", "secret": "API_TOKEN=env:API_TOKEN",
    "secret-host": "API_TOKEN=api.example.com", "secret-header": "API_TOKEN=X-Api-Key",
    "http-rule": "api.example.com POST /v1/messages", "upstream-ca": "/etc/ssl/certs/ca-certificates.crt",
    "allow-unix": "/run/postgresql/.s.PGSQL.5432",
    "audit": "/tmp/audit.jsonl", "audit-no-exec": None, "changes-max": "5000", "manifest": "/tmp/manifest.json", "timings": None,
    "json-report": "/tmp/report.json", "copy-in": "/etc/hostname:~/hostname",
    "copy-in-secret": "~/.ssh/id_ed25519:~/.ssh/id_ed25519", "ssh-agent": None, "git-identity": None,
    "carry-config": "npm",
}


def _table():
    out = subprocess.run([str(SETTINGS), "flags"], capture_output=True, text=True, check=True, timeout=10).stdout
    rows = [dict(zip(("name", "arg", "key", "flags"), line.split("\t"))) for line in out.splitlines()]
    assert len(rows) > 40, rows
    return rows


def _schema_at(schema, key):
    node = schema
    for part in key.strip("/").split("/"):
        node = node.get("properties", {}).get(part)
        if node is None:
            return None
    return node


def test_schema_in_the_tree_is_the_generated_one():
    """docs/policy.schema.json is what the table says (make schema writes it)."""
    made = subprocess.run([str(SETTINGS), "schema"], capture_output=True, text=True, check=True, timeout=10).stdout
    tree = (REPO / "docs" / "policy.schema.json").read_text()
    assert tree == made, "docs/policy.schema.json is not the table's schema: run `make schema`"


def test_every_flag_has_help_a_key_a_man_page_entry_and_completions():
    help_text = subprocess.run([str(BUILD / "brig"), "run", "--help"], capture_output=True, text=True,
                               check=True, timeout=10).stdout
    schema = json.loads((REPO / "docs" / "policy.schema.json").read_text())
    page = (REPO / "docs" / "man" / "brig-run.1").read_text()
    lines = page.splitlines()
    documented = {"--" + o.replace("\\-", "-") for i, line in enumerate(lines[1:], 1) if lines[i - 1] == ".TP"
                  for o in re.findall(r"\\-\\-((?:[a-z0-9]|\\-)+)", line)}
    bash = (REPO / "contrib" / "completion" / "brig.bash").read_text()
    zsh = (REPO / "contrib" / "completion" / "_brig").read_text()
    for row in _table():
        flag = "--" + row["name"]
        assert re.search(rf"^  (.* / )?{flag}( |$)", help_text, re.M), (flag, "not in brig run --help")
        if row["key"] != "-":
            assert _schema_at(schema, row["key"]) is not None, (flag, row["key"], "not in the schema")
        assert flag in documented, (flag, "not documented in docs/man/brig-run.1")
        assert re.search(rf"(?<![\w-]){flag}(?![\w-])", bash), (flag, "not in the bash completion")
        assert re.search(rf"'\*?(\([^)]*\))?{flag}[=\[']", zsh), (flag, "not in the zsh completion")


def test_every_setting_of_a_file_round_trips():
    """Each flag a policy file holds, given once: the dump loads back (as a
    --policy file) to the same dump, and every key the dump writes is one of
    the table's and of the schema's."""
    rows = [r for r in _table() if r["key"] != "-"]
    missing = sorted(r["name"] for r in rows if r["name"] not in EXAMPLES)
    assert not missing, f"add an example value for {missing} to EXAMPLES"
    args = []
    for r in rows:
        value = EXAMPLES[r["name"]]
        if r["name"] in ("no-tty", "unsafe-allow-secret", "copy-in-secret"):
            continue  # --tty stands for the setting; the other two need a host secret of the caller's
        args += [f"--{r['name']}"] + ([value] if value is not None else [])
    brig = str(BUILD / "brig")
    first = subprocess.run([brig, "policy", "show", *args], capture_output=True, text=True, timeout=10)
    assert first.returncode == 0, first
    dumped = json.loads(first.stdout)
    keys = {r["key"] for r in rows} | {"/$schema", "/extends"}
    schema = json.loads((REPO / "docs" / "policy.schema.json").read_text())
    for section, body in dumped.items():
        for name in body:
            assert f"/{section}/{name}" in keys, (section, name, "dumped but not a setting of the table")
            assert _schema_at(schema, f"/{section}/{name}") is not None, (section, name)
    written = {f"/{section}/{name}" for section, body in dumped.items() for name in body}
    assert keys - {"/$schema", "/extends"} <= written, sorted(keys - {"/$schema", "/extends"} - written)
    again = subprocess.run([brig, "policy", "show", "--policy", "/dev/stdin"], input=first.stdout,
                           capture_output=True, text=True, timeout=10)
    assert again.returncode == 0, again
    assert again.stdout == first.stdout


def test_run_only_flags_are_refused_by_create_and_pool(brig, sandboxes):
    """What the table marks BRIG_OPTION_RUN_ONLY (the caller's descriptors,
    the audit stream) brig create and brig pool refuse, naming the flag,
    and make nothing."""
    rows = [r for r in _table() if "run-only" in r["flags"]]
    assert {r["name"] for r in rows} == {"pass-fd", "audit", "audit-fd", "json-report-fd", "manifest", "timings"}, rows
    rd, wr = os.pipe()
    try:
        for row in rows:
            value = str(wr) if row["arg"] == "N" else str(brig.base / "out.jsonl")
            name = sandboxes.new_name()
            for cmd in (["create", name], ["pool", "--size", "1"]):
                flag = [f"--{row['name']}"] + ([value] if row["arg"] != "-" else [])
                r = sandboxes.brig_cmd(*cmd, *flag, pass_fds=(wr,))
                stem = "--" + row["name"].removesuffix("-fd")
                assert r.returncode == 125 and stem in r.stderr, (cmd, row, r)
            assert not (sandboxes.root / name).exists(), (row, "a refused create left its state")
            pools = sandboxes.root / "pools"
            assert not pools.exists() or not any(pools.iterdir()), (row, "a refused pool left its state")
    finally:
        os.close(rd)
        os.close(wr)
