"""MCP input schemas made fit for OpenAI function calling.

An object at the root with `properties`, local `$ref`s inlined (`#/$defs/...`,
`#/definitions/...`) so no provider has to resolve them, `required` naming only properties that
exist, and keys some providers reject removed. A schema that is still not valid JSON Schema is
replaced by an open object (the MCP server validates its own arguments).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

MAX_DEPTH = 12
DROPPED_KEYS = ("$schema", "$id", "$comment", "$defs", "definitions")
OPEN_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def normalise_schema(schema: Any) -> dict[str, Any]:
    """A copy of `schema` that OpenAI-compatible APIs accept as function parameters."""
    if not isinstance(schema, dict):
        return copy.deepcopy(OPEN_OBJECT)
    definitions = {**_dict(schema.get("definitions")), **_dict(schema.get("$defs"))}
    result = _inline(schema, definitions, depth=0, seen=())
    if not isinstance(result, dict) or result.get("type", "object") != "object":
        return copy.deepcopy(OPEN_OBJECT)
    result["type"] = "object"
    properties = result.get("properties")
    if not isinstance(properties, dict):
        properties = result["properties"] = {}
    required = result.get("required")
    if isinstance(required, list):
        result["required"] = [r for r in required if isinstance(r, str) and r in properties]
    else:
        result.pop("required", None)
    try:
        jsonschema.Draft202012Validator.check_schema(result)
    except jsonschema.SchemaError:
        return copy.deepcopy(OPEN_OBJECT)
    return result


def _inline(node: Any, definitions: dict[str, Any], depth: int, seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, definitions, depth + 1, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _definition(ref, definitions)
        if target is None or ref in seen or depth > MAX_DEPTH:
            # Unresolvable or recursive: an open schema that keeps the description.
            return {k: v for k, v in node.items() if k in ("description", "title")}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        merged = {**target, **siblings}
        return _inline(merged, definitions, depth + 1, (*seen, ref))
    return {
        key: _inline(value, definitions, depth + 1, seen)
        for key, value in node.items()
        if key not in DROPPED_KEYS
    }


def _definition(ref: str, definitions: dict[str, Any]) -> dict[str, Any] | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            found = definitions.get(ref[len(prefix) :])
            return found if isinstance(found, dict) else None
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
