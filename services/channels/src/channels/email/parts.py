"""A mail's attachments as a hostile sender may write them: the parts walked with bounds (depth,
count), names reduced to a plain file name, bytes decoded strictly (bad base64 is refused, not
guessed at) and only when asked for, within a size cap. A forwarded mail (message/rfc822) is one
file, `.eml`, not opened."""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from email.message import EmailMessage

from channels.contract import Attachment, PlatformRefused

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's
MAX_DEPTH = 8  # multiparts within multiparts: real mail nests 3 or 4 deep
MAX_LEAVES = 64  # parts looked at; the rest of an absurd mail is not
MAX_ATTACHMENTS = 16
NAME_LIMIT = 100
UNSAFE = re.compile(r"[\x00-\x1f\x7f<>:\"|?*]")


@dataclass(frozen=True)
class Part:
    """An attachment and the MIME part its bytes are decoded from."""

    attachment: Attachment
    part: EmailMessage


def attachments(message: EmailMessage, body: EmailMessage | None, ref: str) -> list[Part]:
    """The mail's attachments in order: leaves that are attachments or inline non-text parts
    (not `body`, the text shown as the message), at most MAX_ATTACHMENTS. `ref` prefixes
    each attachment's ref."""
    found: list[Part] = []
    for index, leaf in enumerate(_leaves(message)):
        if leaf is body or not _is_attachment(leaf):
            continue
        mime = leaf.get_content_type()
        name = safe_name(_filename(leaf), index, mime)
        image = mime in IMAGE_TYPES
        found.append(Part(Attachment(f"{ref}/{index}", name, mime, _size(leaf), image), leaf))
        if len(found) == MAX_ATTACHMENTS:
            break
    return found


def _leaves(message: EmailMessage) -> list[EmailMessage]:
    """The non-multipart parts, depth first, within MAX_DEPTH and MAX_LEAVES (no recursion:
    the depth a sender chose never reaches Python's stack)."""
    leaves: list[EmailMessage] = []
    stack: list[tuple[EmailMessage, int]] = [(message, 0)]
    while stack and len(leaves) < MAX_LEAVES:
        part, depth = stack.pop()
        if not part.is_multipart() or part.get_content_maintype() == "message":
            leaves.append(part)  # a message/rfc822 is a leaf: a file, not opened
            continue
        if depth >= MAX_DEPTH:
            continue
        children = part.get_payload()
        if isinstance(children, list):
            kept = [c for c in children[:MAX_LEAVES] if isinstance(c, EmailMessage)]
            stack.extend((child, depth + 1) for child in reversed(kept))
    return leaves


def _is_attachment(part: EmailMessage) -> bool:
    disposition = part.get_content_disposition()
    if disposition == "attachment" or part.get_content_type() == "message/rfc822":
        return True
    if _filename(part):
        return True
    # An inline text part without a name is more of the body (some clients split it around
    # inline pictures); an inline picture is shown in the mail, so the person sent it.
    return disposition == "inline" and part.get_content_maintype() != "text"


def _filename(part: EmailMessage) -> str:
    try:
        return str(part.get_filename() or "")
    except (ValueError, LookupError):  # an encoded-word in an unknown charset
        return ""


def safe_name(raw: str, index: int, mime: str) -> str:
    """A file name without folders, control characters or characters Windows refuses;
    `attachment-<index>.<ext>` when nothing is left."""
    name = unicodedata.normalize("NFC", raw).replace("\\", "/").rsplit("/", 1)[-1]
    name = UNSAFE.sub("_", name).strip(" .")
    if len(name) > NAME_LIMIT:
        _, dot, ext = name.rpartition(".")
        keep = ext[:10] if dot and len(ext) <= 10 else ""
        name = name[: NAME_LIMIT - len(keep) - 1].rstrip(" .") + ("." + keep if keep else "")
    if name:
        return name
    return f"attachment-{index}{_extension(mime)}"


def _extension(mime: str) -> str:
    known = {
        "image/png": ".png",
        "image/jpeg": ".jpg",
        "image/gif": ".gif",
        "image/webp": ".webp",
        "message/rfc822": ".eml",
        "text/plain": ".txt",
        "application/pdf": ".pdf",
    }
    return known.get(mime, ".bin")


def _size(part: EmailMessage) -> int:
    """The decoded size as the encoding implies (base64: three bytes per four characters)."""
    payload = part.get_payload()
    if not isinstance(payload, str):
        return 0  # a message/rfc822: its size is known once it is serialised
    if part.get("Content-Transfer-Encoding", "").strip().lower() == "base64":
        return len(payload) * 3 // 4
    return len(payload)


def decoded(part: Part, max_bytes: int) -> bytes:
    """The attachment's bytes; PlatformRefused when over `max_bytes` or badly encoded."""
    name = part.attachment.name
    if part.attachment.size > max_bytes:
        raise PlatformRefused(f"{name} is over {max_bytes} bytes")
    data = _decode(part.part, name)
    if len(data) > max_bytes:
        raise PlatformRefused(f"{name} is over {max_bytes} bytes")
    return data


def _decode(part: EmailMessage, name: str) -> bytes:
    if part.get_content_type() == "message/rfc822":
        try:
            return part.as_bytes()
        except (RecursionError, ValueError, LookupError) as exc:
            raise PlatformRefused(f"{name}: a forwarded mail that cannot be read") from exc
    payload = part.get_payload()
    if not isinstance(payload, str):
        raise PlatformRefused(f"{name}: not a file")
    encoding = part.get("Content-Transfer-Encoding", "").strip().lower()
    if encoding == "base64":
        # Python's own decoding hands back the encoded text when it is not base64: refused.
        try:
            return base64.b64decode("".join(payload.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PlatformRefused(f"{name}: not valid base64") from exc
    data = part.get_payload(decode=True)  # quoted-printable, 7bit, 8bit: as Python decodes
    return data if isinstance(data, bytes) else b""
