"""Request checks the fake LLM applies before answering, worded like real providers' errors."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class Rejection:
    """An HTTP error the fake answers instead of a completion."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class _Invalid(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection


def _bad(message: str, param: str | None = None, code: str | None = None) -> _Invalid:
    return _Invalid(Rejection(400, message, param=param, code=code))


def validate_request(
    body: Any, *, strict_content: bool = False, reject_reasoning_content: bool = True
) -> Rejection | None:
    """Return why a real provider would refuse this chat-completions body, or None."""
    from .parameters import check_parameters  # it builds Rejections of this module

    try:
        _check_top_level(body)
        messages = body["messages"]
        for i, message in enumerate(messages):
            _check_message(i, message, reject_reasoning_content)
        _check_tool_ordering(messages)
        _check_tools(body.get("tools"))
        parameters = check_parameters(body)
        if parameters is not None:
            return parameters
        if strict_content:
            _check_strict_content(messages)
    except _Invalid as exc:
        return exc.rejection
    return None


def _check_top_level(body: Any) -> None:
    if not isinstance(body, dict):
        raise _bad("Invalid type for request body: expected an object.", code="invalid_type")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _bad("you must provide a model parameter")
    if "messages" not in body:
        raise _bad(
            "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _bad(
            "Invalid type for 'messages': expected an array, but got something else instead.",
            "messages",
            "invalid_type",
        )
    if not messages:
        raise _bad(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "messages",
            "empty_array",
        )


def _check_message(i: int, message: Any, reject_reasoning_content: bool) -> None:
    where = f"messages[{i}]"
    if not isinstance(message, dict):
        raise _bad(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    role = message.get("role")
    if "role" not in message:
        raise _bad(
            f"Missing required parameter: '{where}.role'.",
            f"{where}.role",
            "missing_required_parameter",
        )
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        raise _bad(
            f"Invalid value: '{role}'. Supported values are: {supported}.",
            f"{where}.role",
            "invalid_value",
        )
    if reject_reasoning_content and "reasoning_content" in message:
        # DeepSeek's reasoner answers 400 when reasoning_content is sent back in the history.
        raise _bad(
            f"Invalid '{where}': the reasoning_content of a previous answer must not be sent "
            "back in the input messages; remove it from your messages.",
            f"{where}.reasoning_content",
        )
    if role == "assistant":
        _check_assistant(where, message)
    elif role in ("system", "developer", "user", "tool"):
        _check_content_present(where, message)


def _check_content_present(where: str, message: dict[str, Any]) -> None:
    content = message.get("content")
    if not isinstance(content, str | list):
        got = "null" if content is None else type(content).__name__
        raise _bad(
            f"Invalid value for '{where}.content': expected a string or an array of content "
            f"parts, got {got}.",
            f"{where}.content",
            "invalid_type",
        )


def _check_assistant(where: str, message: dict[str, Any]) -> None:
    if message.get("tool_calls") is None:  # absent or null (what model_dump() gives)
        if message.get("content") is None:
            raise _bad(
                f"Invalid value for '{where}.content': expected a string, got null.",
                f"{where}.content",
                "invalid_type",
            )
        return
    calls = message["tool_calls"]
    if not isinstance(calls, list) or not calls:
        raise _bad(
            f"Invalid '{where}.tool_calls': empty array. Expected an array with minimum length "
            "1, but got an empty array instead.",
            f"{where}.tool_calls",
            "empty_array",
        )
    for j, call in enumerate(calls):
        _check_tool_call(f"{where}.tool_calls[{j}]", call)


def _check_tool_call(where: str, call: Any) -> None:
    if not isinstance(call, dict):
        raise _bad(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    for key in ("id", "type", "function"):
        if key not in call:
            raise _bad(
                f"Missing required parameter: '{where}.{key}'.",
                f"{where}.{key}",
                "missing_required_parameter",
            )
    if call["type"] != "function":
        raise _bad(
            f"Invalid value: '{call['type']}'. Supported values are: 'function'.",
            f"{where}.type",
            "invalid_value",
        )
    function = call["function"]
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise _bad(
            f"Missing required parameter: '{where}.function.name'.",
            f"{where}.function.name",
            "missing_required_parameter",
        )
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        got = "null" if arguments is None else type(arguments).__name__
        raise _bad(
            f"Invalid type for '{where}.function.arguments': expected a string, "
            f"but got {got} instead.",
            f"{where}.function.arguments",
            "invalid_type",
        )


def _check_tool_ordering(messages: list[dict[str, Any]]) -> None:
    """OpenAI's rule: assistant(tool_calls), then exactly one tool message per id, then more."""
    awaiting: list[str] = []  # ids of the current group still without an answer
    group: set[str] = set()  # ids of the nearest preceding assistant message's tool_calls
    in_group = False
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if not in_group:
                raise _bad(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                )
            _check_answer(i, message, group, awaiting)
            continue
        if awaiting:
            raise _missing_answers(awaiting, i)
        in_group = role == "assistant" and bool(message.get("tool_calls"))
        group = {call["id"] for call in message["tool_calls"]} if in_group else set()
        awaiting = [call["id"] for call in message["tool_calls"]] if in_group else []
    if awaiting:
        raise _missing_answers(awaiting, len(messages))


def _check_answer(i: int, message: dict[str, Any], group: set[str], awaiting: list[str]) -> None:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str):
        raise _bad(
            f"Missing required parameter: 'messages[{i}].tool_call_id'.",
            f"messages[{i}].tool_call_id",
            "missing_required_parameter",
        )
    if call_id not in group:
        raise _bad(
            f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of "
            "previous message.",
            f"messages.[{i}].tool_call_id",
        )
    if call_id not in awaiting:
        raise _bad(
            f"Invalid parameter: 'tool_call_id' of '{call_id}' was already answered by an "
            "earlier 'tool' message; each tool call must have exactly one response.",
            f"messages.[{i}].tool_call_id",
        )
    awaiting.remove(call_id)


def _missing_answers(awaiting: list[str], i: int) -> _Invalid:
    return _bad(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(awaiting),
        f"messages.[{i}].role",
    )


# The tools arrays found valid (as JSON): a client sends the same one again and again, and its
# schema walk cost more CPU than the rest of a request (in benches, the harness's CPU counts).
_VALID_TOOLS: set[str] = set()


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    key = json.dumps(tools, sort_keys=True)
    if key in _VALID_TOOLS:
        return
    _check_each_tool(tools)
    if len(_VALID_TOOLS) > 1000:
        _VALID_TOOLS.clear()
    _VALID_TOOLS.add(key)


def _check_each_tool(tools: Any) -> None:
    if not isinstance(tools, list) or not tools:
        raise _bad(
            "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an "
            "empty array instead.",
            "tools",
            "empty_array",
        )
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            got = tool.get("type") if isinstance(tool, dict) else tool
            raise _bad(
                f"Invalid value: '{got}'. Supported values are: 'function'.",
                f"{where}.type",
                "invalid_value",
            )
        function = tool.get("function")
        if not isinstance(function, dict) or "name" not in function:
            raise _bad(
                f"Missing required parameter: '{where}.function.name'.",
                f"{where}.function.name",
                "missing_required_parameter",
            )
        if not isinstance(function["name"], str) or not _TOOL_NAME.match(function["name"]):
            raise _bad(
                f"Invalid '{where}.function.name': string does not match pattern. Expected a "
                "string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"{where}.function.name",
                "invalid_value",
            )
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise _bad(
                f"Invalid type for '{where}.function.parameters': expected an object.",
                f"{where}.function.parameters",
                "invalid_type",
            )
        if isinstance(function.get("parameters"), dict):
            _check_parameters(function["name"], where, function["parameters"])


# OpenAI's function-calling schema rules (non-strict mode), with its wording.
_ROOT_REFUSED = ("oneOf", "anyOf", "allOf", "enum", "const", "not")
_ONE_SCHEMA = ("items", "additionalProperties", "contains", "not", "if", "then", "else")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def _check_parameters(name: str, where: str, schema: dict[str, Any]) -> None:
    param = f"{where}.function.parameters"
    kind = schema.get("type", "object")
    if kind != "object":
        raise _bad(
            f"Invalid schema for function '{name}': schema must be a JSON Schema of "
            f"'type: \"object\"', got 'type: \"{kind}\"'.",
            param,
            "invalid_function_parameters",
        )
    if any(key in schema for key in _ROOT_REFUSED):
        raise _bad(
            f"Invalid schema for function '{name}': schema must have type 'object' and not have "
            "'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level.",
            param,
            "invalid_function_parameters",
        )
    context = _array_without_items(schema, ())
    if context is not None:
        raise _bad(
            f"Invalid schema for function '{name}': In context={context!r}, array schema "
            "missing items.",
            param,
            "invalid_function_parameters",
        )


def _array_without_items(node: Any, path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The path of the first array schema with no `items`, walking schema keywords only."""
    if not isinstance(node, dict):
        return None
    kinds = node.get("type")
    if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and "items" not in node:
        return path
    children: list[tuple[tuple[str, ...], Any]] = [((*path, k), node.get(k)) for k in _ONE_SCHEMA]
    for key in _SCHEMA_LISTS:
        subs = node.get(key)
        if isinstance(subs, list):
            children += [((*path, key, str(i)), sub) for i, sub in enumerate(subs)]
    for key in _SCHEMA_MAPS:
        subs = node.get(key)
        if isinstance(subs, dict):
            children += [((*path, key, name), sub) for name, sub in subs.items()]
    for child_path, child in children:
        found = _array_without_items(child, child_path)
        if found is not None:
            return found
    return None


def _check_strict_content(messages: list[dict[str, Any]]) -> None:
    """llama-cpp-python's chatml-function-calling handler fails on an assistant content of null."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("content") is None:
            raise _Invalid(
                Rejection(
                    500,
                    f'can only concatenate str (not "NoneType") to str (messages[{i}] is an '
                    "assistant message with content null; the chatml-function-calling "
                    "template needs a string)",
                    type="internal_server_error",
                    param=None,
                )
            )
