"""The notify tool: a `notification` event on the global stream, and webhook deliveries in each
preset's shape, signed when a secret is set, retried on 5xx but not on 4xx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from orchestrator.config import WebhookTarget
from orchestrator.core import OrchestratorCore
from orchestrator.webhooks import Notification, webhook_request

from tests.fakes import WebhookReceiver


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


def test_each_preset_shapes_its_body() -> None:
    note = Notification("disk 91% full", "backup host", "high", "ops")
    url, body, headers = webhook_request(
        WebhookTarget(url="https://ntfy.example/alerts", preset="ntfy"), note
    )
    assert url == "https://ntfy.example/" and "X-Crayfish-Signature" not in headers
    assert json.loads(body) == {
        "topic": "alerts",
        "message": "disk 91% full",
        "priority": 4,
        "title": "backup host",
    }
    slack = webhook_request(
        WebhookTarget(url="https://hooks.slack.test/T/B/x", preset="slack"), note
    )
    assert json.loads(slack[1]) == {"text": "*backup host*\ndisk 91% full"}
    discord = webhook_request(
        WebhookTarget(url="https://discord.test/api/webhooks/1/x", preset="discord"), note
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

    events = [e for e in await core.tasks.events.all_events(0) if e.type == "notification"]
    assert events[0].data["notification"]["text"] == "the nightly backup failed"
    assert events[0].data["session_id"] == "ops"

    first, second = await asyncio.to_thread(receiver.wait_for, "/generic", 2)
    assert first.body == second.body and second.signed_with("s3cret")
    assert not second.signed_with("wrong")
    assert second.json() == {
        "text": "the nightly backup failed",
        "title": "backup",
        "priority": "urgent",
        "session_id": "ops",
    }
    (slack,) = await asyncio.to_thread(receiver.wait_for, "/slack", 1)
    assert slack.json() == {"text": "*backup*\nthe nightly backup failed"}
    assert "x-crayfish-signature" not in slack.headers
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
