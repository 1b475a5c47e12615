"""Scripted replies and the chat.completion / chat.completion.chunk objects built from them."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class ToolCall:
    """One tool call the fake model makes; arguments are sent verbatim."""

    name: str
    arguments: str
    id: str = ""


@dataclass
class ErrorReply:
    """An HTTP error the fake answers with, shaped like OpenAI's."""

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # e.g. retry-after

    def body(self) -> dict[str, Any]:
        return {
            "error": {"message": self.message, "type": self.type, "param": None, "code": self.code}
        }


@dataclass
class Reply:
    """What the fake model answers to one request: text, tool calls, or an error."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: ErrorReply | None = None
    delay: float = 0.0
    reasoning: str | None = None
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    # Stream each tool call's id and name again in every chunk, as llama.cpp's server does.
    repeat_names: bool = False
    # Streams only: how the answer breaks after its deltas (instead of the finish chunk, the
    # usage chunk and [DONE]). "reset": a TCP reset; "close": the connection closes mid-body;
    # "end": the body ends cleanly, with no finish_reason and no [DONE]; "stall": nothing more
    # is sent and the connection stays open (until the fake stops).
    cut: Literal["", "reset", "close", "end", "stall"] = ""
    # Streams only: a raw SSE data line (e.g. "{not json") sent after the deltas.
    garbage: str | None = None
    # Streams only: after the deltas, this content delta again every 50 ms, never finishing.
    endless: str | None = None

    @property
    def resolved_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


def count_tokens(text: str) -> int:
    """A rough count (4 characters per token), good enough for budgets in tests."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def usage_for(body: dict[str, Any], reply: Reply, cached: int | None = None) -> dict[str, Any]:
    prompt = count_tokens(json.dumps(body.get("messages", []), ensure_ascii=False))
    produced = (reply.text or "") + (reply.reasoning or "")
    produced += "".join(call.name + call.arguments for call in reply.tool_calls)
    completion = count_tokens(produced)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    usage.update(reply.usage or {})
    # As OpenAI sends them: the details are always there, 0 when nothing was cached or reasoned.
    # A fake that simulates a prompt cache reports what it "read".
    read = min(cached or 0, usage["prompt_tokens"])
    details: dict[str, Any] = {
        "prompt_tokens_details": {"cached_tokens": read, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": count_tokens(reply.reasoning or ""),
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    return {**details, **usage}


def completion(body: dict[str, Any], reply: Reply, cached: int | None = None) -> dict[str, Any]:
    """A non-streamed chat.completion object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.resolved_finish_reason,
            }
        ],
        "usage": usage_for(body, reply, cached),
    }


def chunks(body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed answer, in the order OpenAI sends them."""
    deltas, ending = stream_parts(body, reply)
    return deltas + ending


def stream_parts(
    body: dict[str, Any], reply: Reply, cached: int | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the delta chunks, the ending: the finish chunk and, if asked for, the usage chunk)."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": _completion_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out = dict(base)
        out["choices"] = [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        ]
        if include_usage:
            out["usage"] = None
        return out

    deltas = [chunk(delta) for delta in _deltas(reply)]
    ending = [chunk({}, reply.resolved_finish_reason)]
    if include_usage:
        ending.append(dict(base, choices=[], usage=usage_for(body, reply, cached)))
    return deltas, ending


def content_chunk(like: dict[str, Any], text: str) -> dict[str, Any]:
    """A chunk of the same stream as `like` carrying one content delta (endless streams)."""
    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
    return dict(like, choices=[choice])


def _deltas(reply: Reply):
    first: dict[str, Any] = {"role": "assistant", "content": "" if reply.text else None}
    yield first
    for piece in split_text(reply.reasoning or ""):
        yield {"content": None, "reasoning_content": piece}
    for piece in split_text(reply.text or ""):
        yield {"content": piece}
    for index, call in enumerate(reply.tool_calls):
        yield {
            "tool_calls": [
                {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
        }
        for piece in split_arguments(call.arguments):
            function: dict[str, Any] = {"arguments": piece}
            if reply.repeat_names:  # llama.cpp's server repeats id and name in every chunk
                function["name"] = call.name
                yield {"tool_calls": [{"index": index, "id": call.id, "function": function}]}
            else:
                yield {"tool_calls": [{"index": index, "function": function}]}


def split_text(text: str, max_pieces: int = 32) -> list[str]:
    """Split text at word boundaries into at most max_pieces deltas (whitespace preserved)."""
    words = re.findall(r"\s*\S+\s*|\s+", text)
    size = max(1, math.ceil(len(words) / max_pieces))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def split_arguments(arguments: str, max_pieces: int = 16) -> list[str]:
    """Split tool-call arguments into pieces of at least 8 characters, as OpenAI streams them."""
    size = max(8, math.ceil(len(arguments) / max_pieces))
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]
