"""The ways a file in brig's state-root cache can be one brig must not
trust (test_dircache.py, test_pool_plain.py): each test first proves that
the forgery written as brig writes it is believed, then plants it so."""
import os

from proc_helpers import marker

OTHER_UID = 65533  # neither root nor the rootless tests' nobody

TAMPER = ["world-writable", "group-writable", "foreign-owner", "second-link", "symlink", "from-inside"]


def plant(f, forged, how, brig, scratch, run_brig):
    """FORGED at F as HOW says (F absent before). "from-inside": a sandbox
    given the cache directory copies it in, which brig must refuse to
    start: RUN_BRIG(*args) runs brig as the test's caller."""
    if how == "from-inside":
        m = marker("plant")
        source = scratch / "forged"
        source.write_bytes(forged)
        source.chmod(0o644)
        r = run_brig("run", "--bind", f"{f.parent}:/c", "--ro-bind", f"{source}:/forged", "--", "sh", "-c",
                     f"cp /forged /c/{f.name} && chmod 600 /c/{f.name}; touch {brig.workspace}/{m}")
        assert r.returncode == 125 and "brig's state directory" in r.stderr, r
        assert not (brig.workspace / m).exists() and not f.exists(), "the sandbox ran with the cache directory"
        return
    f.write_bytes(forged)
    brig.chown(f)
    f.chmod({"world-writable": 0o666, "group-writable": 0o620}.get(how, 0o600))
    if how == "foreign-owner":
        os.chown(f, OTHER_UID, OTHER_UID)
    elif how == "second-link":
        os.link(f, scratch / "kept-link")
    elif how == "symlink":
        target = scratch / "forged-target"
        os.rename(f, target)
        f.symlink_to(target)
        os.lchown(f, brig.uid, brig.uid)
