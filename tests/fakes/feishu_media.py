"""The fake Feishu's images and files (tests/fakes/feishu_api.py), in the documented formats
(https://open.feishu.cn/document: im-v1 message content, message-resource/get, image/create).

In: a picture is an `image` message (`{"image_key"}`), or with a caption a `post`
(`{"title", "content": [[{"tag": "img", "image_key"}], [{"tag": "text", "text"}]]}`, as
events carry posts); a file is a `file` message (`{"file_key", "file_name"}`; Feishu files
carry no text). Their bytes: `GET /open-apis/im/v1/messages/{message_id}/resources/{key}`
with `type=image|file`: the bytes, or 234001 (a wrong type), 234003 (no such resource in that
message). Out: `POST /open-apis/im/v1/images` (multipart: `image_type` message|avatar and
`image`: 234001 missing or wrong, 234010 empty, 234006 over 10 MB, 234011 not an image) gives
an `image_key`; an `image` message must name one uploaded."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.platform_base import Upload

IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF", b"BM")
IMAGE_MAX = 10 * 2**20


class ApiError(Exception):
    def __init__(self, status: int, code: int, msg: str, headers: dict[str, str] | None = None):
        super().__init__(msg)
        self.status, self.code, self.msg, self.headers = status, code, msg, headers or {}


@dataclass
class Binary:
    """A response that is a file, not JSON."""

    data: bytes
    name: str


@dataclass
class FeishuMedia:
    resources: dict[tuple[str, str], tuple[str, str, bytes]] = field(default_factory=dict)
    uploads: dict[str, bytes] = field(default_factory=dict)
    pictures: list[tuple[str, bytes]] = field(default_factory=list)  # chat, the image shown
    lock: threading.Lock = field(default_factory=threading.Lock)
    _keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def message(
        self, message_id: str, data: bytes, name: str, caption: str, image: bool
    ) -> tuple[str, str]:
        """The message_type and content of a person's picture or file."""
        kind = "image" if image else "file"
        key = f"{'img' if image else 'file'}_v3_{next(self._keys):04x}_fake"
        with self.lock:
            self.resources[(message_id, key)] = (kind, name, data)
        if not image:
            assert not caption, "a Feishu file message carries no text"
            return "file", json.dumps({"file_key": key, "file_name": name})
        if not caption:
            return "image", json.dumps({"image_key": key})
        rows = [[{"tag": "img", "image_key": key}], [{"tag": "text", "text": caption}]]
        return "post", json.dumps({"title": "", "content": rows})

    def resource(self, message_id: str, key: str, kind: str) -> Binary:
        if kind not in ("image", "file"):
            raise ApiError(400, 234001, "Invalid request param.")
        with self.lock:
            found = self.resources.get((message_id, key))
        if found is None:
            raise ApiError(400, 234003, "File not in msg.")
        if found[0] != kind:
            raise ApiError(400, 234001, f"Invalid request param: {key} is not of type {kind}")
        return Binary(found[2], found[1])

    def upload(self, fields: dict[str, Any]) -> dict[str, str]:
        upload = fields.get("image")
        if fields.get("image_type") not in ("message", "avatar") or not isinstance(upload, Upload):
            raise ApiError(400, 234001, "Invalid request param.")
        image = upload.data
        if not image:
            raise ApiError(400, 234010, "File's size can't be 0.")
        if len(image) > IMAGE_MAX:
            raise ApiError(400, 234006, "The file size exceed the max value.")
        if not image.startswith(IMAGE_MAGIC):
            raise ApiError(400, 234011, "Can't recognize the image format.")
        with self.lock:
            key = f"img_v3_{next(self._keys):04x}_up"
            self.uploads[key] = image
        return {"image_key": key}

    def show(self, chat_id: str, content: str) -> None:
        """An `image` message the bot sends."""
        key = str(json.loads(content or "{}").get("image_key", ""))
        with self.lock:
            if key not in self.uploads:
                raise ApiError(400, 230001, f"invalid image_key: {key!r}")
            self.pictures.append((chat_id, self.uploads[key]))
