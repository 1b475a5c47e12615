"""End-to-end encryption for the Matrix channel, through matrix-nio's olm machine (vodozemac):
the bot's device keys in a private store, the key work a sync asks for, and whom room keys are
shared with.

Trust: trust on first use. The first keys the bot sees for a device of a member of a room it
writes in are pinned (nio's store) and trusted, so its answers are readable there; a device
whose signing key later differs from the pinned one is blacklisted and logged, never trusted
silently (nio itself keeps the old key and ignores the new one), so no room key reaches it
and its messages are not taken. In an encrypted room only messages decrypted with a key from
a known device of their sender count. Who may talk is still the access rules' decision."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nio import AsyncClient, KeysQueryResponse, MatrixRoom, RoomGetStateEventResponse
from nio.crypto import ENCRYPTION_ENABLED

log = logging.getLogger(__name__)
ENCRYPTION_STATE = "m.room.encryption"

NONE: frozenset[str] = frozenset()
NOT_FOUND = frozenset({"M_NOT_FOUND"})
# One API call within the call timeout, errors raised mapped except the errcodes given.
Call = Callable[[Awaitable[Any], frozenset[str]], Awaitable[Any]]


def private_dir(path: str) -> Path:
    """The store's folder, made if missing, readable by this user only (tightened when not)."""
    folder = Path(path).expanduser()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(folder.stat().st_mode) & 0o077:
        log.warning("matrix: %s was open to others; made private (0700)", folder)
        os.chmod(folder, 0o700)
    return folder


class Encryption:
    """The olm side of one client: on only when nio has vodozemac and the token has a device."""

    def __init__(self, client: AsyncClient, call: Call):
        self.client = client
        self.call = call
        self.lock = asyncio.Lock()  # one key query / claim / upload at a time

    @property
    def on(self) -> bool:
        return self.client.olm is not None

    def open(self, user_id: str, device_id: str) -> None:
        """Loads (or makes, the first time) this device's olm account from the store."""
        if not ENCRYPTION_ENABLED:
            log.warning("matrix: no vodozemac: encrypted rooms cannot be read")
            return
        if not device_id:
            log.warning("matrix: the token has no device: encrypted rooms cannot be read")
            return
        self.client.restore_login(user_id, device_id, self.client.access_token)
        log.info("matrix: device %s, keys in %s", device_id, self.client.store_path)

    async def after_sync(self) -> None:
        """What the last sync asked for: our keys published, changed devices' keys fetched,
        broken sessions replaced, queued to-device messages (room keys) sent."""
        if not self.on:
            return
        async with self.lock:
            if self.client.should_upload_keys:
                await self.call(self.client.keys_upload(), NONE)
            await self._query()
            if self.client.should_claim_keys:
                users = self.client.get_users_for_key_claiming()
                await self.call(self.client.keys_claim(users), NONE)
        await self.call(self.client.send_to_device_messages(), NONE)

    async def _query(self) -> None:
        if not self.client.should_query_keys:
            return
        pinned = {
            (user, device.id): device.ed25519
            for user in self.client.users_for_key_query
            for device in self.client.device_store.active_user_devices(user)
        }
        reply = await self.call(self.client.keys_query(), NONE)
        if isinstance(reply, KeysQueryResponse):
            self._refuse_changed(reply, pinned)

    def _refuse_changed(self, reply: KeysQueryResponse, pinned: dict[tuple[str, str], str]) -> None:
        for user, devices in reply.device_keys.items():
            for device_id, payload in devices.items():
                was = pinned.get((user, device_id))
                now = (payload.get("keys") or {}).get(f"ed25519:{device_id}")
                if was is None or now == was:
                    continue
                device = self.client.device_store[user].get(device_id)
                if device is not None and not device.blacklisted:
                    self.client.blacklist_device(device)
                    log.warning(
                        "matrix: the signing key of %s's device %s changed: not trusted, "
                        "no room keys go to it and its messages are not taken",
                        user,
                        device_id,
                    )

    def refusal(self, room_id: str, event: Any) -> str:
        """Why a message event is not taken from the room ('' when it is): in an encrypted
        room only messages decrypted with a room key from a device of their sender that the
        bot knows and does not distrust (the homeserver could write anything in the clear)."""
        room = self.client.rooms.get(room_id) if self.on else None
        if room is None or not room.encrypted:
            return ""
        if not getattr(event, "decrypted", False):
            return "sent in the clear in an encrypted room"
        devices = self.client.device_store.active_user_devices(event.sender)
        device = next((d for d in devices if d.curve25519 == event.sender_key), None)
        if device is None:
            return "from a device whose keys are unknown or changed"
        if device.blacklisted:
            return f"from device {device.id}, not trusted since its keys changed"
        if not device.verified:
            self.client.verify_device(device)
            log.info("matrix: trusting %s's device %s on first use", event.sender, device.id)
        return ""

    async def prepare(self, room_id: str) -> bool:
        """Before the bot writes in the room: whether it is encrypted; if so its members and
        their devices are known and first-seen devices trusted, so nio can share the key."""
        if not self.on:
            return False
        room = await self._room(room_id)
        if not room.encrypted:
            return False
        async with self.lock:
            if not room.members_synced:
                await self.call(self.client.joined_members(room_id), NONE)
            await self._query()
        self._trust_first_use(room)
        return True

    async def _room(self, room_id: str) -> MatrixRoom:
        """nio's room; one no sync has shown since the start (a reply owed from before a
        restart) is looked up, so an encrypted room is never written to in the clear."""
        room = self.client.rooms.get(room_id)
        if room is not None:
            return room
        lookup = self.client.room_get_state_event(room_id, ENCRYPTION_STATE)
        state = await self.call(lookup, NOT_FOUND)  # M_NOT_FOUND: never encrypted
        encrypted = isinstance(state, RoomGetStateEventResponse) and "algorithm" in state.content
        room = self.client.rooms.setdefault(
            room_id, MatrixRoom(room_id, self.client.user_id, encrypted)
        )
        if encrypted:
            self.client.encrypted_rooms.add(room_id)
        return room

    def _trust_first_use(self, room: MatrixRoom) -> None:
        for user in room.users:
            for device in self.client.device_store.active_user_devices(user):
                if device.verified or device.blacklisted or device.ignored:
                    continue
                if user == self.client.user_id and device.id == self.client.device_id:
                    continue
                self.client.verify_device(device)
                log.info("matrix: trusting %s's device %s on first use", user, device.id)
