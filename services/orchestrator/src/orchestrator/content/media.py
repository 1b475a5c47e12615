"""Images in messages: taken in (data: URLs, or http(s) URLs fetched through the SSRF guard),
checked by their magic bytes and capped (size, per message, per request), stored once under the
data folder's `media/` by content hash (out of the sandbox's reach), the oldest pruned past a
total; history keeps `{"type": "image_ref", "path", "mime"}` parts, and a request to the LLM gets
them back as `image_url` data parts when the model sees images, each checked against its hash (or
a placeholder if a file is gone, changed or refused).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import fnmatch
import hashlib
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from crayfish_common.guarded_fetch import FetchError, FetchLimits, WebFetcher
from crayfish_common.safe_files import FileRefused, SafeRoot
from crayfish_common.url_guard import NO_ALLOW, AllowList

from orchestrator.config import Settings

log = logging.getLogger(__name__)

MEDIA_DIR = "media"
# Models that take image parts, for CRAYFISH_LLM_VISION=auto (matched case-insensitively on the
# name after any "provider/" prefix); README: Images.
VISION_MODELS = (
    "gpt-4o*",
    "gpt-4.1*",
    "gpt-4-turbo*",
    "gpt-5*",
    "o1*",
    "o3*",
    "o4*",
    "claude-*",
    "gemini-*",
    "llava*",
    "bakllava*",
    "qwen*-vl*",
    "qvq*",
    "pixtral*",
    "llama-3.2-*vision*",
    "llama3.2-vision*",
    "minicpm-v*",
    "moondream*",
    "glm-4v*",
    "internvl*",
)
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
# The names this store gives; other files in media/ are neither counted nor pruned.
STORED_NAME = re.compile(r"([0-9a-f]{64})\.(?:png|jpg|gif|webp)")


def stored_digest(path: str) -> str | None:
    """The SHA-256 an image reference's path names (`media/<sha256>.<ext>`), or None."""
    folder, _, name = path.partition("/")
    match = STORED_NAME.fullmatch(name) if folder == MEDIA_DIR else None
    return match.group(1) if match else None


class ImageRejected(Exception):
    """An image the API refuses; `status` is the HTTP status (400, 413 or 422), `code` the
    error's code."""

    def __init__(self, status: int, message: str, code: str = "invalid_image"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def sniff(data: bytes) -> str | None:
    """The image type by magic bytes (what the bytes are, not what a client claims)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def vision_enabled(settings: Settings) -> bool:
    """Whether the default preset sees images: CRAYFISH_LLM_VISION, else its `vision`, else
    its model's name."""
    if settings.llm_vision != "auto":
        return settings.llm_vision == "on"
    preset = settings.presets.chosen()
    if preset.vision is not None:
        return preset.vision
    name = preset.model.lower().rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in VISION_MODELS)


def vision_refusal(settings: Settings) -> str:
    model = settings.presets.chosen().model
    return (
        f"this message has images, but the model {model!r} is not set up to see "
        "them: set CRAYFISH_LLM_VISION=on if it takes image input (or use a vision model); "
        "the message was not sent"
    )


class ImageFetcher:
    """The one way a remote image comes in: GET through `crayfish_common.guarded_fetch`, the
    guard of `web_fetch` (no loopback, private, link-local or metadata address unless
    allow-listed, checked after DNS and on every redirect; size and time caps)."""

    def __init__(self, max_bytes: int, allow: AllowList, timeout: float = 20.0):
        self.fetcher = WebFetcher(
            FetchLimits(max_bytes=max_bytes, timeout=timeout, user_agent="Crayfish-image/0.1"),
            allow,
        )

    async def fetch(self, url: str, number: int) -> bytes:
        try:
            fetched = await self.fetcher.fetch(url)
        except FetchError as exc:
            raise ImageRejected(400, f"image {number}: {exc}") from exc
        if fetched.status != 200:
            raise ImageRejected(
                400, f"image {number}: {fetched.url} answered HTTP {fetched.status}"
            )
        if fetched.truncated:
            raise ImageRejected(
                413,
                f"image {number} at {fetched.url} is over {self.fetcher.limits.max_bytes} bytes "
                "(CRAYFISH_IMAGE_MAX_BYTES)",
            )
        return fetched.body


class MediaStore:
    """Images under the data folder's `media/`, named by the SHA-256 of their bytes; past
    `max_total` bytes of them (0: no cap), the oldest written are deleted.

    Not in the workspace: a sandboxed command could rename the folder there and plant another
    image under a stored name."""

    def __init__(
        self,
        data_dir: Path,
        max_bytes: int,
        max_count: int,
        fetch_allow: AllowList = NO_ALLOW,
        *,
        max_per_request: int = 16,
        max_total: int = 0,
    ):
        self.root = SafeRoot(data_dir, label="data folder")
        self.max_bytes = max_bytes
        self.max_count = max_count
        self.max_per_request = max_per_request
        self.max_total = max_total
        self.remote = ImageFetcher(max_bytes, fetch_allow)

    def check_request(self, count: int) -> None:
        """Refuses a request with more images, all its messages together, than it may carry
        (before any is fetched or stored)."""
        if count > self.max_per_request:
            raise ImageRejected(
                400,
                f"{count} images in this request (all messages together); at most "
                f"{self.max_per_request} (CRAYFISH_IMAGES_PER_REQUEST); nothing was sent",
                "too_many_images",
            )

    async def take_in(self, urls: list[str]) -> list[dict[str, Any]]:
        """Checks and stores the images of one message; their references, in order."""
        if len(urls) > self.max_count:
            raise ImageRejected(
                422,
                f"{len(urls)} images in one message; at most {self.max_count} "
                "(CRAYFISH_IMAGES_PER_MESSAGE)",
            )
        images = [await self._bytes_of(url, n) for n, url in enumerate(urls, 1)]
        try:
            refs = [await asyncio.to_thread(self.save, data) for data in images]
            await asyncio.to_thread(self.prune, {ref["path"] for ref in refs})
            return refs
        except FileRefused as exc:
            reason = f"the image could not be stored in the data folder: {exc}"
            raise ImageRejected(503, reason) from exc
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise  # the data folder is full: 507, as everywhere
            raise ImageRejected(
                503,
                f"the image could not be stored in {self.root.root / MEDIA_DIR} "
                f"({exc.strerror or exc}); the orchestrator needs write access to it",
            ) from exc

    async def _bytes_of(self, url: str, number: int) -> bytes:
        if url.startswith("data:"):
            data = self._decode(url, number)
        elif url.startswith(("https://", "http://")):
            data = await self.remote.fetch(url, number)
        else:
            raise ImageRejected(
                422,
                f"image {number}: give a data: URL (data:image/png;base64,...) or an http(s) URL",
            )
        if len(data) > self.max_bytes:
            raise ImageRejected(
                413,
                f"image {number} is {len(data)} bytes; the limit is {self.max_bytes} "
                "(CRAYFISH_IMAGE_MAX_BYTES)",
            )
        if sniff(data) is None:
            raise ImageRejected(
                422, f"image {number} is not a PNG, JPEG, GIF or WebP image (by its content)"
            )
        return data

    def _decode(self, url: str, number: int) -> bytes:
        header, comma, payload = url.partition(",")
        if not comma or not header.endswith(";base64"):
            raise ImageRejected(
                422, f"image {number}: a data: URL must be base64 (data:image/png;base64,...)"
            )
        if len(payload) > (self.max_bytes * 4) // 3 + 8:
            raise ImageRejected(
                413, f"image {number} is over {self.max_bytes} bytes (CRAYFISH_IMAGE_MAX_BYTES)"
            )
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise ImageRejected(422, f"image {number}: the base64 data is invalid") from None

    def save(self, data: bytes) -> dict[str, Any]:
        mime = sniff(data)
        assert mime is not None
        path = f"{MEDIA_DIR}/{hashlib.sha256(data).hexdigest()}.{EXTENSIONS[mime]}"
        self.root.root.mkdir(parents=True, exist_ok=True)
        self.root.write_atomic(path, data, self.max_bytes)
        return {"type": "image_ref", "path": path, "mime": mime}

    def prune(self, keep: set[str]) -> int:
        """Deletes the oldest stored images (by when they were last written) until media/
        holds at most `max_total` bytes of them, sparing `keep` (the images just stored);
        returns how many went. A failure is logged: the new images are stored either way."""
        if self.max_total <= 0:
            return 0
        try:
            stored = self._stored()
            total = sum(size for _, size, _ in stored)
            removed = 0
            for _, size, path in sorted(stored):
                if total <= self.max_total:
                    break
                if path not in keep and self.root.remove(path):
                    total -= size
                    removed += 1
        except (FileRefused, OSError) as exc:
            log.warning("media/ could not be pruned: %s", exc)
            return 0
        if removed:
            log.info(
                "media/: %d oldest image(s) deleted to stay within %d bytes "
                "(CRAYFISH_MEDIA_MAX_BYTES)",
                removed,
                self.max_total,
            )
        return removed

    def _stored(self) -> list[tuple[float, int, str]]:
        """(modified, size, path) of each image file this store named, in media/ itself."""
        try:
            return [(i.st_mtime, i.st_size, f"{MEDIA_DIR}/{n}") for n, i in stored_files(self.root)]
        except FileRefused as exc:
            if exc.kind != "missing":
                raise
            return []

    def data_url(self, ref: dict[str, Any]) -> tuple[str | None, str]:
        """(data URL, "") for a stored image whose bytes still have the hash its name says,
        or (None, why not)."""
        path = str(ref.get("path", ""))
        digest = stored_digest(path)
        if digest is None:
            return None, "it is not an image this store named"
        try:
            data = self.root.read_bytes(path, self.max_bytes)
        except FileRefused as exc:
            return None, "it is gone" if exc.kind == "missing" else f"it was refused ({exc})"
        if hashlib.sha256(data).hexdigest() != digest:
            log.warning("image %s not sent: its bytes no longer have the hash it is named by", path)
            return None, "its content was changed since it was sent"
        mime = sniff(data)
        if mime is None:
            return None, "it is no longer an image"
        return f"data:{mime};base64,{base64.b64encode(data).decode()}", ""


def user_content(text: str, images: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A user message's content as history keeps it: the text, with image references."""
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def has_image_refs(messages: list[dict[str, Any]]) -> bool:
    for message in messages:  # a plain loop: it runs over the whole history every turn
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "image_ref" for p in content
        ):
            return True
    return False


def _refs(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "image_ref"]


def plain_text(content: Any) -> str:
    """A message's content as text: image references become `[image: path]`."""
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


def as_text_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every image reference turned into `[image: path]` text."""
    return [{**m, "content": plain_text(m["content"])} if _refs(m) else m for m in messages]


async def for_llm(
    messages: list[dict[str, Any]], media: MediaStore, vision: bool
) -> list[dict[str, Any]]:
    """Messages for an LLM request: image references as `image_url` data parts (vision), or
    text saying why an image is not there."""
    if not has_image_refs(messages):
        return messages
    out = []
    for message in messages:
        if not _refs(message):
            out.append(message)
            continue
        parts = []
        for part in message["content"]:
            if isinstance(part, dict) and part.get("type") == "image_ref":
                parts.append(await _image_part(part, media, vision))
            else:
                parts.append(part)
        out.append({**message, "content": parts})
    return out


async def _image_part(ref: dict[str, Any], media: MediaStore, vision: bool) -> dict[str, Any]:
    path = ref.get("path", "?")
    if not vision:
        return {"type": "text", "text": f"[image {path} not shown: the model takes no images]"}
    url, why = await asyncio.to_thread(media.data_url, ref)
    if url is None:
        log.warning("image %s not sent: %s", path, why)
        return {"type": "text", "text": f"[image {path} could not be shown: {why}]"}
    return {"type": "image_url", "image_url": {"url": url}}


def stored_files(root: SafeRoot) -> list[tuple[str, os.stat_result]]:
    """(name, status) of each regular file in root's media/ named as the store names images
    (links and other kinds skipped; one removed meanwhile, e.g. pruned by another replica, too).
    FileRefused when media/ itself is missing or refused."""
    found = []
    with root.open(MEDIA_DIR, os.O_RDONLY | os.O_DIRECTORY) as fd:
        for entry in os.scandir(fd):
            if not STORED_NAME.fullmatch(entry.name):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode):
                found.append((entry.name, info))
    return found
