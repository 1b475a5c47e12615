"""The fake homeserver's end-to-end encryption endpoints, as the spec has them
(https://spec.matrix.org/v1.11/client-server-api/#end-to-end-encryption): devices' identity
keys (`/keys/upload`, `/keys/query`), one-time and fallback keys (`/keys/claim`), to-device
messages (`/sendToDevice`) and what a sync carries of them (`to_device`, `device_lists`,
`device_one_time_keys_count`). The server only stores and forwards: every key is the clients'
own, and it never sees a room key or a message in the clear. Called with the fake's lock held."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Device = tuple[str, str]  # user id, device id


@dataclass
class Keys:
    devices: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # signed keys
    one_time: dict[Device, dict[str, Any]] = field(default_factory=dict)  # key id → key
    fallback: dict[Device, dict[str, Any]] = field(default_factory=dict)
    changes: list[tuple[int, str]] = field(default_factory=list)  # stream position, user
    inbox: list[tuple[int, Device, dict[str, Any]]] = field(default_factory=list)  # to-device
    transactions: set[tuple[Device, str]] = field(default_factory=set)
    uploads: list[tuple[Device, dict[str, Any]]] = field(default_factory=list)  # who sent what
    claims: list[tuple[str, Device]] = field(default_factory=list)  # claimer, whose key
    sent: list[tuple[Device, str]] = field(default_factory=list)  # to-device sender, type

    def upload(
        self, user: str, device: str, body: dict[str, Any], position: Callable[[], int]
    ) -> dict[str, int]:
        self.uploads.append(((user, device), body))
        identity = body.get("device_keys")
        if isinstance(identity, dict) and self.devices.get(user, {}).get(device) != identity:
            self.devices.setdefault(user, {})[device] = identity
            self.changes.append((position(), user))
        self.one_time.setdefault((user, device), {}).update(body.get("one_time_keys") or {})
        if body.get("fallback_keys"):
            self.fallback[(user, device)] = dict(body["fallback_keys"])
        return self._counts((user, device))

    def _counts(self, device: Device) -> dict[str, int]:
        counts: dict[str, int] = {}
        for key_id in self.one_time.get(device, {}):
            algorithm = key_id.split(":", 1)[0]
            counts[algorithm] = counts.get(algorithm, 0) + 1
        return counts

    def query(self, wanted: dict[str, list[str]]) -> dict[str, Any]:
        found: dict[str, dict[str, Any]] = {}
        for user, devices in wanted.items():
            known = self.devices.get(user, {})
            found[user] = {d: k for d, k in known.items() if not devices or d in devices}
        return {"device_keys": found, "failures": {}}

    def claim(self, claimer: str, wanted: dict[str, dict[str, str]]) -> dict[str, Any]:
        """One key per device asked for: a one-time key (used up), else its fallback key."""
        found: dict[str, dict[str, Any]] = {}
        for user, devices in wanted.items():
            for device, algorithm in devices.items():
                pool = self.one_time.get((user, device), {})
                key_id = next((k for k in pool if k.startswith(f"{algorithm}:")), None)
                key = {key_id: pool.pop(key_id)} if key_id else None
                if key is None:
                    fallback = self.fallback.get((user, device), {})
                    key = {k: v for k, v in fallback.items() if k.startswith(f"{algorithm}:")}
                if key:
                    found.setdefault(user, {})[device] = key
                    self.claims.append((claimer, (user, device)))
        return {"one_time_keys": found, "failures": {}}

    def send(
        self,
        user: str,
        device: str,
        kind: str,
        txn: str,
        messages: dict[str, dict[str, Any]],
        position: Callable[[], int],
    ) -> None:
        if ((user, device), txn) in self.transactions:
            return  # a retried request: delivered once
        self.transactions.add(((user, device), txn))
        self.sent.append(((user, device), kind))
        for target, per_device in messages.items():
            for target_device, content in per_device.items():
                names = self.devices.get(target, {}) if target_device == "*" else [target_device]
                for name in names:
                    event = {"type": kind, "sender": user, "content": content}
                    self.inbox.append((position(), (target, name), event))

    def sync(self, user: str, device: str, after: int | None) -> dict[str, Any]:
        """A sync's share: to-device messages past `after` (a sync from an older position gets
        them again, as a server keeps them until a later position is synced), users whose
        devices changed, and how many one-time keys the device has left."""
        start = after or 0
        events = [e for at, d, e in self.inbox if d == (user, device) and at > start]
        changed = sorted({u for at, u in self.changes if at > start and after is not None})
        return {
            "to_device": {"events": events},
            "device_lists": {"changed": changed, "left": []},
            "device_one_time_keys_count": self._counts((user, device)),
            "device_unused_fallback_key_types": [
                k.split(":", 1)[0] for k in self.fallback.get((user, device), {})
            ],
        }
