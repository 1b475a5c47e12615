"""A file or image of a person's message, read from
`GET /open-apis/im/v1/messages/{message_id}/resources/{key}?type=image|file` with a time limit
and the size capped while reading. Not lark-oapi's `message_resource.aget`: it reads the whole
body (Feishu serves up to 100 MB) before anything can look at its size."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

import httpx

from channels.contract import Attachment, PlatformRefused, RetryLater
from channels.downloads import stated_size, take_capped
from channels.feishu.content import resource_of
from channels.feishu.token import STALE, TenantToken

RETRY = 2.0
RATE_LIMITED = 99991400


async def download(
    http: httpx.AsyncClient,
    domain: str,
    token: TenantToken,
    attachment: Attachment,
    max_bytes: int,
) -> bytes:
    """The attachment's bytes; PlatformRefused when over `max_bytes` or refused, RetryLater
    when Feishu asks to wait or does not answer in time."""
    message_id, kind, key = resource_of(attachment.ref)
    if kind not in ("image", "file") or not message_id or not key:
        raise PlatformRefused(f"{attachment.name}: not a Feishu resource")
    url = f"{domain}/open-apis/im/v1/messages/{quote(message_id, safe='')}/resources/"
    url += quote(key, safe="")
    bearer = await token.get()
    try:
        async with asyncio.timeout(token.timeout):
            return await _read(http, url, kind, bearer, token, attachment.name, max_bytes)
    except TimeoutError:
        raise RetryLater(f"{attachment.name}: Feishu did not send it in time", RETRY) from None
    except httpx.HTTPError as exc:
        raise RetryLater(f"{attachment.name}: Feishu did not answer: {exc}", RETRY) from exc


async def _read(
    http: httpx.AsyncClient,
    url: str,
    kind: str,
    bearer: str,
    token: TenantToken,
    name: str,
    max_bytes: int,
) -> bytes:
    headers = {"Authorization": f"Bearer {bearer}"}
    async with http.stream("GET", url, params={"type": kind}, headers=headers) as response:
        if response.status_code != 200:
            _refusal(response, await response.aread(), token, bearer, name)
        stated = stated_size(response.headers.get("content-length"))
        return await take_capped(response.aiter_bytes(), stated, name, max_bytes)


def _refusal(
    response: httpx.Response, raw: bytes, token: TenantToken, bearer: str, name: str
) -> None:
    """Raises what Feishu's error answer means."""
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        body = {}
    code, why = body.get("code"), f"{body.get('code')} {body.get('msg')}"
    if code in STALE:
        token.forget(bearer)
        raise RetryLater(f"{name}: Feishu refused the token ({why})", RETRY)
    if response.status_code == 429 or code == RATE_LIMITED:
        reset = response.headers.get("x-ogw-ratelimit-reset") or RETRY
        raise RetryLater(f"{name}: Feishu: {why}", float(reset))
    if response.status_code >= 500:
        raise RetryLater(f"{name}: Feishu: {why}", RETRY)
    raise PlatformRefused(f"{name}: Feishu refused it: {why}")
