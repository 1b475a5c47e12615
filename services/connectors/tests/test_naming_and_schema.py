"""Model-facing tool names and OpenAI-ready schemas of MCP tools (checked with the fake LLM's
copy of OpenAI's schema rules)."""

from __future__ import annotations

import re

from connectors.naming import MAX_NAME, assign_names, base_name
from connectors.schema import normalise_schema

from tests.fakes.validation import validate_request

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_names_are_prefixed_and_sanitised() -> None:
    assert base_name("github", "create_issue") == "mcp_github_create_issue"
    assert base_name("my.server", "files/read é") == "mcp_my_server_files_read__"


def test_long_names_are_cut_to_64_with_a_stable_suffix() -> None:
    name = base_name("a-very-long-server-name-for-testing", "and_an_even_longer_tool_name_" * 3)
    assert len(name) == MAX_NAME and VALID.match(name)
    assert name == base_name(
        "a-very-long-server-name-for-testing", "and_an_even_longer_tool_name_" * 3
    )


def test_clashing_names_are_made_unique_the_same_way_in_any_order() -> None:
    pairs = [("a.b", "x"), ("a_b", "x"), ("a b", "x"), ("long" * 20, "t1"), ("long" * 20, "t2")]
    forward = assign_names(pairs)
    backward = assign_names(list(reversed(pairs)))
    assert forward == backward
    assert len(set(forward.values())) == len(pairs)
    assert all(VALID.match(name) for name in forward.values())
    assert "mcp_a_b_x" in forward.values()


def test_refs_are_inlined_and_defs_dropped() -> None:
    schema = {
        "type": "object",
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {
            "where": {"$ref": "#/$defs/Place", "description": "Target place"},
            "old": {"$ref": "#/definitions/Legacy"},
        },
        "required": ["where", "ghost"],
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "definitions": {"Legacy": {"type": "integer"}},
    }
    result = normalise_schema(schema)
    assert result["properties"]["where"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "description": "Target place",
    }
    assert result["properties"]["old"] == {"type": "integer"}
    assert result["required"] == ["where"]  # a required name with no property is dropped
    assert "$defs" not in result and "definitions" not in result and "$schema" not in result


def test_recursive_refs_end_in_an_open_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node", "description": "below"}},
            }
        },
    }
    tree = normalise_schema(schema)["properties"]["tree"]
    assert tree["properties"]["child"] == {"description": "below"}
    assert "$ref" not in str(tree)


def test_missing_or_odd_roots_become_objects() -> None:
    assert normalise_schema({}) == {"type": "object", "properties": {}}
    assert normalise_schema({"properties": {"a": {"type": "string"}}})["type"] == "object"
    assert normalise_schema(None)["type"] == "object"
    assert normalise_schema({"type": "array"})["properties"] == {}
    # Not valid JSON Schema at all: an open object (the server validates its own arguments).
    assert normalise_schema({"type": "object", "properties": {"a": {"type": 5}}}) == {
        "type": "object",
        "properties": {},
        "additionalProperties": True,
    }


def offered(schema: dict) -> list[str]:
    """What the fake LLM (worded like OpenAI) says about a tool with these parameters."""
    rejection = validate_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "t", "parameters": schema}}],
        }
    )
    return [] if rejection is None else [rejection.message]


def test_arrays_without_items_get_open_items_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "description": "labels"},
            "grid": {"type": "array", "items": {"type": "array"}},
            "either": {"anyOf": [{"type": "string"}, {"type": ["array", "null"]}]},
            "nested": {"type": "object", "properties": {"ids": {"type": "array"}}},
            "items": {"type": "string"},  # a property called items is not the keyword
        },
    }
    assert "array schema missing items" in offered(schema)[0]
    result = normalise_schema(schema)
    properties = result["properties"]
    assert properties["tags"] == {"type": "array", "description": "labels", "items": {}}
    assert properties["grid"] == {"type": "array", "items": {"type": "array", "items": {}}}
    assert properties["either"]["anyOf"][1] == {"type": ["array", "null"], "items": {}}
    assert properties["nested"]["properties"]["ids"] == {"type": "array", "items": {}}
    assert properties["items"] == {"type": "string"}
    assert offered(result) == []


def test_a_root_union_becomes_one_object_with_every_branchs_properties() -> None:
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"id": {"type": "string"}, "force": {"type": "boolean"}},
                "required": ["id", "force"],
            },
            {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                "required": ["id"],
            },
        ]
    }
    assert "at the top level" in offered(schema)[0]
    result = normalise_schema(schema)
    assert result["type"] == "object" and "anyOf" not in result
    assert result["properties"] == {
        "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "force": {"type": "boolean"},
        "name": {"type": "string"},
    }
    assert result["required"] == ["id"]  # the only name every branch needs
    assert offered(result) == []


def test_root_all_of_enum_not_and_one_of_nested_are_opened_up() -> None:
    schema = {
        "type": "object",
        "properties": {"mode": {"type": "string"}},
        "required": ["mode"],
        "not": {"required": ["legacy"]},
        "enum": [{"mode": "a"}],
        "allOf": [
            {"properties": {"path": {"type": "string"}}, "required": ["path"]},
            {"oneOf": [{"properties": {"lines": {"type": "array"}}}, {"type": "string"}]},
        ],
    }
    assert "at the top level" in offered(schema)[0]
    result = normalise_schema(schema)
    assert not {"allOf", "oneOf", "anyOf", "enum", "not"} & set(result)
    assert set(result["properties"]) == {"mode", "path", "lines"}
    assert result["properties"]["lines"] == {"type": "array", "items": {}}
    assert result["required"] == ["mode", "path"]
    assert offered(result) == []
    # A root of only a union of non-objects: an object all the same (the server validates).
    assert normalise_schema({"oneOf": [{"type": "string"}, {"type": "integer"}]}) == {
        "type": "object",
        "properties": {},
    }
