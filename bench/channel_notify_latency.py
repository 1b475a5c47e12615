"""Time from `notify` (the tool call's notification) to its text shown in a chat: the channels
service as it was (drained every CHANNELS_DRAIN_EVERY = 30 s) against the long poll.

The real stack (two orchestrator replicas, the service talking to the first, the turns posted to
the second), the fake LLM, Telegram's fake Bot API. Prints median and max per variant.

    .venv/bin/python bench/channel_notify_latency.py [OLD_CHANNELS_SRC]

OLD_CHANNELS_SRC: a services/channels/src without the long poll (e.g. from `git archive <commit>
services/channels/src`); without it only this tree's service is measured.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.chat_channels.service import ChannelService
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM
from tests.fakes.telegram_api import FakeTelegram
from tests.stacks import running_stack

SAMPLES = 6
OWNER, CHANNELS = "bench-owner-token", "bench-channels-token"


def notified_at(api: httpx.Client, task_id: str) -> float:
    """The notification's time (epoch seconds), from the turn's events."""
    with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "notification":
                    return float(event["notification"]["ts"])
                if event["type"] in ("task.completed", "task.failed", "task.cancelled"):
                    break
    raise SystemExit(f"task {task_id} sent no notification")


def sample(api: httpx.Client, llm: FakeLLM, fake: FakeTelegram, person: str, n: int) -> float:
    text = f"note number {n}"
    llm.reply_tool_calls(("notify", {"text": text, "target": f"telegram:{person}"}))
    llm.reply_text("sent")
    task_id = api.post("/api/chat", json={"message": "notify"}).json()["task_id"]
    sent = notified_at(api, task_id)
    shown = fake.wait_for(
        lambda: [m for m in fake.shown if m.chat_id == int(person) and text in m.text], 120
    )[0]
    return shown.at + (time.time() - time.monotonic()) - sent


def measure(stack_urls: list[str], llm: FakeLLM, pythonpath: str | None) -> list[float]:
    with FakeTelegram() as fake:
        platform = TelegramPlatform(fake)
        person = str(random.randint(10_000, 99_999))
        env = {
            **platform.env(),
            "CHANNELS_ORCHESTRATOR_URL": stack_urls[0],
            "CHANNELS_API_TOKEN": CHANNELS,
            "CHANNELS_TELEGRAM_ALLOW_FROM": person,
            **({"PYTHONPATH": pythonpath} if pythonpath else {}),
        }
        service = ChannelService(env).start()
        try:
            service.ready(120)
            platform.say("/help", person)
            platform.wait_texts(person, 1, 60)
            headers = {"Authorization": f"Bearer {OWNER}"}
            with httpx.Client(base_url=stack_urls[1], headers=headers, timeout=120) as api:
                times = []
                for n in range(SAMPLES):
                    time.sleep(random.uniform(0, 30))  # any phase of a 30 s drain
                    times.append(sample(api, llm, fake, person, n))
                return times
        finally:
            service.stop()


def main() -> None:
    old = sys.argv[1] if len(sys.argv) > 1 else None
    env = {"CRAYFISH_API_TOKEN": OWNER, "CRAYFISH_CHANNELS_TOKEN": CHANNELS}
    with FakeLLM() as llm, running_stack(llm.base_url, env=env, orchestrators=2) as stack:
        variants = [("drained every 30 s", old), ("long poll", None)] if old else []
        for name, path in variants or [("long poll", None)]:
            times = measure(stack.urls, llm, path)
            median, worst = statistics.median(times), max(times)
            shown = ", ".join(f"{t:.2f}" for t in times)
            print(f"{name}: median {median:.2f} s, max {worst:.2f} s  ({shown})")


if __name__ == "__main__":
    main()
