"""A QQ message's images and files: as Attachments from NapCat's segments, and their bytes
from the URL NapCat gives (an image's `url`; a file's, where NapCat's packet backend gives
one) or NapCat's `get_file` (the bytes as `base64`, which NapCat adds with its
`enableLocalFile2Url` on; else it names only a path on its own disk). Each read has a time
limit and stops at the size cap.

OneBot resends nothing, so an attachment that cannot be fetched now is refused for good
(PlatformRefused: the message still goes, the chat is told) rather than RetryLater."""

from __future__ import annotations

import asyncio
import base64
import mimetypes
from typing import Any
from urllib.parse import urlsplit

import httpx

from channels.contract import Attachment, PlatformRefused, RetryLater
from channels.downloads import stated_size, take_capped
from channels.qq.onebot import OneBotConnection

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's


def attachments(media: list[tuple[str, dict[str, Any]]]) -> tuple[Attachment, ...]:
    """`image` and `file` segments as Attachments: `ref` the http(s) URL when NapCat gave
    one, else the id `get_file` takes."""
    found = []
    for kind, data in media:
        name = str(data.get("file") or data.get("name") or kind)[:200]
        url = str(data.get("url") or "")
        ref = url if _is_web(url) else str(data.get("file_id") or data.get("file") or "")
        if not ref:
            continue
        mime = mimetypes.guess_type(name)[0] or ""
        image = kind == "image" or mime in IMAGE_TYPES
        size = stated_size(data.get("file_size"))
        found.append(Attachment(ref, name, mime or ("image/jpeg" if image else ""), size, image))
    return tuple(found)


class QQFiles:
    def __init__(self, onebot: OneBotConnection, timeout: float):
        self.onebot, self.timeout = onebot, timeout
        # NapCat's URLs are QQ's media servers' (or NapCat's own): no cookies, no redirects.
        self.http = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        if attachment.size > max_bytes:
            raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
        try:
            async with asyncio.timeout(self.timeout):
                if _is_web(attachment.ref):
                    return await self._download(attachment.ref, attachment.name, max_bytes)
                return await self._get_file(attachment, max_bytes)
        except TimeoutError:
            raise PlatformRefused(f"{attachment.name}: not fetched in time") from None
        except RetryLater as exc:
            raise PlatformRefused(f"{attachment.name}: {exc}") from exc

    async def _get_file(self, attachment: Attachment, max_bytes: int) -> bytes:
        # The answer comes over the WebSocket, base64 and all: a file of unknown size could
        # be over the socket's frame limit and drop the connection.
        if not attachment.size:
            raise PlatformRefused(f"{attachment.name}: NapCat did not say its size")
        found = await self.onebot.call("get_file", file_id=attachment.ref) or {}
        if stated_size(found.get("file_size")) > max_bytes:
            raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
        encoded = str(found.get("base64") or "")
        if encoded:
            if len(encoded) > (max_bytes + 2) // 3 * 4:
                raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
            try:
                return base64.b64decode(encoded, validate=True)
            except ValueError as exc:
                raise PlatformRefused(f"{attachment.name}: NapCat's base64: {exc}") from exc
        url = str(found.get("url") or "")
        if _is_web(url):
            return await self._download(url, attachment.name, max_bytes)
        raise PlatformRefused(
            f"{attachment.name}: NapCat gave only a path on its own disk "
            "(turn on its enableLocalFile2Url)"
        )

    async def _download(self, url: str, name: str, max_bytes: int) -> bytes:
        try:
            async with self.http.stream("GET", url) as response:
                if response.status_code != 200:
                    raise PlatformRefused(f"{name}: the download answered {response.status_code}")
                stated = stated_size(response.headers.get("content-length"))
                return await take_capped(response.aiter_bytes(), stated, name, max_bytes)
        except httpx.HTTPError as exc:
            raise PlatformRefused(f"{name}: not downloaded: {exc}") from exc

    async def close(self) -> None:
        await self.http.aclose()


def _is_web(url: str) -> bool:
    return urlsplit(url).scheme in ("http", "https")
