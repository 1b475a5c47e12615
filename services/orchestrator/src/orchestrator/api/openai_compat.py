"""OpenAI-compatible endpoints, so any OpenAI client or chat UI can use Crayfish as a model."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.failed_turns import failed_turn
from orchestrator.api.retries import REPLAY_HEADERS, V1RequestDep, earlier_task, submit_once
from orchestrator.api.schemas import RequestBody
from orchestrator.api.sse import sse_comment, sse_event, sse_response
from orchestrator.core import OrchestratorCore
from orchestrator.media import ImageRejected, user_content
from orchestrator.store import InvalidSessionId
from orchestrator.store.sessions import check_session_id
from orchestrator.store.tasks import Task
from orchestrator.store.turn_requests import TurnRequest

router = APIRouter(tags=["openai"])


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    include_usage: bool = Field(False, strict=True)


class CompletionRequest(RequestBody):
    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = Field(False, strict=True)
    stream_options: StreamOptions | None = None


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return content or ""


def _image_urls(content: str | list[dict[str, Any]] | None) -> list[str]:
    """The URLs of a message's `image_url` parts (`{"url": ...}` or, as some clients send
    it, the URL itself)."""
    if not isinstance(content, list):
        return []
    urls = []
    for part in content:
        if part.get("type") != "image_url":
            continue
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str) or not url:
            raise ApiError(400, "an image_url part has no `url`", "invalid_messages")
        urls.append(url)
    return urls


def _kept(message: ChatMessage) -> bool:
    """An earlier message that goes into a new session's history."""
    if message.role not in ("user", "assistant"):
        return False
    return bool(_text(message.content) or _image_urls(message.content))


async def _message_with_images(core: OrchestratorCore, message: ChatMessage) -> dict[str, Any]:
    images = await core.take_images(_image_urls(message.content))
    return {"role": message.role, "content": user_content(_text(message.content), images)}


@router.get("/v1/models")
async def list_models(core: CoreDep) -> dict[str, Any]:
    """The agents on offer (one per orchestrator)."""
    name = core.settings.agent_name
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "crayfish"}],
    }


async def _start_turn(
    body: CompletionRequest,
    core: OrchestratorCore,
    session_header: str | None,
    request: TurnRequest,
) -> tuple[Task, bool]:
    """The turn's task, and whether it is an earlier attempt's (this request repeats it)."""
    if body.messages[-1].role != "user":
        raise ApiError(400, "the last message must have role 'user'", "invalid_messages")
    last = body.messages[-1]
    message = _text(last.content)
    if not message.strip() and not _image_urls(last.content):
        raise ApiError(400, "the last user message is empty", "invalid_messages")
    earlier = await earlier_task(core, request)
    if earlier is not None:
        return earlier, True
    session_id = session_header or f"oai-{uuid.uuid4().hex}"
    # No named session: the conversation is what the client sent, earlier messages included.
    prior = [] if session_header else [m for m in body.messages[:-1] if _kept(m)]
    try:
        check_session_id(session_id)
        # Every image this request would fetch and store, counted before any is.
        core.check_request_images(sum(len(_image_urls(m.content)) for m in [*prior, last]))
        images = await core.take_images(_image_urls(last.content))
        if prior:
            await core.store.append(
                session_id, [await _message_with_images(core, m) for m in prior]
            )
        return await submit_once(
            core, request, session_id, message or "(image)", images, bool(prior)
        )
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    except ImageRejected as exc:
        raise ApiError(exc.status, exc.message, exc.code) from exc


def _completion(task: Task, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{task.id}",
        "object": "chat.completion",
        "created": int(task.created_at),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": task.result or ""},
                "finish_reason": "stop",
            }
        ],
        "usage": openai_usage(task.usage),
    }


@router.post(
    "/v1/chat/completions",
    response_model=None,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def chat_completions(
    body: CompletionRequest,
    core: CoreDep,
    turn_request: V1RequestDep,
    x_crayfish_session: Annotated[str | None, Header()] = None,
) -> JSONResponse | EventSourceResponse:
    """Runs a full turn (tools run server-side) and answers as an OpenAI chat completion; a
    retry of the request gets the same turn's answer (api/retries.py)."""
    task, replay = await _start_turn(body, core, x_crayfish_session, turn_request)
    headers = {"X-Crayfish-Session": task.session_id, "X-Crayfish-Task": task.id}
    if replay:
        headers.update(REPLAY_HEADERS)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return sse_response(_chunks(core, task, body.model, include_usage, replay), headers)
    task = await core.tasks.wait(task.id)
    if task.status != "completed":
        return failed_turn(task, replay).response(headers)
    return JSONResponse(_completion(task, body.model), headers=headers)


def _chunk(task: Task, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{task.id}",
        "object": "chat.completion.chunk",
        "created": int(task.created_at),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def _chunks(
    core: OrchestratorCore, task: Task, model: str, include_usage: bool, replay: bool = False
) -> AsyncIterator[ServerSentEvent]:
    yield sse_event(_chunk(task, model, {"role": "assistant", "content": ""}, None))
    async for event in core.tasks.follow(task.id, 0):
        if event.type == "assistant.delta" and event.data.get("text"):
            yield sse_event(_chunk(task, model, {"content": event.data["text"]}, None))
        elif event.type in ("tool.started", "tool.finished"):
            yield sse_comment(f"crayfish {event.type} {event.data.get('tool', '')}")
    task = await core.tasks.wait(task.id)
    if task.status == "completed":
        yield sse_event(_chunk(task, model, {}, "stop"))
        if include_usage:
            usage_chunk = _chunk(task, model, {}, None)
            usage_chunk["choices"], usage_chunk["usage"] = [], openai_usage(task.usage)
            yield sse_event(usage_chunk)
    else:
        yield sse_event(failed_turn(task, replay).body())
    yield sse_event("[DONE]")


def openai_usage(usage: dict[str, int]) -> dict[str, Any]:
    """A task's usage in OpenAI's shape (cached prompt tokens under prompt_tokens_details)."""
    shaped: dict[str, Any] = {k: v for k, v in usage.items() if k != "cached_prompt_tokens"}
    shaped["prompt_tokens_details"] = {"cached_tokens": usage.get("cached_prompt_tokens", 0)}
    return shaped
