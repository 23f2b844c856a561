"""Unpacking a sandbox's tar on the host without letting it write elsewhere.

A download's tar stream is made by the sandbox's own `tar` and relayed by
the server: both are untrusted here (docs/persistent.md: "whoever unpacks
it must refuse absolute names, `..` and links out of the target").
`tarfile.extractall` is not used: before Python 3.12 (and 3.11.4) it
follows every name the archive gives, and its later filters have had
their own bypasses through chains of links. What this module does:

- Every name is split into components and refused when absolute, when a
  component is `..`, or when it holds a NUL; `.` components are dropped.
- Every directory on the way is opened relative to the one before it with
  O_NOFOLLOW | O_DIRECTORY, and every file is created with
  O_CREAT | O_EXCL | O_NOFOLLOW (an existing entry is unlinked first,
  never written through): a link in the target — planted by the archive
  or already there — is never followed, so nothing lands outside.
- Symbolic links are made last, each only if its target is relative and
  stays inside the target judged component by component, with no other
  link among the components it passes through (`up -> ..` followed by
  `up/../x` would climb out once the kernel resolves `up`).
- Hard links only to a regular file already unpacked inside.
- Devices, FIFOs and other special files are never made (listed as skipped);
  setuid, setgid, sticky and group/other write bits are dropped; owners
  are never set (a root caller would otherwise make files owned by
  whichever uid the sandbox wrote into the header).
- At most `max_bytes` of file data and `max_entries` entries.
"""
from __future__ import annotations

import errno
import os
import stat
import tarfile
from typing import IO, List, Optional, Tuple

from .errors import UnsafeArchive

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _components(name: str) -> List[str]:
    """The archive name as components, or UnsafeArchive."""
    if "\0" in name:
        raise UnsafeArchive(f"archive entry {name!r}: holds a NUL byte", code="unsafe_archive")
    if name.startswith("/"):
        raise UnsafeArchive(f"archive entry {name!r}: absolute name", code="unsafe_archive", details=name)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"archive entry {name!r}: climbs out with '..'", code="unsafe_archive",
                            details=name)
    return parts


class _Unpacker:
    def __init__(self, dest: str, max_bytes: int, max_entries: int):
        os.makedirs(dest, exist_ok=True)
        self.root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.dest = dest
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.written = 0
        self.entries = 0
        self.paths: List[str] = []
        self.skipped: List[Tuple[str, str]] = []
        self.links: List[Tuple[List[str], str]] = []
        self.dirs: List[Tuple[List[str], int]] = []

    def close(self) -> None:
        os.close(self.root)

    def _refuse(self, name: str, why: str) -> UnsafeArchive:
        return UnsafeArchive(f"archive entry {name!r}: {why}; nothing of it was written outside {self.dest}",
                             code="unsafe_archive", details=name)

    def _open_parent(self, parts: List[str], name: str, create: bool) -> int:
        """A descriptor of the directory holding parts[-1] (made if asked)."""
        fd = os.dup(self.root)
        try:
            for p in parts[:-1]:
                try:
                    nfd = os.open(p, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(p, 0o700, dir_fd=fd)
                    nfd = os.open(p, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise self._refuse(name, f"'{p}' on its way is a link or not a directory") from None
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _clear(self, pfd: int, leaf: str, name: str) -> None:
        """Make room for a new file or link at leaf: an old file or link is
        unlinked (never written through); a directory is refused."""
        try:
            st = os.stat(leaf, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise self._refuse(name, "a directory is in the way")
        os.unlink(leaf, dir_fd=pfd)

    def member(self, tf: tarfile.TarFile, m: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise UnsafeArchive(f"the archive has more than max_entries={self.max_entries} entries",
                                code="too_large")
        parts = _components(m.name)
        if not parts:
            return  # the target directory itself
        rel = "/".join(parts)
        if m.isdir():
            pfd = self._open_parent(parts, m.name, True)
            try:
                try:
                    os.mkdir(parts[-1], 0o700, dir_fd=pfd)
                except FileExistsError:
                    st = os.stat(parts[-1], dir_fd=pfd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        raise self._refuse(m.name, "something that is not a directory is in the way") from None
            finally:
                os.close(pfd)
            self.dirs.append((parts, (m.mode & 0o755) | 0o700))
            self.paths.append(rel + "/")
        elif m.isreg():
            self._file(tf, m, parts, rel)
        elif m.issym():
            self.links.append((parts, m.linkname))
        elif m.islnk():
            self._hardlink(m, parts, rel)
        else:
            self.skipped.append((rel, "special file (device, FIFO) not made on the host"))

    def _file(self, tf: tarfile.TarFile, m: tarfile.TarInfo, parts: List[str], rel: str) -> None:
        if self.written + m.size > self.max_bytes:
            raise UnsafeArchive(f"archive entry {m.name!r}: the archive holds more than max_bytes="
                                f"{self.max_bytes} bytes of files", code="too_large", details=m.name)
        pfd = self._open_parent(parts, m.name, True)
        try:
            self._clear(pfd, parts[-1], m.name)
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=pfd)
        finally:
            os.close(pfd)
        with os.fdopen(fd, "wb") as out:
            src = tf.extractfile(m)
            left = m.size
            while left > 0 and src is not None:
                b = src.read(min(left, 1 << 20))
                if not b:
                    break
                out.write(b)
                left -= len(b)
            self.written += m.size - left
            os.fchmod(out.fileno(), (m.mode & 0o755) | 0o600)
            try:
                os.utime(out.fileno(), (m.mtime, m.mtime))
            except (OverflowError, ValueError, OSError):
                pass  # a sandbox's absurd mtime is not worth failing the download
        self.paths.append(rel)

    def _hardlink(self, m: tarfile.TarInfo, parts: List[str], rel: str) -> None:
        src_parts = _components(m.linkname)
        if not src_parts:
            raise self._refuse(m.name, "a hard link to the target directory")
        sfd = self._open_parent(src_parts, m.name, False)
        try:
            st = os.stat(src_parts[-1], dir_fd=sfd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise self._refuse(m.name, f"a hard link to {m.linkname!r}, which is not a file unpacked here")
            pfd = self._open_parent(parts, m.name, True)
            try:
                self._clear(pfd, parts[-1], m.name)
                os.link(src_parts[-1], parts[-1], src_dir_fd=sfd, dst_dir_fd=pfd, follow_symlinks=False)
            finally:
                os.close(pfd)
        except FileNotFoundError:
            raise self._refuse(m.name, f"a hard link to {m.linkname!r}, which was not unpacked before it") from None
        finally:
            os.close(sfd)
        self.paths.append(rel)

    def _is_link(self, parts: List[str], pending: set) -> bool:
        if "/".join(parts) in pending:
            return True
        try:
            pfd = self._open_parent(parts, "/".join(parts), False)
        except FileNotFoundError:
            return False  # nothing there to follow
        except UnsafeArchive:
            return True  # a link (or a file) already on the way
        try:
            return stat.S_ISLNK(os.stat(parts[-1], dir_fd=pfd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return False
        finally:
            os.close(pfd)

    def finish(self) -> None:
        pending = {"/".join(p) for p, _ in self.links}
        for parts, target in self.links:
            name = "/".join(parts)
            if not target or target.startswith("/") or "\0" in target:
                raise self._refuse(name, f"a link to {target!r}: only relative links inside are made")
            # Resolve the target from the link's directory, one component at
            # a time, as the kernel would; a component that is a link itself
            # (in the archive or on disk) could lead anywhere: refused.
            where = list(parts[:-1])
            comps = [c for c in target.split("/") if c not in ("", ".")]
            for i, c in enumerate(comps):
                if c == "..":
                    if not where:
                        raise self._refuse(name, f"a link to {target!r}, which leads outside the target")
                    where.pop()
                else:
                    where.append(c)
                    if i < len(comps) - 1 and self._is_link(where, pending):
                        raise self._refuse(name, f"a link to {target!r}, through the link '{'/'.join(where)}'")
            pfd = self._open_parent(parts, name, True)
            try:
                self._clear(pfd, parts[-1], name)
                os.symlink(target, parts[-1], dir_fd=pfd)
            finally:
                os.close(pfd)
            self.paths.append(name)
        # Directory modes last (deepest first): a 0555 directory is filled first.
        for parts, mode in sorted(self.dirs, key=lambda d: -len(d[0])):
            pfd = self._open_parent(parts, "/".join(parts), False)
            try:
                dfd = os.open(parts[-1], _DIR_FLAGS, dir_fd=pfd)
                try:
                    os.fchmod(dfd, mode)
                finally:
                    os.close(dfd)
            finally:
                os.close(pfd)


def extract(fileobj: IO[bytes], dest: str, max_bytes: int = 1 << 30,
            max_entries: int = 100000) -> Tuple[List[str], List[Tuple[str, str]]]:
    """Unpack the tar stream from fileobj below dest (made if missing).
    Returns (paths made, [(path, why skipped)]). Raises UnsafeArchive at
    the first entry that would reach outside dest; entries before it stay."""
    u = _Unpacker(dest, max_bytes, max_entries)
    try:
        try:
            with tarfile.open(fileobj=fileobj, mode="r|") as tf:
                for m in tf:
                    u.member(tf, m)
        except (tarfile.TarError, EOFError, ValueError, UnicodeError) as e:
            # what tarfile says of a broken stream (a sandbox's garbage)
            raise UnsafeArchive(f"not a readable tar stream: {e}", code="bad_archive") from None
        u.finish()
    finally:
        u.close()
    return u.paths, u.skipped


def pack(src: str, out: IO[bytes], arcname: str = ".") -> None:
    """A tar of the host directory (or file) src into out. Links are stored
    as links, never followed (a host link to a secret is not its contents);
    owners are left out (the sandbox's tar unpacks without them anyway)."""
    def scrub(ti: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        if not (ti.isreg() or ti.isdir() or ti.issym() or ti.islnk()):
            return None
        return ti
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tf:
        tf.add(src, arcname=arcname, recursive=True, filter=scrub)
