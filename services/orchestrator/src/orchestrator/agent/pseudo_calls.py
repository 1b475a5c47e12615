"""Recover tool calls that a model wrote as text instead of using function calling."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.agent.think import partial_tag_suffix

_TAGGED = [
    re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S),
    re.compile(r"<\|tool_call\|>\s*(.*?)\s*(?:<\|/tool_call\|>|$)", re.S),
    re.compile(r"\[TOOL_CALLS?\]\s*(.*?)\s*(?:\[/TOOL_CALLS?\]|$)", re.S),
    re.compile(r"<function_calls?>\s*(.*?)\s*(?:</function_calls?>|$)", re.S),
    re.compile(r"<\|python_tag\|>\s*(.*?)\s*(?:<\|eom_id\|>|<\|eot_id\|>|$)", re.S),
]
_FENCED = re.compile(r"```(?:json|tool_call|tool|javascript|python)?\s*\n?(.*?)```", re.S)
_FUNCTION_TAG = re.compile(r"<function=([\w.-]+)>\s*(.*?)\s*(?:</function>|$)", re.S)
_CALL_SYNTAX = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*\((.*)\)\s*;?\s*$", re.S)
_NAME_KEYS = ("name", "tool", "tool_name", "function", "action")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "action_input", "params")


@dataclass(frozen=True)
class PseudoCall:
    name: str
    arguments: dict[str, Any]


def _loads(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:  # Small models often write Python literals (single quotes, True/None).
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _as_call(obj: Any) -> PseudoCall | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # {"type": "function", "function": {...}}
        return _as_call(obj["function"])
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if not name:
        return None
    args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    if isinstance(args, str):
        args = _loads(args) if args.strip() else {}
    if not isinstance(args, dict):
        return None
    return PseudoCall(name=name, arguments=args)


def _calls_from_payload(payload: str) -> list[PseudoCall]:
    obj = _loads(payload)
    items = obj if isinstance(obj, list) else [obj]
    return [c for c in (_as_call(i) for i in items) if c is not None]


def _call_syntax(text: str, known: set[str]) -> list[PseudoCall]:
    """`exec(command="ls")` or `exec({"command": "ls"})`, only for known tool names."""
    match = _CALL_SYNTAX.match(text)
    if not match or match.group(1) not in known:
        return []
    inner = match.group(2).strip()
    if inner.startswith("{"):
        args = _loads(inner)
        return [PseudoCall(match.group(1), args)] if isinstance(args, dict) else []
    try:
        node = ast.parse(f"f({inner})", mode="eval").body
    except SyntaxError:
        return []
    if not isinstance(node, ast.Call) or node.args:
        return []
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except ValueError:
        return []
    return [PseudoCall(match.group(1), kwargs)]


def find_pseudo_calls(text: str, known_tools: set[str]) -> tuple[list[PseudoCall], bool]:
    """Calls written as text that name known tools, and whether any call-like syntax was seen."""
    candidates: list[PseudoCall] = []
    for pattern in _TAGGED:
        for payload in pattern.findall(text):
            candidates += _calls_from_payload(payload)
    for name, payload in _FUNCTION_TAG.findall(text):
        args = _loads(payload) if payload.strip() else {}
        if isinstance(args, dict):
            candidates.append(PseudoCall(name, args))
    if not candidates:
        for payload in _FENCED.findall(text):
            candidates += _calls_from_payload(payload) or _call_syntax(payload, known_tools)
    stripped = text.strip()
    if not candidates and stripped[:1] in "{[":
        candidates += _calls_from_payload(stripped)
    if not candidates:
        candidates += _call_syntax(stripped, known_tools)
    looks_like_call = bool(candidates) or any(p.search(text) for p in _TAGGED)
    return [c for c in candidates if c.name in known_tools], looks_like_call


def strip_call_syntax(text: str) -> str:
    """The text with tagged/fenced call syntax removed (for the prose around a recovered call)."""
    for pattern in (*_TAGGED, _FUNCTION_TAG):
        text = pattern.sub("", text)
    text = _FENCED.sub(lambda m: "" if _calls_from_payload(m.group(1)) else m.group(0), text)
    return text.strip()


_TRIGGERS = ("<tool_call", "<|tool_call", "[TOOL_CALL", "<function", "<|python_tag", "```")
_TRIGGER_STARTS = re.compile("[" + re.escape("".join({t[0] for t in _TRIGGERS})) + "]")


class CallSniffer:
    """Streams text through, but holds back anything from possible call syntax to the end.

    What was held back is released by `flush` when the finished reply turned out to be prose;
    when it was a call, the caller drops it, so raw call syntax never reaches the user.
    """

    def __init__(self, silent_tokens: tuple[str, ...] = ()) -> None:
        self.silent_tokens = silent_tokens
        self.seen = ""  # what was shown
        self.spoken = False  # something other than white space was shown
        self.held = ""
        self.holding = False

    def feed(self, delta: str) -> str:
        if self.holding:
            self.held += delta
            return ""
        text = self.held + delta
        self.held = ""
        start = text.strip()
        if not self.spoken and (
            not start or any(t.startswith(start) or start.startswith(t) for t in self.silent_tokens)
        ):
            self.held = text  # maybe a silent reply like NO_REPLY: show nothing yet
            return ""
        if not self.spoken and text.lstrip()[:1] in "{[":
            self.holding, self.held = True, text
            return ""
        if not _TRIGGER_STARTS.search(text):  # most prose: no trigger, whole or begun
            return self._emit(text)
        at = min((i for i in (text.find(t) for t in _TRIGGERS) if i >= 0), default=-1)
        if at >= 0:
            self.holding, self.held = True, text[at:]
            return self._emit(text[:at])
        keep = max(partial_tag_suffix(text, t) for t in _TRIGGERS)
        self.held = text[len(text) - keep :] if keep else ""
        return self._emit(text[: len(text) - keep])

    def _emit(self, text: str) -> str:
        self.seen += text
        self.spoken = self.spoken or (bool(text) and not text.isspace())
        return text

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held
