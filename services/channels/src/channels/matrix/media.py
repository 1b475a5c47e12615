"""Matrix media: `m.image` / `m.file` events as Attachments, their bytes fetched through the
authenticated media API (`GET /_matrix/client/v1/media/download/{server}/{id}`, Matrix 1.11;
the deprecated `/_matrix/media/v3/download` only when the server does not have it), and pictures
uploaded (`POST /_matrix/media/v3/upload`, by the channel) shown as `m.image`.

In an encrypted room media are encrypted too: the event carries `file` (the mxc URL and the
AES key, IV and SHA-256 of the ciphertext) instead of `url`; the ref then holds that `file`
object as JSON and the bytes are decrypted after the download."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlsplit

from nio import AsyncClient
from nio.crypto import decrypt_attachment

from channels.contract import Attachment, Picture, PlatformRefused, RetryLater

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's
MEDIA_MSGTYPES = frozenset({"m.image", "m.file"})
AUTHENTICATED = "/_matrix/client/v1/media/download/{server}/{media}"
LEGACY = "/_matrix/media/v3/download/{server}/{media}"
CHUNK = 65536
NETWORK_RETRY = 2.0


def attachment_of(content: dict[str, Any], event_id: str) -> Attachment | None:
    """The media an `m.image` / `m.file` message carries; None for other messages or one
    without a usable mxc URL."""
    if content.get("msgtype") not in MEDIA_MSGTYPES:
        return None
    encrypted = content.get("file")
    if isinstance(encrypted, dict):
        url, ref = str(encrypted.get("url") or ""), json.dumps(encrypted)
    else:
        url = ref = str(content.get("url") or "")
    if _mxc(url) is None:
        return None
    info = content.get("info")
    info = info if isinstance(info, dict) else {}
    mime = str(info.get("mimetype") or "")
    size = info.get("size")
    name = str(content.get("filename") or content.get("body") or f"file-{event_id[1:9]}")
    return Attachment(
        ref=ref,
        name=name.replace("/", "_"),
        mime=mime,
        size=size if isinstance(size, int) and size > 0 else 0,
        image=mime in IMAGE_TYPES,
    )


def caption_of(content: dict[str, Any]) -> str:
    """A media message's text: its `body` when `filename` is set apart from it (Matrix 1.10
    captions); otherwise the body is only the file's name."""
    filename = content.get("filename")
    body = str(content.get("body") or "")
    return body if filename and body != filename else ""


async def download(
    client: AsyncClient, attachment: Attachment, max_bytes: int, seconds: float, legacy: bool
) -> tuple[bytes, bool]:
    """The attachment's bytes (decrypted when encrypted), and whether the server answered only
    on the legacy path (so later downloads go there first)."""
    if attachment.size > max_bytes:
        raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
    encrypted = json.loads(attachment.ref) if attachment.ref.startswith("{") else None
    url = str(encrypted["url"]) if encrypted else attachment.ref
    server, media = _mxc(url) or ("", "")
    if not legacy:
        data = await _get(client, AUTHENTICATED, server, media, max_bytes, seconds)
        legacy = data is None
    if legacy:
        data = await _get(client, LEGACY, server, media, max_bytes, seconds)
    if data is None:
        raise PlatformRefused(f"{attachment.name}: the server has no media download")
    if data == b"" and attachment.size:
        raise PlatformRefused(f"{attachment.name} came empty")
    return (_decrypted(data, encrypted, attachment.name) if encrypted else data), legacy


async def _get(
    client: AsyncClient, path: str, server: str, media: str, max_bytes: int, seconds: float
) -> bytes | None:
    """The media's bytes, read at most to `max_bytes` (+1 to know it is over); None when the
    server does not know this endpoint (404/405 M_UNRECOGNIZED)."""
    where = path.format(server=quote(server, safe=""), media=quote(media, safe=""))
    headers = {"Authorization": f"Bearer {client.access_token}"}
    reply = await client.send("GET", where, headers=headers, timeout=seconds)
    async with reply:
        if reply.status != 200:
            await _refused(reply, media)
            return None  # not refused: the server does not have this endpoint
        if (reply.content_length or 0) > max_bytes:
            raise PlatformRefused(f"{media} is over {max_bytes} bytes")
        data = bytearray()
        async for chunk in reply.content.iter_chunked(CHUNK):
            data += chunk
            if len(data) > max_bytes:  # a stated size that lied, or none stated
                raise PlatformRefused(f"{media} is over {max_bytes} bytes")
        return bytes(data)


async def _refused(reply: Any, media: str) -> None:
    """Raises what an error answer means; returns when the endpoint is unknown there."""
    try:
        error = await reply.json(content_type=None)
    except ValueError:
        error = {}
    code = error.get("errcode") if isinstance(error, dict) else None
    if reply.status in (404, 405) and code == "M_UNRECOGNIZED":
        return
    if reply.status == 429 or code == "M_LIMIT_EXCEEDED":
        wait = (error.get("retry_after_ms") or 5000) / 1000
        raise RetryLater(f"Matrix: media download limited ({code})", wait)
    if reply.status >= 500:
        raise RetryLater(f"Matrix: media download HTTP {reply.status}", NETWORK_RETRY)
    raise PlatformRefused(f"{media}: HTTP {reply.status} {code or ''}".strip())


def _decrypted(data: bytes, file: dict[str, Any], name: str) -> bytes:
    try:
        key = file["key"]["k"]
        return bytes(decrypt_attachment(data, key, file["hashes"]["sha256"], file["iv"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise PlatformRefused(f"{name}: cannot decrypt it ({exc})") from exc


def _mxc(url: str) -> tuple[str, str] | None:
    parts = urlsplit(url)
    media = parts.path.lstrip("/")
    if parts.scheme != "mxc" or not parts.netloc or not media or "/" in media:
        return None
    return parts.netloc, media


def image_content(picture: Picture, uri: str, keys: dict[str, Any] | None) -> dict[str, Any]:
    """The `m.image` content showing an uploaded picture: `url`, or with `keys` (an upload
    encrypted for an encrypted room) `file`."""
    content: dict[str, Any] = {
        "msgtype": "m.image",
        "body": picture.name,
        "filename": picture.name,
        "info": {"mimetype": picture.mime or "application/octet-stream", "size": len(picture.data)},
    }
    if keys:
        content["file"] = {**keys, "url": uri}
    else:
        content["url"] = uri
    return content
