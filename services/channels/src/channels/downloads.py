"""Reading a platform's file over HTTP within a size cap: the stated size is checked before any
byte is read, and the body is cut off as soon as it grows past the cap (a stated size can lie).
For aiohttp responses (`read_capped`) and any other client's chunks (`take_capped`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp

from channels.contract import PlatformRefused

CHUNK = 64 * 1024


def check_stated(name: str, size: int, max_bytes: int) -> None:
    """PlatformRefused when the platform says the file is larger than `max_bytes`."""
    if size > max_bytes:
        raise PlatformRefused(f"{name} is {size} bytes, over the {max_bytes} a message may bring")


def stated_size(value: object) -> int:
    """A size as a platform states it (a header, a JSON field); 0 when absent or not a number."""
    try:
        return max(int(str(value or 0)), 0)
    except ValueError:
        return 0


async def take_capped(
    chunks: AsyncIterator[bytes], stated: int, name: str, max_bytes: int
) -> bytes:
    """The body the chunks make up; PlatformRefused when `stated` is over `max_bytes`, or once
    the body passes it (nothing more is read)."""
    check_stated(name, stated, max_bytes)
    data = bytearray()
    async for chunk in chunks:
        data += chunk
        if len(data) > max_bytes:
            raise PlatformRefused(f"{name} is over the {max_bytes} bytes a message may bring")
    return bytes(data)


async def read_capped(response: aiohttp.ClientResponse, name: str, max_bytes: int) -> bytes:
    """An aiohttp response's body, capped as `take_capped`."""
    chunks = response.content.iter_chunked(CHUNK)
    return await take_capped(chunks, response.content_length or 0, name, max_bytes)
