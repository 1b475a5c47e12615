"""Files that come with a chat message, written into the workspace's `inbox/` for the model to
read. The workspace is hostile (the sandbox writes there): every write goes through SafeRoot
(beneath the root, no links followed, atomic), names are reduced to a safe basename, and sizes
and counts are capped."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path

from crayfish_common.safe_files import FileRefused, SafeRoot

INBOX = "inbox"
MAX_FILES = 4
MAX_FILE_BYTES = 20_000_000  # the body cap (CRAYFISH_MAX_BODY_BYTES) is usually lower
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ChatFileRefused(Exception):
    """A file that cannot be written (too many, too big, or the workspace refused it)."""


def safe_name(name: str) -> str:
    """The file's basename with only [A-Za-z0-9._-], no leading dot, at most 100 characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = UNSAFE.sub("_", base).lstrip(".")[-100:]
    return cleaned or "file"


class ChatFiles:
    def __init__(self, workspace: Path):
        self.root = SafeRoot(workspace)

    async def put(self, key: str, files: list[tuple[str, bytes]]) -> list[str]:
        """Writes the files as `inbox/<key digest>-<name>` (the same message again writes the
        same paths); their workspace paths. ChatFileRefused."""
        if len(files) > MAX_FILES:
            raise ChatFileRefused(f"at most {MAX_FILES} files per message")
        stem = hashlib.sha256(key.encode()).hexdigest()[:8]
        paths = []
        for name, data in files:
            path = f"{INBOX}/{stem}-{safe_name(name)}"
            try:
                await asyncio.to_thread(self.root.write_atomic, path, data, MAX_FILE_BYTES)
            except (FileRefused, OSError) as exc:
                raise ChatFileRefused(f"{safe_name(name)} not saved: {exc}") from exc
            paths.append(path)
        return paths


def told(text: str, paths: list[str], sizes: list[int]) -> str:
    """The message with the model told where its files are."""
    listed = ", ".join(f"{p} ({n} bytes)" for p, n in zip(paths, sizes, strict=True))
    return f"{text}\n\n[Files sent with this message, saved in the workspace: {listed}]"
