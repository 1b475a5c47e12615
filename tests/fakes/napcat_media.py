"""The fake NapCat's pictures and files (tests/fakes/napcat.py): what a person sends, as NapCat
gives it (packages/napcat-onebot/api/msg.ts, action/file/GetFile.ts), and pictures the bot sends.

In: an `image` segment `{"file": name, "url", "file_size": "<n>", "summary", "sub_type"}`
whose URL this module's HTTP server answers (as QQ's media servers do for NapCat's URLs); a
`file` segment `{"file": name, "file_id", "file_size"}` with no URL (NapCat adds one only with
its packet backend), its bytes from `get_file`: `{"file": path, "url": path, "file_size",
"file_name", "base64"}` (the path is on NapCat's disk; `base64` is there with NapCat's
`enableLocalFile2Url` on). An unknown file is NapCat's handler error, retcode 1200.

Out: an `image` segment whose `file` is `base64://…` (decoded: it must be a PNG, JPEG, GIF or
WebP) or an http(s) URL NapCat would fetch. A local path or `file://` is refused (1400): the
bot must never make NapCat read its own disk."""

from __future__ import annotations

import base64
import binascii
import itertools
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.platform_base import QuietHandler, http_url, start_http, stop_http

IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF")


class MediaRefused(Exception):
    def __init__(self, retcode: int, message: str):
        super().__init__(message)
        self.retcode = retcode


@dataclass
class Media:
    """Files people sent (by key) and pictures the bot showed (chat, bytes or URL)."""

    stored: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    pictures: list[tuple[str, bytes | str]] = field(default_factory=list)
    downloads: int = 0
    lost: bool = False  # get_file finds nothing (NapCat's cache was cleared)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _http: ThreadingHTTPServer | None = None

    def start(self) -> None:
        self._http = start_http(_Download, media=self)

    def stop(self) -> None:
        stop_http(self._http)

    def segment(self, data: bytes, name: str, image: bool) -> dict[str, Any]:
        """The segment NapCat's event holds for what the person sent."""
        with self.lock:
            key = f"{next(self._keys):08x}"
            self.stored[key] = (name, data)
        size = str(len(data))
        if image:
            url = f"{http_url(self._http)}/download?appid=1407&fileid={key}&spec=0"
            info = {"summary": "", "file": name, "sub_type": 0, "url": url, "file_size": size}
            return {"type": "image", "data": info}
        return {"type": "file", "data": {"file": name, "file_id": f"/{key}", "file_size": size}}

    def get_file(self, params: dict[str, Any]) -> dict[str, str]:
        key = str(params.get("file_id") or params.get("file") or "").removeprefix("/")
        with self.lock:
            found = None if self.lost else self.stored.get(key)
        if found is None:
            raise MediaRefused(1200, "file not found")
        name, data = found
        path = f"/app/.config/QQ/NapCat/temp/{name}"
        encoded = base64.b64encode(data).decode()
        size = str(len(data))
        return {"file": path, "url": path, "file_size": size, "file_name": name, "base64": encoded}

    def shown(self, chat: str, segment: dict[str, Any]) -> None:
        """A picture the bot sends in `chat`; refused as NapCat would."""
        file = str((segment.get("data") or {}).get("file") or "")
        if file.startswith("base64://"):
            try:
                data = base64.b64decode(file.removeprefix("base64://"), validate=True)
            except binascii.Error as exc:
                raise MediaRefused(1200, f"base64 解码失败: {exc}") from exc
            if not data.startswith(IMAGE_MAGIC):
                raise MediaRefused(1200, "文件类型不是图片")
            picture: bytes | str = data
        elif urlsplit(file).scheme in ("http", "https"):
            picture = file
        else:
            raise MediaRefused(1400, f"this fake refuses a path on NapCat's disk: {file[:80]}")
        with self.lock:
            self.pictures.append((chat, picture))


class _Download(QuietHandler):
    media: Media

    def do_GET(self) -> None:
        key = parse_qs(urlsplit(self.path).query).get("fileid", [""])[0]
        with self.media.lock:
            found = self.media.stored.get(key)
            self.media.downloads += 1
        status, body = (200, found[1]) if found else (404, b"not found")
        self.reply(status, body, "application/octet-stream")
