"""What a client of the OpenAI-compatible API asks of a turn beyond its message (its
instructions, sampling parameters, tools and tool results), and what the turn answers it beyond
text: the calls of its tools, or the provider's refusal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator.agent.llm import ToolCall

# Request fields passed to the provider as the client sent them; nothing else is.
FORWARDED_PARAMS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "response_format",
)
NO_RESULT = "(no result: the client sent none for this call)"


@dataclass
class ClientRequest:
    """A /v1 request's asks that the turn carries to the LLM, on whichever replica runs it."""

    instructions: str = ""  # its system and developer messages, in order
    params: dict[str, Any] = field(default_factory=dict)  # FORWARDED_PARAMS it set
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI function tools
    tool_choice: str | dict[str, Any] = ""
    # Its `tool` messages answering the calls its last answer handed over: {id: content}
    tool_results: dict[str, str] = field(default_factory=dict)

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(str(t.get("function", {}).get("name", "")) for t in self.tools)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientRequest:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def answers(self, pending: list[str]) -> list[dict[str, Any]]:
        """A `tool` message for each pending call id: the client's result, or a note that it
        sent none (the history stays valid: every call answered)."""
        return [
            {"role": "tool", "tool_call_id": i, "content": self.tool_results.get(i, NO_RESULT)}
            for i in pending
        ]


@dataclass
class ClientAnswer:
    """What a /v1 turn answered beyond its text: the calls it hands to the client's tools, or
    the provider's refusal (its HTTP status and error object)."""

    tool_calls: list[ToolCall] = field(default_factory=list)
    refusal: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientAnswer:
        calls = [ToolCall(**c) for c in data.get("tool_calls") or []]
        return cls(calls, data.get("refusal"))


def pending_calls(history: list[dict[str, Any]]) -> list[str]:
    """Ids of the calls of the history's last assistant message that no `tool` message
    answers yet (the client's tools: Crayfish answers its own at once)."""
    answered: set[str] = set()
    for message in reversed(history):
        if message.get("role") == "tool":
            answered.add(str(message.get("tool_call_id")))
            continue
        if message.get("role") != "assistant":
            return []
        calls = message.get("tool_calls") or []
        return [c["id"] for c in calls if c.get("id") not in answered]
    return []


def close_unanswered(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with a "no result" answer after each call no `tool` message answers (a
    client's call, when a message came from elsewhere, e.g. the web page, before its result):
    a provider refuses a history with an unanswered call. The same input gives the same bytes,
    so a provider's prompt cache still holds."""
    closed: list[dict[str, Any]] = []
    open_ids: list[str] = []
    for message in history:
        if message.get("role") == "tool":
            if message.get("tool_call_id") in open_ids:
                open_ids.remove(message["tool_call_id"])
        else:
            closed += ClientRequest().answers(open_ids)
            calls = message.get("tool_calls") if message.get("role") == "assistant" else None
            open_ids = [str(c.get("id")) for c in calls or [] if isinstance(c, dict)]
        closed.append(message)
    return closed + ClientRequest().answers(open_ids)
