"""Which tool-runner serves a session: the same one for all of its calls, chosen alike by every
orchestrator replica, without shared state.

A session's background processes live on one runner, and so do their loopback (bwrap: the
session's network namespace) and, with docker, its container: a dev server is only reachable,
and `process poll` only finds it, on that runner. With one runner address nothing changes (the
pool). With several (a DNS name with many addresses, or an `ipv4:` list), each session goes to
the runner its id ranks first by rendezvous hashing over the addresses; a runner whose
connection is failing is passed over for the next. Adding or removing a runner moves only the
sessions it ranks first; a moved session's processes on a runner that still runs stay there
until their idle timeout (the README says so).
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import time

import grpc
from crayfish_common.channels import aio_channel

# Seconds an address lookup is trusted.
RESOLVE_EVERY = 30.0


class RunnerRing:
    """The runners `address` names, and one channel to each (made on first use)."""

    def __init__(self, address: str):
        self.address = address
        self._found: list[str] = []
        self._found_at = -RESOLVE_EVERY
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def addresses(self) -> list[str]:
        if time.monotonic() - self._found_at >= RESOLVE_EVERY:
            self._found = await runner_addresses(self.address)
            self._found_at = time.monotonic()
        return self._found

    async def channel_for(self, session_id: str) -> grpc.aio.Channel | None:
        """The session's runner; None with a single runner (the pool channel serves then)."""
        found = await self.addresses()
        if len(found) < 2 or not session_id:
            return None
        ranked = sorted(found, key=lambda a: _weight(session_id, a), reverse=True)
        for address in ranked:
            channel = self.channel(address)
            state = channel.get_state(try_to_connect=True)
            if state != grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                return channel
        return self.channel(ranked[0])

    async def all_channels(self) -> list[grpc.aio.Channel]:
        """One channel per runner (empty with a single runner: the pool serves then)."""
        found = await self.addresses()
        return [self.channel(a) for a in found] if len(found) > 1 else []

    def channel(self, address: str) -> grpc.aio.Channel:
        if address not in self._channels:
            self._channels[address] = aio_channel(address)
        return self._channels[address]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._channels.values()))


def _weight(session_id: str, address: str) -> int:
    digest = hashlib.sha256(f"{session_id}\0{address}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


async def runner_addresses(address: str) -> list[str]:
    """Every runner the tool-runner address names, one target each: `host:port` (or
    `dns:///host:port`) resolved to its addresses, an `ipv4:`/`ipv6:` list split; any other
    target (unix:) as it is."""
    for scheme in ("ipv4:", "ipv6:"):
        if address.startswith(scheme):
            return [scheme + one for one in address[len(scheme) :].split(",") if one]
    name = address.removeprefix("dns:///")
    if ":" not in name or name.startswith(("unix:", "dns:")):
        return [address]
    host, _, port = name.rpartition(":")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, int(port), type=socket.SOCK_STREAM
        )
    except (OSError, ValueError):
        return [address]
    found = {
        f"ipv4:{info[4][0]}:{port}" if info[0] == socket.AF_INET else f"ipv6:[{info[4][0]}]:{port}"
        for info in infos
    }
    return sorted(found) or [address]
