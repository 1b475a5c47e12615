"""Files in Discord messages: a MESSAGE_CREATE's `attachments` as Attachments, their bytes read
from the CDN address Discord gives (`url`, signed: it needs no token, so none is sent), and a
Picture as a message to send (an upload, or an embed showing a URL)."""

from __future__ import annotations

import io
import mimetypes
from typing import Any

import aiohttp
import discord

from channels.contract import Attachment, Picture, PlatformRefused, RetryLater
from channels.downloads import check_stated, read_capped

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's
NETWORK_RETRY = 2.0


def message_attachments(message: dict[str, Any]) -> tuple[Attachment, ...]:
    """The message's attachments; a type Discord did not state is guessed from the name."""
    found = []
    for item in message.get("attachments") or []:
        name = str(item.get("filename") or item.get("id") or "file")
        mime = str(item.get("content_type") or mimetypes.guess_type(name)[0] or "")
        mime = mime.split(";")[0].strip().lower()
        url = str(item.get("url") or "")
        found.append(Attachment(url, name, mime, int(item.get("size") or 0), mime in IMAGE_TYPES))
    return tuple(found)


async def fetch_attachment(attachment: Attachment, max_bytes: int) -> bytes:
    """The attachment's bytes from the CDN, without credentials, within `max_bytes` (the
    caller bounds the time)."""
    check_stated(attachment.name, attachment.size, max_bytes)
    if not attachment.ref.startswith(("https://", "http://")):
        raise PlatformRefused(f"Discord gave no address for {attachment.name}")
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(attachment.ref) as response:
                if response.status == 429 or response.status >= 500:
                    raise RetryLater(f"Discord's CDN answered {response.status}", NETWORK_RETRY)
                if response.status != 200:
                    raise PlatformRefused(f"{attachment.name}: the CDN answered {response.status}")
                return await read_capped(response, attachment.name, max_bytes)
    except aiohttp.ClientError as exc:
        message = f"Discord's CDN did not send {attachment.name}: {exc!r}"
        raise RetryLater(message, NETWORK_RETRY) from exc


def picture_message(picture: Picture) -> dict[str, Any]:
    """The keywords of handle_message_parameters showing the picture: its bytes as the
    message's file (multipart), or its URL as an embed's image (Discord fetches it)."""
    if picture.data:
        return {"file": discord.File(io.BytesIO(picture.data), filename=image_name(picture))}
    return {"embed": discord.Embed().set_image(url=picture.url)}


def image_name(picture: Picture) -> str:
    """The picture's name ending as its type does: Discord shows an upload as an image by its
    file name's extension."""
    extension = mimetypes.guess_extension(picture.mime) if picture.mime else None
    if extension and not picture.name.lower().endswith(_extensions(picture.mime)):
        return f"{picture.name}{extension}"
    return picture.name


def _extensions(mime: str) -> tuple[str, ...]:
    return tuple(mimetypes.guess_all_extensions(mime)) or ("",)
