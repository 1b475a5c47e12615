"""The fake LLM's checks of a request's sampling and format parameters, with OpenAI's wording:
a wrong type, a value out of range, a response_format OpenAI does not take, a tool_choice
without tools or naming a function not offered."""

from __future__ import annotations

import json
import re
from typing import Any

from .validation import Rejection

_SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# name: (kind, minimum, maximum)
_NUMBERS = {
    "temperature": ("decimal", 0, 2),
    "top_p": ("decimal", 0, 1),
    "max_tokens": ("integer", 1, None),
    "max_completion_tokens": ("integer", 1, None),
    "seed": ("integer", None, None),
}


def _bad(message: str, param: str, code: str | None = None) -> Rejection:
    return Rejection(400, message, param=param, code=code)


def json_type(value: Any) -> str:
    """A value's type as OpenAI's errors name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "decimal"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def check_parameters(body: dict[str, Any]) -> Rejection | None:
    """Why OpenAI would refuse the request's parameters, or None."""
    for name, (kind, low, high) in _NUMBERS.items():
        if name in body and body[name] is not None:
            found = _check_number(name, body[name], kind, low, high)
            if found:
                return found
    return _check_stop(body.get("stop")) or _check_response_format(body) or _check_tool_choice(body)


def _check_number(name: str, value: Any, kind: str, low: Any, high: Any) -> Rejection | None:
    got = json_type(value)
    allowed = ("integer", "decimal") if kind == "decimal" else ("integer",)
    if got not in allowed:
        return _bad(
            f"Invalid type for '{name}': expected {'a' if kind == 'decimal' else 'an'} {kind}, "
            f"but got {'an' if got[0] in 'aeiou' else 'a'} {got} instead.",
            name,
            "invalid_type",
        )
    if low is not None and value < low:
        return _bad(
            f"Invalid '{name}': {kind} below minimum value. Expected a value >= {low}, but got "
            f"{value} instead.",
            name,
            f"{kind}_below_min_value",
        )
    if high is not None and value > high:
        return _bad(
            f"Invalid '{name}': {kind} above maximum value. Expected a value <= {high}, but got "
            f"{value} instead.",
            name,
            f"{kind}_above_max_value",
        )
    return None


def _check_stop(stop: Any) -> Rejection | None:
    if stop is None or isinstance(stop, str):
        return None
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        return _bad(
            "Invalid type for 'stop': expected one of a string or array of strings, but got "
            f"{'an' if json_type(stop)[0] in 'aeiou' else 'a'} {json_type(stop)} instead.",
            "stop",
            "invalid_type",
        )
    if len(stop) > 4:
        return _bad(
            "Invalid 'stop': array too long. Expected an array with maximum length 4, but got "
            f"an array with length {len(stop)} instead.",
            "stop",
            "array_above_max_length",
        )
    return None


def _check_response_format(body: dict[str, Any]) -> Rejection | None:
    form = body.get("response_format")
    if form is None:
        return None
    if not isinstance(form, dict):
        return _bad(
            f"Invalid type for 'response_format': expected an object, but got "
            f"{'an' if json_type(form)[0] in 'aeiou' else 'a'} {json_type(form)} instead.",
            "response_format",
            "invalid_type",
        )
    kind = form.get("type")
    if kind not in ("text", "json_object", "json_schema"):
        return _bad(
            f"Invalid value: '{kind}'. Supported values are: 'json_object', 'json_schema', and "
            "'text'.",
            "response_format.type",
            "invalid_value",
        )
    if kind == "json_object" and "json" not in json.dumps(body.get("messages")).lower():
        return _bad(
            "'messages' must contain the word 'json' in some form, to use 'response_format' of "
            "type 'json_object'.",
            "messages",
        )
    if kind == "json_schema":
        return _check_json_schema(form.get("json_schema"))
    return None


def _check_json_schema(spec: Any) -> Rejection | None:
    if not isinstance(spec, dict):
        return _bad(
            "Missing required parameter: 'response_format.json_schema'.",
            "response_format.json_schema",
            "missing_required_parameter",
        )
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        return _bad(
            "Invalid 'response_format.json_schema.name': string does not match pattern. "
            "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            "response_format.json_schema.name",
            "invalid_value",
        )
    if "schema" in spec and not isinstance(spec["schema"], dict):
        return _bad(
            "Invalid type for 'response_format.json_schema.schema': expected an object.",
            "response_format.json_schema.schema",
            "invalid_type",
        )
    return None


def _check_tool_choice(body: dict[str, Any]) -> Rejection | None:
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if not body.get("tools"):
        return _bad(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified.",
            "tool_choice",
        )
    if isinstance(choice, str):
        if choice in ("none", "auto", "required"):
            return None
        return _bad(
            f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'.",
            "tool_choice",
            "invalid_value",
        )
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    offered = {t.get("function", {}).get("name") for t in body["tools"] if isinstance(t, dict)}
    if name not in offered:
        return _bad(
            f"Invalid value for 'tool_choice': function '{name}' is not among the 'tools'.",
            "tool_choice",
            "invalid_value",
        )
    return None
