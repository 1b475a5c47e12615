"""What of a /v1 conversation its digest covers, the order rules a request is held to, and the
history kept valid around a call a client left open."""

from __future__ import annotations

from typing import Any

import pytest
from orchestrator.agent.client_request import NO_RESULT, close_unanswered, pending_calls
from orchestrator.api.conversation import prefix_digests
from orchestrator.api.errors import ApiError
from orchestrator.api.openai_request import check_order


def call(call_id: str, arguments: str = '{"city":"Rome"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "w", "arguments": arguments}}


def test_a_digest_ignores_what_clients_rewrite_and_sees_what_they_say():
    sent = [
        {"role": "user", "content": "Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        {"role": "assistant", "content": "Sunny."},
    ]
    echoed = [
        {"role": "user", "content": [{"type": "text", "text": "Rome?"}], "name": "me"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", '{"city": "Rome"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        {"role": "assistant", "content": "Sunny.\n", "refusal": None},
    ]
    assert prefix_digests(sent) == prefix_digests(echoed)
    edited = [*sent[:3], {"role": "assistant", "content": "Cloudy."}]
    assert prefix_digests(edited)[:3] == prefix_digests(sent)[:3]
    assert prefix_digests(edited)[3] != prefix_digests(sent)[3]
    other_call = [sent[0], {"role": "assistant", "tool_calls": [call("c2")]}]
    assert prefix_digests(other_call)[1] != prefix_digests(sent)[1]


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([{"role": "tool", "tool_call_id": "c1", "content": "x"}], "answers no unanswered call"),
        (
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [call("c1"), call("c2")]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "user", "content": "q"},
            ],
            "['c2'] have no 'tool' message",
        ),
        (
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [call("c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
            "answers no unanswered call",
        ),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "last message"),
    ],
)
def test_requests_are_held_to_openais_order_rules(messages: list[dict[str, Any]], says: str):
    with pytest.raises(ApiError) as caught:
        check_order(messages)
    assert caught.value.status == 400 and says in caught.value.message


def test_a_call_left_open_is_closed_where_it_is_and_at_the_end():
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call("own"), call("client")]},
        {"role": "tool", "tool_call_id": "own", "content": "done"},
        {"role": "user", "content": "from the page"},
        {"role": "assistant", "content": "", "tool_calls": [call("late")]},
    ]
    assert pending_calls(history) == ["late"]
    assert pending_calls(history[:3]) == ["client"]
    closed = close_unanswered(history)
    assert [(m["role"], m.get("tool_call_id")) for m in closed] == [
        ("user", None),
        ("assistant", None),
        ("tool", "own"),
        ("tool", "client"),
        ("user", None),
        ("assistant", None),
        ("tool", "late"),
    ]
    assert closed[3]["content"] == NO_RESULT
    assert close_unanswered(closed) == closed
