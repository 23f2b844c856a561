"""The policy step's directory cache (core/dircache.c, issue 19): what the
deny list's lookups found missing from a home is kept in brig's state
root, keyed by the directory's device, inode and change time, and trusted
only from brig's own file. A secret that appears in a home afterwards
must be hidden all the same, whatever a sandbox did to the home's times,
and a cache file anyone else could have written is never read.

The tests run the test-hooks build with BRIG_TEST_DIRCACHE_MARGIN_MS (a
change time younger than the margin is not recorded: 2 s in a release
build, too long to wait for a home made by the test), as the fixture's
user, root and rootless."""
import os
import stat
import struct
import subprocess
import time

import pytest

from cache_tamper import TAMPER, plant
from conftest import IS_ROOT, NOBODY
from proc_helpers import marker
from test_escape import attack


MARGIN_MS = 50
MAGIC = b"brig-dirs-1\n"


def _run_dir(brig, scratch):
    run = scratch / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    brig.chown(run)
    return run


def _home(brig, scratch, secret=False, writable=False):
    """The caller's home for these runs (HOME), with ~/.aws/credentials
    when SECRET, writable by the sandbox's user when WRITABLE (as root it
    runs as another), its change time older than the margin."""
    h = scratch / "home" / "u"
    h.mkdir(parents=True)
    (h / "public").write_text("PUBLIC\n")
    if secret:
        (h / ".aws").mkdir()
        (h / ".aws" / "credentials").write_text("AKIA-SECRET\n")
    for root, dirs, files in os.walk(scratch / "home"):
        for n in dirs + files + [""]:
            brig.chown(os.path.join(root, n))
    if writable and brig.mode == "root" and IS_ROOT:
        os.chown(h, NOBODY, NOBODY)  # the sandbox's user as root (a root-owned workspace: nobody)
    # wait for the event the cache waits for: the home's last change is
    # older than the margin (a few ms)
    deadline = time.monotonic() + 10
    while time.time_ns() - os.stat(h).st_ctime_ns <= 2 * MARGIN_MS * 1_000_000:
        assert time.monotonic() < deadline, "the clock does not move"
        time.sleep(0.005)
    return h


def _brig(brig, hooks_bindir, run, home, *args):
    env = brig.env({"HOME": str(home), "XDG_RUNTIME_DIR": str(run), "BRIG_TEST_DIRCACHE_MARGIN_MS": str(MARGIN_MS)})
    return subprocess.run(brig.prefix() + [str(hooks_bindir / "brig"), *map(str, args)], cwd=str(brig.workspace),
                          env=env, capture_output=True, text=True, timeout=60)


def _records(path):
    """The cache file's records: {(dev, ino): (ctime_ns, names)}."""
    data = path.read_bytes()
    assert data.startswith(MAGIC), data[:16]
    (n,), off = struct.unpack_from("<I", data, len(MAGIC)), len(MAGIC) + 4
    out = {}
    for _ in range(n):
        dev, ino, sec, nsec, k = struct.unpack_from("<QQqII", data, off)
        off += 32
        names = []
        for _ in range(k):
            ln = data[off]
            names.append(data[off + 1:off + 1 + ln].decode("utf-8", "surrogateescape"))
            off += 1 + ln
        out[(dev, ino)] = (sec * 1_000_000_000 + nsec, names)
    assert off == len(data)
    return out


def _forged(home, names):
    """A cache file of one record: HOME as it is now, NAMES missing."""
    st = os.stat(home)
    body = struct.pack("<QQqII", st.st_dev, st.st_ino, st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9, len(names))
    for n in names:
        body += bytes([len(n)]) + n.encode()
    return MAGIC + struct.pack("<I", 1) + body


def _leaked(brig, hooks_bindir, run, home):
    """A run given the home reads ~/.aws/credentials into its workspace:
    what arrived there, on the host."""
    m = marker("dircache")
    r = _brig(brig, hooks_bindir, run, home, "run", "--ro-bind", f"{home}:/h", "--", "sh", "-c",
              f"cat /h/public; cat /h/.aws/credentials > {brig.workspace}/{m} 2>/dev/null; true")
    assert r.returncode == 0 and "PUBLIC" in r.stdout, f"the grant itself did not work: {r}"
    out = brig.workspace / m
    got = out.read_text() if out.exists() else ""
    if out.exists():
        out.unlink()
    return got


@attack("dircache-stale-home", "a sandbox given the caller's home writably makes ~/.aws, where `aws configure` "
        "writes the credentials later, and sets the home's modification time back, so the policy step's "
        "directory cache (which recorded the home without ~/.aws) would still trust its record; the next run "
        "given the home reads the credentials",
        "files: the cache is keyed by the home's inode change time, which every change moves and nothing sets "
        "back; a record of another time is dropped and the home looked up again (dircache.c)")
def test_home_changed_behind_the_cache_is_looked_up_again(brig, hooks_bindir, scratch):
    run = _run_dir(brig, scratch)
    home = _home(brig, scratch, writable=True)
    mtime = os.stat(home).st_mtime_ns
    # The first run records the home without ~/.aws; its command makes it
    # and puts the home's times back as they were.
    r = _brig(brig, hooks_bindir, run, home, "run", "--bind", f"{home}:/h", "--", "sh", "-c",
              f"mkdir /h/.aws && touch -d @{mtime // 10**9}.{mtime % 10**9:09d} /h && echo MADE")
    assert r.returncode == 0 and "MADE" in r.stdout, r
    st = os.stat(home)
    recs = _records(run / "brig" / "cache" / "dirs-1")
    assert (st.st_dev, st.st_ino) in recs and ".aws" in recs[(st.st_dev, st.st_ino)][1], \
        f"the first run did not record the home: the test would prove nothing ({recs})"
    assert st.st_mtime_ns == mtime, "the sandbox could not set the home's time back"
    # The user configures the tool afterwards, on the host.
    (home / ".aws" / "credentials").write_text("AKIA-SECRET\n")
    got = _leaked(brig, hooks_bindir, run, home)
    assert "AKIA-SECRET" not in got, f"ATTACK WORKED: ~/.aws/credentials was read through the stale cache: {got!r}"
    # what is kept of the home says nothing of ~/.aws for its time now
    rec = _records(run / "brig" / "cache" / "dirs-1").get((st.st_dev, st.st_ino))
    assert rec is None or rec[0] != os.stat(home).st_ctime_ns or ".aws" not in rec[1], rec




@attack("dircache-planted", "a directory cache file claiming the caller's home lacks ~/.aws (its real device, inode "
        "and change time) made world- or group-writable, given to another user, kept a second link to, "
        "put there as a symlink, or written by a sandbox given the cache directory",
        "files: only a regular file of the user's, one link, writable by no one else, in the state root's cache "
        "(0700, refused to every grant) is read; the home is looked up as if there were none")
@pytest.mark.parametrize("how", TAMPER)
def test_tampered_dir_cache_is_never_trusted(brig, hooks_bindir, scratch, how):
    if how == "foreign-owner" and not IS_ROOT:
        pytest.skip("FOREIGN-OWNER CACHE NOT TESTED: giving a file to another user needs the suite to run as root")
    run = _run_dir(brig, scratch)
    home = _home(brig, scratch, secret=True)
    assert _brig(brig, hooks_bindir, run, home, "run", "--", "true").returncode == 0  # the state root and its cache
    cache = run / "brig" / "cache"
    f = cache / "dirs-1"
    forged = _forged(home, [".aws"])
    # The forgery is good: written as brig writes it, it is believed (what
    # makes the file trustworthy is only who can write it).
    f.unlink(missing_ok=True)
    f.write_bytes(forged)
    f.chmod(0o600)
    brig.chown(f)
    assert "AKIA-SECRET" in _leaked(brig, hooks_bindir, run, home), "the forged record is not one brig reads"
    f.unlink()
    plant(f, forged, how, brig, scratch, lambda *args: _brig(brig, hooks_bindir, run, home, *args))
    got = _leaked(brig, hooks_bindir, run, home)
    assert "AKIA-SECRET" not in got, f"ATTACK WORKED: a {how} cache file was trusted: {got!r}"
    if how in ("world-writable", "group-writable", "second-link"):
        # learned anew and written back as brig writes it, over the bad one
        st = os.lstat(f)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_nlink == 1, st
        assert st.st_uid == brig.uid


def test_records_of_other_directories_are_not_kept_past_the_bound(brig, hooks_bindir, scratch):
    """Every run reads the whole file: records no lookup of a run uses (of
    homes gone, as a test suite leaves them) are written back only up to
    DIRCACHE_MAX_UNUSED (16), the first of them, even by a run that
    learned nothing; the run's own record stays, and holds."""
    run = _run_dir(brig, scratch)
    home = _home(brig, scratch, secret=True)
    assert _brig(brig, hooks_bindir, run, home, "run", "--", "true").returncode == 0  # the state root and its cache
    f = run / "brig" / "cache" / "dirs-1"
    st = os.stat(home)
    own = _forged(home, [".aws"])[len(MAGIC) + 4:]
    stale = b"".join(struct.pack("<QQqII", 0xfff0, 1_000_000 + i, 1, 0, 1) + b"\x05.gone" for i in range(40))
    f.unlink(missing_ok=True)
    f.write_bytes(MAGIC + struct.pack("<I", 41) + own + stale)
    f.chmod(0o600)
    brig.chown(f)
    # the forged record of the home is read (the secret shows: it is what the file says), and the file trimmed
    assert "AKIA-SECRET" in _leaked(brig, hooks_bindir, run, home), "the file was not read: the test proves nothing"
    recs = _records(f)
    assert (st.st_dev, st.st_ino) in recs and recs[(st.st_dev, st.st_ino)][1][0] == ".aws", recs
    kept = sorted(ino for dev, ino in recs if dev == 0xfff0)
    assert kept == [1_000_000 + i for i in range(16)], kept
