"""OneBot v11 messages: segments in (the array format, or a string with CQ codes; images and
files kept aside) and plain text or a picture out. QQ shows a bot's text as it is, so Markdown
is turned into plain text, and the answer is sent as one `text` segment: nothing the model
writes is read as a CQ code."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from channels.telegram.markdown import to_html

CQ_CODE = re.compile(r"\[CQ:(\w+)((?:,[^\]]*)?)\]")
LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.S)
TAG = re.compile(r"<[^>]+>")


@dataclass
class Parsed:
    """What a message says, whom it mentions and which message it replies to."""

    text: str = ""
    mentions: set[str] = field(default_factory=set)
    reply_to: str = ""
    media: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # image/file segments


def parse(message: Any, self_id: str) -> Parsed:
    """Text of `text` segments, `@name` for others' mentions; the bot's own mention dropped."""
    parsed = Parsed()
    parts: list[str] = []
    for kind, data in _segments(message):
        if kind == "text":
            parts.append(str(data.get("text", "")))
        elif kind == "at":
            qq = str(data.get("qq", ""))
            parsed.mentions.add(qq)
            if qq != self_id:
                parts.append(f"@{data.get('name') or qq}")
        elif kind == "reply":
            parsed.reply_to = str(data.get("id", ""))
        elif kind in ("image", "file"):
            parsed.media.append((kind, data))
    parsed.text = "".join(parts).strip()
    return parsed


def _segments(message: Any) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(message, list):
        return [
            (str(s.get("type", "")), s.get("data") or {}) for s in message if isinstance(s, dict)
        ]
    return _cq_segments(str(message or ""))


def _cq_segments(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The string format: text with `[CQ:type,key=value,…]` codes (`&#91;` `&#93;` `&#44;`
    `&amp;` escaped)."""
    found: list[tuple[str, dict[str, Any]]] = []
    at = 0
    for code in CQ_CODE.finditer(text):
        if code.start() > at:
            found.append(("text", {"text": _unescape(text[at : code.start()])}))
        pairs = (item.partition("=") for item in code.group(2).split(",") if item)
        found.append((code.group(1), {k: _unescape(v) for k, _, v in pairs}))
        at = code.end()
    if at < len(text):
        found.append(("text", {"text": _unescape(text[at:])}))
    return found


def _unescape(text: str) -> str:
    return (
        text.replace("&#91;", "[").replace("&#93;", "]").replace("&#44;", ",").replace("&amp;", "&")
    )


def plain_text(markdown: str) -> str:
    """The Markdown as QQ shows plain text: emphasis marks gone, headings and bullets kept as
    lines, a link as `text (address)`."""
    rendered = to_html(markdown)
    rendered = LINK.sub(
        lambda m: m[2] if m[2] == m[1] else f"{m[2]} ({html.unescape(m[1])})", rendered
    )
    return html.unescape(TAG.sub("", rendered))


def text_segments(markdown: str) -> list[dict[str, Any]]:
    return [{"type": "text", "data": {"text": plain_text(markdown)}}]


def image_segment(data: bytes, url: str) -> list[dict[str, Any]]:
    """A picture as NapCat sends it: the bytes inline (`base64://…`), or an http(s) URL that
    NapCat fetches itself. Never a path: NapCat would read it from its own disk."""
    if data:
        return [{"type": "image", "data": {"file": "base64://" + base64.b64encode(data).decode()}}]
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) image URL: {url[:100]!r}")
    return [{"type": "image", "data": {"file": url}}]
