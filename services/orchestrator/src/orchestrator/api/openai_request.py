"""How a /v1 request becomes a turn: its messages checked as OpenAI checks them, the session
whose conversation it extends (api/conversation.py), what is new in it, and what it asks of the
turn (ClientRequest)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from orchestrator.agent.client_request import FORWARDED_PARAMS, ClientRequest
from orchestrator.api.conversation import prefix_digests, text_of
from orchestrator.api.errors import ApiError
from orchestrator.core import OrchestratorCore

INSTRUCTION_ROLES = ("system", "developer")


@dataclass
class TurnPlan:
    """Where a request's turn goes and what it brings."""

    session_id: str
    digests: list[str]  # of each prefix of the request's messages
    seed: list[dict[str, Any]] = field(default_factory=list)  # a new session's earlier messages
    new: list[dict[str, Any]] = field(default_factory=list)  # tool results and user messages


def check_order(messages: list[dict[str, Any]]) -> None:
    """OpenAI's rules for tool calls in a conversation: each `tool` message answers, once, a
    call of the assistant message its group follows; each call is answered before the next
    message. The last message is the user's or a tool result."""
    awaiting: set[str] | None = None  # ids of the open group's calls not answered yet
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if awaiting is None or call_id not in awaiting:
                raise ApiError(
                    400,
                    f"messages[{i}] (role 'tool') answers no unanswered call of the assistant "
                    f"message before it (tool_call_id {call_id!r})",
                    "invalid_messages",
                )
            awaiting.discard(call_id)
            continue
        if awaiting:
            raise ApiError(
                400,
                f"messages[{i}]: the tool calls {sorted(awaiting)} have no 'tool' message "
                "answering them",
                "invalid_messages",
            )
        calls = message.get("tool_calls") if message["role"] == "assistant" else None
        awaiting = _call_ids(i, calls) if calls else None
    if messages[-1]["role"] not in ("user", "tool"):
        raise ApiError(400, "the last message must have role 'user' or 'tool'", "invalid_messages")


def _call_ids(i: int, calls: Any) -> set[str]:
    ids = set()
    for call in calls if isinstance(calls, list) else [calls]:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise ApiError(
                400,
                f"messages[{i}].tool_calls: each needs an id and a function",
                "invalid_messages",
            )
        ids.add(call["id"])
    return ids


def client_request(body: Any, messages: list[dict[str, Any]], own: set[str]) -> ClientRequest:
    """What the request asks of its turn; a client tool named like one of Crayfish's `own`
    tools is refused (the model could not tell them apart)."""
    extra = body.model_extra or {}
    tools = body.tools or []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ApiError(400, f"tools[{i}] needs a function with a name", "invalid_tools")
        if function["name"] in own:
            raise ApiError(
                400,
                f"tools[{i}]: '{function['name']}' is the name of one of Crayfish's own tools; "
                "give your tool another name",
                "tool_name_taken",
            )
    params = {k: extra[k] for k in FORWARDED_PARAMS if k in extra}
    try:  # what the provider is sent is written by orjson, which takes 64-bit integers only
        orjson.dumps([params, tools, body.tool_choice])
    except TypeError as exc:
        raise ApiError(400, f"parameters or tools: {exc}", "invalid_request") from exc
    instructions = "\n\n".join(
        text_of(m.get("content")).strip() for m in messages if m["role"] in INSTRUCTION_ROLES
    )
    return ClientRequest(
        instructions=instructions.strip(),
        params=params,
        tools=tools,
        tool_choice=(body.tool_choice or "") if tools else "",
    )


async def plan_turn(
    core: OrchestratorCore, messages: list[dict[str, Any]], session_header: str | None
) -> TurnPlan:
    """The session the request continues (named by its header, or whose conversation its
    messages extend) or a new one seeded with its earlier messages; and what is new."""
    digests = prefix_digests(messages)
    found = await core.conversation_sessions(digests[:-1])
    known = 0  # messages of the longest remembered conversation the request starts with
    session = None
    for length in range(len(messages) - 1, 0, -1):
        candidate = found.get(digests[length - 1])
        if candidate and (session_header is None or candidate == session_header):
            known, session = length, candidate
            break
    if session is not None and all(m["role"] != "assistant" for m in messages[known:]):
        return TurnPlan(session, digests, new=_conversing(messages[known:]))
    tail = _tail(messages)
    if session_header:  # its history is the session's, whatever the client sent before
        return TurnPlan(session_header, digests, new=messages[tail:])
    seed = _conversing(messages[:tail])
    return TurnPlan(f"oai-{uuid.uuid4().hex}", digests, seed=seed, new=messages[tail:])


def _tail(messages: list[dict[str, Any]]) -> int:
    """Where the request's own part starts: its last message (a user's) and the tool results
    right before it, or its trailing tool results."""
    start = len(messages) - 1 if messages[-1]["role"] == "user" else len(messages)
    while start > 0 and messages[start - 1]["role"] == "tool":
        start -= 1
    return start


def _conversing(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages that go into a session's history (the instructions go to the prompt)."""
    return [m for m in messages if m["role"] not in INSTRUCTION_ROLES]
