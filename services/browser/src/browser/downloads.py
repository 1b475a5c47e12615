"""Downloads a page starts: fetched again through the guard, capped, written to inbox/.

Chromium itself never writes a download (contexts refuse them): the service fetches the URL with
`crayfish_common.guarded_fetch` (every hop vetted, the body cut at the cap while it streams, so a
bomb costs at most the cap) and writes the file beneath the workspace with `SafeRoot` (no
following links a sandboxed command planted, temp file + rename). A download that needs the
page's cookies or a POST is therefore not kept; the model reads why.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path

from crayfish_common.guarded_fetch import FetchError, FetchLimits, WebFetcher
from crayfish_common.safe_files import FileRefused, SafeRoot
from crayfish_common.url_guard import AllowList

INBOX = "inbox"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 100


class Downloads:
    """Saves downloads into `<workspace>/inbox/`; each call says what happened, in words."""

    def __init__(self, workspace: Path, allow: AllowList, max_bytes: int, timeout: float):
        info = workspace.stat() if workspace.exists() else None
        # As root, files get the workspace's owner, so sandboxed commands may move or delete them.
        owner = (info.st_uid, info.st_gid) if info and os.geteuid() == 0 else None
        self.root = SafeRoot(workspace, owner=owner)
        self.max_bytes = max_bytes
        self.fetcher = WebFetcher(
            FetchLimits(max_bytes=max_bytes, timeout=timeout, max_redirects=5), allow
        )

    async def save(self, url: str, suggested_name: str) -> str:
        """Fetches `url` and writes it to inbox/; the sentence the model reads."""
        try:
            fetched = await self.fetcher.fetch(url)
        except FetchError as exc:
            return f"download of {url} refused: {exc}"
        if fetched.truncated:
            return (
                f"download of {url} refused: larger than the {self.max_bytes}-byte cap;"
                " nothing was saved"
            )
        if not 200 <= fetched.status < 300:
            return f"download of {url} failed: HTTP {fetched.status}"
        path = f"{INBOX}/{safe_name(suggested_name)}"
        try:
            await asyncio.to_thread(self.root.write_atomic, path, fetched.body, self.max_bytes)
        except (FileRefused, OSError) as exc:
            return f"download of {url} not saved: {exc}"
        return f"downloaded {url} to {path} ({len(fetched.body)} bytes)"


def safe_name(suggested: str) -> str:
    """A plain file name from the server's suggestion, made unique with a time stamp."""
    base = _UNSAFE.sub("_", os.path.basename(suggested or "")).strip("._") or "download"
    stem, dot, ext = base[:MAX_NAME_CHARS].rpartition(".")
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.urandom(2).hex()}"
    return f"{stem}-{stamp}.{ext}" if dot and stem else f"{base[:MAX_NAME_CHARS]}-{stamp}"
