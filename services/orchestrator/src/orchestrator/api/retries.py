"""Recognising a client's retry of a request that started a turn, so it gets that turn's outcome
instead of a second run (README: "A turn runs once"): by its `Idempotency-Key`, by the openai
SDK's `X-Stainless-Retry-Count` (the SDK resends the same body), or, from a client that says
neither, by the same body on the same conversation soon after that turn failed."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import Depends, Request

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.core import OrchestratorCore
from orchestrator.store.turn_requests import Earlier, Match, TurnRequest
from orchestrator.store.turns import Turn

MAX_KEY_CHARS = 255
REPLAY_HEADERS = {"X-Crayfish-Replay": "true"}


async def turn_request(request: Request, core: CoreDep, route: str) -> TurnRequest:
    """The request as TurnRequests records it: its fingerprint (route, named session, body) and
    how an earlier one it repeats is recognised."""
    key = idempotency_key(request)
    if key is not None:
        match: Match = "key"
    else:
        retry_count = request.headers.get("x-stainless-retry-count", "").strip()
        if retry_count.isdigit():  # the SDK's: 0 is a new call (asking the same again runs)
            match = "retry" if int(retry_count) > 0 else "none"
        else:
            match = "failed"
    digest = hashlib.sha256(f"{route}\0{request.headers.get('x-crayfish-session', '')}\0".encode())
    digest.update(await request.body())
    return TurnRequest(route, digest.hexdigest(), key, match, core.settings.retry_window)


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY_CHARS:
        raise ApiError(
            400, f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters", "invalid_header"
        )
    return key


async def _v1_request(request: Request, core: CoreDep) -> TurnRequest:
    return await turn_request(request, core, "/v1/chat/completions")


V1RequestDep = Annotated[TurnRequest, Depends(_v1_request)]


async def earlier_task(core: OrchestratorCore, request: TurnRequest) -> Turn | None:
    """The turn of the earlier request this one repeats, if any."""
    if request.match == "none":
        return None
    return await task_of(core, request, await core.earlier_request(request))


async def task_of(
    core: OrchestratorCore, request: TurnRequest, earlier: Earlier | None
) -> Turn | None:
    """The earlier request's turn; an Idempotency-Key that came with another request is
    refused (422), as the IETF Idempotency-Key draft asks."""
    if earlier is None:
        return None
    if earlier.fingerprint != request.fingerprint:
        raise ApiError(
            422,
            "this Idempotency-Key was used for a different request; use a new key",
            "idempotency_key_reused",
        )
    return await core.get_task(earlier.task_id)


async def submit_once(
    core: OrchestratorCore,
    request: TurnRequest,
    session_id: str,
    message: str,
    images: list[dict[str, object]],
    model: str = "",
) -> tuple[Turn, bool]:
    """Submits a chat turn once (see `settled`)."""
    submitted = await core.submit_once(request, session_id, message, images=images, model=model)
    return await settled(core, request, submitted)


async def settled(
    core: OrchestratorCore,
    request: TurnRequest,
    submitted: Turn | Earlier,
    fresh_session: str | None = None,
) -> tuple[Turn, bool]:
    """The submitted turn, or, when an identical attempt got there first (two arriving
    together), that one's turn (True: a replay); then a session made for this attempt alone
    (`fresh_session`) is dropped."""
    if isinstance(submitted, Turn):
        return submitted, False
    if fresh_session is not None:
        await core.delete_unused_session(fresh_session)
    turn = await task_of(core, request, submitted)
    assert turn is not None  # a request is recorded with its turn, and goes with it
    return turn, True
