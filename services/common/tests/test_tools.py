"""The shared tool contract: validation by jsonschema, and every failure a readable result."""

from __future__ import annotations

import json
from typing import Any

import pytest
from crayfish.common.v1 import tools_pb2
from crayfish_common.tool_service import list_tools_response, run_tool_response
from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, ToolSet, object_schema


class Greet(Tool):
    name = "greet"
    description = "Greets someone."
    parameters = object_schema(
        {
            "who": {"type": "string", "minLength": 2, "maxLength": 20, "pattern": "^[A-Z]"},
            "times": {"type": ["integer", "null"]},
            "style": {"oneOf": [{"const": "plain"}, {"const": "loud"}]},
        },
        required=["who"],
    )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        if args["who"] == "Nobody":
            raise ToolError("nobody is there")
        if args["who"] == "Lookup":
            raise LookupError("no such person")
        if args["who"] == "Bug":
            raise ZeroDivisionError("division by zero")
        text = f"hello {args['who']}" * (args.get("times") or 1)
        return ToolResult(True, text, {"session": call.session_id})


@pytest.fixture
def tools() -> ToolSet:
    return ToolSet([Greet()], expected=(LookupError,))


async def run(tools: ToolSet, arguments: Any) -> ToolResult:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return await tools.run("greet", raw, CallContext(session_id="s1"))


async def test_a_valid_call_runs_with_its_context(tools: ToolSet):
    result = await run(tools, {"who": "Ada", "times": None, "style": "loud"})
    assert (result.ok, result.output, result.data) == (True, "hello Ada", {"session": "s1"})
    assert result.duration_ms > 0


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"who": "A"}, "who: 'A' is too short"),
        ({"who": "Ada" * 10}, "is too long"),
        ({"who": "ada"}, "does not match '^[A-Z]'"),
        ({"who": "Ada", "times": "2.5"}, "times: '2.5' is not of type 'integer', 'null'"),
        ({"who": "Ada", "style": "soft"}, "style: 'soft' is not valid under any of the given"),
        ({"who": "Ada", "colour": "red"}, "Additional properties are not allowed"),
        ({}, "arguments: 'who' is a required property"),
        ("[1, 2]", "arguments must be a JSON object, got list"),
        ('{"who": ', "arguments are not valid JSON"),
        ('{"who": "Ada", "times": ' + "9" * 5000 + "}", "arguments are not usable JSON"),
    ],
)
async def test_bad_arguments_are_refused_with_the_reason(tools, arguments, reason):
    result = await run(tools, arguments)
    assert not result.ok and reason in result.error, result.error
    assert result.output == f"Error: {result.error}"


async def test_optional_arguments_sent_as_null_count_as_not_given(tools: ToolSet):
    result = await run(tools, {"who": "Ada", "style": None, "times": None})
    assert result.ok and result.output == "hello Ada"
    stringly = await run(tools, {"who": "Ada", "times": " 2 "})
    assert stringly.ok and stringly.output == "hello Adahello Ada", "a number sent as text"
    wordy = await run(tools, {"who": "Ada", "times": "twice"})
    assert not wordy.ok and "times: 'twice' is not of type 'integer', 'null'" in wordy.error
    missing = await run(tools, {"who": None})
    assert not missing.ok and "who: None is not of type 'string'" in missing.error


async def test_a_huge_bad_value_is_not_echoed_whole(tools: ToolSet):
    result = await run(tools, {"who": "A" + "x" * 100_000})
    assert not result.ok and "is too long" in result.error and len(result.error) < 400


async def test_failures_become_results_and_bugs_say_internal(tools: ToolSet):
    refused = await run(tools, {"who": "Nobody"})
    assert (refused.ok, refused.error) == (False, "nobody is there")
    expected = await run(tools, {"who": "Lookup"})
    assert (expected.ok, expected.error) == (False, "no such person")
    bug = await run(tools, {"who": "Bug"})
    assert not bug.ok and bug.error.startswith("internal error in greet: ZeroDivisionError")
    unknown = await tools.run("wave", "{}")
    assert not unknown.ok and "unknown tool 'wave' (known: greet)" in unknown.error


async def test_the_grpc_messages_carry_the_contract(tools: ToolSet):
    listed = list_tools_response(tools)
    assert [t.name for t in listed.tools] == ["greet"]
    assert json.loads(listed.tools[0].parameters_json) == Greet.parameters
    reply = run_tool_response(await run(tools, {"who": "Ada"}))
    assert isinstance(reply, tools_pb2.RunToolResponse)
    assert (
        reply.ok
        and reply.output == "hello Ada"
        and json.loads(reply.result_json) == {"session": "s1"}
    )
