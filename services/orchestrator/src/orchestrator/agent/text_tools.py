"""Tool calling as plain text, for servers without (working) function calling.

In this mode no `tools` are sent; the prompt teaches a `<tool_call>{json}</tool_call>` format,
the loop recovers those calls as usual, and the history goes out with calls written as text
and results as user messages, so no `tool_calls` or `tool` roles reach the server.
"""

from __future__ import annotations

import json
from typing import Any

FORMAT_NOTE = (
    "To call a tool, reply with only one or more blocks of the form\n"
    '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
    "and nothing else. The results come back in a message that starts with [tool results]. "
    "When you have what you need, answer in plain words without any tool_call block."
)


def tooling_lines(tools: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """One line per tool with its argument schema, for the prompt's Tooling section."""
    lines = []
    for name, description, parameters in tools:
        schema = json.dumps(parameters.get("properties", {}), ensure_ascii=False)
        required = parameters.get("required", [])
        lines.append(f"- {name}: {description} Arguments: {schema}; required: {required}")
    return lines


def to_text_protocol(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History with tool calls as text and each group's results as one user message."""
    wire: list[dict[str, Any]] = []
    results: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            content = str(message.get("content") or "")
            results.append(
                f"<tool_result id={message.get('tool_call_id')}>\n{content}\n</tool_result>"
            )
            continue
        if results:
            wire.append({"role": "user", "content": "[tool results]\n" + "\n".join(results)})
            results = []
        if message.get("role") == "assistant" and message.get("tool_calls"):
            blocks = [
                "<tool_call>"
                + json.dumps(
                    {"name": c["function"]["name"], "arguments": _args(c["function"]["arguments"])},
                    ensure_ascii=False,
                )
                + "</tool_call>"
                for c in message["tool_calls"]
            ]
            text = "\n".join(filter(None, [str(message.get("content") or ""), *blocks]))
            wire.append({"role": "assistant", "content": text})
            continue
        wire.append(message)
    if results:
        wire.append({"role": "user", "content": "[tool results]\n" + "\n".join(results)})
    return wire


def _args(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw
