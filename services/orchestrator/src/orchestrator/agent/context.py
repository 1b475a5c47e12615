"""Context budget: estimate tokens, prune old tool results, pick what compaction replaces.

Tokens are estimated, not counted with tiktoken or another tokenizer: no tokenizer of an arbitrary
provider's model installs offline, and a budget needs only a safe estimate.
"""

from __future__ import annotations

import json
import re
from typing import Any

# No tokenizer of an arbitrary provider's model installs offline, so tokens are estimated:
# ~4 characters per token for Latin text, 1 per CJK character, +4 per message for framing.
# The estimate errs high for English and is close for Chinese, so budgets stay safe.
MESSAGE_OVERHEAD = 4
PRUNED_MARKER = "[older tool result pruned to save context; {chars} chars]"


# CJK and Hangul: about one token per character. A regex counts them in C, not per character
# in Python (the estimate runs over the whole history every turn).
WIDE = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")


# Estimates of texts seen, by the text: history is estimated whole at every turn, and a kept
# history holds the same string objects turn after turn (a str caches its hash, and equality
# starts with identity). Bounded by characters; emptied when full.
_estimates: dict[str, int] = {}
_estimated_chars = 0
ESTIMATES_MAX_CHARS = 8_000_000


def estimate_text(text: str) -> int:
    global _estimated_chars
    known = _estimates.get(text)
    if known is not None:
        return known
    wide = len(WIDE.findall(text))
    tokens = wide + (len(text) - wide + 3) // 4
    if _estimated_chars + len(text) > ESTIMATES_MAX_CHARS:
        _estimates.clear()
        _estimated_chars = 0
    _estimates[text] = tokens
    _estimated_chars += len(text)
    return tokens


# An image costs the same whatever its size here: providers bill a tile grid (~85-1,100 tokens
# for OpenAI's models at common sizes); this errs high.
IMAGE_TOKENS = 1_000


def estimate_content(content: Any) -> int:
    """Tokens of a message's content: text, or a list of text and image parts."""
    if not isinstance(content, list):
        return estimate_text(str(content or ""))
    total = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("image_ref", "image_url"):
            total += IMAGE_TOKENS
        else:
            total += estimate_text(str(part.get("text", "")))
    return total


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD + estimate_content(message.get("content"))
        calls = message.get("tool_calls")
        if calls:
            total += estimate_calls(calls)
    return total


# A call's JSON around its name and arguments ({"id": "call_...", "type": "function", ...}).
CALL_FRAMING_TOKENS = 24


def estimate_calls(calls: Any) -> int:
    """Tokens of an assistant message's tool calls: their names and arguments, and framing."""
    if not isinstance(calls, list):
        return estimate_text(json.dumps(calls, ensure_ascii=False))
    total = 0
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            total += estimate_text(json.dumps(call, ensure_ascii=False))
            continue
        name, arguments = function.get("name"), function.get("arguments")
        total += CALL_FRAMING_TOKENS + estimate_text(str(name or ""))
        total += estimate_text(arguments if isinstance(arguments, str) else json.dumps(arguments))
    return total


def turn_starts(messages: list[dict[str, Any]]) -> list[int]:
    """Indexes of user messages: the only places history may be cut (groups stay whole)."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


def last_turns(messages: list[dict[str, Any]], turns: int) -> list[dict[str, Any]]:
    """The last `turns` turns of messages (none for 0), cut where a turn starts."""
    starts = turn_starts(messages)
    if turns <= 0:
        return []
    return messages[starts[-turns] :] if len(starts) > turns else messages


def prune_tool_results(
    messages: list[dict[str, Any]], keep_turns: int, keep_chars: int = 300
) -> tuple[list[dict[str, Any]], int]:
    """Copies messages with tool results before the last keep_turns turns shortened."""
    starts = turn_starts(messages)
    boundary = starts[-keep_turns] if len(starts) >= keep_turns > 0 else 0
    pruned, count = [], 0
    for index, message in enumerate(messages):
        content = str(message.get("content") or "")
        if index < boundary and message.get("role") == "tool" and len(content) > keep_chars:
            marker = PRUNED_MARKER.format(chars=len(content))
            message = {**message, "content": content[:keep_chars] + "\n" + marker}
            count += 1
        pruned.append(message)
    return pruned, count


def compaction_split(messages: list[dict[str, Any]], target: int) -> int:
    """How many leading messages to summarise so the rest fits target (0 = nothing to cut).

    The cut is always at a user message, so a tool-call group is never split; the latest
    turn is always kept verbatim, even when it alone is over the target.
    """
    starts = turn_starts(messages)
    if len(starts) < 2:
        return 0
    for cut in starts[1:]:
        if estimate_tokens(messages[cut:]) <= target:
            return cut
    return starts[-1]
