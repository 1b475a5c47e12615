"""Chat channels' side of the orchestrator: pairing codes, the channels token's routes, a
platform message queued once, the replies a channel owes, and the outside exec policy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app
from orchestrator.store.turn_rows import Turn

from tests.fakes import FakeLLM

from .conftest import make_settings

OWNER = {"Authorization": "Bearer owner-token"}
CHANNEL = {"Authorization": "Bearer channel-token"}


@pytest.fixture
def client(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path,
        fake_llm.base_url,
        1,
        CRAYFISH_API_TOKEN="owner-token",
        CRAYFISH_CHANNELS_TOKEN="channel-token",
    )
    with TestClient(create_app(settings)) as client:
        yield client


def pair(client: TestClient, sender: str, channel: str = "telegram") -> dict[str, object]:
    reply = client.post(
        f"/api/channels/{channel}/pairings",
        json={"sender_id": sender, "sender_name": f"name {sender}"},
        headers=CHANNEL,
    )
    assert reply.status_code == 200, reply.text
    body: dict[str, object] = reply.json()
    return body


def test_a_sender_pairs_once_the_owner_approves_its_code(client: TestClient) -> None:
    first = pair(client, "42")
    assert first["status"] == "pending" and isinstance(first["code"], str)
    assert pair(client, "42")["code"] == first["code"]  # asking again: the same code
    listed = client.get("/api/pairings", headers=OWNER).json()["pairings"]
    assert [p["code"] for p in listed] == [first["code"]]
    # The channel itself cannot approve (its token is refused there), nor list codes.
    path = f"/api/pairings/{first['code']}/approve"
    assert client.post(path, headers=CHANNEL).status_code == 403
    assert client.get("/api/pairings", headers=CHANNEL).status_code == 403
    wrong_channel = client.post(path, params={"channel": "slack"}, headers=OWNER)
    assert wrong_channel.status_code == 404
    approved = client.post(path, params={"channel": "telegram"}, headers=OWNER)
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    assert pair(client, "42") == {
        "channel": "telegram",
        "sender_id": "42",
        "sender_name": "name 42",
        "status": "approved",
        "code": None,
        "expires_at": None,
    }
    assert client.get("/api/pairings", headers=OWNER).json()["pairings"] == []
    assert client.post(path, headers=OWNER).status_code == 404  # used up


def test_at_most_three_codes_wait_per_channel(client: TestClient) -> None:
    for sender in ("1", "2", "3"):
        assert pair(client, sender)["status"] == "pending"
    fourth = client.post(
        "/api/channels/telegram/pairings", json={"sender_id": "4"}, headers=CHANNEL
    )
    assert fourth.status_code == 429
    assert fourth.json()["error"]["code"] == "pairings_full"
    assert pair(client, "4", channel="slack")["status"] == "pending"  # another channel's own


def test_the_channels_token_reaches_only_the_routes_a_channel_needs(client: TestClient) -> None:
    assert client.get("/api/sessions", headers=CHANNEL).status_code == 403
    assert client.put("/api/approvals/policy", json={}, headers=CHANNEL).status_code == 403
    assert client.post("/api/chat", json={"message": "hi"}, headers=CHANNEL).status_code == 403
    assert client.get("/api/sessions/operator-session", headers=CHANNEL).status_code == 403
    assert client.get("/api/sessions/telegram.5", headers=CHANNEL).status_code == 404
    assert client.get("/api/channels/telegram/replies", headers=CHANNEL).status_code == 200


def test_a_platform_message_sent_twice_is_one_turn_and_one_reply_owed(
    client: TestClient, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_text("hello from the assistant")
    body = {"chat_id": "77", "message_id": "1001", "session_id": "telegram.77", "text": "hi"}
    first = client.post("/api/channels/telegram/turns", json=body, headers=CHANNEL)
    again = client.post("/api/channels/telegram/turns", json=body, headers=CHANNEL)
    assert first.status_code == again.status_code == 202
    task_id = first.json()["task_id"]
    assert again.json()["task_id"] == task_id
    done = client.get(f"/api/tasks/{task_id}", headers=CHANNEL)
    while done.json()["status"] in ("queued", "running"):
        time.sleep(0.05)
        done = client.get(f"/api/tasks/{task_id}", headers=CHANNEL)
    assert done.json()["kind"] == "channel"
    owed = client.get(
        "/api/channels/telegram/replies", params={"status": "pending"}, headers=CHANNEL
    ).json()["replies"]
    assert [(r["task_id"], r["chat_id"], r["result"]) for r in owed] == [
        (task_id, "77", "hello from the assistant")
    ]
    settle = {"status": "failed", "error": "Forbidden: bot was blocked by the user"}
    path = f"/api/channels/telegram/replies/{task_id}"
    assert client.post(path, json=settle, headers=CHANNEL).status_code == 204
    assert client.post(path, json=settle, headers=CHANNEL).status_code == 404  # settled
    failed = client.get(
        "/api/channels/telegram/replies", params={"task_id": task_id}, headers=OWNER
    ).json()["replies"]
    assert failed[0]["status"] == "failed" and "blocked" in failed[0]["error"]
    assert len(fake_llm.requests) == 1  # the repeat ran nothing


async def test_outside_turns_get_the_outside_policy_with_the_workspace_allowlist(
    core_factory: object,
) -> None:
    core = await core_factory(CRAYFISH_APPROVAL_POLICY='{"allowlist": ["/usr/bin/ls"]}')  # type: ignore[operator]
    inside = await core.approvals.policy()
    outside = await core.approvals.policy(outside=True)
    assert (inside.security, outside.security) == ("full", "allowlist")
    assert outside.ask == "on-miss" and outside.allowlist == ("/usr/bin/ls",)


def test_a_look_up_without_a_new_code_makes_none(client: TestClient) -> None:
    path = "/api/channels/telegram/pairings"
    look = client.post(path, json={"sender_id": "77", "new_code": False}, headers=CHANNEL)
    assert look.status_code == 404
    assert client.get("/api/pairings", headers=OWNER).json()["pairings"] == []
    code = pair(client, "77")["code"]
    again = client.post(path, json={"sender_id": "77", "new_code": False}, headers=CHANNEL)
    assert again.status_code == 200 and again.json()["code"] == code


def test_a_channels_turn_may_use_only_its_chats_sessions(client: TestClient) -> None:
    body = {"chat_id": "77", "message_id": "1", "session_id": "main", "text": "hi"}
    refused = client.post("/api/channels/telegram/turns", json=body, headers=CHANNEL)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_session_id"
    body["session_id"] = "slack.77"  # another channel's chat
    assert (
        client.post("/api/channels/telegram/turns", json=body, headers=CHANNEL).status_code == 400
    )


async def test_every_turn_in_a_chats_sandbox_is_judged_as_outside_input(
    core_factory: object,
) -> None:
    """A subagent a chat's turn spawned (the chat's sandbox), a process wake-up or a report in
    the chat's session: the outside policy, not the workspace's, so a stranger's turn cannot
    step around it. The owner's own turns keep the workspace's."""
    core = await core_factory(CRAYFISH_APPROVAL_POLICY_OUTSIDE='{"security": "deny"}')  # type: ignore[operator]
    events: list[tuple[str, object]] = []

    async def emit(kind: str, data: object) -> None:
        events.append((kind, data))

    command = '{"command": "ls"}'
    cases = [
        (Turn("t1", "subagent-abc", "look"), "telegram.77"),  # a chat's child
        (Turn("t2", "telegram.77", "done", kind="process"), ""),  # a wake-up in the chat
        (Turn("t3", "telegram.77", "report", kind="subagent_report"), ""),
    ]
    for turn, sandbox in cases:
        gate = core.assistant.gate(turn, emit, sandbox)
        refusal = await gate("exec", command, "call-1")
        assert refusal is not None and "security=deny" in refusal.output, turn
    owners = [(Turn("t4", "subagent-abc", "look"), "main"), (Turn("t5", "main", "hi"), "")]
    for turn, sandbox in owners:
        assert await core.assistant.gate(turn, emit, sandbox)("exec", command, "c") is None


def test_bad_files_notifications_and_targets_get_clear_errors(client: TestClient) -> None:
    turn = {"chat_id": "78", "message_id": "1", "session_id": "telegram.78", "text": "hi"}
    for data in ("not base64!", "ünïcode", "QQ"):
        body = {**turn, "files": [{"name": "a.txt", "data": data}]}
        answer = client.post("/api/channels/telegram/turns", json=body, headers=CHANNEL)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "invalid_file"
    five = [{"name": f"{n}.txt", "data": "QQ=="} for n in range(5)]
    answer = client.post(
        "/api/channels/telegram/turns", json={**turn, "files": five}, headers=CHANNEL
    )
    assert answer.status_code == 400, answer.text
    settle = {"status": "delivered"}
    missing = client.post("/api/channels/telegram/messages/99999", json=settle, headers=CHANNEL)
    assert missing.status_code == 404, missing.text
    assert client.get("/api/channels/telegram/messages", headers=CHANNEL).json() == {"messages": []}
    schedule = {"message": "x", "every": 3600.0, "deliver_to": "nowhere"}
    refused = client.post("/api/schedules", json=schedule, headers=OWNER)
    assert refused.status_code == 422, refused.text
    assert "channel:chat_id" in refused.json()["error"]["message"]
