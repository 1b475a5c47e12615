"""A small JSON-schema checker for tool arguments (the subset our tool schemas use)."""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def validate(value: Any, schema: dict[str, Any], where: str = "arguments") -> list[str]:
    """Readable problems with value against schema; empty when it conforms."""
    expected = schema.get("type")
    if expected is not None:
        kinds = _TYPES[expected]
        is_bool = isinstance(value, bool)
        if not isinstance(value, kinds) or (is_bool and expected != "boolean"):
            return [f"{where} must be {expected}, got {type(value).__name__}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where} must be one of {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where} must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where} must be <= {schema['maximum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        problems.append(f"{where} must not be empty")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{where}[{i}]")
    if isinstance(value, dict):
        problems += _validate_object(value, schema, where)
    return problems


def _validate_object(value: dict[str, Any], schema: dict[str, Any], where: str) -> list[str]:
    problems = [f"missing required '{k}'" for k in schema.get("required", []) if k not in value]
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        name = key if where == "arguments" else f"{where}.{key}"
        if key in props:
            problems += validate(item, props[key], name)
        elif extra is False:
            problems.append(f"unknown argument '{name}' (allowed: {', '.join(props)})")
        elif isinstance(extra, dict):
            problems += validate(item, extra, name)
    return problems
