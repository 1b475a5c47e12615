"""What a Feishu message says and carries, from its `message_type` and `content` (JSON):
`text`; `post` (rich text: its title, text, links, @-mentions, `code_block`s, and `img`
elements as images); `image` (`{"image_key"}`) and `file` (`{"file_key", "file_name"}`) as
Attachments. An Attachment's ref is `<message_id>/<image|file>/<key>`: what
`GET /open-apis/im/v1/messages/{message_id}/resources/{key}?type=` takes."""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass
from typing import Any

from channels.contract import Attachment

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's


@dataclass(frozen=True)
class Content:
    text: str
    attachments: tuple[Attachment, ...] = ()


def content_of(message_type: str, raw: str, message_id: str) -> Content | None:
    """The message's text and attachments; None for a kind this channel does not read
    (stickers, audio, video, cards, shared chats)."""
    try:
        content = json.loads(raw or "{}")
    except ValueError:
        return None
    if not isinstance(content, dict):
        return None
    if message_type == "text":
        return Content(str(content.get("text", "")))
    if message_type == "image" and content.get("image_key"):
        return Content("", (_image(message_id, str(content["image_key"])),))
    if message_type == "file" and content.get("file_key"):
        name = str(content.get("file_name") or "file")[:200]
        mime = mimetypes.guess_type(name)[0] or ""
        ref = f"{message_id}/file/{content['file_key']}"
        return Content("", (Attachment(ref, name, mime, 0, mime in IMAGE_TYPES),))
    if message_type == "post":
        return _post(_localised(content), message_id)
    return None


def resource_of(ref: str) -> tuple[str, str, str]:
    """The message id, resource type (`image` or `file`) and key an Attachment's ref names."""
    message_id, kind, key = [*ref.split("/", 2), "", ""][:3]
    return message_id, kind, key


def _image(message_id: str, key: str) -> Attachment:
    # Feishu names no type for an image; the orchestrator reads it from the bytes.
    return Attachment(f"{message_id}/image/{key}", f"image-{key[-12:]}", "", 0, True)


def _localised(content: dict[str, Any]) -> dict[str, Any]:
    """A post as events carry it (`{"title", "content"}`), or wrapped in a language."""
    if "content" in content:
        return content
    for value in content.values():
        if isinstance(value, dict) and "content" in value:
            return value
    return {}


def _post(post: dict[str, Any], message_id: str) -> Content:
    lines = [str(post["title"])] if post.get("title") else []
    images: list[Attachment] = []
    for paragraph in post.get("content") or []:
        parts = []
        for element in paragraph if isinstance(paragraph, list) else []:
            if not isinstance(element, dict):
                continue
            if element.get("tag") == "img" and element.get("image_key"):
                images.append(_image(message_id, str(element["image_key"])))
            else:
                parts.append(_element_text(element))
        if any(parts):
            lines.append("".join(parts))
    return Content("\n".join(lines), tuple(images))


def _element_text(element: dict[str, Any]) -> str:
    tag, text = element.get("tag"), str(element.get("text") or "")
    if tag == "a":
        href = str(element.get("href") or "")
        return f"[{text}]({href})" if href and text else text or href
    if tag == "at":  # `@_user_1`: the mention's key, replaced as in a text message
        return str(element.get("user_id") or element.get("user_name") or "")
    if tag == "code_block":
        return f"```{str(element.get('language') or '').lower()}\n{text}\n```"
    return text if tag in ("text", "md") else ""
