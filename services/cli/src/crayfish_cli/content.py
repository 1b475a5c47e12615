"""What the CLI reads out of content: message text for printing, image types for uploads."""

from __future__ import annotations

from typing import Any

# Magic bytes of the image types the orchestrator accepts (it checks them again itself).
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(data: bytes) -> str | None:
    """The image type by magic bytes (what the bytes are, not what the file name says)."""
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def plain_text(content: Any) -> str:
    """A message's content as text: image parts become `[image: path]`."""
    if not isinstance(content, list):
        return str(content or "")
    pieces = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            pieces.append(str(part.get("text", "")))
        elif part.get("type") in ("image_ref", "image_url"):
            pieces.append(f"[image: {part.get('path', 'attached')}]")
    return "\n".join(pieces)
