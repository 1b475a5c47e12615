"""Reading a platform's file over HTTP within a size cap: the stated size is checked before any
byte is read, and the body is cut off as soon as it grows past the cap (a stated size can lie)."""

from __future__ import annotations

import aiohttp

from channels.contract import PlatformRefused

CHUNK = 64 * 1024


def check_stated(name: str, size: int, max_bytes: int) -> None:
    """PlatformRefused when the platform says the file is larger than `max_bytes`."""
    if size > max_bytes:
        raise PlatformRefused(f"{name} is {size} bytes, over the {max_bytes} a message may bring")


async def read_capped(response: aiohttp.ClientResponse, name: str, max_bytes: int) -> bytes:
    """The response's body; PlatformRefused once it passes `max_bytes` (nothing more is read)."""
    check_stated(name, response.content_length or 0, max_bytes)
    data = bytearray()
    async for chunk in response.content.iter_chunked(CHUNK):
        data += chunk
        if len(data) > max_bytes:
            raise PlatformRefused(f"{name} is over the {max_bytes} bytes a message may bring")
    return bytes(data)
