"""OpenAI-compatible endpoints, so any OpenAI client or chat UI can use Crayfish as a model."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from orchestrator.agent.client_request import ClientAnswer
from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.failed_turns import failed_turn
from orchestrator.api.openai_answer import (
    Peeked,
    answer_message,
    answer_of,
    finish_reason,
    refusal_body,
    refusal_response,
    remember,
    tool_call_deltas,
)
from orchestrator.api.openai_request import TurnPlan, check_order, client_request, plan_turn
from orchestrator.api.retries import REPLAY_HEADERS, V1RequestDep, earlier_task, settled
from orchestrator.api.schemas import RequestBody
from orchestrator.api.sse import sse_comment, sse_event, sse_response
from orchestrator.content.media import ImageRejected, user_content
from orchestrator.core import OrchestratorCore
from orchestrator.store import InvalidSessionId, StoredEvent
from orchestrator.store.sessions import check_session_id
from orchestrator.store.turn_requests import TurnRequest
from orchestrator.store.turns import Turn

router = APIRouter(tags=["openai"])


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None  # of an assistant message
    tool_call_id: str | None = None  # of a tool message: the call it answers


class StreamOptions(BaseModel):
    include_usage: bool = Field(False, strict=True)


class CompletionRequest(RequestBody):
    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = Field(False, strict=True)
    stream_options: StreamOptions | None = None
    # The client's own tools, offered beside Crayfish's; a call of one is handed back.
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    # temperature, top_p, max_tokens, stop, seed, response_format... (model_extra) go to the
    # provider as sent (agent/client_request.py FORWARDED_PARAMS).


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


async def _stored(core: OrchestratorCore, message: dict[str, Any]) -> dict[str, Any]:
    """An earlier message of a new session as its history holds it (images fetched)."""
    content = message.get("content")
    if message["role"] == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": _text(content)}
    if message["role"] == "assistant":
        stored: dict[str, Any] = {"role": "assistant", "content": _text(content)}
        if message.get("tool_calls"):
            stored["tool_calls"] = [_call(c) for c in message["tool_calls"]]
        return stored
    images = await core.take_images(_image_urls(content))
    return {"role": message["role"], "content": user_content(_text(content), images)}


def _call(call: dict[str, Any]) -> dict[str, Any]:
    """A client's tool call in the shape every provider takes (arguments as JSON text)."""
    function = call["function"]
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    name = str(function.get("name", ""))
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _kept(message: dict[str, Any]) -> bool:
    """Whether an earlier message goes into a new session's history (not an empty answer)."""
    content = message.get("content")
    return bool(message.get("tool_calls") or _text(content) or _image_urls(content))


@router.get("/v1/models")
async def list_models(core: CoreDep) -> dict[str, Any]:
    """The agent (its session's or the default model preset), then each model preset."""
    presets = core.settings.presets
    agent = {"id": core.settings.agent_name, "object": "model", "created": 0}
    listed = [{**agent, "owned_by": "crayfish"}]
    for preset in presets.by_name.values():
        about = {
            "model": preset.model,
            "default": preset.name == presets.default,
            "fallback": preset.name in presets.fallbacks,
            "background": preset.name == presets.background,
        }
        listed.append(
            {"id": preset.name, "object": "model", "created": 0, "owned_by": "crayfish"}
            | {"crayfish": about}
        )
    return {"object": "list", "data": listed}


async def _start_turn(
    body: CompletionRequest,
    core: OrchestratorCore,
    session_header: str | None,
    turn_request: TurnRequest,
) -> tuple[Turn, TurnPlan, bool]:
    """The turn, where it goes, and whether it is an earlier attempt's (this request
    repeats it: api/retries.py)."""
    model = core.client_model(body.model)  # 404 model_not_found for a name that is no preset
    messages = [m.model_dump() for m in body.messages]
    check_order(messages)
    request = client_request(body, messages, await core.own_tool_names())
    try:
        plan = await plan_turn(core, messages, session_header)
        check_session_id(plan.session_id)
        earlier = await earlier_task(core, turn_request)
        if earlier is not None:
            return earlier, dataclasses.replace(plan, session_id=earlier.session_id), True
        users = [m for m in plan.new if m["role"] == "user"]
        request.tool_results = {
            m["tool_call_id"]: _text(m["content"]) for m in plan.new if m["role"] == "tool"
        }
        message = "\n\n".join(_text(m["content"]) for m in users if _text(m["content"]).strip())
        urls = [url for m in users for url in _image_urls(m["content"])]
        if users and not message.strip() and not urls:
            raise ApiError(400, "the last user message is empty", "invalid_messages")
        seed = [m for m in plan.seed if _kept(m)]
        # Every image this request would fetch and store, counted before any is.
        core.check_request_images(len(urls) + sum(len(_image_urls(m["content"])) for m in seed))
        images = await core.take_images(urls)
        if seed:
            await core.seed_session(plan.session_id, [await _stored(core, m) for m in seed])
        if users and not message and images:
            message = "(image)"
        submitted = await core.submit_client_turn(
            turn_request, plan.session_id, message, images, request, model
        )
        fresh = plan.session_id if seed else None
        turn, replay = await settled(core, turn_request, submitted, fresh)
        return turn, dataclasses.replace(plan, session_id=turn.session_id), replay
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    except ImageRejected as exc:
        raise ApiError(exc.status, exc.message, exc.code) from exc


def _completion(turn: Turn, model: str, answer: ClientAnswer) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{turn.id}",
        "object": "chat.completion",
        "created": int(turn.created_at),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": answer_message(turn.result or "", answer),
                "finish_reason": finish_reason(answer),
            }
        ],
        "usage": openai_usage(turn.usage),
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
    """Runs a turn (Crayfish's tools run server-side; a call of one of the client's `tools`
    ends it, handed back) and answers as an OpenAI chat completion; a retry of the request
    gets the same turn's answer (api/retries.py)."""
    turn, plan, replay = await _start_turn(body, core, x_crayfish_session, turn_request)
    headers = {"X-Crayfish-Session": turn.session_id, "X-Crayfish-Task": turn.id}
    if replay:
        headers.update(REPLAY_HEADERS)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        peek = Peeked(core.follow_task(turn.id, 0))
        refused = await _refusal(core, await peek.wait())
        if refused is not None:
            return refusal_response(refused, headers)
        chunks = _chunks(core, turn, body.model, include_usage, peek, plan, replay)
        return sse_response(chunks, headers)
    turn = await core.wait_for_task(turn.id)
    answer = await answer_of(core, turn)
    if turn.status != "completed":
        if answer.refusal is not None:
            return refusal_response(answer.refusal, headers)
        return failed_turn(turn, replay).response(headers)
    await remember(core, plan, answer_message(turn.result or "", answer))
    return JSONResponse(_completion(turn, body.model, answer), headers=headers)


async def _refusal(core: OrchestratorCore, last: StoredEvent | None) -> dict[str, Any] | None:
    """The provider's refusal, when the turn failed with one before answering anything."""
    if last is None or last.type != "task.failed":
        return None
    turn = await core.wait_for_task(last.task_id)
    return (await answer_of(core, turn)).refusal


def _chunk(turn: Turn, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{turn.id}",
        "object": "chat.completion.chunk",
        "created": int(turn.created_at),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def _chunks(
    core: OrchestratorCore,
    turn: Turn,
    model: str,
    include_usage: bool,
    peek: Peeked,
    plan: TurnPlan,
    replay: bool,
) -> AsyncIterator[ServerSentEvent]:
    yield sse_event(_chunk(turn, model, {"role": "assistant", "content": ""}, None))
    shown = []  # the text streamed, which the client keeps as the answer
    async for event in peek.events():
        if event.type == "assistant.delta" and event.data.get("text"):
            shown.append(event.data["text"])
            yield sse_event(_chunk(turn, model, {"content": event.data["text"]}, None))
        elif event.type in ("tool.started", "tool.finished"):
            yield sse_comment(f"crayfish {event.type} {event.data.get('tool', '')}")
    turn = await core.wait_for_task(turn.id)
    answer = await answer_of(core, turn)
    if turn.status == "completed":
        for delta in tool_call_deltas(answer.tool_calls):
            yield sse_event(_chunk(turn, model, delta, None))
        await remember(core, plan, answer_message("".join(shown), answer))
        yield sse_event(_chunk(turn, model, {}, finish_reason(answer)))
        if include_usage:
            usage_chunk = _chunk(turn, model, {}, None)
            usage_chunk["choices"], usage_chunk["usage"] = [], openai_usage(turn.usage)
            yield sse_event(usage_chunk)
    elif answer.refusal is not None:
        yield sse_event(refusal_body(answer.refusal))
    else:
        yield sse_event(failed_turn(turn, replay).body())
    yield sse_event("[DONE]")


def openai_usage(usage: dict[str, int]) -> dict[str, Any]:
    """A turn's usage in OpenAI's shape (cached prompt tokens under prompt_tokens_details)."""
    shaped: dict[str, Any] = {k: v for k, v in usage.items() if k != "cached_prompt_tokens"}
    shaped["prompt_tokens_details"] = {"cached_tokens": usage.get("cached_prompt_tokens", 0)}
    return shaped
