"""Host-side workspace access that never leaves the workspace: openat2(RESOLVE_BENEATH)."""

from __future__ import annotations

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

SANDBOX_ROOT = "/workspace"
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08


class ToolError(Exception):
    """A failure the model should read as the tool result."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _libc_openat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    number = _SYS_OPENAT2.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    probe = _OpenHow(os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0, RESOLVE_BENEATH)
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
            nxt = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current
            )
            os.close(current)
            current = nxt
        last = parts[-1] if parts else "."
        return os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


class Workspace:
    """The user's workspace folder; every path a tool gets is resolved beneath it."""

    def __init__(self, root: Path, owner: tuple[int, int] | None = None):
        self.root = root.resolve()
        self.owner = owner
        if not HAVE_OPENAT2:
            log.warning("openat2 is unavailable: file tools fall back to a no-symlink walk")

    def relative(self, user_path: str) -> str:
        """The path relative to the workspace; absolute paths must name the workspace."""
        path = (user_path or ".").strip()
        if "\x00" in path:
            raise ToolError("path contains a NUL byte")
        for prefix in (SANDBOX_ROOT, str(self.root)):
            if path == prefix:
                return "."
            if path.startswith(prefix + "/"):
                return path[len(prefix) + 1 :] or "."
        if path.startswith("/"):
            raise ToolError(f"{user_path}: outside the workspace (use paths relative to it)")
        if path.startswith("~"):
            raise ToolError(f"{user_path}: '~' is not expanded; use workspace-relative paths")
        return path

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def open(self, user_path: str, flags: int) -> Iterator[int]:
        """An fd for an existing path beneath the workspace (non-blocking: FIFOs cannot hang)."""
        rel = self.relative(user_path)
        with self._root_fd() as root:
            try:
                extra = 0 if flags & os.O_PATH else os.O_NONBLOCK | os.O_NOCTTY
                fd = openat2_beneath(root, rel, flags | extra)
            except OSError as exc:
                raise ToolError(describe_os_error(user_path, exc)) from exc
        try:
            yield fd
        finally:
            os.close(fd)

    def read_regular(self, user_path: str, max_bytes: int) -> bytes:
        """The bytes of a regular file, refusing devices, FIFOs, hard links and oversize files."""
        with self.open(user_path, os.O_RDONLY) as fd:
            info = os.fstat(fd)
            _require_regular(user_path, info)
            if info.st_size > max_bytes:
                raise ToolError(
                    f"{user_path}: {info.st_size} bytes, over the {max_bytes}-byte read limit"
                )
            os.set_blocking(fd, True)
            chunks, total = [], 0
            while chunk := os.read(fd, 1 << 20):
                total += len(chunk)
                if total > max_bytes:
                    raise ToolError(f"{user_path}: grew past the {max_bytes}-byte read limit")
                chunks.append(chunk)
            return b"".join(chunks)

    def is_dir(self, user_path: str) -> bool:
        with self.open(user_path, os.O_PATH) as fd:
            return stat.S_ISDIR(os.fstat(fd).st_mode)

    def write_atomic(self, user_path: str, data: bytes, max_bytes: int) -> bool:
        """Writes a file (temp + rename in its folder); True if it was created."""
        if len(data) > max_bytes:
            raise ToolError(f"{user_path}: {len(data)} bytes, over the {max_bytes}-byte limit")
        rel = self.relative(user_path)
        parent, _, name = rel.rstrip("/").rpartition("/")
        if name in ("", ".", ".."):
            raise ToolError(f"{user_path}: not a file name")
        with self._root_fd() as root:
            dfd = self._make_dirs(root, parent, user_path)
        try:
            return self._replace_in(dfd, name, data, user_path)
        finally:
            os.close(dfd)

    def _make_dirs(self, root: int, parent: str, user_path: str) -> int:
        """Opens (creating as needed) the parent folder, one component at a time, no symlinks."""
        try:
            return openat2_beneath(root, parent or ".", os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ToolError(describe_os_error(user_path, exc)) from exc
        current = os.dup(root)
        try:
            for part in [p for p in parent.split("/") if p not in ("", ".")]:
                if part == "..":
                    raise ToolError(f"{user_path}: '..' may not create folders")
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=current)
                    self._chown(part, current)
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    nxt = os.open(part, flags, dir_fd=current)
                except OSError as exc:
                    raise ToolError(describe_os_error(user_path, exc)) from exc
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
                raise ToolError(f"{user_path} is a symbolic link (to {target}); write the target")
            _require_regular(user_path, info)
            mode = stat.S_IMODE(info.st_mode)
        except FileNotFoundError:
            pass
        tmp = f".{name}.crayfish-{os.getpid()}-{os.urandom(4).hex()}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=dfd,
        )
        try:
            with os.fdopen(fd, "wb", closefd=False) as handle:
                handle.write(data)
            os.fchmod(fd, mode)
            if self.owner is not None:
                os.fchown(fd, *self.owner)
            os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
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


def _require_regular(user_path: str, info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{user_path} is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{user_path} is not a regular file (FIFO, socket or device)")
    if info.st_nlink > 1:
        raise ToolError(f"{user_path} has {info.st_nlink} hard links; refusing to touch it")


def describe_os_error(user_path: str, exc: OSError) -> str:
    """A one-line reason a model can act on."""
    if exc.errno == errno.EXDEV:
        return f"{user_path}: resolves outside the workspace (symlink or '..'); refused"
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
