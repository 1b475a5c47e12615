"""A person on Matrix with end-to-end encryption, as their client does it: matrix-nio's real
AsyncClient (vodozemac) against the fake homeserver, with its own device, keys and store, on an
event loop of its own so a synchronous test can drive it."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Any

from nio import AsyncClient, AsyncClientConfig, MegolmEvent, RoomMessageText, SyncResponse
from nio.crypto import decrypt_attachment

from tests.fakes.matrix_homeserver import BOT, FakeHomeserver

DEVICE = "PERSONDEVICE"


class EncryptedPerson:
    def __init__(self, fake: FakeHomeserver, user: str, store: Path):
        self.fake = fake
        self.loop = asyncio.new_event_loop()
        store.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = fake.add_login(user, DEVICE)
        config = AsyncClientConfig(encryption_enabled=True, store_sync_tokens=True)
        self.client = AsyncClient(fake.url, user, DEVICE, str(store), config=config)
        self.client.restore_login(user, DEVICE, token)
        self.since: str | None = None
        self.answers: dict[str, str] = {}  # the bot's messages read, by event id (edits applied)
        self.unreadable = 0  # the bot's events this device could not decrypt
        self.pictures: list[dict[str, Any]] = []  # the bot's m.image contents, decrypted
        self._run(self.client.keys_upload())

    def _run(self, call: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(call, 30))

    def sync(self) -> None:
        """One sync, then what the client owes after it (keys, room keys), as Element does."""
        reply = self._run(self.client.sync(timeout=500, since=self.since))
        assert isinstance(reply, SyncResponse), reply
        self.since = reply.next_batch
        if self.client.should_upload_keys:
            self._run(self.client.keys_upload())
        if self.client.should_query_keys:
            self._run(self.client.keys_query())
        self._run(self.client.send_to_device_messages())
        for info in reply.rooms.join.values():
            for event in info.timeline.events:
                self._read(event)

    def _read(self, event: Any) -> None:
        if getattr(event, "sender", "") != BOT:
            return
        if isinstance(event, MegolmEvent):
            self.unreadable += 1
        elif event.source.get("content", {}).get("msgtype") == "m.image":
            self.pictures.append(event.source["content"])
        elif isinstance(event, RoomMessageText):
            content = event.source["content"]
            edit = content.get("m.relates_to") or {}
            if edit.get("rel_type") == "m.replace":
                self.answers[edit["event_id"]] = content["m.new_content"]["body"]
            else:
                self.answers[event.event_id] = event.body

    def send_image(self, room_id: str, data: bytes, name: str, mime: str) -> None:
        """An image as Element sends it in an encrypted room: uploaded encrypted, its key in
        the (encrypted) event's `file`."""
        self.sync()
        upload = self.client.upload(
            io.BytesIO(data), content_type=mime, filename=name, encrypt=True, filesize=len(data)
        )
        uploaded, keys = self._run(upload)
        content = {
            "msgtype": "m.image",
            "body": name,
            "filename": name,
            "info": {"mimetype": mime, "size": len(data)},
            "file": {**keys, "url": uploaded.content_uri},
        }
        self._run(self.client.room_send(room_id, "m.room.message", content, None, True))

    def say(self, room_id: str, text: str) -> str:
        """Sends an encrypted message (sharing the room key with the devices in the room first,
        trusting them unverified as Element does by default); its event id."""
        self.sync()
        content = {"msgtype": "m.text", "body": text}
        sent = self._run(self.client.room_send(room_id, "m.room.message", content, None, True))
        return str(sent.event_id)

    def picture(self, content: dict[str, Any]) -> bytes:
        """A picture the bot sent, downloaded and decrypted as the person's client does."""
        file = content["file"]
        data = self.fake.media_of(file["url"]).data
        key, sha256 = file["key"]["k"], file["hashes"]["sha256"]
        return bytes(decrypt_attachment(data, key, sha256, file["iv"]))

    def wait_pictures(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while not self.pictures:
            assert time.monotonic() < deadline, "no picture from the bot"
            self.sync()
        return self.pictures

    def wait_answer(self, text: str, timeout: float = 40.0) -> None:
        """Syncs until one of the bot's messages holds `text`."""
        deadline = time.monotonic() + timeout
        while not any(text in answer for answer in self.answers.values()):
            assert time.monotonic() < deadline, f"no answer {text!r}: {self.answers}"
            self.sync()

    def close(self) -> None:
        self._run(self.client.close())
        self.loop.close()
