"""Reading and writing files a sandboxed command may have planted: beneath a root, regular, capped.

Every service that reads workspace content goes through `SafeRoot`: a path is resolved beneath
the root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (or, without openat2, one
component at a time with `O_NOFOLLOW`), opened non-blocking so a FIFO cannot hang the reader, and
checked on the open descriptor (no check-then-use race) to be a regular file within a size cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import platform
import stat
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
MAX_DEPTH = 32  # folders below the one listed; a planted deep tree ends the walk there


class FileRefused(Exception):
    """A file that was not read or written; the message is a one-line reason a user can act on.

    `kind` is one of: missing, outside, not_regular, too_large, denied, invalid, error.
    """

    def __init__(self, reason: str, kind: str = "error"):
        super().__init__(reason)
        self.kind = kind


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _libc_openat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    number = _SYS_OPENAT2.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    probe = _OpenHow(_DIR_FLAGS, 0, RESOLVE_BENEATH)
    fd = fn(number, -100, b".", ctypes.byref(probe), ctypes.sizeof(probe))
    if fd < 0:
        return None
    os.close(fd)
    return fn


_OPENAT2 = _libc_openat2()
HAVE_OPENAT2 = _OPENAT2 is not None


def openat2_beneath(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """Opens path under dir_fd; symlinks and `..` may not resolve outside dir_fd."""
    if _OPENAT2 is None:
        return _walk_nofollow(dir_fd, path, flags, mode)
    how = _OpenHow(flags | os.O_CLOEXEC, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    for _ in range(8):  # EAGAIN: a concurrent rename; the kernel asks us to retry
        fd = _OPENAT2(
            _SYS_OPENAT2[platform.machine()],
            dir_fd,
            os.fsencode(path),
            ctypes.byref(how),
            ctypes.sizeof(how),
        )
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            raise OSError(err, os.strerror(err), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def _walk_nofollow(dir_fd: int, path: str, flags: int, mode: int) -> int:
    """Fallback without openat2: one component at a time, no symlinks and no `..` at all."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise OSError(errno.EXDEV, "'..' is not allowed", path)
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=current)
            os.close(current)
            current = nxt
        last = parts[-1] if parts else "."
        return os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


class SafeRoot:
    """A folder whose content is hostile input; every path given is resolved beneath it.

    `aliases` are absolute paths that also name the root (the sandbox's `/workspace`);
    `owner` (uid, gid) is given to files and folders this creates; `label` names the root in
    reasons ("workspace", "skill folder").
    """

    def __init__(
        self,
        root: Path,
        owner: tuple[int, int] | None = None,
        aliases: tuple[str, ...] = (),
        label: str = "workspace",
    ):
        self.root = root.resolve()
        self.owner = owner
        self.aliases = aliases
        self.label = label
        if not HAVE_OPENAT2:
            log.warning("openat2 is unavailable: file access falls back to a no-symlink walk")

    def relative(self, user_path: str) -> str:
        """The path relative to the root; absolute paths must name the root."""
        path = (user_path or ".").strip()
        if "\x00" in path:
            raise FileRefused("path contains a NUL byte", "invalid")
        for prefix in (*self.aliases, str(self.root)):
            if path == prefix:
                return "."
            if path.startswith(prefix + "/"):
                return path[len(prefix) + 1 :] or "."
        if path.startswith("/"):
            raise FileRefused(
                f"{user_path}: outside the {self.label} (use paths relative to it)", "outside"
            )
        if path.startswith("~"):
            raise FileRefused(f"{user_path}: '~' is not expanded; use relative paths", "invalid")
        return path

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise FileRefused(f"{self.label} {self.root}: {exc.strerror}", "missing") from exc
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def open(self, user_path: str, flags: int) -> Iterator[int]:
        """An fd for an existing path beneath the root (non-blocking: FIFOs cannot hang)."""
        rel = self.relative(user_path)
        with self._root_fd() as root:
            try:
                extra = 0 if flags & os.O_PATH else os.O_NONBLOCK | os.O_NOCTTY
                fd = openat2_beneath(root, rel, flags | extra)
            except OSError as exc:
                raise refusal(user_path, exc, self.label) from exc
        try:
            yield fd
        finally:
            os.close(fd)

    def read_bytes(self, user_path: str, max_bytes: int) -> bytes:
        """The bytes of a regular file, refusing devices, FIFOs, hard links and oversize files."""
        return self._read(user_path, max_bytes, refuse_larger=True)[0]

    def read_stat(self, user_path: str, max_bytes: int) -> tuple[bytes, os.stat_result]:
        """`read_bytes`, with the file's status as its open descriptor had it before the read."""
        data, _, info = self._read(user_path, max_bytes, refuse_larger=True)
        return data, info

    def read_head(self, user_path: str, max_bytes: int) -> tuple[bytes, bool]:
        """At most `max_bytes` of a regular file, and whether that is all of it."""
        data, whole, _ = self._read(user_path, max_bytes, refuse_larger=False)
        return data, whole

    def _read(
        self, user_path: str, max_bytes: int, refuse_larger: bool
    ) -> tuple[bytes, bool, os.stat_result]:
        with self.open(user_path, os.O_RDONLY) as fd:
            info = os.fstat(fd)
            require_regular(user_path, info)
            if info.st_size > max_bytes and refuse_larger:
                raise FileRefused(
                    f"{user_path}: {info.st_size} bytes, over the {max_bytes}-byte read limit",
                    "too_large",
                )
            os.set_blocking(fd, True)
            chunks, total = [], 0
            while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total)):
                total += len(chunk)
                chunks.append(chunk)
                if total > max_bytes:
                    if refuse_larger:
                        raise FileRefused(
                            f"{user_path}: grew past the {max_bytes}-byte read limit", "too_large"
                        )
                    return b"".join(chunks)[:max_bytes], False, info
            return b"".join(chunks), True, info

    def read_text(self, user_path: str, max_bytes: int) -> str:
        """A regular file's text (UTF-8, bad bytes replaced), within `max_bytes`."""
        return self.read_bytes(user_path, max_bytes).decode("utf-8", errors="replace")

    async def read_text_async(self, user_path: str, max_bytes: int) -> str:
        """`read_text` in a worker thread, for callers on an event loop."""
        return await asyncio.to_thread(self.read_text, user_path, max_bytes)

    def is_dir(self, user_path: str) -> bool:
        with self.open(user_path, os.O_PATH) as fd:
            return stat.S_ISDIR(os.fstat(fd).st_mode)

    def files(
        self, folder: str, suffix: str = "", limit: int = 100_000, special: bool = False
    ) -> list[str]:
        """Regular files under `folder` (root-relative, sorted), never following a symlink.

        A missing folder yields nothing; anything deeper than MAX_DEPTH folders is left out.
        With `special`, symlinks, FIFOs, sockets and devices are listed too (never opened
        here), so that reading one later refuses it with a reason a caller can report.
        """
        found: list[str] = []

        def walk(dir_fd: int, prefix: str, depth: int) -> None:
            for entry in sorted(os.scandir(dir_fd), key=lambda e: e.name):
                if len(found) >= limit:
                    return
                rel = entry.name if prefix in ("", ".") else f"{prefix}/{entry.name}"
                if entry.is_dir(follow_symlinks=False) and depth > 0:
                    try:
                        child = os.open(entry.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
                    except OSError:
                        continue  # replaced by a link or removed since the listing
                    try:
                        walk(child, rel, depth - 1)
                    finally:
                        os.close(child)
                elif entry.name.endswith(suffix) and (
                    special or entry.is_file(follow_symlinks=False)
                ):
                    found.append(rel)

        try:
            with self.open(folder, os.O_RDONLY | os.O_DIRECTORY) as fd:
                walk(fd, self.relative(folder), MAX_DEPTH)
        except FileRefused as exc:
            if exc.kind != "missing":
                raise
        return sorted(found)

    def write_atomic(self, user_path: str, data: bytes, max_bytes: int) -> bool:
        """Writes a file (temp + fsync + rename in its folder); True if it was created."""
        if len(data) > max_bytes:
            raise FileRefused(
                f"{user_path}: {len(data)} bytes, over the {max_bytes}-byte limit", "too_large"
            )
        parent, name = self._split(user_path)
        with self._root_fd() as root:
            dfd = self._make_dirs(root, parent, user_path)
        try:
            return self._replace_in(dfd, name, data, user_path)
        finally:
            os.close(dfd)

    def remove(self, user_path: str) -> bool:
        """Unlinks a file (a link itself, never its target); False if there was none."""
        parent, name = self._split(user_path)
        try:
            with self.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY) as dfd:
                info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise FileRefused(f"{user_path} is a directory", "not_regular")
                os.unlink(name, dir_fd=dfd)
                return True
        except FileNotFoundError:
            return False
        except FileRefused as exc:
            if exc.kind == "missing":
                return False
            raise

    def _split(self, user_path: str) -> tuple[str, str]:
        rel = self.relative(user_path)
        parent, _, name = rel.rstrip("/").rpartition("/")
        if name in ("", ".", ".."):
            raise FileRefused(f"{user_path}: not a file name", "invalid")
        return parent, name

    def _make_dirs(self, root: int, parent: str, user_path: str) -> int:
        """Opens (creating as needed) the parent folder, one component at a time, no symlinks."""
        try:
            return openat2_beneath(root, parent or ".", _DIR_FLAGS)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise refusal(user_path, exc, self.label) from exc
        current = os.dup(root)
        try:
            for part in [p for p in parent.split("/") if p not in ("", ".")]:
                if part == "..":
                    raise FileRefused(f"{user_path}: '..' may not create folders", "outside")
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=current)
                    self._chown(part, current)
                try:
                    nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=current)
                except OSError as exc:
                    raise refusal(user_path, exc, self.label) from exc
                os.close(current)
                current = nxt
            return current
        except BaseException:
            os.close(current)
            raise

    def _replace_in(self, dfd: int, name: str, data: bytes, user_path: str) -> bool:
        mode, created = 0o644, True
        try:
            info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            created = False
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(name, dir_fd=dfd)
                raise FileRefused(
                    f"{user_path} is a symbolic link (to {target}); write the target", "not_regular"
                )
            require_regular(user_path, info)
            mode = stat.S_IMODE(info.st_mode)
        except FileNotFoundError:
            pass
        tmp = f".{name}.crayfish-{os.getpid()}-{os.urandom(4).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, mode, dir_fd=dfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if self.owner is not None:
                os.fchown(fd, *self.owner)
            os.fsync(fd)
            os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            os.fsync(dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        return created

    def _chown(self, name: str, dir_fd: int) -> None:
        if self.owner is not None:
            os.chown(name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)


def require_regular(user_path: str, info: os.stat_result) -> None:
    """Refuses folders, FIFOs, sockets, devices and hard-linked files."""
    if stat.S_ISDIR(info.st_mode):
        raise FileRefused(f"{user_path} is a directory", "not_regular")
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(
            f"{user_path} is not a regular file (FIFO, socket or device)", "not_regular"
        )
    if info.st_nlink > 1:
        raise FileRefused(
            f"{user_path} has {info.st_nlink} hard links; refusing to touch it", "not_regular"
        )


def refusal(user_path: str, exc: OSError, label: str = "workspace") -> FileRefused:
    """The FileRefused for an OSError from opening `user_path`."""
    kind = {
        errno.EXDEV: "outside",
        errno.ELOOP: "outside",
        errno.ENOENT: "missing",
        errno.ENOTDIR: "missing",
        errno.EACCES: "denied",
        errno.EPERM: "denied",
        errno.ENXIO: "not_regular",
    }.get(exc.errno or 0, "error")
    return FileRefused(describe_os_error(user_path, exc, label), kind)


def describe_os_error(user_path: str, exc: OSError, label: str = "workspace") -> str:
    """A one-line reason a model or a user can act on."""
    if exc.errno == errno.EXDEV:
        return f"{user_path}: resolves outside the {label} (symlink or '..'); refused"
    if exc.errno == errno.ELOOP:
        return f"{user_path}: too many or forbidden symbolic links; refused"
    if exc.errno == errno.ENOENT:
        return f"{user_path}: no such file or directory"
    if exc.errno == errno.ENOTDIR:
        return f"{user_path}: a path component is not a directory"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{user_path}: permission denied"
    if exc.errno == errno.ENXIO:
        return f"{user_path}: is a FIFO or device without a peer; refused"
    return f"{user_path}: {exc.strerror or exc}"
