"""MCP input schemas made fit for OpenAI function calling.

An object at the root with `properties`, local `$ref`s inlined (`#/$defs/...`,
`#/definitions/...`) so no provider has to resolve them, `required` naming only properties that
exist, and keys some providers reject removed. OpenAI refuses an `array` without `items` anywhere
and `anyOf`/`oneOf`/`allOf`/`enum`/`const`/`not` at the root: arrays get open `items`, and a root
union is flattened into one object (every branch's properties; required only what all require).
A schema that is still not valid JSON Schema is replaced by an open object (the MCP server
validates its own arguments).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

MAX_DEPTH = 12
DROPPED_KEYS = ("$schema", "$id", "$comment", "$defs", "definitions")
OPEN_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
# Not allowed at the root by OpenAI ("schema must have type 'object' and not have ...").
ROOT_UNIONS = ("anyOf", "oneOf", "allOf")
ROOT_REFUSED = (*ROOT_UNIONS, "enum", "const", "not")
# Keywords whose value is one subschema, a list of them, or a map of name → subschema.
ONE_SCHEMA = (
    "items",
    "additionalProperties",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")


def normalise_schema(schema: Any) -> dict[str, Any]:
    """A copy of `schema` that OpenAI-compatible APIs accept as function parameters."""
    if not isinstance(schema, dict):
        return copy.deepcopy(OPEN_OBJECT)
    definitions = {**_dict(schema.get("definitions")), **_dict(schema.get("$defs"))}
    result = _inline(schema, definitions, depth=0, seen=())
    if not isinstance(result, dict):
        return copy.deepcopy(OPEN_OBJECT)
    result = _flatten_root(result, depth=0)
    if result.get("type", "object") != "object":
        return copy.deepcopy(OPEN_OBJECT)
    _give_arrays_items(result, depth=0)
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


def _flatten_root(node: dict[str, Any], depth: int) -> dict[str, Any]:
    """The root without anyOf/oneOf/allOf/enum/const/not: one object taking every branch's
    properties; required: what the root and every allOf branch need, and the names all
    anyOf/oneOf branches need."""
    if not any(key in node for key in ROOT_REFUSED):
        return node
    flat = {k: v for k, v in node.items() if k not in ROOT_REFUSED}
    properties: dict[str, Any] = dict(_dict(flat.get("properties")))
    required = _strings(flat.get("required"))
    for key in ROOT_UNIONS:
        given = _list(node.get(key))
        objects = [b for b in given if isinstance(b, dict) and b.get("type", "object") == "object"]
        branches = [_flatten_root(b, depth + 1) for b in objects] if depth < MAX_DEPTH else []
        for branch in branches:
            for name, sub in _dict(branch.get("properties")).items():
                properties[name] = _either(properties[name], sub) if name in properties else sub
        needs = [_strings(b.get("required")) for b in branches]
        if key == "allOf":
            required += [name for names in needs for name in names]
        elif needs and len(needs) == len(given):  # a non-object branch needs none of them
            required += [name for name in needs[0] if all(name in n for n in needs[1:])]
    flat.setdefault("type", "object")
    flat["properties"] = properties
    if required:
        flat["required"] = list(dict.fromkeys(required))
    return flat


def _either(first: Any, second: Any) -> Any:
    """A property two branches define: the one schema, or either of the two."""
    return first if first == second else {"anyOf": [first, second]}


def _give_arrays_items(node: Any, depth: int) -> None:
    """An open `items` for every array schema that has none (OpenAI: "array schema missing
    items"), at any depth: properties, items of items, union branches."""
    if not isinstance(node, dict) or depth > MAX_DEPTH * 4:
        return
    kinds = node.get("type")
    if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and "items" not in node:
        node["items"] = {}
    for key in ONE_SCHEMA:
        _give_arrays_items(node.get(key), depth + 1)
    for key in SCHEMA_LISTS:
        subs = node.get(key)
        for sub in subs if isinstance(subs, list) else []:
            _give_arrays_items(sub, depth + 1)
    for key in SCHEMA_MAPS:
        for sub in _dict(node.get(key)).values():
            _give_arrays_items(sub, depth + 1)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
