"""Files people share in Slack: a `file_share` message's `files` as Attachments, and their bytes
fetched from `url_private_download` with the bot token (the app needs `files:read`).

The token is a secret of the workspace, so it goes only to the configured Web API's origin and
Slack's files host: a file address (or a redirect) anywhere else is refused, never fetched."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from channels.contract import Attachment, PlatformRefused, RetryLater
from channels.downloads import check_stated, read_capped

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's
FILES_HOST = ("https", "files.slack.com", 443)
MAX_REDIRECTS = 3
NETWORK_RETRY = 2.0
Origin = tuple[str, str, int]


def file_attachments(event: dict[str, Any]) -> tuple[Attachment, ...]:
    """The event's shared files (none that Slack hides or deleted) as Attachments."""
    found = []
    for file in event.get("files") or []:
        if not isinstance(file, dict) or file.get("mode") in ("tombstone", "hidden_by_limit"):
            continue
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        mime = str(file.get("mimetype") or "")
        name = str(file.get("name") or file.get("title") or file.get("id") or "file")
        size = int(file.get("size") or 0)
        found.append(Attachment(url, name, mime, size, mime in IMAGE_TYPES))
    return tuple(found)


def origin(url: str) -> Origin:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


class SlackFiles:
    """Downloads with the bot token, only from Slack's own origins."""

    def __init__(self, bot_token: str, api_url: str, timeout: float):
        self.bot_token = bot_token
        self.trusted = {origin(api_url), FILES_HOST}
        self.timeout = timeout

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        check_stated(attachment.name, attachment.size, max_bytes)
        if not attachment.ref:
            raise PlatformRefused(f"Slack gave no address for {attachment.name}")
        try:
            return await asyncio.wait_for(self._download(attachment, max_bytes), self.timeout)
        except (TimeoutError, aiohttp.ClientError) as exc:
            message = f"Slack did not send {attachment.name}: {exc!r}"
            raise RetryLater(message, NETWORK_RETRY) from exc

    async def _download(self, attachment: Attachment, max_bytes: int) -> bytes:
        url = attachment.ref
        headers = {"Authorization": f"Bearer {self.bot_token}"}
        async with aiohttp.ClientSession() as session:
            for _ in range(MAX_REDIRECTS + 1):
                self._check_trusted(url, attachment.name)
                async with session.get(url, headers=headers, allow_redirects=False) as response:
                    if response.status in (301, 302, 303, 307, 308):
                        url = urljoin(url, response.headers.get("Location", ""))
                        continue
                    _check_status(response, attachment)
                    return await read_capped(response, attachment.name, max_bytes)
        raise PlatformRefused(f"Slack redirected {attachment.name} too often")

    def _check_trusted(self, url: str, name: str) -> None:
        if origin(url) not in self.trusted:
            host = urlsplit(url).hostname or url[:100]
            raise PlatformRefused(f"{name} is on {host}, not Slack's files host: not fetched")


def _check_status(response: aiohttp.ClientResponse, attachment: Attachment) -> None:
    status = response.status
    if status == 429:
        retry_after = float(response.headers.get("Retry-After") or NETWORK_RETRY)
        raise RetryLater(f"Slack: rate limited for {retry_after:.0f} s", retry_after)
    if status >= 500:
        raise RetryLater(f"Slack answered {status} for {attachment.name}", NETWORK_RETRY)
    if status != 200:
        raise PlatformRefused(f"Slack answered {status} for {attachment.name}")
    # Without a token that may read it Slack answers 200 with its sign-in page.
    if response.content_type == "text/html" and attachment.mime != "text/html":
        raise PlatformRefused(f"Slack sent a sign-in page for {attachment.name} (files:read?)")
