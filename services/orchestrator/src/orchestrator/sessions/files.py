"""Durable file work for the session history and the inbox: whole appends, fsynced folders, and
one worker thread per store so the event loop never waits on a disk.

Not aiofiles: it runs each call on a shared thread pool (no order between two writes) and has
no whole-append-or-nothing, which a torn line after a full disk would need.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class FileWorker:
    """One thread that does a store's blocking file work, in the order it was asked for.

    So the event loop never waits on a disk, two writes never reorder, a read never sees half a
    write, and a caller cancelled while its write runs cannot let the next one start early.
    """

    def __init__(self, name: str):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        # The job is queued before the first await: call order is execution order.
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def close(self) -> None:
        """Finishes the queued work, then ends the thread."""
        await asyncio.to_thread(self._pool.shutdown, True)


def append_whole(path: Path, data: bytes) -> None:
    """Appends data and fsyncs it, or raises with the file as it was: a full disk can cut a
    write short, and a torn line would swallow the next append's first line."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            if created:
                path.unlink()
            raise
    finally:
        os.close(fd)
    if created:
        fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Makes a file's creation, rename or removal in `folder` survive a power loss."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
