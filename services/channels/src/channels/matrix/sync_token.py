"""Where the channel's /sync position is kept: the bot account's own account data on the
homeserver (`PUT /user/{id}/account_data/{type}`), so no volume is needed and a restart, on
any host, continues where the last acknowledged batch ended.

matrix-nio has no call for arbitrary account data, so these two requests go through its
client session (`AsyncClient.send`) with the same token."""

from __future__ import annotations

import json
from urllib.parse import quote

from nio import AsyncClient

TYPE = "org.crayfish.channels.sync"
PATH = "/_matrix/client/v3/user/{user}/account_data/" + TYPE


class SyncTokenError(Exception):
    """The homeserver did not answer the read or write of the token as it should."""


async def load(client: AsyncClient, seconds: float) -> str | None:
    """The last acknowledged `next_batch`, or None when the account has none yet."""
    path = PATH.format(user=quote(client.user_id, safe=""))
    reply = await client.send("GET", path, headers=_headers(client), timeout=seconds)
    async with reply:
        if reply.status == 404:
            return None
        if reply.status != 200:
            raise SyncTokenError(f"reading the sync token: HTTP {reply.status}")
        token = (await reply.json()).get("next_batch")
    return str(token) if token else None


async def save(client: AsyncClient, next_batch: str, seconds: float) -> None:
    """Acknowledges every event up to `next_batch`: a restart syncs from here."""
    path = PATH.format(user=quote(client.user_id, safe=""))
    body = json.dumps({"next_batch": next_batch})
    reply = await client.send("PUT", path, body, _headers(client), timeout=seconds)
    async with reply:
        if reply.status != 200:
            raise SyncTokenError(f"saving the sync token: HTTP {reply.status}")


def _headers(client: AsyncClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {client.access_token}", "Content-Type": "application/json"}
