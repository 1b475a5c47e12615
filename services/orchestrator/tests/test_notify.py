"""The notify tool: a `notification` event on the global stream, and webhook deliveries in each
preset's shape, signed when a secret is set, retried on 5xx but not on 4xx."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from orchestrator.config import WebhookTarget
from orchestrator.core import OrchestratorCore
from orchestrator.notify.webhooks import Notification, sign, webhook_request

from tests.fakes import FakeLLM, WebhookReceiver
from tests.fakes.webhooks import webhook_problem


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


def test_each_preset_shapes_its_body() -> None:
    note = Notification("disk 91% full", "backup host", "high", "ops")
    url, body, headers = webhook_request(
        WebhookTarget(url="https://ntfy.example/alerts", preset="ntfy"), note, "msg_1", 1
    )
    assert url == "https://ntfy.example/" and "webhook-signature" not in headers
    assert json.loads(body) == {
        "topic": "alerts",
        "message": "disk 91% full",
        "priority": 4,
        "title": "backup host",
    }
    slack = webhook_request(
        WebhookTarget(url="https://hooks.slack.test/T/B/x", preset="slack"), note, "msg_1", 1
    )
    assert json.loads(slack[1]) == {"text": "*backup host*\ndisk 91% full"}
    discord = webhook_request(
        WebhookTarget(url="https://discord.test/api/webhooks/1/x", preset="discord"),
        note,
        "msg_1",
        1,
    )
    assert json.loads(discord[1]) == {"content": "**backup host**\ndisk 91% full"}


def test_a_webhook_url_and_secret_stay_out_of_reprs() -> None:
    target = WebhookTarget(url="https://hooks.slack.test/T/B/tok3n", secret="hush", preset="slack")
    assert "tok3n" not in repr(target) and "hush" not in repr(target)


async def test_notify_publishes_and_delivers_signed_retrying_5xx_not_4xx(
    core_factory, receiver: WebhookReceiver
):
    hooks = [
        {"url": receiver.url("/generic"), "secret": "s3cret"},
        {"url": receiver.url("/slack"), "preset": "slack"},
        {"url": receiver.url("/refuses"), "preset": "discord"},
    ]
    receiver.fail("/generic", 503)  # tried again
    receiver.fail("/refuses", 404)  # not tried again
    core: OrchestratorCore = await core_factory(
        CRAYFISH_NOTIFY_WEBHOOKS=json.dumps(hooks), CRAYFISH_NOTIFY_BACKOFF=0.1
    )
    registry = core.assistant.registry
    await registry.refresh(force=True)
    args = '{"text": "the nightly backup failed", "title": "backup", "priority": "urgent"}'
    result = await registry.run("notify", args, "ops", "call-1")
    assert result.ok and "3 webhook(s)" in result.output

    events = [e for e in await core.turns.events.all_events(0) if e.type == "notification"]
    assert events[0].data["notification"]["text"] == "the nightly backup failed"
    assert events[0].data["session_id"] == "ops"

    first, second = await asyncio.to_thread(receiver.wait_for, "/generic", 2)
    assert first.body == second.body and second.signed_with("s3cret")
    assert first.headers["webhook-id"] == second.headers["webhook-id"]  # a retry, not a new one
    assert not second.signed_with("wrong")
    assert second.json() == {
        "text": "the nightly backup failed",
        "title": "backup",
        "priority": "urgent",
        "session_id": "ops",
    }
    (slack,) = await asyncio.to_thread(receiver.wait_for, "/slack", 1)
    assert slack.json() == {"text": "*backup*\nthe nightly backup failed"}
    assert "webhook-signature" not in slack.headers
    await asyncio.to_thread(receiver.wait_for, "/refuses", 1)
    await _settle(core)
    assert len(receiver.to("/refuses")) == 1 and len(receiver.to("/generic")) == 2


async def _settle(core: OrchestratorCore) -> None:
    """Until no delivery job is queued or running (a retry would be one)."""
    for _ in range(100):
        async with core.db.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) AS n FROM procrastinate_jobs WHERE queue_name = 'notify'"
                    " AND status IN ('todo', 'doing')"
                )
            ).fetchone()
        if row and row["n"] == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("delivery jobs never settled")


def test_the_signature_is_standard_webhooks() -> None:
    # The example of the Standard Webhooks specification (its libraries' test vector).
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == expected


async def test_a_captured_delivery_cannot_be_replayed(core_factory, receiver: WebhookReceiver):
    hooks = [{"url": receiver.url("/signed"), "secret": "s3cret"}]
    core: OrchestratorCore = await core_factory(
        CRAYFISH_NOTIFY_WEBHOOKS=json.dumps(hooks), CRAYFISH_NOTIFY_COALESCE=0
    )
    registry = core.assistant.registry
    await registry.refresh(force=True)
    for count, text in enumerate(("disk full", "disk still full"), 1):
        assert (await registry.run("notify", json.dumps({"text": text}), "ops", "c")).ok
        await asyncio.to_thread(receiver.wait_for, "/signed", count)
    first, second = receiver.to("/signed")
    assert first.signed_with("s3cret") and second.signed_with("s3cret")
    assert first.headers["webhook-id"] != second.headers["webhook-id"]
    sent_at = int(first.headers["webhook-timestamp"])
    assert abs(sent_at - time.time()) < 60
    # Sent again as captured, ten minutes later: outside the receiver's tolerance.
    assert webhook_problem("s3cret", first.headers, first.body, now=sent_at + 600) is not None
    # With a fresh timestamp, another id or another body, the signature no longer holds.
    for changed, body in [
        ({"webhook-timestamp": str(int(time.time()))}, first.body),
        ({"webhook-id": second.headers["webhook-id"]}, first.body),
        ({}, second.body),
    ]:
        if changed.get("webhook-timestamp") == first.headers["webhook-timestamp"]:
            continue  # the same second: nothing was changed
        headers = {**first.headers, **changed}
        assert webhook_problem("s3cret", headers, body) == "bad signature", changed


def flood(count: int) -> list[tuple[str, dict[str, object]]]:
    return [("notify", {"text": f"alert {n}", "priority": "urgent"}) for n in range(count)]


async def test_a_notify_flood_is_coalesced_then_refused(
    core_factory, fake_llm: FakeLLM, receiver: WebhookReceiver
):
    hooks = [{"url": receiver.url("/flood"), "secret": "s3cret"}]
    core: OrchestratorCore = await core_factory(
        CRAYFISH_NOTIFY_WEBHOOKS=json.dumps(hooks),
        CRAYFISH_NOTIFY_PER_TURN=5,
        CRAYFISH_NOTIFY_PER_HOUR=8,
        CRAYFISH_NOTIFY_COALESCE=1.0,
    )
    fake_llm.reply_forever_text("done")
    fake_llm.reply_tool_calls(*flood(200))  # one reply, 200 urgent notifications
    turn = await core.submit("ops", "watch the disks")
    assert (await core.turns.wait(turn.id, 60)).status == "completed"
    results = await tool_results(core, "ops")
    assert len(results) == 200
    sent = [r for r in results if r.startswith("Notification sent")]
    refused = [r for r in results if "CRAYFISH_NOTIFY_PER_TURN" in r]
    assert len(sent) == 5 and len(refused) == 195
    assert "this turn already sent 5 notifications" in refused[0]

    deliveries = await asyncio.to_thread(receiver.wait_for, "/flood", 1)
    lines = await asyncio.to_thread(_alerts_delivered, receiver, 5)
    assert sorted(lines) == sorted(f"alert {n}" for n in range(200) if f"alert {n}" in lines)
    deliveries = receiver.to("/flood")
    assert 1 <= len(deliveries) <= 2 and all(d.signed_with("s3cret") for d in deliveries)
    assert all(d.json()["priority"] == "urgent" for d in deliveries)

    # The hour's bound counts every turn: 3 more pass, then the model is told why not.
    fake_llm.reply_tool_calls(*flood(5))
    second = await core.submit("ops", "again")
    assert (await core.turns.wait(second.id, 60)).status == "completed"
    later = (await tool_results(core, "ops"))[-5:]
    assert sum(r.startswith("Notification sent") for r in later) == 3
    assert sum("CRAYFISH_NOTIFY_PER_HOUR" in r for r in later) == 2
    feed = [e for e in await core.turns.events.all_events(0) if e.type == "notification"]
    assert len(feed) == 8
    await asyncio.to_thread(_alerts_delivered, receiver, 8)


async def tool_results(core: OrchestratorCore, session_id: str) -> list[str]:
    return [m["content"] for m in await core.store.load(session_id) if m["role"] == "tool"]


def _alerts_delivered(receiver: WebhookReceiver, count: int) -> list[str]:
    """The alert texts delivered to /flood (one delivery may carry several), once `count`.
    Each delivery job may wait a polling interval of the job queue: a loaded machine is slow."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        texts = []
        for delivery in receiver.to("/flood"):
            body = delivery.json()
            lines = body["text"].split("\n") if body["title"].endswith("notifications") else []
            texts += [line.removeprefix("- ") for line in lines] or [body["text"]]
        if len(texts) >= count:
            assert len(texts) == count, texts  # none twice
            return texts
        time.sleep(0.05)
    raise AssertionError(f"{count} alerts were not delivered")


async def test_a_webhook_gets_every_note_from_its_first_one_on(core_factory):
    """Its cursor starts with the first note numbered for it, in that note's transaction: notes
    numbered at once by several turns reach it all, and none from before it was configured."""
    core: OrchestratorCore = await core_factory()
    store = core.webhooks.store

    async def add(text: str, webhooks: list[str]) -> int:
        kept = await store.add({"id": text, "text": text}, f"turn-{text}", 5, 100, webhooks)
        assert isinstance(kept, int)
        return kept

    before = await add("before", [])
    together = await asyncio.gather(*(add(f"n{i}", ["old"]) for i in range(12)))
    await add("later", ["old", "new"])
    old = await store.pending("old", 50)
    assert [seq for seq, _ in old] == [*sorted(together), max(together) + 1]
    assert before not in [seq for seq, _ in old]
    assert [note["text"] for _, note in await store.pending("new", 50)] == ["later"]
