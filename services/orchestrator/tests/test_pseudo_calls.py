"""Tool calls written as text, in the shapes small local models really produce, are recovered."""

from __future__ import annotations

import pytest
from orchestrator.agent.pseudo_calls import CallSniffer, find_pseudo_calls, strip_call_syntax

KNOWN = {"exec", "read_file", "memory_search"}

WRITTEN_CALLS = [
    # Qwen2.5 / Hermes template
    '<tool_call>\n{"name": "exec", "arguments": {"command": "ls -la"}}\n</tool_call>',
    # SmolLM2 writes a list inside the tag
    '<tool_call>[{"name": "exec", "arguments": {"command": "ls -la"}}]</tool_call>',
    # unterminated tag (generation stopped at the stop token)
    '<tool_call>\n{"name": "exec", "arguments": {"command": "ls -la"}}',
    # Llama 3.1 python tag and `parameters`
    '<|python_tag|>{"name": "exec", "parameters": {"command": "ls -la"}}<|eom_id|>',
    # Llama 3.x function tag
    '<function=exec>{"command": "ls -la"}</function>',
    # Mistral
    '[TOOL_CALLS] [{"name": "exec", "arguments": {"command": "ls -la"}}]',
    # fenced JSON with prose around it
    'Let me check.\n```json\n{"name": "exec", "arguments": {"command": "ls -la"}}\n```',
    # bare JSON with other key names
    '{"tool": "exec", "parameters": {"command": "ls -la"}}',
    # OpenAI shape pasted as text, arguments as a JSON string
    '{"type": "function", "function": '
    '{"name": "exec", "arguments": "{\\"command\\": \\"ls -la\\"}"}}',
    # Python literal instead of JSON
    "{'name': 'exec', 'arguments': {'command': 'ls -la'}}",
    # function-call syntax
    'exec(command="ls -la")',
]


@pytest.mark.parametrize("text", WRITTEN_CALLS)
def test_written_call_is_recovered(text: str) -> None:
    calls, looks = find_pseudo_calls(text, KNOWN)
    assert looks
    assert [(c.name, c.arguments) for c in calls] == [("exec", {"command": "ls -la"})]


def test_several_calls_in_one_reply() -> None:
    text = (
        '<tool_call>{"name": "exec", "arguments": {"command": "date"}}</tool_call>\n'
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.md"}}</tool_call>'
    )
    calls, _ = find_pseudo_calls(text, KNOWN)
    assert [c.name for c in calls] == ["exec", "read_file"]


def test_unknown_tool_is_not_run_but_flagged() -> None:
    calls, looks = find_pseudo_calls(
        '<tool_call>{"name": "browse_web", "arguments": {"url": "x"}}</tool_call>', KNOWN
    )
    assert calls == [] and looks


@pytest.mark.parametrize(
    "text",
    [
        "The command `ls -la` lists files, including hidden ones.",
        'Here is a config example:\n```json\n{"port": 8080, "debug": true}\n```',
        "I would call exec(command) if you want, but it is not needed.",
        "{}",
    ],
)
def test_prose_and_plain_json_are_not_calls(text: str) -> None:
    calls, looks = find_pseudo_calls(text, KNOWN)
    assert calls == [] and not looks


def test_strip_call_syntax_keeps_the_prose() -> None:
    text = 'Checking now.\n<tool_call>{"name": "exec", "arguments": {}}</tool_call>'
    assert strip_call_syntax(text) == "Checking now."


def _stream(sniffer: CallSniffer, pieces: list[str]) -> str:
    return "".join(sniffer.feed(p) for p in pieces)


def test_sniffer_streams_prose_and_holds_back_call_syntax() -> None:
    sniffer = CallSniffer()
    shown = _stream(sniffer, ["Sure, ", "checking.", "\n<tool", '_call>{"name": "exec"', "}"])
    assert shown == "Sure, checking.\n"
    assert "<tool_call>" not in shown


def test_sniffer_holds_a_reply_that_starts_as_json() -> None:
    assert _stream(CallSniffer(), ['{"name": ', '"exec", "arguments": {}}']) == ""


def test_sniffer_holds_silent_tokens() -> None:
    assert _stream(CallSniffer(("NO_REPLY",)), ["NO_", "REP", "LY"]) == ""
    assert _stream(CallSniffer(("NO_REPLY",)), ["No", " problem!"]) == "No problem!"
